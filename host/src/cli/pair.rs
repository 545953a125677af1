//! `lab pair`: ask the running `lab serve` for a pairing code and print its link and QR
//! code (the pure parts are [`crate::edge::pairing`]).

use super::local_client::{post, post_control, serve_addr};
use crate::edge::pairing::{is_loopback_link, qr, rebase, terminal, PairBody};
use crate::store::paths::{resolve_home, Home};
use anyhow::{anyhow, bail};
use std::path::PathBuf;

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
    let token = crate::edge::token::read_token(&crate::edge::token::token_path(&home.root))?
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
