//! Search through `lab serve`'s HTTP API with real tmux and fake-claude: every run's
//! messages are found (ended runs too), the query's syntax is never an error, bad
//! parameters are 400s, and an index that is damaged or missing when lab serve starts
//! is built again from every run's transcript, no run lost.

mod common;

use common::*;
use serde_json::{json, Value};
use std::os::unix::fs::MetadataExt;

fn search(lab: &Lab, q: &str) -> Vec<Value> {
    let (status, body) = lab.get(&format!("/search?q={}", url_escape(q)));
    assert_eq!(status, 200, "{body}");
    body["hits"].as_array().unwrap().clone()
}

fn url_escape(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Each run's words are found, in that run.
fn wait_all_found(lab: &Lab, ids: &[String], what: &str) {
    for (i, id) in ids.iter().enumerate() {
        let hit = wait_for(std::time::Duration::from_secs(30), &format!("{what}: run {i}'s words"), || {
            search(lab, &format!("kiwi{i}")).into_iter().find(|h| h["run_id"] == id.as_str())
        });
        assert_eq!((hit["role"].as_str(), hit["seq"].as_u64()), (Some("user"), Some(0)), "{hit}");
        assert!(hit["snippet"].as_str().unwrap().contains(&format!("«kiwi{i}»")), "{hit}");
    }
}

#[test]
fn every_runs_words_are_found_and_a_damaged_or_missing_index_is_built_again() {
    let w = World::new();
    w.use_fake_claude(&json!({"steps": [{"say": "Noted."}, {"idle": {}}]}));
    let lab = w.serve();
    let ids: Vec<String> = (0..3)
        .map(|i| {
            lab.create_run(&w, "claude-code", &format!("Remember kiwi{i} for later."))["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    for id in &ids {
        lab.wait_view(id, "the reply", |v| v["state"] == "idle" && v["messages"].to_string().contains("Noted."));
    }
    // Two of them end: their words stay findable.
    for id in &ids[..2] {
        assert_eq!(lab.post(&format!("/runs/{id}/stop"), &json!({})).0, 200);
    }
    wait_all_found(&lab, &ids, "as they arrive");
    let index = w.home.join("search.db");
    assert_eq!(std::fs::metadata(&index).unwrap().mode() & 0o777, 0o600, "private like the rest of lab's home");
    // Prefix, phrase, one run; FTS syntax is text.
    assert_eq!(search(&lab, "kiw*").len(), 3);
    assert_eq!(search(&lab, "\"remember kiwi1\"").len(), 1);
    assert_eq!(search(&lab, "\"kiwi1 remember\"").len(), 0);
    let (_, one) = lab.get(&format!("/search?q=remember&run={}", ids[2]));
    assert_eq!(one["hits"].as_array().unwrap().len(), 1, "{one}");
    assert_eq!(one["hits"][0]["run_id"], ids[2].as_str());
    assert!(search(&lab, "NEAR(kiwi0 -x) AND:").is_empty());
    for bad in [
        "/search",
        "/search?q=%20",
        "/search?q=kiwi&limit=0",
        "/search?q=kiwi&limit=9999",
        "/search?q=kiwi&run=..%2Fx",
        "/search?q=kiwi&nope=1",
    ] {
        let (status, body) = lab.get(bad);
        assert_eq!((status, body["error"].as_str()), (400, Some("bad_request")), "{bad}: {body}");
    }

    // Stopped in order: the index's log is folded in and emptied; the next start finds
    // every word again without building anything.
    lab.stop();
    let wal = w.home.join("search.db-wal");
    assert!(std::fs::metadata(&wal).map(|m| m.len() == 0).unwrap_or(true), "no log left at rest");
    let lab = w.serve();
    wait_all_found(&lab, &ids, "after an orderly restart");
    let (_, found) = lab.get("/search?q=kiwi0");
    assert_eq!(found["indexing"], false, "{found}");
    assert_eq!(search(&lab, "kiw*").len(), 3, "each message once");

    // Damaged while lab was stopped: moved aside, built again from the transcripts.
    lab.stop();
    std::fs::write(&index, b"not an index: the disk ate it").unwrap();
    let lab = w.serve();
    wait_all_found(&lab, &ids, "after the damage");
    assert!(w.home.join("search.db.damaged").exists());
    assert_eq!(search(&lab, "kiw*").len(), 3, "each message once");

    // Missing: the same.
    lab.stop();
    std::fs::remove_file(&index).unwrap();
    let lab = w.serve();
    wait_all_found(&lab, &ids, "after it was deleted");
    assert_eq!(search(&lab, "kiw*").len(), 3);
    let (status, _) = lab.post(&format!("/runs/{}/stop", ids[2]), &json!({}));
    assert_eq!(status, 200);
}
