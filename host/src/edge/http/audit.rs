//! Every operator action through the API goes into the audit log ([`crate::edge::audit`]):
//! [`record`] is the one layer that does it, for every route [`action_of`] names, with
//! the caller ([`auth::Standing`]), the run, what was asked ([`detail_of`]) and what came
//! of it (the status: applied, or refused with lab's error). `GET /audit` reads it.

use super::{auth, ApiError, ApiResult, AppState};
use crate::edge::audit::{self, Actor, Audit, Filter};
use axum::body::Body;
use axum::extract::{ConnectInfo, MatchedPath, Query, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::Arc;

pub fn router() -> Router<AppState> {
    Router::new().route("/audit", get(list))
}

/// The action a request is, by its method and route; `None`: not an action (reads).
pub fn action_of(method: &str, route: &str) -> Option<&'static str> {
    Some(match (method, route) {
        ("POST", "/runs") => "run.start",
        ("POST", "/runs/{id}/stop") => "run.stop",
        ("POST", "/runs/{id}/resume") => "run.resume",
        ("POST", "/runs/{id}/fork") => "run.fork",
        ("PUT", "/runs/{id}/auto-resume") => "run.auto_resume",
        ("PUT", "/runs/{id}/egress") => "run.egress",
        ("POST", "/runs/{id}/messages") => "message.send",
        ("POST", "/runs/{id}/dialog/answer") => "dialog.answer",
        ("POST", "/runs/{id}/review") => "review.send",
        ("POST", "/runs/{id}/merge") => "merge",
        ("POST", "/runs/{id}/discard") => "discard",
        ("POST", "/runs/{id}/terminal/control") => "terminal.control",
        ("POST", "/login") => "device.login",
        ("POST", "/pair") => "device.pair",
        ("DELETE", "/devices/{id}") => "device.logout",
        ("POST", "/push/key/rotate") => "push_key.rotate",
        ("POST", "/push/subscriptions") => "push.subscribe",
        ("DELETE", "/push/subscriptions/{id}") => "push.unsubscribe",
        ("POST", "/rules") => "rule.add",
        ("POST", "/runs/{id}/dialog/rule") => "rule.from_card",
        ("PUT", "/runs/{id}/rules") => "run.rules",
        ("PUT", "/rules/{id}") => "rule.change",
        ("DELETE", "/rules/{id}") => "rule.remove",
        _ => return None,
    })
}

/// What the log keeps of a request's body: the option chosen, the start of a message,
/// the run's settings — never a token, a login code or a push endpoint's keys.
pub fn detail_of(action: &str, body: &Value) -> Value {
    let pick = |keys: &[&str]| {
        let mut out = serde_json::Map::new();
        for k in keys {
            if let Some(v) = body.get(*k) {
                out.insert((*k).to_string(), v.clone());
            }
        }
        Value::Object(out)
    };
    match action {
        "run.start" => {
            let mut d = pick(&["provider", "workdir", "host", "worktree", "base", "model", "sandbox"]);
            if let Some(p) = body.get("prompt").and_then(Value::as_str) {
                d["prompt"] = audit::text_detail(p);
            }
            d
        }
        "message.send" => body.get("text").and_then(Value::as_str).map(audit::text_detail).unwrap_or(Value::Null),
        "dialog.answer" => pick(&["tool_id", "answers"]),
        "review.send" => {
            let comments = body.get("comments").and_then(Value::as_array).map_or(0, Vec::len);
            json!({"comments": comments})
        }
        "merge" | "discard" | "run.fork" | "run.resume" | "run.auto_resume" | "run.rules" => {
            pick(&["strategy", "message", "prompt", "on"])
        }
        "terminal.control" => pick(&["take"]),
        "run.egress" => pick(&["allow"]),
        "device.pair" => pick(&["name"]),
        "rule.add" | "rule.change" => pick(&["name", "action", "message", "match", "dry_run"]),
        "rule.from_card" => pick(&["tool_id", "scope"]),
        _ => json!({}),
    }
}

