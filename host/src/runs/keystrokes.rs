//! Playing a provider's key ops into the agent's pane, paced: the seed ADR found that
//! back-to-back ops raced the committing Enter ahead of the navigation, so every op
//! is followed by a fixed pause (250 ms, compat §7).

use crate::tmux::{Tmux, TmuxError};
use lab_provider_sdk::KeyOp;
use std::time::Duration;

/// The pinned pause between two key ops.
pub const KEY_DELAY: Duration = Duration::from_millis(250);

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
    fn describes_and_validates() {
        let ops = vec![KeyOp::key("Up"), KeyOp::key("Enter"), KeyOp::Literal("C-c ;".into())];
        assert_eq!(ops.iter().map(describe).collect::<Vec<_>>(), vec!["Up", "Enter", "text:C-c ;"]);
        assert!(validate(&ops).is_ok());
        assert!(validate(&[]).is_err());
        assert!(validate(&[KeyOp::key("Up; kill-server")]).is_err());
        assert!(validate(&[KeyOp::key("")]).is_err());
    }
}
