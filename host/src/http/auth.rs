//! Who may use lab: nobody without the token when lab is reachable from elsewhere (or
//! `--require-token`). The API takes `Authorization: Bearer <token>` or the session
//! cookie; `/login` turns a one-time login code or the token into that cookie.

use super::ApiError;
use crate::token::{self, LoginCodes, SESSION_COOKIE};
use axum::extract::{ConnectInfo, FromRequest, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// The access rules of one `lab serve`.
pub struct Access {
    /// Does every request (but `/login`) need the token?
    pub required: bool,
    token_file: PathBuf,
    /// Drawn at start: a restart ends every session.
    salt: String,
    codes: LoginCodes,
}

impl Access {
    pub fn new(home: &std::path::Path, required: bool) -> std::io::Result<Access> {
        if required {
            token::ensure_token(home)?;
        }
        Ok(Access {
            required,
            token_file: token::token_path(home),
            salt: token::random_hex(16)?,
            codes: LoginCodes::default(),
        })
    }

    /// A fresh one-time login code (for the link printed at start).
    pub fn login_code(&self) -> std::io::Result<String> {
        self.codes.issue(Instant::now())
    }

    /// The current token, read from its file on each use (so `lab token --rotate`
    /// applies at once). Unreadable means nobody gets in.
    fn token(&self) -> Option<String> {
        match token::read_token(&self.token_file) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!("cannot read lab's token: {e}");
                None
            }
        }
    }

    fn authorized(&self, headers: &HeaderMap) -> bool {
        let Some(token) = self.token() else { return false };
        let values = move |name| headers.get_all(name).iter().filter_map(|v: &HeaderValue| v.to_str().ok());
        token::credentials_match(values(header::AUTHORIZATION), values(header::COOKIE), &token, &self.salt)
    }

    fn session_cookie(&self, headers: &HeaderMap) -> Result<HeaderValue, ApiError> {
        let token = self.token().ok_or_else(|| ApiError::internal("lab's token file cannot be read"))?;
        let https = headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"));
        let cookie = format!(
            "{SESSION_COOKIE}={}; HttpOnly; SameSite=Strict; Path=/{}",
            token::session_value(&token, &self.salt),
            if https { "; Secure" } else { "" }
        );
        HeaderValue::from_str(&cookie).map_err(|e| ApiError::internal(e.to_string()))
    }
}

fn remote(req_ext: &axum::http::Extensions) -> String {
    req_ext.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.to_string()).unwrap_or_else(|| "unknown".into())
}

fn offers_credentials(headers: &HeaderMap) -> bool {
    headers.contains_key(header::AUTHORIZATION)
        || headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|c| c.split(';').any(|kv| kv.trim().starts_with(&format!("{SESSION_COOKIE}="))))
}

/// The middleware: lets a request through when no token is required, when it is for
/// `/login`, or when it carries the token; answers 401 otherwise (the login page for `/`).
pub async fn require(State(access): State<Arc<Access>>, req: Request, next: Next) -> Response {
    if !access.required || req.uri().path() == "/login" || access.authorized(req.headers()) {
        return next.run(req).await;
    }
    let (method, route, who) = (req.method().clone(), req.uri().path().to_string(), remote(req.extensions()));
    if offers_credentials(req.headers()) {
        super::refusals::log(true, &who, method.as_str(), &route, "wrong token or session");
    } else {
        super::refusals::log(false, &who, method.as_str(), &route, "no token");
    }
    if route == "/" && method == axum::http::Method::GET {
        return (StatusCode::UNAUTHORIZED, login_page()).into_response();
    }
    unauthorized("this lab needs its token: Authorization: Bearer <token>, or log in at /login").into_response()
}

fn unauthorized(message: &str) -> ApiError {
    ApiError { status: StatusCode::UNAUTHORIZED, code: "unauthorized", message: message.into() }
}

#[derive(Deserialize)]
pub struct CodeQuery {
    code: Option<String>,
}

