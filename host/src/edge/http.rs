//! The HTTP API (docs/api.md) and the embedded web UI, behind lab's edge: [`guard`]
//! (Host, Origin, content type, body size) and [`auth`] (the token), applied to every
//! request, routes and fallback alike.

pub mod auth;
mod continuation;
pub mod cors;
pub mod guard;
pub mod headers;
pub mod pairing;
mod providers;
pub mod refusals;
pub mod runners;
mod search;
mod usage;

use crate::agents::model::Answer;
use crate::runs::message_store::{Page, MAX_PAGE};
use crate::runs::{CreateRun, RunError, Runs};
use axum::extract::rejection::JsonRejection;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{from_fn, from_fn_with_state, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::stream::Stream;
use futures_util::StreamExt as _;
use serde::Deserialize;
use serde_json::json;
use std::convert::Infallible;
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
        let status = match &e {
            RunError::NotFound => StatusCode::NOT_FOUND,
            RunError::BadRequest(_) => StatusCode::BAD_REQUEST,
            RunError::DialogPending
            | RunError::ComposerLocked { .. }
            | RunError::DialogChanged { .. }
            | RunError::NoDialog
            | RunError::NotOnScreen(_)
            | RunError::AnswerLost(_)
            | RunError::RunEnded
            | RunError::NoWorktree(_)
            | RunError::RunActive
            | RunError::NotResumable(_)
            | RunError::HostDown(_) => StatusCode::CONFLICT,
            RunError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            RunError::NotAnswerable | RunError::LaunchFailed(_) | RunError::NotSupported(_) => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            RunError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError { status, code: e.code(), message: e.to_string() }
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
pub fn router(runs: Arc<Runs>, edge: Edge) -> Router {
    let policy = Arc::new(edge.policy);
    let login = Router::new()
        .route("/login", get(auth::login_with_code).post(auth::login_with_token))
        .route("/pair", post(pairing::pair))
        .route("/devices", get(pairing::list))
        .route("/devices/{id}", axum::routing::delete(pairing::revoke))
        .with_state(edge.access.clone());
    let runners =
        Router::new().route(crate::machines::hosts::protocol::PATH, get(runners::connect)).with_state(runs.hosts());
    api(runs)
        .merge(login)
        .merge(runners)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(guard::BODY_LIMIT))
        .layer(from_fn_with_state(edge.access, auth::require))
        .layer(from_fn_with_state(policy.clone(), guard_requests))
        .layer(from_fn_with_state(policy, cors::layer))
        .layer(from_fn(json_errors))
        .layer(from_fn(headers::harden))
}

/// What lab serve answers on its control socket (`<home>/serve.sock`, 0600 in the 0700
/// home: only its owner can connect, and nobody else can have made it): the routes the
/// CLI uses on a running serve, behind the token as on TCP. No Host/Origin policy: no
/// browser reaches a Unix socket.
pub fn control_router(access: Arc<auth::Access>) -> Router {
    Router::new()
        .route("/pair", post(pairing::pair))
        .with_state(access.clone())
        .route("/push/key/rotate", post(rotate_push_key))
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(guard::BODY_LIMIT))
        .layer(from_fn_with_state(access, auth::require))
        .layer(from_fn(json_errors))
        .layer(from_fn(headers::harden))
}

fn api(runs: Arc<Runs>) -> Router {
    Router::new()
        .route("/info", get(info))
        .route("/providers", get(providers::providers))
        .route("/hosts", get(runners::list))
        .route("/runs", get(list_runs).post(create_run))
        .route("/runs/{id}", get(get_run))
        .route("/runs/{id}/messages", get(get_messages).post(post_message))
        .route("/runs/{id}/events", get(events))
        .route("/runs/{id}/dialog/answer", post(answer))
        .route("/runs/{id}/stop", post(stop))
        .route("/runs/{id}/terminal", get(terminal))
        .route("/runs/{id}/diff", get(diff))
        .route("/runs/{id}/review", post(review))
        .route("/runs/{id}/merge", post(merge))
        .route("/runs/{id}/discard", post(discard))
        .route("/runs/{id}/resume", post(continuation::resume))
        .route("/runs/{id}/fork", post(continuation::fork))
        .route("/runs/{id}/auto-resume", axum::routing::put(continuation::auto_resume))
        .merge(usage::router())
        .merge(search::router())
        .route("/push/key", get(push_key))
        .route("/push/key/rotate", post(rotate_push_key))
        .route("/push/subscriptions", get(list_push_subscriptions).post(add_push_subscription))
        .route("/push/subscriptions/{id}", axum::routing::delete(remove_push_subscription))
        .route("/", get(index))
        .route("/{file}", get(asset))
        .fallback(not_found)
        .with_state(runs)
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

/// What `GET /info` tells clients about this `lab serve`; cli.rs adds it to the router
/// as an `Extension` (absent: not a demo).
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
async fn info(served: Option<axum::Extension<Arc<ServeInfo>>>) -> impl IntoResponse {
    let served = served.map(|e| e.0.as_ref().clone()).unwrap_or_default();
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "demo": served.demo,
        "demo_workdir": served.demo_workdir,
        "token_required": served.token_required,
    }))
}

