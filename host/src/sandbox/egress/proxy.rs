//! The egress proxy: an HTTP proxy on a Unix socket, outside the jail, run by `lab
//! agent-exec` for as long as the agent lives (so it outlives a restart of lab serve).
//! Each connection asks for one destination — `CONNECT host:port` (TLS, anything) or
//! an absolute `http://host[:port]/…` request — which is let through if the run's
//! allowlist (its file, read again whenever lab serve rewrote it) admits it, and
//! refused with a `403` that says why otherwise. A name is connected to only at a public
//! address it resolves to (the push client's rule: never loopback, the local network or
//! link-local, where a cloud's metadata service is), resolved once per connection; an
//! address the allowlist names literally (`127.0.0.1:8080`) is connected to as named.
//! Either way it is counted in the ledger file lab serve shows. What the agent sends
//! past the request head goes only to the destination let through; a plain request's
//! `Host` is the destination's.

use super::{read_allow, Allowlist, Dest, Ledger};
use crate::sandbox::EgressFiles;
use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The largest request head read.
pub const MAX_HEAD: usize = 16 * 1024;
/// How long a client has to send its request head.
pub(super) const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting to a destination may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The most connections open at once (past it: `503`).
pub const MAX_CONNECTIONS: usize = 256;

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
pub struct Ask {
    pub dest: Dest,
    /// `CONNECT`: a tunnel (answered `200` once open).
    pub tunnel: bool,
    /// The head to send on (a plain request's, in origin form, without `Proxy-*`
    /// headers); empty for a tunnel.
    pub head: Vec<u8>,
}

/// Read a request head: what it asks for, or why it is no proxy request.
pub fn parse_head(head: &[u8]) -> Result<Ask, String> {
    let text = std::str::from_utf8(head).map_err(|_| "the request head is not UTF-8".to_string())?;
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("a bad request line {first:?}"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(format!("not HTTP/1: {version:?}"));
    }
    if method == "CONNECT" {
        return Ok(Ask { dest: Dest::parse(target, None)?, tunnel: true, head: Vec::new() });
    }
    let rest = target
        .strip_prefix("http://")
        .ok_or_else(|| format!("{target:?} is not an absolute http:// URL (an https one goes through CONNECT)"))?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest[i..].starts_with('/') => (&rest[..i], &rest[i..]),
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.contains('@') {
        return Err("a URL with credentials".into());
    }
    let dest = Dest::parse(authority, Some(80))?;
    let path = if path.starts_with('?') { format!("/{path}") } else { path.to_string() };
    // The destination let through is the one its Host names (a server behind it may
    // route by Host: never another site than the one allowed).
    let mut out = format!("{method} {path} {version}\r\nHost: {authority}\r\n");
    for l in lines {
        let name = l.split(':').next().unwrap_or_default().trim().to_ascii_lowercase();
        if name == "proxy-connection" || name == "proxy-authorization" || name == "host" {
            continue;
        }
        out.push_str(l);
        out.push_str("\r\n");
    }
    // `lines` ended with the two empty strings after the final CRLF CRLF.
    let out = out.trim_end_matches("\r\n").to_string() + "\r\n\r\n";
    Ok(Ask { dest, tunnel: false, head: out.into_bytes() })
}

/// What identifies a version of the allowlist file: inode, modification time, size.
type Stamp = (u64, i64, i64, u64);

/// The proxy's state: its files, the allowlist as last read, the ledger.
pub struct Proxy {
    allow_path: PathBuf,
    ledger_path: PathBuf,
    allow: Mutex<(Option<Stamp>, Allowlist)>,
    ledger: Mutex<Ledger>,
    open: AtomicUsize,
}

impl Proxy {
    pub fn new(files: &EgressFiles) -> Arc<Proxy> {
        let ledger_path = PathBuf::from(&files.ledger);
        Arc::new(Proxy {
            allow_path: PathBuf::from(&files.allow),
            ledger: Mutex::new(Ledger::read(&ledger_path)),
            ledger_path,
            allow: Mutex::new((None, Allowlist::default())),
            open: AtomicUsize::new(0),
        })
    }

    /// The allowlist as its file says now (read again only when the file changed).
    fn allowlist(&self) -> Allowlist {
        let stamp = std::fs::metadata(&self.allow_path).ok().map(|m| (m.ino(), m.mtime(), m.mtime_nsec(), m.len()));
        let mut cur = self.allow.lock().unwrap();
        if stamp.is_none() || cur.0 != stamp {
            *cur = (stamp, read_allow(&self.allow_path));
        }
        cur.1.clone()
    }

