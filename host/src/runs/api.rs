//! The runs' API types: the request and response bodies of the HTTP routes about runs,
//! and the errors they map to (validation lives in [`super::input`]).

use super::*;

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
    #[error("the run has ended")]
    RunEnded,
    #[error("{0}")]
    LaunchFailed(String),
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
    pub blocked: Option<crate::model::Blocked>,
    /// Why `POST /runs/{id}/messages` would be refused now (`{"code", "message"}`), or
    /// null when a message can be sent.
    pub composer_lock: Option<ComposerLock>,
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
}
