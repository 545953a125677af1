//! Dialog-path benchmark (not a test): prints figures for the two hot paths of the
//! live-capture design. Run with
//!
//!     cargo bench -p lab --bench dialog_latency
//!
//! 1. `lab hook dialog-spool`: wall time of one hook execution (process start, read
//!    stdin, atomic write), which Claude Code pays on every matching tool call.
//! 2. spool → SSE: from the moment the hook's spool file is written (seen by an inotify
//!    watch of the bench's own, and, as earlier records did, its mtime) to the moment the
//!    `question` view arrives on `GET /runs/{id}/events`, over many dialogs of a real
//!    `lab serve` with fake-claude in real tmux.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/mod.rs"]
mod support;

use common::*;
use serde_json::json;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Instant;
use support::{ms_between, pct, spool_written, Events, SpoolWatch};

fn hook_exec() {
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("r.spool.json");
    let payload =
        std::fs::read("../providers/claude-code/testdata/spool-ask-user-question.json").unwrap_or_else(|_| {
            br#"{"hook_event_name":"PreToolUse","tool_name":"AskUserQuestion","tool_use_id":"toolu_1","tool_input":{}}"#
                .to_vec()
        });
    let mut times = Vec::new();
    for i in 0..300 {
        let t = Instant::now();
        let mut child = Command::new(LAB)
            .args(["hook", "dialog-spool"])
            .arg(&spool)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&payload).unwrap();
        assert!(child.wait().unwrap().success());
        if i >= 20 {
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    let p = pct(times);
    println!(
        "lab hook dialog-spool: p50 {:.2} ms  p90 {:.2} ms  p99 {:.2} ms  max {:.2} ms  (n={})",
        p.p50, p.p90, p.p99, p.max, p.n
    );
}

fn spool_to_sse() {
    const DIALOGS: usize = 30;
    let w = World::new();
    let mut steps = Vec::new();
    for _ in 0..DIALOGS {
        steps.push(json!({"ask": three_options()}));
    }
    steps.push(json!({"idle": {}}));
    w.use_fake_claude(&json!({"steps": steps}));
    let lab = w.serve();
    let watch = SpoolWatch::new(&w);
    let run = lab.create_run(&w, "claude-code", "benchmark");
    let id = run["id"].as_str().unwrap().to_string();
    let mut events = Events::open(&lab, &id);
    let mut latencies = Vec::new();
    let mut by_mtime = Vec::new();
    let mut last = None;
    let mut answered = std::collections::HashSet::new();
    while latencies.len() < DIALOGS {
        let (arrived, tool_id) = events.next_spool_question(&mut answered);
        let seen = watch.appeared(&id, last);
        last = Some(seen);
        latencies.push(ms_between(seen, arrived));
        by_mtime.push(ms_between(spool_written(&w, &id), arrived));
        let (status, body) =
            lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": tool_id, "answers": [{"option": 0}]}));
        assert!(status == 200 || status == 202, "{body}");
    }
    for (from, v) in [("seen written", latencies), ("its mtime", by_mtime)] {
        let p = pct(v);
        println!(
            "spool ({from}) → SSE event: p50 {:.1} ms  p90 {:.1} ms  p99 {:.1} ms  max {:.1} ms  (n={})",
            p.p50, p.p90, p.p99, p.max, p.n
        );
    }
}

fn main() {
    hook_exec();
    let t = Instant::now();
    spool_to_sse();
    eprintln!("(spool→SSE run took {:.0} s)", t.elapsed().as_secs_f64());
}