/// How many runs one piece of `GET /runs`'s answer holds.
const LIST_PAGE: usize = 256;

/// `GET /runs`: one JSON array, sent a page of runs at a time, so a history of
/// thousands of runs never sits in memory as one document.
async fn list_runs(State(runs): State<Arc<Runs>>) -> Response {
    let listing = runs.listing();
    let long = listing.len() > LIST_PAGE;
    let pieces = json_array_pieces(listing, LIST_PAGE, move |page| runs.bodies_of(page))
        // What a long list took to make goes back to the system once it is sent.
        .chain(std::iter::once_with(move || {
            if long {
                crate::runs::give_back_freed_memory();
            }
            Vec::new()
        }))
        .map(|piece| Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(piece)));
    ([(header::CONTENT_TYPE, "application/json")], axum::body::Body::from_stream(futures_util::stream::iter(pieces)))
        .into_response()
}

/// One JSON array of the bodies `bodies` makes of `items`, a page of `page` items at
/// a time (it may leave some out), in pieces made as they are taken: together they are
/// the array.
fn json_array_pieces<T, B: serde::Serialize>(
    items: Vec<T>,
    page: usize,
    bodies: impl Fn(&[T]) -> Vec<B>,
) -> impl Iterator<Item = Vec<u8>> {
    let page = page.max(1);
    let pages = items.len().div_ceil(page).max(1);
    let mut written = 0usize;
    (0..pages).map(move |i| {
        let part = &items[(i * page).min(items.len())..((i + 1) * page).min(items.len())];
        let mut out = Vec::new();
        if i == 0 {
            out.push(b'[');
        }
        for body in bodies(part) {
            if written > 0 {
                out.push(b',');
            }
            // Run bodies always serialise (strings, numbers and options of them).
            serde_json::to_writer(&mut out, &body).expect("a body serialises");
            written += 1;
        }
        if i + 1 == pages {
            out.push(b']');
        }
        out
    })
}

#[cfg(test)]
mod list_tests {
    /// The pieces add up to the array, whatever the count against the page size, and
    /// whatever the pages leave out (a whole page too).
    #[test]
    fn the_pieces_of_a_list_are_one_json_array() {
        let n_of = |i: &u32| serde_json::json!({"n": i});
        for n in [0, 1, 2, 3, 4, 7] {
            let items: Vec<u32> = (0..n).collect();
            let whole: Vec<u8> =
                super::json_array_pieces(items.clone(), 3, |part| part.iter().map(n_of).collect()).flatten().collect();
            let parsed: Vec<serde_json::Value> = serde_json::from_slice(&whole).unwrap();
            assert_eq!(parsed, items.iter().map(n_of).collect::<Vec<_>>(), "{n} items");
            // Only the items not in 3..6: the second page gives nothing.
            let kept = |i: &&u32| !(3..6).contains(*i);
            let whole: Vec<u8> =
                super::json_array_pieces(items.clone(), 3, |part| part.iter().filter(kept).map(n_of).collect())
                    .flatten()
                    .collect();
            let parsed: Vec<serde_json::Value> = serde_json::from_slice(&whole).unwrap();
            assert_eq!(parsed, items.iter().filter(kept).map(n_of).collect::<Vec<_>>(), "{n} items, some left out");
        }
        assert_eq!(super::json_array_pieces(vec![1, 2, 3, 4], 3, |p| p.to_vec()).count(), 2);
    }
}

