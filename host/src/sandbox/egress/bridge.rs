//! The bridge, inside the jail: a TCP listener on the jail's own loopback
//! ([`crate::sandbox::BRIDGE_PORT`], where the agent's proxy variables point) whose
//! every connection is joined to the proxy's Unix socket, bound into the jail. The
//! jail has no other way out: its network namespace has nothing but loopback.
//!
//! One request stays inside: one for a loopback address where something in the jail
//! listens (an agent's own local server — OpenCode's SDK calls its own on
//! `127.0.0.1:4096` — which the proxy variables would otherwise send out, to be
//! refused). The jail's loopback is its own network namespace's: nothing outside is
//! reached that way, so it is not egress and not in the ledger. A loopback port where
//! nothing in the jail listens goes to the proxy like any destination (the allowlist
//! decides whether this machine's own is reached).

use super::proxy::{last_on_connection, parse_head, read_head, HEAD_TIMEOUT};
use super::Dest;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

/// How long connecting to a listener in the jail may take.
const LOCAL_CONNECT: Duration = Duration::from_secs(2);

/// Listen on the jail's loopback and join each connection to `socket`, on a thread of
/// its own; an error if the port cannot be had.
pub fn start(socket: PathBuf, port: u16) -> std::io::Result<std::thread::JoinHandle<()>> {
    Ok(serve(TcpListener::bind(("127.0.0.1", port))?, socket))
}

/// Join each connection `listener` accepts to `socket` (or, for a listener in the jail,
/// to it: [`in_jail`]).
pub fn serve(listener: TcpListener, socket: PathBuf) -> std::thread::JoinHandle<()> {
    let own = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let socket = socket.clone();
            std::thread::spawn(move || handle(conn, &socket, own));
        }
    })
}

fn handle(mut conn: TcpStream, socket: &std::path::Path, own: u16) {
    let _ = conn.set_read_timeout(Some(HEAD_TIMEOUT));
    let Ok((head, rest)) = read_head(&mut conn) else {
        let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return;
    };
    let _ = conn.set_read_timeout(None);
    if let Ok(ask) = parse_head(&head) {
        if let Some(mut local) = in_jail(&ask.dest, own) {
            let sent = match ask.tunnel {
                true => conn.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n"),
                false => local.write_all(&last_on_connection(&ask.head)),
            };
            if sent.and_then(|()| local.write_all(&rest)).is_ok() {
                // One plain request per connection, as through the proxy.
                super::proxy::pipe(conn, local, !ask.tunnel);
            }
            return;
        }
    }
    match UnixStream::connect(socket) {
        Ok(mut up) => {
            if up.write_all(&head).and_then(|()| up.write_all(&rest)).is_ok() {
                super::proxy::pipe(up, conn, false);
            }
        }
        Err(e) => eprintln!("lab: the egress proxy is not there ({e})"),
    }
}

/// A connection to `d` inside the jail, if it is a loopback address (or `localhost`)
/// where something in the jail listens — never the bridge's own port.
pub fn in_jail(d: &Dest, own: u16) -> Option<TcpStream> {
    let ip = match d.host.as_str() {
        "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
        h => h.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().ok()?,
    };
    if !ip.is_loopback() || d.port == own || d.port == 0 {
        return None;
    }
    let ip = match ip {
        IpAddr::V6(v6) if v6 == Ipv6Addr::LOCALHOST => ip,
        IpAddr::V6(_) => return None,
        v4 => v4,
    };
    TcpStream::connect_timeout(&SocketAddr::new(ip, d.port), LOCAL_CONNECT).ok()
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    /// A loopback server: answers each connection's first request with `body`.
    fn server(body: &'static str) -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(mut c) = c else { continue };
                let mut b = [0u8; 1024];
                let _ = c.read(&mut b);
                let _ = write!(c, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
            }
        });
        port
    }

    /// A request to a loopback port where something listens (here: in the same network
    /// namespace, as an agent's own server in its jail) is answered there, never asked
    /// of the proxy; one where nothing listens, and any other destination, go to the
    /// proxy, head and all.
    #[test]
    fn a_loopback_listener_in_the_jail_is_reached_there_and_the_rest_goes_to_the_proxy() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("s.sock");
        let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let seen = asked.clone();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(mut c) = c else { continue };
                let (head, _) = super::read_head(&mut c).unwrap();
                seen.lock().unwrap().push(String::from_utf8_lossy(&head).lines().next().unwrap_or("").to_string());
                let _ = c.write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 7\r\n\r\nrefused");
            }
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let bridge = listener.local_addr().unwrap().port();
        super::serve(listener, sock);
        let own = server("own-server");
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let ask = |req: String| {
            let mut c = std::net::TcpStream::connect(("127.0.0.1", bridge)).unwrap();
            c.set_read_timeout(Some(std::time::Duration::from_secs(20))).unwrap();
            c.write_all(req.as_bytes()).unwrap();
            let mut out = String::new();
            let _ = c.read_to_string(&mut out);
            out
        };
        let plain = ask(format!("GET http://127.0.0.1:{own}/x HTTP/1.1\r\nHost: 127.0.0.1:{own}\r\n\r\n"));
        assert!(plain.ends_with("own-server"), "{plain}");
        let named = ask(format!("GET http://localhost:{own}/x HTTP/1.1\r\nHost: localhost:{own}\r\n\r\n"));
        assert!(named.ends_with("own-server"), "{named}");
        let tunnel = {
            let mut c = std::net::TcpStream::connect(("127.0.0.1", bridge)).unwrap();
            c.set_read_timeout(Some(std::time::Duration::from_secs(20))).unwrap();
            c.write_all(format!("CONNECT 127.0.0.1:{own} HTTP/1.1\r\n\r\n").as_bytes()).unwrap();
            let mut b = [0u8; 39];
            c.read_exact(&mut b).unwrap();
            c.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
            let mut out = String::new();
            let _ = c.read_to_string(&mut out);
            out
        };
        assert!(tunnel.ends_with("own-server"), "{tunnel}");
        assert!(asked.lock().unwrap().is_empty(), "nothing in the jail was asked of the proxy");
        for (req, line) in [
            (
                format!("GET http://127.0.0.1:{free}/ HTTP/1.1\r\n\r\n"),
                format!("GET http://127.0.0.1:{free}/ HTTP/1.1"),
            ),
            ("CONNECT example.com:443 HTTP/1.1\r\n\r\n".to_string(), "CONNECT example.com:443 HTTP/1.1".to_string()),
            (format!("CONNECT 127.0.0.1:{bridge} HTTP/1.1\r\n\r\n"), format!("CONNECT 127.0.0.1:{bridge} HTTP/1.1")),
        ] {
            assert!(ask(req).ends_with("refused"), "{line}");
            assert!(asked.lock().unwrap().contains(&line), "{line} went to the proxy");
        }
    }

    #[test]
    fn the_bridge_joins_a_tcp_connection_to_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("s.sock");
        let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let head = "CONNECT example.com:443 HTTP/1.1\r\n\r\n";
        std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut b = vec![0u8; head.len() + 5];
            c.read_exact(&mut b).unwrap();
            assert_eq!(&b[..head.len()], head.as_bytes(), "the head as the agent sent it");
            c.write_all(&b[head.len()..].to_ascii_uppercase()).unwrap();
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        super::serve(listener, sock);
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(20))).unwrap();
        c.write_all(format!("{head}hello").as_bytes()).unwrap();
        let mut b = [0u8; 5];
        c.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"HELLO");
    }
}