/// The action's name as logged: `terminal.control` is `terminal.take` or
/// `terminal.release`.
fn logged_action(action: &'static str, body: &Value) -> &'static str {
    match (action, body.get("take").and_then(Value::as_bool)) {
        ("terminal.control", Some(true)) => "terminal.take",
        ("terminal.control", _) => "terminal.release",
        (a, _) => a,
    }
}

/// The run an answer made (a new run's id, a fork's), when its body names one.
fn made_run(action: &str, out: &Value) -> Option<String> {
    matches!(action, "run.start" | "run.fork")
        .then(|| out.get("id").or_else(|| out.get("run_id")).and_then(Value::as_str).map(str::to_string))
        .flatten()
}

/// The biggest body read here (the body limit's).
const READ_AT_MOST: usize = super::guard::BODY_LIMIT;

/// The layer: an action's request is read (bounded), handled, and logged with what came
/// of it; any other request passes untouched.
pub async fn record(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().map(|m| m.as_str().to_string());
    let Some(action) = route.as_deref().and_then(|r| action_of(req.method().as_str(), r)) else {
        return next.run(req).await;
    };
    let caller = req.extensions().get::<auth::Caller>().cloned();
    let source = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip().to_string());
    let run_id = run_of(req.uri().path());
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, READ_AT_MOST).await {
        Ok(b) => b,
        Err(_) => {
            return ApiError {
                status: axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                code: "payload_too_large",
                message: "the body is over lab's limit".into(),
            }
            .into_response()
        }
    };
    let asked: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let action = logged_action(action, &asked);
    let mut detail = detail_of(action_or(action), &asked);
    // A device logged out is named before it goes.
    if action == "device.logout" {
        if let Some(id) = parts.uri.path().strip_prefix("/devices/") {
            detail = json!({"device": state.access.actor(&auth::Caller::Device(id.to_string()))});
        }
    }
    let resp = next.run(Request::from_parts(parts, Body::from(bytes))).await;
    let status = resp.status();
    let wants_body = !status.is_success() || matches!(action, "run.start" | "run.fork");
    let (resp, out) = if wants_body {
        let (mut p, b) = resp.into_parts();
        // Its length said as it was: a body passed on in pieces keeps it.
        if let Some(n) = axum::body::HttpBody::size_hint(&b).exact() {
            p.headers.entry(axum::http::header::CONTENT_LENGTH).or_insert(n.into());
        }
        let (body, seen) = peek(b, READ_AT_MOST).await;
        let out: Value = match seen {
            Seen::Whole(b) => serde_json::from_slice(&b).unwrap_or(Value::Null),
            Seen::Start(b) => error_of_start(&b),
        };
        (Response::from_parts(p, body), out)
    } else {
        (resp, Value::Null)
    };
    let actor = resp.extensions().get::<Actor>().cloned().unwrap_or_else(|| match &caller {
        Some(c) => state.access.actor(c),
        None => Actor::Other("nobody".into()),
    });
    let refused = (!status.is_success()).then(|| {
        let code = out.get("error").and_then(Value::as_str).unwrap_or("error");
        let message = out.get("message").and_then(Value::as_str).unwrap_or("");
        format!("{code}: {message}")
    });
    let run_id = made_run(action, &out).or(run_id);
    let entry = audit::entry(actor, action, run_id, detail, refused);
    let log = state.audit.clone();
    // A refusal of a caller without a credential is theirs, not an operator's action:
    // bounded, and in a file of its own (crate::edge::audit).
    let stranger = caller.is_none() && !status.is_success();
    // A file append: off the async threads.
    let _ = tokio::task::spawn_blocking(move || match stranger {
        true => log.refused_anonymously(entry, source.as_deref().unwrap_or("unknown")),
        false => log.append(&entry),
    })
    .await;
    resp
}

/// What the log read of a response body.
enum Seen {
    Whole(axum::body::Bytes),
    /// Its first bytes: it was longer than the log reads.
    Start(Vec<u8>),
}

/// A response body read for the log up to `at_most` bytes, and the body passed on
/// whole whatever its size: what was read, then the rest as it comes.
async fn peek(body: Body, at_most: usize) -> (Body, Seen) {
    use futures_util::StreamExt;
    let mut stream = body.into_data_stream();
    let mut seen = Vec::new();
    loop {
        match stream.next().await {
            None => {
                let bytes = axum::body::Bytes::from(seen);
                return (Body::from(bytes.clone()), Seen::Whole(bytes));
            }
            Some(Ok(chunk)) => {
                seen.extend_from_slice(&chunk);
                if seen.len() > at_most {
                    let start = seen[..at_most.min(64 * 1024)].to_vec();
                    let head =
                        futures_util::stream::once(async move { Ok::<_, axum::Error>(axum::body::Bytes::from(seen)) });
                    return (Body::from_stream(head.chain(stream)), Seen::Start(start));
                }
            }
            Some(Err(e)) => {
                let start = seen.clone();
                let head =
                    futures_util::stream::once(async move { Ok::<_, axum::Error>(axum::body::Bytes::from(seen)) });
                let rest = futures_util::stream::once(async move { Err::<axum::body::Bytes, _>(e) });
                return (Body::from_stream(head.chain(rest)), Seen::Start(start));
            }
        }
    }
}

