//! Runs through the HTTP API with real tmux, and fake-claude: an agent that writes
//! Claude Code's transcript and runs the hook commands from `--settings` exactly as
//! Claude Code does, with pickers that really react to tmux send-keys.

mod common;

use common::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

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
    assert!(pre.contains("hook dialog-spool") && pre.contains(&format!("{id}.spool.json")), "{pre}");
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
    assert_eq!(status, 202, "{body}");
    let keys = json!(["Down", "Down", "Down", "Down", "Up", "Up", "Up", "Up", "Down", "Enter"]);
    assert_eq!(body["keys"], keys);
    // The POST returns once the guard has passed, not after the last key (ten ops with
    // 250 ms between them take 2.25 s); the answer's progress shows the rest.
    let returned = started.elapsed();
    assert!(returned < Duration::from_millis(1500), "the answer POST waited for its keys: {returned:?}");
    let v = lab.wait_view(&id, "the answer to be played", |v| v["answer"]["state"] == "played");
    assert!(started.elapsed() >= Duration::from_millis(2250), "keys were not paced: {:?}", started.elapsed());
    assert_eq!(v["answer"]["tool_id"], tool_id.as_str(), "{v}");
    assert_eq!(v["answer"]["keys"], keys);
    assert_eq!(v["answer"]["played"], 10);
    assert!(v["answer"]["error"].is_null() && v["answer"]["finished_at"].is_string(), "{v}");
    let (_, run) = lab.get(&format!("/runs/{id}"));
    assert_eq!(run["answer"]["state"], "played", "{run}");

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

fn pending_tool_id(v: &Value) -> String {
    v["pending_dialog"]["tool_id"].as_str().expect("a pending dialog").to_string()
}

#[test]
fn the_composer_is_locked_while_a_dialog_is_pending() {
    let w = World::new();
    let log = w.use_fake_claude(&ask_then_idle());
    let lab = w.serve();
    let id = run_id(&lab.create_run(&w, "claude-code", "hello"));
    let v = lab.wait_state(&id, "question");
    let (status, body) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "are you there?"}));
    assert_eq!((status, body["error"].as_str()), (409, Some("dialog_pending")), "{body}");

    let tool_id = pending_tool_id(&v);
    let (status, _) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": tool_id, "answers": [{"option": 0}]}));
    assert_eq!(status, 202);
    lab.wait_state(&id, "idle");
    let text = "next: C-c ; \"quoted\" é";
    let (status, body) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": text}));
    assert_eq!(status, 202, "{body}");
    let got = wait_for(Duration::from_secs(10), "the message to reach the agent", || {
        World::log_events(&log).into_iter().find(|e| e["event"] == "user_message" && e["source"] != "prompt")
    });
    assert_eq!(got["text"], text, "{got}");
    let v = lab.wait_view(&id, "the message in the chat", |v| {
        v["messages"].as_array().unwrap().iter().any(|m| m["role"] == "user" && m["text"] == text)
    });
    assert_ne!(v["state"], "question");
}

#[test]
fn stale_repeated_and_concurrent_answers_play_keys_once() {
    let w = World::new();
    let (log, lab, id, tool_id) = run_at_question(&w);

    let (status, body) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": "toolu_stale", "answers": [{"option": 0}]}));
    assert_eq!((status, body["error"].as_str()), (409, Some("dialog_changed")), "{body}");
    // Malformed answers are refused before anything is played.
    for bad in [
        json!({"tool_id": tool_id, "answers": [{"option": 7}]}),
        json!({"tool_id": tool_id, "answers": [{"option": 0}, {"option": 1}]}),
    ] {
        let (status, body) = lab.post(&format!("/runs/{id}/dialog/answer"), &bad);
        assert_eq!((status, body["error"].as_str()), (400, Some("bad_request")), "{body}");
    }
    let (status, _) = lab.post_raw(&format!("/runs/{id}/dialog/answer"), "{not json");
    assert_eq!(status, 400);

    let url = lab.url.clone();
    let handles: Vec<_> = (0..2)
        .map(|i| {
            let url = url.clone();
            let id = id.clone();
            let tool_id = tool_id.clone();
            let client = lab.client_from(reqwest::blocking::Client::builder());
            std::thread::spawn(move || {
                let r = client
                    .post(format!("{url}/runs/{id}/dialog/answer"))
                    .json(&json!({"tool_id": tool_id, "answers": [{"option": i}]}))
                    .send()
                    .unwrap();
                let status = r.status().as_u16();
                (status, r.json::<Value>().unwrap())
            })
        })
        .collect();
    let results: Vec<(u16, Value)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let ok = results.iter().filter(|(s, _)| *s == 202).count();
    assert_eq!(ok, 1, "exactly one answer plays keys: {results:?}");
    let other = results.iter().find(|(s, _)| *s != 202).unwrap();
    assert_eq!((other.0, other.1["error"].as_str()), (409, Some("no_dialog")), "{other:?}");

    lab.wait_view(&id, "the dialog to resolve", |v| v["state"] != "question");
    let (status, body) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": tool_id, "answers": [{"option": 0}]}));
    assert_eq!((status, body["error"].as_str()), (409, Some("no_dialog")), "{body}");
    let answers: Vec<Value> = wait_for(Duration::from_secs(10), "the answer", || {
        let a: Vec<Value> = World::log_events(&log).into_iter().filter(|e| e["event"] == "answer").collect();
        (!a.is_empty()).then_some(a)
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(World::log_events(&log).into_iter().filter(|e| e["event"] == "answer").count(), 1, "{answers:?}");
}

/// An answer the guard accepted but that cannot be typed (the run's session went away
/// before its keys) fails after its 202: the view and `GET /runs/{id}` say why, and
/// nothing was typed.
#[test]
fn an_accepted_answer_that_cannot_be_played_reports_its_failure() {
    let w = World::new();
    let (log, lab, id, tool_id) = run_at_question(&w);
    // Multi-key answers (the last option: Down ×2, then Enter) give the kill time to land first.
    let (status, body) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": tool_id, "answers": [{"option": 2}]}));
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["answer"]["tool_id"], tool_id.as_str(), "{body}");
    assert!(matches!(body["answer"]["state"].as_str(), Some("waiting" | "playing")), "{body}");
    assert!(w.tmux(&["kill-session", "-t", &format!("=lab-{id}")]).status.success());
    let v = lab.wait_view(&id, "the answer to fail", |v| v["answer"]["state"] == "failed");
    assert!(v["answer"]["error"]["error"].is_string() && v["answer"]["error"]["message"].is_string(), "{v}");
    assert!(v["answer"]["finished_at"].is_string(), "{v}");
    let (_, run) = lab.get(&format!("/runs/{id}"));
    assert_eq!(run["answer"]["state"], "failed", "{run}");
    // The failure may come first (send-keys finds no session) or the run's end may.
    lab.wait_state(&id, "ended");
    assert!(World::log_events(&log).iter().all(|e| e["event"] != "answer"), "nothing reached the agent");
    // lab keeps serving.
    let (status, _) = lab.get("/runs");
    assert_eq!(status, 200);
}

#[test]
fn esc_in_the_terminal_clears_the_dialog_through_the_transcript_backstop() {
    let w = World::new();
    let log = w.use_fake_claude(&ask_then_idle());
    let lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "hello");
    let id = run_id(&run);
    lab.wait_state(&id, "question");
    let spool = w.runtime().join(format!("{id}.spool.json"));
    assert!(spool.exists());
    // The operator presses Esc in the TUI: no PostToolUse fires.
    let out = w.tmux(&["send-keys", "-t", run["tmux_target"].as_str().unwrap(), "Escape"]);
    assert!(out.status.success());
    let v = lab.wait_view(&id, "the dialog to go away", |v| v["state"] != "question");
    assert!(v["pending_dialog"].is_null());
    let result = v["messages"].as_array().unwrap().iter().find(|m| m["kind"] == "tool_result").cloned().unwrap();
    assert_eq!(result["is_error"], true);
    // The backstop GC deleted the stale spool.
    wait_for(Duration::from_secs(5), "the stale spool to be deleted", || (!spool.exists()).then_some(()));
    assert!(!World::log_events(&log).iter().any(|e| e["event"] == "hook" && e["hook_event_name"] == "PostToolUse"));
}

