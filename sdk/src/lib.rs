//! # lab-provider-sdk
//!
//! Everything a provider author needs to write a lab provider component in Rust:
//!
//! - the shared data shapes ([`Dialog`], [`Message`], [`KeyOp`], [`HookContext`], …) as
//!   plain Rust types (they serialise to the JSON shapes of lab's HTTP API);
//! - the two traits a provider implements, [`Provider`] (every provider) and
//!   [`DialogHooker`] (live dialog capture + keystroke answers);
//! - [`export_provider!`] / [`export_dialog_provider!`], which generate the WIT bindings
//!   for exactly the world you ask for and wire your type to them;
//! - helpers providers need again and again: [`jsonl`] (line splitting with
//!   diagnostics), [`json`] (field access), [`shell`] (quoting for hook commands).
//!
//! Build the provider crate (`crate-type = ["cdylib"]`) with
//! `cargo build --release --target wasm32-wasip2`; the `.wasm` is the component.
//! See docs/providers.md in the lab repository for the guide.

use serde::{Deserialize, Serialize};

#[doc(hidden)]
pub use wit_bindgen;

/// The WIT package version this SDK builds components against.
pub const WIT_VERSION: &str = "0.1.0";

/// The WIT package text this SDK was built with.
pub const WIT: &str = include_str!(concat!(env!("OUT_DIR"), "/wit.txt"));

include!(concat!(env!("OUT_DIR"), "/export.rs"));

pub mod json;
pub mod jsonl;
pub mod shell;

/// Who the provider is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderInfo {
    pub name: String,
    pub version: String,
    pub description: String,
    /// The program launched when lab.toml names none; looked up on PATH.
    pub default_program: String,
}

/// What the host knows when it launches a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchRequest {
    pub run_id: String,
    /// A fresh UUID v4 the provider may hand to the agent.
    pub session_id: String,
    pub workdir: String,
    pub prompt: String,
    pub permission_mode: Option<String>,
    /// Absolute path of the program to run.
    pub program: String,
    /// The per-run settings file written from [`DialogHooker::hook_settings`].
    pub settings_path: Option<String>,
    /// The agent's environment, as data.
    pub env: Vec<(String, String)>,
}

impl LaunchRequest {
    /// The value of an environment variable the agent will see.
    pub fn env_var(&self, name: &str) -> Option<&str> {
        self.env.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// How to start the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchSpec {
    /// Full argv, program first.
    pub argv: Vec<String>,
    pub transcript_path: Option<String>,
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
    System,
    Tool,
}

/// One chat message derived from the transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    /// "text", "tool_use", "tool_result", "thinking", …
    pub kind: String,
    pub text: String,
    pub tool_use_id: Option<String>,
    pub tool_name: Option<String>,
    /// For tool_use: the input as JSON text.
    pub tool_input: Option<String>,
    pub is_error: bool,
    pub timestamp: String,
}

impl Message {
    /// A plain text message.
    pub fn text(role: Role, text: impl Into<String>, timestamp: impl Into<String>) -> Self {
        Message {
            role,
            kind: "text".into(),
            text: text.into(),
            tool_use_id: None,
            tool_name: None,
            tool_input: None,
            is_error: false,
            timestamp: timestamp.into(),
        }
    }
}

/// What a transcript line says about the agent's turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnSignal {
    Working,
    Idle,
}

/// A line that could not be understood (skipped, never fatal).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// 0-based line index within the chunk.
    pub line: u32,
    pub message: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParseOutput {
    pub messages: Vec<Message>,
    pub turn: Option<TurnSignal>,
    pub session_id: Option<String>,
    pub diagnostics: Vec<Diagnostic>,
}

/// A tool call, from the transcript or from a live hook spool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// JSON text.
    pub input: String,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DialogKind {
    Question,
    Plan,
}

/// An interactive dialog the agent waits on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dialog {
    pub tool_id: String,
    pub tool_name: String,
    pub kind: DialogKind,
    pub answerable: bool,
    pub questions: Vec<Question>,
    pub plan: Option<String>,
    pub deep_link: Option<String>,
}

/// What the host gives [`DialogHooker::hook_settings`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookContext {
    pub run_id: String,
    /// Shell-quoted command: atomically writes stdin to the run's spool.
    pub spool_write: String,
    /// Shell-quoted command prefix: deletes the spool when a top-level JSON field is
    /// the same in stdin and in the spool. Append ` --id-field <field>`.
    pub spool_clear: String,
    /// Shell-quoted command: atomically writes stdin to the run's blocked marker.
    pub marker_write: String,
}

/// A dialog read from the live spool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub tool_use_id: String,
    pub dialog: Option<Dialog>,
}

/// Why the agent is blocked, read from the marker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocked {
    pub notification_type: String,
    pub message: String,
}

/// The operator's answer to one question. Serialises as `{"option": 1}`,
/// `{"options": [0, 2]}` or `{"other": "text"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    Option(u32),
    Options(Vec<u32>),
    Other(String),
}

/// One keystroke operation, played by the host with a fixed pause between ops.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyOp {
    /// A named key as tmux understands it ("Up", "Down", "Enter", "Escape").
    Key(String),
    /// Text typed literally.
    Literal(String),
}

impl KeyOp {
    pub fn key(name: &str) -> Self {
        KeyOp::Key(name.to_string())
    }
}

/// What every provider implements.
pub trait Provider {
    fn info() -> ProviderInfo;
    fn launch(req: LaunchRequest) -> Result<LaunchSpec, String>;
    /// Parse complete transcript lines (each ends in `\n`). Deterministic; bad lines
    /// become [`Diagnostic`]s. [`jsonl::parse_lines`] does the splitting for you.
    fn parse_transcript(chunk: &[u8]) -> ParseOutput;
    /// The dialog mapper: a tool call → a dialog, or `None` for ordinary tools.
    fn map_dialog(call: ToolCall) -> Option<Dialog>;
}

/// Live dialog capture through the agent's hooks, and keystroke answers.
pub trait DialogHooker: Provider {
    /// The agent's settings document (JSON text) that installs the hooks.
    fn hook_settings(ctx: HookContext) -> Result<String, String>;
    fn pending_dialog(spool: &[u8]) -> Result<Pending, String>;
    fn blocked_state(marker: &[u8]) -> Result<Blocked, String>;
    fn answer_keys(dialog: Dialog, answers: Vec<Answer>) -> Result<Vec<KeyOp>, String>;
}
