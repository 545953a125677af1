//! Reaching a machine with the system OpenSSH client, as its operator does: their
//! `~/.ssh/config` (aliases, `ProxyJump`, agents) applies, and so do their keys.
//!
//! - One multiplexed connection per machine: a ControlMaster whose socket is in lab's
//!   0700 runtime folder, left in the background (`ControlPersist`: it outlives lab
//!   serve, and the next one finds it) ([`Master::up`]); every other ssh goes through
//!   it (a few ms instead of a new key exchange).
//! - Nothing waits without bound: a connection has [`CONNECT_WITHIN`], a control
//!   command [`CONTROL_WITHIN`], a command what its caller gives. A master is asked
//!   `-O check` before use; a socket whose master is gone is removed and dialled again
//!   (a stale ControlMaster socket never hangs lab).
//! - Host keys are checked strictly (`StrictHostKeyChecking=yes`, batch mode: no
//!   prompt): an unknown or changed key fails with the fingerprint the machine offers
//!   and how to accept it ([`Refusal`]), never a silent accept.
//! - [`bootstrap`]: lab of this exact build put on the machine (checked by its hash).

pub mod bootstrap;

use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a new connection may take: TCP, key exchange, authentication.
pub const CONNECT_WITHIN: Duration = Duration::from_secs(15);
/// How long `-O check` and `-O exit` may take (they speak to a local socket).
pub const CONTROL_WITHIN: Duration = Duration::from_secs(3);
/// How long `ssh-keyscan` may take to fetch an unknown machine's keys for the message.
const KEYSCAN_WITHIN: Duration = Duration::from_secs(5);

/// Where a machine is, for ssh.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SshTarget {
    /// `[user@]host`, or a `Host` alias of the operator's ssh config.
    pub destination: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The private key to log in with (only it: `IdentitiesOnly`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<PathBuf>,
    /// The known-hosts file its host key is checked against (else the operator's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_hosts: Option<PathBuf>,
    /// The folder lab's builds go in there: absolute, or `~/…` (else
    /// [`bootstrap::DEFAULT_DIR`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<String>,
}

impl SshTarget {
    /// A destination ssh takes as one: `[user@]host` of plain characters, never an
    /// option (`-oProxyCommand=…`).
    pub fn check(&self) -> Result<(), String> {
        let d = &self.destination;
        let plain = |s: &str| {
            !s.is_empty()
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || b".-_:[]%".contains(&b))
                && !s.starts_with('-')
        };
        let ok = match d.split_once('@') {
            Some((user, host)) => plain(user) && plain(host),
            None => plain(d),
        };
        if !ok || d.len() > 255 {
            return Err(format!("{d:?} is not an ssh destination ([user@]host, or an alias of your ssh config)"));
        }
        for (what, p) in [("identity", &self.identity), ("known_hosts", &self.known_hosts)] {
            if p.as_ref().is_some_and(|p| !p.is_absolute()) {
                return Err(format!("{what} must be an absolute path"));
            }
        }
        if let Some(dir) = &self.lab {
            let rest = dir.strip_prefix("~/").or_else(|| dir.strip_prefix('/'));
            let plain = rest.is_some_and(|r| {
                !r.is_empty()
                    && r.len() < 1024
                    && r.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-/+@%,:=".contains(&b))
            });
            if !plain || dir.split('/').any(|part| part == "..") {
                return Err(format!(
                    "lab = {dir:?}: where lab goes there is an absolute path or ~/…, of letters, digits and ._-/+@%,:="
                ));
            }
        }
        Ok(())
    }

    /// The options an operator's own `ssh` needs to reach it as lab does (for the attach
    /// command lab shows): its port, key and known hosts.
    pub fn attach_options(&self) -> Vec<String> {
        let mut a = Vec::new();
        if let Some(p) = self.port {
            a.extend(["-p".into(), p.to_string()]);
        }
        if let Some(i) = &self.identity {
            a.extend(["-i".into(), i.display().to_string()]);
        }
        if let Some(k) = &self.known_hosts {
            a.extend(["-o".into(), format!("UserKnownHostsFile={}", k.display())]);
        }
        a
    }

    /// The options of every ssh lab runs to reach it, through the master at `control`.
    pub fn options(&self, control: &Path) -> Vec<String> {
        let mut a: Vec<String> = [
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "ConnectTimeout=10",
            "-o",
            "ServerAliveInterval=5",
            "-o",
            "ServerAliveCountMax=3",
        ]
        .map(String::from)
        .to_vec();
        a.extend(["-o".into(), format!("ControlPath={}", control.display())]);
        if let Some(p) = self.port {
            a.extend(["-p".into(), p.to_string()]);
        }
        if let Some(i) = &self.identity {
            a.extend(["-i".into(), i.display().to_string(), "-o".into(), "IdentitiesOnly=yes".into()]);
        }
        if let Some(k) = &self.known_hosts {
            a.extend(["-o".into(), format!("UserKnownHostsFile={}", k.display())]);
        }
        a
    }
}

