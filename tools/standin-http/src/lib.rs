//! The HTTP/1.1 server side the model-API stand-ins share (messages-standin for the
//! Anthropic Messages API, responses-standin for the OpenAI Responses API): just enough
//! for reqwest/hyper, Node's fetch and curl — keep-alive, `Expect: 100-continue`,
//! chunked request bodies, full responses and Server-Sent Events with chunked encoding.
//! Bounded: 64 KiB of headers, 64 MiB of body. [`Server`] is the core they run
//! on (loopback only), [`Watched`] their recorded state, [`Turn`] and [`Consumed`] their
//! scripts.

mod arrival;
mod script;
mod server;
mod standin;

pub use arrival::{json_body, Arrival};
pub use script::{read_json, Consumed, Turn};
use serde_json::{json, Value};
pub use server::{is_loopback, Handler, Server, Watched};
pub use standin::{Api, Core, Recorded, Standin};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{SystemTime, UNIX_EPOCH};

/// One request, as read off the connection. Header names are lower-cased.
pub struct HttpRequest {
    pub method: String,
    pub target: String,
    pub version: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
    /// Whether the client asked to close the connection after this request.
    pub fn wants_close(&self) -> bool {
        let conn = self.header("connection").map(|v| v.to_ascii_lowercase());
        match conn.as_deref() {
            Some(v) if v.split(',').any(|t| t.trim() == "close") => true,
            Some(v) if v.split(',').any(|t| t.trim() == "keep-alive") => false,
            _ => self.version == "HTTP/1.0",
        }
    }
}

pub const MAX_HEADER_BYTES: usize = 64 * 1024;
pub const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

pub fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

fn read_line(r: &mut impl BufRead, budget: &mut usize) -> io::Result<Option<String>> {
    let mut buf = Vec::new();
    let n = r.take((*budget + 1) as u64).read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if n > *budget {
        return Err(bad("header section too large"));
    }
    *budget -= n;
    while matches!(buf.last(), Some(b'\n' | b'\r')) {
        buf.pop();
    }
    String::from_utf8(buf).map(Some).map_err(|_| bad("non-UTF-8 header line"))
}

/// Reads one request; `Ok(None)` on a clean EOF before any byte of it.
pub fn read_request(r: &mut BufReader<TcpStream>, w: &mut TcpStream) -> io::Result<Option<HttpRequest>> {
    let mut budget = MAX_HEADER_BYTES;
    let line = loop {
        match read_line(r, &mut budget)? {
            None => return Ok(None),
            Some(l) if l.is_empty() => continue, // tolerate stray CRLF between requests
            Some(l) => break l,
        }
    };
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad(format!("malformed request line: {line:?}")));
    };
    let mut headers = Vec::new();
    loop {
        let l = read_line(r, &mut budget)?.ok_or_else(|| bad("EOF in headers"))?;
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').ok_or_else(|| bad(format!("malformed header: {l:?}")))?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let mut req = HttpRequest {
        method: method.to_string(),
        target: target.to_string(),
        version: version.to_string(),
        headers,
        body: Vec::new(),
    };
    if req.header("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
        w.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        w.flush()?;
    }
    let chunked = req.header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    if chunked {
        let mut body = Vec::new();
        loop {
            let mut lb = MAX_HEADER_BYTES;
            let size_line = read_line(r, &mut lb)?.ok_or_else(|| bad("EOF in chunk size"))?;
            let size_hex = size_line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_hex, 16).map_err(|_| bad(format!("bad chunk size {size_hex:?}")))?;
            if size == 0 {
                loop {
                    let t = read_line(r, &mut lb)?.ok_or_else(|| bad("EOF in trailers"))?;
                    if t.is_empty() {
                        break;
                    }
                }
                break;
            }
            if body.len() + size > MAX_BODY_BYTES {
                return Err(bad("body too large"));
            }
            let start = body.len();
            body.resize(start + size, 0);
            r.read_exact(&mut body[start..])?;
            let mut crlf = [0u8; 2];
            r.read_exact(&mut crlf)?;
        }
        req.body = body;
    } else if let Some(len) = req.header("content-length") {
        let len: usize = len.parse().map_err(|_| bad("bad content-length"))?;
        if len > MAX_BODY_BYTES {
            return Err(bad("body too large"));
        }
        let mut body = vec![0u8; len];
        r.read_exact(&mut body)?;
        req.body = body;
    }
    Ok(Some(req))
}

/// What to send back.
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: ResponseBody,
    /// Headers of the reply's own (a rate limit's `retry-after`), after the usual ones.
    pub headers: Vec<(String, String)>,
}

pub enum ResponseBody {
    Full(Vec<u8>),
    /// Server-Sent Events, each element one event, sent with chunked transfer-encoding.
    Events(Vec<String>),
}

pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        415 => "Unsupported Media Type",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// Write `resp` with `headers` added (e.g. a request id); `head_only` for HEAD.
pub fn write_response(
    w: &mut TcpStream,
    resp: &Response,
    headers: &[(&str, &str)],
    close: bool,
    head_only: bool,
) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: {}\r\nconnection: {}\r\n",
        resp.status,
        reason(resp.status),
        resp.content_type,
        if close { "close" } else { "keep-alive" }
    );
    for (k, v) in headers.iter().copied().chain(resp.headers.iter().map(|(k, v)| (k.as_str(), v.as_str()))) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    match &resp.body {
        ResponseBody::Full(b) => {
            head.push_str(&format!("content-length: {}\r\n\r\n", b.len()));
            w.write_all(head.as_bytes())?;
            if !head_only {
                w.write_all(b)?;
            }
        }
        ResponseBody::Events(events) => {
            head.push_str("cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n");
            w.write_all(head.as_bytes())?;
            for ev in events {
                w.write_all(format!("{:x}\r\n{}\r\n", ev.len(), ev).as_bytes())?;
                w.flush()?;
            }
            w.write_all(b"0\r\n\r\n")?;
        }
    }
    w.flush()
}

/// A full `application/json` response.
pub fn json_response(status: u16, v: &Value) -> Response {
    Response {
        status,
        content_type: "application/json",
        body: ResponseBody::Full(v.to_string().into_bytes()),
        headers: Vec::new(),
    }
}

/// Milliseconds since the UNIX epoch.
pub fn now_unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// A JSON value that fits `schema` (the structured output a title or side request asks
/// for): every string set to `text`, numbers 0, booleans false, arrays empty.
pub fn value_for_schema(schema: &Value, text: &str) -> Value {
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => {
            let mut out = serde_json::Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, v) in props {
                    out.insert(k.clone(), value_for_schema(v, text));
                }
            }
            Value::Object(out)
        }
        Some("boolean") => Value::Bool(false),
        Some("integer") | Some("number") => json!(0),
        Some("array") => json!([]),
        Some("null") => Value::Null,
        _ => Value::String(text.to_string()),
    }
}
