//! Claude Code session transcript (`<config>/projects/<slug>/<session>.jsonl`) → chat
//! messages and turn signals (docs/providers/claude-code/compat.md §5).
//!
//! Every line is one JSON object with a `type`. Each line's `sessionId` (any type)
//! becomes the parse output's session id; its `timestamp` (RFC 3339) becomes the
//! timestamp of every message it yields (`""` if absent).
//!
//! ## Lines that yield messages — one message per content block, in block order
//!
//! | line / block | message (role, kind, text) |
//! |---|---|
//! | `user`, `message.content` a string | user, `text`, the prompt |
//! | `user` block `text` | user, `text` |
//! | `user` block `image` / `document` | user, `other("image" / "document", "[image]" / "[document]")` |
//! | `user` block `tool_result` `{tool_use_id, content, is_error}` | tool, `tool_result{id, text, is_error}`: the result text (`content` a string, or its `text` blocks joined with `\n`, images as `[image]`) |
//! | `assistant`, `message.content` a string | assistant, `text` |
//! | `assistant` block `text` | assistant, `text` (markdown) |
//! | `assistant` block `thinking` | assistant, `thinking`, the thinking text |
//! | `assistant` block `tool_use` `{id, name, input}` | assistant, `tool_use{id, name, input_json, summary}`: `input` as JSON text, and a one-line summary (`Bash: ls -la`) |
//! | `system` with a string `content` | system, `text`, the content |
//! | `[Request interrupted by user…]` user text | system, `text`, the marker text |
//! | `assistant` with `isApiErrorMessage: true` that ends the turn | system, `other("turn_error", …)`: the error's class in words and its text ("Rate limited: API Error: Request rejected (429) · …"); the host shows the run as stopped on an error until the next message |
//! | `assistant` with `isApiErrorMessage: true`, the turn going on | system, `text`, the error text |
//!
//! ## Lines and blocks skipped on purpose (no message, no turn signal, no diagnostic)
//!
//! - Line types other than `user` / `assistant` / `system` (`summary`, `mode`,
//!   `permission-mode`, `file-history-snapshot`, `attachment`, and any new type).
//! - `isSidechain: true` lines: a sub-agent's conversation. Its `end_turn` is not the
//!   main agent's, so it must not drive the turn state.
//! - User lines Claude Code writes for itself: `isMeta: true` (expanded slash-command
//!   prompts, caveats, reminders), `isCompactSummary: true` and
//!   `isVisibleInTranscriptOnly: true` (the compaction summary), and user text wrapped
//!   in the local-command / bash-mode tags (`<command-name>`, `<command-message>`,
//!   `<command-args>`, `<local-command-stdout>`, `<local-command-stderr>`,
//!   `<local-command-caveat>`, `<bash-input>`, `<bash-stdout>`, `<bash-stderr>`) — they
//!   record what the operator did in the TUI, not a prompt to the agent. The same tags
//!   in `system` content (subtype `local_command`) are skipped too.
//! - Empty text and thinking blocks, and Claude Code's `(no content)` placeholder text.
//! - Content blocks of a type not listed above (`redacted_thinking`, server tool
//!   blocks, future types) — forward compatible, the line's other blocks still count.
//!
//! ## Diagnostics
//!
//! A line that is not JSON, not an object, has no string `type`, or is a `user` /
//! `assistant` / `system` line of the wrong shape (no `message` object, `content`
//! neither string nor array, a block that is not an object, a `text` block without
//! text, a `tool_use` without `id`/`name`, a `tool_result` without `tool_use_id`, …)
//! becomes a diagnostic and yields nothing. Never a panic.
//!
//! ## Turn signals (the last one in the chunk wins; blocks in order within a line)
//!
//! - user prompt (text, image, document) → `working`; `tool_result` → `working`;
//! - `[Request interrupted by user…]` → `idle` (the operator pressed Esc; Claude waits);
//! - assistant `tool_use` block → `working` (also when `stop_reason` says otherwise);
//! - assistant line without `tool_use` whose `message.stop_reason` is `end_turn`,
//!   `stop_sequence`, `max_tokens` or `refusal` → `idle`; `tool_use` → `working`;
//!   `null` / absent (Claude Code writes each streamed block as its own line, often all
//!   with `stop_reason: null`) → no signal;
//! - `system` subtype `turn_duration` → `idle` (written when a turn ends);
//! - everything else → no signal.

use lab_provider_sdk::{
    json, jsonl, jsonl::LineOutput, Content, Message, ParseOutput, Role, ToolResult, ToolUse, TurnSignal,
};
use serde_json::{Map, Value};

