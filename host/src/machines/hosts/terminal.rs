//! The terminal seam ([`crate::machines::terminal::Terminal`]) on another machine: each call one
//! [`Op`] over the host's runner stream, done by the runner on its own tmux server.
//! A second implementation beside [`crate::machines::tmux::Tmux`]: what looks at a run's screen or
//! types into it does not know which one it has.

use super::link::Hosts;
use super::protocol::{Op, Reply};
use crate::machines::terminal::{PaneEvent, PaneWatch, Terminal, TerminalError};
use base64::Engine;
use std::sync::Arc;
use std::time::Duration;

/// How long one call may take, the runner's tmux included.
pub const CALL_LIMIT: Duration = Duration::from_secs(10);

/// Host `host`'s terminal, reached through `hosts`. Calls block (as the local one's
/// do): call them off the async runtime's threads (`spawn_blocking`).
pub struct RemoteTerminal {
    hosts: Arc<Hosts>,
    host: String,
    rt: tokio::runtime::Handle,
}

impl RemoteTerminal {
    pub fn new(hosts: Arc<Hosts>, host: String, rt: tokio::runtime::Handle) -> Self {
        RemoteTerminal { hosts, host, rt }
    }

    fn call(&self, action: &str, op: Op) -> Result<Reply, TerminalError> {
        self.call_within(action, op, CALL_LIMIT)
    }

    fn call_within(&self, action: &str, op: Op, limit: Duration) -> Result<Reply, TerminalError> {
        let err = |message: String| TerminalError { action: format!("{action} on host {}", self.host), message };
        let (tx, rx) = std::sync::mpsc::channel();
        let (hosts, host) = (self.hosts.clone(), self.host.clone());
        self.rt.spawn(async move {
            let _ = tx.send(hosts.call(&host, op, limit).await);
        });
        match rx.recv_timeout(limit + Duration::from_secs(1)) {
            Ok(Ok(Reply::Error { message })) => Err(err(message)),
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(message)) => Err(err(message)),
            Err(_) => Err(err("no answer".into())),
        }
    }

    fn done(&self, action: &str, op: Op) -> Result<(), TerminalError> {
        match self.call(action, op)? {
            Reply::Done => Ok(()),
            other => Err(unexpected(action, &other)),
        }
    }

    /// A new session `target` running `argv` on the host.
    pub fn start(&self, target: &str, argv: &[String]) -> Result<(), TerminalError> {
        self.done("start", Op::Start { target: target.into(), argv: argv.to_vec() })
    }

    /// End session `target` on the host.
    pub fn kill(&self, target: &str) -> Result<(), TerminalError> {
        self.done("kill", Op::Kill { target: target.into() })
    }
}

fn unexpected(action: &str, reply: &Reply) -> TerminalError {
    TerminalError { action: action.into(), message: format!("the runner answered {reply:?}") }
}

/// A live view of a pane on a host ([`Op::Pane`]): keys and resizes are calls; dropping
/// it closes the view there.
struct RemotePane {
    term: RemoteTerminal,
    pane: u64,
}

impl PaneWatch for RemotePane {
    fn keys(&mut self, bytes: &[u8]) -> Result<(), TerminalError> {
        let data = base64::engine::general_purpose::STANDARD.encode(bytes);
        self.term.done("pane keys", Op::PaneKeys { pane: self.pane, data })
    }

    fn resize(&mut self, cols: u16, rows: u16) -> Result<(), TerminalError> {
        self.term.done("pane resize", Op::PaneResize { pane: self.pane, cols, rows })
    }
}

impl Drop for RemotePane {
    fn drop(&mut self) {
        self.term.hosts.panes.remove(&self.term.host, self.pane);
        let (hosts, host, pane) = (self.term.hosts.clone(), self.term.host.clone(), self.pane);
        self.term.rt.spawn(async move {
            let _ = hosts.call(&host, Op::PaneClose { pane }, CALL_LIMIT).await;
        });
    }
}

impl Terminal for RemoteTerminal {
    /// The pane's view, streamed by the host's runner (its tmux in control mode).
    fn watch(
        &self,
        target: &str,
        events: tokio::sync::mpsc::Sender<PaneEvent>,
    ) -> Result<Box<dyn PaneWatch>, TerminalError> {
        let pane = self.hosts.panes.add(&self.host, events);
        let view = RemotePane {
            term: RemoteTerminal { hosts: self.hosts.clone(), host: self.host.clone(), rt: self.rt.clone() },
            pane,
        };
        // On failure `view` is dropped: forgotten here, closed there.
        view.term.done("pane", Op::Pane { pane, target: target.into() })?;
        Ok(Box::new(view))
    }

    fn capture(&self, target: &str) -> Result<String, TerminalError> {
        match self.call("capture", Op::Capture { target: target.into() })? {
            Reply::Text { text } => Ok(text),
            other => Err(unexpected("capture", &other)),
        }
    }

    fn key(&self, target: &str, key: &str) -> Result<(), TerminalError> {
        self.done("key", Op::Key { target: target.into(), key: key.into() })
    }

    fn literal(&self, target: &str, text: &str) -> Result<(), TerminalError> {
        self.done("literal", Op::Literal { target: target.into(), text: text.into() })
    }

    fn paste(&self, target: &str, buffer: &str, text: &str) -> Result<(), TerminalError> {
        self.done("paste", Op::Paste { target: target.into(), buffer: buffer.into(), text: text.into() })
    }

