//! A scripted stand-in for Google's Gemini API, for lab's Gemini CLI tests.
//!
//! It serves on a loopback address only and answers what `@google/gemini-cli` (0.61.0,
//! through `@google/genai`) sends when `GOOGLE_GEMINI_BASE_URL` points at it
//! (docs/gemini-cli-observed.md):
//!
//! * `POST /v1beta/models/{model}:streamGenerateContent?alt=sse` and
//!   `POST /v1beta/models/{model}:generateContent` — a `GenerateContentResponse` (as
//!   Server-Sent Events for the first, each event one JSON response, the last with
//!   `finishReason` and `usageMetadata`);
//! * `POST /v1beta/models/{model}:countTokens` — `{"totalTokens": N}`;
//! * `GET /_standin/requests` — every request recorded so far (not recorded itself);
//! * anything else — `404` with a Google-style JSON error.
//!
//! A *turn request* (one that offers `tools`, or asks for no structured output) takes
//! the first unused [`Turn`] whose [`Matcher`] fits it and gets its [`Reply`]: text, or
//! a `functionCall` (with text before it). A *side request* asks for structured output
//! (`generationConfig.responseJsonSchema`/`responseSchema`: Gemini CLI's model router,
//! its next-speaker check): it is answered with a value that fits the schema and uses
//! no turn. With no turn left that fits, the reply is [`Script::fallback_reply`].
//!
//! Every response carries `usageMetadata` (prompt [`PROMPT_TOKENS`] + the request's
//! index, [`OUTPUT_TOKENS`] out), recorded with the request ([`SentReply::usage`]), so
//! a test can add up what the agent was told.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
pub use standin_http::is_loopback;
use standin_http::{
    json_body, json_response, value_for_schema, Api, Arrival, Core, HttpRequest, Recorded, Response, ResponseBody,
};
use std::io;
use std::net::ToSocketAddrs;
use std::time::Duration;

/// Prompt tokens every response reports, plus the request's index (so no two are alike).
pub const PROMPT_TOKENS: u64 = 100;
/// Output tokens every response reports.
pub const OUTPUT_TOKENS: u64 = 7;

/// Which turn request a [`Turn`] fits.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Matcher {
    #[default]
    Any,
    /// The newest user text contains this.
    Contains(String),
    /// The request carries the `functionResponse` to the stand-in's newest call.
    ResponseForPrevious,
}

/// What a turn answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    Text(String),
    /// A `functionCall` part (after a text part when `text` is set).
    Call {
        name: String,
        args: Value,
        text: Option<String>,
    },
}

impl Reply {
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Text(text.into())
    }
    /// Gemini CLI's shell tool: `run_shell_command {command, description}`.
    pub fn shell(command: impl Into<String>, description: impl Into<String>) -> Reply {
        Reply::call("run_shell_command", json!({"command": command.into(), "description": description.into()}))
    }
    pub fn call(name: impl Into<String>, args: Value) -> Reply {
        Reply::Call { name: name.into(), args, text: None }
    }
    /// The same call, said after `text`.
    pub fn after(self, text: impl Into<String>) -> Reply {
        match self {
            Reply::Call { name, args, .. } => Reply::Call { name, args, text: Some(text.into()) },
            other => other,
        }
    }
}

/// One scripted step: used by the first turn request `when` fits.
pub type Turn = standin_http::Turn<Matcher, Reply>;

/// The turns, in order, and the text answered when none is left that fits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Script {
    #[serde(default)]
    pub turns: Vec<Turn>,
    #[serde(default = "default_fallback")]
    pub fallback_reply: String,
}

fn default_fallback() -> String {
    "OK.".to_string()
}

impl Default for Script {
    fn default() -> Self {
        Script { turns: Vec::new(), fallback_reply: default_fallback() }
    }
}

impl Script {
    pub fn new() -> Script {
        Script::default()
    }
    pub fn turn(mut self, when: Matcher, reply: Reply) -> Script {
        self.turns.push(Turn::new(when, reply, None));
        self
    }
    /// `ResponseForPrevious → text`: the reply once the call's result came back.
    pub fn after_response(self, text: impl Into<String>) -> Script {
        self.turn(Matcher::ResponseForPrevious, Reply::text(text))
    }
}

/// How the stand-in took a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// A turn: the script's turn it used (`None`: the fallback).
    Turn {
        turn: Option<usize>,
    },
    /// Structured output asked for: answered from the schema.
    Side,
    CountTokens,
    Other,
}

