//! Which requests may reach lab at all: the Host, Origin, Sec-Fetch-Site and
//! Content-Type rules that keep web pages (DNS rebinding, cross-origin form posts) away
//! from the API. The decision is [`check`], a pure function; `http.rs` applies it to
//! every request before routing.

use std::net::{IpAddr, SocketAddr};

/// The largest request body lab reads (the message text limit, JSON-escaped, fits).
pub const BODY_LIMIT: usize = 1024 * 1024;

/// Where lab listens and what the operator allowed on top of the defaults.
#[derive(Debug, Clone)]
pub struct Policy {
    pub bound: SocketAddr,
    /// `name` or `name:port` (lowercase): extra acceptable `Host` values.
    pub allowed_hosts: Vec<String>,
    /// `scheme://host[:port]`: extra acceptable `Origin` values.
    pub allowed_origins: Vec<String>,
}

/// What [`check`] looks at. Header values that are not visible ASCII are `Err(())`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Facts<'a> {
    pub method: &'a str,
    /// Every `Host` value (the request target's authority counts as one for HTTP/2).
    pub hosts: &'a [&'a str],
    pub origins: &'a [&'a str],
    pub sec_fetch_site: Option<&'a str>,
    pub content_type: Option<&'a str>,
    pub content_length: Option<&'a str>,
}

/// Why a request is refused; [`Refusal::status`] and [`Refusal::code`] make the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    HostNotAllowed(String),
    OriginNotAllowed(String),
    UnsupportedMediaType(String),
    PayloadTooLarge,
}

impl Refusal {
    pub fn status(&self) -> u16 {
        match self {
            Refusal::HostNotAllowed(_) => 421,
            Refusal::OriginNotAllowed(_) => 403,
            Refusal::UnsupportedMediaType(_) => 415,
            Refusal::PayloadTooLarge => 413,
        }
    }
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::HostNotAllowed(_) => "host_not_allowed",
            Refusal::OriginNotAllowed(_) => "origin_not_allowed",
            Refusal::UnsupportedMediaType(_) => "unsupported_media_type",
            Refusal::PayloadTooLarge => "payload_too_large",
        }
    }
    pub fn message(&self) -> String {
        match self {
            Refusal::HostNotAllowed(why) | Refusal::OriginNotAllowed(why) | Refusal::UnsupportedMediaType(why) => {
                why.clone()
            }
            Refusal::PayloadTooLarge => format!("the request body is larger than {BODY_LIMIT} bytes"),
        }
    }
}

/// A `host[:port]` authority, lowercased, without a trailing dot on names.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Authority {
    host: Host,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    Ip(IpAddr),
    Name(String),
}

fn parse_authority(s: &str) -> Option<Authority> {
    let s = s.trim();
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        let ip: std::net::Ipv6Addr = v6.parse().ok()?;
        (Host::Ip(IpAddr::V6(ip)), after)
    } else {
        let (name, after) = match s.find(':') {
            Some(i) => (&s[..i], &s[i..]),
            None => (s, ""),
        };
        let name = name.to_ascii_lowercase();
        let name = name.strip_suffix('.').unwrap_or(&name).to_string();
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_') {
            return None;
        }
        match name.parse::<std::net::Ipv4Addr>() {
            Ok(ip) => (Host::Ip(IpAddr::V4(ip)), after),
            Err(_) => (Host::Name(name), after),
        }
    };
    let port = match port {
        "" => None,
        p => {
            let digits = p.strip_prefix(':')?;
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some(digits.parse().ok()?)
        }
    };
    Some(Authority { host, port })
}

/// `scheme://authority` of an Origin or an allowed origin; only http and https.
fn parse_origin(s: &str) -> Option<(String, Authority)> {
    let s = s.trim();
    let (scheme, rest) = s.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains(['/', '?', '#', '@']) {
        return None;
    }
    let mut a = parse_authority(rest)?;
    let default = if scheme == "https" { 443 } else { 80 };
    a.port = Some(a.port.unwrap_or(default));
    Some((scheme, a))
}

/// Check a `--allowed-host` / `allowed_hosts` entry: `name`, `name:port` or an IP.
pub fn valid_host_entry(entry: &str) -> bool {
    parse_authority(entry).is_some()
}

/// Check a `--allowed-origin` / `allowed_origins` entry: `http[s]://host[:port]`.
pub fn valid_origin_entry(entry: &str) -> bool {
    parse_origin(entry).is_some()
}

/// Is `host` (a Host header value) one lab answers to?
pub fn host_allowed(policy: &Policy, host: &str) -> bool {
    let Some(a) = parse_authority(host) else { return false };
    let by_config = policy
        .allowed_hosts
        .iter()
        .filter_map(|h| parse_authority(h))
        .any(|allowed| allowed.host == a.host && (allowed.port.is_none() || allowed.port == a.port));
    by_config
        || match &a.host {
            Host::Name(n) => n == "localhost" || n.ends_with(".localhost"),
            Host::Ip(ip) => {
                let ip = ip.to_canonical();
                let bound = policy.bound.ip().to_canonical();
                // Rebinding needs a name, so any IP literal is fine once lab listens everywhere.
                ip.is_loopback() || ip == bound || bound.is_unspecified()
            }
        }
}

