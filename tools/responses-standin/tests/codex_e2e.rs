//! End-to-end: the REAL Codex CLI (the pin, scripts/install-codex.sh; written against
//! 0.169.0, green on 0.171.0) in tmux against the Responses API stand-in.
//!
//! Each test builds its own world in a temp dir: the stand-in on 127.0.0.1 (request log
//! `requests.jsonl`), an empty `HOME`, a `CODEX_HOME` whose `config.toml` is the offline
//! configuration of /work/shared/notes/codex-0.169.0-observed.md §2 (a `standin` model
//! provider with `wire_api = "responses"` and `base_url` = the stand-in, zero retries,
//! `approval_policy = "on-request"`, `sandbox_mode = "workspace-write"`, update check off,
//! the work dir trusted), and a private tmux server (`tmux -S <dir>/sock -f /dev/null`)
//! that runs
//!
//! ```text
//! env -i PATH=… HOME=<dir>/home CODEX_HOME=<dir>/codex-home STANDIN_API_KEY=… TERM=xterm-256color \
//!        HTTP(S)_PROXY/ALL_PROXY=<loopback trap> NO_PROXY=127.0.0.1,localhost \
//!   codex --no-daemon --dangerously-bypass-hook-trust \
//!         -c 'hooks.<Event>=[{hooks=[{type="command",command="<dir>/hook.sh <Event>",timeout=30}]}]' … \
//!         "<first prompt>"
//! ```
//!
//! with per-run hooks for SessionStart, UserPromptSubmit, PreToolUse, PermissionRequest,
//! PostToolUse and Stop, each appending its stdin (one JSON payload) to
//! `<dir>/hooks/<Event>.jsonl`. Only loopback is contacted: the stand-in, and a proxy
//! "trap" on 127.0.0.1 that every non-loopback HTTP(S) request of a proxy-respecting client
//! reaches and that refuses it (403). `[features] plugins = false` turns off the curated
//! plugin sync (github.com, api.github.com, chatgpt.com) and `[analytics] enabled = false`
//! the analytics; the one fetch left, the TUI's announcement tip from
//! raw.githubusercontent.com at every start, has no switch in 0.169.0: each test asserts
//! the trap saw nothing else.
//!
//! What the tests rely on (and so prove for codex 0.169.0; docs/providers/codex/compat.md):
//! * with that config no login, onboarding or trust screen appears, and the prompt given as
//!   the last argument is submitted at once; a prompt typed with `send-keys -l`, a pause
//!   and `Enter` is submitted too;
//! * codex calls only `POST /v1/responses` (with `Authorization: Bearer <key>`), plus one
//!   tool-less title request per thread, answered with `{"title": …}`;
//! * hooks given with `-c` run under `--dangerously-bypass-hook-trust`; SessionStart fires
//!   once, at the first turn, and carries `transcript_path`, `session_id`, `cwd`;
//!   PermissionRequest fires while the approval prompt is open (`tool_name: "Bash"`,
//!   `tool_input.command`, `tool_input.description` = the justification); PreToolUse and
//!   PostToolUse carry `tool_use_id` = the stand-in's `call_id`; Stop carries
//!   `last_assistant_message`;
//! * the rollout at `transcript_path` holds `session_meta` (`cli_version`), the assistant
//!   text as a `response_item` `message`, the call as `function_call`, and — only once the
//!   prompt was answered — its `function_call_output`;
//! * `exec_command` with `"sandbox_permissions": "require_escalated"` draws the prompt
//!   "Would you like to run the following command?" (`Reason:` = justification,
//!   `$ <cmd>`, "Yes, proceed (y)", "(esc)"); `y` runs the command and the next request
//!   carries the `function_call_output`; Esc cancels: the command does not run, no
//!   request follows, the rollout records "aborted by user" and `turn_aborted`, and
//!   PostToolUse does not fire; without escalation the command runs without a prompt;
//! * a key sent 0.5 s after the prompt is drawn is taken (`APPROVAL_SETTLE`; sent at once
//!   it is sometimes dropped);
//! * one Ctrl-C at the idle prompt ends codex (with `--no-daemon`) and prints
//!   `codex resume <session id>`.
//!
//! The binary: `LAB_CODEX_BIN` (scripts/test sets it from scripts/install-codex.sh). Unset
//! or not executable: with `CI=true` every test fails; otherwise each prints a loud SKIPPED
//! and passes. At most two codex processes run at a time. A failing test keeps its world
//! directory (path printed with the screen) as evidence; the tmux server is killed at the
//! end of every test whatever happens.

