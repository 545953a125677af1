//! `fake-claude [--session-id UUID] [--settings FILE] [--permission-mode MODE] [PROMPT]`
//!
//! A scripted stand-in for the interactive Claude Code TUI. It writes the session
//! transcript and runs the `--settings` hook commands the way Claude Code 2.1.198 does,
//! and its pickers and composer really react to keys played with `tmux send-keys`.
//! What it does is read from the JSON script named by `FAKE_CLAUDE_SCRIPT`; every event
//! is also appended to `FAKE_CLAUDE_LOG` (one JSON object per line) when that is set.
//! See README.md for the script format.

mod hooks;
mod keys;
mod matcher;
mod script;
mod ui;
mod util;

use hooks::{HookRun, Hooks};
use keys::{Input, Key, RawMode};
use script::{AskStep, BashStep, IdleStep, PlanStep, Question, Script, Step, WriteStep};
use serde_json::{json, Map, Value};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::time::{Duration, Instant};
use ui::{AskOutcome, AskPicker, Choice, ChoiceOutcome, Composer, ComposerOutcome, Screen};
use util::{api_id, epoch_micros, iso_now, uuid_v4};

const REJECTED: &str = "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how to proceed.";
const INTERRUPTED: &str = "[Request interrupted by user for tool use]";
const CHAT_ABOUT_THIS: &str = "The user wants to clarify these questions. This means they may have additional information, context or questions for you. Take their response into account and then reformulate the questions if appropriate. Start by asking them what they would like to clarify.";
const USAGE: &str = "usage: FAKE_CLAUDE_SCRIPT=script.json fake-claude [--session-id UUID] [--resume UUID [--fork-session]] [--settings FILE] [--permission-mode MODE] [PROMPT]";

/// Claude flags that take a value, so their value is not mistaken for the prompt.
const VALUE_FLAGS: &[&str] = &[
    "--session-id",
    "--settings",
    "--permission-mode",
    "--model",
    "--fallback-model",
    "--append-system-prompt",
    "--system-prompt",
    "--system-prompt-file",
    "--append-system-prompt-file",
    "--allowedTools",
    "--allowed-tools",
    "--disallowedTools",
    "--disallowed-tools",
    "--tools",
    "--mcp-config",
    "--add-dir",
    "--resume",
    "-r",
    "--output-format",
    "--input-format",
    "--max-turns",
    "--agents",
    "--agent",
    "--setting-sources",
    "--permission-prompt-tool",
    "--plugin-dir",
    "--max-budget-usd",
    "--betas",
    "--json-schema",
    "--debug-file",
    "--effort",
];

#[derive(Default, Debug)]
struct Args {
    session_id: Option<String>,
    settings: Option<String>,
    permission_mode: Option<String>,
    prompt: Option<String>,
    /// `--resume <id>`: the session goes on (its transcript appended to), or with
    /// `--fork-session` is copied into a new one, as Claude Code does.
    resume: Option<String>,
    fork_session: bool,
}

fn parse_args(argv: impl Iterator<Item = String>) -> Args {
    let mut a = Args::default();
    let mut it = argv.peekable();
    let mut positional_only = false;
    while let Some(arg) = it.next() {
        if positional_only || !arg.starts_with('-') || arg == "-" {
            a.prompt = Some(arg);
            continue;
        }
        if arg == "--" {
            positional_only = true;
            continue;
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        if flag == "--fork-session" {
            a.fork_session = true;
            continue;
        }
        if !VALUE_FLAGS.contains(&flag.as_str()) {
            continue; // unknown or boolean flag: ignored
        }
        let value = match inline {
            Some(v) => Some(v),
            None => it.next(),
        };
        match flag.as_str() {
            "--session-id" => a.session_id = value,
            "--settings" => a.settings = value,
            "--permission-mode" => a.permission_mode = value,
            "--resume" | "-r" => a.resume = value,
            _ => {}
        }
    }
    a
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| if [8, 13, 18, 23].contains(&i) { c == '-' } else { c.is_ascii_hexdigit() })
}

/// The event log named by FAKE_CLAUDE_LOG.
struct Log(Option<File>);

impl Log {
    fn event(&self, mut v: Value) {
        let Some(f) = &self.0 else { return };
        if let Value::Object(m) = &mut v {
            m.insert("ts".into(), json!(iso_now()));
        }
        let mut line = v.to_string();
        line.push('\n');
        let mut f = f;
        let _ = f.write_all(line.as_bytes());
    }
}

/// The session JSONL, appended one whole line per write.
struct Transcript {
    file: File,
    path: String,
    session_id: String,
    cwd: String,
    version: String,
    last_uuid: Option<String>,
    /// Conversation entries written since the turn's user prompt (`messageCount`).
    entries_in_turn: u64,
}

impl Transcript {
    /// A new conversation entry chained to the previous one (it becomes the new parent
    /// whether or not it is written right away).
    fn entry(&mut self, ty: &str) -> Map<String, Value> {
        let uuid = uuid_v4();
        let mut m = Map::new();
        m.insert("parentUuid".into(), json!(self.last_uuid));
        m.insert("isSidechain".into(), json!(false));
        m.insert("userType".into(), json!("external"));
        m.insert("cwd".into(), json!(self.cwd));
        m.insert("sessionId".into(), json!(self.session_id));
        m.insert("version".into(), json!(self.version));
        m.insert("gitBranch".into(), json!("HEAD"));
        m.insert("entrypoint".into(), json!("cli"));
        m.insert("type".into(), json!(ty));
        m.insert("uuid".into(), json!(uuid));
        m.insert("timestamp".into(), json!(iso_now()));
        self.last_uuid = Some(uuid);
        self.entries_in_turn += 1;
        m
    }

