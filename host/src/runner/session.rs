//! One link to lab serve after its handshake, whatever carries it (the dial-back
//! WebSocket, or the stdio of an ssh session through `lab runner proxy`): the frames
//! lab serve sends, handled — the welcome first, then calls, each on a thread of its
//! own (a slow tmux never holds up the link), and the runs it follows and the ACP
//! agents it started ([`super::agents`]), stopped with the link (the next one says which
//! to follow again).

use super::watch;
use crate::machines::hosts::protocol::{self, Down, Op, Reply, Up};
use crate::machines::tmux::Tmux;
use crate::store::paths::Home;
use std::collections::HashMap;
use std::path::PathBuf;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;

/// What a runner does for one link.
pub struct Session {
    tmux: Tmux,
    home: Home,
    /// Where frames for lab serve go (the link's writer encodes them).
    out: UnboundedSender<Up>,
    /// One file watcher for the runs followed on this link.
    wakes: watch::Wakes,
    /// The runs followed on this link, by run id.
    watches: HashMap<String, JoinHandle<()>>,
    /// The live pane views open on this link.
    panes: super::panes::Panes,
    /// The ACP agents started on this link.
    agents: super::agents::Agents,
    welcomed: bool,
}

impl Session {
    pub fn new(tmux: Tmux, home: Home, out: UnboundedSender<Up>) -> Session {
        Session {
            tmux,
            home,
            out,
            wakes: watch::Wakes::new(),
            watches: HashMap::new(),
            panes: Default::default(),
            agents: Default::default(),
            welcomed: false,
        }
    }

    /// Whether lab serve welcomed this runner yet.
    pub fn welcomed(&self) -> bool {
        self.welcomed
    }

    /// One frame from lab serve. `Err`: the link must end, and why (lab serve broke
    /// the protocol: another try would not fix it).
    pub fn on_frame(&mut self, text: &str) -> Result<(), String> {
        let down = protocol::decode::<Down>(text)
            .map_err(|e| format!("lab serve sent what this runner does not speak: {e}"))?;
        match down {
            Down::Welcome { version } if !self.welcomed => {
                self.welcomed = true;
                tracing::info!(lab_serve = %version, "welcomed by lab serve");
                let home = self.home.clone();
                tokio::task::spawn_blocking(move || super::answer::preload(&home));
            }
            Down::Ping if self.welcomed => {
                let _ = self.out.send(Up::Pong);
            }
            Down::Call { id, op: op @ Op::Watch { .. } } if self.welcomed => {
                let reply = self.watch(op);
                let _ = self.out.send(Up::Reply { id, reply });
            }
            Down::Call { id, op: Op::Unwatch { run } } if self.welcomed => {
                if let Some(task) = self.watches.remove(&run) {
                    task.abort();
                }
                let _ = self.out.send(Up::Reply { id, reply: Reply::Done });
            }
            Down::Call {
                id,
                op: op @ (Op::Pane { .. } | Op::PaneKeys { .. } | Op::PaneResize { .. } | Op::PaneClose { .. }),
            } if self.welcomed => {
                // Quick (a client started, or a line handed to its typist): in place,
                // so a view's keys keep their order.
                let reply = self.panes.on_op(&self.tmux, &self.out, op);
                let _ = self.out.send(Up::Reply { id, reply });
            }
            Down::Call { id, op: op @ (Op::AgentStart { .. } | Op::AgentInput { .. } | Op::AgentStop { .. }) }
                if self.welcomed =>
            {
                // In place, so an agent's input keeps its order.
                let reply = self.agents.on_op(&self.out, op);
                let _ = self.out.send(Up::Reply { id, reply });
            }
            Down::Call { id, op: op @ Op::Answer { .. } } if self.welcomed => {
                let out = self.out.clone();
                let reply = protocol::check_op(&op).err().map(|message| Reply::Error { message });
                let tmux = self.tmux.clone();
                tokio::spawn(async move {
                    let reply = match (reply, op) {
                        (Some(refused), _) => refused,
                        (None, Op::Answer { target, build, dialog, steps, pause_ms, settle_ms, look_ms }) => {
                            let ms = |n: u32| std::time::Duration::from_millis(n.into());
                            let (pause, settle, look) = (ms(pause_ms), ms(settle_ms), ms(look_ms));
                            super::answer::answer(tmux, target, build, *dialog, steps, pause, settle, look).await
                        }
                        (None, _) => Reply::Error { message: "not an answer".into() },
                    };
                    let _ = out.send(Up::Reply { id, reply });
                });
            }
            Down::Call { id, op } if self.welcomed => {
                let (tmux, home, out) = (self.tmux.clone(), self.home.clone(), self.out.clone());
                tokio::task::spawn_blocking(move || {
                    let _ = out.send(Up::Reply { id, reply: super::exec(&tmux, &home, op) });
                });
            }
            other => return Err(format!("lab serve sent {other:?} out of turn")),
        }
        Ok(())
    }

    /// Follow a run ([`Op::Watch`]), in place of any follower it had on this link.
    fn watch(&mut self, op: Op) -> Reply {
        if let Err(message) = protocol::check_op(&op) {
            return Reply::Error { message };
        }
        let Op::Watch { run, target, transcript, offset } = op else {
            return Reply::Error { message: "not a watch".into() };
        };
        let Some(id) = crate::store::paths::RunId::parse(&run) else {
            return Reply::Error { message: "not a run id".into() };
        };
        let files = self.home.run_files(&id);
        let w = watch::Watch {
            refused: None,
            // A sandboxed run's (its files are in its jail directory): its egress ledger too.
            ledger: files.jail.as_ref().map(|_| self.home.egress_files(&id).1),
            files,
            run: run.clone(),
            target,
            transcript: transcript.map(PathBuf::from),
            offset,
        };
        let task = tokio::spawn(watch::follow(w, self.tmux.clone(), self.wakes.clone(), self.out.clone()));
        if let Some(old) = self.watches.insert(run, task) {
            old.abort();
        }
        Reply::Done
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        for (_, task) in self.watches.drain() {
            task.abort();
        }
    }
}
