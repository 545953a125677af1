//! The spool: the one file per run where the agent's dialog hook puts the prompt it is
//! showing (`lab hook dialog-spool`, atomically replaced by the next prompt, deleted by
//! `lab hook dialog-clear` when the prompt resolves). The tailer reads it
//! ([`super::tailer::Tail`]), the view decides when it is over
//! ([`super::view::spool_is_live`], rule 2) and the tailer then deletes it (GC); the
//! answer path waits on its write time ([`super::keystrokes::DrawnWait`]). This module
//! holds the pure rules about a spooled prompt's identity.

use crate::model::Dialog;

/// The answer-guard token of a spooled prompt. A prompt whose id is its transcript
/// call's own keeps it. Any other (a permission request carries no call id, so the
/// provider derives its id from the content) is told apart from an identical prompt
/// later in the run by the spool's write time: two `rm -rf build` approvals are two
/// prompts, and answering the first must not count for the second. The token depends on
/// the spool alone, so it stays the same when a later parse of the same spool finds the
/// call (`call_id` filled in): the operator's answer to the card they see still fits.
pub fn identify(mut dialog: Dialog, written_ns: i128) -> Dialog {
    if dialog.call_id.as_deref() != Some(dialog.id.as_str()) {
        dialog.id = format!("{}~{:x}", dialog.id, written_ns.max(0));
    }
    dialog
}

/// The ids a cleared spool's prompt is known by (its own and its call's), so the
/// transcript fallback does not show it again.
pub fn ids(dialog: &Dialog) -> impl Iterator<Item = String> {
    std::iter::once(dialog.id.clone()).chain(dialog.call_id.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::DialogBody;

    fn d(id: &str, call: Option<&str>) -> Dialog {
        Dialog {
            id: id.into(),
            call_id: call.map(str::to_string),
            tool_name: "T".into(),
            body: DialogBody::Generic { title: "t".into(), text: "x".into(), options: Vec::new() },
            answerable: true,
            deep_link: None,
        }
    }

    #[test]
    fn prompts_without_a_call_are_told_apart_by_their_spool_s_write_time() {
        assert_eq!(identify(d("toolu_1", Some("toolu_1")), 5).id, "toolu_1");
        let a = identify(d("perm-3f2a", None), 1_700_000_000_000_000_001);
        let b = identify(d("perm-3f2a", None), 1_700_000_000_000_000_002);
        assert!(a.id.starts_with("perm-3f2a~") && a.id != b.id);
        assert_eq!(identify(d("perm-3f2a", None), 1_700_000_000_000_000_001).id, a.id, "stable for one spool");
        // The call found later (a re-parse of the same spool): the same token.
        assert_eq!(identify(d("perm-3f2a", Some("toolu_9")), 1_700_000_000_000_000_001).id, a.id);
        assert_eq!(ids(&d("p", Some("c"))).collect::<Vec<_>>(), ["p", "c"]);
        assert_eq!(ids(&d("p", None)).collect::<Vec<_>>(), ["p"]);
    }
}
