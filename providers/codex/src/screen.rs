//! Screens codex shows before any hook: the folder-trust screen (0.169.0, captured in
//! testdata/pane_trust_folder.txt).
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
//! The "Hooks need review" screen (study notes §6) cannot show: lab starts codex with
//! `--dangerously-bypass-hook-trust`.

use lab_provider_sdk::{Dialog, DialogBody, DialogOption, GenericBody};

/// The dialog's tool name.
pub const TRUST_SCREEN: &str = "trust_folder";
pub const TRUST_HEAD: &str = "Folder access";
pub const TRUST_QUESTION: &str = "Trust this folder?";
pub const TRUST_YES: &str = "Trust and continue";
pub const TRUST_BACK: &str = "Back to Agent Command Center";

pub fn read_screen(pane: &str) -> Option<Dialog> {
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
    let id = format!(
        "trust-{:016x}",
        folder.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
    );
    Some(Dialog::new(id, TRUST_SCREEN, DialogBody::Generic(body)))
}

/// The trust screen is on the pane.
pub fn trust_drawn(pane: &str) -> bool {
    read_screen(pane).is_some()
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
    fn other_screens_are_not_dialogs() {
        for pane in [include_str!("../testdata/pane_approval.txt"), include_str!("../testdata/pane_after.txt"), ""] {
            assert_eq!(read_screen(pane), None);
        }
        let cut = PANE.replace("2. Back to Agent Command Center", "");
        assert_eq!(read_screen(&cut), None, "half drawn");
    }
}
