//! `GET /runners/connect`: where `lab runner` dials in (WebSocket), and `GET /hosts`.
//! The runner authenticates with its host's credential, never lab's token (the auth
//! layer lets this one route through to here); Host/Origin checks apply as everywhere.

use super::{refusals, ApiError};
use crate::hosts::protocol::{self, NAME_HEADER, VERSION_HEADER};
use crate::hosts::Hosts;
use crate::runs::Runs;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::net::SocketAddr;
use std::sync::Arc;

fn header_text<'a>(h: &'a HeaderMap, name: &str) -> &'a str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
}

/// The runner's connection: 401 for a wrong name or credential, 409 for another
/// version (both named), 400 when it is not a WebSocket upgrade; else the stream.
pub async fn connect(
    State(hosts): State<Arc<Hosts>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let remote = remote.to_string();
    let name = header_text(&headers, NAME_HEADER).to_string();
    let credential = header_text(&headers, header::AUTHORIZATION.as_str())
        .split_once(' ')
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, c)| c.trim())
        .unwrap_or_default();
    if crate::hosts::credentials::check_name(&name).is_err() || !hosts.credentials().check(&name, credential) {
        refusals::log(true, &remote, "GET", protocol::PATH, "a runner with a wrong host name or credential");
        return ApiError {
            status: StatusCode::UNAUTHORIZED,
            code: "unauthorized",
            message: "unknown host or wrong credential: `lab hosts add NAME` on the lab serve machine makes one".into(),
        }
        .into_response();
    }
    if let Some(why) = protocol::version_refusal(header_text(&headers, VERSION_HEADER)) {
        tracing::warn!(host = %name, %remote, "refused a runner: {why}");
        return ApiError { status: StatusCode::CONFLICT, code: "version_mismatch", message: why }.into_response();
    }
    let upgrade = match upgrade {
        Ok(u) => u,
        Err(e) => {
            return ApiError::bad_request(format!("{} is a WebSocket: {e}", protocol::PATH)).into_response();
        }
    };
    upgrade
        .max_message_size(protocol::MAX_FRAME)
        .max_frame_size(protocol::MAX_FRAME)
        .on_upgrade(move |socket| async move { hosts.serve(name, socket).await })
}

/// `GET /hosts`.
pub async fn list(State(runs): State<Arc<Runs>>) -> impl IntoResponse {
    let list = runs.hosts().list(|name| runs.active_runs_on(name));
    Json(list)
}
