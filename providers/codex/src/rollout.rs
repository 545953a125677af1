//! The rollout (`$CODEX_HOME/sessions/…/rollout-<time>-<session id>.jsonl`, 0.169.0) →
//! messages, turn signals, the session id (docs/providers/codex/compat.md, "Rollout").
//!
//! Each line is `{"timestamp", "ordinal"?, "type", "payload"}`:
//!
//! | line | yields |
//! |---|---|
//! | `session_meta` | the session id (`payload.id`) |
//! | `response_item` `message` role `user` | the operator's text — only the items codex marks as the user's (`content_item_kinds` `user.*`); harness context (`environments.environment_context`, …) is skipped |
//! | `response_item` `message` role `assistant` | assistant text (`output_text`) |
//! | `response_item` `message` role `developer`/`system` | nothing (codex's own instructions) |
//! | `response_item` `reasoning` | thinking (the `summary` texts; an encrypted-only item yields nothing) |
//! | `response_item` `function_call` / `custom_tool_call` | tool-use (`call_id`, `name`, arguments; summary `exec_command: <cmd>`) |
//! | `response_item` `function_call_output` / `custom_tool_call_output` | tool-result (error: "aborted by user", or a non-zero "Process exited with code N") |
//! | `event_msg` `task_started` | working |
//! | `event_msg` `task_complete` | idle |
//! | `event_msg` `turn_aborted` | an `interrupted` line and idle |
//! | `event_msg` `error` | an `error` line |
//!
//! Everything else (`turn_context`, `world_state`, `token_usage_record`, other
//! `event_msg`s — `item_completed` repeats the messages above) is skipped silently. A
//! line that is not JSON, has no `type`, or whose known item lacks a required field is a
//! diagnostic. `custom_tool_call` (codex's `apply_patch`) was not in the captures; its
//! shape (`name`, `input`, `call_id`) is taken from codex's rollout format.

use lab_provider_sdk::json::str_at;
use lab_provider_sdk::jsonl::{self, LineOutput};
use lab_provider_sdk::{Content, Message, ParseOutput, Role, ToolResult, ToolUse, TurnSignal};
use serde_json::Value;

/// Longest tool-use summary (characters).
pub const SUMMARY_MAX_CHARS: usize = 200;

pub fn parse_transcript(chunk: &[u8]) -> ParseOutput {
    jsonl::parse_lines(chunk, parse_line)
}

fn parse_line(v: &Value) -> Result<LineOutput, String> {
    let ty = v.get("type").and_then(Value::as_str).ok_or("missing string field `type`")?;
    let ts = str_at(v, "timestamp").unwrap_or("").to_string();
    let p = v.get("payload").unwrap_or(&Value::Null);
    let mut out = LineOutput::default();
    match ty {
        "session_meta" => {
            out.session_id =
                Some(str_at(p, "id").ok_or("session_meta: missing string field `payload/id`")?.to_string());
        }
        "response_item" => out.messages = response_item(p, &ts)?,
        "event_msg" => match str_at(p, "type").unwrap_or("") {
            "task_started" => out.turn = Some(TurnSignal::Working),
            "task_complete" => out.turn = Some(TurnSignal::Idle),
            "turn_aborted" => {
                let reason = str_at(p, "reason").unwrap_or("interrupted");
                out.messages.push(other("interrupted", format!("Turn {reason}"), &ts));
                out.turn = Some(TurnSignal::Idle);
            }
            "error" => {
                let text = str_at(p, "message").unwrap_or("error").to_string();
                out.messages.push(other("error", text, &ts));
            }
            _ => {}
        },
        _ => {}
    }
    Ok(out)
}

fn other(kind: &str, text: String, ts: &str) -> Message {
    Message { role: Role::System, content: Content::Other((kind.into(), text)), timestamp: ts.into() }
}

