//! tmux, driven through its command line on lab's own server socket.
//!
//! lab learns that a session closed from tmux itself: every command that may start the
//! server ([`Tmux::new_session`]) first sets it up ([`server_setup`]) — it stays up
//! when it has no session (`exit-empty off`, so the hook below also fires for the
//! last session), and a global `session-closed` hook truncates a signal file (the
//! [`Tmux::with_closed_signal`] path, handed over in the server's global environment
//! so that no path is ever parsed by tmux or a shell). lab watches that file.

pub mod control;

use crate::machines::terminal::{PaneEvent, PaneWatch, Terminal, TerminalError};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[derive(Debug, Clone)]
pub struct Tmux {
    pub socket: PathBuf,
    program: PathBuf,
    /// The file the server's `session-closed` hook writes (see the module docs).
    closed_signal: Option<PathBuf>,
    /// Shared by every clone: how many tmux clients may run at once ([`Slots`]).
    slots: std::sync::Arc<Slots>,
}

/// Turns for tmux clients: every command is a process (fork, exec, connect, and the
/// server's work), so a storm of them (hundreds of answers' key playback and screen
/// looks at once) would take every core from lab serve's own work — the answers'
/// POSTs among it. At most as many run at once as the machine has cores (at least
/// two); the others wait their turn, in a blocking thread.
#[derive(Debug)]
pub struct Slots {
    free: std::sync::Mutex<usize>,
    freed: std::sync::Condvar,
}

impl Slots {
    pub fn new(n: usize) -> Slots {
        Slots { free: std::sync::Mutex::new(n.max(1)), freed: std::sync::Condvar::new() }
    }

    /// One turn, until the guard is dropped.
    pub fn take(&self) -> Turn<'_> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        *free -= 1;
        Turn(self)
    }
}

/// A turn of [`Slots`], given back when dropped.
pub struct Turn<'a>(&'a Slots);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}

fn default_slots() -> std::sync::Arc<Slots> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::sync::Arc::new(Slots::new(cores.max(2)))
}

/// The global environment variable the hook finds the signal file in.
pub const SIGNAL_ENV: &str = "LAB_SESSION_CLOSED_FILE";

/// The slot of lab's hook in the `session-closed` hook array: an operator's own
/// `set-hook -g session-closed …` (slot 0) is left alone.
pub const HOOK_SLOT: &str = "session-closed[73]";

/// What the hook runs: one `sh` that truncates the signal file (private, quiet, and
/// always successful, so tmux never shows an error for it), in the background.
pub const HOOK_COMMAND: &str = "run-shell -b 'umask 077; true 2>/dev/null >\"$LAB_SESSION_CLOSED_FILE\"; exit 0'";

/// The tmux commands (each followed by `;`) that make a server report closed sessions
/// into `signal`; idempotent, so they run before every `new-session`.
pub fn server_setup(signal: &Path) -> Vec<OsString> {
    let mut v: Vec<OsString> =
        ["set-option", "-s", "exit-empty", "off", ";", "set-environment", "-g", SIGNAL_ENV].map(OsString::from).into();
    v.push(signal.into());
    v.extend([";", "set-hook", "-g", HOOK_SLOT, HOOK_COMMAND, ";"].map(OsString::from));
    v
}

/// Whether tmux's error says there is no server on the socket (never started, exited,
/// or killed): then it has no sessions.
pub fn no_server(stderr: &str) -> bool {
    stderr.starts_with("no server running")
        || (stderr.starts_with("error connecting to")
            && (stderr.contains("No such file or directory") || stderr.contains("Connection refused")))
}

/// The session names from `list-sessions -F '#{session_name}'`'s outcome: no server
/// means none; any other failure is an error (nothing can be concluded from it).
pub fn session_names(success: bool, stdout: &str, stderr: &str) -> Result<BTreeSet<String>, String> {
    if success {
        Ok(stdout.lines().filter(|l| !l.is_empty()).map(str::to_string).collect())
    } else if no_server(stderr.trim()) {
        Ok(BTreeSet::new())
    } else {
        Err(stderr.trim().to_string())
    }
}

/// The exact target of a session's current pane: `=name:`. A bare name is looked up by
/// tmux as a window name first (in any session), then as a session-name prefix, so a
/// window an agent names after another run would take that run's keys; `=` matches the
/// session's name exactly and the trailing `:` makes it a session, never a window.
pub fn pane_target(session: &str) -> String {
    format!("={session}:")
}

