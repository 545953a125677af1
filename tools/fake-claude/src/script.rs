//! The JSON script that tells fake-claude what to do (see README.md for the format).

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// true: the assistant `tool_use` line is written when the picker opens (2.1.198 as
    /// observed in the notes); false: nothing is written until the dialog resolves, then
    /// tool_use + tool_result together, the tool_use keeping its original timestamp.
    #[serde(default = "yes")]
    pub flush_pending_tool_use: bool,
    /// The `version` field of transcript lines.
    #[serde(default = "default_version")]
    pub version: String,
    /// The `message.model` of assistant lines.
    #[serde(default = "default_model")]
    pub model: String,
    /// `effort.level` in PreToolUse payloads.
    #[serde(default = "default_effort")]
    pub effort: String,
    /// Default per-hook timeout (a hook's own `timeout`, in seconds, wins).
    #[serde(default = "default_hook_timeout")]
    pub hook_timeout_ms: u64,
    pub steps: Vec<Step>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    Say(String),
    Ask(AskStep),
    Plan(PlanStep),
    Notify(NotifyStep),
    Bash(BashStep),
    Write(WriteStep),
    Idle(IdleStep),
    ApiError(ApiErrorStep),
    SleepMs(u64),
    /// `{"fetch": "http://host:port/path"}`: a GET, through the proxy `http_proxy`
    /// (`HTTP_PROXY`) names when set (as the real agents go), else straight; the answer's
    /// status line and body are said as an assistant text.
    Fetch(String),
    /// `{"sh": "command"}`: really runs `sh -c command` in the working directory (at
    /// most 120 s, stdin empty) and says `sh: <stdout and stderr>` as an assistant text:
    /// a probe of what the agent's process can do where it runs (a sandbox's tests).
    Sh(String),
    /// Wait until this file (relative to the workdir) exists, for at most two minutes:
    /// a test says "go on" with a fact, not a guessed delay.
    WaitFile(String),
    Exit(i32),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskStep {
    pub questions: Vec<Question>,
    /// Fire a `permission_prompt` Notification if the picker is still open after this long.
    #[serde(default)]
    pub notify_after_ms: Option<u64>,
    /// Auto-continue (the 2.1.198 AFK behaviour) if no key at all arrives for this long.
    #[serde(default)]
    pub afk_after_ms: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Question {
    pub question: String,
    #[serde(default)]
    pub header: String,
    pub options: Vec<QOption>,
    #[serde(rename = "multiSelect", default)]
    pub multi_select: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct QOption {
    pub label: String,
    #[serde(default)]
    pub description: String,
}

/// `{"api_error": {"error": "rate_limit", "text": "API Error: …"}}`: the model API
/// refused the turn, as 2.1.332 records it — an assistant line with
/// `isApiErrorMessage: true`, the class in `error` and `stop_reason: stop_sequence`, then
/// the `StopFailure` hooks (no Stop hook); the turn is over.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiErrorStep {
    #[serde(default = "unknown_error")]
    pub error: String,
    pub text: String,
}

fn unknown_error() -> String {
    "unknown".into()
}

/// `{"plan": "markdown"}` or `{"plan": {"plan": "markdown", "notify_after_ms": 500}}`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum PlanStep {
    Text(String),
    Full {
        plan: String,
        #[serde(default)]
        notify_after_ms: Option<u64>,
        /// As on 2.1.332: the plan is written to `<config>/plans/` first and the tool
        /// input names the file (`planFilePath`) without the text.
        #[serde(default)]
        file_only: bool,
        /// As on 2.1.332: the PreToolUse hook's `tool_input` is `{}` (the transcript's
        /// tool_use keeps the plan).
        #[serde(default)]
        empty_hook_input: bool,
    },
}

