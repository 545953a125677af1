//! Idle-cost benchmark (not a test): what N idle runs cost while nothing happens.
//! Run with
//!
//!     cargo bench -p lab --bench idle                 # N = 50
//!     LAB_IDLE_RUNS=200,500 cargo bench -p lab --bench idle
//!
//! For each N: a release `lab serve` with its own home and tmux server, N runs of
//! fake-claude that end their turn and wait in the composer (no CPU of their own),
//! started through the HTTP API; once all are idle, a settle period
//! (`LAB_IDLE_SETTLE_SECS`, default 40: the tailers' backstop polls reach their
//! slowest pace after 31 s), then CPU is sampled over `LAB_IDLE_SECS` (default 30)
//! from /proc/<pid>/stat: utime+stime of lab serve plus everything it spawned (live
//! descendants and reaped children), and of the tmux server plus what it reaped (the
//! session-closed hook's shells). The agents are the tmux server's live children;
//! they are shown apart and not counted. Everything is stopped and removed at the end
//! (lab serve, the tmux server and its runs, the temp home).

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

/// The goal (issue 12): lab + its children + the tmux server under 2 % of a core at
/// 500 idle runs.
const GOAL_PERCENT: f64 = 2.0;

fn env_secs(name: &str, default: u64) -> Duration {
    Duration::from_secs(std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default))
}

/// /proc/<pid>/stat: (ppid, utime+stime, cutime+cstime) in clock ticks.
fn stat(pid: u32) -> Option<(u32, u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: fields are counted after its `)`.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    // rest[0] is field 3 (state): ppid is field 4, utime..cstime fields 14..17.
    Some((n(1)? as u32, n(11)? + n(12)?, n(13)? + n(14)?))
}

/// Every live process as (pid, ppid).
fn processes() -> Vec<(u32, u32)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, stat(pid)?.0)))
        .collect()
}

fn descendants(root: u32, all: &[(u32, u32)]) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for &(c, pp) in all {
            if pp == p {
                out.push(c);
                todo.push(c);
            }
        }
    }
    out
}

/// CPU ticks so far: (lab serve + its live descendants + its reaped children,
/// tmux server + its reaped children, the agents: the tmux server's live descendants).
fn ticks(lab: u32, server: u32) -> (u64, u64, u64) {
    let all = processes();
    let own = |pid: u32| stat(pid).map_or(0, |(_, t, c)| t + c);
    let lab_total = own(lab) + descendants(lab, &all).into_iter().map(own).sum::<u64>();
    let server_total = own(server);
    let agents = descendants(server, &all).into_iter().map(|p| stat(p).map_or(0, |(_, t, _)| t)).sum();
    (lab_total, server_total, agents)
}

fn measure(n: usize, settle: Duration, window: Duration) {
    let w = World::new();
    w.use_fake_claude(&json!({"steps": [{"say": "Ready when you are."}, {"idle": {}}]}));
    let lab = w.serve();
    let t = Instant::now();
    let ids: Vec<String> =
        (0..n).map(|_| lab.create_run(&w, "claude-code", "idle")["id"].as_str().unwrap().to_string()).collect();
    wait_for(Duration::from_secs(60 + n as u64), "every run idle", || {
        let (_, list) = lab.get("/runs");
        let idle = list.as_array()?.iter().filter(|r| r["state"] == "idle").count();
        (idle == ids.len()).then_some(())
    });
    eprintln!("{n} runs idle after {:.1} s; settling {} s", t.elapsed().as_secs_f64(), settle.as_secs());
    std::thread::sleep(settle);

    let server = String::from_utf8(w.tmux(&["display-message", "-p", "#{pid}"]).stdout).unwrap();
    let server: u32 = server.trim().parse().expect("the tmux server's pid");
    let lab_pid = lab.child.id();
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let (l0, s0, a0) = ticks(lab_pid, server);
    let t0 = Instant::now();
    std::thread::sleep(window);
    let (l1, s1, a1) = ticks(lab_pid, server);
    let secs = t0.elapsed().as_secs_f64();
    let pct = |d: u64| d as f64 / hz / secs * 100.0;
    let (lab_pct, server_pct) = (pct(l1.saturating_sub(l0)), pct(s1.saturating_sub(s0)));
    let total = lab_pct + server_pct;
    let (_, list) = lab.get("/runs");
    let still_idle = list.as_array().unwrap().iter().filter(|r| r["state"] == "idle").count();
    assert_eq!(still_idle, n, "every run stayed idle");
    println!(
        "{n:>4} idle runs, {secs:.0} s: lab + children {lab_pct:.2} %, tmux server {server_pct:.2} %, \
         total {total:.2} % of a core (goal < {GOAL_PERCENT} % at 500) {}; agents (not counted) {:.2} %",
        if total < GOAL_PERCENT { "ok" } else { "OVER" },
        pct(a1.saturating_sub(a0)),
    );
    lab.stop();
    // World's drop stops the tmux server (and with it every run) and removes the home.
}

fn main() {
    let counts: Vec<usize> = std::env::var("LAB_IDLE_RUNS")
        .unwrap_or_else(|_| "50".into())
        .split(',')
        .map(|s| s.trim().parse().expect("LAB_IDLE_RUNS: run counts, comma-separated"))
        .collect();
    let settle = env_secs("LAB_IDLE_SETTLE_SECS", 40);
    let window = env_secs("LAB_IDLE_SECS", 30);
    for n in counts {
        measure(n, settle, window);
    }
}
