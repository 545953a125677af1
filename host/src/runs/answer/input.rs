//! What lab types into an agent and where it starts it: the rules for operator text
//! (messages, first prompts, "Other" answers), for workdirs, for when the composer is
//! locked, and for when a freshly started agent is ready to be typed into. Pure: the
//! tmux and file I/O that follows these decisions lives in [`super`].
//!
//! - **Text is text.** C0 controls (U+0000–U+001F), DEL (U+007F) and C1 controls
//!   (U+0080–U+009F, so ESC and every escape sequence) are refused: nothing the
//!   operator sends can act as a key (Up, Ctrl-U, Ctrl-C, a second Enter) or end the
//!   bracketed paste it travels in. Messages and prompts may hold line feeds and TABs
//!   (delivered inside a bracketed paste, where they are text); a CR LF pair is read as
//!   one line feed, a lone CR is refused. "Other" answers are typed into a one-line
//!   field with `send-keys -l`, so they may hold no control character at all.
//! - **Sizes.** Messages and prompts: up to [`TEXT_MAX`] bytes of UTF-8. "Other"
//!   answers: up to [`OTHER_MAX`] bytes (they travel on a tmux command line).
//! - **Workdirs** are absolute, normalised (no `.`, `..` or empty components, no
//!   trailing `/`), free of control characters and at most [`WORKDIR_MAX`] bytes; the
//!   caller checks that they exist and are directories.

use crate::runs::live::view::{Derived, RunState, SeqMessage};
pub use crate::util::text::{char_name, is_bidi_control, is_invisible_format};
use serde::Serialize;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// Most bytes (UTF-8) of a message or a first prompt.
pub const TEXT_MAX: usize = 256 * 1024;

/// Most bytes of an "Other" answer (typed with `tmux send-keys -l`, whose whole
/// command must stay under tmux's command-length limit of about 16 KiB).
pub const OTHER_MAX: usize = 4 * 1024;

/// Most bytes of a workdir (Linux `PATH_MAX` is 4096 with the NUL).
pub const WORKDIR_MAX: usize = 4095;

/// Linux `MAX_ARG_STRLEN`: the most bytes one `execve` argument may have, its NUL
/// included. A longer argument makes `execve` fail with E2BIG.
pub const MAX_ARG_STRLEN: usize = 128 * 1024;

/// The first argument too long to be passed to a program (`execve`), if any.
pub fn oversized_argument(argv: &[String]) -> Option<usize> {
    argv.iter().position(|a| a.len() >= MAX_ARG_STRLEN)
}

/// Why operator text was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextError {
    /// Nothing but whitespace.
    Empty,
    /// More bytes than the limit.
    TooLong { len: usize, max: usize },
    /// A control character at `position` (counting characters from 1).
    Control { ch: char, position: usize },
    /// A bidirectional-text control at `position` (an "Other" answer only).
    Bidi { ch: char, position: usize },
    /// An invisible format character at `position` (an "Other" answer only).
    Invisible { ch: char, position: usize },
}

impl TextError {
    /// The human message, naming the field (`text`, `prompt`, `answer`).
    pub fn describe(&self, field: &str) -> String {
        match self {
            TextError::Empty => format!("{field} is empty"),
            TextError::TooLong { len, max } => {
                format!("{field} is {len} bytes long; the limit is {max} bytes (UTF-8)")
            }
            TextError::Control { ch, position } => format!(
                "{field} contains the control character {} at character {position}; control characters cannot be sent to the agent (only line feeds and TABs are allowed in messages and prompts)",
                char_name(*ch)
            ),
            TextError::Bidi { ch, position } => format!(
                "{field} contains the bidirectional-text control U+{:04X} at character {position}; it would make the answer read differently on the card than in the agent (\"Trojan Source\"), so it is not sent",
                *ch as u32
            ),
            TextError::Invisible { ch, position } => format!(
                "{field} contains the invisible character U+{:04X} at character {position}; the agent would read text the card does not show, so it is not sent",
                *ch as u32
            ),
        }
    }
}