async fn create_run(
    State(runs): State<Arc<Runs>>,
    body: Result<Json<CreateRun>, JsonRejection>,
) -> ApiResult<Response> {
    let Json(req) = body?;
    let run = runs.create(req).await?;
    Ok((StatusCode::CREATED, Json(run)).into_response())
}

async fn get_run(State(runs): State<Arc<Runs>>, Path(id): Path<String>) -> ApiResult<Response> {
    let run = runs.get(&id)?;
    Ok(Json(runs.body_of(&run)).into_response())
}

#[derive(Deserialize)]
struct PageQuery {
    after: Option<String>,
    before: Option<String>,
    limit: Option<String>,
}

impl PageQuery {
    /// `?after=SEQ&before=SEQ&limit=N`: each optional; a bad value is a 400 naming it.
    fn page(&self) -> Result<Page, ApiError> {
        let seq = |name: &str, v: &Option<String>| -> Result<Option<u64>, ApiError> {
            match v.as_deref() {
                None | Some("") => Ok(None),
                Some(s) => s
                    .parse::<u64>()
                    .map(Some)
                    .map_err(|_| ApiError::bad_request(format!("{name} must be a message seq (a whole number)"))),
            }
        };
        let limit = match self.limit.as_deref() {
            None | Some("") => None,
            Some(s) => match s.parse::<usize>() {
                Ok(n) if (1..=MAX_PAGE).contains(&n) => Some(n),
                _ => return Err(ApiError::bad_request(format!("limit must be a whole number from 1 to {MAX_PAGE}"))),
            },
        };
        Ok(Page { after: seq("after", &self.after)?, before: seq("before", &self.before)?, limit })
    }
}

