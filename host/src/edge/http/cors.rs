//! Cross-origin access for the origins the operator allowed (`--allowed-origin`,
//! `[serve] allowed_origins`), and for nobody else: a UI served from another origin
//! calls lab's API with `fetch` and its bearer token.
//!
//! - A preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) from an
//!   allowed origin that passed [`super::guard`] is answered here, before the token is
//!   asked for (browsers send none with it): `204`, the origin echoed, the methods and
//!   request headers lab's API takes, a 10-minute cache.
//! - Every other answer to a request from an allowed origin (errors included, so the
//!   page can read lab's JSON error) carries `Access-Control-Allow-Origin: <origin>`.
//! - Never `Access-Control-Allow-Credentials`: the session cookie does not travel
//!   cross-origin, so the other UI holds the token itself (`Authorization: Bearer`).
//!   An `EventSource` cannot send that header; such a UI reads `/runs/{id}/events`
//!   with `fetch`.
//! - Lab's own pages are same-origin and need none of it; any other origin gets no
//!   `Access-Control-*` header at all (its preflight is refused by the guard, 403).
//!
//! The decisions are pure ([`preflight`], [`allow_origin`]); [`layer`] applies them.

use super::guard::{self, Policy};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// The methods lab's API takes.
pub const ALLOW_METHODS: &str = "GET, POST, PUT, DELETE, HEAD";
/// The request headers a cross-origin UI needs (`Last-Event-ID` for a resumed stream).
pub const ALLOW_HEADERS: &str = "authorization, content-type, last-event-id";
/// How long a browser may cache a preflight's answer, in seconds.
pub const MAX_AGE_SECS: u32 = 600;

/// The request's one `Origin`, if it is one the operator allowed.
pub fn allow_origin<'a>(policy: &Policy, origins: &[&'a str]) -> Option<&'a str> {
    match origins {
        [o] if guard::configured_origin(policy, o) => Some(*o),
        _ => None,
    }
}

/// Is this request a CORS preflight from an allowed origin (answered by lab, not routed)?
pub fn preflight<'a>(
    policy: &Policy,
    method: &str,
    origins: &[&'a str],
    request_method: Option<&str>,
) -> Option<&'a str> {
    if method != "OPTIONS" || request_method.is_none() {
        return None;
    }
    allow_origin(policy, origins)
}

/// The layer, inside [`super::guard`] for preflights (they have passed the Host and
/// Origin rules) and around it for the header on every answer.
pub async fn layer(State(policy): State<Arc<Policy>>, req: Request, next: Next) -> Response {
    let origin = {
        let origins: Vec<&str> = req.headers().get_all(header::ORIGIN).iter().filter_map(|v| v.to_str().ok()).collect();
        allow_origin(&policy, &origins).and_then(|o| HeaderValue::from_str(o).ok())
    };
    let mut resp = next.run(req).await;
    if let Some(o) = origin {
        let h = resp.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, o);
        h.append(header::VARY, HeaderValue::from_static("Origin"));
    }
    resp
}

/// The preflight's answer (the layer adds the origin).
pub fn preflight_response() -> Response {
    let mut h = HeaderMap::new();
    h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(ALLOW_METHODS));
    h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(ALLOW_HEADERS));
    h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from(MAX_AGE_SECS));
    (StatusCode::NO_CONTENT, h).into_response()
}

/// `req` is a preflight lab answers itself.
pub fn is_preflight(policy: &Policy, req: &Request) -> bool {
    let origins: Vec<&str> = req.headers().get_all(header::ORIGIN).iter().filter_map(|v| v.to_str().ok()).collect();
    let acrm = req.headers().get(header::ACCESS_CONTROL_REQUEST_METHOD).and_then(|v| v.to_str().ok());
    preflight(policy, req.method().as_str(), &origins, acrm).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy {
            bound: "127.0.0.1:7777".parse().unwrap(),
            allowed_hosts: vec![],
            allowed_origins: vec!["https://ui.example".into()],
        }
    }

    #[test]
    fn only_a_configured_origin_is_allowed() {
        let p = policy();
        assert_eq!(allow_origin(&p, &["https://ui.example"]), Some("https://ui.example"));
        assert_eq!(allow_origin(&p, &["https://ui.example:443"]), Some("https://ui.example:443"), "same origin");
        for o in [&["https://evil.example"][..], &["null"], &[], &["https://ui.example", "https://ui.example"]] {
            assert_eq!(allow_origin(&p, o), None, "{o:?}");
        }
        assert_eq!(allow_origin(&p, &["http://127.0.0.1:7777"]), None, "lab's own origin needs no CORS");
    }

    #[test]
    fn a_preflight_is_options_with_a_request_method_from_a_configured_origin() {
        let p = policy();
        let o = ["https://ui.example"];
        assert_eq!(preflight(&p, "OPTIONS", &o, Some("POST")), Some("https://ui.example"));
        assert_eq!(preflight(&p, "OPTIONS", &o, None), None, "a plain OPTIONS is routed (405)");
        assert_eq!(preflight(&p, "GET", &o, Some("POST")), None);
        assert_eq!(preflight(&p, "OPTIONS", &["https://evil.example"], Some("POST")), None);
    }
}