fn response_item(p: &Value, ts: &str) -> Result<Vec<Message>, String> {
    let item = str_at(p, "type").unwrap_or("");
    let msg = |role, content| Message { role, content, timestamp: ts.to_string() };
    Ok(match item {
        "message" => {
            let role = str_at(p, "role").ok_or("message: missing string field `role`")?;
            let content = p.get("content").and_then(Value::as_array).ok_or("message: missing array `content`")?;
            match role {
                "assistant" => {
                    texts(content, |_| true).into_iter().map(|t| Message::text(Role::Assistant, t, ts)).collect()
                }
                "user" => {
                    let kinds = p.pointer("/internal_chat_message_metadata_passthrough/content_item_kinds");
                    let kinds: Option<Vec<&str>> =
                        kinds.and_then(Value::as_array).map(|a| a.iter().map(|k| k.as_str().unwrap_or("")).collect());
                    texts(content, |i| match &kinds {
                        Some(k) => k.get(i).is_some_and(|k| k.starts_with("user.")),
                        None => true,
                    })
                    .into_iter()
                    .filter(|t| kinds.is_some() || !is_harness_text(t))
                    .map(|t| Message::text(Role::User, t, ts))
                    .collect()
                }
                _ => Vec::new(),
            }
        }
        "reasoning" => {
            let summary = p.get("summary").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
            let text: Vec<&str> = summary.iter().filter_map(|s| str_at(s, "text")).filter(|t| !t.is_empty()).collect();
            if text.is_empty() {
                Vec::new()
            } else {
                vec![msg(Role::Assistant, Content::Thinking(text.join("\n\n")))]
            }
        }
        "function_call" | "custom_tool_call" => {
            let id = str_at(p, "call_id").ok_or(format!("{item}: missing string field `call_id`"))?;
            let name = str_at(p, "name").ok_or(format!("{item}: missing string field `name`"))?;
            let input = if item == "function_call" {
                str_at(p, "arguments").unwrap_or("{}").to_string()
            } else {
                serde_json::json!({ "input": str_at(p, "input").unwrap_or("") }).to_string()
            };
            vec![msg(Role::Assistant, Content::ToolUse(tool_use(id, name, input)))]
        }
        "function_call_output" | "custom_tool_call_output" => {
            let id = str_at(p, "call_id").ok_or(format!("{item}: missing string field `call_id`"))?;
            let text = match p.get("output") {
                Some(Value::String(s)) => s.clone(),
                Some(o) => str_at(o, "content").map(str::to_string).unwrap_or_else(|| o.to_string()),
                None => String::new(),
            };
            let is_error = is_error_output(&text);
            vec![msg(Role::Tool, Content::ToolResult(ToolResult { id: id.into(), text, is_error }))]
        }
        _ => Vec::new(),
    })
}

/// The `input_text` / `output_text` texts of a message's content, by item index.
fn texts(content: &[Value], keep: impl Fn(usize) -> bool) -> Vec<String> {
    content
        .iter()
        .enumerate()
        .filter(|(i, _)| keep(*i))
        .filter_map(|(_, c)| match str_at(c, "type") {
            Some("input_text" | "output_text" | "text") => str_at(c, "text").map(str::to_string),
            _ => None,
        })
        .filter(|t| !t.trim().is_empty())
        .collect()
}

/// Context codex adds as a user message, for lines without codex's item kinds.
fn is_harness_text(t: &str) -> bool {
    let t = t.trim_start();
    ["<environment_context>", "<user_instructions>", "<skills_instructions>", "<turn_aborted>", "# AGENTS.md"]
        .iter()
        .any(|p| t.starts_with(p))
}

/// Codex's output for a denied call, or a command that exited non-zero.
fn is_error_output(text: &str) -> bool {
    if text.contains("aborted by user") {
        return true;
    }
    text.lines().find_map(|l| l.trim().strip_prefix("Process exited with code ")).is_some_and(|code| code.trim() != "0")
}

/// A tool-use with the chat's one-line summary.
pub fn tool_use(id: &str, name: &str, input_json: String) -> ToolUse {
    ToolUse { id: id.into(), name: name.into(), summary: summary(name, &input_json), input_json }
}

