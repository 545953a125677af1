//! ACP agents on other machines: a [`HostSpawner`] starts one through the host's runner
//! ([`Op::AgentStart`]) and hands the session a pipe whose far end is the agent's stdio
//! — what the session writes goes down as [`Op::AgentInput`], in order; what the agent
//! writes comes up as [`Up::Agent`](super::protocol::Up::Agent), routed here by host and
//! number ([`super::agent_pipes::AgentPipes`]); its stderr is appended to the run's log here. The link's end
//! is the agent's end (the runner stops it), said as such.

use super::link::Hosts;
use super::protocol::{AgentUp, Op, Reply};
use crate::agents::acp::process::{AgentIo, Command, Spawner, Stop};
use base64::Engine;
use futures_util::future::BoxFuture;
use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

/// How long the runner may take to start an agent or take its input.
const CALL_LIMIT: Duration = Duration::from_secs(30);
/// The most bytes of input one [`Op::AgentInput`] carries (before base64).
const INPUT_CHUNK: usize = 64 << 10;

/// Starts ACP agents on host `host`, for run `run`, through its runner.
pub struct HostSpawner {
    pub hosts: Arc<Hosts>,
    pub host: String,
    pub run: String,
}

impl Spawner for HostSpawner {
    /// The agent's files are on its machine: it reads, writes and runs there itself.
    fn files_here(&self) -> bool {
        false
    }

    fn spawn(&self, cmd: Command) -> BoxFuture<'_, Result<AgentIo, String>> {
        Box::pin(self.spawn_there(cmd))
    }
}

impl HostSpawner {
    async fn spawn_there(&self, cmd: Command) -> Result<AgentIo, String> {
        let (hosts, host) = (self.hosts.clone(), self.host.clone());
        let mut log = crate::agents::acp::process::open_log(&cmd.stderr_log)?;
        let (tx, mut events) = mpsc::unbounded_channel();
        let agent = hosts.agents.add(&host, tx);
        let start = Op::AgentStart {
            agent,
            run: self.run.clone(),
            argv: cmd.argv,
            env: cmd.env.into_iter().collect(),
            cwd: cmd.cwd.to_string_lossy().into_owned(),
        };
        match hosts.call(&host, start, CALL_LIMIT).await {
            Ok(Reply::Done) => {}
            Ok(Reply::Error { message }) => {
                hosts.agents.remove(&host, agent);
                return Err(format!("host `{host}` did not start the agent: {message}"));
            }
            Ok(other) => {
                hosts.agents.remove(&host, agent);
                return Err(format!("host `{host}` answered {other:?} to starting the agent"));
            }
            Err(e) => {
                hosts.agents.remove(&host, agent);
                return Err(e);
            }
        }
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (mut from_session, mut to_session) = tokio::io::split(theirs);
        // What the session writes: the agent's stdin, in order.
        {
            let (hosts, host) = (hosts.clone(), host.clone());
            tokio::spawn(async move {
                let mut buf = vec![0u8; INPUT_CHUNK];
                loop {
                    let n = match from_session.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    let data = base64::engine::general_purpose::STANDARD.encode(&buf[..n]);
                    match hosts.call(&host, Op::AgentInput { agent, data }, CALL_LIMIT).await {
                        Ok(Reply::Done) => {}
                        other => {
                            tracing::warn!(%host, agent, outcome = ?other, "the agent's input was not taken");
                            return;
                        }
                    }
                }
            });
        }
        // What the agent writes: its stdout to the session, its stderr to the log, its
        // end closing the session's stdout.
        let (ended_tx, ended) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let b64 = |d: &str| base64::engine::general_purpose::STANDARD.decode(d);
            let mut reason = "the agent's link ended".to_string();
            while let Some(event) = events.recv().await {
                match event {
                    AgentUp::Output { data } => match b64(&data) {
                        Ok(bytes) => {
                            if to_session.write_all(&bytes).await.is_err() {
                                break;
                            }
                        }
                        Err(_) => tracing::warn!(agent, "the runner sent agent output that is not base64"),
                    },
                    AgentUp::Stderr { data } => {
                        if let Ok(bytes) = b64(&data) {
                            let _ = log.write_all(&bytes);
                        }
                    }
                    AgentUp::Exited { reason: why } => {
                        reason = crate::util::text::head(&why, 600).to_string();
                        break;
                    }
                }
            }
            drop(to_session);
            let _ = ended_tx.send(reason);
        });
        let (reader, writer) = tokio::io::split(ours);
        let rt = tokio::runtime::Handle::current();
        let signal = Box::new(move |stop: Stop| {
            let (hosts, host) = (hosts.clone(), host.clone());
            rt.spawn(async move {
                let _ = hosts.call(&host, Op::AgentStop { agent, kill: stop == Stop::Kill }, CALL_LIMIT).await;
            });
        });
        Ok(AgentIo {
            reader: Box::new(reader),
            writer: Box::new(writer),
            exited: Box::pin(async move { ended.await.unwrap_or_else(|_| "the agent's link ended".to_string()) }),
            signal,
        })
    }
}
