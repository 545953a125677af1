//! Runs through the HTTP API with real tmux, and fake-claude: an agent that writes
//! Claude Code's transcript and runs the hook commands from `--settings` exactly as
//! Claude Code does, with pickers that really react to tmux send-keys.

mod common;

use common::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

fn ask_then_idle() -> Value {
    json!({"steps": [
        {"say": "Let me ask you something."},
        {"ask": three_options()},
        {"say": "Thanks, noted."},
        {"idle": {}},
    ]})
}

fn run_id(run: &Value) -> String {
    run["id"].as_str().unwrap().to_string()
}

#[test]
fn a_spooled_question_is_shown_and_answered_with_paced_keys() {
    let w = World::new();
    let log = w.use_fake_claude(&ask_then_idle());
    let lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "pick a database");
    let id = run_id(&run);
    assert_eq!(run["provider"], "claude-code");
    assert_eq!(run["tmux_socket"], w.home.join("tmux.sock").display().to_string());

    // The per-run settings file: under runtime/ (0700), 0600, hooks baked with this run's paths.
    let settings = w.runtime().join(format!("{id}.settings.json"));
    assert_eq!(std::fs::metadata(w.runtime()).unwrap().permissions().mode() & 0o777, 0o700);
    assert_eq!(std::fs::metadata(&settings).unwrap().permissions().mode() & 0o777, 0o600);
    let doc: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    let pre = doc["hooks"]["PreToolUse"][0]["hooks"][0]["command"].as_str().unwrap();
    assert!(pre.contains("hook spool-write") && pre.contains(&format!("{id}.spool.json")), "{pre}");
    // lab writes nothing of its own into the workdir.
    assert_eq!(std::fs::read_dir(&w.workdir).unwrap().count(), 0);

    let v = lab.wait_state(&id, "question");
    let d = &v["pending_dialog"];
    assert_eq!(d["source"], "spool");
    assert_eq!(d["kind"], "question");
    assert_eq!(d["answerable"], true);
    assert_eq!(d["questions"][0]["options"][1]["label"], "SQLite");
    let tool_id = d["tool_id"].as_str().unwrap().to_string();
    assert!(w.runtime().join(format!("{id}.spool.json")).exists());

    let started = Instant::now();
    let (status, body) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": tool_id, "answers": [{"option": 1}]}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["played"], json!(["Up", "Up", "Up", "Up", "Down", "Enter"]));
    // Six ops with 250 ms between them.
    assert!(started.elapsed() >= Duration::from_millis(1250), "keys were not paced: {:?}", started.elapsed());

    let v = lab.wait_view(&id, "the dialog to resolve", |v| v["state"] != "question");
    assert!(v["pending_dialog"].is_null());
    wait_for(Duration::from_secs(10), "the spool to be cleared", || {
        (!w.runtime().join(format!("{id}.spool.json")).exists()).then_some(())
    });
    let answer = wait_for(Duration::from_secs(10), "fake-claude to log the answer", || {
        World::log_events(&log).into_iter().find(|e| e["event"] == "answer")
    });
    assert_eq!(answer["answers"]["Which database should we use?"], "SQLite", "{answer}");
    let v = lab.wait_state(&id, "idle");
    let kinds: Vec<&str> = v["messages"].as_array().unwrap().iter().map(|m| m["kind"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"tool_use") && kinds.contains(&"tool_result"), "{kinds:?}");
    let seqs: Vec<u64> = v["messages"].as_array().unwrap().iter().map(|m| m["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
}
