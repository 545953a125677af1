//! Security tests: the HTTP edge. A real `lab serve`, real tmux, fake-claude; requests are
//! written by hand on a TcpStream so Host, Origin and friends are exactly what an
//! attacker's page (or a DNS-rebound name) would send.

use crate::common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Request headers, in order.
type Headers<'a> = Vec<(&'a str, &'a str)>;

/// An HTTP response as read off the wire.
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
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    fn error(&self) -> String {
        self.json()["error"].as_str().unwrap_or("").to_string()
    }
}

thread_local! {
    /// The token of the lab this test (its thread) talks to, sent by [`raw`] unless the
    /// request names its own `Authorization` or the test cleared it.
    static BEARER: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// [`raw`] sends `token` from now on in this test (`None`: no token).
fn use_token(token: Option<String>) {
    BEARER.with(|b| *b.borrow_mut() = token);
}

/// One request on its own connection: `headers` are sent as given (no Host unless
/// listed), with the test's token ([`use_token`]); a body gets a Content-Length. Event
/// streams are read up to their first event.
fn raw(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\n");
    for (k, v) in headers {
        req += &format!("{k}: {v}\r\n");
    }
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("authorization")) {
        if let Some(t) = BEARER.with(|b| b.borrow().clone()) {
            req += &format!("Authorization: Bearer {t}\r\n");
        }
    }
    let has_length = headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-length"));
    if !has_length && (!body.is_empty() || method == "POST") {
        req += &format!("Content-Length: {}\r\n", body.len());
    }
    req += "Connection: close\r\n\r\n";
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut r = BufReader::new(s);
    let mut status_line = String::new();
    r.read_line(&mut status_line).unwrap();
    let status: u16 = status_line.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| {
        panic!("{method} {path}: no status line: {status_line:?}");
    });
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    let mut resp = Resp { status, headers, body: Vec::new() };
    if method == "HEAD" {
        return resp;
    }
    let stream = resp.header("content-type").is_some_and(|c| c.starts_with("text/event-stream"));
    if let Some(n) = resp.header("content-length").and_then(|n| n.parse::<usize>().ok()) {
        resp.body.resize(n, 0);
        r.read_exact(&mut resp.body).unwrap();
    } else if resp.header("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).unwrap();
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).unwrap();
            resp.body.extend_from_slice(&chunk[..n]);
            if stream && resp.text().contains("\n\n") {
                break;
            }
        }
    } else {
        r.read_to_end(&mut resp.body).unwrap();
    }
    resp
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':').next().unwrap().trim_end_matches('/').parse().unwrap()
}

fn idle_agent() -> Value {
    json!({"steps": [{"say": "Ready."}, {"idle": {}}]})
}

/// A lab on loopback with one idle fake-claude run: (world, lab, port, run id).
fn idle_run() -> (World, Lab, u16, String) {
    let w = World::new();
    w.use_fake_claude(&idle_agent());
    let lab = w.serve();
    use_token(lab.token.clone());
    let port = port_of(&lab.url);
    let id = lab.create_run(&w, "claude-code", "hello")["id"].as_str().unwrap().to_string();
    lab.wait_state(&id, "idle");
    (w, lab, port, id)
}

fn tmux_sessions(w: &World) -> usize {
    let out = w.tmux(&["list-sessions", "-F", "#{session_name}"]);
    String::from_utf8_lossy(&out.stdout).lines().count()
}

/// Every route lab serves (plus the fallback, OPTIONS and HEAD), with a body that the
/// handler would accept: checked against the router's own source ([`served_routes`]),
/// so a route added there and not here fails the tests that use this list.
fn routes(w: &World, id: &str) -> Vec<(&'static str, String, Value)> {
    let list = routes_to_try(w, id);
    let missing: Vec<String> = served_routes()
        .into_iter()
        .filter(|(method, pattern)| !list.iter().any(|(m, path, _)| m == method && matches_pattern(path, pattern)))
        .map(|(m, p)| format!("{m} {p}"))
        .collect();
    assert!(missing.is_empty(), "routes the router serves and the security tests do not try: {missing:?}");
    list
}

/// Every `(method, path pattern)` the router serves, read from its source: each
/// `.route(PATH, get(…).post(…))` in host/src/edge outside test modules (a path given
/// as a constant is looked up where it is defined).
fn served_routes() -> Vec<(String, String)> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![src.join("edge/http.rs")];
    let mut dir: Vec<_> = std::fs::read_dir(src.join("edge/http")).unwrap().map(|e| e.unwrap().path()).collect();
    dir.sort();
    files.extend(dir);
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        for (at, _) in code.match_indices(".route(") {
            let call = balanced(&code[at + ".route".len()..]);
            let (path, methods) = call[1..call.len() - 1].split_once(',').unwrap();
            let path = path.trim();
            let path = match path.strip_prefix('"') {
                Some(p) => p.trim_end_matches('"').to_string(),
                None => constant(&src, path),
            };
            for m in ["get", "post", "put", "delete", "patch"] {
                let called = methods.match_indices(&format!("{m}(")).any(|(i, _)| {
                    i == 0 || !methods.as_bytes()[i - 1].is_ascii_alphanumeric() && methods.as_bytes()[i - 1] != b'_'
                });
                if called {
                    out.push((m.to_uppercase(), path.clone()));
                }
            }
        }
    }
    assert!(out.len() > 30, "the router's routes were found: {out:?}");
    out.sort();
    out.dedup();
    out
}

/// The parenthesised text `s` starts with, its parentheses balanced.
fn balanced(s: &str) -> &str {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return &s[..=i];
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced: {s}")
}

/// The value of the `&str` constant `path` (`crate::a::b::NAME`) names in host/src.
fn constant(src: &std::path::Path, path: &str) -> String {
    let segs: Vec<&str> = path.trim_start_matches("crate::").split("::").collect();
    let (name, module) = segs.split_last().unwrap();
    let base = src.join(module.join("/"));
    let text = std::fs::read_to_string(base.with_extension("rs"))
        .or_else(|_| std::fs::read_to_string(base.join("mod.rs")))
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    let def = format!("const {name}: &str = \"");
    let at = text.find(&def).unwrap_or_else(|| panic!("{path} is defined as a string"));
    text[at + def.len()..].split('"').next().unwrap().to_string()
}

/// Whether the concrete `path` (its query left off) is one `pattern` serves.
fn matches_pattern(path: &str, pattern: &str) -> bool {
    let path = path.split('?').next().unwrap();
    let (a, b): (Vec<&str>, Vec<&str>) = (path.split('/').collect(), pattern.split('/').collect());
    a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| y.starts_with('{') || x == y)
}

#[test]
fn the_route_list_is_read_from_the_router() {
    let served = served_routes();
    for want in
        [("GET", "/runs/events"), ("POST", "/runs/{id}/fork"), ("GET", "/runners/connect"), ("DELETE", "/devices/{id}")]
    {
        assert!(served.iter().any(|(m, p)| m == want.0 && p == want.1), "{want:?} in {served:?}");
    }
    assert!(matches_pattern("/runs/r-1/messages?limit=5", "/runs/{id}/messages"));
    assert!(!matches_pattern("/runs/r-1", "/runs/{id}/messages"));
    assert!(matches_pattern("/app.js", "/{file}"));
}

