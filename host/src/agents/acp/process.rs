//! Where an ACP agent's process runs, and how its stdio is reached: a [`Spawner`] per
//! place ([`Local`]: lab's own child here, in a jail or not; another machine's runner
//! relays one there, `crate::machines::hosts`). The session ([`super::session`]) speaks JSON-RPC over what
//! a spawner hands it and never asks where the process is (wezterm's `Domain`).

use futures_util::future::BoxFuture;
use std::collections::BTreeMap;
use std::path::PathBuf;
use tokio::io::{AsyncRead, AsyncWrite};

/// What to start.
#[derive(Debug, Clone)]
pub struct Command {
    /// The program (resolved where it runs) and its arguments.
    pub argv: Vec<String>,
    /// The agent's whole environment.
    pub env: BTreeMap<String, String>,
    /// Its working directory, where it runs.
    pub cwd: PathBuf,
    /// Where its stderr goes, here (a relayed one's is appended as it arrives).
    pub stderr_log: PathBuf,
}

/// How a running agent is asked to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGTERM to its process group.
    Term,
    /// SIGKILL to its process group.
    Kill,
}

/// A started agent: its stdio, its end, and how to end it.
pub struct AgentIo {
    /// Its stdout.
    pub reader: Box<dyn AsyncRead + Send + Unpin>,
    /// Its stdin.
    pub writer: Box<dyn AsyncWrite + Send + Unpin>,
    /// Resolves once, with why it ended ("the agent exited with status 1").
    pub exited: BoxFuture<'static, String>,
    /// Signals its process group (nothing once it has ended).
    pub signal: Box<dyn Fn(Stop) + Send + Sync>,
}

/// A place an ACP agent can be started.
pub trait Spawner: Send + Sync {
    /// Start `cmd` there.
    fn spawn(&self, cmd: Command) -> BoxFuture<'_, Result<AgentIo, String>>;

    /// Whether the agent's files are on this machine: lab serves its `fs/*` requests
    /// (confined to its workdir) and its terminals only then; elsewhere the agent does
    /// its own reading, writing and running where it is.
    fn files_here(&self) -> bool;
}

/// Lab's own child here: its own process group, stdio piped, stderr to the log.
pub struct Local {
    /// Whether lab serves the agent's `fs/*` and terminal requests: not for an agent
    /// in a sandbox (lab would read, write and run outside its jail for it).
    pub serves_files: bool,
}

impl Local {
    /// An agent with the operator's account: lab serves its files in its workdir.
    pub const HERE: Local = Local { serves_files: true };
    /// An agent in a jail (`lab agent-exec` starts it): it does its own files there.
    pub const JAILED: Local = Local { serves_files: false };
}

impl Spawner for Local {
    fn files_here(&self) -> bool {
        self.serves_files
    }

    fn spawn(&self, cmd: Command) -> BoxFuture<'_, Result<AgentIo, String>> {
        Box::pin(async move { spawn_here(&cmd) })
    }
}

/// Start `cmd` as a child of this process (`Local`; a runner relaying one does the same
/// on its machine).
pub fn spawn_here(cmd: &Command) -> Result<AgentIo, String> {
    let (program, args) = cmd.argv.split_first().ok_or("the agent's command is empty")?;
    let stderr = open_log(&cmd.stderr_log)?;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .current_dir(&cmd.cwd)
        .env_clear()
        .envs(&cmd.env)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(stderr)
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("starting the agent `{program}` failed: {e}"))?;
    let pgid = child.id().map(|p| p as i32);
    let stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let exited = {
        let done = done.clone();
        Box::pin(async move {
            let why = exit_reason(child.wait().await);
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            why
        })
    };
    let signal = Box::new(move |stop: Stop| {
        let Some(pgid) = pgid else { return };
        if done.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let sig = match stop {
            Stop::Term => libc::SIGTERM,
            Stop::Kill => libc::SIGKILL,
        };
        // SAFETY: signals only the process group made for this agent (its leader not
        // yet reaped: `done` is set once it is).
        unsafe { libc::killpg(pgid, sig) };
    });
    Ok(AgentIo { reader: Box::new(stdout), writer: Box::new(stdin), exited, signal })
}

/// An agent's stderr log, opened to append (made 0600 if new).
pub fn open_log(path: &std::path::Path) -> Result<std::fs::File, String> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("opening {}: {e}", path.display()))
}

/// Why a child ended, in words.
pub fn exit_reason(status: std::io::Result<std::process::ExitStatus>) -> String {
    match status {
        Ok(s) => match (s.code(), std::os::unix::process::ExitStatusExt::signal(&s)) {
            (Some(c), _) => format!("the agent exited with status {c}"),
            (None, Some(sig)) => format!("the agent was killed by signal {sig}"),
            _ => "the agent exited".to_string(),
        },
        Err(e) => format!("waiting for the agent failed: {e}"),
    }
}
