//! State derivation: the run's view (what `GET /runs/{id}/messages` returns) from the
//! transcript-derived facts plus the live overlays (spool → pending dialog, screen →
//! pending dialog, marker → blocked). Pure: every input is a value, so each rule is
//! unit-tested here.
//!
//! Rules, in order:
//! 1. An ended run is `ended`, with no dialog and no block.
//! 2. A spooled prompt is over (suppressed, and its spool deleted) once its transcript
//!    call (`call_id`) has a result — the backstop for Esc, auto-continue, process death
//!    or a missed clear hook — or, for a prompt with no known call, once the agent
//!    ended a turn after the spool was written.
//! 3. The pending dialog is the live spool's (source `spool`), else one read off the
//!    screen (source `screen`), else the newest unresolved dialog tool call in the
//!    transcript (source `transcript`, the dormant fallback), unless the hook already
//!    cleared that very id (so a clear that lands before the result line does not make
//!    the dialog flicker back). Spool and transcript describing the same call are one
//!    dialog. For a provider with the dialog-hooker capability the spool is
//!    authoritative: the fallback only lights up once the tool call has waited
//!    [`SPOOL_GRACE`] without a spool (hooks missing or broken), so a transcript line
//!    that lands before the spool never shows the dialog twice.
//! 4. The blocked marker is live while the transcript has not changed since it was
//!    written (mtime comparison: the transcript "advanced past the block"). A turn
//!    that ended on an error (the run's last message is the provider's
//!    [`crate::agents::model::TURN_ERROR_KIND`] message, the turn idle) blocks the run on kind
//!    [`BlockedKind::Error`] with that message, ahead of any marker, until the next
//!    message: the agent waits for the operator to send again. The block's kind is
//!    lab's, not the agent's ([`blocked_kind`]): `error` for a turn error, `idle` for a
//!    marker raised once the agent ended its turn (it waits for a message),
//!    `needs_input` for one raised in the middle of a turn (it waits on something in
//!    its terminal). The agent's own word goes alongside.
//! 5. State: dialog → `question`; live marker → `needs_input`; no transcript message
//!    yet → `starting`; last turn signal idle → `idle`; otherwise `working`.

use crate::agents::model::{
    Blocked, BlockedKind, BlockedView, Content, Dialog, DialogBody, DialogOption, Message, Question, Role, TurnSignal,
    BLOCKED_ERROR,
};
use serde::{Serialize, Serializer};
use std::collections::HashSet;
use std::time::{Duration, SystemTime};

/// How long a hooker provider's unresolved dialog tool call may wait for its spool
/// before the transcript fallback shows it.
pub const SPOOL_GRACE: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Starting,
    Working,
    Idle,
    Question,
    NeedsInput,
    Ended,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DialogSource {
    Spool,
    Screen,
    Transcript,
}

/// The dialog as the API shows it: the provider's dialog plus where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingDialog {
    pub dialog: Dialog,
    pub source: DialogSource,
}

#[derive(Serialize)]
struct PermissionJson<'a> {
    tool: &'a str,
    summary: &'a str,
    reason: Option<&'a str>,
}

#[derive(Serialize)]
struct GenericJson<'a> {
    title: &'a str,
    text: &'a str,
}

/// `pending_dialog` in the view (docs/api.md): one flat object for every kind.
#[derive(Serialize)]
struct DialogJson<'a> {
    tool_id: &'a str,
    call_id: Option<&'a str>,
    tool_name: &'a str,
    kind: &'static str,
    answerable: bool,
    questions: &'a [Question],
    plan: Option<&'a str>,
    options: &'a [DialogOption],
    feedback_option: Option<u32>,
    /// null unless the kind is `permission` (every field is always sent).
    permission: Option<PermissionJson<'a>>,
    /// null unless the kind is `generic`.
    generic: Option<GenericJson<'a>>,
    deep_link: Option<&'a str>,
    source: DialogSource,
}