fn routes_to_try(w: &World, id: &str) -> Vec<(&'static str, String, Value)> {
    let create = json!({"provider": "claude-code", "workdir": w.workdir, "prompt": "hi", "permission_mode": "bypassPermissions"});
    vec![
        ("GET", "/".into(), Value::Null),
        ("HEAD", "/".into(), Value::Null),
        ("GET", "/app.js".into(), Value::Null),
        ("GET", "/style.css".into(), Value::Null),
        ("GET", "/providers".into(), Value::Null),
        ("GET", "/info".into(), Value::Null),
        ("GET", "/runs".into(), Value::Null),
        ("GET", "/runs?limit=5".into(), Value::Null),
        ("GET", "/runs/events".into(), Value::Null),
        ("GET", format!("/runs/{id}"), Value::Null),
        ("GET", format!("/runs/{id}/messages"), Value::Null),
        ("GET", format!("/runs/{id}/events"), Value::Null),
        ("GET", format!("/runs/{id}/terminal"), Value::Null),
        ("GET", "/login".into(), Value::Null),
        ("POST", "/login".into(), json!({"token": "x"})),
        ("POST", "/runs".into(), create),
        ("POST", format!("/runs/{id}/messages"), json!({"text": "hello"})),
        ("POST", format!("/runs/{id}/dialog/answer"), json!({"tool_id": "toolu_1", "answers": [{"option": 0}]})),
        ("GET", format!("/runs/{id}/diff"), Value::Null),
        ("POST", format!("/runs/{id}/review"), json!({"summary": "ok"})),
        ("POST", format!("/runs/{id}/merge"), json!({})),
        ("POST", format!("/runs/{id}/discard"), json!({})),
        ("GET", "/push/key".into(), Value::Null),
        ("GET", "/push/subscriptions".into(), Value::Null),
        ("POST", "/push/subscriptions".into(), push_subscription()),
        ("DELETE", "/push/subscriptions/ps-none".into(), json!({})),
        ("POST", "/push/key/rotate".into(), json!({})),
        ("GET", "/devices".into(), Value::Null),
        ("POST", "/pair".into(), json!({"name": "phone"})),
        ("DELETE", "/devices/0123456789abcdef".into(), json!({})),
        ("POST", format!("/runs/{id}/terminal/control"), json!({"take": false})),
        ("GET", format!("/runs/{id}/terminal/stream"), Value::Null),
        ("GET", "/audit".into(), Value::Null),
        ("GET", format!("/runs/{id}/usage"), Value::Null),
        ("GET", "/usage?group=model".into(), Value::Null),
        ("GET", "/search?q=hello".into(), Value::Null),
        ("PUT", format!("/runs/{id}/auto-resume"), json!({"on": false})),
        ("GET", "/rules".into(), Value::Null),
        ("POST", "/rules".into(), json!({"name": "t", "action": "allow", "match": {"pattern": "true"}})),
        ("POST", "/rules/test".into(), json!({"provider": "p", "tool": "t", "subject": "true"})),
        ("GET", "/rules/r-000000000000".into(), Value::Null),
        ("PUT", "/rules/r-000000000000".into(), json!({"name": "t", "action": "ask"})),
        ("DELETE", "/rules/r-000000000000".into(), json!({})),
        ("POST", format!("/runs/{id}/dialog/rule"), json!({"tool_id": "none", "scope": "repository"})),
        ("PUT", format!("/runs/{id}/rules"), json!({"on": true})),
        ("PUT", format!("/runs/{id}/egress"), json!({"allow": ["example.com:443"]})),
        ("POST", format!("/runs/{id}/resume"), json!({})),
        ("POST", format!("/runs/{id}/fork"), json!({"prompt": "and then"})),
        ("POST", format!("/runs/{id}/stop"), json!({})),
        ("GET", "/hosts".into(), Value::Null),
        ("GET", "/runners/connect".into(), Value::Null),
        ("OPTIONS", "/runs".into(), Value::Null),
        ("GET", "/no-such-thing".into(), Value::Null),
    ]
}

/// A PushSubscription a browser could send: an endpoint on loopback (never called: no
/// run of these tests waits) and a valid P-256 point (the curve's generator) as its key.
fn push_subscription() -> Value {
    use base64::Engine;
    let hex = "046b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c2964fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5";
    let point: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
    let e = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    json!({"endpoint": "https://push.invalid/push/sub", "keys": {"p256dh": e.encode(point), "auth": e.encode([1u8; 16])}})
}

fn send(port: u16, method: &str, path: &str, extra: &[(&str, &str)], body: &Value) -> Resp {
    let mut headers = extra.to_vec();
    let bytes = if body.is_null() { Vec::new() } else { serde_json::to_vec(body).unwrap() };
    if !body.is_null() {
        headers.push(("Content-Type", "application/json"));
    }
    raw(port, method, path, &headers, &bytes)
}

#[test]
fn foreign_hosts_and_origins_are_refused_on_every_route() {
    let (w, lab, port, id) = idle_run();
    let sessions = tmux_sessions(&w);
    let own = format!("127.0.0.1:{port}");
    let routes = routes(&w, &id);
    let n = routes.len();

    // DNS rebinding: a foreign name (or none) never reaches a handler.
    let evil = format!("evil.example:{port}");
    for (label, hosts) in [("foreign Host", vec![("Host", evil.as_str())]), ("no Host", vec![])] {
        let mut refused = 0;
        for (method, path, body) in &routes {
            let r = send(port, method, path, &hosts, body);
            assert_eq!(r.status, 421, "{label}: {method} {path}: {}", r.text());
            if *method != "HEAD" {
                assert_eq!(r.error(), "host_not_allowed", "{method} {path}");
            }
            assert!(r.header("access-control-allow-origin").is_none());
            refused += 1;
        }
        assert_eq!(refused, n, "{label}: {refused}/{n} refused");
    }

    // A foreign page: any Origin that is not lab's own, and Sec-Fetch-Site: cross-site.
    let next_port = format!("http://127.0.0.1:{}", port + 1);
    let foreign: [&[(&str, &str)]; 5] = [
        &[("Origin", "http://evil.example")],
        &[("Origin", "null")],
        &[("Origin", "http://localhost:1234")],
        &[("Origin", next_port.as_str())],
        &[("Sec-Fetch-Site", "cross-site")],
    ];
    for extra in foreign {
        let mut headers = vec![("Host", own.as_str())];
        headers.extend_from_slice(extra);
        let mut refused = 0;
        for (method, path, body) in &routes {
            let r = send(port, method, path, &headers, body);
            assert_eq!(r.status, 403, "{extra:?}: {method} {path}: {}", r.text());
            if *method != "HEAD" {
                assert_eq!(r.error(), "origin_not_allowed", "{method} {path}");
            }
            refused += 1;
        }
        assert_eq!(refused, n, "{extra:?}: {refused}/{n} refused");
    }
    assert_eq!(tmux_sessions(&w), sessions, "a refused POST /runs (bypassPermissions) started nothing");
    assert_eq!(lab.get("/runs").1.as_array().unwrap().len(), 1);
    assert_eq!(lab.view(&id)["state"], "idle", "the run was not stopped");

    // The same requests from lab's own address or origin get through.
    let local = format!("localhost:{port}");
    let local_origin = format!("http://localhost:{port}");
    let own_origin = format!("http://{own}");
    let good: [&[(&str, &str)]; 4] = [
        &[("Host", own.as_str())],
        &[("Host", local.as_str()), ("Origin", local_origin.as_str())],
        &[("Host", own.as_str()), ("Origin", own_origin.as_str()), ("Sec-Fetch-Site", "same-origin")],
        &[("Host", "[::1]")],
    ];
    for headers in good {
        let mut served = 0;
        for (method, path, _) in routes.iter().filter(|(m, _, _)| *m == "GET" || *m == "HEAD") {
            let r = send(port, method, path, headers, &Value::Null);
            // (`/login` is the login form: a lab that takes no token redirects it to the UI.)
            // (The idle run's workdir is no repository: its diff handler says so.)
            // (No rule has that id: its handler's own 404.)
            let expected = if path == "/no-such-thing" || path == "/rules/r-000000000000" {
                404
            } else if path.ends_with("/diff") {
                409
            } else if path.ends_with("/terminal/stream") || path == "/runners/connect" {
                // (A plain GET, not a WebSocket's, nor a runner's: its handler's own refusal.)
                400
            } else {
                200
            };
            assert_eq!(r.status, expected, "{headers:?}: {method} {path}: {}", r.text());
            served += 1;
        }
        assert_eq!(served, 28, "{headers:?}");
    }
    // State-changing routes reach their handlers from lab's own page.
    let own_page = [("Host", own.as_str()), ("Origin", own_origin.as_str())];
    // (`POST /login` with a wrong token: its handler's own refusal.)
    let expect = [
        ("/login", 401),
        ("/runs", 201),
        ("/messages", 202),
        ("/dialog/answer", 409),
        ("/review", 409),
        ("/merge", 409),
        ("/discard", 409),
        ("/push/subscriptions", 201),
        ("/push/subscriptions/ps-none", 404),
        ("/push/key/rotate", 200),
        ("/pair", 201),
        ("/devices/0123456789abcdef", 404),
        ("/terminal/control", 200),
        ("/rules", 201),
        ("/rules/test", 200),
        ("/rules/r-000000000000", 404),
        ("/dialog/rule", 409),
        ("/resume", 409),
        ("/fork", 201),
        ("/stop", 200),
        ("/runs", 405),
    ];
    let posts: Vec<_> = routes.iter().filter(|(m, _, _)| *m == "POST" || *m == "DELETE" || *m == "OPTIONS").collect();
    assert_eq!(posts.len(), expect.len());
    for ((method, path, body), (suffix, status)) in posts.into_iter().zip(expect) {
        assert!(path.ends_with(suffix));
        let r = send(port, method, path, &own_page, body);
        assert_eq!(r.status, status, "{method} {path}: {}", r.text());
    }
    assert_eq!(lab.view(&id)["state"], "ended", "lab's own page could stop the run");
}