    fn write(&mut self, v: &Value) {
        let mut line = v.to_string();
        line.push('\n');
        let _ = self.file.write_all(line.as_bytes());
        let _ = self.file.flush();
    }
}

struct ToolOutcome {
    content: String,
    is_error: bool,
    /// The `toolUseResult` of the transcript line and the PostToolUse `tool_response`.
    result: Value,
    /// `tool_input` for the PostToolUse hook; None = the hook does not fire.
    post_input: Option<Value>,
    /// Extra fields for the `answer` log event.
    log: Value,
    /// A rejection: Claude writes "[Request interrupted by user for tool use]" and the
    /// turn stops there (no end_turn text, no turn_duration, no Stop hook).
    interrupt: bool,
}

impl ToolOutcome {
    fn rejected(log: Value) -> ToolOutcome {
        ToolOutcome {
            content: REJECTED.into(),
            is_error: true,
            result: json!("User rejected tool use"),
            post_input: None,
            log,
            interrupt: true,
        }
    }
}

enum Waited<O> {
    Done(O),
    Afk,
}

trait Widget {
    type Out;
    fn on_key(&mut self, k: &Key) -> Option<Self::Out>;
    fn render(&self) -> Vec<String>;
}

impl Widget for AskPicker {
    type Out = AskOutcome;
    fn on_key(&mut self, k: &Key) -> Option<AskOutcome> {
        AskPicker::on_key(self, k)
    }
    fn render(&self) -> Vec<String> {
        AskPicker::render(self)
    }
}

impl Widget for Choice {
    type Out = ChoiceOutcome;
    fn on_key(&mut self, k: &Key) -> Option<ChoiceOutcome> {
        Choice::on_key(self, k)
    }
    fn render(&self) -> Vec<String> {
        Choice::render(self)
    }
}

impl Widget for Composer {
    type Out = ComposerOutcome;
    fn on_key(&mut self, k: &Key) -> Option<ComposerOutcome> {
        Composer::on_key(self, k)
    }
    fn render(&self) -> Vec<String> {
        Composer::render(self)
    }
}

struct Agent {
    tx: Transcript,
    hooks: Hooks,
    log: Log,
    input: Input,
    screen: Screen,
    raw: RawMode,
    model: String,
    effort: String,
    flush_pending: bool,
    permission_mode: String,
    prompt_id: String,
    turn_open: bool,
    turn_start: Instant,
    /// The last thing written was an assistant text line carrying `end_turn`.
    ended_with_text: bool,
    last_assistant_text: String,
    /// The API message id a `say` with stop_reason tool_use shares with the next tool_use.
    next_tool_msg_id: Option<String>,
    /// What the next tool call's PreToolUse hook gets as `tool_input`, when not its input.
    next_hook_input: Option<Value>,
    config_dir: String,
    first_prompt: bool,
}

impl Agent {
    // ---- process ---------------------------------------------------------------------

    fn exit(&mut self, code: i32) -> ! {
        self.log.event(json!({"event": "exit", "code": code}));
        self.raw.restore();
        let _ = std::io::stdout().write_all(b"\r\n");
        let _ = std::io::stdout().flush();
        std::process::exit(code)
    }

    // ---- hooks -------------------------------------------------------------------------