    /// False when the host cannot say (not connected): callers that end runs on it
    /// must tell "gone" from "unreachable" with [`Hosts::connected`] first.
    fn alive(&self, target: &str) -> bool {
        matches!(self.call("alive", Op::Alive { target: target.into() }), Ok(Reply::Alive { alive: true }))
    }

    /// The drawn check and the keys on the host, in one call ([`Op::Answer`]).
    fn answer_there(
        &self,
        target: &str,
        there: &crate::machines::terminal::There,
    ) -> Result<Option<String>, TerminalError> {
        use crate::machines::hosts::protocol::{Answered, Step, MAX_LOOK_MS};
        let ms = |d: Duration| u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
        let steps: Vec<Step> = there.plan.steps.iter().map(Step::from).collect();
        let limit = CALL_LIMIT + there.look + there.plan.settle + there.plan.pause * steps.len() as u32;
        let op = Op::Answer {
            target: target.into(),
            build: there.build.clone(),
            dialog: Box::new(there.dialog.clone()),
            steps,
            pause_ms: ms(there.plan.pause),
            settle_ms: ms(there.plan.settle),
            look_ms: ms(there.look).min(MAX_LOOK_MS),
        };
        match self.call_within("answer", op, limit)? {
            Reply::Text { text } => match super::protocol::decode::<Answered>(&text) {
                Ok(Answered::Yes { pane }) => Ok(Some(pane)),
                Ok(Answered::No { why }) => {
                    tracing::debug!(host = %self.host, %why, "the answer is played from here");
                    Ok(None)
                }
                Err(e) => Err(TerminalError { action: "answer".into(), message: e.to_string() }),
            },
            other => Err(unexpected("answer", &other)),
        }
    }

    /// The whole plan in one call, played by the runner with its pauses there.
    fn play(
        &self,
        target: &str,
        steps: &[crate::agents::model::KeyOp],
        pause: Duration,
        sent: &mut dyn FnMut(usize),
    ) -> Result<(), TerminalError> {
        use crate::machines::hosts::protocol::Step;
        let steps: Vec<Step> = steps.iter().map(Step::from).collect();
        let n = steps.len();
        let pause_ms = u32::try_from(pause.as_millis()).unwrap_or(u32::MAX);
        let limit = CALL_LIMIT + pause * n as u32;
        match self.call_within("play", Op::Play { target: target.into(), steps, pause_ms }, limit)? {
            Reply::Done => {
                sent(n);
                Ok(())
            }
            other => Err(unexpected("play", &other)),
        }
    }

    /// [`ssh_attach`] with the socket the runner said (the usual place under its home
    /// while it is not connected).
    fn attach_command(&self, target: &str) -> Vec<String> {
        let socket = match self.hosts.facts(&self.host) {
            Some(f) => f.tmux_socket,
            None => "<its lab home>/tmux.sock".to_string(),
        };
        // As lab reaches the host (over ssh: its port, key, known hosts).
        self.hosts.reach(&self.host).attach_command(&self.host, &socket, target)
    }
}

/// `ssh -t <host> 'tmux -S <socket> attach -t <target>'`: the host as lab names it
/// (`lab hosts add NAME`; name it as your ssh config does). ssh joins its words and the
/// host's shell parses them again, so the remote command goes to ssh as one word,
/// quoted for that second shell: pasted, each part reaches tmux as it is.
pub fn ssh_attach(host: &str, socket: &str, target: &str) -> Vec<String> {
    let remote = crate::util::shell::join(["tmux", "-S", socket, "attach", "-t", target]);
    vec!["ssh".into(), "-t".into(), host.into(), remote]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The attach command as the operator pastes it, through a real shell, then as ssh
    /// and the host's shell take it: the words tmux gets.
    fn tmux_argv_from_pasting(line: &str, dir: &std::path::Path) -> Vec<String> {
        use std::os::unix::fs::PermissionsExt;
        let argv = dir.join("argv");
        // `ssh` joins its words after the host with spaces and has a shell run them
        // there; `tmux` writes each argument it got on a line.
        let ssh = "#!/bin/sh\nshift 2\nexec sh -c \"$*\"\n";
        let tmux = format!("#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\n", argv.display());
        for (name, text) in [("ssh", ssh.to_string()), ("tmux", tmux)] {
            std::fs::write(dir.join(name), text).unwrap();
            std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(line)
            .current_dir(dir)
            .env("PATH", format!("{}:/usr/bin:/bin", dir.display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "{line}: {}", String::from_utf8_lossy(&out.stderr));
        std::fs::read_to_string(argv).unwrap().lines().map(String::from).collect()
    }

    #[test]
    fn a_pasted_attach_command_gives_tmux_each_word_as_it_is() {
        let d = tempfile::tempdir().unwrap();
        let pwned = d.path().join("PWNED");
        for socket in [
            "/home/lab/.lab/tmux.sock".to_string(),
            format!("/x/s d;touch${{IFS}}{};#", pwned.display()),
            format!("/x/$(touch {})'\"`x`", pwned.display()),
            "<its lab home>/tmux.sock".to_string(),
        ] {
            let line = crate::util::shell::join(ssh_attach("m1", &socket, "=lab-r-1:"));
            let got = tmux_argv_from_pasting(&line, d.path());
            assert_eq!(got, ["-S", socket.as_str(), "attach", "-t", "=lab-r-1:"], "{line}");
            assert!(!pwned.exists(), "{line} ran a command");
        }
    }
}
