//! What reaches the agent's terminal is exactly what the operator meant (docs/api.md
//! "Messages and prompts", "Workdirs"): the composer cannot answer a prompt by accident,
//! text is never keys, large texts arrive whole and byte for byte, and a workdir is a
//! path, never a tmux format.

use crate::common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn run_id(run: &Value) -> String {
    run["id"].as_str().unwrap().to_string()
}

/// What fake-claude logged of `event`.
fn events(log: &Path, event: &str) -> Vec<Value> {
    World::log_events(log).into_iter().filter(|e| e["event"] == event).collect()
}

fn wait_event(log: &Path, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    wait_for(Duration::from_secs(30), what, || World::log_events(log).into_iter().find(|e| pred(e)))
}

/// The texts the agent received through its composer (typed or pasted, then Enter).
fn composer_texts(log: &Path) -> Vec<String> {
    events(log, "user_message")
        .into_iter()
        .filter(|e| e["source"] == "composer")
        .map(|e| e["text"].as_str().unwrap().to_string())
        .collect()
}

fn wait_composer_text(log: &Path, n: usize) -> String {
    wait_for(Duration::from_secs(30), &format!("composer message #{n}"), || composer_texts(log).get(n - 1).cloned())
}

fn pane(w: &World, run: &Value) -> String {
    String::from_utf8_lossy(&w.tmux(&["capture-pane", "-p", "-t", run["tmux_target"].as_str().unwrap()]).stdout)
        .into_owned()
}

fn agent_pid(w: &World, run: &Value) -> i32 {
    let out = w.tmux(&["display-message", "-p", "-t", run["tmux_target"].as_str().unwrap(), "#{pane_pid}"]);
    String::from_utf8(out.stdout).unwrap().trim().parse().unwrap()
}

fn post_message(lab: &Lab, id: &str, text: &str) -> (u16, Value) {
    lab.post(&format!("/runs/{id}/messages"), &json!({"text": text}))
}

/// A Bash permission prompt ("1. Yes / 2. … / 3. No") that stays open, from an agent
/// that does not run PermissionRequest hooks (so no dialog explains the wait: the locks
/// below are what stands between a message and the prompt); with `notify`, the agent
/// also reports that it needs permission (the blocked marker, `needs_input`).
fn bash_prompt(notify_after_ms: u64, flush: bool) -> Value {
    json!({"flush_pending_tool_use": flush, "steps": [
        {"say": "Let me clean up."},
        {"bash": {"command": "rm -rf ./build", "description": "Remove build", "output": "", "notify_after_ms": notify_after_ms, "permission_request": false}},
        {"idle": {}},
    ]})
}

/// With the PermissionRequest hook (2.1.198), the prompt is a dialog: a message is
/// refused as `dialog_pending` and nothing reaches the pane.
#[test]
fn a_message_during_a_permission_dialog_is_refused_and_nothing_is_typed() {
    let w = World::new();
    let mut script = bash_prompt(600_000, true);
    script["steps"][1]["bash"]["permission_request"] = json!(true);
    let log = w.use_fake_claude(&script);
    let lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "clean up");
    let id = run_id(&run);
    let v = lab.wait_view(&id, "the permission dialog", |v| v["pending_dialog"]["kind"] == "permission");
    assert_eq!(v["composer_lock"]["code"], "dialog_pending", "{v}");
    let (status, body) = post_message(&lab, &id, "1 ok go");
    assert_eq!((status, body["error"].as_str()), (409, Some("dialog_pending")), "{body}");
    std::thread::sleep(Duration::from_millis(800));
    assert!(events(&log, "answer").is_empty(), "the prompt was answered: {:?}", events(&log, "answer"));
    assert!(!pane(&w, &run).contains("ok go"), "text reached the pane:\n{}", pane(&w, &run));
}

