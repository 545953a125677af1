//! # lab-provider-sdk
//!
//! Everything a provider author needs to write a lab provider component in Rust:
//!
//! - the boundary types ([`Dialog`], [`Message`], [`AnswerPlan`], [`HookBinding`], …),
//!   generated from the WIT package `lab:provider@0.9.0` and re-exported as they are:
//!   there is one definition of each, the WIT's;
//! - the traits a provider implements: [`Provider`] (every tmux provider),
//!   [`DialogHooker`] (live capture through the agent's hooks, keystroke answers) and
//!   [`ScreenReader`] (prompts read off the agent's screen); or [`AcpAgent`] alone, for
//!   an agent that speaks the Agent Client Protocol (lab speaks it; you declare how the
//!   agent starts);
//! - [`export_provider!`], [`export_dialog_provider!`], [`export_screen_provider!`] and
//!   [`export_acp_agent!`], which export your type as a component of exactly the world
//!   you ask for (lab finds the capabilities by what the component exports);
//! - helpers providers need again and again: [`jsonl`] (line splitting with
//!   diagnostics), [`json`] (field access), and constructors on the
//!   types ([`Message::text`], [`Dialog::new`], [`AnswerPlan::keys`], …).
//!
//! Build the provider crate (`crate-type = ["cdylib", "rlib"]`) with
//! `cargo build --release --target wasm32-wasip2`; the `.wasm` is the component. A
//! native build (`cargo test`) compiles the logic without the component glue. See
//! docs/providers.md in the lab repository for the guide.

#[doc(hidden)]
pub use wit_bindgen;

// The generated bindings name this crate by its public path.
extern crate self as lab_provider_sdk;

#[doc(hidden)]
pub mod bindings;

/// The WIT `types` interface as generated (the module export macros map to).
#[doc(hidden)]
pub use bindings::lab::provider::types;

/// The WIT package version this SDK builds components against.
pub const WIT_VERSION: &str = "0.9.0";

/// The WIT package text this SDK was built with.
pub const WIT: &str = include_str!("../../wit/v0.9.0/provider.wit");

pub use bindings::lab::provider::types::{
    Answer, AnswerPlan, Blocked, Channel, Content, Diagnostic, Dialog, DialogBody, DialogOption, GenericBody,
    HookBinding, HookCommand, KeyOp, LaunchRequest, LaunchSpec, Message, ParseOutput, PermissionBody, PlanBody,
    ProviderInfo, Question, Role, Samples, SessionFacts, ToolResult, ToolUse, TranscriptLocation, TurnSignal,
};

pub mod json;
pub mod jsonl;

/// What every provider implements.
pub trait Provider {
    fn info() -> ProviderInfo;
    /// The argv, environment and transcript location for a run.
    fn launch(req: LaunchRequest) -> Result<LaunchSpec, String>;
    /// Parse complete transcript lines (each ends in `\n`). Deterministic; bad lines
    /// become [`Diagnostic`]s. [`jsonl::parse_lines`] does the splitting for you.
    fn parse_transcript(chunk: &[u8]) -> ParseOutput;
    /// The dialog mapper: a transcript tool call → a dialog, or `None` for ordinary tools.
    fn map_dialog(call: ToolUse) -> Option<Dialog>;
    /// Samples for `lab providers check`'s self-test: lines your parser turns into at
    /// least one message each, and tool calls your mapper turns into a dialog each.
    fn self_test_samples() -> Samples;

    /// What your agent can do with an earlier conversation (WIT `sessions`). The
    /// default: nothing, so lab answers resume and fork with `422 not_supported`.
    fn abilities() -> Abilities {
        Abilities::default()
    }

    /// The launch that continues `earlier` the way `how` says (called only for what
    /// [`Provider::abilities`] allows). `req` is a new run's request: `req.workdir` where
    /// the agent runs now, `req.session_id` a fresh id for a new conversation,
    /// `req.prompt` the operator's next message or empty. The default refuses.
    fn continue_session(req: LaunchRequest, how: Continuation, earlier: EarlierRun) -> Result<LaunchSpec, String> {
        let _ = (req, earlier);
        Err(format!("this provider cannot {} a conversation", how.verb()))
    }

