//! Remote hook path prototype (docs/adr/0003-more-than-one-machine.md): prints the
//! latency "hook invoked → `question` view on SSE" of a real `lab serve` with
//! fake-claude in real tmux, for
//!
//! (a) today's path: the agent's hook runs `lab hook dialog-spool <spool>`;
//! (b) the remote path: the hook runs `lab hook dialog-spool --post <url>` (the token in
//!     `LAB_HOOK_TOKEN`), a receiver on 127.0.0.1 checks the run's bearer token and
//!     writes the spool with `lab::agents::hook::apply` (the same atomic write), then lab's
//!     usual path (inotify → tailer → SSE) takes over;
//! (c) (b) through a TCP proxy on loopback that delays every chunk by 1, 10 and 50 ms
//!     one way (and the first chunk by one more round trip: the TCP handshake);
//!
//! and, on a second `lab serve` whose `tmux` is a wrapper adding one round trip to
//! every tmux command (what `ssh host tmux …` over an open connection costs), the
//! answer window "answer POSTed (guard check) → last key landed in the agent".
//! Dialogs of (a), (b) and (c) are interleaved, so a drift over the run hits all alike.
//!
//!     cargo bench -p lab --bench remote_hook
//!
//! `LAB_REMOTE_HOOK_N` (default 100) dialogs for (a) and (b), `LAB_REMOTE_HOOK_N_DELAYED`
//! (default 30) per delay for (c), `LAB_REMOTE_HOOK_N_ANSWER` (default 6) per delay for
//! the answers. The binary plays two more roles: the agent (it rewrites the run's hook
//! settings so the dialog hook goes through the bench's timing shim, then becomes
//! fake-claude) and that shim (it notes the time, then runs the real hook command).

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/mod.rs"]
mod support;

use common::*;
use serde_json::{json, Value};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::Events;

/// Set (to the control directory) in the agent's environment by lab.toml: play the agent.
const AGENT_ROLE: &str = "REMOTE_HOOK_BENCH_AGENT";
/// The control directory, for the shim.
const CTL: &str = "REMOTE_HOOK_BENCH_CTL";
const SHIM: &str = "hook-shim";
const DELAYS_MS: [u64; 3] = [1, 10, 50];

fn env_n(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn now_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos()
}

fn run_id_of(file: &Path, suffix: &str) -> String {
    file.file_name().unwrap().to_str().unwrap().strip_suffix(suffix).expect("a run file").to_string()
}

// ---- the agent's side ----------------------------------------------------------------

