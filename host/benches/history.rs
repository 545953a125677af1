//! History benchmark (not a test): what a long history of ended runs costs `lab serve`.
//! Run with
//!
//!     cargo bench -p lab --bench history                         # 100 runs × 1 MiB
//!     LAB_HISTORY_RUNS=100,1000 LAB_HISTORY_KIB=1024 cargo bench -p lab --bench history
//!
//! For each N: a lab home whose registry holds N ended claude-code runs, each with a
//! real-format transcript of about `LAB_HISTORY_KIB` KiB (lines of a recorded Claude
//! Code session, repeated); then a release `lab serve` is started on it, stopped, and
//! started again (a restart: the component compile cache is warm) and we print: the
//! time to its "serving" line, its RSS then, `GET /runs`, the first
//! `GET /runs/{id}/messages` of one run (its transcript read on first view) and of a
//! second, and the RSS after. Everything is removed at the end.

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use lab::paths::{Home, RunId};
use lab::runs::registry::{Registry, RunRecord, Status};
use std::time::{Duration, Instant};

fn rss_mib(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb: f64 = s
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One transcript of about `kib` KiB: a recorded session's lines, repeated.
fn transcript(kib: usize) -> Vec<u8> {
    let sample = include_str!("../../providers/claude-code/testdata/session-ask-answered.jsonl");
    let mut out = Vec::with_capacity(kib * 1024 + sample.len());
    while out.len() < kib * 1024 {
        out.extend_from_slice(sample.as_bytes());
    }
    out
}

fn main() {
    let runs: Vec<usize> = std::env::var("LAB_HISTORY_RUNS")
        .unwrap_or_else(|_| "100".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let kib: usize = std::env::var("LAB_HISTORY_KIB").ok().and_then(|v| v.parse().ok()).unwrap_or(1024);
    let body = transcript(kib);
    for n in runs {
        let w = World::new();
        let home = Home::new(w.home.clone());
        home.prepare().unwrap();
        let dir = w.dir.path().join("transcripts");
        std::fs::create_dir_all(&dir).unwrap();
        let mut ids = Vec::new();
        {
            let registry = Registry::open(&home.registry()).unwrap();
            for i in 0..n {
                let id = RunId::generate();
                let t = dir.join(format!("{i}.jsonl"));
                std::fs::write(&t, &body).unwrap();
                registry
                    .put(&RunRecord {
                        id: id.clone(),
                        provider: "claude-code".into(),
                        workdir: "/tmp".into(),
                        prompt: "hello".into(),
                        permission_mode: None,
                        status: Status::Ended,
                        created_at: format!("2026-11-30T00:00:{:02}.{:03}Z", i % 60, i % 1000),
                        ended_at: Some("2026-11-30T01:00:00.000Z".into()),
                        tmux_target: format!("lab-{id}"),
                        tmux_socket: w.home.join("tmux.sock").display().to_string(),
                        session_id: None,
                        transcript_path: Some(t.display().to_string()),
                        dialog_hooker: true,
                        error: None,
                    })
                    .unwrap();
                ids.push(id);
            }
        }
        let history_mib = (body.len() * n) as f64 / (1 << 20) as f64;
        // A first start fills the compile cache; the figures are of the restart.
        w.serve().stop();
        let t = Instant::now();
        let lab = w.serve();
        let serving = t.elapsed();
        let pid = lab.child.id();
        let rss_start = rss_mib(pid);
        let t = Instant::now();
        let (status, list) = lab.get("/runs");
        let list_took = t.elapsed();
        assert_eq!(status, 200);
        assert_eq!(list.as_array().unwrap().len(), n);
        let mut first_views = Vec::new();
        for id in ids.iter().take(2) {
            let t = Instant::now();
            let v = lab.view(id.as_str());
            first_views.push(t.elapsed());
            assert!(!v["messages"].as_array().unwrap().is_empty(), "the chat is shown");
        }
        let t = Instant::now();
        lab.view(ids[0].as_str());
        let again = t.elapsed();
        let rss_after = rss_mib(pid);
        println!(
            "{n} ended runs, {history_mib:.0} MiB of transcripts: serving after {:.0} ms (RSS {rss_start:.0} MiB); \
             GET /runs {:.1} ms; first view of a run {:.0} ms, of another {:.0} ms, again {:.1} ms; RSS after {rss_after:.0} MiB",
            ms(serving),
            ms(list_took),
            ms(first_views[0]),
            ms(first_views[1]),
            ms(again),
        );
        lab.stop();
    }
}
