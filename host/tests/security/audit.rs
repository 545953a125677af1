//! Security tests: the audit log against callers without the token (docs/security.md
//! "What is logged"). Real `lab serve`, fake-claude: a flood of refused logins, each
//! with a field name of hundreds of KiB holding newlines and escape bytes, can neither
//! wash an operator's entries out, nor fill the log, nor forge a line in `lab audit`;
//! its oversized error answers reach the caller whole.

use crate::common::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// `POST /login` with `body` and no credential, on its own connection: (status, body).
fn login(addr: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let head = format!(
        "POST /login HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let split = all.windows(4).position(|w| w == b"\r\n\r\n").expect("an answer's head");
    let head = String::from_utf8_lossy(&all[..split]).to_string();
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = all[split + 4..].to_vec();
    let length = head.lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ").map(str::to_string));
    if let Some(n) = length {
        assert_eq!(body.len(), n.trim().parse::<usize>().unwrap(), "the answer's body as long as it says");
    }
    (status, body)
}

/// Fourth review, rows 2, 3 and 7.
#[test]
fn refused_logins_cannot_wash_flood_or_forge_the_audit_log() {
    let w = World::new();
    w.use_fake_claude(&json!({"steps": [{"say": "Ready."}, {"idle": {}}]}));
    let lab = w.serve();
    let addr = lab.url.strip_prefix("http://").unwrap().to_string();
    // An operator's action first.
    let id = lab.create_run(&w, "claude-code", "hello")["id"].as_str().unwrap().to_string();

    // The flood: 40 refused logins, each with a long field name that holds a forged
    // line and terminal control sequences; the first one's is 600 KiB (its error answer,
    // which holds it twice, is over 1 MiB), the others' 8 KiB.
    let forged = "\n2026-12-07T10:00:00.000Z  Phone (d-1)  run.stop r-1  applied\u{1b}[2J\u{1b}]0;owned\u{7}";
    for i in 0..40 {
        let name = format!("{forged}{}", "x".repeat(if i == 0 { 600 * 1024 } else { 8 * 1024 }));
        let body = serde_json::to_vec(&json!({ name.clone(): 1 })).unwrap();
        let (status, answer) = login(&addr, &body);
        assert_eq!(status, 400, "login {i}");
        // Row 7: the error answer reaches the caller whole (it holds the name).
        let v: Value = serde_json::from_slice(&answer).unwrap_or_else(|e| panic!("login {i}: {e}"));
        assert!(v["message"].as_str().unwrap().contains(&name), "the answer whole");
        if i == 0 {
            assert!(answer.len() > 1024 * 1024, "{} bytes", answer.len());
        }
    }

    // Row 2: the operator's entry is there; what the flood left is bounded and counted.
    let (st, all) = lab.get("/audit?limit=5000");
    assert_eq!(st, 200);
    let entries = all["entries"].as_array().unwrap();
    assert!(
        entries.iter().any(|e| e["action"] == "run.start" && e["run_id"] == id.as_str()),
        "the operator's action is kept: {entries:#?}"
    );
    let logins: Vec<&Value> = entries.iter().filter(|e| e["action"] == "device.login").collect();
    assert_eq!(logins.len(), 5, "a few per source and window: {logins:#?}");
    for e in &logins {
        assert_eq!((&e["outcome"], &e["actor"]), (&json!("refused"), &json!("nobody")), "{e}");
        let reason = e["reason"].as_str().unwrap();
        assert!(reason.chars().count() < 400 && reason.ends_with("characters)"), "cut: {reason}");
    }
    let size = |f: &str| std::fs::metadata(w.home.join(f)).map_or(0, |m| m.len());
    assert!(size("audit.anonymous.jsonl") < 8 * 1024, "{} bytes", size("audit.anonymous.jsonl"));
    assert!(size("audit.jsonl") < 8 * 1024, "{} bytes", size("audit.jsonl"));
    let operators = std::fs::read_to_string(w.home.join("audit.jsonl")).unwrap();
    assert!(!operators.contains("device.login"), "refusals of strangers are kept apart: {operators}");

    // At a stop, the refusals held back are counted in one entry.
    lab.stop();
    let audit = |json: bool| {
        let mut c = std::process::Command::new(LAB);
        c.arg("audit").args(json.then_some("--json")).arg("--home").arg(&w.home);
        let out = c.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let text = audit(false);
    let lines: Vec<&str> = text.lines().collect();
    let count = lines.iter().find(|l| l.contains("more like it")).unwrap_or_else(|| panic!("{text}"));
    assert!(count.contains("and 35 more like it from 127.0.0.1"), "{count}");
    // Row 3: one line per entry, each starting with its time; nothing that is not printed
    // as text reaches the terminal.
    let json_lines: Vec<Value> = audit(true).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), json_lines.len(), "{text}");
    for l in &lines {
        assert!(l.starts_with("20") && l.as_bytes()[4] == b'-', "a line that is not an entry: {l:?}");
        assert!(!l.chars().any(|c| c.is_control()), "a control character printed: {l:?}");
    }
    assert!(text.contains(r"type: \n2026-12-07T10:00:00.000Z  Phone (d-1)  run.stop r-1  applied\u{1b}[2J"), "{text}");
    // `--json` keeps the reason as it was logged.
    let refused = json_lines.iter().find(|e| e["action"] == "device.login").unwrap();
    assert!(refused["reason"].as_str().unwrap().contains(forged), "{refused}");
}
