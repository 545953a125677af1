//! Search benchmark (not a test): the index over every run's messages, on the history
//! bench's data. Run with
//!
//!     cargo bench -p lab --bench search                            # 100 runs × 1 MiB
//!     LAB_SEARCH_RUNS=1000 LAB_SEARCH_KIB=1024 cargo bench -p lab --bench search
//!
//! For each N: a lab home whose registry holds N ended claude-code runs, each with a
//! real-format transcript of about `LAB_SEARCH_KIB` KiB (`support::history`: lines of a
//! recorded Claude Code session, repeated), and no index. A release `lab serve` starts
//! and builds the index from the transcripts; we print the build time (until `GET
//! /search` says it is no longer indexing), the index's size on disk, then
//! `LAB_SEARCH_QUERIES` (300) queries through `GET /search?limit=20` — words, phrases
//! and prefixes of the session's own words — as p50 / p99, and then how long a message
//! typed into a live run (fake-claude) takes to be found: from `POST /runs/{id}/messages`
//! to its first hit, `LAB_SEARCH_LIVE` (20) times, p50 / p99.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/mod.rs"]
mod support;

use common::*;
use serde_json::json;
use std::time::{Duration, Instant};
use support::{ended_history, env_counts, env_num, ms, pct, transcript};

const WORDS: &[&str] = &["database", "migration", "endpoint", "orders", "history", "PostgreSQL", "first", "start"];

fn main() {
    let runs = env_counts("LAB_SEARCH_RUNS", "100");
    let kib: usize = env_num("LAB_SEARCH_KIB", 1024);
    let queries: usize = env_num("LAB_SEARCH_QUERIES", 300);
    let live: usize = env_num("LAB_SEARCH_LIVE", 20);
    let body = transcript(kib);
    for n in runs {
        let w = World::new();
        w.use_fake_claude(&json!({"steps": [{"say": "Ready."}, {"idle": {}}]}));
        let ids = ended_history(&w, n, &body);
        let history_mib = (body.len() * n) as f64 / (1 << 20) as f64;
        let t = Instant::now();
        let lab = w.serve();
        let built = wait_for(Duration::from_secs(3600), "the index built from the transcripts", || {
            let (status, r) = lab.get("/search?q=database&limit=1");
            assert_eq!(status, 200, "{r}");
            (r["indexing"] == false).then(|| t.elapsed())
        });
        let size: u64 = ["search.db", "search.db-wal"]
            .iter()
            .filter_map(|f| std::fs::metadata(w.home.join(f)).ok())
            .map(|m| m.len())
            .sum();
        let (_, one) = lab.get(&format!("/search?q=database&run={}&limit=1", ids[n - 1]));
        let (_, any) = lab.get("/search?q=database&limit=3");
        assert_eq!(one["hits"].as_array().map(Vec::len), Some(1), "the last run is indexed: {one} {any}");

        let mut lat = Vec::new();
        for i in 0..queries {
            let word = WORDS[i % WORDS.len()];
            let q = match i % 3 {
                0 => word.to_string(),
                1 => format!("%22which%20database%22%20{}", WORDS[(i / 3) % WORDS.len()]),
                _ => format!("{}*", &word[..3]),
            };
            let t = Instant::now();
            let (status, r) = lab.get(&format!("/search?q={q}&limit=20"));
            lat.push(ms(t.elapsed()));
            assert_eq!(status, 200, "{r}");
        }
        let q = pct(lat);

        let run = lab.create_run(&w, "claude-code", "Wait for my messages.")["id"].as_str().unwrap().to_string();
        lab.wait_view(&run, "the live run idle", |v| v["state"] == "idle");
        let mut found = Vec::new();
        for i in 0..live {
            let word = format!("zebrafruit{i}x{}", std::process::id());
            let t = Instant::now();
            let (status, b) =
                lab.post(&format!("/runs/{run}/messages"), &json!({"text": format!("Note {word} please.")}));
            assert_eq!(status, 202, "{b}");
            wait_for(Duration::from_secs(30), "the message found", || {
                let (_, r) = lab.get(&format!("/search?q={word}&limit=1"));
                (r["hits"].as_array().map(Vec::len) == Some(1)).then_some(())
            });
            found.push(ms(t.elapsed()));
            lab.wait_view(&run, "idle again", |v| v["state"] == "idle");
        }
        let f = pct(found);
        println!(
            "{n} ended runs, {history_mib:.0} MiB of transcripts: index built in {:.1} s, {:.0} MiB on disk; \
             {} queries (word, phrase, prefix; limit 20): p50 {:.1} ms, p99 {:.1} ms; \
             a message typed into a live run found after: p50 {:.0} ms, p99 {:.0} ms ({} samples)",
            built.as_secs_f64(),
            size as f64 / (1 << 20) as f64,
            q.n,
            q.p50,
            q.p99,
            f.p50,
            f.p99,
            f.n,
        );
        let _ = lab.post(&format!("/runs/{run}/stop"), &json!({}));
        lab.stop();
    }
}
