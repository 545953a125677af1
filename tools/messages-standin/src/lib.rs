//! A scripted stand-in for the Anthropic Messages API, for lab's end-to-end tests.
//!
//! It serves on a loopback address only (127.0.0.0/8 or ::1) and answers what the real
//! `claude` CLI sends:
//!
//! * `POST /v1/messages[?…]` — streaming (`"stream": true`, Server-Sent Events with the
//!   standard `message_start` … `message_stop` sequence) or non-streaming (one JSON message);
//! * `POST /v1/messages/count_tokens[?…]` — `{"input_tokens": N}`;
//! * `GET /_standin/requests` — every request recorded so far (JSON array);
//! * anything else — `404` with an Anthropic-style JSON error.
//!
//! A [`Script`] is an ordered list of [`Turn`]s. Each *main-agent* request (one that carries
//! a non-empty `tools` array) consumes the first not-yet-consumed turn whose [`Matcher`]
//! fits it, and gets that turn's [`Reply`]. Side requests (no `tools`: title / topic
//! generation, quota probes, …) get [`Script::side_reply`] and consume nothing. When no
//! remaining turn fits (e.g. the script is exhausted) the reply is
//! [`Script::fallback_reply`] (plain text, `end_turn`), or — when the script names a
//! [`Builtin`] conversation such as the [`demo`] — that conversation's reply (its tool
//! calls are not listed in `emitted_tool_uses`; see each request's `reply`).
//!
//! ```no_run
//! use messages_standin::{Matcher, Script, Standin};
//! use serde_json::json;
//! use std::time::Duration;
//!
//! let script = Script::new()
//!     .tool_use("AskUserQuestion", json!({"questions": [/* … */]}))
//!     .turn(Matcher::ToolResultForPrevious, messages_standin::Reply::text("Thanks!"));
//! let standin = Standin::start(script).unwrap();
//! // ANTHROPIC_BASE_URL = standin.base_url()
//! let id = standin.wait_for_tool_use(0, Duration::from_secs(60)).unwrap().id;
//! let results = standin.wait_for_tool_result(&id, Duration::from_secs(60));
//! ```

pub mod demo;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
pub use standin_http::is_loopback;
use standin_http::{
    json_body, json_response, now_unix_ms, read_json, value_for_schema, Api, Arrival, Core, HttpRequest, Recorded,
    Response, ResponseBody,
};
use std::io;
use std::net::ToSocketAddrs;
use std::time::Duration;

// ---------------------------------------------------------------------------------------
// Script
// ---------------------------------------------------------------------------------------

/// Decides whether a main-agent request may consume a [`Turn`]. All matchers look at the
/// request's *last* `user` message (text blocks plus the text inside `tool_result` blocks).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Matcher {
    /// Any main-agent request (JSON: `"any"`).
    #[default]
    Any,
    /// The last user message holds a `tool_result` for the most recent `tool_use` this
    /// stand-in emitted (JSON: `"tool_result_for_previous"`).
    ToolResultForPrevious,
    /// The last user message holds a `tool_result` for this `tool_use_id`
    /// (JSON: `{"tool_result_for": "toolu_…"}`); pair it with a fixed [`ToolUseReply::id`].
    ToolResultFor(String),
    /// The last user message's text (including tool_result text) contains this string
    /// (JSON: `{"contains": "…"}`).
    Contains(String),
    /// The request contains this string anywhere in its JSON body (JSON: `{"body_contains": "…"}`).
    BodyContains(String),
    /// Every listed matcher fits (JSON: `{"all": [ … ]}`).
    All(Vec<Matcher>),
    /// At least one listed matcher fits (JSON: `{"any_of": [ … ]}`).
    AnyOf(Vec<Matcher>),
    /// The wrapped matcher does not fit (JSON: `{"not": …}`).
    Not(Box<Matcher>),
}

