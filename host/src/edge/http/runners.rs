//! `GET /runners/connect`: where `lab runner` dials in (WebSocket), and `GET /hosts`.
//! The runner proves its host's credential (never lab's token, and never sending the
//! credential itself: [`protocol::proof`]); the auth layer lets this one route through
//! to here; Host/Origin checks apply as everywhere.

use super::{refusals, ApiError};
use crate::machines::hosts::protocol::{
    self, NAME_HEADER, NONCE_HEADER, SERVE_NONCE_HEADER, SERVE_PROOF_HEADER, VERSION_HEADER,
};
use crate::machines::hosts::Hosts;
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

/// The runner's connection: 400 without a nonce (or not a WebSocket upgrade), 401 for
/// a host lab does not know, 409 for another version (named); else the stream. Both
/// the 409 and the upgrade carry lab serve's proof ([`protocol::proof`]); the runner's
/// own comes in its hello ([`Hosts::serve`]).
pub async fn connect(
    State(hosts): State<Arc<Hosts>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let remote = remote.to_string();
    let name = header_text(&headers, NAME_HEADER).to_string();
    let runner_nonce = header_text(&headers, NONCE_HEADER).to_string();
    if !protocol::proof::is_nonce(&runner_nonce) {
        refusals::log(true, &remote, "GET", protocol::PATH, "a runner without a nonce");
        return ApiError::bad_request(format!(
            "{NONCE_HEADER} must be 64 hex digits: a runner proves its credential, it never sends it (is this runner \
             of another lab version?)"
        ))
        .into_response();
    }
    let key = if crate::machines::hosts::credentials::check_name(&name).is_ok() {
        hosts.credentials().key(&name)
    } else {
        None
    };
    let Some(key) = key else {
        refusals::log(true, &remote, "GET", protocol::PATH, "a runner of a host lab does not know");
        return ApiError {
            status: StatusCode::UNAUTHORIZED,
            code: "unauthorized",
            message: "unknown host: `lab hosts add NAME` on the lab serve machine makes one".into(),
        }
        .into_response();
    };
    let serve_nonce = match protocol::proof::nonce() {
        Ok(n) => n,
        Err(e) => return ApiError::internal(e.to_string()).into_response(),
    };
    let proof = protocol::proof::serve(&key, &name, &runner_nonce, &serve_nonce);
    let prove = |mut resp: Response| {
        for (h, v) in [(SERVE_NONCE_HEADER, &serve_nonce), (SERVE_PROOF_HEADER, &proof)] {
            if let Ok(v) = header::HeaderValue::from_str(v) {
                resp.headers_mut().insert(h, v);
            }
        }
        resp
    };
    if let Some(why) = protocol::version_refusal(header_text(&headers, VERSION_HEADER)) {
        tracing::warn!(host = %name, %remote, "refused a runner: {why}");
        return prove(
            ApiError { status: StatusCode::CONFLICT, code: "version_mismatch", message: why }.into_response(),
        );
    }
    let upgrade = match upgrade {
        Ok(u) => u,
        Err(e) => {
            return ApiError::bad_request(format!("{} is a WebSocket: {e}", protocol::PATH)).into_response();
        }
    };
    let challenge = crate::machines::hosts::Challenge { key, runner_nonce, serve_nonce: serve_nonce.clone(), remote };
    prove(
        upgrade
            .max_message_size(protocol::MAX_FRAME)
            .max_frame_size(protocol::MAX_FRAME)
            .on_upgrade(move |socket| async move { hosts.serve(name, challenge, socket).await }),
    )
}

/// `GET /hosts`.
pub async fn list(State(runs): State<Arc<Runs>>) -> impl IntoResponse {
    let list = runs.hosts().list(|name| runs.active_runs_on(name));
    Json(list)
}
