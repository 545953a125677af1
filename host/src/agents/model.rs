//! The host's own model of what providers say: every WIT version a component may be
//! built against is converted into these types in one place per version
//! (`components::v0_1_0`, `components::v0_2_0`), and the rest of the host speaks only
//! these. They carry no agent knowledge: what a dialog looks like, how to answer it
//! and how long to wait is data from the provider.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Who a provider is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderInfo {
    pub name: String,
    /// What the UI calls the agent.
    pub display_name: String,
    pub version: String,
    pub description: String,
    pub default_program: String,
    /// What `permission_mode` accepts; the first is the UI's default.
    pub permission_modes: Vec<String>,
}

/// How a component says to start the ACP agent it declares (WIT 0.3.0 and 0.4.0 `acp-agent`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AcpLaunch {
    /// Arguments after the program (`ProviderInfo::default_program`).
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// `initialize` + `session/new` budget; None: the host's default.
    pub start_timeout_secs: Option<u64>,
}

/// What a provider's agent can do with an earlier conversation (WIT 0.4.0
/// `sessions.abilities`; a component of an older WIT: nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Abilities {
    pub resume: bool,
    pub fork: bool,
}

/// How a launch continues an earlier conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Continuation {
    /// The same run goes on, its transcript appended to.
    Resume,
    /// A new run from a copy of the conversation.
    Fork,
}

impl Continuation {
    /// "resume" or "fork".
    pub fn verb(self) -> &'static str {
        match self {
            Continuation::Resume => "resume",
            Continuation::Fork => "fork",
        }
    }
}

/// The conversation a run had, as lab recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EarlierRun {
    pub session_id: String,
    pub transcript_path: Option<String>,
    pub workdir: String,
}

/// The agent stopped because its account reached a usage limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageLimit {
    /// When it resets (Unix seconds, UTC), if the agent said.
    pub resets_at: Option<i64>,
    pub text: String,
}

/// Tokens, as the model's API counted them (WIT `usage.tokens`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tokens {
    /// Input tokens not read from or written to a prompt cache.
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Tokens {
    pub fn plus(&self, o: &Tokens) -> Tokens {
        Tokens {
            input: self.input.saturating_add(o.input),
            output: self.output.saturating_add(o.output),
            cache_read: self.cache_read.saturating_add(o.cache_read),
            cache_write: self.cache_write.saturating_add(o.cache_write),
        }
    }
    pub fn minus(&self, o: &Tokens) -> Tokens {
        Tokens {
            input: self.input.saturating_sub(o.input),
            output: self.output.saturating_sub(o.output),
            cache_read: self.cache_read.saturating_sub(o.cache_read),
            cache_write: self.cache_write.saturating_sub(o.cache_write),
        }
    }
    pub fn is_zero(&self) -> bool {
        *self == Tokens::default()
    }
}

/// The usage of one model response (WIT `usage.response-usage`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseUsage {
    pub response_id: String,
    pub model: Option<String>,
    pub tokens: Tokens,
    /// RFC 3339 (empty if the line had none).
    pub timestamp: String,
}

/// How full the context window is (WIT `usage.context-use`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ContextUse {
    pub used: u64,
    pub window: Option<u64>,
}

/// One of the account's rate-limit windows (WIT `usage.limit-window`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LimitWindow {
    pub name: String,
    pub used_percent: f64,
    /// Unix seconds.
    pub resets_at: Option<i64>,
    pub minutes: Option<u32>,
}

/// An API error the agent met (WIT `usage.api-error`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ApiError {
    pub text: String,
    pub timestamp: String,
}

/// What a transcript chunk says about usage (WIT `usage.usage-report`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageReport {
    pub responses: Vec<ResponseUsage>,
    pub model: Option<String>,
    pub context: Option<ContextUse>,
    pub windows: Vec<LimitWindow>,
    pub errors: Vec<ApiError>,
}

impl UsageReport {
    pub fn is_empty(&self) -> bool {
        self.responses.is_empty()
            && self.model.is_none()
            && self.context.is_none()
            && self.windows.is_empty()
            && self.errors.is_empty()
    }
}

