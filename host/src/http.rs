//! The HTTP API (docs: ../shared contract, README) and the embedded web UI.

use crate::runs::{CreateRun, RunError, Runs};
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::stream::Stream;
use lab_provider_sdk::Answer;
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
}

impl From<RunError> for ApiError {
    fn from(e: RunError) -> Self {
        let (status, code) = match &e {
            RunError::NotFound => (StatusCode::NOT_FOUND, "run_not_found"),
            RunError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            RunError::DialogPending => (StatusCode::CONFLICT, "dialog_pending"),
            RunError::ComposerLocked { code, .. } => (StatusCode::CONFLICT, *code),
            RunError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            RunError::DialogChanged { .. } => (StatusCode::CONFLICT, "dialog_changed"),
            RunError::NoDialog => (StatusCode::CONFLICT, "no_dialog"),
            RunError::NotAnswerable => (StatusCode::UNPROCESSABLE_ENTITY, "not_answerable"),
            RunError::RunEnded => (StatusCode::CONFLICT, "run_ended"),
            RunError::LaunchFailed(_) => (StatusCode::UNPROCESSABLE_ENTITY, "launch_failed"),
            RunError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        ApiError { status, code, message: e.to_string() }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(e: JsonRejection) -> Self {
        ApiError::bad_request(e.body_text())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(json!({"error": self.code, "message": self.message}))).into_response()
    }
}

type ApiResult<T> = Result<T, ApiError>;

pub fn router(runs: Arc<Runs>) -> Router {
    Router::new()
        .route("/providers", get(providers))
        .route("/runs", get(list_runs).post(create_run))
        .route("/runs/{id}", get(get_run))
        .route("/runs/{id}/messages", get(get_messages).post(post_message))
        .route("/runs/{id}/events", get(events))
        .route("/runs/{id}/dialog/answer", post(answer))
        .route("/runs/{id}/stop", post(stop))
        .route("/runs/{id}/terminal", get(terminal))
        .route("/", get(index))
        .route("/{file}", get(asset))
        .fallback(not_found)
        .with_state(runs)
}

async fn not_found() -> ApiError {
    ApiError { status: StatusCode::NOT_FOUND, code: "not_found", message: "no such endpoint".into() }
}

async fn providers(State(runs): State<Arc<Runs>>) -> impl IntoResponse {
    let list: Vec<_> = runs
        .providers()
        .loaded
        .iter()
        .map(|(f, _)| {
            json!({
                "name": f.info.name,
                "version": f.info.version,
                "description": f.info.description,
                "dialog_hooker": f.dialog_hooker,
            })
        })
        .collect();
    Json(list)
}

async fn list_runs(State(runs): State<Arc<Runs>>) -> impl IntoResponse {
    Json(runs.list().iter().map(|r| r.body()).collect::<Vec<_>>())
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
    Ok(Json(runs.get(&id)?.body()).into_response())
}

#[derive(Deserialize)]
struct AfterQuery {
    after: Option<String>,
}

async fn get_messages(
    State(runs): State<Arc<Runs>>,
    Path(id): Path<String>,
    Query(q): Query<AfterQuery>,
) -> ApiResult<Response> {
    let run = runs.get(&id)?;
    let after = match q.after.as_deref() {
        None | Some("") => None,
        Some(s) => {
            Some(s.parse::<u64>().map_err(|_| ApiError::bad_request("after must be a message seq (a whole number)"))?)
        }
    };
    Ok(Json(run.view_after(after)).into_response())
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
    let played = runs.answer(&run, &body.tool_id, body.answers).await?;
    Ok(Json(json!({"played": played})).into_response())
}

async fn stop(State(runs): State<Arc<Runs>>, Path(id): Path<String>) -> ApiResult<Response> {
    let run = runs.get(&id)?;
    runs.stop(&run).await?;
    Ok(Json(run.body()).into_response())
}

async fn terminal(State(runs): State<Arc<Runs>>, Path(id): Path<String>) -> ApiResult<Response> {
    let run = runs.get(&id)?;
    let rec = run.record();
    let attach = format!(
        "tmux -S {} attach -t {}",
        lab_provider_sdk::shell::quote(&rec.tmux_socket),
        lab_provider_sdk::shell::quote(&rec.tmux_target)
    );
    let tmux = runs.tmux().clone();
    let target = rec.tmux_target.clone();
    let screen = tokio::task::spawn_blocking(move || tmux.capture(&target)).await.ok().and_then(Result::ok);
    Ok(Json(json!({"attach": attach, "screen": screen.unwrap_or_default(), "state": run.snapshot().derived.state}))
        .into_response())
}

/// `GET /runs/{id}/events`: one `view` event per change; each carries only the
/// messages this connection has not been sent yet; `id` is the last seq sent, so a
/// reconnecting EventSource resumes with `Last-Event-ID`.
async fn events(
    State(runs): State<Arc<Runs>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let run = runs.get(&id)?;
    let last: Option<u64> = headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|s| s.parse().ok());
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
            let body = run.view_after(last);
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
    );
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