/// The exact target of a session (`=name`), for commands that take a session.
pub fn session_target(session: &str) -> String {
    format!("={session}")
}

#[derive(Debug, thiserror::Error)]
#[error("tmux {action}: {message}")]
pub struct TmuxError {
    pub action: String,
    pub message: String,
}

impl Tmux {
    pub fn new(socket: PathBuf) -> Self {
        Tmux { socket, program: PathBuf::from("tmux"), closed_signal: None, slots: default_slots() }
    }

    /// Have the server report every closed session by writing `file` (module docs).
    pub fn with_closed_signal(mut self, file: PathBuf) -> Self {
        self.closed_signal = Some(file);
        self
    }

    /// Set up a running server (hooks, options: [`server_setup`]); `Ok(false)` when no
    /// server runs (the next [`Tmux::new_session`] starts one, set up).
    pub fn set_up_server(&self) -> Result<bool, TmuxError> {
        let Some(signal) = &self.closed_signal else { return Ok(true) };
        let mut setup = server_setup(signal);
        setup.pop(); // the trailing `;`
        let mut c = self.cmd();
        c.args(setup);
        let out = self
            .output(c)
            .map_err(|e| TmuxError { action: "set-hook".into(), message: format!("cannot run tmux: {e}") })?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        match (out.status.success(), no_server(stderr.trim())) {
            (true, _) => Ok(true),
            (false, true) => Ok(false),
            (false, false) => Err(TmuxError { action: "set-hook".into(), message: stderr.trim().to_string() }),
        }
    }

    /// The names of all sessions on the server (none when no server runs): one process
    /// for all runs.
    pub fn list_session_names(&self) -> Result<BTreeSet<String>, TmuxError> {
        let mut c = self.cmd();
        c.args(["list-sessions", "-F", "#{session_name}"]);
        let out = self
            .output(c)
            .map_err(|e| TmuxError { action: "list-sessions".into(), message: format!("cannot run tmux: {e}") })?;
        session_names(
            out.status.success(),
            &String::from_utf8_lossy(&out.stdout),
            &String::from_utf8_lossy(&out.stderr),
        )
        .map_err(|message| TmuxError { action: "list-sessions".into(), message })
    }

    /// Stop the server if it has no session left (it stays up when empty, see the
    /// module docs): for when lab stops.
    pub fn kill_server_if_empty(&self) {
        if self.list_session_names().is_ok_and(|s| s.is_empty()) {
            let _ = self.run("kill-server", &["kill-server"]);
        }
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(&self.program);
        c.arg("-S").arg(&self.socket).stdin(Stdio::null());
        c
    }

    /// Run a tmux client to its end, in its turn ([`Slots`]).
    fn output(&self, mut c: Command) -> std::io::Result<std::process::Output> {
        let _turn = self.slots.take();
        c.output()
    }

