//! The server core every stand-in runs on: bound to loopback only, serving loopback
//! peers only, one thread per keep-alive connection, every connection closed on stop.
//! A stand-in brings its API as a [`Handler`] and its recorded state as a [`Watched`].

use crate::{read_request, write_response, HttpRequest, Response};
use std::collections::HashMap;
use std::io::{self, BufReader};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// One stand-in's API.
pub trait Handler: Send + Sync + 'static {
    /// The answer to one request, and how long to wait before sending it.
    fn handle(&self, req: &HttpRequest) -> (Response, Option<Duration>);
    /// The answer (a 400) to a request that could not be read; the connection closes.
    fn malformed(&self, error: &io::Error) -> Response;
    /// Headers every answer carries besides the standard ones (a request id).
    fn extra_headers(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
}

/// Whether `ip` is a loopback address (127.0.0.0/8, ::1, or ::ffff:127.x.y.z).
/// The addresses a stand-in may serve on: loopback, and this side of the links of the
/// machines lab's tests make (host/tests/common/machine.rs: veth pairs into network
/// namespaces, 10.213.0.0/16). Such an address can only be bound where a test put it.
pub fn servable(ip: IpAddr) -> bool {
    is_loopback(ip) || matches!(ip, IpAddr::V4(v4) if v4.octets()[..2] == [10, 213])
}

pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

struct Core {
    stopping: AtomicBool,
    next_conn: AtomicU64,
    conns: Mutex<HashMap<u64, TcpStream>>,
}

