//! A scripted stand-in for the OpenAI Responses API, for lab's Codex CLI tests.
//!
//! It serves on a loopback address only (127.0.0.0/8 or ::1) and answers what the real
//! `codex` CLI (0.169.0) sends with `wire_api = "responses"`:
//!
//! * `POST /v1/responses` — Server-Sent Events `response.created`,
//!   `response.output_item.added`, `response.output_text.delta` (text items),
//!   `response.output_item.done`, `response.completed` (with `usage`);
//! * `GET /v1/models` — a one-model list (codex 0.169.0 was not seen calling it; it is
//!   answered in case another version does, and recorded like everything else);
//! * `GET /_standin/requests` — every request recorded so far (JSON array, not recorded);
//! * anything else — `404` with an OpenAI-style JSON error.
//!
//! A [`Script`] is an ordered list of [`Turn`]s. Each *turn request* (one that offers a
//! non-empty `tools` array) consumes the first not-yet-consumed turn whose [`Matcher`]
//! fits it and gets that turn's [`Reply`]: a text answer, an `exec_command` function call
//! (with or without `"sandbox_permissions": "require_escalated"`, which is what makes
//! codex ask for approval), any other function call, or an HTTP error. The tool-less
//! request codex makes to name a new thread is a *title request*: it is answered with
//! [`Script::title`] and consumes nothing. When no remaining turn fits, the reply is
//! [`Script::fallback_reply`].
//!
//! Every request is kept in memory ([`Standin::requests`]) and, when a log path is given,
//! appended to a JSONL file as one [`RecordedRequest`] per line.
//!
//! ```no_run
//! use responses_standin::{Reply, Script, Standin};
//! use std::time::Duration;
//!
//! let script = Script::new()
//!     .exec_command_escalated("touch approved.txt", "Stand-in wants to create approved.txt")
//!     .after_output("Tool finished.");
//! let standin = Standin::start(script).unwrap();
//! // [model_providers.standin] base_url = standin.url()
//! let call = standin.wait_for_call(0, Duration::from_secs(60)).unwrap();
//! let output = standin.wait_for_output(&call.call_id, Duration::from_secs(60));
//! ```

mod trap;
pub use trap::ProxyTrap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
pub use standin_http::is_loopback;
use standin_http::{
    json_body, json_response, now_unix_ms, read_json, value_for_schema, Api, Arrival, Core, HttpRequest, Recorded,
    Response, ResponseBody,
};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::ToSocketAddrs;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The model name the stand-in reports when a request names none.
pub const DEFAULT_MODEL: &str = "stand-in-model";

// ---------------------------------------------------------------------------------------
// Script
// ---------------------------------------------------------------------------------------

/// Decides whether a turn request may consume a [`Turn`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Matcher {
    /// Any turn request (JSON: `"any"`).
    #[default]
    Any,
    /// The last `input` item is a user message: the request opens a turn rather than
    /// carrying tool output (JSON: `"new_user_turn"`).
    NewUserTurn,
    /// The newest user message contains this string (JSON: `{"contains": "…"}`). It stays
    /// the newest user message for the follow-up requests of the same turn.
    Contains(String),
    /// A `function_call_output` for the most recent call this stand-in emitted follows the
    /// newest user message (JSON: `"output_for_previous"`).
    OutputForPrevious,
    /// A `function_call_output` for this `call_id` follows the newest user message
    /// (JSON: `{"output_for": "call_…"}`); pair it with a fixed call id.
    OutputFor(String),
    /// The request body contains this string anywhere (JSON: `{"body_contains": "…"}`).
    BodyContains(String),
    /// Every listed matcher fits (JSON: `{"all": [ … ]}`).
    All(Vec<Matcher>),
    /// At least one listed matcher fits (JSON: `{"any_of": [ … ]}`).
    AnyOf(Vec<Matcher>),
    /// The wrapped matcher does not fit (JSON: `{"not": …}`).
    Not(Box<Matcher>),
}