#[test]
fn the_seed_flush_on_resolve_behaviour_works_from_the_spool_alone() {
    let w = World::new();
    let mut script = ask_then_idle();
    script["flush_pending_tool_use"] = json!(false);
    let log = w.use_fake_claude(&script);
    let lab = w.serve();
    let id = run_id(&lab.create_run(&w, "claude-code", "hello"));
    let v = lab.wait_state(&id, "question");
    assert_eq!(v["pending_dialog"]["source"], "spool");
    assert!(!v["messages"].as_array().unwrap().iter().any(|m| m["kind"] == "tool_use"), "nothing flushed yet");
    let (status, _) = lab.post(
        &format!("/runs/{id}/dialog/answer"),
        &json!({"tool_id": pending_tool_id(&v), "answers": [{"other": "Use ; and C-c literally"}]}),
    );
    assert_eq!(status, 202);
    let v = lab.wait_state(&id, "idle");
    assert!(v["messages"].as_array().unwrap().iter().any(|m| m["kind"] == "tool_use"));
    let answer = World::log_events(&log).into_iter().find(|e| e["event"] == "answer").unwrap();
    assert_eq!(answer["answers"]["Which database should we use?"], "Use ; and C-c literally");
}

#[test]
fn killing_the_agent_ends_the_run_and_removes_its_files() {
    let w = World::new();
    w.use_fake_claude(&ask_then_idle());
    let lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "hello");
    let id = run_id(&run);
    lab.wait_state(&id, "question");
    let pid = String::from_utf8(
        w.tmux(&["display-message", "-p", "-t", run["tmux_target"].as_str().unwrap(), "#{pane_pid}"]).stdout,
    )
    .unwrap();
    let pid: i32 = pid.trim().parse().unwrap();
    // The agent got its argv, workdir and environment from a private file that is gone
    // once it started; its environment is not on its command line.
    assert!(!w.runtime().join(format!("{id}.launch.json")).exists());
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(cmdline.contains("fake-claude") && cmdline.contains("--settings"), "{cmdline}");
    assert!(!cmdline.contains("FAKE_CLAUDE_SCRIPT") && !cmdline.contains("agent-exec"), "{cmdline}");
    let environ = String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/environ")).unwrap()).replace('\0', "\n");
    assert!(environ.lines().any(|l| l.starts_with("FAKE_CLAUDE_SCRIPT=")), "the provider env from lab.toml");
    assert!(environ.lines().any(|l| l == format!("HOME={}", w.agent_home.display())), "lab serve's env");
    assert!(!environ.lines().any(|l| l.starts_with("LAB_LOG=")));
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let v = lab.wait_state(&id, "ended");
    assert!(v["pending_dialog"].is_null());
    for f in ["settings", "spool", "marker"] {
        assert!(!w.runtime().join(format!("{id}.{f}.json")).exists(), "{f} file left behind");
    }
    let (_, r) = lab.get(&format!("/runs/{id}"));
    assert_eq!(r["state"], "ended");
    assert!(r["ended_at"].is_string());
    let (status, body) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "hi"}));
    assert_eq!((status, body["error"].as_str()), (409, Some("run_ended")));
}

#[test]
fn a_restart_of_lab_serve_keeps_the_pending_dialog_answerable() {
    let w = World::new();
    let log = w.use_fake_claude(&ask_then_idle());
    let lab = w.serve();
    let id = run_id(&lab.create_run(&w, "claude-code", "hello"));
    let before = lab.wait_state(&id, "question");
    let messages_before = before["messages"].clone();
    lab.stop();

    let lab = w.serve();
    let (status, list) = lab.get("/runs");
    assert_eq!(status, 200);
    assert!(list.as_array().unwrap().iter().any(|r| r["id"] == id.as_str()));
    let v = lab.wait_state(&id, "question");
    assert_eq!(v["pending_dialog"]["tool_id"], before["pending_dialog"]["tool_id"]);
    assert_eq!(v["messages"], messages_before, "seq numbers are stable across re-reads");
    let (status, body) = lab.post(
        &format!("/runs/{id}/dialog/answer"),
        &json!({"tool_id": pending_tool_id(&v), "answers": [{"option": 2}]}),
    );
    assert_eq!(status, 202, "{body}");
    lab.wait_state(&id, "idle");
    let answer = World::log_events(&log).into_iter().find(|e| e["event"] == "answer").unwrap();
    assert_eq!(answer["answers"]["Which database should we use?"], "Redis");
}

/// After a restart, an ended run's chat is read when it is first looked at (not at
/// start-up): the list says `ended` at once, and the chat is all there on first view,
/// over GET and over SSE alike.
#[test]
fn an_ended_run_s_chat_is_read_on_first_view_after_a_restart() {
    let w = World::new();
    w.use_fake_claude(&ask_then_idle());
    let lab = w.serve();
    let id = run_id(&lab.create_run(&w, "claude-code", "hello"));
    let before = lab.wait_state(&id, "question");
    let (status, _) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!(status, 200);
    let ended = lab.wait_state(&id, "ended");
    assert!(!before["messages"].as_array().unwrap().is_empty());
    lab.stop();

    let lab = w.serve();
    let (_, list) = lab.get("/runs");
    let listed = list.as_array().unwrap().iter().find(|r| r["id"] == id.as_str()).cloned().unwrap();
    assert_eq!(listed["state"], "ended");
    let v = lab.view(&id);
    assert_eq!(v["state"], "ended");
    assert_eq!(v["messages"], ended["messages"], "the whole chat on first view, same seqs");
    lab.stop();
}

