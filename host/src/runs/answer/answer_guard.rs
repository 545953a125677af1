//! The answer guard: may lab play keystrokes for the operator's answer to `tool_id`?
//! Evaluated under the run's lock, against a fresh read of the spool, screen and
//! transcript. Pure, so every branch is unit-tested.

use crate::agents::model::Dialog;
use std::collections::HashSet;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardError {
    /// Nothing is pending, or that prompt is already resolved/answered.
    NoDialog,
    /// A different dialog is pending.
    DialogChanged { pending: String },
}

/// Play keys only if a live prompt (spooled, or read off the screen) exists, its id
/// equals `tool_id`, its transcript call (if known) has no result yet, and lab has not
/// already answered it.
pub fn check(
    live: Option<&Dialog>,
    resolved: &HashSet<String>,
    answered: &HashSet<String>,
    tool_id: &str,
) -> Result<(), GuardError> {
    check_except(live, resolved, answered, tool_id, None)
}

/// The guard again for an answer being played: [`check`], where this answer's own
/// mark on `tool_id` does not count as "already answered" (another's would: there is
/// only one mark per prompt, set when the guard first accepted).
pub fn check_playing(
    live: Option<&Dialog>,
    resolved: &HashSet<String>,
    answered: &HashSet<String>,
    tool_id: &str,
) -> Result<(), GuardError> {
    check_except(live, resolved, answered, tool_id, Some(tool_id))
}

fn check_except(
    live: Option<&Dialog>,
    resolved: &HashSet<String>,
    answered: &HashSet<String>,
    tool_id: &str,
    own: Option<&str>,
) -> Result<(), GuardError> {
    let marked = |id: &String| answered.contains(id) && own != Some(id.as_str());
    let live = live.filter(|d| !d.call_id.as_ref().is_some_and(|c| resolved.contains(c)) && !marked(&d.id));
    match live {
        None => Err(GuardError::NoDialog),
        Some(d) if d.id != tool_id => Err(GuardError::DialogChanged { pending: d.id.clone() }),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::model::DialogBody;

    fn live(id: &str, call: Option<&str>) -> Dialog {
        Dialog {
            id: id.into(),
            call_id: call.map(str::to_string),
            tool_name: "T".into(),
            body: DialogBody::Question(Vec::new()),
            answerable: true,
            deep_link: None,
        }
    }

    fn spool(id: &str) -> Dialog {
        live(id, Some(id))
    }

    fn set(ids: &[&str]) -> HashSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn plays_only_for_the_live_matching_prompt() {
        let none = set(&[]);
        assert_eq!(check(Some(&spool("a")), &none, &none, "a"), Ok(()));
        // A prompt with no known transcript call (a permission request, a screen).
        assert_eq!(check(Some(&live("p~1", None)), &set(&["p~1"]), &none, "p~1"), Ok(()));
    }

    #[test]
    fn no_prompt_is_no_dialog() {
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
        assert_eq!(check(Some(&live("p", Some("c1"))), &set(&["c1"]), &none, "p"), Err(GuardError::NoDialog));
    }

    #[test]
    fn an_answer_already_played_is_not_played_twice() {
        let none = set(&[]);
        assert_eq!(check(Some(&spool("a")), &none, &set(&["a"]), "a"), Err(GuardError::NoDialog));
    }

    #[test]
    fn while_playing_only_the_answer_s_own_mark_is_set_aside() {
        let none = set(&[]);
        let a_answered = set(&["a"]);
        assert_eq!(check(Some(&spool("a")), &none, &a_answered, "a"), Err(GuardError::NoDialog), "a second answer");
        assert_eq!(check_playing(Some(&spool("a")), &none, &a_answered, "a"), Ok(()), "the one being played");
        assert_eq!(
            check_playing(Some(&spool("a")), &set(&["a"]), &a_answered, "a"),
            Err(GuardError::NoDialog),
            "resolved"
        );
        assert_eq!(
            check_playing(Some(&spool("b")), &none, &a_answered, "a"),
            Err(GuardError::DialogChanged { pending: "b".into() })
        );
        assert_eq!(check_playing(None, &none, &a_answered, "a"), Err(GuardError::NoDialog));
        let b_answered = set(&["b"]);
        assert_eq!(
            check_playing(Some(&spool("b")), &none, &b_answered, "a"),
            Err(GuardError::NoDialog),
            "another's mark counts"
        );
    }
}
