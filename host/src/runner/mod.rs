//! `lab runner --connect URL --name NAME`: lab on another machine, dialling `lab serve`
//! and keeping one authenticated WebSocket open ([`crate::machines::hosts::protocol`]). No port
//! is opened on the runner's machine; systemd or a container's entrypoint starts it.
//!
//! The credential (`lab hosts add NAME` on lab serve's machine) comes from the
//! environment (`LAB_RUNNER_CREDENTIAL`) or a file only its owner can read
//! (`--credential-file`), never from argv (which every user sees in `ps`). It never
//! leaves the runner: lab serve proves it knows it before the runner says or does
//! anything, and the runner proves it back ([`protocol::proof`]); whoever else answers
//! at the URL (a squatter on a dropped tunnel's port) learns nothing and is obeyed in
//! nothing. The stream goes in clear only to loopback; elsewhere `https://` (`wss://`),
//! or `--allow-http` on a network that is encrypted already (WireGuard, a tailnet, an
//! SSH tunnel).
//!
//! A lost connection is dialled again, backing off from [`FIRST_RETRY`] to
//! [`LAST_RETRY`], and so is a server that cannot prove itself (said each time). A
//! refusal from a lab serve that proved itself and that another try cannot fix
//! (another lab version, a wrong proof of ours, the credential removed) ends the runner
//! with the reason and exit status 1; a host whose runner is connected already refuses
//! this one until that one is gone.

use crate::machines::hosts::protocol::{
    self, close, proof, Op, Reply, Up, NAME_HEADER, NONCE_HEADER, SERVE_NONCE_HEADER, SERVE_PROOF_HEADER,
    VERSION_HEADER,
};
use crate::machines::tmux::Tmux;

pub mod agents;
pub mod answer;
pub mod daemon;
pub mod panes;
pub mod session;
pub mod watch;
use futures_util::{SinkExt, StreamExt};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest, Message};

/// The environment variable the credential may come in.
pub const CREDENTIAL_ENV: &str = "LAB_RUNNER_CREDENTIAL";
/// The first wait before dialling again.
pub const FIRST_RETRY: Duration = Duration::from_millis(250);
/// The longest wait between tries.
pub const LAST_RETRY: Duration = Duration::from_secs(10);
/// lab serve pings every 5 s: this long without a frame and the connection is dead.
pub const SILENT_LIMIT: Duration = Duration::from_secs(20);

/// What `lab runner` was asked.
#[derive(Debug, Clone)]
pub struct Options {
    pub connect: String,
    pub name: String,
    pub home: PathBuf,
    pub credential_file: Option<PathBuf>,
    pub allow_http: bool,
}

/// Why the runner stopped for good.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Fatal(String);

/// The WebSocket URL for lab serve at `base` (`http(s)://` or `ws(s)://`, with or
/// without the path), or why it cannot be used.
pub fn stream_url(base: &str, allow_http: bool) -> Result<url::Url, String> {
    let mut u = url::Url::parse(base).map_err(|e| format!("--connect {base:?} is not a URL: {e}"))?;
    let secure = match u.scheme() {
        "https" | "wss" => true,
        "http" | "ws" => false,
        s => return Err(format!("--connect takes http(s):// or ws(s)://, not {s}://")),
    };
    if !u.username().is_empty() || u.password().is_some() {
        return Err("--connect must not carry credentials: the runner's come from its environment or file".into());
    }
    let loopback = match u.host() {
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => return Err(format!("--connect {base:?} names no host")),
    };
    if !secure && !loopback && !allow_http {
        return Err(format!(
            "--connect {base:?} would send the credential in clear: use https://, or --allow-http on a network \
             that is encrypted already (WireGuard, a tailnet, an SSH tunnel)"
        ));
    }
    u.set_scheme(if secure { "wss" } else { "ws" }).expect("ws schemes are valid");
    u.set_path(protocol::PATH);
    u.set_query(None);
    u.set_fragment(None);
    Ok(u)
}

/// The credential: `--credential-file` (owned by this user, not readable by others)
/// or the environment.
pub fn credential(file: Option<&Path>, env: Option<String>) -> Result<String, String> {
    let text = match file {
        Some(f) => {
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::metadata(f).map_err(|e| format!("--credential-file {}: {e}", f.display()))?;
            if meta.mode() & 0o077 != 0 {
                return Err(format!(
                    "--credential-file {}: others can read it (mode {:04o}); chmod 600 it",
                    f.display(),
                    meta.mode() & 0o7777
                ));
            }
            std::fs::read_to_string(f).map_err(|e| format!("--credential-file {}: {e}", f.display()))?
        }
        None => env.ok_or_else(|| {
            format!("no credential: set {CREDENTIAL_ENV} or pass --credential-file (from `lab hosts add NAME`)")
        })?,
    };
    let c = text.trim().to_string();
    if !c.starts_with(crate::machines::hosts::credentials::PREFIX) {
        return Err(format!(
            "that is not a runner credential (they start with {}; `lab hosts add NAME` prints one)",
            crate::machines::hosts::credentials::PREFIX
        ));
    }
    Ok(c)
}

