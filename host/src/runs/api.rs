//! The runs' API types: the request and response bodies of the HTTP routes about runs,
//! and the errors they map to (validation lives in [`super::answer::input`]).

use super::answer::answer_guard::GuardError;
use super::answer::input::{ComposerLock, TextError};
use super::live::view::{PendingDialog, RunState, SeqMessage};
use crate::store::paths::RunId;
use serde::Serialize;

/// Errors the HTTP API turns into `{"error", "message"}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    #[error("no run with that id")]
    NotFound,
    #[error("{0}")]
    BadRequest(String),
    #[error("a dialog is pending: answer it first")]
    DialogPending,
    /// The agent waits on something else lab knows of (see [`input::composer_lock`]).
    #[error("{message}")]
    ComposerLocked { code: &'static str, message: String },
    /// Text over its documented size limit.
    #[error("{0}")]
    TooLarge(String),
    #[error("a different dialog is pending ({pending})")]
    DialogChanged { pending: String },
    #[error("no dialog is pending for that tool_id (nothing pending, or it was already answered)")]
    NoDialog,
    #[error("this dialog cannot be answered from lab: answer it in the terminal")]
    NotAnswerable,
    /// The prompt was not on the agent's screen (drawn and still) in time: nothing was typed.
    #[error("{0}")]
    NotOnScreen(String),
    /// The keys were typed but the prompt is still there: they did not take.
    #[error("{0}")]
    AnswerLost(String),
    #[error("the run has ended")]
    RunEnded,
    /// The run has no worktree (or no longer: discarded, gone).
    #[error("{0}")]
    NoWorktree(String),
    /// Only for an ended run.
    #[error("the run is still active: stop it first")]
    RunActive,
    #[error("{0}")]
    LaunchFailed(String),
    /// The run's provider (or where it runs) cannot do what was asked: resume, fork.
    #[error("{0}")]
    NotSupported(String),
    /// There is nothing to resume or fork (a live run, a launch that failed, an agent
    /// that never named its session).
    #[error("{0}")]
    NotResumable(String),
    /// The run's host has no runner connected.
    #[error(
        "host `{0}` is not connected, so nothing was sent: GET /hosts says why (a host over ssh is dialled again by \
         lab; a dial-back host needs its `lab runner --connect … --name {0}` running)"
    )]
    HostDown(String),
    #[error("{0}")]
    Internal(String),
}

impl From<ComposerLock> for RunError {
    fn from(l: ComposerLock) -> Self {
        match l.code {
            "run_ended" => RunError::RunEnded,
            "dialog_pending" => RunError::DialogPending,
            code => RunError::ComposerLocked { code, message: l.message },
        }
    }
}

impl RunError {
    /// How the HTTP API answers this error: its status and its `error` code, in one
    /// table (an answer's progress reports the same code).
    pub fn wire(&self) -> (u16, &'static str) {
        match self {
            RunError::NotFound => (404, "run_not_found"),
            RunError::BadRequest(_) => (400, "bad_request"),
            RunError::DialogPending => (409, "dialog_pending"),
            RunError::ComposerLocked { code, .. } => (409, code),
            RunError::TooLarge(_) => (413, "payload_too_large"),
            RunError::DialogChanged { .. } => (409, "dialog_changed"),
            RunError::NoDialog => (409, "no_dialog"),
            RunError::NotAnswerable => (422, "not_answerable"),
            RunError::NotOnScreen(_) => (409, "not_on_screen"),
            RunError::AnswerLost(_) => (409, "answer_lost"),
            RunError::RunEnded => (409, "run_ended"),
            RunError::NoWorktree(_) => (409, "no_worktree"),
            RunError::RunActive => (409, "run_active"),
            RunError::LaunchFailed(_) => (422, "launch_failed"),
            RunError::NotSupported(_) => (422, "not_supported"),
            RunError::NotResumable(_) => (409, "not_resumable"),
            RunError::HostDown(_) => (409, "host_down"),
            RunError::Internal(_) => (500, "internal"),
        }
    }

    /// The `error` code the HTTP API answers with ([`RunError::wire`]).
    pub fn code(&self) -> &'static str {
        self.wire().1
    }

    /// Refused operator text: too long → 413, anything else → 400.
    pub(super) fn text(e: TextError, field: &str) -> Self {
        match e {
            TextError::TooLong { .. } => RunError::TooLarge(e.describe(field)),
            _ => RunError::BadRequest(e.describe(field)),
        }
    }
}

impl From<GuardError> for RunError {
    fn from(e: GuardError) -> Self {
        match e {
            GuardError::NoDialog => RunError::NoDialog,
            GuardError::DialogChanged { pending } => RunError::DialogChanged { pending },
        }
    }
}

