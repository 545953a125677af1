//! What runs cost: `GET /runs/{id}/usage` (one run's tokens, cost, context, a series
//! per minute) and `GET /usage?from=&to=&group=day|run|provider|model` (rows for the
//! Usage page's charts). The counting is `runs::usage`'s.

use super::{ApiError, ApiResult, AppState};
use crate::runs::usage::{ledger, Group};
use crate::runs::Runs;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use std::sync::Arc;

/// The routes, on the API's state.
pub(super) fn router() -> Router<AppState> {
    Router::new().route("/runs/{id}/usage", get(run_usage)).route("/usage", get(usage))
}

/// How far back `GET /usage` looks when `from` is not given.
const DEFAULT_DAYS: i64 = 30;

async fn run_usage(State(runs): State<Arc<Runs>>, Path(id): Path<String>) -> ApiResult<Response> {
    // (404 for a run lab does not know.)
    let run = runs.get(&id)?;
    Ok(Json(runs.books().usage.run_usage(&run.id)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UsageQuery {
    from: Option<String>,
    to: Option<String>,
    group: Option<String>,
}

async fn usage(
    State(runs): State<Arc<Runs>>,
    query: Result<Query<UsageQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let group = match q.group.as_deref() {
        None => Group::Day,
        Some(g) => Group::parse(g)
            .ok_or_else(|| ApiError::bad_request(format!("group must be day, run, provider or model (not {g:?})")))?,
    };
    let now = ledger::now();
    let from = q.from.as_deref().map(|t| moment("from", t)).transpose()?.unwrap_or(now - DEFAULT_DAYS * 86_400);
    let to = q.to.as_deref().map(|t| moment("to", t)).transpose()?.unwrap_or(i64::MAX);
    if from >= to {
        return Err(ApiError::bad_request("from must be before to"));
    }
    Ok(Json(runs.usage(from, to, group)).into_response())
}

/// An RFC 3339 time, or a day (`2026-12-05`: its start, UTC), as Unix seconds.
fn moment(name: &str, t: &str) -> Result<i64, ApiError> {
    let full = if t.len() == 10 { format!("{t}T00:00:00Z") } else { t.to_string() };
    ledger::unix_seconds(&full).ok_or_else(|| {
        ApiError::bad_request(format!("{name} must be an RFC 3339 time or a day (YYYY-MM-DD), not {t:?}"))
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_day_is_its_start_and_a_time_is_itself() {
        assert_eq!(super::moment("from", "1970-01-02").ok(), Some(86_400));
        assert_eq!(super::moment("to", "1970-01-01T00:01:00Z").ok(), Some(60));
        assert!(super::moment("from", "yesterday").is_err());
    }
}
