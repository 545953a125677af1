//! The HTTP API (docs/api.md) and the embedded web UI, behind lab's edge: [`guard`]
//! (Host, Origin, content type, body size) and [`auth`] (the token), applied to every
//! request, routes and fallback alike.

mod audit;
pub mod auth;
mod continuation;
pub mod cors;
mod egress;
pub mod guard;
pub mod headers;
pub mod pairing;
mod providers;
mod push;
pub mod refusals;
mod rules;
pub mod runners;
mod runs;
mod search;
pub mod terminal;
mod usage;
mod work;

use crate::runs::{RunError, Runs};
use axum::extract::rejection::JsonRejection;
use axum::extract::{ConnectInfo, DefaultBodyLimit, FromRef, Path, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{from_fn, from_fn_with_state, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use std::sync::Arc;

include!(concat!(env!("OUT_DIR"), "/web_assets.rs"));

/// An API error: `{"error": "<code>", "message": "<human text>"}`.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    fn bad_request(message: impl Into<String>) -> Self {
        ApiError { status: StatusCode::BAD_REQUEST, code: "bad_request", message: message.into() }
    }
    fn internal(message: impl Into<String>) -> Self {
        ApiError { status: StatusCode::INTERNAL_SERVER_ERROR, code: "internal", message: message.into() }
    }
}

/// The cause of a 500, carried on the response to [`json_errors`], which logs it.
#[derive(Clone)]
struct InternalCause(String);

