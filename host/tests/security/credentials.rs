//! docs/security.md, "Every credential proves itself and ends when it is revoked": what a
//! device or the token made (a push subscription, an open event stream) ends with it —
//! a real `lab serve`, a push service stand-in on loopback counting deliveries, event
//! streams read off the wire.

use crate::common::{wait_for, Lab, World};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A push service stand-in on loopback: how many pushes each path got.
fn push_service() -> (String, Arc<Mutex<HashMap<String, usize>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let got: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let seen = got.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut r = BufReader::new(&stream);
            let mut first = String::new();
            if r.read_line(&mut first).is_err() {
                continue;
            }
            let mut len = 0;
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            let _ = r.read_exact(&mut body);
            let path = first.split_whitespace().nth(1).unwrap_or("").to_string();
            *seen.lock().unwrap().entry(path).or_default() += 1;
            let _ = (&stream).write_all(b"HTTP/1.1 201 Created\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (base, got)
}

/// A PushSubscription's keys (a real P-256 point, a 16-byte secret).
fn keys() -> Value {
    use base64::Engine;
    use web_push_native::p256::elliptic_curve::sec1::ToEncodedPoint;
    let secret = web_push_native::p256::SecretKey::random(&mut web_push_native::p256::elliptic_curve::rand_core::OsRng);
    let e = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    json!({"p256dh": e.encode(secret.public_key().to_encoded_point(false).as_bytes()), "auth": e.encode([3u8; 16])})
}

/// One request with `auth` (header lines: a device's cookie and key, or `Authorization:`):
/// status and JSON.
fn call(lab: &Lab, method: &str, path: &str, auth: &str, body: Option<&Value>) -> (u16, Value) {
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let mut req = client.request(method.parse().unwrap(), format!("{}{path}", lab.url));
    for line in auth.split("\r\n") {
        let (k, v) = line.split_once(": ").unwrap();
        req = req.header(k, v);
    }
    if let Some(b) = body {
        req = req.json(b);
    }
    let r = req.send().unwrap();
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

/// A device logged in with the token: its header lines (cookie and device key) and its id.
fn device(lab: &Lab, token: &str) -> (String, String) {
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let r = client.post(format!("{}/login", lab.url)).json(&json!({"token": token})).send().unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let cookie = r.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
    let key = r.json::<Value>().unwrap()["device_key"].as_str().unwrap().to_string();
    let cookie = format!("Cookie: {cookie}\r\nX-Lab-Device-Key: {key}");
    let (_, list) = call(lab, "GET", "/devices", &cookie, None);
    let id = list["devices"].as_array().unwrap().iter().find(|d| d["current"] == true).unwrap()["id"].clone();
    (cookie, id.as_str().unwrap().to_string())
}

/// An open event stream of run `id`, read up to its first event.
struct Stream(TcpStream);

impl Stream {
    fn open(lab: &Lab, id: &str, auth: &str) -> Stream {
        let addr = lab.url.trim_start_matches("http://");
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        write!(s, "GET /runs/{id}/events HTTP/1.1\r\nHost: {addr}\r\n{auth}\r\nConnection: close\r\n\r\n").unwrap();
        let mut seen = Vec::new();
        let start = Instant::now();
        while !String::from_utf8_lossy(&seen).contains("event: view") {
            assert!(start.elapsed() < Duration::from_secs(30), "no first event: {}", String::from_utf8_lossy(&seen));
            let mut buf = [0u8; 4096];
            match s.read(&mut buf) {
                Ok(0) => panic!("the stream ended at once: {}", String::from_utf8_lossy(&seen)),
                Ok(n) => seen.extend_from_slice(&buf[..n]),
                Err(_) => {}
            }
        }
        assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200"));
        Stream(s)
    }

    /// Whether the stream ends (the server closes it) within `limit`.
    fn ends_within(&mut self, limit: Duration) -> bool {
        let start = Instant::now();
        let mut tail = Vec::new();
        while start.elapsed() < limit {
            let mut buf = [0u8; 4096];
            match self.0.read(&mut buf) {
                Ok(0) => return true,
                Ok(n) => {
                    tail.extend_from_slice(&buf[..n]);
                    // The last chunk of a chunked body: the answer is over.
                    if tail.ends_with(b"0\r\n\r\n") {
                        return true;
                    }
                }
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => return true,
            }
        }
        false
    }
}

/// A run that starts and is stopped (by `auth`): one push (its end) to every live
/// subscription.
fn a_run_ends(w: &World, lab: &Lab, auth: &str) {
    let body = json!({"provider": "claude-code", "workdir": w.workdir, "prompt": "hello"});
    let (s, run) = call(lab, "POST", "/runs", auth, Some(&body));
    assert_eq!(s, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    wait_for(Duration::from_secs(30), "the run idle", || {
        (call(lab, "GET", &format!("/runs/{id}"), auth, None).1["state"] == "idle").then_some(())
    });
    let (s, b) = call(lab, "POST", &format!("/runs/{id}/stop"), auth, Some(&json!({})));
    assert_eq!(s, 200, "{b}");
}

fn count(got: &Arc<Mutex<HashMap<String, usize>>>, path: &str) -> usize {
    got.lock().unwrap().get(path).copied().unwrap_or(0)
}

fn wait_count(got: &Arc<Mutex<HashMap<String, usize>>>, path: &str, n: usize) {
    wait_for(Duration::from_secs(30), &format!("{n} push(es) at {path}"), || (count(got, path) >= n).then_some(()));
}

#[test]
fn push_subscriptions_and_event_streams_end_with_the_credential_that_made_them() {
    let w = World::new();
    w.use_fake_claude(&json!({"steps": [{"say": "Ready."}, {"idle": {}}]}));
    let lab = w.serve();
    let token = lab.token.clone().expect("a token");
    let (service, got) = push_service();
    let (phone, phone_id) = device(&lab, &token);
    let (laptop, _) = device(&lab, &token);
    let script = format!("Authorization: Bearer {token}");
    for (who, path) in [(&phone, "/p/phone"), (&script, "/p/script"), (&laptop, "/p/laptop")] {
        let sub = json!({"endpoint": format!("{service}{path}"), "keys": keys()});
        let (s, b) = call(&lab, "POST", "/push/subscriptions", who, Some(&sub));
        assert_eq!(s, 201, "{b}");
    }
    a_run_ends(&w, &lab, &script);
    for path in ["/p/phone", "/p/script", "/p/laptop"] {
        wait_count(&got, path, 1);
    }
    let id = lab.create_run(&w, "claude-code", "hello")["id"].as_str().unwrap().to_string();
    lab.wait_state(&id, "idle");
    let mut phone_stream = Stream::open(&lab, &id, &phone);
    let mut script_stream = Stream::open(&lab, &id, &script);
    let mut laptop_stream = Stream::open(&lab, &id, &laptop);

    // The phone is lost: the laptop logs it out. Its stream ends at once, its
    // subscription is gone, and the next push reaches the others only.
    let (s, b) = call(&lab, "DELETE", &format!("/devices/{phone_id}"), &laptop, Some(&json!({})));
    assert_eq!(s, 204, "{b}");
    assert!(phone_stream.ends_within(Duration::from_secs(10)), "the logged-out phone's stream ended");
    let (_, subs) = call(&lab, "GET", "/push/subscriptions", &laptop, None);
    let endpoints: Vec<&str> = subs.as_array().unwrap().iter().map(|s| s["endpoint"].as_str().unwrap()).collect();
    assert!(!endpoints.iter().any(|e| e.ends_with("/p/phone")) && endpoints.len() == 2, "{subs}");
    a_run_ends(&w, &lab, &script);
    wait_count(&got, "/p/script", 2);
    wait_count(&got, "/p/laptop", 2);
    assert_eq!(count(&got, "/p/phone"), 1, "nothing after the logout");
    assert!(!laptop_stream.ends_within(Duration::from_millis(1500)), "the laptop's stream stays");

    // The token is rotated: every device and the old token end — streams and
    // subscriptions alike; a subscription made with the new token gets the next push.
    let out = std::process::Command::new(crate::common::LAB)
        .args(["token", "--rotate", "--home"])
        .arg(&w.home)
        .output()
        .unwrap();
    assert!(out.status.success());
    let new = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(script_stream.ends_within(Duration::from_secs(10)), "the old token's stream ended");
    assert!(laptop_stream.ends_within(Duration::from_secs(10)), "the laptop's stream ended with the token");
    let fresh = format!("Authorization: Bearer {new}");
    wait_for(Duration::from_secs(20), "the old subscriptions removed", || {
        let (_, subs) = call(&lab, "GET", "/push/subscriptions", &fresh, None);
        subs.as_array().unwrap().is_empty().then_some(())
    });
    let sub = json!({"endpoint": format!("{service}/p/new"), "keys": keys()});
    assert_eq!(call(&lab, "POST", "/push/subscriptions", &fresh, Some(&sub)).0, 201);
    a_run_ends(&w, &lab, &fresh);
    wait_count(&got, "/p/new", 1);
    assert_eq!((count(&got, "/p/script"), count(&got, "/p/laptop")), (2, 2), "nothing after the rotation");
}

/// `lab pair` and `lab push-key --rotate` reach the running serve through its control
/// socket in the 0700 home; after a crash, `serve.json` names a port someone else may
/// take — they say no serve runs, and send nothing there.
#[test]
fn the_cli_never_sends_the_token_to_whoever_took_a_dead_serve_s_port() {
    let w = World::new();
    w.use_fake_claude(&json!({"steps": [{"idle": {}}]}));
    let mut lab = w.serve();
    let socket = w.home.join("serve.sock");
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let meta = std::fs::symlink_metadata(&socket).expect("the control socket");
    assert!(meta.file_type().is_socket() && meta.permissions().mode() & 0o777 == 0o600, "{meta:?}");
    let pair = |args: &[&str]| {
        std::process::Command::new(crate::common::LAB)
            .arg("pair")
            .arg("--home")
            .arg(&w.home)
            .args(args)
            .output()
            .unwrap()
    };
    let out = pair(&[]);
    assert!(out.status.success(), "through the socket: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("{}/login?code=", lab.url)));

    // A crash: serve.json and the socket file stay; another user takes the port.
    lab.child.kill().unwrap();
    lab.child.wait().unwrap();
    assert!(w.home.join("serve.json").exists() && socket.exists());
    let addr = lab.url.trim_start_matches("http://").to_string();
    let squatter = std::net::TcpListener::bind(&addr).expect("the dead serve's port");
    squatter.set_nonblocking(true).unwrap();
    let out = pair(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("no `lab serve` is running"), "{err}");
    assert!(err.contains("nothing was sent there") && err.contains(&addr), "{err}");
    let out = std::process::Command::new(crate::common::LAB)
        .args(["push-key", "--rotate", "--home"])
        .arg(&w.home)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("no `lab serve` is running"), "{err}");
    match squatter.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the CLI connected to the squatter: {other:?}"),
    }
    drop(squatter);
    // The next serve replaces the stale socket and is reached again.
    let lab = w.serve();
    let out = pair(&[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("{}/login?code=", lab.url)));
}
