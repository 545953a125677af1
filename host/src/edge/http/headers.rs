//! What every response tells the browser, whatever route or error it is: no framing
//! (clickjacking of the answer buttons), no MIME sniffing, no referrer, and a
//! Content-Security-Policy that lets the UI load only its own files — no inline script
//! or style, no other origin, no plugins — so a string that slipped through the UI's
//! escaping could still not run. The login page's one inline script and style are
//! allowed by their hashes, in its own policy ([`login_policy`]).

use axum::extract::Request;
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use base64::Engine;
use sha2::{Digest, Sha256};

/// The UI's policy: its own origin only; `data:` images for the icon it draws.
pub const UI_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
     frame-ancestors 'none'";

/// `'sha256-…'` of an inline `<script>` or `<style>` element's text.
pub fn source_hash(text: &str) -> String {
    format!("'sha256-{}'", base64::engine::general_purpose::STANDARD.encode(Sha256::digest(text.as_bytes())))
}

/// The policy of a page whose only inline code is `script` and `style`.
pub fn login_policy(script: &str, style: &str) -> String {
    format!(
        "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; base-uri 'none'; \
         form-action 'self'; frame-ancestors 'none'",
        source_hash(script),
        source_hash(style)
    )
}

/// The layer: sets the headers on every response; a handler that set its own
/// Content-Security-Policy keeps it.
pub async fn harden(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(UI_POLICY));
    }
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_the_csp_form_of_sha256() {
        // echo -n 'alert(1)' | openssl dgst -sha256 -binary | base64
        assert_eq!(source_hash("alert(1)"), "'sha256-bhHHL3z2vDgxUt0W3dWQOrprscmda2Y5pLsLg4GF+pI='");
        let p = login_policy("alert(1)", "b{}");
        assert!(p.starts_with("default-src 'none'; script-src 'sha256-bhHHL3z2"), "{p}");
        assert!(p.contains("frame-ancestors 'none'") && !p.contains("unsafe"), "{p}");
        assert!(!UI_POLICY.contains("unsafe") && UI_POLICY.contains("frame-ancestors 'none'"));
    }
}
