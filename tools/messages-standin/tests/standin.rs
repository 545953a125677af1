//! Drives the stand-in with a real TCP client (hand-written HTTP/1.1, keep-alive).

use messages_standin::{Matcher, Reply, RequestKind, Script, Standin};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A minimal keep-alive HTTP/1.1 client.
struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("JSON body")
    }
    fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Client { reader: BufReader::new(s.try_clone().unwrap()), writer: s }
    }

    fn send_raw(&mut self, raw: &[u8]) -> Resp {
        self.writer.write_all(raw).unwrap();
        self.writer.flush().unwrap();
        self.read_response()
    }

    fn request(&mut self, method: &str, path: &str, body: Option<&Value>) -> Resp {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let raw = format!(
            "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: keep-alive\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        self.send_raw(raw.as_bytes())
    }

    fn post(&mut self, path: &str, body: &Value) -> Resp {
        self.request("POST", path, Some(body))
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.reader.read_line(&mut l).unwrap();
        l.trim_end_matches(['\r', '\n']).to_string()
    }

    fn read_response(&mut self) -> Resp {
        let status_line = self.line();
        let status: u16 = status_line.split_whitespace().nth(1).expect("status").parse().unwrap();
        let mut headers = Vec::new();
        loop {
            let l = self.line();
            if l.is_empty() {
                break;
            }
            let (k, v) = l.split_once(':').unwrap();
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
        let mut resp = Resp { status, headers, body: Vec::new() };
        if resp.header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            loop {
                let size = usize::from_str_radix(self.line().trim(), 16).unwrap();
                if size == 0 {
                    assert_eq!(self.line(), "", "no trailers expected");
                    break;
                }
                let mut chunk = vec![0; size];
                self.reader.read_exact(&mut chunk).unwrap();
                resp.body.extend_from_slice(&chunk);
                assert_eq!(self.line(), "");
            }
        } else {
            let len: usize = resp.header("content-length").expect("content-length").parse().unwrap();
            resp.body = vec![0; len];
            self.reader.read_exact(&mut resp.body).unwrap();
        }
        resp
    }
}

/// Parses an SSE body into (event, data) pairs, checking the framing.
fn parse_sse(body: &str) -> Vec<(String, Value)> {
    assert!(body.ends_with("\n\n"), "SSE body ends with a blank line");
    body.split("\n\n")
        .filter(|b| !b.is_empty())
        .map(|block| {
            let mut event = None;
            let mut data = None;
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    event = Some(v.to_string());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = Some(serde_json::from_str::<Value>(v).expect("data is JSON"));
                } else {
                    panic!("unexpected SSE line {line:?}");
                }
            }
            let (event, data) = (event.expect("event line"), data.expect("data line"));
            assert_eq!(data["type"], event.as_str(), "data.type matches the event name");
            (event, data)
        })
        .collect()
}

fn tool(name: &str) -> Value {
    json!({"name": name, "description": "d", "input_schema": {"type": "object"}})
}

/// A main-agent request body (has tools) whose last user message is `content`.
fn main_body(content: Value, stream: bool) -> Value {
    json!({
        "model": "claude-opus-4-8",
        "max_tokens": 64000,
        "stream": stream,
        "tools": [tool("AskUserQuestion"), tool("Bash")],
        "system": [{"type": "text", "text": "You are Claude Code"}],
        "messages": [{"role": "user", "content": content}],
    })
}

fn with_tool_result(prev_assistant: Value, id: &str, text: &str, is_error: bool) -> Value {
    json!({
        "model": "claude-opus-4-8",
        "max_tokens": 64000,
        "stream": true,
        "tools": [tool("AskUserQuestion")],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [prev_assistant]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": text, "is_error": is_error}]},
            {"role": "system", "content": "mid-conversation system message"},
        ],
    })
}