impl Serialize for PendingDialog {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let d = &self.dialog;
        let (plan, feedback_option, permission, generic) = match &d.body {
            DialogBody::Question(_) => (None, None, None, None),
            DialogBody::Plan { plan, feedback_option, .. } => (plan.as_deref(), *feedback_option, None, None),
            DialogBody::Permission { tool, summary, reason, feedback_option, .. } => {
                (None, *feedback_option, Some(PermissionJson { tool, summary, reason: reason.as_deref() }), None)
            }
            DialogBody::Generic { title, text, .. } => (None, None, None, Some(GenericJson { title, text })),
        };
        DialogJson {
            tool_id: &d.id,
            call_id: d.call_id.as_deref(),
            tool_name: &d.tool_name,
            kind: d.kind(),
            answerable: d.answerable,
            questions: d.questions(),
            plan,
            options: d.options(),
            feedback_option,
            permission,
            generic,
            deep_link: d.deep_link.as_deref(),
            source: self.source,
        }
        .serialize(s)
    }
}

/// A transcript message with its stable sequence number, as the API shows it:
/// `kind` is "text", "thinking", "tool_use", "tool_result" or the provider's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeqMessage {
    pub seq: u64,
    pub role: Role,
    pub kind: String,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// For tool_use: the tool input (JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    pub timestamp: String,
}

impl SeqMessage {
    pub fn new(seq: u64, m: Message) -> Self {
        let plain = |kind: &str, text: String| SeqMessage {
            seq,
            role: m.role,
            kind: kind.to_string(),
            text,
            tool_use_id: None,
            tool_name: None,
            input: None,
            is_error: false,
            timestamp: m.timestamp.clone(),
        };
        match m.content {
            Content::Text(t) => plain("text", t),
            Content::Thinking(t) => plain("thinking", t),
            Content::Other { kind, text } => plain(&kind, text),
            Content::ToolUse(u) => SeqMessage {
                tool_use_id: Some(u.id),
                tool_name: Some(u.name),
                input: serde_json::from_str(&u.input_json).ok(),
                ..plain("tool_use", u.summary)
            },
            Content::ToolResult(r) => {
                SeqMessage { tool_use_id: Some(r.id), is_error: r.is_error, ..plain("tool_result", r.text) }
            }
        }
    }

    /// The call id of a tool_use message.
    pub fn call(&self) -> Option<&str> {
        (self.kind == "tool_use").then_some(self.tool_use_id.as_deref()).flatten()
    }

    /// The call id a tool_result message answers.
    pub fn result_of(&self) -> Option<&str> {
        (self.kind == "tool_result").then_some(self.tool_use_id.as_deref()).flatten()
    }
}

/// The live spool, parsed by the provider, with the file's modification time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpoolFact {
    /// None: the payload is not a prompt (nothing to show).
    pub dialog: Option<Dialog>,
    pub written: SystemTime,
}

/// The live marker, parsed by the provider, with the file's modification time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerFact {
    pub blocked: Blocked,
    pub written: SystemTime,
}

/// Everything the view is derived from.
#[derive(Debug, Clone, Default)]
pub struct Facts<'a> {
    pub ended: bool,
    pub message_count: usize,
    pub turn: Option<TurnSignal>,
    /// When the tailer last took in an idle turn signal.
    pub idle_since: Option<SystemTime>,
    /// The text of the last message, when it says the turn ended on an error.
    pub turn_error: Option<String>,
    /// Tool call ids with a tool_result in the transcript.
    pub resolved: Option<&'a HashSet<String>>,
    /// Ids whose spool a clear hook removed.
    pub hook_cleared: Option<&'a HashSet<String>>,
    /// Ids lab already played an answer for (no second answer; shown, not answerable).
    pub answered: Option<&'a HashSet<String>>,
    /// The newest unresolved dialog tool call in the transcript, mapped.
    pub transcript_dialog: Option<Dialog>,
    /// How long ago the tailer first saw that tool call.
    pub transcript_dialog_age: Duration,
    /// The provider captures dialogs live (its spool is authoritative).
    pub hooker: bool,
    pub spool: Option<SpoolFact>,
    /// A prompt read off the agent's screen (still shown there).
    pub screen: Option<Dialog>,
    pub marker: Option<MarkerFact>,
    /// When the transcript last changed (None: no transcript yet).
    pub transcript_modified: Option<SystemTime>,
    /// Link used when the provider gives a dialog none.
    pub fallback_deep_link: Option<String>,
}