#[test]
fn a_message_during_a_permission_prompt_is_refused_and_nothing_is_typed() {
    let w = World::new();
    // No notification for ten minutes: the unresolved tool call is all lab knows.
    let log = w.use_fake_claude(&bash_prompt(600_000, true));
    let lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "clean up");
    let id = run_id(&run);
    wait_event(&log, "the Bash prompt", |e| e["event"] == "ready" && e["widget"] == "bash");
    let v = lab.wait_view(&id, "the tool call in the chat", |v| {
        v["messages"].as_array().unwrap().iter().any(|m| m["kind"] == "tool_use")
    });
    assert_eq!(v["state"], "working", "{v}");
    assert_eq!(v["composer_lock"]["code"], "tool_pending", "{v}");

    // Measured on main: "1 ok go" here was 202 and the agent took the "1" as approval.
    for _ in 0..2 {
        let (status, body) = post_message(&lab, &id, "1 ok go");
        assert_eq!((status, body["error"].as_str()), (409, Some("tool_pending")), "{body}");
        assert!(body["message"].as_str().unwrap().contains("Bash"), "{body}");
    }
    std::thread::sleep(Duration::from_millis(800));
    assert!(events(&log, "answer").is_empty(), "the prompt was answered: {:?}", events(&log, "answer"));
    assert!(!pane(&w, &run).contains("ok go"), "text reached the pane:\n{}", pane(&w, &run));
    assert_eq!(lab.view(&id)["composer_lock"]["code"], "tool_pending");

    // The operator approves in the terminal; the tool result unlocks the composer.
    assert!(w.tmux(&["send-keys", "-t", run["tmux_target"].as_str().unwrap(), "Enter"]).status.success());
    let answer = wait_event(&log, "the approval", |e| e["event"] == "answer");
    assert_eq!(answer["outcome"], "approved", "{answer}");
    let v = lab.wait_state(&id, "idle");
    assert!(v["composer_lock"].is_null(), "{v}");
    let (status, body) = post_message(&lab, &id, "thanks");
    assert_eq!(status, 202, "{body}");
    assert_eq!(wait_composer_text(&log, 1), "thanks", "nothing else was typed before");
}

#[test]
fn a_message_while_the_agent_waits_is_refused() {
    let w = World::new();
    // The tool call is not in the transcript until it resolves: the agent's own report
    // (the blocked marker) is what tells lab it waits.
    let log = w.use_fake_claude(&bash_prompt(100, false));
    let lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "clean up");
    let id = run_id(&run);
    let v = lab.wait_state(&id, "needs_input");
    assert!(!v["messages"].as_array().unwrap().iter().any(|m| m["kind"] == "tool_use"), "{v}");
    assert_eq!(v["composer_lock"]["code"], "agent_waiting", "{v}");
    let (status, body) = post_message(&lab, &id, "1");
    assert_eq!((status, body["error"].as_str()), (409, Some("agent_waiting")), "{body}");
    assert!(body["message"].as_str().unwrap().contains("permission"), "{body}");
    std::thread::sleep(Duration::from_millis(800));
    assert!(events(&log, "answer").is_empty(), "the prompt was answered: {:?}", events(&log, "answer"));
    assert_eq!(lab.view(&id)["state"], "needs_input");
}

/// Each control character, by name, as it would act in a terminal.
const CONTROLS: &[(&str, &str)] = &[
    ("\u{1b}[A", "U+001B (ESC)"),
    ("\u{7f}", "U+007F (DEL)"),
    ("\u{15}", "U+0015"),
    ("\u{3}", "U+0003"),
    ("\r", "U+000D (CR)"),
    ("\0", "U+0000 (NUL)"),
    ("\u{85}", "U+0085 (C1 control)"),
    ("\u{9b}2J", "U+009B (C1 control)"),
];

