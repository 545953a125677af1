//! An ACP run's transcript: the journal lab writes as the agent's `session/update`s,
//! the operator's prompts and answers and the turns' ends come in (one JSON object a
//! line, in `<home>/acp/<run-id>.jsonl`, 0600), and its reader, a [`Provider`] the
//! tailer parses it with like any agent's transcript. Seqs are stable (the file only
//! grows) and the chat survives restarts; a line lab cannot read is a diagnostic, never
//! a lost chat.

use crate::agents::components::{CallError, CallErrorKind, Provider, Reply};
use crate::agents::model::{self, Content, Diagnostic, Message, ParseOutput, Role, ToolResult, ToolUse, TurnSignal};
use serde::{Deserialize, Serialize};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// One journal line's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Entry {
    /// A prompt lab sent (the run's first, or one from the composer).
    User {
        text: String,
    },
    Agent {
        text: String,
    },
    Thought {
        text: String,
    },
    ToolCall {
        id: String,
        name: String,
        input: String,
        summary: String,
    },
    ToolResult {
        id: String,
        text: String,
        is_error: bool,
    },
    /// The agent's plan, as a markdown list.
    Plan {
        text: String,
    },
    /// What lab says in the chat (an answer given, a resume).
    Note {
        text: String,
    },
    /// A turn started (`working`) or ended (`idle`, with the stop reason).
    Turn {
        working: bool,
        reason: Option<String>,
    },
    /// A turn ended on an error.
    Error {
        text: String,
    },
    /// The agent's session id.
    Session {
        session_id: String,
    },
    /// What one turn's model responses used, as the prompt response said
    /// ([`super::usage::turn_tokens`]); `id` is unique per turn.
    Usage {
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        input: u64,
        output: u64,
        cache_read: u64,
        cache_write: u64,
    },
    /// How full the context window is ([`super::usage::context`]).
    Context {
        used: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        window: Option<u64>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    pub t: String,
    #[serde(flatten)]
    pub entry: Entry,
}

/// Appends lines to a run's journal.
pub struct Journal {
    path: PathBuf,
}