/// Codex's shell tool call: `exec_command` with `{"cmd", "sandbox_permissions"?,
/// "justification"?}` as arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExecCommand {
    /// The shell command line.
    pub cmd: String,
    /// Adds `"sandbox_permissions": "require_escalated"`: under `approval_policy =
    /// "on-request"` codex then asks the user before running it (outside the sandbox).
    /// Without it the command runs in the sandbox without asking.
    #[serde(default)]
    pub require_escalated: bool,
    /// `justification` — codex shows it as `Reason:` in the approval prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub justification: Option<String>,
    /// Assistant text sent as a message item before the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Fixed `call_id`; when absent one is generated (`call_<n>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

impl ExecCommand {
    /// The `arguments` object codex receives.
    pub fn arguments(&self) -> Value {
        let mut a = json!({"cmd": self.cmd});
        if self.require_escalated {
            a["sandbox_permissions"] = json!("require_escalated");
        }
        if let Some(j) = &self.justification {
            a["justification"] = json!(j);
        }
        a
    }
}

/// Any function call (`arguments` is sent as its JSON text).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

fn empty_object() -> Value {
    json!({})
}

/// What the stand-in answers for a turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// An assistant message (JSON: `{"text": "…"}`).
    Text(String),
    /// An `exec_command` call (JSON: `{"exec_command": {"cmd", "require_escalated"?,
    /// "justification"?, "text"?, "call_id"?}}`).
    ExecCommand(ExecCommand),
    /// Any other function call (JSON: `{"function_call": {"name", "arguments", "text"?, "call_id"?}}`).
    FunctionCall(FunctionCall),
    /// An HTTP error with an OpenAI-style body (JSON: `{"error": {"status": 500, "message": "…"}}`).
    /// Codex retries per `request_max_retries` (the tests set 0).
    Error { status: u16, message: String },
}

impl Reply {
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Text(text.into())
    }
    /// `exec_command` that runs in the sandbox without asking.
    pub fn exec_command(cmd: impl Into<String>) -> Reply {
        Reply::ExecCommand(ExecCommand {
            cmd: cmd.into(),
            require_escalated: false,
            justification: None,
            text: None,
            call_id: None,
        })
    }
    /// `exec_command` with `require_escalated` and a justification: codex asks first.
    pub fn exec_command_escalated(cmd: impl Into<String>, justification: impl Into<String>) -> Reply {
        Reply::ExecCommand(ExecCommand {
            cmd: cmd.into(),
            require_escalated: true,
            justification: Some(justification.into()),
            text: None,
            call_id: None,
        })
    }
    pub fn function_call(name: impl Into<String>, arguments: Value) -> Reply {
        Reply::FunctionCall(FunctionCall { name: name.into(), arguments, text: None, call_id: None })
    }
}

/// One scripted step: consumed by the first turn request that `when` fits.
pub type Turn = standin_http::Turn<Matcher, Reply>;

/// An ordered list of turns plus the replies used outside them.
///
/// JSON form (all fields optional):
/// ```json
/// {
///   "turns": [
///     {"match": {"contains": "TOUCHME"},
///      "reply": {"exec_command": {"cmd": "touch approved.txt", "require_escalated": true,
///                                 "justification": "Stand-in wants to create approved.txt"}}},
///     {"match": "output_for_previous", "reply": {"text": "Tool finished."}}
///   ],
///   "title": "Stand-in session",
///   "fallback_reply": "OK."
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Script {
    #[serde(default)]
    pub turns: Vec<Turn>,
    /// Answer to title requests (no `tools`). When the request asks for structured output
    /// (`text.format.type == "json_schema"`), the answer is a JSON object that fits the
    /// schema with every string field set to this.
    #[serde(default = "default_title")]
    pub title: String,
    /// Text answered to a turn request when no remaining turn fits.
    #[serde(default = "default_fallback_reply")]
    pub fallback_reply: String,
}

fn default_title() -> String {
    "Stand-in session".to_string()
}
fn default_fallback_reply() -> String {
    "OK.".to_string()
}

impl Default for Script {
    fn default() -> Self {
        Script { turns: Vec::new(), title: default_title(), fallback_reply: default_fallback_reply() }
    }
}