#[path = "../../../host/tests/common/agent_bin.rs"]
mod agent_bin;
use agent_bin::agent_bin;
use responses_standin::{codex_config, toml_str, Matcher, ProxyTrap, Reply, Script, Standin};
use serde_json::Value;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The pinned release (scripts/install-codex.sh's default): what runs unless
/// LAB_CODEX_VERSION asks for another.
fn pinned_version() -> String {
    let script =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/install-codex.sh")).unwrap();
    script
        .lines()
        .find_map(|l| l.strip_prefix("VERSION=\"${LAB_CODEX_VERSION:-")?.strip_suffix("}\""))
        .expect("VERSION= in scripts/install-codex.sh")
        .to_string()
}
/// Launch to first answer takes ~1 s when idle; generous for a loaded 2-core machine.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(60);
const STEP_TIMEOUT: Duration = Duration::from_secs(30);
const APPROVAL_PROMPT: &str = "Would you like to run the following command?";
/// How long after the approval prompt is drawn a key is sent. Sooner, codex 0.169.0 can
/// drop the key (y and Esc alike; ~1 in 10 with two codex processes on 2 cores, when
/// sent the moment the prompt appears); 0.5 s was never seen to lose one.
const APPROVAL_SETTLE: Duration = Duration::from_millis(500);
const HOOK_EVENTS: [&str; 6] =
    ["SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse", "Stop"];
const API_KEY: &str = "standin-key-0123456789";
/// The TUI fetches `https://raw.githubusercontent.com/openai/codex/main/announcement_tip.toml`
/// at every start, through the proxy; 0.169.0 has no switch for it. The trap refuses it.
const ANNOUNCEMENT_TIP: &str = "CONNECT raw.githubusercontent.com:443 ";

// ---------------------------------------------------------------------------------------
// The binary and the concurrency limit
// ---------------------------------------------------------------------------------------

fn codex_bin() -> Option<PathBuf> {
    agent_bin("LAB_CODEX_BIN", "scripts/install-codex.sh", "the tmux-level tests against the real codex")
}

/// At most two codex processes at a time (a counting semaphore).
struct Slot;
static SLOTS: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());
fn take_slot() -> Slot {
    let mut n = SLOTS.0.lock().unwrap_or_else(|e| e.into_inner());
    while *n >= 2 {
        n = SLOTS.1.wait(n).unwrap_or_else(|e| e.into_inner());
    }
    *n += 1;
    Slot
}
impl Drop for Slot {
    fn drop(&mut self) {
        *SLOTS.0.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        SLOTS.1.notify_one();
    }
}

// ---------------------------------------------------------------------------------------
// A world: stand-in, CODEX_HOME, hooks, private tmux server
// ---------------------------------------------------------------------------------------

const SESSION: &str = "codex";

struct World {
    dir: Option<tempfile::TempDir>,
    root: PathBuf,
    work: PathBuf,
    codex_home: PathBuf,
    sock: PathBuf,
    standin: Standin,
    trap: ProxyTrap,
    _slot: Slot,
}