/// Parse a chunk of complete transcript lines.
///
/// Claude Code 2.1.198 does not always write lines in the order things happened: a
/// large prompt's `user` line was seen written after that turn's reply, `stop_hook_summary`
/// and `turn_duration` lines (with its own, earlier timestamp). Such a late line still
/// yields its message, but its turn signal describes the past, so a line older than
/// one already seen in the chunk does not set the chunk's turn signal.
pub fn parse_transcript(chunk: &[u8]) -> ParseOutput {
    let mut newest = String::new();
    jsonl::parse_lines(chunk, |v| {
        let mut out = parse_line(v)?;
        let ts = json::str_at(v, "timestamp").unwrap_or_default();
        if out.turn.is_some() && is_older(ts, &newest) {
            out.turn = None;
        }
        if ts > newest.as_str() && is_rfc3339_utc(ts) {
            newest = ts.to_string();
        }
        Ok(out)
    })
}

/// Whether timestamp `ts` is strictly older than `newest`. Claude Code writes UTC RFC
/// 3339 with milliseconds and `Z` (`2026-11-30T12:40:23.805Z`), which order as text;
/// anything else (or nothing) is never "older".
fn is_older(ts: &str, newest: &str) -> bool {
    is_rfc3339_utc(ts) && is_rfc3339_utc(newest) && ts.len() == newest.len() && ts < newest
}

fn is_rfc3339_utc(ts: &str) -> bool {
    let b = ts.as_bytes();
    b.len() >= 20 && b[4] == b'-' && b[10] == b'T' && b[b.len() - 1] == b'Z'
}

/// Tags that open the user text Claude Code writes for local commands and bash mode.
const COMMAND_TAGS: &[&str] = &[
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
];

const INTERRUPT_PREFIX: &str = "[Request interrupted by user";
const NO_CONTENT: &str = "(no content)";
const SUMMARY_MAX_CHARS: usize = 120;

/// One transcript line (a parsed JSON value) → what it yields.
pub fn parse_line(v: &Value) -> Result<LineOutput, String> {
    let obj = v.as_object().ok_or("line is not a JSON object")?;
    let ty = match obj.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(_) => return Err("`type` is not a string".into()),
        None => return Err("line has no `type`".into()),
    };
    let mut line = Line {
        out: LineOutput {
            session_id: json::str_at(v, "sessionId").filter(|s| !s.is_empty()).map(str::to_string),
            ..Default::default()
        },
        ts: json::str_at(v, "timestamp").unwrap_or_default().to_string(),
    };
    if !matches!(ty, "user" | "assistant" | "system") || flag(obj, "isSidechain") {
        return Ok(line.out);
    }
    match ty {
        "user" => user(obj, &mut line)?,
        "assistant" => assistant(obj, &mut line)?,
        _ => system(obj, &mut line)?,
    }
    Ok(line.out)
}

struct Line {
    out: LineOutput,
    ts: String,
}

impl Line {
    fn push(&mut self, role: Role, content: Content) {
        self.out.messages.push(Message { role, content, timestamp: self.ts.clone() });
    }
    fn text(&mut self, role: Role, text: impl Into<String>) {
        self.push(role, Content::Text(text.into()));
    }
    fn signal(&mut self, s: TurnSignal) {
        self.out.turn = Some(s);
    }
}

fn flag(obj: &Map<String, Value>, key: &str) -> bool {
    obj.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// The `message.content` of a user/assistant line: a string or an array of blocks.
enum Body<'a> {
    Text(&'a str),
    Blocks(&'a [Value]),
}

fn content<'a>(obj: &'a Map<String, Value>, ty: &str) -> Result<Body<'a>, String> {
    let msg =
        obj.get("message").and_then(Value::as_object).ok_or_else(|| format!("{ty} line has no `message` object"))?;
    match msg.get("content") {
        Some(Value::String(s)) => Ok(Body::Text(s)),
        Some(Value::Array(a)) => Ok(Body::Blocks(a)),
        Some(_) => Err(format!("{ty} `message.content` is neither a string nor an array")),
        None => Err(format!("{ty} line has no `message.content`")),
    }
}

/// A content block as an object with its `type`.
fn block(b: &Value, i: usize) -> Result<(&Map<String, Value>, &str), String> {
    let obj = b.as_object().ok_or_else(|| format!("content block {i} is not an object"))?;
    let ty =
        obj.get("type").and_then(Value::as_str).ok_or_else(|| format!("content block {i} has no string `type`"))?;
    Ok((obj, ty))
}

fn block_str<'a>(obj: &'a Map<String, Value>, key: &str, ty: &str, i: usize) -> Result<&'a str, String> {
    obj.get(key).and_then(Value::as_str).ok_or_else(|| format!("`{ty}` block {i} has no string `{key}`"))
}

fn is_command_wrapper(text: &str) -> bool {
    let t = text.trim_start();
    COMMAND_TAGS.iter().any(|tag| t.starts_with(tag))
}

