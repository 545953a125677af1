//! What Claude Code's transcript says about usage (WIT `usage`).
//!
//! | line | usage |
//! |---|---|
//! | `assistant` with `message.usage` | one response: `message.id` (else `requestId`), `message.model`, `input_tokens`, `output_tokens`, `cache_read_input_tokens`, `cache_creation_input_tokens`; the newest one is the context in use (input + cache read + cache write; the window is not written) |
//! | `assistant` with `isApiErrorMessage: true` | an API error (its text); a `<synthetic>` model's zero usage is no response |
//!
//! Claude Code writes one line per content block of a response (thinking, text, each
//! tool call), and each line repeats that response's `usage` (2.1.198 and 2.1.332,
//! observed): the same `message.id` comes several times, and lab keeps one record per
//! id. Claude Code writes no account windows into its transcript.

use lab_provider_sdk::json::str_at;
use lab_provider_sdk::{jsonl, ApiError, ContextUse, ResponseUsage, Tokens, UsageReport};
use serde_json::Value;

pub fn read_usage(chunk: &[u8]) -> UsageReport {
    let mut out = UsageReport::default();
    for (_, raw) in jsonl::lines(chunk) {
        let Ok(v) = serde_json::from_slice::<Value>(raw) else { continue };
        if str_at(&v, "type") != Some("assistant") {
            continue;
        }
        let timestamp = str_at(&v, "timestamp").unwrap_or("").to_string();
        let Some(message) = v.get("message") else { continue };
        if v.get("isApiErrorMessage").and_then(Value::as_bool) == Some(true) {
            out.errors.push(ApiError { text: error_text(message), timestamp: timestamp.clone() });
        }
        let model = str_at(message, "model").filter(|m| !m.is_empty() && *m != "<synthetic>");
        let (Some(model), Some(usage)) = (model, message.get("usage")) else { continue };
        let Some(id) = str_at(message, "id").or_else(|| str_at(&v, "requestId")) else { continue };
        let n = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
        let tokens = Tokens {
            input: n("input_tokens"),
            output: n("output_tokens"),
            cache_read: n("cache_read_input_tokens"),
            cache_write: n("cache_creation_input_tokens"),
        };
        out.context = Some(ContextUse { used: tokens.input + tokens.cache_read + tokens.cache_write, window: None });
        out.responses.push(ResponseUsage {
            response_id: id.to_string(),
            model: Some(model.to_string()),
            tokens,
            timestamp,
        });
    }
    out
}

/// The words of an API error line (its text blocks).
fn error_text(message: &Value) -> String {
    let blocks = message.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    let text: Vec<&str> = blocks.iter().filter_map(|b| str_at(b, "text")).collect();
    if text.is_empty() {
        "API error".to_string()
    } else {
        text.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: &str, blocks: &str, usage: &str) -> String {
        format!(
            r#"{{"type":"assistant","timestamp":"2026-12-05T01:00:00Z","requestId":"req_{id}","message":{{"id":"{id}","model":"claude-sonnet-4-5-20250929","content":[{blocks}],"usage":{usage}}}}}"#
        ) + "\n"
    }

    #[test]
    fn each_content_block_line_repeats_its_response_and_is_returned_as_it_is() {
        let usage = r#"{"input_tokens":12,"cache_creation_input_tokens":300,"cache_read_input_tokens":4000,"output_tokens":57}"#;
        let chunk = line("msg_1", r#"{"type":"text","text":"a"}"#, usage)
            + &line("msg_1", r#"{"type":"tool_use","id":"t","name":"Bash","input":{}}"#, usage)
            + r#"{"type":"user","message":{"role":"user","content":"hi"}}"#
            + "\n";
        let out = read_usage(chunk.as_bytes());
        assert_eq!(out.responses.len(), 2, "both lines, the host keeps one per id");
        assert!(out.responses.iter().all(|r| r.response_id == "msg_1"));
        assert_eq!(out.responses[0].tokens, Tokens { input: 12, output: 57, cache_read: 4000, cache_write: 300 });
        assert_eq!(out.responses[0].model.as_deref(), Some("claude-sonnet-4-5-20250929"));
        assert_eq!(out.context, Some(ContextUse { used: 4312, window: None }));
        assert!(out.windows.is_empty() && out.errors.is_empty());
    }

    #[test]
    fn api_errors_are_errors_and_not_responses() {
        let chunk = r#"{"type":"assistant","isApiErrorMessage":true,"timestamp":"t","message":{"id":"x","model":"<synthetic>","content":[{"type":"text","text":"API Error: 529 Overloaded"}],"usage":{"input_tokens":0,"output_tokens":0}}}"#.to_string() + "\nnot json\n";
        let out = read_usage(chunk.as_bytes());
        assert!(out.responses.is_empty());
        assert_eq!(out.errors, vec![ApiError { text: "API Error: 529 Overloaded".into(), timestamp: "t".into() }]);
    }
}