/// The derived part of the view (messages are kept by the tailer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Derived {
    pub state: RunState,
    pub pending_dialog: Option<PendingDialog>,
    pub blocked: Option<BlockedView>,
    /// The spool is present but over: delete it (GC).
    pub spool_is_stale: bool,
    /// The agent's last turn signal was idle: it ended its turn (whatever overlay the
    /// state shows), so a block raised since is the agent waiting for a message.
    pub turn_idle: bool,
}

fn contains(set: Option<&HashSet<String>>, id: &str) -> bool {
    set.is_some_and(|s| s.contains(id))
}

/// Is the spool live (present and its prompt not over, rule 2)?
pub fn spool_is_live(spool: &SpoolFact, resolved: Option<&HashSet<String>>, idle_since: Option<SystemTime>) -> bool {
    match spool.dialog.as_ref().map(|d| d.call_id.as_deref()) {
        Some(Some(call)) => !contains(resolved, call),
        Some(None) => idle_since.is_none_or(|idle| idle < spool.written),
        // Not a prompt: nothing to be over.
        None => true,
    }
}

pub fn derive(f: &Facts<'_>) -> Derived {
    if f.ended {
        return Derived {
            state: RunState::Ended,
            pending_dialog: None,
            blocked: None,
            spool_is_stale: f.spool.is_some(),
            turn_idle: false,
        };
    }
    let live_spool = f.spool.as_ref().filter(|s| spool_is_live(s, f.resolved, f.idle_since));
    let spool_is_stale = f.spool.is_some() && live_spool.is_none();

    let mut pending = match live_spool {
        Some(s) => s.dialog.clone().map(|dialog| PendingDialog { dialog, source: DialogSource::Spool }),
        None => None,
    };
    if pending.is_none() && live_spool.is_none() {
        pending = f.screen.clone().map(|dialog| PendingDialog { dialog, source: DialogSource::Screen });
    }
    if pending.is_none() && live_spool.is_none() {
        pending = f
            .transcript_dialog
            .as_ref()
            .filter(|d| {
                let call = d.call_id.as_deref().unwrap_or(&d.id);
                !contains(f.resolved, call) && !contains(f.hook_cleared, call)
            })
            .filter(|_| !f.hooker || f.transcript_dialog_age >= SPOOL_GRACE)
            .map(|d| PendingDialog { dialog: d.clone(), source: DialogSource::Transcript });
    }
    if let Some(p) = pending.as_mut() {
        // Only a live dialog (spooled or on screen) can pass the answer guard, and only once.
        p.dialog.answerable = p.dialog.answerable
            && f.hooker
            && p.source != DialogSource::Transcript
            && !contains(f.answered, &p.dialog.id);
        if p.dialog.deep_link.is_none() {
            p.dialog.deep_link = f.fallback_deep_link.clone();
        }
    }

    let turn_idle = f.turn == Some(TurnSignal::Idle);
    let turn_error = f.turn_error.as_ref().filter(|_| turn_idle).map(|text| BlockedView {
        kind: BlockedKind::Error,
        message: text.clone(),
        agent_kind: BLOCKED_ERROR.into(),
    });
    let blocked = turn_error.or_else(|| {
        f.marker
            .as_ref()
            .filter(|m| f.transcript_modified.is_none_or(|t| t <= m.written))
            .map(|m| blocked_view(&m.blocked, turn_idle))
    });

    let state = if pending.is_some() {
        RunState::Question
    } else if blocked.is_some() {
        RunState::NeedsInput
    } else if f.message_count == 0 {
        RunState::Starting
    } else if f.turn == Some(TurnSignal::Idle) {
        RunState::Idle
    } else {
        RunState::Working
    };
    Derived { state, pending_dialog: pending, blocked, spool_is_stale, turn_idle }
}

/// Lab's kind for a block the agent's marker reported (rule 4a): raised after the agent
/// ended its turn, it waits for the operator's message; raised mid-turn, on something
/// in its terminal. Agent-neutral: the agent's own word is not looked at.
pub fn blocked_kind(turn_idle: bool) -> BlockedKind {
    if turn_idle {
        BlockedKind::Idle
    } else {
        BlockedKind::NeedsInput
    }
}