impl PlanStep {
    pub fn plan(&self) -> &str {
        match self {
            PlanStep::Text(p) => p,
            PlanStep::Full { plan, .. } => plan,
        }
    }
    pub fn notify_after_ms(&self) -> Option<u64> {
        match self {
            PlanStep::Text(_) => None,
            PlanStep::Full { notify_after_ms, .. } => *notify_after_ms,
        }
    }
    pub fn file_only(&self) -> bool {
        matches!(self, PlanStep::Full { file_only: true, .. })
    }
    pub fn empty_hook_input(&self) -> bool {
        matches!(self, PlanStep::Full { empty_hook_input: true, .. })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyStep {
    #[serde(default = "default_notification_type")]
    pub notification_type: String,
    #[serde(default = "default_notification_message")]
    pub message: String,
}

/// A Write tool call the agent may make without asking (as in `acceptEdits` mode): the
/// file in the working directory really is written (or deleted).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteStep {
    /// Relative to the working directory.
    pub path: String,
    #[serde(default)]
    pub text: Option<String>,
    /// Raw bytes (a binary file), instead of `text`.
    #[serde(default)]
    pub bytes: Option<Vec<u8>>,
    /// Delete the file instead.
    #[serde(default)]
    pub delete: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BashStep {
    pub command: String,
    #[serde(default)]
    pub description: Option<String>,
    /// What the (not actually run) command "printed", used as the tool_result on Yes.
    #[serde(default)]
    pub output: String,
    #[serde(default = "default_bash_notify")]
    pub notify_after_ms: u64,
    /// The PermissionRequest payload's `permission_suggestions`; the first one words the
    /// prompt's second row. Default: add the working directory, then `setMode
    /// acceptEdits` (what 2.1.198 suggested for a Bash call in the project).
    #[serde(default)]
    pub permission_suggestions: Option<Vec<Value>>,
    /// Whether the PermissionRequest hooks run as the prompt is drawn (default true, as
    /// on 2.1.198). `false`: an agent that tells only through its Notification, ~6 s
    /// later — what lab's composer locks must cover when no dialog explains the wait.
    #[serde(default = "default_true")]
    pub permission_request: bool,
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdleStep {
    /// Text of the closing `end_turn` assistant line when the previous step was not a `say`.
    #[serde(default)]
    pub say: Option<String>,
    /// Fire an `idle_prompt` Notification if no message arrives within this long.
    #[serde(default)]
    pub notify_after_ms: Option<u64>,
}

fn yes() -> bool {
    true
}
fn default_version() -> String {
    "2.1.198".into()
}
fn default_model() -> String {
    "claude-sonnet-4-5-20250929".into()
}
fn default_effort() -> String {
    "high".into()
}
fn default_hook_timeout() -> u64 {
    60_000
}
fn default_notification_type() -> String {
    "permission_prompt".into()
}
fn default_notification_message() -> String {
    "Claude needs your permission".into()
}
fn default_bash_notify() -> u64 {
    300
}

impl Script {
    pub fn load(path: &str) -> Result<Script, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read script {path:?}: {e}"))?;
        let script: Script = serde_json::from_str(&text).map_err(|e| format!("bad script {path:?}: {e}"))?;
        for (i, step) in script.steps.iter().enumerate() {
            if let Step::Ask(a) = step {
                if a.questions.is_empty() {
                    return Err(format!("bad script {path:?}: step {i}: ask needs at least one question"));
                }
                if let Some(q) = a.questions.iter().find(|q| q.options.is_empty()) {
                    return Err(format!("bad script {path:?}: step {i}: question {:?} has no options", q.question));
                }
            }
        }
        Ok(script)
    }
}

/// The AskUserQuestion `tool_input` for these questions, shaped like Claude's.
pub fn ask_tool_input(questions: &[Question]) -> Value {
    serde_json::json!({ "questions": questions })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_step_kind() {
        let s: Script = serde_json::from_str(
            r##"{"flush_pending_tool_use": false, "steps": [
                {"say": "hi"},
                {"ask": {"questions": [{"question": "Q?", "header": "H", "options": [{"label": "A", "description": "a"}], "multiSelect": true}]}},
                {"plan": "# Plan"},
                {"plan": {"plan": "# Plan", "notify_after_ms": 10}},
                {"notify": {"notification_type": "permission_prompt", "message": "m"}},
                {"bash": {"command": "ls"}},
                {"bash": {"command": "ls", "permission_suggestions": []}},
                {"idle": {}},
                {"sleep_ms": 5},
                {"exit": 3}
            ]}"##,
        )
        .unwrap();
        assert!(!s.flush_pending_tool_use);
        assert_eq!(s.steps.len(), 10);
        assert!(matches!(s.steps[9], Step::Exit(3)));
        assert!(matches!(&s.steps[6], Step::Bash(b) if b.permission_suggestions.as_deref() == Some(&[][..])));
        assert!(serde_json::from_str::<Script>(r#"{"steps": [{"dance": 1}]}"#).is_err());
    }
}
