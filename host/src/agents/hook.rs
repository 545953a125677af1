//! `lab hook …`: what the agent's hooks execute. Reads the hook payload on stdin,
//! exits 0 with nothing on stdout whatever happens (the agent must never be blocked),
//! and keeps its start-up tiny: no component, no database, no async runtime.
//!
//! One verb per lab channel (WIT `channel`; the host builds these commands for the
//! bindings a provider asks for, [`crate::runs::launch::hook_settings`]):
//!
//! - `lab hook dialog-spool <spool>`: atomically write stdin to the spool.
//! - `lab hook dialog-clear <spool> --match <pointer>…`: delete the spool when every
//!   JSON pointer is present with equal values in stdin and in the spool.
//! - `lab hook blocked-marker <marker>`: atomically write stdin to the blocked marker.
//! - `lab hook session-info <file>`: atomically write stdin to the session file.
//!
//! The 0.1.0 forms keep working (components built against WIT 0.1.0 and settings
//! files of runs started before an upgrade use them): `spool-write`, `marker-write`,
//! and `spool-clear <spool> --id-field <field>` (= `--match /<field>`); `--id-field`
//! may also follow `dialog-clear`, which is how a 0.1.0 component's suffix lands.
//!
//! Stdin must be one JSON object; anything else writes nothing and leaves one line on
//! stderr.
//!
//! Experimental (docs/adr/0003): `lab hook <write verb> --post <url>` sends stdin to lab
//! over HTTP(S) instead of writing a file, for an agent on another host ([`post`]). It
//! exits 0 too when the payload was not delivered (said on stderr).

pub mod post;

use crate::store::fsutil;
use serde_json::Value;
use std::io::Read;
use std::path::Path;

/// Largest payload accepted. The hooks fire for prompts only: far below this. At most
/// this much (plus one byte) is read from stdin, so a runaway payload can neither fill
/// memory nor, through the temp file, the disk.
pub const MAX_PAYLOAD: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write stdin to the file (spool, marker or session file).
    Write,
    /// Delete the spool when these JSON pointers match.
    Clear { pointers: Vec<String> },
}

#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Written,
    Cleared,
    /// dialog-clear left the spool alone (absent, or another prompt's).
    Kept,
}

fn parse_object(payload: &[u8]) -> Result<Value, String> {
    let v: Value = serde_json::from_slice(payload).map_err(|e| format!("stdin is not JSON ({e})"))?;
    if !v.is_object() {
        return Err("stdin is not a JSON object".into());
    }
    Ok(v)
}

/// Whether `spool` is the prompt `payload` clears: every pointer present in both, with
/// equal values (and at least one pointer).
pub fn clears(pointers: &[String], payload: &Value, spool: &Value) -> bool {
    !pointers.is_empty()
        && pointers.iter().all(|p| match (payload.pointer(p), spool.pointer(p)) {
            (Some(a), Some(b)) => !a.is_null() && a == b,
            _ => false,
        })
}

/// A payload `lab hook` accepts: at most [`MAX_PAYLOAD`] bytes of one JSON object.
pub fn check_payload(payload: &[u8]) -> Result<Value, String> {
    if payload.len() > MAX_PAYLOAD {
        return Err(format!("stdin is over the {MAX_PAYLOAD} byte limit"));
    }
    parse_object(payload)
}

/// Stdin, at most [`MAX_PAYLOAD`] bytes plus one (so an oversized one is detected).
fn read_stdin() -> Result<Vec<u8>, String> {
    let mut payload = Vec::new();
    std::io::stdin()
        .take(MAX_PAYLOAD as u64 + 1)
        .read_to_end(&mut payload)
        .map_err(|e| format!("reading stdin: {e}"))?;
    Ok(payload)
}

/// The decision and the file operation, without process concerns.
pub fn apply(action: &Action, path: &Path, payload: &[u8]) -> Result<Outcome, String> {
    let v = check_payload(payload)?;
    match action {
        Action::Write => {
            fsutil::write_atomic(path, payload, 0o600).map_err(|e| format!("writing {}: {e}", path.display()))?;
            Ok(Outcome::Written)
        }
        Action::Clear { pointers } => {
            if pointers.is_empty() {
                return Err("dialog-clear needs at least one --match <pointer>".into());
            }
            if let Some(p) = pointers.iter().find(|p| v.pointer(p).is_none_or(Value::is_null)) {
                return Err(format!("stdin has nothing at `{p}`"));
            }
            let Some(spool) =
                fsutil::read_untrusted(path, MAX_PAYLOAD).map_err(|e| format!("reading {}: {e}", path.display()))?
            else {
                return Ok(Outcome::Kept);
            };
            let spooled = serde_json::from_slice::<Value>(&spool).ok();
            // A spool that is not even JSON cannot be anyone's live prompt: clear it too.
            if spooled.as_ref().is_none_or(|s| clears(pointers, &v, s)) {
                fsutil::remove_if_exists(path).map_err(|e| format!("removing {}: {e}", path.display()))?;
                Ok(Outcome::Cleared)
            } else {
                Ok(Outcome::Kept)
            }
        }
    }
}

