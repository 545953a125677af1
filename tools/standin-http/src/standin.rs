//! A running stand-in, whatever API it stands in for: the server, what it has recorded
//! (its script and which turns are used, every request, what it emitted) and the waits
//! a test makes on that. A stand-in brings its API as an [`Api`].

use crate::{Consumed, Handler, HttpRequest, Response, Server, Watched};
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

/// What one stand-in adds to the core: its types and how it answers.
pub trait Api: Send + Sync + Sized + 'static {
    /// Its script (turns plus the replies outside them).
    type Script: Send + 'static;
    /// Its record of a request.
    type Request: Clone + Send + 'static;
    /// What it emitted that a test waits for (a tool call).
    type Emitted: Clone + Send + 'static;
    /// Anything else it keeps with the record (a log file).
    type Extra: Send + 'static;
    /// The answer to one request, and how long to wait before sending it.
    fn handle(&self, req: &HttpRequest, core: &Core<Self>) -> (Response, Option<Duration>);
    /// The answer (a 400) to a request that could not be read.
    fn malformed(&self, error: &io::Error) -> Response;
    /// Headers every answer carries besides the standard ones (a request id).
    fn extra_headers(&self, _core: &Core<Self>) -> Vec<(&'static str, String)> {
        Vec::new()
    }
}

/// Everything a stand-in recorded, under one lock.
pub struct Recorded<A: Api> {
    pub script: A::Script,
    /// Which of the script's turns are used up.
    pub consumed: Consumed,
    pub requests: Vec<A::Request>,
    pub emitted: Vec<A::Emitted>,
    pub extra: A::Extra,
}

/// What an [`Api`] answers with: the record, when the stand-in started, fresh numbers.
pub struct Core<A: Api> {
    pub state: Watched<Recorded<A>>,
    pub started: Instant,
    ids: AtomicU64,
}

impl<A: Api> Core<A> {
    /// 1, 2, 3, … (for ids that only need to be unique per stand-in).
    pub fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::SeqCst) + 1
    }
}

struct Bound<A: Api> {
    api: A,
    core: Arc<Core<A>>,
}

impl<A: Api> Handler for Bound<A> {
    fn handle(&self, req: &HttpRequest) -> (Response, Option<Duration>) {
        self.api.handle(req, &self.core)
    }
    fn malformed(&self, error: &io::Error) -> Response {
        self.api.malformed(error)
    }
    fn extra_headers(&self) -> Vec<(&'static str, String)> {
        self.api.extra_headers(&self.core)
    }
}

/// A running stand-in. Dropping it (or [`Standin::shutdown`]) stops the server and
/// closes its connections.
pub struct Standin<A: Api> {
    server: Server,
    core: Arc<Core<A>>,
}

impl<A: Api> Standin<A> {
    /// Serve `api` with `script` (of `turns` turns) on `addr`, which must resolve to
    /// loopback addresses only. `name` names the threads.
    pub fn start(
        addr: impl ToSocketAddrs,
        name: &str,
        api: A,
        script: A::Script,
        turns: usize,
        extra: A::Extra,
    ) -> io::Result<Self> {
        let recorded =
            Recorded { script, consumed: Consumed::new(turns), requests: Vec::new(), emitted: Vec::new(), extra };
        let core = Arc::new(Core { state: Watched::new(recorded), started: Instant::now(), ids: AtomicU64::new(0) });
        let server = Server::start(addr, name, Arc::new(Bound { api, core: core.clone() }))?;
        Ok(Standin { server, core })
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }
    pub fn port(&self) -> u16 {
        self.addr().port()
    }
    /// `http://127.0.0.1:PORT` (no path).
    pub fn origin(&self) -> String {
        self.server.origin()
    }

    pub fn lock(&self) -> MutexGuard<'_, Recorded<A>> {
        self.core.state.lock()
    }
    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<A::Request> {
        self.lock().requests.clone()
    }
    /// Everything emitted so far, in order.
    pub fn emitted(&self) -> Vec<A::Emitted> {
        self.lock().emitted.clone()
    }
    /// Indices of script turns not consumed yet.
    pub fn remaining_turns(&self) -> Vec<usize> {
        self.lock().consumed.remaining()
    }

    /// Blocks until `f` finds something in the record or `timeout` passes.
    pub fn wait_for<R>(&self, timeout: Duration, f: impl FnMut(&Recorded<A>) -> Option<R>) -> Option<R> {
        self.core.state.wait_for(timeout, f)
    }
    /// Blocks until `pred` holds for the recorded requests or `timeout` passes; returns
    /// whether it held.
    pub fn wait_until(&self, timeout: Duration, mut pred: impl FnMut(&[A::Request]) -> bool) -> bool {
        self.wait_for(timeout, |st| pred(&st.requests).then_some(())).is_some()
    }
    /// Waits for the `n`-th (0-based) thing emitted.
    pub fn wait_for_emitted(&self, n: usize, timeout: Duration) -> Option<A::Emitted> {
        self.wait_for(timeout, |st| st.emitted.get(n).cloned())
    }

    /// Stops accepting, closes open connections and joins the accept thread.
    pub fn shutdown(mut self) {
        self.server.stop();
    }
}
