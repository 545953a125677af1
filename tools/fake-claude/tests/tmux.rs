//! fake-claude driven for real: a private tmux server, keys played with `tmux send-keys`
//! 250 ms apart (the pinned pacing of lab's answer recipe), hooks that append their stdin
//! to files, and assertions on the transcript, the hook payloads and the event log.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const BIN: &str = env!("CARGO_BIN_EXE_fake-claude");
const KEY_GAP: Duration = Duration::from_millis(250);
const WAIT: Duration = Duration::from_secs(6);
const REJECTED_PREFIX: &str = "The user doesn't want to proceed with this tool use. The tool use was rejected";

/// One fake-claude in one private tmux server. Dropping it kills the server (also when the
/// test failed) and removes the scratch directory unless the test is failing.
struct Run {
    dir: PathBuf,
    sock: PathBuf,
    session_id: String,
    work: PathBuf,
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.sock)
            .arg("kill-server")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if std::thread::panicking() {
            eprintln!("fake-claude test: scratch dir kept at {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn scratch_dir(name: &str) -> PathBuf {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos();
    // Short: a unix socket path must stay under ~100 bytes.
    let dir = std::env::temp_dir().join(format!("fc-{name}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn hooks_settings(dir: &Path, pre_extra: Option<&str>) -> Value {
    let append = |f: &str| {
        let p = dir.join(f);
        format!("cat >> '{0}'; echo >> '{0}'", p.display())
    };
    let mut pre = vec![json!({"type": "command", "command": append("pre.jsonl")})];
    if let Some(cmd) = pre_extra {
        pre.push(json!({"type": "command", "command": cmd}));
    }
    json!({"hooks": {
        "PreToolUse": [{"matcher": "AskUserQuestion|ExitPlanMode", "hooks": pre}],
        "PostToolUse": [
            {"matcher": "AskUserQuestion|ExitPlanMode", "hooks": [{"type": "command", "command": append("post.jsonl")}]},
            // lab's claude-code provider: a regex for every tool but the dialog tools.
            {"matcher": "^(?!(AskUserQuestion|ExitPlanMode)$).*", "hooks": [{"type": "command", "command": append("post-tools.jsonl")}]}
        ],
        "PermissionRequest": [{"matcher": "^(?!(AskUserQuestion|ExitPlanMode)$).*", "hooks": [{"type": "command", "command": append("permission.jsonl")}]}],
        "Notification": [{"hooks": [{"type": "command", "command": append("notification.jsonl")}]}],
        "Stop": [{"hooks": [{"type": "command", "command": append("stop.jsonl")}]}]
    }})
}

fn read_jsonl(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

fn iso_now() -> String {
    // Same format as the transcript: compare timestamps as strings.
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    let out =
        Command::new("date").args(["-u", "-d", &format!("@{}", ms / 1000), "+%Y-%m-%dT%H:%M:%S"]).output().unwrap();
    format!("{}.{:03}Z", String::from_utf8_lossy(&out.stdout).trim(), ms % 1000)
}

impl Run {
    fn start(name: &str, script: Value, args: &[&str]) -> Run {
        let dir = scratch_dir(name);
        let work = dir.join("work dir"); // a space, to exercise the slug
        let home = dir.join("home");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let run = Run { sock: dir.join("sock"), session_id: "0b4e6a8e-5c1d-4f2a-9e3b-7a6c5d4e3f21".into(), work, dir };
        std::fs::write(run.dir.join("script.json"), script.to_string()).unwrap();
        std::fs::write(run.dir.join("settings.json"), hooks_settings(&run.dir, None).to_string()).unwrap();
        std::fs::write(run.dir.join("tmux.conf"), "set -g remain-on-exit on\n").unwrap();
        let mut cmd = Command::new("tmux");
        cmd.arg("-f")
            .arg(run.dir.join("tmux.conf"))
            .arg("-S")
            .arg(&run.sock)
            .args(["new-session", "-d", "-s", "t", "-x", "120", "-y", "40", "-c"])
            .arg(&run.work)
            .arg(BIN)
            .args(["--session-id", &run.session_id, "--settings"])
            .arg(run.dir.join("settings.json"))
            .args(args)
            .env_remove("TMUX")
            .env_remove("CLAUDE_CONFIG_DIR")
            .env("HOME", &home)
            .env("LANG", "C.UTF-8")
            .env("FAKE_CLAUDE_SCRIPT", run.dir.join("script.json"))
            .env("FAKE_CLAUDE_LOG", run.dir.join("log.jsonl"));
        let out = cmd.output().expect("tmux runs");
        assert!(out.status.success(), "tmux new-session failed: {}", String::from_utf8_lossy(&out.stderr));
        run
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux").arg("-S").arg(&self.sock).args(args).output().expect("tmux runs")
    }

    /// Named keys (`Up`, `Enter`, `Escape`, ...), one `send-keys` each, 250 ms apart.
    fn keys(&self, keys: &[&str]) {
        for k in keys {
            let out = self.tmux(&["send-keys", "-t", "t", k]);
            assert!(out.status.success(), "send-keys {k}: {}", String::from_utf8_lossy(&out.stderr));
            std::thread::sleep(KEY_GAP);
        }
    }

    /// Literal text, exactly as lab types it: `send-keys -l <text>`.
    fn literal(&self, text: &str) {
        let out = self.tmux(&["send-keys", "-t", "t", "-l", text]);
        assert!(out.status.success(), "send-keys -l: {}", String::from_utf8_lossy(&out.stderr));
        std::thread::sleep(KEY_GAP);
    }

    fn pane(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-t", "t"]).stdout).into_owned()
    }

    fn transcript_path(&self) -> PathBuf {
        let slug: String =
            self.work.to_str().unwrap().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
        self.dir.join("home/.claude/projects").join(slug).join(format!("{}.jsonl", self.session_id))
    }

    fn transcript(&self) -> Vec<Value> {
        read_jsonl(&self.transcript_path())
    }

    fn file(&self, name: &str) -> Vec<Value> {
        read_jsonl(&self.dir.join(name))
    }

    fn log(&self) -> Vec<Value> {
        self.file("log.jsonl")
    }

    /// Polls `f` until it yields something; on timeout fails with the pane, log and
    /// transcript so a red test explains itself.
    fn wait<T>(&self, what: &str, mut f: impl FnMut(&Run) -> Option<T>) -> T {
        let start = Instant::now();
        loop {
            if let Some(v) = f(self) {
                return v;
            }
            if start.elapsed() > WAIT {
                panic!(
                    "timed out waiting for {what}\n--- pane ---\n{}\n--- log ---\n{}\n--- transcript ---\n{}",
                    self.pane(),
                    std::fs::read_to_string(self.dir.join("log.jsonl")).unwrap_or_default(),
                    std::fs::read_to_string(self.transcript_path()).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the `n`-th (1-based) `ready` event of `widget`; returns its tool_use_id.
    fn ready(&self, widget: &str, n: usize) -> String {
        self.wait(&format!("ready #{n} of {widget}"), |r| {
            let evs: Vec<Value> =
                r.log().into_iter().filter(|e| e["event"] == "ready" && e["widget"] == widget).collect();
            evs.get(n - 1).map(|e| e["tool_use_id"].as_str().unwrap_or("").to_string())
        })
    }

    fn tool_result(&self, id: &str) -> Option<Value> {
        self.transcript().into_iter().find(|l| {
            l["type"] == "user"
                && l["message"]["content"][0]["type"] == "tool_result"
                && l["message"]["content"][0]["tool_use_id"] == id
        })
    }

    fn tool_use_line(&self, id: &str) -> Option<Value> {
        self.transcript().into_iter().find(|l| {
            l["type"] == "assistant"
                && l["message"]["content"][0]["type"] == "tool_use"
                && l["message"]["content"][0]["id"] == id
        })
    }

    fn answer_event(&self, id: &str) -> Value {
        self.wait("answer log event", |r| {
            r.log().into_iter().find(|e| e["event"] == "answer" && e["tool_use_id"] == id)
        })
    }
}

fn colors(multi: bool) -> Value {
    json!({"question": "Which color?", "header": "Color", "multiSelect": multi, "options": [
        {"label": "Red", "description": "warm"},
        {"label": "Green", "description": "fresh"},
        {"label": "Blue", "description": "cool"}
    ]})
}

fn keys_of(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    k.sort();
    k
}

#[test]
fn option_recipe_writes_tool_result_and_post_hook() {
    let run = Run::start(
        "opt",
        json!({"flush_pending_tool_use": true, "steps": [{"say": "Let me ask."}, {"ask": {"questions": [colors(false)]}}, {"idle": {}}]}),
        &["--permission-mode", "auto", "pick a color"],
    );
    let id = run.ready("ask", 1);
    assert!(id.starts_with("toolu_"), "{id}");

    // PreToolUse fired before the picker, with the notes' §9 payload.
    let pre = run.file("pre.jsonl");
    assert_eq!(pre.len(), 1, "{pre:?}");
    let p = &pre[0];
    assert_eq!(
        keys_of(p),
        [
            "cwd",
            "effort",
            "hook_event_name",
            "permission_mode",
            "prompt_id",
            "session_id",
            "tool_input",
            "tool_name",
            "tool_use_id",
            "transcript_path"
        ]
    );
    assert_eq!(p["hook_event_name"], "PreToolUse");
    assert_eq!(p["tool_name"], "AskUserQuestion");
    assert_eq!(p["tool_use_id"], id.as_str());
    assert_eq!(p["session_id"], run.session_id.as_str());
    assert_eq!(p["permission_mode"], "auto");
    assert_eq!(p["cwd"], run.work.to_str().unwrap());
    assert_eq!(p["transcript_path"], run.transcript_path().to_str().unwrap());
    assert_eq!(p["tool_input"], json!({"questions": [colors(false)]}));
    assert!(p["effort"]["level"].is_string());

    // Flushed while pending: the tool_use line is there, the result is not.
    let tu = run.tool_use_line(&id).expect("pending tool_use flushed");
    assert_eq!(tu["message"]["content"][0]["name"], "AskUserQuestion");
    assert!(run.tool_result(&id).is_none());
    assert!(run.pane().contains("Type something."));

    // lab's recipe for option i=1 of N=3: Up × (N−1+2), Down × i, Enter.
    run.keys(&["Up", "Up", "Up", "Up", "Down", "Enter"]);
    let post = run.wait("PostToolUse payload", |r| r.file("post.jsonl").into_iter().next());
    assert_eq!(post["hook_event_name"], "PostToolUse");
    assert_eq!(post["tool_use_id"], id.as_str());
    assert_eq!(post["tool_input"]["answers"], json!({"Which color?": "Green"}));
    assert_eq!(post["tool_input"]["questions"], json!([colors(false)]));
    assert_eq!(post["tool_input"]["annotations"], json!({}));
    assert_eq!(post["tool_response"]["answers"], json!({"Which color?": "Green"}));
    assert_eq!(
        keys_of(&post),
        [
            "cwd",
            "duration_ms",
            "effort",
            "hook_event_name",
            "permission_mode",
            "prompt_id",
            "session_id",
            "tool_input",
            "tool_name",
            "tool_response",
            "tool_use_id",
            "transcript_path"
        ]
    );
    assert!(post["duration_ms"].is_u64(), "{post}");
    assert_eq!(post["prompt_id"], p["prompt_id"]);

    let tr = run.tool_result(&id).expect("tool_result");
    let block = &tr["message"]["content"][0];
    assert_eq!(
        block["content"],
        "Your questions have been answered: \"Which color?\"=\"Green\". You can now continue with these answers in mind."
    );
    assert!(block.get("is_error").is_none());
    assert_eq!(tr["parentUuid"], tu["uuid"]);
    assert_eq!(tr["toolUseResult"]["answers"]["Which color?"], "Green");
    assert_eq!(tr["promptId"], p["prompt_id"]);
    // "Let me ask." and the tool_use are one API message that stopped for tool_use.
    let said = run.transcript().into_iter().find(|l| l["message"]["content"][0]["text"] == "Let me ask.").unwrap();
    assert_eq!(said["message"]["stop_reason"], "tool_use");
    assert_eq!(said["message"]["id"], tu["message"]["id"]);
    assert_eq!(run.answer_event(&id)["answers"], json!({"Which color?": "Green"}));

    // Then the turn ends the Claude way.
    run.ready("composer", 1);
    let t = run.transcript();
    let n = t.len();
    assert_eq!(t[n - 3]["message"]["stop_reason"], "end_turn");
    assert_eq!(t[n - 2]["subtype"], "stop_hook_summary");
    assert_eq!(t[n - 1]["type"], "system");
    assert_eq!(t[n - 1]["subtype"], "turn_duration");
    assert!(t[n - 1]["messageCount"].as_u64().unwrap() >= 5);
    assert_eq!(t[0], json!({"type": "ai-title", "aiTitle": "pick a color", "sessionId": run.session_id}));
    assert_eq!(t[1]["type"], "mode");
    assert_eq!(t[2], json!({"type": "permission-mode", "permissionMode": "auto", "sessionId": run.session_id}));
    assert!(t.iter().any(|l| l["type"] == "file-history-snapshot"));
    assert!(t.iter().any(|l| l["type"] == "attachment"));
}

#[test]
fn other_text_is_verbatim_and_unflushed_lines_keep_their_timestamp() {
    let run = Run::start(
        "other",
        json!({"flush_pending_tool_use": false, "steps": [{"ask": {"questions": [colors(false)]}}, {"exit": 0}]}),
        &["go"],
    );
    let id = run.ready("ask", 1);
    assert_eq!(run.file("pre.jsonl")[0]["tool_use_id"], id.as_str());
    // Not flushed while pending: nothing about this tool in the transcript yet.
    let raw = std::fs::read_to_string(run.transcript_path()).unwrap();
    assert!(!raw.contains(&id), "pending tool_use must not be written yet");
    let before_keys = iso_now();

    let text = r#"C-c ; "quoted" é"#;
    run.keys(&["Down", "Down", "Down"]); // onto "Type something."
    run.literal(text);
    run.keys(&["Enter"]);

    let post = run.wait("PostToolUse payload", |r| r.file("post.jsonl").into_iter().next());
    assert_eq!(post["tool_use_id"], id.as_str());
    assert_eq!(post["tool_input"]["answers"]["Which color?"], text);
    let tr = run.tool_result(&id).expect("tool_result");
    assert_eq!(
        tr["message"]["content"][0]["content"],
        format!("Your questions have been answered: \"Which color?\"=\"{text}\". You can now continue with these answers in mind.")
    );
    // Retro-flushed: tool_use written now, right before its result, with its original time.
    let t = run.transcript();
    let i = t.iter().position(|l| l["message"]["content"][0]["id"] == id.as_str()).unwrap();
    assert_eq!(t[i + 1]["message"]["content"][0]["tool_use_id"], id.as_str());
    let tu_ts = t[i]["timestamp"].as_str().unwrap();
    assert!(tu_ts < before_keys.as_str(), "tool_use {tu_ts} should predate the answer ({before_keys})");
    assert!(t[i + 1]["timestamp"].as_str().unwrap() >= before_keys.as_str());
    assert_eq!(run.answer_event(&id)["answers"]["Which color?"], text);
}

#[test]
fn escape_rejects_with_error_result_and_no_post_hook() {
    let run = Run::start("esc", json!({"steps": [{"ask": {"questions": [colors(false)]}}, {"idle": {}}]}), &["go"]);
    let id = run.ready("ask", 1);
    run.keys(&["Down", "Escape"]);
    // The composer comes up only after the tool finished (hooks included).
    run.ready("composer", 1);
    let tr = run.tool_result(&id).expect("tool_result");
    let block = &tr["message"]["content"][0];
    assert_eq!(block["is_error"], true);
    assert!(block["content"].as_str().unwrap().starts_with(REJECTED_PREFIX), "{block}");
    assert!(run.file("post.jsonl").is_empty(), "PostToolUse must not fire on Esc");
    assert_eq!(run.answer_event(&id)["outcome"], "rejected");
    assert_eq!(run.file("pre.jsonl").len(), 1);
    // Like 2.1.198: the turn stops at "[Request interrupted by user for tool use]", with
    // no end_turn text and no turn_duration line.
    let t = run.transcript();
    let last = t.last().unwrap();
    assert_eq!(last["type"], "user");
    assert_eq!(last["message"]["content"][0]["text"], "[Request interrupted by user for tool use]");
    assert!(!t.iter().any(|l| l["subtype"] == "turn_duration"));
}

#[test]
fn idle_takes_a_composer_line_then_exits_with_the_scripted_code() {
    let run = Run::start("idle", json!({"steps": [{"say": "Ready."}, {"idle": {}}, {"exit": 7}]}), &["hi"]);
    run.ready("composer", 1);
    let t = run.transcript();
    let said = t.iter().find(|l| l["message"]["content"][0]["text"] == "Ready.").expect("say line");
    assert_eq!(said["message"]["stop_reason"], "end_turn");
    let n = t.len();
    assert_eq!(t[n - 1]["subtype"], "turn_duration");
    assert_eq!(t[n - 2]["subtype"], "stop_hook_summary");
    assert_eq!(t[n - 2]["hookCount"], 1);
    let stop = run.file("stop.jsonl");
    assert_eq!(stop.len(), 1);
    assert_eq!(
        keys_of(&stop[0]),
        [
            "background_tasks",
            "cwd",
            "effort",
            "hook_event_name",
            "last_assistant_message",
            "permission_mode",
            "prompt_id",
            "session_crons",
            "session_id",
            "stop_hook_active",
            "transcript_path"
        ]
    );
    assert_eq!(stop[0]["last_assistant_message"], "Ready.");

    let msg = "fix the bug; then \"ship\" it ✓";
    run.literal(msg);
    run.keys(&["Enter"]);
    run.wait("exit event", |r| r.log().into_iter().find(|e| e["event"] == "exit" && e["code"] == 7));
    let user = run.transcript().into_iter().rev().find(|l| l["type"] == "user").unwrap();
    assert_eq!(user["message"]["content"], msg);
    assert!(run.log().iter().any(|e| e["event"] == "user_message" && e["source"] == "composer" && e["text"] == msg));
    // The process is gone. (tmux 3.3a sometimes misses the SIGCHLD of a pane that exits
    // right after a send-keys, leaving pane_dead_status empty — plain `sh` does it too — so
    // the status is checked only when tmux has it; the exit code itself is asserted in
    // pre_tool_use_exit_2_blocks_the_picker.)
    let status = run.wait("dead pane", |r| {
        let s =
            String::from_utf8_lossy(&r.tmux(&["display", "-p", "-t", "t", "#{pane_dead} #{pane_dead_status}"]).stdout)
                .trim()
                .to_string();
        s.starts_with('1').then_some(s)
    });
    assert!(status == "1" || status == "1 7", "{status}");
}

#[test]
fn tabbed_questions_and_multiselect() {
    let q1 = json!({"question": "Which database?", "header": "Database", "multiSelect": false,
        "options": [{"label": "Postgres", "description": ""}, {"label": "SQLite", "description": ""}]});
    let run = Run::start("tabs", json!({"steps": [{"ask": {"questions": [q1, colors(true)]}}, {"idle": {}}]}), &["go"]);
    let id = run.ready("ask", 1);
    // Tab 1: Down × 1, Enter. Tab 2 (multiSelect): toggle Red, toggle Blue, Down to Submit,
    // Enter. Review screen: Enter on "Submit answers".
    run.keys(&["Down", "Enter", "Enter", "Down", "Down", "Enter", "Down", "Down", "Enter"]);
    assert!(run.pane().contains("Submit answers"), "{}", run.pane());
    run.keys(&["Enter"]);
    let post = run.wait("PostToolUse payload", |r| r.file("post.jsonl").into_iter().next());
    assert_eq!(post["tool_input"]["answers"], json!({"Which database?": "SQLite", "Which color?": "Red, Blue"}));
    let tr = run.tool_result(&id).unwrap();
    assert_eq!(
        tr["message"]["content"][0]["content"],
        "Your questions have been answered: \"Which database?\"=\"SQLite\", \"Which color?\"=\"Red, Blue\". You can now continue with these answers in mind."
    );
}

#[test]
fn plan_approval_bash_permission_and_notifications() {
    let run = Run::start(
        "plan",
        json!({"steps": [
            {"plan": "# Plan\n1. Do it"},
            {"bash": {"command": "rm -rf build", "notify_after_ms": 300}},
            {"notify": {"notification_type": "idle_prompt", "message": "Claude is waiting for your input"}},
            {"exit": 0}
        ]}),
        &["--permission-mode", "plan", "make a plan"],
    );
    let plan_id = run.ready("plan", 1);
    let pre = run.file("pre.jsonl");
    assert_eq!(pre[0]["tool_name"], "ExitPlanMode");
    assert_eq!(pre[0]["tool_input"], json!({"plan": "# Plan\n1. Do it"}));
    assert_eq!(pre[0]["permission_mode"], "plan");
    assert!(run.pane().contains("Exit plan mode?"));
    run.keys(&["Down", "Up", "Enter"]); // "1. Yes"
    let post = run.wait("PostToolUse payload", |r| r.file("post.jsonl").into_iter().next());
    assert_eq!(post["tool_use_id"], plan_id.as_str());
    assert_eq!(post["tool_input"], json!({"plan": "# Plan\n1. Do it"}));
    assert_eq!(post["permission_mode"], "default");
    assert!(run.transcript().iter().any(|l| l["type"] == "permission-mode" && l["permissionMode"] == "default"));
    let plan_result = run.tool_result(&plan_id).unwrap();
    let saved = plan_result["toolUseResult"]["filePath"].as_str().unwrap();
    assert_eq!(std::fs::read_to_string(saved).unwrap(), "# Plan\n1. Do it");
    assert!(plan_result["message"]["content"][0]["content"]
        .as_str()
        .unwrap()
        .starts_with("User has approved your plan."));

    // Bash: the permission prompt, then a permission_prompt Notification.
    let bash_id = run.ready("bash", 1);
    let n = run.wait("Notification payload", |r| r.file("notification.jsonl").into_iter().next());
    assert_eq!(
        keys_of(&n),
        ["cwd", "hook_event_name", "message", "notification_type", "prompt_id", "session_id", "transcript_path"]
    );
    assert_eq!(n["notification_type"], "permission_prompt");
    assert_eq!(n["message"], "Claude needs your permission");
    assert!(run.tool_use_line(&bash_id).is_some());
    assert!(run.pane().contains("Do you want to proceed?"));
    run.keys(&["Escape"]);
    run.wait("exit", |r| r.log().into_iter().find(|e| e["event"] == "exit"));
    assert_eq!(run.tool_result(&bash_id).unwrap()["message"]["content"][0]["is_error"], true);
    // The matcher is an exact-name list: Bash ran no Pre/PostToolUse hook of that group;
    // a rejected call fires no PostToolUse at all.
    assert_eq!(run.file("pre.jsonl").len(), 1);
    assert_eq!(run.file("post.jsonl").len(), 1);
    assert_eq!(run.file("post-tools.jsonl").len(), 0);
    // The plan's PermissionRequest is not modelled; Bash's is (the regex matcher).
    assert_eq!(run.file("permission.jsonl").len(), 1);
    let notes = run.file("notification.jsonl");
    assert_eq!(notes.len(), 2);
    assert_eq!(notes[1]["notification_type"], "idle_prompt");
}

#[test]
fn afk_timer_resets_on_a_key_then_auto_continues() {
    let run = Run::start(
        "afk",
        json!({"steps": [{"ask": {"questions": [colors(false)], "afk_after_ms": 1200}}, {"idle": {}}]}),
        &["go"],
    );
    let id = run.ready("ask", 1);
    let opened = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    run.keys(&["Up", "Up", "Up", "Up"]); // a full turn of the Up cycle: cursor back on option 1
    let post = run.wait("PostToolUse payload", |r| r.file("post.jsonl").into_iter().next());
    assert!(opened.elapsed() >= Duration::from_millis(1700), "the keys must have reset the 1.2 s timer");
    assert_eq!(post["tool_use_id"], id.as_str());
    assert_eq!(post["tool_input"]["answers"], json!({}));
    assert_eq!(post["tool_input"]["afkTimeoutMs"], 1200);
    let tr = run.tool_result(&id).unwrap();
    assert!(tr["message"]["content"][0]["content"]
        .as_str()
        .unwrap()
        .starts_with("No response after 1s — the user may be away from keyboard."));
    assert_eq!(run.answer_event(&id)["outcome"], "afk");
}

// ---- without tmux -----------------------------------------------------------------------

fn plain(dir: &Path, script: Option<&str>, settings: Option<Value>) -> Output {
    let mut c = Command::new(BIN);
    c.current_dir(dir)
        .env("HOME", dir)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env("FAKE_CLAUDE_LOG", dir.join("log.jsonl"))
        .stdin(Stdio::null());
    match script {
        Some(s) => {
            std::fs::write(dir.join("script.json"), s).unwrap();
            c.env("FAKE_CLAUDE_SCRIPT", dir.join("script.json"));
        }
        None => {
            c.env_remove("FAKE_CLAUDE_SCRIPT");
        }
    }
    if let Some(s) = settings {
        std::fs::write(dir.join("settings.json"), s.to_string()).unwrap();
        c.arg("--settings").arg(dir.join("settings.json"));
    }
    c.arg("prompt").output().unwrap()
}

#[test]
fn missing_or_bad_script_exits_2() {
    let dir = scratch_dir("bad");
    let out = plain(&dir, None, None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("FAKE_CLAUDE_SCRIPT"));
    let out = plain(&dir, Some("{\"steps\": [{\"dance\": 1}]}"), None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad script"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pre_tool_use_exit_2_blocks_the_picker() {
    let dir = scratch_dir("block");
    let settings = json!({"hooks": {"PreToolUse": [{"matcher": "AskUserQuestion", "hooks": [
        {"type": "command", "command": "cat >/dev/null; echo 'not now' >&2; exit 2"}]}]}});
    let script = json!({"steps": [{"ask": {"questions": [colors(false)]}}, {"exit": 4}]}).to_string();
    let out = plain(&dir, Some(&script), Some(settings));
    assert_eq!(out.status.code(), Some(4));
    let log = read_jsonl(&dir.join("log.jsonl"));
    assert!(!log.iter().any(|e| e["event"] == "ready"), "no picker when a PreToolUse hook exits 2");
    let ans = log.iter().find(|e| e["event"] == "answer").unwrap();
    assert_eq!(ans["outcome"], "blocked_by_hook");
    assert!(ans["content"].as_str().unwrap().contains("not now"));
    assert!(log.iter().any(|e| e["event"] == "hook" && e["exit_code"] == 2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bash_fires_permission_request_as_drawn_then_post_tool_use_when_it_ran() {
    let run = Run::start(
        "perm",
        json!({"steps": [
            {"bash": {"command": "rm -rf build", "description": "Remove the build folder", "output": "removed"}},
            {"bash": {"command": "make", "output": "", "permission_suggestions": [
                {"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "make *"}], "destination": "localSettings"}
            ]}},
            {"bash": {"command": "ls", "output": "", "permission_suggestions": []}},
            {"idle": {}}
        ]}),
        &["clean up"],
    );
    let first = run.ready("bash", 1);
    let perm = run.wait("PermissionRequest payload", |r| r.file("permission.jsonl").into_iter().next());
    assert_eq!(
        keys_of(&perm),
        [
            "cwd",
            "effort",
            "hook_event_name",
            "permission_mode",
            "permission_suggestions",
            "prompt_id",
            "session_id",
            "tool_input",
            "tool_name",
            "transcript_path"
        ],
        "2.1.198's keys, no tool_use_id"
    );
    assert_eq!(perm["hook_event_name"], "PermissionRequest");
    assert_eq!(perm["tool_name"], "Bash");
    assert_eq!(perm["tool_input"], json!({"command": "rm -rf build", "description": "Remove the build folder"}));
    assert_eq!(perm["effort"], json!({"level": "high"}));
    let work = run.work.to_str().unwrap();
    assert_eq!(
        perm["permission_suggestions"],
        json!([
            {"type": "addDirectories", "directories": [work], "destination": "session"},
            {"type": "setMode", "mode": "acceptEdits", "destination": "session"}
        ])
    );
    // Logged before the prompt reads keys.
    let log = run.log();
    let hook_at = log.iter().position(|e| e["event"] == "hook" && e["hook_event_name"] == "PermissionRequest").unwrap();
    let ready_at = log.iter().position(|e| e["event"] == "ready" && e["widget"] == "bash").unwrap();
    assert!(hook_at < ready_at);
    assert_eq!(log[hook_at]["tool_use_id"], first.as_str());
    let pane = run.pane();
    assert!(pane.contains("2. Yes, and always allow access to work dir/ from this project"), "{pane}");
    assert!(pane.contains("3. No"), "{pane}");

    // Yes: the command "ran": PostToolUse with the same tool_input, and the tool_use_id.
    run.keys(&["1"]);
    let post = run.wait("PostToolUse for Bash", |r| r.file("post-tools.jsonl").into_iter().next());
    assert_eq!(post["tool_name"], "Bash");
    assert_eq!(post["tool_input"], perm["tool_input"]);
    assert_eq!(post["tool_use_id"], first.as_str());
    assert_eq!(post["tool_response"]["stdout"], "removed");
    assert_eq!(run.answer_event(&first)["outcome"], "approved");

    // The second row follows an addRules suggestion; No → no PostToolUse.
    let second = run.ready("bash", 2);
    let perms = run.wait("second PermissionRequest", |r| Some(r.file("permission.jsonl")).filter(|p| p.len() == 2));
    assert_eq!(perms[1]["tool_input"], json!({"command": "make"}));
    assert!(run.pane().contains("2. Yes, and don\u{2019}t ask again for: make *"), "{}", run.pane());
    run.keys(&["3"]);
    assert_eq!(run.answer_event(&second)["outcome"], "rejected");

    // No suggestion: no second row, so "2" is No.
    let third = run.ready("bash", 3);
    assert!(run.pane().contains("2. No"), "{}", run.pane());
    run.keys(&["2"]);
    assert_eq!(run.answer_event(&third)["outcome"], "rejected");
    run.ready("composer", 1);
    assert_eq!(run.file("post-tools.jsonl").len(), 1, "only the call that ran fired PostToolUse");
    assert_eq!(run.file("permission.jsonl").len(), 3);
}
