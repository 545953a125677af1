//! Pairing a phone: a one-time login link, shown as a QR code in the terminal (`lab
//! pair`) and in the UI ("Pair a phone").
//!
//! `lab pair` asks the running `lab serve` for a pairing code (`POST /pair`, with the
//! token, at the address serve wrote to `<home>/serve.json`), then prints the link and
//! its QR code. The code lives in serve's memory only: once, for five minutes.
//! The QR code is made by the `qrcode` crate; the drawing ([`terminal`], [`rows`]) is
//! pure.

use qrcode::{Color, EcLevel, QrCode};
use serde::{Deserialize, Serialize};

/// A QR code's modules, one string per row, `1` dark and `0` light (no quiet zone):
/// what the UI draws.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Qr {
    pub size: usize,
    pub rows: Vec<String>,
}

/// The QR code of `text` (error correction M: a phone reads it off a screen at once).
pub fn qr(text: &str) -> Result<Qr, String> {
    let code = QrCode::with_error_correction_level(text.as_bytes(), EcLevel::M)
        .map_err(|e| format!("cannot make a QR code of that link: {e}"))?;
    let size = code.width();
    let colors = code.to_colors();
    let rows = colors
        .chunks(size)
        .map(|row| row.iter().map(|c| if *c == Color::Dark { '1' } else { '0' }).collect())
        .collect();
    Ok(Qr { size, rows })
}

/// Light modules around the code, as the standard asks.
const QUIET: usize = 4;

/// `qr` for a terminal: two rows per line with half blocks, light modules drawn (as
/// `qrencode -t UTF8` does: right for the usual dark terminal, and phones read it
/// either way), with the quiet zone.
pub fn terminal(qr: &Qr) -> String {
    let n = qr.size + 2 * QUIET;
    let dark = |x: usize, y: usize| -> bool {
        if x < QUIET || y < QUIET || x >= QUIET + qr.size || y >= QUIET + qr.size {
            return false;
        }
        qr.rows[y - QUIET].as_bytes()[x - QUIET] == b'1'
    };
    let mut out = String::new();
    for y in (0..n).step_by(2) {
        for x in 0..n {
            let top = !dark(x, y);
            let bottom = y + 1 < n && !dark(x, y + 1);
            out.push(match (top, bottom) {
                (true, true) => '█',
                (true, false) => '▀',
                (false, true) => '▄',
                (false, false) => ' ',
            });
        }
        out.push('\n');
    }
    out
}

/// What `<home>/serve.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServeFile {
    pub addr: String,
    pub pid: u32,
}

/// What `POST /pair` answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PairBody {
    pub url: String,
    pub expires_at: String,
    pub ttl_seconds: u64,
    pub qr: Qr,
}

/// `url` with its scheme and authority replaced by `base` (`https://name[:port]`, a
/// path prefix allowed): for a phone that reaches lab by another name than the one
/// `lab pair` used.
pub fn rebase(url: &str, base: &str) -> Result<String, String> {
    let base_url = url::Url::parse(base).map_err(|e| format!("--base-url {base:?} is not a URL: {e}"))?;
    if !matches!(base_url.scheme(), "http" | "https") || base_url.host_str().is_none() {
        return Err(format!("--base-url {base:?} must be http(s)://name[:port]"));
    }
    if base_url.query().is_some() || base_url.fragment().is_some() {
        return Err(format!("--base-url {base:?} must not have a query or a fragment"));
    }
    let parsed = url::Url::parse(url).map_err(|e| format!("lab answered a link that is not a URL: {e}"))?;
    let tail = &url[url.find(parsed.path()).unwrap_or(url.len())..];
    Ok(format!("{}{tail}", base.trim_end_matches('/')))
}

