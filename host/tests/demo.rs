//! The demo (`scripts/serve --demo` = tools/demo's `lab-demo`) with the REAL `claude`
//! binary: every card of the demo conversation appears in lab's API and is answered the
//! way an operator would, the agent only ever talks to the stand-in on 127.0.0.1, and
//! stopping the demo stops lab, the stand-in and the demo's runs.
//!
//! The binary: `LAB_CLAUDE_BIN` (scripts/install-claude.sh prints it). Missing: with
//! `CI=true` the test fails; otherwise it prints a loud SKIPPED (like e2e_claude.rs).

mod common;

use common::*;
use messages_standin::demo::{QUESTION_EXTRAS, QUESTION_LANGUAGE};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Launch to the first card on a loaded 2-core machine (a few seconds when idle).
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(120);
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

fn claude_bin() -> Option<PathBuf> {
    agent_bin("LAB_CLAUDE_BIN", "scripts/install-claude.sh", "the demo test against the real claude")
}

/// `lab-demo`, built now: `workspace_bin` only builds a missing binary, and a stale
/// one would test old code.
fn lab_demo_bin() -> PathBuf {
    let bin = workspace_bin("lab-demo", "lab-demo");
    let release = bin.parent().and_then(Path::file_name).is_some_and(|d| d == "release");
    let status = Command::new(env!("CARGO"))
        .args(["build", "-q", "-p", "lab-demo", "--bin", "lab-demo"])
        .args(if release { &["--release"][..] } else { &[][..] })
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .status()
        .expect("run cargo");
    assert!(status.success(), "building lab-demo failed");
    bin
}

/// A running `lab-demo` with its own state directory.
struct Demo {
    child: Child,
    _stdout: BufReader<std::process::ChildStdout>,
    state: tempfile::TempDir,
    url: String,
    standin: String,
    log: PathBuf,
    http: reqwest::blocking::Client,
}

impl Demo {
    fn start(claude: &Path) -> Demo {
        // Short path: the tmux socket lives in it.
        let state = tempfile::Builder::new().prefix("lab-d").tempdir_in("/tmp").unwrap();
        let log = state.path().join("demo.log");
        let mut child = Command::new(lab_demo_bin())
            .arg("--state-dir")
            .arg(state.path().join("s"))
            .arg("--lab")
            .arg(LAB)
            .arg("--claude")
            .arg(claude)
            .args(["--addr", "127.0.0.1:0"])
            .env("LAB_LOG", "info,lab=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start lab-demo");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (mut url, mut standin) = (None, None);
        while url.is_none() {
            let mut line = String::new();
            if stdout.read_line(&mut line).unwrap() == 0 {
                panic!("lab-demo ended before lab served; its log:\n{}", std::fs::read_to_string(&log).unwrap());
            }
            if let Some(u) = line.trim().strip_prefix("lab-demo: stand-in on ") {
                standin = Some(u.to_string());
            }
            url = line.trim().strip_prefix("lab: serving on ").map(str::to_string);
        }
        // The demo needs lab's token too: its login link is printed next; a script reads
        // the token from lab's home.
        let mut link = String::new();
        stdout.read_line(&mut link).unwrap();
        assert!(link.starts_with("lab: login link") && link.contains("/login?code="), "{link:?}");
        let token = std::fs::read_to_string(state.path().join("s/lab/token")).expect("the demo's token");
        let http =
            bearer_client(Some(token.trim()), reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)));
        Demo {
            child,
            _stdout: stdout,
            state,
            url: url.unwrap(),
            standin: standin.expect("lab-demo names the stand-in's address first"),
            log,
            http,
        }
    }

    fn root(&self) -> PathBuf {
        self.state.path().join("s")
    }

    fn get(&self, url: &str) -> (u16, Value) {
        let r = self.http.get(url).send().unwrap();
        (r.status().as_u16(), r.json().unwrap_or(Value::Null))
    }

    fn api(&self, path: &str) -> Value {
        let (status, v) = self.get(&format!("{}{path}", self.url));
        assert_eq!(status, 200, "GET {path}: {v}");
        v
    }

    fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let r = self.http.post(format!("{}{path}", self.url)).json(body).send().unwrap();
        (r.status().as_u16(), r.json().unwrap_or(Value::Null))
    }

    fn wait_view(&self, id: &str, timeout: Duration, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        wait_for(timeout, what, || Some(self.api(&format!("/runs/{id}/messages"))).filter(|v| pred(v)))
    }

    /// Waits for the pending dialog `pred` accepts.
    fn wait_dialog(&self, id: &str, timeout: Duration, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.wait_view(id, timeout, what, |v| !v["pending_dialog"].is_null() && pred(&v["pending_dialog"]))
            ["pending_dialog"]
            .clone()
    }

    fn answer(&self, id: &str, dialog: &Value, answers: Value) {
        let (status, body) =
            self.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": dialog["tool_id"], "answers": answers}));
        assert!(status == 200 || status == 202, "answer: {status} {body}");
    }

    fn standin_requests(&self) -> Vec<Value> {
        let (status, v) = self.get(&format!("{}/_standin/requests", self.standin));
        assert_eq!(status, 200);
        v.as_array().unwrap().clone()
    }

    fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux").arg("-S").arg(self.root().join("lab/tmux.sock")).args(args).output().unwrap()
    }

    /// SIGTERM, as `kill` does; returns whether it exited successfully within 30 s.
    fn stop(&mut self) -> Option<bool> {
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s.success());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let out = self.tmux(&["list-panes", "-a", "-F", "#{session_name}"]);
            for s in String::from_utf8_lossy(&out.stdout).lines() {
                let screen = self.tmux(&["capture-pane", "-p", "-t", s]);
                eprintln!("--- screen of {s}:\n{}", String::from_utf8_lossy(&screen.stdout).trim_end());
            }
            if let Ok(reqs) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.standin_requests())) {
                eprintln!("--- stand-in requests:");
                for r in reqs {
                    eprintln!("  {} {} {} reply={}", r["method"], r["path"], r["kind"], r["reply"]);
                }
            }
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(60).collect();
            eprintln!("--- lab-demo / lab serve log (last {} lines):", tail.len());
            for l in tail.into_iter().rev() {
                eprintln!("  {l}");
            }
        }
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.stop();
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = self.tmux(&["kill-server"]);
    }
}