impl Script {
    pub fn new() -> Script {
        Script::default()
    }
    /// Appends a turn.
    pub fn turn(mut self, when: Matcher, reply: Reply) -> Script {
        self.turns.push(Turn::new(when, reply, None));
        self
    }
    /// Appends a turn answered after `delay`.
    pub fn turn_delayed(mut self, when: Matcher, reply: Reply, delay: Duration) -> Script {
        self.turns.push(Turn::new(when, reply, Some(delay)));
        self
    }
    /// Appends `Any → text`.
    pub fn text(self, text: impl Into<String>) -> Script {
        self.turn(Matcher::Any, Reply::text(text))
    }
    /// Appends `Any → exec_command(cmd)` (no escalation: runs without asking).
    pub fn exec_command(self, cmd: impl Into<String>) -> Script {
        self.turn(Matcher::Any, Reply::exec_command(cmd))
    }
    /// Appends `Any → exec_command(cmd, require_escalated, justification)` (codex asks).
    pub fn exec_command_escalated(self, cmd: impl Into<String>, justification: impl Into<String>) -> Script {
        self.turn(Matcher::Any, Reply::exec_command_escalated(cmd, justification))
    }
    /// Appends `OutputForPrevious → text` (the usual "after the command ran" turn).
    pub fn after_output(self, text: impl Into<String>) -> Script {
        self.turn(Matcher::OutputForPrevious, Reply::text(text))
    }
    pub fn title(mut self, text: impl Into<String>) -> Script {
        self.title = text.into();
        self
    }
    pub fn fallback_reply(mut self, text: impl Into<String>) -> Script {
        self.fallback_reply = text.into();
        self
    }
    /// Parses the JSON form.
    pub fn from_json(text: &str) -> Result<Script, serde_json::Error> {
        serde_json::from_str(text)
    }
    /// Reads and parses a JSON script file.
    pub fn from_file(path: impl AsRef<Path>) -> io::Result<Script> {
        read_json(path.as_ref())
    }
}

// ---------------------------------------------------------------------------------------
// Request inspection helpers (pure functions on a Responses API request body)
// ---------------------------------------------------------------------------------------

/// True for a title request: a JSON object without a non-empty `tools` array. Codex sends
/// one per new thread to name it; every request of the agent loop offers tools.
pub fn is_title_request(body: &Value) -> bool {
    body.is_object() && body.get("tools").and_then(Value::as_array).is_none_or(|t| t.is_empty())
}

/// The request's `input` items (empty when absent or a plain string).
pub fn input_items(body: &Value) -> &[Value] {
    body.get("input").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

fn is_user_message(item: &Value) -> bool {
    item.get("role").and_then(Value::as_str) == Some("user")
        && item.get("type").and_then(Value::as_str).is_none_or(|t| t == "message")
}

/// The text of a message item: a string `content`, or its parts' `text` joined by `\n`.
pub fn message_text(item: &Value) -> String {
    content_text(item.get("content"))
}

fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => {
            parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
        }
        Some(other) if !other.is_null() => other.to_string(),
        _ => String::new(),
    }
}

/// Index of the newest user message in `input`.
pub fn last_user_index(body: &Value) -> Option<usize> {
    input_items(body).iter().rposition(is_user_message)
}

/// The text of the newest user message ("" when there is none).
pub fn last_user_text(body: &Value) -> String {
    last_user_index(body).map(|i| message_text(&input_items(body)[i])).unwrap_or_default()
}

/// Whether the last `input` item is a user message.
pub fn is_new_user_turn(body: &Value) -> bool {
    input_items(body).last().is_some_and(is_user_message)
}

/// The text of a `function_call_output` item's `output` (a string, or text parts joined).
pub fn output_text(item: &Value) -> String {
    content_text(item.get("output"))
}

/// `(call_id, output)` of every `function_call_output` item in `input`, in order.
pub fn function_call_outputs(body: &Value) -> Vec<(String, String)> {
    outputs_in(input_items(body))
}

fn outputs_in(items: &[Value]) -> Vec<(String, String)> {
    items
        .iter()
        .filter(|i| i.get("type").and_then(Value::as_str) == Some("function_call_output"))
        .map(|i| (i.get("call_id").and_then(Value::as_str).unwrap_or("").to_string(), output_text(i)))
        .collect()
}

