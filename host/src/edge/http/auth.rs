//! Who may use lab: nobody without the token when lab is reachable from elsewhere (or
//! `--require-token`). The API takes `Authorization: Bearer <token>` or the session
//! cookie; `/login` turns a one-time login code or the token into that cookie.

use super::ApiError;
use crate::edge::devices::{self, Devices, Via};
use crate::edge::token::{self, Grant, LoginCodes, SESSION_COOKIE};
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
use std::time::{Instant, SystemTime};

/// The access rules of one `lab serve`.
pub struct Access {
    /// Does every request (but `/login`) need the token?
    pub required: bool,
    token_file: PathBuf,
    codes: LoginCodes,
    devices: Devices,
    /// Woken when a device is logged out, so what it holds open ends at once.
    revoked: tokio::sync::Notify,
}

/// How often what a credential holds open (an event stream) checks that it still
/// stands, besides a logout here waking it at once: a token rotated by `lab token
/// --rotate`, or a device idle past its limit, ends it within this.
pub const STANDING_CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The credential a request came with, kept by what outlives the request (an event
/// stream, a push subscription) to end with it. In every request's extensions.
#[derive(Clone)]
pub struct Standing {
    access: Arc<Access>,
    caller: Caller,
    /// A tag of the token the request carried (bearer callers), never the token.
    token_tag: Option<String>,
}

impl Standing {
    /// Who it is, as a push subscription's owner.
    pub fn owner(&self) -> crate::notify::push::subscriptions::Owner {
        use crate::notify::push::subscriptions::Owner;
        match &self.caller {
            Caller::Anyone => Owner::Anyone,
            Caller::Device(id) => Owner::Device(id.clone()),
            Caller::Bearer => Owner::Token(self.token_tag.clone().unwrap_or_default()),
        }
    }

    /// Whether the credential still stands.
    pub fn holds(&self) -> bool {
        self.access.owner_holds(&self.owner())
    }

    /// Resolves once the credential no longer stands.
    pub async fn ended(self) {
        loop {
            let woken = self.access.revoked.notified();
            if !self.holds() {
                return;
            }
            tokio::select! {
                _ = woken => {}
                _ = tokio::time::sleep(STANDING_CHECK_EVERY) => {}
            }
        }
    }
}

/// Who a request is from, as [`require`] found it (in the request's extensions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// No token is required (`--no-token`): anyone on this machine.
    Anyone,
    /// A script with the token itself.
    Bearer,
    /// A logged-in device (its id).
    Device(String),
}

/// The header a logged-in page sends its device key in ([`crate::edge::devices`]): the cookie
/// alone opens only the UI's static files.
pub const DEVICE_KEY_HEADER: &str = "x-lab-device-key";
/// The query parameter an event stream takes it in (an `EventSource` sends no headers);
/// taken on `GET /runs/{id}/events` only.
pub const DEVICE_KEY_QUERY: &str = "device_key";

/// What a request's credentials are.
enum Found {
    /// A caller; for a bearer one, a tag of the token it carried (its [`Standing`]).
    Caller(Caller, Option<String>),
    /// A live device's cookie without its device key: the UI's files only.
    PageOnly,
}

/// How long a device's cookie is kept by its browser; lab itself ends a device unused
/// for [`crate::edge::devices::IDLE_LIMIT`] (400 days is the most browsers keep any cookie).
const COOKIE_MAX_AGE: u64 = 400 * 24 * 3600;

impl Access {
    pub fn new(home: &std::path::Path, required: bool) -> anyhow::Result<Access> {
        if required {
            token::ensure_token(home)?;
        }
        Ok(Access {
            required,
            token_file: token::token_path(home),
            codes: LoginCodes::default(),
            devices: Devices::open(crate::store::paths::Home::new(home.to_path_buf()).devices_file())?,
            revoked: tokio::sync::Notify::new(),
        })
    }

    /// Whether `owner`'s credential stands now: a device logged in and live under the
    /// current token, the current token (by its tag), anyone only while no token is
    /// required. Without a token required nothing is ever revoked.
    pub fn owner_holds(&self, owner: &crate::notify::push::subscriptions::Owner) -> bool {
        use crate::notify::push::subscriptions::Owner;
        if !self.required {
            return true;
        }
        let Some(token) = self.token() else { return false };
        match owner {
            Owner::Anyone => false,
            Owner::Token(tag) => crate::util::secrets::ct_eq(tag.as_bytes(), devices::token_tag(&token).as_bytes()),
            Owner::Device(id) => self.devices.is_live(id, &token, SystemTime::now()),
        }
    }