/// A lab channel an agent hook feeds (the `lab hook` verb the host builds for it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Channel {
    DialogSpool,
    /// Clear the spool when these JSON pointers are equal in the payload and the spool.
    DialogClear(Vec<String>),
    BlockedMarker,
    SessionInfo,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookBinding {
    pub event: String,
    pub matcher: Option<String>,
    pub channel: Channel,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookCommand {
    pub binding: HookBinding,
    pub command: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchRequest {
    pub run_id: String,
    pub session_id: String,
    pub workdir: String,
    pub prompt: String,
    pub permission_mode: Option<String>,
    pub program: String,
    pub env: Vec<(String, String)>,
    pub hooks: Vec<HookCommand>,
    pub settings_path: Option<String>,
}

/// Where the agent's transcript is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transcript {
    Path(String),
    /// Named later through the session-info channel.
    FromSessionInfo,
    None,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchSpec {
    pub argv: Vec<String>,
    pub transcript: Transcript,
    pub session_id: Option<String>,
    pub env: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
    System,
    Tool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolUse {
    pub id: String,
    pub name: String,
    pub input_json: String,
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    pub id: String,
    pub text: String,
    pub is_error: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    Text(String),
    Thinking(String),
    ToolUse(ToolUse),
    ToolResult(ToolResult),
    Other { kind: String, text: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: Role,
    pub content: Content,
    pub timestamp: String,
}

impl Message {
    pub fn text(role: Role, text: impl Into<String>, timestamp: impl Into<String>) -> Self {
        Message { role, content: Content::Text(text.into()), timestamp: timestamp.into() }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnSignal {
    Working,
    Idle,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub line: u32,
    pub message: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParseOutput {
    pub messages: Vec<Message>,
    pub turn: Option<TurnSignal>,
    pub session_id: Option<String>,
    pub diagnostics: Vec<Diagnostic>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DialogOption {
    pub label: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    pub header: String,
    pub question: String,
    pub multi_select: bool,
    pub options: Vec<DialogOption>,
}

/// Serialised as-is for a runner (the drawn check next to the agent), never as an API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum DialogBody {
    Question(Vec<Question>),
    Plan {
        plan: Option<String>,
        options: Vec<DialogOption>,
        feedback_option: Option<u32>,
        /// Where the agent wrote the plan when `plan` is none; the host reads it.
        plan_file: Option<String>,
    },
    Permission {
        tool: String,
        summary: String,
        reason: Option<String>,
        options: Vec<DialogOption>,
        feedback_option: Option<u32>,
    },
    Generic {
        title: String,
        text: String,
        options: Vec<DialogOption>,
    },
}

/// A prompt the agent waits on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dialog {
    /// The answer-guard token.
    pub id: String,
    /// The transcript tool call the prompt is about, when known.
    pub call_id: Option<String>,
    pub tool_name: String,
    pub body: DialogBody,
    pub answerable: bool,
    pub deep_link: Option<String>,
}

impl Dialog {
    /// Whether `pane` shows this prompt's own words, for a provider that cannot tell
    /// (WIT 0.1.0 has no `is-drawn`): the first question and its first option, or the
    /// permission's summary, or the first option, or the title, each found in the pane
    /// with runs of whitespace made one. Agent-neutral: only what the dialog says.
    pub fn words_shown_in(&self, pane: &str) -> bool {
        fn squash(s: &str) -> String {
            s.split_whitespace().collect::<Vec<_>>().join(" ")
        }
        let p = squash(pane);
        let shown = |s: &str| {
            let s = squash(s.lines().next().unwrap_or_default());
            !s.is_empty() && p.contains(&s)
        };
        match &self.body {
            DialogBody::Question(qs) => {
                qs.first().is_some_and(|q| shown(&q.question) && q.options.first().is_none_or(|o| shown(&o.label)))
            }
            DialogBody::Permission { summary, options, .. } => {
                shown(summary) && options.first().is_none_or(|o| shown(&o.label))
            }
            DialogBody::Plan { options, .. } => options.first().is_some_and(|o| shown(&o.label)),
            DialogBody::Generic { title, options, .. } => {
                shown(title) && options.first().is_none_or(|o| shown(&o.label))
            }
        }
    }

    /// "question", "plan", "permission" or "generic".
    pub fn kind(&self) -> &'static str {
        match &self.body {
            DialogBody::Question(_) => "question",
            DialogBody::Plan { .. } => "plan",
            DialogBody::Permission { .. } => "permission",
            DialogBody::Generic { .. } => "generic",
        }
    }

    pub fn questions(&self) -> &[Question] {
        match &self.body {
            DialogBody::Question(q) => q,
            _ => &[],
        }
    }

    /// The options of a plan, permission or generic dialog (empty for questions).
    pub fn options(&self) -> &[DialogOption] {
        match &self.body {
            DialogBody::Question(_) => &[],
            DialogBody::Plan { options, .. }
            | DialogBody::Permission { options, .. }
            | DialogBody::Generic { options, .. } => options,
        }
    }

    /// One line for humans: the first question, the permission's summary, the title.
    pub fn headline(&self) -> String {
        match &self.body {
            DialogBody::Question(q) => q.first().map(|q| q.question.clone()).unwrap_or_default(),
            DialogBody::Plan { .. } => format!("{}: a plan to approve", self.tool_name),
            DialogBody::Permission { tool, summary, .. } => format!("{tool}: {summary}"),
            DialogBody::Generic { title, .. } => title.clone(),
        }
    }
}

/// What answer rules need of a prompt, from whoever knows the agent (its provider; the
/// protocol, for an ACP agent): what the prompt is about, and which of its options
/// lets this one call go ahead or refuses it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromptFacts {
    /// The command, path or URL the prompt is about, exactly (not a summary).
    pub subject: Option<String>,
    /// The option that lets this one call go ahead (never one that also allows later
    /// calls): what an `allow` rule answers.
    pub allow_once: Option<u32>,
    /// The option that refuses it: what a `deny` rule answers (with its message when
    /// this is the dialog's feedback option).
    pub refuse: Option<u32>,
}

/// Where an agent keeps a login (a provider's `setup.login`): variables any one of which
/// set is a login, files any one of which present holds one (`~/` for its HOME), and
/// how to log in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoginHints {
    pub env: Vec<String>,
    pub files: Vec<String>,
    pub how: String,
}

/// The operator's answer to one question (or to a plan, permission or generic prompt).
/// JSON: `{"option": i}`, `{"options": [i, …]}`, `{"other": "text"}`,
/// `{"feedback": {"option": i, "text": "…"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Answer {
    Option(u32),
    Options(Vec<u32>),
    Other(String),
    Feedback { option: u32, text: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyOp {
    Key(String),
    Literal(String),
}

/// How to answer, from the provider: wait until the prompt is drawn (at most
/// `drawn_within`; then `settle` more when it was seen drawn), then play `steps` with
/// `pause` after each but the last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerPlan {
    pub drawn_within: Duration,
    pub settle: Duration,
    pub pause: Duration,
    pub steps: Vec<KeyOp>,
}

/// The kind of an `Content::Other` message that says the agent's turn ended on an
/// error (the model API refused it: a rate limit, an overload, billing). A provider
/// convention within WIT 0.2.0 (docs/providers.md, "Messages"): while it is the run's
/// last message, the run shows as blocked on [`BlockedKind::Error`] with its text.
pub const TURN_ERROR_KIND: &str = "turn_error";

/// The agent's own word for a block lab derived from a [`TURN_ERROR_KIND`] message
/// (what the deprecated `blocked.notification_type` says for it).
pub const BLOCKED_ERROR: &str = "error";

/// Why the agent is blocked, as its provider reads the marker: `kind` is the agent's
/// own word for it (lower_snake, "unknown" when the agent gave none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub kind: String,
    pub message: String,
}

/// What a blocked run waits on, in lab's own words (the API's `blocked.kind`): the
/// same for every agent. May grow (additions only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockedKind {
    /// The agent waits on something in its terminal in the middle of a turn (a
    /// permission prompt lab cannot read, a question): answer it there.
    NeedsInput,
    /// The agent ended its turn and says it waits for the operator's next message.
    Idle,
    /// The agent's turn ended on an error (the model API refused it); sending a message
    /// again retries.
    Error,
}

/// A run's block as the API shows it: `{"kind", "message", "notification_type"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlockedView {
    pub kind: BlockedKind,
    pub message: String,
    /// The agent's own word for the block (its provider's `blocked.kind`). Deprecated
    /// on the wire: sent one release more, as `notification_type`, then dropped.
    #[serde(rename = "notification_type")]
    pub agent_kind: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionFacts {
    pub transcript_path: Option<String>,
    pub session_id: Option<String>,
}

/// `lab providers check`'s self-test samples.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Samples {
    pub transcript_lines: Vec<String>,
    pub dialog_calls: Vec<ToolUse>,
}
