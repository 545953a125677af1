//! Experimental (docs/adr/0003-more-than-one-machine.md): `lab hook <verb> --post <url>`,
//! the hook client an agent host other than lab's own would run. It POSTs the hook
//! payload (stdin, checked like the file form checks it) to `url` with the run's token
//! as a bearer token, instead of writing a file under `<home>/runtime/`.
//!
//! - The token comes from the environment ([`TOKEN_ENV`]), never from the command line:
//!   argv is visible to every user of the host (`ps`, `/proc/<pid>/cmdline`) and lands
//!   in the agent's settings and logs. A `--token` flag or a URL with credentials in it
//!   is refused.
//! - `https://` to any host; plain `http://` only to a loopback address (a bearer token
//!   never crosses a network in clear text).
//! - Verbs: the write channels (`dialog-spool`, `blocked-marker`, `session-info`); the
//!   channel travels in the `X-Lab-Hook-Channel` header, the run is whatever the URL
//!   names. `dialog-clear` has no `--post` form yet.
//! - Exit status: always 0, like every `lab hook` (the contract: a hook never blocks the
//!   tool, and agents read 1 as a hook error and 2 as "block the tool"). What was not
//!   delivered is said in one line on stderr, which never holds the token. Nothing on
//!   stdout. One request, no retry, [`TIMEOUT`] in all, no redirects followed.
//! - Proxies: a loopback URL is always reached directly, whatever the environment says
//!   (a proxy would see the bearer token, in clear text for `http://`). An `https://`
//!   URL elsewhere goes through the proxy the usual variables name (`HTTPS_PROXY`,
//!   `https_proxy`, `ALL_PROXY`, `all_proxy`, minus `NO_PROXY`/`no_proxy`), as any
//!   HTTPS client would; TLS keeps the token from the proxy. No other variable but
//!   [`TOKEN_ENV`] is read.
//!
//! lab serve has no receiving route: the receiver lives in `benches/remote_hook.rs`
//! until the ADR is decided.

use std::net::IpAddr;
use std::time::Duration;

/// The environment variable that holds the run's hook token.
pub const TOKEN_ENV: &str = "LAB_HOOK_TOKEN";
/// The header naming the channel (the verb) of a posted payload.
pub const CHANNEL_HEADER: &str = "x-lab-hook-channel";
/// Connect + send + answer, in all. The agent waits for its hook: keep this short.
pub const TIMEOUT: Duration = Duration::from_secs(10);

const VERBS: [&str; 3] = ["dialog-spool", "blocked-marker", "session-info"];

/// A parsed `lab hook <verb> --post <url>`.
#[derive(Debug, PartialEq, Eq)]
pub struct Post {
    pub verb: String,
    pub url: reqwest::Url,
}

/// Whether a URL's host (as `Url::host_str` gives it) is a loopback address.
fn loopback(host: &str) -> bool {
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    match bare.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => bare.eq_ignore_ascii_case("localhost"),
    }
}

/// Whether `url` must be reached without any proxy: every loopback URL (the only ones
/// plain `http://` may name), so the token never passes through a proxy there.
pub fn direct(url: &reqwest::Url) -> bool {
    url.host_str().is_some_and(loopback)
}

/// Check a `--post` command line: `<verb> --post <url>`, nothing else.
pub fn parse_args(args: &[String]) -> Result<Post, String> {
    if args.iter().any(|a| a == "--token" || a.starts_with("--token=")) {
        return Err(format!("the token is read from {TOKEN_ENV}, never from the command line"));
    }
    let [verb, flag, url] = args else {
        return Err(format!("usage: lab hook {} --post <url>", VERBS.join("|")));
    };
    if flag != "--post" || !VERBS.contains(&verb.as_str()) {
        return Err(format!("usage: lab hook {} --post <url>", VERBS.join("|")));
    }
    let url = reqwest::Url::parse(url).map_err(|e| format!("--post: not a URL ({e})"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!("--post: the URL carries credentials; the token belongs in {TOKEN_ENV}"));
    }
    let host = url.host_str().ok_or("--post: the URL has no host")?;
    match url.scheme() {
        "https" => {}
        "http" if loopback(host) => {}
        "http" => return Err("--post: plain http only to a loopback address; use https".into()),
        other => return Err(format!("--post: unsupported scheme `{other}`")),
    }
    Ok(Post { verb: verb.clone(), url })
}

/// POST `payload` (already checked) once; `Err` says why it was not delivered.
pub fn send(post: &Post, token: &str, payload: Vec<u8>) -> Result<(), String> {
    let url = post.url.clone();
    // Scheme, host and port: where the request went, without the path (it names the run).
    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    let where_ = format!("{}://{}{port}", url.scheme(), url.host_str().unwrap_or(""));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the HTTP client: {e}"))?;
    rt.block_on(async {
        let mut client = reqwest::Client::builder().timeout(TIMEOUT).redirect(reqwest::redirect::Policy::none());
        if direct(&url) {
            client = client.no_proxy();
        }
        let client = client.build().map_err(|e| format!("starting the HTTP client: {e}"))?;
        let resp = client
            .post(url)
            .bearer_auth(token)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(CHANNEL_HEADER, &post.verb)
            .body(payload)
            .send()
            .await
            .map_err(|e| format!("could not reach {where_}: {}", root_cause(&e)))?;
        let status = resp.status();
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("{where_} answered {status}"))
        }
    })
}

/// The innermost error's text ("Connection refused", "operation timed out", …): reqwest's
/// own message ("error sending request") says nothing about why.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// Entry point of the `--post` form: always 0 (what was not delivered is on stderr).
pub fn main(args: &[String]) -> i32 {
    let result = (|| {
        let post = parse_args(args)?;
        let token = std::env::var(TOKEN_ENV).unwrap_or_default();
        if token.trim().is_empty() {
            return Err(format!("{TOKEN_ENV} is not set (the run's hook token)"));
        }
        let payload = super::read_stdin()?;
        super::check_payload(&payload)?;
        send(&post, token.trim(), payload)
    })();
    match result {
        Ok(()) => 0,
        Err(e) => {
            super::say(&format!("{e}; nothing delivered"));
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn only_write_verbs_loopback_http_or_https_and_no_credentials_on_argv() {
        let ok = parse_args(&args("dialog-spool --post http://127.0.0.1:9/hooks/r-1")).unwrap();
        assert_eq!(ok.verb, "dialog-spool");
        for good in [
            "blocked-marker --post https://lab.example/hooks/r-1",
            "session-info --post http://localhost:9/x",
            "dialog-spool --post http://[::1]:9/x",
        ] {
            assert!(parse_args(&args(good)).is_ok(), "{good}");
        }
        for (bad, why) in [
            ("dialog-spool --post http://10.0.0.2/x", "loopback"),
            ("dialog-spool --post http://u:p@127.0.0.1/x", "credentials"),
            ("dialog-spool --post ftp://127.0.0.1/x", "scheme"),
            ("dialog-spool --post nope", "not a URL"),
            ("dialog-clear --post https://h/x", "usage"),
            ("dialog-spool --post https://h/x extra", "usage"),
            ("dialog-spool --token t --post https://h/x", TOKEN_ENV),
            ("dialog-spool --post https://h/x --token=t", TOKEN_ENV),
        ] {
            let err = parse_args(&args(bad)).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
