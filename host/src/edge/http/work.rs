//! The agent's work in its worktree: its diff, review comments sent to the agent, merge
//! into the base branch, and discard. The decisions are `worktree`'s, through `runs`.

use super::{ApiError, ApiResult, AppState};
use crate::runs::Runs;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

/// The routes, on the API's state.
pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/runs/{id}/diff", get(diff))
        .route("/runs/{id}/review", post(review))
        .route("/runs/{id}/merge", post(merge))
        .route("/runs/{id}/discard", post(discard))
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