#[test]
fn control_characters_are_refused_in_messages_and_answers_and_nothing_is_typed() {
    let w = World::new();
    let log = w.use_fake_claude(&json!({"steps": [
        {"idle": {"say": "Ready."}},
        {"ask": three_options()},
        {"idle": {}},
    ]}));
    let lab = w.serve();
    let id = run_id(&lab.create_run(&w, "claude-code", "hello"));
    lab.wait_state(&id, "idle");
    wait_event(&log, "the composer", |e| e["event"] == "ready" && e["widget"] == "composer");

    let mut refused = 0;
    for (ch, name) in CONTROLS {
        let (status, body) = post_message(&lab, &id, &format!("ok{ch}go"));
        assert_eq!((status, body["error"].as_str()), (400, Some("bad_request")), "{ch:?}: {body}");
        let m = body["message"].as_str().unwrap();
        assert!(m.contains(name) && m.contains("character 3"), "{ch:?}: {m}");
        refused += 1;
    }
    assert_eq!(refused, CONTROLS.len());
    // The composer got nothing: the first message it receives is exactly the next one.
    std::thread::sleep(Duration::from_millis(500));
    assert!(composer_texts(&log).is_empty());
    let (status, body) = post_message(&lab, &id, "pick a database");
    assert_eq!(status, 202, "{body}");
    assert_eq!(wait_composer_text(&log, 1), "pick a database");

    let v = lab.wait_state(&id, "question");
    let tool_id = v["pending_dialog"]["tool_id"].as_str().unwrap().to_string();
    let answer = |text: &str| {
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": tool_id, "answers": [{"other": text}]}))
    };
    let mut refused = 0;
    for (ch, name) in CONTROLS.iter().chain(&[("\n", "U+000A (LF)"), ("\t", "U+0009 (TAB)")]) {
        let (status, body) = answer(&format!("x{ch}y"));
        assert_eq!((status, body["error"].as_str()), (400, Some("bad_request")), "{ch:?}: {body}");
        assert!(body["message"].as_str().unwrap().contains(name), "{ch:?}: {body}");
        refused += 1;
    }
    assert_eq!(refused, CONTROLS.len() + 2);
    // Feedback text (an option's "tell the agent what to do instead") is held to the same
    // rule, before the provider sees it: the error names the character.
    for (ch, name) in CONTROLS.iter().chain(&[("\n", "U+000A (LF)")]) {
        let (status, body) = lab.post(
            &format!("/runs/{id}/dialog/answer"),
            &json!({"tool_id": tool_id, "answers": [{"feedback": {"option": 0, "text": format!("x{ch}y")}}]}),
        );
        assert_eq!((status, body["error"].as_str()), (400, Some("bad_request")), "{ch:?}: {body}");
        assert!(body["message"].as_str().unwrap().contains(name), "{ch:?}: {body}");
    }
    // Bidirectional-text controls ("Trojan Source"): the card would show another answer
    // than the one the agent reads; refused in answers and feedback, named.
    // Invisible characters too (zero-width space, BOM, tag characters that smuggle an
    // instruction the card does not show).
    for bidi in ["\u{202e}", "\u{2066}", "\u{200f}", "\u{200b}", "\u{feff}", "\u{e0049}"] {
        let (status, body) = answer(&format!("ok {bidi}gnp.exe"));
        assert_eq!((status, body["error"].as_str()), (400, Some("bad_request")), "{bidi:?}: {body}");
        let m = body["message"].as_str().unwrap();
        assert!(
            m.contains(&format!("U+{:04X}", bidi.chars().next().unwrap() as u32)) && m.contains("character 4"),
            "{m}"
        );
        let (status, _) = lab.post(
            &format!("/runs/{id}/dialog/answer"),
            &json!({"tool_id": tool_id, "answers": [{"feedback": {"option": 0, "text": format!("x{bidi}y")}}]}),
        );
        assert_eq!(status, 400, "{bidi:?} in feedback");
    }
    let (status, body) = answer(&"x".repeat(4097));
    assert_eq!((status, body["error"].as_str()), (413, Some("payload_too_large")), "{body}");
    // Nothing was played, and the dialog is still answerable.
    std::thread::sleep(Duration::from_millis(500));
    assert!(events(&log, "answer").is_empty(), "{:?}", events(&log, "answer"));
    let v = lab.view(&id);
    assert_eq!((v["state"].as_str(), v["pending_dialog"]["answerable"].as_bool()), (Some("question"), Some(true)));
    let text = "MariaDB; C-c \"q\" é";
    let (status, body) = answer(text);
    assert_eq!(status, 202, "{body}");
    let got = wait_event(&log, "the answer", |e| e["event"] == "answer");
    assert_eq!(got["answers"]["Which database should we use?"], text, "{got}");
}

