//! Talking to the running `lab serve` from another `lab` command (`lab pair`, `lab
//! push-key --rotate`): through its control socket, or at an address the operator gave.

use crate::edge::pairing::ServeFile;
use crate::store::paths::Home;
use anyhow::{anyhow, bail, Context};
use std::time::Duration;

/// How long a command waits for `lab serve`.
const TIMEOUT: Duration = Duration::from_secs(10);

/// POST `body` to `path` of the running `lab serve` of `home`, through its control
/// socket (`<home>/serve.sock`: in the 0700 home, so only that serve can have made
/// it), with the token. The link it answers is built for the address its
/// `serve.json` names. No serve there: a clear error, and nothing is sent anywhere.
pub async fn post_control<T: serde::de::DeserializeOwned>(
    home: &Home,
    token: &str,
    path: &str,
    body: serde_json::Value,
) -> anyhow::Result<T> {
    control(home, token, axum::http::Method::POST, path, body).await
}

/// [`post_control`] with any method (the body sent as JSON whatever it is: a `DELETE`
/// too, as the API's guard wants a JSON content type on every change). An answer
/// without a body (`204`) is read as `null`.
pub async fn control<T: serde::de::DeserializeOwned>(
    home: &Home,
    token: &str,
    method: axum::http::Method,
    path: &str,
    body: serde_json::Value,
) -> anyhow::Result<T> {
    use http_body_util::BodyExt;
    let socket = home.control_socket();
    let addr = serve_addr(home)?;
    let not_running = |why: String| {
        let stale = match &addr {
            Some(a) => format!(
                " ({} names {a}, left by a serve that stopped: nothing was sent there)",
                home.serve_file().display()
            ),
            None => String::new(),
        };
        anyhow!("no `lab serve` is running for {}{stale}: {why}", home.root.display())
    };
    let stream = match tokio::time::timeout(TIMEOUT, tokio::net::UnixStream::connect(&socket)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(not_running(format!("{}: {e}", socket.display()))),
        Err(_) => return Err(not_running(format!("{} did not answer", socket.display()))),
    };
    let host = addr.clone().unwrap_or_else(|| "127.0.0.1".into());
    let exchange = async {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let req = axum::http::Request::builder()
            .method(method)
            .uri(path)
            .header(axum::http::header::HOST, &host)
            .header(axum::http::header::AUTHORIZATION, format!("Bearer {token}"))
            .header(axum::http::header::CONTENT_TYPE, "application/json")
            .body(http_body_util::Full::new(axum::body::Bytes::from(body.to_string())))?;
        let resp = sender.send_request(req).await?;
        let status = resp.status();
        let bytes = resp.into_body().collect().await?.to_bytes();
        anyhow::Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
    };
    let (status, text) = tokio::time::timeout(TIMEOUT, exchange)
        .await
        .map_err(|_| anyhow!("`lab serve` did not answer on {} within {} s", socket.display(), TIMEOUT.as_secs()))?
        .with_context(|| format!("talking to `lab serve` on {}", socket.display()))?;
    answer(status, text, "`lab serve`", "was it rotated just now? Try again")
}

/// What `lab serve` (`who`) answered, as `T`; a refusal as an error with its message
/// (`on_401`: what to say when it refused the token).
fn answer<T: serde::de::DeserializeOwned>(
    status: reqwest::StatusCode,
    text: String,
    who: &str,
    on_401: &str,
) -> anyhow::Result<T> {
    if status.as_u16() == 401 {
        bail!("{who} refused lab's token: {on_401}");
    }
    if status.as_u16() == 204 {
        return serde_json::from_str("null").with_context(|| format!("{who} answered nothing"));
    }
    if !status.is_success() {
        let msg = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_string))
            .unwrap_or(text);
        bail!("{who} said {status}: {msg}");
    }
    serde_json::from_str(&text).with_context(|| format!("{who} answered something else: {text}"))
}

/// Where the running `lab serve` of `home` listens, from `<home>/serve.json`; `None`
/// when there is none.
pub fn serve_addr(home: &Home) -> anyhow::Result<Option<String>> {
    let serve_file = home.serve_file();
    let Some(bytes) = crate::store::fsutil::read_optional(&serve_file)? else { return Ok(None) };
    let f: ServeFile = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not what `lab serve` writes", serve_file.display()))?;
    Ok(Some(f.addr))
}

/// POST `body` to `path` of the `lab serve` at `addr`, with the token.
pub async fn post<T: serde::de::DeserializeOwned>(
    addr: &str,
    token: &str,
    path: &str,
    body: serde_json::Value,
) -> anyhow::Result<T> {
    if addr.contains('/') || addr.is_empty() {
        bail!("--addr {addr:?} is not HOST:PORT");
    }
    let client = reqwest::Client::builder().timeout(TIMEOUT).no_proxy().build()?;
    let resp = client
        .post(format!("http://{addr}{path}"))
        .bearer_auth(token)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| {
            anyhow!(
                "nothing answers at {addr}: is `lab serve` running? ({e}; a serve.json left by one that stopped \
                 names an old address)"
            )
        })?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    answer(status, text, &format!("`lab serve` at {addr}"), "is it serving another home (--home)?")
}