/// lab's error (`{"error": code, "message": …}`) from the start of an answer too long
/// to read whole: its code, and its message's start.
fn error_of_start(start: &[u8]) -> Value {
    let text = String::from_utf8_lossy(start);
    // A JSON string field's value (its escapes read), its first `at_most` characters.
    let field = |name: &str, at_most: usize| -> Option<String> {
        let open = text.find(&format!("\"{name}\":\""))? + name.len() + 3;
        let rest = &text[open + 1..];
        let mut end = None;
        let mut escaped = false;
        for (i, c) in rest.char_indices() {
            match (escaped, c) {
                (false, '\\') => escaped = true,
                (false, '"') => {
                    end = Some(i);
                    break;
                }
                _ => escaped = false,
            }
        }
        let whole = end.is_some();
        let mut raw = rest[..end.unwrap_or(rest.len())].to_string();
        // Cut inside an escape: drop its pieces until the string reads.
        let value = (0..8).find_map(|_| {
            let v = serde_json::from_str::<String>(&format!("\"{raw}\"")).ok();
            if v.is_none() {
                raw.pop();
            }
            v
        })?;
        let kept: String = value.chars().take(at_most).collect();
        Some(if whole && kept.len() == value.len() { kept } else { format!("{kept}…") })
    };
    match field("error", 64) {
        Some(code) => json!({"error": code, "message": field("message", audit::REASON_KEPT).unwrap_or_default()}),
        None => Value::Null,
    }
}

fn action_or(action: &'static str) -> &'static str {
    if action.starts_with("terminal.") {
        "terminal.control"
    } else {
        action
    }
}

/// `/runs/<id>/…`'s run id.
fn run_of(path: &str) -> Option<String> {
    let mut parts = path.split('/');
    (parts.next() == Some("") && parts.next() == Some("runs")).then(|| parts.next().map(str::to_string)).flatten()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditQuery {
    run: Option<String>,
    from: Option<String>,
    to: Option<String>,
    limit: Option<usize>,
}

/// `GET /audit?run=&from=&to=&limit=` → `{"entries": [...]}`, oldest first (the newest
/// `limit`, 500 by default, at most 5000).
async fn list(
    State(log): State<Arc<Audit>>,
    q: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Value>> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(format!("bad query: {}", e.body_text())))?;
    let filter = Filter::parse(q.run, q.from, q.to, q.limit, "").map_err(ApiError::bad_request)?;
    let entries = tokio::task::spawn_blocking(move || log.read(&filter))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
        .map_err(|e| ApiError::internal(format!("cannot read the audit log: {e}")))?;
    Ok(Json(json!({"entries": entries})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_are_named_by_route_and_reads_are_not_actions() {
        assert_eq!(action_of("POST", "/runs/{id}/dialog/answer"), Some("dialog.answer"));
        assert_eq!(action_of("GET", "/runs/{id}"), None);
        assert_eq!(action_of("GET", "/audit"), None);
        assert_eq!(logged_action("terminal.control", &json!({"take": true})), "terminal.take");
        assert_eq!(logged_action("terminal.control", &json!({"take": false})), "terminal.release");
        assert_eq!(run_of("/runs/r-1/stop").as_deref(), Some("r-1"));
        assert_eq!(run_of("/devices/x"), None);
    }

    #[tokio::test]
    async fn a_body_over_what_the_log_reads_passes_on_whole() {
        let big: Vec<u8> = (0..3 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
        let (body, seen) = peek(Body::from(big.clone()), 1024 * 1024).await;
        assert!(matches!(seen, Seen::Start(ref s) if s[..] == big[..64 * 1024]));
        assert_eq!(axum::body::to_bytes(body, usize::MAX).await.unwrap(), big);
        let (body, seen) = peek(Body::from("{\"error\":\"x\"}"), 1024).await;
        assert!(matches!(seen, Seen::Whole(ref b) if b[..] == b"{\"error\":\"x\"}"[..]));
        assert_eq!(axum::body::to_bytes(body, usize::MAX).await.unwrap(), "{\"error\":\"x\"}");
        // An error too long to read whole is logged by its code and its message's start.
        let long = format!("{{\"error\":\"bad_request\",\"message\":\"a \\\"q\\\" {}", "y".repeat(2000));
        let v = error_of_start(long.as_bytes());
        assert_eq!(v["error"], "bad_request");
        let m = v["message"].as_str().unwrap();
        assert!(m.starts_with("a \"q\" yyy") && m.ends_with('…') && m.chars().count() == audit::REASON_KEPT + 1, "{m}");
        assert_eq!(error_of_start(b"not lab's"), Value::Null);
    }

    #[test]
    fn details_keep_what_was_asked_and_never_a_secret() {
        let answer = detail_of("dialog.answer", &json!({"tool_id": "t1", "answers": [{"option": 2}], "x": 1}));
        assert_eq!(answer, json!({"tool_id": "t1", "answers": [{"option": 2}]}));
        let login = detail_of("device.login", &json!({"token": "secret", "code": "c"}));
        assert_eq!(login, json!({}));
        let sub = detail_of("push.subscribe", &json!({"endpoint": "https://e", "keys": {"auth": "a"}}));
        assert_eq!(sub, json!({}));
        let msg = detail_of("message.send", &json!({"text": "hello"}));
        assert_eq!(msg, json!({"text": "hello", "chars": 5}));
        let start = detail_of("run.start", &json!({"provider": "p", "prompt": "do it", "workdir": "/w"}));
        assert_eq!(start, json!({"provider": "p", "workdir": "/w", "prompt": {"text": "do it", "chars": 5}}));
    }
}