/// Every file or directory named `name` under `dir`.
fn find_named(dir: &Path, name: &str, found: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if e.file_name() == name {
            found.push(p.clone());
        }
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            find_named(&p, name, found);
        }
    }
}

#[test]
fn a_workdir_is_a_path_never_a_tmux_format() {
    let w = World::new();
    let log = w.use_fake_claude(&json!({"steps": []}));
    let lab = w.serve();
    // Measured on main: tmux expanded `#(id > f)` in `new-session -c` and ran it.
    let dir = w.workdir.join("sub#(id > f)");
    std::fs::create_dir(&dir).unwrap();
    let (status, run) = lab.post("/runs", &json!({"provider": "claude-code", "workdir": dir, "prompt": "hi"}));
    assert_eq!(status, 201, "{run}");
    assert_eq!(run["workdir"], dir.display().to_string());
    let start = wait_event(&log, "the agent to start", |e| e["event"] == "start");
    assert_eq!(start["cwd"], dir.display().to_string(), "the agent's cwd is exactly the workdir");
    let pid = agent_pid(&w, &run);
    let environ = String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/environ")).unwrap()).replace('\0', "\n");
    assert!(environ.lines().any(|l| l == format!("PWD={}", dir.display())), "PWD is the workdir");
    assert_eq!(std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap(), dir);
    wait_composer_or_prompt(&log);

    // No `f` anywhere a format job could have written it: the world (workdir, homes),
    // the tmux server's cwd, the test's cwd, `/`.
    std::thread::sleep(Duration::from_millis(500));
    let mut found = Vec::new();
    find_named(w.dir.path(), "f", &mut found);
    let server = String::from_utf8(w.tmux(&["display-message", "-p", "#{pid}"]).stdout).unwrap();
    let server_cwd = std::fs::read_link(format!("/proc/{}/cwd", server.trim())).unwrap();
    for d in [server_cwd, std::env::current_dir().unwrap(), PathBuf::from("/")] {
        if d.join("f").exists() {
            found.push(d.join("f"));
        }
    }
    assert!(found.is_empty(), "a tmux format ran: {found:?}");

    // Workdirs that are not plain absolute directories are refused before anything runs.
    let file = w.dir.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    let base = w.workdir.display().to_string();
    for bad in [
        "relative/dir".to_string(),
        format!("{base}/../w"),
        format!("{base}/./sub"),
        format!("{base}/"),
        format!("/{base}"),
        format!("{base}/new\nline"),
        format!("{base}/\u{1b}[A"),
        format!("{base}/missing"),
        file.display().to_string(),
    ] {
        let (status, body) = lab.post("/runs", &json!({"provider": "claude-code", "workdir": bad, "prompt": "x"}));
        assert_eq!((status, body["error"].as_str()), (400, Some("bad_request")), "{bad:?}: {body}");
    }
    let (_, runs) = lab.get("/runs");
    assert_eq!(runs.as_array().unwrap().len(), 1, "no run was recorded for a refused workdir");
}

fn wait_composer_or_prompt(log: &Path) {
    wait_event(log, "the prompt", |e| e["event"] == "user_message");
}

/// `len` bytes of text: lines of words, TABs and accents when `multiline`, one line
/// otherwise.
fn text_of(len: usize, multiline: bool) -> String {
    let mut s = String::with_capacity(len);
    let mut i = 0;
    while s.len() + 64 < len {
        if multiline {
            s.push_str(&format!("line {i}\tnaïve café; C-c \"q\" `x` $HOME\n"));
        } else {
            s.push_str(&format!("word {i} naïve café; C-c \"q\" `x` $HOME "));
        }
        i += 1;
    }
    while s.len() < len {
        s.push('x');
    }
    assert_eq!(s.len(), len);
    s
}