fn side_body() -> Value {
    json!({
        "model": "claude-haiku-4-5-20251001",
        "max_tokens": 32000,
        "stream": true,
        "system": [{"type": "text", "text": "Generate a concise title"}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "<session>hi</session>"}]}],
    })
}

/// Checks the standard event order and returns (concatenated text, tool_use blocks, stop_reason).
fn check_stream(events: &[(String, Value)]) -> (String, Vec<Value>, String) {
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).filter(|e| *e != "ping").collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names.last(), Some(&"message_stop"));
    assert_eq!(names[names.len() - 2], "message_delta");
    let start = &events[0].1["message"];
    assert!(start["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(start["role"], "assistant");
    assert_eq!(start["content"], json!([]));
    assert!(start["usage"]["input_tokens"].as_u64().unwrap() > 0);

    let mut text = String::new();
    let mut tools = Vec::new();
    let mut open: Option<(u64, Value, String)> = None;
    let mut next_index = 0;
    let mut stop_reason = None;
    for (ev, d) in events {
        match ev.as_str() {
            "content_block_start" => {
                assert!(open.is_none(), "blocks do not overlap");
                assert_eq!(d["index"], next_index, "indices are consecutive from 0");
                open = Some((next_index, d["content_block"].clone(), String::new()));
            }
            "content_block_delta" => {
                let (idx, block, acc) = open.as_mut().expect("delta inside a block");
                assert_eq!(d["index"], *idx);
                match block["type"].as_str().unwrap() {
                    "text" => {
                        assert_eq!(d["delta"]["type"], "text_delta");
                        acc.push_str(d["delta"]["text"].as_str().unwrap());
                    }
                    "tool_use" => {
                        assert_eq!(d["delta"]["type"], "input_json_delta");
                        acc.push_str(d["delta"]["partial_json"].as_str().unwrap());
                    }
                    other => panic!("unexpected block type {other}"),
                }
            }
            "content_block_stop" => {
                let (idx, mut block, acc) = open.take().expect("stop closes an open block");
                assert_eq!(d["index"], idx);
                if block["type"] == "text" {
                    text.push_str(&acc);
                } else {
                    block["input"] = serde_json::from_str(&acc).expect("partial_json concatenates to JSON");
                    tools.push(block);
                }
                next_index += 1;
            }
            "message_delta" => {
                assert!(open.is_none());
                stop_reason = Some(d["delta"]["stop_reason"].as_str().unwrap().to_string());
                assert!(d["usage"]["output_tokens"].as_u64().unwrap() > 0);
            }
            _ => {}
        }
    }
    (text, tools, stop_reason.expect("message_delta carries stop_reason"))
}

fn ask_input() -> Value {
    json!({"questions": [{"question": "Which database?", "header": "DB", "multiSelect": false,
        "options": [{"label": "Postgres", "description": "a"}, {"label": "SQLite", "description": "b"}]}]})
}

#[test]
fn streaming_text_reply_is_a_well_formed_event_sequence() {
    let s = Standin::start(Script::new().text("Hello from the stand-in, with ünïcödé.")).unwrap();
    let mut c = Client::connect(s.addr());
    let r = c.post("/v1/messages?beta=true", &main_body(json!("hi"), true));
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().starts_with("text/event-stream"));
    let events = parse_sse(&r.text());
    let (text, tools, stop) = check_stream(&events);
    assert_eq!(text, "Hello from the stand-in, with ünïcödé.");
    assert!(tools.is_empty());
    assert_eq!(stop, "end_turn");
    assert_eq!(events[0].1["message"]["model"], "claude-opus-4-8", "model echoed");
}