#[test]
fn stop_ends_the_run_and_kills_its_session() {
    let w = World::new();
    w.use_fake_claude(&ask_then_idle());
    let lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "hello");
    let id = run_id(&run);
    lab.wait_state(&id, "question");
    let (status, body) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "ended");
    let target = format!("={}", run["tmux_target"].as_str().unwrap());
    assert!(!w.tmux(&["has-session", "-t", &target]).status.success());
    assert_eq!(runtime_files(&w.runtime()), Vec::<String>::new(), "runtime files left behind");
}

#[test]
fn a_permission_notification_is_needs_input_until_the_transcript_advances() {
    let w = World::new();
    let script = json!({"steps": [
        {"say": "I will list files."},
        // An agent that reports the prompt only through its Notification.
        {"bash": {"command": "ls -la", "output": "total 0", "notify_after_ms": 200, "permission_request": false}},
        {"say": "Done listing."},
        // The agent's "waiting for your input" once its turn ended.
        {"idle": {"notify_after_ms": 400}},
    ]});
    w.use_fake_claude(&script);
    let lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "list files");
    let id = run_id(&run);
    let v = lab.wait_state(&id, "needs_input");
    // Lab's own kind (raised mid-turn), the agent's word beside it for one release.
    assert_eq!(v["blocked"]["kind"], "needs_input", "{v}");
    assert_eq!(v["blocked"]["notification_type"], "permission_prompt");
    assert!(v["pending_dialog"].is_null());
    // Where to answer it: the terminal, and how to attach to it (the contract's command).
    let (status, t) = lab.get(&format!("/runs/{id}/terminal"));
    assert_eq!(status, 200, "{t}");
    let (socket, target) = (run["tmux_socket"].as_str().unwrap(), run["tmux_target"].as_str().unwrap());
    assert_eq!(t["attach"], format!("tmux -S {socket} attach -t {target}"), "{t}");
    assert_eq!(t["state"], "needs_input", "{t}");
    assert!(!t["screen"].as_str().unwrap_or_default().trim().is_empty(), "the pane's screen: {t}");
    // The operator approves in the TUI.
    w.tmux(&["send-keys", "-t", run["tmux_target"].as_str().unwrap(), "Enter"]);
    let v = lab.wait_view(&id, "idle", |v| v["messages"].to_string().contains("Done listing."));
    assert!(v["blocked"].is_null() || v["blocked"]["kind"] == "idle", "{v}");
    // The block raised once the turn ended is lab's `idle`: the agent waits for a
    // message, and the composer is open.
    let v = lab.wait_view(&id, "the idle block", |v| v["blocked"]["kind"] == "idle");
    assert_eq!(
        (v["state"].as_str(), v["blocked"]["notification_type"].as_str()),
        (Some("needs_input"), Some("idle_prompt"))
    );
    assert!(v["composer_lock"].is_null(), "{v}");
}

#[test]
fn plan_and_multi_question_dialogs_are_answered_from_lab() {
    let w = World::new();
    let two = json!({"questions": [
        {"question": "Which database?", "header": "DB", "options": [{"label": "Postgres", "description": ""}, {"label": "SQLite", "description": ""}]},
        {"question": "Which framework?", "header": "Web", "options": [{"label": "axum", "description": ""}, {"label": "actix", "description": ""}]}
    ]});
    let script = json!({"steps": [{"ask": two}, {"plan": "# Plan\n\n1. Do it\n2. Test it"}, {"idle": {}}]});
    let log = w.use_fake_claude(&script);
    let lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "plan it");
    let id = run_id(&run);
    let v = lab.wait_state(&id, "question");
    let d = &v["pending_dialog"];
    assert_eq!(d["answerable"], true, "{d}");
    assert_eq!(d["questions"].as_array().unwrap().len(), 2);
    assert!(d["deep_link"].as_str().unwrap().contains(&id), "a deep link to answer elsewhere: {d}");
    let (status, body) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": d["tool_id"], "answers": [{"option": 0}]}));
    assert_eq!((status, body["error"].as_str()), (400, Some("bad_request")), "one answer per question: {body}");
    let (status, body) = lab.post(
        &format!("/runs/{id}/dialog/answer"),
        &json!({"tool_id": d["tool_id"], "answers": [{"option": 1}, {"option": 0}]}),
    );
    assert_eq!(status, 202, "{body}");
    let answer = wait_for(Duration::from_secs(10), "fake-claude to log the answers", || {
        World::log_events(&log).into_iter().find(|e| e["event"] == "answer")
    });
    assert_eq!(answer["is_error"], false, "{answer}");
    assert!(answer.to_string().contains("SQLite") && answer.to_string().contains("axum"), "{answer}");

    let v = lab.wait_view(&id, "the plan dialog", |v| v["pending_dialog"]["kind"] == "plan");
    let d = &v["pending_dialog"];
    assert_eq!(d["answerable"], true, "{d}");
    assert!(d["plan"].as_str().unwrap().starts_with("# Plan"));
    assert!(!d["options"].as_array().unwrap().is_empty(), "the prompt's own options: {d}");
    let (status, body) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": d["tool_id"], "answers": [{"option": 0}]}));
    assert_eq!(status, 202, "{body}");
    wait_for(Duration::from_secs(10), "fake-claude to approve the plan", || {
        World::log_events(&log).into_iter().find(|e| e["event"] == "answer" && e["tool_name"] == "ExitPlanMode")
    });
    lab.wait_state(&id, "idle");
}

#[test]
fn a_transcript_only_provider_gets_no_hooks_and_unanswerable_transcript_dialogs() {
    transcript_only_run(lab::agents::components::fixtures::PLAINLOG);
}

/// docs/wit-compat.md rule 4: a component built against WIT 0.1.0 runs a run on this host.
#[test]
fn a_transcript_only_component_built_against_0_1_0_runs_a_run() {
    transcript_only_run(lab::agents::components::fixtures::PLAINLOG_V0_1_0);
}

/// The same for a dialog-hooker component built against 0.1.0 (the claude-code
/// provider as it was), installed over the bundled one: hooks through its 0.1.0 hook
/// context, a live question from its spool, answered with its keys and the 0.1.0 pace.
#[test]
fn a_hooker_component_built_against_0_1_0_runs_a_run_and_answers() {
    let w = World::new();
    let providers = w.home.join("providers");
    std::fs::create_dir_all(&providers).unwrap();
    std::fs::copy(lab::agents::components::fixtures::CLAUDE_CODE_V0_1_0, providers.join("old.wasm")).unwrap();
    let log = w.use_fake_claude(&ask_then_idle());
    let lab = w.serve();
    let (_, list) = lab.get("/providers");
    let p = list.as_array().unwrap().iter().find(|p| p["name"] == "claude-code").cloned().unwrap();
    assert_eq!((&p["wit"], &p["dialog_hooker"]), (&json!("lab:provider@0.1.0"), &json!(true)), "{list}");
    let run = lab.create_run(&w, "claude-code", "pick a database");
    let id = run_id(&run);
    let settings = std::fs::read_to_string(w.runtime().join(format!("{id}.settings.json"))).unwrap();
    assert!(settings.contains("hook dialog-clear") && settings.contains("--id-field tool_use_id"), "{settings}");
    let v = lab.wait_state(&id, "question");
    let d = &v["pending_dialog"];
    assert_eq!((&d["source"], &d["answerable"]), (&json!("spool"), &json!(true)), "{d}");
    let started = Instant::now();
    let (status, body) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": d["tool_id"], "answers": [{"option": 1}]}));
    assert_eq!(status, 202, "{body}");
    lab.wait_view(&id, "the answer to be played", |v| v["answer"]["state"] == "played");
    assert!(started.elapsed() >= Duration::from_millis(2250), "0.1.0's pace: {:?}", started.elapsed());
    let answer = wait_for(Duration::from_secs(10), "fake-claude to log the answer", || {
        World::log_events(&log).into_iter().find(|e| e["event"] == "answer")
    });
    assert!(answer.to_string().contains("SQLite"), "{answer}");
    wait_for(Duration::from_secs(10), "the spool to be cleared by its PostToolUse", || {
        (!w.runtime().join(format!("{id}.spool.json")).exists()).then_some(())
    });
    lab.wait_state(&id, "idle");
}

