//! The `[notify]` webhook against a real `lab serve`, real tmux and fake-claude, with a
//! tiny HTTP receiver on 127.0.0.1 in the test.

mod common;

use common::*;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the receiver does with each request.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Answer with these statuses in turn, then 200.
    Statuses(&'static [u16]),
    /// Read the request, never answer (keep the connection open).
    Hang,
}

/// One request the receiver got.
struct Received {
    at: Instant,
    path: String,
    /// Lower-case names.
    headers: HashMap<String, String>,
    body: Value,
}

/// A webhook receiver on 127.0.0.1: records every POST, answers per [`Behaviour`].
struct Receiver {
    url: String,
    got: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    fn start(behaviour: Behaviour) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook/topic", listener.local_addr().unwrap());
        let got = Arc::new(Mutex::new(Vec::new()));
        let sink = got.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let Some(req) = read_request(&stream) else { continue };
                let n = {
                    let mut got = sink.lock().unwrap();
                    got.push(req);
                    got.len()
                };
                match behaviour {
                    Behaviour::Hang => held.push(stream),
                    Behaviour::Statuses(list) => {
                        let status = list.get(n - 1).copied().unwrap_or(200);
                        let _ = write!(stream, "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                    }
                }
            }
        });
        Receiver { url, got }
    }

    fn count(&self) -> usize {
        self.got.lock().unwrap().len()
    }

    /// Wait until `n` requests arrived (at most `timeout`).
    fn wait_for(&self, n: usize, timeout: Duration) {
        wait_for(timeout, &format!("{n} webhook request(s)"), || (self.count() >= n).then_some(()));
    }
}

fn read_request(stream: &TcpStream) -> Option<Received> {
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let at = Instant::now();
    let path = line.split_whitespace().nth(1)?.to_string();
    assert!(line.starts_with("POST "), "the webhook is a POST: {line:?}");
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
    }
    let len: usize = headers.get("content-length")?.parse().ok()?;
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some(Received { at, path, headers, body: serde_json::from_slice(&body).ok()? })
}

/// fake-claude with `script`, plus `notify` (a `[notify]` table's body) in lab.toml.
fn configure(w: &World, script: &Value, notify: Option<&str>) {
    w.use_fake_claude(script);
    if let Some(n) = notify {
        let path = w.home.join("lab.toml");
        let mut toml = std::fs::read_to_string(&path).unwrap();
        toml += &format!("\n[notify]\n{n}\n");
        std::fs::write(path, toml).unwrap();
    }
}

fn run_id(run: &Value) -> String {
    run["id"].as_str().unwrap().to_string()
}

/// Poll the view every 10 ms until a dialog is pending: (when it was first seen, view).
fn first_sight_of_dialog(lab: &Lab, id: &str) -> (Instant, Value) {
    wait_for(Duration::from_secs(20), "a pending dialog", || {
        let v = lab.view(id);
        if v["pending_dialog"].is_null() {
            std::thread::sleep(Duration::from_millis(10));
            None
        } else {
            Some((Instant::now(), v))
        }
    })
}

/// Answer the pending dialog with option 0: how long the POST took.
fn answer(lab: &Lab, id: &str, view: &Value) -> Duration {
    let tool_id = view["pending_dialog"]["tool_id"].as_str().unwrap();
    let started = Instant::now();
    let (status, body) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": tool_id, "answers": [{"option": 0}]}));
    let took = started.elapsed();
    assert_eq!(status, 202, "{body}");
    took
}

