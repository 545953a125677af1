//! A "machine" made by a test, for what crosses from one host to another: a network
//! namespace joined to this one by a veth pair (this side `peer`, the machine's side
//! `addr`, a /30 of 10.213.0.0/16 of its own), a Unix user of its own (a uid nobody
//! else uses, no groups), and a folder that user owns (mode 0700) with its home, its
//! workdir, lab's runner home and the programs it runs (hard links to this build's).
//! Programs run there through `ip netns exec` and `setpriv`, with a clean environment.
//!
//! Everything the machine runs lives in its namespace, so taking it down is: kill
//! `ip netns pids` (only what the test started there), delete the namespace (the veth
//! pair goes with it), remove the folder. [`Machine::remove`] does it and checks it
//! went; dropping a machine does it without the checks.
//!
//! Needs root (namespaces, another uid). Where that is missing, the test is skipped
//! with a loud note — but with `CI=true` nothing may be skipped, so it fails.

use std::io::Write;
use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub struct Machine {
    /// The network namespace's name.
    pub ns: String,
    /// This machine's end of the link: what lab serve listens on for the machine.
    pub peer: Ipv4Addr,
    /// The machine's own address.
    pub addr: Ipv4Addr,
    /// The machine's user.
    pub uid: u32,
    /// The machine's folder (owned by `uid`): everything below is its.
    pub root: PathBuf,
    /// `lab runner --home` there.
    pub lab_home: PathBuf,
    /// The user's HOME there.
    pub user_home: PathBuf,
    /// A workdir there.
    pub workdir: PathBuf,
    /// Its programs (first on its PATH).
    pub bin: PathBuf,
    /// The machine's end of the veth pair (in its namespace).
    dev: String,
    children: Vec<Child>,
    removed: bool,
}

fn tool(name: &str) -> PathBuf {
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(name))
}

fn ip(args: &[&str]) -> Output {
    Command::new(tool("ip")).args(args).stdin(Stdio::null()).output().expect("run ip")
}

fn ok(out: &Output, what: &str) {
    assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr).trim());
}

