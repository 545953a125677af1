//! Web Push: lab's VAPID key (and its rotation) and the browsers subscribed. The
//! sending is `notify::push`'s.

use super::{auth, ApiError, ApiResult, AppState};
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde_json::json;
use std::sync::Arc;

/// The routes, on the API's state.
pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/push/key", get(push_key))
        .route("/push/key/rotate", post(rotate_push_key))
        .route("/push/subscriptions", get(list_push_subscriptions).post(add_push_subscription))
        .route("/push/subscriptions/{id}", delete(remove_push_subscription))
}

type PushState = State<Arc<crate::notify::push::Push>>;

/// `GET /push/key`: lab's VAPID public key, for `pushManager.subscribe`.
async fn push_key(State(push): PushState) -> Response {
    Json(json!({"public_key": push.public_key()})).into_response()
}

/// `POST /push/key/rotate` → `200 {"public_key", "removed_subscriptions"}`: a new VAPID
/// key pair; every subscription (made with the old key) is removed.
pub(super) async fn rotate_push_key(State(push): PushState) -> ApiResult<Response> {
    let (public_key, removed) =
        push.rotate_key().map_err(|e| ApiError::internal(format!("cannot replace the VAPID key: {e}")))?;
    Ok(Json(json!({"public_key": public_key, "removed_subscriptions": removed})).into_response())
}

async fn list_push_subscriptions(State(push): PushState) -> Response {
    push.sweep();
    let list: Vec<_> = push.store().list().iter().map(|s| s.body()).collect();
    Json(list).into_response()
}

/// `POST /push/subscriptions`: a PushSubscription's JSON → `201 {"id"}`.
async fn add_push_subscription(
    State(push): PushState,
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

async fn remove_push_subscription(State(push): PushState, Path(id): Path<String>) -> ApiResult<Response> {
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