/// The agent role: point the dialog hook at the shim, draw this run's hook token, become
/// fake-claude. (A remote launcher would hand the token over the same way: environment.)
fn agent(ctl: PathBuf, args: &[String]) -> ! {
    let exe = std::env::current_exe().unwrap();
    let mut args = args.to_vec();
    let i = args.iter().position(|a| a == "--settings").expect("--settings") + 1;
    let settings = PathBuf::from(&args[i]);
    let run = run_id_of(&settings, ".settings.json");
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    let shim = lab::util::shell::join(&[exe.to_string_lossy().into_owned(), SHIM.into()]);
    fn rewrite(v: &mut Value, shim: &str) {
        match v {
            Value::Object(m) => {
                for (k, v) in m.iter_mut() {
                    match (k.as_str(), v.as_str().and_then(|c| c.split_once(" hook dialog-spool "))) {
                        ("command", Some((_lab, spool))) => *v = json!(format!("{shim} {spool}")),
                        _ => rewrite(v, shim),
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|v| rewrite(v, shim)),
            _ => {}
        }
    }
    rewrite(&mut doc, &shim);
    let ours = ctl.join(format!("{run}.settings.json"));
    std::fs::write(&ours, serde_json::to_vec(&doc).unwrap()).unwrap();
    args[i] = ours.to_string_lossy().into_owned();
    let token = lab::util::secrets::random_hex(32).unwrap();
    lab::store::fsutil::write_atomic(&ctl.join("tokens").join(&run), token.as_bytes(), 0o600).unwrap();
    let err = Command::new(std::env::var("FAKE_CLAUDE_BIN").unwrap())
        .args(&args)
        .env_remove(AGENT_ROLE)
        .env(CTL, &ctl)
        .env(lab::agents::hook::post::TOKEN_ENV, token)
        .exec();
    panic!("exec fake-claude: {err}");
}

/// The shim: note "hook invoked", run the hook the control file asks for (stdin and
/// environment inherited), note when it returned, exit with its status.
fn hook_shim(args: &[String]) -> i32 {
    let t0 = now_ns();
    let ctl = PathBuf::from(std::env::var(CTL).unwrap());
    let spool = &args[0];
    let mode = std::fs::read_to_string(ctl.join("mode")).unwrap();
    let mut hook = Command::new(LAB);
    hook.args(["hook", "dialog-spool"]);
    match mode.trim().strip_prefix("post ") {
        None => hook.arg(spool),
        Some(base) => {
            let run = run_id_of(Path::new(spool), ".spool.json");
            hook.args(["--post", &format!("{base}/hooks/{run}/dialog-spool")])
        }
    };
    let code = hook.status().unwrap().code().unwrap_or(1);
    let t1 = now_ns();
    let mut log = std::fs::OpenOptions::new().append(true).create(true).open(ctl.join("t0")).unwrap();
    writeln!(log, "{t0} {t1} {}", mode.trim()).unwrap();
    code
}

// ---- lab's side: the receiver and the network ------------------------------------------

/// Where lab's endpoint would stand: check the run's token, write the channel's file
/// with lab's own code.
fn receiver(rt: &tokio::runtime::Runtime, runtime_dir: PathBuf, tokens: PathBuf) -> std::net::SocketAddr {
    use axum::{extract, http::HeaderMap, http::StatusCode, routing::post};
    let app = axum::Router::new().route(
        "/hooks/{run}/{channel}",
        post(
            move |extract::Path((run, channel)): extract::Path<(String, String)>,
                  headers: HeaderMap,
                  body: axum::body::Bytes| {
                let (runtime_dir, tokens) = (runtime_dir.clone(), tokens.clone());
                async move {
                    let Some(id) = lab::store::paths::RunId::parse(&run) else { return StatusCode::NOT_FOUND };
                    let expected = lab::store::fsutil::read_optional(&tokens.join(id.to_string())).ok().flatten();
                    let given = headers.get("authorization").and_then(|v| v.to_str().ok());
                    let given = given.and_then(|v| v.strip_prefix("Bearer ")).unwrap_or("").as_bytes();
                    if !expected.is_some_and(|t| lab::util::secrets::ct_eq(&t, given)) {
                        return StatusCode::UNAUTHORIZED;
                    }
                    let named = headers.get(lab::agents::hook::post::CHANNEL_HEADER).and_then(|v| v.to_str().ok());
                    let files = lab::store::paths::RunFiles::new(&runtime_dir, &id);
                    let file = match (channel.as_str(), named) {
                        ("dialog-spool", Some("dialog-spool")) => files.spool,
                        ("blocked-marker", Some("blocked-marker")) => files.marker,
                        ("session-info", Some("session-info")) => files.session,
                        _ => return StatusCode::BAD_REQUEST,
                    };
                    let written = tokio::task::spawn_blocking(move || {
                        lab::agents::hook::apply(&lab::agents::hook::Action::Write, &file, &body)
                    })
                    .await;
                    match written {
                        Ok(Ok(_)) => StatusCode::NO_CONTENT,
                        _ => StatusCode::BAD_REQUEST,
                    }
                }
            },
        ),
    );
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// Copy `r` to `w`, every chunk delivered `delay` after it was read (a delay line, not a
/// sleep per chunk), the first one `first_extra` later still.
async fn delay_line(
    mut r: tokio::net::tcp::OwnedReadHalf,
    mut w: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
    mut first_extra: Duration,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let reader = async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = r.read(&mut buf).await {
            let _ = tx.send((tokio::time::Instant::now() + delay + first_extra, buf[..n].to_vec()));
            first_extra = Duration::ZERO;
        }
    };
    let writer = async move {
        while let Some((at, chunk)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            if w.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = w.shutdown().await;
    };
    tokio::join!(reader, writer);
}

/// A TCP proxy on 127.0.0.1 in front of `upstream` with `one_way` latency each way.
fn delaying_proxy(rt: &tokio::runtime::Runtime, upstream: std::net::SocketAddr, one_way: Duration) -> String {
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(server) = tokio::net::TcpStream::connect(upstream).await else { return };
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                // On a real link the client's first byte leaves one round trip after
                // connect() (SYN, SYN-ACK): hold it that much longer.
                tokio::join!(delay_line(cr, sw, one_way, 2 * one_way), delay_line(sr, cw, one_way, Duration::ZERO));
            });
        }
    });
    url
}

// ---- the measurements ------------------------------------------------------------------

/// The fake-claude log event `event` for `tool_use_id`, waited for.
fn log_event(log: &Path, event: &str, tool_use_id: &str) -> Value {
    wait_for(Duration::from_secs(30), &format!("{event} of {tool_use_id}"), || {
        World::log_events(log).into_iter().find(|e| e["event"] == event && e["tool_use_id"] == tool_use_id)
    })
}

fn asks(n: usize) -> Value {
    let mut steps: Vec<Value> = (0..n).map(|_| json!({"ask": three_options()})).collect();
    steps.push(json!({"idle": {}}));
    json!({"steps": steps})
}