    /// A fresh one-time login code (for the link printed at start).
    pub fn login_code(&self) -> std::io::Result<String> {
        self.codes.issue(Instant::now(), token::LOGIN_CODE_TTL, Grant { via: Via::LoginLink, name: None })
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

    fn caller(&self, headers: &HeaderMap, uri: &axum::http::Uri) -> Option<Found> {
        let token = self.token()?;
        let values = move |name| headers.get_all(name).iter().filter_map(|v: &HeaderValue| v.to_str().ok());
        if token::bearer_matches(values(header::AUTHORIZATION), &token) {
            return Some(Found::Caller(Caller::Bearer, Some(devices::token_tag(&token))));
        }
        let now = SystemTime::now();
        let id = token::session_cookies(values(header::COOKIE)).find_map(|v| self.devices.check(v, &token, now))?;
        let key = headers.get(DEVICE_KEY_HEADER).and_then(|v| v.to_str().ok()).map(str::to_string).or_else(|| {
            is_event_stream(uri.path())
                .then(|| Query::<KeyQuery>::try_from_uri(uri).ok().and_then(|Query(q)| q.device_key))
                .flatten()
        });
        Some(if self.devices.key_matches(&id, key.as_deref()) {
            Found::Caller(Caller::Device(id), None)
        } else {
            Found::PageOnly
        })
    }

    /// Log a new device in: its `Set-Cookie`, its device key, and who it is now.
    fn log_in(
        &self,
        headers: &HeaderMap,
        who: &str,
        grant: Grant,
    ) -> Result<(HeaderValue, String, crate::edge::audit::Actor), ApiError> {
        let token = self.token().ok_or_else(|| ApiError::internal("lab's token file cannot be read"))?;
        let name = grant.name.unwrap_or_else(|| {
            devices::name_from_user_agent(headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or(""))
        });
        let (id, value, key) = self
            .devices
            .login_with_key(&token, name.clone(), grant.via, SystemTime::now())
            .map_err(|e| ApiError::internal(format!("cannot save the list of devices: {e}")))?;
        tracing::info!(device = %id, name = %name, via = ?grant.via, remote = %who, "a device logged in");
        let cookie = format!(
            "{SESSION_COOKIE}={value}; HttpOnly; SameSite=Strict; Path=/; Max-Age={COOKIE_MAX_AGE}{}",
            secure(headers)
        );
        let actor = crate::edge::audit::Actor::Device { device_id: id, device_name: name };
        HeaderValue::from_str(&cookie).map(|c| (c, key, actor)).map_err(|e| ApiError::internal(e.to_string()))
    }

    /// Who `caller` is, as the audit log names it (a device by its id and name).
    pub fn actor(&self, caller: &Caller) -> crate::edge::audit::Actor {
        use crate::edge::audit::Actor;
        match caller {
            Caller::Anyone => Actor::anyone(),
            Caller::Bearer => Actor::bearer(),
            Caller::Device(id) => {
                Actor::Device { device_id: id.clone(), device_name: self.devices.name(id).unwrap_or_default() }
            }
        }
    }
}

/// What the device routes ([`super::pairing`]) use.
impl Access {
    /// The live devices, `current` marked.
    pub(super) fn devices(&self, current: Option<&str>) -> Vec<devices::DeviceBody> {
        match self.token() {
            Some(token) if self.required => self.devices.list(&token, SystemTime::now(), current),
            _ => Vec::new(),
        }
    }

    pub(super) fn revoke(&self, id: &str) -> std::io::Result<bool> {
        let done = self.devices.revoke(id)?;
        if done {
            self.revoked.notify_waiters();
        }
        Ok(done)
    }

    /// A pairing code for a device to be called `name`.
    pub(super) fn pair_code(&self, name: Option<String>) -> std::io::Result<String> {
        self.codes.issue(Instant::now(), token::PAIR_CODE_TTL, Grant { via: Via::Pairing, name })
    }
}

/// The cookie that makes a browser forget its device.
pub(super) fn forget_cookie(headers: &HeaderMap) -> HeaderValue {
    HeaderValue::from_str(&format!(
        "{SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{}",
        secure(headers)
    ))
    .expect("a constant cookie")
}

/// Did the request come through https (a reverse proxy says so)?
pub(super) fn https(headers: &HeaderMap) -> bool {
    forwarded_https(headers)
}

/// `; Secure` when the request came through https (a reverse proxy says so).
fn secure(headers: &HeaderMap) -> &'static str {
    if forwarded_https(headers) {
        "; Secure"
    } else {
        ""
    }
}