/// The body of `GET /runs/{id}/messages` and of each SSE event.
#[derive(Debug, Clone, Serialize)]
pub struct ViewBody {
    pub run_id: RunId,
    pub state: RunState,
    pub pending_dialog: Option<PendingDialog>,
    pub blocked: Option<crate::agents::model::BlockedView>,
    /// Why `POST /runs/{id}/messages` would be refused now (`{"code", "message"}`), or
    /// null when a message can be sent.
    pub composer_lock: Option<ComposerLock>,
    /// The newest answer's progress (null before the first answer).
    pub answer: Option<AnswerProgress>,
    /// The run's changes against its worktree's base, in counts (`{"files_changed",
    /// "additions", "deletions"}`), kept up to date as the agent works; null for a run
    /// without a worktree, or before the first count.
    pub diff: Option<crate::worktree::diff::Summary>,
    /// The run's host is unreachable now (its runner is not connected): what the view
    /// shows is as of then, and answers and messages are refused (`host_down`).
    pub disconnected: bool,
    /// Why the mirror of the transcript of this run on a host stopped growing (a cap
    /// or lab's disk; said in full), or null: what the agent wrote after is not shown.
    pub transcript_stopped: Option<String>,
    /// The agent stopped at its account's usage limit: when it resets and when lab goes
    /// on by itself (null: no limit is the run's last word).
    pub usage_limit: Option<LimitView>,
    /// The device that has taken control of the run's terminal (`{"device_id",
    /// "device_name", "since"}`), or null.
    pub terminal_control: Option<super::answer::terminal_control::Holder>,
    /// A sandboxed run's egress (see [`RunBody::egress`]).
    pub egress: Option<crate::sandbox::egress::EgressView>,
    /// The dry-run rule that would have answered the run's newest prompt, or null.
    pub would_answer: Option<WouldAnswer>,
    /// Older messages than those sent exist and were left out (a page, `?limit=`).
    pub more_before: bool,
    /// Newer messages than those sent exist and were left out (`?after=…&limit=`).
    pub more_after: bool,
    pub messages: Vec<SeqMessage>,
}

/// A run as `GET /runs/{id}` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct RunBody {
    pub id: RunId,
    pub provider: String,
    pub workdir: String,
    pub state: RunState,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    pub tmux_target: String,
    pub tmux_socket: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub permission_mode: Option<String>,
    pub dialog_hooker: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The newest answer's progress (see [`AnswerProgress`]).
    pub answer: Option<AnswerProgress>,
    /// The run's own worktree, where the agent runs (null: it runs in `workdir`).
    pub worktree: Option<crate::worktree::Worktree>,
    /// The worktree's diff summary as the view has it (null without a worktree, or
    /// before it was first counted).
    pub diff: Option<crate::worktree::diff::Summary>,
    /// The host it runs on (null: this machine).
    pub host: Option<String>,
    /// The build of its provider a live run uses: the one it started with, or after
    /// lab serve restarted, the one serving then (left out for ended and ACP runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_build: Option<super::providers::Build>,
    /// Why it ended (null while live, or for a run that ended before lab kept it).
    pub end_reason: Option<String>,
    /// `POST /runs/{id}/resume` would bring it back: ended, its agent's session known,
    /// its provider able to resume it, its worktree still there.
    pub resumable: bool,
    /// `POST /runs/{id}/fork` would start a new run from its conversation.
    pub forkable: bool,
    /// The run it was forked from (null: none).
    pub parent: Option<RunId>,
    /// `{"on", "prompt"}`: whether it goes on by itself once a usage limit resets, and
    /// with what message (null: a run from before lab offered it).
    pub resume_after_limit: Option<super::registry::AutoResume>,
    /// The sandbox its agent runs in: `none`, `bwrap` or `podman`.
    pub sandbox: crate::sandbox::Kind,
    /// A sandboxed run's egress: its allowlist, what it reached and was refused (null
    /// without a sandbox).
    pub egress: Option<crate::sandbox::egress::EgressView>,
    /// Whether answer rules answer its prompts (`PUT /runs/{id}/rules`).
    pub answer_rules: bool,
}

impl RunBody {
    /// A run as its record says, with the view's state, answer and diff.
    pub fn of(
        r: &super::registry::RunRecord,
        state: RunState,
        answer: Option<AnswerProgress>,
        diff: Option<crate::worktree::diff::Summary>,
    ) -> RunBody {
        // Field by field: the record's prompt (up to 256 KiB) is not part of the body.
        RunBody {
            id: r.id.clone(),
            provider: r.provider.clone(),
            workdir: r.workdir.clone(),
            state,
            created_at: r.created_at.clone(),
            ended_at: r.ended_at.clone(),
            tmux_target: r.tmux_target.clone(),
            tmux_socket: Some(r.tmux_socket.clone()),
            session_id: r.session_id.clone(),
            permission_mode: r.permission_mode.clone(),
            dialog_hooker: r.dialog_hooker,
            error: r.error.clone(),
            answer,
            worktree: r.worktree.clone(),
            diff,
            host: r.host.clone(),
            provider_build: None,
            end_reason: r.end_reason.clone(),
            resumable: false,
            forkable: false,
            parent: r.parent.clone(),
            resume_after_limit: r.resume_after_limit.clone(),
            sandbox: r.sandbox,
            egress: None,
            answer_rules: !r.rules_off,
        }
    }
}