    /// Whether `msg` (an assistant or system message your parser made) says the agent
    /// stopped because its account reached a usage limit, and when it resets. The
    /// default: never.
    fn usage_limit(msg: &Message) -> Option<UsageLimit> {
        let _ = msg;
        None
    }

    /// What a transcript chunk (the bytes [`Provider::parse_transcript`] got) says about
    /// usage (WIT `usage`): each model response's tokens, as your agent wrote them (lab
    /// keeps one record per response id, so return a repeated one as it is), the
    /// context in use, the account's windows, API errors. The default: nothing, and
    /// lab shows no usage for your agent's runs.
    fn read_usage(chunk: &[u8]) -> UsageReport {
        let _ = chunk;
        UsageReport::default()
    }

    /// What your agent needs when the operator runs it in a sandbox (WIT `sandbox`),
    /// given the environment it starts with: the paths it writes (its state: `~/` is
    /// its HOME, a trailing `/` a directory) and reads, and the `host:port`s it must
    /// reach (its model API; look at the variable that names its base URL). The
    /// default: nothing, so a sandboxed run gets its workdir and no network.
    fn sandbox_needs(env: &[(String, String)]) -> SandboxNeeds {
        let _ = env;
        SandboxNeeds::default()
    }

    /// Where your agent keeps a login (WIT 0.9.0 `setup`), given the environment it
    /// starts with: the variables that carry an API key, the files a login leaves, and
    /// how to log in. `lab doctor` says from it whether the agent is logged in. The
    /// default: none (lab says it cannot tell).
    fn login_hints(env: &[(String, String)]) -> Option<LoginHints> {
        let _ = env;
        None
    }
}

/// Where an agent keeps a login ([`Provider::login_hints`], [`AcpAgent::login_hints`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoginHints {
    /// Variables any one of which, set and not empty, is a login.
    pub env: Vec<String>,
    /// Files any one of which, present and not empty, holds a login (`~/` for its HOME).
    pub files: Vec<String>,
    /// How to log in, in one line.
    pub how: String,
}

/// What an agent needs inside a sandbox (WIT `sandbox.sandbox-needs`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxNeeds {
    /// Paths it writes (`~/` for its HOME; a trailing `/`: a directory, made if missing).
    pub writable: Vec<String>,
    /// Paths it reads besides the system's and its program's directory.
    pub readable: Vec<String>,
    /// Destinations it must reach, `host:port` (`*.domain:port` for subdomains).
    pub hosts: Vec<String>,
}

impl SandboxNeeds {
    /// The `host:port` of a base URL (`https://api.example.com` → `api.example.com:443`),
    /// if it is one.
    pub fn host_of_url(url: &str) -> Option<String> {
        let (scheme, rest) = url.split_once("://")?;
        let default = match scheme {
            "https" => 443,
            "http" => 80,
            _ => return None,
        };
        let authority = rest.split(['/', '?', '#']).next()?.rsplit('@').next()?;
        if authority.is_empty() {
            return None;
        }
        let lower = authority.to_ascii_lowercase();
        let port_given = lower.rfind(':').is_some_and(|i| {
            let (host, port) = (&lower[..i], &lower[i + 1..]);
            !host.is_empty()
                && !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
                && (!host.contains(':') || host.ends_with(']'))
        });
        Some(if port_given { lower } else { format!("{lower}:{default}") })
    }
}

/// Tokens, as the model's API counted them (WIT `usage.tokens`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    /// Input tokens not read from or written to a prompt cache.
    pub input: u64,
    pub output: u64,
    /// Input tokens read from a prompt cache.
    pub cache_read: u64,
    /// Input tokens written to a prompt cache.
    pub cache_write: u64,
}

