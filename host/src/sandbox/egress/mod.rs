//! Egress: where a jailed agent may connect. The allowlist (`host:port` entries, a host
//! may start with `*.` for its subdomains), the ledger of every destination reached and
//! refused (counted, with when last), the proxy that decides ([`proxy`]) and the bridge
//! inside the jail that is the agent's only way to it ([`bridge`]).

pub mod bridge;
pub mod proxy;

use serde::{Deserialize, Serialize};
use std::path::Path;

/// The most entries an allowlist has.
pub const MAX_ALLOW: usize = 256;
/// The most destinations a ledger keeps of each kind (reached, refused), each with its
/// own count; past it no entry is dropped: connections to any other destination are
/// counted together ([`Others`]), with the first [`OTHERS_SAMPLE`] of them named.
pub const MAX_LEDGER: usize = 256;
/// How many of the destinations past [`MAX_LEDGER`] are named.
pub const OTHERS_SAMPLE: usize = 8;

/// A destination: a host name or IP address (lower-case; an IPv6 one without brackets)
/// and a port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Dest {
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for Dest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// A host as a destination may name it: a DNS name (letters, digits, `-`, `.`) or an
/// IP address, lower-cased.
fn host_of(s: &str) -> Option<String> {
    let s = s.to_ascii_lowercase();
    if let Some(v6) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        return v6.parse::<std::net::Ipv6Addr>().ok().map(|a| a.to_string());
    }
    let name = !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    name.then_some(s)
}

impl Dest {
    /// `host:port` (`[v6]:port`), as a client names it; `default_port` when it names
    /// none (an absolute `http://host/` URL).
    pub fn parse(s: &str, default_port: Option<u16>) -> Result<Dest, String> {
        let (host, port) = match s.rsplit_once(':') {
            Some((h, p)) if !h.is_empty() && (!h.contains(':') || h.starts_with('[')) => {
                (h, p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| format!("{s:?}: a bad port"))?)
            }
            _ => (s, default_port.ok_or_else(|| format!("{s:?} names no port (host:port)"))?),
        };
        let host = host_of(host).ok_or_else(|| format!("{s:?}: {host:?} is not a host name or address"))?;
        Ok(Dest { host, port })
    }
}

/// One allowlist entry: `host:port`, or `*.domain:port` (any subdomain of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allow {
    pub host: String,
    pub wildcard: bool,
    pub port: u16,
}

impl Allow {
    pub fn parse(s: &str) -> Result<Allow, String> {
        let (wildcard, rest) = match s.strip_prefix("*.") {
            Some(r) => (true, r),
            None => (false, s),
        };
        let d = Dest::parse(rest.trim(), None)?;
        Ok(Allow { host: d.host, wildcard, port: d.port })
    }

    pub fn admits(&self, d: &Dest) -> bool {
        self.port == d.port
            && if self.wildcard {
                d.host.strip_suffix(self.host.as_str()).is_some_and(|p| p.len() > 1 && p.ends_with('.'))
            } else {
                d.host == self.host
            }
    }
}

impl std::fmt::Display for Allow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = Dest { host: self.host.clone(), port: self.port };
        if self.wildcard {
            write!(f, "*.{d}")
        } else {
            write!(f, "{d}")
        }
    }
}

/// A run's allowlist: checked entries, without repeats, in the order given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist(pub Vec<Allow>);

impl Allowlist {
    /// Every entry checked (the first bad one is the error), repeats dropped.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Allowlist, String> {
        if entries.len() > MAX_ALLOW {
            return Err(format!("an allowlist has at most {MAX_ALLOW} entries"));
        }
        let mut out: Vec<Allow> = Vec::new();
        for e in entries {
            let a = Allow::parse(e.as_ref())?;
            if !out.contains(&a) {
                out.push(a);
            }
        }
        Ok(Allowlist(out))
    }

    pub fn admits(&self, d: &Dest) -> bool {
        self.0.iter().any(|a| a.admits(d))
    }

    pub fn entries(&self) -> Vec<String> {
        self.0.iter().map(|a| a.to_string()).collect()
    }
}