impl From<RunError> for ApiError {
    fn from(e: RunError) -> Self {
        let (status, code) = e.wire();
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        ApiError { status, code, message: e.to_string() }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(e: JsonRejection) -> Self {
        let status = e.status();
        match status {
            StatusCode::PAYLOAD_TOO_LARGE | StatusCode::UNSUPPORTED_MEDIA_TYPE => {
                ApiError { status, code: error_code(status), message: e.body_text() }
            }
            // Syntax, unknown fields, wrong types: all the client's to fix.
            _ => ApiError::bad_request(e.body_text()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let cause = (self.status == StatusCode::INTERNAL_SERVER_ERROR).then(|| InternalCause(self.message.clone()));
        let mut resp = (self.status, Json(json!({"error": self.code, "message": self.message}))).into_response();
        if let Some(c) = cause {
            resp.extensions_mut().insert(c);
        }
        resp
    }
}

/// lab's error code for a bare status (axum's own rejections carry none).
fn error_code(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 422 => "bad_request",
        401 => "unauthorized",
        404 => "not_found",
        405 => "method_not_allowed",
        413 => "payload_too_large",
        415 => "unsupported_media_type",
        500..=599 => "internal",
        _ => "error",
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// What every route's handler may take: one state, each handler asking for the part it
/// needs (`State<Arc<Runs>>`, `State<Arc<Access>>`, …, through [`FromRef`]).
#[derive(Clone)]
pub struct AppState {
    pub runs: Arc<Runs>,
    pub access: Arc<auth::Access>,
    pub push: Arc<crate::notify::push::Push>,
    pub served: Arc<ServeInfo>,
    /// The audit log every operator action goes into ([`audit::record`]).
    pub audit: Arc<crate::edge::audit::Audit>,
    /// The answer rules (`/rules`).
    pub rules: Arc<crate::rules::Rules>,
}

impl FromRef<AppState> for Arc<crate::rules::Rules> {
    fn from_ref(s: &AppState) -> Self {
        s.rules.clone()
    }
}

impl FromRef<AppState> for Arc<crate::edge::audit::Audit> {
    fn from_ref(s: &AppState) -> Self {
        s.audit.clone()
    }
}

impl FromRef<AppState> for Arc<Runs> {
    fn from_ref(s: &AppState) -> Self {
        s.runs.clone()
    }
}

impl FromRef<AppState> for Arc<auth::Access> {
    fn from_ref(s: &AppState) -> Self {
        s.access.clone()
    }
}

impl FromRef<AppState> for Arc<crate::notify::push::Push> {
    fn from_ref(s: &AppState) -> Self {
        s.push.clone()
    }
}

impl FromRef<AppState> for Arc<ServeInfo> {
    fn from_ref(s: &AppState) -> Self {
        s.served.clone()
    }
}

impl FromRef<AppState> for Arc<crate::machines::hosts::Hosts> {
    fn from_ref(s: &AppState) -> Self {
        s.runs.hosts()
    }
}

/// What guards the API: the Host/Origin policy and the access rules.
pub struct Edge {
    pub policy: guard::Policy,
    pub access: Arc<auth::Access>,
}

/// The whole service. Layers, outermost first: [`headers`] (CSP, no framing, no
/// sniffing, on every answer), [`json_errors`] (every error is lab's JSON, every 500 is
/// logged), [`cors`] (the allowed origins' header), [`guard`] (which answers their
/// preflights), [`auth`], the body limit, then the routes.
/// Serve it with `into_make_service_with_connect_info::<SocketAddr>()`.
pub fn router(state: AppState, policy: guard::Policy) -> Router {
    let policy = Arc::new(policy);
    let access = state.access.clone();
    let audited = state.clone();
    Router::new()
        .route("/info", get(info))
        .route("/providers", get(providers::providers))
        .route("/hosts", get(runners::list))
        .route(crate::machines::hosts::protocol::PATH, get(runners::connect))
        .route("/login", get(auth::login_with_code).post(auth::login_with_token))
        .route("/pair", post(pairing::pair))
        .route("/devices", get(pairing::list))
        .route("/devices/{id}", axum::routing::delete(pairing::revoke))
        .merge(runs::router())
        .merge(work::router())
        .merge(continuation::router())
        .merge(egress::router())
        .merge(usage::router())
        .merge(search::router())
        .merge(audit::router())
        .merge(terminal::router())
        .merge(push::router())
        .merge(rules::router())
        .route("/", get(index))
        .route("/{file}", get(asset))
        .fallback(not_found)
        .with_state(state)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(from_fn_with_state(audited, audit::record))
        .layer(DefaultBodyLimit::max(guard::BODY_LIMIT))
        .layer(from_fn_with_state(access, auth::require))
        .layer(from_fn_with_state(policy.clone(), guard_requests))
        .layer(from_fn_with_state(policy, cors::layer))
        .layer(from_fn(json_errors))
        .layer(from_fn(headers::harden))
}

/// What lab serve answers on its control socket (`<home>/serve.sock`, 0600 in the 0700
/// home: only its owner can connect, and nobody else can have made it): the routes the
/// CLI uses on a running serve, behind the token as on TCP. No Host/Origin policy: no
/// browser reaches a Unix socket.
pub fn control_router(state: AppState) -> Router {
    let access = state.access.clone();
    let audited = state.clone();
    Router::new()
        .route("/pair", post(pairing::pair))
        // What `lab doctor` asks a running serve.
        .route("/info", get(info))
        .route("/hosts", get(runners::list))
        .route("/push/key/rotate", post(push::rotate_push_key))
        .merge(rules::rule_set())
        .with_state(state)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(from_fn_with_state(audited, audit::record))
        .layer(DefaultBodyLimit::max(guard::BODY_LIMIT))
        .layer(from_fn_with_state(access, auth::require))
        .layer(from_fn(json_errors))
        .layer(from_fn(headers::harden))
}

async fn not_found() -> ApiError {
    ApiError { status: StatusCode::NOT_FOUND, code: "not_found", message: "no such endpoint".into() }
}

async fn method_not_allowed() -> ApiError {
    ApiError {
        status: StatusCode::METHOD_NOT_ALLOWED,
        code: "method_not_allowed",
        message: "this endpoint does not take that method".into(),
    }
}

/// A header's text; one that is not visible ASCII becomes a value no rule accepts.
fn text(v: &axum::http::HeaderValue) -> &str {
    v.to_str().unwrap_or("\u{fffd}")
}

fn remote_addr(req: &Request) -> String {
    req.extensions().get::<ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.to_string()).unwrap_or_default()
}

/// Apply [`guard::check`] to a request; a refusal is answered (and logged) here.
async fn guard_requests(State(policy): State<Arc<guard::Policy>>, req: Request, next: Next) -> Response {
    let h = req.headers();
    let mut hosts: Vec<&str> = h.get_all(header::HOST).iter().map(text).collect();
    // An absolute request target (or HTTP/2's :authority) names a host too.
    if let Some(a) = req.uri().authority().map(|a| a.as_str()) {
        if !hosts.contains(&a) {
            hosts.push(a);
        }
    }
    let origins: Vec<&str> = h.get_all(header::ORIGIN).iter().map(text).collect();
    let facts = guard::Facts {
        method: req.method().as_str(),
        hosts: &hosts,
        origins: &origins,
        sec_fetch_site: h.get("sec-fetch-site").and_then(|v| v.to_str().ok()),
        content_type: h.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()),
        content_length: h.get(header::CONTENT_LENGTH).map(text),
    };
    match guard::check(&policy, &facts) {
        Ok(()) if cors::is_preflight(&policy, &req) => cors::preflight_response(),
        Ok(()) => next.run(req).await,
        Err(refusal) => {
            refusals::log(true, &remote_addr(&req), req.method().as_str(), req.uri().path(), refusal.code());
            let status = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::BAD_REQUEST);
            ApiError { status, code: refusal.code(), message: refusal.message() }.into_response()
        }
    }
}

/// Make every error lab's JSON (axum's own rejections are plain text or empty: a bad
/// path segment, a wrong method, an oversized body) and log every 500 with its run and
/// cause.
async fn json_errors(req: Request, next: Next) -> Response {
    let (method, path) = (req.method().clone(), req.uri().path().to_string());
    let resp = next.run(req).await;
    let status = resp.status();
    if status.is_server_error() {
        let cause = resp.extensions().get::<InternalCause>().map(|c| c.0.clone()).unwrap_or_default();
        let run = path.strip_prefix("/runs/").and_then(|r| r.split('/').next()).unwrap_or("-");
        tracing::error!(run, %method, route = %path, status = status.as_u16(), cause = %cause, "internal error");
    }
    let content_type = resp.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let ours = content_type.starts_with("application/json") || content_type.starts_with("text/html");
    if !(status.is_client_error() || status.is_server_error()) || ours {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024).await.unwrap_or_default();
    let message = String::from_utf8_lossy(&text).trim().to_string();
    let message =
        if message.is_empty() { status.canonical_reason().unwrap_or("error").to_lowercase() } else { message };
    let mut out = ApiError { status, code: error_code(status), message }.into_response();
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().append(name, value.clone());
        }
    }
    out
}

