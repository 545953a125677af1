//! ACP terminals (`terminal/create`, `output`, `wait_for_exit`, `kill`, `release`): each
//! command the agent asks for runs in a window of the run's own tmux session, so
//! attaching still shows the work. The window runs `lab agent-exec` (the launch file:
//! argv, workdir, environment, never on tmux's command line) → `lab term-exec`, which
//! runs the command with its output both in the pane and in a file lab reads, and
//! writes its exit status when it ends. Where the windows are made is a trait
//! ([`Windows`]); lab serve's is tmux.

use super::rpc::INVALID_PARAMS;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The most output kept of one terminal (the file stops growing; the pane still shows all).
pub const MAX_OUTPUT: u64 = 16 << 20;
/// How often `wait_for_exit` looks for the exit status.
const WAIT_POLL: Duration = Duration::from_millis(100);

/// Where terminal windows are made: the run's tmux session in lab serve.
pub trait Windows: Send + Sync {
    /// A new window `name` running `lab agent-exec --launch-file <launch>`.
    fn open(&self, name: &str, launch: &Path) -> Result<(), String>;
    fn close(&self, name: &str);
}

/// How a terminal's command ended, as `lab term-exec` writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExitStatus {
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
}

struct Term {
    out: PathBuf,
    status: PathBuf,
    pid: PathBuf,
    limit: Option<u64>,
}

/// Where one run's terminals live and what they start with.
pub struct Places {
    /// The run (names files and logs).
    pub run: String,
    /// Where outputs and statuses go (private).
    pub dir: PathBuf,
    /// Where launch files go (lab's runtime folder).
    pub runtime: PathBuf,
    pub lab_exe: PathBuf,
    /// The run's workdir: a `cwd` must be inside.
    pub root: PathBuf,
    /// The agent's environment.
    pub env: BTreeMap<String, String>,
    pub windows: Arc<dyn Windows>,
}

/// One run's terminals.
pub struct Terminals {
    at: Places,
    open: Mutex<HashMap<String, Term>>,
    next: AtomicU64,
}

type Answer = Result<Value, (i64, String)>;

fn bad(m: impl Into<String>) -> (i64, String) {
    (INVALID_PARAMS, m.into())
}

impl Terminals {
    pub fn new(at: Places) -> Terminals {
        Terminals { at, open: Mutex::new(HashMap::new()), next: AtomicU64::new(1) }
    }

    fn with<T>(&self, params: &Value, f: impl FnOnce(&Term) -> T) -> Result<T, (i64, String)> {
        let id = params["terminalId"].as_str().ok_or_else(|| bad("no terminalId"))?;
        let open = self.open.lock().unwrap();
        let t = open.get(id).ok_or_else(|| bad(format!("no terminal {id:?}")))?;
        Ok(f(t))
    }

    /// `terminal/create`.
    pub fn create(&self, params: &Value) -> Answer {
        let command = params["command"].as_str().filter(|c| !c.is_empty()).ok_or_else(|| bad("no command"))?;
        let mut argv = vec![command.to_string()];
        for a in params["args"].as_array().into_iter().flatten() {
            argv.push(a.as_str().ok_or_else(|| bad("args must be strings"))?.to_string());
        }
        let cwd = match params["cwd"].as_str() {
            Some(c) => super::fs::confine_dir(&self.at.root, c).map_err(bad)?,
            None => self.at.root.clone(),
        };
        if !cwd.is_dir() {
            return Err(bad(format!("{} is not a directory", cwd.display())));
        }
        let mut env = self.at.env.clone();
        for v in params["env"].as_array().into_iter().flatten() {
            let (Some(k), Some(val)) = (v["name"].as_str(), v["value"].as_str()) else {
                return Err(bad("env entries are {name, value}"));
            };
            if k.is_empty() || k.contains('=') || k.contains('\0') || val.contains('\0') {
                return Err(bad(format!("invalid environment variable {k:?}")));
            }
            env.insert(k.to_string(), val.to_string());
        }
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let id = format!("term-{n}");
        let base = self.at.dir.join(format!("{}.{id}", self.at.run));
        let t = Term {
            out: base.with_extension("out"),
            status: base.with_extension("status.json"),
            pid: base.with_extension("pid"),
            limit: params["outputByteLimit"].as_u64(),
        };
        let mut full = vec![
            self.at.lab_exe.to_string_lossy().into_owned(),
            "term-exec".into(),
            "--out".into(),
            t.out.to_string_lossy().into_owned(),
            "--status".into(),
            t.status.to_string_lossy().into_owned(),
            "--pid".into(),
            t.pid.to_string_lossy().into_owned(),
            "--".into(),
        ];
        full.extend(argv);
        let launch = crate::agents::agent_exec::LaunchFile {
            argv: full,
            workdir: cwd.to_string_lossy().into_owned(),
            env,
            sandbox: None,
        };
        let file = self.at.runtime.join(format!("{}.{id}.launch.json", self.at.run));
        let bytes = serde_json::to_vec(&launch).map_err(|e| (super::rpc::INTERNAL_ERROR, e.to_string()))?;
        crate::store::fsutil::write_atomic(&file, &bytes, 0o600)
            .map_err(|e| (super::rpc::INTERNAL_ERROR, e.to_string()))?;
        if let Err(e) = self.at.windows.open(&id, &file) {
            let _ = std::fs::remove_file(&file);
            return Err((super::rpc::INTERNAL_ERROR, format!("could not open a terminal window: {e}")));
        }
        tracing::info!(run = %self.at.run, terminal = %id, command, "opened a terminal for the agent");
        self.open.lock().unwrap().insert(id.clone(), t);
        Ok(json!({"terminalId": id}))
    }

