//! The runner daemon and its proxy (what lab serve runs over ssh), on this machine
//! without ssh: the proxy's stdio is what the ssh session carries. A first proxy
//! starts the daemon; the daemon outlives the proxy (a cut) and so does the tmux run
//! it started; the next proxy of the same build links to the same daemon; one of
//! another build replaces it (the run goes on); a daemon newer than the proxy is
//! refused, naming both versions.

mod common;

use common::{wait_for, LAB};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

struct Proxy {
    home: PathBuf,
    child: Child,
    to: ChildStdin,
    /// Its stdout's lines, read on a thread of their own ("" at the end).
    lines: std::sync::mpsc::Receiver<String>,
}

impl Proxy {
    fn start(home: &Path, build: &str) -> Proxy {
        let mut child = Command::new(LAB)
            .args(["runner", "proxy", "--home"])
            .arg(home)
            .args(["--build", build])
            .env("SHELL", "/bin/sh")
            .env_remove("TMUX")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let to = child.stdin.take().unwrap();
        let mut from = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || loop {
            let mut line = String::new();
            let n = from.read_line(&mut line).unwrap_or(0);
            if tx.send(line).is_err() || n == 0 {
                return;
            }
        });
        Proxy { home: home.to_path_buf(), child, to, lines }
    }

    /// The next frame, within 15 s.
    fn recv(&mut self) -> Value {
        let line = self.line();
        if line.is_empty() {
            let _ = self.child.kill();
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(&mut self.child.stderr.take().unwrap(), &mut err);
            let log = std::fs::read_to_string(self.home.join("logs/runner.log")).unwrap_or_default();
            panic!("the proxy ended: {err}\nthe daemon's log:\n{log}");
        }
        serde_json::from_str(line.trim_end()).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    }

    /// The next line (empty: the end), within 15 s.
    fn line(&mut self) -> String {
        self.lines.recv_timeout(Duration::from_secs(15)).unwrap_or_else(|_| {
            let _ = self.child.kill();
            panic!("no line from the proxy within 15 s")
        })
    }

    fn send(&mut self, v: Value) {
        writeln!(self.to, "{v}").unwrap();
        self.to.flush().unwrap();
    }

    /// `op`'s reply (frames before it that are not replies are skipped).
    fn call(&mut self, id: u64, op: Value) -> Value {
        self.send(json!({"type": "call", "id": id, "op": op}));
        loop {
            let f = self.recv();
            if f["type"] == "reply" && f["id"] == id {
                return f["reply"].clone();
            }
        }
    }

    /// Hello, welcome: linked.
    fn link(&mut self) -> Value {
        let hello = self.recv();
        assert_eq!(hello["type"], "hello", "{hello}");
        self.send(json!({"type": "welcome", "version": env!("CARGO_PKG_VERSION")}));
        self.send(json!({"type": "ping"}));
        assert_eq!(self.recv(), json!({"type": "pong"}));
        hello
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The daemon's greeting, read on its socket.
fn greeting(home: &Path) -> Value {
    let s = UnixStream::connect(home.join("runtime/runner.sock")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap()
}

fn alive(pid: i32) -> bool {
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Stops what the test started: the daemon (by the pid it gave) and its tmux server.
struct Cleanup(PathBuf);
impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Ok(s) = UnixStream::connect(self.0.join("runtime/runner.sock")) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut line = String::new();
            let _ = BufReader::new(s).read_line(&mut line);
            if let Some(pid) = serde_json::from_str::<Value>(&line).ok().and_then(|g| g["pid"].as_i64()) {
                if pid > 1 {
                    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                }
            }
        }
        let _ = Command::new("tmux").arg("-S").arg(self.0.join("tmux.sock")).arg("kill-server").output();
    }
}

