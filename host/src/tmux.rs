//! tmux, driven through its command line on lab's own server socket.

use std::path::PathBuf;
use std::process::{Command, Stdio};

#[derive(Debug, Clone)]
pub struct Tmux {
    pub socket: PathBuf,
    program: PathBuf,
}

#[derive(Debug, thiserror::Error)]
#[error("tmux {action}: {message}")]
pub struct TmuxError {
    pub action: String,
    pub message: String,
}

impl Tmux {
    pub fn new(socket: PathBuf) -> Self {
        Tmux { socket, program: PathBuf::from("tmux") }
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(&self.program);
        c.arg("-S").arg(&self.socket).stdin(Stdio::null());
        c
    }

    fn run(&self, action: &str, args: &[&str]) -> Result<String, TmuxError> {
        let out = self
            .cmd()
            .args(args)
            .output()
            .map_err(|e| TmuxError { action: action.into(), message: format!("cannot run tmux: {e}") })?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(TmuxError { action: action.into(), message: String::from_utf8_lossy(&out.stderr).trim().to_string() })
        }
    }

    /// Start `argv` in a new detached session `name`. The session starts in `/`: a
    /// workdir is never handed to tmux, which expands formats (`#(…)` runs a shell
    /// command) in `-c`; the program changes into its workdir itself (`lab
    /// agent-exec`). Nothing secret or large belongs in `argv` either: it is on tmux's
    /// command line (visible to `ps`, limited to about 16 KiB).
    pub fn new_session(&self, name: &str, argv: &[String]) -> Result<(), TmuxError> {
        let mut c = self.cmd();
        c.args(["new-session", "-d", "-s", name, "-x", "200", "-y", "50", "-c", "/"]);
        // With several arguments tmux runs the command directly (no shell); a lone
        // program is quoted so no shell can reinterpret it.
        if argv.len() == 1 {
            c.arg(lab_provider_sdk::shell::quote(&argv[0]));
        } else {
            c.args(argv);
        }
        let out = c
            .output()
            .map_err(|e| TmuxError { action: "new-session".into(), message: format!("cannot run tmux: {e}") })?;
        if !out.status.success() {
            return Err(TmuxError {
                action: "new-session".into(),
                message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(())
    }

    pub fn has_session(&self, name: &str) -> bool {
        self.cmd()
            .args(["has-session", "-t", &format!("={name}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    pub fn kill_session(&self, name: &str) -> Result<(), TmuxError> {
        self.run("kill-session", &["kill-session", "-t", &format!("={name}")]).map(|_| ())
    }

    /// Press a named key ("Up", "Enter", …).
    pub fn send_key(&self, target: &str, key: &str) -> Result<(), TmuxError> {
        self.run("send-keys", &["send-keys", "-t", target, key]).map(|_| ())
    }

    /// Type `text` literally: never interpreted as key names. tmux's own parser
    /// treats a trailing `;` of an argument as a command separator, so trailing
    /// semicolons are sent as hex bytes. For short texts only (the text is on tmux's
    /// command line); operator messages go through [`Tmux::paste`].
    pub fn send_literal(&self, target: &str, text: &str) -> Result<(), TmuxError> {
        let body = text.trim_end_matches(';');
        if !body.is_empty() {
            self.run("send-keys", &["send-keys", "-t", target, "-l", "--", body])?;
        }
        let semis = text.len() - body.len();
        if semis > 0 {
            let mut args = vec!["send-keys", "-t", target, "-H"];
            args.extend(std::iter::repeat_n("3b", semis));
            self.run("send-keys", &args)?;
        }
        Ok(())
    }

    /// Paste `text` into the pane byte for byte: loaded into buffer `buffer` from
    /// stdin (never on a command line, so any size and never visible to `ps`), then
    /// pasted as one bracketed paste (`-p`: inside the paste markers when the program
    /// asked for them) with line feeds kept as line feeds (`-r`), and the buffer
    /// deleted (`-d`). The caller makes sure the text holds no ESC, so nothing in it
    /// can end the paste early.
    pub fn paste(&self, target: &str, buffer: &str, text: &str) -> Result<(), TmuxError> {
        use std::io::Write;
        let mut child = self
            .cmd()
            .args(["load-buffer", "-b", buffer, "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| TmuxError { action: "load-buffer".into(), message: e.to_string() })?;
        let written = child.stdin.take().expect("piped").write_all(text.as_bytes());
        let out =
            child.wait_with_output().map_err(|e| TmuxError { action: "load-buffer".into(), message: e.to_string() })?;
        if !out.status.success() {
            return Err(TmuxError {
                action: "load-buffer".into(),
                message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        written.map_err(|e| TmuxError { action: "load-buffer".into(), message: format!("writing the text: {e}") })?;
        self.run("paste-buffer", &["paste-buffer", "-p", "-r", "-d", "-b", buffer, "-t", target]).map(|_| ())
    }

    /// The visible text of the pane.
    pub fn capture(&self, target: &str) -> Result<String, TmuxError> {
        self.run("capture-pane", &["capture-pane", "-p", "-t", target])
    }
}