    fn hook_base(&self, event: &str) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("session_id".into(), json!(self.tx.session_id));
        m.insert("transcript_path".into(), json!(self.tx.path));
        m.insert("cwd".into(), json!(self.tx.cwd));
        m.insert("prompt_id".into(), json!(self.prompt_id));
        m.insert("permission_mode".into(), json!(self.permission_mode));
        m.insert("hook_event_name".into(), json!(event));
        m
    }

    fn run_hooks(
        &mut self,
        event: &str,
        target: &str,
        payload: Map<String, Value>,
        tool_use_id: Option<&str>,
    ) -> Vec<HookRun> {
        let payload = Value::Object(payload);
        let runs = self.hooks.run(event, target, &payload);
        for r in &runs {
            self.log.event(json!({
                "event": "hook",
                "hook_event_name": event,
                "target": target,
                "tool_use_id": tool_use_id,
                "command": r.command,
                "exit_code": r.exit_code,
                "timed_out": r.timed_out,
                "duration_ms": r.duration_ms,
                "stdout": r.stdout,
                "stderr": r.stderr,
            }));
        }
        runs
    }

    fn with_effort(&self, mut m: Map<String, Value>) -> Map<String, Value> {
        m.insert("effort".into(), json!({"level": self.effort}));
        m
    }

    fn notify(&mut self, notification_type: &str, message: &str) {
        let mut p = self.hook_base("Notification");
        p.remove("permission_mode");
        p.insert("message".into(), json!(message));
        p.insert("notification_type".into(), json!(notification_type));
        self.log.event(json!({"event": "notification", "notification_type": notification_type, "message": message}));
        self.screen.set_status(&format!("🔔 {message}"));
        self.run_hooks("Notification", notification_type, p, None);
    }

    // ---- transcript --------------------------------------------------------------------

    fn assistant_entry(
        &mut self,
        content: Value,
        stop_reason: Option<&str>,
        msg_id: Option<String>,
    ) -> Map<String, Value> {
        let mut m = self.tx.entry("assistant");
        m.insert(
            "message".into(),
            json!({
                "id": msg_id.unwrap_or_else(|| api_id("msg_01", 22)),
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": content,
                "stop_reason": stop_reason,
                "stop_sequence": null,
                "usage": {
                    "input_tokens": 4,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                    "output_tokens": 12,
                    "service_tier": "standard"
                }
            }),
        );
        m.insert("requestId".into(), json!(api_id("req_011C", 20)));
        m
    }

    /// An assistant text line. `stop_reason` is "end_turn" when the turn ends here,
    /// "tool_use" when a tool call follows in the same API message, else null.
    fn say(&mut self, text: &str, stop_reason: Option<&str>) {
        let msg_id = api_id("msg_01", 22);
        let e = self.assistant_entry(json!([{"type": "text", "text": text}]), stop_reason, Some(msg_id.clone()));
        self.tx.write(&Value::Object(e));
        self.log.event(json!({"event": "say", "text": text, "stop_reason": stop_reason}));
        self.screen.push(&format!("● {text}"));
        self.turn_open = true;
        self.ended_with_text = stop_reason == Some("end_turn");
        self.next_tool_msg_id = (stop_reason == Some("tool_use")).then_some(msg_id);
        self.last_assistant_text = text.to_string();
    }

    /// The API refused the turn (2.1.332's record of it): the error line, StopFailure.
    fn api_error(&mut self, step: &crate::script::ApiErrorStep) {
        let mut e = self.assistant_entry(json!([{"type": "text", "text": step.text}]), Some("stop_sequence"), None);
        if let Some(Value::Object(m)) = e.get_mut("message") {
            m.insert("model".into(), json!("<synthetic>"));
        }
        e.insert("isApiErrorMessage".into(), json!(true));
        e.insert("error".into(), json!(step.error));
        self.tx.write(&Value::Object(e));
        self.log.event(json!({"event": "api_error", "error": step.error, "text": step.text}));
        self.screen.push(&format!("● {}", step.text));
        let mut p = self.with_effort(self.hook_base("StopFailure"));
        p.insert("error".into(), json!(step.error));
        p.insert("last_assistant_message".into(), json!(step.text));
        self.run_hooks("StopFailure", "", p, None);
        self.turn_open = false;
        self.ended_with_text = false;
        self.last_assistant_text = step.text.clone();
    }

    fn user_message(&mut self, text: &str, source: &str) {
        self.prompt_id = uuid_v4();
        self.tx.entries_in_turn = 0;
        let mut e = self.tx.entry("user");
        e.insert("promptId".into(), json!(self.prompt_id));
        e.insert("message".into(), json!({"role": "user", "content": text}));
        e.insert("permissionMode".into(), json!(self.permission_mode));
        e.insert("origin".into(), json!({"kind": "human"}));
        e.insert("promptSource".into(), json!("typed"));
        let uuid = e["uuid"].clone();
        self.tx.write(&json!({
            "type": "file-history-snapshot",
            "messageId": uuid,
            "snapshot": {"messageId": uuid, "trackedFileBackups": {}, "timestamp": iso_now()},
            "isSnapshotUpdate": false
        }));
        self.tx.write(&Value::Object(e));
        if std::mem::take(&mut self.first_prompt) {
            // Claude follows the first prompt with attachment lines; parsers must skip them.
            let mut a = self.tx.entry("attachment");
            a.insert(
                "attachment".into(),
                json!({"type": "skill_listing", "content": "- fake-skill: a skill that does not exist (fake-claude)", "isInitial": true}),
            );
            self.tx.write(&Value::Object(a));
        }
        self.log.event(json!({"event": "user_message", "source": source, "text": text}));
        self.screen.push(&format!("> {text}"));
        self.turn_open = true;
        self.turn_start = Instant::now();
        self.ended_with_text = false;
        let mut p = self.hook_base("UserPromptSubmit");
        p.insert("prompt".into(), json!(text));
        self.run_hooks("UserPromptSubmit", "", p, None);
    }

    fn set_permission_mode(&mut self, mode: &str) {
        self.permission_mode = mode.to_string();
        self.tx.write(&json!({"type": "permission-mode", "permissionMode": mode, "sessionId": self.tx.session_id}));
    }

    /// Closes an open turn: `end_turn` text (unless the last line already was one), the
    /// `turn_duration` system line, and the Stop hooks.
    fn end_turn(&mut self, text: Option<&str>) {
        if !self.turn_open {
            return;
        }
        if !self.ended_with_text {
            self.say(text.unwrap_or("Done."), Some("end_turn"));
        }
        let mut p = self.with_effort(self.hook_base("Stop"));
        p.insert("stop_hook_active".into(), json!(false));
        p.insert("last_assistant_message".into(), json!(self.last_assistant_text));
        p.insert("background_tasks".into(), json!([]));
        p.insert("session_crons".into(), json!([]));
        let runs = self.run_hooks("Stop", "", p, None);
        if !runs.is_empty() {
            let mut e = self.tx.entry("system");
            e.insert("subtype".into(), json!("stop_hook_summary"));
            e.insert("hookCount".into(), json!(runs.len()));
            e.insert(
                "hookInfos".into(),
                json!(runs
                    .iter()
                    .map(|r| json!({"command": r.command, "durationMs": r.duration_ms}))
                    .collect::<Vec<_>>()),
            );
            e.insert("hookErrors".into(), json!([]));
            e.insert("hookAdditionalContext".into(), json!([]));
            e.insert("preventedContinuation".into(), json!(false));
            e.insert("stopReason".into(), json!(""));
            e.insert("hasOutput".into(), json!(runs.iter().any(|r| !r.stdout.is_empty())));
            e.insert("level".into(), json!("suggestion"));
            e.insert("toolUseID".into(), json!(uuid_v4()));
            self.tx.write(&Value::Object(e));
        }
        let count = self.tx.entries_in_turn;
        let mut e = self.tx.entry("system");
        e.insert("subtype".into(), json!("turn_duration"));
        e.insert("durationMs".into(), json!(self.turn_start.elapsed().as_millis() as u64));
        e.insert("messageCount".into(), json!(count));
        e.insert("isMeta".into(), json!(false));
        self.tx.write(&Value::Object(e));
        self.turn_open = false;
        self.ended_with_text = false;
    }

    // ---- keys --------------------------------------------------------------------------

    /// Draws `w` and feeds it keys until it is done. `notify` fires a Notification once if
    /// it is still open after that long. `afk` is 2.1.198's idle timer: reset by every key,
    /// a countdown banner in its last third, and `Waited::Afk` when it runs out.
    fn run_widget<W: Widget>(
        &mut self,
        w: &mut W,
        ready: Value,
        notify: Option<(u64, &str, &str)>,
        afk: Option<u64>,
    ) -> Waited<W::Out> {
        let opened = Instant::now();
        let mut notify_at = notify.map(|(ms, t, m)| (opened + Duration::from_millis(ms), t.to_string(), m.to_string()));
        let afk = afk.map(Duration::from_millis);
        let mut afk_at = afk.map(|d| opened + d);
        self.screen.draw(&w.render());
        let (widget, tool_use_id) = (ready["widget"].clone(), ready["tool_use_id"].clone());
        self.log.event(ready);
        loop {
            let now = Instant::now();
            // The banner is redrawn every second during the last third of the AFK timer.
            let banner_at = match (afk, afk_at) {
                (Some(d), Some(a)) => {
                    let start = a.checked_sub(d / 3).unwrap_or(a);
                    Some(if now < start { start } else { (now + Duration::from_secs(1)).min(a) })
                }
                _ => None,
            };
            let deadline = [notify_at.as_ref().map(|n| n.0), afk_at, banner_at].into_iter().flatten().min();
            match self.input.next_key(deadline) {
                None => {
                    let now = Instant::now();
                    if notify_at.as_ref().is_some_and(|(n, ..)| *n <= now) {
                        if let Some((_, t, m)) = notify_at.take() {
                            self.notify(&t, &m);
                        }
                    }
                    if let Some(a) = afk_at {
                        if a <= now {
                            self.screen.set_status("");
                            return Waited::Afk;
                        }
                        if banner_at.is_some_and(|b| b <= now) {
                            let left = (a - now).as_millis().div_ceil(1000);
                            self.screen.set_status(&format!("auto-continue in {left}s · any key to stay"));
                        }
                    }
                }
                Some(Key::Eof) => {
                    self.log.event(json!({"event": "eof"}));
                    self.exit(0);
                }
                Some(k) => {
                    // When each key was read, to the µs (benchmarks time an answer's first
                    // key from here: host/benches/scale.rs).
                    self.log.event(json!({
                        "event": "key",
                        "key": format!("{k:?}"),
                        "widget": widget,
                        "tool_use_id": tool_use_id,
                        "at_us": epoch_micros(),
                    }));
                    if let Some(d) = afk {
                        afk_at = Some(Instant::now() + d); // any key resets the timer
                        self.screen.set_status("");
                    }
                    if let Some(o) = w.on_key(&k) {
                        self.screen.set_status("");
                        return Waited::Done(o);
                    }
                }
            }
            self.screen.draw(&w.render());
        }
    }

    // ---- tools -------------------------------------------------------------------------

    /// One tool call: the assistant tool_use line (now, or on resolve when pending lines
    /// are not flushed), PreToolUse hooks (exit 2 blocks), the interaction, the tool_result
    /// line, PostToolUse hooks when the tool ran, and an `answer` log event.
    fn tool_use(
        &mut self,
        name: &str,
        input: Value,
        summary: &str,
        interact: impl FnOnce(&mut Agent, &str) -> ToolOutcome,
    ) {
        let id = api_id("toolu_01", 22);
        let msg_id = self.next_tool_msg_id.take();
        let entry = self.assistant_entry(
            json!([{"type": "tool_use", "id": id, "name": name, "input": input}]),
            Some("tool_use"),
            msg_id,
        );
        let tool_uuid = entry["uuid"].clone();
        let entry = Value::Object(entry);
        self.turn_open = true;
        self.ended_with_text = false;
        if self.flush_pending {
            self.tx.write(&entry);
        }
        self.log
            .event(json!({"event": "tool_use", "tool_name": name, "tool_use_id": id, "flushed": self.flush_pending}));
        self.screen.push(&format!("● {name}({summary})"));

        let mut p = self.with_effort(self.hook_base("PreToolUse"));
        p.insert("tool_name".into(), json!(name));
        p.insert("tool_input".into(), self.next_hook_input.take().unwrap_or_else(|| input.clone()));
        p.insert("tool_use_id".into(), json!(id));
        let runs = self.run_hooks("PreToolUse", name, p, Some(&id));
        let outcome = match runs.iter().find(|r| r.exit_code == Some(2)) {
            Some(r) => {
                let msg = format!("PreToolUse:{name} hook error: [{}]: {}", r.command, r.stderr.trim_end());
                ToolOutcome {
                    content: msg.clone(),
                    is_error: true,
                    result: json!(format!("Error: {msg}")),
                    post_input: None,
                    log: json!({"outcome": "blocked_by_hook"}),
                    interrupt: false,
                }
            }
            None => interact(self, &id),
        };
        // PostToolUse's duration_ms is the tool's own run time, not the wait for the user.
        let resolved = Instant::now();

        if !self.flush_pending {
            self.tx.write(&entry);
        }
        let mut block = json!({"tool_use_id": id, "type": "tool_result", "content": outcome.content});
        if outcome.is_error || name == "Bash" {
            block["is_error"] = json!(outcome.is_error);
        }
        let mut e = self.tx.entry("user");
        e.insert("promptId".into(), json!(self.prompt_id));
        e.insert("message".into(), json!({"role": "user", "content": [block]}));
        e.insert("toolUseResult".into(), outcome.result.clone());
        e.insert("sourceToolAssistantUUID".into(), tool_uuid);
        self.tx.write(&Value::Object(e));
        let first = outcome.content.lines().next().unwrap_or("").chars().take(200).collect::<String>();
        self.screen.push(&format!("  ⎿  {first}"));

        let mut log = json!({"event": "answer", "tool_name": name, "tool_use_id": id, "is_error": outcome.is_error, "content": outcome.content});
        if let (Value::Object(l), Value::Object(extra)) = (&mut log, &outcome.log) {
            l.extend(extra.clone());
        }
        self.log.event(log);

        if outcome.interrupt {
            let mut e = self.tx.entry("user");
            e.insert("promptId".into(), json!(self.prompt_id));
            e.insert("message".into(), json!({"role": "user", "content": [{"type": "text", "text": INTERRUPTED}]}));
            self.tx.write(&Value::Object(e));
            self.screen.push(&format!("  ⎿  {INTERRUPTED}"));
            self.turn_open = false;
            self.ended_with_text = false;
        }

        if let Some(post_input) = outcome.post_input {
            let mut p = self.with_effort(self.hook_base("PostToolUse"));
            p.insert("tool_name".into(), json!(name));
            p.insert("tool_input".into(), post_input);
            p.insert("tool_response".into(), outcome.result);
            p.insert("tool_use_id".into(), json!(id));
            p.insert("duration_ms".into(), json!(resolved.elapsed().as_millis() as u64));
            self.run_hooks("PostToolUse", name, p, Some(&id));
        }
    }

    /// A Write tool call that needs no permission: the file is written (or deleted) in
    /// the working directory, the result recorded as Claude records a Write.
    fn write_file(&mut self, step: &WriteStep) {
        let bytes = match (&step.text, &step.bytes) {
            (Some(t), _) => t.as_bytes().to_vec(),
            (None, Some(b)) => b.clone(),
            (None, None) => Vec::new(),
        };
        let path = format!("{}/{}", self.tx.cwd, step.path);
        let input = if step.delete {
            json!({"file_path": path, "delete": true})
        } else {
            json!({"file_path": path, "content": String::from_utf8_lossy(&bytes)})
        };
        let summary = step.path.clone();
        self.tool_use("Write", input.clone(), &summary, |_, _| {
            let done = if step.delete {
                std::fs::remove_file(&path)
            } else {
                let parent = std::path::Path::new(&path).parent().map(|p| p.to_path_buf());
                parent.map_or(Ok(()), std::fs::create_dir_all).and_then(|_| std::fs::write(&path, &bytes))
            };
            match done {
                Ok(()) => ToolOutcome {
                    content: format!("File created successfully at: {path}"),
                    is_error: false,
                    result: json!({"type": "create", "filePath": path}),
                    post_input: Some(input.clone()),
                    log: json!({"outcome": "written", "path": path}),
                    interrupt: false,
                },
                Err(e) => ToolOutcome {
                    content: format!("Error writing {path}: {e}"),
                    is_error: true,
                    result: json!(format!("Error: {e}")),
                    post_input: None,
                    log: json!({"outcome": "write_failed", "path": path}),
                    interrupt: false,
                },
            }
        });
    }

    fn ask(&mut self, step: &AskStep) {
        let qs: Vec<Question> = step.questions.clone();
        let input = script::ask_tool_input(&qs);
        let summary = format!("{} question{}", qs.len(), if qs.len() == 1 { "" } else { "s" });
        self.tool_use("AskUserQuestion", input, &summary, |a, id| {
            let mut picker = AskPicker::new(qs.clone());
            let ready = json!({"event": "ready", "widget": "ask", "tool_use_id": id});
            let notify = step.notify_after_ms.map(|ms| (ms, "permission_prompt", "Claude needs your permission"));
            let qjson = serde_json::to_value(&qs).unwrap_or(Value::Null);
            match a.run_widget(&mut picker, ready, notify, step.afk_after_ms) {
                Waited::Done(AskOutcome::Answered(ans)) => {
                    let mut map = Map::new();
                    let mut parts = Vec::new();
                    for (q, a) in qs.iter().zip(ans) {
                        if let Some(a) = a {
                            parts.push(format!("\"{}\"=\"{}\"", q.question, a));
                            map.insert(q.question.clone(), json!(a));
                        }
                    }
                    let answers = Value::Object(map);
                    let result = json!({"questions": qjson, "answers": answers, "annotations": {}});
                    ToolOutcome {
                        content: format!(
                            "Your questions have been answered: {}. You can now continue with these answers in mind.",
                            parts.join(", ")
                        ),
                        is_error: false,
                        post_input: Some(result.clone()),
                        result,
                        log: json!({"outcome": "answered", "answers": answers}),
                        interrupt: false,
                    }
                }
                Waited::Done(AskOutcome::Cancelled) => ToolOutcome::rejected(json!({"outcome": "rejected"})),
                Waited::Done(AskOutcome::Chat) => ToolOutcome {
                    content: CHAT_ABOUT_THIS.into(),
                    ..ToolOutcome::rejected(json!({"outcome": "chat"}))
                },
                Waited::Afk => {
                    let ms = step.afk_after_ms.unwrap_or(0);
                    let result = json!({"questions": qjson, "answers": {}, "annotations": {}, "afkTimeoutMs": ms});
                    ToolOutcome {
                        content: format!(
                            "No response after {}s — the user may be away from keyboard. Proceed using your best judgment based on the context so far; you can re-ask this question later if it's still relevant.",
                            ms / 1000
                        ),
                        is_error: false,
                        post_input: Some(result.clone()),
                        result,
                        log: json!({"outcome": "afk", "answers": {}}),
                        interrupt: false,
                    }
                }
            }
        });
    }

    fn plan(&mut self, step: &PlanStep) {
        let plan = step.plan().to_string();
        let input = if step.file_only() {
            let dir = format!("{}/plans", self.config_dir);
            let file = format!("{dir}/fake-claude-plan-{}.md", &uuid_v4()[..8]);
            let _ = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&file, &plan));
            json!({"planFilePath": file})
        } else {
            json!({"plan": plan})
        };
        if step.empty_hook_input() {
            self.next_hook_input = Some(json!({}));
        }
        self.tool_use("ExitPlanMode", input, "", |a, id| {
            // As on 2.1.198, the plan text itself is not on this screen.
            let title = vec![" Exit plan mode?".to_string(), "  Claude wants to exit plan mode".to_string()];
            let mut c = Choice::new(title, &["Yes", "No"]);
            let ready = json!({"event": "ready", "widget": "plan", "tool_use_id": id});
            let notify = step.notify_after_ms().map(|ms| (ms, "permission_prompt", "Claude Code needs your approval for the plan"));
            match a.run_widget(&mut c, ready, notify, None) {
                Waited::Done(ChoiceOutcome::Picked(0)) => {
                    if a.permission_mode == "plan" {
                        a.set_permission_mode("default");
                    }
                    // Claude saves the approved plan under <config>/plans/ and says where.
                    let dir = format!("{}/plans", a.config_dir);
                    let file = format!("{dir}/fake-claude-plan-{}.md", &uuid_v4()[..8]);
                    let _ = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&file, &plan));
                    ToolOutcome {
                        content: format!(
                            "User has approved your plan. You can now start coding. Start with updating your todo list if applicable\n\nYour plan has been saved to: {file}\nYou can refer back to it if needed during implementation.\n\n## Approved Plan (edited by user):\n{plan}"
                        ),
                        is_error: false,
                        result: json!({"plan": plan, "isAgent": false, "filePath": file, "planWasEdited": true}),
                        post_input: Some(json!({"plan": plan})),
                        log: json!({"outcome": "approved"}),
                        interrupt: false,
                    }
                }
                other => ToolOutcome::rejected(
                    json!({"outcome": "rejected", "via": if matches!(other, Waited::Done(ChoiceOutcome::Esc)) { "esc" } else { "no" }}),
                ),
            }
        });
    }

    fn bash(&mut self, step: &BashStep) {
        let mut input = json!({"command": step.command});
        if let Some(d) = &step.description {
            input["description"] = json!(d);
        }
        let suggestions = step.permission_suggestions.clone().unwrap_or_else(|| {
            vec![
                json!({"type": "addDirectories", "directories": [self.tx.cwd], "destination": "session"}),
                json!({"type": "setMode", "mode": "acceptEdits", "destination": "session"}),
            ]
        });
        self.tool_use("Bash", input.clone(), &step.command, |a, id| {
            let mut title = vec!["Bash command".to_string(), String::new(), format!("  {}", step.command)];
            if let Some(d) = &step.description {
                title.push(format!("  {d}"));
            }
            title.push(String::new());
            title.push("Do you want to proceed?".into());
            // Rows as 2.1.198 draws them: the second follows the first suggestion (none: no row).
            let always = suggestions.first().and_then(always_row);
            let rows: Vec<&str> = ["Yes"].into_iter().chain(always.as_deref()).chain(["No"]).collect();
            let no = rows.len() - 1;
            let mut c = Choice::new(title, &rows);
            c.footer = "Esc to cancel · Tab to amend · ctrl+e to explain".into();
            // PermissionRequest fires as the prompt is drawn (~45 ms after PreToolUse on
            // 2.1.198), before the Notification; its payload has no tool_use_id.
            a.screen.draw(&c.render());
            let mut p = a.with_effort(a.hook_base("PermissionRequest"));
            p.insert("tool_name".into(), json!("Bash"));
            p.insert("tool_input".into(), input.clone());
            p.insert("permission_suggestions".into(), json!(suggestions));
            if step.permission_request {
                a.run_hooks("PermissionRequest", "Bash", p, Some(id));
            }
            let ready = json!({"event": "ready", "widget": "bash", "tool_use_id": id});
            let notify = Some((step.notify_after_ms, "permission_prompt", "Claude needs your permission"));
            match a.run_widget(&mut c, ready, notify, None) {
                Waited::Done(ChoiceOutcome::Picked(p)) if p < no => ToolOutcome {
                    content: step.output.clone(),
                    is_error: false,
                    result: json!({"stdout": step.output, "stderr": "", "interrupted": false, "isImage": false, "noOutputExpected": false}),
                    post_input: Some(input.clone()),
                    log: json!({"outcome": "approved", "always": p == 1, "option": p}),
                    interrupt: false,
                },
                other => ToolOutcome::rejected(
                    json!({"outcome": "rejected", "via": if matches!(other, Waited::Done(ChoiceOutcome::Esc)) { "esc" } else { "no" }}),
                ),
            }
        });
    }

    /// Ends the turn, then waits in the composer for one message and records it.
    fn idle(&mut self, step: &IdleStep) -> String {
        self.end_turn(step.say.as_deref());
        let mut c = Composer::default();
        let notify = step.notify_after_ms.map(|ms| (ms, "idle_prompt", "Claude is waiting for your input"));
        match self.run_widget(&mut c, json!({"event": "ready", "widget": "composer"}), notify, None) {
            Waited::Done(ComposerOutcome::Submit(text)) => {
                self.user_message(&text, "composer");
                text
            }
            _ => self.exit(0),
        }
    }

    fn run(&mut self, steps: &[Step]) -> ! {
        for (i, step) in steps.iter().enumerate() {
            self.log.event(json!({"event": "step", "index": i}));
            match step {
                Step::Say(text) => {
                    let next = steps[i + 1..].iter().find(|s| !matches!(s, Step::SleepMs(_) | Step::WaitFile(_)));
                    let stop_reason = match next {
                        None | Some(Step::Idle(_)) => Some("end_turn"),
                        Some(Step::Ask(_) | Step::Plan(_) | Step::Bash(_) | Step::Write(_)) => Some("tool_use"),
                        _ => None,
                    };
                    self.say(text, stop_reason);
                    self.screen.draw(&[]);
                }
                Step::Ask(a) => self.ask(a),
                Step::Plan(p) => self.plan(p),
                Step::Bash(b) => self.bash(b),
                Step::Write(w) => {
                    self.write_file(w);
                    self.screen.draw(&[]);
                }
                Step::Notify(n) => {
                    self.notify(&n.notification_type, &n.message);
                    self.screen.draw(&[]);
                }
                Step::Idle(s) => {
                    self.idle(s);
                }
                Step::ApiError(s) => {
                    self.api_error(s);
                    self.screen.draw(&[]);
                }
                Step::SleepMs(ms) => std::thread::sleep(Duration::from_millis(*ms)),
                Step::Sh(command) => {
                    let out = sh(command);
                    self.log.event(json!({"event": "sh", "command": command, "out": out}));
                    self.say(&format!("sh: {out}"), None);
                    self.screen.draw(&[]);
                }
                Step::Fetch(url) => {
                    let got = fetch(url);
                    self.log.event(json!({"event": "fetch", "url": url, "got": got}));
                    self.say(&format!("fetched {url}: {got}"), None);
                    self.screen.draw(&[]);
                }
                Step::WaitFile(path) => {
                    let start = std::time::Instant::now();
                    while !std::path::Path::new(path).exists() && start.elapsed() < Duration::from_secs(120) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    self.log.event(
                        json!({"event": "wait_file", "path": path, "found": std::path::Path::new(path).exists()}),
                    );
                }
                Step::Exit(code) => self.exit(*code),
            }
        }
        // Out of script: an agent that never ends — echo every message back.
        self.log.event(json!({"event": "script_done"}));
        loop {
            let text = self.idle(&IdleStep::default());
            self.say(&format!("You said: {text}"), Some("end_turn"));
        }
    }
}