/// A JSON pointer as `--match` takes it: "" or starting with "/", at most 256 bytes.
fn pointer(p: &str) -> Option<String> {
    (p.len() <= 256 && (p.is_empty() || p.starts_with('/'))).then(|| p.to_string())
}

/// The action and file of a `lab hook` command line.
pub fn parse_args(args: &[String]) -> Option<(Action, &str)> {
    let (verb, path, rest) = match args {
        [verb, path, rest @ ..] => (verb.as_str(), path.as_str(), rest),
        _ => return None,
    };
    match verb {
        "dialog-spool" | "spool-write" | "blocked-marker" | "marker-write" | "session-info" if rest.is_empty() => {
            Some((Action::Write, path))
        }
        "dialog-clear" | "spool-clear" => {
            let mut pointers = Vec::new();
            let mut it = rest.iter();
            while let Some(flag) = it.next() {
                let value = it.next()?;
                match flag.as_str() {
                    "--match" => pointers.push(pointer(value)?),
                    // A field name: the 0.1.0 form.
                    "--id-field" if !value.contains('/') && !value.is_empty() => pointers.push(format!("/{value}")),
                    _ => return None,
                }
            }
            Some((Action::Clear { pointers }, path))
        }
        _ => None,
    }
}

/// Entry point for `lab hook`; returns exit code 0 (the `--post` form: see [`post`]).
/// Entry point: 0 whatever happens. Agents fail closed on a hook error (a non-zero
/// exit, or a hook killed by a signal, can block the tool call the hook was for), so
/// nothing here may end any other way: a write over the file-size limit returns an
/// error instead of raising `SIGXFSZ`, a closed or broken stderr is not an error
/// ([`say`]), and a panic is caught and said.
pub fn main(args: &[String]) -> i32 {
    // SAFETY: setting a signal's disposition to SIG_IGN has no preconditions.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    std::panic::set_hook(Box::new(|info| say(&format!("internal error ({info}); nothing written"))));
    std::panic::catch_unwind(|| run(args)).unwrap_or(0)
}

/// One line on stderr, if stderr can take it (never a panic, never a non-zero exit).
pub fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "lab hook: {line}");
}

