//! The device routes: `POST /pair` (a one-time login link and its QR code, for
//! `lab pair` and the UI's "Pair a phone"), `GET /devices`, `DELETE /devices/{id}`.
//! They sit behind the same edge as every route: Host/Origin checks, the token or a
//! device's cookie, JSON bodies only.

use super::auth::{self, Access, Caller};
use super::ApiError;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PairRequest {
    /// What the device is to be called in the list (else from its browser).
    name: Option<String>,
}

/// The origin the request was made to: `http(s)://<Host>` (the guard has checked the
/// Host already).
fn origin_of(headers: &HeaderMap) -> Result<String, ApiError> {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .filter(|h| !h.is_empty())
        .ok_or_else(|| ApiError::bad_request("the request has no Host header to build the link from"))?;
    Ok(format!("{}://{host}", if auth::https(headers) { "https" } else { "http" }))
}

/// `POST /pair {"name"?}` → `201 {"url", "expires_at", "ttl_seconds", "qr": {"size",
/// "rows"}}`; `409 no_token` when this lab needs no token (there is nothing to log in to).
pub async fn pair(
    State(access): State<Arc<Access>>,
    headers: HeaderMap,
    body: Result<Json<PairRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(req) = body?;
    if !access.required {
        return Err(ApiError {
            status: StatusCode::CONFLICT,
            code: "no_token",
            message: "this lab runs without a token (--no-token): there is nothing to log in to, and it serves \
                      loopback only, which a phone cannot reach"
                .into(),
        });
    }
    let name = req.name.map(|n| crate::edge::devices::check_name(&n)).transpose().map_err(ApiError::bad_request)?;
    let code = access.pair_code(name).map_err(|e| ApiError::internal(e.to_string()))?;
    let url = format!("{}/login?code={code}", origin_of(&headers)?);
    let qr = crate::edge::pairing::qr(&url).map_err(ApiError::bad_request)?;
    let ttl = crate::edge::token::PAIR_CODE_TTL;
    let expires_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now() + ttl).to_string();
    tracing::info!("a pairing code was made (valid once, for {} s)", ttl.as_secs());
    let body = crate::edge::pairing::PairBody { url, expires_at, ttl_seconds: ttl.as_secs(), qr };
    Ok((StatusCode::CREATED, [(header::CACHE_CONTROL, "no-store")], Json(body)).into_response())
}

fn current(caller: &Option<Extension<Caller>>) -> Option<&str> {
    match caller {
        Some(Extension(Caller::Device(id))) => Some(id),
        _ => None,
    }
}

/// `GET /devices` → `{"token_required", "devices": [{"id", "name", "via", "created_at",
/// "last_seen_at", "current"}]}`, the one seen last first.
pub async fn list(State(access): State<Arc<Access>>, caller: Option<Extension<Caller>>) -> Response {
    let devices = access.devices(current(&caller));
    Json(json!({"token_required": access.required, "devices": devices})).into_response()
}

/// `DELETE /devices/{id}` → `204`, the device logged out at once (its own request too:
/// then its cookie is cleared), its event streams ended and its push subscriptions
/// removed; `404 device_not_found`.
pub async fn revoke(
    State(access): State<Arc<Access>>,
    caller: Option<Extension<Caller>>,
    State(push): State<Arc<crate::notify::push::Push>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let own = current(&caller) == Some(id.as_str());
    match access.revoke(&id) {
        Ok(true) => {
            tracing::info!(device = %id, own, "a device was logged out");
            // Its push subscriptions go with it (its event streams end on their own).
            push.sweep();
            let mut resp = StatusCode::NO_CONTENT.into_response();
            if own {
                resp.headers_mut().insert(header::SET_COOKIE, auth::forget_cookie(&headers));
            }
            Ok(resp)
        }
        Ok(false) => Err(ApiError {
            status: StatusCode::NOT_FOUND,
            code: "device_not_found",
            message: format!("there is no logged-in device {id:?}"),
        }),
        Err(e) => Err(ApiError::internal(format!("cannot save the list of devices: {e}"))),
    }
}