/// The next wait after `last` (doubling, capped).
pub fn backoff(last: Duration) -> Duration {
    (last * 2).clamp(FIRST_RETRY, LAST_RETRY)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// This program's path. Once its file is replaced (lab put this build there again:
/// the path names the build, so it holds the same one) Linux reports it as `<path>
/// (deleted)`; the path itself is what runs it again.
pub fn own_exe() -> std::io::Result<std::path::PathBuf> {
    let exe = std::env::current_exe()?;
    Ok(live_path(&exe, |p| p.is_file()))
}

fn live_path(exe: &Path, exists: impl Fn(&Path) -> bool) -> std::path::PathBuf {
    match exe.to_str().and_then(|s| s.strip_suffix(" (deleted)")).map(Path::new) {
        Some(p) if exists(p) => p.to_path_buf(),
        _ => exe.to_path_buf(),
    }
}

/// The runner's first frame: `proof` and what it is on this machine.
pub fn hello(proof: String, home: &Path, tmux: &Tmux) -> Up {
    Up::Hello {
        proof,
        hostname: hostname(),
        home: home.display().to_string(),
        tmux_socket: tmux.socket.display().to_string(),
        lab_exe: own_exe().map(|p| p.display().to_string()).unwrap_or_default(),
        env: crate::runs::launch::agent_env::decide(std::env::vars_os(), Some(&[]), &Default::default())
            .env
            .into_iter()
            .collect(),
    }
}

/// How one connection ended.
enum Ended {
    /// Dial again.
    Retry(String),
    /// Stop.
    Fatal(String),
}

/// Run until stopped: `Ok` on SIGTERM/SIGINT, `Err` on a refusal no retry can fix.
pub async fn run(opts: Options) -> Result<(), Fatal> {
    crate::machines::hosts::credentials::check_name(&opts.name).map_err(Fatal)?;
    let url = stream_url(&opts.connect, opts.allow_http).map_err(Fatal)?;
    crate::store::fsutil::private_dir(&opts.home)
        .map_err(|e| Fatal(format!("the runner's home {}: {e}", opts.home.display())))?;
    let tmux = Tmux::new(crate::store::paths::Home::new(opts.home.clone()).tmux_socket());
    // Only the proof key is kept: the credential itself is never sent.
    let key =
        proof::key_of(&credential(opts.credential_file.as_deref(), std::env::var(CREDENTIAL_ENV).ok()).map_err(Fatal)?);
    let mut wait = Duration::ZERO;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| Fatal(format!("SIGTERM handler: {e}")))?;
    loop {
        let attempt = connect_once(&url, &opts, &key, &tmux);
        let ended = tokio::select! {
            e = attempt => e,
            _ = term.recv() => return Ok(()),
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        match ended {
            Ended::Fatal(why) => return Err(Fatal(why)),
            Ended::Retry(why) => {
                wait = backoff(wait);
                tracing::warn!(%why, retry_in_ms = wait.as_millis() as u64, "not connected to lab serve");
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = term.recv() => return Ok(()),
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}

/// Do one call on this machine, as lab serve asked (if the protocol allows it): its
/// tmux, its PATH, its run files. ([`Op::Watch`] and [`Op::Unwatch`] are the
/// link's: see [`session::Session`].)
pub fn exec(tmux: &Tmux, home: &crate::store::paths::Home, op: Op) -> Reply {
    if let Err(message) = protocol::check_op(&op) {
        return Reply::Error { message };
    }
    let done = |r: Result<(), crate::machines::tmux::TmuxError>| r.map(|()| Reply::Done);
    let r = match op {
        Op::Capture { target } => tmux.capture(&target).map(|text| Reply::Text { text }),
        Op::Key { target, key } => done(tmux.send_key(&target, &key)),
        Op::Literal { target, text } => done(tmux.send_literal(&target, &text)),
        Op::Paste { target, buffer, text } => done(tmux.paste(&target, &buffer, &text)),
        Op::Alive { target } => Ok(Reply::Alive { alive: tmux.has_session(&target) }),
        Op::Start { target, argv } => done(tmux.new_session(&target, &argv)),
        Op::Kill { target } => done(tmux.kill_session(&target)),
        Op::Resolve { program } => {
            let path = std::env::var_os("PATH");
            return match crate::store::config::find_program(Path::new(&program), path.as_deref()) {
                Some(p) => Reply::Text { text: p.to_string_lossy().into_owned() },
                None => Reply::Error { message: format!("`{program}` not found (on PATH unless a path)") },
            };
        }
        Op::IsDir { path } => {
            return if Path::new(&path).is_dir() {
                Reply::Done
            } else {
                Reply::Error { message: "not an existing directory".into() }
            };
        }
        Op::Write { run, file, content } => {
            let Some(id) = crate::store::paths::RunId::parse(&run) else {
                return Reply::Error { message: "not a run id".into() };
            };
            let runtime = home.runtime_dir();
            let (dir, path) = match file {
                protocol::LaunchFile::Settings => (runtime, home.run_files(&id).settings),
                protocol::LaunchFile::Launch => (runtime, home.run_files(&id).launch),
                protocol::LaunchFile::EgressAllow => {
                    // A sandboxed launch: its jail directory, where its other files go.
                    if let Err(e) = crate::store::fsutil::private_dir(&runtime)
                        .and_then(|()| crate::store::fsutil::private_dir(&home.jail_dir(&id)))
                    {
                        return Reply::Error { message: format!("making the run's jail directory: {e}") };
                    }
                    let allow = home.egress_files(&id).0;
                    (allow.parent().expect("in egress/").to_path_buf(), allow)
                }
            };
            return match crate::store::fsutil::private_dir(&dir)
                .and_then(|()| crate::store::fsutil::write_atomic(&path, content.as_bytes(), 0o600))
            {
                Ok(()) => Reply::Done,
                Err(e) => Reply::Error { message: format!("writing {}: {e}", path.display()) },
            };
        }
        Op::Play { target, steps, pause_ms } => {
            use crate::machines::terminal::Terminal as _;
            let steps: Vec<crate::agents::model::KeyOp> = steps.into_iter().map(Into::into).collect();
            let pause = std::time::Duration::from_millis(pause_ms.into());
            return match tmux.play(&target, &steps, pause, &mut |_| {}) {
                Ok(()) => Reply::Done,
                Err(e) => Reply::Error { message: e.to_string() },
            };
        }
        Op::ReadPlan { path, workdir, home } => {
            let home = home.or_else(|| std::env::var("HOME").ok());
            let roots = crate::runs::live::spool::plan_roots(home.as_deref().map(Path::new), Path::new(&workdir));
            return match crate::runs::live::spool::read_plan_file(&path, &roots) {
                Ok(text) => Reply::Text { text },
                Err(message) => Reply::Error { message },
            };
        }
        Op::Work { call } => {
            // `exec` runs on a blocking thread of the runner's runtime (see its caller).
            let worktrees = home.worktrees_dir();
            let outcome = match tokio::runtime::Handle::try_current() {
                Ok(rt) => rt.block_on(crate::worktree::call::exec(*call, &worktrees)),
                Err(e) => Err(crate::worktree::call::WorkFailed::Failed(format!("no runtime for git: {e}"))),
            };
            return match serde_json::to_string(&outcome) {
                Ok(text) => Reply::Text { text },
                Err(e) => Reply::Error { message: e.to_string() },
            };
        }
        Op::Watch { .. }
        | Op::Unwatch { .. }
        | Op::Answer { .. }
        | Op::Pane { .. }
        | Op::PaneKeys { .. }
        | Op::PaneResize { .. }
        | Op::PaneClose { .. }
        | Op::AgentStart { .. }
        | Op::AgentInput { .. }
        | Op::AgentStop { .. } => {
            return Reply::Error { message: "watching, answering, pane views and agents are the link's".into() };
        }
    };
    r.unwrap_or_else(|e| Reply::Error { message: format!("tmux {}: {}", e.action, e.message) })
}

/// `up` encoded, if it fits in a frame lab serve takes ([`protocol::MAX_FRAME`]; a
/// larger one would end the connection): a reply too large becomes an error reply,
/// anything else too large is dropped (and logged).
pub(crate) fn fit_frame(up: Up) -> Option<String> {
    let frame = protocol::encode(&up);
    if frame.len() <= protocol::MAX_FRAME {
        return Some(frame);
    }
    match up {
        Up::Reply { id, .. } => {
            let message = format!("the answer is over {} bytes, too large to send", protocol::MAX_FRAME);
            Some(protocol::encode(&Up::Reply { id, reply: Reply::Error { message } }))
        }
        other => {
            tracing::warn!(bytes = frame.len(), what = ?std::mem::discriminant(&other), "a report too large to send; dropped");
            None
        }
    }
}

/// Whether an answer's headers carry lab serve's proof for this connection: its nonce
/// when they do.
fn serve_proved(headers: &tungstenite::http::HeaderMap, key: &str, name: &str, runner_nonce: &str) -> Option<String> {
    let text = |h: &str| headers.get(h).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let (serve_nonce, offered) = (text(SERVE_NONCE_HEADER), text(SERVE_PROOF_HEADER));
    (proof::is_nonce(&serve_nonce) && proof::matches(&offered, &proof::serve(key, name, runner_nonce, &serve_nonce)))
        .then_some(serve_nonce)
}

/// Why a server that did not prove itself is left.
fn unproven(url: &url::Url, name: &str, what: &str) -> String {
    format!(
        "{what} at {url} did not prove it holds host `{name}`'s credential: nothing was sent to it. Either another \
         program answers there (a tunnel that dropped, a port taken by someone else), or this runner's credential \
         is not the one `lab hosts add {name}` printed"
    )
}

async fn connect_once(url: &url::Url, opts: &Options, key: &str, tmux: &Tmux) -> Ended {
    let mut req = match url.as_str().into_client_request() {
        Ok(r) => r,
        Err(e) => return Ended::Fatal(format!("{url}: {e}")),
    };
    let runner_nonce = match proof::nonce() {
        Ok(n) => n,
        Err(e) => return Ended::Retry(e.to_string()),
    };
    let h = req.headers_mut();
    for (k, v) in [
        (NONCE_HEADER, runner_nonce.clone()),
        (NAME_HEADER, opts.name.clone()),
        (VERSION_HEADER, protocol::VERSION.to_string()),
    ] {
        match v.parse() {
            Ok(v) => {
                h.insert(k, v);
            }
            Err(_) => return Ended::Fatal(format!("{k} cannot be sent as a header")),
        }
    }
    let config = tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(protocol::MAX_FRAME))
        .max_frame_size(Some(protocol::MAX_FRAME));
    // Without Nagle's delay (`true`): a report right after another goes out at once, not
    // after the first one's delayed ACK (that cost 10–40 ms per hook report).
    let (mut ws, serve_nonce) = match tokio_tungstenite::connect_async_with_config(req, Some(config), true).await {
        Ok((mut ws, resp)) => match serve_proved(resp.headers(), key, &opts.name, &runner_nonce) {
            Some(serve_nonce) => (ws, serve_nonce),
            None => {
                let _ = ws.close(None).await;
                return Ended::Retry(unproven(url, &opts.name, "the server"));
            }
        },
        Err(tungstenite::Error::Http(resp)) => {
            let status = resp.status();
            let body = resp.body().as_deref().map(String::from_utf8_lossy).unwrap_or_default();
            let message = serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["message"].as_str().map(String::from))
                .unwrap_or_else(|| body.trim().to_string());
            let message: String = message.chars().filter(|c| !c.is_control()).take(300).collect();
            // Only a lab serve that proved itself is believed: anyone could answer 409.
            if serve_proved(resp.headers(), key, &opts.name, &runner_nonce).is_none() {
                return Ended::Retry(format!(
                    "{} (it answered {status}: {message})",
                    unproven(url, &opts.name, "the server")
                ));
            }
            let why = format!("lab serve refused the runner ({status}): {message}");
            return if matches!(status.as_u16(), 401 | 403 | 409) { Ended::Fatal(why) } else { Ended::Retry(why) };
        }
        Err(e) => return Ended::Retry(format!("cannot reach {url}: {e}")),
    };
    let hello = hello(proof::runner(key, &opts.name, &runner_nonce, &serve_nonce), &opts.home, tmux);
    if let Err(e) = ws.send(Message::Text(protocol::encode(&hello).into())).await {
        return Ended::Retry(format!("the connection broke: {e}"));
    }
    let (mut sink, mut stream) = ws.split();
    let (out, mut out_rx) = tokio::sync::mpsc::unbounded_channel::<Up>();
    let mut session = session::Session::new(tmux.clone(), crate::store::paths::Home::new(opts.home.clone()), out);
    loop {
        let frame = tokio::select! {
            f = tokio::time::timeout(SILENT_LIMIT, stream.next()) => f,
            Some(up) = out_rx.recv() => {
                let Some(frame) = fit_frame(up) else { continue };
                if let Err(e) = sink.send(Message::Text(frame.into())).await {
                    return Ended::Retry(format!("the connection broke: {e}"));
                }
                continue;
            }
        };
        let frame = match frame {
            Err(_) => return Ended::Retry(format!("lab serve was silent for {} s", SILENT_LIMIT.as_secs())),
            Ok(None) => return Ended::Retry("lab serve closed the connection".into()),
            Ok(Some(Err(e))) => return Ended::Retry(format!("the connection broke: {e}")),
            Ok(Some(Ok(f))) => f,
        };
        match frame {
            Message::Text(t) => {
                let welcomed = session.welcomed();
                if let Err(why) = session.on_frame(t.as_str()) {
                    return Ended::Fatal(why);
                }
                if !welcomed && session.welcomed() {
                    tracing::info!(url = %url, name = %opts.name, "connected to lab serve");
                    eprintln!("lab runner: connected to {url} as host `{}`", opts.name);
                }
            }
            Message::Close(Some(f)) => {
                let why = format!("lab serve closed the connection: {}", f.reason);
                return match u16::from(f.code) {
                    close::REVOKED | close::PROTOCOL | close::UNPROVEN => Ended::Fatal(why),
                    _ => Ended::Retry(why),
                };
            }
            Message::Close(None) => return Ended::Retry("lab serve closed the connection".into()),
            // Pings are answered by the library on the next read or write.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_replaced_by_itself_is_run_by_its_path() {
        let deleted = Path::new("/h/.cache/lab/bin/lab-1-ab (deleted)");
        assert_eq!(live_path(deleted, |_| true), Path::new("/h/.cache/lab/bin/lab-1-ab"));
        assert_eq!(live_path(deleted, |_| false), deleted, "gone: said as it is");
        assert_eq!(live_path(Path::new("/x/lab"), |_| true), Path::new("/x/lab"));
    }

    #[test]
    fn what_does_not_fit_in_a_frame_is_not_sent_and_a_reply_says_why() {
        let small = Up::Reply { id: 7, reply: Reply::Text { text: "plan".into() } };
        assert_eq!(fit_frame(small.clone()), Some(protocol::encode(&small)));
        // Control characters are escaped six bytes each: a plan file under the read
        // cap can still be over the frame.
        let big = Up::Reply { id: 7, reply: Reply::Text { text: "\u{1}".repeat(256 << 10) } };
        let sent: Up = protocol::decode(&fit_frame(big).expect("an error reply instead")).unwrap();
        assert!(
            matches!(&sent, Up::Reply { id: 7, reply: Reply::Error { message } } if message.contains("too large")),
            "{sent:?}"
        );
        let chunk = Up::Transcript { run: "r-1".into(), offset: 0, data: "A".repeat(protocol::MAX_FRAME) };
        assert_eq!(fit_frame(chunk), None);
    }

    #[test]
    fn urls() {
        let u = stream_url("http://127.0.0.1:7777", false).unwrap();
        assert_eq!(u.as_str(), "ws://127.0.0.1:7777/runners/connect");
        assert_eq!(
            stream_url("https://lab.example/x?y#z", false).unwrap().as_str(),
            "wss://lab.example/runners/connect"
        );
        assert_eq!(stream_url("ws://localhost:1/", false).unwrap().as_str(), "ws://localhost:1/runners/connect");
        assert!(stream_url("http://[::1]:7/", false).is_ok());
        let e = stream_url("http://10.0.0.1:7777", false).unwrap_err();
        assert!(e.contains("in clear") && e.contains("--allow-http"), "{e}");
        assert_eq!(stream_url("http://10.0.0.1:7777", true).unwrap().as_str(), "ws://10.0.0.1:7777/runners/connect");
        assert!(stream_url("ftp://x", false).unwrap_err().contains("http(s)://"));
        assert!(stream_url("https://u:p@lab.example", false).unwrap_err().contains("credentials"));
        assert!(stream_url("not a url", false).is_err());
    }

    #[test]
    fn credentials_come_from_the_env_or_a_private_file() {
        let good = "labr_0123";
        assert_eq!(credential(None, Some(format!("{good}\n"))).unwrap(), good);
        assert!(credential(None, None).unwrap_err().contains(CREDENTIAL_ENV));
        assert!(credential(None, Some("a-lab-token".into())).unwrap_err().contains("not a runner credential"));
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("cred");
        std::fs::write(&f, good).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(credential(Some(&f), None).unwrap_err().contains("chmod 600"));
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(credential(Some(&f), Some("labr_other".into())).unwrap(), good, "the file wins");
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let mut w = Duration::ZERO;
        let mut seen = Vec::new();
        for _ in 0..8 {
            w = backoff(w);
            seen.push(w.as_millis());
        }
        assert_eq!(seen, [250, 500, 1000, 2000, 4000, 8000, 10000, 10000]);
    }
}