#[test]
fn streaming_tool_use_reply_with_leading_text() {
    let script =
        Script::new().turn(Matcher::Any, Reply::tool_use_with_text("AskUserQuestion", ask_input(), "Let me ask."));
    let s = Standin::start(script).unwrap();
    let mut c = Client::connect(s.addr());
    let events = parse_sse(&c.post("/v1/messages", &main_body(json!("hi"), true)).text());
    let (text, tools, stop) = check_stream(&events);
    assert_eq!(text, "Let me ask.");
    assert_eq!(stop, "tool_use");
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["name"], "AskUserQuestion");
    assert_eq!(tools[0]["input"], ask_input());
    let id = tools[0]["id"].as_str().unwrap();
    assert!(id.starts_with("toolu_") && id.len() > 20, "{id}");
    let emitted = s.emitted_tool_uses();
    assert_eq!(emitted.len(), 1);
    assert_eq!(emitted[0].id, id);
    assert_eq!(emitted[0].turn, 0);
}

#[test]
fn non_streaming_request_gets_a_json_message() {
    let s = Standin::start(Script::new().tool_use("Bash", json!({"command": "true"}))).unwrap();
    let mut c = Client::connect(s.addr());
    let r = c.post("/v1/messages", &main_body(json!("hi"), false));
    assert_eq!(r.status, 200);
    let m = r.json();
    assert_eq!(m["type"], "message");
    assert_eq!(m["stop_reason"], "tool_use");
    assert_eq!(m["content"][0]["type"], "tool_use");
    assert_eq!(m["content"][0]["input"], json!({"command": "true"}));
}

#[test]
fn script_turns_are_consumed_by_matching_main_requests_only() {
    let script = Script::new()
        .tool_use("AskUserQuestion", ask_input())
        .after_tool_result("Thanks for answering.")
        .fallback_reply("fallback");
    let s = Standin::start(script).unwrap();
    let mut c = Client::connect(s.addr());

    // Turn 0: the tool call.
    let (_, tools, _) = check_stream(&parse_sse(&c.post("/v1/messages", &main_body(json!("go"), true)).text()));
    let tu = tools[0].clone();
    let id = tu["id"].as_str().unwrap().to_string();
    assert_eq!(s.remaining_turns(), vec![1]);

    // A side request in between consumes nothing.
    let (text, _, _) = check_stream(&parse_sse(&c.post("/v1/messages?beta=true", &side_body()).text()));
    assert_eq!(text, "Standin session");
    assert_eq!(s.remaining_turns(), vec![1]);

    // A main request without the tool_result does not fit turn 1: fallback, nothing consumed.
    let (text, _, _) = check_stream(&parse_sse(&c.post("/v1/messages", &main_body(json!("unrelated"), true)).text()));
    assert_eq!(text, "fallback");
    assert_eq!(s.remaining_turns(), vec![1]);

    // The tool_result for the previous tool_use consumes turn 1 (a trailing system message is fine).
    let body =
        with_tool_result(tu.clone(), &id, "Your questions have been answered: \"Which database?\"=\"SQLite\".", false);
    let (text, _, stop) = check_stream(&parse_sse(&c.post("/v1/messages", &body).text()));
    assert_eq!((text.as_str(), stop.as_str()), ("Thanks for answering.", "end_turn"));
    assert!(s.remaining_turns().is_empty());

    // Exhausted: plain short text.
    let (text, _, stop) = check_stream(&parse_sse(&c.post("/v1/messages", &body).text()));
    assert_eq!((text.as_str(), stop.as_str()), ("fallback", "end_turn"));

    let kinds: Vec<RequestKind> = s.requests().into_iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        vec![
            RequestKind::Main { turn: Some(0) },
            RequestKind::Side,
            RequestKind::Main { turn: None },
            RequestKind::Main { turn: Some(1) },
            RequestKind::Main { turn: None },
        ]
    );
}