const LIMIT: usize = 256 * 1024;

#[test]
fn prompts_and_messages_up_to_256_kib_arrive_whole_and_byte_exact() {
    let w = World::new();
    let log = w.use_fake_claude(&json!({"steps": []}));
    let lab = w.serve();

    // A 256 KiB prompt cannot be one argument (Linux: 128 KiB): lab types it in.
    let prompt = text_of(LIMIT, true);
    let run = lab.create_run(&w, "claude-code", &prompt);
    let id = run_id(&run);
    let (status, body) = post_message(&lab, &id, "too early");
    assert_eq!((status, body["error"].as_str()), (409, Some("prompt_pending")), "{body}");
    let got = wait_composer_text(&log, 1);
    assert!(got == prompt, "the prompt arrived changed: {} bytes, expected {}", got.len(), prompt.len());
    let start = events(&log, "start").remove(0);
    assert!(start["prompt"].is_null(), "the agent started without a prompt argument");
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", agent_pid(&w, &run))).unwrap();
    assert!(cmdline.len() < 4096, "the prompt is not on the agent's command line ({} bytes)", cmdline.len());
    lab.wait_view(&id, "the prompt delivered", |v| v["composer_lock"].is_null() && v["state"] == "idle");

    // Messages: 256 KiB on one line, then on many lines with TABs.
    for (n, text) in [(2, text_of(LIMIT, false)), (3, text_of(LIMIT, true))] {
        let (status, body) = post_message(&lab, &id, &text);
        assert_eq!(status, 202, "{body}");
        let got = wait_composer_text(&log, n);
        assert!(got == text, "message {n} arrived changed: {} bytes, expected {}", got.len(), text.len());
        lab.wait_view(&id, "the echo", |v| v["state"] == "idle" && v["composer_lock"].is_null());
    }
    // CR LF is a line break.
    let (status, body) = post_message(&lab, &id, "one\r\ntwo");
    assert_eq!(status, 202, "{body}");
    assert_eq!(wait_composer_text(&log, 4), "one\ntwo");

    // One byte over the limit: refused, nothing typed, no run created.
    let over = text_of(LIMIT + 1, false);
    let (status, body) = post_message(&lab, &id, &over);
    assert_eq!((status, body["error"].as_str()), (413, Some("payload_too_large")), "{body}");
    assert!(body["message"].as_str().unwrap().contains("262144"), "{body}");
    let (status, body) = lab.post("/runs", &json!({"provider": "claude-code", "workdir": w.workdir, "prompt": over}));
    assert_eq!((status, body["error"].as_str()), (413, Some("payload_too_large")), "{body}");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(composer_texts(&log).len(), 4);
    let (_, runs) = lab.get("/runs");
    assert_eq!(runs.as_array().unwrap().len(), 1);
}

#[test]
fn a_prompt_that_fits_the_command_line_is_the_agent_s_argument_byte_exact() {
    let w = World::new();
    let log = w.use_fake_claude(&json!({"steps": []}));
    let lab = w.serve();
    // Well over tmux's command-length limit (measured on main: 16.3 KB → 422), under
    // Linux's 128 KiB per argument.
    let prompt = text_of(120 * 1024, true);
    let run = lab.create_run(&w, "claude-code", &prompt);
    let start = wait_event(&log, "the agent to start", |e| e["event"] == "start");
    assert!(start["prompt"] == prompt.as_str(), "the prompt argument arrived changed");
    let got = wait_event(&log, "the prompt", |e| e["event"] == "user_message");
    assert_eq!(got["source"], "prompt");
    assert!(lab.view(&run_id(&run))["composer_lock"]["code"] != "prompt_pending");
}
