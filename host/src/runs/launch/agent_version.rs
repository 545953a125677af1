//! The agent's own version, for the operator ("<agent name> 2.1.4" in the new-run
//! form): `<program> --version`, asked once per program file and kept until the file
//! changes (an upgrade in place is seen without a restart of lab).
//!
//! Agent-neutral: most agent CLIs answer `--version` with a line holding their version
//! (`2.1.4 (Some Agent)`, `some-cli 0.17.0`); the first version-shaped word of
//! its output is taken. A program that is missing, fails, prints nothing like a version
//! or takes longer than [`PROBE_TIMEOUT`] has no known version (`None`), and nothing
//! else changes: runs launch as before.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// How long `--version` may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest version string kept (characters).
const MAX_VERSION: usize = 40;
/// Output read at most (bytes).
const MAX_OUTPUT: usize = 4096;

/// The first version-shaped word of `output`: digits and dots with at least one dot,
/// starting with a digit (an optional leading `v` dropped), with any `-pre`/`+build`
/// suffix made of `[A-Za-z0-9.+-]`.
pub fn parse_version(output: &str) -> Option<String> {
    output.split_whitespace().find_map(|word| {
        let w = word.trim_matches(|c: char| matches!(c, '(' | ')' | ',' | ';' | ':' | '"' | '\''));
        let w = w.strip_prefix('v').unwrap_or(w);
        let core_len = w.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(w.len());
        let core = &w[..core_len];
        let numbered = core.starts_with(|c: char| c.is_ascii_digit())
            && core.contains('.')
            && core.split('.').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        let suffix_ok = w[core_len..].starts_with(['-', '+'])
            && w[core_len..].chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-'))
            || core_len == w.len();
        (numbered && suffix_ok && w.chars().count() <= MAX_VERSION).then(|| w.to_string())
    })
}

/// Run `program --version`, at most [`PROBE_TIMEOUT`]; its version, if it printed one.
///
/// The program is any agent an operator configured, and not every one knows
/// `--version`: it runs where it can touch nothing of lab's or the operator's — a fresh
/// empty directory as its working directory, `HOME` and `TMPDIR`, an environment of
/// only `PATH` (`path`), stdin closed, its own process group, killed with that group
/// when the time is up or the answer is in.
pub async fn probe(program: &Path, path: Option<&std::ffi::OsStr>) -> Option<String> {
    probe_within(program, path, PROBE_TIMEOUT).await
}

async fn probe_within(program: &Path, path: Option<&std::ffi::OsStr>, limit: Duration) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let scratch = Scratch::new()?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.arg("--version")
        .env_clear()
        .env("HOME", scratch.path())
        .env("TMPDIR", scratch.path())
        .current_dir(scratch.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    let mut child = cmd.spawn().ok()?;
    // Whatever it started goes with it — when the answer is in, when the time is up, and
    // when the probe itself is dropped half-way (lab serve shutting down): only the
    // group this probe made.
    let _group = child.id().and_then(|g| i32::try_from(g).ok()).filter(|g| *g > 1).map(Group);
    let mut stdout = child.stdout.take()?;
    let read = async {
        let mut out = Vec::new();
        let _ = (&mut stdout).take(MAX_OUTPUT as u64).read_to_end(&mut out).await;
        out
    };
    let out = tokio::time::timeout(limit, read).await.ok();
    drop(_group);
    let _ = child.wait().await;
    parse_version(&String::from_utf8_lossy(&out?))
}

/// The process group a probe made (its pgid): killed, all of it, when dropped.
struct Group(i32);

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group created for the probe's child.
        unsafe {
            libc::kill(-self.0, libc::SIGKILL);
        }
    }
}

/// A fresh private directory under the system's temp dir, removed with its contents
/// when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Option<Scratch> {
        use std::os::unix::fs::DirBuilderExt;
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("lab-version-{}-{n}-{}", std::process::id(), uuid::Uuid::new_v4()));
        std::fs::DirBuilder::new().mode(0o700).create(&dir).ok()?;
        Some(Scratch(dir))
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What identifies a program file: its path, size and modification time.
type Stamp = (PathBuf, u64, Option<SystemTime>);

fn stamp(program: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(program).ok()?;
    Some((program.to_path_buf(), m.len(), m.modified().ok()))
}

/// Versions already asked, per program file; asking happens in the background, so a
/// caller never waits for an agent.
#[derive(Default)]
pub struct VersionCache {
    known: Mutex<HashMap<Stamp, Option<String>>>,
    asking: Mutex<HashSet<Stamp>>,
}

