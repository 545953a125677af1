//! JSON-RPC 2.0 over a byte stream, one message per line: what the Agent Client
//! Protocol runs on between lab and an agent's stdio. Requests lab sends wait for their
//! response by id; the agent's own requests and notifications come out of
//! [`Connection::incoming`] in order. A line that is not a JSON-RPC message is counted,
//! logged and skipped; the connection keeps going. The end of the stream (the agent
//! exited or closed stdout) fails every request still waiting.

use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

/// The longest line read from the agent (a file's text in a tool result can be large;
/// more than this is skipped as malformed, never held).
pub const MAX_LINE: usize = 16 << 20;

/// JSON-RPC's error codes lab sends.
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

/// A message the agent sent that is not a response to lab.
#[derive(Debug)]
pub enum Incoming {
    /// It waits for [`Connection::respond`] with this `id`.
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// [`Connection::fence`]'s mark: everything the agent sent before lab asked for it
    /// came out before it. The reader of the incoming messages fires it.
    Fence(oneshot::Sender<()>),
}

/// Why a request of lab's got no result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RpcError {
    /// The agent answered with a JSON-RPC error.
    #[error("the agent answered {method} with error {code}: {message}")]
    Remote { method: String, code: i64, message: String },
    /// The stream ended (the agent exited) before the response came.
    #[error("the agent closed the connection before answering {0}")]
    Closed(String),
    #[error("could not write to the agent: {0}")]
    Write(String),
}

type Waiters = Mutex<HashMap<i64, (String, oneshot::Sender<Result<Value, RpcError>>)>>;

/// One JSON-RPC connection. Cheap to share (`Arc`); writes take turns.
pub struct Connection {
    writer: tokio::sync::Mutex<Box<dyn AsyncWrite + Send + Unpin>>,
    next_id: AtomicI64,
    waiters: Arc<Waiters>,
    malformed: Arc<AtomicU64>,
    /// For fences (weak: the stream's end still ends the incoming messages).
    incoming: mpsc::WeakUnboundedSender<Incoming>,
}

/// What one line was, for the reader.
#[derive(Debug)]
pub enum Parsed {
    Incoming(Incoming),
    Response {
        id: i64,
        result: Result<Value, (i64, String)>,
    },
    /// Not a JSON-RPC message lab can use, and why.
    Malformed(String),
}

/// Classify one line (pure).
pub fn parse_line(line: &[u8]) -> Parsed {
    let v: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => return Parsed::Malformed(format!("not JSON: {e}")),
    };
    let Some(obj) = v.as_object() else { return Parsed::Malformed("not a JSON object".into()) };
    let params = obj.get("params").cloned().unwrap_or(Value::Null);
    match (obj.get("method").and_then(Value::as_str), obj.get("id")) {
        (Some(m), Some(id)) if !id.is_null() => {
            Parsed::Incoming(Incoming::Request { id: id.clone(), method: m.to_string(), params })
        }
        (Some(m), _) => Parsed::Incoming(Incoming::Notification { method: m.to_string(), params }),
        (None, Some(id)) => {
            let Some(id) = id.as_i64() else {
                return Parsed::Malformed(format!("a response to an id lab never sent: {id}"));
            };
            if let Some(r) = obj.get("result") {
                Parsed::Response { id, result: Ok(r.clone()) }
            } else if let Some(e) = obj.get("error") {
                let code = e.get("code").and_then(Value::as_i64).unwrap_or(INTERNAL_ERROR);
                let message = e.get("message").and_then(Value::as_str).unwrap_or("(no message)").to_string();
                Parsed::Response { id, result: Err((code, message)) }
            } else {
                Parsed::Malformed("a response with neither result nor error".into())
            }
        }
        (None, None) => Parsed::Malformed("neither a method nor an id".into()),
    }
}