#[test]
fn a_dialog_reaches_the_webhook_within_a_second() {
    let w = World::new();
    let rx = Receiver::start(Behaviour::Statuses(&[]));
    configure(
        &w,
        &ask_then_idle(),
        Some(&format!(
            "url = {:?}\nheaders = {{ Authorization = \"Bearer notify-secret-42\" }}\nbase_url = \"https://lab.example/\"",
            rx.url
        )),
    );
    let lab = w.serve();
    let id = run_id(&lab.create_run(&w, "claude-code", "pick a database"));
    let (seen, view) = first_sight_of_dialog(&lab, &id);
    rx.wait_for(1, Duration::from_secs(5));
    let got = rx.got.lock().unwrap();
    let r = &got[0];
    let late = r.at.saturating_duration_since(seen);
    eprintln!("notify: the webhook came {late:?} after the dialog was first seen");
    assert!(late < Duration::from_secs(1), "the webhook came {late:?} after the dialog appeared");

    let link = format!("https://lab.example/#/runs/{id}");
    let tool_id = view["pending_dialog"]["tool_id"].clone();
    assert_eq!(r.path, "/hook/topic");
    assert_eq!(r.body["run_id"], id.as_str());
    assert_eq!(r.body["provider"], "claude-code");
    // The workdir's last folder only: the full path never leaves the machine.
    assert_eq!(r.body["project"], w.workdir.file_name().unwrap().to_str().unwrap());
    assert!(r.body.get("workdir").is_none(), "{}", r.body);
    assert!(!r.body.to_string().contains(&w.workdir.display().to_string()), "{}", r.body);
    assert_eq!(r.body["state"], "question");
    assert_eq!(r.body["summary"], "Which database should we use?");
    assert_eq!(r.body["link"], link.as_str());
    assert_eq!(r.body["dialog"], json!({"kind": "question", "tool_id": tool_id}));
    assert!(r.body["title"].as_str().unwrap().contains("question"), "{}", r.body);
    assert!(r.body["at"].as_str().unwrap().ends_with('Z'), "{}", r.body);
    assert_eq!(r.headers["content-type"], "application/json");
    assert_eq!(r.headers["authorization"], "Bearer notify-secret-42");
    assert_eq!(r.headers["title"], r.body["title"].as_str().unwrap());
    assert_eq!(r.headers["click"], link);
    assert_eq!(r.headers["tags"], "lab,question");
    drop(got);

    // A restarted lab serve finds the run waiting: that is not news.
    lab.stop();
    let lab = w.serve();
    let (_, view) = first_sight_of_dialog(&lab, &id);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(rx.count(), 1, "a state found at start-up was notified");

    // Answered, the run goes on; idle is not configured, so nothing more is sent.
    answer(&lab, &id, &view);
    lab.wait_state(&id, "idle");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(rx.count(), 1, "only the question was notified");
    lab.stop();
    let log = std::fs::read_to_string(w.home.join("logs/lab.log")).unwrap();
    assert!(log.contains("notification delivered"), "{log}");
    assert!(!log.contains("notify-secret-42") && !log.contains("/hook/topic"), "a secret reached the log");
}

#[test]
fn a_failing_receiver_is_retried_with_backoff_and_the_run_goes_on() {
    let w = World::new();
    let rx = Receiver::start(Behaviour::Statuses(&[500, 500]));
    configure(&w, &ask_then_idle(), Some(&format!("url = {:?}\nevents = [\"question\", \"ended\"]", rx.url)));
    let lab = w.serve();
    let id = run_id(&lab.create_run(&w, "claude-code", "pick a database"));
    let (_, view) = first_sight_of_dialog(&lab, &id);
    rx.wait_for(3, Duration::from_secs(10));
    {
        let got = rx.got.lock().unwrap();
        let gaps: Vec<Duration> = got.windows(2).map(|p| p[1].at - p[0].at).collect();
        assert!(gaps[0] >= Duration::from_millis(450), "first retry after {:?}", gaps[0]);
        assert!(gaps[1] >= Duration::from_millis(950), "second retry after {:?}", gaps[1]);
        assert!(got.iter().all(|r| r.body == got[0].body), "every attempt sends the same notification");
        assert_eq!(got[0].body["state"], "question");
    }
    // The run is unaffected: the dialog is answered and the run goes on.
    answer(&lab, &id, &view);
    lab.wait_state(&id, "idle");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(rx.count(), 3, "a delivered notification is not sent again");

    // `ended` is configured: stopping the run notifies once more.
    let (status, body) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!(status, 200, "{body}");
    rx.wait_for(4, Duration::from_secs(5));
    let got = rx.got.lock().unwrap();
    assert_eq!(got[3].body["state"], "ended");
    assert_eq!(got[3].body["dialog"], Value::Null);
    assert_eq!(got[3].headers["tags"], "lab,ended");
}

#[test]
fn a_blocked_run_notifies_needs_input_and_then_idle() {
    let w = World::new();
    let rx = Receiver::start(Behaviour::Statuses(&[]));
    // The agent says it waits with no dialog to show (a permission prompt is a dialog
    // now; this is the Notification alone), then finishes its turn.
    let script = json!({"steps": [
        {"say": "I will list files."},
        {"notify": {"notification_type": "permission_prompt", "message": "Needs your permission to list files"}},
        {"sleep_ms": 4000},
        {"say": "Done listing."},
        {"idle": {}},
    ]});
    configure(&w, &script, Some(&format!("url = {:?}\nevents = [\"needs_input\", \"idle\"]", rx.url)));
    let lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "list files");
    let id = run_id(&run);
    let v = lab.wait_state(&id, "needs_input");
    rx.wait_for(1, Duration::from_secs(5));
    {
        let got = rx.got.lock().unwrap();
        assert_eq!(got[0].body["state"], "needs_input");
        assert_eq!(got[0].body["summary"], v["blocked"]["message"]);
        assert_eq!(got[0].body["dialog"], Value::Null);
        assert_eq!(got[0].headers["tags"], "lab,needs_input");
    }
    // The agent goes on and finishes its turn: `idle` is configured too.
    lab.wait_state(&id, "idle");
    rx.wait_for(2, Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(300));
    let got = rx.got.lock().unwrap();
    let states: Vec<&Value> = got.iter().map(|r| &r.body["state"]).collect();
    assert_eq!(states, [&json!("needs_input"), &json!("idle")]);
}