fn transcript_only_run(component: &str) {
    // A tiny plainlog agent: writes a question as a tool call and waits.
    let w = World::with_plainlog(
        component,
        r#"#!/bin/sh
t="$2"; mkdir -p "$(dirname "$t")"
printf '%s\n' '{"role":"user","text":"hi"}' >> "$t"
printf '%s\n' '{"type":"tool_use","id":"ask-1","name":"ask","input":{"question":"Tabs or spaces?","options":[{"label":"Tabs"},{"label":"Spaces"}]}}' >> "$t"
sleep 600
"#,
    );
    let lab = w.serve();
    let (_, providers) = lab.get("/providers");
    let plain = providers.as_array().unwrap().iter().find(|p| p["name"] == "plainlog").unwrap();
    assert_eq!(plain["dialog_hooker"], false);
    let run = lab.create_run(&w, "plainlog", "hi");
    let id = run_id(&run);
    assert_eq!(run["dialog_hooker"], false);
    let v = lab.wait_state(&id, "question");
    assert_eq!(v["pending_dialog"]["source"], "transcript");
    assert_eq!(v["pending_dialog"]["answerable"], false);
    assert!(
        !w.runtime().join(format!("{id}.settings.json")).exists(),
        "no settings file for a transcript-only provider"
    );
    let (status, body) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": "ask-1", "answers": [{"option": 0}]}));
    assert_eq!((status, body["error"].as_str()), (422, Some("not_answerable")), "{body}");
}

#[test]
fn bad_input_gets_clear_errors_and_the_host_keeps_serving() {
    let w = World::new();
    w.use_fake_claude(&ask_then_idle());
    let lab = w.serve();
    for path in ["/runs/r-nope", "/runs/..%2F..%2Fetc/messages", "/runs/A/messages", "/runs/r-nope/events"] {
        let (status, body) = lab.get(path);
        assert_eq!((status, body["error"].as_str()), (404, Some("run_not_found")), "{path}: {body}");
    }
    let (status, body) = lab.post("/runs/r-nope/dialog/answer", &json!({"tool_id": "x", "answers": [{"option": 0}]}));
    assert_eq!((status, body["error"].as_str()), (404, Some("run_not_found")));
    for bad in [
        json!({"provider": "nope", "workdir": w.workdir, "prompt": "x"}),
        json!({"provider": "claude-code", "workdir": "relative/dir", "prompt": "x"}),
        json!({"provider": "claude-code", "workdir": "/nonexistent/dir", "prompt": "x"}),
        json!({"provider": "claude-code", "workdir": w.workdir, "prompt": "   "}),
        json!({"provider": "claude-code", "workdir": w.workdir, "prompt": "x", "permission_mode": "a b"}),
        json!({"provider": "claude-code", "workdir": w.workdir}),
    ] {
        let (status, body) = lab.post("/runs", &bad);
        assert_eq!((status, body["error"].as_str()), (400, Some("bad_request")), "{bad}: {body}");
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    }

    // A malformed spool and marker are ignored, loudly, and nothing breaks.
    let id = run_id(&lab.create_run(&w, "claude-code", "hello"));
    let v = lab.wait_state(&id, "question");
    std::fs::write(w.runtime().join(format!("{id}.marker.json")), b"{broken").unwrap();
    std::fs::write(w.runtime().join(format!("{id}.spool.json")), b"not json at all").unwrap();
    // The spool no longer backs the dialog: the transcript fallback still shows it
    // (the pending tool_use is in the transcript), but it can no longer be answered.
    let v2 = lab.wait_view(&id, "the malformed spool to be dropped", |v| v["pending_dialog"]["source"] == "transcript");
    assert_eq!(v2["state"], "question");
    assert_eq!(v2["pending_dialog"]["answerable"], false);
    assert_eq!(v2["messages"], v["messages"], "no message was lost");
    let (status, body) = lab.post(
        &format!("/runs/{id}/dialog/answer"),
        &json!({"tool_id": pending_tool_id(&v), "answers": [{"option": 0}]}),
    );
    assert_eq!((status, body["error"].as_str()), (409, Some("no_dialog")), "{body}");
    let (status, _) = lab.get("/runs");
    assert_eq!(status, 200);
}

#[test]
fn a_launch_that_cannot_spawn_is_recorded_as_failed_and_leaves_no_files() {
    let w = World::new();
    w.write_config("[providers.claude-code]\nprogram = \"/nonexistent/claude\"\n");
    let lab = w.serve();
    let (status, body) = lab.post("/runs", &json!({"provider": "claude-code", "workdir": w.workdir, "prompt": "x"}));
    assert_eq!((status, body["error"].as_str()), (422, Some("launch_failed")), "{body}");
    assert!(body["message"].as_str().unwrap().contains("/nonexistent/claude"));
    let (_, runs) = lab.get("/runs");
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["state"], "ended");
    assert!(runs[0]["error"].as_str().is_some());
    assert_eq!(runtime_files(&w.runtime()), Vec::<String>::new());
}

#[test]
fn sse_streams_each_change_with_only_new_messages() {
    use std::io::{BufRead, BufReader};
    let w = World::new();
    w.use_fake_claude(&ask_then_idle());
    let lab = w.serve();
    let id = run_id(&lab.create_run(&w, "claude-code", "hello"));
    let resp = lab.event_stream(&format!("/runs/{id}/events"), &[], Duration::from_secs(30));
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut lines = BufReader::new(resp).lines();
    let mut seen: Vec<u64> = Vec::new();
    let mut states = Vec::new();
    let mut tool_id = None;
    while let Some(Ok(line)) = lines.next() {
        let Some(data) = line.strip_prefix("data: ") else { continue };
        let v: Value = serde_json::from_str(data).unwrap();
        for m in v["messages"].as_array().unwrap() {
            seen.push(m["seq"].as_u64().unwrap());
        }
        states.push(v["state"].as_str().unwrap().to_string());
        if v["state"] == "question" && tool_id.is_none() {
            let t = pending_tool_id(&v);
            tool_id = Some(t.clone());
            let (status, body) =
                lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": t, "answers": [{"option": 0}]}));
            assert_eq!(status, 202, "{body} after event {v}");
        }
        if v["state"] == "idle" && tool_id.is_some() {
            break;
        }
    }
    assert_eq!(seen, (0..seen.len() as u64).collect::<Vec<_>>(), "each message exactly once, in order");
    assert!(states.contains(&"question".to_string()), "{states:?}");
    let q = states.iter().position(|s| s == "question").unwrap();
    assert!(states[q..].iter().skip_while(|s| *s == "question").all(|s| s != "question"), "no flicker: {states:?}");
}

