//! JSONL helpers: split a chunk of complete lines, parse each as JSON, and collect
//! what a line yields or why it was skipped.

use crate::{Diagnostic, Message, ParseOutput, TurnSignal};
use serde_json::Value;

/// Iterate over the complete lines of `chunk` as `(index, bytes)`, without the line
/// terminator (`\n` or `\r\n`). A trailing piece without `\n` is still yielded (the
/// host never sends one, but a direct caller might). Blank lines are skipped but still
/// counted, so indices match line numbers.
pub fn lines(chunk: &[u8]) -> impl Iterator<Item = (u32, &[u8])> {
    let body = chunk.strip_suffix(b"\n").unwrap_or(chunk);
    let mut pieces = body.split(|b| *b == b'\n').enumerate().peekable();
    if chunk.is_empty() {
        pieces.next();
    }
    pieces.filter_map(|(i, l)| {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        if l.iter().all(|b| b.is_ascii_whitespace()) {
            None
        } else {
            Some((i as u32, l))
        }
    })
}

/// What one transcript line yields.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LineOutput {
    pub messages: Vec<Message>,
    pub turn: Option<TurnSignal>,
    pub session_id: Option<String>,
}

/// Parse every line of `chunk` as a JSON value and hand it to `per_line`. A line that
/// is not UTF-8, not JSON, or that `per_line` rejects becomes a [`Diagnostic`]; the
/// other lines still go through.
pub fn parse_lines(chunk: &[u8], mut per_line: impl FnMut(&Value) -> Result<LineOutput, String>) -> ParseOutput {
    let mut out = ParseOutput::default();
    for (i, raw) in lines(chunk) {
        let value: Value = match std::str::from_utf8(raw)
            .map_err(|e| format!("not UTF-8: {e}"))
            .and_then(|s| serde_json::from_str(s).map_err(|e| format!("not JSON: {e}")))
        {
            Ok(v) => v,
            Err(message) => {
                out.diagnostics.push(Diagnostic { line: i, message });
                continue;
            }
        };
        match per_line(&value) {
            Ok(line) => {
                out.messages.extend(line.messages);
                if line.turn.is_some() {
                    out.turn = line.turn;
                }
                if line.session_id.is_some() {
                    out.session_id = line.session_id;
                }
            }
            Err(message) => out.diagnostics.push(Diagnostic { line: i, message }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_keep_indices_and_strip_terminators() {
        let got: Vec<_> = lines(b"a\r\n\nb\nc").collect();
        assert_eq!(got, vec![(0, &b"a"[..]), (2, &b"b"[..]), (3, &b"c"[..])]);
        assert_eq!(lines(b"").count(), 0);
        assert_eq!(lines(b"\n").count(), 0);
    }

    #[test]
    fn bad_lines_become_diagnostics_and_good_ones_pass() {
        let chunk = b"{\"t\":1}\nnot json\n\xff\xfe\n{\"t\":2}\n";
        let out = parse_lines(chunk, |v| {
            if v["t"] == 2 {
                return Err("two is rejected".into());
            }
            Ok(LineOutput { turn: Some(TurnSignal::Idle), ..Default::default() })
        });
        assert_eq!(out.turn, Some(TurnSignal::Idle));
        let lines: Vec<u32> = out.diagnostics.iter().map(|d| d.line).collect();
        assert_eq!(lines, vec![1, 2, 3]);
        assert!(out.diagnostics[0].message.starts_with("not JSON"));
        assert!(out.diagnostics[1].message.starts_with("not UTF-8"));
        assert_eq!(out.diagnostics[2].message, "two is rejected");
    }
}
