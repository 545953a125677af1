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