fn user(obj: &Map<String, Value>, line: &mut Line) -> Result<(), String> {
    let content = content(obj, "user")?;
    if flag(obj, "isMeta") || flag(obj, "isCompactSummary") || flag(obj, "isVisibleInTranscriptOnly") {
        return Ok(());
    }
    match content {
        Body::Text(s) => user_text(s, line),
        Body::Blocks(blocks) => {
            for (i, b) in blocks.iter().enumerate() {
                let (bo, ty) = block(b, i)?;
                match ty {
                    "text" => user_text(block_str(bo, "text", ty, i)?, line),
                    "tool_result" => {
                        let id = block_str(bo, "tool_use_id", ty, i)?.to_string();
                        let text = tool_result_text(bo.get("content"), i)?;
                        let is_error = bo.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                        line.push(Role::Tool, Content::ToolResult(ToolResult { id, text, is_error }));
                        line.signal(TurnSignal::Working);
                    }
                    "image" | "document" => {
                        line.push(Role::User, Content::Other((ty.to_string(), format!("[{ty}]"))));
                        line.signal(TurnSignal::Working);
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(())
}

fn user_text(text: &str, line: &mut Line) {
    if text.trim().is_empty() || is_command_wrapper(text) {
        return;
    }
    if text.trim_start().starts_with(INTERRUPT_PREFIX) {
        line.text(Role::System, text.trim());
        line.signal(TurnSignal::Idle);
        return;
    }
    line.text(Role::User, text);
    line.signal(TurnSignal::Working);
}

/// The text of a tool_result's `content`: a string, or text/image blocks.
fn tool_result_text(content: Option<&Value>, i: usize) -> Result<String, String> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            for p in parts {
                match p.get("type").and_then(Value::as_str) {
                    Some("text") => texts.push(
                        p.get("text")
                            .and_then(Value::as_str)
                            .ok_or_else(|| format!("`tool_result` block {i} has a text part without string `text`"))?,
                    ),
                    Some("image") => texts.push("[image]"),
                    Some(_) => {}
                    None => return Err(format!("`tool_result` block {i} has a content part without `type`")),
                }
            }
            Ok(texts.join("\n"))
        }
        Some(_) => Err(format!("`tool_result` block {i} has `content` that is neither a string nor an array")),
    }
}

fn assistant(obj: &Map<String, Value>, line: &mut Line) -> Result<(), String> {
    let content = content(obj, "assistant")?;
    let stop_reason = json::str_at(obj.get("message").unwrap_or(&Value::Null), "stop_reason");
    let text_role = if flag(obj, "isApiErrorMessage") { Role::System } else { Role::Assistant };
    let mut used_tool = false;
    match content {
        Body::Text(s) => assistant_text(s, text_role, line),
        Body::Blocks(blocks) => {
            for (i, b) in blocks.iter().enumerate() {
                let (bo, ty) = block(b, i)?;
                match ty {
                    "text" => assistant_text(block_str(bo, "text", ty, i)?, text_role, line),
                    "thinking" => {
                        let t = block_str(bo, "thinking", ty, i)?;
                        if !t.trim().is_empty() {
                            line.push(Role::Assistant, Content::Thinking(t.to_string()));
                        }
                    }
                    "tool_use" => {
                        let id = block_str(bo, "id", ty, i)?.to_string();
                        let name = block_str(bo, "name", ty, i)?.to_string();
                        let input = bo.get("input").cloned().unwrap_or_else(|| Value::Object(Map::new()));
                        line.push(
                            Role::Assistant,
                            Content::ToolUse(ToolUse {
                                summary: tool_summary(&name, &input),
                                id,
                                name,
                                input_json: input.to_string(),
                            }),
                        );
                        used_tool = true;
                    }
                    _ => {}
                }
            }
        }
    }
    if used_tool {
        line.signal(TurnSignal::Working);
    } else {
        match stop_reason {
            Some("end_turn" | "stop_sequence" | "max_tokens" | "refusal") => {
                line.signal(TurnSignal::Idle);
                if text_role == Role::System {
                    turn_error(obj, line);
                }
            }
            Some("tool_use") => line.signal(TurnSignal::Working),
            _ => {}
        }
    }
    Ok(())
}

/// The kind of the message that says the agent's turn ended on an error (lab's host
/// shows the run as stopped on it: docs/providers.md, "Messages").
pub const TURN_ERROR: &str = "turn_error";

/// An API error that ended the turn (what `StopFailure` reports; 2.1.332 writes the
/// class as `error`: `rate_limit`, `server_error`, `billing_error`, …): its text
/// messages become one `turn_error` message, the class in words first.
fn turn_error(obj: &Map<String, Value>, line: &mut Line) {
    let class = obj.get("error").and_then(Value::as_str).unwrap_or_default();
    let words = match class {
        "rate_limit" => Some("Rate limited"),
        "server_error" => Some("API server error"),
        "billing_error" => Some("Billing"),
        "authentication_failed" => Some("Authentication failed"),
        "invalid_request" => Some("Invalid request"),
        "max_output_tokens" => Some("Output limit reached"),
        _ => None,
    };
    let texts: Vec<String> = line
        .out
        .messages
        .iter()
        .filter_map(|m| match (&m.role, &m.content) {
            (Role::System, Content::Text(t)) => Some(t.clone()),
            _ => None,
        })
        .collect();
    if texts.is_empty() {
        return;
    }
    line.out.messages.retain(|m| !(m.role == Role::System && matches!(m.content, Content::Text(_))));
    let text = texts.join("\n");
    let text = match words {
        Some(w) if !text.starts_with(w) => format!("{w}: {text}"),
        _ => text,
    };
    line.push(Role::System, Content::Other((TURN_ERROR.to_string(), text)));
}

fn assistant_text(text: &str, role: Role, line: &mut Line) {
    if text.trim().is_empty() || text.trim() == NO_CONTENT {
        return;
    }
    line.text(role, text);
}

fn system(obj: &Map<String, Value>, line: &mut Line) -> Result<(), String> {
    let subtype = match obj.get("subtype") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return Err("system `subtype` is not a string".into()),
    };
    let content = match obj.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return Err("system `content` is not a string".into()),
    };
    if subtype == Some("turn_duration") {
        line.signal(TurnSignal::Idle);
        return Ok(());
    }
    if subtype == Some("local_command") {
        return Ok(());
    }
    if let Some(text) = content.filter(|t| !t.trim().is_empty() && !is_command_wrapper(t)) {
        line.text(Role::System, text);
    }
    Ok(())
}