#[test]
fn the_daemon_outlives_its_proxy_and_a_new_build_replaces_it_while_runs_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("runner");
    let _cleanup = Cleanup(home.clone());
    let version = env!("CARGO_PKG_VERSION");

    let mut p = Proxy::start(&home, "build-a");
    let hello = p.link();
    assert_eq!(hello["home"], home.to_str().unwrap(), "{hello}");
    assert_eq!(hello["tmux_socket"], home.join("tmux.sock").to_str().unwrap());
    assert_eq!(hello["proof"], "", "no credential on an ssh link");
    let g = greeting(&home);
    assert_eq!((g["lab_runner"].as_str(), g["build"].as_str()), (Some(version), Some("build-a")), "{g}");
    let daemon = g["pid"].as_i64().unwrap() as i32;
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: PathBuf| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(home.join("runtime")), 0o700);
    assert_eq!(mode(home.join("runtime/runner.sock")), 0o600);

    let target = "lab-daemon-test";
    let r = p.call(1, json!({"op": "start", "target": target, "argv": ["sleep", "300"]}));
    assert_eq!(r, json!({"reply": "done"}));
    assert_eq!(p.call(2, json!({"op": "alive", "target": target})), json!({"reply": "alive", "alive": true}));
    // An answer for a provider build this runner does not have: nothing typed, said so
    // (lab serve then plays it itself).
    let dialog = json!({"id": "t1", "call_id": null, "tool_name": "AskUserQuestion", "answerable": true,
        "deep_link": null, "body": {"generic": {"title": "Q", "text": "", "options": []}}});
    let r = p.call(
        9,
        json!({"op": "answer", "target": target, "build": "00000000deadbeef", "dialog": dialog,
               "steps": [{"key": "Enter"}], "pause_ms": 0, "settle_ms": 0, "look_ms": 100}),
    );
    assert_eq!(r["reply"], "text", "{r}");
    let answered: Value = serde_json::from_str(r["text"].as_str().unwrap()).unwrap();
    assert_eq!(answered["typed"], "no", "{answered}");
    // Refused like any runner's: only what lab would ask.
    let r = p.call(3, json!({"op": "kill", "target": "main"}));
    assert_eq!(r["reply"], "error", "{r}");

    // The link is cut: the daemon and the run go on.
    p.kill();
    std::thread::sleep(Duration::from_millis(100));
    assert!(alive(daemon), "the daemon outlives its proxy");
    let mut p = Proxy::start(&home, "build-a");
    p.link();
    assert_eq!(greeting(&home)["pid"], daemon, "the same daemon");
    assert_eq!(p.call(4, json!({"op": "alive", "target": target})), json!({"reply": "alive", "alive": true}));

    // A second link replaces the first (after a cut, the new one is the live one).
    let mut q = Proxy::start(&home, "build-a");
    q.link();
    assert_eq!(p.line(), "", "the replaced link is closed");
    p.kill();

    // Another build replaces the daemon; the run goes on.
    let mut b = Proxy::start(&home, "build-b");
    b.link();
    let g = greeting(&home);
    assert_eq!(g["build"], "build-b");
    assert_ne!(g["pid"], daemon);
    wait_for(Duration::from_secs(10), "the old daemon gone", || (!alive(daemon)).then_some(()));
    assert_eq!(b.call(5, json!({"op": "alive", "target": target})), json!({"reply": "alive", "alive": true}));
    q.kill();
    b.kill();
}

#[test]
fn a_daemon_newer_than_the_proxy_is_refused_naming_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("runner");
    std::fs::create_dir_all(home.join("runtime")).unwrap();
    let listener = std::os::unix::net::UnixListener::bind(home.join("runtime/runner.sock")).unwrap();
    let newer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        writeln!(s, r#"{{"lab_runner":"999.0.0","build":"future","pid":{}}}"#, i32::MAX).unwrap();
        std::thread::sleep(Duration::from_millis(500));
    });
    let mut p = Proxy::start(&home, "build-a");
    let status = wait_for(Duration::from_secs(15), "the proxy to end", || p.child.try_wait().unwrap());
    let mut err = String::new();
    std::io::Read::read_to_string(&mut p.child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(3), "{err}");
    assert!(err.contains("lab 999.0.0") && err.contains(env!("CARGO_PKG_VERSION")), "{err}");
    newer.join().unwrap();
}
