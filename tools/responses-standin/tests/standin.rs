//! The Responses API stand-in over real loopback HTTP: SSE shapes, script matching, title
//! requests, the request log, and the binary.

use responses_standin::{EmittedCall, Matcher, Reply, RequestKind, Script, Standin};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

// ---------------------------------------------------------------------------------------
// A tiny HTTP/1.1 client (std only)
// ---------------------------------------------------------------------------------------

struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("JSON body")
    }
    /// `(event name, data)` of every SSE event.
    fn events(&self) -> Vec<(String, Value)> {
        let text = String::from_utf8(self.body.clone()).unwrap();
        text.split("\n\n")
            .filter(|b| !b.trim().is_empty())
            .map(|block| {
                let mut name = String::new();
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event: ") {
                        name = v.to_string();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data.push_str(v);
                    }
                }
                (name, serde_json::from_str(&data).expect("event data is JSON"))
            })
            .collect()
    }
}

fn read_answer(r: &mut impl BufRead) -> Answer {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status: u16 = line.split_whitespace().nth(1).expect("status line").parse().unwrap();
    let mut headers = Vec::new();
    loop {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        let l = l.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').unwrap();
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let mut ans = Answer { status, headers, body: Vec::new() };
    if ans.header("transfer-encoding") == Some("chunked") {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).unwrap();
            let n = usize::from_str_radix(size.trim(), 16).unwrap();
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).unwrap();
            if n == 0 {
                break;
            }
            ans.body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(len) = ans.header("content-length") {
        let mut b = vec![0; len.parse().unwrap()];
        r.read_exact(&mut b).unwrap();
        ans.body = b;
    }
    ans
}

fn write_request(w: &mut TcpStream, method: &str, path: &str, body: Option<&Value>, close: bool) {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let conn = if close { "close" } else { "keep-alive" };
    write!(
        w,
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer dummy\r\ncontent-type: application/json\r\n\
         connection: {conn}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    w.flush().unwrap();
}

fn request(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> Answer {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write_request(&mut s, method, path, body, true);
    read_answer(&mut BufReader::new(s))
}

fn post(st: &Standin, body: &Value) -> Answer {
    request(st.addr(), "POST", "/v1/responses", Some(body))
}

// ---------------------------------------------------------------------------------------
// Request bodies shaped like codex 0.169.0's
// ---------------------------------------------------------------------------------------

fn tools() -> Value {
    json!([{"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
           {"type": "function", "name": "update_plan", "parameters": {"type": "object"}}])
}

fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
}

/// A first request of a turn: developer + environment context + the prompt.
fn turn_body(prompt: &str) -> Value {
    json!({
        "model": "stand-in-model", "stream": true, "tools": tools(),
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions/>"}]},
            user("<environment_context>…</environment_context>"),
            user(prompt),
        ],
    })
}

/// The follow-up after a call ran: the prompt, the call, its output.
fn output_body(prompt: &str, call: &EmittedCall, output: &str) -> Value {
    let mut b = turn_body(prompt);
    let input = b["input"].as_array_mut().unwrap();
    input.push(json!({"type": "function_call", "call_id": call.call_id, "name": call.name,
                      "arguments": call.arguments.to_string()}));
    input.push(json!({"type": "function_call_output", "call_id": call.call_id, "output": output}));
    b
}

/// The title request: no tools, structured output asking for `{"title": string}`.
fn title_body() -> Value {
    json!({
        "model": "stand-in-model", "stream": true, "tools": [],
        "input": [user("Generate a title for: hello")],
        "text": {"format": {"type": "json_schema", "name": "codex_output_schema", "strict": true,
            "schema": {"type": "object", "additionalProperties": false, "required": ["title"],
                       "properties": {"title": {"type": "string", "minLength": 1, "maxLength": 36}}}}},
    })
}

fn event_types(ans: &Answer) -> Vec<String> {
    ans.events().into_iter().map(|(n, _)| n).collect()
}

fn completed_output(ans: &Answer) -> Vec<Value> {
    let (_, done) = ans.events().into_iter().find(|(n, _)| n == "response.completed").expect("response.completed");
    done["response"]["output"].as_array().unwrap().clone()
}

// ---------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------

#[test]
fn text_turn_streams_the_responses_event_sequence() {
    let st = Standin::start(Script::new().text("Hello from the stand-in, in several deltas.")).unwrap();
    let ans = post(&st, &turn_body("hi"));
    assert_eq!(ans.status, 200);
    assert_eq!(ans.header("content-type"), Some("text/event-stream"));
    let types = event_types(&ans);
    assert_eq!(types.first().map(String::as_str), Some("response.created"));
    assert_eq!(types.last().map(String::as_str), Some("response.completed"));
    assert_eq!(types[1], "response.output_item.added");
    assert_eq!(types[types.len() - 2], "response.output_item.done");
    assert!(types.iter().filter(|t| *t == "response.output_text.delta").count() >= 2, "{types:?}");

    let events = ans.events();
    // Every event's data names its own type and carries a rising sequence_number.
    for (i, (name, data)) in events.iter().enumerate() {
        assert_eq!(data["type"], json!(name));
        assert_eq!(data["sequence_number"], json!(i));
    }
    let deltas: String = events
        .iter()
        .filter(|(n, _)| n == "response.output_text.delta")
        .map(|(_, d)| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, "Hello from the stand-in, in several deltas.");
    let (_, done) = events.last().unwrap();
    assert_eq!(done["response"]["status"], "completed");
    assert!(done["response"]["usage"]["total_tokens"].as_u64().unwrap() > 0);
    let out = completed_output(&ans);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["type"], "message");
    assert_eq!(out[0]["role"], "assistant");
    assert_eq!(out[0]["content"][0]["text"], "Hello from the stand-in, in several deltas.");

    let reqs = st.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].kind, RequestKind::Turn { turn: Some(0) });
    assert_eq!(reqs[0].header("authorization"), Some("Bearer dummy"));
    assert_eq!(reqs[0].reply.as_ref().unwrap().text.as_deref(), Some("Hello from the stand-in, in several deltas."));
}