#[test]
fn structured_side_request_gets_schema_shaped_json() {
    let s = Standin::start(Script::new().tool_use("Bash", json!({})).side_reply("Pick a database")).unwrap();
    let mut c = Client::connect(s.addr());
    let mut body = side_body();
    body["tools"] = json!([]);
    body["output_config"] = json!({"format": {"type": "json_schema", "schema": {
        "type": "object", "additionalProperties": false,
        "properties": {"title": {"type": "string"}}, "required": ["title"]}}});
    let (text, _, _) = check_stream(&parse_sse(&c.post("/v1/messages?beta=true", &body).text()));
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), json!({"title": "Pick a database"}));
    assert_eq!(s.requests()[0].kind, RequestKind::Side);
    assert_eq!(s.remaining_turns(), vec![0], "empty tools array is a side request");
}

#[test]
fn contains_and_fixed_id_matchers() {
    let script = Script::new()
        .turn(Matcher::Contains("second".into()), Reply::text("got second"))
        .turn(
            Matcher::Any,
            Reply::ToolUse(messages_standin::ToolUseReply {
                name: "Bash".into(),
                input: json!({"command": "ls"}),
                text: None,
                id: Some("toolu_fixed".into()),
            }),
        )
        .turn(Matcher::ToolResultFor("toolu_fixed".into()), Reply::text("after fixed"));
    let s = Standin::start(script).unwrap();
    let mut c = Client::connect(s.addr());
    // "first" does not fit turn 0, so turn 1 (Any) is taken: first fitting unconsumed turn.
    let (_, tools, _) = check_stream(&parse_sse(&c.post("/v1/messages", &main_body(json!("first"), true)).text()));
    assert_eq!(tools[0]["id"], "toolu_fixed");
    let (text, _, _) = check_stream(&parse_sse(
        &c.post("/v1/messages", &main_body(json!([{"type": "text", "text": "the second one"}]), true)).text(),
    ));
    assert_eq!(text, "got second");
    let body = with_tool_result(tools[0].clone(), "toolu_fixed", "file.txt", false);
    let (text, _, _) = check_stream(&parse_sse(&c.post("/v1/messages", &body).text()));
    assert_eq!(text, "after fixed");
}

#[test]
fn requests_are_recorded_with_tool_results() {
    let s = Standin::start(Script::new().tool_use("AskUserQuestion", ask_input())).unwrap();
    let mut c = Client::connect(s.addr());
    let (_, tools, _) =
        check_stream(&parse_sse(&c.post("/v1/messages?beta=true", &main_body(json!("go"), true)).text()));
    let id = tools[0]["id"].as_str().unwrap().to_string();
    assert!(s.tool_results_for(&id).is_empty());
    let rejected = "The user doesn't want to proceed with this tool use.";
    let body = with_tool_result(tools[0].clone(), &id, rejected, true);
    c.post("/v1/messages?beta=true", &body);
    // The same result repeated in a later request is reported once.
    c.post("/v1/messages?beta=true", &body);
    assert_eq!(s.tool_results_for(&id), vec![(rejected.to_string(), true)]);
    assert_eq!(s.wait_for_tool_result(&id, Duration::from_secs(1)), Some((rejected.to_string(), true)));

    let reqs = s.requests();
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].path, "/v1/messages");
    assert_eq!(reqs[0].query, "beta=true");
    assert_eq!(reqs[0].model.as_deref(), Some("claude-opus-4-8"));
    assert!(reqs[0].stream);
    assert_eq!(reqs[0].body["messages"][0]["content"], "go");
    assert_eq!(reqs[0].header("Content-Type"), Some("application/json"));
    assert_eq!(reqs[0].reply.as_ref().unwrap().tool_use.as_ref().unwrap().id, id);
    assert!(reqs[0].at_unix_ms > 0 && reqs[1].elapsed_ms >= reqs[0].elapsed_ms);

    // The same, over HTTP (not itself recorded).
    let r = c.request("GET", "/_standin/requests", None);
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v.as_array().unwrap().len(), 3);
    assert_eq!(v[0]["kind"], json!({"main": {"turn": 0}}));
    assert_eq!(v[1]["body"]["messages"][2]["content"][0]["is_error"], true);
    let r = c.request("GET", "/_standin/tool_uses", None);
    assert_eq!(r.json()[0]["id"], id.as_str());
    assert_eq!(s.requests().len(), 3);
}