#[test]
fn an_answer_lands_on_the_right_option_even_after_the_operator_moved_the_cursor() {
    let w = World::new();
    let log = w.use_fake_claude(&ask_then_idle());
    let lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "hello");
    let id = run_id(&run);
    let v = lab.wait_state(&id, "question");
    wait_for(Duration::from_secs(10), "the picker to read keys", || {
        World::log_events(&log).into_iter().find(|e| e["event"] == "ready" && e["widget"] == "ask")
    });
    // The operator nudges the picker in the TUI first (Up wraps on 2.1.198).
    for k in ["Down", "Down", "Up", "Up", "Up"] {
        w.tmux(&["send-keys", "-t", run["tmux_target"].as_str().unwrap(), k]);
        std::thread::sleep(Duration::from_millis(250));
    }
    let (status, body) = lab.post(
        &format!("/runs/{id}/dialog/answer"),
        &json!({"tool_id": pending_tool_id(&v), "answers": [{"option": 1}]}),
    );
    assert_eq!(status, 202, "{body}");
    let answer = wait_for(Duration::from_secs(10), "the answer", || {
        World::log_events(&log).into_iter().find(|e| e["event"] == "answer")
    });
    assert_eq!(answer["answers"]["Which database should we use?"], "SQLite", "{answer}");
}

#[test]
fn lab_serve_stops_promptly_with_open_event_streams_and_the_run_survives() {
    use std::io::Read;
    let w = World::new();
    w.use_fake_claude(&ask_then_idle());
    let mut lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "hello");
    let id = run_id(&run);
    lab.wait_state(&id, "question");
    let mut stream = lab.event_stream(&format!("/runs/{id}/events"), &[], Duration::from_secs(30));
    let mut first = [0u8; 16];
    stream.read_exact(&mut first).unwrap();
    let started = Instant::now();
    unsafe {
        libc::kill(lab.child.id() as i32, libc::SIGTERM);
    }
    let status = wait_for(Duration::from_secs(5), "lab serve to exit", || lab.child.try_wait().unwrap());
    assert!(status.success(), "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(3), "shutdown took {:?}", started.elapsed());
    // The agent keeps running in tmux: the next lab serve picks it up.
    let target = format!("={}", run["tmux_target"].as_str().unwrap());
    assert!(w.tmux(&["has-session", "-t", &target]).status.success());
}

