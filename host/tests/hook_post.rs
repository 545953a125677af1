//! `lab hook <verb> --post <url>` (experimental, docs/adr/0003): the real binary against
//! a one-request HTTP receiver on 127.0.0.1.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;

const LAB: &str = env!("CARGO_BIN_EXE_lab");
const PAYLOAD: &str = r#"{"tool_use_id":"toolu_1","tool_input":{"q":"Which?"}}"#;
const TOKEN: &str = "0123456789abcdef0123456789abcdef-hook-token";

/// What the receiver saw: the request head (lines, lowercased header names) and body.
struct Seen {
    head: Vec<String>,
    body: String,
}

/// Accept one request, answer `status`, report what arrived. Returns the base URL.
fn receiver(status: u16) -> (String, mpsc::Receiver<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end().to_string();
            if line.is_empty() {
                break;
            }
            head.push(match line.split_once(':') {
                Some((k, v)) => format!("{}:{v}", k.to_ascii_lowercase()),
                None => line,
            });
        }
        let len: usize =
            head.iter().find_map(|l| l.strip_prefix("content-length:")).map(|v| v.trim().parse().unwrap()).unwrap_or(0);
        let mut body = vec![0; len];
        reader.read_exact(&mut body).unwrap();
        let mut stream = stream;
        write!(stream, "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").unwrap();
        tx.send(Seen { head, body: String::from_utf8(body).unwrap() }).unwrap();
    });
    (url, rx)
}

fn hook(args: &[&str], token: Option<&str>) -> Output {
    hook_with_env(args, token, &[])
}

fn hook_with_env(args: &[&str], token: Option<&str>, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(LAB);
    cmd.arg("hook").args(args).env_remove("LAB_HOOK_TOKEN");
    for (k, v) in env {
        cmd.env(k, v);
    }
    if let Some(t) = token {
        cmd.env("LAB_HOOK_TOKEN", t);
    }
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    // A refused command line exits before reading stdin: a broken pipe is fine here.
    let _ = child.stdin.take().unwrap().write_all(PAYLOAD.as_bytes());
    child.wait_with_output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_delivered_payload_carries_the_token_as_a_bearer_and_the_channel() {
    let (url, rx) = receiver(204);
    let out = hook(&["dialog-spool", "--post", &format!("{url}/hooks/r-1")], Some(TOKEN));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out.stdout.is_empty() && out.stderr.is_empty());
    let seen = rx.recv().unwrap();
    assert_eq!(seen.head[0], "POST /hooks/r-1 HTTP/1.1");
    assert!(seen.head.contains(&format!("authorization: Bearer {TOKEN}")), "{:?}", seen.head);
    assert!(seen.head.contains(&"x-lab-hook-channel: dialog-spool".to_string()), "{:?}", seen.head);
    assert!(seen.head.contains(&"content-type: application/json".to_string()), "{:?}", seen.head);
    assert_eq!(seen.body, PAYLOAD);
}

#[test]
fn without_a_token_nothing_is_sent_and_the_hook_still_exits_0() {
    let (url, rx) = receiver(204);
    for token in [None, Some(""), Some("  ")] {
        let out = hook(&["dialog-spool", "--post", &url], token);
        assert_eq!(out.status.code(), Some(0));
        assert!(stderr(&out).contains("LAB_HOOK_TOKEN is not set"), "{}", stderr(&out));
    }
    assert!(rx.try_recv().is_err());
}

#[test]
fn a_non_2xx_answer_is_said_on_stderr_with_the_status_and_never_the_token() {
    for status in [401, 500] {
        let (url, rx) = receiver(status);
        let out = hook(&["blocked-marker", "--post", &format!("{url}/hooks/r-1")], Some(TOKEN));
        assert_eq!(out.status.code(), Some(0), "a hook never blocks the tool (agents read 2 as 'block')");
        let err = stderr(&out);
        assert!(err.contains(&format!("answered {status}")) && err.contains("nothing delivered"), "{err}");
        assert!(!err.contains(TOKEN) && !err.contains("r-1"), "{err}");
        assert!(out.stdout.is_empty());
        rx.recv().unwrap();
    }
    // Nobody listening: a clear reason, still exit 0.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = hook(&["dialog-spool", "--post", &format!("http://127.0.0.1:{port}/x")], Some(TOKEN));
    assert_eq!(out.status.code(), Some(0));
    assert!(stderr(&out).contains(&format!("could not reach http://127.0.0.1:{port}")), "{}", stderr(&out));
}

/// A proxy that only counts who connects to it (and hangs up).
fn proxy() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            h.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(s);
        }
    });
    (url, hits)
}

#[test]
fn a_loopback_url_is_reached_directly_whatever_proxy_the_environment_names() {
    let (proxy_url, hits) = proxy();
    let (url, rx) = receiver(204);
    let env: Vec<(&str, &str)> = ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"]
        .into_iter()
        .map(|k| (k, proxy_url.as_str()))
        .chain([("NO_PROXY", ""), ("no_proxy", "")])
        .collect();
    let out = hook_with_env(&["dialog-spool", "--post", &format!("{url}/hooks/r-1")], Some(TOKEN), &env);
    assert!(out.status.success() && out.stderr.is_empty(), "{}", stderr(&out));
    let seen = rx.recv_timeout(std::time::Duration::from_secs(10)).expect("delivered to the receiver itself");
    assert!(seen.head.contains(&format!("authorization: Bearer {TOKEN}")));
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0, "the proxy saw a connection (and the token)");
}