#[test]
fn keep_alive_chunked_bodies_count_tokens_and_errors() {
    let s = Standin::start(Script::new()).unwrap();
    let mut c = Client::connect(s.addr());
    // HEAD / (claude's connectivity probe) → 404 without a body, connection stays usable.
    c.writer.write_all(b"HEAD / HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    let status = c.line();
    assert!(status.starts_with("HTTP/1.1 404"), "{status}");
    let mut len = None;
    loop {
        let l = c.line();
        if l.is_empty() {
            break;
        }
        if let Some(v) = l.strip_prefix("content-length: ") {
            len = Some(v.to_string());
        }
    }
    assert!(len.is_some());

    let r = c.post("/v1/messages/count_tokens?beta=true", &main_body(json!("count me"), false));
    assert_eq!(r.status, 200);
    assert!(r.json()["input_tokens"].as_u64().unwrap() > 0);

    // A chunked request body on the same connection.
    let body = main_body(json!("chunked hello"), true).to_string();
    let (a, b) = body.split_at(body.len() / 2);
    let raw = format!(
        "POST /v1/messages?beta=true HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x};ext=1\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    );
    let r = c.send_raw(raw.as_bytes());
    assert_eq!(r.status, 200);
    let (text, _, _) = check_stream(&parse_sse(&r.text()));
    assert_eq!(text, "OK.");
    assert_eq!(s.requests().last().unwrap().body["messages"][0]["content"], "chunked hello");

    let r = c.request("GET", "/v1/models", None);
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["type"], "error");
    assert_eq!(r.json()["error"]["type"], "not_found_error");

    // Pipelined requests are answered in order.
    let one = main_body(json!("p1"), false).to_string();
    let raw = format!(
        "POST /v1/messages HTTP/1.1\r\ncontent-length: {n}\r\n\r\n{one}POST /v1/messages/count_tokens HTTP/1.1\r\ncontent-length: {n}\r\n\r\n{one}",
        n = one.len()
    );
    let r1 = c.send_raw(raw.as_bytes());
    let r2 = c.read_response();
    assert_eq!(r1.json()["type"], "message");
    assert!(r2.json()["input_tokens"].is_u64());

    // `connection: close` is honoured.
    let r = c.send_raw(b"GET /nope HTTP/1.1\r\nconnection: close\r\n\r\n");
    assert_eq!(r.header("connection"), Some("close"));
    let mut rest = Vec::new();
    assert_eq!(c.reader.read_to_end(&mut rest).unwrap(), 0, "server closed the connection");
}

#[test]
fn error_reply_and_delay() {
    let script = Script::new()
        .turn(
            Matcher::Any,
            Reply::Error { status: 400, error_type: "invalid_request_error".into(), message: "scripted".into() },
        )
        .turn_delayed(Matcher::Any, Reply::text("slow"), Duration::from_millis(300));
    let s = Standin::start(script).unwrap();
    let mut c = Client::connect(s.addr());
    let r = c.post("/v1/messages", &main_body(json!("x"), true));
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["message"], "scripted");
    let t = std::time::Instant::now();
    let r = c.post("/v1/messages", &main_body(json!("x"), true));
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert_eq!(check_stream(&parse_sse(&r.text())).0, "slow");
}

#[test]
fn concurrent_connections_and_wait_helpers() {
    let s = Standin::start(Script::new().tool_use("Bash", json!({"command": "true"}))).unwrap();
    let addr = s.addr();
    let handles: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                c.post("/v1/messages", &side_body()).status
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), 200);
    }
    assert!(s.wait_until(Duration::from_secs(1), |r| r.len() == 4));
    assert!(s.wait_for_tool_use(0, Duration::from_millis(50)).is_none());
    std::thread::spawn(move || Client::connect(addr).post("/v1/messages", &main_body(json!("go"), true)));
    let tu = s.wait_for_tool_use(0, Duration::from_secs(5)).expect("tool use emitted");
    assert_eq!(tu.name, "Bash");
}