/// `exec_command: <cmd>`; other tools: `<name>: <arguments>` (cut).
pub fn summary(name: &str, input_json: &str) -> String {
    let args: Value = serde_json::from_str(input_json).unwrap_or(Value::Null);
    let detail = match (name, &args) {
        ("exec_command", a) if a.get("cmd").is_some_and(Value::is_string) => str_at(a, "cmd").unwrap().to_string(),
        ("shell", a) if a.get("command").is_some_and(Value::is_array) => {
            a["command"].as_array().unwrap().iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" ")
        }
        (_, a) if a.get("input").is_some_and(Value::is_string) => {
            str_at(a, "input").unwrap().lines().next().unwrap_or("").to_string()
        }
        _ => input_json.to_string(),
    };
    let line = format!("{name}: {}", detail.replace('\n', " "));
    if line.chars().count() > SUMMARY_MAX_CHARS {
        format!("{}…", line.chars().take(SUMMARY_MAX_CHARS).collect::<String>())
    } else {
        line
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The captured rollout of an approved `touch approved.txt` (codex 0.169.0).
    #[test]
    fn captured_rollout_after_approval() {
        let out = parse_transcript(include_bytes!("../testdata/rollout_after.jsonl"));
        assert!(out.diagnostics.is_empty(), "{:?}", out.diagnostics);
        assert_eq!(out.session_id.as_deref(), Some("01a22c0b-b1b5-7153-94d1-375c20cdcf00"));
        assert_eq!(out.turn, Some(TurnSignal::Idle), "ends with task_complete");
        let got: Vec<(Role, &str, &str)> = out.messages.iter().map(|m| (m.role, m.kind(), m.display_text())).collect();
        assert_eq!(
            got,
            [
                (Role::User, "text", "please TOUCHME (e2e)"),
                (Role::Assistant, "tool_use", "exec_command: touch approved.txt"),
                (Role::Tool, "tool_result", "Chunk ID: 91371f\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 0\nOutput:\n"),
                (Role::Assistant, "text", "Tool finished. Output was: Chunk ID: 91371f\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 0\nOutput:\n"),
            ]
        );
        let Content::ToolUse(u) = &out.messages[1].content else { unreachable!() };
        assert_eq!((u.id.as_str(), u.name.as_str()), ("call_1", "exec_command"));
        let args: Value = serde_json::from_str(&u.input_json).unwrap();
        assert_eq!(args["sandbox_permissions"], "require_escalated");
        let Content::ToolResult(r) = &out.messages[2].content else { unreachable!() };
        assert_eq!((r.id.as_str(), r.is_error), ("call_1", false));
        assert_eq!(out.messages[0].timestamp, "2026-11-30T10:41:33.798Z");
    }

    /// While the approval prompt is open the rollout ends at the call: working, one open call.
    #[test]
    fn captured_rollout_during_approval() {
        let out = parse_transcript(include_bytes!("../testdata/rollout_during_approval.jsonl"));
        assert!(out.diagnostics.is_empty(), "{:?}", out.diagnostics);
        assert_eq!(out.turn, Some(TurnSignal::Working));
        assert_eq!(out.messages.last().map(Message::kind), Some("tool_use"));
    }

    /// Re-reading gives the same messages; line by line gives the same as the whole.
    #[test]
    fn deterministic_and_chunking_independent() {
        let all = include_bytes!("../testdata/rollout_after.jsonl");
        let whole = parse_transcript(all);
        assert_eq!(whole, parse_transcript(all));
        let mut msgs = Vec::new();
        for l in all.split_inclusive(|b| *b == b'\n') {
            msgs.extend(parse_transcript(l).messages);
        }
        assert_eq!(msgs, whole.messages);
    }

    /// The captured rollout of a denied command (Esc) and the next message (0.169.0): the
    /// call's "aborted by user" result is an error, `turn_aborted` is a line and idle,
    /// codex's own `<turn_aborted>` note to the model is not shown.
    #[test]
    fn captured_rollout_denied_then_message() {
        let out = parse_transcript(include_bytes!("../testdata/rollout_denied_then_message.jsonl"));
        assert!(out.diagnostics.is_empty(), "{:?}", out.diagnostics);
        let got: Vec<(Role, &str, &str)> = out.messages.iter().map(|m| (m.role, m.kind(), m.display_text())).collect();
        assert_eq!(
            got,
            [
                (Role::User, "text", "please TOUCHME"),
                (Role::Assistant, "tool_use", "exec_command: touch denied.txt"),
                (Role::Tool, "tool_result", "Wall time: 5.0 seconds\naborted by user"),
                (Role::System, "interrupted", "Turn interrupted"),
                (Role::User, "text", "use mkdir instead"),
                (Role::Assistant, "text", "OK, mkdir it is."),
            ]
        );
        assert!(matches!(&out.messages[2].content, Content::ToolResult(r) if r.is_error && r.id == "call_3"));
        assert_eq!(out.turn, Some(TurnSignal::Idle));
        // Up to the abort: idle already (turn_aborted), before the next task_started.
        let text = std::str::from_utf8(include_bytes!("../testdata/rollout_denied_then_message.jsonl")).unwrap();
        let upto = text.find("\"turn_aborted\",\"root_turn_id\"").expect("the turn_aborted line");
        let end = upto + text[upto..].find('\n').unwrap() + 1;
        assert_eq!(parse_transcript(&text.as_bytes()[..end]).turn, Some(TurnSignal::Idle));
    }

    /// Shapes from compat.md ("esc": `function_call_output` "… aborted by user", then
    /// `turn_aborted` with `reason: "interrupted"`), reasoning, errors and bad lines.
    #[test]
    fn abort_reasoning_errors_and_bad_lines() {
        let chunk = concat!(
            r#"{"timestamp":"t1","type":"response_item","payload":{"type":"reasoning","summary":[{"type":"summary_text","text":"Think."}],"encrypted_content":"x"}}"#,
            "\n",
            r#"{"timestamp":"t2","type":"response_item","payload":{"type":"reasoning","summary":[],"encrypted_content":"x"}}"#,
            "\n",
            r#"{"timestamp":"t3","type":"response_item","payload":{"type":"function_call_output","call_id":"call_2","output":"exec_command aborted by user"}}"#,
            "\n",
            r#"{"timestamp":"t4","type":"event_msg","payload":{"type":"turn_aborted","reason":"interrupted"}}"#,
            "\n",
            "not json\n",
            r#"{"timestamp":"t5","payload":{}}"#,
            "\n",
            r#"{"timestamp":"t6","type":"response_item","payload":{"type":"function_call","name":"x"}}"#,
            "\n",
            r#"{"timestamp":"t7","type":"event_msg","payload":{"type":"error","message":"stream disconnected"}}"#,
            "\n",
            r#"{"timestamp":"t8","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>x</environment_context>"},{"type":"input_text","text":"hi"}]}}"#,
            "\n",
            r#"{"timestamp":"t9","type":"response_item","payload":{"type":"function_call_output","call_id":"call_3","output":"Process exited with code 2\nOutput:\n"}}"#,
            "\n",
        );
        let out = parse_transcript(chunk.as_bytes());
        let got: Vec<(&str, &str)> = out.messages.iter().map(|m| (m.kind(), m.display_text())).collect();
        assert_eq!(
            got,
            [
                ("thinking", "Think."),
                ("tool_result", "exec_command aborted by user"),
                ("interrupted", "Turn interrupted"),
                ("error", "stream disconnected"),
                ("text", "hi"),
                ("tool_result", "Process exited with code 2\nOutput:\n"),
            ]
        );
        assert!(matches!(&out.messages[1].content, Content::ToolResult(r) if r.is_error));
        assert!(matches!(&out.messages[5].content, Content::ToolResult(r) if r.is_error));
        assert_eq!(out.turn, Some(TurnSignal::Idle));
        let lines: Vec<u32> = out.diagnostics.iter().map(|d| d.line).collect();
        assert_eq!(lines, [4, 5, 6], "{:?}", out.diagnostics);
    }

    #[test]
    fn summaries() {
        assert_eq!(summary("exec_command", r#"{"cmd":"ls -la\necho"}"#), "exec_command: ls -la echo");
        assert_eq!(summary("apply_patch", r#"{"input":"*** Begin Patch\n…"}"#), "apply_patch: *** Begin Patch");
        assert_eq!(summary("other", "{\"a\":1}"), "other: {\"a\":1}");
        assert!(summary("exec_command", &format!(r#"{{"cmd":"{}"}}"#, "x".repeat(500))).ends_with('…'));
    }
}
