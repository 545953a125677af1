//! An OpenSSH server on a machine made by the test ([`super::machine::Machine`]):
//! Debian's sshd in the machine's network namespace, key-only, with a host key of its
//! own and a login user of its own (the machine's uid, given a passwd entry for the
//! test's life). Dropping it stops sshd and everything it started, deletes the user and
//! the keys; the machine goes after it.
//!
//! Needs root and `/usr/sbin/sshd` (`scripts/test` installs openssh-server): where
//! either is missing the test is skipped with a loud note, except with `CI=true`.

use super::machine::Machine;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct SshMachine {
    /// The login user there.
    pub user: String,
    /// Keys, config and logs, on this side (root's, 0700).
    pub dir: PathBuf,
    /// The key that logs in.
    pub client_key: PathBuf,
    /// The server's public host key.
    pub host_key_pub: PathBuf,
    /// A known-hosts file that holds the server's key.
    pub known_hosts: PathBuf,
    sshd: Option<Child>,
    /// Last: it goes after sshd and the user.
    pub m: Machine,
}

fn run(program: &str, args: &[&str]) -> std::process::Output {
    Command::new(program).args(args).stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("run {program}: {e}"))
}

fn must(out: std::process::Output, what: &str) -> std::process::Output {
    assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr).trim());
    out
}

/// The fingerprint (`SHA256:…`) of a public key file.
pub fn fingerprint(public_key: &Path) -> String {
    let out = must(run("ssh-keygen", &["-l", "-f", public_key.to_str().unwrap()]), "ssh-keygen -l");
    String::from_utf8_lossy(&out.stdout).split_whitespace().nth(1).unwrap().to_string()
}

/// A new ed25519 key pair at `path` (and `path.pub`).
pub fn keygen(path: &Path) {
    must(run("ssh-keygen", &["-q", "-t", "ed25519", "-N", "", "-f", path.to_str().unwrap()]), "ssh-keygen");
}

/// The pid of the ssh master serving `control` (`ssh -O check` says it).
pub fn master_pid(control: &Path) -> u32 {
    let out = Command::new("ssh")
        .args(["-o", &format!("ControlPath={}", control.display()), "-O", "check", "any"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    let pid = said.split("pid=").nth(1).and_then(|r| r.split(')').next()).and_then(|p| p.parse().ok());
    pid.unwrap_or_else(|| panic!("no master at {}: {said}", control.display()))
}

impl SshMachine {
    /// A machine with sshd; `None` (after a loud SKIPPED) where this process cannot
    /// make one.
    pub fn new() -> Option<SshMachine> {
        if !Path::new("/usr/sbin/sshd").exists() {
            let what = "tests over OpenSSH (a server on a machine made by the test)";
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!(
                    "/usr/sbin/sshd is missing (scripts/test installs openssh-server). With CI=true {what} must run"
                );
            }
            let _ = writeln!(
                std::io::stderr(),
                "\n************************************************************************\n\
                 SKIPPED: {what}: /usr/sbin/sshd is missing (apt-get install openssh-server)\n\
                 ************************************************************************"
            );
            return None;
        }
        let m = Machine::new()?;
        let user = format!("labs{}", m.uid);
        let dir = PathBuf::from(format!("{}-ssh", m.root.display()));
        let mut s = SshMachine {
            client_key: dir.join("client"),
            host_key_pub: dir.join("host.pub"),
            known_hosts: dir.join("known_hosts"),
            user,
            dir,
            sshd: None,
            m,
        };
        // From here on, a failure drops `s`, which takes down what was made.
        let _ = run("userdel", &["-f", &s.user]); // a crashed run's
        let (uid, home) = (s.m.uid.to_string(), s.m.user_home.to_str().unwrap().to_string());
        must(run("useradd", &["-M", "-N", "-u", &uid, "-d", &home, "-s", "/bin/sh", &s.user]), "useradd");
        must(run("usermod", &["-p", "*", &s.user]), "usermod (a locked account cannot log in)");
        let _ = std::fs::remove_dir_all(&s.dir);
        std::fs::create_dir_all(&s.dir).unwrap();
        std::fs::set_permissions(&s.dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        keygen(&s.dir.join("host"));
        keygen(&s.client_key);
        let ssh_dir = s.m.user_home.join(".ssh");
        std::fs::create_dir_all(&ssh_dir).unwrap();
        std::fs::set_permissions(&ssh_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let keys = ssh_dir.join("authorized_keys");
        std::fs::copy(s.client_key.with_extension("pub"), &keys).unwrap();
        std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o600)).unwrap();
        for p in [&ssh_dir, &keys] {
            s.m.give(p);
        }
        // sshd's privilege-separation directory (Debian's sshd refuses to start without it).
        std::fs::create_dir_all("/run/sshd").unwrap();
        let config = s.dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "ListenAddress {addr}\nPort 22\nHostKey {dir}/host\nPidFile {dir}/sshd.pid\n\
                 AuthenticationMethods publickey\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 UsePAM no\nPermitRootLogin no\nAllowUsers {user}\nStrictModes yes\n",
                addr = s.m.addr,
                dir = s.dir.display(),
                user = s.user
            ),
        )
        .unwrap();
        let log = std::fs::File::create(s.dir.join("sshd.log")).unwrap();
        let sshd = Command::new("ip")
            .args(["netns", "exec", &s.m.ns, "/usr/sbin/sshd", "-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start sshd");
        s.sshd = Some(sshd);
        let at = SocketAddr::from((s.m.addr, 22));
        let start = Instant::now();
        while TcpStream::connect_timeout(&at, Duration::from_millis(200)).is_err() {
            assert!(start.elapsed() < Duration::from_secs(10), "sshd listens: {}", s.sshd_log());
            std::thread::sleep(Duration::from_millis(20));
        }
        let host_key = std::fs::read_to_string(&s.host_key_pub).unwrap();
        std::fs::write(&s.known_hosts, format!("{} {}", s.m.addr, host_key)).unwrap();
        Some(s)
    }

    /// `user@addr`.
    pub fn destination(&self) -> String {
        format!("{}@{}", self.user, self.m.addr)
    }

    pub fn sshd_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("sshd.log")).unwrap_or_default()
    }
}

impl Drop for SshMachine {
    fn drop(&mut self) {
        if let Some(mut sshd) = self.sshd.take() {
            let _ = sshd.kill();
            let _ = sshd.wait();
        }
        // What logged in went with the namespace's processes (the machine kills them);
        // the user goes now, forced (a login of it may not have ended yet).
        self.m.kill_all();
        let _ = run("userdel", &["-f", &self.user]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
