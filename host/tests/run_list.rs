//! The run list as a client follows it, through a real `lab serve` over HTTP: pages
//! newest first (`GET /runs?limit&before`) over a history written into the registry,
//! bad paging a 400, and the list's event stream (`GET /runs/events`): the newest page
//! first, then a real run (fake-claude in real tmux) as it is added and changes.

mod common;

use common::*;
use lab::runs::registry::{Registry, Status};
use lab::store::paths::{Home, RunId};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::time::Duration;

/// `n` ended runs written into `w`'s registry (lab serve not running), created one
/// second apart; their ids, oldest first.
fn ended_runs(w: &World, n: usize) -> Vec<String> {
    let home = Home::new(w.home.clone());
    home.prepare().unwrap();
    let registry = Registry::open(&home.registry()).unwrap();
    let mut records = Vec::new();
    for i in 0..n {
        let at = format!("2026-11-30T{:02}:{:02}:{:02}.000Z", i / 3600, (i / 60) % 60, i % 60);
        let socket = w.home.join("tmux.sock").display().to_string();
        records.push(a_record(RunId::generate(), Status::Ended, &at, &socket, None));
    }
    registry.put_all(&records).unwrap();
    records.into_iter().map(|r| r.id.to_string()).collect()
}

fn ids_of(runs: &Value) -> Vec<String> {
    runs.as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_string()).collect()
}

#[test]
fn the_list_pages_newest_first_and_its_stream_sends_the_front_then_each_change() {
    let w = World::new();
    let older = ended_runs(&w, 120);
    w.use_fake_claude(&json!({"steps": [{"say": "Listed."}, {"idle": {}}]}));
    let lab = w.serve();

    // Pages of 50, newest first, until `next` is null: every run once, in order.
    let mut paged = Vec::new();
    let mut before: Option<String> = None;
    for _ in 0..10 {
        let path = match &before {
            None => "/runs?limit=50".to_string(),
            Some(c) => format!("/runs?limit=50&before={c}"),
        };
        let (status, page) = lab.get(&path);
        assert_eq!(status, 200, "{path}: {page}");
        let ids = ids_of(&page["runs"]);
        assert!(ids.len() <= 50, "{path}");
        paged.extend(ids);
        match page["next"].as_str() {
            Some(c) => before = Some(c.to_string()),
            None => break,
        }
    }
    let newest_first: Vec<String> = older.iter().rev().cloned().collect();
    assert_eq!(paged, newest_first, "every run once, newest first");
    // Without a limit: the whole list, as before (oldest first).
    let (_, all) = lab.get("/runs");
    assert_eq!(ids_of(&all), older);
    for bad in [
        "/runs?limit=0",
        "/runs?limit=1001",
        "/runs?limit=x",
        "/runs?limit=5&before=junk",
        "/runs?before=",
        "/runs?nope=1",
    ] {
        let (status, body) = lab.get(bad);
        if bad == "/runs?before=" {
            assert_eq!(status, 200, "an empty cursor is no cursor: {body}");
            continue;
        }
        assert_eq!((status, body["error"].as_str()), (400, Some("bad_request")), "{bad}: {body}");
    }
    let (status, body) = lab.get(&format!("/runs?before={}", before.unwrap()));
    assert_eq!(status, 400, "a cursor needs a page size: {body}");

    // The stream: the newest page first.
    let resp = lab.event_stream("/runs/events", &[], Duration::from_secs(30));
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut lines = BufReader::new(resp).lines();
    let mut next_event = || -> Value {
        for line in lines.by_ref() {
            let line = line.expect("the stream stays open");
            if let Some(data) = line.strip_prefix("data: ") {
                return serde_json::from_str(data).unwrap();
            }
        }
        panic!("the stream ended");
    };
    let first = next_event();
    assert_eq!(first["type"], "snapshot", "{first}");
    assert_eq!(ids_of(&first["runs"]), newest_first[..50], "the newest page");
    assert!(first["next"].is_string(), "{first}");

    // A run started now: added once, then changed as it goes, to idle; then stopped.
    let id = lab.create_run(&w, "claude-code", "hello")["id"].as_str().unwrap().to_string();
    let mut kinds = Vec::new();
    let mut states = Vec::new();
    let mut stopped = false;
    for _ in 0..200 {
        let ev = next_event();
        assert_eq!(ev["run"]["id"], id.as_str(), "only the run that changed: {ev}");
        kinds.push(ev["type"].as_str().unwrap().to_string());
        let state = ev["run"]["state"].as_str().unwrap().to_string();
        if state == "idle" && !stopped {
            assert_eq!(lab.post(&format!("/runs/{id}/stop"), &json!({})).0, 200);
            stopped = true;
        }
        let ended = state == "ended";
        states.push(state);
        if ended {
            break;
        }
    }
    assert_eq!(kinds[0], "added", "{kinds:?}");
    assert!(kinds[1..].iter().all(|k| k == "changed"), "{kinds:?}");
    assert_eq!(states.last().map(String::as_str), Some("ended"), "{states:?}");
    assert!(states.iter().any(|s| s == "idle"), "{states:?}");
    // No two events in a row show the same entry.
    let distinct: HashSet<&String> = states.iter().collect();
    assert!(distinct.len() >= 2, "{states:?}");
    // The new run heads the first page now.
    let (_, page) = lab.get("/runs?limit=1");
    assert_eq!(ids_of(&page["runs"]), [id]);
}