fn is_control(ch: char) -> bool {
    matches!(ch as u32, 0..=0x1f | 0x7f..=0x9f)
}

/// The first control character not in `allowed`, with its 1-based position.
fn first_control(text: &str, allowed: &[char]) -> Option<(char, usize)> {
    text.chars().enumerate().find(|(_, c)| is_control(*c) && !allowed.contains(c)).map(|(i, c)| (c, i + 1))
}

/// A message or a first prompt, as it will reach the agent: CR LF becomes LF; line
/// feeds and TABs are kept; any other control character, an empty text or more than
/// [`TEXT_MAX`] bytes is refused.
pub fn chat_text(text: &str) -> Result<String, TextError> {
    let mut chars = text.chars().enumerate().peekable();
    while let Some((i, ch)) = chars.next() {
        if ch == '\r' && chars.peek().is_some_and(|(_, next)| *next == '\n') {
            continue;
        }
        if is_control(ch) && ch != '\n' && ch != '\t' {
            return Err(TextError::Control { ch, position: i + 1 });
        }
    }
    let text = if text.contains("\r\n") { text.replace("\r\n", "\n") } else { text.to_string() };
    if text.len() > TEXT_MAX {
        return Err(TextError::TooLong { len: text.len(), max: TEXT_MAX });
    }
    if text.trim().is_empty() {
        return Err(TextError::Empty);
    }
    Ok(text)
}

/// An "Other" answer: one line of text, no control characters and no bidirectional-text
/// controls (the card shows the answer as the agent will read it), at most
/// [`OTHER_MAX`] bytes. (Emptiness is the provider's call: its message names the
/// question.)
pub fn other_text(text: &str) -> Result<(), TextError> {
    if text.len() > OTHER_MAX {
        return Err(TextError::TooLong { len: text.len(), max: OTHER_MAX });
    }
    if let Some((ch, position)) = first_control(text, &[]) {
        return Err(TextError::Control { ch, position });
    }
    for (i, ch) in text.chars().enumerate() {
        if is_bidi_control(ch) {
            return Err(TextError::Bidi { ch, position: i + 1 });
        }
        if is_invisible_format(ch) {
            return Err(TextError::Invisible { ch, position: i + 1 });
        }
    }
    Ok(())
}

/// A workdir as given to `POST /runs`: absolute, normalised, no control characters.
/// Only the spelling is checked here; the caller checks that it is a directory.
pub fn workdir(dir: &str) -> Result<(), String> {
    if !dir.starts_with('/') {
        return Err(format!("workdir must be an absolute path (got {dir:?})"));
    }
    if dir.len() > WORKDIR_MAX {
        return Err(format!("workdir is {} bytes long; the limit is {WORKDIR_MAX}", dir.len()));
    }
    if let Some((ch, position)) = first_control(dir, &[]) {
        return Err(format!("workdir contains the control character {} at character {position}", char_name(ch)));
    }
    if dir == "/" {
        return Ok(());
    }
    for part in dir[1..].split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return Err(format!(
                "workdir must be a normalised path: no `.`, `..` or empty components and no trailing `/` (got {dir:?})"
            ));
        }
    }
    Ok(())
}

/// Why the composer is locked: what `POST /runs/{id}/messages` refuses with (409), and
/// the view's `composer_lock`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComposerLock {
    pub code: &'static str,
    pub message: String,
}

impl ComposerLock {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        ComposerLock { code, message: message.into() }
    }
}

/// The lock a message meets while an answer lab accepted is still to be typed.
pub fn answer_pending_lock() -> ComposerLock {
    ComposerLock::new("answer_pending", "lab is typing an answer into the agent: send this once it is played")
}