/// A running server. Dropping it (or [`Server::stop`]) stops accepting, closes its
/// connections and joins the accept thread.
pub struct Server {
    addr: SocketAddr,
    core: Arc<Core>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// Serve `handler` on `addr`, which must resolve to [`servable`] addresses only. `name`
    /// names the threads.
    pub fn start(addr: impl ToSocketAddrs, name: &str, handler: Arc<dyn Handler>) -> io::Result<Server> {
        let addrs: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
        if addrs.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "address resolves to nothing"));
        }
        if let Some(bad) = addrs.iter().find(|a| !servable(a.ip())) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "refusing non-loopback address {bad}: the stand-in serves on 127.0.0.0/8 or ::1 only \
                     (or a test machine's link, 10.213.0.0/16)"
                ),
            ));
        }
        let listener = TcpListener::bind(&addrs[..])?;
        let addr = listener.local_addr()?;
        let core =
            Arc::new(Core { stopping: AtomicBool::new(false), next_conn: AtomicU64::new(0), conns: Mutex::default() });
        let (c, name) = (core.clone(), name.to_string());
        let accept = thread::Builder::new()
            .name(format!("{name}-accept"))
            .spawn(move || accept_loop(listener, c, handler, &name))?;
        Ok(Server { addr, core, accept: Some(accept) })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (no path).
    pub fn origin(&self) -> String {
        match self.addr {
            SocketAddr::V4(a) => format!("http://{}:{}", a.ip(), a.port()),
            SocketAddr::V6(a) => format!("http://[{}]:{}", a.ip(), a.port()),
        }
    }

    /// Stop accepting, close open connections and join the accept thread (once).
    pub fn stop(&mut self) {
        if self.core.stopping.swap(true, Ordering::SeqCst) {
            return;
        }
        // Wake the accept loop, and wait for it — unless it cannot be woken (its address
        // went away with a test machine's link): then it is left blocked, not waited on.
        let woken = TcpStream::connect_timeout(&self.addr, Duration::from_millis(500)).is_ok();
        if let Some(h) = self.accept.take().filter(|_| woken) {
            let _ = h.join();
        }
        let conns: Vec<TcpStream> = self.core.conns.lock().unwrap().drain().map(|(_, s)| s).collect();
        for c in conns {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(listener: TcpListener, core: Arc<Core>, handler: Arc<dyn Handler>, name: &str) {
    for conn in listener.incoming() {
        if core.stopping.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = conn else { continue };
        // Defence in depth: only loopback peers (and test machines' ends of their links)
        // are served.
        match stream.peer_addr() {
            Ok(peer) if servable(peer.ip()) => {}
            _ => {
                let _ = stream.shutdown(Shutdown::Both);
                continue;
            }
        }
        let id = core.next_conn.fetch_add(1, Ordering::SeqCst);
        if let Ok(clone) = stream.try_clone() {
            core.conns.lock().unwrap().insert(id, clone);
        }
        let (c, h) = (core.clone(), handler.clone());
        let _ = thread::Builder::new().name(format!("{name}-conn-{id}")).spawn(move || {
            let _ = serve_connection(stream, &c, h.as_ref());
            c.conns.lock().unwrap().remove(&id);
        });
    }
}

fn serve_connection(stream: TcpStream, core: &Core, handler: &dyn Handler) -> io::Result<()> {
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        if core.stopping.load(Ordering::SeqCst) {
            return Ok(());
        }
        let req = match read_request(&mut reader, &mut writer) {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                let _ = send(&mut writer, handler, &handler.malformed(&e), true, false);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let close = req.wants_close();
        let (resp, delay) = handler.handle(&req);
        if let Some(d) = delay {
            thread::sleep(d);
        }
        send(&mut writer, handler, &resp, close, req.method == "HEAD")?;
        if close {
            let _ = writer.shutdown(Shutdown::Both);
            return Ok(());
        }
    }
}

fn send(w: &mut TcpStream, handler: &dyn Handler, resp: &Response, close: bool, head_only: bool) -> io::Result<()> {
    let extra = handler.extra_headers();
    let extra: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (*k, v.as_str())).collect();
    write_response(w, resp, &extra, close, head_only)
}

/// A stand-in's recorded state, with a wait for what a test expects of it.
pub struct Watched<T> {
    state: Mutex<T>,
    changed: Condvar,
}

impl<T> Watched<T> {
    pub fn new(state: T) -> Self {
        Watched { state: Mutex::new(state), changed: Condvar::new() }
    }

    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.state.lock().unwrap()
    }

    /// Wake every [`Watched::wait_for`] (after a change).
    pub fn notify(&self) {
        self.changed.notify_all();
    }

    /// Blocks until `f` finds something in the state or `timeout` passes.
    pub fn wait_for<R>(&self, timeout: Duration, mut f: impl FnMut(&T) -> Option<R>) -> Option<R> {
        let deadline = Instant::now() + timeout;
        let mut st = self.lock();
        loop {
            if let Some(r) = f(&st) {
                return Some(r);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            st = self.changed.wait_timeout(st, deadline - now).unwrap().0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ResponseBody;
    use std::io::{Read, Write};

    struct Echo;
    impl Handler for Echo {
        fn handle(&self, req: &HttpRequest) -> (Response, Option<Duration>) {
            let body = format!("{} {}", req.method, req.target).into_bytes();
            (
                Response {
                    status: 200,
                    content_type: "text/plain",
                    body: ResponseBody::Full(body),
                    headers: Vec::new(),
                },
                None,
            )
        }
        fn malformed(&self, error: &io::Error) -> Response {
            Response {
                status: 400,
                content_type: "text/plain",
                body: ResponseBody::Full(error.to_string().into()),
                headers: Vec::new(),
            }
        }
        fn extra_headers(&self) -> Vec<(&'static str, String)> {
            vec![("request-id", "req_1".into())]
        }
    }

    fn connect(s: &Server) -> TcpStream {
        let c = TcpStream::connect(s.addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c
    }

    /// Read until `needle` has arrived (or EOF); what was read.
    fn read_until(c: &mut TcpStream, needle: &str) -> String {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&got).contains(needle) {
            match c.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&got).into_owned()
    }

    #[test]
    fn only_loopback_addresses_are_served() {
        for addr in ["0.0.0.0:0", "10.214.0.1:0", "192.168.1.1:0"] {
            let err = Server::start(addr, "t", Arc::new(Echo)).err().expect("refused");
            assert!(err.to_string().contains("refusing non-loopback address"), "{err}");
        }
        assert!(servable("10.213.4.1".parse().unwrap()));
        assert!(
            Server::start("[::1]:0", "t", Arc::new(Echo)).is_ok() || std::net::TcpListener::bind("[::1]:0").is_err()
        );
    }

    #[test]
    fn keeps_the_connection_answers_with_the_handler_s_headers_and_a_malformed_request_gets_its_400() {
        let s = Server::start("127.0.0.1:0", "t", Arc::new(Echo)).unwrap();
        assert!(s.origin().starts_with("http://127.0.0.1:"));
        let mut c = connect(&s);
        for path in ["/a", "/b"] {
            c.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes()).unwrap();
            let got = read_until(&mut c, &format!("GET {path}"));
            assert!(got.starts_with("HTTP/1.1 200 OK\r\n") && got.contains("request-id: req_1\r\n"), "{got}");
            assert!(got.contains("connection: keep-alive"), "{got}");
        }
        c.write_all(b"NONSENSE\r\n\r\n").unwrap();
        let got = read_until(&mut c, "\u{0}never");
        assert!(got.starts_with("HTTP/1.1 400 Bad Request\r\n") && got.contains("malformed request line"), "{got}");
    }

    #[test]
    fn stopping_closes_open_connections() {
        let mut s = Server::start("127.0.0.1:0", "t", Arc::new(Echo)).unwrap();
        let mut c = connect(&s);
        c.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        read_until(&mut c, "GET /");
        s.stop();
        let mut buf = [0u8; 16];
        assert_eq!(c.read(&mut buf).unwrap_or(0), 0, "the idle keep-alive connection is closed");
        assert!(TcpStream::connect_timeout(&s.addr(), Duration::from_millis(300)).is_err(), "no longer accepting");
        s.stop(); // twice is fine
    }

    #[test]
    fn a_wait_ends_on_what_it_waits_for_or_on_its_timeout() {
        let w = Arc::new(Watched::new(Vec::<u32>::new()));
        let started = Instant::now();
        assert_eq!(w.wait_for(Duration::from_millis(50), |v| v.first().copied()), None);
        assert!(started.elapsed() >= Duration::from_millis(50));
        let w2 = w.clone();
        let t = thread::spawn(move || {
            thread::sleep(Duration::from_millis(30));
            w2.lock().push(7);
            w2.notify();
        });
        assert_eq!(w.wait_for(Duration::from_secs(5), |v| v.first().copied()), Some(7));
        t.join().unwrap();
    }
}