/// A [`ToolUse`] with its chat summary, from the input as JSON text (a summary of just
/// the name if the text is not JSON).
pub fn tool_use(id: impl Into<String>, name: impl Into<String>, input_json: impl Into<String>) -> ToolUse {
    let (name, input_json) = (name.into(), input_json.into());
    let input: Value = serde_json::from_str(&input_json).unwrap_or(Value::Null);
    ToolUse { id: id.into(), summary: tool_summary(&name, &input), name, input_json }
}

/// A one-line human summary of a tool call: the tool name and its key input.
pub fn tool_summary(name: &str, input: &Value) -> String {
    let detail: Option<String> = match name {
        "AskUserQuestion" => json::str_at(input, "questions/0/question").map(str::to_string),
        "ExitPlanMode" => Some("plan ready for approval".to_string()),
        "TodoWrite" => input.get("todos").and_then(Value::as_array).map(|t| format!("{} items", t.len())),
        _ => [
            "command",
            "file_path",
            "notebook_path",
            "path",
            "pattern",
            "url",
            "query",
            "description",
            "prompt",
            "skill",
        ]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str).filter(|s| !s.trim().is_empty()))
        .map(str::to_string),
    };
    match detail {
        Some(d) => format!("{name}: {}", one_line(&d, SUMMARY_MAX_CHARS)),
        None => name.to_string(),
    }
}

