//! A run through a `lab runner` beside a run on lab serve's own machine (issue 34): a
//! real `lab serve`, a real `lab runner` (its own home and tmux server, dialling lab
//! serve on loopback), fake-claude in both, their dialogs interleaved. Prints:
//!
//! - hook invoked → `question` view on SSE: the agent's PreToolUse hook started (from
//!   fake-claude's log: when it logged the hook, less the hook's duration) to the view
//!   arriving on `GET /runs/{id}/events`;
//! - spool written → `question` view on SSE: from the spool file's write time where the
//!   hook wrote it (lab serve's runtime folder, or the runner's) — what lab adds after the
//!   agent's own `lab hook` process, which a run here pays alike (the same clock: runner
//!   and lab serve share this machine);
//! - click → first key: the answer POSTed to fake-claude reading the first key of it.
//!
//!     cargo bench -p lab --bench runner
//!
//! `LAB_RUNNER_BENCH_N` (default 30) dialogs per run. fake-claude logs at millisecond
//! resolution: figures are ±1 ms. On loopback the one-way delay is ~0: what the runner
//! path adds over the local one is its own cost (the runner's wake, the stream, the
//! mirror). `LAB_RUNNER_BENCH_DELAY_MS=20` puts a delay line (support/delay_line.rs)
//! between the runner and lab serve: a link with that one-way delay each way.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/mod.rs"]
mod support;

use common::*;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};
use support::Events;

fn ts(v: &Value) -> SystemTime {
    humantime::parse_rfc3339(v["ts"].as_str().expect("a ts")).expect("an RFC 3339 ts")
}

fn ms(later: SystemTime, earlier: SystemTime) -> f64 {
    match later.duration_since(earlier) {
        Ok(d) => d.as_secs_f64() * 1e3,
        Err(e) => -e.duration().as_secs_f64() * 1e3,
    }
}

fn find(log: &Path, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    wait_for(Duration::from_secs(30), what, || World::log_events(log).into_iter().find(&pred))
}

fn print(label: &str, v: Vec<f64>) {
    support::print_pct(label, 44, v);
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n: usize = std::env::var("LAB_RUNNER_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(30);
    let w = World::new();
    let mut steps: Vec<Value> = (0..n).map(|_| json!({"ask": three_options()})).collect();
    steps.push(json!({"idle": {}}));
    let log = w.use_fake_claude(&json!({ "steps": steps }));
    let out = Command::new(LAB).args(["hosts", "--home"]).arg(&w.home).args(["add", "bench"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let credential = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let lab = w.serve();
    let delay = Duration::from_millis(support::env_num("LAB_RUNNER_BENCH_DELAY_MS", 0));
    let runner_url = if delay.is_zero() {
        lab.url.clone()
    } else {
        let to = lab.url.trim_start_matches("http://").parse().expect("lab serve's address");
        println!("the runner's link: {} ms one-way each way (a delay line)", delay.as_millis());
        format!("http://{}", support::delay_line::start(to, delay))
    };
    let runner_home = w.dir.path().join("runner");
    let mut runner = Command::new(LAB)
        .args(["runner", "--connect", &runner_url, "--name", "bench", "--home"])
        .arg(&runner_home)
        .env("LAB_RUNNER_CREDENTIAL", &credential)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(Duration::from_secs(20), "the runner", || {
        let (_, h) = lab.get("/hosts");
        (h[0]["state"] == "connected").then_some(())
    });
    let mut runs = Vec::new();
    for host in [None, Some("bench")] {
        let mut body = json!({"provider": "claude-code", "workdir": w.workdir, "prompt": "benchmark"});
        if let Some(h) = host {
            body["host"] = json!(h);
        }
        let (s, run) = lab.post("/runs", &body);
        assert_eq!(s, 201, "{run}");
        let id = run["id"].as_str().unwrap().to_string();
        // Each run's views read as they come, on a thread of its own: a view waiting in
        // the stream while the other run is answered would look late.
        let mut events = Events::open(&lab, &id);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut seen = HashSet::new();
            loop {
                if tx.send(events.next_spool_question(&mut seen)).is_err() {
                    break;
                }
            }
        });
        runs.push((if host.is_some() { "through the runner" } else { "this machine" }, rx, id));
    }
    let mut hook_to_sse: Vec<Vec<f64>> = vec![Vec::new(), Vec::new()];
    let mut spool_to_sse: Vec<Vec<f64>> = vec![Vec::new(), Vec::new()];
    let spool_dirs = [w.home.join("runtime"), runner_home.join("runtime")];
    let mut click_to_key: Vec<Vec<f64>> = vec![Vec::new(), Vec::new()];
    for _ in 0..n {
        for (r, (_, questions, id)) in runs.iter_mut().enumerate() {
            let (arrived, tool_id) = questions.recv_timeout(Duration::from_secs(30)).expect("a question");
            let hook = find(&log, "the PreToolUse hook", |e| {
                e["event"] == "hook" && e["hook_event_name"] == "PreToolUse" && e["tool_use_id"] == tool_id.as_str()
            });
            let invoked = ts(&hook) - Duration::from_millis(hook["duration_ms"].as_u64().unwrap_or(0));
            hook_to_sse[r].push(ms(arrived, invoked));
            let spool = spool_dirs[r].join(format!("{id}.spool.json"));
            let written = std::fs::metadata(&spool).and_then(|m| m.modified()).expect("the spool, not answered yet");
            spool_to_sse[r].push(ms(arrived, written));
            // Once the picker reads keys, answer it.
            find(&log, "the picker", |e| e["event"] == "ready" && e["tool_use_id"] == tool_id.as_str());
            let before: usize = World::log_events(&log).len();
            let clicked = SystemTime::now();
            let (s, b) = lab
                .post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": tool_id, "answers": [{"option": 0}]}));
            assert_eq!(s, 202, "{b}");
            let key = wait_for(Duration::from_secs(30), "the first key", || {
                World::log_events(&log).into_iter().skip(before).find(|e| e["event"] == "key")
            });
            click_to_key[r].push(ms(ts(&key), clicked));
            find(&log, "the answer", |e| e["event"] == "answer" && e["tool_use_id"] == tool_id.as_str());
        }
    }
    println!("hook invoked → question view on SSE (real lab serve, fake-claude in real tmux):");
    for (r, (label, _, _)) in runs.iter().enumerate() {
        print(label, std::mem::take(&mut hook_to_sse[r]));
    }
    println!("spool written (by the agent's hook) → question view on SSE:");
    for (r, (label, _, _)) in runs.iter().enumerate() {
        print(label, std::mem::take(&mut spool_to_sse[r]));
    }
    println!("answer POSTed → first key read by the agent:");
    for (r, (label, _, _)) in runs.iter().enumerate() {
        print(label, std::mem::take(&mut click_to_key[r]));
    }
    // The readers end with lab serve's streams: quietly.
    std::panic::set_hook(Box::new(|_| {}));
    let _ = runner.kill();
    let _ = runner.wait();
    let _ = Command::new("tmux").arg("-S").arg(runner_home.join("tmux.sock")).arg("kill-server").status();
}