fn blocked_view(b: &Blocked, turn_idle: bool) -> BlockedView {
    BlockedView { kind: blocked_kind(turn_idle), message: b.message.clone(), agent_kind: b.kind.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn dialog(id: &str) -> Dialog {
        Dialog {
            id: id.into(),
            call_id: Some(id.into()),
            tool_name: "Ask".into(),
            body: DialogBody::Question(vec![Question {
                header: "H".into(),
                question: "Q?".into(),
                multi_select: false,
                options: vec![DialogOption { label: "a".into(), description: "".into() }],
            }]),
            answerable: true,
            deep_link: None,
        }
    }

    fn spool(id: &str) -> SpoolFact {
        SpoolFact { dialog: Some(dialog(id)), written: t(100) }
    }

    /// A permission prompt: no transcript call known.
    fn permission(id: &str, written: SystemTime) -> SpoolFact {
        let body = DialogBody::Permission {
            tool: "Shell".into(),
            summary: "rm -rf build".into(),
            reason: None,
            options: vec![DialogOption { label: "Yes".into(), description: "".into() }],
            feedback_option: None,
        };
        SpoolFact {
            dialog: Some(Dialog {
                id: id.into(),
                call_id: None,
                tool_name: "Shell".into(),
                body,
                answerable: true,
                deep_link: None,
            }),
            written,
        }
    }

    fn set(ids: &[&str]) -> HashSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn starting_working_idle_from_the_transcript() {
        assert_eq!(derive(&Facts::default()).state, RunState::Starting);
        let f = Facts { message_count: 1, ..Default::default() };
        assert_eq!(derive(&f).state, RunState::Working);
        let f = Facts { message_count: 3, turn: Some(TurnSignal::Idle), ..Default::default() };
        assert_eq!(derive(&f).state, RunState::Idle);
        let f = Facts { message_count: 3, turn: Some(TurnSignal::Working), ..Default::default() };
        assert_eq!(derive(&f).state, RunState::Working);
    }

    #[test]
    fn a_live_spool_overlays_a_question() {
        let f = Facts {
            message_count: 2,
            turn: Some(TurnSignal::Working),
            spool: Some(spool("t1")),
            hooker: true,
            ..Default::default()
        };
        let d = derive(&f);
        assert_eq!(d.state, RunState::Question);
        let p = d.pending_dialog.unwrap();
        assert_eq!(p.source, DialogSource::Spool);
        assert!(p.dialog.answerable);
        assert!(!d.spool_is_stale);
    }

    #[test]
    fn spool_and_transcript_with_the_same_id_are_one_dialog_from_the_spool() {
        let f = Facts {
            message_count: 2,
            spool: Some(spool("t1")),
            transcript_dialog: Some(dialog("t1")),
            ..Default::default()
        };
        let p = derive(&f).pending_dialog.unwrap();
        assert_eq!((p.source, p.dialog.id.as_str()), (DialogSource::Spool, "t1"));
    }

    #[test]
    fn a_resolved_spool_is_suppressed_and_marked_for_gc() {
        let resolved = set(&["t1"]);
        let f = Facts {
            message_count: 4,
            turn: Some(TurnSignal::Working),
            resolved: Some(&resolved),
            spool: Some(spool("t1")),
            transcript_dialog: Some(dialog("t1")),
            ..Default::default()
        };
        let d = derive(&f);
        assert_eq!(d.state, RunState::Working);
        assert!(d.pending_dialog.is_none());
        assert!(d.spool_is_stale);
    }

    #[test]
    fn the_transcript_fallback_shows_an_unresolved_dialog_but_not_answerable() {
        let f = Facts { message_count: 2, transcript_dialog: Some(dialog("t9")), ..Default::default() };
        let p = derive(&f).pending_dialog.unwrap();
        assert_eq!(p.source, DialogSource::Transcript);
        assert!(!p.dialog.answerable);
    }

    #[test]
    fn a_hooker_waits_for_its_spool_before_the_fallback_lights_up() {
        let mut f = Facts {
            message_count: 2,
            hooker: true,
            transcript_dialog: Some(dialog("t1")),
            transcript_dialog_age: Duration::from_millis(300),
            ..Default::default()
        };
        let d = derive(&f);
        assert!(d.pending_dialog.is_none());
        assert_eq!(d.state, RunState::Working);
        f.spool = Some(spool("t1"));
        assert_eq!(derive(&f).pending_dialog.unwrap().source, DialogSource::Spool);
        f.spool = None;
        f.transcript_dialog_age = SPOOL_GRACE;
        assert_eq!(derive(&f).pending_dialog.unwrap().source, DialogSource::Transcript);
    }

    #[test]
    fn a_hook_cleared_id_does_not_flicker_back_from_the_transcript() {
        let cleared = set(&["t1"]);
        let f = Facts {
            message_count: 2,
            hook_cleared: Some(&cleared),
            transcript_dialog: Some(dialog("t1")),
            ..Default::default()
        };
        let d = derive(&f);
        assert!(d.pending_dialog.is_none());
        assert_eq!(d.state, RunState::Working);
    }

    #[test]
    fn an_answered_dialog_stays_visible_but_cannot_be_answered_again() {
        let answered = set(&["t1"]);
        let f = Facts { message_count: 2, spool: Some(spool("t1")), answered: Some(&answered), ..Default::default() };
        let p = derive(&f).pending_dialog.unwrap();
        assert!(!p.dialog.answerable);
    }

    #[test]
    fn a_spool_for_a_non_dialog_tool_hides_the_transcript_fallback_but_shows_nothing() {
        let f = Facts {
            message_count: 2,
            spool: Some(SpoolFact { dialog: None, written: t(1) }),
            transcript_dialog: Some(dialog("t1")),
            ..Default::default()
        };
        assert!(derive(&f).pending_dialog.is_none());
    }

    #[test]
    fn the_marker_is_live_until_the_transcript_advances() {
        let marker = MarkerFact {
            blocked: Blocked { kind: "permission_prompt".into(), message: "needs permission".into() },
            written: t(100),
        };
        let mut f = Facts {
            message_count: 2,
            turn: Some(TurnSignal::Working),
            marker: Some(marker),
            transcript_modified: Some(t(90)),
            ..Default::default()
        };
        let d = derive(&f);
        assert_eq!(d.state, RunState::NeedsInput);
        let b = d.blocked.unwrap();
        // Raised mid-turn: lab's kind, and the agent's own word beside it.
        assert_eq!((b.kind, b.agent_kind.as_str()), (BlockedKind::NeedsInput, "permission_prompt"));
        assert_eq!(b.message, "needs permission");
        // The same marker once the agent ended its turn: it waits for a message.
        f.turn = Some(TurnSignal::Idle);
        assert_eq!(derive(&f).blocked.unwrap().kind, BlockedKind::Idle);
        f.turn = Some(TurnSignal::Working);
        f.transcript_modified = Some(t(101));
        let d = derive(&f);
        assert_eq!(d.state, RunState::Working);
        assert!(d.blocked.is_none());
    }

    #[test]
    fn a_turn_that_ended_on_an_error_blocks_the_run_until_the_next_message() {
        let idle_marker =
            MarkerFact { blocked: Blocked { kind: "idle_prompt".into(), message: "waiting".into() }, written: t(100) };
        let mut f = Facts {
            message_count: 2,
            turn: Some(TurnSignal::Idle),
            turn_error: Some("Rate limited: API Error (429)".into()),
            marker: Some(idle_marker),
            transcript_modified: Some(t(90)),
            ..Default::default()
        };
        let d = derive(&f);
        assert_eq!(d.state, RunState::NeedsInput);
        assert_eq!(
            d.blocked,
            Some(BlockedView {
                kind: BlockedKind::Error,
                message: "Rate limited: API Error (429)".into(),
                agent_kind: BLOCKED_ERROR.into()
            })
        );
        assert!(d.turn_idle, "the agent ended its turn: a message may be sent");
        // Only while the turn is over (a resend makes it working, and its prompt is the
        // last message then anyway).
        f.turn = Some(TurnSignal::Working);
        assert_eq!(derive(&f).blocked.unwrap().agent_kind, "idle_prompt");
        f.turn_error = None;
        f.marker = None;
        assert_eq!(derive(&f).state, RunState::Working);
        // A dialog still wins.
        f.turn = Some(TurnSignal::Idle);
        f.turn_error = Some("x".into());
        f.spool = Some(spool("t1"));
        assert_eq!(derive(&f).state, RunState::Question);
    }

    #[test]
    fn a_question_wins_over_a_marker_and_keeps_the_block_info() {
        let f = Facts {
            message_count: 2,
            spool: Some(spool("t1")),
            marker: Some(MarkerFact {
                blocked: Blocked { kind: "permission_prompt".into(), message: "m".into() },
                written: t(100),
            }),
            transcript_modified: Some(t(50)),
            ..Default::default()
        };
        let d = derive(&f);
        assert_eq!(d.state, RunState::Question);
        assert!(d.blocked.is_some());
    }

    #[test]
    fn ended_wins_over_everything() {
        let f = Facts { ended: true, message_count: 2, spool: Some(spool("t1")), ..Default::default() };
        let d = derive(&f);
        assert_eq!(d.state, RunState::Ended);
        assert!(d.pending_dialog.is_none() && d.blocked.is_none());
        assert!(d.spool_is_stale);
    }

    #[test]
    fn a_fallback_deep_link_fills_in() {
        let f = Facts {
            message_count: 1,
            spool: Some(spool("t1")),
            fallback_deep_link: Some("/#/runs/r/terminal".into()),
            ..Default::default()
        };
        assert_eq!(derive(&f).pending_dialog.unwrap().dialog.deep_link.as_deref(), Some("/#/runs/r/terminal"));
    }

    #[test]
    fn a_prompt_without_a_known_call_is_over_when_a_turn_ends_after_it() {
        let mut f = Facts {
            message_count: 2,
            hooker: true,
            spool: Some(permission("p1", t(100))),
            idle_since: Some(t(90)),
            ..Default::default()
        };
        let d = derive(&f);
        assert_eq!(d.state, RunState::Question);
        let p = d.pending_dialog.unwrap();
        assert!(p.dialog.answerable);
        assert_eq!(p.dialog.kind(), "permission");
        f.idle_since = Some(t(101));
        let d = derive(&f);
        assert!(d.pending_dialog.is_none());
        assert!(d.spool_is_stale);
    }

    #[test]
    fn a_screen_dialog_shows_when_nothing_is_spooled_and_is_answerable_once() {
        let mut screen = dialog("trust");
        screen.call_id = None;
        let answered = set(&["trust"]);
        let mut f = Facts { hooker: true, screen: Some(screen), ..Default::default() };
        let d = derive(&f);
        assert_eq!(d.state, RunState::Question);
        let p = d.pending_dialog.unwrap();
        assert_eq!(p.source, DialogSource::Screen);
        assert!(p.dialog.answerable);
        f.answered = Some(&answered);
        assert!(!derive(&f).pending_dialog.unwrap().dialog.answerable);
        // A live spool wins over the screen.
        f.spool = Some(spool("t1"));
        assert_eq!(derive(&f).pending_dialog.unwrap().source, DialogSource::Spool);
    }

    #[test]
    fn the_api_shape_of_each_dialog_kind() {
        let p = PendingDialog { dialog: dialog("t1"), source: DialogSource::Spool };
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["tool_id"], "t1");
        assert_eq!(v["kind"], "question");
        assert_eq!(v["questions"][0]["options"][0]["label"], "a");
        assert_eq!(v["source"], "spool");
        assert!(v["permission"].is_null() && v["generic"].is_null(), "always sent, null for another kind: {v}");
        assert!(v.get("permission").is_some() && v.get("generic").is_some());
        let p = PendingDialog { dialog: permission("p1", t(1)).dialog.unwrap(), source: DialogSource::Spool };
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["kind"], "permission");
        assert_eq!(v["permission"]["summary"], "rm -rf build");
        assert_eq!(v["options"][0]["label"], "Yes");
        assert_eq!(v["call_id"], serde_json::Value::Null);
        assert_eq!(v["questions"], serde_json::json!([]));
    }
}