/// Tool calls that have no result yet, oldest first. The whole transcript counts, not
/// only what follows the operator's last message: agents do not always write lines in
/// the order things happened (Claude Code 2.1.198 was seen writing a turn's prompt line
/// after the assistant's tool call of that same turn), and [`composer_lock`] only asks
/// while a turn is under way, so a call left unresolved by an earlier, ended turn
/// holds nothing once the agent is idle.
pub fn unresolved_tool_calls(messages: &[SeqMessage]) -> Vec<&SeqMessage> {
    let resolved: HashSet<&str> =
        messages.iter().filter(|m| m.kind == "tool_result").filter_map(|m| m.tool_use_id.as_deref()).collect();
    messages
        .iter()
        .filter(|m| m.kind == "tool_use")
        .filter(|m| m.tool_use_id.as_deref().is_some_and(|id| !resolved.contains(id)))
        .collect()
}

/// May the operator's message be typed into the agent now? `None` when it may; else
/// why not. Typing while the agent shows any prompt would answer that prompt (a "1"
/// approves a permission prompt), so the composer is locked while:
/// 1. the run has ended (`run_ended`);
/// 2. a dialog is pending (`dialog_pending`);
/// 3. lab is still typing the run's first prompt (`prompt_pending`);
/// 4. the agent reported that it waits for the operator (a blocked marker) in the
///    middle of a turn (`agent_waiting`) — a block raised after the turn ended is the
///    agent waiting for exactly this, a message;
/// 5. a tool call has no result yet and the turn goes on (`tool_pending`): the agent is running it, or showing a permission
///    prompt for it that lab may not know of.
///
/// `open_call`: the name of the newest tool call with no result yet (anywhere in the
/// transcript, see [`unresolved_tool_calls`]), if there is one.
pub fn composer_lock(d: &Derived, open_call: Option<&str>, prompt_pending: bool) -> Option<ComposerLock> {
    if d.state == RunState::Ended {
        return Some(ComposerLock::new("run_ended", "the run has ended"));
    }
    if d.pending_dialog.is_some() {
        return Some(ComposerLock::new("dialog_pending", "a dialog is pending: answer it first"));
    }
    if prompt_pending {
        return Some(ComposerLock::new(
            "prompt_pending",
            "lab is still typing the run's first prompt into the agent: send this once it is delivered",
        ));
    }
    if !d.turn_idle {
        if let Some(b) = &d.blocked {
            let what = if b.message.trim().is_empty() { String::new() } else { format!(" ({})", b.message.trim()) };
            return Some(ComposerLock::new(
                "agent_waiting",
                format!("the agent is waiting for an answer in its terminal{what}: answer it there first"),
            ));
        }
        if let Some(name) = open_call {
            let name = if name.is_empty() { "a tool" } else { name };
            return Some(ComposerLock::new(
                "tool_pending",
                format!(
                    "the agent is running {name} or waiting for permission to run it: wait for its result (or answer it in the terminal)"
                ),
            ));
        }
    }
    None
}

/// The pause between a bracketed paste and its Enter: a terminal program takes a paste
/// in as a burst of input, and an Enter that lands inside the burst would be part of
/// the text (docs/api.md: 250 ms plus 1 ms per KiB).
pub const PASTE_SETTLE: Duration = Duration::from_millis(250);

/// How long to wait after a paste before pressing Enter: [`PASTE_SETTLE`], plus 1 ms
/// per KiB so a large paste is taken in by the agent before the Enter that submits it.
pub fn enter_delay(paste_bytes: usize, settle: Duration) -> Duration {
    settle + Duration::from_millis((paste_bytes / 1024) as u64)
}

/// When a freshly started agent is ready to have its first prompt pasted: its pane
/// shows something (not only blanks) and has not changed for [`Readiness::QUIET`].
/// Fed one screen capture at a time.
#[derive(Debug, Default)]
pub struct Readiness {
    last: Option<(String, Instant)>,
}

impl Readiness {
    /// How long the drawn pane must stay unchanged.
    pub const QUIET: Duration = Duration::from_millis(1000);
    /// How often the pane is captured.
    pub const POLL: Duration = Duration::from_millis(100);
    /// After this long the prompt is pasted anyway (an agent with a spinner is never
    /// quiet; it still has its input open).
    pub const TIMEOUT: Duration = Duration::from_secs(30);