/// What `GET /info` tells clients about this `lab serve` (part of [`AppState`]).
#[derive(Debug, Clone, Default)]
pub struct ServeInfo {
    /// Serving a demo (`lab serve --demo`): the agent talks to a stand-in on this machine.
    pub demo: bool,
    /// Where demo runs should be started (`--demo-workdir`).
    pub demo_workdir: Option<std::path::PathBuf>,
    /// Whether every request needs lab's token (false only with `--no-token` on
    /// loopback: the UI then says so in a banner).
    pub token_required: bool,
}

/// `GET /info` → `{"version", "demo", "demo_workdir", "token_required"}`.
async fn info(State(served): State<Arc<ServeInfo>>) -> impl IntoResponse {
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "demo": served.demo,
        "demo_workdir": served.demo_workdir,
        "token_required": served.token_required,
    }))
}

async fn index() -> Response {
    asset(Path("index.html".to_string())).await
}

/// The UI's page, with a fresh nonce its own scripts give the `<style>` elements they
/// make (the terminal emulator draws with some): in the page's policy and in a `<meta>`
/// the page reads. A `<style>` that came in with any HTML is still refused.
fn index_page(html: &[u8]) -> Response {
    let Ok(nonce) = crate::util::secrets::random_hex(16) else {
        return ApiError::internal("no randomness for the page's nonce").into_response();
    };
    let html = String::from_utf8_lossy(html).replacen(
        "<head>",
        &format!("<head>\n  <meta name=\"lab-style-nonce\" content=\"{nonce}\">"),
        1,
    );
    let policy = headers::UI_POLICY.replacen("style-src 'self'", &format!("style-src 'self' 'nonce-{nonce}'"), 1);
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8".to_string()),
            (header::CACHE_CONTROL, "no-cache".to_string()),
            (header::CONTENT_SECURITY_POLICY, policy),
        ],
        html,
    )
        .into_response()
}

