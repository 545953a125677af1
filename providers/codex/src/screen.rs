//! Screens codex shows before any hook: the folder-trust screen (0.169.0, captured in
//! testdata/pane_trust_folder.txt) and "Hooks need review" (0.171.0,
//! testdata/pane_hooks_review.txt).
//!
//! Codex asks before it works in a git repository that `$CODEX_HOME/config.toml` does
//! not list as trusted (`[projects."<dir>"] trust_level`); a plain folder is not asked
//! about. The screen, drawn before the first turn (no SessionStart, no rollout yet):
//!
//! ```text
//!   Folder access
//!   /abs/folder
//!   Trust this folder? Codex can read, edit, and run files here, … Your trust decision will be saved.
//! › 1. Trust and continue
//!   2. Back to Agent Command Center
//!   enter continue · esc back
//! ```
//!
//! Enter trusts the folder (codex saves `trust_level = "trusted"` for it in the
//! config) and the first prompt goes on; Esc opens codex's Agent Command Center, where
//! the run waits for the operator in the terminal. Both verified by hand on 0.169.0;
//! Enter also by tests/e2e_codex.rs.
//!
//! "Hooks need review" shows when a hook codex is to run has no trust record matching
//! it: lab's own hooks carry theirs on the command line (`crate::launch`), so what it
//! counts are the others, a repository's `.codex/config.toml` (once the folder is
//! trusted) or the user's own unreviewed ones. Drawn before the first turn:
//!
//! ```text
//!   Hooks need review
//!   1 hook is new or changed.
//!   Hooks can run outside the sandbox after you trust them.
//! › 1. Review hooks
//!   2. Trust all and continue
//!   3. Continue without trusting (hooks won't run)
//!   enter confirm · esc skip
//! ```
//!
//! Keys (verified by hand on 0.171.0): `1` opens codex's hook list (event, source,
//! command of each; the run then waits in the terminal), `2` only moves the cursor and
//! needs `Enter` (codex saves the hooks' trust in the user's config, and they run), `3`
//! goes on without them.

use lab_provider_sdk::{Dialog, DialogBody, DialogOption, GenericBody};

/// The dialog's tool name.
pub const TRUST_SCREEN: &str = "trust_folder";
pub const TRUST_HEAD: &str = "Folder access";
pub const TRUST_QUESTION: &str = "Trust this folder?";
pub const TRUST_YES: &str = "Trust and continue";
pub const TRUST_BACK: &str = "Back to Agent Command Center";

/// The hooks-review dialog's tool name.
pub const HOOKS_SCREEN: &str = "hooks_review";
pub const HOOKS_HEAD: &str = "Hooks need review";
pub const HOOKS_REVIEW: &str = "Review hooks";
pub const HOOKS_TRUST: &str = "Trust all and continue";
pub const HOOKS_SKIP: &str = "Continue without trusting (hooks won't run)";

pub fn read_screen(pane: &str) -> Option<Dialog> {
    read_trust(pane).or_else(|| read_hooks_review(pane))
}

/// "Hooks need review", whole (the three rows drawn in order after the heading).
fn read_hooks_review(pane: &str) -> Option<Dialog> {
    let lines: Vec<&str> = pane.lines().map(str::trim).collect();
    let head = lines.iter().position(|l| *l == HOOKS_HEAD)?;
    let row = |n: usize, label: &str, from: usize| {
        lines.iter().skip(from).position(|l| l.ends_with(&format!("{n}. {label}"))).map(|i| i + from)
    };
    let review = row(1, HOOKS_REVIEW, head)?;
    let trust = row(2, HOOKS_TRUST, review)?;
    row(3, HOOKS_SKIP, trust)?;
    let text = lines[head + 1..review].iter().filter(|l| !l.is_empty()).copied().collect::<Vec<_>>().join(" ");
    let body = GenericBody {
        title: HOOKS_HEAD.into(),
        text: format!(
            "{text} They come from the repository's .codex/config.toml or your own Codex config, not from \
             lab (lab's own hooks are trusted for this run only)."
        ),
        options: vec![
            DialogOption::new(
                HOOKS_REVIEW,
                "Codex lists each hook with its event, source and command; go on in the terminal",
            ),
            DialogOption::new(HOOKS_TRUST, "Codex saves them as trusted in your config; they run, outside the sandbox"),
            DialogOption::new(HOOKS_SKIP, "The run goes on; none of these hooks runs"),
        ],
    };
    Some(Dialog::new(format!("hooks-{:016x}", fnv(text.as_bytes())), HOOKS_SCREEN, DialogBody::Generic(body)))
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3))
}