/// Whether `url` names a loopback host (a phone cannot open it).
pub fn is_loopback_link(url: &str) -> bool {
    let Ok(u) = url::Url::parse(url) else { return false };
    match u.host() {
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_qr_code_is_square_rows_of_modules_with_finder_patterns() {
        let q = qr("https://lab.example/login?code=0123456789abcdef0123456789abcdef").unwrap();
        assert_eq!(q.rows.len(), q.size);
        assert!(q.rows.iter().all(|r| r.len() == q.size && r.bytes().all(|b| b == b'0' || b == b'1')));
        // The finder pattern's top row, top left.
        assert_eq!(&q.rows[0][..7], "1111111");
        assert_eq!(&q.rows[1][..7], "1000001");
        assert!(qr(&"x".repeat(5000)).is_err(), "too long for any QR code: an error, no panic");
    }

    #[test]
    fn the_terminal_drawing_has_the_quiet_zone_and_two_rows_a_line() {
        let q = Qr { size: 2, rows: vec!["10".into(), "01".into()] };
        let t = terminal(&q);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5, "10 rows of modules, 2 a line");
        assert!(lines.iter().all(|l| l.chars().count() == 10));
        assert_eq!(lines[0], "██████████");
        assert_eq!(lines[2], "████▄▀████", "dark top left, dark bottom right");
        assert_eq!(lines[3], lines[0]);
    }

    #[test]
    fn links_are_rebased_and_loopback_is_recognised() {
        let link = "http://127.0.0.1:7777/login?code=abc";
        assert_eq!(rebase(link, "https://lab.example.org").unwrap(), "https://lab.example.org/login?code=abc");
        assert_eq!(rebase(link, "https://lab.example.org/lab/").unwrap(), "https://lab.example.org/lab/login?code=abc");
        assert!(rebase(link, "lab.example.org").is_err());
        assert!(rebase(link, "ftp://x").is_err());
        assert!(rebase(link, "https://x/?a=1").is_err());
        assert!(is_loopback_link(link));
        assert!(is_loopback_link("http://[::1]:7777/login"));
        assert!(is_loopback_link("http://localhost:7777/login"));
        assert!(!is_loopback_link("https://lab.example.org/login"));
        assert!(!is_loopback_link("http://192.168.1.5:7777/login"));
    }
}

/// `lab pair`: the I/O around the pure parts above.
pub mod cli {
    use super::{is_loopback_link, qr, rebase, terminal, PairBody, ServeFile};
    use crate::store::paths::{resolve_home, Home};
    use anyhow::{anyhow, bail, Context};
    use std::path::PathBuf;
    use std::time::Duration;

    /// How long `lab pair` waits for `lab serve`.
    const TIMEOUT: Duration = Duration::from_secs(10);

    pub fn run(
        home: Option<PathBuf>,
        name: Option<String>,
        base_url: Option<String>,
        addr: Option<String>,
    ) -> anyhow::Result<()> {
        let home = Home::new(resolve_home(home)?);
        if addr.is_none() && serve_addr(&home)?.is_none() && !home.control_socket().exists() {
            bail!(
                "no `lab serve` is running for {} (there is no {}): start it, or say where it listens with --addr",
                home.root.display(),
                home.serve_file().display()
            );
        }
        let token = crate::token::read_token(&crate::token::token_path(&home.root))?
            .ok_or_else(|| anyhow!("this lab has no token yet: start `lab serve` first"))?;
        let mut body = serde_json::Map::new();
        if let Some(n) = name {
            body.insert("name".into(), n.into());
        }
        let body = serde_json::Value::Object(body);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let answer: PairBody = match addr {
            // Where the operator said: their choice of address.
            Some(a) => rt.block_on(post(&a, &token, "/pair", body))?,
            // The running serve of this home, through its control socket: never to
            // whatever holds the port an old serve.json names.
            None => rt.block_on(post_control(&home, &token, "/pair", body))?,
        };
        let url = match base_url {
            Some(b) => rebase(&answer.url, &b).map_err(anyhow::Error::msg)?,
            None => answer.url,
        };
        let code = qr(&url).map_err(anyhow::Error::msg)?;
        let minutes = answer.ttl_seconds.div_ceil(60);
        let mut out = terminal(&code);
        out += &format!("\nlab: scan this on your phone to log it in (works once, for {minutes} minutes):\n{url}\n");
        out += "lab: the phone then shows under Devices in lab's UI, where it can be logged out.\n";
        print!("{out}");
        if is_loopback_link(&url) {
            eprintln!(
                "lab: WARNING: this link names {}, which a phone cannot open. Reach lab by a name the phone \
                 can open (an https reverse proxy, a tailnet; docs/security.md) and pass it with --base-url.",
                url::Url::parse(&url).ok().and_then(|u| u.host_str().map(str::to_string)).unwrap_or_default()
            );
        }
        Ok(())
    }

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
            let (mut sender, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
            tokio::spawn(conn);
            let req = axum::http::Request::post(path)
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
}