#[test]
fn exec_command_with_and_without_escalation() {
    let script = Script::new()
        .exec_command_escalated("touch approved.txt", "Stand-in wants to create approved.txt")
        .exec_command("ls");
    let st = Standin::start(script).unwrap();

    let ans = post(&st, &turn_body("first"));
    let types = event_types(&ans);
    assert_eq!(
        types,
        ["response.created", "response.output_item.added", "response.output_item.done", "response.completed"]
    );
    let (_, added) = &ans.events()[1];
    assert_eq!(added["item"]["type"], "function_call");
    assert_eq!(added["item"]["arguments"], "");
    let out = completed_output(&ans);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["type"], "function_call");
    assert_eq!(out[0]["name"], "exec_command");
    let call_id = out[0]["call_id"].as_str().unwrap().to_string();
    // `arguments` is JSON text, as the Responses API sends it.
    let args: Value = serde_json::from_str(out[0]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(
        args,
        json!({"cmd": "touch approved.txt", "sandbox_permissions": "require_escalated",
               "justification": "Stand-in wants to create approved.txt"})
    );

    let ans = post(&st, &turn_body("second"));
    let out = completed_output(&ans);
    let args: Value = serde_json::from_str(out[0]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"cmd": "ls"}), "no escalation, no justification");

    let calls = st.emitted_calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].call_id, call_id);
    assert_eq!((calls[0].turn, calls[0].request_index), (0, 0));
    assert_eq!((calls[1].turn, calls[1].request_index), (1, 1));
    assert_ne!(calls[0].call_id, calls[1].call_id);
}

#[test]
fn leading_text_and_fixed_call_id() {
    let script = Script::from_json(
        r#"{"turns": [{"reply": {"exec_command": {"cmd": "true", "text": "Let me check.", "call_id": "call_fixed"}}}]}"#,
    )
    .unwrap();
    let st = Standin::start(script).unwrap();
    let out = completed_output(&post(&st, &turn_body("go")));
    assert_eq!(out.len(), 2);
    assert_eq!(out[0]["type"], "message");
    assert_eq!(out[0]["content"][0]["text"], "Let me check.");
    assert_eq!(out[1]["type"], "function_call");
    assert_eq!(out[1]["call_id"], "call_fixed");
}

#[test]
fn title_request_gets_a_title_and_consumes_no_turn() {
    let st = Standin::start(Script::new().text("the only turn").title("Short title")).unwrap();
    // JSON-schema title request (what codex 0.169.0 sends): an object with the title.
    let ans = post(&st, &title_body());
    let out = completed_output(&ans);
    let text = out[0]["content"][0]["text"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(text).unwrap(), json!({"title": "Short title"}));
    // A plain tool-less request: the title as text.
    let ans = post(&st, &json!({"model": "m", "input": [user("name this")]}));
    assert_eq!(completed_output(&ans)[0]["content"][0]["text"], "Short title");
    assert_eq!(st.remaining_turns(), vec![0]);

    let ans = post(&st, &turn_body("now the turn"));
    assert_eq!(completed_output(&ans)[0]["content"][0]["text"], "the only turn");
    let kinds: Vec<RequestKind> = st.requests().into_iter().map(|r| r.kind).collect();
    assert_eq!(kinds, [RequestKind::Title, RequestKind::Title, RequestKind::Turn { turn: Some(0) }]);
    assert_eq!(st.turn_requests().len(), 1);
}