/// Is `origin` lab's own origin for a request that came with (allowed) `host`, or one
/// the operator allowed?
pub fn origin_allowed(policy: &Policy, host: &str, origin: &str) -> bool {
    configured_origin(policy, origin) || own_origin(host, origin)
}

/// Is `origin` one the operator allowed (`--allowed-origin`)?
pub fn configured_origin(policy: &Policy, origin: &str) -> bool {
    let Some(o) = parse_origin(origin) else { return false };
    policy.allowed_origins.iter().filter_map(|a| parse_origin(a)).any(|a| a == o)
}

fn own_origin(host: &str, origin: &str) -> bool {
    let (Some((scheme, o)), Some(h)) = (parse_origin(origin), parse_authority(host)) else { return false };
    let default = if scheme == "https" { 443 } else { 80 };
    o.host == h.host && o.port == Some(h.port.unwrap_or(default))
}

/// Does the method change anything (and so need a JSON body type)?
fn state_changing(method: &str) -> bool {
    !matches!(method, "GET" | "HEAD" | "OPTIONS")
}

fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json")
}

/// The whole decision, in order: Host (421), Origin and Sec-Fetch-Site (403), then for
/// state-changing methods the JSON content type (415), then the declared body size (413).
pub fn check(policy: &Policy, f: &Facts<'_>) -> Result<(), Refusal> {
    let host = match f.hosts {
        [h] => *h,
        [] => return Err(Refusal::HostNotAllowed("the request has no Host".into())),
        _ => return Err(Refusal::HostNotAllowed("the request has more than one Host".into())),
    };
    if !host_allowed(policy, host) {
        return Err(Refusal::HostNotAllowed(format!(
            "lab does not answer to Host {host:?}: use its address (127.0.0.1, localhost) or start it with --allowed-host"
        )));
    }
    let origin = match f.origins {
        [] => None,
        [o] => Some(*o),
        _ => return Err(Refusal::OriginNotAllowed("the request has more than one Origin".into())),
    };
    if let Some(o) = origin {
        if !origin_allowed(policy, host, o) {
            return Err(Refusal::OriginNotAllowed(format!(
                "requests from origin {o:?} are refused: only lab's own pages (or --allowed-origin) may call it"
            )));
        }
    }
    if let Some(site) = f.sec_fetch_site {
        let foreign = site.eq_ignore_ascii_case("cross-site") || site.eq_ignore_ascii_case("same-site");
        if foreign && !origin.is_some_and(|o| configured_origin(policy, o)) {
            return Err(Refusal::OriginNotAllowed(format!(
                "a {site} request is refused: open lab by its own address, not from another site"
            )));
        }
    }
    if state_changing(f.method) && !f.content_type.is_some_and(is_json) {
        return Err(Refusal::UnsupportedMediaType(format!(
            "a {} needs Content-Type: application/json (got {})",
            f.method,
            f.content_type.map(|c| format!("{c:?}")).unwrap_or_else(|| "none".into())
        )));
    }
    if let Some(len) = f.content_length {
        if len.trim().parse::<u64>().map_or(true, |n| n > BODY_LIMIT as u64) {
            return Err(Refusal::PayloadTooLarge);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(bound: &str) -> Policy {
        Policy { bound: bound.parse().unwrap(), allowed_hosts: vec![], allowed_origins: vec![] }
    }

    #[test]
    fn loopback_names_and_literals_are_accepted_and_foreign_names_are_not() {
        let p = policy("127.0.0.1:7777");
        for ok in [
            "127.0.0.1:7777",
            "127.0.0.1",
            "127.3.4.5:80",
            "localhost:7777",
            "LOCALHOST",
            "localhost.",
            "app.localhost:7777",
            "[::1]:7777",
            "[::1]",
            "[::ffff:127.0.0.1]:7777",
        ] {
            assert!(host_allowed(&p, ok), "{ok}");
        }
        for bad in [
            "evil.example:7777",
            "evil.example",
            "localhost.evil.example",
            "evillocalhost",
            "10.0.0.5:7777",
            "0.0.0.0:7777",
            "",
            "127.0.0.1:77x",
            "127.0.0.1:99999",
            "::1",
            "[::2]:7777",
            "local host",
            "user@localhost",
            "localhost:",
        ] {
            assert!(!host_allowed(&p, bad), "{bad:?}");
        }
    }

    #[test]
    fn bound_address_wildcard_and_configured_hosts() {
        let p = policy("192.168.1.5:7777");
        assert!(host_allowed(&p, "192.168.1.5:7777"));
        assert!(!host_allowed(&p, "192.168.1.6:7777"));
        let any = policy("0.0.0.0:7777");
        assert!(host_allowed(&any, "192.168.1.6:7777"), "an IP literal is fine when bound everywhere");
        assert!(host_allowed(&any, "[fe80::1]:7777"));
        assert!(!host_allowed(&any, "lab.example:7777"), "a name still needs --allowed-host");
        let mut named = any.clone();
        named.allowed_hosts = vec!["lab.example".into(), "other.example:8443".into()];
        assert!(host_allowed(&named, "lab.example:7777"));
        assert!(host_allowed(&named, "LAB.example"));
        assert!(host_allowed(&named, "other.example:8443"));
        assert!(!host_allowed(&named, "other.example:7777"), "a configured port must match");
        assert!(!host_allowed(&named, "sub.lab.example"));
    }

    #[test]
    fn only_labs_own_or_configured_origins() {
        let mut p = policy("127.0.0.1:7777");
        assert!(origin_allowed(&p, "127.0.0.1:7777", "http://127.0.0.1:7777"));
        assert!(origin_allowed(&p, "localhost:7777", "http://localhost:7777/"));
        assert!(origin_allowed(&p, "lab.example", "https://lab.example"), "behind an https proxy");
        assert!(origin_allowed(&p, "lab.example:443", "https://lab.example"));
        for bad in [
            "null",
            "http://127.0.0.1:7778",
            "http://localhost:7777",
            "http://evil.example",
            "file://",
            "ftp://127.0.0.1:7777",
            "http://127.0.0.1:7777/path",
            "",
        ] {
            assert!(!origin_allowed(&p, "127.0.0.1:7777", bad), "{bad:?}");
        }
        assert!(valid_origin_entry("https://ui.example") && !valid_origin_entry("ui.example"));
        assert!(valid_host_entry("ui.example:8443") && !valid_host_entry("https://ui.example"));
        p.allowed_origins = vec!["https://ui.example".into()];
        assert!(origin_allowed(&p, "127.0.0.1:7777", "https://ui.example:443"));
        assert!(!origin_allowed(&p, "127.0.0.1:7777", "http://ui.example"));
    }

    fn facts<'a>(method: &'a str, hosts: &'a [&'a str], origins: &'a [&'a str]) -> Facts<'a> {
        Facts { method, hosts, origins, ..Facts::default() }
    }

    #[test]
    fn the_decision_in_order() {
        let p = policy("127.0.0.1:7777");
        let own = ["127.0.0.1:7777"];
        assert_eq!(check(&p, &facts("GET", &own, &[])), Ok(()));
        assert_eq!(check(&p, &facts("GET", &[], &[])).unwrap_err().status(), 421);
        assert_eq!(check(&p, &facts("GET", &["evil.example:7777"], &[])).unwrap_err().code(), "host_not_allowed");
        assert_eq!(check(&p, &facts("GET", &["127.0.0.1:7777", "evil.example"], &[])).unwrap_err().status(), 421);
        assert_eq!(check(&p, &facts("GET", &own, &["http://evil.example"])).unwrap_err().code(), "origin_not_allowed");
        assert_eq!(check(&p, &facts("OPTIONS", &own, &["http://evil.example"])).unwrap_err().status(), 403);
        assert_eq!(check(&p, &facts("GET", &own, &["null"])).unwrap_err().status(), 403);
        let site = |s| Facts { sec_fetch_site: Some(s), ..facts("GET", &own, &[]) };
        assert_eq!(check(&p, &site("cross-site")).unwrap_err().status(), 403);
        assert_eq!(check(&p, &site("same-site")).unwrap_err().status(), 403);
        assert_eq!(check(&p, &site("same-origin")), Ok(()));
        assert_eq!(check(&p, &site("none")), Ok(()));

        let post =
            |ct: Option<&'static str>| Facts { content_type: ct, ..facts("POST", &own, &["http://127.0.0.1:7777"]) };
        assert_eq!(check(&p, &post(Some("application/json"))), Ok(()));
        assert_eq!(check(&p, &post(Some("Application/JSON; charset=utf-8"))), Ok(()));
        for ct in [None, Some("text/plain"), Some("application/x-www-form-urlencoded"), Some("multipart/form-data")] {
            assert_eq!(check(&p, &post(ct)).unwrap_err().code(), "unsupported_media_type", "{ct:?}");
        }
        let big = Facts { content_length: Some("1048577"), ..post(Some("application/json")) };
        assert_eq!(check(&p, &big).unwrap_err().code(), "payload_too_large");
        let fits = Facts { content_length: Some("1048576"), ..post(Some("application/json")) };
        assert_eq!(check(&p, &fits), Ok(()));
        // A foreign Host is refused before anything else is looked at.
        let rebinding = Facts { content_type: Some("text/plain"), ..facts("POST", &["evil.example"], &[]) };
        assert_eq!(check(&p, &rebinding).unwrap_err().status(), 421);
    }
}