/// `(call_id, output)` of the `function_call_output` items after the newest user message.
pub fn outputs_after_last_user(body: &Value) -> Vec<(String, String)> {
    let items = input_items(body);
    let from = last_user_index(body).map_or(0, |i| i + 1);
    outputs_in(&items[from..])
}

impl Matcher {
    /// Whether this matcher fits `body`; `previous_call` is the `call_id` of the last
    /// function call the stand-in emitted, if any.
    pub fn fits(&self, body: &Value, previous_call: Option<&str>) -> bool {
        match self {
            Matcher::Any => true,
            Matcher::NewUserTurn => is_new_user_turn(body),
            Matcher::Contains(s) => last_user_text(body).contains(s.as_str()),
            Matcher::OutputForPrevious => {
                previous_call.is_some_and(|id| outputs_after_last_user(body).iter().any(|(c, _)| c == id))
            }
            Matcher::OutputFor(id) => outputs_after_last_user(body).iter().any(|(c, _)| c == id),
            Matcher::BodyContains(s) => body.to_string().contains(s.as_str()),
            Matcher::All(ms) => ms.iter().all(|m| m.fits(body, previous_call)),
            Matcher::AnyOf(ms) => ms.iter().any(|m| m.fits(body, previous_call)),
            Matcher::Not(m) => !m.fits(body, previous_call),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Recording
// ---------------------------------------------------------------------------------------

/// How the stand-in classified a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// `POST /v1/responses` offering tools: consumed script turn `turn` (an index into
    /// `Script::turns`), or `None` when the fallback reply was used.
    Turn { turn: Option<usize> },
    /// `POST /v1/responses` without tools: answered with the title.
    Title,
    /// `GET /v1/models`.
    Models,
    /// Anything else (404/405/400).
    Other,
}

/// A request as received (one line of the JSONL log).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// Where and when it arrived, what it carried (its fields at the top level of the JSON).
    #[serde(flatten)]
    pub arrival: Arrival,
    pub kind: RequestKind,
    /// What was sent back (for `/v1/responses`).
    pub reply: Option<SentReply>,
}

impl std::ops::Deref for RecordedRequest {
    type Target = Arrival;
    fn deref(&self) -> &Arrival {
        &self.arrival
    }
}

impl RecordedRequest {
    pub fn is_turn(&self) -> bool {
        matches!(self.kind, RequestKind::Turn { .. })
    }
}

/// Summary of the answer to a `/v1/responses` request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SentReply {
    pub status: u16,
    /// The assistant message text, if one was sent.
    pub text: Option<String>,
    pub call: Option<EmittedCall>,
    /// The response's usage as sent (`input_tokens` with `input_tokens_details.cached_tokens`
    /// among them, `output_tokens`), for a 200.
    #[serde(default)]
    pub usage: Option<Value>,
}

/// A function call the stand-in sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmittedCall {
    pub call_id: String,
    pub name: String,
    pub arguments: Value,
    /// Index of the script turn that produced it.
    pub turn: usize,
    /// Index of the request it answered.
    pub request_index: usize,
}

// ---------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------

/// The Responses API as the stand-in answers it (the core's [`Api`]).
pub struct ResponsesApi;

type State = Recorded<ResponsesApi>;
type Shared = Core<ResponsesApi>;

impl Api for ResponsesApi {
    type Script = Script;
    type Request = RecordedRequest;
    type Emitted = EmittedCall;
    /// The JSONL log every request is appended to, if any.
    type Extra = Option<File>;
    fn handle(&self, req: &HttpRequest, core: &Shared) -> (Response, Option<Duration>) {
        handle(req, core)
    }
    fn malformed(&self, error: &io::Error) -> Response {
        json_response(400, &api_error("invalid_request_error", &error.to_string()))
    }
}

/// `prefix_<n>` with a per-stand-in counter (ids only need to be unique per stand-in).
fn fresh_id(shared: &Shared, prefix: &str) -> String {
    format!("{prefix}_{}", shared.next_id())
}

/// A TOML basic string holding `s` (quotes and backslashes escaped).
pub fn toml_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The environment variable codex reads the stand-in's API key from ([`codex_config`]).
pub const API_KEY_ENV: &str = "STANDIN_API_KEY";

