//! The proxy trap: a loopback listener that every request codex sends through a proxy
//! reaches (the tests point `HTTP(S)_PROXY` at it). It records each connection's first
//! line and answers 403, so nothing leaves the machine and the tests can say what codex
//! tried to reach.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct ProxyTrap {
    pub port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl ProxyTrap {
    pub fn start() -> ProxyTrap {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind the proxy trap on loopback");
        let port = l.local_addr().expect("the trap's address").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut c) = conn else { continue };
                let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 512];
                let n = c.read(&mut buf).unwrap_or(0);
                let first = String::from_utf8_lossy(&buf[..n]).lines().next().unwrap_or("").to_string();
                s.lock().unwrap().push(first);
                let _ = c.write_all(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            }
        });
        ProxyTrap { port, seen }
    }

    /// `http://127.0.0.1:<port>`, for the proxy variables.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The first line of every request that reached the trap, in order.
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}