/// The usage of one model response (WIT `usage.response-usage`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseUsage {
    /// The API's id for the response (message id, response id).
    pub response_id: String,
    /// The model, as the API named it (None: the last [`UsageReport::model`]).
    pub model: Option<String>,
    pub tokens: Tokens,
    /// RFC 3339, from the transcript (empty if none).
    pub timestamp: String,
}

/// How full the context window is (WIT `usage.context-use`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContextUse {
    pub used: u64,
    /// The window's size, where the agent's records say it.
    pub window: Option<u64>,
}

/// One of the account's rate-limit windows (WIT `usage.limit-window`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitWindow {
    /// "5h", "weekly".
    pub name: String,
    /// Tenths of a percent used (0 to 1000).
    pub used_permille: u32,
    /// When it resets, in Unix seconds.
    pub resets_at: Option<i64>,
    pub minutes: Option<u32>,
}

/// An API error the agent met (WIT `usage.api-error`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiError {
    pub text: String,
    pub timestamp: String,
}

/// What a transcript chunk says about usage (WIT `usage.usage-report`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageReport {
    pub responses: Vec<ResponseUsage>,
    /// The model from now on, when a line names it apart from a response.
    pub model: Option<String>,
    pub context: Option<ContextUse>,
    pub windows: Vec<LimitWindow>,
    pub errors: Vec<ApiError>,
}

/// What an agent can do with an earlier conversation (WIT `sessions.abilities`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Abilities {
    /// Restore a conversation in a new process of the agent.
    pub resume: bool,
    /// Start a new conversation from a copy of an earlier one.
    pub fork: bool,
}

/// How a launch continues an earlier conversation (WIT `sessions.continuation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Continuation {
    /// The same run goes on; the agent appends to the run's transcript.
    Resume,
    /// A new run from a copy of the conversation, in a new working directory.
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

/// The conversation a run had, as lab recorded it (WIT `sessions.earlier-run`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EarlierRun {
    /// The agent's session id.
    pub session_id: String,
    /// The transcript lab read the run from, if known.
    pub transcript_path: Option<String>,
    /// The working directory the agent ran in.
    pub workdir: String,
}

/// The agent stopped at a usage limit (WIT `sessions.usage-limit`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageLimit {
    /// When it resets, in seconds since the Unix epoch (UTC), if the agent said.
    pub resets_at: Option<i64>,
    /// The agent's own words.
    pub text: String,
}

/// Live capture through the agent's hooks, and keystroke answers.
pub trait DialogHooker: Provider {
    /// Which agent hook events feed which lab channel.
    fn hook_wiring() -> Vec<HookBinding>;
    /// The agent's settings document for a per-run file, or `None` when the hooks go
    /// on the command line (see [`LaunchRequest::hooks`]).
    fn hook_settings(run_id: &str, hooks: &[HookCommand]) -> Result<Option<String>, String>;
    /// The dialog the spooled payload shows, or `None` if it is not a prompt.
    /// `open_calls`: the transcript's tool calls without a result yet, oldest first (to
    /// find `call_id` for a payload that lacks it).
    fn pending_dialog(spool: &[u8], open_calls: &[ToolUse]) -> Result<Option<Dialog>, String>;
    fn blocked_state(marker: &[u8]) -> Result<Blocked, String>;
    /// What a `session-info` hook payload says (transcript path, session id).
    fn session_info(payload: &[u8]) -> Result<SessionFacts, String>;
    /// The plan that answers `dialog` with `answers`.
    fn plan_answer(dialog: Dialog, answers: Vec<Answer>) -> Result<AnswerPlan, String>;
    /// Whether `pane` shows `dialog` ready for keys.
    fn is_drawn(dialog: &Dialog, pane: &str) -> bool;
    /// What lab's answer rules need of `dialog` (WIT 0.8.0 `answer-rules`): the exact
    /// command, path or URL it is about, and which option lets this one call go ahead
    /// and which refuses it. The default: nothing, and no rule ever answers the
    /// provider's prompts.
    fn prompt_facts(dialog: &Dialog) -> Option<PromptFacts> {
        let _ = dialog;
        None
    }
}

