//! The recorder: an ACP agent's `session/update`s into the run's journal — text
//! chunks gathered into one message per stretch, tool calls and their results (once
//! each), plans as checklists.

use super::journal::{Entry, Journal};
use serde_json::Value;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Mutex;

/// Agent text is written to the journal in one message per stretch of text: when
/// something else comes, the turn ends, or this much has gathered.
const FLUSH_AT: usize = 4096;

/// Text gathering for one message.
#[derive(Default)]
struct Buffered {
    thought: bool,
    text: String,
}

pub struct Recorder {
    label: String,
    journal: Journal,
    buffer: Mutex<Buffered>,
    /// Tool calls journalled already (an agent may name a call first in an update or
    /// a permission request, never in a `tool_call`).
    started: Mutex<HashSet<String>>,
    /// Tool calls whose result is journalled already.
    finished: Mutex<HashSet<String>>,
}

impl Recorder {
    pub fn new(label: String, journal: PathBuf) -> Recorder {
        Recorder {
            label,
            journal: Journal::new(journal),
            buffer: Mutex::default(),
            started: Mutex::default(),
            finished: Mutex::default(),
        }
    }

    /// Forget gathered text (what `session/load` replayed).
    pub fn clear_buffer(&self) {
        self.buffer.lock().unwrap().text.clear();
    }

    pub fn write(&self, entry: Entry) {
        if let Err(e) = self.journal.append(entry) {
            tracing::error!(run = %self.label, error = %e, "could not write the run's journal");
        }
    }

    /// Write the gathered text as one message.
    pub fn flush(&self) {
        let b = std::mem::take(&mut *self.buffer.lock().unwrap());
        if b.text.is_empty() {
            return;
        }
        self.write(if b.thought { Entry::Thought { text: b.text } } else { Entry::Agent { text: b.text } });
    }

    fn gather(&self, thought: bool, text: &str) {
        let full = {
            let mut b = self.buffer.lock().unwrap();
            if b.thought != thought && !b.text.is_empty() {
                let old = std::mem::take(&mut *b);
                drop(b);
                self.write(if old.thought {
                    Entry::Thought { text: old.text }
                } else {
                    Entry::Agent { text: old.text }
                });
                b = self.buffer.lock().unwrap();
            }
            b.thought = thought;
            b.text.push_str(text);
            b.text.len() >= FLUSH_AT
        };
        if full {
            self.flush();
        }
    }