/// A `tool_use` reply: optional leading text, then one tool_use block; `stop_reason: tool_use`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolUseReply {
    pub name: String,
    #[serde(default = "empty_object")]
    pub input: Value,
    /// Text block emitted before the tool_use block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Fixed tool_use id; when absent a fresh `toolu_…` id is generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

fn empty_object() -> Value {
    json!({})
}

/// What the stand-in answers for a turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// A text answer, `stop_reason: end_turn` (JSON: `{"text": "…"}`).
    Text(String),
    /// A tool call, `stop_reason: tool_use` (JSON: `{"tool_use": {"name", "input", "text"?, "id"?}}`).
    ToolUse(ToolUseReply),
    /// An HTTP error response with an Anthropic-style error body
    /// (JSON: `{"error": {"status": 529, "type": "overloaded_error", "message": "…"}}`).
    /// Note that the real client retries on 429/5xx.
    Error {
        status: u16,
        #[serde(rename = "type")]
        error_type: String,
        message: String,
    },
}

impl Reply {
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Text(text.into())
    }
    pub fn tool_use(name: impl Into<String>, input: Value) -> Reply {
        Reply::ToolUse(ToolUseReply { name: name.into(), input, text: None, id: None })
    }
    /// A tool call preceded by a text block.
    pub fn tool_use_with_text(name: impl Into<String>, input: Value, text: impl Into<String>) -> Reply {
        Reply::ToolUse(ToolUseReply { name: name.into(), input, text: Some(text.into()), id: None })
    }
}

/// One scripted step: consumed by the first main-agent request that `when` fits.
pub type Turn = standin_http::Turn<Matcher, Reply>;

/// An ordered list of turns plus the replies used outside them.
///
/// JSON form (all fields optional):
/// ```json
/// {
///   "turns": [
///     {"reply": {"tool_use": {"name": "AskUserQuestion", "input": {"questions": []}}}},
///     {"match": "tool_result_for_previous", "reply": {"text": "Got it."}}
///   ],
///   "side_reply": "Test session",
///   "fallback_reply": "Done."
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Script {
    #[serde(default)]
    pub turns: Vec<Turn>,
    /// Text answered to side requests (no `tools`), e.g. title generation. When the side
    /// request asks for JSON-schema output (claude's title request does:
    /// `{"title": string}`), the reply is a JSON object with every string field set to this.
    #[serde(default = "default_side_reply")]
    pub side_reply: String,
    /// Text answered to a main-agent request when no remaining turn fits.
    #[serde(default = "default_fallback_reply")]
    pub fallback_reply: String,
    /// A built-in conversation that answers main-agent requests no turn fits, instead of
    /// `fallback_reply` (JSON: `"builtin": "demo"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtin: Option<Builtin>,
    /// The account hits its usage limit with the first main-agent request, for `secs`
    /// seconds: every main-agent request until then is refused as the API refuses one
    /// past a limit, and answered as usual after (JSON: `"usage_limit": {"secs": 8,
    /// "message": "… resets {resets} (UTC)"}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_limit: Option<LimitWindow>,
}

/// A usage limit that starts with the first main-agent request and lasts `secs`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitWindow {
    pub secs: u64,
    /// The error's message (what the agent shows); `{resets}` becomes the reset's time
    /// of day in UTC as a subscription's limit says it (`11:24:31pm`).
    pub message: String,
    /// When it resets (Unix seconds), once it started.
    #[serde(default)]
    pub until: Option<u64>,
}

impl LimitWindow {
    /// The refusal of a request made at `now` (Unix seconds), while the limit lasts: `429
    /// rate_limit_error` with the headers a limit carries — when it resets, how long to
    /// wait, and that retrying now will not help.
    fn refusal(&mut self, now: u64) -> Option<Response> {
        let until = *self.until.get_or_insert(now + self.secs);
        if now >= until {
            return None;
        }
        let s = until % 86_400;
        let (h, m, sec) = (s / 3600, s % 3600 / 60, s % 60);
        let clock =
            format!("{}:{m:02}:{sec:02}{}", if h % 12 == 0 { 12 } else { h % 12 }, if h < 12 { "am" } else { "pm" });
        let message = self.message.replace("{resets}", &clock);
        let mut resp = json_response(429, &api_error("rate_limit_error", &message));
        resp.headers = vec![
            ("retry-after".into(), (until - now).to_string()),
            ("x-should-retry".into(), "false".into()),
            ("anthropic-ratelimit-unified-status".into(), "rejected".into()),
            ("anthropic-ratelimit-unified-reset".into(), until.to_string()),
        ];
        Some(resp)
    }
}

