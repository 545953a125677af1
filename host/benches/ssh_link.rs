//! A machine reached over ssh, end to end (not a test): a real `lab serve`, a real sshd
//! on a machine the bench makes (a network namespace joined by a veth pair, a user of
//! its own; needs root and openssh-server), lab's runner daemon there started by lab
//! serve, fake-claude in the machine's tmux. Prints:
//!
//! - linking an empty machine: lab serve started → the host `connected` (lab uploaded
//!   there, the daemon started through a login shell);
//! - ssh killed (lab's master, SIGKILL) → `connected` again (a new login, lab found
//!   there by its hash, the daemon's proxy);
//! - the link down for 2 s (and ssh killed) → `connected` again, counted from the link
//!   coming back;
//! - hook invoked → `question` view on SSE, spool written (on the machine) → SSE, and
//!   click → first key read by the agent, for dialogs on the machine.
//!
//!     cargo bench -p lab --bench ssh_link
//!
//! `LAB_SSH_LINK_N` dialogs (30; 3 under `cargo test`), `LAB_SSH_LINK_ROUNDS` cuts of
//! each kind (10; 2 under `cargo test`). The host's state is polled every 5 ms: link
//! figures are ±5 ms. The machine shares this box's clock; fake-claude logs at
//! millisecond resolution.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/mod.rs"]
mod support;

use common::sshd::{master_pid, SshMachine};
use common::*;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};
use support::{env_num, ms, print_pct, Events};

fn ts(v: &Value) -> SystemTime {
    humantime::parse_rfc3339(v["ts"].as_str().expect("a ts")).expect("an RFC 3339 ts")
}

fn ms_from(later: SystemTime, earlier: SystemTime) -> f64 {
    match later.duration_since(earlier) {
        Ok(d) => d.as_secs_f64() * 1e3,
        Err(e) => -e.duration().as_secs_f64() * 1e3,
    }
}

fn find(log: &Path, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    wait_for(Duration::from_secs(30), what, || World::log_events(log).into_iter().find(&pred))
}

/// Poll GET /hosts until host m1 is in `state`: when it was seen so.
fn until_state(lab: &Lab, state: &str) -> Instant {
    let start = Instant::now();
    loop {
        let (_, list) = lab.get("/hosts");
        if list.as_array().is_some_and(|l| l.iter().any(|h| h["name"] == "m1" && h["state"] == state)) {
            return Instant::now();
        }
        assert!(start.elapsed() < Duration::from_secs(60), "host m1 not {state} within 60 s: {list}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let quick = cfg!(debug_assertions);
    let n: usize = env_num("LAB_SSH_LINK_N", if quick { 3 } else { 30 });
    let rounds: usize = env_num("LAB_SSH_LINK_ROUNDS", if quick { 2 } else { 10 });
    let Some(s) = SshMachine::new() else { return };
    let m = &s.m;
    m.install("fake-claude", &fake_claude());
    m.write(&m.user_home.join(".profile"), format!("PATH=\"{}:$PATH\"; export PATH\n", m.bin.display()).as_bytes());
    let mut steps: Vec<Value> = (0..n).map(|_| json!({"ask": three_options()})).collect();
    steps.push(json!({"idle": {}}));
    m.write(&m.workdir.join("script.json"), &serde_json::to_vec(&json!({ "steps": steps })).unwrap());
    let w = World::new();
    w.write_config(&format!(
        "[providers.claude-code]\nprogram = \"fake-claude\"\n\
         env = {{ FAKE_CLAUDE_SCRIPT = \"script.json\", FAKE_CLAUDE_LOG = \"fake.log\" }}\n\n\
         [hosts.m1]\nssh = \"{}\"\nidentity = \"{}\"\nknown_hosts = \"{}\"\n",
        s.destination(),
        s.client_key.display(),
        s.known_hosts.display()
    ));
    let size_mb = std::fs::metadata(LAB).unwrap().len() as f64 / (1 << 20) as f64;

    let t = Instant::now();
    let lab = w.serve();
    let linked = until_state(&lab, "connected");
    let cold = ms(linked - t);

    let control = w.home.join("runtime/ssh-m1.sock");
    let (mut killed, mut returned) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let pid = master_pid(&control) as i32;
        let t = Instant::now();
        unsafe { libc::kill(pid, libc::SIGKILL) };
        until_state(&lab, "connecting");
        killed.push(ms(until_state(&lab, "connected") - t));
    }
    for _ in 0..rounds {
        let pid = master_pid(&control) as i32;
        m.set_link(false);
        unsafe { libc::kill(pid, libc::SIGKILL) };
        until_state(&lab, "connecting");
        std::thread::sleep(Duration::from_secs(2));
        m.set_link(true);
        let t = Instant::now();
        returned.push(ms(until_state(&lab, "connected") - t));
    }

    let (st, run) = lab
        .post("/runs", &json!({"provider": "claude-code", "workdir": m.workdir, "prompt": "benchmark", "host": "m1"}));
    assert_eq!(st, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    let mut events = Events::open(&lab, &id);
    let (tx, questions) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = HashSet::new();
        loop {
            if tx.send(events.next_spool_question(&mut seen)).is_err() {
                break;
            }
        }
    });
    let log = m.workdir.join("fake.log");
    let spool = m.user_home.join(format!(".local/state/lab/runner/runtime/{id}.spool.json"));
    let (mut hook_to_sse, mut spool_to_sse, mut click_to_key) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let (arrived, tool_id): (SystemTime, String) =
            questions.recv_timeout(Duration::from_secs(30)).expect("a question");
        let hook = find(&log, "the PreToolUse hook", |e| {
            e["event"] == "hook" && e["hook_event_name"] == "PreToolUse" && e["tool_use_id"] == tool_id.as_str()
        });
        let invoked = ts(&hook) - Duration::from_millis(hook["duration_ms"].as_u64().unwrap_or(0));
        hook_to_sse.push(ms_from(arrived, invoked));
        let written = std::fs::metadata(&spool).and_then(|m| m.modified()).expect("the spool there, not answered yet");
        spool_to_sse.push(ms_from(arrived, written));
        find(&log, "the picker", |e| e["event"] == "ready" && e["tool_use_id"] == tool_id.as_str());
        let before = World::log_events(&log).len();
        let clicked = SystemTime::now();
        let (st, b) =
            lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": tool_id, "answers": [{"option": 0}]}));
        assert_eq!(st, 202, "{b}");
        let key = wait_for(Duration::from_secs(30), "the first key", || {
            World::log_events(&log).into_iter().skip(before).find(|e| e["event"] == "key")
        });
        click_to_key.push(ms_from(ts(&key), clicked));
        find(&log, "the answer", |e| e["event"] == "answer" && e["tool_use_id"] == tool_id.as_str());
    }
    println!(
        "a machine over ssh ({} build, veth between two network namespaces; one-way delay ~0):",
        if quick { "debug" } else { "release" }
    );
    println!("{:<52} {cold:.0} ms ({size_mb:.0} MB uploaded)", "lab serve started → host linked, empty machine");
    print_pct("ssh killed → linked again", 52, killed);
    print_pct("link back after 2 s down → linked again", 52, returned);
    print_pct("hook invoked → question view on SSE", 52, hook_to_sse);
    print_pct("spool written there → question view on SSE", 52, spool_to_sse);
    print_pct("answer POSTed → first key read by the agent", 52, click_to_key);
    // The reader ends with lab serve's stream: quietly.
    std::panic::set_hook(Box::new(|_| {}));
    let _ = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    drop(lab);
}