/// What answer rules need of a prompt ([`DialogHooker::prompt_facts`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromptFacts {
    /// The command as it will run, the file's absolute path, the URL; not a summary.
    pub subject: Option<String>,
    /// The option (0-based) that lets this one call go ahead and nothing more.
    pub allow_once: Option<u32>,
    /// The option that refuses the call.
    pub refuse: Option<u32>,
}

/// Prompts read off the agent's screen (shown before or outside any hook).
pub trait ScreenReader: DialogHooker {
    fn read_screen(pane: &str) -> Option<Dialog>;
}

/// An agent that speaks the Agent Client Protocol (JSON-RPC on its stdio): lab runs it
/// and speaks the protocol; the component only declares it ([`export_acp_agent!`]).
pub trait AcpAgent {
    /// Who it is: `name` (the provider name), `display_name`, `version`, `description`,
    /// `default_program` (the command, looked up on PATH unless a path; lab.toml's
    /// `[providers.<name>] program` replaces it) and `permission_modes` (the ACP session
    /// modes `permission_mode` takes, the default first; empty: the ones the agent
    /// reports).
    fn info() -> ProviderInfo;
    /// How it starts.
    fn launch() -> AcpLaunch;
    /// What a turn used, from the agent's `session/prompt` response (`response`: its
    /// `result` as JSON), when the agent says it only in its own words (its `_meta`)
    /// and not in the protocol's `usage` (lab reads that itself, and asks this only
    /// when it is absent): one entry per model that answered, each counted once. The
    /// default: nothing.
    fn turn_usage(response: &str) -> Vec<ModelTokens> {
        let _ = response;
        Vec::new()
    }
    /// Where the agent keeps a login, as [`Provider::login_hints`]. The default: none.
    fn login_hints(env: &[(String, String)]) -> Option<LoginHints> {
        let _ = env;
        None
    }
}

/// Tokens one model used in a turn (WIT `acp-agent.model-tokens`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelTokens {
    /// The model, as the API named it.
    pub model: String,
    /// Input tokens not read from or written to a prompt cache.
    pub input: u64,
    pub output: u64,
    /// Input tokens read from a prompt cache.
    pub cache_read: u64,
    /// Input tokens written to a prompt cache.
    pub cache_write: u64,
}

/// How an ACP agent starts (WIT `acp-agent.acp-launch`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AcpLaunch {
    /// Arguments after the program.
    pub args: Vec<String>,
    /// Environment on top of lab's (lab.toml's `[providers.<name>] env` goes over it).
    pub env: Vec<(String, String)>,
    /// Seconds `initialize` + `session/new` may take (0: lab's default, 60).
    pub start_timeout_secs: u32,
}

// The type is generated (no derive can be added to it).
#[allow(clippy::derivable_impls)]
impl Default for ParseOutput {
    fn default() -> Self {
        ParseOutput { messages: Vec::new(), turn: None, session_id: None, diagnostics: Vec::new() }
    }
}

impl Message {
    /// A plain text message.
    pub fn text(role: Role, text: impl Into<String>, timestamp: impl Into<String>) -> Self {
        Message { role, content: Content::Text(text.into()), timestamp: timestamp.into() }
    }

    /// The text the chat shows for this message, whatever its content.
    pub fn display_text(&self) -> &str {
        match &self.content {
            Content::Text(t) | Content::Thinking(t) => t,
            Content::ToolUse(u) => &u.summary,
            Content::ToolResult(r) => &r.text,
            Content::Other((_, t)) => t,
        }
    }

    /// The lower_snake name of its content, as the host's chat shows it (`kind`):
    /// "text", "thinking", "tool_use", "tool_result", or an `other`'s own.
    pub fn kind(&self) -> &str {
        match &self.content {
            Content::Text(_) => "text",
            Content::Thinking(_) => "thinking",
            Content::ToolUse(_) => "tool_use",
            Content::ToolResult(_) => "tool_result",
            Content::Other((k, _)) => k,
        }
    }
}