fn print(label: &str, v: Vec<f64>) {
    support::print_pct(label, 40, v);
}

fn hook_paths() {
    let (n, n_delayed) = (env_n("LAB_REMOTE_HOOK_N", 100), env_n("LAB_REMOTE_HOOK_N_DELAYED", 30));
    // The order of the dialogs: (a), (b), then each delay while it still needs samples.
    let mut plan = Vec::new();
    for round in 0..n.max(n_delayed) {
        if round < n {
            plan.extend([None, Some(0)]);
        }
        if round < n_delayed {
            plan.extend(DELAYS_MS.map(Some));
        }
    }
    let w = World::new();
    let ctl = w.dir.path().join("ctl");
    std::fs::create_dir_all(ctl.join("tokens")).unwrap();
    let script = w.dir.path().join("script.json");
    std::fs::write(&script, serde_json::to_vec(&asks(plan.len())).unwrap()).unwrap();
    let log = w.dir.path().join("fake.log");
    let env = [
        ("FAKE_CLAUDE_SCRIPT", script.display().to_string()),
        ("FAKE_CLAUDE_LOG", log.display().to_string()),
        ("FAKE_CLAUDE_BIN", fake_claude().display().to_string()),
        (AGENT_ROLE, ctl.display().to_string()),
    ];
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k} = {v:?}")).collect();
    w.write_config(&format!(
        "[providers.claude-code]\nprogram = {:?}\nenv = {{ {} }}\n",
        std::env::current_exe().unwrap().display().to_string(),
        env.join(", ")
    ));

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let receiver = receiver(&rt, w.runtime(), ctl.join("tokens"));
    let proxies: std::collections::HashMap<u64, String> =
        DELAYS_MS.iter().map(|&ms| (ms, delaying_proxy(&rt, receiver, Duration::from_millis(ms)))).collect();
    let modes: Vec<String> = plan
        .iter()
        .map(|path| match path {
            None => "file".to_string(),
            Some(0) => format!("post http://{receiver}"),
            Some(ms) => format!("post {}", proxies[ms]),
        })
        .collect();
    let set_mode = |i: usize| std::fs::write(ctl.join("mode"), &modes[i]).unwrap();

    let lab = w.serve();
    set_mode(0);
    let run = lab.create_run(&w, "claude-code", "benchmark");
    let id = run["id"].as_str().unwrap().to_string();
    let target = run["tmux_target"].as_str().unwrap().to_string();
    let mut questions = Events::open(&lab, &id);
    let mut seen = std::collections::HashSet::new();
    let mut samples: std::collections::BTreeMap<Option<u64>, Vec<f64>> = Default::default();
    let mut durations = samples.clone();
    let started = Instant::now();
    for (i, path) in plan.iter().enumerate() {
        let (arrived, tool_id) = questions.next_spool_question(&mut seen);
        // Once the picker reads keys the hook has returned and the shim has noted its times.
        log_event(&log, "ready", &tool_id);
        let t0 = std::fs::read_to_string(ctl.join("t0")).unwrap();
        let lines: Vec<&str> = t0.lines().collect();
        assert_eq!(lines.len(), i + 1, "one hook invocation per dialog");
        let mut fields = lines[i].splitn(3, ' ');
        let mut at = || UNIX_EPOCH + Duration::from_nanos(fields.next().unwrap().parse().unwrap());
        let (invoked, returned) = (at(), at());
        assert_eq!(fields.next(), Some(modes[i].as_str()));
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        samples.entry(*path).or_default().push(ms(arrived.duration_since(invoked).unwrap()));
        durations.entry(*path).or_default().push(ms(returned.duration_since(invoked).unwrap()));
        // Answer in the terminal: option 1 is under the cursor.
        if i + 1 < plan.len() {
            set_mode(i + 1);
        }
        assert!(w.tmux(&["send-keys", "-t", &target, "Enter"]).status.success());
    }
    eprintln!("({} dialogs in {:.0} s)", plan.len(), started.elapsed().as_secs_f64());
    let label = |path: Option<u64>| match path {
        None => "(a) lab hook dialog-spool <file>".to_string(),
        Some(0) => "(b) --post, receiver on loopback".to_string(),
        Some(ms) => format!("(c) --post, +{ms} ms one way"),
    };
    println!("hook invoked → question view on SSE (real lab serve, fake-claude in tmux):");
    for (path, v) in samples {
        print(&label(path), v);
    }
    println!("hook invoked → hook returned (what the agent waits for):");
    for (path, v) in durations {
        print(&label(path), v);
    }
    rt.shutdown_background();
}

