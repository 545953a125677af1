//! Playing a provider's key ops into the agent's pane, paced: the seed ADR found that
//! back-to-back ops raced the committing Enter ahead of the navigation, so every op
//! is followed by a fixed pause (250 ms, compat §7).

use crate::tmux::{Tmux, TmuxError};
use lab_provider_sdk::KeyOp;
use std::time::Duration;

/// The pinned pause between two key ops.
pub const KEY_DELAY: Duration = Duration::from_millis(250);

/// How old a spooled dialog must be before lab plays keys into it. The PreToolUse
/// hook fires *before* the agent draws its picker (Claude Code 2.1.198: drawn
/// ~60–300 ms after the hook on an idle 2-core machine, up to ~0.8 s under load);
/// lab shows the dialog within milliseconds of the hook, so an immediate answer
/// would type into a picker that does not exist yet. Observed live: keys played
/// 10 ms after the hook ended on "Chat about this" ("User declined to answer
/// questions") instead of the chosen option (compat §7). A heuristic with margin:
/// no signal other than the screen says the picker is drawn.
pub const PICKER_SETTLE: Duration = Duration::from_millis(1500);

/// How much longer to wait before playing keys into the dialog spooled at `spool`:
/// [`PICKER_SETTLE`] minus the spool file's age (zero when it is older, missing, or
/// its time cannot be read — the answer guard decides about a missing spool).
pub fn settle_wait(spool: &std::path::Path, now: std::time::SystemTime) -> Duration {
    let Some(written) = std::fs::metadata(spool).and_then(|m| m.modified()).ok() else { return Duration::ZERO };
    let age = now.duration_since(written).unwrap_or(Duration::ZERO);
    PICKER_SETTLE.saturating_sub(age)
}

/// How an op is reported back in `{"played": [...]}`: key names as they are, typed
/// text as `text:<the text>`.
pub fn describe(op: &KeyOp) -> String {
    match op {
        KeyOp::Key(k) => k.clone(),
        KeyOp::Literal(t) => format!("text:{t}"),
    }
}

/// Reject ops that are not plain tmux key names before anything is played.
pub fn validate(ops: &[KeyOp]) -> Result<(), String> {
    if ops.is_empty() {
        return Err("the provider returned no keys to play".into());
    }
    for op in ops {
        if let KeyOp::Key(k) = op {
            let ok = !k.is_empty() && k.len() <= 16 && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
            if !ok {
                return Err(format!("the provider asked for an invalid key name {k:?}"));
            }
        }
    }
    Ok(())
}

/// Play `ops` into `target`, one op at a time with `delay` after each (blocking).
pub fn play(tmux: &Tmux, target: &str, ops: &[KeyOp], delay: Duration) -> Result<(), TmuxError> {
    for (i, op) in ops.iter().enumerate() {
        match op {
            KeyOp::Key(k) => tmux.send_key(target, k)?,
            KeyOp::Literal(t) => tmux.send_literal(target, t)?,
        }
        if i + 1 < ops.len() {
            std::thread::sleep(delay);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_spool_waits_for_the_picker_to_settle() {
        let d = tempfile::tempdir().unwrap();
        let spool = d.path().join("r.spool.json");
        let now = std::time::SystemTime::now();
        assert_eq!(settle_wait(&spool, now), Duration::ZERO, "no spool: nothing to wait for");
        std::fs::write(&spool, b"{}").unwrap();
        let written = std::fs::metadata(&spool).unwrap().modified().unwrap();
        assert_eq!(settle_wait(&spool, written), PICKER_SETTLE);
        assert_eq!(
            settle_wait(&spool, written + Duration::from_millis(400)),
            PICKER_SETTLE - Duration::from_millis(400)
        );
        assert_eq!(settle_wait(&spool, written + PICKER_SETTLE * 2), Duration::ZERO);
        // A clock that went backwards counts as a brand-new spool, never as a panic.
        assert_eq!(settle_wait(&spool, written - Duration::from_secs(5)), PICKER_SETTLE);
    }

    #[test]
    fn describes_and_validates() {
        let ops = vec![KeyOp::key("Up"), KeyOp::key("Enter"), KeyOp::Literal("C-c ;".into())];
        assert_eq!(ops.iter().map(describe).collect::<Vec<_>>(), vec!["Up", "Enter", "text:C-c ;"]);
        assert!(validate(&ops).is_ok());
        assert!(validate(&[]).is_err());
        assert!(validate(&[KeyOp::key("Up; kill-server")]).is_err());
        assert!(validate(&[KeyOp::key("")]).is_err());
    }
}
