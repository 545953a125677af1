//! Reaching a machine with the system OpenSSH client, against a real OpenSSH server on
//! a machine the test makes ([`common::sshd`]): one master per machine, commands
//! through it, a stale socket dialled again without a hang, and host keys checked
//! strictly — an unknown and a changed key refused with the fingerprint and how to
//! accept it, a key the machine does not take refused as such.

mod common;

use common::sshd::{fingerprint, keygen, master_pid, SshMachine};
use lab::machines::ssh::{Master, SshError, SshTarget};
use std::time::{Duration, Instant};

const WITHIN: Duration = Duration::from_secs(15);

/// Ends a master when the test does, passed or failed (a master left in the
/// background would otherwise live until its keep-alives miss the machine).
struct Ends<'a>(&'a Master);

impl Drop for Ends<'_> {
    fn drop(&mut self) {
        self.0.exit();
    }
}

fn target(s: &SshMachine) -> SshTarget {
    SshTarget {
        destination: s.destination(),
        port: None,
        identity: Some(s.client_key.clone()),
        known_hosts: Some(s.known_hosts.clone()),
    }
}

#[test]
fn one_master_per_machine_commands_through_it_and_host_keys_checked_strictly() {
    let Some(s) = SshMachine::new() else { return };
    let dir = tempfile::Builder::new().prefix("lab-ssh").tempdir_in("/tmp").unwrap();
    let offered = fingerprint(&s.host_key_pub);

    // An unknown host key: refused, with what the machine offers and how to accept it.
    let empty = dir.path().join("empty_known_hosts");
    std::fs::write(&empty, "").unwrap();
    let unknown = Master::new(SshTarget { known_hosts: Some(empty.clone()), ..target(&s) }, dir.path().join("u.sock"));
    let e = unknown.up().unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, SshError::HostKey(_)), "{e:?}");
    assert!(text.contains(&format!("ED25519 {offered}")), "{text}");
    assert!(text.contains(&format!("ssh-keyscan -p 22 {} >> {}", s.m.addr, empty.display())), "{text}");
    assert!(!dir.path().join("u.sock").exists());

    // Known: one master, and commands through it.
    let control = dir.path().join("m.sock");
    let master = Master::new(target(&s), control.clone());
    let _ends = Ends(&master);
    let t = Instant::now();
    master.up().unwrap_or_else(|e| panic!("{e}\n{}", s.sshd_log()));
    eprintln!("master up in {} ms", t.elapsed().as_millis());
    let out = master.run("uname -s; id -un", b"", WITHIN).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("Linux\n{}\n", s.user));
    let t = Instant::now();
    let out = master.run("cat", b"through the master", WITHIN).unwrap();
    eprintln!("a command through the master in {} ms", t.elapsed().as_millis());
    assert_eq!(out.stdout, b"through the master");
    assert_eq!(master.run("exit 42", b"", WITHIN).unwrap().status.code(), Some(42));
    let pid = master_pid(&control);

    // Its master killed (the socket stays behind): dialled again, no hang.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    common::wait_for(Duration::from_secs(10), "the master to go", || {
        (!std::path::Path::new(&format!("/proc/{pid}")).exists()).then_some(())
    });
    assert!(control.exists(), "a stale socket");
    assert!(!master.alive());
    let t = Instant::now();
    assert_eq!(master.run("echo again", b"", WITHIN).unwrap().stdout, b"again\n");
    eprintln!("a stale socket replaced and the command run in {} ms", t.elapsed().as_millis());
    assert_ne!(master_pid(&control), pid, "a new master");
    master.exit();
    assert!(!control.exists());

    // A changed host key: refused, with the key it now offers.
    let other = dir.path().join("other");
    keygen(&other);
    let changed_file = dir.path().join("changed_known_hosts");
    let other_pub = std::fs::read_to_string(other.with_extension("pub")).unwrap();
    std::fs::write(&changed_file, format!("{} {other_pub}", s.m.addr)).unwrap();
    let changed = Master::new(SshTarget { known_hosts: Some(changed_file), ..target(&s) }, dir.path().join("c.sock"));
    let e = changed.up().unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, SshError::HostKey(_)) && text.contains("has CHANGED") && text.contains(&offered), "{text}");

    // A key the machine does not take.
    let denied = Master::new(SshTarget { identity: Some(other), ..target(&s) }, dir.path().join("d.sock"));
    let e = denied.up().unwrap_err();
    assert!(matches!(e, SshError::Denied(_)) && e.to_string().contains("Permission denied"), "{e:?}");
}