/// A `$CODEX_HOME/config.toml` that points codex 0.169.0 at the stand-in at `base_url`
/// and keeps it offline (notes/codex-0.169.0-observed.md §2): the `standin` provider
/// (key from [`API_KEY_ENV`], no retries), on-request approvals in the workspace-write
/// sandbox, no update check, analytics or curated-plugin sync (git/HTTPS to github.com,
/// api.github.com, chatgpt.com). `trusted`: a folder marked trusted (no trust screen).
pub fn codex_config(base_url: &str, trusted: Option<&str>) -> String {
    let trust =
        trusted.map(|dir| format!("[projects.{}]\ntrust_level = \"trusted\"\n\n", toml_str(dir))).unwrap_or_default();
    format!(
        r#"model = "stand-in-model"
model_provider = "standin"
approval_policy = "on-request"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false

[model_providers.standin]
name = "Stand-in"
base_url = {base_url}
wire_api = "responses"
env_key = "{API_KEY_ENV}"
request_max_retries = 0
stream_max_retries = 0

{trust}[features]
plugins = false

[analytics]
enabled = false
"#,
        base_url = toml_str(base_url),
    )
}

/// A running stand-in (the core's [`standin_http::Standin`], which it derefs to: `addr`,
/// `port`, `origin`, `requests`, `remaining_turns`, `wait_until`, …). Dropping it (or
/// [`Standin::shutdown`]) stops the server and closes its connections.
pub struct Standin(standin_http::Standin<ResponsesApi>);