impl Journal {
    /// The journal at `path` (created 0600 on first write).
    pub fn new(path: PathBuf) -> Journal {
        Journal { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one entry, stamped now. An entry is one `write` of one whole line, so a
    /// reader never sees half of one.
    pub fn append(&self, entry: Entry) -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut line = serde_json::to_vec(&Line { t: crate::util::time::now_rfc3339(), entry })?;
        line.push(b'\n');
        let mut f = std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(&self.path)?;
        f.write_all(&line)
    }
}

/// The journal's reader: lab's own format, so no component is involved.
pub struct JournalReader;

/// Parse journal bytes (whole lines) into messages, the turn and the session id.
pub fn parse(chunk: &[u8]) -> ParseOutput {
    let mut out = ParseOutput::default();
    for (i, raw) in chunk.split(|b| *b == b'\n').enumerate() {
        if raw.trim_ascii().is_empty() {
            continue;
        }
        let line: Line = match serde_json::from_slice(raw) {
            Ok(l) => l,
            Err(e) => {
                out.diagnostics.push(Diagnostic { line: i as u32 + 1, message: format!("not a journal line: {e}") });
                continue;
            }
        };
        let msg = |role, content| Message { role, content, timestamp: line.t.clone() };
        match line.entry {
            Entry::User { text } => out.messages.push(msg(Role::User, Content::Text(text))),
            Entry::Agent { text } => out.messages.push(msg(Role::Assistant, Content::Text(text))),
            Entry::Thought { text } => out.messages.push(msg(Role::Assistant, Content::Thinking(text))),
            Entry::ToolCall { id, name, input, summary } => out
                .messages
                .push(msg(Role::Assistant, Content::ToolUse(ToolUse { id, name, input_json: input, summary }))),
            Entry::ToolResult { id, text, is_error } => {
                out.messages.push(msg(Role::Tool, Content::ToolResult(ToolResult { id, text, is_error })))
            }
            Entry::Plan { text } => {
                out.messages.push(msg(Role::Assistant, Content::Other { kind: "plan".into(), text }))
            }
            Entry::Note { text } => out.messages.push(msg(Role::System, Content::Text(text))),
            Entry::Turn { working, .. } => {
                out.turn = Some(if working { TurnSignal::Working } else { TurnSignal::Idle });
            }
            Entry::Error { text } => {
                out.messages.push(msg(Role::System, Content::Other { kind: model::TURN_ERROR_KIND.into(), text }));
                out.turn = Some(TurnSignal::Idle);
            }
            Entry::Session { session_id } => out.session_id = Some(session_id),
            Entry::Usage { .. } | Entry::Context { .. } => {}
        }
    }
    out
}

/// What journal bytes (whole lines) say of usage: each turn's tokens, the newest
/// context use. Lines that are not journal lines are skipped (`parse` reports them).
pub fn usage(chunk: &[u8]) -> model::UsageReport {
    let mut out = model::UsageReport::default();
    for raw in chunk.split(|b| *b == b'\n') {
        let Ok(line) = serde_json::from_slice::<Line>(raw) else { continue };
        match line.entry {
            Entry::Usage { id, model, input, output, cache_read, cache_write } => {
                out.responses.push(model::ResponseUsage {
                    response_id: id,
                    model,
                    tokens: model::Tokens { input, output, cache_read, cache_write },
                    timestamp: line.t,
                })
            }
            Entry::Context { used, window } => out.context = Some(model::ContextUse { used, window }),
            _ => {}
        }
    }
    out
}

fn refused(function: &'static str, msg: String) -> CallError {
    CallError { provider: "acp".into(), function, kind: CallErrorKind::Refused(msg) }
}

impl Provider for JournalReader {
    fn dialog_hooker(&self) -> bool {
        // The spool is authoritative: lab writes it itself while a request waits.
        true
    }
    fn parse_transcript(&self, chunk: Vec<u8>) -> Reply<ParseOutput> {
        Box::pin(async move { Ok(parse(&chunk)) })
    }
    fn map_dialog(&self, _call: ToolUse) -> Reply<Option<model::Dialog>> {
        Box::pin(async { Ok(None) })
    }
    fn pending_dialog(&self, spool: Vec<u8>, _open: Vec<ToolUse>) -> Reply<Option<model::Dialog>> {
        Box::pin(async move {
            let req: super::dialog::Request = serde_json::from_slice(&spool)
                .map_err(|e| refused("pending-dialog", format!("not an ACP request spool: {e}")))?;
            req.dialog().map(Some).map_err(|e| refused("pending-dialog", e))
        })
    }
    fn blocked_state(&self, marker: Vec<u8>) -> Reply<model::Blocked> {
        Box::pin(async move {
            Ok(model::Blocked {
                kind: model::BLOCKED_ERROR.into(),
                message: String::from_utf8_lossy(&marker).chars().take(500).collect(),
            })
        })
    }
    fn session_info(&self, _payload: Vec<u8>) -> Reply<model::SessionFacts> {
        Box::pin(async { Ok(model::SessionFacts::default()) })
    }
    fn reads_usage(&self) -> bool {
        true
    }
    fn read_usage(&self, chunk: Vec<u8>) -> Reply<model::UsageReport> {
        Box::pin(async move { Ok(usage(&chunk)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_reads_back_and_bad_lines_are_diagnostics() {
        let d = tempfile::tempdir().unwrap();
        let j = Journal::new(d.path().join("r.jsonl"));
        let entries = [
            Entry::Session { session_id: "s-1".into() },
            Entry::User { text: "hi".into() },
            Entry::Turn { working: true, reason: None },
            Entry::Thought { text: "hmm".into() },
            Entry::ToolCall { id: "t1".into(), name: "execute".into(), input: "{}".into(), summary: "ls".into() },
            Entry::ToolResult { id: "t1".into(), text: "a b".into(), is_error: false },
            Entry::Plan { text: "- [ ] x".into() },
            Entry::Agent { text: "done".into() },
            Entry::Note { text: "Answered: Allow".into() },
            Entry::Turn { working: false, reason: Some("end_turn".into()) },
        ];
        for e in entries.clone() {
            j.append(e).unwrap();
        }
        let mut bytes = std::fs::read(j.path()).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(j.path()).unwrap().permissions().mode() & 0o777, 0o600);
        bytes.extend_from_slice(b"{broken\n");
        let out = parse(&bytes);
        assert_eq!(out.session_id.as_deref(), Some("s-1"));
        assert_eq!(out.turn, Some(TurnSignal::Idle));
        assert_eq!(out.messages.len(), 7);
        assert!(matches!(&out.messages[2].content, Content::ToolUse(u) if u.id == "t1"));
        assert_eq!(out.diagnostics.len(), 1);
        assert_eq!(out.diagnostics[0].line, 11);
        let err = parse(br#"{"t":"x","type":"error","text":"boom"}"#);
        assert!(matches!(&err.messages[0].content, Content::Other { kind, .. } if kind == model::TURN_ERROR_KIND));
    }

    /// The usage lines read back as the usage book takes them; the chat skips them.
    #[test]
    fn usage_lines_are_the_book_s_and_not_the_chat_s() {
        let d = tempfile::tempdir().unwrap();
        let j = Journal::new(d.path().join("r.jsonl"));
        j.append(Entry::Agent { text: "done".into() }).unwrap();
        let tokens = |id: &str, input| Entry::Usage {
            id: id.into(),
            model: Some("m-1".into()),
            input,
            output: 2,
            cache_read: 3,
            cache_write: 4,
        };
        j.append(tokens("s@1", 10)).unwrap();
        j.append(Entry::Context { used: 500, window: Some(1000) }).unwrap();
        j.append(tokens("s@2", 20)).unwrap();
        let bytes = std::fs::read(j.path()).unwrap();
        assert_eq!(parse(&bytes).messages.len(), 1, "usage is no message");
        let u = usage(&bytes);
        let got: Vec<(&str, u64)> = u.responses.iter().map(|r| (r.response_id.as_str(), r.tokens.input)).collect();
        assert_eq!(got, [("s@1", 10), ("s@2", 20)]);
        assert_eq!(u.responses[0].model.as_deref(), Some("m-1"));
        assert_eq!(u.context, Some(model::ContextUse { used: 500, window: Some(1000) }));
        assert!(usage(b"not json\n").is_empty());
    }
}