    /// Where `d` may be reached (its allowlist, then its addresses: [`addresses`]);
    /// counted in the ledger (and its file) either way.
    fn verdict(&self, d: &Dest) -> Verdict {
        let listed = self.allowlist().admits(d);
        let verdict = if listed {
            addresses(d)
        } else {
            Verdict::Refused(format!(
                "this run may not reach {d} (it is not on the run's egress allowlist; the operator can allow it)"
            ))
        };
        let now = crate::util::time::now_rfc3339();
        let mut ledger = self.ledger.lock().unwrap();
        match &verdict {
            Verdict::Refused(_) if listed => ledger.refuse(d, "it resolves to no public address", &now),
            v => ledger.count(d, !matches!(v, Verdict::Refused(_)), &now),
        }
        match serde_json::to_vec(&*ledger) {
            Ok(doc) => {
                if let Err(e) = crate::store::fsutil::write_atomic_unsynced(&self.ledger_path, &doc, 0o600) {
                    eprintln!("lab agent-exec: cannot write the egress ledger: {e}");
                }
            }
            Err(e) => eprintln!("lab agent-exec: {e}"),
        }
        verdict
    }

    /// Serve `listener` on a thread of its own, each connection on its own.
    pub fn serve(self: &Arc<Self>, listener: UnixListener) -> std::thread::JoinHandle<()> {
        let me = self.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                if me.open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                    me.open.fetch_sub(1, Ordering::SeqCst);
                    let _ = reply(&conn, "503 Service Unavailable", "lab: too many connections at once\n");
                    continue;
                }
                let me = me.clone();
                std::thread::spawn(move || {
                    me.handle(conn);
                    me.open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        })
    }

    fn handle(&self, mut conn: UnixStream) {
        let _ = conn.set_read_timeout(Some(HEAD_TIMEOUT));
        let (head, rest) = match read_head(&mut conn) {
            Ok(h) => h,
            Err(why) => {
                let _ = reply(&conn, "400 Bad Request", &format!("lab: {why}\n"));
                return;
            }
        };
        let ask = match parse_head(&head) {
            Ok(a) => a,
            Err(why) => {
                let _ = reply(&conn, "400 Bad Request", &format!("lab: {why}\n"));
                return;
            }
        };
        let addrs = match self.verdict(&ask.dest) {
            Verdict::Go(addrs) => addrs,
            Verdict::Refused(why) => {
                let _ = reply(&conn, "403 Forbidden", &format!("lab: {why}\n"));
                return;
            }
            Verdict::Unreachable(why) => {
                let _ = reply(&conn, "502 Bad Gateway", &format!("lab: cannot reach {}: {why}\n", ask.dest));
                return;
            }
        };
        let upstream = match connect(&addrs) {
            Ok(s) => s,
            Err(e) => {
                let _ = reply(&conn, "502 Bad Gateway", &format!("lab: cannot reach {}: {e}\n", ask.dest));
                return;
            }
        };
        let _ = conn.set_read_timeout(None);
        let mut up = upstream;
        let sent = if ask.tunnel {
            conn.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        } else {
            // One request per connection: the next one may be for another destination,
            // and is asked for anew.
            up.write_all(&last_on_connection(&ask.head))
        };
        if sent.and_then(|_| up.write_all(&rest)).is_err() {
            return;
        }
        pipe(conn, up, !ask.tunnel);
    }
}

/// The head (through its blank line) and whatever came after it in the same reads.
pub(super) fn read_head(conn: &mut impl Read) -> Result<(Vec<u8>, Vec<u8>), String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(i + 4);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(format!("a head over {MAX_HEAD} bytes"));
        }
        match conn.read(&mut chunk) {
            Ok(0) => return Err("the connection closed before its head ended".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("reading the head: {e}")),
        }
    }
}