impl Connection {
    /// Start reading `reader` in its own task; the agent's requests and notifications
    /// come out of the returned receiver, which ends with the stream.
    pub fn start(
        reader: impl AsyncRead + Send + Unpin + 'static,
        writer: impl AsyncWrite + Send + Unpin + 'static,
        label: String,
    ) -> (Arc<Connection>, mpsc::UnboundedReceiver<Incoming>) {
        let waiters: Arc<Waiters> = Arc::default();
        let malformed = Arc::new(AtomicU64::new(0));
        let (tx, rx) = mpsc::unbounded_channel();
        let conn = Arc::new(Connection {
            writer: tokio::sync::Mutex::new(Box::new(writer)),
            next_id: AtomicI64::new(0),
            waiters: waiters.clone(),
            malformed: malformed.clone(),
            incoming: tx.downgrade(),
        });
        tokio::spawn(read_loop(BufReader::new(reader), tx, waiters, malformed, label));
        (conn, rx)
    }

    /// A mark placed after every message the agent has sent so far (a response lab
    /// already got included): it fires once the incoming messages before it were taken.
    /// `None` once the stream has ended.
    pub fn fence(&self) -> Option<oneshot::Receiver<()>> {
        let (tx, rx) = oneshot::channel();
        self.incoming.upgrade()?.send(Incoming::Fence(tx)).ok()?;
        Some(rx)
    }

    /// How many lines were not JSON-RPC messages lab could use.
    pub fn malformed(&self) -> u64 {
        self.malformed.load(Ordering::Relaxed)
    }

    /// Send a request and wait for its response (no deadline here: callers bound it).
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        self.waiters.lock().unwrap().insert(id, (method.to_string(), tx));
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if let Err(e) = self.write(&msg).await {
            self.waiters.lock().unwrap().remove(&id);
            return Err(e);
        }
        rx.await.unwrap_or_else(|_| Err(RpcError::Closed(method.to_string())))
    }

    pub async fn notify(&self, method: &str, params: Value) -> Result<(), RpcError> {
        self.write(&json!({"jsonrpc": "2.0", "method": method, "params": params})).await
    }

    /// Answer one of the agent's requests.
    pub async fn respond(&self, id: &Value, result: Result<Value, (i64, String)>) -> Result<(), RpcError> {
        let msg = match result {
            Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
            Err((code, message)) => json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        };
        self.write(&msg).await
    }

    async fn write(&self, msg: &Value) -> Result<(), RpcError> {
        let mut line = serde_json::to_vec(msg).map_err(|e| RpcError::Write(e.to_string()))?;
        line.push(b'\n');
        let mut w = self.writer.lock().await;
        w.write_all(&line).await.map_err(|e| RpcError::Write(e.to_string()))?;
        w.flush().await.map_err(|e| RpcError::Write(e.to_string()))
    }
}

