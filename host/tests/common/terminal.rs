//! A client of a run's live terminal (`GET /runs/{id}/terminal/stream`, a WebSocket),
//! as a browser's is: the pane's bytes collected, lab's messages kept, keys sent.

use serde_json::Value;
use std::net::TcpStream;
use std::time::{Duration, Instant};
use tungstenite::{Message, WebSocket};

pub struct TermStream {
    ws: WebSocket<TcpStream>,
    /// Every byte of the pane's output so far.
    pub screen: Vec<u8>,
    /// lab's JSON messages so far, in order.
    pub said: Vec<Value>,
    pub closed: bool,
}

impl TermStream {
    /// Open run `id`'s stream on lab at `url` with `token` (a bearer), and `extra`
    /// headers. `Err` with the HTTP status when refused.
    pub fn open(url: &str, token: Option<&str>, id: &str, extra: &[(&str, &str)]) -> Result<TermStream, u16> {
        let addr = url.strip_prefix("http://").unwrap();
        let ws_url = format!("ws://{addr}/runs/{id}/terminal/stream");
        let mut req = tungstenite::client::IntoClientRequest::into_client_request(ws_url.as_str()).unwrap();
        if let Some(t) = token {
            req.headers_mut().insert("authorization", format!("Bearer {t}").parse().unwrap());
        }
        for (k, v) in extra {
            let name = tungstenite::http::HeaderName::from_bytes(k.as_bytes()).unwrap();
            req.headers_mut().insert(name, v.parse().unwrap());
        }
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        // As a browser's: each key goes out at once (no Nagle wait on the last ACK).
        stream.set_nodelay(true).unwrap();
        match tungstenite::client::client(req, stream) {
            Ok((ws, _)) => Ok(TermStream { ws, screen: Vec::new(), said: Vec::new(), closed: false }),
            Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(r))) => Err(r.status().as_u16()),
            Err(e) => panic!("the stream's handshake: {e}"),
        }
    }

    /// Read what has come, for at most `for_at_most`; false once the stream closed.
    pub fn pump(&mut self, for_at_most: Duration) -> bool {
        let end = Instant::now() + for_at_most;
        while Instant::now() < end && !self.closed {
            match self.ws.read() {
                Ok(Message::Binary(b)) => self.screen.extend_from_slice(&b),
                Ok(Message::Text(t)) => self.said.push(serde_json::from_str(t.as_str()).unwrap()),
                Ok(Message::Close(_)) => self.closed = true,
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
                {
                    return true
                }
                Err(_) => self.closed = true,
            }
        }
        !self.closed
    }

    /// Read until `pred` holds of the screen's text (lossy), within `timeout`.
    pub fn wait_screen(&mut self, timeout: Duration, what: &str, pred: impl Fn(&str) -> bool) {
        let end = Instant::now() + timeout;
        loop {
            if pred(&String::from_utf8_lossy(&self.screen)) {
                return;
            }
            assert!(Instant::now() < end && !self.closed, "no {what} on the terminal's stream: {:?}", self.said);
            self.pump(Duration::from_millis(200));
        }
    }

    /// Read until lab says something `pred` holds of; that message.
    pub fn wait_said(&mut self, timeout: Duration, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let end = Instant::now() + timeout;
        loop {
            if let Some(v) = self.said.iter().find(|v| pred(v)) {
                return v.clone();
            }
            assert!(Instant::now() < end && !self.closed, "lab never said {what}: {:?}", self.said);
            self.pump(Duration::from_millis(200));
        }
    }

    pub fn send(&mut self, v: &Value) {
        self.ws.send(Message::Text(v.to_string().into())).unwrap();
    }

    pub fn close(mut self) {
        let _ = self.ws.close(None);
        let _ = self.pump(Duration::from_millis(500));
    }
}