impl World {
    fn new(script: Script) -> World {
        let slot = take_slot();
        let dir = tempfile::Builder::new().prefix("codex-e2e-").tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (home, codex_home, work, hooks) =
            (root.join("home"), root.join("codex-home"), root.join("work"), root.join("hooks"));
        for d in [&home, &codex_home, &work, &hooks] {
            std::fs::create_dir_all(d).unwrap();
        }
        let standin = Standin::start_logged(script, root.join("requests.jsonl")).unwrap();
        let config = codex_config(&standin.url(), Some(work.to_str().unwrap()));
        std::fs::write(codex_home.join("config.toml"), config).unwrap();
        let hook = root.join("hook.sh");
        std::fs::write(
            &hook,
            format!(
                "#!/bin/sh\n# hook.sh EVENT: append the payload (stdin) as one line to hooks/EVENT.jsonl\n\
                 {{ cat; echo; }} >> '{}'/\"$1\".jsonl\nexit 0\n",
                hooks.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        World {
            sock: root.join("sock"),
            dir: Some(dir),
            root,
            work,
            codex_home,
            standin,
            trap: ProxyTrap::start(),
            _slot: slot,
        }
    }

    fn tmux(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.sock).args(["-f", "/dev/null"]);
        c
    }

    fn tmux_run(&self, args: &[&str]) -> String {
        let out = self.tmux().args(args).output().expect("run tmux");
        assert!(out.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts codex in the private tmux server with the per-run hooks and `prompt`.
    fn launch(&self, bin: &Path, prompt: &str) {
        let hook = self.root.join("hook.sh");
        let trap = self.trap.url();
        let mut cmd = self.tmux();
        cmd.args(["new-session", "-d", "-s", SESSION, "-x", "200", "-y", "50", "-c"]).arg(&self.work);
        cmd.arg("env").arg("-i");
        cmd.arg(format!("PATH={}", std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())));
        cmd.arg(format!("HOME={}", self.root.join("home").display()));
        cmd.arg(format!("CODEX_HOME={}", self.codex_home.display()));
        cmd.arg(format!("{}={API_KEY}", responses_standin::API_KEY_ENV));
        cmd.args(["TERM=xterm-256color", "LANG=C.UTF-8"]);
        for v in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"] {
            cmd.arg(format!("{v}={trap}"));
        }
        cmd.args(["NO_PROXY=127.0.0.1,localhost,::1", "no_proxy=127.0.0.1,localhost,::1"]);
        cmd.arg(bin).args(["--no-daemon", "--dangerously-bypass-hook-trust"]);
        for ev in HOOK_EVENTS {
            let command = format!("{} {ev}", hook.display());
            cmd.arg("-c").arg(format!(
                "hooks.{ev}=[{{hooks=[{{type=\"command\",command={},timeout=30}}]}}]",
                toml_str(&command)
            ));
        }
        cmd.arg(prompt);
        let out = cmd.output().expect("start tmux");
        assert!(out.status.success(), "tmux new-session: {}", String::from_utf8_lossy(&out.stderr));
        self.tmux_run(&["set-option", "-t", SESSION, "remain-on-exit", "on"]);
    }

    fn screen(&self) -> String {
        self.tmux()
            .args(["capture-pane", "-p", "-t", SESSION])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// Sends `key` once `APPROVAL_SETTLE` has passed since the prompt was seen at `shown`.
    fn answer_prompt(&self, shown: Instant, key: &str) {
        thread::sleep(APPROVAL_SETTLE.saturating_sub(shown.elapsed()));
        self.keys(&[key]);
    }

    fn wait_screen(&self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.screen();
            if s.contains(needle) {
                return s;
            }
            if Instant::now() >= deadline {
                panic!("{needle:?} did not appear on screen within {timeout:?}; screen:\n{s}");
            }
            thread::sleep(Duration::from_millis(200));
        }
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", SESSION];
        args.extend_from_slice(keys);
        self.tmux_run(&args);
    }

    /// Types a prompt: the text literally, ~0.3 s, then Enter (sooner, Enter can be lost).
    fn type_prompt(&self, text: &str) {
        self.tmux_run(&["send-keys", "-t", SESSION, "-l", text]);
        thread::sleep(Duration::from_millis(300));
        self.keys(&["Enter"]);
    }

    fn pane_dead(&self) -> bool {
        self.tmux()
            .args(["display-message", "-p", "-t", SESSION, "#{pane_dead}"])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "1")
    }