impl Machine {
    /// A new machine; `None` (after a loud SKIPPED) where this process cannot make one.
    pub fn new() -> Option<Machine> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let pid = std::process::id();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let ns = format!("labm{pid}-{n}");
        // A namespace of this name is a crashed run's with this pid: no live process has it.
        let _ = ip(&["netns", "del", &ns]);
        let made = ip(&["netns", "add", &ns]);
        if !made.status.success() {
            let why = String::from_utf8_lossy(&made.stderr).trim().to_string();
            let what = "tests on a machine made by the test (a network namespace and a user of its own; needs root)";
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("cannot make a network namespace: {why}. With CI=true {what} must run");
            }
            let _ = writeln!(
                std::io::stderr(),
                "\n************************************************************************\n\
                 SKIPPED: {what}: `ip netns add` failed: {why}\n\
                 ************************************************************************"
            );
            return None;
        }
        // The machine's number (its veth's name, its /30, its uid) is claimed by making
        // its veth pair: the kernel makes one name once, so two machines made at once,
        // in this process or another test binary's, never share a number.
        const NUMBERS: u32 = 4000;
        let first = pid.wrapping_mul(8).wrapping_add(n) % NUMBERS;
        let mut claimed = None;
        for i in 0..NUMBERS {
            let idx = (first + i) % NUMBERS;
            let added =
                ip(&["link", "add", &format!("lmh{idx}"), "type", "veth", "peer", "name", &format!("lmn{idx}")]);
            if added.status.success() {
                claimed = Some(idx);
                break;
            }
            let why = String::from_utf8_lossy(&added.stderr);
            if !why.contains("exists") {
                let _ = ip(&["netns", "del", &ns]);
                panic!("a veth pair: {}", why.trim());
            }
        }
        let Some(idx) = claimed else {
            let _ = ip(&["netns", "del", &ns]);
            panic!("no free machine number: {NUMBERS} veth pairs lmh* exist");
        };
        let (third, fourth) = ((idx / 64) as u8, ((idx % 64) * 4) as u8);
        let root = PathBuf::from(format!("/tmp/labm-{pid}-{n}"));
        let m = Machine {
            ns: ns.clone(),
            peer: Ipv4Addr::new(10, 213, third, fourth + 1),
            addr: Ipv4Addr::new(10, 213, third, fourth + 2),
            uid: 61000 + idx,
            lab_home: root.join("h"),
            user_home: root.join("a"),
            workdir: root.join("w"),
            bin: root.join("bin"),
            dev: format!("lmn{idx}"),
            root,
            children: Vec::new(),
            removed: false,
        };
        // From here on, a failure drops `m`, which takes down what was made.
        let (here, there) = (format!("lmh{idx}"), format!("lmn{idx}"));
        ok(&ip(&["link", "set", &there, "netns", &ns]), "the veth's end into the namespace");
        ok(&ip(&["addr", "add", &format!("{}/30", m.peer), "dev", &here]), "this side's address");
        ok(&ip(&["link", "set", &here, "up"]), "this side up");
        ok(&ip(&["-n", &ns, "addr", "add", &format!("{}/30", m.addr), "dev", &there]), "the machine's address");
        ok(&ip(&["-n", &ns, "link", "set", &there, "up"]), "the machine's side up");
        ok(&ip(&["-n", &ns, "link", "set", "lo", "up"]), "the machine's loopback");
        let _ = std::fs::remove_dir_all(&m.root);
        for d in [&m.root, &m.lab_home, &m.user_home, &m.workdir, &m.bin] {
            std::fs::create_dir_all(d).unwrap();
            m.give(d);
        }
        std::fs::set_permissions(&m.root, std::fs::Permissions::from_mode(0o700)).unwrap();
        m.install("lab", Path::new(super::LAB));
        Some(m)
    }

    /// The machine's link up or down (down: it is cut off, as by a network fault; its
    /// processes go on).
    pub fn set_link(&self, up: bool) {
        let state = if up { "up" } else { "down" };
        ok(&ip(&["-n", &self.ns, "link", "set", &self.dev, state]), "the machine's link");
    }

    /// Make `path` the machine user's.
    pub fn give(&self, path: &Path) {
        std::os::unix::fs::chown(path, Some(self.uid), Some(self.uid)).unwrap();
    }

    /// Write `bytes` to `path` (under the machine's folder), the machine user's file.
    pub fn write(&self, path: &Path, bytes: &[u8]) {
        std::fs::write(path, bytes).unwrap();
        self.give(path);
    }

    /// Put program `from` on the machine as `bin/<name>` (a hard link where it can be,
    /// else a copy): what the machine has installed.
    pub fn install(&self, name: &str, from: &Path) -> PathBuf {
        let to = self.bin.join(name);
        let _ = std::fs::remove_file(&to);
        if std::fs::hard_link(from, &to).is_err() {
            std::fs::copy(from, &to).unwrap();
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        to
    }

    /// `program` run on the machine, as its user, with a clean environment (HOME, a
    /// PATH with its `bin` first, SHELL, LANG, TERM) and its HOME as the current dir.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(tool("ip"));
        let uid = self.uid.to_string();
        c.env_clear()
            .env("HOME", &self.user_home)
            .env("PATH", format!("{}:/usr/local/bin:/usr/bin:/bin", self.bin.display()))
            .env("SHELL", "/bin/sh")
            .env("LANG", "C.UTF-8")
            .env("TERM", "xterm-256color")
            .current_dir(&self.user_home)
            // The suite's mark (scripts/test): what runs on the machine is the suite's too.
            .envs(std::env::var_os("LAB_TEST_RUN").map(|v| ("LAB_TEST_RUN", v)))
            .arg("netns")
            .arg("exec")
            .arg(&self.ns)
            .arg(tool("setpriv"))
            .args(["--reuid", &uid, "--regid", &uid, "--clear-groups", "--"])
            .arg(program)
            .stdin(Stdio::null());
        c
    }

    /// `program args…` on the machine, to its end (at most 30 s).
    pub fn run(&self, program: &str, args: &[&str]) -> Output {
        let mut child = self.command(program).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                panic!("`{program}` on the machine took longer than 30 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        child.wait_with_output().unwrap()
    }

    /// `lab runner --connect url --name name` on the machine (the credential in its
    /// environment, clear-text http allowed: the link is the test's), its stderr to
    /// `<root>/runner.log`. Stopped when the machine goes.
    pub fn start_runner(&mut self, url: &str, name: &str, credential: &str) {
        let log = std::fs::File::create(self.root.join("runner.log")).unwrap();
        let child = self
            .command(self.bin.join("lab"))
            .args(["runner", "--connect", url, "--name", name, "--allow-http", "--home"])
            .arg(&self.lab_home)
            .env("LAB_RUNNER_CREDENTIAL", credential)
            .env("LAB_LOG", "info,lab=debug")
            .stdout(Stdio::null())
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap();
        self.children.push(child);
    }

    /// Stop the runner (SIGTERM, as systemd stops it) and wait for it to go: its link
    /// ends with it.
    pub fn stop_runner(&mut self) {
        for c in &mut self.children {
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        }
        let start = Instant::now();
        for c in &mut self.children {
            while c.try_wait().unwrap().is_none() {
                assert!(start.elapsed() < Duration::from_secs(15), "the runner did not stop within 15 s");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.children.clear();
    }

    /// What the runner wrote on its stderr so far.
    pub fn runner_log(&self) -> String {
        std::fs::read_to_string(self.root.join("runner.log")).unwrap_or_default()
    }

    /// The processes in the machine's namespace.
    fn pids(&self) -> Vec<i32> {
        let out = ip(&["netns", "pids", &self.ns]);
        String::from_utf8_lossy(&out.stdout).split_whitespace().filter_map(|p| p.parse().ok()).collect()
    }

    /// Kill every process in the machine's namespace (only what the test started
    /// there); what is still there after 10 s.
    pub fn kill_all(&self) -> Vec<String> {
        let start = Instant::now();
        loop {
            let pids = self.pids();
            if pids.is_empty() {
                return Vec::new();
            }
            if start.elapsed() > Duration::from_secs(10) {
                return vec![format!("processes still in the namespace: {pids:?}")];
            }
            for p in pids {
                let _ = Command::new("kill").args(["-KILL", &p.to_string()]).stderr(Stdio::null()).status();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn take_down(&mut self) -> Vec<String> {
        let mut left = self.kill_all();
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let del = ip(&["netns", "del", &self.ns]);
        if !del.status.success() {
            left.push(format!("ip netns del: {}", String::from_utf8_lossy(&del.stderr).trim()));
        }
        // The pair goes with the namespace once its end is in there; a machine that
        // failed before that leaves it on this side: its number is freed here.
        let _ = ip(&["link", "del", &self.dev.replacen("lmn", "lmh", 1)]);
        if let Err(e) = std::fs::remove_dir_all(&self.root) {
            left.push(format!("removing {}: {e}", self.root.display()));
        }
        self.removed = true;
        left
    }

    /// Take the machine down and check that nothing of it is left: no namespace, no
    /// link on this side, no folder.
    pub fn remove(mut self) {
        let left = self.take_down();
        assert!(left.is_empty(), "{left:?}");
        let list = ip(&["netns", "list"]);
        let names = String::from_utf8_lossy(&list.stdout);
        assert!(!names.split_whitespace().any(|n| n == self.ns), "the namespace is gone: {names}");
        // The kernel takes a namespace's devices down after it is deleted, not at once.
        let needle = format!(" {}/30 ", self.peer);
        let start = Instant::now();
        loop {
            let links = ip(&["-o", "addr", "show"]);
            let links = String::from_utf8_lossy(&links.stdout).into_owned();
            if !links.contains(&needle) {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "this side's address is gone: {links}");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(!self.root.exists());
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        if !self.removed {
            let _ = self.take_down();
        }
    }
}

impl Machine {
    /// The real `claude` put on the machine (`bin/claude`) for a user who has used it
    /// before: onboarding done, the Messages stand-in's key approved, the workdir trusted
    /// (docs/providers/claude-code/observed-2.1.198.md §2).
    pub fn install_claude(&self, claude: &Path) {
        let out = Command::new(claude).arg("--version").env("DISABLE_AUTOUPDATER", "1").output().unwrap();
        let version = String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or("unknown").to_string();
        self.install("claude", claude);
        let key = super::STANDIN_KEY;
        let seed = serde_json::json!({
            "hasCompletedOnboarding": true,
            "firstStartVersion": version,
            "theme": "dark",
            "customApiKeyResponses": {"approved": [&key[key.len() - 20..]], "rejected": []},
            "projects": {self.workdir.to_str().unwrap(): {"hasTrustDialogAccepted": true}}
        });
        self.write(&self.user_home.join(".claude.json"), &serde_json::to_vec_pretty(&seed).unwrap());
    }

    /// The "model" on this side of the machine's link (the machine reaches it as it
    /// reaches lab): it asks the three-options question and thanks for the answer. With
    /// the `env = { … }` body of lab.toml's provider table that points claude at it.
    pub fn claude_standin(&self) -> (messages_standin::Standin, String) {
        use messages_standin::{Matcher, Reply, Script, Standin};
        let script = Script::new()
            .turn(
                Matcher::Any,
                Reply::tool_use_with_text("AskUserQuestion", super::three_options(), "I need to ask you."),
            )
            .after_tool_result("Thanks, noted your choice.")
            .side_reply("Pick a database");
        let standin = Standin::start_on((self.peer, 0), script).expect("the messages stand-in on the link");
        let env: Vec<String> =
            super::claude_offline_env(standin.base_url()).iter().map(|(k, v)| format!("{k} = {v:?}")).collect();
        (standin, env.join(", "))
    }
}