fn read_trust(pane: &str) -> Option<Dialog> {
    let lines: Vec<&str> = pane.lines().map(str::trim).collect();
    let head = lines.iter().position(|l| *l == TRUST_HEAD)?;
    let question = lines.iter().skip(head).position(|l| l.starts_with(TRUST_QUESTION))? + head;
    let yes = lines.iter().skip(question).position(|l| l.ends_with(&format!("1. {TRUST_YES}")))? + question;
    if !lines.get(yes + 1).is_some_and(|l| l.ends_with(&format!("2. {TRUST_BACK}"))) {
        return None;
    }
    let folder = lines[head + 1..question].iter().find(|l| l.starts_with('/')).copied().unwrap_or("");
    let text = lines[question..yes].iter().filter(|l| !l.is_empty()).copied().collect::<Vec<_>>().join(" ");
    let body = GenericBody {
        title: if folder.is_empty() { TRUST_QUESTION.into() } else { format!("Trust {folder}?") },
        text,
        options: vec![
            DialogOption::new(TRUST_YES, "Codex saves the folder as trusted in its config; the run goes on"),
            DialogOption::new(TRUST_BACK, "Codex opens its Agent Command Center; go on in the terminal"),
        ],
    };
    Some(Dialog::new(format!("trust-{:016x}", fnv(folder.as_bytes())), TRUST_SCREEN, DialogBody::Generic(body)))
}

/// The trust screen is on the pane.
pub fn trust_drawn(pane: &str) -> bool {
    read_trust(pane).is_some()
}

/// The hooks-review screen is on the pane.
pub fn hooks_review_drawn(pane: &str) -> bool {
    read_hooks_review(pane).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PANE: &str = include_str!("../testdata/pane_trust_folder.txt");

    #[test]
    fn the_captured_trust_screen_is_a_generic_dialog() {
        let d = read_screen(PANE).unwrap();
        assert_eq!(d.tool_name, TRUST_SCREEN);
        assert!(d.answerable);
        let DialogBody::Generic(g) = &d.body else { panic!() };
        assert_eq!(g.title, "Trust /tmp/cx/work3?");
        assert!(g.text.starts_with("Trust this folder? Codex can read"), "{}", g.text);
        assert!(g.text.ends_with("Your trust decision will be saved."), "{}", g.text);
        let labels: Vec<&str> = g.options.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels, [TRUST_YES, TRUST_BACK]);
        assert_eq!(read_screen(PANE).unwrap().id, d.id, "stable");
        assert!(trust_drawn(PANE));
    }

    #[test]
    fn the_captured_hooks_review_screen_is_a_generic_dialog() {
        let pane = include_str!("../testdata/pane_hooks_review.txt");
        let d = read_screen(pane).unwrap();
        assert_eq!(d.tool_name, HOOKS_SCREEN);
        assert!(d.answerable);
        let DialogBody::Generic(g) = &d.body else { panic!() };
        assert_eq!(g.title, "Hooks need review");
        assert!(
            g.text.starts_with("1 hook is new or changed. Hooks can run outside the sandbox after you trust them. "),
            "{}",
            g.text
        );
        let labels: Vec<&str> = g.options.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels, [HOOKS_REVIEW, HOOKS_TRUST, HOOKS_SKIP]);
        assert!(hooks_review_drawn(pane) && !trust_drawn(pane));
        assert!(!hooks_review_drawn(include_str!("../testdata/pane_trust_folder.txt")));
        let cut = pane.replace("3. Continue without trusting", "");
        assert_eq!(read_screen(&cut), None, "half drawn");
    }

    #[test]
    fn other_screens_are_not_dialogs() {
        for pane in [include_str!("../testdata/pane_approval.txt"), include_str!("../testdata/pane_after.txt"), ""] {
            assert_eq!(read_screen(pane), None);
        }
        let cut = PANE.replace("2. Back to Agent Command Center", "");
        assert_eq!(read_screen(&cut), None, "half drawn");
    }
}