    fn run(&self, action: &str, args: &[&str]) -> Result<String, TmuxError> {
        let mut c = self.cmd();
        c.args(args);
        let out = self
            .output(c)
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
        // Set up first, in the same client: the command that starts a server also
        // installs its hook, before the session exists.
        if let Some(signal) = &self.closed_signal {
            c.args(server_setup(signal));
        }
        c.args(["new-session", "-d", "-s", name, "-x", "200", "-y", "50", "-c", "/"]);
        // With several arguments tmux runs the command directly (no shell); a lone
        // program is quoted so no shell can reinterpret it.
        if argv.len() == 1 {
            c.arg(crate::util::shell::quote(&argv[0]));
        } else {
            c.args(argv);
        }
        let out = self
            .output(c)
            .map_err(|e| TmuxError { action: "new-session".into(), message: format!("cannot run tmux: {e}") })?;
        if !out.status.success() {
            return Err(TmuxError {
                action: "new-session".into(),
                message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(())
    }

    /// A new detached window `window` in session `session` running `argv` (as
    /// [`Tmux::new_session`]: nothing secret or large in it; it starts in `/`).
    pub fn new_window(&self, session: &str, window: &str, argv: &[String]) -> Result<(), TmuxError> {
        let target = format!("{}:", session_target(session));
        let mut args: Vec<&str> = vec!["new-window", "-d", "-t", &target, "-n", window, "-c", "/"];
        args.extend(argv.iter().map(String::as_str));
        self.run("new-window", &args).map(|_| ())
    }

    /// Close window `window` of session `session` (its program gets SIGHUP).
    pub fn kill_window(&self, session: &str, window: &str) -> Result<(), TmuxError> {
        let target = format!("{}:{window}", session_target(session));
        self.run("kill-window", &["kill-window", "-t", &target]).map(|_| ())
    }

    pub fn has_session(&self, name: &str) -> bool {
        let mut c = self.cmd();
        c.args(["has-session", "-t", &session_target(name)]);
        self.output(c).is_ok_and(|o| o.status.success())
    }

    pub fn kill_session(&self, name: &str) -> Result<(), TmuxError> {
        self.run("kill-session", &["kill-session", "-t", &session_target(name)]).map(|_| ())
    }

    /// Press a named key ("Up", "Enter", …) in session `target`'s pane.
    pub fn send_key(&self, target: &str, key: &str) -> Result<(), TmuxError> {
        self.run("send-keys", &["send-keys", "-t", &pane_target(target), key]).map(|_| ())
    }

    /// Type `text` literally: never interpreted as key names. tmux's own parser
    /// treats a trailing `;` of an argument as a command separator, so trailing
    /// semicolons are sent as hex bytes. For short texts only (the text is on tmux's
    /// command line); operator messages go through [`Tmux::paste`].
    pub fn send_literal(&self, target: &str, text: &str) -> Result<(), TmuxError> {
        let body = text.trim_end_matches(';');
        let target = pane_target(target);
        if !body.is_empty() {
            self.run("send-keys", &["send-keys", "-t", &target, "-l", "--", body])?;
        }
        let semis = text.len() - body.len();
        if semis > 0 {
            let mut args = vec!["send-keys", "-t", &target, "-H"];
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
        let turn = self.slots.take();
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
        drop(turn);
        self.run("paste-buffer", &["paste-buffer", "-p", "-r", "-d", "-b", buffer, "-t", &pane_target(target)])
            .map(|_| ())
    }

    /// The visible text of session `target`'s pane.
    pub fn capture(&self, target: &str) -> Result<String, TmuxError> {
        self.run("capture-pane", &["capture-pane", "-p", "-t", &pane_target(target)])
    }
}

impl From<TmuxError> for TerminalError {
    fn from(e: TmuxError) -> Self {
        TerminalError { action: format!("tmux {}", e.action), message: e.message }
    }
}

/// The local terminal: a tmux session per run on lab's own server socket.
impl Terminal for Tmux {
    fn capture(&self, target: &str) -> Result<String, TerminalError> {
        Ok(Tmux::capture(self, target)?)
    }

    fn key(&self, target: &str, key: &str) -> Result<(), TerminalError> {
        Ok(self.send_key(target, key)?)
    }

    fn literal(&self, target: &str, text: &str) -> Result<(), TerminalError> {
        Ok(self.send_literal(target, text)?)
    }

    fn paste(&self, target: &str, buffer: &str, text: &str) -> Result<(), TerminalError> {
        Ok(Tmux::paste(self, target, buffer, text)?)
    }

    fn alive(&self, target: &str) -> bool {
        self.has_session(target)
    }

    fn attach_command(&self, target: &str) -> Vec<String> {
        let socket = self.socket.to_string_lossy().into_owned();
        ["tmux", "-S", &socket, "attach", "-t", target].map(String::from).to_vec()
    }

    fn watch(
        &self,
        target: &str,
        events: tokio::sync::mpsc::Sender<PaneEvent>,
    ) -> Result<Box<dyn PaneWatch>, TerminalError> {
        control::watch(&self.program, &self.socket, target, events)
    }
}

impl crate::machines::terminal::Sessions for Tmux {
    fn start(&self, target: &str, argv: &[String]) -> Result<(), TerminalError> {
        Ok(self.new_session(target, argv)?)
    }

    fn names(&self) -> Result<BTreeSet<String>, TerminalError> {
        Ok(self.list_session_names()?)
    }

    fn end(&self, target: &str) -> Result<(), TerminalError> {
        if self.has_session(target) {
            self.kill_session(target)?;
        }
        Ok(())
    }

    fn place(&self) -> String {
        self.socket.to_string_lossy().into_owned()
    }

    fn set_up(&self) -> Result<(), TerminalError> {
        self.set_up_server().map(|_| ()).map_err(Into::into)
    }

    fn shut_down(&self) {
        self.kill_server_if_empty();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Stops a test's tmux server (made on its own socket) when the test ends.
    struct KillServer<'a>(&'a Tmux);

    impl Drop for KillServer<'_> {
        fn drop(&mut self) {
            let _ = self.0.run("kill-server", &["kill-server"]);
        }
    }

    /// At most `n` tmux clients at once: the next waits until a turn is given back.
    #[test]
    fn a_client_past_the_slots_waits_for_a_turn() {
        let slots = std::sync::Arc::new(Slots::new(2));
        let a = slots.take();
        let _b = slots.take();
        let (tx, rx) = std::sync::mpsc::channel();
        let s2 = slots.clone();
        let waiter = std::thread::spawn(move || {
            let _c = s2.take();
            tx.send(()).unwrap();
        });
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err(), "no third turn while two are out");
        drop(a);
        rx.recv_timeout(Duration::from_secs(10)).expect("the turn given back goes to the waiter");
        waiter.join().unwrap();
    }

    #[test]
    fn session_names_are_listed_and_no_server_means_none() {
        let names = session_names(true, "lab-r-1\nlab-r-2\n", "").unwrap();
        assert_eq!(names.into_iter().collect::<Vec<_>>(), ["lab-r-1", "lab-r-2"]);
        assert!(session_names(true, "", "").unwrap().is_empty(), "a server with no session");
        for absent in [
            "no server running on /h/tmux.sock",
            "error connecting to /h/tmux.sock (No such file or directory)",
            "error connecting to /h/tmux.sock (Connection refused)",
        ] {
            assert!(session_names(false, "", absent).unwrap().is_empty(), "{absent}");
        }
        // Anything else proves nothing: no run may be ended on it.
        assert!(session_names(false, "", "error connecting to /h/tmux.sock (Permission denied)").is_err());
        assert!(session_names(false, "", "server exited unexpectedly").is_err());
    }

    #[test]
    fn the_setup_hands_the_signal_path_over_as_one_argument_never_parsed() {
        let setup = server_setup(Path::new("/h o m e/#{x};$HOME/runtime/sig"));
        let i = setup.iter().position(|a| a == SIGNAL_ENV).unwrap();
        assert_eq!(setup[i + 1], "/h o m e/#{x};$HOME/runtime/sig");
        assert_eq!(setup.last().unwrap(), ";", "a command follows");
        assert!(setup.iter().any(|a| a == "exit-empty") && setup.iter().any(|a| a == HOOK_SLOT));
        // No argument but the separators ends in `;` (tmux would split it there).
        assert!(setup.iter().filter(|a| *a != ";").all(|a| !a.to_string_lossy().ends_with(';')));
    }

    /// Real tmux in control mode: the view starts with the pane's size and its screen as
    /// it is, then streams what the program writes; keys typed through it reach the
    /// program byte for byte (`;`, a carriage return); a resize answers with the new
    /// size; the session's end ends the view.
    #[test]
    fn a_watch_draws_the_pane_streams_it_and_types_into_it() {
        let d = tempfile::Builder::new().prefix("lab-tmux").tempdir_in("/tmp").unwrap();
        let tmux = Tmux::new(d.path().join("s"));
        let _guard = KillServer(&tmux);
        tmux.new_session("lab-w", &["cat".into(), "-v".into()]).unwrap();
        tmux.send_literal("lab-w", "before").unwrap();
        tmux.send_key("lab-w", "Enter").unwrap();
        wait_until("cat echoed", || tmux.capture("lab-w").is_ok_and(|p| p.matches("before").count() == 2));
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let mut w = Terminal::watch(&tmux, "lab-w", tx).unwrap();
        let next = |rx: &mut tokio::sync::mpsc::Receiver<PaneEvent>| {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                match rx.try_recv() {
                    Ok(e) => return e,
                    Err(tokio::sync::mpsc::error::TryRecvError::Empty) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Err(e) => panic!("no event: {e}"),
                }
            }
        };
        assert_eq!(next(&mut rx), PaneEvent::Size { cols: 200, rows: 50 });
        let PaneEvent::Output(first) = next(&mut rx) else { panic!("no drawing") };
        let first = String::from_utf8_lossy(&first);
        assert!(first.starts_with("\x1b[0m\x1b[H\x1b[2J") && first.matches("before").count() == 2, "{first:?}");
        w.keys(b"typed;\r").unwrap();
        let mut seen = Vec::new();
        while !String::from_utf8_lossy(&seen).contains("typed;\r\n") {
            match next(&mut rx) {
                PaneEvent::Output(b) => seen.extend(b),
                other => panic!("{other:?}"),
            }
        }
        wait_until("the keys reached cat", || tmux.capture("lab-w").is_ok_and(|p| p.matches("typed;").count() == 2));
        w.resize(80, 20).unwrap();
        loop {
            match next(&mut rx) {
                PaneEvent::Size { cols, rows } => {
                    assert_eq!((cols, rows), (80, 20));
                    break;
                }
                PaneEvent::Output(_) => {}
                other => panic!("{other:?}"),
            }
        }
        tmux.kill_session("lab-w").unwrap();
        loop {
            if let PaneEvent::Ended(_) = next(&mut rx) {
                break;
            }
        }
    }

    /// Real tmux: a window named after another session (what an agent that reaches the
    /// server could do) never takes that session's keys, pastes or captures.
    #[test]
    fn keys_paste_and_capture_reach_exactly_the_named_session() {
        let d = tempfile::Builder::new().prefix("lab-tmux").tempdir_in("/tmp").unwrap();
        let tmux = Tmux::new(d.path().join("s"));
        let _guard = KillServer(&tmux);
        let cat = |n: &str| tmux.new_session(n, &["cat".into(), "-v".into()]).unwrap();
        cat("lab-b");
        cat("lab-a");
        // In lab-a (the newest session: tmux's "current" one for a client outside
        // tmux), a window named "lab-b", and one named like a prefix of it.
        tmux.run("rename-window", &["rename-window", "-t", "=lab-a:", "lab-b"]).unwrap();
        tmux.run("new-window", &["new-window", "-d", "-t", "=lab-a:", "-n", "lab", "cat"]).unwrap();
        tmux.send_literal("lab-b", "to-b;").unwrap();
        tmux.send_key("lab-b", "Enter").unwrap();
        tmux.paste("lab-b", "buf-b", "pasted-b").unwrap();
        tmux.send_key("lab-b", "Enter").unwrap();
        wait_until("the keys in lab-b", || {
            tmux.capture("lab-b").is_ok_and(|p| p.contains("to-b;") && p.contains("pasted-b"))
        });
        let a = tmux.capture("lab-a").unwrap();
        assert!(!a.contains("to-b") && !a.contains("pasted-b"), "lab-a's window named lab-b got them: {a:?}");
        // A prefix of a name is no target at all.
        assert!(tmux.send_key("lab", "Enter").is_err());
        assert!(tmux.capture("lab").is_err());
    }

    fn wait_until(what: &str, f: impl Fn() -> bool) {
        let start = Instant::now();
        while !f() {
            assert!(start.elapsed() < Duration::from_secs(5), "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Real tmux: the hook reports every closed session, the last one too, and a
    /// server found running is set up again.
    #[test]
    fn a_closed_session_is_reported_through_the_signal_file() {
        let d = tempfile::Builder::new().prefix("lab-tmux").tempdir_in("/tmp").unwrap();
        let signal = d.path().join("dir with ' and \" and #{x}").join("signal");
        std::fs::create_dir(signal.parent().unwrap()).unwrap();
        let tmux = Tmux::new(d.path().join("s")).with_closed_signal(signal.clone());
        let _guard = KillServer(&tmux);
        assert!(!tmux.set_up_server().unwrap(), "no server yet");
        assert!(tmux.list_session_names().unwrap().is_empty());
        let sleep = |n: &str| tmux.new_session(n, &["sleep".into(), "60".into()]).unwrap();
        sleep("a");
        sleep("b");
        assert_eq!(tmux.list_session_names().unwrap().into_iter().collect::<Vec<_>>(), ["a", "b"]);
        assert!(!signal.exists());

        tmux.kill_session("a").unwrap();
        wait_until("the signal for a", || signal.exists());
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&signal).unwrap().permissions().mode() & 0o777, 0o600);
        std::fs::remove_file(&signal).unwrap();

        // The last session: the server stays up, so its hook still runs.
        tmux.kill_session("b").unwrap();
        wait_until("the signal for b", || signal.exists());
        assert!(tmux.list_session_names().unwrap().is_empty());
        std::fs::remove_file(&signal).unwrap();

        // A server someone else set up differently is set up again.
        tmux.run("set-hook", &["set-hook", "-gu", HOOK_SLOT]).unwrap();
        assert!(tmux.set_up_server().unwrap());
        tmux.run("new-session", &["new-session", "-d", "-s", "c", "sleep 0.2"]).unwrap();
        wait_until("the signal for c (its program exited)", || signal.exists());

        tmux.kill_server_if_empty();
        let out = tmux.cmd().args(["list-sessions"]).output().unwrap();
        assert!(no_server(String::from_utf8_lossy(&out.stderr).trim()), "the empty server was stopped");
    }
}