fn forwarded_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"))
}

pub(super) fn remote(req_ext: &axum::http::Extensions) -> String {
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
pub async fn require(State(access): State<Arc<Access>>, mut req: Request, next: Next) -> Response {
    let found = if access.required {
        access.caller(req.headers(), req.uri())
    } else {
        Some(Found::Caller(Caller::Anyone, None))
    };
    let caller = match found {
        Some(Found::Caller(c, tag)) => Some((c, tag)),
        Some(Found::PageOnly) => {
            // The UI's files (and the login pages) for a cookie alone; the API needs the key.
            let page = req.method() == axum::http::Method::GET && is_page(req.uri().path());
            if page || req.uri().path() == "/login" {
                return next.run(req).await;
            }
            let who = remote(req.extensions());
            super::refusals::log(
                true,
                &who,
                req.method().as_str(),
                req.uri().path(),
                "a session cookie without its device key",
            );
            return unauthorized(
                "this browser's session came without its device key (a cookie alone, or a login from before device \
                 keys): log in again at /login",
            )
            .into_response();
        }
        None => None,
    };
    if let Some((caller, token_tag)) = caller {
        req.extensions_mut().insert(Standing { access: access.clone(), caller: caller.clone(), token_tag });
        req.extensions_mut().insert(caller);
        return next.run(req).await;
    }
    // The login form; and runners, which authenticate with their host's credential
    // (checked by the route itself, token or not).
    if req.uri().path() == "/login" || req.uri().path() == crate::machines::hosts::protocol::PATH {
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

/// The UI's own files: what a page loads before it can send its device key.
fn is_page(path: &str) -> bool {
    path == "/" || path.strip_prefix('/').is_some_and(|f| super::WEB_ASSETS.iter().any(|(name, _, _)| *name == f))
}

/// `GET /runs/{id}/events` and `GET /runs/{id}/terminal/stream`: what a browser opens
/// without a way to send headers (an EventSource, a WebSocket).
fn is_event_stream(path: &str) -> bool {
    let mut parts = path.split('/');
    matches!(
        (parts.next(), parts.next(), parts.next(), parts.next(), parts.next(), parts.next()),
        (Some(""), Some("runs"), Some(_), Some("events"), None, None)
            | (Some(""), Some("runs"), Some("events"), None, None, None)
            | (Some(""), Some("runs"), Some(_), Some("terminal"), Some("stream"), None)
    )
}

#[derive(Deserialize)]
struct KeyQuery {
    device_key: Option<String>,
}

fn unauthorized(message: &str) -> ApiError {
    ApiError { status: StatusCode::UNAUTHORIZED, code: "unauthorized", message: message.into() }
}

#[derive(Deserialize)]
pub struct CodeQuery {
    code: Option<String>,
}

/// `GET /login[?code=…]`: with a code, a page with one button whose POST redeems it
/// (a link preview that fetches the link burns nothing and logs nothing in); without,
/// the token form. Nothing here checks or uses the code.
pub async fn login_with_code(State(access): State<Arc<Access>>, req: Request) -> Response {
    let Ok(Query(q)) = Query::<CodeQuery>::try_from_uri(req.uri()) else {
        return ApiError::bad_request("the query string is not code=<login code>").into_response();
    };
    if !access.required {
        return see_other("/");
    }
    match q.code.filter(|c| !c.is_empty()) {
        Some(_) => redeem_page(),
        None => login_page(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoginBody {
    /// lab's token itself.
    token: Option<String>,
    /// A one-time login code (a login or pairing link's).
    code: Option<String>,
}

/// `POST /login {"token": "…"}` or `{"code": "…"}`: the token, or a one-time login
/// code (redeemed: it works once), becomes a device's session cookie.
pub async fn login_with_token(State(access): State<Arc<Access>>, req: Request) -> Response {
    let who = remote(req.extensions());
    let headers = req.headers().clone();
    let body = match Json::<LoginBody>::from_request(req, &()).await {
        Ok(Json(b)) => b,
        Err(e) => return ApiError::from(e).into_response(),
    };
    if !access.required {
        return Json(json!({"logged_in": true, "token_required": false})).into_response();
    }
    let grant = match (body.token, body.code) {
        (Some(t), None) => {
            let good =
                access.token().is_some_and(|tok| crate::util::secrets::ct_eq(t.trim().as_bytes(), tok.as_bytes()));
            if !good {
                super::refusals::log(true, &who, "POST", "/login", "wrong token");
                return unauthorized("that is not lab's token (`lab token` prints it)").into_response();
            }
            Grant { via: Via::Token, name: None }
        }
        (None, Some(code)) => match access.codes.redeem(code.trim(), Instant::now()) {
            Some(grant) => grant,
            None => {
                super::refusals::log(true, &who, "POST", "/login", "unknown, used or expired login code");
                return unauthorized(
                    "this login code is unknown, used or expired: pair again (`lab pair`), or log in with the token \
                     (`lab token`)",
                )
                .into_response();
            }
        },
        _ => return ApiError::bad_request("send {\"token\": …} or {\"code\": …}").into_response(),
    };
    match access.log_in(&headers, &who, grant) {
        Ok((cookie, key, actor)) => {
            // The key goes to the page, which keeps it in its origin's storage.
            let mut resp = (
                StatusCode::OK,
                [(header::CACHE_CONTROL, "no-store")],
                Json(json!({"logged_in": true, "device_key": key})),
            )
                .into_response();
            resp.headers_mut().insert(header::SET_COOKIE, cookie);
            // The audit log's actor for this request: the device it made.
            resp.extensions_mut().insert(actor);
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
  if (res.ok) {
    const body = await res.json();
    localStorage.setItem("lab.deviceKey", body.device_key || "");
    location.href = "./";
  }
  else document.getElementById("error").textContent = "That is not lab's token.";
});
"#;

/// The login link's page: one button; its script sends the link's code (from the
/// address bar: the page holds no secret) in a POST.
const REDEEM_SCRIPT: &str = r#"
document.getElementById("redeem").addEventListener("submit", async (e) => {
  e.preventDefault();
  const code = new URLSearchParams(location.search).get("code") || "";
  const res = await fetch("login", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ code }) });
  if (res.ok) {
    const body = await res.json();
    localStorage.setItem("lab.deviceKey", body.device_key || "");
    location.replace("./");
  }
  else document.getElementById("error").textContent = "This link was used already or has expired: pair again (lab pair), or log in with lab's token.";
});
"#;

/// The login link's page, with its Content-Security-Policy; never cached.
fn redeem_page() -> Response {
    static POLICY: std::sync::LazyLock<Option<HeaderValue>> = std::sync::LazyLock::new(|| {
        HeaderValue::from_str(&super::headers::login_policy(REDEEM_SCRIPT, LOGIN_STYLE)).ok()
    });
    let form = r#"<form id="redeem">
<p>This link logs one device in to lab, once. Log in this one?</p>
<p><button id="log-in" data-testid="redeem">Log in this device</button> <span id="error" role="alert"></span></p>
</form>"#;
    let mut resp = own_page("lab: log in this device", form, REDEEM_SCRIPT, &POLICY);
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// The login form, with its Content-Security-Policy.
fn login_page() -> Response {
    // The hashes are of constants: computed once.
    static POLICY: std::sync::LazyLock<Option<HeaderValue>> = std::sync::LazyLock::new(|| {
        HeaderValue::from_str(&super::headers::login_policy(LOGIN_SCRIPT, LOGIN_STYLE)).ok()
    });
    let form = r#"<form id="login">
<p><label for="token">This lab needs its token (<code>lab token</code> prints it):</label></p>
<p><input id="token" type="password" autocomplete="current-password" autofocus required>
<p><button>Log in</button> <span id="error" role="alert"></span></p>
</form>"#;
    own_page("lab: log in", form, LOGIN_SCRIPT, &POLICY)
}

/// One of lab's own small pages: `body` (a form) and its one inline `script`, under its
/// Content-Security-Policy (`policy`: the hashes of that script and the style).
fn own_page(title: &str, body: &str, script: &str, policy: &Option<HeaderValue>) -> Response {
    let html = format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex"><title>{title}</title><style>{LOGIN_STYLE}</style></head>
<body>
<h1>lab</h1>
{body}
<script>{script}</script>
</body></html>
"#
    );
    let mut resp = Html(html).into_response();
    if let Some(v) = policy.clone() {
        resp.headers_mut().insert(header::CONTENT_SECURITY_POLICY, v);
    }
    resp
}
