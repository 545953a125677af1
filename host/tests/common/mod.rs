//! Shared harness for lab's integration tests: a real `lab serve` on a loopback port
//! with its own home, real tmux, and agents that behave like the real ones.
#![allow(dead_code)]

pub mod acp_run;
mod agent_bin;
pub mod machine;
pub mod sshd;
pub mod terminal;
#[allow(unused_imports)] // not every suite or bench drives a real agent
pub use agent_bin::agent_bin;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime};

pub const LAB: &str = env!("CARGO_BIN_EXE_lab");

/// `target/<profile>/<name>`, built on demand for tools in other workspace crates.
pub fn workspace_bin(package: &str, name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
    let bin = dir.join(name);
    if !bin.exists() {
        let release = dir.file_name().is_some_and(|d| d == "release");
        let status = Command::new(env!("CARGO"))
            .args(["build", "-p", package, "--bin", name])
            .args(if release { &["--release"][..] } else { &[][..] })
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .status()
            .expect("run cargo");
        assert!(status.success(), "building {package} failed");
    }
    assert!(bin.exists(), "{} is missing", bin.display());
    bin
}

pub fn fake_claude() -> PathBuf {
    workspace_bin("fake-claude", "fake-claude")
}

/// Poll `f` until it returns Some, or panic after `timeout` with `what`.
pub fn wait_for<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A test's world: temp dirs for lab's home, the agent's HOME and the workdir.
pub struct World {
    pub dir: tempfile::TempDir,
    pub home: PathBuf,
    pub agent_home: PathBuf,
    pub workdir: PathBuf,
}

impl World {
    pub fn new() -> World {
        // Short paths: tmux's socket lives in lab's home (unix sockets max ~108 bytes).
        let dir = tempfile::Builder::new().prefix("lab-t").tempdir_in("/tmp").unwrap();
        let home = dir.path().join("h");
        let agent_home = dir.path().join("a");
        let workdir = dir.path().join("w");
        for d in [&home, &agent_home, &workdir] {
            std::fs::create_dir_all(d).unwrap();
        }
        World { dir, home, agent_home, workdir }
    }

    /// A world with `component` installed as the plainlog provider and `agent_script` (a
    /// shell script called as `<agent> --transcript <path> -- <prompt>`) as its program.
    pub fn with_plainlog(component: &str, agent_script: &str) -> World {
        use std::os::unix::fs::PermissionsExt;
        let w = World::new();
        let providers = w.home.join("providers");
        std::fs::create_dir_all(&providers).unwrap();
        std::fs::copy(component, providers.join("plainlog.wasm")).unwrap();
        let agent = w.dir.path().join("plainlog-agent");
        std::fs::write(&agent, agent_script).unwrap();
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        w.write_config(&format!("[providers.plainlog]\nprogram = {:?}\n", agent.display().to_string()));
        w
    }

    pub fn runtime(&self) -> PathBuf {
        self.home.join("runtime")
    }

    pub fn write_config(&self, toml: &str) {
        std::fs::write(self.home.join("lab.toml"), toml).unwrap();
    }

    /// Configure claude-code to launch fake-claude with `script`; returns the log path.
    pub fn use_fake_claude(&self, script: &Value) -> PathBuf {
        let script_path = self.dir.path().join("script.json");
        std::fs::write(&script_path, serde_json::to_vec_pretty(script).unwrap()).unwrap();
        let log = self.dir.path().join("fake.log");
        self.write_config(&format!(
            "[providers.claude-code]\nprogram = {:?}\nenv = {{ FAKE_CLAUDE_SCRIPT = {:?}, FAKE_CLAUDE_LOG = {:?} }}\n",
            fake_claude().display().to_string(),
            script_path.display().to_string(),
            log.display().to_string()
        ));
        log
    }

    pub fn serve(&self) -> Lab {
        Lab::start(self)
    }

    pub fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux").arg("-S").arg(self.home.join("tmux.sock")).args(args).output().unwrap()
    }

    pub fn log_events(log: &Path) -> Vec<Value> {
        std::fs::read_to_string(log).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// A client from `builder` that sends `token` (if any) as `Authorization: Bearer`.
pub fn bearer_client(token: Option<&str>, builder: reqwest::blocking::ClientBuilder) -> reqwest::blocking::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(t) = token {
        headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {t}").parse().unwrap());
    }
    builder.default_headers(headers).build().unwrap()
}

