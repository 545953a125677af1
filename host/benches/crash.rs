//! Crash benchmark (not a test): what `lab serve` costs when it starts after a crash or
//! a reboot that took the tmux server down while runs were live. Run with
//!
//!     cargo bench -p lab --bench crash                              # 1,000 runs
//!     LAB_CRASH_RUNS=300,1000 LAB_CRASH_KIB=549 cargo bench -p lab --bench crash
//!
//! For each N: a lab home (its component compile cache filled by one start on an empty
//! registry) whose registry holds N active claude-code runs whose tmux sessions are
//! gone (no tmux server at all), each with a real-format transcript of `LAB_CRASH_KIB`
//! KiB (549: ten messages of ~54 KiB, lines of a recorded Claude Code session
//! repeated). Then:
//!
//! 1. **one start, on a home used as after weeks of work**: the runs were first used
//!    ended (lab serve built the search index and usage books from their transcripts,
//!    one audited action each), then a lab serve was killed (its index not closed in
//!    order, as in a crash) and the runs made active again. Release `lab serve` is
//!    started; printed: the time from its spawn to the first answer of `GET
//!    /runs?limit=50`, the time until `GET /runs` shows every run ended (polled every
//!    10 ms), the peak RSS (VmHWM) and the RSS 2 s after the last end.
//! 2. **a start stopped half-way, then another**: the same home again with the N runs
//!    active; `lab serve` is killed (SIGKILL) as soon as `GET /runs` shows a first
//!    run ended; the registry says how many ends it recorded; a second start ends the
//!    rest. Printed: those counts, the second start's figures as in 1, and how many
//!    of the ends the first start recorded the second one wrote again (their
//!    `ended_at` changed): the goal is none.
//!
//! Everything is removed at the end. `cargo test -p lab --bench crash` (debug build)
//! runs 20 runs of 16 KiB.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/mod.rs"]
mod support;

use common::*;
use lab::runs::registry::{Registry, Status};
use lab::store::paths::{Home, RunId};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use support::{env_counts, env_num, first_answer, history, index_bytes, ms, peak_and_rss_mib, use_history};

/// How long every run may take to be ended before the bench gives up.
const ALL_ENDED_WITHIN: Duration = Duration::from_secs(120);

struct Start {
    /// From the spawn to the first answer of `GET /runs?limit=50`.
    serving: Duration,
    all_ended: Duration,
    peak_mib: f64,
    settled_mib: f64,
}

/// How many of `ids` `GET /runs` shows ended.
fn ended(lab: &Lab, n: usize) -> usize {
    let (status, list) = lab.get("/runs");
    assert_eq!(status, 200, "GET /runs: {list}");
    let runs = list.as_array().expect("a list");
    assert_eq!(runs.len(), n, "every run listed");
    runs.iter().filter(|r| r["state"] == "ended").count()
}

/// Start lab serve on `w` and measure it until every one of the `n` runs is ended.
fn start_and_end_all(w: &World, n: usize) -> Start {
    let t = Instant::now();
    let (serving, lab) = first_answer(w, "/runs?limit=50");
    let deadline = Instant::now() + ALL_ENDED_WITHIN;
    while ended(&lab, n) < n {
        assert!(Instant::now() < deadline, "every run ended within {ALL_ENDED_WITHIN:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    let all_ended = t.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    let (peak_mib, settled_mib) = peak_and_rss_mib(lab.child.id());
    lab.stop();
    Start { serving, all_ended, peak_mib, settled_mib }
}

/// `w`'s history as a crash leaves it after weeks of use: its runs used
/// ([`use_history`]: search index, usage books and audit log built), then a lab serve
/// started and killed (the index not closed in order), then every run made active
/// again, its tmux session gone (the crash took the server down). lab serve must not
/// run. Returns the index's bytes.
fn crashed_after_use(w: &World, n: usize, body: &[u8]) -> u64 {
    let ids = history(w, n, body, Status::Ended);
    use_history(w, &ids, Duration::from_secs(3600));
    let mut lab = w.serve();
    lab.child.kill().unwrap();
    lab.child.wait().unwrap();
    let home = Home::new(w.home.clone());
    let registry = Registry::open(&home.registry()).unwrap();
    let mut records = registry.list().unwrap();
    for r in &mut records {
        r.status = Status::Active;
        r.ended_at = None;
        r.end_reason = None;
    }
    registry.put_all(&records).unwrap();
    index_bytes(w)
}

/// The registry's records of `w`, by id: (status, ended_at). lab serve must not run.
fn recorded(w: &World) -> HashMap<RunId, (Status, Option<String>)> {
    let home = Home::new(w.home.clone());
    let r = Registry::open(&home.registry()).unwrap();
    r.list().unwrap().into_iter().map(|rec| (rec.id, (rec.status, rec.ended_at))).collect()
}

fn main() {
    let small = cfg!(debug_assertions);
    let runs = env_counts("LAB_CRASH_RUNS", if small { "20" } else { "1000" });
    let kib: usize = env_num("LAB_CRASH_KIB", if small { 16 } else { 549 });
    let body = support::transcript(kib);
    println!("runs live when their tmux server died, then lab serve started (transcripts of {kib} KiB each)");
    for n in runs {
        let w = World::new();
        // (Its use fills the compile cache, as on any start after the first.)
        let index = crashed_after_use(&w, n, &body);
        let one = start_and_end_all(&w, n);
        println!(
            "{n} runs (a home used: search index of {:.0} MiB, usage, audit): first answer after {:.0} ms; \
             all ended after {:.0} ms; peak RSS {:.0} MiB, settled {:.0} MiB",
            index as f64 / (1 << 20) as f64,
            ms(one.serving),
            ms(one.all_ended),
            one.peak_mib,
            one.settled_mib
        );

        // A start stopped half-way, then another.
        let w = World::new();
        w.serve().stop();
        history(&w, n, &body, Status::Active);
        let t = Instant::now();
        let mut lab = w.serve();
        let deadline = Instant::now() + ALL_ENDED_WITHIN;
        while ended(&lab, n) == 0 {
            assert!(Instant::now() < deadline, "a first run ended within {ALL_ENDED_WITHIN:?}");
            std::thread::sleep(Duration::from_millis(2));
        }
        let killed_after = t.elapsed();
        lab.child.kill().unwrap();
        lab.child.wait().unwrap();
        let first = recorded(&w);
        let first_ended = first.values().filter(|(s, _)| *s == Status::Ended).count();
        let two = start_and_end_all(&w, n);
        let second = recorded(&w);
        let redone = first
            .iter()
            .filter(|(id, (s, at))| *s == Status::Ended && second.get(*id).map(|(_, a)| a) != Some(at))
            .count();
        assert_eq!(redone, 0, "a second start wrote again ends the first had recorded");
        println!(
            "{n} runs, the first start killed after {:.0} ms with {first_ended} ends recorded; the second: first answer after {:.0} ms; \
             all ended after {:.0} ms; peak RSS {:.0} MiB, settled {:.0} MiB; ends recorded by the first written again: {redone}",
            ms(killed_after),
            ms(two.serving),
            ms(two.all_ended),
            two.peak_mib,
            two.settled_mib
        );
    }
}