/// The allowlist file lab serve writes and the proxy reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowFile {
    pub allow: Vec<String>,
}

/// Read a run's allowlist file (missing or bad: nothing is allowed).
pub fn read_allow(path: &Path) -> Allowlist {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice::<AllowFile>(&b).ok())
        .and_then(|f| Allowlist::parse(&f.allow).ok())
        .unwrap_or_default()
}

pub fn write_allow(path: &Path, list: &Allowlist) -> std::io::Result<()> {
    let doc = serde_json::to_vec_pretty(&AllowFile { allow: list.entries() }).map_err(std::io::Error::other)?;
    crate::store::fsutil::write_atomic(path, &doc, 0o600)
}

/// One destination in the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    pub host: String,
    pub port: u16,
    pub count: u64,
    /// When last (RFC 3339).
    pub last: String,
    /// Why it was refused, when not for being off the allowlist (a name that resolves
    /// to no public address): shown even while the allowlist admits it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// Connections to destinations past a full ledger, counted together.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Others {
    pub count: u64,
    /// The first of them (`host:port`).
    pub sample: Vec<String>,
    pub last: String,
}

/// Every destination a run's agent asked for, reached or refused, counted: a flood of
/// new names never pushes an earlier one out (see [`MAX_LEDGER`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    #[serde(default)]
    pub reached: Vec<Seen>,
    #[serde(default)]
    pub refused: Vec<Seen>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reached_others: Option<Others>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_others: Option<Others>,
}

impl Ledger {
    /// Count one connection to `d`, `allowed` or not, at `now`.
    pub fn count(&mut self, d: &Dest, allowed: bool, now: &str) {
        self.count_why(d, allowed, None, now)
    }

    /// Count one connection to `d` refused for `why` (not the allowlist), at `now`.
    pub fn refuse(&mut self, d: &Dest, why: &str, now: &str) {
        self.count_why(d, false, Some(why), now)
    }

    fn count_why(&mut self, d: &Dest, allowed: bool, why: Option<&str>, now: &str) {
        let (list, others) = if allowed {
            (&mut self.reached, &mut self.reached_others)
        } else {
            (&mut self.refused, &mut self.refused_others)
        };
        if let Some(s) = list.iter_mut().find(|s| s.host == d.host && s.port == d.port) {
            s.count += 1;
            s.last = now.to_string();
            s.why = why.map(str::to_string);
            return;
        }
        if list.len() < MAX_LEDGER {
            let why = why.map(str::to_string);
            list.push(Seen { host: d.host.clone(), port: d.port, count: 1, last: now.to_string(), why });
            return;
        }
        let o = others.get_or_insert_with(Others::default);
        o.count += 1;
        o.last = now.to_string();
        let name = d.to_string();
        if o.sample.len() < OTHERS_SAMPLE && !o.sample.contains(&name) {
            o.sample.push(name);
        }
    }

    /// Read a ledger file (missing or bad: empty). Only the proxy writes it.
    pub fn read(path: &Path) -> Ledger {
        std::fs::File::open(path)
            .ok()
            .and_then(|f| crate::store::fsutil::read_capped(f, 1 << 20).ok())
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }
}

/// A run's egress, as its view and body show it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EgressView {
    /// Its allowlist (`host:port`, `*.domain:port`).
    pub allow: Vec<String>,
    /// Destinations reached, counted.
    pub reached: Vec<Seen>,
    /// Destinations refused, counted: those since allowed are left out (the agent's
    /// retry will pass).
    pub refused: Vec<Seen>,
    /// Refused connections past a full ledger, counted together (absent: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused_others: Option<Others>,
}