#[test]
fn cross_origin_form_posts_cannot_start_or_stop_runs() {
    let (w, lab, port, id) = idle_run();
    let sessions = tmux_sessions(&w);
    let own = format!("127.0.0.1:{port}");
    let create = format!(
        r#"{{"provider":"claude-code","workdir":{:?},"prompt":"pwned","permission_mode":"bypassPermissions"}}"#,
        w.workdir.display().to_string()
    );
    let form = "provider=claude-code&prompt=pwned";
    let stop = format!("/runs/{id}/stop");
    let mut tried = 0;
    for path in ["/runs", stop.as_str()] {
        // What an HTML form or a no-cors fetch can send: (status, code) expected.
        let cases: [(Headers<'_>, &str, u16, &str); 6] = [
            (
                vec![("Origin", "http://evil.example"), ("Content-Type", "application/x-www-form-urlencoded")],
                form,
                403,
                "origin_not_allowed",
            ),
            (
                vec![("Origin", "http://evil.example"), ("Content-Type", "text/plain")],
                &create,
                403,
                "origin_not_allowed",
            ),
            (
                vec![("Sec-Fetch-Site", "cross-site"), ("Content-Type", "text/plain")],
                &create,
                403,
                "origin_not_allowed",
            ),
            // A browser that sent no Origin: the body type alone keeps it out.
            (vec![("Content-Type", "application/x-www-form-urlencoded")], form, 415, "unsupported_media_type"),
            (vec![("Content-Type", "text/plain;charset=UTF-8")], &create, 415, "unsupported_media_type"),
            (vec![], "", 415, "unsupported_media_type"),
        ];
        for (extra, body, status, code) in cases {
            let mut headers = vec![("Host", own.as_str())];
            headers.extend(extra.iter().copied());
            let r = raw(port, "POST", path, &headers, body.as_bytes());
            assert_eq!((r.status, r.error().as_str()), (status, code), "POST {path} {extra:?}: {}", r.text());
            tried += 1;
        }
    }
    assert_eq!(tried, 12, "12/12 refused");
    assert_eq!(tmux_sessions(&w), sessions, "no run was started");
    assert_eq!(lab.get("/runs").1.as_array().unwrap().len(), 1);
    assert_eq!(lab.view(&id)["state"], "idle", "the run keeps running");
}

#[test]
fn bad_requests_get_json_4xx_and_huge_sequence_numbers_do_not_crash() {
    let (_w, lab, port, id) = idle_run();
    let own = format!("127.0.0.1:{port}");
    let json_ct = [("Host", own.as_str()), ("Content-Type", "application/json")];
    let msgs = format!("/runs/{id}/messages");
    let too_long = (1024 * 1024 + 1).to_string();
    let big_head =
        [("Host", own.as_str()), ("Content-Type", "application/json"), ("Content-Length", too_long.as_str())];
    // (method, path, headers, body, status, error code)
    type Case<'a> = (&'a str, String, Headers<'a>, Vec<u8>, u16, &'a str);
    let cases: Vec<Case<'_>> = vec![
        ("POST", msgs.clone(), big_head.to_vec(), vec![], 413, "payload_too_large"),
        ("POST", "/runs".into(), big_head.to_vec(), vec![], 413, "payload_too_large"),
        (
            "POST",
            msgs.clone(),
            vec![("Host", own.as_str())],
            br#"{"text":"x"}"#.to_vec(),
            415,
            "unsupported_media_type",
        ),
        ("POST", msgs.clone(), json_ct.to_vec(), b"{not json".to_vec(), 400, "bad_request"),
        ("POST", msgs.clone(), json_ct.to_vec(), br#"{"text":"x","extra":1}"#.to_vec(), 400, "bad_request"),
        ("POST", msgs.clone(), json_ct.to_vec(), br#"{"text":5}"#.to_vec(), 400, "bad_request"),
        ("POST", msgs.clone(), json_ct.to_vec(), b"{\"text\":\"\xff\"}".to_vec(), 400, "bad_request"),
        ("GET", "/runs/%FF%FE/messages".into(), vec![("Host", own.as_str())], vec![], 400, "bad_request"),
        ("GET", format!("/runs/{id}/messages?after=-1"), vec![("Host", own.as_str())], vec![], 400, "bad_request"),
        // The page parameters: whole numbers only, a limit of 1..=1000.
        ("GET", format!("/runs/{id}/messages?before=-1"), vec![("Host", own.as_str())], vec![], 400, "bad_request"),
        ("GET", format!("/runs/{id}/messages?limit=0"), vec![("Host", own.as_str())], vec![], 400, "bad_request"),
        ("GET", format!("/runs/{id}/messages?limit=1001"), vec![("Host", own.as_str())], vec![], 400, "bad_request"),
        (
            "GET",
            format!("/runs/{id}/messages?limit=99999999999999999999999"),
            vec![("Host", own.as_str())],
            vec![],
            400,
            "bad_request",
        ),
        ("GET", format!("/runs/{id}/events?after=%00"), vec![("Host", own.as_str())], vec![], 400, "bad_request"),
        // The same Host check as every other request, whatever the query.
        (
            "GET",
            format!("/runs/{id}/messages?limit=5"),
            vec![("Host", "evil.example:80")],
            vec![],
            421,
            "host_not_allowed",
        ),
        ("DELETE", format!("/runs/{id}"), json_ct.to_vec(), vec![], 405, "method_not_allowed"),
        ("PUT", "/runs".into(), json_ct.to_vec(), b"{}".to_vec(), 405, "method_not_allowed"),
        ("GET", format!("/runs/{id}/stop"), vec![("Host", own.as_str())], vec![], 405, "method_not_allowed"),
        ("OPTIONS", "/runs".into(), vec![("Host", own.as_str())], vec![], 405, "method_not_allowed"),
    ];
    for (method, path, headers, body, status, code) in &cases {
        let r = raw(port, method, path, headers, body);
        assert_eq!((r.status, r.error().as_str()), (*status, *code), "{method} {path}: {}", r.text());
        assert!(r.json()["message"].as_str().is_some_and(|m| !m.is_empty()), "{method} {path}: {}", r.text());
    }
    // A body over the limit without a Content-Length (chunked) is refused as well (one
    // byte over, so lab has read everything it was sent when it answers).
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let token = lab.token.clone().expect("the token is required on loopback");
    let head = format!(
        "POST {msgs} HTTP/1.1\r\nHost: {own}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    let big = "a".repeat(1024 * 1024 + 1);
    let mut req = head.into_bytes();
    req.extend(format!("{:x}\r\n{big}\r\n0\r\n\r\n", big.len()).into_bytes());
    let _ = s.write_all(&req);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut bytes = Vec::new();
    let _ = s.read_to_end(&mut bytes);
    let out = String::from_utf8_lossy(&bytes);
    assert!(out.starts_with("HTTP/1.1 413"), "{}", &out[..out.len().min(300)]);
    assert!(out.contains(r#""error":"payload_too_large""#), "{out}");

    // The largest sequence number is a valid "after": nothing comes after it.
    let max = u64::MAX.to_string();
    let r = raw(port, "GET", &format!("/runs/{id}/messages?after={max}"), &[("Host", own.as_str())], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["messages"], json!([]));
    // …and the largest "before" is everything, a page of it the newest.
    let r = raw(port, "GET", &format!("/runs/{id}/messages?before={max}&limit=1000"), &[("Host", own.as_str())], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["messages"], lab.view(&id)["messages"]);
    let r = raw(port, "GET", &format!("/runs/{id}/events"), &[("Host", own.as_str()), ("Last-Event-ID", &max)], b"");
    assert_eq!(r.status, 200);
    let data = r.text();
    let data = data.lines().find_map(|l| l.strip_prefix("data: ")).unwrap_or_else(|| panic!("no event: {data}"));
    assert_eq!(serde_json::from_str::<Value>(data).unwrap()["messages"], json!([]));
    assert_eq!(lab.view(&id)["state"], "idle", "lab keeps serving");
    assert!(lab.view(&id)["messages"].as_array().is_some_and(|m| !m.is_empty()));
}

/// A `lab serve` with any arguments; its stdout is collected line by line.
struct Served {
    child: Child,
    port: u16,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Served {
    fn start(w: &World, args: &[&str]) -> Served {
        let mut child = Command::new(LAB)
            .arg("serve")
            .args(args)
            .arg("--home")
            .arg(&w.home)
            .env("HOME", &w.agent_home)
            .env("LAB_LOG", "info,lab=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().unwrap();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let first =
            wait_for(Duration::from_secs(30), "lab serve's first line", || lines.lock().unwrap().first().cloned());
        let port = port_of(first.strip_prefix("lab: serving on ").unwrap_or_else(|| panic!("{first}")));
        Served { child, port, lines }
    }

    fn line(&self, prefix: &str) -> Option<String> {
        wait_for(Duration::from_secs(5), "the banner", || (self.lines.lock().unwrap().len() > 1).then_some(()));
        self.lines.lock().unwrap().iter().find(|l| l.starts_with(prefix)).cloned()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        terminate(&mut self.child);
    }
}

fn lab_token(w: &World, rotate: bool) -> String {
    let mut cmd = Command::new(LAB);
    cmd.arg("token").arg("--home").arg(&w.home);
    if rotate {
        cmd.arg("--rotate");
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn lab_log(w: &World) -> String {
    std::fs::read_to_string(w.home.join("logs/lab.log")).unwrap_or_default()
}

#[test]
fn off_loopback_nothing_is_served_without_the_token() {
    let w = World::new();
    w.use_fake_claude(&idle_agent());
    let lab = Served::start(&w, &["--addr", "0.0.0.0:0"]);
    let port = lab.port;
    let host = format!("127.0.0.1:{port}");
    assert!(lab.line("lab: WARNING: listening on 0.0.0.0").is_some(), "{:?}", lab.lines.lock().unwrap());
    let link = lab.line("lab: login link").expect("a login link is printed");
    let token = std::fs::read_to_string(w.home.join("token")).unwrap().trim().to_string();
    assert_eq!(token.len(), 64);
    assert!(!link.contains(&token), "the link carries a login code, not the token");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(w.home.join("token")).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(lab_token(&w, false), token, "`lab token` prints the token lab serve uses");

    // A wrong token first: the refusals below would fill the log's window (at most
    // refusals::PER_WINDOW per 10 s are logged).
    let bad = send(
        port,
        "GET",
        "/runs",
        &[("Host", host.as_str()), ("Authorization", "Bearer not-the-token-0000")],
        &Value::Null,
    );
    assert_eq!(bad.status, 401);
    // No token: nothing but /login is served, and nothing starts.
    let routes = routes(&w, "r-0123456789ab");
    let mut refused = 0;
    // (Runners authenticate with their machine's credential, not the token.)
    let served_by_token =
        |(m, p, _): &&(&str, String, Value)| *m != "OPTIONS" && !p.starts_with("/login") && p != "/runners/connect";
    for (method, path, body) in routes.iter().filter(served_by_token) {
        let r = send(port, method, path, &[("Host", host.as_str())], body);
        assert_eq!(r.status, 401, "{method} {path}: {}", r.text());
        if path == "/" && *method == "GET" {
            assert!(r.text().contains("lab token"), "the UI is replaced by the login form");
        } else if *method != "HEAD" && path != "/" {
            assert_eq!(r.error(), "unauthorized", "{method} {path}");
        }
        refused += 1;
    }
    assert_eq!(refused, 49, "{refused}/49 refused");
    assert_eq!(tmux_sessions(&w), 0, "nothing started");
    let log = wait_for(Duration::from_secs(5), "the refusal in lab.log", || {
        Some(lab_log(&w)).filter(|l| l.contains("wrong token"))
    });
    assert!(log.contains("127.0.0.1") && log.contains("/runs"), "remote and route are logged: {log}");
    assert!(!log.contains("not-the-token-0000") && !log.contains(&token), "no secret is logged");

    // The token as a Bearer: everything works.
    let bearer = format!("Bearer {token}");
    let auth = [("Host", host.as_str()), ("Authorization", bearer.as_str())];
    let r = send(port, "GET", "/runs", &auth, &Value::Null);
    assert_eq!((r.status, r.json()), (200, json!([])));
    let r =
        send(port, "POST", "/runs", &auth, &json!({"provider": "claude-code", "workdir": w.workdir, "prompt": "hi"}));
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["id"].as_str().unwrap().to_string();

    // The login link: its GET (what a chat app's link preview fetches) is a page with one
    // button and burns nothing; the button's POST redeems the code, once, for a cookie
    // that is not the token.
    let code_path = &link[link.find("/login?code=").unwrap()..];
    let code = code_path.split_once("code=").unwrap().1.to_string();
    for _ in 0..3 {
        let r = send(port, "GET", code_path, &[("Host", host.as_str())], &Value::Null);
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(r.header("set-cookie").is_none() && r.text().contains("Log in this device"), "{}", r.text());
        assert!(!r.text().contains(&code), "the page holds no secret");
        assert_eq!(r.header("cache-control"), Some("no-store"));
    }
    let r = send(port, "POST", "/login", &[("Host", host.as_str())], &json!({"code": code}));
    assert_eq!(r.status, 200, "{}", r.text());
    let set_cookie = r.header("set-cookie").unwrap().to_string();
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set_cookie.split("; ").any(|a| a == attr), "{attr} in {set_cookie}");
    }
    let cookie = set_cookie.split(';').next().unwrap().to_string();
    assert!(cookie.starts_with("lab_session=") && !cookie.contains(&token), "{cookie}");
    let key = r.json()["device_key"].as_str().unwrap().to_string();
    assert_eq!(r.header("cache-control"), Some("no-store"));
    // The cookie alone (what another server on another port of 127.0.0.1 receives from
    // the browser) opens the UI's files and nothing else; the API needs the device key
    // the page keeps in its origin's storage.
    let cookie_alone = [("Host", host.as_str()), ("Cookie", cookie.as_str())];
    assert_eq!(send(port, "GET", "/", &cookie_alone, &Value::Null).status, 200);
    assert_eq!(send(port, "GET", "/app.js", &cookie_alone, &Value::Null).status, 200);
    for (method, path) in [
        ("GET", format!("/runs/{id}")),
        ("GET", "/runs".into()),
        ("GET", format!("/runs/{id}/events")),
        ("GET", "/runs/events".into()),
    ] {
        let r = send(port, method, &path, &cookie_alone, &Value::Null);
        assert_eq!(r.status, 401, "{path}: {}", r.text());
        assert!(r.text().contains("device key"), "{}", r.text());
    }
    let r = send(port, "POST", &format!("/runs/{id}/stop"), &cookie_alone, &json!({}));
    assert_eq!(r.status, 401, "{}", r.text());
    let wrong = [("Host", host.as_str()), ("Cookie", cookie.as_str()), ("X-Lab-Device-Key", &"0".repeat(64))];
    assert_eq!(send(port, "GET", "/runs", &wrong, &Value::Null).status, 401);
    let with_cookie = [("Host", host.as_str()), ("Cookie", cookie.as_str()), ("X-Lab-Device-Key", key.as_str())];
    assert_eq!(send(port, "GET", &format!("/runs/{id}"), &with_cookie, &Value::Null).status, 200);
    assert_eq!(send(port, "GET", "/", &with_cookie, &Value::Null).status, 200);
    // An EventSource sends no headers: the key in the stream's query, that route only.
    let events = send(port, "GET", &format!("/runs/{id}/events?device_key={key}"), &cookie_alone, &Value::Null);
    assert_eq!(events.status, 200, "{}", events.text());
    let list = send(port, "GET", &format!("/runs/events?device_key={key}"), &cookie_alone, &Value::Null);
    assert_eq!(list.status, 200, "the run list's stream too: {}", list.text());
    assert_eq!(send(port, "GET", &format!("/runs?device_key={key}"), &cookie_alone, &Value::Null).status, 401);
    let again = send(port, "POST", "/login", &[("Host", host.as_str())], &json!({"code": code}));
    assert_eq!((again.status, again.error().as_str()), (401, "unauthorized"), "a login code works once");
    let both = send(port, "POST", "/login", &[("Host", host.as_str())], &json!({"code": code, "token": token}));
    assert_eq!(both.status, 400, "one of code or token");
    let https = send(
        port,
        "POST",
        "/login",
        &[("Host", host.as_str()), ("X-Forwarded-Proto", "https")],
        &json!({"token": token}),
    );
    assert_eq!(https.status, 200);
    let https_cookie = https.header("set-cookie").unwrap();
    assert!(https_cookie.contains("; Secure") && https_cookie.starts_with("lab_session="), "{https_cookie}");
    assert!(!https_cookie.starts_with(&cookie), "each login is its own device: {https_cookie}");
    let wrong = send(port, "POST", "/login", &[("Host", host.as_str())], &json!({"token": "guess-guess-guess"}));
    assert_eq!((wrong.status, wrong.error().as_str()), (401, "unauthorized"));

    // Rotation: the old token and the old cookie stop working at once.
    let new = lab_token(&w, true);
    assert_ne!(new, token);
    assert_eq!(send(port, "GET", "/runs", &auth, &Value::Null).status, 401, "old token");
    assert_eq!(send(port, "GET", "/runs", &with_cookie, &Value::Null).status, 401, "old cookie");
    let new_bearer = format!("Bearer {new}");
    let r =
        send(port, "GET", "/runs", &[("Host", host.as_str()), ("Authorization", new_bearer.as_str())], &Value::Null);
    assert_eq!(r.status, 200);
    assert!(!lab_log(&w).contains("guess-guess-guess"));
}

#[test]
fn require_token_on_loopback_and_operator_allowed_hosts_and_origins() {
    let w = World::new();
    w.use_fake_claude(&idle_agent());
    let lab = Served::start(
        &w,
        &[
            "--addr",
            "127.0.0.1:0",
            "--require-token",
            "--allowed-host",
            "lab.example",
            "--allowed-origin",
            "https://ui.example",
        ],
    );
    let port = lab.port;
    assert!(lab.line("lab: login link").is_some());
    assert!(lab.line("lab: WARNING").is_none(), "loopback is not reachable from elsewhere");
    let host = format!("127.0.0.1:{port}");
    assert_eq!(send(port, "GET", "/runs", &[("Host", host.as_str())], &Value::Null).status, 401);
    let bearer = format!("Bearer {}", lab_token(&w, false));
    for headers in [
        vec![("Host", host.as_str()), ("Authorization", bearer.as_str())],
        vec![("Host", "lab.example"), ("Authorization", bearer.as_str())],
        vec![("Host", "LAB.example:443"), ("Origin", "https://lab.example"), ("Authorization", bearer.as_str())],
        vec![
            ("Host", host.as_str()),
            ("Origin", "https://ui.example"),
            ("Sec-Fetch-Site", "cross-site"),
            ("Authorization", bearer.as_str()),
        ],
    ] {
        let r = send(port, "GET", "/runs", &headers, &Value::Null);
        assert_eq!(r.status, 200, "{headers:?}: {}", r.text());
    }
    for (headers, status) in [
        (vec![("Host", "other.example"), ("Authorization", bearer.as_str())], 421),
        (vec![("Host", "lab.example"), ("Origin", "https://other.example"), ("Authorization", bearer.as_str())], 403),
    ] {
        assert_eq!(send(port, "GET", "/runs", &headers, &Value::Null).status, status, "{headers:?}");
    }

    // A browser on the allowed origin can use it: its preflight (no token, as browsers
    // send it) is answered, and every answer names the origin, errors too. Before,
    // the preflight got 405 and the browser never sent the request.
    use_token(None);
    let preflight = |origin: &str| {
        raw(
            port,
            "OPTIONS",
            "/runs",
            &[
                ("Host", host.as_str()),
                ("Origin", origin),
                ("Sec-Fetch-Site", "cross-site"),
                ("Access-Control-Request-Method", "POST"),
                ("Access-Control-Request-Headers", "authorization,content-type"),
            ],
            b"",
        )
    };
    let r = preflight("https://ui.example");
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(r.header("access-control-allow-origin"), Some("https://ui.example"));
    assert_eq!(r.header("access-control-allow-methods"), Some("GET, POST, PUT, DELETE, HEAD"));
    assert_eq!(r.header("access-control-allow-headers"), Some("authorization, content-type, last-event-id"));
    assert_eq!(r.header("access-control-max-age"), Some("600"));
    assert_eq!(r.header("access-control-allow-credentials"), None, "the cookie never travels cross-origin");
    let r = preflight("https://other.example");
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.header("access-control-allow-origin"), None);
    let from_ui = [("Host", host.as_str()), ("Origin", "https://ui.example"), ("Sec-Fetch-Site", "cross-site")];
    let r = raw(port, "GET", "/runs", &from_ui, b"");
    assert_eq!((r.status, r.header("access-control-allow-origin")), (401, Some("https://ui.example")), "{}", r.text());
    let with_token: Vec<(&str, &str)> = from_ui.iter().copied().chain([("Authorization", bearer.as_str())]).collect();
    let r = raw(port, "GET", "/runs", &with_token, b"");
    assert_eq!((r.status, r.header("access-control-allow-origin")), (200, Some("https://ui.example")), "{}", r.text());
    assert!(r.headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("vary") && v.contains("Origin")), "{:?}", r.headers);
    let own = [("Host", host.as_str()), ("Authorization", bearer.as_str())];
    let r = raw(port, "GET", "/runs", &own, b"");
    assert_eq!((r.status, r.header("access-control-allow-origin")), (200, None), "lab's own pages need no CORS");
    let r = raw(port, "OPTIONS", "/runs", &own, b"");
    assert_eq!(r.status, 405, "a plain OPTIONS is routed: {}", r.text());
    drop(lab);

    // The same from lab.toml's [serve] table.
    let script = std::fs::read_to_string(w.home.join("lab.toml")).unwrap();
    w.write_config(&format!("{script}\n[serve]\nrequire_token = true\nallowed_hosts = [\"lab.example\"]\n"));
    let lab = Served::start(&w, &["--addr", "127.0.0.1:0"]);
    let r = send(lab.port, "GET", "/runs", &[("Host", "lab.example")], &Value::Null);
    assert_eq!(r.status, 401, "{}", r.text());
    let r =
        send(lab.port, "GET", "/runs", &[("Host", "lab.example"), ("Authorization", bearer.as_str())], &Value::Null);
    assert_eq!(r.status, 200, "{}", r.text());
    drop(lab);

    // A bad entry is a clear error at start, not a silently open door.
    w.write_config(&format!("{script}\n[serve]\nallowed_origins = [\"ui.example\"]\n"));
    let out = Command::new(LAB)
        .args(["serve", "--addr", "127.0.0.1:0", "--home"])
        .arg(&w.home)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("allowed origin \"ui.example\""));
}

/// `lab serve` with no flags on 127.0.0.1 needs its token (any local user, a container
/// on the host network or a port forward could otherwise start agents as the operator):
/// 401 without it, 200 with it, a login link printed. `--no-token` (or `[serve]
/// require_token = false`) turns it off on loopback only, with a warning at start and
/// `token_required: false` in `GET /info` (the UI's banner); off loopback it refuses to
/// start.
#[test]
fn the_token_is_required_on_loopback_unless_turned_off() {
    let w = World::new();
    w.use_fake_claude(&idle_agent());
    let lab = Served::start(&w, &["--addr", "127.0.0.1:0"]);
    let host = format!("127.0.0.1:{}", lab.port);
    assert!(lab.line("lab: login link").is_some_and(|l| l.contains(&format!("http://{host}/login?code="))));
    assert!(lab.line("lab: WARNING").is_none(), "{:?}", lab.lines.lock().unwrap());
    for path in ["/runs", "/info", "/providers", "/"] {
        let r = send(lab.port, "GET", path, &[("Host", host.as_str())], &Value::Null);
        assert_eq!(r.status, 401, "GET {path} without the token: {}", r.text());
    }
    let r = send(lab.port, "POST", "/runs", &[("Host", host.as_str())], &json!({"provider": "claude-code"}));
    assert_eq!((r.status, r.error().as_str()), (401, "unauthorized"), "{}", r.text());
    let bearer = format!("Bearer {}", lab_token(&w, false));
    let r =
        send(lab.port, "GET", "/runs", &[("Host", host.as_str()), ("Authorization", bearer.as_str())], &Value::Null);
    assert_eq!(r.status, 200, "{}", r.text());
    let r =
        send(lab.port, "GET", "/info", &[("Host", host.as_str()), ("Authorization", bearer.as_str())], &Value::Null);
    assert_eq!(r.json()["token_required"], true, "{}", r.text());
    drop(lab);

    // --no-token: open on loopback, said at start and in /info.
    let lab = Served::start(&w, &["--addr", "127.0.0.1:0", "--no-token"]);
    let host = format!("127.0.0.1:{}", lab.port);
    assert!(lab.line("lab: WARNING: no token").is_some(), "{:?}", lab.lines.lock().unwrap());
    assert!(lab.line("lab: login link").is_none());
    let r = send(lab.port, "GET", "/info", &[("Host", host.as_str())], &Value::Null);
    assert_eq!((r.status, &r.json()["token_required"]), (200, &json!(false)), "{}", r.text());
    drop(lab);

    // The same from lab.toml; a flag still turns it on.
    let script = std::fs::read_to_string(w.home.join("lab.toml")).unwrap();
    w.write_config(&format!("{script}\n[serve]\nrequire_token = false\n"));
    let lab = Served::start(&w, &["--addr", "127.0.0.1:0"]);
    let host = format!("127.0.0.1:{}", lab.port);
    assert_eq!(send(lab.port, "GET", "/runs", &[("Host", host.as_str())], &Value::Null).status, 200);
    // Nothing to pair and no devices without a token; `lab pair` says why.
    let r = send(lab.port, "POST", "/pair", &[("Host", host.as_str())], &json!({}));
    assert_eq!((r.status, r.error().as_str()), (409, "no_token"), "{}", r.text());
    assert_eq!(
        send(lab.port, "GET", "/devices", &[("Host", host.as_str())], &Value::Null).json()["devices"],
        json!([])
    );
    let (ok, _, err) = lab_pair(&w.home, &[]);
    assert!(!ok && err.contains("without a token"), "{err}");
    drop(lab);
    let lab = Served::start(&w, &["--addr", "127.0.0.1:0", "--require-token"]);
    let host = format!("127.0.0.1:{}", lab.port);
    assert_eq!(send(lab.port, "GET", "/runs", &[("Host", host.as_str())], &Value::Null).status, 401);
    drop(lab);

    // Never off where other machines can reach lab; both flags at once are a usage error.
    for args in
        [&["--addr", "0.0.0.0:0", "--no-token"][..], &["--addr", "127.0.0.1:0", "--no-token", "--require-token"]]
    {
        let out = Command::new(LAB).arg("serve").args(args).arg("--home").arg(&w.home).stdin(Stdio::null()).output();
        let out = out.unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("only on loopback") || err.contains("cannot be used with"), "{args:?}: {err}");
    }
}

/// Every answer — the UI, its files, the API, the login form, refusals and errors —
/// carries the browser hardening headers: no framing, no sniffing, no referrer, and a
/// Content-Security-Policy without inline code (the login form's own script and style
/// are allowed by their hashes only).
#[test]
fn every_answer_forbids_framing_sniffing_and_inline_code() {
    let (_w, lab, port, id) = idle_run();
    let own = format!("127.0.0.1:{port}");
    type Case<'a> = (&'a str, String, Vec<(&'a str, &'a str)>, u16);
    let cases: Vec<Case> = vec![
        ("GET", "/".into(), vec![("Host", own.as_str())], 200),
        ("GET", "/app.js".into(), vec![("Host", own.as_str())], 200),
        ("GET", "/runs".into(), vec![("Host", own.as_str())], 200),
        ("GET", format!("/runs/{id}/messages"), vec![("Host", own.as_str())], 200),
        ("GET", "/login".into(), vec![("Host", own.as_str())], 200),
        ("GET", "/nope".into(), vec![("Host", own.as_str())], 404),
        ("GET", "/runs".into(), vec![("Host", "evil.example")], 421),
        ("GET", "/".into(), vec![("Host", own.as_str()), ("Authorization", "Bearer wrong")], 401),
        ("POST", "/runs".into(), vec![("Host", own.as_str()), ("Content-Type", "text/plain")], 415),
    ];
    for (method, path, headers, status) in &cases {
        let r = raw(port, method, path, headers, b"");
        assert_eq!(r.status, *status, "{method} {path}: {}", r.text());
        let h = |name: &str| r.header(name).unwrap_or_else(|| panic!("{method} {path}: no {name}"));
        assert_eq!(h("x-frame-options"), "DENY", "{method} {path}");
        assert_eq!(h("x-content-type-options"), "nosniff", "{method} {path}");
        assert_eq!(h("referrer-policy"), "no-referrer", "{method} {path}");
        let csp = h("content-security-policy");
        assert!(
            csp.contains("frame-ancestors 'none'") && csp.contains("object-src 'none'")
                || csp.contains("default-src 'none'"),
            "{method} {path}: {csp}"
        );
        assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"), "{method} {path}: {csp}");
        let login = *path == "/login" || *status == 401;
        assert_eq!(csp.contains("'sha256-"), login, "{method} {path}: only the login form has inline code: {csp}");
    }
    drop(lab);
}

/// A web page can send refused requests as fast as it likes (`fetch(…, {mode:
/// "no-cors"})`), each with a path of ~60 KB (longer ones are 414): lab's log grows by a few lines per
/// window, each path cut to 200 bytes, and the next window's first refusal says how many
/// were held back.
#[test]
fn a_flood_of_refused_requests_cannot_fill_the_log() {
    let w = World::new();
    w.use_fake_claude(&idle_agent());
    let lab = w.serve();
    let port = port_of(&lab.url);
    let own = format!("127.0.0.1:{port}");
    let before = lab_log(&w).len();
    let long = format!("/runs/{}", "A".repeat(60 * 1024));
    let flood = 300;
    for i in 0..flood {
        // No token (401) and a foreign Host (421), alternately.
        let host = if i % 2 == 0 { own.as_str() } else { "evil.example" };
        let r = raw(port, "GET", &long, &[("Host", host)], b"");
        assert!(r.status == 401 || r.status == 421, "{}", r.status);
    }
    let grown = lab_log(&w).len() - before;
    assert!(grown < 20 * 1024, "{flood} refusals of 60 KB paths grew lab.log by {grown} bytes");
    let log = lab_log(&w);
    let lines: Vec<&str> = log[before..].lines().filter(|l| l.contains("refused:")).collect();
    assert!(!lines.is_empty() && lines.len() <= 20, "{} refusal lines", lines.len());
    assert!(lines.iter().all(|l| l.contains("… (61446 bytes)") && l.len() < 600), "{lines:?}");
    // The next window: the first refusal logged counts the ones held back.
    std::thread::sleep(Duration::from_millis(10_200));
    assert_eq!(raw(port, "GET", "/runs", &[("Host", own.as_str())], b"").status, 401);
    let log = lab_log(&w);
    let last = log.lines().rev().find(|l| l.contains("refused:")).unwrap();
    let held: u64 = last.split("held_back=").nth(1).and_then(|v| v.split_whitespace().next()?.parse().ok()).unwrap();
    assert_eq!(held as usize + lines.len(), flood, "{last}");
    drop(lab);
}

/// Browsers try `[::1]` first for `localhost:PORT`: lab holds `[::1]:PORT` beside
/// `127.0.0.1:PORT` (the same lab answers there), and when another process already has
/// it, lab refuses to start and says so (that process would get the operator's browser).
#[test]
fn lab_holds_the_ipv6_loopback_twin_of_its_port_or_refuses_to_start() {
    let w = World::new();
    w.use_fake_claude(&idle_agent());
    let lab = w.serve();
    let port = port_of(&lab.url);
    let mut s = TcpStream::connect(("::1", port)).expect("lab listens on [::1] too");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET /runs HTTP/1.1\r\nHost: [::1]:{port}\r\nConnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 401"), "lab answers on [::1], with its token rules: {answer}");
    drop(lab);

    // Someone else holds [::1]:P first.
    let squatter = std::net::TcpListener::bind(("::1", 0)).unwrap();
    let taken = squatter.local_addr().unwrap().port();
    let out = Command::new(LAB)
        .args(["serve", "--addr", &format!("127.0.0.1:{taken}"), "--home"])
        .arg(&w.home)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "lab must not serve beside a squatter on [::1]:{taken}");
    assert!(err.contains(&format!("[::1]:{taken}")) && err.contains("browsers go first"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("serving on"));
}

/// `lab pair` run against `home`: (exit ok, stdout, stderr).
fn lab_pair(home: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(LAB).arg("pair").arg("--home").arg(home).args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// The text of the QR code drawn in `terminal` (half blocks, light modules drawn),
/// read by `rqrr` — an independent decoder — from the picture the blocks make.
fn read_terminal_qr(terminal: &str) -> String {
    let lines: Vec<Vec<char>> = terminal
        .lines()
        .map(|l| l.chars().collect::<Vec<char>>())
        .filter(|l| !l.is_empty() && l.iter().all(|c| "█▀▄ ".contains(*c)))
        .collect();
    assert!(lines.len() > 10, "no QR code in: {terminal}");
    let (w, h, scale) = (lines[0].len(), lines.len() * 2, 4);
    let light = |x: usize, y: usize| -> bool {
        let c = lines[y / 2].get(x).copied().unwrap_or(' ');
        matches!((c, y % 2), ('█', _) | ('▀', 0) | ('▄', 1))
    };
    let mut img = rqrr::PreparedImage::prepare_from_greyscale(w * scale, h * scale, |x, y| {
        if light(x / scale, y / scale) {
            255
        } else {
            0
        }
    });
    let grids = img.detect_grids();
    assert_eq!(grids.len(), 1, "one QR code in the terminal drawing");
    grids[0].decode().expect("the QR code decodes").1
}

#[test]
fn a_phone_pairs_with_lab_pair_and_each_device_is_logged_out_on_its_own() {
    let w = World::new();
    w.use_fake_claude(&idle_agent());
    // No serve yet: a clear error.
    let (ok, _, err) = lab_pair(&w.home, &[]);
    assert!(!ok && err.contains("no `lab serve` is running"), "{err}");

    let lab = Served::start(&w, &["--addr", "127.0.0.1:0"]);
    let port = lab.port;
    let host = format!("127.0.0.1:{port}");
    let serve_file: Value = serde_json::from_slice(&std::fs::read(w.home.join("serve.json")).unwrap()).unwrap();
    assert_eq!(serve_file["addr"], host.as_str());

    // `lab pair`: the link, as a QR code that decodes to it; a warning, for a phone cannot open 127.0.0.1.
    let (ok, out, err) = lab_pair(&w.home, &["--name", "Test phone"]);
    assert!(ok, "{err}");
    let link = out.lines().find(|l| l.contains("/login?code=")).unwrap_or_else(|| panic!("{out}")).trim().to_string();
    assert!(link.starts_with(&format!("http://{host}/login?code=")), "{link}");
    assert_eq!(read_terminal_qr(&out), link, "the QR code is the link");
    assert!(out.contains("works once, for 5 minutes"), "{out}");
    assert!(err.contains("WARNING") && err.contains("--base-url"), "{err}");
    // Behind a proxy: the phone's name for lab, no warning.
    let (ok, out2, err2) = lab_pair(&w.home, &["--base-url", "https://lab.example.org"]);
    assert!(ok && !err2.contains("WARNING"), "{err2}");
    assert!(read_terminal_qr(&out2).starts_with("https://lab.example.org/login?code="));

    // The phone opens the link: a device cookie, once.
    let code_path = &link[link.find("/login?code=").unwrap()..];
    let code = code_path.split_once("code=").unwrap().1.to_string();
    // A link preview's fetch first: nothing is redeemed.
    let preview = send(
        port,
        "GET",
        code_path,
        &[("Host", host.as_str()), ("User-Agent", "Slackbot-LinkExpanding 1.0")],
        &Value::Null,
    );
    assert_eq!(preview.status, 200);
    assert!(preview.header("set-cookie").is_none());
    let iphone = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 Version/17.5 Mobile/15E148 Safari/604.1";
    let r = send(port, "POST", "/login", &[("Host", host.as_str()), ("User-Agent", iphone)], &json!({"code": code}));
    assert_eq!(r.status, 200, "{}", r.text());
    let set_cookie = r.header("set-cookie").unwrap().to_string();
    assert!(set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"), "{set_cookie}");
    let phone = set_cookie.split(';').next().unwrap().to_string();
    let phone_key = r.json()["device_key"].as_str().unwrap().to_string();
    let again = send(port, "POST", "/login", &[("Host", host.as_str())], &json!({"code": code}));
    assert_eq!(again.status, 401, "a pairing code works once");
    let as_phone = [("Host", host.as_str()), ("Cookie", phone.as_str()), ("X-Lab-Device-Key", phone_key.as_str())];

    // A laptop logs in with the token; both are listed, each knows which one it is.
    let token = lab_token(&w, false);
    let r = send(
        port,
        "POST",
        "/login",
        &[("Host", host.as_str()), ("User-Agent", "curl/8.5.0")],
        &json!({"token": token}),
    );
    assert_eq!(r.status, 200);
    let laptop = r.header("set-cookie").unwrap().split(';').next().unwrap().to_string();
    let laptop_key = r.json()["device_key"].as_str().unwrap().to_string();
    let as_laptop = [("Host", host.as_str()), ("Cookie", laptop.as_str()), ("X-Lab-Device-Key", laptop_key.as_str())];
    let as_phone_with_laptop_key =
        [("Host", host.as_str()), ("Cookie", phone.as_str()), ("X-Lab-Device-Key", laptop_key.as_str())];
    assert_eq!(
        send(port, "GET", "/runs", &as_phone_with_laptop_key, &Value::Null).status,
        401,
        "a key is its device's own"
    );
    let list = send(port, "GET", "/devices", &as_phone, &Value::Null).json();
    let devices = list["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2, "{list}");
    let me = devices.iter().find(|d| d["current"] == true).unwrap();
    assert_eq!((me["name"].as_str(), me["via"].as_str()), (Some("Test phone"), Some("pairing")));
    let phone_id = me["id"].as_str().unwrap().to_string();
    let other = devices.iter().find(|d| d["current"] == false).unwrap();
    assert_eq!((other["name"].as_str(), other["via"].as_str()), (Some("curl"), Some("token")));
    assert!(!list.to_string().contains(phone.split_once('=').unwrap().1), "no cookie in the list");

    // Pairing from the UI: a link on the origin the page was loaded from, with its QR code's modules.
    let r = send(port, "POST", "/pair", &as_laptop, &json!({}));
    assert_eq!(r.status, 201, "{}", r.text());
    let body = r.json();
    assert!(body["url"].as_str().unwrap().starts_with(&format!("http://{host}/login?code=")));
    assert_eq!(body["ttl_seconds"], 300);
    let size = body["qr"]["size"].as_u64().unwrap() as usize;
    assert_eq!(body["qr"]["rows"].as_array().unwrap().len(), size);
    let bad = send(port, "POST", "/pair", &as_laptop, &json!({"name": "a\u{202e}b"}));
    assert_eq!((bad.status, bad.error().as_str()), (400, "bad_request"), "{}", bad.text());
    let bad = send(port, "POST", "/pair", &as_laptop, &json!({"nmae": "x"}));
    assert_eq!(bad.status, 400);

    // The laptop logs the phone out: at once, and only the phone.
    let r = send(port, "DELETE", &format!("/devices/{phone_id}"), &as_laptop, &json!({}));
    assert_eq!(r.status, 204, "{}", r.text());
    assert!(r.header("set-cookie").is_none(), "the laptop keeps its own cookie");
    assert_eq!(send(port, "GET", "/runs", &as_phone, &Value::Null).status, 401);
    assert_eq!(send(port, "GET", "/", &as_phone, &Value::Null).status, 401, "the login form");
    assert_eq!(send(port, "GET", "/runs", &as_laptop, &Value::Null).status, 200);
    let gone = send(port, "DELETE", &format!("/devices/{phone_id}"), &as_laptop, &json!({}));
    assert_eq!((gone.status, gone.error().as_str()), (404, "device_not_found"));

    // A restart keeps the laptop logged in (and serve.json is this serve's again).
    drop(lab);
    assert!(!w.home.join("serve.json").exists(), "a clean stop removes serve.json");
    let lab = Served::start(&w, &["--addr", "127.0.0.1:0"]);
    let host = format!("127.0.0.1:{}", lab.port);
    let as_laptop = [("Host", host.as_str()), ("Cookie", laptop.as_str()), ("X-Lab-Device-Key", laptop_key.as_str())];
    assert_eq!(send(lab.port, "GET", "/runs", &as_laptop, &Value::Null).status, 200, "still logged in");

    // Logging itself out clears its cookie.
    let list = send(lab.port, "GET", "/devices", &as_laptop, &Value::Null).json();
    let id = list["devices"][0]["id"].as_str().unwrap().to_string();
    let r = send(lab.port, "DELETE", &format!("/devices/{id}"), &as_laptop, &json!({}));
    assert_eq!(r.status, 204);
    assert!(r.header("set-cookie").unwrap().contains("Max-Age=0"));
    assert_eq!(send(lab.port, "GET", "/runs", &as_laptop, &Value::Null).status, 401);

    // A rotated token ends every device.
    let (ok, out, _) = lab_pair(&w.home, &[]);
    assert!(ok);
    let link = out.lines().find(|l| l.contains("/login?code=")).unwrap().trim().to_string();
    let code = link.split_once("code=").unwrap().1;
    let r = send(lab.port, "POST", "/login", &[("Host", host.as_str())], &json!({"code": code}));
    let cookie = r.header("set-cookie").unwrap().split(';').next().unwrap().to_string();
    let key = r.json()["device_key"].as_str().unwrap().to_string();
    let with = [("Host", host.as_str()), ("Cookie", cookie.as_str()), ("X-Lab-Device-Key", key.as_str())];
    assert_eq!(send(lab.port, "GET", "/runs", &with, &Value::Null).status, 200);
    lab_token(&w, true);
    assert_eq!(send(lab.port, "GET", "/runs", &with, &Value::Null).status, 401, "rotation ends every device");
    let log = lab_log(&w);
    assert!(!log.contains(cookie.split_once('=').unwrap().1) && !log.contains("code="), "no secret is logged");
}

fn lab_push_key(w: &World, rotate: bool) -> (String, String) {
    let mut cmd = Command::new(LAB);
    cmd.arg("push-key").arg("--home").arg(&w.home);
    if rotate {
        cmd.arg("--rotate");
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (String::from_utf8_lossy(&out.stdout).trim().to_string(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn the_vapid_key_rotates_through_a_running_serve_or_offline_and_subscriptions_go_with_it() {
    let w = World::new();
    w.use_fake_claude(&idle_agent());
    let lab = Served::start(&w, &["--addr", "127.0.0.1:0"]);
    let host = format!("127.0.0.1:{}", lab.port);
    let bearer = format!("Bearer {}", lab_token(&w, false));
    let auth = [("Host", host.as_str()), ("Authorization", bearer.as_str())];
    let key =
        |port| send(port, "GET", "/push/key", &auth, &Value::Null).json()["public_key"].as_str().unwrap().to_string();
    let first = key(lab.port);
    assert_eq!(lab_push_key(&w, false).0, first, "`lab push-key` prints the key serve uses");
    assert_eq!(send(lab.port, "POST", "/push/subscriptions", &auth, &push_subscription()).status, 201);
    // Without the test setting, a push endpoint is on the internet: never loopback,
    // private ranges or the cloud metadata address.
    for endpoint in
        ["http://127.0.0.1:9/push/sub", "https://[::1]/p", "https://169.254.169.254/p", "https://10.0.0.1/p"]
    {
        let mut sub = push_subscription();
        sub["endpoint"] = json!(endpoint);
        let r = send(lab.port, "POST", "/push/subscriptions", &auth, &sub);
        assert_eq!(r.status, 400, "{endpoint}");
        assert!(r.json()["message"].as_str().unwrap().contains("not a public address"), "{endpoint}: {}", r.text());
    }
    // Through the running serve: at once, and the subscription (made with the old key) is gone.
    let (second, said) = lab_push_key(&w, true);
    assert!(said.contains("1 push subscription(s) removed"), "{said}");
    assert_ne!(second, first);
    assert_eq!(key(lab.port), second);
    assert_eq!(send(lab.port, "GET", "/push/subscriptions", &auth, &Value::Null).json(), json!([]));
    // Offline: the file is replaced; the next serve uses it.
    drop(lab);
    let (third, _) = lab_push_key(&w, true);
    assert_ne!(third, second);
    let lab = Served::start(&w, &["--addr", "127.0.0.1:0"]);
    let host = format!("127.0.0.1:{}", lab.port);
    let auth = [("Host", host.as_str()), ("Authorization", bearer.as_str())];
    let r = send(lab.port, "GET", "/push/key", &auth, &Value::Null);
    assert_eq!(r.json()["public_key"], third.as_str());
}