/// One dialog round: how long until the dialog shows after the run is created, the
/// slowest view read while it is pending, and the answer POST.
struct Round {
    to_dialog: Duration,
    slowest_view: Duration,
    answer: Duration,
}

fn dialog_round(w: &World, lab: &Lab) -> Round {
    let created = Instant::now();
    let id = run_id(&lab.create_run(w, "claude-code", "pick a database"));
    let (seen, view) = first_sight_of_dialog(lab, &id);
    let to_dialog = seen - created;
    let slowest_view = (0..5)
        .map(|_| {
            let t = Instant::now();
            lab.view(&id);
            t.elapsed()
        })
        .max()
        .unwrap();
    let answer = answer(lab, &id, &view);
    lab.wait_state(&id, "idle");
    Round { to_dialog, slowest_view, answer }
}

#[test]
fn a_dead_receiver_slows_nothing_down() {
    // The baseline: no [notify].
    let base = {
        let w = World::new();
        configure(&w, &ask_then_idle(), None);
        let lab = w.serve();
        dialog_round(&w, &lab)
    };
    // A receiver that takes the request and never answers: the POST is in flight
    // (and stays so for its timeout) while the operator answers.
    let hang = Receiver::start(Behaviour::Hang);
    // A port nobody listens on: every attempt fails at once, and is retried.
    let refused = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/hook", l.local_addr().unwrap())
    };
    for (what, url) in [("a hanging receiver", hang.url.clone()), ("a refused port", refused)] {
        let w = World::new();
        configure(&w, &ask_then_idle(), Some(&format!("url = {url:?}")));
        let lab = w.serve();
        let round = dialog_round(&w, &lab);
        eprintln!(
            "notify: {what}: dialog after {:?}, slowest view {:?}, answer {:?} (without notify: {:?}, {:?}, {:?})",
            round.to_dialog, round.slowest_view, round.answer, base.to_dialog, base.slowest_view, base.answer
        );
        if url == hang.url {
            assert!(hang.count() >= 1, "the hanging receiver never got the notification");
        }
        // Generous for a shared machine: a receiver on the path would add its 5 s timeout.
        let margin = Duration::from_millis(500);
        assert!(
            round.to_dialog <= base.to_dialog + Duration::from_secs(1),
            "{what}: the dialog showed after {:?} (without notify: {:?})",
            round.to_dialog,
            base.to_dialog
        );
        assert!(round.slowest_view < margin, "{what}: a view read took {:?}", round.slowest_view);
        assert!(
            round.answer <= base.answer + margin,
            "{what}: the answer took {:?} (without notify: {:?})",
            round.answer,
            base.answer
        );
        lab.stop();
    }
}

#[test]
fn a_bad_notify_table_stops_lab_serve_with_a_clear_error() {
    for (table, expect) in [
        ("url = \"ftp://ntfy.example/secret-topic\"", "must be an http:// or https:// URL"),
        ("url = \"ntfy.example/secret-topic\"", "url is not a URL"),
        ("url = \"https://ntfy.example/secret-topic\"\nevents = [\"sometimes\"]", "unknown event \"sometimes\""),
        ("url = \"https://ntfy.example/secret-topic\"\nheaders = { Authorization = \"a\\nb\" }", "Authorization"),
        ("url = \"https://ntfy.example/secret-topic\"\nbase_url = \"lab.example\"", "base_url is not a URL"),
        ("uri = \"https://ntfy.example/secret-topic\"", "unknown field `uri`"),
    ] {
        let w = World::new();
        w.write_config(&format!("[notify]\n{table}\n"));
        let mut child = std::process::Command::new(LAB)
            .args(["serve", "--addr", "127.0.0.1:0", "--home"])
            .arg(&w.home)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let status = wait_for(Duration::from_secs(20), "lab serve to exit", || child.try_wait().unwrap());
        let mut stderr = String::new();
        child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
        let mut stdout = String::new();
        child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
        assert_eq!(status.code(), Some(1), "{table}: {stderr}");
        assert!(stderr.contains(expect), "{table}: {stderr}");
        assert!(!stdout.contains("serving on"), "{table}: lab served: {stdout}");
        // A checked table's errors name [notify] and never repeat the URL (its path may be
        // a secret); a misspelt key is the TOML parser's error, which quotes the line.
        if !expect.contains("field") {
            assert!(stderr.contains("[notify]"), "{table}: {stderr}");
            assert!(!stderr.contains("secret-topic"), "{table}: the URL was repeated: {stderr}");
        }
    }
}