impl VersionCache {
    /// The version of `program` if it is known by now; when it is not, starts asking
    /// (once per state of the file) and returns `None` for the moment.
    pub fn lookup(self: &Arc<Self>, program: &Path, path: Option<OsString>) -> Option<String> {
        let key = stamp(program)?;
        if let Some(v) = self.known.lock().unwrap().get(&key) {
            return v.clone();
        }
        if self.asking.lock().unwrap().insert(key.clone()) {
            let cache = self.clone();
            tokio::spawn(async move {
                let v = probe(&key.0, path.as_deref()).await;
                let mut known = cache.known.lock().unwrap();
                known.retain(|(p, _, _), _| p != &key.0);
                known.insert(key.clone(), v);
                cache.asking.lock().unwrap().remove(&key);
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_first_version_shaped_word_is_the_version() {
        assert_eq!(parse_version("4.2.17 (Some Agent)\n").as_deref(), Some("4.2.17"));
        assert_eq!(parse_version("agent-cli 0.171.0").as_deref(), Some("0.171.0"));
        assert_eq!(parse_version("tool v1.2.3-beta.1 (build 99)").as_deref(), Some("1.2.3-beta.1"));
        assert_eq!(parse_version("agent version 10.4, built 2026").as_deref(), Some("10.4"));
        assert_eq!(parse_version("1.2.3+abc.def").as_deref(), Some("1.2.3+abc.def"));
        for none in ["", "no version here", "3 apples", "1..2", ".5", "1.2.3/../x", "1.2.3$(rm)"] {
            assert_eq!(parse_version(none), None, "{none:?}");
        }
        assert_eq!(parse_version(&format!("1.{}", "2".repeat(60))), None, "too long");
    }

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// Ask until the background probe has answered (bounded).
    async fn settled(cache: &Arc<VersionCache>, program: &Path) -> Option<String> {
        for _ in 0..100 {
            if let Some(v) = cache.lookup(program, std::env::var_os("PATH")) {
                return Some(v);
            }
            if !cache.asking.lock().unwrap().iter().any(|(p, _, _)| p == program) {
                return cache.lookup(program, None);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no answer for {}", program.display())
    }

    #[tokio::test]
    async fn a_program_is_asked_once_per_file_state_in_the_background_and_failures_are_no_version() {
        let d = tempfile::tempdir().unwrap();
        let count = d.path().join("count");
        let body = format!("echo x >> {}; echo \"agent 4.5.6 (Agent)\"", count.display());
        let agent = script(d.path(), "agent", &body);
        let cache = Arc::new(VersionCache::default());
        assert_eq!(cache.lookup(&agent, std::env::var_os("PATH")), None, "not known yet: asked in the background");
        assert_eq!(settled(&cache, &agent).await.as_deref(), Some("4.5.6"));
        assert_eq!(cache.lookup(&agent, None).as_deref(), Some("4.5.6"));
        assert_eq!(std::fs::read_to_string(&count).unwrap().lines().count(), 1, "asked once");
        // Upgraded in place: asked again.
        std::fs::write(&agent, "#!/bin/sh\necho 4.6.0-rc1 from a longer script\n").unwrap();
        assert_eq!(settled(&cache, &agent).await.as_deref(), Some("4.6.0-rc1"));
        // Failing, silent, missing: no version.
        assert_eq!(settled(&cache, &script(d.path(), "bad", "exit 3")).await, None);
        assert_eq!(cache.lookup(&d.path().join("missing"), None), None);
        assert_eq!(probe(&script(d.path(), "quiet", "echo hello"), None).await, None);
    }

    #[tokio::test]
    async fn the_probe_runs_in_a_scratch_home_with_only_path_and_its_children_go_with_it() {
        let d = tempfile::tempdir().unwrap();
        let seen = d.path().join("seen");
        let agent = script(
            d.path(),
            "agent",
            &format!(
                "echo \"$HOME|$PWD|$SECRET|$(env | wc -l)\" > {}; touch \"$HOME/mark\"; echo 1.0.0",
                seen.display()
            ),
        );
        std::env::set_var("SECRET", "lab-only");
        assert_eq!(probe(&agent, std::env::var_os("PATH").as_deref()).await.as_deref(), Some("1.0.0"));
        let line = std::fs::read_to_string(&seen).unwrap();
        let parts: Vec<&str> = line.trim().split('|').collect();
        assert!(parts[0].contains("lab-version-") && parts[0] == parts[1], "{line}");
        assert_eq!(parts[2], "", "lab's environment is not passed: {line}");
        assert!(!Path::new(parts[0]).exists(), "the scratch home is removed");
        // A program that hangs and leaves a child: both are gone when the time is up.
        let pidfile = d.path().join("child.pid");
        let hang = script(d.path(), "hang", &format!("sleep 30 & echo $! > {}; exec sleep 30", pidfile.display()));
        let t = std::time::Instant::now();
        assert_eq!(probe_within(&hang, std::env::var_os("PATH").as_deref(), Duration::from_millis(500)).await, None);
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        assert!(ends_within_2s(pid), "the probe's child {pid} outlived it");
    }

    /// Ended: `/proc/<pid>/stat` missing, or a zombie (its parent yet to reap it).
    fn ended(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map_or(true, |st| st.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')))
    }

    /// Whether `pid` ends within 2 s (SIGKILL is sent at once; its reaping may follow).
    fn ends_within_2s(pid: i32) -> bool {
        (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            ended(pid)
        })
    }

    #[tokio::test]
    async fn a_probe_dropped_half_way_takes_what_it_started_with_it() {
        // lab serve shutting down drops its tasks: a probe still waiting for a program
        // that hangs (an agent that does not know `--version`) must not leave it, or
        // what it started, running.
        let d = tempfile::tempdir().unwrap();
        let pidfile = d.path().join("child.pid");
        let hang = script(
            d.path(),
            "hang",
            &format!("sleep 30 & echo $! > {}.tmp; mv {0}.tmp {0}; exec sleep 30", pidfile.display()),
        );
        let path = std::env::var_os("PATH");
        let task = tokio::spawn(async move { probe_within(&hang, path.as_deref(), Duration::from_secs(30)).await });
        let pid: i32 = loop {
            if let Ok(p) = std::fs::read_to_string(&pidfile) {
                break p.trim().parse().unwrap();
            }
            assert!(!task.is_finished(), "the probe ended before its program started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(!ended(pid), "the program's child runs while the probe waits");
        task.abort();
        assert!(task.await.unwrap_err().is_cancelled());
        // SIGKILL is sent by the drop itself.
        assert!(ends_within_2s(pid), "the dropped probe's child {pid} outlived it");
    }
}