    fn hooks(&self, event: &str) -> Vec<Value> {
        let text = std::fs::read_to_string(self.root.join("hooks").join(format!("{event}.jsonl"))).unwrap_or_default();
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).expect("hook payload is JSON"))
            .collect()
    }

    fn wait_hook(&self, event: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(p) = self.hooks(event).into_iter().next() {
                return p;
            }
            if Instant::now() >= deadline {
                panic!("hook {event} did not fire within {timeout:?}; screen:\n{}", self.screen());
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// The rollout path from the SessionStart payload (waits for it).
    fn transcript(&self) -> PathBuf {
        let p = self.wait_hook("SessionStart", LAUNCH_TIMEOUT);
        PathBuf::from(p["transcript_path"].as_str().expect("SessionStart carries transcript_path"))
    }

    fn rollout(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.transcript()).unwrap_or_default();
        // The last line may be half-written while codex appends.
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    fn wait_rollout(&self, what: &str, timeout: Duration, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let lines = self.rollout();
            if pred(&lines) {
                return lines;
            }
            if Instant::now() >= deadline {
                panic!("rollout never showed {what} within {timeout:?}; {} lines", lines.len());
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    fn wait_for(&self, what: &str, timeout: Duration, pred: impl Fn() -> bool) {
        let deadline = Instant::now() + timeout;
        while !pred() {
            if Instant::now() >= deadline {
                panic!("{what} did not happen within {timeout:?}; screen:\n{}", self.screen());
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Every request codex made went to `POST /v1/responses` with the key, exactly one
    /// was a title request, and nothing but the known announcement-tip fetch reached the
    /// proxy trap.
    fn assert_network_was_as_expected(&self) {
        let reqs = self.standin.requests();
        for r in &reqs {
            assert_eq!(
                (r.method.as_str(), r.path.as_str()),
                ("POST", "/v1/responses"),
                "unexpected request {}",
                r.index
            );
            assert_eq!(r.header("authorization"), Some(format!("Bearer {API_KEY}").as_str()));
        }
        let titles: Vec<_> = reqs.iter().filter(|r| r.kind == responses_standin::RequestKind::Title).collect();
        assert_eq!(titles.len(), 1, "one title request per thread");
        let format = &titles[0].body["text"]["format"];
        assert_eq!(format["type"], "json_schema", "the title request asks for structured output");
        assert_eq!(format["schema"]["required"], serde_json::json!(["title"]));
        let beyond: Vec<String> = self.trap.seen().into_iter().filter(|l| !l.starts_with(ANNOUNCEMENT_TIP)).collect();
        assert_eq!(beyond, Vec::<String>::new(), "codex tried to reach the network beyond loopback");
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let panicking = thread::panicking();
        if panicking {
            let _ = writeln!(
                std::io::stderr(),
                "--- screen at failure ---\n{}\n--- world kept at {} ---",
                self.screen(),
                self.root.display()
            );
        }
        // The pane's process, so its exit can be awaited before the dir is removed.
        let pid = self
            .tmux()
            .args(["display-message", "-p", "-t", SESSION, "#{pane_pid}"])
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse::<u32>().ok());
        let _ = self.tmux().arg("kill-server").output();
        if let Some(pid) = pid {
            let deadline = Instant::now() + Duration::from_secs(5);
            while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(50));
            }
        }
        if let Some(dir) = self.dir.take() {
            if panicking {
                let _ = dir.keep();
            } else {
                for _ in 0..10 {
                    if std::fs::remove_dir_all(&self.root).is_ok() || !self.root.exists() {
                        break;
                    }
                    thread::sleep(Duration::from_millis(200));
                }
            }
        }
    }
}

fn items<'a>(lines: &'a [Value], line_type: &'a str, payload_type: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    lines.iter().filter(move |l| l["type"] == line_type && l["payload"]["type"] == payload_type).map(|l| &l["payload"])
}

fn assistant_texts(lines: &[Value]) -> Vec<String> {
    items(lines, "response_item", "message")
        .filter(|p| p["role"] == "assistant")
        .flat_map(|p| p["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["text"].as_str().map(str::to_string))
        .collect()
}

fn has_output_for(lines: &[Value], call_id: &str) -> bool {
    items(lines, "response_item", "function_call_output").any(|p| p["call_id"] == call_id)
}

// ---------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------

/// (a) A text reply reaches the rollout and the screen; a typed second prompt works;
/// SessionStart fires once; Ctrl-C ends codex with a resume hint.
#[test]
fn plain_text_reply_reaches_the_rollout_and_the_screen() {
    let Some(bin) = codex_bin() else { return };
    let out = Command::new(&bin).arg("--version").output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let version =
        said.strip_prefix("codex-cli ").unwrap_or_else(|| panic!("`codex --version` said {said:?}")).to_string();
    if std::env::var_os("LAB_CODEX_VERSION").is_none() {
        assert_eq!(version, pinned_version(), "the pin (scripts/install-codex.sh) is what runs");
    }

    let script = Script::new()
        .turn(Matcher::Contains("hello".into()), Reply::text("Hello from the stand-in."))
        .turn(
            Matcher::All(vec![Matcher::NewUserTurn, Matcher::Contains("second".into())]),
            Reply::text("Second answer."),
        )
        .title("Stand-in title");
    let w = World::new(script);
    w.launch(&bin, "hello there");

    let start = w.wait_hook("SessionStart", LAUNCH_TIMEOUT);
    assert_eq!(start["hook_event_name"], "SessionStart");
    assert_eq!(start["source"], "startup");
    assert_eq!(start["cwd"], w.work.to_str().unwrap());
    assert_eq!(start["model"], "stand-in-model");
    let session_id = start["session_id"].as_str().expect("session_id").to_string();
    let transcript = w.transcript();
    assert!(transcript.starts_with(w.codex_home.join("sessions")), "{}", transcript.display());
    let name = transcript.file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with("rollout-") && name.ends_with(&format!("-{session_id}.jsonl")), "{name}");

    let screen = w.wait_screen("Hello from the stand-in.", LAUNCH_TIMEOUT);
    assert!(screen.contains("› hello there"), "{screen}");
    let lines = w.wait_rollout("the assistant text", STEP_TIMEOUT, |l| {
        assistant_texts(l).contains(&"Hello from the stand-in.".to_string())
            && items(l, "event_msg", "task_complete").next().is_some()
    });
    let meta = &lines[0];
    assert_eq!(meta["type"], "session_meta");
    assert_eq!(meta["payload"]["cli_version"], version.as_str());
    assert_eq!(meta["payload"]["id"], session_id.as_str());
    assert_eq!(meta["payload"]["cwd"], w.work.to_str().unwrap());
    assert!(lines.iter().all(|l| l["timestamp"].is_string() && l["payload"].is_object()), "line shape");
    // The title answer shows in the footer.
    w.wait_screen("Stand-in title", STEP_TIMEOUT);

    // A prompt typed into the TUI.
    w.type_prompt("a second question");
    w.wait_screen("Second answer.", STEP_TIMEOUT);
    w.wait_rollout("the second answer", STEP_TIMEOUT, |l| assistant_texts(l).contains(&"Second answer.".to_string()));
    let prompts: Vec<String> =
        w.hooks("UserPromptSubmit").iter().map(|p| p["prompt"].as_str().unwrap_or("").to_string()).collect();
    assert_eq!(prompts, ["hello there", "a second question"]);
    w.wait_for("the Stop hook of the second turn", STEP_TIMEOUT, || w.hooks("Stop").len() == 2);
    assert_eq!(w.hooks("Stop")[1]["last_assistant_message"], "Second answer.");
    assert_eq!(w.hooks("SessionStart").len(), 1, "SessionStart fires once per session");
    assert!(w.standin.remaining_turns().is_empty());
    w.assert_network_was_as_expected();

    // One Ctrl-C at the idle prompt ends codex (--no-daemon) and prints the resume hint.
    // Sent once the prompt has settled: like the approval prompt's keys, one sent the
    // instant codex redraws can be dropped (seen once under a full test run's load).
    thread::sleep(APPROVAL_SETTLE);
    w.keys(&["C-c"]);
    w.wait_for("codex exiting after Ctrl-C", STEP_TIMEOUT, || w.pane_dead());
    let screen = w.screen();
    assert!(screen.contains(&format!("codex resume {session_id}")), "{screen}");
}

/// (b) An escalated exec_command draws the approval prompt and fires PermissionRequest;
/// `y` runs it and the stand-in receives the function_call_output.
#[test]
fn approval_prompt_y_runs_the_command() {
    let Some(bin) = codex_bin() else { return };
    let justification = "Stand-in wants to create approved.txt";
    let script = Script::new()
        .turn(Matcher::Contains("TOUCHME".into()), Reply::exec_command_escalated("touch approved.txt", justification))
        .after_output("Tool finished.");
    let w = World::new(script);
    w.launch(&bin, "please TOUCHME");

    let screen = w.wait_screen(APPROVAL_PROMPT, LAUNCH_TIMEOUT);
    let shown = Instant::now();
    for want in [
        "Environment: local",
        &format!("Reason: {justification}"),
        "$ touch approved.txt",
        "1. Yes, proceed (y)",
        "(p)",
        "3. No, and tell Codex what to do differently (esc)",
        "Press enter to confirm or esc to cancel",
    ] {
        assert!(screen.contains(want), "approval prompt lacks {want:?}:\n{screen}");
    }
    let call = w.standin.wait_for_call(0, STEP_TIMEOUT).expect("the stand-in sent the call");
    let perm = w.wait_hook("PermissionRequest", STEP_TIMEOUT);
    assert_eq!(perm["tool_name"], "Bash");
    assert_eq!(perm["tool_input"]["command"], "touch approved.txt");
    assert_eq!(perm["tool_input"]["description"], justification);
    assert_eq!(perm["transcript_path"], w.transcript().to_str().unwrap());
    let pre = w.wait_hook("PreToolUse", STEP_TIMEOUT);
    assert_eq!(pre["tool_use_id"], call.call_id.as_str());

    // While the prompt is open: nothing ran, nothing was sent, the rollout ends at the call.
    assert!(!w.work.join("approved.txt").exists(), "the command ran before approval");
    assert!(w.standin.outputs_for(&call.call_id).is_empty());
    let lines = w.wait_rollout("the function_call", STEP_TIMEOUT, |l| {
        items(l, "response_item", "function_call").any(|p| p["call_id"] == call.call_id.as_str())
    });
    assert!(!has_output_for(&lines, &call.call_id), "the rollout has no record of the pending approval");
    assert!(w.hooks("PostToolUse").is_empty());

    w.answer_prompt(shown, "y");
    w.wait_for("approved.txt to be created", STEP_TIMEOUT, || w.work.join("approved.txt").exists());
    let output = w.standin.wait_for_output(&call.call_id, STEP_TIMEOUT).expect("function_call_output after approval");
    assert!(output.contains("Process exited with code 0"), "{output}");
    let screen = w.wait_screen("Tool finished.", STEP_TIMEOUT);
    assert!(screen.contains("You approved codex to run touch approved.txt"), "{screen}");

    let post = w.wait_hook("PostToolUse", STEP_TIMEOUT);
    assert_eq!(post["tool_use_id"], call.call_id.as_str());
    assert_eq!(post["tool_input"]["command"], "touch approved.txt");
    assert!(post.get("tool_response").is_some(), "{post}");
    w.wait_rollout("the function_call_output", STEP_TIMEOUT, |l| has_output_for(l, &call.call_id));
    w.wait_for("the Stop hook", STEP_TIMEOUT, || !w.hooks("Stop").is_empty());
    assert_eq!(w.hooks("Stop")[0]["last_assistant_message"], "Tool finished.");
    assert_eq!(w.hooks("PermissionRequest").len(), 1);
    assert!(w.standin.remaining_turns().is_empty());
    w.assert_network_was_as_expected();
}

/// (c) Esc at the approval prompt denies: nothing runs, no request follows, the rollout
/// records the abort, PostToolUse does not fire.
#[test]
fn approval_prompt_esc_denies() {
    let Some(bin) = codex_bin() else { return };
    let script = Script::new()
        .turn(Matcher::Contains("TOUCHME".into()), Reply::exec_command_escalated("touch denied.txt", "Stand-in asks"))
        .after_output("This must not be needed.");
    let w = World::new(script);
    w.launch(&bin, "please TOUCHME, then be denied");

    w.wait_screen(APPROVAL_PROMPT, LAUNCH_TIMEOUT);
    let shown = Instant::now();
    let call = w.standin.wait_for_call(0, STEP_TIMEOUT).expect("the stand-in sent the call");
    let perm = w.wait_hook("PermissionRequest", STEP_TIMEOUT);
    assert_eq!(perm["tool_input"]["command"], "touch denied.txt");

    w.answer_prompt(shown, "Escape");
    let screen = w.wait_screen("You canceled the request to run touch denied.txt", STEP_TIMEOUT);
    let screen = if screen.contains("Conversation interrupted") {
        screen
    } else {
        w.wait_screen("Conversation interrupted", STEP_TIMEOUT)
    };
    assert!(!screen.contains(APPROVAL_PROMPT), "{screen}");
    let lines = w.wait_rollout("the abort", STEP_TIMEOUT, |l| items(l, "event_msg", "turn_aborted").next().is_some());
    let out = items(&lines, "response_item", "function_call_output")
        .find(|p| p["call_id"] == call.call_id.as_str())
        .expect("the rollout records the denied call's output");
    assert!(out["output"].as_str().unwrap_or("").contains("aborted by user"), "{out}");
    assert_eq!(items(&lines, "event_msg", "turn_aborted").next().unwrap()["reason"], "interrupted");

    // Give codex time to (not) send anything more.
    thread::sleep(Duration::from_secs(2));
    assert!(!w.work.join("denied.txt").exists(), "the denied command ran");
    assert!(w.standin.outputs_for(&call.call_id).is_empty(), "a request followed the denial");
    assert_eq!(w.standin.turn_requests().len(), 1);
    assert_eq!(w.standin.remaining_turns(), vec![1]);
    assert!(w.hooks("PostToolUse").is_empty(), "PostToolUse fired for a denied command");
    w.assert_network_was_as_expected();
}

/// Without `require_escalated` the command runs without a prompt and without
/// PermissionRequest (in the sandbox, or failing there: the output reaches the stand-in
/// either way).
#[test]
fn unescalated_exec_command_runs_without_asking() {
    let Some(bin) = codex_bin() else { return };
    let script = Script::new()
        .turn(Matcher::Contains("RUNME".into()), Reply::exec_command("echo sandboxed-hello"))
        .after_output("Ran it.");
    let w = World::new(script);
    w.launch(&bin, "please RUNME");

    let call = w.standin.wait_for_call(0, LAUNCH_TIMEOUT).expect("the stand-in sent the call");
    let output = w.standin.wait_for_output(&call.call_id, STEP_TIMEOUT).expect("function_call_output without approval");
    w.wait_screen("Ran it.", STEP_TIMEOUT);
    assert!(w.hooks("PermissionRequest").is_empty(), "no approval was asked");
    let _ = writeln!(std::io::stderr(), "unescalated exec_command output: {output:?}");
    w.wait_for("the PostToolUse hook", STEP_TIMEOUT, || !w.hooks("PostToolUse").is_empty());
    w.assert_network_was_as_expected();
}