/// The Bash prompt's second row for a permission suggestion (2.1.198's wording), if any.
fn always_row(s: &Value) -> Option<String> {
    match s.get("type").and_then(Value::as_str)? {
        "addDirectories" => {
            let dir = s.get("directories")?.as_array()?.first()?.as_str()?;
            let name = dir.trim_end_matches('/').rsplit('/').next().unwrap_or(dir);
            Some(format!("Yes, and always allow access to {name}/ from this project"))
        }
        "addRules" => {
            let rule = s.get("rules")?.as_array()?.first()?.get("ruleContent")?.as_str()?;
            Some(format!("Yes, and don\u{2019}t ask again for: {rule}"))
        }
        _ => Some("Yes, and don\u{2019}t ask again this session".into()),
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("fake-claude: {msg}");
    std::process::exit(2)
}

/// What `fake-claude --version` prints: the release whose behaviour it mimics, worded
/// as Claude Code words it.
pub const VERSION_LINE: &str = "2.1.198 (Claude Code)";

fn main() {
    // `--version` first, as Claude Code answers it: no script needed, nothing written.
    if std::env::args().skip(1).take_while(|a| a != "--").any(|a| a == "--version" || a == "-v") {
        println!("{VERSION_LINE}");
        return;
    }
    let args = parse_args(std::env::args().skip(1));
    let script_path = match std::env::var("FAKE_CLAUDE_SCRIPT") {
        Ok(p) if !p.is_empty() => p,
        _ => fail(&format!("FAKE_CLAUDE_SCRIPT is not set\n{USAGE}")),
    };
    let script = Script::load(&script_path).unwrap_or_else(|e| fail(&e));
    let resumed = match &args.resume {
        Some(s) if is_uuid(s) => Some(s.to_ascii_lowercase()),
        Some(s) => fail(&format!("invalid session id {s:?} to resume: must be a valid UUID")),
        None => None,
    };
    let session_id = match (args.session_id, &resumed) {
        (_, Some(r)) if !args.fork_session => r.clone(),
        (Some(s), _) if is_uuid(&s) => s.to_ascii_lowercase(),
        (Some(s), _) => fail(&format!("invalid session id {s:?}: must be a valid UUID")),
        (None, _) => uuid_v4(),
    };
    let cwd = std::env::current_dir()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|e| fail(&format!("no working directory: {e}")));
    let config_dir = match std::env::var("CLAUDE_CONFIG_DIR") {
        Ok(d) if !d.is_empty() => d,
        _ => match std::env::var("HOME") {
            Ok(h) if !h.is_empty() => format!("{h}/.claude"),
            _ => fail("neither CLAUDE_CONFIG_DIR nor HOME is set"),
        },
    };
    let project_dir = format!("{config_dir}/projects/{}", util::project_slug(&cwd));
    if let Err(e) = std::fs::create_dir_all(&project_dir) {
        fail(&format!("cannot create {project_dir}: {e}"));
    }
    let path = format!("{project_dir}/{session_id}.jsonl");
    if let Some(earlier) = resumed.as_deref().filter(|_| args.fork_session) {
        // A fork starts with a copy of the earlier session's transcript (found in any
        // project folder, as Claude Code finds it whatever the working directory).
        let found = std::fs::read_dir(format!("{config_dir}/projects"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|d| d.path().join(format!("{earlier}.jsonl")))
            .find(|p| p.is_file())
            .unwrap_or_else(|| fail(&format!("no conversation found with session id {earlier}")));
        let copied = std::fs::read(&found).unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", found.display())));
        if let Err(e) = std::fs::write(&path, copied) {
            fail(&format!("cannot write {path}: {e}"));
        }
    }
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| fail(&format!("cannot open transcript {path}: {e}")));
    let hooks = Hooks::load(args.settings.as_deref(), script.hook_timeout_ms, &cwd).unwrap_or_else(|e| fail(&e));
    let log = Log(std::env::var("FAKE_CLAUDE_LOG").ok().filter(|p| !p.is_empty()).map(|p| {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .unwrap_or_else(|e| fail(&format!("cannot open FAKE_CLAUDE_LOG {p}: {e}")))
    }));

    let raw = RawMode::enable(0);
    if raw.is_raw() {
        let mut so = std::io::stdout().lock();
        let _ = so.write_all(keys::BRACKETED_PASTE_ON.as_bytes());
        let _ = so.flush();
    }
    let permission_mode = args.permission_mode.unwrap_or_else(|| "default".into());
    let mut agent = Agent {
        tx: Transcript {
            file,
            path: path.clone(),
            session_id: session_id.clone(),
            cwd: cwd.clone(),
            version: script.version.clone(),
            last_uuid: None,
            entries_in_turn: 0,
        },
        hooks,
        log,
        input: Input::from_fd(0),
        screen: Screen::new(vec![
            format!("✻ fake-claude {} — scripted Claude Code stand-in", script.version),
            format!("  session {session_id} · {cwd}"),
            String::new(),
        ]),
        raw,
        model: script.model.clone(),
        effort: script.effort.clone(),
        flush_pending: script.flush_pending_tool_use,
        permission_mode: permission_mode.clone(),
        prompt_id: uuid_v4(),
        turn_open: false,
        turn_start: Instant::now(),
        ended_with_text: false,
        last_assistant_text: String::new(),
        next_tool_msg_id: None,
        next_hook_input: None,
        config_dir: config_dir.clone(),
        first_prompt: true,
    };
    agent.log.event(json!({
        "event": "start",
        "pid": std::process::id(),
        "session_id": session_id,
        "transcript_path": path,
        "cwd": cwd,
        "settings": args.settings,
        "permission_mode": permission_mode,
        "prompt": args.prompt,
        "raw_tty": agent.raw.is_raw(),
    }));
    if let Some(p) = args.prompt.as_deref().filter(|p| !p.is_empty()) {
        let title: String = p.split_whitespace().take(6).collect::<Vec<_>>().join(" ");
        agent.tx.write(&json!({"type": "ai-title", "aiTitle": title, "sessionId": session_id}));
    }
    agent.tx.write(&json!({"type": "mode", "mode": "normal", "sessionId": session_id}));
    agent.set_permission_mode(&permission_mode);
    agent.screen.draw(&[]);
    if let Some(p) = args.prompt.as_deref().filter(|p| !p.is_empty()) {
        agent.user_message(p, "prompt");
        agent.screen.draw(&[]);
    }
    agent.run(&script.steps)
}

