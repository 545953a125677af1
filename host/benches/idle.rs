//! Idle-cost benchmark (not a test): what N idle runs cost while nothing happens.
//! Run with
//!
//!     cargo bench -p lab --bench idle                 # N = 50
//!     LAB_IDLE_RUNS=200,500 cargo bench -p lab --bench idle
//!
//! For each N: a release `lab serve` with its own home and tmux server, N runs of
//! fake-claude that end their turn and wait in the composer (no CPU of their own),
//! started through the HTTP API; once all are idle, a settle period
//! (`LAB_IDLE_SETTLE_SECS`, default 70: the tailers' backstop polls reach their
//! slowest pace after 63 s), then CPU is sampled over `LAB_IDLE_SECS` (default 30)
//! from /proc/<pid>/stat: utime+stime of lab serve plus everything it spawned (live
//! descendants and reaped children), and of the tmux server plus what it reaped (the
//! session-closed hook's shells). The agents are the tmux server's live children;
//! they are shown apart and not counted. Everything is stopped and removed at the end
//! (lab serve, the tmux server and its runs, the temp home).

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/mod.rs"]
mod support;

use common::*;
use serde_json::json;
use std::time::{Duration, Instant};
use support::{cpu_split, create_runs, env_counts, env_secs, peak_and_rss_mib, status_kib, wait_all_in_state};

/// The goal (issue 12): lab + its children + the tmux server under 2 % of a core at
/// 500 idle runs.
const GOAL_PERCENT: f64 = 2.0;

fn measure(n: usize, settle: Duration, window: Duration) {
    let w = World::new();
    w.use_fake_claude(&json!({"steps": [{"say": "Ready when you are."}, {"idle": {}}]}));
    let lab = w.serve();
    let t = Instant::now();
    let ids = create_runs(&lab, &w, n, "idle");
    wait_all_in_state(&lab, &ids, "idle", Duration::from_secs(60 + n as u64));
    eprintln!("{n} runs idle after {:.1} s; settling {} s", t.elapsed().as_secs_f64(), settle.as_secs());
    std::thread::sleep(settle);

    let cpu = cpu_split(&lab, &w, window);
    let total = cpu.total();
    let (_, list) = lab.get("/runs");
    let still_idle = list.as_array().unwrap().iter().filter(|r| r["state"] == "idle").count();
    assert_eq!(still_idle, n, "every run stayed idle");
    let pid = lab.child.id();
    let (peak, rss) = peak_and_rss_mib(pid);
    let parts = memory_parts(pid);
    println!(
        "{n:>4} idle runs, {:.0} s: lab + children {:.2} %, tmux server {:.2} %, \
         total {total:.2} % of a core (goal < {GOAL_PERCENT} % at 500) {}; agents (not counted) {:.2} %; \
         lab serve RSS {rss:.1} MiB (peak {peak:.1} MiB; {parts})",
        cpu.secs,
        cpu.lab,
        cpu.tmux,
        if total < GOAL_PERCENT { "ok" } else { "OVER" },
        cpu.agents,
    );
    lab.stop();
    // World's drop stops the tmux server (and with it every run) and removes the home.
}

/// Where lab serve's resident memory is (/proc/<pid>/status): anonymous (its heap,
/// the components' memories, stacks), file-backed (its code, mapped files) and shared.
fn memory_parts(pid: u32) -> String {
    let mib = |name| status_kib(pid, name) / 1024.0;
    format!(
        "anonymous {:.1} MiB, files {:.1} MiB, shared {:.1} MiB, {:.0} threads",
        mib("RssAnon:"),
        mib("RssFile:"),
        mib("RssShmem:"),
        status_kib(pid, "Threads:")
    )
}

fn main() {
    let counts = env_counts("LAB_IDLE_RUNS", "50");
    let settle = env_secs("LAB_IDLE_SETTLE_SECS", 70);
    let window = env_secs("LAB_IDLE_SECS", 30);
    for n in counts {
        measure(n, settle, window);
    }
}
