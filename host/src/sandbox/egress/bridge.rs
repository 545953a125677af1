//! The bridge, inside the jail: a TCP listener on the jail's own loopback
//! ([`crate::sandbox::BRIDGE_PORT`], where the agent's proxy variables point) whose
//! every connection is joined to the proxy's Unix socket, bound into the jail. The
//! jail has no other way out: its network namespace has nothing but loopback.

use std::net::TcpListener;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

/// Listen on the jail's loopback and join each connection to `socket`, on a thread of
/// its own; an error if the port cannot be had.
pub fn start(socket: PathBuf, port: u16) -> std::io::Result<std::thread::JoinHandle<()>> {
    Ok(serve(TcpListener::bind(("127.0.0.1", port))?, socket))
}

/// Join each connection `listener` accepts to `socket`.
pub fn serve(listener: TcpListener, socket: PathBuf) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let socket = socket.clone();
            std::thread::spawn(move || match UnixStream::connect(&socket) {
                Ok(up) => super::proxy::pipe(up, conn, false),
                Err(e) => eprintln!("lab: the egress proxy is not there ({e})"),
            });
        }
    })
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    #[test]
    fn the_bridge_joins_a_tcp_connection_to_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("s.sock");
        let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut b = [0u8; 5];
            c.read_exact(&mut b).unwrap();
            c.write_all(&b.map(|x| x.to_ascii_uppercase())).unwrap();
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        super::serve(listener, sock);
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(20))).unwrap();
        c.write_all(b"hello").unwrap();
        let mut b = [0u8; 5];
        c.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"HELLO");
    }
}