/// Why ssh did not get there, as the operator can act on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SshError {
    /// The machine's host key is not the one known, or none is known.
    #[error("{0}")]
    HostKey(String),
    /// The machine refused the login.
    #[error("{0}")]
    Denied(String),
    /// The machine is reached but lab cannot run there (another OS or architecture,
    /// no tmux).
    #[error("{0}")]
    Unsuitable(String),
    #[error("{0}")]
    Failed(String),
    #[error("ssh {what} did not finish within {} s", .within.as_secs())]
    Timeout { what: String, within: Duration },
}

/// What ssh's error output says went wrong (OpenSSH 9's words).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// "REMOTE HOST IDENTIFICATION HAS CHANGED": the key it sent, as ssh printed it.
    ChangedKey { fingerprint: Option<String> },
    /// "No … host key is known … strict checking" / "Host key verification failed".
    UnknownKey,
    /// "Permission denied (…)".
    Denied(String),
    /// Anything else: its last line.
    Other(String),
}

/// Read ssh's error output.
pub fn refusal(stderr: &str) -> Refusal {
    let lines: Vec<&str> = stderr.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    if stderr.contains("REMOTE HOST IDENTIFICATION HAS CHANGED") {
        let fingerprint = lines.iter().find(|l| l.starts_with("SHA256:")).map(|l| l.trim_end_matches('.').to_string());
        return Refusal::ChangedKey { fingerprint };
    }
    if stderr.contains("Host key verification failed")
        || (stderr.contains("host key is known") && stderr.contains("strict checking"))
    {
        return Refusal::UnknownKey;
    }
    if let Some(l) = lines.iter().find(|l| l.contains("Permission denied")) {
        return Refusal::Denied(l.to_string());
    }
    Refusal::Other(lines.last().map(|l| l.to_string()).unwrap_or_else(|| "ssh failed and said nothing".into()))
}

/// A machine's multiplexed connection: its master, started by lab and kept.
pub struct Master {
    target: SshTarget,
    /// The master's socket (in lab's 0700 runtime folder; short: a Unix socket path).
    control: PathBuf,
    /// Dialling takes turns (two callers never start two masters).
    dialling: Mutex<()>,
}

impl Master {
    pub fn new(target: SshTarget, control: PathBuf) -> Master {
        Master { target, control, dialling: Mutex::new(()) }
    }

    pub fn target(&self) -> &SshTarget {
        &self.target
    }

    fn ssh(&self) -> Command {
        let mut c = Command::new("ssh");
        c.args(self.target.options(&self.control)).stdin(Stdio::null());
        c
    }

    /// Whether a master answers on the socket now.
    pub fn alive(&self) -> bool {
        if !self.control.exists() {
            return false;
        }
        let mut c = self.ssh();
        c.args(["-O", "check", &self.target.destination]);
        run_within(c, b"", CONTROL_WITHIN).is_ok_and(|o| o.status.success())
    }