/// A running `lab serve`.
pub struct Lab {
    pub child: Child,
    pub url: String,
    /// lab's token, read from its home as every local client does (`None` when it
    /// serves with `--no-token`); [`Lab::get`] and the others send it.
    pub token: Option<String>,
    /// The rest of what `lab serve` printed at start (the login link, warnings).
    pub banner: Vec<String>,
    pub client: reqwest::blocking::Client,
}

impl Lab {
    /// `GET path` (an event stream) with the given headers, reading for at most
    /// `timeout`: the open response, for its headers or its lines.
    pub fn event_stream(&self, path: &str, headers: &[(&str, &str)], timeout: Duration) -> reqwest::blocking::Response {
        let mut req =
            reqwest::blocking::Client::builder().timeout(timeout).build().unwrap().get(format!("{}{path}", self.url));
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.send().unwrap()
    }

    pub fn start(w: &World) -> Lab {
        Lab::start_with(w, |_| {})
    }

    /// Like [`Lab::start`], but `configure` may adjust the `lab serve` command first
    /// (extra or removed environment variables: the agents inherit lab serve's
    /// environment).
    pub fn start_with(w: &World, configure: impl FnOnce(&mut Command)) -> Lab {
        Lab::start_on(w, "127.0.0.1:0", configure)
    }

    /// Like [`Lab::start_with`], listening on `addr` (a lab serve restarted on the same
    /// address).
    pub fn start_on(w: &World, addr: &str, configure: impl FnOnce(&mut Command)) -> Lab {
        let mut cmd = Command::new(LAB);
        cmd.args(["serve", "--addr", addr, "--home"])
            .arg(&w.home)
            .env("HOME", &w.agent_home)
            .env("LAB_LOG", "info,lab=debug")
            // Push stand-ins listen on loopback, over http.
            .env("LAB_PUSH_ALLOW_LOOPBACK_HTTP", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        configure(&mut cmd);
        let mut child = cmd.spawn().expect("start lab serve");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix("lab: serving on ")
            .unwrap_or_else(|| panic!("unexpected first line from lab serve: {line:?}"))
            .to_string();
        // The banner is one write: the rest of it is there already; what follows is read
        // (and dropped) in the background so lab serve never blocks on a full pipe.
        let mut banner = Vec::new();
        while out.buffer().contains(&b'\n') {
            let mut l = String::new();
            out.read_line(&mut l).unwrap();
            banner.push(l.trim_end().to_string());
        }
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        let token = banner
            .iter()
            .any(|l| l.contains("/login?code="))
            .then(|| std::fs::read_to_string(w.home.join("token")).expect("lab's token file").trim().to_string());
        let client =
            bearer_client(token.as_deref(), reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)));
        Lab { child, url, token, banner, client }
    }

    /// A client of its own (`builder` as the test needs it) that sends lab's token.
    pub fn client_from(&self, builder: reqwest::blocking::ClientBuilder) -> reqwest::blocking::Client {
        bearer_client(self.token.as_deref(), builder)
    }

    /// The one-time login link `lab serve` printed, if it needs its token.
    pub fn login_link(&self) -> Option<String> {
        self.banner.iter().find_map(|l| l.split_whitespace().find(|w| w.contains("/login?code=")).map(str::to_string))
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        let r = self.client.get(format!("{}{path}", self.url)).send().unwrap();
        let status = r.status().as_u16();
        (status, r.json().unwrap_or(Value::Null))
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let r = self.client.post(format!("{}{path}", self.url)).json(body).send().unwrap();
        let status = r.status().as_u16();
        (status, r.json().unwrap_or(Value::Null))
    }

    pub fn put(&self, path: &str, body: &Value) -> (u16, Value) {
        let r = self.client.put(format!("{}{path}", self.url)).json(body).send().unwrap();
        let status = r.status().as_u16();
        (status, r.json().unwrap_or(Value::Null))
    }

    pub fn delete(&self, path: &str) -> (u16, Value) {
        let r = self
            .client
            .delete(format!("{}{path}", self.url))
            .header("content-type", "application/json")
            .send()
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().unwrap_or(Value::Null))
    }

    pub fn post_raw(&self, path: &str, body: &str) -> (u16, Value) {
        let r = self
            .client
            .post(format!("{}{path}", self.url))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().unwrap_or(Value::Null))
    }

    pub fn create_run(&self, w: &World, provider: &str, prompt: &str) -> Value {
        self.create_run_in(&w.workdir, provider, prompt, None)
    }

    /// `POST /runs` in `workdir`, with a permission mode if given; the run (201).
    pub fn create_run_in(&self, workdir: &Path, provider: &str, prompt: &str, permission_mode: Option<&str>) -> Value {
        let mut body = json!({"provider": provider, "workdir": workdir, "prompt": prompt});
        if let Some(m) = permission_mode {
            body["permission_mode"] = json!(m);
        }
        let (status, run) = self.post("/runs", &body);
        assert_eq!(status, 201, "POST /runs: {run}");
        run
    }

    pub fn view(&self, id: &str) -> Value {
        let (status, v) = self.get(&format!("/runs/{id}/messages"));
        assert_eq!(status, 200, "{v}");
        v
    }

    /// Wait until the run's view satisfies `pred`.
    pub fn wait_view(&self, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        wait_for(Duration::from_secs(20), what, || Some(self.view(id)).filter(|v| pred(v)))
    }

    pub fn wait_state(&self, id: &str, state: &str) -> Value {
        self.wait_view(id, &format!("state {state}"), |v| v["state"] == state)
    }

    /// Stop lab serve (SIGTERM) and wait for it.
    pub fn stop(mut self) {
        self.terminate();
    }

    fn terminate(&mut self) {
        terminate(&mut self.child);
    }
}

