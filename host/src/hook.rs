//! `lab hook …`: what the agent's hooks execute. Reads the hook payload on stdin,
//! exits 0 with nothing on stdout whatever happens (the agent must never be blocked),
//! and keeps its start-up tiny: no component, no database, no async runtime.
//!
//! - `lab hook spool-write <spool>`: atomically write stdin to the spool.
//! - `lab hook spool-clear <spool> --id-field <field>`: delete the spool when the
//!   top-level string `<field>` of stdin equals the spool's.
//! - `lab hook marker-write <marker>`: atomically write stdin to the blocked marker.
//!
//! Stdin must be one JSON object; anything else writes nothing and leaves one line on
//! stderr. The protocol is described in docs/compat.md §9.

use crate::fsutil;
use serde_json::Value;
use std::io::Read;
use std::path::Path;

/// Largest payload accepted. The hooks fire for dialogs only (a question, a plan):
/// far below this. At most this much (plus one byte) is read from stdin, so a runaway
/// payload can neither fill memory nor, through the temp file, the disk.
pub const MAX_PAYLOAD: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<'a> {
    SpoolWrite,
    SpoolClear { id_field: &'a str },
    MarkerWrite,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Written,
    Cleared,
    /// spool-clear left the spool alone (absent, or another dialog's).
    Kept,
}

fn parse_object(payload: &[u8]) -> Result<Value, String> {
    let v: Value = serde_json::from_slice(payload).map_err(|e| format!("stdin is not JSON ({e})"))?;
    if !v.is_object() {
        return Err("stdin is not a JSON object".into());
    }
    Ok(v)
}

/// The decision and the file operation, without process concerns.
pub fn apply(action: &Action<'_>, path: &Path, payload: &[u8]) -> Result<Outcome, String> {
    if payload.len() > MAX_PAYLOAD {
        return Err(format!("stdin is over the {MAX_PAYLOAD} byte limit"));
    }
    let v = parse_object(payload)?;
    match action {
        Action::SpoolWrite | Action::MarkerWrite => {
            fsutil::write_atomic(path, payload, 0o600).map_err(|e| format!("writing {}: {e}", path.display()))?;
            Ok(Outcome::Written)
        }
        Action::SpoolClear { id_field } => {
            let id = v
                .get(*id_field)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .ok_or_else(|| format!("stdin has no string field `{id_field}`"))?;
            let Some(spool) = fsutil::read_optional(path).map_err(|e| format!("reading {}: {e}", path.display()))?
            else {
                return Ok(Outcome::Kept);
            };
            let spooled = serde_json::from_slice::<Value>(&spool).ok();
            let spooled_id = spooled.as_ref().and_then(|s| s.get(*id_field)).and_then(Value::as_str);
            // A spool that is not even JSON cannot be anyone's live dialog: clear it too.
            if spooled.is_none() || spooled_id == Some(id) {
                fsutil::remove_if_exists(path).map_err(|e| format!("removing {}: {e}", path.display()))?;
                Ok(Outcome::Cleared)
            } else {
                Ok(Outcome::Kept)
            }
        }
    }
}

/// Entry point for `lab hook`; always returns exit code 0.
pub fn main(args: &[String]) -> i32 {
    let usage = "usage: lab hook spool-write <spool> | spool-clear <spool> --id-field <field> | marker-write <marker>";
    let (action, path) = match args {
        [verb, path] if verb == "spool-write" => (Action::SpoolWrite, path),
        [verb, path] if verb == "marker-write" => (Action::MarkerWrite, path),
        [verb, path, flag, field] if verb == "spool-clear" && flag == "--id-field" => {
            (Action::SpoolClear { id_field: field.as_str() }, path)
        }
        _ => {
            eprintln!("lab hook: {usage}");
            return 0;
        }
    };
    let mut payload = Vec::new();
    if let Err(e) = std::io::stdin().take(MAX_PAYLOAD as u64 + 1).read_to_end(&mut payload) {
        eprintln!("lab hook: reading stdin: {e}");
        return 0;
    }
    if let Err(e) = apply(&action, Path::new(path), &payload) {
        eprintln!("lab hook: {e}; nothing written");
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRE: &str =
        r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"X","tool_input":{},"tool_use_id":"toolu_1"}"#;

    #[test]
    fn spool_write_then_clear_only_for_the_same_id() {
        let d = tempfile::tempdir().unwrap();
        let spool = d.path().join("r.spool.json");
        assert_eq!(apply(&Action::SpoolWrite, &spool, PRE.as_bytes()), Ok(Outcome::Written));
        assert_eq!(std::fs::read_to_string(&spool).unwrap(), PRE);

        let clear = Action::SpoolClear { id_field: "tool_use_id" };
        let other = br#"{"tool_use_id":"toolu_2","tool_response":{}}"#;
        assert_eq!(apply(&clear, &spool, other), Ok(Outcome::Kept));
        assert!(spool.exists());
        let same = br#"{"tool_use_id":"toolu_1","tool_response":{}}"#;
        assert_eq!(apply(&clear, &spool, same), Ok(Outcome::Cleared));
        assert!(!spool.exists());
        assert_eq!(apply(&clear, &spool, same), Ok(Outcome::Kept));
    }

    #[test]
    fn malformed_stdin_writes_nothing() {
        let d = tempfile::tempdir().unwrap();
        let spool = d.path().join("r.spool.json");
        for bad in [&b"not json"[..], b"[1,2]", b"", b"{\"a\":"] {
            assert!(apply(&Action::SpoolWrite, &spool, bad).is_err());
            assert!(!spool.exists());
        }
        apply(&Action::SpoolWrite, &spool, PRE.as_bytes()).unwrap();
        let clear = Action::SpoolClear { id_field: "tool_use_id" };
        assert!(apply(&clear, &spool, b"{}").unwrap_err().contains("tool_use_id"));
        assert!(spool.exists());
    }

    #[test]
    fn an_oversized_payload_writes_nothing() {
        let d = tempfile::tempdir().unwrap();
        let spool = d.path().join("r.spool.json");
        let pad = "x".repeat(MAX_PAYLOAD);
        let big = format!(r#"{{"tool_use_id":"t","pad":"{pad}"}}"#);
        let err = apply(&Action::SpoolWrite, &spool, big.as_bytes()).unwrap_err();
        assert!(err.contains("limit"), "{err}");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
        let fits = format!(r#"{{"pad":"{}"}}"#, &pad[..MAX_PAYLOAD - 20]);
        assert_eq!(apply(&Action::SpoolWrite, &spool, fits.as_bytes()), Ok(Outcome::Written));
    }

    #[test]
    fn a_missing_runtime_dir_is_an_error_not_a_panic() {
        let err = apply(&Action::MarkerWrite, Path::new("/nonexistent-lab-dir/x.json"), b"{}").unwrap_err();
        assert!(err.contains("/nonexistent-lab-dir"));
    }
}