/// `GET /login[?code=…]`: a valid one-time code becomes the session cookie and a
/// redirect to the UI; no code shows the token form.
pub async fn login_with_code(State(access): State<Arc<Access>>, req: Request) -> Response {
    let Ok(Query(q)) = Query::<CodeQuery>::try_from_uri(req.uri()) else {
        return ApiError::bad_request("the query string is not code=<login code>").into_response();
    };
    if !access.required {
        return see_other("/");
    }
    let Some(code) = q.code.filter(|c| !c.is_empty()) else {
        return login_page();
    };
    if !access.codes.redeem(&code, Instant::now()) {
        super::refusals::log(true, &remote(req.extensions()), "GET", "/login", "unknown, used or expired login code");
        return unauthorized("this login code is unknown, used or expired: run `lab token` and log in with the token")
            .into_response();
    }
    match access.session_cookie(req.headers()) {
        Ok(cookie) => {
            let mut resp = see_other("/");
            resp.headers_mut().insert(header::SET_COOKIE, cookie);
            resp
        }
        Err(e) => e.into_response(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenBody {
    token: String,
}

/// `POST /login {"token": "…"}`: the token itself becomes the session cookie.
pub async fn login_with_token(State(access): State<Arc<Access>>, req: Request) -> Response {
    let who = remote(req.extensions());
    let headers = req.headers().clone();
    let body = match Json::<TokenBody>::from_request(req, &()).await {
        Ok(Json(b)) => b,
        Err(e) => return ApiError::from(e).into_response(),
    };
    if !access.required {
        return Json(json!({"logged_in": true, "token_required": false})).into_response();
    }
    let good = access.token().is_some_and(|t| token::ct_eq(body.token.trim().as_bytes(), t.as_bytes()));
    if !good {
        super::refusals::log(true, &who, "POST", "/login", "wrong token");
        return unauthorized("that is not lab's token (`lab token` prints it)").into_response();
    }
    match access.session_cookie(&headers) {
        Ok(cookie) => {
            let mut resp = Json(json!({"logged_in": true})).into_response();
            resp.headers_mut().insert(header::SET_COOKIE, cookie);
            resp
        }
        Err(e) => e.into_response(),
    }
}

fn see_other(location: &'static str) -> Response {
    (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response()
}

/// The token form shown instead of the UI to a browser without a session.
/// The login form's style and script: inline, allowed by their hashes in the page's
/// own Content-Security-Policy ([`super::headers::login_policy`]).
const LOGIN_STYLE: &str = "body { font-family: system-ui, sans-serif; max-width: 32rem; margin: 3rem auto; padding: 0 1rem } input { width: 100% }";
const LOGIN_SCRIPT: &str = r#"
document.getElementById("login").addEventListener("submit", async (e) => {
  e.preventDefault();
  const token = document.getElementById("token").value.trim();
  const res = await fetch("login", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ token }) });
  if (res.ok) location.href = "./";
  else document.getElementById("error").textContent = "That is not lab's token.";
});
"#;

/// The login form, with its Content-Security-Policy.
fn login_page() -> Response {
    let html = format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>lab: log in</title><style>{LOGIN_STYLE}</style></head>
<body>
<h1>lab</h1>
<form id="login">
<p><label for="token">This lab needs its token (<code>lab token</code> prints it):</label></p>
<p><input id="token" type="password" autocomplete="current-password" autofocus required>
<p><button>Log in</button> <span id="error" role="alert"></span></p>
</form>
<script>{LOGIN_SCRIPT}</script>
</body></html>
"#
    );
    // The hashes are of constants: computed once.
    static POLICY: std::sync::LazyLock<Option<HeaderValue>> = std::sync::LazyLock::new(|| {
        HeaderValue::from_str(&super::headers::login_policy(LOGIN_SCRIPT, LOGIN_STYLE)).ok()
    });
    let mut resp = Html(html).into_response();
    if let Some(v) = POLICY.clone() {
        resp.headers_mut().insert(header::CONTENT_SECURITY_POLICY, v);
    }
    resp
}
