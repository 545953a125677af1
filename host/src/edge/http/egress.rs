//! `PUT /runs/{id}/egress` (`{"allow": ["host:port", …]}`): replace a sandboxed run's
//! allowlist while it runs; its egress proxy goes by it from the next connection the
//! agent opens. The decisions are `runs`' (`runs::sandboxing`).

use super::{ApiResult, AppState};
use crate::runs::Runs;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::put;
use axum::{Json, Router};
use serde::Deserialize;
use std::sync::Arc;

/// The routes, on the API's state.
pub(super) fn router() -> Router<AppState> {
    Router::new().route("/runs/{id}/egress", put(set_egress))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EgressBody {
    allow: Vec<String>,
}

/// → `200` the run's egress (`{"allow", "reached", "refused"}`).
async fn set_egress(
    State(runs): State<Arc<Runs>>,
    Path(id): Path<String>,
    body: Result<Json<EgressBody>, JsonRejection>,
) -> ApiResult<Response> {
    let Json(body) = body?;
    Ok(Json(runs.set_egress(&id, body.allow).await?).into_response())
}