    /// A live master: the one there, else a new one (a socket left by a master that is
    /// gone is removed first). Its error says what to do about it.
    pub fn up(&self) -> Result<(), SshError> {
        if self.alive() {
            return Ok(());
        }
        let _turn = self.dialling.lock().unwrap();
        if self.alive() {
            return Ok(());
        }
        let _ = std::fs::remove_file(&self.control);
        let log = self.control.with_extension("log");
        let err = std::fs::File::create(&log).map_err(|e| SshError::Failed(format!("{}: {e}", log.display())))?;
        let mut c = self.ssh();
        c.args(["-o", "ControlMaster=yes", "-o", "ControlPersist=yes", "-N", &self.target.destination]);
        c.stdout(Stdio::null()).stderr(err);
        let mut child = c.spawn().map_err(|e| SshError::Failed(format!("cannot run ssh: {e}")))?;
        let start = Instant::now();
        loop {
            // Connected, ssh leaves the master in the background (ControlPersist) and
            // exits 0; failing, it exits with its reason in the log.
            if let Ok(Some(status)) = child.try_wait() {
                if status.success() && self.alive() {
                    return Ok(());
                }
                if !status.success() {
                    let said = std::fs::read_to_string(&log).unwrap_or_default();
                    return Err(self.explain(&said));
                }
            }
            if self.alive() {
                // It lives on by itself (after lab serve too: the next one finds it);
                // reaped when it ends.
                std::thread::spawn(move || child.wait());
                return Ok(());
            }
            if start.elapsed() > CONNECT_WITHIN {
                let _ = child.kill();
                let _ = child.wait();
                return Err(SshError::Timeout {
                    what: format!("to {}", self.target.destination),
                    within: CONNECT_WITHIN,
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Run `command` (a shell command line there) through the master, `stdin` fed to
    /// it, for at most `within`.
    pub fn run(&self, command: &str, stdin: &[u8], within: Duration) -> Result<Output, SshError> {
        self.up()?;
        let mut c = self.ssh();
        c.args(["-o", "ControlMaster=no", &self.target.destination, command]);
        run_within(c, stdin, within)
    }

    /// `command` (a shell command line there) as a session through the master, its
    /// stdio the caller's to set (the caller makes sure the master is up).
    pub fn session(&self, command: &str) -> Command {
        let mut c = self.ssh();
        c.args(["-o", "ControlMaster=no", &self.target.destination, command]);
        c
    }

    /// End the master (and its socket).
    pub fn exit(&self) {
        if self.control.exists() {
            let mut c = self.ssh();
            c.args(["-O", "exit", &self.target.destination]);
            let _ = run_within(c, b"", CONTROL_WITHIN);
        }
        let _ = std::fs::remove_file(&self.control);
    }

    /// ssh's error output as an error the operator can act on: for a host key, the
    /// fingerprint the machine offers and how to accept it.
    fn explain(&self, stderr: &str) -> SshError {
        let dest = &self.target.destination;
        let file = self.known_hosts_file();
        match refusal(stderr) {
            Refusal::ChangedKey { fingerprint } => SshError::HostKey(format!(
                "the host key of {dest} has CHANGED since it was accepted into {file}: it now offers {}. \
                 Someone may be in the middle; if the machine was reinstalled and you trust it, remove the old key \
                 (ssh-keygen -R {} -f {file}) and accept the new one",
                fingerprint.unwrap_or_else(|| "another key".into()),
                self.keyscan_host().0
            )),
            Refusal::UnknownKey => {
                let (host, port) = self.keyscan_host();
                let offered = self.offered_keys(&host, port);
                SshError::HostKey(format!(
                    "the host key of {dest} is not known (strict checking, {file}); it offers {}. If that is the \
                     machine's key (compare with `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` run there), \
                     accept it with: ssh-keyscan -p {port} {host} >> {file}",
                    if offered.is_empty() { "no key lab could read".into() } else { offered.join(", ") }
                ))
            }
            Refusal::Denied(line) => SshError::Denied(format!("{dest} refused the login: {line}")),
            Refusal::Other(line) => SshError::Failed(format!("ssh to {dest}: {line}")),
        }
    }

    fn known_hosts_file(&self) -> String {
        match &self.target.known_hosts {
            Some(k) => k.display().to_string(),
            None => "~/.ssh/known_hosts".into(),
        }
    }

    /// The host and port ssh resolves the destination to (`ssh -G`: the operator's
    /// config applied).
    fn keyscan_host(&self) -> (String, u16) {
        let mut c = self.ssh();
        c.args(["-G", &self.target.destination]);
        let out = run_within(c, b"", CONTROL_WITHIN).map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
        let text = out.unwrap_or_default();
        let field = |k: &str| text.lines().find_map(|l| l.strip_prefix(k).map(|v| v.trim().to_string()));
        let host = field("hostname ")
            .unwrap_or_else(|| self.target.destination.rsplit('@').next().unwrap_or_default().to_string());
        let port = field("port ").and_then(|p| p.parse().ok()).or(self.target.port).unwrap_or(22);
        (host, port)
    }

    /// The fingerprints of the keys `host` offers (`ssh-keyscan`, `ssh-keygen -l`).
    fn offered_keys(&self, host: &str, port: u16) -> Vec<String> {
        let mut scan = Command::new("ssh-keyscan");
        scan.args(["-T", "4", "-p", &port.to_string(), host]).stdin(Stdio::null());
        let Ok(keys) = run_within(scan, b"", KEYSCAN_WITHIN) else { return Vec::new() };
        let mut list = Command::new("ssh-keygen");
        list.args(["-l", "-f", "/dev/stdin"]);
        let Ok(listed) = run_within(list, &keys.stdout, CONTROL_WITHIN) else { return Vec::new() };
        // "256 SHA256:… [host]:port (ED25519)" → "ED25519 SHA256:…"
        String::from_utf8_lossy(&listed.stdout)
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let (_, fp) = (w.next()?, w.next()?);
                let kind = w.last()?.trim_matches(|c| c == '(' || c == ')');
                Some(format!("{kind} {fp}"))
            })
            .collect()
    }
}

/// Run `c` with `stdin`, its output read, for at most `within` (then killed).
pub fn run_within(mut c: Command, stdin: &[u8], within: Duration) -> Result<Output, SshError> {
    let what = c.get_args().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ");
    c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().map_err(|e| SshError::Failed(format!("cannot run {:?}: {e}", c.get_program())))?;
    let input = stdin.to_vec();
    let mut pipe_in = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let Some(p) = pipe_in.as_mut() {
            let _ = p.write_all(&input);
        }
    });
    let read = |p: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = p {
                let _ = p.read_to_end(&mut buf);
            }
            let _ = tx.send(buf);
        });
        rx
    };
    let out = read(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let err = read(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let start = Instant::now();
    let timeout = |what: String| SshError::Timeout { what, within };
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() < within => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(timeout(what));
            }
        }
    };
    drop(writer);
    // What it wrote, unless something it left behind holds its output open.
    let left = |rx: std::sync::mpsc::Receiver<Vec<u8>>| rx.recv_timeout(within.saturating_sub(start.elapsed()));
    let (Ok(stdout), Ok(stderr)) = (left(out), left(err)) else { return Err(timeout(what)) };
    Ok(Output { status, stdout, stderr })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_destination_is_one_plain_argument_never_an_option() {
        let t = |d: &str| SshTarget { destination: d.into(), ..SshTarget::default() }.check();
        for ok in ["lab@10.0.0.2", "build-box", "me@host.example.org", "root@fe80::1%eth0"] {
            assert_eq!(t(ok), Ok(()), "{ok}");
        }
        for bad in ["", "-oProxyCommand=touch /tmp/x", "a b", "u@-oX", "@host", "me@", "h;rm", "h\n"] {
            assert!(t(bad).is_err(), "{bad:?}");
        }
        let dir = |d: &str| SshTarget { destination: "h".into(), lab: Some(d.into()), ..SshTarget::default() }.check();
        assert_eq!(dir("~/bin/lab"), Ok(()));
        assert_eq!(dir("/opt/lab"), Ok(()));
        for bad in ["bin", "~", "/", "~/$(id)", "/a b", "/a/../b", "~/\"x"] {
            assert!(dir(bad).is_err(), "{bad}");
        }
        let relative = SshTarget { destination: "h".into(), identity: Some("key".into()), ..SshTarget::default() };
        assert!(relative.check().unwrap_err().contains("identity"));
    }

    #[test]
    fn every_ssh_is_batch_mode_strict_bounded_and_through_the_master() {
        let t = SshTarget {
            destination: "lab@h".into(),
            port: Some(2222),
            identity: Some("/k/id".into()),
            known_hosts: Some("/k/known".into()),
            lab: None,
        };
        let a = t.options(Path::new("/run/lab/m.sock")).join(" ");
        for want in [
            "-o BatchMode=yes",
            "-o StrictHostKeyChecking=yes",
            "-o ConnectTimeout=10",
            "-o ServerAliveInterval=5",
            "-o ControlPath=/run/lab/m.sock",
            "-p 2222",
            "-i /k/id -o IdentitiesOnly=yes",
            "-o UserKnownHostsFile=/k/known",
        ] {
            assert!(a.contains(want), "{want} in {a}");
        }
        let plain = SshTarget { destination: "h".into(), ..SshTarget::default() }.options(Path::new("/s")).join(" ");
        assert!(!plain.contains("-p ") && !plain.contains("-i ") && !plain.contains("UserKnownHostsFile"), "{plain}");
    }

    /// OpenSSH 9.2's own words (recorded from the tests against a real sshd).
    #[test]
    fn ssh_s_refusals_are_read() {
        let unknown = "No ED25519 host key is known for 10.213.0.2 and you have requested strict checking.\r\n\
                       Host key verification failed.\r\n";
        assert_eq!(refusal(unknown), Refusal::UnknownKey);
        let changed = "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n\
            @    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n\
            @@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n\
            IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!\n\
            The fingerprint for the ED25519 key sent by the remote host is\n\
            SHA256:4n7Yq0dWJ3l5Kz0yH0Ym3rB8bM0Yv9eG0f1Wm2X3a4Q.\n\
            Please contact your system administrator.\n\
            Host key verification failed.\n";
        assert_eq!(
            refusal(changed),
            Refusal::ChangedKey { fingerprint: Some("SHA256:4n7Yq0dWJ3l5Kz0yH0Ym3rB8bM0Yv9eG0f1Wm2X3a4Q".into()) }
        );
        assert_eq!(
            refusal("labs61001@10.213.0.2: Permission denied (publickey).\r\n"),
            Refusal::Denied("labs61001@10.213.0.2: Permission denied (publickey).".into())
        );
        assert_eq!(
            refusal("ssh: connect to host 10.9.9.9 port 22: Connection timed out\r\n"),
            Refusal::Other("ssh: connect to host 10.9.9.9 port 22: Connection timed out".into())
        );
        assert_eq!(refusal(""), Refusal::Other("ssh failed and said nothing".into()));
    }

    /// A command that outlives its deadline is killed, and said so.
    #[test]
    fn nothing_is_waited_on_past_its_deadline() {
        let mut c = Command::new("sleep");
        c.arg("30");
        let t = Instant::now();
        let e = run_within(c, b"", Duration::from_millis(200)).unwrap_err();
        assert!(matches!(e, SshError::Timeout { .. }), "{e:?}");
        assert!(t.elapsed() < Duration::from_secs(5));
        let mut c = Command::new("cat");
        c.arg("-");
        assert_eq!(run_within(c, b"in and out", Duration::from_secs(10)).unwrap().stdout, b"in and out");
    }
}
