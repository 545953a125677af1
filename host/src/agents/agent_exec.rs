//! `lab agent-exec --launch-file <file>`: how a run's agent is started inside its tmux
//! pane. Everything about the launch travels in a 0600 file under runtime/ — the
//! agent's argv (its first prompt among them), its working directory and its
//! environment (lab serve's, plus the provider's `env` from lab.toml — API keys among
//! them) — never on tmux's command line, where `ps` would show it, tmux's
//! command-length limit would cut it and tmux would expand formats (`#(…)`) in it.
//! This reads the file (only if it is lab's: a regular 0600 file of lab's user in a
//! 0700 directory of lab's user, never through a symlink; otherwise it runs nothing),
//! deletes it, changes into the workdir (and checks that it got
//! there), and execs the agent with exactly that environment plus `PWD` (the workdir)
//! and the pane's own `TERM`, `COLORTERM`. Never `TMUX` or `TMUX_PANE`, neither the
//! pane's (lab's server) nor lab serve's own: with them, a `tmux kill-server` (or any
//! tmux command) in whatever the agent runs would reach lab's server and every run on
//! it. Like `lab hook`, it loads nothing else.

use crate::store::fsutil::{self, Kind, OwnerFacts};
use crate::store::paths::LAUNCH_FAILED_CAP;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// Variables the pane sets for its program, which win over the file's.
const PANE_VARS: &[&str] = &["TERM", "COLORTERM"];
/// Variables the agent never gets, whoever set them: they lead tmux to lab's server.
pub const NEVER_PASSED: &[&str] = &["TMUX", "TMUX_PANE"];

/// The launch file: written by `lab serve`, read once and deleted by `lab agent-exec`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchFile {
    /// The agent's argv, program first.
    pub argv: Vec<String>,
    /// The absolute directory the agent starts in.
    pub workdir: String,
    pub env: BTreeMap<String, String>,
    /// The run's jail, if it has one: the agent is started inside it, behind the egress
    /// proxy ([`crate::sandbox::supervise`]), and this stays its parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::Plan>,
}

impl LaunchFile {
    pub fn parse(bytes: &[u8]) -> Result<LaunchFile, String> {
        let f: LaunchFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if f.argv.is_empty() || f.argv[0].is_empty() {
            return Err("the launch file names no program".into());
        }
        if !f.workdir.starts_with('/') {
            return Err(format!("the workdir {:?} is not absolute", f.workdir));
        }
        Ok(f)
    }
}

/// The largest launch file read (the first prompt is in it).
pub const LAUNCH_FILE_CAP: usize = 16 * 1024 * 1024;

/// Why a launch file (or its directory) is not one only `lab serve` could have written:
/// a symlink or special file, another user's, or open to group or others (lab writes
/// it 0600 in its 0700 `runtime/`). `None`: trusted.
pub fn launch_file_untrusted(facts: &impl OwnerFacts, kind: Kind, euid: u32) -> Option<String> {
    fsutil::untrusted(facts, kind, euid).or_else(|| {
        (facts.mode() & 0o077 != 0).then(|| format!("group or others may use it (mode {:04o})", facts.mode() & 0o7777))
    })
}

/// Read the launch file, if it is lab's ([`launch_file_untrusted`], for it and its
/// directory): opened without following a symlink or blocking on a FIFO, checked on
/// what was opened.
pub fn read_launch_file(path: &Path) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let euid = fsutil::euid();
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let meta = std::fs::symlink_metadata(dir).map_err(|e| format!("its directory: {e}"))?;
    if let Some(why) = launch_file_untrusted(&meta, Kind::Dir, euid) {
        return Err(format!("its directory {} is not lab's: {why}", dir.display()));
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| if e.raw_os_error() == Some(libc::ELOOP) { "it is a symlink".into() } else { e.to_string() })?;
    let meta = f.metadata().map_err(|e| e.to_string())?;
    if let Some(why) = launch_file_untrusted(&meta, Kind::File, euid) {
        return Err(format!("it is not lab's: {why}"));
    }
    fsutil::read_capped(f, LAUNCH_FILE_CAP).map_err(|e| e.to_string())
}

/// Change into `dir` and check that the working directory now is that directory (the
/// same file: device and inode), so the agent never starts anywhere else.
pub fn enter_workdir(dir: &str) -> Result<(), String> {
    std::env::set_current_dir(dir).map_err(|e| format!("cannot change into the workdir {dir}: {e}"))?;
    let here = std::fs::metadata(".").map_err(|e| format!("cannot read the working directory: {e}"))?;
    let there = std::fs::metadata(Path::new(dir)).map_err(|e| format!("cannot read the workdir {dir}: {e}"))?;
    if !here.is_dir() || (here.dev(), here.ino()) != (there.dev(), there.ino()) {
        return Err(format!("the working directory is not the workdir {dir} (it changed while starting)"));
    }
    Ok(())
}