/// A `tmux` first on lab serve's PATH that adds `<ctl>/tmux_delay` seconds before and
/// after the real one: one round trip per tmux command, like `ssh host tmux …` over an
/// open connection.
fn tmux_wrapper(ctl: &Path) -> PathBuf {
    let real = lab::store::config::find_program(Path::new("tmux"), std::env::var_os("PATH").as_deref()).expect("tmux");
    let bin = ctl.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let delay = ctl.join("tmux_delay");
    std::fs::write(&delay, "0\n").unwrap();
    let q = |p: &Path| lab::util::shell::join(&[p.to_string_lossy().into_owned()]);
    let script = format!(
        "#!/bin/sh\nread d < {delay}\n[ \"$d\" = 0 ] && exec {real} \"$@\"\nsleep \"$d\"\n{real} \"$@\"\nrc=$?\nsleep \"$d\"\nexit $rc\n",
        delay = q(&delay),
        real = q(&real)
    );
    let wrapper = bin.join("tmux");
    std::fs::write(&wrapper, script).unwrap();
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    bin
}

/// The window from `start` to the agent's `answer` event for `tool_id` (the committing
/// key landed); checks the first option was chosen.
fn answered_after(log: &Path, tool_id: &str, start: SystemTime) -> f64 {
    let answered = log_event(log, "answer", tool_id);
    assert!(answered["answers"].to_string().contains("PostgreSQL"), "the wrong option: {answered}");
    let landed = humantime::parse_rfc3339(answered["ts"].as_str().unwrap()).unwrap();
    // fake-claude's log has millisecond timestamps: ±1 ms.
    landed.duration_since(start).unwrap_or_default().as_secs_f64() * 1e3
}

fn answers() {
    let n = env_n("LAB_REMOTE_HOOK_N_ANSWER", 6);
    let delays: Vec<u64> = std::iter::once(0).chain(DELAYS_MS).collect();
    let w = World::new();
    let ctl = w.dir.path().join("ctl");
    let log = w.use_fake_claude(&asks(2 * n * delays.len()));
    let bin = tmux_wrapper(&ctl);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let lab = Lab::start_with(&w, |cmd| {
        cmd.env("PATH", &path);
    });
    let run = lab.create_run(&w, "claude-code", "benchmark");
    let id = run["id"].as_str().unwrap().to_string();
    let target = run["tmux_target"].as_str().unwrap().to_string();
    let socket = w.home.join("tmux.sock");
    let mut questions = Events::open(&lab, &id);
    let mut seen = std::collections::HashSet::new();
    let set_delay = |ms: u64| std::fs::write(ctl.join("tmux_delay"), format!("{}\n", ms as f64 / 1e3)).unwrap();
    println!("answer POSTed (guard check) → committing key landed, each tmux command + one round trip:");
    for ms in delays {
        let (mut windows, mut posts, mut batched) = (Vec::new(), Vec::new(), Vec::new());
        let mut keys: Vec<String> = Vec::new();
        for _ in 0..n {
            // lab's answer path: the guard, is-drawn on a capture, one tmux command per key.
            let (_, tool_id) = questions.next_spool_question(&mut seen);
            log_event(&log, "ready", &tool_id);
            set_delay(ms);
            let (t, posted) = (Instant::now(), SystemTime::now());
            let (status, body) = lab
                .post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": tool_id, "answers": [{"option": 0}]}));
            assert!(status == 200 || status == 202, "{status} {body}");
            posts.push(t.elapsed().as_secs_f64() * 1e3);
            windows.push(answered_after(&log, &tool_id, posted));
            set_delay(0);
            keys = serde_json::from_value(body["played"].clone()).unwrap();

            // The same keys as one tmux command list, paced on the agent's side by
            // `run-shell 'sleep …'` (a prototype of playing the plan next to the agent).
            let (_, tool_id) = questions.next_spool_question(&mut seen);
            log_event(&log, "ready", &tool_id);
            let mut list = vec!["-S".to_string(), socket.to_string_lossy().into_owned()];
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    list.extend([";".into(), "run-shell".into(), "sleep 0.25".into(), ";".into()]);
                }
                list.extend(["send-keys".into(), "-t".into(), target.clone(), key.clone()]);
            }
            set_delay(ms);
            let started = SystemTime::now();
            assert!(Command::new(bin.join("tmux")).args(&list).status().unwrap().success());
            batched.push(answered_after(&log, &tool_id, started));
            set_delay(0);
        }
        println!("  keys: {}, 250 ms apart", keys.join(" "));
        print(&format!("+{ms} ms one way: POST → answered"), windows);
        print(&format!("+{ms} ms one way: POST returned"), posts);
        print(&format!("+{ms} ms one way: one tmux list → answered"), batched);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(SHIM) {
        std::process::exit(hook_shim(&args[2..]));
    }
    if let Some(ctl) = std::env::var_os(AGENT_ROLE) {
        agent(PathBuf::from(ctl), &args[1..]);
    }
    hook_paths();
    answers();
}