async fn read_loop(
    mut reader: BufReader<impl AsyncRead + Unpin>,
    tx: mpsc::UnboundedSender<Incoming>,
    waiters: Arc<Waiters>,
    malformed: Arc<AtomicU64>,
    label: String,
) {
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = match (&mut reader).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut buf).await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(agent = %label, error = %e, "reading from the agent failed");
                break;
            }
        };
        if n == 0 {
            break;
        }
        if buf.len() > MAX_LINE {
            malformed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(agent = %label, "skipped a line from the agent longer than {MAX_LINE} bytes");
            // The rest of that line.
            let mut rest = Vec::new();
            loop {
                rest.clear();
                match (&mut reader).take(1 << 20).read_until(b'\n', &mut rest).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) if rest.ends_with(b"\n") => break,
                    Ok(_) => {}
                }
            }
            continue;
        }
        let line = buf.trim_ascii();
        if line.is_empty() {
            continue;
        }
        match parse_line(line) {
            Parsed::Incoming(m) => {
                let _ = tx.send(m);
            }
            Parsed::Response { id, result } => match waiters.lock().unwrap().remove(&id) {
                Some((method, w)) => {
                    let _ = w.send(result.map_err(|(code, message)| RpcError::Remote { method, code, message }));
                }
                None => {
                    malformed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(agent = %label, id, "the agent answered a request lab is not waiting for");
                }
            },
            Parsed::Malformed(why) => {
                malformed.fetch_add(1, Ordering::Relaxed);
                let shown: String = String::from_utf8_lossy(line).chars().take(200).collect();
                tracing::warn!(agent = %label, %why, line = %shown, "skipped a line from the agent that is not JSON-RPC");
            }
        }
    }
    for (_, (method, w)) in waiters.lock().unwrap().drain() {
        let _ = w.send(Err(RpcError::Closed(method)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_told_apart() {
        let p = |s: &str| parse_line(s.as_bytes());
        assert!(matches!(p(r#"{"jsonrpc":"2.0","id":3,"method":"fs/read_text_file","params":{"path":"/a"}}"#),
            Parsed::Incoming(Incoming::Request { method, .. }) if method == "fs/read_text_file"));
        assert!(matches!(
            p(r#"{"jsonrpc":"2.0","method":"session/update","params":{}}"#),
            Parsed::Incoming(Incoming::Notification { .. })
        ));
        assert!(matches!(p(r#"{"jsonrpc":"2.0","id":1,"result":{"x":1}}"#),
            Parsed::Response { id: 1, result: Ok(v) } if v == json!({"x": 1})));
        assert!(matches!(p(r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"boom"}}"#),
            Parsed::Response { id: 2, result: Err((-32603, m)) } if m == "boom"));
        for bad in ["{not json", "[1,2]", r#"{"jsonrpc":"2.0"}"#, r#"{"id":1}"#, r#"{"id":"x","result":1}"#] {
            assert!(matches!(p(bad), Parsed::Malformed(_)), "{bad}");
        }
    }

    /// Requests get their own responses, whatever the order; garbage between them is
    /// skipped and counted; the end of the stream fails what still waits.
    #[tokio::test]
    async fn requests_meet_their_responses_and_garbage_is_skipped() {
        let (lab_side, agent_side) = tokio::io::duplex(1 << 16);
        let (lab_r, lab_w) = tokio::io::split(lab_side);
        let (agent_r, mut agent_w) = tokio::io::split(agent_side);
        let (conn, mut incoming) = Connection::start(lab_r, lab_w, "test".into());
        let c2 = conn.clone();
        let a = tokio::spawn(async move { c2.request("a", json!({})).await });
        let c3 = conn.clone();
        let b = tokio::spawn(async move { c3.request("b", json!({})).await });
        // Read both requests as the agent.
        let mut agent_r = BufReader::new(agent_r);
        let mut ids = HashMap::new();
        for _ in 0..2 {
            let mut l = String::new();
            agent_r.read_line(&mut l).await.unwrap();
            let v: Value = serde_json::from_str(&l).unwrap();
            ids.insert(v["method"].as_str().unwrap().to_string(), v["id"].as_i64().unwrap());
        }
        let out = format!(
            "garbage\n{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":\"B\"}}\n{{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":1}}\n{{\"jsonrpc\":\"2.0\",\"id\":{},\"error\":{{\"code\":-1,\"message\":\"no\"}}}}\n",
            ids["b"], ids["a"]
        );
        agent_w.write_all(out.as_bytes()).await.unwrap();
        assert_eq!(b.await.unwrap(), Ok(json!("B")));
        assert!(matches!(a.await.unwrap(), Err(RpcError::Remote { code: -1, .. })));
        assert!(
            matches!(incoming.recv().await, Some(Incoming::Notification { method, params }) if method == "n" && params == json!(1))
        );
        assert_eq!(conn.malformed(), 1);
        let fence = conn.fence().unwrap();
        match incoming.recv().await {
            Some(Incoming::Fence(f)) => f.send(()).unwrap(),
            other => panic!("{other:?}"),
        }
        fence.await.unwrap();
        let c4 = conn.clone();
        let waiting = tokio::spawn(async move { c4.request("never", json!({})).await });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        drop(agent_w);
        drop(agent_r);
        assert_eq!(waiting.await.unwrap(), Err(RpcError::Closed("never".into())));
        assert!(incoming.recv().await.is_none(), "the stream's end ends the incoming messages");
        assert!(conn.fence().is_none());
    }
}