/// What was sent back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SentReply {
    pub text: Option<String>,
    pub call: Option<EmittedCall>,
    /// The `usageMetadata` sent.
    pub usage: Value,
}

/// A request as received.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RecordedRequest {
    #[serde(flatten)]
    pub arrival: Arrival,
    /// The model named in the path (`…/models/{model}:…`).
    pub model: String,
    pub kind: RequestKind,
    pub reply: Option<SentReply>,
}

impl std::ops::Deref for RecordedRequest {
    type Target = Arrival;
    fn deref(&self) -> &Arrival {
        &self.arrival
    }
}

/// A function call the stand-in sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmittedCall {
    pub name: String,
    pub args: Value,
    pub request_index: usize,
}

/// The request's `contents`.
fn contents(body: &Value) -> &[Value] {
    body.get("contents").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

fn parts(content: &Value) -> &[Value] {
    content.get("parts").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

/// The text of the newest user content that has text.
pub fn last_user_text(body: &Value) -> String {
    contents(body)
        .iter()
        .rev()
        .filter(|c| c.get("role").and_then(Value::as_str) == Some("user"))
        .map(|c| parts(c).iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n"))
        .find(|t| !t.is_empty())
        .unwrap_or_default()
}

/// `(name, response)` of every `functionResponse` part of the last content.
pub fn function_responses(body: &Value) -> Vec<(String, Value)> {
    contents(body)
        .last()
        .map(|c| {
            parts(c)
                .iter()
                .filter_map(|p| p.get("functionResponse"))
                .map(|r| {
                    let name = r.get("name").and_then(Value::as_str).unwrap_or("").to_string();
                    (name, r.get("response").cloned().unwrap_or(Value::Null))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the request asks for structured output (a side request, not a turn).
pub fn wants_structured_output(body: &Value) -> Option<Value> {
    let config = body.get("generationConfig")?;
    config.get("responseJsonSchema").or_else(|| config.get("responseSchema")).cloned()
}

impl Matcher {
    fn fits(&self, body: &Value, previous: Option<&str>) -> bool {
        match self {
            Matcher::Any => true,
            Matcher::Contains(s) => last_user_text(body).contains(s.as_str()),
            Matcher::ResponseForPrevious => {
                previous.is_some_and(|name| function_responses(body).iter().any(|(n, _)| n == name))
            }
        }
    }
}

/// Gemini's schema types are upper case (`OBJECT`); the shared filler reads JSON
/// Schema's lower case.
fn lower_types(schema: &Value) -> Value {
    match schema {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("type", Value::String(t)) => (k.clone(), Value::String(t.to_ascii_lowercase())),
                    _ => (k.clone(), lower_types(v)),
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(lower_types).collect()),
        other => other.clone(),
    }
}

/// The Gemini API as the stand-in answers it.
pub struct GeminiApi;

type Shared = Core<GeminiApi>;

impl Api for GeminiApi {
    type Script = Script;
    type Request = RecordedRequest;
    type Emitted = EmittedCall;
    type Extra = ();
    fn handle(&self, req: &HttpRequest, core: &Shared) -> (Response, Option<Duration>) {
        handle(req, core)
    }
    fn malformed(&self, error: &io::Error) -> Response {
        json_response(400, &api_error(400, &error.to_string()))
    }
}

fn api_error(code: u16, message: &str) -> Value {
    json!({"error": {"code": code, "message": message, "status": if code == 404 { "NOT_FOUND" } else { "INVALID_ARGUMENT" }}})
}

/// `…/models/{model}:{method}` → (model, method).
fn model_call(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/v1beta/models/").or_else(|| path.strip_prefix("/v1/models/"))?;
    rest.split_once(':')
}

fn handle(req: &HttpRequest, shared: &Shared) -> (Response, Option<Duration>) {
    let (path, query) = req.target.split_once('?').unwrap_or((req.target.as_str(), ""));
    let encoded = req.header("content-encoding").is_some_and(|e| !e.eq_ignore_ascii_case("identity"));
    let body = json_body(req, encoded);
    let mut st = shared.state.lock();
    if req.method == "GET" && path == "/_standin/requests" {
        return (json_response(200, &serde_json::to_value(&st.requests).unwrap_or(Value::Null)), None);
    }
    let index = st.requests.len();
    let call = model_call(path);
    let mut rec = RecordedRequest {
        arrival: Arrival::new(index, req, body.clone(), shared.started),
        model: call.map(|(m, _)| m.to_string()).unwrap_or_default(),
        kind: RequestKind::Other,
        reply: None,
    };
    let mut delay = None;
    let resp = match (req.method.as_str(), call) {
        ("POST", Some((_, "countTokens"))) => {
            rec.kind = RequestKind::CountTokens;
            json_response(200, &json!({"totalTokens": PROMPT_TOKENS}))
        }
        ("POST", Some((_, method @ ("generateContent" | "streamGenerateContent")))) if body.is_object() => {
            let usage = json!({
                "promptTokenCount": PROMPT_TOKENS + index as u64,
                "candidatesTokenCount": OUTPUT_TOKENS,
                "totalTokenCount": PROMPT_TOKENS + index as u64 + OUTPUT_TOKENS,
            });
            let reply = if let Some(schema) = wants_structured_output(&body) {
                rec.kind = RequestKind::Side;
                Reply::Text(value_for_schema(&lower_types(&schema), "stand-in").to_string())
            } else {
                let previous = st.emitted.last().map(|c| c.name.clone());
                let Recorded { script, consumed, .. } = &mut *st;
                match consumed.pick(&script.turns, |m| m.fits(&body, previous.as_deref())) {
                    Some(i) => {
                        delay = script.turns[i].delay();
                        rec.kind = RequestKind::Turn { turn: Some(i) };
                        script.turns[i].reply.clone()
                    }
                    None => {
                        rec.kind = RequestKind::Turn { turn: None };
                        Reply::Text(script.fallback_reply.clone())
                    }
                }
            };
            let (text, call) = match &reply {
                Reply::Text(t) => (Some(t.clone()), None),
                Reply::Call { name, args, text } => {
                    (text.clone(), Some(EmittedCall { name: name.clone(), args: args.clone(), request_index: index }))
                }
            };
            if let Some(c) = &call {
                st.emitted.push(c.clone());
            }
            let stream = method == "streamGenerateContent";
            rec.reply = Some(SentReply { text: text.clone(), call: call.clone(), usage: usage.clone() });
            render(text.as_deref(), call.as_ref(), usage, &rec.model, stream && query.contains("alt=sse"))
        }
        ("POST", Some((_, "generateContent" | "streamGenerateContent"))) => {
            json_response(400, &api_error(400, "the request body is not a JSON object"))
        }
        _ => json_response(404, &api_error(404, &format!("{} {path} is not served by the stand-in", req.method))),
    };
    st.requests.push(rec);
    drop(st);
    shared.state.notify();
    (resp, delay)
}

/// One `GenerateContentResponse` (or, streamed, a text event and a last event with the
/// call, `finishReason` and `usageMetadata`).
fn render(text: Option<&str>, call: Option<&EmittedCall>, usage: Value, model: &str, sse: bool) -> Response {
    let candidate = |parts: Vec<Value>, last: bool| {
        let mut c = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        if last {
            c["finishReason"] = json!("STOP");
        }
        c
    };
    let text_part = text.map(|t| json!({"text": t}));
    let call_part = call.map(|c| json!({"functionCall": {"name": c.name, "args": c.args}}));
    if !sse {
        let parts: Vec<Value> = text_part.into_iter().chain(call_part).collect();
        return json_response(
            200,
            &json!({"candidates": [candidate(parts, true)], "usageMetadata": usage, "modelVersion": model}),
        );
    }
    let mut events = Vec::new();
    let mut last_parts = Vec::new();
    match (text_part, call_part) {
        (Some(t), Some(c)) => {
            events.push(json!({"candidates": [candidate(vec![t], false)], "modelVersion": model}));
            last_parts.push(c);
        }
        (Some(t), None) => last_parts.push(t),
        (None, Some(c)) => last_parts.push(c),
        (None, None) => {}
    }
    events.push(json!({"candidates": [candidate(last_parts, true)], "usageMetadata": usage, "modelVersion": model}));
    Response {
        status: 200,
        content_type: "text/event-stream",
        body: ResponseBody::Events(events.into_iter().map(|e| format!("data: {e}\r\n\r\n")).collect()),
        headers: Vec::new(),
    }
}

/// A running stand-in (derefs to the shared core: `requests`, `wait_for`, …).
pub struct Standin(standin_http::Standin<GeminiApi>);

impl std::ops::Deref for Standin {
    type Target = standin_http::Standin<GeminiApi>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Standin {
    /// Starts on `127.0.0.1:0` (an ephemeral port).
    pub fn start(script: Script) -> io::Result<Standin> {
        Standin::start_on("127.0.0.1:0", script)
    }
    /// Starts on `addr` (loopback only).
    pub fn start_on(addr: impl ToSocketAddrs, script: Script) -> io::Result<Standin> {
        let turns = script.turns.len();
        standin_http::Standin::start(addr, "gemini-standin", GeminiApi, script, turns, ()).map(Standin)
    }
    /// `http://127.0.0.1:PORT`: the value for `GOOGLE_GEMINI_BASE_URL`.
    pub fn base_url(&self) -> String {
        self.origin()
    }
    /// The turn requests only.
    pub fn turn_requests(&self) -> Vec<RecordedRequest> {
        self.requests().into_iter().filter(|r| matches!(r.kind, RequestKind::Turn { .. })).collect()
    }
    /// The `usageMetadata` of every response sent, in order (side requests included).
    pub fn usage_sent(&self) -> Vec<Value> {
        self.requests().into_iter().filter_map(|r| r.reply.map(|s| s.usage)).collect()
    }
    /// Waits until a request carries a `functionResponse` for `name`; returns it.
    pub fn wait_for_response(&self, name: &str, timeout: Duration) -> Option<Value> {
        self.wait_for(timeout, |st| {
            st.requests
                .iter()
                .find_map(|r| function_responses(&r.body).into_iter().find(|(n, _)| n == name))
                .map(|x| x.1)
        })
    }
    pub fn shutdown(self) {
        self.0.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(s: &Standin, model_call: &str, body: &Value) -> (u16, String) {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(s.addr()).unwrap();
        let b = body.to_string();
        write!(
            c,
            "POST /v1beta/models/{model_call} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{b}",
            b.len()
        )
        .unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        let status = out.split_whitespace().nth(1).unwrap().parse().unwrap();
        (status, out)
    }

    fn user(text: &str) -> Value {
        json!({"contents": [{"role": "user", "parts": [{"text": text}]}], "tools": [{}]})
    }

    #[test]
    fn a_call_then_the_reply_after_its_response_and_side_requests_use_no_turn() {
        let s = Standin::start(
            Script::new()
                .turn(Matcher::Any, Reply::shell("echo hi", "say hi").after("Running it."))
                .after_response("Done."),
        )
        .unwrap();
        let side = json!({"contents": [], "generationConfig": {"responseJsonSchema": {"type": "OBJECT", "properties": {"complexity_score": {"type": "INTEGER"}, "why": {"type": "STRING"}}}}});
        let (status, out) = post(&s, "flash-lite:generateContent", &side);
        assert_eq!(status, 200);
        assert!(out.contains(r#"{\"complexity_score\":0,\"why\":\"stand-in\"}"#), "{out}");
        let (_, out) = post(&s, "pro:streamGenerateContent?alt=sse", &user("do it"));
        assert!(out.contains("text/event-stream") && out.contains("Running it."), "{out}");
        assert!(
            out.contains(
                r#""functionCall":{"args":{"command":"echo hi","description":"say hi"},"name":"run_shell_command"}"#
            ),
            "{out}"
        );
        assert!(out.contains("usageMetadata") && out.contains(r#""finishReason":"STOP""#), "{out}");
        // Not the call's response: the fallback.
        let (_, out) = post(&s, "pro:streamGenerateContent?alt=sse", &user("again"));
        assert!(out.contains("OK."), "{out}");
        let answered = json!({"contents": [{"role": "user", "parts": [{"text": "do it"}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command", "response": {"output": "hi"}}}]}]});
        let (_, out) = post(&s, "pro:streamGenerateContent?alt=sse", &answered);
        assert!(out.contains("Done."), "{out}");
        assert_eq!(s.wait_for_response("run_shell_command", Duration::from_secs(1)), Some(json!({"output": "hi"})));
        assert_eq!(s.turn_requests().len(), 3);
        assert_eq!(s.usage_sent().len(), 4, "every answer says its usage");
        assert!(s.remaining_turns().is_empty());
        let (status, _) = post(&s, "pro:embedContent", &user("x"));
        assert_eq!(status, 404);
    }
}