    /// Record the screen captured at `now`; true once the agent counts as ready.
    pub fn observe(&mut self, screen: &str, now: Instant) -> bool {
        if screen.trim().is_empty() {
            self.last = None;
            return false;
        }
        match &self.last {
            Some((prev, since)) if prev == screen => now.duration_since(*since) >= Self::QUIET,
            _ => {
                self.last = Some((screen.to_string(), now));
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::model::{BlockedKind, BlockedView, Dialog, DialogBody, Role};
    use crate::runs::live::view::{DialogSource, PendingDialog};

    #[test]
    fn chat_text_keeps_text_and_refuses_every_control_character() {
        assert_eq!(chat_text("hello").unwrap(), "hello");
        assert_eq!(chat_text("a\nb\tc é ; C-c \"q\"").unwrap(), "a\nb\tc é ; C-c \"q\"");
        assert_eq!(chat_text("one\r\ntwo\r\n").unwrap(), "one\ntwo\n", "CR LF is a line feed");
        for (text, ch, position) in [
            ("a\u{1b}[A", '\u{1b}', 2),
            ("\u{7f}", '\u{7f}', 1),
            ("kill\u{15}", '\u{15}', 5),
            ("x\u{3}", '\u{3}', 2),
            ("ok\rgo", '\r', 3),
            ("n\0", '\0', 2),
            ("éé\u{85}", '\u{85}', 3),
            ("\u{9b}2J", '\u{9b}', 1),
            ("a\r\n\rb", '\r', 4),
        ] {
            assert_eq!(chat_text(text), Err(TextError::Control { ch, position }), "{text:?}");
        }
        // Not controls: U+00A0 and beyond, including other Unicode format characters.
        assert!(chat_text("a\u{a0}b\u{200b}").is_ok());
        assert_eq!(chat_text(" \n\t "), Err(TextError::Empty));
        assert_eq!(chat_text(""), Err(TextError::Empty));
    }

    #[test]
    fn chat_text_takes_exactly_the_limit_in_bytes() {
        let at = "é".repeat(TEXT_MAX / 2);
        assert_eq!(at.len(), TEXT_MAX);
        assert_eq!(chat_text(&at).unwrap().len(), TEXT_MAX);
        let over = format!("{at}x");
        assert_eq!(chat_text(&over), Err(TextError::TooLong { len: TEXT_MAX + 1, max: TEXT_MAX }));
        // The limit applies after CR LF → LF.
        let crlf = format!("{}\r\n", "x".repeat(TEXT_MAX - 1));
        assert_eq!(chat_text(&crlf).unwrap().len(), TEXT_MAX);
    }

    #[test]
    fn other_answers_are_one_line_without_any_control() {
        assert!(other_text("Use MariaDB; C-c \"x\" é").is_ok());
        assert!(other_text("").is_ok(), "emptiness is the provider's call");
        assert_eq!(other_text("a\nb"), Err(TextError::Control { ch: '\n', position: 2 }));
        assert_eq!(other_text("\t"), Err(TextError::Control { ch: '\t', position: 1 }));
        assert_eq!(other_text("x\u{1b}"), Err(TextError::Control { ch: '\u{1b}', position: 2 }));
        // Bidirectional controls (Trojan Source): refused, named; right-to-left text itself is text.
        assert_eq!(other_text("ok \u{202e}gnp.exe"), Err(TextError::Bidi { ch: '\u{202e}', position: 4 }));
        for c in ['\u{202a}', '\u{202d}', '\u{2066}', '\u{2069}', '\u{200e}', '\u{200f}', '\u{061c}'] {
            assert!(matches!(other_text(&format!("a{c}b")), Err(TextError::Bidi { position: 2, .. })), "{c:?}");
        }
        assert!(other_text("שלום, مرحبا 👨‍👩‍👧").is_ok(), "scripts and emoji (ZWJ) are text");
        // Invisible text (zero-width space, BOM, tag characters smuggling an instruction).
        for c in ['\u{200b}', '\u{2060}', '\u{2064}', '\u{feff}', '\u{180e}', '\u{e0001}', '\u{e0041}', '\u{e007f}'] {
            assert!(matches!(other_text(&format!("a{c}b")), Err(TextError::Invisible { position: 2, .. })), "{c:?}");
        }
        assert!(TextError::Invisible { ch: '\u{e0041}', position: 2 }
            .describe("answer")
            .contains("U+E0041 at character 2"));
        assert!(other_text("می\u{200c}خواهم").is_ok(), "ZWNJ is text (Persian)");
        assert!(TextError::Bidi { ch: '\u{202e}', position: 4 }.describe("answer").contains("U+202E at character 4"));
        assert!(other_text(&"x".repeat(OTHER_MAX)).is_ok());
        assert_eq!(
            other_text(&"x".repeat(OTHER_MAX + 1)),
            Err(TextError::TooLong { len: OTHER_MAX + 1, max: OTHER_MAX })
        );
    }

    #[test]
    fn errors_name_the_character_and_its_position() {
        let m = TextError::Control { ch: '\u{1b}', position: 7 }.describe("text");
        assert!(m.contains("U+001B (ESC)") && m.contains("character 7"), "{m}");
        assert_eq!(char_name('\u{85}'), "U+0085 (C1 control)");
        assert_eq!(char_name('\u{7f}'), "U+007F (DEL)");
        assert!(TextError::TooLong { len: 9, max: 8 }.describe("prompt").contains("limit is 8 bytes"));
    }

    #[test]
    fn workdirs_are_absolute_normalised_and_plain() {
        for good in ["/", "/tmp", "/tmp/a b/sub#(id > f)", "/tmp/é/x.y", "/tmp/..x/.y"] {
            assert!(workdir(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "tmp",
            "./tmp",
            "/tmp/",
            "//tmp",
            "/tmp//a",
            "/tmp/./a",
            "/tmp/../etc",
            "/tmp/..",
            "/tmp/a\nb",
            "/tmp/\u{1b}[A",
            "/tmp/\u{85}",
        ] {
            assert!(workdir(bad).is_err(), "{bad:?}");
        }
        assert!(workdir(&format!("/{}", "a".repeat(WORKDIR_MAX))).is_err());
    }

    fn msg(seq: u64, role: Role, kind: &str, id: Option<&str>) -> SeqMessage {
        SeqMessage {
            seq,
            role,
            kind: kind.into(),
            text: String::new(),
            tool_use_id: id.map(Into::into),
            tool_name: id.map(|_| "Shell".into()),
            input: None,
            is_error: false,
            timestamp: String::new(),
        }
    }

    fn derived(state: RunState) -> Derived {
        Derived {
            state,
            pending_dialog: None,
            blocked: None,
            spool_is_stale: false,
            turn_idle: state == RunState::Idle,
        }
    }

    /// The lock with the open call found in `messages`, as the tailer keeps it.
    fn lock_for(d: &Derived, messages: &[SeqMessage], prompt_pending: bool) -> Option<ComposerLock> {
        let open = unresolved_tool_calls(messages).last().map(|m| m.tool_name.as_deref().unwrap_or(""));
        composer_lock(d, open, prompt_pending)
    }

    fn code(l: Option<ComposerLock>) -> Option<&'static str> {
        l.map(|l| l.code)
    }

    #[test]
    fn a_tool_call_without_a_result_locks_the_composer_until_its_result() {
        let mut msgs = vec![msg(0, Role::User, "text", None), msg(1, Role::Assistant, "tool_use", Some("t1"))];
        let lock = lock_for(&derived(RunState::Working), &msgs, false).unwrap();
        assert_eq!(lock.code, "tool_pending");
        assert!(lock.message.contains("Shell") && lock.message.contains("permission"), "{}", lock.message);
        msgs.push(msg(2, Role::Tool, "tool_result", Some("t1")));
        assert_eq!(code(lock_for(&derived(RunState::Working), &msgs, false)), None);
        msgs.push(msg(3, Role::Assistant, "tool_use", Some("t2")));
        assert_eq!(code(lock_for(&derived(RunState::Working), &msgs, false)), Some("tool_pending"));
    }

    #[test]
    fn a_call_locks_whatever_line_order_the_agent_wrote_but_not_once_the_turn_ended() {
        // Seen live: the turn's prompt line written after the assistant's tool call.
        let msgs = vec![
            msg(0, Role::Assistant, "text", None),
            msg(1, Role::Assistant, "tool_use", Some("t1")),
            msg(2, Role::User, "text", None),
        ];
        assert_eq!(code(lock_for(&derived(RunState::Working), &msgs, false)), Some("tool_pending"));
        // The turn ended (an interrupt, say) with the call unresolved: the agent waits
        // for exactly this, a message.
        assert_eq!(code(lock_for(&derived(RunState::Idle), &msgs, false)), None);
    }

    #[test]
    fn the_lock_reasons_in_order() {
        let tool = vec![msg(0, Role::User, "text", None), msg(1, Role::Assistant, "tool_use", Some("t1"))];
        let blocked = BlockedView {
            kind: BlockedKind::NeedsInput,
            message: "needs your permission".into(),
            agent_kind: "permission_prompt".into(),
        };
        let mut d = derived(RunState::NeedsInput);
        d.blocked = Some(blocked.clone());
        let lock = lock_for(&d, &tool, false).unwrap();
        assert_eq!(lock.code, "agent_waiting");
        assert!(lock.message.contains("needs your permission"));
        assert_eq!(code(lock_for(&d, &[], false)), Some("agent_waiting"));
        assert_eq!(code(lock_for(&d, &tool, true)), Some("prompt_pending"));
        d.pending_dialog = Some(PendingDialog {
            dialog: Dialog {
                id: "t1".into(),
                call_id: Some("t1".into()),
                tool_name: "Ask".into(),
                body: DialogBody::Question(vec![]),
                answerable: true,
                deep_link: None,
            },
            source: DialogSource::Spool,
        });
        assert_eq!(code(lock_for(&d, &tool, true)), Some("dialog_pending"));
        d.state = RunState::Ended;
        assert_eq!(code(lock_for(&d, &tool, true)), Some("run_ended"));
        // A block raised after the turn ended: the agent waits for a message.
        let mut idle = derived(RunState::NeedsInput);
        idle.turn_idle = true;
        idle.blocked =
            Some(BlockedView { kind: BlockedKind::Idle, message: "waiting".into(), agent_kind: "idle_prompt".into() });
        assert_eq!(code(lock_for(&idle, &tool, false)), None);
        assert_eq!(code(lock_for(&derived(RunState::Idle), &[], false)), None);
        assert_eq!(code(lock_for(&derived(RunState::Starting), &[], false)), None);
    }

    #[test]
    fn arguments_must_fit_linux_s_per_argument_limit() {
        let fits = "x".repeat(MAX_ARG_STRLEN - 1);
        assert_eq!(oversized_argument(&["/bin/a".into(), fits.clone()]), None);
        assert_eq!(oversized_argument(&["/bin/a".into(), fits, "x".repeat(MAX_ARG_STRLEN)]), Some(2));
    }

    #[test]
    fn the_enter_after_a_paste_waits_longer_for_large_pastes() {
        let k = Duration::from_millis(250);
        assert_eq!(enter_delay(10, k), k);
        assert_eq!(enter_delay(TEXT_MAX, k), k + Duration::from_millis(256));
    }

    #[test]
    fn an_agent_is_ready_once_its_drawn_pane_stays_quiet() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut r = Readiness::default();
        assert!(!r.observe("   \n\n", ms(0)), "nothing drawn yet");
        assert!(!r.observe("\n\n", ms(2000)), "still nothing drawn");
        assert!(!r.observe("> welcome", ms(2100)));
        assert!(!r.observe("> welcome", ms(2600)));
        assert!(!r.observe("> welcome!", ms(3000)), "a change restarts the quiet period");
        assert!(!r.observe("> welcome!", ms(3900)));
        assert!(r.observe("> welcome!", ms(4000)));
    }
}