/// How a launch continues an earlier conversation: handed to the provider's
/// `continue-session` in place of `launch`.
#[derive(Debug, Clone)]
pub(crate) struct Continuing {
    pub how: crate::agents::model::Continuation,
    pub earlier: crate::agents::model::EarlierRun,
    /// The operator's next message ("" for none: the agent starts idle).
    pub prompt: String,
}

/// A fork's request: its parent, the parent's worktree to branch from (None: the
/// parent ran in its workdir's own checkout) and the conversation it carries over.
#[derive(Debug, Clone)]
pub(crate) struct ForkOf {
    pub parent: RunId,
    pub worktree: Option<crate::worktree::Worktree>,
    pub continuing: Continuing,
}

/// The limit as a run's view shows it (`usage_limit`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LimitView {
    /// When the limit resets (RFC 3339, UTC), if the agent said.
    pub resets_at: Option<String>,
    /// The agent's own words.
    pub text: String,
    /// When lab will go on by itself, if it will (on for the run, a reset time known).
    pub resume_at: Option<String>,
}

/// The request body of `POST /runs`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateRun {
    pub provider: String,
    pub workdir: String,
    pub prompt: String,
    #[serde(default)]
    pub permission_mode: Option<String>,
    /// A worktree of its own (default: yes inside a git repository with a commit,
    /// unless lab.toml's `[runs] worktree` says no).
    #[serde(default)]
    pub worktree: Option<bool>,
    /// The host to run on (`lab hosts`); absent: this machine.
    #[serde(default)]
    pub host: Option<String>,
    /// Go on by itself once a usage limit its agent hits resets (default: lab.toml's
    /// `[runs] resume_after_limit`, else no).
    #[serde(default)]
    pub resume_after_limit: Option<bool>,
    /// `none`, `bwrap` or `podman` (default: lab.toml's `[sandbox] default`, else
    /// `none`).
    #[serde(default)]
    pub sandbox: Option<String>,
    /// Set by `POST /runs/{id}/fork`, never by a client: the run this one is forked
    /// from, and how its conversation is carried over.
    #[serde(skip)]
    pub(super) fork: Option<ForkOf>,
}

/// Where an answer is, once the answer POST has returned (`202`): shown as `answer` in
/// the view (so on the event stream) and in `GET /runs/{id}`. The newest answer of the
/// run stays there until the next one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AnswerProgress {
    pub tool_id: String,
    pub state: AnswerState,
    /// The keys of the provider's plan, as the POST returned them.
    pub keys: Vec<String>,
    /// How many of them have been sent to the pane (in the current try).
    pub played: usize,
    /// How often the keys were played again because the prompt stayed unchanged (no key
    /// took); omitted when never.
    #[serde(skip_serializing_if = "is_zero")]
    pub replays: u32,
    /// Why the answer was not played (or not to the end): `{"error", "message"}` as the
    /// POST would have answered it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<AnswerFailure>,
    pub started_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// The answer rule that gave this answer (null: the operator did).
    pub answered_by: Option<AnsweredBy>,
}

/// A dry-run answer rule that would have answered the prompt `tool_id`: `{"tool_id",
/// "rule", "name", "action"}` (the card says so; nothing was answered).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WouldAnswer {
    pub tool_id: String,
    pub rule: String,
    pub name: String,
    pub action: &'static str,
}

/// An answer rule that answered a prompt in the operator's place: `{"rule", "name"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AnsweredBy {
    /// The rule's id.
    pub rule: String,
    pub name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerState {
    /// Waiting for the prompt to be drawn (the provider's `is-drawn`), then the guard again.
    Waiting,
    /// Sending the keys, `played` of them so far.
    Playing,
    /// Every key was sent and the prompt went away.
    Played,
    /// Every key was sent (again, if nothing took the first time), but the prompt is
    /// still there: see `error` (`answer_lost`). Answer it in the terminal.
    Lost,
    /// Not played (or not to the end): see `error` — `not_on_screen` when the prompt was
    /// not on the agent's screen, so nothing was typed.
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AnswerFailure {
    pub error: &'static str,
    pub message: String,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl AnswerProgress {
    pub fn in_flight(&self) -> bool {
        matches!(self.state, AnswerState::Waiting | AnswerState::Playing)
    }
}