/// Built-in conversations: replies computed from the request's conversation, so they
/// serve any number of sessions at once and are never used up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Builtin {
    /// The demo of lab's dialog cards ([`demo`]).
    Demo,
}

impl Builtin {
    /// The reply to a main-agent request.
    pub fn reply(self, body: &Value) -> Reply {
        match self {
            Builtin::Demo => demo::reply(body),
        }
    }
}

fn default_side_reply() -> String {
    "Standin session".to_string()
}
fn default_fallback_reply() -> String {
    "OK.".to_string()
}

impl Default for Script {
    fn default() -> Self {
        Script {
            turns: Vec::new(),
            side_reply: default_side_reply(),
            fallback_reply: default_fallback_reply(),
            builtin: None,
            usage_limit: None,
        }
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
    /// Appends a turn that answers `when` after `delay`.
    pub fn turn_delayed(mut self, when: Matcher, reply: Reply, delay: Duration) -> Script {
        self.turns.push(Turn::new(when, reply, Some(delay)));
        self
    }
    /// Appends `Any → text`.
    pub fn text(self, text: impl Into<String>) -> Script {
        self.turn(Matcher::Any, Reply::text(text))
    }
    /// Appends `Any → tool_use(name, input)`.
    pub fn tool_use(self, name: impl Into<String>, input: Value) -> Script {
        self.turn(Matcher::Any, Reply::tool_use(name, input))
    }
    /// Appends `ToolResultForPrevious → text` (the usual "after the tool ran" turn).
    pub fn after_tool_result(self, text: impl Into<String>) -> Script {
        self.turn(Matcher::ToolResultForPrevious, Reply::text(text))
    }
    pub fn side_reply(mut self, text: impl Into<String>) -> Script {
        self.side_reply = text.into();
        self
    }
    /// The account hits its usage limit with the first main-agent request, for `secs`
    /// seconds, saying `message` (see [`LimitWindow`]).
    pub fn usage_limit(mut self, secs: u64, message: impl Into<String>) -> Script {
        self.usage_limit = Some(LimitWindow { secs, message: message.into(), until: None });
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
    pub fn from_file(path: impl AsRef<std::path::Path>) -> io::Result<Script> {
        read_json(path.as_ref())
    }
}

// ---------------------------------------------------------------------------------------
// Request inspection helpers (pure functions on a Messages API request body)
// ---------------------------------------------------------------------------------------

/// True when the request is part of the main agent loop: it carries a non-empty `tools`
/// array. Everything else (title generation, quota probes, …) is a side request.
pub fn is_main_request(body: &Value) -> bool {
    body.get("tools").and_then(Value::as_array).is_some_and(|t| !t.is_empty())
}

/// The content blocks of the last `user` message (a string content becomes one text block).
pub fn last_user_blocks(body: &Value) -> Vec<Value> {
    let Some(msgs) = body.get("messages").and_then(Value::as_array) else {
        return Vec::new();
    };
    let Some(last) = msgs.iter().rev().find(|m| m.get("role").and_then(Value::as_str) == Some("user")) else {
        return Vec::new();
    };
    match last.get("content") {
        Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
        Some(Value::Array(a)) => a.clone(),
        _ => Vec::new(),
    }
}

/// The text of a `tool_result` block's `content` (a string, or text blocks joined by `\n`).
pub fn tool_result_text(block: &Value) -> String {
    match block.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) => {
            a.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
        }
        _ => String::new(),
    }
}