async fn asset(Path(file): Path<String>) -> Response {
    match WEB_ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((name, _, bytes)) if *name == "index.html" => index_page(bytes),
        Some((_, mime, bytes)) => {
            ([(header::CONTENT_TYPE, *mime), (header::CACHE_CONTROL, "no-cache")], *bytes).into_response()
        }
        None => not_found().await.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use tower::ServiceExt;

    /// A log sink for one test.
    #[derive(Clone, Default)]
    struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    async fn call(app: &Router, method: &str, uri: &str) -> (u16, Value) {
        let req = axum::http::Request::builder().method(method).uri(uri).body(axum::body::Body::empty()).unwrap();
        let resp = app.clone().oneshot(req).await.unwrap();
        let status = resp.status().as_u16();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap();
        (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    #[test]
    fn axum_rejections_become_json_and_every_500_is_logged_with_its_run_and_cause() {
        let logs = Captured::default();
        let subscriber = tracing_subscriber::fmt().with_writer(logs.clone()).with_ansi(false).finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        let app = Router::new()
            .route("/runs/{id}/boom", get(|| async { ApiError::internal("the disk is on fire") }))
            .route("/runs/{id}", post(|Path(id): Path<String>| async move { id }))
            .layer(from_fn(json_errors));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (status, v) = call(&app, "GET", "/runs/r-abc123/boom").await;
            assert_eq!((status, v["error"].as_str()), (500, Some("internal")), "{v}");
            // axum's own answers: an empty 405 and a plain-text path rejection.
            let (status, v) = call(&app, "GET", "/runs/r-abc123").await;
            assert_eq!((status, v["error"].as_str()), (405, Some("method_not_allowed")), "{v}");
            let (status, v) = call(&app, "POST", "/runs/%FF%FE").await;
            assert_eq!((status, v["error"].as_str()), (400, Some("bad_request")), "{v}");
            assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
            let (status, v) = call(&app, "POST", "/runs/r-ok").await;
            assert_eq!((status, v), (200, Value::Null), "a success passes untouched");
        });
        let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
        let line = text.lines().find(|l| l.contains("ERROR")).unwrap_or_else(|| panic!("no error logged: {text}"));
        assert!(line.contains("r-abc123") && line.contains("the disk is on fire"), "{line}");
        assert_eq!(text.matches("ERROR").count(), 1, "only the 500 is an error: {text}");
    }

    #[test]
    fn every_status_lab_answers_has_a_code() {
        for (status, code) in [
            (400, "bad_request"),
            (401, "unauthorized"),
            (404, "not_found"),
            (405, "method_not_allowed"),
            (413, "payload_too_large"),
            (415, "unsupported_media_type"),
            (422, "bad_request"),
            (500, "internal"),
            (503, "internal"),
        ] {
            assert_eq!(error_code(StatusCode::from_u16(status).unwrap()), code, "{status}");
        }
    }
}