fn run(args: &[String]) -> i32 {
    if args.iter().any(|a| a == "--post") {
        return post::main(args);
    }
    let usage = "usage: lab hook dialog-spool <spool> | dialog-clear <spool> --match <json-pointer>… \
                 | blocked-marker <marker> | session-info <file>";
    let Some((action, path)) = parse_args(args) else {
        say(usage);
        return 0;
    };
    let payload = match read_stdin() {
        Ok(p) => p,
        Err(e) => {
            say(&e);
            return 0;
        }
    };
    if let Err(e) = apply(&action, Path::new(path), &payload) {
        say(&format!("{e}; nothing written"));
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRE: &str = r#"{"session_id":"s","hook_event_name":"BeforeTool","tool_name":"X","tool_input":{"a":[1,2]},"tool_use_id":"toolu_1"}"#;

    fn args(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    fn clear(ptrs: &[&str]) -> Action {
        Action::Clear { pointers: ptrs.iter().map(|p| p.to_string()).collect() }
    }

    #[test]
    fn spool_write_then_clear_only_for_the_same_id() {
        let d = tempfile::tempdir().unwrap();
        let spool = d.path().join("r.spool.json");
        assert_eq!(apply(&Action::Write, &spool, PRE.as_bytes()), Ok(Outcome::Written));
        assert_eq!(std::fs::read_to_string(&spool).unwrap(), PRE);

        let by_id = clear(&["/tool_use_id"]);
        let other = br#"{"tool_use_id":"toolu_2","tool_response":{}}"#;
        assert_eq!(apply(&by_id, &spool, other), Ok(Outcome::Kept));
        assert!(spool.exists());
        let same = br#"{"tool_use_id":"toolu_1","tool_response":{}}"#;
        assert_eq!(apply(&by_id, &spool, same), Ok(Outcome::Cleared));
        assert!(!spool.exists());
        assert_eq!(apply(&by_id, &spool, same), Ok(Outcome::Kept));
    }

    #[test]
    fn a_clear_by_several_pointers_needs_all_equal_including_nested_values() {
        let d = tempfile::tempdir().unwrap();
        let spool = d.path().join("r.spool.json");
        // A permission request: no tool_use_id; cleared by tool and input.
        let req = br#"{"hook_event_name":"ApprovalRequest","tool_name":"X","tool_input":{"a":[1,2]}}"#;
        apply(&Action::Write, &spool, req).unwrap();
        let by_call = clear(&["/tool_name", "/tool_input"]);
        let other_input = br#"{"tool_name":"X","tool_input":{"a":[1,3]},"tool_use_id":"t"}"#;
        assert_eq!(apply(&by_call, &spool, other_input), Ok(Outcome::Kept));
        // The id pointer is absent from the spool: never a match.
        assert_eq!(apply(&clear(&["/tool_use_id"]), &spool, other_input), Ok(Outcome::Kept));
        let same = br#"{"tool_name":"X","tool_input":{"a":[1,2]},"tool_use_id":"t","tool_response":"ok"}"#;
        assert_eq!(apply(&by_call, &spool, same), Ok(Outcome::Cleared));
        assert!(!spool.exists());
    }

    #[test]
    fn command_lines_new_and_0_1_0_forms() {
        assert_eq!(parse_args(&args("dialog-spool /r/a.spool.json")), Some((Action::Write, "/r/a.spool.json")));
        assert_eq!(parse_args(&args("spool-write /s")), Some((Action::Write, "/s")));
        assert_eq!(parse_args(&args("blocked-marker /m")), Some((Action::Write, "/m")));
        assert_eq!(parse_args(&args("session-info /f")), Some((Action::Write, "/f")));
        assert_eq!(
            parse_args(&args("dialog-clear /s --match /tool_name --match /tool_input")),
            Some((clear(&["/tool_name", "/tool_input"]), "/s"))
        );
        // The 0.1.0 suffix, on the old verb and on the new one.
        assert_eq!(parse_args(&args("spool-clear /s --id-field tool_use_id")), Some((clear(&["/tool_use_id"]), "/s")));
        assert_eq!(parse_args(&args("dialog-clear /s --id-field tool_use_id")), Some((clear(&["/tool_use_id"]), "/s")));
        for bad in
            ["dialog-spool", "dialog-spool /s extra", "dialog-clear /s --match", "dialog-clear /s --match x", "nope /s"]
        {
            assert_eq!(parse_args(&args(bad)), None, "{bad}");
        }
    }

    #[test]
    fn malformed_stdin_writes_nothing() {
        let d = tempfile::tempdir().unwrap();
        let spool = d.path().join("r.spool.json");
        for bad in [&b"not json"[..], b"[1,2]", b"", b"{\"a\":"] {
            assert!(apply(&Action::Write, &spool, bad).is_err());
            assert!(!spool.exists());
        }
        apply(&Action::Write, &spool, PRE.as_bytes()).unwrap();
        assert!(apply(&clear(&["/tool_use_id"]), &spool, b"{}").unwrap_err().contains("tool_use_id"));
        assert!(apply(&clear(&[]), &spool, PRE.as_bytes()).is_err());
        assert!(spool.exists());
    }

    #[test]
    fn an_oversized_payload_writes_nothing() {
        let d = tempfile::tempdir().unwrap();
        let spool = d.path().join("r.spool.json");
        let pad = "x".repeat(MAX_PAYLOAD);
        let big = format!(r#"{{"tool_use_id":"t","pad":"{pad}"}}"#);
        let err = apply(&Action::Write, &spool, big.as_bytes()).unwrap_err();
        assert!(err.contains("limit"), "{err}");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
        let fits = format!(r#"{{"pad":"{}"}}"#, &pad[..MAX_PAYLOAD - 20]);
        assert_eq!(apply(&Action::Write, &spool, fits.as_bytes()), Ok(Outcome::Written));
    }

    #[test]
    fn a_missing_runtime_dir_is_an_error_not_a_panic() {
        let err = apply(&Action::Write, Path::new("/nonexistent-lab-dir/x.json"), b"{}").unwrap_err();
        assert!(err.contains("/nonexistent-lab-dir"));
    }
}
