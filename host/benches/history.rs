//! History benchmark (not a test): what a long history of ended runs costs `lab serve`.
//! Run with
//!
//!     cargo bench -p lab --bench history                         # 100 runs × 1 MiB
//!     LAB_HISTORY_RUNS=1000,10000 LAB_HISTORY_KIB=1024 cargo bench -p lab --bench history
//!
//! For each N: a lab home whose registry holds N ended claude-code runs, each with a
//! real-format transcript of about `LAB_HISTORY_KIB` KiB (lines of a recorded Claude
//! Code session, repeated; hard links of one file, see `support::history`), used as
//! weeks of work leave it (`support::use_history`: lab serve builds its search index
//! and usage books from every transcript, one audited action per run); we print how
//! long that build took and the index's size against the transcripts'. Then a release
//! `lab serve` is started on it, stopped, and started again (a restart: the component
//! compile cache is warm) and we print: the time from its spawn to the first answer of
//! `GET /runs?limit=50` (asked every millisecond, as a browser left open asks), then,
//! on another start, the time to its "serving" line, its
//! RSS then, `GET /runs` (p50 of 5), the first `GET /runs/{id}/messages` of one run
//! (its transcript read on first view) and of a second, the RSS after, then the first
//! `LAB_HISTORY_OPEN` (1,000) chats opened one after the other as the UI opens one
//! (`?limit=200`) and the RSS then. Everything is removed at the end.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/mod.rs"]
mod support;

use common::*;
use support::{ended_history, env_counts, env_num, index_bytes, measure_restart, ms, transcript, use_history};

fn main() {
    let runs = env_counts("LAB_HISTORY_RUNS", "100");
    let kib: usize = env_num("LAB_HISTORY_KIB", 1024);
    let body = transcript(kib);
    for n in runs {
        let w = World::new();
        let ids = ended_history(&w, n, &body);
        let history_mib = (body.len() * n) as f64 / (1 << 20) as f64;
        let built = use_history(&w, &ids, std::time::Duration::from_secs(3600));
        let index = index_bytes(&w);
        let r = measure_restart(&w, &ids, 5, env_num("LAB_HISTORY_OPEN", 1000));
        println!(
            "{n} ended runs, {history_mib:.0} MiB of transcripts, indexed in {:.1} s: index {:.0} MiB ({:.0} % of the transcripts); \
             first answer (GET /runs?limit=50) after {:.0} ms; serving after {:.0} ms (RSS {:.0} MiB); \
             GET /runs {:.1} ms (RSS then {:.0} MiB); GET /runs?limit=50 {:.1} ms; first view of a run {:.0} ms, of another {:.0} ms, again {:.1} ms; RSS after {:.0} MiB; \
             {} chats opened (newest page): p50 {:.0} ms, p99 {:.0} ms, RSS then {:.0} MiB",
            built.as_secs_f64(),
            index as f64 / (1 << 20) as f64,
            100.0 * index as f64 / (body.len() * n) as f64,
            ms(r.first_answer),
            ms(r.serving),
            r.rss_serving_mib,
            r.list.p50,
            r.rss_listed_mib,
            r.page.p50,
            ms(r.first_views[0]),
            ms(r.first_views[1]),
            ms(r.again),
            r.rss_after_mib,
            r.open_all.n,
            r.open_all.p50,
            r.open_all.p99,
            r.rss_all_open_mib,
        );
    }
}