#[test]
fn an_event_stream_resumes_after_last_event_id_and_messages_after_filters() {
    use std::io::{BufRead, BufReader};
    let w = World::new();
    w.use_fake_claude(&ask_then_idle());
    let lab = w.serve();
    let id = run_id(&lab.create_run(&w, "claude-code", "hello"));
    let v = lab.wait_state(&id, "question");
    let all = v["messages"].as_array().unwrap().len();
    assert!(all >= 3, "{v}");
    let (_, after) = lab.get(&format!("/runs/{id}/messages?after=1"));
    let seqs: Vec<u64> = after["messages"].as_array().unwrap().iter().map(|m| m["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (2..all as u64).collect::<Vec<_>>());
    let (status, body) = lab.get(&format!("/runs/{id}/messages?after=x"));
    assert_eq!((status, body["error"].as_str()), (400, Some("bad_request")));

    let resp = lab.event_stream(&format!("/runs/{id}/events"), &[("Last-Event-ID", "1")], Duration::from_secs(30));
    let mut lines = BufReader::new(resp).lines();
    let (mut id_line, mut data) = (None, None);
    while let Some(Ok(line)) = lines.next() {
        if let Some(i) = line.strip_prefix("id: ") {
            id_line = Some(i.to_string());
        }
        if let Some(d) = line.strip_prefix("data: ") {
            data = Some(serde_json::from_str::<Value>(d).unwrap());
        }
        if line.is_empty() && data.is_some() {
            break; // the end of the first event
        }
    }
    let data = data.unwrap();
    let first = data["messages"][0]["seq"].as_u64().unwrap();
    assert_eq!(first, 2, "resumed after the last seen seq: {data}");
    assert_eq!(data["state"], "question");
    assert_eq!(id_line.as_deref(), Some((all - 1).to_string().as_str()));
}

/// A chat longer than what lab holds in memory per run is read in pages: the newest
/// by default with `?limit=`, older ones with `?before=`, forward with `?after=`; the
/// pages put together are exactly the whole chat, and an event stream can start after
/// the page a client loaded.
#[test]
fn a_long_chat_is_read_in_pages_that_add_up_to_the_whole_chat() {
    use std::io::{BufRead, BufReader};
    let w = World::new();
    let mut steps: Vec<Value> = (0..700).map(|i| json!({"say": format!("line {i}")})).collect();
    steps.push(json!({"idle": {}}));
    w.use_fake_claude(&json!({"steps": steps}));
    let lab = w.serve();
    let id = run_id(&lab.create_run(&w, "claude-code", "talk a lot"));
    let v = lab.wait_view(&id, "the whole chat", |v| {
        v["state"] == "idle" && v["messages"].as_array().unwrap().iter().any(|m| m["text"] == "line 699")
    });
    let whole = v["messages"].as_array().unwrap().clone();
    let total = whole.len() as u64;
    assert!(total > 700, "{total}");
    assert_eq!((v["more_before"].as_bool(), v["more_after"].as_bool()), (Some(false), Some(false)));
    let seqs =
        |v: &Value| v["messages"].as_array().unwrap().iter().map(|m| m["seq"].as_u64().unwrap()).collect::<Vec<_>>();

    // The newest page, then older ones down to the first message.
    let (status, page) = lab.get(&format!("/runs/{id}/messages?limit=100"));
    assert_eq!(status, 200, "{page}");
    assert_eq!(seqs(&page), (total - 100..total).collect::<Vec<_>>());
    assert_eq!((page["more_before"].as_bool(), page["state"].as_str()), (Some(true), Some("idle")));
    let mut pages = vec![page["messages"].as_array().unwrap().clone()];
    let mut first = total - 100;
    while first > 0 {
        let (status, older) = lab.get(&format!("/runs/{id}/messages?before={first}&limit=250"));
        assert_eq!(status, 200, "{older}");
        let s = seqs(&older);
        assert_eq!(s, (first.saturating_sub(250)..first).collect::<Vec<_>>());
        assert_eq!(older["more_before"].as_bool(), Some(s[0] > 0));
        first = s[0];
        pages.push(older["messages"].as_array().unwrap().clone());
    }
    let joined: Vec<Value> = pages.into_iter().rev().flatten().collect();
    assert_eq!(joined, whole, "the pages add up to the whole chat, message for message");

    // Forward from a seq.
    let (_, fwd) = lab.get(&format!("/runs/{id}/messages?after=10&limit=5"));
    assert_eq!(seqs(&fwd), vec![11, 12, 13, 14, 15]);
    assert_eq!((fwd["more_before"].as_bool(), fwd["more_after"].as_bool()), (Some(false), Some(true)));
    let (_, none) = lab.get(&format!("/runs/{id}/messages?after={}&limit=5", total - 1));
    assert!(none["messages"].as_array().unwrap().is_empty() && none["more_after"] == false, "{none}");
    for bad in ["limit=0", "limit=1001", "limit=x", "before=-1", "before=1.5"] {
        let (status, body) = lab.get(&format!("/runs/{id}/messages?{bad}"));
        assert_eq!((status, body["error"].as_str()), (400, Some("bad_request")), "{bad}: {body}");
    }

    // An event stream that starts after the loaded page sends only what is newer.
    let resp = lab.event_stream(&format!("/runs/{id}/events?after={}", total - 3), &[], Duration::from_secs(30));
    let data = BufReader::new(resp)
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("data: ").map(|d| serde_json::from_str::<Value>(d).unwrap()))
        .expect("a first event");
    assert_eq!(seqs(&data), vec![total - 2, total - 1], "{data}");
    let (status, _) = lab.get(&format!("/runs/{id}/events?after=x"));
    assert_eq!(status, 400);
}

/// Wait until run `id` is `ended`; how long that took.
fn time_to_ended(lab: &Lab, id: &str) -> Duration {
    let start = Instant::now();
    lab.wait_state(id, "ended");
    start.elapsed()
}

#[test]
fn a_closed_session_ends_its_run_at_once_also_on_a_server_lab_finds_running() {
    // The backstop reconciliation runs every 15 s: ending within 3 s is tmux's hook.
    const PROMPTLY: Duration = Duration::from_secs(3);
    let w = World::new();
    w.use_fake_claude(&json!({"steps": [{"say": "Ready."}, {"idle": {}}]}));
    let lab = w.serve();
    let ids: Vec<String> = (0..3).map(|_| run_id(&lab.create_run(&w, "claude-code", "hello"))).collect();
    for id in &ids {
        lab.wait_state(id, "idle");
    }
    let kill = |id: &str| assert!(w.tmux(&["kill-session", "-t", &format!("=lab-{id}")]).status.success());

    kill(&ids[0]);
    let took = time_to_ended(&lab, &ids[0]);
    assert!(took < PROMPTLY, "the run ended {took:?} after its session closed");
    assert_eq!(lab.view(&ids[1])["state"], "idle", "the other runs live on");

    // A server that outlived lab serve, its hook gone (as on a server lab did not set
    // up): the next lab serve sets it up again.
    lab.stop();
    assert!(w.tmux(&["set-hook", "-gu", "session-closed[73]"]).status.success());
    let lab = w.serve();
    lab.wait_state(&ids[1], "idle");
    kill(&ids[1]);
    let took = time_to_ended(&lab, &ids[1]);
    assert!(took < PROMPTLY, "after a restart, the run ended {took:?} after its session closed");

    // The last session: the server stays up for its hook, and lab stops it when it
    // stops itself.
    kill(&ids[2]);
    let took = time_to_ended(&lab, &ids[2]);
    assert!(took < PROMPTLY, "the last run ended {took:?} after its session closed");
    assert!(w.tmux(&["list-sessions"]).status.success(), "the empty server is still up");
    lab.stop();
    assert!(!w.tmux(&["list-sessions"]).status.success(), "lab stopped the empty server");
}

#[test]
fn a_session_gone_while_lab_was_down_ends_its_run_at_start() {
    let w = World::new();
    w.use_fake_claude(&json!({"steps": [{"say": "Ready."}, {"idle": {}}]}));
    let lab = w.serve();
    let gone = run_id(&lab.create_run(&w, "claude-code", "hello"));
    let kept = run_id(&lab.create_run(&w, "claude-code", "hello"));
    lab.wait_state(&gone, "idle");
    lab.wait_state(&kept, "idle");
    let chat = lab.view(&gone)["messages"].clone();
    assert!(!chat.as_array().unwrap().is_empty());
    lab.stop();
    assert!(w.tmux(&["kill-session", "-t", &format!("=lab-{gone}")]).status.success());
    let lab = w.serve();
    let took = time_to_ended(&lab, &gone);
    assert!(took < Duration::from_secs(3), "found {took:?} after start");
    assert_eq!(lab.view(&kept)["state"], "idle");
    // Ended without its history read; the chat is all there when looked at.
    let v = lab.view(&gone);
    assert_eq!(v["state"], "ended");
    assert_eq!(v["messages"], chat, "the whole chat, same seqs");
    assert!(!w.runtime().join(format!("{gone}.settings.json")).exists(), "its files are gone");
    lab.stop();
    // Recorded: the next start finds it ended.
    let lab = w.serve();
    assert_eq!(lab.view(&gone)["state"], "ended");
    lab.wait_state(&kept, "idle");
}

/// An agent that shows something nobody recognises before its first transcript line
/// (here a transcript-only provider, so no screen reader either) gets a generic card
/// with the pane's text — never silence — which stays while shown and goes once the run
/// moves on.
#[test]
fn an_unrecognised_screen_before_the_first_line_becomes_a_generic_card() {
    let w = World::with_plainlog(
        lab::agents::components::fixtures::PLAINLOG,
        r#"#!/bin/sh
t="$2"; mkdir -p "$(dirname "$t")"
printf 'Licence terms changed.\nPress Enter to accept them.\n'
read -r _
printf '%s\n' '{"role":"user","text":"hi"}' >> "$t"
sleep 600
"#,
    );
    let lab = w.serve();
    let run = lab.create_run(&w, "plainlog", "hi");
    let id = run_id(&run);
    let started = Instant::now();
    let v = wait_for(Duration::from_secs(30), "the generic card", || {
        Some(lab.view(&id)).filter(|v| v["pending_dialog"]["kind"] == "generic")
    });
    assert!(started.elapsed() >= Duration::from_secs(9), "not before the screen was still for a while");
    let d = &v["pending_dialog"];
    assert_eq!((&d["source"], &d["answerable"], &v["state"]), (&json!("screen"), &json!(false), &json!("question")));
    assert!(d["generic"]["text"].as_str().unwrap().contains("Press Enter to accept them."), "{d}");
    // It stays (no flicker) over the next looks.
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(700));
        assert_eq!(lab.view(&id)["pending_dialog"]["tool_id"], d["tool_id"]);
    }
    // The operator answers in the terminal; the run moves on and the card goes.
    w.tmux(&["send-keys", "-t", run["tmux_target"].as_str().unwrap(), "Enter"]);
    let v = lab.wait_view(&id, "the card to go", |v| v["pending_dialog"].is_null());
    assert_eq!(v["messages"][0]["text"], "hi");
}