#[test]
fn turns_are_matched_in_order_and_output_matchers_see_only_the_current_turn() {
    let script = Script::new()
        .turn(Matcher::Contains("TOUCHME".into()), Reply::exec_command_escalated("touch a", "why"))
        .after_output("Tool finished.")
        .turn(Matcher::NewUserTurn, Reply::text("a new turn"))
        .fallback_reply("nothing left");
    let st = Standin::start(script).unwrap();

    // Turn 0 needs TOUCHME: a plain prompt falls through to turn 2 (NewUserTurn).
    let out = completed_output(&post(&st, &turn_body("hello")));
    assert_eq!(out[0]["content"][0]["text"], "a new turn");
    let out = completed_output(&post(&st, &turn_body("please TOUCHME")));
    assert_eq!(out[0]["type"], "function_call");
    let call = st.emitted_calls().remove(0);

    // An output for some other call does not fit `output_for_previous`.
    let stray = output_body("please TOUCHME", &EmittedCall { call_id: "call_other".into(), ..call.clone() }, "x");
    let out = completed_output(&post(&st, &stray));
    assert_eq!(out[0]["content"][0]["text"], "nothing left");
    assert_eq!(st.remaining_turns(), vec![1]);

    // The real output does.
    let out = completed_output(&post(&st, &output_body("please TOUCHME", &call, "Process exited with code 0")));
    assert_eq!(out[0]["content"][0]["text"], "Tool finished.");
    assert!(st.remaining_turns().is_empty());
    assert_eq!(st.outputs_for(&call.call_id), vec!["Process exited with code 0".to_string()]);
    assert_eq!(
        st.wait_for_output(&call.call_id, Duration::from_millis(10)).as_deref(),
        Some("Process exited with code 0")
    );

    // An old output followed by a new user message is history, not this turn's output.
    let mut later = output_body("please TOUCHME", &call, "Process exited with code 0");
    later["input"].as_array_mut().unwrap().push(user("next"));
    assert!(!Matcher::OutputFor(call.call_id.clone()).fits(&later, None));
    assert!(Matcher::NewUserTurn.fits(&later, None));
    assert!(Matcher::Contains("next".into()).fits(&later, None));
    assert!(!Matcher::Contains("TOUCHME".into()).fits(&later, None));
}

#[test]
fn matcher_combinators_and_output_parts() {
    let body = json!({"tools": tools(), "input": [
        user("run it"),
        {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1",
         "output": [{"type": "input_text", "text": "line 1"}, {"type": "input_text", "text": "line 2"}]},
    ]});
    assert_eq!(responses_standin::function_call_outputs(&body), vec![("c1".to_string(), "line 1\nline 2".to_string())]);
    assert!(Matcher::OutputFor("c1".into()).fits(&body, None));
    assert!(Matcher::OutputForPrevious.fits(&body, Some("c1")));
    assert!(!Matcher::OutputForPrevious.fits(&body, None));
    assert!(!Matcher::NewUserTurn.fits(&body, None));
    assert!(
        Matcher::All(vec![Matcher::Contains("run".into()), Matcher::BodyContains("line 2".into())]).fits(&body, None)
    );
    assert!(Matcher::AnyOf(vec![Matcher::Contains("nope".into()), Matcher::Any]).fits(&body, None));
    assert!(Matcher::Not(Box::new(Matcher::Contains("nope".into()))).fits(&body, None));
    assert!(responses_standin::is_title_request(&json!({"input": []})));
    assert!(!responses_standin::is_title_request(&body));
}

#[test]
fn script_json_form_round_trips() {
    let text = r#"{
      "turns": [
        {"match": {"contains": "TOUCHME"},
         "reply": {"exec_command": {"cmd": "touch approved.txt", "require_escalated": true,
                                    "justification": "Stand-in wants to create approved.txt"}}},
        {"match": "output_for_previous", "reply": {"text": "Tool finished."}, "delay_ms": 5},
        {"match": {"all": ["new_user_turn", {"not": {"body_contains": "x"}}]},
         "reply": {"function_call": {"name": "update_plan", "arguments": {"plan": []}}}},
        {"reply": {"error": {"status": 500, "message": "boom"}}}
      ],
      "title": "T"
    }"#;
    let s = Script::from_json(text).unwrap();
    assert_eq!(s.turns.len(), 4);
    assert_eq!(s.turns[0].when, Matcher::Contains("TOUCHME".into()));
    assert_eq!(
        s.turns[0].reply,
        Reply::exec_command_escalated("touch approved.txt", "Stand-in wants to create approved.txt")
    );
    assert_eq!(s.turns[1].delay_ms, Some(5));
    assert_eq!(s.turns[3].when, Matcher::Any);
    assert_eq!(s.title, "T");
    assert_eq!(s.fallback_reply, "OK.");
    let again = Script::from_json(&serde_json::to_string(&s).unwrap()).unwrap();
    assert_eq!(again, s);
}

