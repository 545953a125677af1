//! The answer guard: may lab play keystrokes for the operator's answer to `tool_id`?
//! Evaluated under the run's lock, against a fresh read of the spool and transcript.
//! Pure, so every branch is unit-tested.

use super::view::SpoolFact;
use std::collections::HashSet;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardError {
    /// Nothing is pending, or that tool call is already resolved/answered.
    NoDialog,
    /// A different dialog is pending.
    DialogChanged { pending: String },
}

/// Play keys only if the spool exists, its tool_use_id equals `tool_id`, that id is
/// not yet resolved in the transcript, and lab has not already answered it.
pub fn check(
    spool: Option<&SpoolFact>,
    resolved: &HashSet<String>,
    answered: &HashSet<String>,
    tool_id: &str,
) -> Result<(), GuardError> {
    let live = spool.filter(|s| !resolved.contains(&s.tool_use_id) && !answered.contains(&s.tool_use_id));
    match live {
        None => Err(GuardError::NoDialog),
        Some(s) if s.tool_use_id != tool_id => Err(GuardError::DialogChanged { pending: s.tool_use_id.clone() }),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spool(id: &str) -> SpoolFact {
        SpoolFact { tool_use_id: id.into(), dialog: None }
    }

    fn set(ids: &[&str]) -> HashSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn plays_only_for_the_live_matching_spool() {
        let none = set(&[]);
        assert_eq!(check(Some(&spool("a")), &none, &none, "a"), Ok(()));
    }

    #[test]
    fn no_spool_is_no_dialog() {
        let none = set(&[]);
        assert_eq!(check(None, &none, &none, "a"), Err(GuardError::NoDialog));
    }

    #[test]
    fn another_pending_id_is_dialog_changed() {
        let none = set(&[]);
        assert_eq!(check(Some(&spool("b")), &none, &none, "a"), Err(GuardError::DialogChanged { pending: "b".into() }));
    }

    #[test]
    fn resolved_in_the_transcript_is_no_dialog_even_if_the_spool_lingers() {
        let none = set(&[]);
        assert_eq!(check(Some(&spool("a")), &set(&["a"]), &none, "a"), Err(GuardError::NoDialog));
        assert_eq!(check(Some(&spool("a")), &set(&["a"]), &none, "b"), Err(GuardError::NoDialog));
    }

    #[test]
    fn an_answer_already_played_is_not_played_twice() {
        let none = set(&[]);
        assert_eq!(check(Some(&spool("a")), &none, &set(&["a"]), "a"), Err(GuardError::NoDialog));
    }
}
