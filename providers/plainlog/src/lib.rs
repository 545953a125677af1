//! `plainlog`: a transcript-only provider (base world only, no dialog-hooker).
//!
//! It drives any program that takes `--transcript <path> -- <prompt>` and appends one
//! JSON object per line to that file:
//!
//! - `{"role": "user"|"assistant"|"system", "text": "…", "ts": "…"}` — a chat message;
//! - `{"type": "tool_use", "id", "name", "input": {…}, "ts"}` and
//!   `{"type": "tool_result", "id", "text", "is_error"?, "ts"}` — tool calls;
//! - `{"turn": "working"|"idle"}` — the agent's turn state.
//!
//! A tool named `ask` with input `{"question", "header"?, "options": [{"label",
//! "description"?}]}` is an interactive dialog; being transcript-only, lab shows it but
//! cannot answer it (`answerable: false`). lab's tests use it as the fixture that
//! proves the host's transcript-only fallback, and docs/providers.md uses it as the
//! worked example.

use lab_provider_sdk::{
    json, jsonl, Content, Dialog, DialogBody, DialogOption, LaunchRequest, LaunchSpec, Message, ParseOutput, Provider,
    ProviderInfo, Question, Role, Samples, ToolResult, ToolUse, TranscriptLocation, TurnSignal,
};
use serde_json::Value;

pub struct Plainlog;

impl Provider for Plainlog {
    fn info() -> ProviderInfo {
        ProviderInfo {
            name: "plainlog".into(),
            display_name: "Plainlog agent".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Agents that append a plain JSONL chat log (transcript-only)".into(),
            default_program: "plainlog-agent".into(),
            permission_modes: Vec::new(),
        }
    }

    fn launch(req: LaunchRequest) -> Result<LaunchSpec, String> {
        let home = req.env_var("HOME").ok_or("HOME is not set in the agent's environment")?;
        let transcript = format!("{}/.plainlog/{}.jsonl", home.trim_end_matches('/'), req.session_id);
        Ok(LaunchSpec {
            argv: vec![req.program, "--transcript".into(), transcript.clone(), "--".into(), req.prompt],
            transcript: TranscriptLocation::Path(transcript),
            session_id: Some(req.session_id),
            env: Vec::new(),
        })
    }

    fn parse_transcript(chunk: &[u8]) -> ParseOutput {
        jsonl::parse_lines(chunk, parse_line)
    }

    fn map_dialog(call: ToolUse) -> Option<Dialog> {
        if call.name != "ask" {
            return None;
        }
        let input: Value = serde_json::from_str(&call.input_json).ok()?;
        let options = input["options"]
            .as_array()?
            .iter()
            .map(|o| DialogOption {
                label: json::str_at(o, "label").unwrap_or_default().to_string(),
                description: json::str_at(o, "description").unwrap_or_default().to_string(),
            })
            .collect();
        let question = Question {
            header: json::str_at(&input, "header").unwrap_or_default().to_string(),
            question: json::str_at(&input, "question").unwrap_or_default().to_string(),
            multi_select: false,
            options,
        };
        Some(Dialog {
            call_id: Some(call.id.clone()),
            answerable: false,
            ..Dialog::new(call.id, call.name, DialogBody::Question(vec![question]))
        })
    }

    fn self_test_samples() -> Samples {
        Samples {
            transcript_lines: vec![
                r#"{"role":"user","text":"hello","ts":"2026-01-01T00:00:00Z"}"#.into(),
                r#"{"type":"tool_use","id":"a1","name":"ask","input":{"question":"Which?","options":[{"label":"x"}]}}"#
                    .into(),
            ],
            dialog_calls: vec![ToolUse {
                id: "a1".into(),
                name: "ask".into(),
                input_json: r#"{"question":"Which?","options":[{"label":"x"},{"label":"y"}]}"#.into(),
                summary: "ask".into(),
            }],
        }
    }
}