#[test]
fn the_token_is_refused_on_the_command_line_and_clear_text_off_loopback() {
    let (url, rx) = receiver(204);
    for (args, why) in [
        (vec!["dialog-spool", "--token", TOKEN, "--post", &url], "never from the command line"),
        (vec!["dialog-spool", "--post", &url, &format!("--token={TOKEN}")], "never from the command line"),
        (vec!["dialog-spool", "--post", "http://user:secret@127.0.0.1:9/x"], "credentials"),
        (vec!["dialog-spool", "--post", "http://192.0.2.1/x"], "loopback"),
        (vec!["dialog-clear", "--post", &url], "usage"),
    ] {
        let out = hook(&args, Some(TOKEN));
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(stderr(&out).contains(why), "{args:?}: {}", stderr(&out));
    }
    assert!(rx.try_recv().is_err(), "nothing was sent");
}

#[test]
fn the_file_form_is_unchanged_exit_0_whatever_happens() {
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("r-1.spool.json");
    let out = hook(&["dialog-spool", spool.to_str().unwrap()], None);
    assert!(out.status.success());
    assert_eq!(std::fs::read_to_string(&spool).unwrap(), PAYLOAD);
    let out = hook(&["dialog-spool", "/nonexistent-lab-dir/x.json"], None);
    assert_eq!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("nothing written"));
}

/// Agents fail closed on a hook error (Claude Code since 2.1.288: a non-zero exit or a
/// signal may block the tool): `lab hook` exits 0 with nothing on stdout in every case.
#[test]
fn every_lab_hook_exits_0_with_no_output_whatever_goes_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("r-1.spool.json");
    let spool_s = spool.to_str().unwrap().to_string();
    let fifo = dir.path().join("fifo.json");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string; mkfifo has no other precondition.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let closed_port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let gone_url = format!("http://127.0.0.1:{closed_port}/hooks/r-1");
    let big = format!(r#"{{"pad":"{}"}}"#, "x".repeat(2 << 20));
    // (what, shell prefix, args, stdin, what stderr says)
    let cases: Vec<(&str, &str, Vec<String>, String, &str)> = vec![
        (
            "lab's home gone",
            "",
            vec!["dialog-spool".into(), "/nonexistent-lab-home/runtime/r-1.spool.json".into()],
            PAYLOAD.into(),
            "nothing written",
        ),
        (
            "lab's socket gone",
            "",
            vec!["dialog-spool".into(), "--post".into(), gone_url],
            PAYLOAD.into(),
            "could not reach",
        ),
        (
            "a full disk (file-size limit 0)",
            "ulimit -f 0; ",
            vec!["dialog-spool".into(), spool_s.clone()],
            PAYLOAD.into(),
            "nothing written",
        ),
        ("a malformed payload", "", vec!["blocked-marker".into(), spool_s.clone()], "{not json".into(), "not JSON"),
        (
            "a payload that is no object",
            "",
            vec!["session-info".into(), spool_s.clone()],
            "[1, 2]".into(),
            "not a JSON object",
        ),
        ("an oversized payload", "", vec!["dialog-spool".into(), spool_s.clone()], big, "limit"),
        ("no payload at all", "", vec!["dialog-spool".into(), spool_s.clone()], String::new(), "not JSON"),
        (
            "a spool swapped for a FIFO",
            "",
            vec!["dialog-clear".into(), fifo.to_str().unwrap().into(), "--match".into(), "/tool_use_id".into()],
            PAYLOAD.into(),
            "FIFO",
        ),
        ("an unknown verb", "", vec!["launch-missiles".into(), spool_s.clone()], PAYLOAD.into(), "usage"),
    ];
    for (what, prefix, args, stdin, says) in cases {
        let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
        // `timeout`: a hook that hangs fails the test instead of stalling it.
        let script = format!("{prefix}exec timeout 10 '{LAB}' hook {}", quoted.join(" "));
        let mut child = Command::new("sh")
            .args(["-c", &script])
            .env_remove("LAB_HOOK_TOKEN")
            .env("LAB_HOOK_TOKEN", TOKEN)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = input.write_all(stdin.as_bytes());
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        assert_eq!(out.status.code(), Some(0), "{what}: {out:?}");
        assert!(out.stdout.is_empty(), "{what}: something on stdout");
        assert!(stderr(&out).contains(says), "{what}: {}", stderr(&out));
        assert!(!stderr(&out).contains(TOKEN), "{what}");
    }
    // A broken stderr (the agent closed its end) is no reason to fail either.
    let mut child = Command::new(LAB)
        .args(["hook", "dialog-spool", "/nonexistent-lab-home/x.json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let _ = child.stdin.take().unwrap().write_all(PAYLOAD.as_bytes());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "with a broken stderr");
}