/// A release whose ExitPlanMode payload names the plan file instead of carrying the text
/// (2.1.332): the card still shows the plan, read by the host from that file.
#[test]
fn a_plan_named_only_by_its_file_is_shown_with_its_text() {
    let w = World::new();
    let plan = "# From the file\n\n1. Read it from disk.";
    let script = json!({"steps": [{"plan": {"plan": plan, "file_only": true}}, {"idle": {}}]});
    w.use_fake_claude(&script);
    let lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "plan it");
    let id = run_id(&run);
    let v = lab.wait_view(&id, "the plan dialog", |v| v["pending_dialog"]["kind"] == "plan");
    let d = &v["pending_dialog"];
    assert_eq!(d["plan"], plan, "{d}");
    let input = &v["messages"].as_array().unwrap().iter().find(|m| m["kind"] == "tool_use").unwrap()["input"];
    assert!(input.get("plan").is_none() && input["planFilePath"].is_string(), "{input}");
}

/// A release whose ExitPlanMode hook payload is empty (2.1.332: `tool_input: {}`): the
/// card shows the plan from the transcript's call, under the same token, and a plan
/// answered at once is approved (the provider's plan prompt settles first).
#[test]
fn a_plan_whose_hook_payload_is_empty_is_shown_from_the_transcript_and_approved() {
    let w = World::new();
    let plan = "# From the transcript\n\n1. Take the call's own input.";
    let script = json!({"steps": [{"plan": {"plan": plan, "empty_hook_input": true}}, {"say": "Approved, going on."}, {"idle": {}}]});
    let log = w.use_fake_claude(&script);
    let lab = w.serve();
    let id = run_id(&lab.create_run(&w, "claude-code", "plan it"));
    let v = lab.wait_view(&id, "the plan with its text", |v| v["pending_dialog"]["plan"] == plan);
    let spooled = std::fs::read_to_string(w.runtime().join(format!("{id}.spool.json"))).unwrap();
    assert!(spooled.contains(r#""tool_input":{}"#), "{spooled}");
    let tool_id = v["pending_dialog"]["tool_id"].as_str().unwrap().to_string();
    let (status, body) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": tool_id, "answers": [{"option": 0}]}));
    assert_eq!(status, 202, "{body}");
    lab.wait_view(&id, "the reply after the approval", |v| v.to_string().contains("Approved, going on."));
    wait_for(Duration::from_secs(10), "the answer recorded as played", || {
        let (_, run) = lab.get(&format!("/runs/{id}"));
        (run["answer"]["state"] == "played").then_some(())
    });
    let ev = World::log_events(&log);
    let ready = ev.iter().position(|e| e["event"] == "ready" && e["widget"] == "plan").expect("the picker was drawn");
    assert!(ev[ready..].iter().any(|e| e["event"] == "key"), "the key came after the picker");
}

/// A turn the model API refused (2.1.332 records a rate limit as an `isApiErrorMessage`
/// line with the class in `error`, then fires StopFailure, no Stop): the run is not left
/// `working` but blocked on an `error` with what the API said, the composer open; the
/// block holds across a restart (it is read from the transcript) and a message sent
/// again clears it.
#[test]
fn a_turn_the_api_refused_blocks_the_run_on_the_error_until_a_message_is_sent_again() {
    let w = World::new();
    let log = w.use_fake_claude(&json!({"steps": [
        {"api_error": {"error": "rate_limit", "text": "API Error: Request rejected (429) · per-minute rate limit"}},
        {"idle": {}},
        {"say": "Hello again."},
        {"idle": {}},
    ]}));
    let lab = w.serve();
    let id = run_id(&lab.create_run(&w, "claude-code", "hello"));
    let v = lab.wait_state(&id, "needs_input");
    assert_eq!(v["blocked"]["kind"], "error", "{v}");
    assert_eq!(v["blocked"]["notification_type"], "error", "{v}");
    assert_eq!(v["blocked"]["message"], "Rate limited: API Error: Request rejected (429) · per-minute rate limit");
    assert!(v["pending_dialog"].is_null());
    let last = v["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!((last["role"].as_str(), last["kind"].as_str()), (Some("system"), Some("turn_error")), "{last}");
    assert!(v["composer_lock"].is_null(), "the agent waits for exactly this, a message: {v}");
    assert!(World::log_events(&log).iter().any(|e| e["event"] == "api_error"));

    lab.stop();
    let lab = w.serve();
    let v = lab.wait_state(&id, "needs_input");
    assert_eq!(v["blocked"]["kind"], "error", "after a restart: {v}");

    let (status, body) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "try again"}));
    assert_eq!(status, 202, "{body}");
    let v = lab.wait_view(&id, "the reply to the resend", |v| {
        v["state"] == "idle" && v["messages"].as_array().unwrap().iter().any(|m| m["text"] == "Hello again.")
    });
    assert!(v["blocked"].is_null(), "{v}");
}

/// GET /providers names each agent's own version where the agent says one: lab asks
/// `<program> --version` in the background (fake-claude answers as Claude Code does);
/// an agent lab cannot find has none, and nothing waits for the answer.
#[test]
fn get_providers_names_the_agent_s_own_version() {
    let w = World::new();
    w.use_fake_claude(&ask_then_idle());
    let lab = w.serve();
    let providers = wait_for(Duration::from_secs(20), "the agent's version in GET /providers", || {
        let (status, body) = lab.get("/providers");
        assert_eq!(status, 200);
        let claude = body.as_array().unwrap().iter().find(|p| p["name"] == "claude-code").cloned().unwrap();
        claude["agent_version"].is_string().then_some(body)
    });
    let claude = providers.as_array().unwrap().iter().find(|p| p["name"] == "claude-code").unwrap();
    assert_eq!(claude["agent_version"], "2.1.198", "{claude}");
    assert_ne!(claude["agent_version"], claude["version"], "the provider's version is another thing");
    for p in providers.as_array().unwrap() {
        assert!(p["agent_version"].is_string() || p["agent_version"].is_null(), "{p}");
    }
}

/// The agent's own environment (the pane's process, exec'd by `lab agent-exec`), as
/// `/proc/<pid>/environ` holds it.
fn agent_environ(w: &World) -> Vec<u8> {
    let pid = String::from_utf8(w.tmux(&["list-panes", "-a", "-F", "#{pane_pid}"]).stdout).unwrap();
    std::fs::read(format!("/proc/{}/environ", pid.trim())).unwrap()
}