fn parse_line(v: &Value) -> Result<jsonl::LineOutput, String> {
    let ts = json::str_at(v, "ts").unwrap_or_default().to_string();
    let mut out = jsonl::LineOutput::default();
    if let Some(turn) = json::str_at(v, "turn") {
        out.turn = Some(match turn {
            "working" => TurnSignal::Working,
            "idle" => TurnSignal::Idle,
            other => return Err(format!("unknown turn `{other}`")),
        });
        return Ok(out);
    }
    match json::str_at(v, "type") {
        Some("tool_use") => {
            let name = json::require_str(v, "name")?.to_string();
            out.messages.push(Message {
                role: Role::Assistant,
                content: Content::ToolUse(ToolUse {
                    id: json::require_str(v, "id")?.to_string(),
                    summary: name.clone(),
                    name,
                    input_json: v.get("input").cloned().unwrap_or(Value::Null).to_string(),
                }),
                timestamp: ts,
            });
            out.turn = Some(TurnSignal::Working);
        }
        Some("tool_result") => {
            out.messages.push(Message {
                role: Role::Tool,
                content: Content::ToolResult(ToolResult {
                    id: json::require_str(v, "id")?.to_string(),
                    text: json::str_at(v, "text").unwrap_or_default().to_string(),
                    is_error: v["is_error"].as_bool().unwrap_or(false),
                }),
                timestamp: ts,
            });
            out.turn = Some(TurnSignal::Working);
        }
        Some(other) => return Err(format!("unknown line type `{other}`")),
        None => {
            let role = match json::require_str(v, "role")? {
                "user" => Role::User,
                "assistant" => Role::Assistant,
                "system" => Role::System,
                other => return Err(format!("unknown role `{other}`")),
            };
            out.messages.push(Message::text(role, json::require_str(v, "text")?, ts));
            if role == Role::User {
                out.turn = Some(TurnSignal::Working);
            }
        }
    }
    Ok(out)
}

lab_provider_sdk::export_provider!(Plainlog);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_messages_tools_and_turns() {
        let chunk = br#"{"role":"user","text":"hi","ts":"t1"}
{"type":"tool_use","id":"a1","name":"ask","input":{"question":"Q?","options":[{"label":"x"}]}}
{"type":"tool_result","id":"a1","text":"x"}
garbage
{"turn":"idle"}
"#;
        let out = Plainlog::parse_transcript(chunk);
        assert_eq!(out.messages.len(), 3);
        assert_eq!(out.messages[0].content, Content::Text("hi".into()));
        assert!(matches!(&out.messages[1].content, Content::ToolUse(u) if u.name == "ask" && u.id == "a1"));
        assert!(matches!(&out.messages[2].content, Content::ToolResult(r) if r.id == "a1" && !r.is_error));
        assert_eq!(out.turn, Some(TurnSignal::Idle));
        assert_eq!(out.diagnostics.len(), 1);
        assert_eq!(out.diagnostics[0].line, 3);
    }

    #[test]
    fn maps_ask_to_an_unanswerable_dialog() {
        let d = Plainlog::map_dialog(ToolUse {
            id: "a1".into(),
            name: "ask".into(),
            input_json: r#"{"question":"Q?","options":[{"label":"x","description":"d"}]}"#.into(),
            summary: "ask".into(),
        })
        .unwrap();
        assert!(!d.answerable);
        assert_eq!((d.id.as_str(), d.call_id.as_deref()), ("a1", Some("a1")));
        assert_eq!(d.questions()[0].options[0].description, "d");
        assert!(Plainlog::map_dialog(ToolUse {
            id: "b".into(),
            name: "run".into(),
            input_json: "{}".into(),
            summary: "run".into(),
        })
        .is_none());
    }

    #[test]
    fn its_self_test_samples_pass_its_own_parser_and_mapper() {
        let s = Plainlog::self_test_samples();
        for line in &s.transcript_lines {
            assert!(!Plainlog::parse_transcript(format!("{line}\n").as_bytes()).messages.is_empty(), "{line}");
        }
        for call in s.dialog_calls {
            assert!(Plainlog::map_dialog(call).is_some());
        }
    }
}