    /// `terminal/output`.
    pub fn output(&self, params: &Value) -> Answer {
        let (out, status, limit) = self.with(params, |t| (t.out.clone(), t.status.clone(), t.limit))?;
        let (output, truncated) = read_tail(&out, limit);
        let mut r = json!({"output": output, "truncated": truncated});
        if let Some(s) = read_status(&status) {
            r["exitStatus"] = json!(s);
        }
        Ok(r)
    }

    /// `terminal/wait_for_exit`: until the command's status is written, or `stop` says so.
    pub async fn wait_for_exit(&self, params: &Value, stop: impl Fn() -> bool) -> Answer {
        let status = self.with(params, |t| t.status.clone())?;
        loop {
            if let Some(s) = read_status(&status) {
                return Ok(json!(s));
            }
            if stop() {
                return Err((super::rpc::INTERNAL_ERROR, "the run is stopping".into()));
            }
            tokio::time::sleep(WAIT_POLL).await;
        }
    }

    /// `terminal/kill`: the command ends (SIGKILL); the terminal stays until released.
    pub fn kill(&self, params: &Value) -> Answer {
        let (pid, status) = self.with(params, |t| (t.pid.clone(), t.status.clone()))?;
        if read_status(&status).is_none() {
            if let Some(pid) = std::fs::read_to_string(&pid).ok().and_then(|p| p.trim().parse::<i32>().ok()) {
                if pid > 1 {
                    // SAFETY: the pid `lab term-exec` wrote for the command it started, whose
                    // status is not written yet (it has not been reaped).
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
        }
        Ok(json!(null))
    }

    /// `terminal/release`: killed if still running, its window closed, its files gone.
    pub fn release(&self, params: &Value) -> Answer {
        self.kill(params)?;
        let id = params["terminalId"].as_str().unwrap_or_default().to_string();
        if let Some(t) = self.open.lock().unwrap().remove(&id) {
            self.at.windows.close(&id);
            for f in [&t.out, &t.status, &t.pid] {
                let _ = std::fs::remove_file(f);
            }
        }
        Ok(json!(null))
    }
}

impl Terminals {
    /// Every terminal killed and its files removed (the run ends; its windows go with
    /// its tmux session).
    pub fn release_all(&self) {
        let ids: Vec<String> = self.open.lock().unwrap().keys().cloned().collect();
        for id in ids {
            let _ = self.release(&json!({"terminalId": id}));
        }
    }
}

/// The output file's text, its last `limit` bytes (at a character boundary) if asked.
fn read_tail(path: &Path, limit: Option<u64>) -> (String, bool) {
    let Ok(mut f) = std::fs::File::open(path) else { return (String::new(), false) };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0).min(MAX_OUTPUT);
    let mut bytes = Vec::new();
    let _ = Read::by_ref(&mut f).take(len).read_to_end(&mut bytes);
    let mut truncated = false;
    if let Some(l) = limit {
        if bytes.len() as u64 > l {
            let mut cut = bytes.len() - l as usize;
            while cut < bytes.len() && (bytes[cut] & 0xC0) == 0x80 {
                cut += 1;
            }
            bytes.drain(..cut);
            truncated = true;
        }
    }
    (String::from_utf8_lossy(&bytes).into_owned(), truncated)
}

fn read_status(path: &Path) -> Option<ExitStatus> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// `lab term-exec --out F --status F --pid F -- argv…`: run argv (in the pane) with its
/// output (stdout and stderr together) shown and appended to F (up to [`MAX_OUTPUT`]),
/// its pid in the pid file, then its exit status in the status file.
pub fn term_exec_main(args: &[String]) -> i32 {
    let usage = || {
        eprintln!("lab term-exec: usage: lab term-exec --out FILE --status FILE --pid FILE -- COMMAND [ARG…]");
        2
    };
    let (mut out, mut status, mut pid) = (None, None, None);
    let mut it = args.iter();
    let argv: Vec<String> = loop {
        match it.next().map(String::as_str) {
            Some("--out") => out = it.next().cloned(),
            Some("--status") => status = it.next().cloned(),
            Some("--pid") => pid = it.next().cloned(),
            Some("--") => break it.cloned().collect(),
            _ => return usage(),
        }
    };
    let (Some(out), Some(status), Some(pid_file), Some(program)) = (out, status, pid, argv.first()) else {
        return usage();
    };
    // Closing the window hangs the pane up: the command gets SIGHUP; this notes it and
    // stays to write the status.
    // SAFETY: the handler only stores to an atomic (async-signal-safe).
    unsafe { libc::signal(libc::SIGHUP, on_hangup as *const () as libc::sighandler_t) };
    let result = (|| -> std::io::Result<ExitStatus> {
        let (mut reader, writer) = std::io::pipe()?;
        let mut child = std::process::Command::new(program)
            .args(&argv[1..])
            .stdin(std::process::Stdio::null())
            .stdout(writer.try_clone()?)
            .stderr(writer)
            .spawn()?;
        crate::store::fsutil::write_atomic(Path::new(&pid_file), child.id().to_string().as_bytes(), 0o600)?;
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&out)?;
        let mut kept = 0u64;
        let mut buf = [0u8; 8192];
        let mut pane = std::io::stdout();
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            let _ = pane.write_all(&buf[..n]).and_then(|_| pane.flush());
            if kept < MAX_OUTPUT {
                let take = (MAX_OUTPUT - kept).min(n as u64) as usize;
                file.write_all(&buf[..take])?;
                kept += take as u64;
            }
        }
        let s = child.wait()?;
        use std::os::unix::process::ExitStatusExt as _;
        Ok(ExitStatus { exit_code: s.code(), signal: s.signal().map(signal_name) })
    })();
    let st = result.unwrap_or_else(|e| {
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&out)
            .and_then(|mut f| writeln!(f, "lab term-exec: {e}"));
        ExitStatus { exit_code: Some(127), signal: None }
    });
    let bytes = serde_json::to_vec(&st).unwrap_or_default();
    if crate::store::fsutil::write_atomic(Path::new(&status), &bytes, 0o600).is_err() {
        return 1;
    }
    // The window stays, showing the output, until it is released (closed: SIGHUP) or
    // the run's session ends.
    let ended = match (st.exit_code, &st.signal) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => s.clone(),
        _ => "ended".into(),
    };
    let mut pane = std::io::stdout();
    if pane
        .write_all(format!("\r\n[lab: the command ended: {ended}]\r\n").as_bytes())
        .and_then(|_| pane.flush())
        .is_err()
    {
        return 0;
    }
    while !HUNG_UP.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(200));
    }
    0
}

static HUNG_UP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_hangup(_: libc::c_int) {
    HUNG_UP.store(true, Ordering::SeqCst);
}

fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        _ => return format!("signal {sig}"),
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_output_tail_keeps_whole_characters() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("o");
        std::fs::write(&p, "aé€b").unwrap();
        assert_eq!(read_tail(&p, None), ("aé€b".into(), false));
        assert_eq!(read_tail(&p, Some(4)), ("€b".into(), true));
        assert_eq!(read_tail(&p, Some(5)), ("€b".into(), true), "never half of é");
        assert_eq!(read_tail(&d.path().join("none"), Some(3)), (String::new(), false));
        assert_eq!(signal_name(libc::SIGKILL), "SIGKILL");
        let s = ExitStatus { exit_code: Some(0), signal: None };
        assert_eq!(serde_json::to_value(&s).unwrap(), json!({"exitCode": 0, "signal": null}));
    }
}