/// The environment of a running process.
fn environ(pid: &str) -> Vec<(String, String)> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    raw.split(|b| *b == 0)
        .filter_map(|kv| String::from_utf8_lossy(kv).split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect()
}

fn labels(d: &Value) -> Vec<String> {
    d["questions"][0]["options"].as_array().unwrap().iter().map(|o| o["label"].as_str().unwrap().to_string()).collect()
}

#[test]
fn the_demo_walks_through_every_card_with_the_real_agent_and_stays_on_this_machine() {
    let Some(claude) = claude_bin() else { return };
    let mut demo = Demo::start(&claude);
    let started = Instant::now();

    // lab says it is a demo, and where demo runs go.
    let info = demo.api("/info");
    assert_eq!(info["demo"], true, "{info}");
    assert!(info["version"].as_str().is_some_and(|v| !v.is_empty()), "{info}");
    let workdir = demo.root().join("workdir");
    assert_eq!(info["demo_workdir"], json!(workdir), "{info}");

    // The agent's configuration points at the stand-in only.
    let toml: toml::Table =
        toml::from_str(&std::fs::read_to_string(demo.root().join("lab/lab.toml")).unwrap()).unwrap();
    let env = toml["providers"]["claude-code"]["env"].as_table().unwrap();
    assert_eq!(env["ANTHROPIC_BASE_URL"].as_str(), Some(demo.standin.as_str()));
    assert!(demo.standin.starts_with("http://127.0.0.1:"), "{}", demo.standin);
    assert!(env["ANTHROPIC_API_KEY"].as_str().unwrap().starts_with("sk-ant-demo-"));

    // Start a run as the UI's demo form does.
    let (status, run) = demo.post(
        "/runs",
        &json!({"provider": "claude-code", "workdir": workdir, "prompt": "Show me around", "permission_mode": "plan"}),
    );
    assert_eq!(status, 201, "POST /runs: {run}");
    let id = run["id"].as_str().unwrap().to_string();

    // 1. A single-select question; the operator picks option 1.
    let q1 = demo.wait_dialog(&id, LAUNCH_TIMEOUT, "the single-select question", |d| {
        d["questions"][0]["question"] == QUESTION_LANGUAGE
    });
    eprintln!("[demo] first card after {:.1} s", started.elapsed().as_secs_f64());
    assert_eq!(q1["kind"], "question");
    assert_eq!(q1["answerable"], true, "{q1}");
    assert_eq!(q1["questions"][0]["multi_select"], false);
    assert_eq!(labels(&q1), ["Rust", "Python", "TypeScript"]);
    demo.answer(&id, &q1, json!([{"option": 1}]));

    // 2. A multi-select question; the operator picks options 0 and 2.
    let q2 = demo.wait_dialog(&id, STEP_TIMEOUT, "the multi-select question", |d| {
        d["questions"][0]["question"] == QUESTION_EXTRAS
    });
    assert_eq!(q2["answerable"], true, "{q2}");
    assert_eq!(q2["questions"][0]["multi_select"], true);
    assert_eq!(labels(&q2), ["Tests", "CI", "Docs", "Logging"]);
    demo.answer(&id, &q2, json!([{"options": [0, 2]}]));

    // 3. The plan, built from both answers; approved in the terminal (lab shows it
    //    with a deep link: plans are not answerable from lab).
    // 2.1.332's hook names no plan: the card gains its text from the transcript's call a
    // moment later (the same dialog).
    let plan =
        demo.wait_dialog(&id, STEP_TIMEOUT, "the plan with its text", |d| d["kind"] == "plan" && d["plan"].is_string());
    assert_eq!(plan["tool_name"], "ExitPlanMode");
    let text = plan["plan"].as_str().unwrap();
    assert!(text.contains("in Python") && text.contains("Tests, Docs"), "{text}");
    let rec = demo.api(&format!("/runs/{id}"));
    let target = rec["tmux_target"].as_str().unwrap().to_string();
    wait_for(STEP_TIMEOUT, "the plan prompt in the terminal", || {
        let screen = String::from_utf8_lossy(&demo.tmux(&["capture-pane", "-p", "-t", &target]).stdout).into_owned();
        screen.contains("Exit plan mode").then_some(())
    });

    // While a card is up: the agent process's own environment is the demo's.
    let pane = demo.tmux(&["list-panes", "-t", &target, "-F", "#{pane_pid}"]);
    let pid = String::from_utf8_lossy(&pane.stdout).trim().to_string();
    let agent_env = environ(&pid);
    let var = |k: &str| agent_env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    assert_eq!(var("ANTHROPIC_BASE_URL"), Some(demo.standin.as_str()), "pid {pid}: {agent_env:?}");
    assert_eq!(var("HOME"), Some(demo.root().join("agent-home").to_str().unwrap()));
    for (k, v) in &agent_env {
        let lower = k.to_ascii_lowercase();
        assert!(!lower.ends_with("_proxy") && k != "ANTHROPIC_AUTH_TOKEN", "the agent got {k}={v}");
    }

    // The operator approves in the terminal. 2.1.332 draws the picker a moment before it
    // takes keys (an Enter at once is lost): as a person would, press again while the
    // prompt is still there.
    let screen = || String::from_utf8_lossy(&demo.tmux(&["capture-pane", "-p", "-t", &target]).stdout).into_owned();
    for attempt in 0..5 {
        let tui = demo.tmux(&["send-keys", "-t", &target, "Enter"]);
        assert!(tui.status.success());
        let gone = (0..20).any(|_| {
            std::thread::sleep(Duration::from_millis(100));
            !screen().contains("Exit plan mode")
        });
        if gone {
            break;
        }
        assert!(attempt < 4, "the plan prompt stayed after 5 Enters:\n{}", screen());
    }

    // 4. The closing text quotes the answers; the run is idle.
    let view = demo.wait_view(&id, STEP_TIMEOUT, "the closing text", |v| {
        v["state"] == "idle"
            && v["messages"].as_array().unwrap().iter().any(|m| {
                m["role"] == "assistant" && m["text"].as_str().is_some_and(|t| t.starts_with("You approved the plan"))
            })
    });
    let closing = view["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["text"].as_str())
        .find(|t| t.starts_with("You approved the plan"))
        .unwrap();
    assert!(closing.contains("“Python”") && closing.contains("“Tests, Docs”"), "{closing}");
    eprintln!("[demo] whole round trip in {:.1} s", started.elapsed().as_secs_f64());

    // Every model reply the agent showed came from the stand-in, which saw the main
    // requests of the whole conversation, addressed to it.
    let reqs = demo.standin_requests();
    let host = demo.standin.trim_start_matches("http://").to_string();
    for r in &reqs {
        let h = r["headers"].as_array().unwrap().iter().find(|h| h[0] == "host").map(|h| h[1].clone());
        assert_eq!(h, Some(json!(host)), "{}", r["path"]);
    }
    let main: Vec<&Value> = reqs.iter().filter(|r| r["kind"].get("main").is_some()).collect();
    let tools: Vec<&str> = main.iter().filter_map(|r| r["reply"]["tool_use"]["name"].as_str()).collect();
    assert_eq!(tools, ["AskUserQuestion", "AskUserQuestion", "ExitPlanMode"], "{main:?}");
    let sent: Vec<String> =
        reqs.iter().filter_map(|r| r["reply"]["text"].as_str()).map(|t| t.trim().to_string()).collect();
    for m in view["messages"].as_array().unwrap() {
        if m["role"] == "assistant" && m["kind"] == "text" {
            let t = m["text"].as_str().unwrap().trim();
            assert!(sent.iter().any(|s| s == t), "an assistant text the stand-in never sent: {t:?}");
        }
    }

    // Stopping the demo (kill) stops lab, the stand-in and the demo's runs.
    assert_eq!(demo.stop(), Some(true), "lab-demo exits cleanly on SIGTERM");
    let port: u16 = host.rsplit(':').next().unwrap().parse().unwrap();
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "the stand-in is gone");
    assert!(reqwest::blocking::get(format!("{}/info", demo.url)).is_err(), "lab serve is gone");
    assert!(!demo.tmux(&["list-sessions"]).status.success(), "the demo's tmux server is gone");
}