impl std::ops::Deref for Standin {
    type Target = standin_http::Standin<ResponsesApi>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Standin {
    /// Starts on `127.0.0.1:0` (an ephemeral port), recording in memory only.
    pub fn start(script: Script) -> io::Result<Standin> {
        Standin::start_on("127.0.0.1:0", script, None)
    }

    /// Starts on `127.0.0.1:0` and also appends every request to `log` (JSONL).
    pub fn start_logged(script: Script, log: impl Into<PathBuf>) -> io::Result<Standin> {
        Standin::start_on("127.0.0.1:0", script, Some(log.into()))
    }

    /// Starts on `addr`, which must resolve to loopback addresses only; `log` (created or
    /// appended to) receives one JSON [`RecordedRequest`] per line.
    pub fn start_on(addr: impl ToSocketAddrs, script: Script, log: Option<PathBuf>) -> io::Result<Standin> {
        let log =
            match log {
                Some(p) => {
                    Some(OpenOptions::new().create(true).append(true).open(&p).map_err(|e| {
                        io::Error::new(e.kind(), format!("cannot open request log {}: {e}", p.display()))
                    })?)
                }
                None => None,
            };
        let turns = script.turns.len();
        standin_http::Standin::start(addr, "responses-standin", ResponsesApi, script, turns, log).map(Standin)
    }

    /// `http://127.0.0.1:PORT/v1` — the value for a codex model provider's `base_url`.
    pub fn url(&self) -> String {
        format!("{}/v1", self.origin())
    }
    /// Only the turn requests (`/v1/responses` with tools).
    pub fn turn_requests(&self) -> Vec<RecordedRequest> {
        self.requests().into_iter().filter(RecordedRequest::is_turn).collect()
    }
    /// Every function call the stand-in has emitted, in order.
    pub fn emitted_calls(&self) -> Vec<EmittedCall> {
        self.emitted()
    }
    /// The distinct outputs codex has sent back for `call_id` (each request repeats the
    /// conversation, so one output seen in several requests is reported once).
    pub fn outputs_for(&self, call_id: &str) -> Vec<String> {
        collect_outputs(&self.lock().requests, call_id)
    }
    /// Waits for the `n`-th (0-based) emitted function call.
    pub fn wait_for_call(&self, n: usize, timeout: Duration) -> Option<EmittedCall> {
        self.wait_for_emitted(n, timeout)
    }
    /// Waits until a `function_call_output` for `call_id` has arrived; returns the first.
    pub fn wait_for_output(&self, call_id: &str, timeout: Duration) -> Option<String> {
        self.wait_for(timeout, |st| collect_outputs(&st.requests, call_id).into_iter().next())
    }

    /// Stops accepting, closes open connections and joins the accept thread.
    pub fn shutdown(self) {
        self.0.shutdown();
    }
}

fn collect_outputs(reqs: &[RecordedRequest], call_id: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in reqs {
        for (c, o) in function_call_outputs(&r.body) {
            if c == call_id && !out.contains(&o) {
                out.push(o);
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Responses API
// ---------------------------------------------------------------------------------------

fn api_error(kind: &str, message: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
}

fn handle(req: &HttpRequest, shared: &Shared) -> (Response, Option<Duration>) {
    let path = req.target.split_once('?').map_or(req.target.as_str(), |(p, _)| p).to_string();
    let encoded = req.header("content-encoding").is_some_and(|e| !e.eq_ignore_ascii_case("identity"));
    let body = json_body(req, encoded);
    let model = body.get("model").and_then(Value::as_str).unwrap_or(DEFAULT_MODEL).to_string();

    let mut st = shared.state.lock();
    if req.method == "GET" && path == "/_standin/requests" {
        // Not recorded: this is the test harness looking in.
        let v = serde_json::to_value(&st.requests).unwrap_or(Value::Null);
        return (json_response(200, &v), None);
    }
    let index = st.requests.len();
    let mut rec = RecordedRequest {
        arrival: Arrival::new(index, req, body.clone(), shared.started),
        kind: RequestKind::Other,
        reply: None,
    };

    let mut delay = None;
    let resp = match (req.method.as_str(), path.as_str()) {
        ("GET" | "HEAD", "/v1/models") => {
            rec.kind = RequestKind::Models;
            json_response(
                200,
                &json!({"object": "list", "data": [
                    {"id": DEFAULT_MODEL, "object": "model", "created": 0, "owned_by": "stand-in"}]}),
            )
        }
        ("POST", "/v1/responses") if encoded => json_response(
            415,
            &api_error("invalid_request_error", "the stand-in reads plain JSON bodies only (no content-encoding)"),
        ),
        ("POST", "/v1/responses") if !body.is_object() => {
            json_response(400, &api_error("invalid_request_error", "request body is not a JSON object"))
        }
        ("POST", "/v1/responses") => {
            let (reply, kind, turn) = if is_title_request(&body) {
                (Reply::Text(title_text(&body, &st.script.title)), RequestKind::Title, None)
            } else {
                let prev = st.emitted.last().map(|c| c.call_id.clone());
                let State { script, consumed, .. } = &mut *st;
                let pick = consumed.pick(&script.turns, |m| m.fits(&body, prev.as_deref()));
                match pick {
                    Some(i) => {
                        let t = &st.script.turns[i];
                        delay = t.delay();
                        (t.reply.clone(), RequestKind::Turn { turn: Some(i) }, Some(i))
                    }
                    None => (Reply::Text(st.script.fallback_reply.clone()), RequestKind::Turn { turn: None }, None),
                }
            };
            rec.kind = kind;
            let (resp, mut sent) = render_reply(shared, &reply, &model);
            if let Some(call) = sent.call.as_mut() {
                call.turn = turn.unwrap_or(0);
                call.request_index = index;
                st.emitted.push(call.clone());
            }
            rec.reply = Some(sent);
            resp
        }
        (_, "/v1/responses") | (_, "/v1/models") => {
            json_response(405, &api_error("invalid_request_error", &format!("method {} not allowed", req.method)))
        }
        _ => json_response(
            404,
            &api_error("not_found", &format!("{} {} is not served by the stand-in", req.method, path)),
        ),
    };
    if let Some(f) = st.extra.as_mut() {
        if let Ok(line) = serde_json::to_string(&rec) {
            let _ = writeln!(f, "{line}");
            let _ = f.flush();
        }
    }
    st.requests.push(rec);
    drop(st);
    shared.state.notify();
    (resp, delay)
}

/// The title answer: plain text, or — when the request asks for structured output
/// (`text.format.type == "json_schema"`) — a JSON object that fits the schema, with every
/// string property set to `title`.
fn title_text(body: &Value, title: &str) -> String {
    match body.pointer("/text/format") {
        Some(f) if f.get("type").and_then(Value::as_str) == Some("json_schema") => {
            let schema = f.get("schema").cloned().unwrap_or(Value::Null);
            value_for_schema(&schema, title).to_string()
        }
        _ => title.to_string(),
    }
}

/// Splits `s` into pieces of at most `n` chars (on char boundaries).
fn split_pieces(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
}

struct Sse {
    events: Vec<String>,
    seq: u64,
}

impl Sse {
    fn push(&mut self, mut ev: Value) {
        let kind = ev["type"].as_str().unwrap_or("message").to_string();
        ev["sequence_number"] = json!(self.seq);
        self.seq += 1;
        self.events.push(format!("event: {kind}\ndata: {ev}\n\n"));
    }
}

fn render_reply(shared: &Shared, reply: &Reply, model: &str) -> (Response, SentReply) {
    let (text, call) = match reply {
        Reply::Error { status, message } => {
            let kind = if *status == 429 { "rate_limit_exceeded" } else { "server_error" };
            let resp = json_response(*status, &api_error(kind, message));
            return (resp, SentReply { status: *status, text: None, call: None, usage: None });
        }
        Reply::Text(t) => (Some(t.clone()), None),
        Reply::ExecCommand(e) => (
            e.text.clone().filter(|t| !t.is_empty()),
            Some((e.call_id.clone(), "exec_command".to_string(), e.arguments())),
        ),
        Reply::FunctionCall(f) => {
            (f.text.clone().filter(|t| !t.is_empty()), Some((f.call_id.clone(), f.name.clone(), f.arguments.clone())))
        }
    };
    let resp_id = fresh_id(shared, "resp");
    let created_at = now_unix_ms() / 1000;
    let response = |status: &str, output: &[Value], usage: Value| {
        json!({"id": resp_id, "object": "response", "created_at": created_at, "status": status,
               "model": model, "output": output, "usage": usage})
    };
    let mut sse = Sse { events: Vec::new(), seq: 0 };
    sse.push(json!({"type": "response.created", "response": response("in_progress", &[], Value::Null)}));
    let mut output = Vec::new();
    if let Some(t) = &text {
        let id = fresh_id(shared, "msg");
        let index = output.len();
        sse.push(json!({"type": "response.output_item.added", "output_index": index,
            "item": {"type": "message", "id": id, "role": "assistant", "status": "in_progress", "content": []}}));
        for piece in split_pieces(t, 16) {
            sse.push(json!({"type": "response.output_text.delta", "item_id": id, "output_index": index,
                "content_index": 0, "delta": piece}));
        }
        let done = json!({"type": "message", "id": id, "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": t, "annotations": []}]});
        sse.push(json!({"type": "response.output_item.done", "output_index": index, "item": done}));
        output.push(done);
    }
    let mut emitted = None;
    if let Some((call_id, name, arguments)) = call {
        let id = fresh_id(shared, "fc");
        let call_id = call_id.unwrap_or_else(|| fresh_id(shared, "call"));
        let index = output.len();
        let item = json!({"type": "function_call", "id": id, "call_id": call_id, "name": name,
            "arguments": "", "status": "in_progress"});
        sse.push(json!({"type": "response.output_item.added", "output_index": index, "item": item}));
        let mut done = item;
        done["arguments"] = json!(arguments.to_string());
        done["status"] = json!("completed");
        sse.push(json!({"type": "response.output_item.done", "output_index": index, "item": done}));
        output.push(done);
        emitted = Some(EmittedCall { call_id, name, arguments, turn: 0, request_index: 0 });
    }
    let out_tokens = 1 + text.as_ref().map_or(0, |t| t.len() as u64 / 4);
    // Every response's usage is its own (distinct input and cached figures), so a test
    // can tell a response counted twice from two responses.
    let n = shared.next_id();
    let (input, cached) = (200 + n * 13, 50 + n * 7);
    let usage = json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": out_tokens, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + out_tokens});
    sse.push(json!({"type": "response.completed", "response": response("completed", &output, usage.clone())}));
    let resp = Response {
        status: 200,
        content_type: "text/event-stream",
        body: ResponseBody::Events(sse.events),
        headers: Vec::new(),
    };
    (resp, SentReply { status: 200, text, call: emitted, usage: Some(usage) })
}
