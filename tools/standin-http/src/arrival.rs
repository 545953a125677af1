//! What every stand-in records of a request, whatever its API.

use crate::{now_unix_ms, HttpRequest};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Instant;

/// A request as it arrived: a stand-in's record of it is this (flattened in its JSON)
/// plus what its API made of it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Arrival {
    /// 0-based arrival order.
    pub index: usize,
    pub method: String,
    /// Path without the query string, e.g. `/v1/messages`.
    pub path: String,
    /// Query string without `?` (empty when none), e.g. `beta=true`.
    pub query: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Parsed JSON body (`null` when empty or not JSON).
    pub body: Value,
    /// Milliseconds since the UNIX epoch at arrival.
    pub at_unix_ms: u64,
    /// Milliseconds since the stand-in started.
    pub elapsed_ms: u64,
}

impl Arrival {
    /// The `index`-th request, arrived now; `body` as the stand-in parsed it.
    pub fn new(index: usize, req: &HttpRequest, body: Value, started: Instant) -> Arrival {
        let (path, query) = match req.target.split_once('?') {
            Some((p, q)) => (p.to_string(), q.to_string()),
            None => (req.target.clone(), String::new()),
        };
        Arrival {
            index,
            method: req.method.clone(),
            path,
            query,
            headers: req.headers.clone(),
            body,
            at_unix_ms: now_unix_ms(),
            elapsed_ms: started.elapsed().as_millis() as u64,
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// The JSON body of `req`: `null` when empty, not JSON, or `encoded` (compressed).
pub fn json_body(req: &HttpRequest, encoded: bool) -> Value {
    if req.body.is_empty() || encoded {
        Value::Null
    } else {
        serde_json::from_slice(&req.body).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arrival_splits_its_target_and_finds_headers_in_any_case() {
        let req = HttpRequest {
            method: "POST".into(),
            target: "/v1/messages?beta=true".into(),
            version: "HTTP/1.1".into(),
            headers: vec![("x-api-key".into(), "k".into())],
            body: br#"{"a":1}"#.to_vec(),
        };
        let a = Arrival::new(3, &req, json_body(&req, false), Instant::now());
        assert_eq!((a.index, a.path.as_str(), a.query.as_str()), (3, "/v1/messages", "beta=true"));
        assert_eq!((a.header("X-API-Key"), a.body["a"].as_i64()), (Some("k"), Some(1)));
        assert!(a.at_unix_ms > 0);
        assert!(json_body(&req, true).is_null());
        let bare = HttpRequest { target: "/x".into(), body: b"not json".to_vec(), ..req };
        let b = Arrival::new(0, &bare, json_body(&bare, false), Instant::now());
        assert_eq!((b.path.as_str(), b.query.as_str(), b.body.is_null()), ("/x", "", true));
    }
}
