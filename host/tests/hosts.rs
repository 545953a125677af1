//! Other machines (issue 34), the stream: `lab hosts add|list|remove`, a real `lab
//! runner` dialling a real `lab serve` over its WebSocket, `GET /hosts`, and everything
//! that must not get through (a wrong credential, another version, a revoked host,
//! what is not the protocol) while lab serve keeps serving.

mod common;

use common::{git, wait_for, Lab, World, LAB};
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest, Message};

fn hosts_cmd(home: &Path, args: &[&str]) -> Output {
    Command::new(LAB).arg("hosts").arg("--home").arg(home).args(args).output().unwrap()
}

fn add_host(home: &Path, name: &str) -> String {
    let out = hosts_cmd(home, &["add", name]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A runner child with its own home under the world's dir; stderr kept for the test.
fn runner(w: &World, url: &str, name: &str, credential: &str, extra: &[&str]) -> Child {
    let home = w.dir.path().join(format!("runner-{name}"));
    Command::new(LAB)
        .args(["runner", "--connect", url, "--name", name, "--home"])
        .arg(&home)
        .args(extra)
        .env("LAB_RUNNER_CREDENTIAL", credential)
        .env("LAB_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A runner whose stderr goes to a file (read while it runs): the child and the file.
fn runner_logged(w: &World, url: &str, name: &str, credential: &str) -> (Child, std::path::PathBuf) {
    let home = w.dir.path().join(format!("runner-{name}"));
    let log = w.dir.path().join(format!("runner-{name}-{}.stderr", std::process::id() ^ rand_tag()));
    let child = Command::new(LAB)
        .args(["runner", "--connect", url, "--name", name, "--home"])
        .arg(&home)
        .env("LAB_RUNNER_CREDENTIAL", credential)
        .env("LAB_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    (child, log)
}

fn rand_tag() -> u32 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos()
}

/// Wait until `log` says `text` (at most 30 s): what it says.
fn log_says(log: &Path, text: &str) -> String {
    wait_for(Duration::from_secs(30), &format!("the runner to say {text:?}"), || {
        std::fs::read_to_string(log).ok().filter(|t| t.contains(text))
    })
}

/// Wait for `child` to exit by itself (at most `limit`): its status and stderr.
fn exits(mut child: Child, limit: Duration) -> (i32, String) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            return (status.code().unwrap_or(-1), err);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the runner did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn host(lab: &Lab, name: &str) -> Option<Value> {
    let (s, list) = lab.get("/hosts");
    assert_eq!(s, 200, "{list}");
    list.as_array().unwrap().iter().find(|h| h["name"] == name).cloned()
}

fn wait_state(lab: &Lab, name: &str, state: &str) -> Value {
    wait_for(Duration::from_secs(20), &format!("host {name} {state}"), || {
        host(lab, name).filter(|h| h["state"] == state)
    })
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// A runner and its tmux server, gone whatever the test's end (a failed assertion too).
struct Down(Child, std::path::PathBuf);

/// A world with host `far` (its credential), fake-claude playing `script` (its log), and
/// `runs` (one line) in lab.toml's `[runs]`.
fn far_world(script: Value, runs: &str) -> (World, String, std::path::PathBuf) {
    let w = World::new();
    let cred = add_host(&w.home, "far");
    let log = w.use_fake_claude(&script);
    let toml = std::fs::read_to_string(w.home.join("lab.toml")).unwrap();
    w.write_config(&format!("{toml}\n[runs]\n{runs}\n"));
    (w, cred, log)
}

/// Host `far`'s runner, connected to `lab`.
fn far_runner(w: &World, lab: &Lab, cred: &str) -> Down {
    let down = Down(runner(w, &lab.url, "far", cred, &[]), w.dir.path().join("runner-far").join("tmux.sock"));
    wait_state(lab, "far", "connected");
    down
}

/// A run on host `far` (fake-claude there, in the world's workdir), past its first turn
/// (`first` said): its id.
fn run_on_far(w: &World, lab: &Lab, first: &str) -> String {
    let body = serde_json::json!({"provider": "claude-code", "workdir": w.workdir, "prompt": "go", "host": "far"});
    let (s, run) = lab.post("/runs", &body);
    assert_eq!(s, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    lab.wait_view(&id, "the first turn", |v| v["state"] == "idle" && v["messages"].to_string().contains(first));
    id
}

impl Drop for Down {
    fn drop(&mut self) {
        kill(&mut self.0);
        let _ = Command::new("tmux").arg("-S").arg(&self.1).arg("kill-server").status();
    }
}

#[test]
fn a_runner_dials_in_is_listed_goes_down_when_killed_or_revoked_and_a_second_is_refused() {
    let w = World::new();
    let cred = add_host(&w.home, "build-2");
    assert!(cred.starts_with("labr_") && cred.len() == 69, "{cred}");
    let out = hosts_cmd(&w.home, &["add", "build-2"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("exists"));
    let list = String::from_utf8(hosts_cmd(&w.home, &["list"]).stdout).unwrap();
    assert!(list.lines().any(|l| l.starts_with("build-2 ")), "{list}");
    assert!(!std::fs::read_to_string(w.home.join("hosts.json")).unwrap().contains(&cred[5..]), "only a hash");

    let lab = w.serve();
    let h = host(&lab, "build-2").expect("listed before it connects");
    assert_eq!((&h["state"], &h["runs"], &h["version"]), (&"down".into(), &0.into(), &Value::Null), "{h}");
    assert_eq!(h["transport"], "dial-back", "{h}");

    let mut first = runner(&w, &lab.url, "build-2", &cred, &[]);
    let h = wait_state(&lab, "build-2", "connected");
    assert_eq!(h["version"], env!("CARGO_PKG_VERSION"), "{h}");
    assert!(h["since"].as_str().unwrap().ends_with('Z') && h["hostname"].is_string(), "{h}");

    // Killed: down at once (the kernel closes its socket), with the time it went.
    kill(&mut first);
    let h = wait_state(&lab, "build-2", "down");
    assert!(h["since"].is_string() && h["hostname"].is_null(), "{h}");

    // Two runners of one host: the second is refused while the first lives (one use of
    // a credential never cuts off the runner that holds it); it keeps trying, saying
    // why, and gets in once the first is gone.
    let older = runner(&w, &lab.url, "build-2", &cred, &[]);
    let h = wait_state(&lab, "build-2", "connected");
    let (mut newer, newer_log) = runner_logged(&w, &lab.url, "build-2", &cred);
    let said = log_says(&newer_log, "has a runner connected");
    assert!(said.contains("lab hosts remove build-2"), "{said}");
    let again = wait_state(&lab, "build-2", "connected");
    assert_eq!(again["since"], h["since"], "the first connection is the one kept: {again}");
    let mut older = Down(older, w.dir.path().join("runner-build-2").join("tmux.sock"));
    assert!(older.0.try_wait().unwrap().is_none(), "the first runner runs on");
    assert!(newer.try_wait().unwrap().is_none(), "the second keeps trying");
    kill(&mut older.0);
    let taken = wait_for(Duration::from_secs(30), "the second runner in", || {
        host(&lab, "build-2").filter(|h| h["state"] == "connected" && h["since"] != again["since"])
    });
    assert!(taken["hostname"].is_string(), "{taken}");

    // Revoked: the connected runner is cut off within a second and stops; the host is
    // no longer listed.
    let out = hosts_cmd(&w.home, &["remove", "build-2"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_for(Duration::from_secs(20), "the runner to stop", || newer.try_wait().unwrap());
    let err = std::fs::read_to_string(&newer_log).unwrap();
    assert!(err.contains("credential was removed or replaced"), "{err}");
    wait_for(Duration::from_secs(10), "the revoked host gone from the list", || {
        host(&lab, "build-2").is_none().then_some(())
    });
    assert!(!hosts_cmd(&w.home, &["remove", "build-2"]).status.success(), "removed once");
    assert!(!err.contains(&cred[5..]), "the credential is never in the runner's log");
}

/// `lab hosts remove X && lab hosts add X` (a new credential, what lab suggests to
/// re-key) ends the connection made with the old one at once: the check compares
/// credentials, not names.
#[test]
fn re_keying_a_host_cuts_off_the_old_credential_s_runner() {
    let w = World::new();
    let old = add_host(&w.home, "box");
    let lab = w.serve();
    let (mut r, log) = runner_logged(&w, &lab.url, "box", &old);
    wait_state(&lab, "box", "connected");
    assert!(hosts_cmd(&w.home, &["remove", "box"]).status.success());
    let new = add_host(&w.home, "box");
    assert_ne!(new, old);
    let status = wait_for(Duration::from_secs(20), "the old runner cut off", || r.try_wait().unwrap());
    assert_eq!(status.code(), Some(1));
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(err.contains("removed or replaced"), "{err}");
    wait_state(&lab, "box", "down");
    // The new credential's runner gets in.
    let _new = Down(runner(&w, &lab.url, "box", &new, &[]), w.dir.path().join("runner-box").join("tmux.sock"));
    wait_state(&lab, "box", "connected");
}

/// Whoever answers at a runner's URL without proving it holds the host's credential (a
/// squatter on the port of a dropped `ssh -L` tunnel) learns nothing — not the
/// credential, not the runner's hello — and is obeyed in nothing; the runner says why
/// and keeps dialling (it is not stopped either, whatever status the squatter answers).
#[test]
fn a_runner_trusts_only_a_server_that_proves_it_holds_the_credential() {
    let w = World::new();
    let cred = add_host(&w.home, "edge");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let pwned = w.dir.path().join("PWNED");
    let (tx, rx) = std::sync::mpsc::channel::<(String, Vec<String>)>();
    let start = serde_json::json!({"type": "call", "id": 1, "op": {"op": "start", "target": "lab-x-1",
        "argv": ["sh", "-c", format!("touch {}", pwned.display())]}});
    let welcome = serde_json::json!({"type": "welcome", "version": env!("CARGO_PKG_VERSION")});
    std::thread::spawn(move || {
        for (i, stream) in listener.incoming().enumerate().take(6) {
            let Ok(stream) = stream else { continue };
            stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut request = String::new();
            if i % 2 == 1 {
                // Every other try: a refusal, as lab serve words one (but without its proof).
                use std::io::{BufRead, Write};
                let mut r = std::io::BufReader::new(&stream);
                let mut line = String::new();
                while r.read_line(&mut line).is_ok_and(|n| n > 2) {
                    request.push_str(&line);
                    line.clear();
                }
                let body = r#"{"error":"version_mismatch","message":"stop"}"#;
                let _ = write!(&stream, "HTTP/1.1 409 Conflict\r\ncontent-length: {}\r\n\r\n{body}", body.len());
                let _ = tx.send((request, Vec::new()));
                continue;
            }
            #[allow(clippy::result_large_err)] // tungstenite's callback type
            let cb = |req: &tungstenite::handshake::server::Request, resp| {
                request = format!("{:?}", req.headers());
                Ok(resp)
            };
            let Ok(mut ws) = tungstenite::accept_hdr(stream, cb) else { continue };
            let _ = ws.send(Message::Text(welcome.to_string().into()));
            let _ = ws.send(Message::Text(start.to_string().into()));
            let mut frames = Vec::new();
            while let Ok(m) = ws.read() {
                match m {
                    Message::Text(t) => frames.push(t.to_string()),
                    Message::Close(_) => break,
                    _ => {}
                }
            }
            let _ = tx.send((request, frames));
        }
    });
    let (mut r, log) = runner_logged(&w, &url, "edge", &cred);
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(rx.recv_timeout(Duration::from_secs(30)).expect("the runner dials again"));
    }
    for (request, frames) in &seen {
        assert!(!request.contains(&cred[5..]) && !request.to_lowercase().contains("authorization"), "{request}");
        assert!(frames.is_empty(), "the runner said something to a server that proved nothing: {frames:?}");
    }
    assert!(r.try_wait().unwrap().is_none(), "a refusal without proof does not stop the runner");
    let said = log_says(&log, "did not prove it holds host `edge`'s credential");
    assert!(!said.contains(&cred[5..]), "{said}");
    assert!(!pwned.exists(), "the squatter's start was not obeyed");
    assert!(!w.dir.path().join("runner-edge").join("tmux.sock").exists(), "no tmux server was even started");
    kill(&mut r);
}

/// A raw WebSocket client (a hostile or outdated runner), connected to `lab`.
fn raw_client(
    lab: &Lab,
    headers: &[(&str, &str)],
) -> Result<tungstenite::WebSocket<std::net::TcpStream>, tungstenite::Error> {
    raw_handshake(lab, headers).map(|(ws, _)| ws)
}

/// [`raw_client`] with lab serve's answer.
fn raw_handshake(
    lab: &Lab,
    headers: &[(&str, &str)],
) -> Result<(tungstenite::WebSocket<std::net::TcpStream>, tungstenite::handshake::client::Response), tungstenite::Error>
{
    let addr = lab.url.trim_start_matches("http://").to_string();
    let mut req = format!("ws://{addr}/runners/connect").into_client_request().unwrap();
    for (k, v) in headers {
        req.headers_mut().insert(tungstenite::http::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
    }
    let stream = std::net::TcpStream::connect(&addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    tungstenite::client::client(req, stream).map_err(|e| match e {
        tungstenite::HandshakeError::Failure(e) => e,
        tungstenite::HandshakeError::Interrupted(_) => panic!("blocking handshake interrupted"),
    })
}

fn refused<T>(r: Result<T, tungstenite::Error>) -> (u16, Value) {
    refused_with(r).0
}

/// [`refused`], with the answer's headers.
fn refused_with<T>(r: Result<T, tungstenite::Error>) -> ((u16, Value), tungstenite::http::HeaderMap) {
    match r {
        Err(tungstenite::Error::Http(resp)) => {
            let body = resp.body().clone().unwrap_or_default();
            ((resp.status().as_u16(), serde_json::from_slice(&body).unwrap_or(Value::Null)), resp.headers().clone())
        }
        Err(e) => panic!("not an HTTP refusal: {e}"),
        Ok(_) => panic!("connected"),
    }
}

/// The hello a runner sends, with `proof`.
fn hello_with(proof: &str) -> Value {
    serde_json::json!({"type": "hello", "proof": proof, "hostname": "h", "home": "/x", "tmux_socket": "/x/tmux.sock",
        "lab_exe": "/usr/bin/lab", "env": []})
}

/// Whether `headers` carry lab serve's proof for host `name` with credential `cred`
/// and the runner nonce `nonce`: lab serve's nonce, if so.
fn serve_proof(headers: &tungstenite::http::HeaderMap, cred: &str, name: &str, nonce: &str) -> Option<String> {
    use lab::machines::hosts::protocol::proof;
    let h = |k: &str| headers.get(k).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    let (sn, p) = (h("x-lab-serve-nonce"), h("x-lab-serve-proof"));
    proof::matches(&p, &proof::serve(&proof::key_of(cred), name, nonce, &sn)).then_some(sn)
}

/// A raw client that does the handshake as `lab runner` does (lab serve's proof
/// checked): the socket and the hello that proves `cred` on it.
fn proven(lab: &Lab, name: &str, cred: &str) -> (tungstenite::WebSocket<std::net::TcpStream>, String) {
    use lab::machines::hosts::protocol::proof;
    let nonce = proof::nonce().unwrap();
    let (ws, resp) = raw_handshake(
        lab,
        &[
            ("x-lab-runner-name", name),
            ("x-lab-runner-version", env!("CARGO_PKG_VERSION")),
            ("x-lab-runner-nonce", &nonce),
        ],
    )
    .unwrap();
    let sn = serve_proof(resp.headers(), cred, name, &nonce).expect("lab serve proves itself");
    (ws, hello_with(&proof::runner(&proof::key_of(cred), name, &nonce, &sn)).to_string())
}

/// The reason of the close frame that ends the connection ("" without one).
fn close_reason(ws: &mut tungstenite::WebSocket<std::net::TcpStream>) -> String {
    for _ in 0..100 {
        match ws.read() {
            Ok(Message::Close(Some(f))) => return f.reason.to_string(),
            Ok(Message::Close(None)) | Err(_) => return String::new(),
            Ok(_) => {}
        }
    }
    String::new()
}

/// The close code lab serve ends `ws` with after `send` (read until the close).
fn close_code(ws: &mut tungstenite::WebSocket<std::net::TcpStream>) -> Option<u16> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        match ws.read() {
            Ok(Message::Close(f)) => return f.map(|f| u16::from(f.code)),
            Ok(_) => continue,
            Err(_) => return None,
        }
    }
    None
}

#[test]
fn what_is_not_a_runner_of_this_lab_is_refused_and_lab_keeps_serving() {
    let w = World::new();
    let cred = add_host(&w.home, "edge");
    let lab = w.serve();
    let version = env!("CARGO_PKG_VERSION");
    let nonce = lab::machines::hosts::protocol::proof::nonce().unwrap();
    let base = |name: &'static str| {
        vec![("x-lab-runner-name", name), ("x-lab-runner-version", version), ("x-lab-runner-nonce", nonce.as_str())]
    };

    // A wrong credential: the runner finds lab serve's proof wrong, sends nothing, says
    // why and keeps trying (it cannot tell lab serve from a squatter); nothing connects.
    let (mut wrong, log) = runner_logged(&w, &lab.url, "edge", "labr_0000");
    let said = log_says(&log, "did not prove it holds host `edge`'s credential");
    assert!(said.contains("is not the one `lab hosts add edge` printed"), "{said}");
    assert_eq!(host(&lab, "edge").unwrap()["state"], "down");
    kill(&mut wrong);
    let (code, err) = exits(runner(&w, &lab.url, "edge", "not-a-credential", &[]), Duration::from_secs(20));
    assert!(code == 1 && err.contains("not a runner credential"), "{err}");
    // An unknown host: 401, without a proof (lab serve has nothing to prove with).
    let ((s, body), headers) = refused_with(raw_client(&lab, &base("other")));
    assert_eq!((s, &body["error"]), (401, &"unauthorized".into()), "{body}");
    assert!(!headers.contains_key("x-lab-serve-proof"));
    // No nonce (an older runner's bearer credential, lab's own token): 400, saying why.
    let token = format!("Bearer {}", lab.token.clone().unwrap());
    let bearer = format!("Bearer {cred}");
    for auth in [bearer.as_str(), token.as_str()] {
        let h = [("authorization", auth), ("x-lab-runner-name", "edge"), ("x-lab-runner-version", version)];
        let (s, body) = refused(raw_client(&lab, &h));
        assert_eq!(s, 400, "{body}");
        assert!(body["message"].as_str().unwrap().contains("never sends it"), "{body}");
    }
    // Another version: 409 naming both, with lab serve's proof (so a runner believes it).
    let mut h = base("edge");
    h[1].1 = "0.0.1";
    let ((s, body), headers) = refused_with(raw_client(&lab, &h));
    assert_eq!((s, &body["error"]), (409, &"version_mismatch".into()), "{body}");
    let m = body["message"].as_str().unwrap();
    assert!(m.contains(&format!("version {version}")) && m.contains("version 0.0.1"), "{m}");
    assert!(serve_proof(&headers, &cred, "edge", &nonce).is_some(), "{headers:?}");
    assert!(serve_proof(&headers, "labr_0000", "edge", &nonce).is_none());
    // The edge's Host and Origin rules hold here too (a DNS-rebound page, a browser of
    // another site).
    let with = |k: &'static str, v: &'static str| {
        let mut h = base("edge");
        h.push((k, v));
        refused(raw_client(&lab, &h))
    };
    let (s, body) = with("host", "evil.example");
    assert_eq!((s, &body["error"]), (421, &"host_not_allowed".into()), "{body}");
    let (s, body) = with("origin", "https://evil.example");
    assert_eq!((s, &body["error"]), (403, &"origin_not_allowed".into()), "{body}");
    // Not a WebSocket: 400.
    let r = lab
        .client
        .get(format!("{}/runners/connect", lab.url))
        .header("x-lab-runner-name", "edge")
        .header("x-lab-runner-version", version)
        .header("x-lab-runner-nonce", &nonce)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    // Plain http to another machine only when asked for.
    let (code, err) = exits(runner(&w, "http://192.0.2.1:7777", "edge", &cred, &[]), Duration::from_secs(20));
    assert!(code == 1 && err.contains("in clear"), "{err}");

    // A hello without the runner's proof, or with a wrong one (another host's, one for
    // other nonces): 4004, nothing asked of it.
    let (mut ws, _) = proven(&lab, "edge", &cred);
    ws.send(Message::Text(hello_with("00").to_string().into())).unwrap();
    assert_eq!(close_code(&mut ws), Some(4004));
    let (mut ws, _) = proven(&lab, "edge", &cred);
    let (_, replayed) = proven(&lab, "edge", &cred);
    ws.send(Message::Text(replayed.into())).unwrap();
    assert_eq!(close_code(&mut ws), Some(4004), "a proof is good for its own connection only");
    let (mut ws, _) = proven(&lab, "edge", &cred);
    let mut no_proof = hello_with("");
    no_proof.as_object_mut().unwrap().remove("proof");
    ws.send(Message::Text(no_proof.to_string().into())).unwrap();
    assert_eq!(close_code(&mut ws), Some(4002));

    // What is not the protocol ends that connection with 4002: garbage, a binary frame,
    // a second hello, a frame over 1 MiB.
    for (i, then) in [
        None,
        Some(Message::Text("{\"type\":\"launch\"}".into())),
        Some(Message::Binary(vec![1, 2, 3].into())),
        Some(Message::Text("hello".into())),
    ]
    .into_iter()
    .enumerate()
    {
        let (mut ws, hello) = proven(&lab, "edge", &cred);
        let then =
            then.map(|m| if m == Message::Text("hello".into()) { Message::Text(hello.clone().into()) } else { m });
        ws.send(Message::Text(if i == 0 { "not json".to_string() } else { hello }.into())).unwrap();
        if let Some(m) = then {
            ws.send(m).unwrap();
        }
        assert_eq!(close_code(&mut ws), Some(4002), "case {i}");
    }
    // A hello whose paths would go into a pasted command line as more than one word.
    let pwned = w.dir.path().join("PWNED");
    for (what, bad) in [
        ("tmux_socket", format!("/x/s d;touch${{IFS}}{};#", pwned.display())),
        ("home", "/x/$(id)".to_string()),
        ("lab_exe", "/usr/bin/l ab".to_string()),
    ] {
        let (mut ws, hello) = proven(&lab, "edge", &cred);
        let mut facts: Value = serde_json::from_str(&hello).unwrap();
        facts[what] = bad.clone().into();
        ws.send(Message::Text(facts.to_string().into())).unwrap();
        let reason = close_reason(&mut ws);
        assert!(reason.contains(what) && reason.contains("command line"), "{bad}: {reason}");
    }
    let (mut ws, hello) = proven(&lab, "edge", &cred);
    ws.send(Message::Text(hello.into())).unwrap();
    let _ = ws.send(Message::Text("x".repeat(2 << 20).into()));
    assert_ne!(close_code(&mut ws), Some(1000), "an oversized frame ends the connection");
    // Reports on runs the host does not have, paths for run ids, a flood of them: dropped;
    // nothing is written anywhere, the connection stays.
    let (mut ws, hello) = proven(&lab, "edge", &cred);
    ws.send(Message::Text(hello.into())).unwrap();
    let outside = w.dir.path().join("planted");
    for i in 0..2000 {
        let m = match i % 3 {
            0 => format!(r#"{{"type":"run_file","run":"../../{}","file":"spool","content":"x"}}"#, outside.display()),
            1 => r#"{"type":"transcript","run":"r-not-mine","offset":0,"data":"eA=="}"#.to_string(),
            _ => r#"{"type":"ended","run":"r-not-mine"}"#.to_string(),
        };
        ws.send(Message::Text(m.into())).unwrap();
    }
    ws.flush().unwrap();
    wait_state(&lab, "edge", "connected");
    assert!(!outside.exists() && !w.home.join("remote").exists());
    drop(ws);
    // A flood of connections that never say hello does not stop lab serve.
    let idle: Vec<_> = (0..20).map(|_| raw_client(&lab, &base("edge")).unwrap()).collect();
    let (s, _) = lab.get("/hosts");
    assert_eq!(s, 200);
    drop(idle);
    // And a real runner still gets in afterwards.
    let mut r = runner(&w, &lab.url, "edge", &cred, &[]);
    wait_state(&lab, "edge", "connected");
    kill(&mut r);
}

#[test]
fn a_runner_comes_back_when_lab_serve_restarts() {
    let w = World::new();
    let cred = add_host(&w.home, "box");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let lab = Lab::start_on(&w, &addr, |_| {});
    let mut r = runner(&w, &lab.url, "box", &cred, &[]);
    wait_state(&lab, "box", "connected");
    drop(lab);
    let lab = Lab::start_on(&w, &addr, |_| {});
    let h = wait_state(&lab, "box", "connected");
    assert!(h["hostname"].is_string(), "{h}");
    assert!(r.try_wait().unwrap().is_none(), "the runner kept running through the restart");
    kill(&mut r);
}

/// The terminal seam on another machine: lab's `Hosts` (in this test's process, behind
/// the real route) and a real `lab runner` with its own home and tmux server; every
/// call of [`lab::machines::terminal::Terminal`] done there, and what the runner refuses.
#[test]
fn a_hosts_terminal_is_reached_through_its_runner() {
    use lab::machines::hosts::{HostCredentials, Hosts, RemoteTerminal};
    use lab::machines::terminal::Terminal;
    use std::sync::Arc;

    let w = World::new();
    let cred = add_host(&w.home, "far");
    let hosts = Arc::new(Hosts::new(HostCredentials::new(w.home.join("hosts.json"))));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .route("/runners/connect", axum::routing::get(lab::edge::http::runners::connect))
        .with_state(hosts.clone());
    rt.spawn(async move {
        axum::serve(listener, app.into_make_service_with_connect_info::<std::net::SocketAddr>()).await.unwrap();
    });
    let term = RemoteTerminal::new(hosts.clone(), "far".into(), rt.handle().clone());
    let e = term.capture("lab-t-1").unwrap_err();
    assert!(e.message.contains("not connected"), "{e}");

    let mut r = runner(&w, &url, "far", &cred, &[]);
    wait_for(Duration::from_secs(20), "the runner", || hosts.connected("far").then_some(()));
    let target = "lab-t-1";
    term.start(target, &["sh".into(), "-c".into(), "printf 'ready> '; exec cat".into()]).unwrap();
    assert!(term.alive(target));
    wait_for(Duration::from_secs(10), "the prompt", || term.capture(target).ok().filter(|s| s.contains("ready>")));
    term.literal(target, "typed;").unwrap();
    term.key(target, "Enter").unwrap();
    term.paste(target, "lab-t-1", "pasted line").unwrap();
    term.key(target, "Enter").unwrap();
    let screen = wait_for(Duration::from_secs(10), "the typed text echoed", || {
        term.capture(target).ok().filter(|s| s.matches("typed;").count() >= 2 && s.matches("pasted line").count() >= 2)
    });
    assert!(screen.starts_with("ready> typed;"), "{screen}");
    // An answer plan goes in one call and is played there, its pauses kept there.
    let mut sent = Vec::new();
    let steps = [
        lab::agents::model::KeyOp::Literal("played".into()),
        lab::agents::model::KeyOp::Key("Space".into()),
        lab::agents::model::KeyOp::Literal("plan".into()),
        lab::agents::model::KeyOp::Key("Enter".into()),
    ];
    let started = Instant::now();
    term.play(target, &steps, Duration::from_millis(100), &mut |n| sent.push(n)).unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300), "three pauses: {:?}", started.elapsed());
    assert_eq!(sent, [4], "one message: all sent at once");
    wait_for(Duration::from_secs(10), "the plan echoed", || {
        term.capture(target).ok().filter(|s| s.matches("played plan").count() >= 2)
    });
    let e = term
        .play(target, &[lab::agents::model::KeyOp::Key("C-c; kill-server".into())], Duration::ZERO, &mut |_| {})
        .unwrap_err();
    assert!(e.message.contains("not a key name"), "{e}");
    // The runner's own tmux server, in its own home: not lab serve's.
    let socket = w.dir.path().join("runner-far").join("tmux.sock");
    let attach = term.attach_command(target);
    assert_eq!(attach[..3], ["ssh", "-t", "far"]);
    assert_eq!(attach[3..], [lab::util::shell::join(["tmux", "-S", socket.to_str().unwrap(), "attach", "-t", target])]);
    assert!(!w.home.join("tmux.sock").exists());

    // What lab would never ask is refused by the runner, and the stream stays up.
    for (e, why) in [
        (term.capture("main").unwrap_err(), "not a session lab names"),
        (term.key(target, "C-c; kill-server").unwrap_err(), "not a key name"),
        (term.capture("lab-nope").unwrap_err(), "tmux capture-pane"),
    ] {
        assert!(e.message.contains(why), "{e}");
    }
    assert!(!term.alive("lab-nope"));
    term.kill(target).unwrap();
    assert!(!term.alive(target));

    // Calls in flight when the runner dies fail at once, saying so.
    term.start(target, &["sleep".into(), "600".into()]).unwrap();
    kill(&mut r);
    let e = term.capture(target).unwrap_err();
    assert!(e.message.contains("not connected") || e.message.contains("connection ended"), "{e}");
    // Its sessions outlive it (a new runner would find them): clean up.
    let _ = Command::new("tmux").arg("-S").arg(&socket).arg("kill-server").status();
}

/// A run on another host: fake-claude started by the host's runner in the runner's
/// own tmux, with the runner's own home for its hook files; its question reaches lab's
/// view through the stream, is answered through lab's API (keys played on the host),
/// its transcript is mirrored (same messages and seqs as a local run), a message
/// reaches it, stop ends it there; lab serve restarted mid-run picks it up again.
#[test]
fn a_run_on_a_host_is_answered_from_lab_like_a_local_one() {
    let w = World::new();
    let cred = add_host(&w.home, "far");
    let two = serde_json::json!({"questions": [
        {"question": "Which database?", "header": "DB", "options": [{"label": "Postgres", "description": ""}, {"label": "SQLite", "description": ""}]}
    ]});
    let log = w.use_fake_claude(&serde_json::json!({"steps": [{"ask": two}, {"say": "Chose it."}, {"idle": {}}, {"say": "Got your message."}, {"idle": {}}]}));
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let lab = Lab::start_on(&w, &addr, |_| {});

    // Not connected yet: refused, nothing started.
    let body = serde_json::json!({"provider": "claude-code", "workdir": w.workdir, "prompt": "pick", "host": "far"});
    let (s, e) = lab.post("/runs", &body);
    assert_eq!((s, &e["error"]), (409, &"host_down".into()), "{e}");
    let (s, e) = lab.post(
        "/runs",
        &serde_json::json!({"provider": "claude-code", "workdir": w.workdir, "prompt": "x", "host": "nope"}),
    );
    assert_eq!(s, 400, "{e}");

    let mut r = runner(&w, &lab.url, "far", &cred, &[]);
    wait_state(&lab, "far", "connected");
    let (s, e) = lab.post(
        "/runs",
        &serde_json::json!({"provider": "claude-code", "workdir": "/no/such/dir", "prompt": "x", "host": "far"}),
    );
    assert_eq!(s, 400, "{e}");
    assert!(e["message"].as_str().unwrap().contains("on host far"), "{e}");

    let (s, run) = lab.post("/runs", &body);
    assert_eq!(s, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    assert_eq!(run["host"], "far");
    let runner_home = w.dir.path().join("runner-far");
    assert_eq!(run["tmux_socket"], runner_home.join("tmux.sock").to_str().unwrap());
    assert!(!w.home.join("tmux.sock").exists(), "nothing of the run on lab serve's tmux");
    let (_, hosts) = lab.get("/hosts");
    assert_eq!(hosts[0]["runs"], 1, "{hosts}");

    // The question from the spool (on a loaded machine the pane may be read first and shown as
    // a screen prompt until the spool arrives).
    let v = lab.wait_view(&id, "the question from the spool", |v| v["pending_dialog"]["source"] == "spool");
    let d = &v["pending_dialog"];
    assert_eq!((&d["source"], &d["answerable"]), (&"spool".into(), &true.into()), "{d}");
    assert!(runner_home.join("runtime").join(format!("{id}.spool.json")).exists(), "the hook wrote on the host");
    assert!(runner_home.join("runtime").join(format!("{id}.settings.json")).exists(), "settings on the host");
    assert!(!w.home.join("runtime").join(format!("{id}.settings.json")).exists(), "and not here");
    assert!(w.home.join("remote").join(format!("{id}.jsonl")).metadata().unwrap().len() > 0, "the mirror");
    let (s, b) = lab.post(
        &format!("/runs/{id}/dialog/answer"),
        &serde_json::json!({"tool_id": d["tool_id"], "answers": [{"option": 1}]}),
    );
    assert_eq!(s, 202, "{b}");
    let answer = wait_for(Duration::from_secs(20), "fake-claude to log the answer", || {
        World::log_events(&log).into_iter().find(|e| e["event"] == "answer")
    });
    assert!(answer.to_string().contains("SQLite"), "{answer}");
    let v = lab
        .wait_view(&id, "the turn's end", |v| v["state"] == "idle" && v["messages"].to_string().contains("Chose it."));
    let msgs = v["messages"].as_array().unwrap();
    for (i, m) in msgs.iter().enumerate() {
        assert_eq!(m["seq"], i as u64, "dense seqs");
    }
    let count = msgs.len();
    let (_, t) = lab.get(&format!("/runs/{id}/terminal"));
    assert!(t["attach"].as_str().unwrap().starts_with("ssh -t far 'tmux -S "), "{t}");

    // lab serve restarted mid-run: the run and its chat come back, the runner reconnects
    // and the run is followed again from where the mirror ends.
    drop(lab);
    let lab = Lab::start_on(&w, &addr, |_| {});
    wait_state(&lab, "far", "connected");
    let v = lab.wait_view(&id, "the run back", |v| v["state"] == "idle");
    assert_eq!(v["messages"].as_array().unwrap().len(), count, "the same chat, nothing doubled");
    let (s, b) = lab.post(&format!("/runs/{id}/messages"), &serde_json::json!({"text": "hello there"}));
    assert_eq!(s, 202, "{b}");
    let v = lab.wait_view(&id, "the reply", |v| v["messages"].to_string().contains("Got your message."));
    assert!(v["messages"].as_array().unwrap().len() > count);

    let (s, b) = lab.post(&format!("/runs/{id}/stop"), &serde_json::json!({}));
    assert_eq!((s, &b["state"]), (200, &"ended".into()), "{b}");
    let alive = Command::new("tmux")
        .arg("-S")
        .arg(runner_home.join("tmux.sock"))
        .args(["has-session", "-t", &format!("=lab-{id}")])
        .status()
        .unwrap();
    assert!(!alive.success(), "the session on the host is gone");
    kill(&mut r);
    let _ = Command::new("tmux").arg("-S").arg(runner_home.join("tmux.sock")).arg("kill-server").status();
}

/// A host whose runner is killed: its runs show `disconnected` at once and refuse
/// answers and messages (`host_down`); the runner back within the grace: they go on;
/// gone for longer than the grace (lab.toml `[runs] host_grace_secs`): they end with
/// the reason.
#[test]
fn a_hosts_runs_are_disconnected_while_its_runner_is_gone_and_end_after_the_grace() {
    let (w, cred, log) = far_world(
        serde_json::json!({"steps": [{"say": "Ready."}, {"idle": {}}, {"say": "Back."}, {"idle": {}}]}),
        "host_grace_secs = 3",
    );
    let lab = w.serve();
    let mut r = runner(&w, &lab.url, "far", &cred, &[]);
    wait_state(&lab, "far", "connected");
    let body = serde_json::json!({"provider": "claude-code", "workdir": w.workdir, "prompt": "hi", "host": "far"});
    let (s, run) = lab.post("/runs", &body);
    assert_eq!(s, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    let v = lab.wait_state(&id, "idle");
    assert_eq!(v["disconnected"], false, "{v}");

    kill(&mut r);
    lab.wait_view(&id, "disconnected", |v| v["disconnected"] == true);
    let (s, e) = lab.post(&format!("/runs/{id}/messages"), &serde_json::json!({"text": "hello"}));
    assert_eq!((s, &e["error"]), (409, &"host_down".into()), "{e}");
    // Back within the grace: the run goes on.
    let mut r = runner(&w, &lab.url, "far", &cred, &[]);
    lab.wait_view(&id, "connected again", |v| v["disconnected"] == false);
    let (s, e) = lab.post(&format!("/runs/{id}/messages"), &serde_json::json!({"text": "hello"}));
    assert_eq!(s, 202, "{e}");
    lab.wait_view(&id, "the reply", |v| v["messages"].to_string().contains("Back."));
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(lab.view(&id)["state"], "idle", "the first grace timer did not end it");

    // Gone for longer than the grace: the run ends, saying why.
    kill(&mut r);
    let v = lab.wait_view(&id, "ended", |v| v["state"] == "ended");
    assert_eq!(v["disconnected"], true);
    let (_, rec) = lab.get(&format!("/runs/{id}"));
    assert!(rec["error"].as_str().unwrap().contains("runner has been gone for 3 s"), "{rec}");
    let _ = log;
    let socket = w.dir.path().join("runner-far").join("tmux.sock");
    let _ = Command::new("tmux").arg("-S").arg(&socket).arg("kill-server").status();
}

/// A first prompt too long for one argument, on a host: typed in there once the agent
/// is ready (one paste over the stream), and it reaches the agent whole.
#[test]
fn a_first_prompt_too_long_for_one_argument_is_typed_in_on_the_host() {
    let w = World::new();
    let cred = add_host(&w.home, "far");
    w.use_fake_claude(&serde_json::json!({"steps": [{"idle": {}}, {"say": "Read your long prompt."}, {"idle": {}}]}));
    let lab = Lab::start(&w);
    let mut r = runner(&w, &lab.url, "far", &cred, &[]);
    wait_state(&lab, "far", "connected");
    let prompt = common::distinct_lines("prompt", 200 * 1024);
    let body = serde_json::json!({"provider": "claude-code", "workdir": w.workdir, "prompt": prompt, "host": "far"});
    let (s, run) = lab.post("/runs", &body);
    assert_eq!(s, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    let v = lab.wait_view(&id, "the reply to the long prompt", |v| {
        v["state"] == "idle" && v["messages"].to_string().contains("Read your long prompt.")
    });
    let user = v["messages"].as_array().unwrap().iter().find(|m| m["role"] == "user").expect("the prompt").clone();
    assert_eq!(user["text"].as_str().unwrap().trim_end(), prompt, "the prompt reached the agent whole");

    let (_, hosts) = lab.get("/hosts");
    assert_eq!(hosts[0]["runs"], 1, "{hosts}");
    kill(&mut r);
    let _ = Command::new("tmux")
        .arg("-S")
        .arg(w.dir.path().join("runner-far").join("tmux.sock"))
        .arg("kill-server")
        .status();
}

/// A run on a host in a git repository gets its worktree there, as a run here does (in
/// the runner's home, not lab serve's): its diff counted and shown, a review quoting its
/// lines, the merge into the base branch and the discard all done by git on the host.
#[test]
fn a_run_on_a_host_gets_its_worktree_there_and_its_diff_review_merge_and_discard_go_through_git_there() {
    let w = World::new();
    let repo = w.workdir.canonicalize().unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "one\ntwo\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let log = w.use_fake_claude(&serde_json::json!({"steps": [
        {"write": {"path": "a.txt", "text": "one\ntwo, changed\n"}},
        {"write": {"path": "new.txt", "text": "a new file\n"}},
        {"idle": {"say": "Done editing."}},
        {"idle": {"say": "Read your review."}}
    ]}));
    let cred = add_host(&w.home, "far");
    let lab = Lab::start_with(&w, |_| {});
    // Stopped, with its tmux server, however the test ends.
    let _far = far_runner(&w, &lab, &cred);

    let body = serde_json::json!({"provider": "claude-code", "workdir": repo, "prompt": "edit", "host": "far"});
    let (s, run) = lab.post("/runs", &body);
    assert_eq!(s, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    let wt = &run["worktree"];
    assert_eq!(
        (&wt["branch"], &wt["base"], &wt["base_ref"]),
        (&format!("lab/{id}").into(), &base.clone().into(), &"main".into()),
        "{run}"
    );
    let path = std::path::PathBuf::from(wt["path"].as_str().unwrap());
    let runner_home = w.dir.path().join("runner-far");
    assert!(path.starts_with(runner_home.join("worktrees")), "made by the runner, in its home: {}", path.display());
    assert!(!w.home.join("worktrees").exists(), "nothing in lab serve's home");

    // The summary is counted while the agent writes: a count may catch a file made but
    // not yet written; the one after its last write is whole.
    let whole = serde_json::json!({"files_changed": 2, "additions": 2, "deletions": 1});
    lab.wait_view(&id, "the diff summary from the host, after the agent's last write", |v| v["diff"] == whole);
    let started = World::log_events(&log).into_iter().find(|e| e["event"] == "start").expect("started");
    assert_eq!(started["cwd"], path.to_str().unwrap(), "the agent runs in the worktree");
    let (s, diff) = lab.get(&format!("/runs/{id}/diff"));
    assert_eq!(s, 200, "{diff}");
    let paths: Vec<&str> = diff["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["a.txt", "new.txt"], "{diff}");
    assert_eq!(git(&repo, &["status", "--porcelain"]), "", "the repository's checkout is untouched");

    lab.wait_view(&id, "idle", |v| v["state"] == "idle");
    let (s, b) = lab.post(
        &format!("/runs/{id}/review"),
        &serde_json::json!({"comments": [
            {"path": "a.txt", "line": 2, "text": "Why changed?"},
            {"path": "a.txt", "line": 2, "side": "old", "text": "It was fine."}
        ]}),
    );
    assert_eq!(s, 202, "{b}");
    let said = wait_for(Duration::from_secs(20), "the review in the agent", || {
        World::log_events(&log)
            .into_iter()
            .find(|e| e["event"] == "user_message" && e["text"].as_str().unwrap_or("").contains("Why changed?"))
            .map(|e| e["text"].as_str().unwrap().to_string())
    });
    assert!(said.contains("a.txt line 2:\n   > two, changed\n   Why changed?"), "{said}");
    assert!(said.contains("> two\n   It was fine."), "{said}");
    let (s, b) = lab.post(
        &format!("/runs/{id}/review"),
        &serde_json::json!({"comments": [{"path": "nope.txt", "line": 1, "text": "x"}]}),
    );
    assert_eq!((s, &b["error"]), (400, &"bad_request".into()), "{b}");

    lab.wait_view(&id, "idle after the review", |v| {
        v["state"] == "idle" && v["messages"].to_string().contains("Read your review.")
    });
    let (s, merged) = lab.post(&format!("/runs/{id}/merge"), &serde_json::json!({}));
    assert_eq!(s, 200, "{merged}");
    let commit = merged["commit"].as_str().unwrap().to_string();
    assert_eq!(git(&repo, &["rev-parse", "main"]).trim(), commit);
    assert_eq!(std::fs::read_to_string(repo.join("new.txt")).unwrap(), "a new file\n");
    let (s, b) = lab.post(&format!("/runs/{id}/merge"), &serde_json::json!({}));
    assert_eq!((s, b["error"].as_str()), (409, Some("nothing_to_merge")), "{b}");

    let (s, _) = lab.post(&format!("/runs/{id}/stop"), &serde_json::json!({}));
    assert_eq!(s, 200);
    let (s, b) = lab.post(&format!("/runs/{id}/discard"), &serde_json::json!({}));
    assert_eq!(s, 200, "{b}");
    assert!(!path.exists(), "the worktree on the host removed");
    assert_eq!(git(&repo, &["worktree", "list"]).lines().count(), 1);
}

/// The agent's side on a host swaps the run's hook files for a link to the runner's own
/// environment (its credential) and for a FIFO: the runner reads neither (nothing of
/// its environment reaches lab serve) and keeps following the run (a message still
/// reaches the chat).
#[test]
fn a_runner_reads_no_link_or_fifo_the_agent_s_side_puts_in_place_of_its_files() {
    let w = World::new();
    let cred = add_host(&w.home, "far");
    w.use_fake_claude(
        &serde_json::json!({"steps": [{"say": "Started."}, {"idle": {}}, {"say": "Got your message."}, {"idle": {}}]}),
    );
    let lab = w.serve();
    let _down = far_runner(&w, &lab, &cred);
    let id = run_on_far(&w, &lab, "Started.");
    let runtime = w.dir.path().join("runner-far").join("runtime");
    let marker = runtime.join(format!("{id}.marker.json"));
    let _ = std::fs::remove_file(&marker);
    std::os::unix::fs::symlink("/proc/self/environ", &marker).unwrap();
    let spool = runtime.join(format!("{id}.spool.json"));
    let _ = std::fs::remove_file(&spool);
    let c = std::ffi::CString::new(spool.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let session = runtime.join(format!("{id}.session.json"));
    let _ = std::fs::remove_file(&session);
    std::os::unix::fs::symlink("/proc/self/environ", &session).unwrap();

    let (s, b) = lab.post(&format!("/runs/{id}/messages"), &serde_json::json!({"text": "more"}));
    assert_eq!(s, 202, "{b}");
    lab.wait_view(&id, "the second turn", |v| v["messages"].to_string().contains("Got your message."));
    for f in common::walk(&w.home) {
        let bytes = std::fs::read(&f).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(&cred), "the runner's credential in {}", f.display());
        assert!(!text.contains("LAB_RUNNER_CREDENTIAL"), "the runner's environment in {}", f.display());
    }
    let (s, _) = lab.post(&format!("/runs/{id}/stop"), &serde_json::json!({}));
    assert_eq!(s, 200);
}

/// The mirror of a host run's transcript is bounded: a line over the limit is not
/// stored (a hole; the chat goes on after it), and past `[runs] host_transcript_max_mb`
/// the mirror stops growing, the view says why, and lab keeps serving.
#[test]
fn a_host_run_s_transcript_mirror_is_bounded_and_says_so() {
    use std::os::unix::fs::MetadataExt;
    let (w, cred, log) = far_world(
        serde_json::json!({"steps": [{"say": "Started."}, {"idle": {}}, {"say": "Got your message."}, {"idle": {}}]}),
        "host_transcript_max_mb = 48",
    );
    let lab = w.serve();
    let _down = far_runner(&w, &lab, &cred);
    let id = run_on_far(&w, &lab, "Started.");
    let transcript = wait_for(Duration::from_secs(10), "fake-claude's start", || {
        World::log_events(&log).into_iter().find(|e| e["event"] == "start").map(|e| e["transcript_path"].clone())
    });
    let transcript = std::path::PathBuf::from(transcript.as_str().unwrap());
    let junk_line = |mib: usize| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&transcript).unwrap();
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..mib {
            f.write_all(&chunk).unwrap();
        }
        f.write_all(b"\n").unwrap();
    };
    // The agent's side writes a 40 MiB line: not stored; the chat goes on after it.
    junk_line(40);
    let (s, b) = lab.post(&format!("/runs/{id}/messages"), &serde_json::json!({"text": "more"}));
    assert_eq!(s, 202, "{b}");
    let v =
        lab.wait_view(&id, "the turn after the long line", |v| v["messages"].to_string().contains("Got your message."));
    assert_eq!(v["transcript_stopped"], Value::Null, "{}", v["transcript_stopped"]);
    let mirror = w.home.join("remote").join(format!("{id}.jsonl"));
    let m = mirror.metadata().unwrap();
    assert!(m.len() > 40 << 20, "the mirror's length is the transcript's: {}", m.len());
    assert!(m.blocks() * 512 < 16 << 20, "the long line takes no disk: {} bytes", m.blocks() * 512);
    // Past the cap: the mirror stops, the view says so, lab keeps serving.
    junk_line(16);
    let v = lab.wait_view(&id, "the mirror stopped", |v| v["transcript_stopped"].is_string());
    let why = v["transcript_stopped"].as_str().unwrap();
    assert!(why.contains("48 MiB") && why.contains("host_transcript_max_mb"), "{why}");
    assert!(mirror.metadata().unwrap().len() <= 48 << 20);
    let (s, _) = lab.get(&format!("/runs/{id}"));
    assert_eq!(s, 200);
    let (s, _) = lab.post(&format!("/runs/{id}/stop"), &serde_json::json!({}));
    assert_eq!(s, 200);
}