impl DialogOption {
    pub fn new(label: impl Into<String>, description: impl Into<String>) -> Self {
        DialogOption { label: label.into(), description: description.into() }
    }
}

impl Dialog {
    /// An answerable dialog with no transcript call and no deep link.
    pub fn new(id: impl Into<String>, tool_name: impl Into<String>, body: DialogBody) -> Self {
        Dialog { id: id.into(), call_id: None, tool_name: tool_name.into(), body, answerable: true, deep_link: None }
    }

    /// The questions of a question dialog (empty for other kinds).
    pub fn questions(&self) -> &[Question] {
        match &self.body {
            DialogBody::Question(q) => q,
            _ => &[],
        }
    }

    /// The options a plan, permission or generic dialog offers (empty for questions).
    pub fn options(&self) -> &[DialogOption] {
        match &self.body {
            DialogBody::Question(_) => &[],
            DialogBody::Plan(p) => &p.options,
            DialogBody::Permission(p) => &p.options,
            DialogBody::Generic(g) => &g.options,
        }
    }

    /// lower_snake name of the body's kind: "question", "plan", "permission", "generic".
    pub fn kind(&self) -> &'static str {
        match &self.body {
            DialogBody::Question(_) => "question",
            DialogBody::Plan(_) => "plan",
            DialogBody::Permission(_) => "permission",
            DialogBody::Generic(_) => "generic",
        }
    }
}

impl KeyOp {
    /// A named key.
    pub fn key(name: &str) -> Self {
        KeyOp::Key(name.to_string())
    }
}

impl AnswerPlan {
    /// `steps`, played with `pause_ms` after each, once `is-drawn` says yes (waiting at
    /// most `drawn_within_ms`).
    pub fn keys(steps: Vec<KeyOp>, pause_ms: u32, drawn_within_ms: u32) -> Self {
        AnswerPlan { drawn_within_ms, settle_ms: 0, pause_ms, steps }
    }

    /// The same plan, waiting `settle_ms` after the prompt is seen drawn.
    pub fn settled(self, settle_ms: u32) -> Self {
        AnswerPlan { settle_ms, ..self }
    }
}

impl LaunchRequest {
    /// The value of an environment variable the agent will see.
    pub fn env_var(&self, name: &str) -> Option<&str> {
        self.env.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The commands the host built for the bindings of the agent hook `event`.
    pub fn hooks_for<'a>(&'a self, event: &'a str) -> impl Iterator<Item = &'a HookCommand> + 'a {
        self.hooks.iter().filter(move |h| h.binding.event == event)
    }
}

impl HookBinding {
    pub fn new(event: &str, matcher: Option<&str>, channel: Channel) -> Self {
        HookBinding { event: event.into(), matcher: matcher.map(str::to_string), channel }
    }
}

include!(concat!(env!("OUT_DIR"), "/export.rs"));

#[cfg(test)]
mod tests {
    use super::SandboxNeeds;

    #[test]
    fn a_base_url_names_its_host_and_port() {
        let h = SandboxNeeds::host_of_url;
        assert_eq!(h("https://api.example.com").as_deref(), Some("api.example.com:443"));
        assert_eq!(h("http://127.0.0.1:8080/v1").as_deref(), Some("127.0.0.1:8080"));
        assert_eq!(h("http://API.Example.com/x?y").as_deref(), Some("api.example.com:80"));
        assert_eq!(h("https://u:p@h.example:8443/").as_deref(), Some("h.example:8443"));
        assert_eq!(h("http://[::1]:9/").as_deref(), Some("[::1]:9"));
        assert_eq!(h("http://[::1]/").as_deref(), Some("[::1]:80"));
        assert_eq!(h("ftp://x"), None);
        assert_eq!(h("not a url"), None);
        assert_eq!(h("https://"), None);
    }
}