/// `GET /runs/{id}/messages[?after=SEQ][&before=SEQ][&limit=N]`: the view with the
/// messages after `after` and before `before`; with `limit`, the newest N of them (the
/// first N when only `after` is given). `more_before` / `more_after` say what was left out.
async fn get_messages(
    State(runs): State<Arc<Runs>>,
    Path(id): Path<String>,
    Query(q): Query<PageQuery>,
) -> ApiResult<Response> {
    let run = runs.get(&id)?;
    let page = q.page()?;
    runs.ensure_loaded(&run).await;
    Ok(Json(run.view(&page).await).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageBody {
    text: String,
}

async fn post_message(
    State(runs): State<Arc<Runs>>,
    Path(id): Path<String>,
    body: Result<Json<MessageBody>, JsonRejection>,
) -> ApiResult<Response> {
    let run = runs.get(&id)?;
    let Json(body) = body?;
    runs.send_message(&run, &body.text).await?;
    Ok((StatusCode::ACCEPTED, Json(json!({"accepted": true}))).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerBody {
    tool_id: String,
    answers: Vec<Answer>,
}

async fn answer(
    State(runs): State<Arc<Runs>>,
    Path(id): Path<String>,
    body: Result<Json<AnswerBody>, JsonRejection>,
) -> ApiResult<Response> {
    let run = runs.get(&id)?;
    let Json(body) = body?;
    if body.tool_id.is_empty() {
        return Err(ApiError::bad_request("tool_id is empty"));
    }
    if body.answers.is_empty() {
        return Err(ApiError::bad_request("answers is empty: give one answer per question"));
    }
    // 202 once the guard has accepted it: the keys are played in the background, and
    // the run's `answer` (view and GET /runs/{id}) tells how far they got.
    let progress = runs.answer(&run, &body.tool_id, body.answers).await?;
    Ok((StatusCode::ACCEPTED, Json(json!({"keys": progress.keys, "answer": progress}))).into_response())
}

async fn stop(State(runs): State<Arc<Runs>>, Path(id): Path<String>) -> ApiResult<Response> {
    let run = runs.get(&id)?;
    runs.stop(&run).await?;
    Ok(Json(runs.body_of(&run)).into_response())
}

async fn terminal(State(runs): State<Arc<Runs>>, Path(id): Path<String>) -> ApiResult<Response> {
    let run = runs.get(&id)?;
    let rec = run.record();
    let term = runs.terminal_for(&rec);
    // How to attach is the terminal's to say (a terminal on another host says otherwise).
    let attach = crate::util::shell::join(term.attach_command(&rec.tmux_target));
    let target = rec.tmux_target.clone();
    let screen = tokio::task::spawn_blocking(move || term.capture(&target)).await.ok().and_then(Result::ok);
    Ok(Json(json!({"attach": attach, "screen": screen.unwrap_or_default(), "state": run.snapshot().derived.state}))
        .into_response())
}

async fn diff(State(runs): State<Arc<Runs>>, Path(id): Path<String>) -> ApiResult<Response> {
    let run = runs.get(&id)?;
    Ok(Json(runs.diff(&run).await?).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReviewBody {
    #[serde(default)]
    comments: Vec<crate::worktree::review::Comment>,
    #[serde(default)]
    summary: Option<String>,
}

async fn review(
    State(runs): State<Arc<Runs>>,
    Path(id): Path<String>,
    body: Result<Json<ReviewBody>, JsonRejection>,
) -> ApiResult<Response> {
    let run = runs.get(&id)?;
    let Json(body) = body?;
    runs.review(&run, body.comments, body.summary).await?;
    Ok((StatusCode::ACCEPTED, Json(json!({"accepted": true}))).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MergeBody {
    #[serde(default)]
    strategy: crate::worktree::merge::Strategy,
    #[serde(default)]
    message: Option<String>,
}

/// `POST /runs/{id}/merge`; an empty body is `{}` (the defaults).
async fn merge(State(runs): State<Arc<Runs>>, Path(id): Path<String>, body: axum::body::Bytes) -> ApiResult<Response> {
    use crate::runs::WorkError;
    use crate::worktree::merge::MergeError;
    let run = runs.get(&id)?;
    let body: MergeBody = if body.iter().all(u8::is_ascii_whitespace) {
        MergeBody { strategy: Default::default(), message: None }
    } else {
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("the merge request: {e}")))?
    };
    let conflict = |code: &str, message: String, files: Vec<String>| {
        (StatusCode::CONFLICT, Json(json!({"error": code, "message": message, "files": files}))).into_response()
    };
    match runs.merge(&run, body.strategy, body.message).await {
        Ok(commit) => Ok(Json(json!({"commit": commit, "run": runs.body_of(&run)})).into_response()),
        Err(WorkError::Run(e)) => Err(e.into()),
        Err(WorkError::Merge(MergeError::Conflict(files))) => Ok(conflict(
            "merge_conflict",
            format!("the run's changes conflict with the base in {} file(s); nothing was changed", files.len()),
            files,
        )),
        Err(WorkError::Merge(MergeError::BaseDirty(files))) => Ok(conflict(
            "base_dirty",
            format!(
                "the repository's checkout has uncommitted changes in {} file(s) the merge would write; commit or stash them first",
                files.len()
            ),
            files,
        )),
        Err(WorkError::Merge(MergeError::NothingToMerge)) => Err(ApiError {
            status: StatusCode::CONFLICT,
            code: "nothing_to_merge",
            message: "the run's branch has no changes the base lacks".into(),
        }),
        Err(WorkError::Merge(MergeError::Refused(m))) => {
            Err(ApiError { status: StatusCode::CONFLICT, code: "merge_refused", message: m })
        }
        Err(WorkError::Merge(MergeError::Failed(m))) => Err(ApiError::internal(m)),
    }
}

async fn discard(State(runs): State<Arc<Runs>>, Path(id): Path<String>) -> ApiResult<Response> {
    let run = runs.get(&id)?;
    runs.discard(&run).await?;
    Ok(Json(runs.body_of(&run)).into_response())
}

type PushExt = axum::Extension<Arc<crate::notify::push::Push>>;

/// `GET /push/key`: lab's VAPID public key, for `pushManager.subscribe`.
async fn push_key(axum::Extension(push): PushExt) -> Response {
    Json(json!({"public_key": push.public_key()})).into_response()
}

/// `POST /push/key/rotate` → `200 {"public_key", "removed_subscriptions"}`: a new VAPID
/// key pair; every subscription (made with the old key) is removed.
async fn rotate_push_key(axum::Extension(push): PushExt) -> ApiResult<Response> {
    let (public_key, removed) =
        push.rotate_key().map_err(|e| ApiError::internal(format!("cannot replace the VAPID key: {e}")))?;
    Ok(Json(json!({"public_key": public_key, "removed_subscriptions": removed})).into_response())
}

async fn list_push_subscriptions(axum::Extension(push): PushExt) -> Response {
    push.sweep();
    let list: Vec<_> = push.store().list().iter().map(|s| s.body()).collect();
    Json(list).into_response()
}

/// `POST /push/subscriptions`: a PushSubscription's JSON → `201 {"id"}`.
async fn add_push_subscription(
    axum::Extension(push): PushExt,
    standing: Option<axum::Extension<auth::Standing>>,
    body: Result<Json<crate::notify::push::subscriptions::SubscriptionRequest>, JsonRejection>,
) -> ApiResult<Response> {
    let Json(req) = body?;
    crate::notify::push::subscriptions::check(&req, push.rules()).map_err(ApiError::bad_request)?;
    // Bound to the credential that made it: it ends with it (logout, rotation, expiry).
    let owner = standing
        .map(|axum::Extension(s)| s.owner())
        .ok_or_else(|| ApiError::internal("a push subscription without a caller"))?;
    let sub = push.store().add(req, owner, crate::util::time::now_rfc3339()).map_err(|e| {
        if e.contains("remove one first") {
            ApiError { status: StatusCode::CONFLICT, code: "too_many_subscriptions", message: e }
        } else {
            ApiError::internal(e)
        }
    })?;
    tracing::info!(subscription = %sub.id, "push subscription added");
    Ok((StatusCode::CREATED, Json(json!({"id": sub.id, "created_at": sub.created_at}))).into_response())
}

async fn remove_push_subscription(axum::Extension(push): PushExt, Path(id): Path<String>) -> ApiResult<Response> {
    match push.store().remove(&id) {
        Ok(true) => Ok(StatusCode::NO_CONTENT.into_response()),
        Ok(false) => Err(ApiError {
            status: StatusCode::NOT_FOUND,
            code: "subscription_not_found",
            message: format!("there is no push subscription {id:?}"),
        }),
        Err(e) => Err(ApiError::internal(format!("cannot save the subscriptions: {e}"))),
    }
}

/// `GET /runs/{id}/events`: one `view` event per change; each carries only the
/// messages this connection has not been sent yet; `id` is the last seq sent, so a
/// reconnecting EventSource resumes with `Last-Event-ID`.
async fn events(
    State(runs): State<Arc<Runs>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Query(q): Query<PageQuery>,
    standing: Option<axum::Extension<auth::Standing>>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let run = runs.get(&id)?;
    // The stream ends when the credential that opened it does (a logout, a rotation).
    let standing =
        standing.map(|axum::Extension(s)| s).ok_or_else(|| ApiError::internal("a stream without a caller"))?;
    // `?after=SEQ` (a client that loaded the messages up to SEQ first) or a reconnecting
    // EventSource's `Last-Event-ID`, which wins. Any u64 is fine (a page saturates);
    // junk in the header is ignored.
    let after = q.page()?.after;
    let last: Option<u64> =
        headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|s| s.parse().ok()).or(after);
    runs.ensure_loaded(&run).await;
    let rx = run.subscribe();
    let stop = runs.shutdown_signal();
    let stream = futures_util::stream::unfold(
        (run, rx, stop, last, true),
        |(run, mut rx, mut stop, mut last, first)| async move {
            if first {
                rx.borrow_and_update();
            } else {
                tokio::select! {
                    changed = rx.changed() => changed.ok()?,
                    _ = stop.wait_for(|s| *s) => return None,
                }
            }
            let body = run.view(&Page { after: last, ..Page::default() }).await;
            if let Some(m) = body.messages.last() {
                last = Some(m.seq);
            }
            let mut ev = Event::default()
                .event("view")
                .json_data(&body)
                .unwrap_or_else(|_| Event::default().comment("encode error"));
            if let Some(l) = last {
                ev = ev.id(l.to_string());
            }
            Some((Ok(ev), (run, rx, stop, last, false)))
        },
    )
    .take_until(Box::pin(standing.ended()));
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

async fn index() -> Response {
    asset(Path("index.html".to_string())).await
}

async fn asset(Path(file): Path<String>) -> Response {
    match WEB_ASSETS.iter().find(|(name, _, _)| *name == file) {
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