#[test]
fn refuses_non_loopback_addresses() {
    for addr in ["0.0.0.0:0", "[::]:0", "192.0.2.1:0", "10.0.0.1:0"] {
        let err = Standin::start_on(addr, Script::new()).err().unwrap_or_else(|| panic!("{addr} accepted"));
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{addr}: {err}");
    }
    let s = Standin::start_on("127.0.0.1:0", Script::new()).unwrap();
    assert!(s.base_url().starts_with("http://127.0.0.1:"));
    assert_ne!(s.port(), 0);
}

#[test]
fn shutdown_closes_connections() {
    let s = Standin::start(Script::new()).unwrap();
    let addr = s.addr();
    let mut c = Client::connect(addr);
    assert_eq!(c.request("GET", "/x", None).status, 404);
    s.shutdown();
    let mut rest = Vec::new();
    assert_eq!(c.reader.read_to_end(&mut rest).unwrap_or(0), 0);
    assert!(TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err());
}

#[test]
fn script_json_form() {
    let text = r#"{
        "turns": [
            {"reply": {"tool_use": {"name": "AskUserQuestion", "input": {"questions": []}, "text": "Q?"}}},
            {"match": "tool_result_for_previous", "reply": {"text": "done"}, "delay_ms": 10},
            {"match": {"all": [{"contains": "a"}, {"not": {"tool_result_for": "toolu_x"}}]}, "reply": {"text": "a"}},
            {"match": {"any_of": [{"body_contains": "b"}, "any"]}, "reply": {"error": {"status": 529, "type": "overloaded_error", "message": "busy"}}}
        ],
        "side_reply": "Title"
    }"#;
    let s = Script::from_json(text).unwrap();
    assert_eq!(s.turns.len(), 4);
    assert_eq!(s.turns[0].when, Matcher::Any);
    assert_eq!(s.turns[0].reply, Reply::tool_use_with_text("AskUserQuestion", json!({"questions": []}), "Q?"));
    assert_eq!(s.turns[1].when, Matcher::ToolResultForPrevious);
    assert_eq!(s.turns[1].delay_ms, Some(10));
    assert_eq!(
        s.turns[2].when,
        Matcher::All(vec![
            Matcher::Contains("a".into()),
            Matcher::Not(Box::new(Matcher::ToolResultFor("toolu_x".into())))
        ])
    );
    assert_eq!(s.side_reply, "Title");
    assert_eq!(s.fallback_reply, "OK.");
    // Round trip.
    let again = Script::from_json(&serde_json::to_string(&s).unwrap()).unwrap();
    assert_eq!(again, s);
    assert!(Script::from_json(r#"{"turns": [{"reply": {"nope": 1}}]}"#).is_err());
}

#[test]
fn binary_serves_a_script_file() {
    use std::process::{Command, Stdio};
    let dir = std::env::temp_dir().join(format!("standin-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("script.json");
    std::fs::write(&path, r#"{"turns": [{"reply": {"text": "from file"}}]}"#).unwrap();

    let bin = env!("CARGO_BIN_EXE_messages-standin");
    let refused = Command::new(bin).args(["--addr", "0.0.0.0:0"]).output().unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("non-loopback"));

    let mut child = Command::new(bin)
        .args(["--script", path.to_str().unwrap(), "--addr", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr: SocketAddr = line.trim().strip_prefix("listening on ").expect(&line).parse().unwrap();
    assert!(addr.ip().is_loopback());
    let mut c = Client::connect(addr);
    let (text, _, _) = check_stream(&parse_sse(&c.post("/v1/messages", &main_body(json!("hi"), true)).text()));
    assert_eq!(text, "from file");
    let v = c.request("GET", "/_standin/requests", None).json();
    assert_eq!(v[0]["reply"]["text"], "from file");
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_demo_script_calls_tools_for_main_requests_only_and_is_never_used_up() {
    let s = Standin::start(Script::demo()).unwrap();
    let mut c = Client::connect(s.addr());
    // The title request (no tools) gets text, also when it asks for JSON.
    let (text, tools, stop) = check_stream(&parse_sse(&c.post("/v1/messages", &side_body()).text()));
    assert_eq!((text.as_str(), tools.len(), stop.as_str()), (messages_standin::demo::SIDE_REPLY, 0, "end_turn"));
    // Two sessions start the demo: both get the first question.
    for _ in 0..2 {
        let (_, tools, stop) =
            check_stream(&parse_sse(&c.post("/v1/messages", &main_body(json!("Show me"), true)).text()));
        assert_eq!(stop, "tool_use");
        assert_eq!(tools[0]["name"], "AskUserQuestion");
        assert_eq!(tools[0]["input"]["questions"][0]["question"], messages_standin::demo::QUESTION_LANGUAGE);
    }
    let reqs = s.requests();
    assert_eq!(reqs[0].kind, RequestKind::Side);
    assert_eq!(reqs[1].kind, RequestKind::Main { turn: None });
    assert!(reqs[2].reply.as_ref().unwrap().tool_use.is_some());
}

#[test]
fn binary_serves_the_demo() {
    use std::process::{Command, Stdio};
    let bin = env!("CARGO_BIN_EXE_messages-standin");
    let both = Command::new(bin).args(["--demo", "--script", "x.json"]).output().unwrap();
    assert!(!both.status.success());
    let mut child = Command::new(bin).args(["--demo", "--addr", "127.0.0.1:0"]).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr: SocketAddr = line.trim().strip_prefix("listening on ").expect(&line).parse().unwrap();
    let mut c = Client::connect(addr);
    let (_, tools, _) = check_stream(&parse_sse(&c.post("/v1/messages", &main_body(json!("hi"), true)).text()));
    assert_eq!(tools[0]["name"], "AskUserQuestion");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// A path the agent makes up at run time and tells the model (Claude Code's plan file)
/// fills a `{{path_with:…}}` placeholder in a scripted tool call's input.
#[test]
fn a_path_placeholder_is_filled_from_the_request() {
    use messages_standin::fill_placeholders;
    let body = json!({"messages": [{"role": "user", "content": [{"type": "text",
        "text": "No plan file exists yet. You should create your plan at /h/.claude/plans/a-b-c.md using the Write tool.\nOr (/x/.claude/plans/d.md)."}]}]});
    let input = json!({"file_path": "{{path_with:/.claude/plans/}}", "content": "# Plan", "n": 3,
        "more": ["see {{path_with:/.claude/plans/}}.", "{{path_with:nowhere/}}", "{{path_with:unclosed"]});
    assert_eq!(
        fill_placeholders(&input, &body),
        json!({"file_path": "/h/.claude/plans/a-b-c.md", "content": "# Plan", "n": 3,
            "more": ["see /h/.claude/plans/a-b-c.md.", "{{path_with:nowhere/}}", "{{path_with:unclosed"]})
    );
    // Sentence punctuation and brackets end a path; a relative match is no path.
    let body = json!({"system": "at (/x/.claude/plans/d.md), or .claude/plans/e.md"});
    assert_eq!(fill_placeholders(&json!("{{path_with:/.claude/plans/}}"), &body), json!("/x/.claude/plans/d.md"));
    let body = json!({"system": "only .claude/plans/e.md"});
    assert_eq!(
        fill_placeholders(&json!("{{path_with:/.claude/plans/}}"), &body),
        json!("{{path_with:/.claude/plans/}}")
    );
}
