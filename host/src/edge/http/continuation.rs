//! Picking a conversation up again: `POST /runs/{id}/resume`, `POST /runs/{id}/fork`, and
//! `PUT /runs/{id}/auto-resume` (whether a run goes on by itself once a usage limit
//! resets). The decisions are `runs`' (`runs::continuation`, `runs::usage_limit`).

use super::{ApiResult, AppState};
use crate::runs::Runs;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{post, put};
use axum::{Json, Router};
use serde::Deserialize;
use std::sync::Arc;

/// The routes, on the API's state.
pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/runs/{id}/resume", post(resume))
        .route("/runs/{id}/fork", post(fork))
        .route("/runs/{id}/auto-resume", put(auto_resume))
}

/// The body of `POST /runs/{id}/resume` and `/fork`: the agent's next message, if any.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ContinueBody {
    #[serde(default)]
    prompt: Option<String>,
}

/// `POST /runs/{id}/resume` (`{"prompt"?}`) → `200` the run, live again.
async fn resume(
    State(runs): State<Arc<Runs>>,
    Path(id): Path<String>,
    body: Result<Json<ContinueBody>, JsonRejection>,
) -> ApiResult<Response> {
    let Json(body) = body?;
    let run = runs.get(&id)?;
    Ok(Json(runs.resume(&run, body.prompt).await?).into_response())
}

/// `POST /runs/{id}/fork` (`{"prompt"?}`) → `201` the new run.
async fn fork(
    State(runs): State<Arc<Runs>>,
    Path(id): Path<String>,
    body: Result<Json<ContinueBody>, JsonRejection>,
) -> ApiResult<Response> {
    let Json(body) = body?;
    let run = runs.get(&id)?;
    Ok((StatusCode::CREATED, Json(runs.fork(&run, body.prompt).await?)).into_response())
}

/// The body of `PUT /runs/{id}/auto-resume`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AutoResumeBody {
    on: bool,
    #[serde(default)]
    prompt: Option<String>,
}

/// `PUT /runs/{id}/auto-resume` (`{"on", "prompt"?}`) → `200` the run: whether it goes
/// on by itself once a usage limit its agent hit resets, and with what message.
async fn auto_resume(
    State(runs): State<Arc<Runs>>,
    Path(id): Path<String>,
    body: Result<Json<AutoResumeBody>, JsonRejection>,
) -> ApiResult<Response> {
    let Json(body) = body?;
    let run = runs.get(&id)?;
    Ok(Json(runs.set_auto_resume(&run, body.on, body.prompt).await?).into_response())
}