/// `sh -c command`, stdin empty, stdout and stderr together, killed after 120 s.
fn sh(command: &str) -> String {
    use std::process::{Command, Stdio};
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!("exec 2>&1; {command}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return format!("cannot start sh: {e}"),
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while child.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    match child.wait_with_output() {
        Ok(o) => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        Err(e) => format!("failed: {e}"),
    }
}

/// A GET of `url` (`http://host:port/path`), through the proxy `http_proxy` names if set:
/// `"<status line> <body>"`, or why it failed.
fn fetch(url: &str) -> String {
    use std::io::{Read, Write};
    let Some(rest) = url.strip_prefix("http://") else { return format!("not an http URL: {url}") };
    let (authority, path) = rest.split_once('/').map_or((rest, "/".to_string()), |(a, p)| (a, format!("/{p}")));
    let proxy = ["http_proxy", "HTTP_PROXY"].iter().find_map(|k| std::env::var(k).ok()).filter(|p| !p.is_empty());
    let (addr, target) = match &proxy {
        Some(p) => (p.trim_start_matches("http://").trim_end_matches('/').to_string(), url.to_string()),
        None => (authority.to_string(), path),
    };
    let go = || -> std::io::Result<String> {
        let mut c = std::net::TcpStream::connect(&addr)?;
        c.set_read_timeout(Some(Duration::from_secs(20)))?;
        write!(c, "GET {target} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n")?;
        let mut out = Vec::new();
        c.read_to_end(&mut out)?;
        let text = String::from_utf8_lossy(&out).into_owned();
        let status = text.lines().next().unwrap_or_default().to_string();
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.trim().chars().take(200).collect::<String>())
            .unwrap_or_default();
        Ok(format!("{status} {body}"))
    };
    go().unwrap_or_else(|e| format!("failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Args {
        parse_args(v.iter().map(|s| s.to_string()))
    }

    #[test]
    fn cli_like_claude() {
        let a = args(&[
            "--session-id",
            "0b4e6a8e-0000-4000-8000-000000000001",
            "--model",
            "opus",
            "--verbose",
            "--settings=/s.json",
            "--permission-mode",
            "plan",
            "do it",
        ]);
        assert_eq!(a.session_id.as_deref(), Some("0b4e6a8e-0000-4000-8000-000000000001"));
        assert_eq!(a.settings.as_deref(), Some("/s.json"));
        assert_eq!(a.permission_mode.as_deref(), Some("plan"));
        assert_eq!(a.prompt.as_deref(), Some("do it"));
        assert_eq!(args(&["--", "--not-a-flag"]).prompt.as_deref(), Some("--not-a-flag"));
        assert!(is_uuid("0b4e6a8e-0000-4000-8000-000000000001"));
        assert!(!is_uuid("../../etc/passwd-0000-4000-8000-0000000"));
    }

    #[test]
    fn bash_second_row_follows_the_first_suggestion() {
        let dirs = json!({"type": "addDirectories", "directories": ["/tmp/x/work/"], "destination": "session"});
        assert_eq!(always_row(&dirs).as_deref(), Some("Yes, and always allow access to work/ from this project"));
        let rules = json!({"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "make build *"}]});
        assert_eq!(always_row(&rules).as_deref(), Some("Yes, and don\u{2019}t ask again for: make build *"));
        assert!(always_row(&json!({"nope": 1})).is_none());
    }
}
