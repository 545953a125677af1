//! The ACP agents lab serve started on this link ([`Op::AgentStart`]): each this
//! machine's child in its own process group, its stdin fed from [`Op::AgentInput`] in
//! order, its stdout and stderr sent up as [`Up::Agent`] — every byte of its stdout
//! before its [`AgentUp::Exited`]. An agent's stdio is the link's: when the link ends
//! (dropping [`Agents`]) each is asked to stop (SIGTERM), then killed after a grace.

use crate::machines::hosts::protocol::{self, AgentUp, Op, Reply, Up};
use base64::Engine;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc::{self, UnboundedSender};

/// The most agents one link may have running.
pub const MAX_AGENTS: usize = 64;
/// How long an agent asked to stop with the link has before it is killed.
const GRACE: Duration = Duration::from_secs(2);

struct Running {
    /// Its stdin's bytes, written in order by a task of its own.
    input: mpsc::UnboundedSender<Vec<u8>>,
    pgid: i32,
    /// Set once its leader is reaped (its group id may be anyone's after).
    done: Arc<AtomicBool>,
}

impl Running {
    fn signal(&self, sig: i32) {
        if !self.done.load(Ordering::SeqCst) {
            // SAFETY: signals only the process group this runner made for the agent,
            // while its leader is not reaped.
            unsafe { libc::killpg(self.pgid, sig) };
        }
    }
}

/// The agents of one link, by lab serve's number.
#[derive(Default)]
pub struct Agents {
    running: HashMap<u64, Running>,
}

impl Agents {
    /// Do an agent op ([`Op::AgentStart`], [`Op::AgentInput`], [`Op::AgentStop`]).
    pub fn on_op(&mut self, out: &UnboundedSender<Up>, op: Op) -> Reply {
        if let Err(message) = protocol::check_op(&op) {
            return Reply::Error { message };
        }
        self.running.retain(|_, r| !r.done.load(Ordering::SeqCst));
        match op {
            Op::AgentStart { agent, run, argv, env, cwd } => self.start(out, agent, &run, argv, env, cwd),
            Op::AgentInput { agent, data } => {
                let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(&data) else {
                    return Reply::Error { message: "input that is not base64".into() };
                };
                match self.running.get(&agent) {
                    Some(r) if r.input.send(bytes).is_ok() => Reply::Done,
                    _ => Reply::Error { message: "no such agent running".into() },
                }
            }
            Op::AgentStop { agent, kill } => {
                if let Some(r) = self.running.get(&agent) {
                    r.signal(if kill { libc::SIGKILL } else { libc::SIGTERM });
                }
                Reply::Done
            }
            _ => Reply::Error { message: "not an agent op".into() },
        }
    }

    fn start(
        &mut self,
        out: &UnboundedSender<Up>,
        agent: u64,
        run: &str,
        argv: Vec<String>,
        env: Vec<(String, String)>,
        cwd: String,
    ) -> Reply {
        if self.running.len() >= MAX_AGENTS || self.running.contains_key(&agent) {
            return Reply::Error { message: format!("at most {MAX_AGENTS} agents, each its own number") };
        }
        if !std::path::Path::new(&cwd).is_dir() {
            return Reply::Error { message: format!("{cwd} is not an existing directory here") };
        }
        let (program, args) = argv.split_first().expect("checked: a command line");
        let spawned = tokio::process::Command::new(program)
            .args(args)
            .current_dir(&cwd)
            .env_clear()
            .envs(env)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => return Reply::Error { message: format!("starting the agent `{program}` failed: {e}") },
        };
        let (Some(pid), Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.id(), child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Reply::Error { message: "the agent's stdio could not be taken".into() };
        };
        tracing::info!(run, agent, program = %program, "started an ACP agent for lab serve");
        let (input, mut typed) = mpsc::unbounded_channel::<Vec<u8>>();
        tokio::spawn(async move {
            while let Some(bytes) = typed.recv().await {
                if stdin.write_all(&bytes).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
            }
        });
        let done = Arc::new(AtomicBool::new(false));
        let up = out.clone();
        tokio::spawn(relay(stderr, up, agent, |data| AgentUp::Stderr { data }));
        let (up, reaped) = (out.clone(), done.clone());
        tokio::spawn(async move {
            // Every byte of its stdout goes up before its end.
            relay(stdout, up.clone(), agent, |data| AgentUp::Output { data }).await;
            let reason = crate::agents::acp::process::exit_reason(child.wait().await);
            reaped.store(true, Ordering::SeqCst);
            let _ = up.send(Up::Agent { agent, event: AgentUp::Exited { reason } });
        });
        self.running.insert(agent, Running { input, pgid: pid as i32, done });
        Reply::Done
    }
}

/// Send what `from` yields up as `wrap`ped chunks of at most
/// [`protocol::MAX_PANE_CHUNK`] bytes, until it ends or the link does.
async fn relay(
    mut from: impl AsyncRead + Unpin,
    up: UnboundedSender<Up>,
    agent: u64,
    wrap: impl Fn(String) -> AgentUp,
) {
    let mut buf = vec![0u8; protocol::MAX_PANE_CHUNK];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let data = base64::engine::general_purpose::STANDARD.encode(&buf[..n]);
                if up.send(Up::Agent { agent, event: wrap(data) }).is_err() {
                    return;
                }
            }
        }
    }
}

impl Drop for Agents {
    /// The link ended: each agent is asked to stop, then killed after [`GRACE`].
    fn drop(&mut self) {
        let running: Vec<Running> = self.running.drain().map(|(_, r)| r).collect();
        if running.is_empty() {
            return;
        }
        for r in &running {
            r.signal(libc::SIGTERM);
        }
        tracing::info!(agents = running.len(), "the link ended: its ACP agents are stopped");
        let kill = move || {
            std::thread::sleep(GRACE);
            for r in &running {
                r.signal(libc::SIGKILL);
            }
        };
        std::thread::spawn(kill);
    }
}