/// lab put on a machine over ssh: uploaded once (checked by its hash there), found the
/// next time, a damaged copy replaced, a binary that is not the version it should be
/// refused.
#[test]
fn lab_is_put_on_a_machine_once_and_checked_by_its_hash() {
    use lab::machines::ssh::bootstrap::{build_name, ensure_lab};
    use sha2::Digest;
    let Some(s) = SshMachine::new() else { return };
    let dir = tempfile::Builder::new().prefix("lab-ssh").tempdir_in("/tmp").unwrap();
    let master = Master::new(target(&s), dir.path().join("m.sock"));
    let _ends = Ends(&master);
    master.up().unwrap_or_else(|e| panic!("{e}\n{}", s.sshd_log()));
    let version = env!("CARGO_PKG_VERSION");
    let binary = std::path::Path::new(common::LAB);
    let bytes = std::fs::read(binary).unwrap();
    let sha: String = sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    let there = s.m.user_home.join(".cache/lab/bin").join(build_name(version, &sha));

    let t = Instant::now();
    let first = ensure_lab(&master, binary, version).unwrap();
    eprintln!("bootstrap, cold ({} MB uploaded): {} ms", bytes.len() >> 20, t.elapsed().as_millis());
    assert!(first.uploaded && first.system.starts_with("Linux"), "{first:?}");
    assert_eq!(std::path::Path::new(&first.path), there);
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(&there).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o777), (s.m.uid, 0o700), "the machine user's own, private");
    assert_eq!(std::fs::read(&there).unwrap(), bytes);

    let t = Instant::now();
    let again = ensure_lab(&master, binary, version).unwrap();
    eprintln!("bootstrap, warm: {} ms", t.elapsed().as_millis());
    assert!(!again.uploaded, "{again:?}");

    // A damaged copy (its hash is not the build's) is replaced.
    std::fs::write(&there, b"#!/bin/sh\necho lab 6.6.6\n").unwrap();
    assert!(ensure_lab(&master, binary, version).unwrap().uploaded);
    assert_eq!(std::fs::read(&there).unwrap(), bytes);

    // A binary that does not say the version lab expects is refused.
    let e = ensure_lab(&master, binary, "9.9.9").unwrap_err().to_string();
    assert!(e.contains(&format!("says \"lab {version}\", not \"lab 9.9.9\"")), "{e}");
    master.exit();
}

/// `lab hosts add NAME --ssh …`: the machine reached first (its host key checked: an
/// unknown one refuses the add, with what it offers), lab put there, then recorded and
/// listed with how it is reached; removed like any host.
#[test]
fn lab_hosts_add_over_ssh_reaches_the_machine_then_records_it() {
    let Some(s) = SshMachine::new() else { return };
    let home = tempfile::Builder::new().prefix("lab-h").tempdir_in("/tmp").unwrap();
    let lab = |args: &[&str]| {
        let out =
            std::process::Command::new(common::LAB).args(["hosts", "--home"]).arg(home.path()).args(args).output();
        let out = out.unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (key, known) = (s.client_key.to_str().unwrap(), s.known_hosts.to_str().unwrap());
    let empty = home.path().join("empty_known_hosts");
    std::fs::write(&empty, "").unwrap();
    let dest = s.destination();

    let (ok, _, err) =
        lab(&["add", "far", "--ssh", &dest, "--identity", key, "--known-hosts", empty.to_str().unwrap()]);
    assert!(!ok, "{err}");
    assert!(err.contains(&fingerprint(&s.host_key_pub)) && err.contains("host `far` was not added"), "{err}");
    assert!(!lab(&["list"]).1.contains("far"));

    let (ok, out, err) = lab(&["add", "far", "--ssh", &dest, "--identity", key, "--known-hosts", known]);
    assert!(ok, "{err}");
    assert!(out.is_empty(), "no credential for a host reached over ssh: {out}");
    assert!(err.contains(&format!("host `far` added (ssh {dest}): Linux")) && err.contains("uploaded at"), "{err}");
    let (_, list, _) = lab(&["list"]);
    let row = list.lines().find(|l| l.starts_with("far ")).unwrap_or_else(|| panic!("{list}"));
    assert!(row.ends_with(&format!("ssh {dest}")), "{row}");
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(home.path().join("hosts.json")).unwrap()).unwrap();
    assert_eq!(file[0]["ssh"]["destination"], dest.as_str(), "{file}");
    assert_eq!(file[0]["credential_sha256"], "", "{file}");
    assert!(!home.path().join("runtime/ssh-far.sock").exists(), "no master left behind");

    let (ok, _, err) = lab(&["add", "far", "--ssh", &dest]);
    assert!(!ok && err.contains("exists"), "{err}");
    assert!(lab(&["remove", "far"]).0);
    assert!(!lab(&["list"]).1.contains("far"));
}