impl EgressView {
    pub fn read(allow_file: &Path, ledger_file: &Path) -> EgressView {
        let list = read_allow(allow_file);
        let ledger = Ledger::read(ledger_file);
        let still_refused = |s: &Seen| s.why.is_some() || !list.admits(&Dest { host: s.host.clone(), port: s.port });
        EgressView {
            allow: list.entries(),
            refused: ledger.refused.into_iter().filter(still_refused).collect(),
            reached: ledger.reached,
            refused_others: ledger.refused_others,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Dest {
        Dest::parse(s, None).unwrap()
    }

    #[test]
    fn destinations_are_host_and_port() {
        assert_eq!(d("API.example.com:443"), Dest { host: "api.example.com".into(), port: 443 });
        assert_eq!(d("127.0.0.1:8080").to_string(), "127.0.0.1:8080");
        assert_eq!(d("[::1]:80"), Dest { host: "::1".into(), port: 80 });
        assert_eq!(d("[::1]:80").to_string(), "[::1]:80");
        assert_eq!(Dest::parse("example.com", Some(80)).unwrap().port, 80);
        for bad in
            ["example.com", "example.com:0", "example.com:x", ":80", "ex ample.com:80", "a..b:1", "-a.b:1", "[zz]:1"]
        {
            assert!(Dest::parse(bad, None).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_allowlist_admits_its_entries_and_subdomains_of_a_wildcard() {
        let l =
            Allowlist::parse(&["api.example.com:443", "*.pkg.dev:443", "127.0.0.1:9", "api.example.com:443"]).unwrap();
        assert_eq!(l.entries(), ["api.example.com:443", "*.pkg.dev:443", "127.0.0.1:9"]);
        assert!(l.admits(&d("api.example.com:443")));
        assert!(!l.admits(&d("api.example.com:80")), "the port counts");
        assert!(!l.admits(&d("evil-api.example.com:443")));
        assert!(l.admits(&d("npm.pkg.dev:443")) && l.admits(&d("a.b.pkg.dev:443")));
        assert!(!l.admits(&d("pkg.dev:443")), "a wildcard is subdomains only");
        assert!(!l.admits(&d("xpkg.dev:443")));
        assert!(l.admits(&d("127.0.0.1:9")) && !l.admits(&d("127.0.0.1:10")));
        assert!(Allowlist::parse(&["*:443"]).is_err());
        assert!(Allowlist::parse(&["example.com"]).unwrap_err().contains("names no port"));
        assert!(Allowlist::parse(&vec!["a.b:1"; MAX_ALLOW + 1]).is_err());
    }

    #[test]
    fn the_ledger_counts_each_destination_and_stays_bounded() {
        let mut l = Ledger::default();
        l.count(&d("a.b:1"), true, "t1");
        l.count(&d("a.b:1"), true, "t2");
        l.count(&d("c.d:2"), false, "t3");
        assert_eq!(l.reached, [Seen { host: "a.b".into(), port: 1, count: 2, last: "t2".into(), why: None }]);
        assert_eq!(l.refused[0].count, 1);
        for i in 0..(MAX_LEDGER as u16 + 10) {
            l.count(&Dest { host: "x.y".into(), port: i + 1 }, false, &format!("u{i:05}"));
        }
        assert_eq!(l.refused.len(), MAX_LEDGER);
        // The first refusal keeps its place and its count through the flood.
        assert_eq!(l.refused[0], Seen { host: "c.d".into(), port: 2, count: 1, last: "t3".into(), why: None });
        l.count(&d("c.d:2"), false, "t9");
        assert_eq!(l.refused[0].count, 2);
        let o = l.refused_others.clone().unwrap();
        assert_eq!(o.count, 11, "the rest counted together");
        assert_eq!(o.sample.len(), OTHERS_SAMPLE);
        assert!(l.reached_others.is_none());
    }

    #[test]
    fn the_allow_file_round_trips_and_a_bad_one_allows_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("allow.json");
        assert_eq!(read_allow(&p), Allowlist::default());
        let l = Allowlist::parse(&["a.b:1"]).unwrap();
        write_allow(&p, &l).unwrap();
        assert_eq!(read_allow(&p), l);
        std::fs::write(&p, br#"{"allow": ["not a host"]}"#).unwrap();
        assert_eq!(read_allow(&p), Allowlist::default());
    }
}