/// lab serve started from an environment holding a variable whose value is not UTF-8
/// (a stray byte in a user's shell): `POST /runs` starts the run (it used to panic in
/// `std::env::vars()` and answer nothing), the variable is left out of the agent's
/// environment with a warning, and the others reach it.
#[test]
fn a_non_utf8_variable_in_lab_s_environment_does_not_stop_runs() {
    use std::os::unix::ffi::OsStrExt;
    let w = World::new();
    w.use_fake_claude(&json!({"steps": [{"say": "Ready."}, {"idle": {}}]}));
    let config = std::fs::read_to_string(w.home.join("lab.toml")).unwrap();
    w.write_config(&format!("{config}pass_env = [\"LAB_TEST_*\"]\n"));
    let lab = Lab::start_with(&w, |c| {
        c.env("LAB_TEST_NOT_UTF8", std::ffi::OsStr::from_bytes(b"caf\xe9")).env("LAB_TEST_PLAIN", "plain");
    });
    let run = lab.create_run(&w, "claude-code", "hello");
    let id = run_id(&run);
    lab.wait_state(&id, "idle");
    let environ = agent_environ(&w);
    let vars: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
    assert!(vars.contains(&&b"LAB_TEST_PLAIN=plain"[..]), "the others reach the agent");
    assert!(!vars.iter().any(|v| v.starts_with(b"LAB_TEST_NOT_UTF8=")), "the non-UTF-8 one does not");
    let (status, _) = lab.get("/runs");
    assert_eq!(status, 200, "lab still serves");
    let log = std::fs::read_to_string(w.home.join("logs/lab.log")).unwrap();
    assert!(log.contains("LAB_TEST_NOT_UTF8") && log.contains("not UTF-8"), "{log}");
}

/// lab, not the provider, decides what of lab serve's environment an agent gets: the
/// basics (PATH, HOME, …) and what lab.toml's `pass_env` names; an API key in lab
/// serve's environment reaches the agent only when named there, and the log says which
/// credential-like variables were left out. Before, the agent got all of it.
#[test]
fn only_the_basics_and_what_lab_toml_passes_reach_the_agent() {
    let w = World::new();
    w.use_fake_claude(&json!({"steps": [{"say": "Ready."}, {"idle": {}}]}));
    let config = std::fs::read_to_string(w.home.join("lab.toml")).unwrap();
    w.write_config(&format!("{config}pass_env = [\"LAB_TEST_PASSED\", \"LAB_TEST_GROUP_*\"]\n"));
    let lab = Lab::start_with(&w, |c| {
        c.env("LAB_TEST_PASSED", "yes")
            .env("LAB_TEST_GROUP_A", "a")
            .env("LAB_TEST_API_KEY", "sk-lab-serve-secret")
            .env("LAB_TEST_OTHER", "x")
            .env("LANG", "C.UTF-8");
    });
    let id = run_id(&lab.create_run(&w, "claude-code", "hello"));
    lab.wait_state(&id, "idle");
    let environ = agent_environ(&w);
    let vars: Vec<String> =
        environ.split(|b| *b == 0).filter(|v| !v.is_empty()).map(|v| String::from_utf8_lossy(v).into_owned()).collect();
    for want in ["LAB_TEST_PASSED=yes", "LAB_TEST_GROUP_A=a", "LANG=C.UTF-8"] {
        assert!(vars.iter().any(|v| v == want), "{want} reaches the agent: {vars:?}");
    }
    assert!(vars.iter().any(|v| v.starts_with("PATH=")) && vars.iter().any(|v| v.starts_with("HOME=")));
    assert!(vars.iter().any(|v| v.starts_with("FAKE_CLAUDE_SCRIPT=")), "lab.toml's env");
    for not in ["LAB_TEST_API_KEY=", "LAB_TEST_OTHER="] {
        assert!(!vars.iter().any(|v| v.starts_with(not)), "{not} must not reach the agent: {vars:?}");
    }
    let log = std::fs::read_to_string(w.home.join("logs/lab.log")).unwrap();
    assert!(log.contains("LAB_TEST_API_KEY") && log.contains("pass_env"), "the hint names the key: {log}");
    assert!(!log.contains("sk-lab-serve-secret"), "never its value");
}

fn ended(id: &str, at: &str, transcript: &std::path::Path) -> lab::runs::registry::RunRecord {
    a_record(
        lab::store::paths::RunId::parse(id).unwrap(),
        lab::runs::registry::Status::Ended,
        at,
        "/nonexistent/tmux.sock",
        Some(transcript.display().to_string()),
    )
}

/// Ended runs found at start cost their record alone: listed, woken by a look (the
/// chat read then), put back at rest when nobody watches, and woken again whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ended_runs_rest_until_looked_at_and_go_back_to_rest_when_unwatched() {
    let d = tempfile::tempdir().unwrap();
    let home = lab::store::paths::Home::new(d.path().join("home"));
    home.prepare().unwrap();
    let t = d.path().join("t.jsonl");
    std::fs::write(&t, include_str!("../../providers/claude-code/testdata/session-ask-answered.jsonl")).unwrap();
    {
        let r = lab::runs::registry::Registry::open(&home.registry()).unwrap();
        r.put_all(&[ended("r-2", "2026-01-02T00:00:00Z", &t), ended("r-1", "2026-01-01T00:00:00Z", &t)]).unwrap();
    }
    let runs =
        lab::cli::serve::compose(home.clone(), std::path::PathBuf::from("/nonexistent/lab"), None).await.unwrap();
    assert!(runs.list().is_empty(), "nothing woken at start");
    let listed: Vec<(String, lab::runs::live::view::RunState)> =
        runs.bodies().into_iter().map(|b| (b.id.as_str().to_string(), b.state)).collect();
    assert_eq!(
        listed,
        [
            ("r-1".into(), lab::runs::live::view::RunState::Ended),
            ("r-2".into(), lab::runs::live::view::RunState::Ended)
        ],
        "oldest first"
    );

    let run = runs.get("r-1").unwrap();
    assert_eq!(runs.list().len(), 1, "woken by the look");
    runs.ensure_loaded(&run).await;
    let first = run.view(&lab::runs::live::message_store::Page::default()).await;
    assert!(!first.messages.is_empty(), "its chat is read");
    assert!(std::sync::Arc::ptr_eq(&run, &runs.get("r-1").unwrap()), "one Run while awake");

    // Watched: stays awake.
    let watching = run.subscribe();
    runs.evict_unwatched(std::time::Duration::ZERO);
    assert_eq!(runs.list().len(), 1);
    drop(watching);
    assert_eq!(runs.evict_unwatched(std::time::Duration::ZERO), 1);
    assert!(runs.list().is_empty(), "back at rest");
    // Listed from the registry as it was listed awake: the same body.
    let awake_body = serde_json::to_value(runs.body_of(&run)).unwrap();
    let bodies = runs.bodies();
    assert_eq!(bodies.len(), 2, "still listed");
    assert_eq!(serde_json::to_value(&bodies[0]).unwrap(), awake_body, "the whole record, read again");
    let again = runs.get("r-1").unwrap();
    runs.ensure_loaded(&again).await;
    assert_eq!(
        again.view(&lab::runs::live::message_store::Page::default()).await.messages,
        first.messages,
        "the same chat, read again"
    );
    assert_eq!(again.record().prompt, "a prompt that stays in the registry");
    assert!(runs.get("r-9").is_err(), "an unknown run is not found");
    runs.begin_shutdown().await;
}