#[test]
fn errors_models_and_unknown_paths() {
    let script = Script::new().turn(Matcher::Any, Reply::Error { status: 500, message: "boom".into() });
    let st = Standin::start(script).unwrap();
    let ans = post(&st, &turn_body("x"));
    assert_eq!(ans.status, 500);
    assert_eq!(ans.json()["error"]["message"], "boom");

    let ans = request(st.addr(), "GET", "/v1/models", None);
    assert_eq!(ans.status, 200);
    assert_eq!(ans.json()["data"][0]["id"], "stand-in-model");

    let ans = request(st.addr(), "GET", "/v1/responses", None);
    assert_eq!(ans.status, 405);
    let ans = request(st.addr(), "POST", "/v1/chat/completions", Some(&json!({})));
    assert_eq!(ans.status, 404);
    let ans = request(st.addr(), "POST", "/v1/responses", Some(&json!("not an object")));
    assert_eq!(ans.status, 400);

    let kinds: Vec<RequestKind> = st.requests().into_iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        [
            RequestKind::Turn { turn: Some(0) },
            RequestKind::Models,
            RequestKind::Other,
            RequestKind::Other,
            RequestKind::Other
        ]
    );
    // The harness's own look at the requests is not recorded.
    let ans = request(st.addr(), "GET", "/_standin/requests", None);
    assert_eq!(ans.json().as_array().unwrap().len(), 5);
    assert_eq!(st.requests().len(), 5);
}

#[test]
fn keep_alive_serves_several_requests_on_one_connection() {
    let st = Standin::start(Script::new().text("one").text("two")).unwrap();
    let mut s = TcpStream::connect(st.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    write_request(&mut s, "POST", "/v1/responses", Some(&turn_body("a")), false);
    let a = read_answer(&mut r);
    write_request(&mut s, "POST", "/v1/responses", Some(&turn_body("b")), false);
    let b = read_answer(&mut r);
    assert_eq!(completed_output(&a)[0]["content"][0]["text"], "one");
    assert_eq!(completed_output(&b)[0]["content"][0]["text"], "two");
    assert_eq!(a.header("connection"), Some("keep-alive"));
}

#[test]
fn every_request_is_appended_to_the_jsonl_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let st = Standin::start_logged(Script::new().exec_command("true").after_output("done"), &log).unwrap();
    post(&st, &turn_body("go"));
    post(&st, &title_body());
    let call = st.wait_for_call(0, Duration::from_secs(1)).unwrap();
    post(&st, &output_body("go", &call, "ok"));
    let lines: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each log line is JSON"))
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["index"], 0);
    assert_eq!(lines[0]["path"], "/v1/responses");
    assert_eq!(lines[0]["reply"]["call"]["call_id"], json!(call.call_id));
    assert_eq!(lines[1]["kind"], "title");
    let last_input = lines[2]["body"]["input"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last_input["type"], "function_call_output");
    assert_eq!(last_input["output"], "ok");
    assert_eq!(lines[2]["reply"]["text"], "done");
}

#[test]
fn refuses_non_loopback_addresses() {
    let err = Standin::start_on("0.0.0.0:0", Script::new(), None).err().expect("must refuse 0.0.0.0");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(
        Standin::start_on("[::1]:0", Script::new(), None).is_ok() || std::net::TcpListener::bind("[::1]:0").is_err()
    );
}

#[test]
fn wait_for_call_times_out_when_nothing_was_emitted() {
    let st = Standin::start(Script::new()).unwrap();
    assert!(st.wait_for_call(0, Duration::from_millis(50)).is_none());
    assert!(st.wait_for_output("call_1", Duration::from_millis(50)).is_none());
}

#[test]
fn the_binary_serves_a_script_and_writes_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    let log = dir.path().join("requests.jsonl");
    std::fs::write(&script, r#"{"turns": [{"reply": {"text": "from the binary"}}]}"#).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_responses-standin"))
        .args(["--script", script.to_str().unwrap(), "--port", "0", "--log", log.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let result = std::panic::catch_unwind(|| {
        let addr: SocketAddr = line.trim().strip_prefix("listening on ").expect("listening line").parse().unwrap();
        assert!(addr.ip().is_loopback());
        let ans = request(addr, "POST", "/v1/responses", Some(&turn_body("hi")));
        assert_eq!(completed_output(&ans)[0]["content"][0]["text"], "from the binary");
        let logged = std::fs::read_to_string(&log).unwrap();
        assert_eq!(logged.lines().count(), 1);
    });
    let _ = child.kill();
    let _ = child.wait();
    result.unwrap();

    // Bad arguments exit 2 without serving.
    let out = Command::new(env!("CARGO_BIN_EXE_responses-standin")).args(["--port", "http"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(env!("CARGO_BIN_EXE_responses-standin")).args(["--addr", "0.0.0.0:0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
}