    /// One `session/update` into the journal; whether the chat changed (gathered
    /// text changes it only once written).
    pub fn update(&self, u: &Value) -> bool {
        let kind = u["sessionUpdate"].as_str().unwrap_or_default();
        match kind {
            "agent_message_chunk" | "agent_thought_chunk" => {
                if let Some(t) = u["content"]["text"].as_str() {
                    self.gather(kind == "agent_thought_chunk", t);
                }
                return false;
            }
            "tool_call" => {
                self.flush();
                self.call(u);
                if let Some(done) = finished_result(u) {
                    self.finish(u["toolCallId"].as_str().unwrap_or_default().to_string(), done);
                }
            }
            "tool_call_update" => {
                let id = u["toolCallId"].as_str().unwrap_or_default().to_string();
                let done = finished_result(u);
                if done.is_some() || !self.started.lock().unwrap().contains(&id) {
                    self.flush();
                }
                self.call(u);
                if let Some(done) = done {
                    self.finish(id, done);
                }
            }
            "plan" => {
                self.flush();
                let text = u["entries"]
                    .as_array()
                    .map(|es| {
                        es.iter()
                            .map(|e| {
                                let mark = match e["status"].as_str() {
                                    Some("completed") => "[x]",
                                    Some("in_progress") => "[~]",
                                    _ => "[ ]",
                                };
                                format!("- {mark} {}", e["content"].as_str().unwrap_or_default())
                            })
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                    .unwrap_or_default();
                self.write(Entry::Plan { text });
            }
            "usage_update" => {
                // Not the chat: the usage book reads it from the journal.
                if let Some(c) = super::usage::context(u) {
                    self.write(Entry::Context { used: c.used, window: c.window });
                }
                return false;
            }
            _ => return false,
        }
        true
    }

    /// A tool call (a `tool_call`, or the `ToolCallUpdate` of an update or a permission
    /// request naming a call not seen before) into the journal, once per id.
    pub fn call(&self, u: &Value) {
        let id = u["toolCallId"].as_str().unwrap_or_default().to_string();
        if !self.started.lock().unwrap().insert(id.clone()) {
            return;
        }
        let title = u["title"].as_str().unwrap_or_default().to_string();
        let name = u["kind"].as_str().filter(|k| !k.is_empty()).unwrap_or("tool").to_string();
        let input = match &u["rawInput"] {
            Value::Null => "{}".to_string(),
            v => v.to_string(),
        };
        self.write(Entry::ToolCall { id, name, input, summary: title });
    }

    fn finish(&self, id: String, (text, is_error): (String, bool)) {
        if self.finished.lock().unwrap().insert(id.clone()) {
            self.write(Entry::ToolResult { id, text, is_error });
        }
    }
}

/// A tool call's result text and whether it failed, once its status says it is over.
fn finished_result(u: &Value) -> Option<(String, bool)> {
    let failed = match u["status"].as_str() {
        Some("completed") => false,
        Some("failed") => true,
        _ => return None,
    };
    let mut parts = Vec::new();
    for c in u["content"].as_array().into_iter().flatten() {
        match c["type"].as_str() {
            Some("content") => {
                if let Some(t) = c["content"]["text"].as_str() {
                    parts.push(t.to_string());
                }
            }
            Some("diff") => parts.push(format!("edited {}", c["path"].as_str().unwrap_or("a file"))),
            _ => {}
        }
    }
    if parts.is_empty() {
        match &u["rawOutput"] {
            Value::Null => {}
            Value::String(s) => parts.push(s.clone()),
            v => parts.push(v.to_string()),
        }
    }
    let mut text = parts.join("\n");
    if text.len() > 64 * 1024 {
        text.truncate(crate::util::text::head(&text, 64 * 1024).len());
        text.push_str("\n[cut]");
    }
    Some((text, failed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_call_is_over_when_its_status_says_so() {
        assert_eq!(finished_result(&json!({"status": "in_progress"})), None);
        let done =
            json!({"status": "completed", "content": [{"type": "content", "content": {"type": "text", "text": "ok"}}]});
        assert_eq!(finished_result(&done), Some(("ok".into(), false)));
        assert_eq!(finished_result(&json!({"status": "failed", "rawOutput": "denied"})), Some(("denied".into(), true)));
        let diff = json!({"status": "completed", "content": [{"type": "diff", "path": "/w/a.rs", "oldText": "", "newText": "x"}]});
        assert_eq!(finished_result(&diff), Some(("edited /w/a.rs".into(), false)));
        let big = json!({"status": "completed", "rawOutput": "é".repeat(40_000)});
        let (t, _) = finished_result(&big).unwrap();
        assert!(t.len() <= 64 * 1024 + 8 && t.ends_with("[cut]"));
    }

    #[test]
    fn chunks_gather_into_one_message_and_results_are_written_once() {
        let d = tempfile::tempdir().unwrap();
        let r = Recorder::new("t".into(), d.path().join("j.jsonl"));
        let chunk = |k: &str, t: &str| json!({"sessionUpdate": k, "content": {"type": "text", "text": t}});
        assert!(!r.update(&chunk("agent_message_chunk", "Hel")), "gathered, not written yet");
        r.update(&chunk("agent_message_chunk", "lo"));
        r.update(&chunk("agent_thought_chunk", "hmm"));
        assert!(r.update(&json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "ls", "kind": "execute"})));
        let done =
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed", "rawOutput": "a"});
        assert!(r.update(&done));
        r.update(&done);
        assert!(!r.update(&json!({"sessionUpdate": "usage_update"})));
        r.flush();
        let out = super::super::journal::parse(&std::fs::read(d.path().join("j.jsonl")).unwrap());
        let texts: Vec<String> = out.messages.iter().map(|m| format!("{:?}", m.content)).collect();
        assert_eq!(out.messages.len(), 4, "{texts:?}");
        assert!(
            texts[0].contains("Hello") && texts[1].contains("Thinking") && texts[3].contains("ToolResult"),
            "{texts:?}"
        );
    }

    /// An agent that names a call first in its permission request or an update (Gemini
    /// CLI sends no `tool_call`) still shows it in the chat, once, before its result.
    #[test]
    fn a_call_first_named_in_an_update_or_a_permission_request_is_journalled_once() {
        let d = tempfile::tempdir().unwrap();
        let r = Recorder::new("t".into(), d.path().join("j.jsonl"));
        r.call(&json!({"toolCallId": "p1", "title": "echo hi > f", "kind": "execute", "status": "pending"}));
        let done = json!({"sessionUpdate": "tool_call_update", "toolCallId": "p1", "status": "completed", "title": "echo hi > f"});
        assert!(r.update(&done));
        assert!(r.update(
            &json!({"sessionUpdate": "tool_call_update", "toolCallId": "u1", "status": "failed", "title": "rm x"})
        ));
        r.call(&json!({"toolCallId": "u1", "title": "rm x"}));
        let out = super::super::journal::parse(&std::fs::read(d.path().join("j.jsonl")).unwrap());
        let kinds: Vec<String> = out.messages.iter().map(|m| format!("{:?}", m.content)).collect();
        assert_eq!(out.messages.len(), 4, "{kinds:?}");
        assert!(kinds[0].contains("ToolUse") && kinds[0].contains("echo hi > f"), "{kinds:?}");
        assert!(
            kinds[1].contains("ToolResult") && kinds[2].contains("ToolUse") && kinds[3].contains("ToolResult"),
            "{kinds:?}"
        );
    }
}