/// All text of the last user message: text blocks and tool_result texts, joined by `\n`.
pub fn last_user_text(body: &Value) -> String {
    last_user_blocks(body)
        .iter()
        .map(|b| match b.get("type").and_then(Value::as_str) {
            Some("text") => b.get("text").and_then(Value::as_str).unwrap_or("").to_string(),
            Some("tool_result") => tool_result_text(b),
            _ => String::new(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `(content_text, is_error)` of every `tool_result` block for `tool_use_id` in any message
/// of the request.
pub fn tool_results_in(body: &Value, tool_use_id: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let Some(msgs) = body.get("messages").and_then(Value::as_array) else {
        return out;
    };
    for m in msgs {
        let Some(blocks) = m.get("content").and_then(Value::as_array) else {
            continue;
        };
        for b in blocks {
            if b.get("type").and_then(Value::as_str) == Some("tool_result")
                && b.get("tool_use_id").and_then(Value::as_str) == Some(tool_use_id)
            {
                out.push((tool_result_text(b), b.get("is_error").and_then(Value::as_bool).unwrap_or(false)));
            }
        }
    }
    out
}

/// The placeholder a tool_use input string may hold: `{{path_with:NEEDLE}}` becomes the
/// first absolute path in the request (any string in its body) that contains `NEEDLE` —
/// for a path the agent makes up at run time and tells the model, such as the plan file
/// an agent asks to be written (`{{path_with:/.claude/plans/}}`). Unfound, the
/// placeholder stays as it is (the agent then refuses the call, which a test sees).
pub const PATH_WITH: &str = "{{path_with:";

/// `input` with every [`PATH_WITH`] placeholder filled from `body`.
pub fn fill_placeholders(input: &Value, body: &Value) -> Value {
    match input {
        Value::String(s) => Value::String(fill_string(s, body)),
        Value::Array(a) => Value::Array(a.iter().map(|v| fill_placeholders(v, body)).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), fill_placeholders(v, body))).collect()),
        other => other.clone(),
    }
}

fn fill_string(s: &str, body: &Value) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find(PATH_WITH) {
        let after = &rest[at + PATH_WITH.len()..];
        let Some(end) = after.find("}}") else { break };
        let needle = &after[..end];
        out.push_str(&rest[..at]);
        match path_with(body, needle) {
            Some(p) => out.push_str(&p),
            None => out.push_str(&rest[at..at + PATH_WITH.len() + end + 2]),
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

/// The first absolute path containing `needle` in any string of `body`.
fn path_with(body: &Value, needle: &str) -> Option<String> {
    match body {
        Value::String(s) => {
            let stop = |c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '(' | ')' | '<' | '>');
            s.match_indices(needle).find_map(|(at, _)| {
                let start = s[..at].rfind(stop).map_or(0, |i| i + s[i..].chars().next().map_or(1, char::len_utf8));
                let end = s[at..].find(stop).map_or(s.len(), |i| at + i);
                let path = s[start..end].trim_end_matches(['.', ',', ';', ':']);
                (path.starts_with('/') && path.len() > needle.len()).then(|| path.to_string())
            })
        }
        Value::Array(a) => a.iter().find_map(|v| path_with(v, needle)),
        Value::Object(o) => o.values().find_map(|v| path_with(v, needle)),
        _ => None,
    }
}

fn last_user_has_result_for(body: &Value, id: &str) -> bool {
    last_user_blocks(body).iter().any(|b| {
        b.get("type").and_then(Value::as_str) == Some("tool_result")
            && b.get("tool_use_id").and_then(Value::as_str) == Some(id)
    })
}

impl Matcher {
    /// Whether this matcher fits `body`; `previous_tool_use` is the id of the last tool_use
    /// the stand-in emitted, if any.
    pub fn fits(&self, body: &Value, previous_tool_use: Option<&str>) -> bool {
        match self {
            Matcher::Any => true,
            Matcher::ToolResultForPrevious => previous_tool_use.is_some_and(|id| last_user_has_result_for(body, id)),
            Matcher::ToolResultFor(id) => last_user_has_result_for(body, id),
            Matcher::Contains(s) => last_user_text(body).contains(s.as_str()),
            Matcher::BodyContains(s) => body.to_string().contains(s.as_str()),
            Matcher::All(ms) => ms.iter().all(|m| m.fits(body, previous_tool_use)),
            Matcher::AnyOf(ms) => ms.iter().any(|m| m.fits(body, previous_tool_use)),
            Matcher::Not(m) => !m.fits(body, previous_tool_use),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Recording
// ---------------------------------------------------------------------------------------

/// How the stand-in classified and answered a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// `POST /v1/messages` with tools: consumed script turn `turn` (index into `Script::turns`),
    /// or `None` when the fallback reply was used.
    Main { turn: Option<usize> },
    /// `POST /v1/messages` without tools: answered with the side reply.
    Side,
    /// `POST /v1/messages/count_tokens`.
    CountTokens,
    /// Anything else (404), including malformed requests.
    Other,
}

/// A request as received.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// Where and when it arrived, what it carried (its fields at the top level of the JSON).
    #[serde(flatten)]
    pub arrival: Arrival,
    pub kind: RequestKind,
    /// Whether the body asked for `"stream": true`.
    pub stream: bool,
    /// The `model` field of the body, if any.
    pub model: Option<String>,
    /// The reply that was sent (for messages requests).
    pub reply: Option<SentReply>,
}

impl std::ops::Deref for RecordedRequest {
    type Target = Arrival;
    fn deref(&self) -> &Arrival {
        &self.arrival
    }
}

impl RecordedRequest {
    pub fn is_main(&self) -> bool {
        matches!(self.kind, RequestKind::Main { .. })
    }
}

/// Summary of what a messages request was answered with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SentReply {
    pub status: u16,
    pub stop_reason: Option<String>,
    pub text: Option<String>,
    pub tool_use: Option<EmittedToolUse>,
    /// The response's final usage (`input_tokens`, `output_tokens`,
    /// `cache_read_input_tokens`, `cache_creation_input_tokens`), for a 200.
    #[serde(default)]
    pub usage: Option<Value>,
}

/// A tool_use block the stand-in sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmittedToolUse {
    pub id: String,
    pub name: String,
    pub input: Value,
    /// Index of the script turn that produced it.
    pub turn: usize,
    /// Index of the request it answered.
    pub request_index: usize,
}

// ---------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------

/// The Messages API as the stand-in answers it (the core's [`Api`]).
pub struct MessagesApi;

type State = Recorded<MessagesApi>;
type Shared = Core<MessagesApi>;

impl Api for MessagesApi {
    type Script = Script;
    type Request = RecordedRequest;
    type Emitted = EmittedToolUse;
    type Extra = ();
    fn handle(&self, req: &HttpRequest, core: &Shared) -> (Response, Option<Duration>) {
        handle(req, core)
    }
    fn malformed(&self, error: &io::Error) -> Response {
        json_response(400, &api_error("invalid_request_error", &error.to_string()))
    }
    fn extra_headers(&self, core: &Shared) -> Vec<(&'static str, String)> {
        vec![("request-id", fresh_id(core, "req"))]
    }
}

/// A running stand-in (the core's [`standin_http::Standin`], which it derefs to: `addr`,
/// `port`, `requests`, `remaining_turns`, `wait_until`, …). Dropping it (or
/// [`Standin::shutdown`]) stops the server and closes its connections.
pub struct Standin(standin_http::Standin<MessagesApi>);

impl std::ops::Deref for Standin {
    type Target = standin_http::Standin<MessagesApi>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Standin {
    /// Starts on `127.0.0.1:0` (an ephemeral port).
    pub fn start(script: Script) -> io::Result<Standin> {
        Standin::start_on("127.0.0.1:0", script)
    }

    /// Starts on `addr`, which must resolve to loopback addresses only.
    pub fn start_on(addr: impl ToSocketAddrs, script: Script) -> io::Result<Standin> {
        let turns = script.turns.len();
        standin_http::Standin::start(addr, "standin", MessagesApi, script, turns, ()).map(Standin)
    }

    /// `http://127.0.0.1:PORT` — the value for `ANTHROPIC_BASE_URL`.
    pub fn base_url(&self) -> String {
        self.origin()
    }
    /// When the scripted usage limit resets (Unix seconds), once it started.
    pub fn usage_limit_until(&self) -> Option<u64> {
        self.lock().script.usage_limit.as_ref()?.until
    }
    /// Only the main-agent `/v1/messages` requests.
    pub fn main_requests(&self) -> Vec<RecordedRequest> {
        self.requests().into_iter().filter(|r| r.is_main()).collect()
    }
    /// Every tool_use the stand-in has emitted, in order.
    pub fn emitted_tool_uses(&self) -> Vec<EmittedToolUse> {
        self.emitted()
    }
    /// `(content_text, is_error)` of each distinct `tool_result` for `tool_use_id` the agent
    /// has sent back. Each request repeats the whole conversation, so identical results
    /// seen in several requests are reported once; normally the answer has 0 or 1 entry.
    pub fn tool_results_for(&self, tool_use_id: &str) -> Vec<(String, bool)> {
        collect_tool_results(&self.lock().requests, tool_use_id)
    }
    /// Waits for the `n`-th (0-based) emitted tool_use.
    pub fn wait_for_tool_use(&self, n: usize, timeout: Duration) -> Option<EmittedToolUse> {
        self.wait_for_emitted(n, timeout)
    }
    /// Waits until a tool_result for `tool_use_id` has arrived; returns the first one.
    pub fn wait_for_tool_result(&self, tool_use_id: &str, timeout: Duration) -> Option<(String, bool)> {
        self.wait_for(timeout, |st| collect_tool_results(&st.requests, tool_use_id).into_iter().next())
    }

    /// Stops accepting, closes open connections and joins the accept thread.
    pub fn shutdown(self) {
        self.0.shutdown();
    }
}

fn collect_tool_results(reqs: &[RecordedRequest], tool_use_id: &str) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = Vec::new();
    for r in reqs {
        for tr in tool_results_in(&r.body, tool_use_id) {
            if !out.contains(&tr) {
                out.push(tr);
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Messages API
// ---------------------------------------------------------------------------------------

fn api_error(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// A fresh id like `toolu_01AbC…` (24 base62 chars after the prefix's "01").
fn fresh_id(shared: &Shared, prefix: &str) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let n = shared.next_id();
    let mut x = (now_unix_ms() ^ (std::process::id() as u64).rotate_left(32))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(n.wrapping_mul(0xD1B5_4A32_D192_ED03))
        | 1;
    let mut s = format!("{prefix}_01");
    for _ in 0..22 {
        // xorshift64*
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let v = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        s.push(ALPHABET[(v >> 58) as usize % ALPHABET.len()] as char);
    }
    s
}

fn approx_tokens(body: &[u8]) -> u64 {
    (body.len() as u64 / 4).max(1)
}

fn handle(req: &HttpRequest, shared: &Shared) -> (Response, Option<Duration>) {
    let path = req.target.split_once('?').map_or(req.target.as_str(), |(p, _)| p).to_string();
    let body = json_body(req, false);
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let model = body.get("model").and_then(Value::as_str).map(str::to_string);

    let mut st = shared.state.lock();
    let index = st.requests.len();
    let mut rec = RecordedRequest {
        arrival: Arrival::new(index, req, body.clone(), shared.started),
        kind: RequestKind::Other,
        stream,
        model: model.clone(),
        reply: None,
    };

    let mut delay = None;
    let resp = match (req.method.as_str(), path.as_str()) {
        ("GET", "/_standin/requests") => {
            // Not recorded: this is the test harness looking in.
            let v = serde_json::to_value(&st.requests).unwrap_or(Value::Null);
            return (json_response(200, &v), None);
        }
        ("GET", "/_standin/tool_uses") => {
            let v = serde_json::to_value(&st.emitted).unwrap_or(Value::Null);
            return (json_response(200, &v), None);
        }
        ("POST", "/v1/messages/count_tokens") => {
            rec.kind = RequestKind::CountTokens;
            json_response(200, &json!({"input_tokens": approx_tokens(&req.body)}))
        }
        ("POST", "/v1/messages") => {
            if !body.is_object() {
                json_response(400, &api_error("invalid_request_error", "request body is not a JSON object"))
            } else {
                let model = model.unwrap_or_else(|| "claude-standin".to_string());
                let input_tokens = approx_tokens(&req.body);
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
                let limited = match st.script.usage_limit.as_mut() {
                    Some(l) if is_main_request(&body) => l.refusal(now),
                    _ => None,
                };
                if let Some(resp) = limited {
                    rec.kind = RequestKind::Main { turn: None };
                    rec.reply =
                        Some(SentReply { status: 429, stop_reason: None, text: None, tool_use: None, usage: None });
                    st.requests.push(rec);
                    drop(st);
                    shared.state.notify();
                    return (resp, None);
                }
                let (reply, kind, turn) = if is_main_request(&body) {
                    let prev = st.emitted.last().map(|t| t.id.clone());
                    let State { script, consumed, .. } = &mut *st;
                    let pick = consumed.pick(&script.turns, |m| m.fits(&body, prev.as_deref()));
                    match pick {
                        Some(i) => {
                            let t = &st.script.turns[i];
                            delay = t.delay();
                            let reply = match &t.reply {
                                Reply::ToolUse(tu) => Reply::ToolUse(ToolUseReply {
                                    input: fill_placeholders(&tu.input, &body),
                                    ..tu.clone()
                                }),
                                other => other.clone(),
                            };
                            (reply, RequestKind::Main { turn: Some(i) }, Some(i))
                        }
                        None => {
                            let reply = match st.script.builtin {
                                Some(b) => b.reply(&body),
                                None => Reply::Text(st.script.fallback_reply.clone()),
                            };
                            (reply, RequestKind::Main { turn: None }, None)
                        }
                    }
                } else {
                    (Reply::Text(side_reply_text(&body, &st.script.side_reply)), RequestKind::Side, None)
                };
                rec.kind = kind;
                let (resp, sent) = render_reply(shared, &reply, &model, input_tokens, stream);
                if let (Some(tu), Some(turn)) = (&sent.tool_use, turn) {
                    st.emitted.push(EmittedToolUse { turn, request_index: index, ..tu.clone() });
                }
                rec.reply = Some(SentReply {
                    tool_use: sent.tool_use.map(|tu| EmittedToolUse {
                        turn: turn.unwrap_or(0),
                        request_index: index,
                        ..tu
                    }),
                    ..sent
                });
                resp
            }
        }
        (_, "/v1/messages") | (_, "/v1/messages/count_tokens") => {
            json_response(405, &api_error("invalid_request_error", &format!("method {} not allowed", req.method)))
        }
        _ => json_response(
            404,
            &api_error("not_found_error", &format!("{} {} is not served by the stand-in", req.method, path)),
        ),
    };
    st.requests.push(rec);
    drop(st);
    shared.state.notify();
    (resp, delay)
}

/// The side reply: plain text, or — when the request asks for structured output
/// (`output_config.format.type == "json_schema"`, as claude's title request does) — a JSON
/// object that fits the schema, with every string property set to `text`.
fn side_reply_text(body: &Value, text: &str) -> String {
    match body.pointer("/output_config/format") {
        Some(f) if f.get("type").and_then(Value::as_str) == Some("json_schema") => {
            let schema = f.get("schema").cloned().unwrap_or(Value::Null);
            value_for_schema(&schema, text).to_string()
        }
        _ => text.to_string(),
    }
}

fn sse(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// Splits `s` into up to `n` pieces on char boundaries (for partial_json deltas).
fn split_pieces(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let size = chars.len().div_ceil(n.max(1));
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn render_reply(shared: &Shared, reply: &Reply, model: &str, input_tokens: u64, stream: bool) -> (Response, SentReply) {
    if let Reply::Error { status, error_type, message } = reply {
        let resp = json_response(*status, &api_error(error_type, message));
        return (resp, SentReply { status: *status, stop_reason: None, text: None, tool_use: None, usage: None });
    }
    let msg_id = fresh_id(shared, "msg");
    // A text reply always has its text block; a tool_use reply only a non-empty lead-in.
    let (out_text, tool_use) = match reply {
        Reply::Text(t) => (Some(t.clone()), None),
        Reply::ToolUse(tu) => {
            let id = tu.id.clone().unwrap_or_else(|| fresh_id(shared, "toolu"));
            let lead = tu.text.clone().filter(|t| !t.is_empty());
            (
                lead,
                Some(EmittedToolUse { id, name: tu.name.clone(), input: tu.input.clone(), turn: 0, request_index: 0 }),
            )
        }
        Reply::Error { .. } => unreachable!(),
    };
    let stop_reason = if tool_use.is_some() { "tool_use" } else { "end_turn" };
    let output_tokens = 1
        + out_text.as_ref().map_or(0, |t| t.len() as u64 / 4)
        + tool_use.as_ref().map_or(0, |t| t.input.to_string().len() as u64 / 4);
    // Every response's usage is its own (distinct cache figures per response), so a
    // test can tell a response counted twice from two responses.
    let n = shared.next_id();
    let (cache_write, cache_read) = (3 + (n * 7) % 50, 100 + n * 11);
    let usage = json!({
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": cache_write,
        "cache_read_input_tokens": cache_read,
        "output_tokens": output_tokens,
    });
    let sent = SentReply {
        status: 200,
        stop_reason: Some(stop_reason.into()),
        text: out_text.clone(),
        tool_use: tool_use.clone(),
        usage: Some(usage.clone()),
    };

    if !stream {
        let mut content = Vec::new();
        if let Some(t) = &out_text {
            content.push(json!({"type": "text", "text": t}));
        }
        if let Some(tu) = &tool_use {
            content.push(json!({"type": "tool_use", "id": tu.id, "name": tu.name, "input": tu.input}));
        }
        let v = json!({
            "id": msg_id, "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop_reason, "stop_sequence": null, "usage": usage,
        });
        return (json_response(200, &v), sent);
    }

    let mut events = Vec::new();
    events.push(sse(
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "cache_creation_input_tokens": cache_write, "cache_read_input_tokens": cache_read, "output_tokens": 1},
        }}),
    ));
    let mut index = 0;
    if let Some(t) = &out_text {
        events.push(sse(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        ));
        events.push(sse("ping", &json!({"type": "ping"})));
        for piece in split_pieces(t, 3) {
            events.push(sse(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}),
            ));
        }
        events.push(sse("content_block_stop", &json!({"type": "content_block_stop", "index": index})));
        index += 1;
    }
    if let Some(tu) = &tool_use {
        events.push(sse(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": tu.id, "name": tu.name, "input": {}}}),
        ));
        let input = tu.input.to_string();
        let mut pieces = vec![String::new()];
        pieces.extend(split_pieces(&input, 3));
        for piece in pieces {
            events.push(sse(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}}),
            ));
        }
        events.push(sse("content_block_stop", &json!({"type": "content_block_stop", "index": index})));
    }
    events.push(sse(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": output_tokens}}),
    ));
    events.push(sse("message_stop", &json!({"type": "message_stop"})));
    (
        Response {
            status: 200,
            content_type: "text/event-stream",
            body: ResponseBody::Events(events),
            headers: Vec::new(),
        },
        sent,
    )
}