pub fn main(args: &[String]) -> i32 {
    let file = match args {
        [flag, file] if flag == "--launch-file" => file,
        // Inside a run's jail: the bridge to the egress proxy, then the agent.
        [flag, socket, dashes, argv @ ..] if flag == "--bridge" && dashes == "--" => {
            return crate::sandbox::supervise::run_bridge(socket, argv).unwrap_or_else(|e| {
                eprintln!("lab agent-exec: {e}");
                127
            });
        }
        _ => {
            eprintln!("lab agent-exec: usage: lab agent-exec --launch-file <file>");
            return 2;
        }
    };
    let launch = read_launch_file(Path::new(file)).and_then(|b| LaunchFile::parse(&b));
    let _ = std::fs::remove_file(file);
    let launch = match launch {
        Ok(l) => l,
        Err(e) => {
            // (Nothing is written beside a launch file that may not be lab's.)
            eprintln!("lab agent-exec: cannot read the launch file {file}: {e}");
            return 2;
        }
    };
    // Why the agent did not start (or how a jailed one ended), where lab serve reads it
    // when the run's session is gone: the pane that showed it is gone with it.
    let why = |text: &str| {
        eprintln!("lab agent-exec: {text}");
        tell_lab(Path::new(file), text);
    };
    if let Err(e) = enter_workdir(&launch.workdir) {
        why(&e);
        return 2;
    }
    let env = |cmd: &mut Command| {
        cmd.env_clear().envs(&launch.env).env("PWD", &launch.workdir).env_remove("OLDPWD");
        for k in PANE_VARS {
            if let Some(v) = std::env::var_os(k) {
                cmd.env(k, v);
            }
        }
        for k in NEVER_PASSED {
            cmd.env_remove(k);
        }
    };
    if let Some(plan) = &launch.sandbox {
        // A worktree's git: what the last jail committed brought back and the run's own
        // git folder made afresh before; what this one committed brought back after.
        let git = |prepare: bool| -> Result<(), String> {
            let Some(g) = &plan.git else { return Ok(()) };
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
            if prepare {
                rt.block_on(g.prepare())
            } else {
                rt.block_on(g.bring_back()).map(|_| ())
            }
        };
        if let Err(e) = git(true) {
            why(&format!("making the run's git ready for its sandbox: {e}"));
            return 127;
        }
        let code = crate::sandbox::supervise::run_jailed(plan, &launch.argv, &launch.workdir, env);
        let brought = git(false);
        match (&code, &brought) {
            (Err(e), _) => why(e),
            (Ok(c), Err(e)) => {
                why(&format!("the agent exited with code {c}; the run's commits stay in its sandbox's git folder: {e}"))
            }
            (Ok(c), Ok(())) if *c != 0 => why(&format!("the agent exited with code {c} in its sandbox")),
            _ => {}
        }
        return code.unwrap_or(127);
    }
    let mut cmd = Command::new(&launch.argv[0]);
    cmd.args(&launch.argv[1..]);
    env(&mut cmd);
    let err = cmd.exec();
    why(&format!("cannot start {}: {err}", launch.argv[0]));
    127
}

/// Write `text` (cut to [`LAUNCH_FAILED_CAP`]) as the run's `failed` file, beside its
/// launch file: made anew, private, never through a symlink. A failure to write is
/// only said on the pane.
fn tell_lab(launch: &Path, text: &str) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let Some(path) = crate::store::paths::RunFiles::failed_beside(launch) else { return };
    let _ = std::fs::remove_file(&path);
    let text = crate::util::text::head(text, LAUNCH_FAILED_CAP);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if let Err(e) = written {
        eprintln!("lab agent-exec: cannot tell lab serve why ({}): {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launch_file_is_checked() {
        let ok = br#"{"argv": ["/bin/agent", "--x", "a\nprompt"], "workdir": "/tmp", "env": {"A": "1"}}"#;
        let f = LaunchFile::parse(ok).unwrap();
        assert_eq!(f.argv[2], "a\nprompt");
        assert_eq!(f.env["A"], "1");
        for bad in [
            &br#"{"argv": [], "workdir": "/tmp", "env": {}}"#[..],
            br#"{"argv": [""], "workdir": "/tmp", "env": {}}"#,
            br#"{"argv": ["/bin/a"], "workdir": "tmp", "env": {}}"#,
            br#"{"argv": ["/bin/a"], "workdir": "/tmp", "env": {}, "extra": 1}"#,
            b"not json",
        ] {
            assert!(LaunchFile::parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    fn st(uid: u32, mode: u32) -> fsutil::Stat {
        fsutil::Stat { uid, mode }
    }

    #[test]
    fn only_lab_s_private_launch_file_is_trusted() {
        let (me, reg, dir) = (1000, libc::S_IFREG, libc::S_IFDIR);
        assert_eq!(launch_file_untrusted(&st(me, reg | 0o600), Kind::File, me), None);
        assert_eq!(launch_file_untrusted(&st(me, dir | 0o700), Kind::Dir, me), None);
        assert!(launch_file_untrusted(&st(me, reg | 0o644), Kind::File, me).unwrap().contains("mode 0644"));
        assert!(launch_file_untrusted(&st(me, dir | 0o1777), Kind::Dir, me).unwrap().contains("writable"));
        assert!(launch_file_untrusted(&st(me, dir | 0o750), Kind::Dir, me).unwrap().contains("mode 0750"));
        assert!(launch_file_untrusted(&st(1001, reg | 0o600), Kind::File, me).unwrap().contains("uid 1001"));
        assert!(launch_file_untrusted(&st(me, libc::S_IFIFO | 0o600), Kind::File, me).is_some());
    }
}
