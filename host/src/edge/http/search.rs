//! `GET /search?q=…[&limit=N][&run=ID]` → `{"hits", "indexing"}`: the messages of
//! every run (ended ones too) that match, best first, each with a snippet whose match is
//! between `«` and `»`.
//! `indexing` is true while the index is being built from the transcripts (after an
//! upgrade, or a damaged index): hits may be missing until it is false. The index is
//! `runs::search`'s.

use super::{ApiError, ApiResult, AppState};
use crate::runs::Runs;
use crate::store::paths::RunId;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

/// The routes, on the API's state.
pub(super) fn router() -> Router<AppState> {
    Router::new().route("/search", get(search))
}

const DEFAULT_LIMIT: usize = 20;
const MAX_LIMIT: usize = 200;
/// The longest query taken.
const MAX_QUERY: usize = 1000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchQuery {
    q: Option<String>,
    limit: Option<usize>,
    run: Option<String>,
}

async fn search(
    State(runs): State<Arc<Runs>>,
    query: Result<Query<SearchQuery>, QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let text = q.q.unwrap_or_default();
    if text.trim().is_empty() {
        return Err(ApiError::bad_request("q is required: the words to search for"));
    }
    if text.len() > MAX_QUERY {
        return Err(ApiError::bad_request(format!("q is longer than {MAX_QUERY} bytes")));
    }
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(ApiError::bad_request(format!("limit must be 1 to {MAX_LIMIT}")));
    }
    let run = match q.run.as_deref() {
        None => None,
        Some(id) => Some(RunId::parse(id).ok_or_else(|| ApiError::bad_request(format!("run {id:?} is not a run id")))?),
    };
    let index = runs.books().search.clone();
    let (hits, indexing) = tokio::task::spawn_blocking(move || {
        let hits = index.search(&text, limit, run.as_ref());
        // Asked after: hits found in an index that was just opened come with `false`.
        (hits, index.building())
    })
    .await
    .map_err(|e| ApiError::internal(format!("the search stopped: {e}")))?;
    let hits = hits.map_err(|e| ApiError::internal(format!("the search index failed: {e:#}")))?;
    Ok(Json(json!({ "hits": hits, "indexing": indexing })).into_response())
}