/// The first non-blank line of `s`, cut to `max` characters with an ellipsis.
fn one_line(s: &str, max: usize) -> String {
    let first = s.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let more_lines = s.trim().lines().count() > 1;
    if first.chars().count() > max {
        let cut: String = first.chars().take(max).collect();
        format!("{cut}…")
    } else if more_lines {
        format!("{first} …")
    } else {
        first.to_string()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn tool_use(m: &Message) -> &ToolUse {
        match &m.content {
            Content::ToolUse(u) => u,
            other => panic!("not a tool_use: {other:?}"),
        }
    }

    fn tool_result(m: &Message) -> &ToolResult {
        match &m.content {
            Content::ToolResult(r) => r,
            other => panic!("not a tool_result: {other:?}"),
        }
    }

    #[test]
    fn a_prompt_line_written_after_its_turn_ended_does_not_reopen_the_turn() {
        // As 2.1.198 wrote it for a 200 KiB prompt: reply, turn end, then the prompt.
        let chunk = [
            r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Read it."}],"stop_reason":"end_turn"},"timestamp":"2026-11-30T12:40:23.993Z","sessionId":"s"}"#,
            r#"{"type":"system","subtype":"turn_duration","durationMs":200,"timestamp":"2026-11-30T12:40:24.065Z","sessionId":"s"}"#,
            r#"{"type":"user","message":{"role":"user","content":"the long prompt"},"timestamp":"2026-11-30T12:40:23.805Z","sessionId":"s"}"#,
        ]
        .join("\n")
            + "\n";
        let out = parse_transcript(chunk.as_bytes());
        assert_eq!(out.messages.len(), 2, "the late prompt is still a message");
        assert_eq!(out.turn, Some(TurnSignal::Idle));
        // In order, a prompt after the turn's end does open a new turn.
        let in_order = chunk.replace("12:40:23.805Z", "12:40:25.000Z");
        assert_eq!(parse_transcript(in_order.as_bytes()).turn, Some(TurnSignal::Working));
    }
    use lab_provider_sdk::Diagnostic;

    fn parse(s: &str) -> ParseOutput {
        parse_transcript(s.as_bytes())
    }

    #[test]
    fn realistic_session_with_an_answered_question() {
        let out = parse_transcript(include_bytes!("../testdata/session-ask-answered.jsonl"));
        assert_eq!(out.diagnostics, Vec::<Diagnostic>::new());
        assert_eq!(out.session_id.as_deref(), Some("3f2b8c1a-5d4e-4f60-9a7b-1c2d3e4f5a6b"));
        let got: Vec<(Role, &str, &str)> = out.messages.iter().map(|m| (m.role, m.kind(), m.display_text())).collect();
        assert_eq!(
            got,
            vec![
                (Role::User, "text", "Add an order history endpoint. Ask me which database to use first."),
                (Role::Assistant, "thinking", "The user wants me to ask about the database before starting."),
                (Role::Assistant, "text", "Before I start, I need to know which database to use."),
                (Role::Assistant, "tool_use", "AskUserQuestion: Which database should the order service use?"),
                (
                    Role::Tool,
                    "tool_result",
                    "Your questions have been answered: \"Which database should the order service use?\"=\"PostgreSQL\". You can now continue with these answers in mind."
                ),
                (Role::Assistant, "tool_use", "Bash: ls migrations"),
                (Role::Tool, "tool_result", "0001_init.sql\n0002_customers.sql"),
                (Role::Assistant, "text", "PostgreSQL it is. I added migration `0003_orders.sql`."),
            ]
        );
        assert_eq!(out.messages[3].timestamp, "2026-07-07T10:15:04.512Z");
        let ask = tool_use(&out.messages[3]);
        assert_eq!(ask.id, "toolu_01HXk9Qm3RZpT7vJc2WbN4aE");
        assert_eq!(ask.name, "AskUserQuestion");
        let input: Value = serde_json::from_str(&ask.input_json).unwrap();
        assert_eq!(input["questions"][0]["options"][0]["label"], "PostgreSQL");
        assert_eq!(tool_result(&out.messages[4]).id, "toolu_01HXk9Qm3RZpT7vJc2WbN4aE");
        assert!(!tool_result(&out.messages[4]).is_error);
        assert_eq!(out.messages[0].timestamp, "2026-07-07T10:15:00.101Z");
        // The chunk ends with system turn_duration.
        assert_eq!(out.turn, Some(TurnSignal::Idle));
        // The tool_use round-trips through the one dialog mapper.
        let d = crate::dialog_mapper::map_dialog(ask.clone()).unwrap();
        assert!(d.answerable);
        assert_eq!(d.call_id.as_deref(), Some("toolu_01HXk9Qm3RZpT7vJc2WbN4aE"));
        assert_eq!(d.questions()[0].options.len(), 3);
    }

    #[test]
    fn esc_on_the_picker_is_an_error_result_then_idle() {
        let out = parse_transcript(include_bytes!("../testdata/session-ask-rejected.jsonl"));
        assert_eq!(out.diagnostics, Vec::<Diagnostic>::new());
        let m = out.messages.iter().find(|m| m.kind() == "tool_result").unwrap();
        assert_eq!(m.role, Role::Tool);
        let r = tool_result(m);
        assert!(r.is_error);
        assert_eq!(r.id, "toolu_01Xy2Zk7LmN3pQ4rS5tU6vWx");
        assert!(r.text.starts_with("The user doesn't want to proceed with this tool use."), "{}", r.text);
        let last = out.messages.last().unwrap();
        assert_eq!((last.role, last.display_text()), (Role::System, "[Request interrupted by user for tool use]"));
        assert_eq!(out.turn, Some(TurnSignal::Idle));
    }

    #[test]
    fn bookkeeping_lines_pass_silently() {
        let out = parse(concat!(
            r#"{"type":"mode","mode":"normal","sessionId":"s-1"}"#,
            "\n",
            r#"{"type":"permission-mode","permissionMode":"auto","sessionId":"s-1"}"#,
            "\n",
            r#"{"type":"file-history-snapshot","messageId":"m1","snapshot":{"messageId":"m1","trackedFileBackups":{},"timestamp":"2026-07-07T10:15:00.100Z"},"isSnapshotUpdate":false}"#,
            "\n",
            r#"{"type":"attachment","attachment":{"type":"todo_reminder","content":[]},"uuid":"u","timestamp":"2026-07-07T10:15:00.100Z","sessionId":"s-1"}"#,
            "\n",
            r#"{"type":"summary","summary":"Order history endpoint","leafUuid":"x"}"#,
            "\n",
            r#"{"type":"some-future-thing","whatever":[1,2,3]}"#,
            "\n",
        ));
        assert!(out.messages.is_empty());
        assert!(out.diagnostics.is_empty(), "{:?}", out.diagnostics);
        assert_eq!(out.turn, None);
        assert_eq!(out.session_id.as_deref(), Some("s-1"));
    }

    #[test]
    fn malformed_lines_become_diagnostics() {
        let chunk = concat!(
            "this is not json\n",
            "[1,2]\n",
            r#"{"no_type":true}"#,
            "\n",
            r#"{"type":7}"#,
            "\n",
            r#"{"type":"user"}"#,
            "\n",
            r#"{"type":"user","message":{"role":"user","content":42}}"#,
            "\n",
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{}}]}}"#,
            "\n",
            r#"{"type":"assistant","message":{"content":["bare string block"]}}"#,
            "\n",
            r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"x"}]}}"#,
            "\n",
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":{"odd":1}}]}}"#,
            "\n",
            r#"{"type":"assistant","message":{"content":[{"type":"text"}]}}"#,
            "\n",
            r#"{"type":"system","subtype":"informational","content":{"not":"text"}}"#,
            "\n",
            r#"{"type":"user","message":{"role":"user","content":"still fine"},"timestamp":"t"}"#,
            "\n",
        );
        let out = parse(chunk);
        let lines: Vec<u32> = out.diagnostics.iter().map(|d| d.line).collect();
        assert_eq!(lines, (0..12).collect::<Vec<u32>>(), "{:#?}", out.diagnostics);
        assert!(out.diagnostics[0].message.starts_with("not JSON"));
        assert!(out.diagnostics[1].message.contains("not a JSON object"));
        assert!(out.diagnostics[6].message.contains("`id`"), "{}", out.diagnostics[6].message);
        assert_eq!(out.messages.len(), 1);
        assert_eq!(out.messages[0].content, Content::Text("still fine".into()));
    }

    #[test]
    fn streaming_assistant_lines_with_null_stop_reason_do_not_end_the_turn() {
        let out = parse(concat!(
            r#"{"type":"user","message":{"role":"user","content":"go"}}"#,
            "\n",
            r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Working on it"}],"stop_reason":null}}"#,
            "\n",
        ));
        assert_eq!(out.turn, Some(TurnSignal::Working));
        for reason in ["end_turn", "stop_sequence", "max_tokens"] {
            let line = format!(
                "{{\"type\":\"assistant\",\"message\":{{\"content\":[{{\"type\":\"text\",\"text\":\"done\"}}],\"stop_reason\":\"{reason}\"}}}}\n"
            );
            assert_eq!(parse(&line).turn, Some(TurnSignal::Idle), "{reason}");
        }
        // A tool_use keeps the agent working whatever the stop_reason says.
        let out = parse(concat!(
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Let me look"},{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/x/src/main.rs"}}],"stop_reason":"end_turn"}}"#,
            "\n",
        ));
        assert_eq!(out.turn, Some(TurnSignal::Working));
        assert_eq!(tool_use(&out.messages[1]).name, "Read");
        assert_eq!(out.messages[1].display_text(), "Read: /x/src/main.rs");
        assert_eq!(tool_use(&out.messages[1]).input_json, r#"{"file_path":"/x/src/main.rs"}"#);
        assert_eq!(out.messages[1].role, Role::Assistant);
    }

    #[test]
    fn meta_and_command_lines_are_skipped() {
        let out = parse(concat!(
            r#"{"type":"user","isMeta":true,"message":{"role":"user","content":"Caveat: The messages below were generated by the user while running local commands."}}"#,
            "\n",
            r#"{"type":"user","message":{"role":"user","content":"<command-name>/model</command-name>\n<command-message>model</command-message>\n<command-args></command-args>"}}"#,
            "\n",
            r#"{"type":"user","message":{"role":"user","content":"<local-command-stdout>Set model to opus</local-command-stdout>"}}"#,
            "\n",
            r#"{"type":"user","isCompactSummary":true,"isVisibleInTranscriptOnly":true,"message":{"role":"user","content":"This session is being continued from a previous conversation..."}}"#,
            "\n",
            r#"{"type":"system","subtype":"local_command","content":"<command-name>/model</command-name>","level":"info"}"#,
            "\n",
            r#"{"type":"user","isSidechain":true,"message":{"role":"user","content":"sub-agent prompt"}}"#,
            "\n",
            r#"{"type":"assistant","isSidechain":true,"message":{"content":[{"type":"text","text":"sub-agent done"}],"stop_reason":"end_turn"}}"#,
            "\n",
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"(no content)"},{"type":"thinking","thinking":"","signature":"sig"},{"type":"redacted_thinking","data":"xx"}]}}"#,
            "\n",
        ));
        assert!(out.messages.is_empty(), "{:#?}", out.messages);
        assert!(out.diagnostics.is_empty(), "{:?}", out.diagnostics);
        assert_eq!(out.turn, None);
    }

    #[test]
    fn system_lines_with_text_become_system_messages() {
        let out = parse(concat!(
            r#"{"type":"system","subtype":"informational","content":"Claude Code has switched from npm to native installer.","level":"info","timestamp":"2026-07-07T10:00:00Z","sessionId":"s"}"#,
            "\n",
            r#"{"type":"system","subtype":"compact_boundary","content":"Conversation compacted","compactMetadata":{"trigger":"auto","preTokens":150000}}"#,
            "\n",
            r#"{"type":"system","subtype":"stop_hook_summary","hookCount":1,"hookInfos":[]}"#,
            "\n",
        ));
        assert!(out.diagnostics.is_empty());
        let texts: Vec<_> = out.messages.iter().map(|m| (m.role, m.display_text())).collect();
        assert_eq!(
            texts,
            vec![
                (Role::System, "Claude Code has switched from npm to native installer."),
                (Role::System, "Conversation compacted")
            ]
        );
        assert_eq!(out.messages[0].timestamp, "2026-07-07T10:00:00Z");
        assert_eq!(out.turn, None);
        let out = parse("{\"type\":\"system\",\"subtype\":\"turn_duration\",\"durationMs\":8123,\"isMeta\":false}\n");
        assert!(out.messages.is_empty());
        assert_eq!(out.turn, Some(TurnSignal::Idle));
    }

    #[test]
    fn content_forms_and_tool_result_shapes() {
        let out = parse(concat!(
            r#"{"type":"assistant","message":{"content":"plain string reply","stop_reason":"end_turn"}}"#,
            "\n",
            r#"{"type":"user","message":{"content":[{"type":"text","text":"see this"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}}]}}"#,
            "\n",
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"line a"},{"type":"image","source":{}},{"type":"text","text":"line b"}]}]}}"#,
            "\n",
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t2"}]}}"#,
            "\n",
        ));
        assert!(out.diagnostics.is_empty(), "{:?}", out.diagnostics);
        let got: Vec<_> = out.messages.iter().map(|m| (m.role, m.kind(), m.display_text())).collect();
        assert_eq!(
            got,
            vec![
                (Role::Assistant, "text", "plain string reply"),
                (Role::User, "text", "see this"),
                (Role::User, "image", "[image]"),
                (Role::Tool, "tool_result", "line a\n[image]\nline b"),
                (Role::Tool, "tool_result", ""),
            ]
        );
        assert_eq!(out.turn, Some(TurnSignal::Working));
    }

    #[test]
    fn api_error_messages_are_system_text() {
        // An API error that ends the turn: one turn_error message (2.1.198 writes no class).
        let out = parse(concat!(
            r#"{"type":"assistant","isApiErrorMessage":true,"message":{"model":"<synthetic>","content":[{"type":"text","text":"API Error: 529 Overloaded"}],"stop_reason":"stop_sequence"}}"#,
            "\n",
        ));
        assert_eq!(out.messages.len(), 1);
        assert_eq!(out.messages[0].role, Role::System);
        assert_eq!(out.messages[0].content, Content::Other((TURN_ERROR.into(), "API Error: 529 Overloaded".into())));
        assert_eq!(out.turn, Some(TurnSignal::Idle));
        // One that does not end it (streamed, no stop_reason yet) stays plain system text.
        let out = parse(concat!(
            r#"{"type":"assistant","isApiErrorMessage":true,"message":{"content":[{"type":"text","text":"API Error: retrying"}],"stop_reason":null}}"#,
            "\n",
        ));
        assert_eq!(out.messages[0].content, Content::Text("API Error: retrying".into()));
        assert_eq!(out.turn, None);
    }

    /// What the real 2.1.332 wrote when the API refused a turn (testdata/real-2.1.332,
    /// `scripts/capture-claude-fixtures.sh stop-failure-*`; a StopFailure hook fired each
    /// time, ~40 ms after the line): the turn ends idle on one turn_error message.
    #[test]
    fn turns_the_api_refused_end_idle_on_a_turn_error() {
        for (scenario, want) in [
            ("stop-failure-billing", "Billing: Credit balance is too low"),
            ("stop-failure-rate-limit", "Rate limited: API Error: Request rejected (429) · Number of request tokens has exceeded your per-minute rate limit"),
            ("stop-failure-overloaded", "API server error: API Error: 529 Overloaded. This is a server-side issue"),
        ] {
            let path = format!("{}/testdata/real-2.1.332/{scenario}/transcript.jsonl", env!("CARGO_MANIFEST_DIR"));
            let out = parse_transcript(&std::fs::read(&path).unwrap());
            assert!(out.diagnostics.is_empty(), "{scenario}: {:?}", out.diagnostics);
            assert_eq!(out.turn, Some(TurnSignal::Idle), "{scenario}");
            let last = out.messages.last().unwrap();
            assert_eq!(last.role, Role::System, "{scenario}");
            match &last.content {
                Content::Other((kind, text)) => {
                    assert_eq!(kind, TURN_ERROR, "{scenario}");
                    assert!(text.starts_with(want), "{scenario}: {text}");
                }
                other => panic!("{scenario}: {other:?}"),
            }
            let texts = out.messages.iter().filter(|m| matches!(&m.content, Content::Text(t) if t == "Say hello.")).count();
            assert_eq!(texts, 1, "{scenario}: the prompt, once");
        }
    }

    #[test]
    fn summaries_are_short_and_informative() {
        use serde_json::json;
        assert_eq!(
            tool_summary("Bash", &json!({"command":"cargo test","description":"Run tests"})),
            "Bash: cargo test"
        );
        assert_eq!(tool_summary("Edit", &json!({"file_path":"/a/b.rs","old_string":"x"})), "Edit: /a/b.rs");
        assert_eq!(tool_summary("Grep", &json!({"pattern":"fn main"})), "Grep: fn main");
        assert_eq!(tool_summary("Task", &json!({"description":"Find callers","prompt":"…"})), "Task: Find callers");
        assert_eq!(tool_summary("TodoWrite", &json!({"todos":[{},{}]})), "TodoWrite: 2 items");
        assert_eq!(tool_summary("ExitPlanMode", &json!({"plan":"# P"})), "ExitPlanMode: plan ready for approval");
        assert_eq!(tool_summary("Mystery", &json!({"x":1})), "Mystery");
        assert_eq!(tool_summary("Bash", &json!("not an object")), "Bash");
        assert_eq!(tool_summary("Bash", &json!({"command":"set -e\nmake"})), "Bash: set -e …");
        let long = "x".repeat(300);
        let s = tool_summary("Bash", &json!({ "command": long }));
        assert_eq!(s.chars().count(), "Bash: ".len() + SUMMARY_MAX_CHARS + 1);
        assert!(s.ends_with('…'));
        assert_eq!(super::tool_use("t", "Bash", r#"{"command":"ls"}"#).summary, "Bash: ls");
        assert_eq!(super::tool_use("t", "Bash", "not json").summary, "Bash");
    }

    #[test]
    fn reparsing_is_deterministic() {
        let bytes = include_bytes!("../testdata/session-ask-answered.jsonl");
        assert_eq!(parse_transcript(bytes), parse_transcript(bytes));
    }

    /// The `.jsonl` files under `testdata/real/` and every `testdata/real-<version>/`
    /// (captures from the real `claude` binary), recursively, sorted. Empty if nothing
    /// was captured.
    pub(crate) fn real_files(prefix: &str) -> Vec<std::path::PathBuf> {
        fn walk(dir: &std::path::Path, prefix: &str, out: &mut Vec<std::path::PathBuf>) {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return;
            };
            for p in entries.filter_map(Result::ok).map(|e| e.path()) {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                if p.is_dir() {
                    walk(&p, prefix, out);
                } else if name.starts_with(prefix) && name.ends_with(".jsonl") {
                    out.push(p);
                }
            }
        }
        let mut out = Vec::new();
        let testdata = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
        for dir in std::fs::read_dir(&testdata).unwrap().filter_map(Result::ok).map(|e| e.path()) {
            let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name == "real" || name.starts_with("real-") {
                walk(&dir, prefix, &mut out);
            }
        }
        out.sort();
        out
    }

    /// Transcripts captured from the real `claude` binary parse without a single
    /// diagnostic, and every tool_use of a dialog tool maps to a dialog.
    #[test]
    fn real_transcripts_parse_cleanly() {
        for f in real_files("transcript") {
            let bytes = std::fs::read(&f).unwrap();
            let out = parse_transcript(&bytes);
            assert!(out.diagnostics.is_empty(), "{}: {:#?}", f.display(), out.diagnostics);
            assert!(out.session_id.is_some(), "{}", f.display());
            for u in out.messages.iter().filter(|m| m.kind() == "tool_use").map(tool_use) {
                let dialog = crate::dialog_mapper::map_dialog(u.clone());
                let is_dialog_tool = matches!(u.name.as_str(), "AskUserQuestion" | "ExitPlanMode");
                assert_eq!(dialog.is_some(), is_dialog_tool, "{}: {}", f.display(), u.name);
            }
        }
    }

    #[test]
    #[ignore = "prints the parse of every real transcript; run with --ignored --nocapture"]
    fn dump_real_transcripts() {
        for f in real_files("transcript") {
            let out = parse_transcript(&std::fs::read(&f).unwrap());
            println!("== {} turn={:?}", f.display(), out.turn);
            for m in &out.messages {
                let text: String = m.display_text().chars().take(110).collect();
                println!("  {:?}/{} {:?}", m.role, m.kind(), text);
            }
        }
    }
}