/// A request or response head made the last on its connection: `Connection: close`
/// in place of whatever it said of the connection.
pub fn last_on_connection(head: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(head);
    let mut out = String::with_capacity(text.len() + 20);
    for line in text.trim_end_matches("\r\n").split("\r\n") {
        let name = line.split(':').next().unwrap_or_default().trim().to_ascii_lowercase();
        if matches!(name.as_str(), "connection" | "keep-alive" | "proxy-connection") {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    out.into_bytes()
}

/// What the proxy does with an allowed destination's connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Connect to these.
    Go(Vec<SocketAddr>),
    /// Never (a `403`): why.
    Refused(String),
    /// Allowed, but it cannot be reached (a `502`): why.
    Unreachable(String),
}

/// Where an allowed destination is connected to: an address as named; a name at the
/// public addresses it resolves to now, never at one of this machine's or its
/// network's ([`crate::util::net::is_public`]: a name under an allowed wildcard that
/// resolves to 127.0.0.1, 10.0.0.0/8 or 169.254.169.254 is refused).
pub fn addresses(d: &Dest) -> Verdict {
    if let Ok(ip) = d.host.parse::<IpAddr>() {
        return Verdict::Go(vec![SocketAddr::new(ip, d.port)]);
    }
    let all: Vec<SocketAddr> = match (d.host.as_str(), d.port).to_socket_addrs() {
        Ok(a) => a.collect(),
        Err(e) => return Verdict::Unreachable(e.to_string()),
    };
    let public: Vec<SocketAddr> = all.iter().copied().filter(|a| crate::util::net::is_public(a.ip())).collect();
    match (public.is_empty(), all.is_empty()) {
        (false, _) => Verdict::Go(public),
        (true, true) => Verdict::Unreachable("the name has no address".into()),
        (true, false) => Verdict::Refused(format!(
            "{d} resolves to {}, not a public address: a name is reached only at public ones (put the address itself \
             on the run's allowlist to reach it there)",
            all.iter().map(|a| a.ip().to_string()).collect::<Vec<_>>().join(", ")
        )),
    }
}

fn connect(addrs: &[SocketAddr]) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::other("no address");
    for &addr in addrs {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn reply(mut conn: &UnixStream, status: &str, body: &str) -> std::io::Result<()> {
    let msg = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(msg.as_bytes())
}

/// A byte stream [`pipe`] joins: a socket it can clone and shut down.
pub(super) trait Stream: Read + Write + Send + Sized + 'static {
    fn dup(&self) -> std::io::Result<Self>;
    fn close(&self, how: Shutdown);
}

impl Stream for UnixStream {
    fn dup(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
    fn close(&self, how: Shutdown) {
        let _ = self.shutdown(how);
    }
}

impl Stream for TcpStream {
    fn dup(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
    fn close(&self, how: Shutdown) {
        let _ = self.shutdown(how);
    }
}

/// Copy both ways: the client's bytes up on a thread of its own, the destination's back
/// here (its response head first made the connection's last if `one_request`); once
/// the destination has ended, so does the client's connection.
pub(super) fn pipe(conn: impl Stream, up: impl Stream, one_request: bool) {
    let (Ok(mut conn_r), Ok(mut up_w)) = (conn.dup(), up.dup()) else { return };
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut conn_r, &mut up_w);
        up_w.close(Shutdown::Write);
    });
    let (mut up_r, mut conn_w) = (up, conn);
    if one_request {
        let Ok((head, after)) = read_head(&mut up_r) else {
            conn_w.close(Shutdown::Both);
            return;
        };
        if conn_w.write_all(&last_on_connection(&head)).and_then(|_| conn_w.write_all(&after)).is_err() {
            up_r.close(Shutdown::Both);
            return;
        }
    }
    let _ = std::io::copy(&mut up_r, &mut conn_w);
    conn_w.close(if one_request { Shutdown::Both } else { Shutdown::Write });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connect_asks_for_a_tunnel() {
        let a = parse_head(b"CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n").unwrap();
        assert_eq!(a, Ask { dest: Dest { host: "api.example.com".into(), port: 443 }, tunnel: true, head: vec![] });
    }

    #[test]
    fn a_plain_request_goes_on_in_origin_form_without_proxy_headers() {
        let a = parse_head(
            b"POST http://127.0.0.1:8080/v1/messages?beta=true HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: x\r\nContent-Length: 2\r\n\r\n",
        )
        .unwrap();
        assert_eq!(a.dest, Dest { host: "127.0.0.1".into(), port: 8080 });
        assert!(!a.tunnel);
        assert_eq!(
            String::from_utf8(a.head.clone()).unwrap(),
            "POST /v1/messages?beta=true HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 2\r\n\r\n"
        );
        assert_eq!(
            String::from_utf8(last_on_connection(
                b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nX: 1\r\n\r\n"
            ))
            .unwrap(),
            "HTTP/1.1 200 OK\r\nX: 1\r\nConnection: close\r\n\r\n"
        );
        let b = parse_head(b"GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n").unwrap();
        assert_eq!(b.dest.port, 80);
        assert!(b.head.starts_with(b"GET / HTTP/1.1\r\n"));
        // The Host the server sees is the destination let through, whatever the agent said.
        let c = parse_head(b"GET http://allowed.example/x HTTP/1.1\r\nHOST: other.example\r\nX: 1\r\n\r\n").unwrap();
        assert_eq!(String::from_utf8(c.head).unwrap(), "GET /x HTTP/1.1\r\nHost: allowed.example\r\nX: 1\r\n\r\n");
    }

    #[test]
    fn what_is_no_proxy_request_is_refused_with_why() {
        for (bad, why) in [
            (&b"GET /local HTTP/1.1\r\n\r\n"[..], "not an absolute"),
            (b"GET https://x.y/ HTTP/1.1\r\n\r\n", "CONNECT"),
            (b"GET http://u:p@x.y/ HTTP/1.1\r\n\r\n", "credentials"),
            (b"CONNECT x.y HTTP/1.1\r\n\r\n", "port"),
            (b"GET http://x.y/ SPDY/3\r\n\r\n", "HTTP/1"),
            (b"GET\r\n\r\n", "request line"),
        ] {
            let e = parse_head(bad).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }

    /// The proxy on a real socket: an allowed destination (a loopback server) is
    /// reached, another refused with 403, both counted; an allowlist rewritten by lab
    /// serve counts from the next connection.
    #[test]
    fn a_name_is_reached_only_at_a_public_address_and_an_address_as_named() {
        let d = |h: &str| Dest { host: h.into(), port: 80 };
        assert_eq!(addresses(&d("127.0.0.1")), Verdict::Go(vec!["127.0.0.1:80".parse().unwrap()]));
        assert_eq!(addresses(&d("169.254.169.254")), Verdict::Go(vec!["169.254.169.254:80".parse().unwrap()]));
        match addresses(&d("localhost")) {
            Verdict::Refused(why) => {
                assert!(why.contains("not a public address") && why.contains("127.0.0.1"), "{why}")
            }
            other => panic!("localhost is this machine's: {other:?}"),
        }
        assert!(matches!(addresses(&d("no-such-name.invalid")), Verdict::Unreachable(_)));
    }

    #[test]
    fn the_proxy_lets_through_its_allowlist_and_counts_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let files = EgressFiles {
            socket: dir.path().join("egress.sock").to_string_lossy().into(),
            allow: dir.path().join("allow.json").to_string_lossy().into(),
            ledger: dir.path().join("ledger.json").to_string_lossy().into(),
        };
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for c in server.incoming().take(2) {
                let mut c = c.unwrap();
                let mut b = [0u8; 1024];
                let n = c.read(&mut b).unwrap();
                let first = String::from_utf8_lossy(&b[..n]).lines().next().unwrap_or_default().to_string();
                let body = format!("saw {first}");
                let _ =
                    write!(c, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
            }
        });
        let proxy = Proxy::new(&files);
        super::super::write_allow(
            std::path::Path::new(&files.allow),
            &Allowlist::parse(&[format!("127.0.0.1:{port}")]).unwrap(),
        )
        .unwrap();
        proxy.serve(UnixListener::bind(&files.socket).unwrap());
        let ask = |req: String| {
            let mut c = UnixStream::connect(&files.socket).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            c.write_all(req.as_bytes()).unwrap();
            let mut out = String::new();
            c.read_to_string(&mut out).unwrap();
            out
        };
        let ok = ask(format!("GET http://127.0.0.1:{port}/hi HTTP/1.1\r\nHost: x\r\n\r\n"));
        assert!(ok.starts_with("HTTP/1.1 200") && ok.ends_with("saw GET /hi HTTP/1.1"), "{ok}");
        assert!(ok.contains("Connection: close\r\n") && !ok.contains("keep-alive"), "one request a connection: {ok}");
        let no = ask("GET http://127.0.0.1:9/x HTTP/1.1\r\nHost: x\r\n\r\n".into());
        assert!(no.starts_with("HTTP/1.1 403") && no.contains("127.0.0.1:9") && no.contains("allowlist"), "{no}");
        let l = Ledger::read(std::path::Path::new(&files.ledger));
        assert_eq!((l.reached[0].port, l.reached[0].count), (port, 1));
        assert_eq!((l.refused[0].host.as_str(), l.refused[0].port), ("127.0.0.1", 9));
        // Allowed from now on: the tunnel opens (and the server sees what comes next).
        super::super::write_allow(
            std::path::Path::new(&files.allow),
            &Allowlist::parse(&[format!("127.0.0.1:{port}"), "127.0.0.1:9".into()]).unwrap(),
        )
        .unwrap();
        let tunnel = ask(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\nGET /t HTTP/1.1\r\n\r\n"));
        assert!(tunnel.starts_with("HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.1 200 OK"), "{tunnel}");
        assert!(tunnel.ends_with("saw GET /t HTTP/1.1"), "{tunnel}");
        let again = ask("CONNECT 127.0.0.1:9 HTTP/1.1\r\n\r\n".into());
        assert!(!again.starts_with("HTTP/1.1 403"), "allowed now (port 9 refuses: 502): {again}");
        assert_eq!(Ledger::read(std::path::Path::new(&files.ledger)).reached.len(), 2);
    }
}
