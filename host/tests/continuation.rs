//! Resume and fork through `lab serve`'s HTTP API with real tmux and fake-claude (the
//! real agents' proof is in e2e_claude.rs): a run whose session went away while lab was
//! stopped (the machine restarted) is listed as resumable with why it ended, and is
//! resumed under its id with its chat read on, none of it twice; a run outside any
//! repository forks into a run in the same workdir; what cannot be resumed says why.

mod common;

use common::*;
use serde_json::{json, Value};

fn user_texts(v: &Value) -> Vec<String> {
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user" && m["kind"] == "text")
        .map(|m| m["text"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn a_run_whose_machine_restarted_is_listed_resumable_and_resumes_under_its_id() {
    let w = World::new();
    w.use_fake_claude(&json!({"steps": [{"say": "Noted."}, {"idle": {}}]}));
    let lab = w.serve();
    let id = lab.create_run(&w, "claude-code", "Remember PAPAYA.")["id"].as_str().unwrap().to_string();
    lab.wait_view(&id, "the first reply", |v| v["state"] == "idle" && v["messages"].to_string().contains("Noted."));
    let (status, live) = lab.post(&format!("/runs/{id}/resume"), &json!({}));
    assert_eq!((status, live["error"].as_str()), (409, Some("not_resumable")), "a live run: {live}");

    // lab stops; the machine "restarts": every tmux session is gone.
    lab.stop();
    let _ = w.tmux(&["kill-server"]);
    let lab = w.serve();
    let run = lab.wait_view(&id, "the run ended at start", |v| v["state"] == "ended");
    assert_eq!(user_texts(&run), ["Remember PAPAYA."]);
    let (_, body) = lab.get(&format!("/runs/{id}"));
    assert_eq!((body["resumable"].as_bool(), body["forkable"].as_bool()), (Some(true), Some(true)), "{body}");
    assert!(
        body["end_reason"].as_str().unwrap().starts_with("its tmux session was gone when lab serve started"),
        "{body}"
    );
    let listed = lab.get("/runs").1;
    let listed = listed.as_array().unwrap().iter().find(|r| r["id"] == id.as_str()).cloned().unwrap();
    assert_eq!(listed["resumable"], true, "{listed}");

    let (status, resumed) = lab.post(&format!("/runs/{id}/resume"), &json!({"prompt": "Which word?"}));
    assert_eq!(status, 200, "{resumed}");
    assert_eq!((resumed["id"].as_str(), resumed["end_reason"].is_null()), (Some(id.as_str()), true), "{resumed}");
    let v = lab.wait_view(&id, "the resumed run's reply", |v| {
        v["state"] == "idle" && user_texts(v).len() == 2 && v["messages"].to_string().matches("Noted.").count() == 2
    });
    assert_eq!(user_texts(&v), ["Remember PAPAYA.", "Which word?"], "read on from where it ended");
    let seqs: Vec<u64> = v["messages"].as_array().unwrap().iter().map(|m| m["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|p| p[0] < p[1]), "in order, none twice: {seqs:?}");
    // Live: a second resume is refused, the run untouched.
    let (status, again) = lab.post(&format!("/runs/{id}/resume"), &json!({}));
    assert_eq!((status, again["error"].as_str()), (409, Some("not_resumable")), "{again}");
    let (status, stopped) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!(status, 200, "{stopped}");
    assert_eq!(stopped["end_reason"], "stopped by the operator");
}

#[test]
fn a_run_outside_a_repository_forks_into_a_run_in_the_same_workdir() {
    let w = World::new();
    w.use_fake_claude(&json!({"steps": [{"say": "Noted."}, {"idle": {}}]}));
    let lab = w.serve();
    let id = lab.create_run(&w, "claude-code", "Remember PAPAYA.")["id"].as_str().unwrap().to_string();
    lab.wait_view(&id, "the first reply", |v| v["state"] == "idle" && v["messages"].to_string().contains("Noted."));
    // No message: the fork starts idle with its parent's conversation.
    let (status, fork) = lab.post(&format!("/runs/{id}/fork"), &json!({}));
    assert_eq!(status, 201, "{fork}");
    let fork_id = fork["id"].as_str().unwrap().to_string();
    assert_eq!((fork["parent"].as_str(), fork["worktree"].is_null()), (Some(id.as_str()), true), "{fork}");
    assert_eq!(fork["workdir"], w.workdir.to_str().unwrap());
    let v = lab.wait_view(&fork_id, "the fork with its parent's chat", |v| user_texts(v) == ["Remember PAPAYA."]);
    assert_ne!(v["state"], "ended", "{v}");
    // Each goes on alone.
    let (status, _) = lab.post(&format!("/runs/{fork_id}/messages"), &json!({"text": "Only the fork hears this."}));
    assert_eq!(status, 202);
    lab.wait_view(&fork_id, "the fork's own turn", |v| user_texts(v).len() == 2);
    assert_eq!(user_texts(&lab.view(&id)), ["Remember PAPAYA."], "the parent is untouched");
    for bad in [json!({"prompt": ""}), json!({"prompt": 7}), json!({"host": "m1"})] {
        let (status, body) = lab.post(&format!("/runs/{id}/fork"), &bad);
        assert_eq!(status, 400, "{bad}: {body}");
    }
    let (status, body) = lab.post("/runs/r-doesnotexist/fork", &json!({}));
    assert_eq!((status, body["error"].as_str()), (404, Some("run_not_found")), "{body}");
}