/// SIGTERM `child` (lab serve shuts down gracefully on it), then SIGKILL if it is still
/// there after 10 s; reaps it either way.
pub fn terminate(child: &mut Child) {
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// A reader of `GET /runs/{id}/events` on a thread of its own (a test never blocks on
/// the stream): every `view` event with the wall-clock time it arrived.
pub struct EventLog {
    rx: Receiver<(SystemTime, Value)>,
    seen: Vec<(SystemTime, Value)>,
    cursor: usize,
}

impl EventLog {
    pub fn open(lab: &Lab, id: &str) -> EventLog {
        let resp = lab
            .client_from(reqwest::blocking::Client::builder().timeout(None))
            .get(format!("{}/runs/{id}/events", lab.url))
            .send()
            .expect("GET /runs/{id}/events");
        assert_eq!(resp.status().as_u16(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(resp).lines() {
                let Ok(line) = line else { break };
                if let Some(data) = line.strip_prefix("data: ") {
                    let at = SystemTime::now();
                    if let Ok(v) = serde_json::from_str::<Value>(data) {
                        if tx.send((at, v)).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        EventLog { rx, seen: Vec::new(), cursor: 0 }
    }

    /// The next event (after the ones already returned) that satisfies `pred`.
    pub fn wait(&mut self, timeout: Duration, what: &str, pred: impl Fn(&Value) -> bool) -> (SystemTime, Value) {
        let deadline = Instant::now() + timeout;
        loop {
            while self.cursor < self.seen.len() {
                let i = self.cursor;
                self.cursor += 1;
                if pred(&self.seen[i].1) {
                    return self.seen[i].clone();
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(ev) => self.seen.push(ev),
                Err(RecvTimeoutError::Timeout) => {
                    let states: Vec<&Value> = self.seen.iter().map(|(_, v)| &v["state"]).collect();
                    panic!("timed out after {timeout:?} waiting for {what}; states seen on SSE: {states:?}")
                }
                Err(RecvTimeoutError::Disconnected) => panic!("the SSE stream closed while waiting for {what}"),
            }
        }
    }

    /// Everything received so far (without consuming it).
    pub fn drain(&mut self) -> &[(SystemTime, Value)] {
        while let Ok(ev) = self.rx.try_recv() {
            self.seen.push(ev);
        }
        &self.seen
    }
}

/// The single-question AskUserQuestion used by several tests.
/// `git -C dir args…` as a test's operator runs it (none of the environment's `GIT_*`,
/// a test identity): its output, trimmed; a failure fails the test.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let mut c = Command::new("git");
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("GIT_") {
            c.env_remove(k);
        }
    }
    let out = c
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?} in {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

pub fn three_options() -> Value {
    json!({"questions": [{
        "question": "Which database should we use?",
        "header": "Database",
        "multiSelect": false,
        "options": [
            {"label": "PostgreSQL", "description": "Relational"},
            {"label": "SQLite", "description": "Embedded"},
            {"label": "Redis", "description": "In-memory"}
        ]
    }]})
}

/// The files in lab's `runtime/` other than tmux's session-closed signal
/// (lab::runs::live::liveness), which is lab's own and outlives every run.
pub fn runtime_files(runtime: &Path) -> Vec<String> {
    std::fs::read_dir(runtime)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != lab::runs::live::liveness::SIGNAL_FILE)
        .collect()
}

/// fake-claude: a line of text, the three-option question, a reply, then idle.
pub fn ask_then_idle() -> Value {
    json!({"steps": [
        {"say": "Let me ask you something."},
        {"ask": three_options()},
        {"say": "Thanks, noted."},
        {"idle": {}},
    ]})
}

/// fake-claude asking its question ([`ask_then_idle`]) in a run of `w`'s lab: (its log,
/// the lab, the run's id, the question's tool_id).
pub fn run_at_question(w: &World) -> (PathBuf, Lab, String, String) {
    let log = w.use_fake_claude(&ask_then_idle());
    let lab = w.serve();
    let id = lab.create_run(w, "claude-code", "hello")["id"].as_str().unwrap().to_string();
    let v = lab.wait_state(&id, "question");
    let tool_id = v["pending_dialog"]["tool_id"].as_str().expect("a pending dialog").to_string();
    (log, lab, id, tool_id)
}

/// A counting semaphore over the test binary: at most `limit` holders at a time (the
/// end-to-end suites bound how many real agents start at once on a small machine).
pub struct Slot;

static SLOTS: (std::sync::Mutex<usize>, std::sync::Condvar) = (std::sync::Mutex::new(0), std::sync::Condvar::new());

impl Slot {
    #[allow(dead_code)]
    pub fn take(limit: usize) -> Slot {
        let (m, cv) = &SLOTS;
        let mut used = m.lock().unwrap_or_else(|e| e.into_inner());
        while *used >= limit.max(1) {
            used = cv.wait(used).unwrap_or_else(|e| e.into_inner());
        }
        *used += 1;
        Slot
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let (m, cv) = &SLOTS;
        *m.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        cv.notify_one();
    }
}

/// `bytes` of numbered lines of distinct text (`<tag> line 000042: …`), trailing
/// whitespace trimmed: a long input where a lost or duplicated chunk shows.
/// Every file under `dir` (none if it is not a folder).
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

pub fn distinct_lines(tag: &str, bytes: usize) -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < bytes {
        s.push_str(&format!("{tag} line {i:06}: the quick brown fox jumps over the lazy dog\n"));
        i += 1;
    }
    s.truncate(bytes);
    s.trim_end().to_string()
}

/// Any `sk-ant-…` string works against the Messages stand-in; its last 20 chars are
/// approved in a seeded `.claude.json`.
pub const STANDIN_KEY: &str = "sk-ant-api03-standin-0123456789abcdefghijklmnopqrstuvwxyz-test";

/// What the real `claude` needs to talk only to the Messages stand-in at `base_url`
/// (lab.toml `env` for the provider).
pub fn claude_offline_env(base_url: String) -> Vec<(&'static str, String)> {
    vec![
        ("ANTHROPIC_BASE_URL", base_url),
        ("ANTHROPIC_API_KEY", STANDIN_KEY.to_string()),
        ("DISABLE_TELEMETRY", "1".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        ("DISABLE_AUTOUPDATER", "1".into()),
    ]
}

/// A claude-code run's record as lab's registry keeps it, for a history written
/// straight into a registry (lab serve not running): in `status` (ended at
/// `created_at` if ended), its tmux session on `tmux_socket`, its transcript at
/// `transcript` if any.
pub fn a_record(
    id: lab::store::paths::RunId,
    status: lab::runs::registry::Status,
    created_at: &str,
    tmux_socket: &str,
    transcript: Option<String>,
) -> lab::runs::registry::RunRecord {
    use lab::runs::registry::{RunRecord, Status};
    let rec = RunRecord {
        tmux_socket: tmux_socket.into(),
        transcript_path: transcript,
        dialog_hooker: true,
        ..RunRecord::new(id, "claude-code", "/tmp", "a prompt that stays in the registry", created_at)
    };
    match status {
        Status::Ended => rec.ended(created_at),
        status => RunRecord { status, ..rec },
    }
}
