//! SSH benchmark (not a test): what reaching a machine over OpenSSH costs, against a
//! real sshd on a machine the bench makes (a network namespace joined by a veth pair,
//! a user of its own; needs root and openssh-server). Run with
//!
//!     cargo bench -p lab --bench ssh                 # 20 rounds
//!     LAB_SSH_ROUNDS=50 cargo bench -p lab --bench ssh
//!
//! Printed as percentiles: a new master (key exchange and login); a command through a
//! live master; a stale socket (its master killed) found, removed and dialled again
//! with the command run; lab put on the machine cold (the build removed there first,
//! so uploaded: the bench's own `lab`, release under `cargo bench`) and warm (found by
//! its hash). `cargo test -p lab --bench ssh` (debug build) does 3 rounds.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/mod.rs"]
mod support;

use common::sshd::SshMachine;
use lab::machines::ssh::bootstrap::ensure_lab;
use lab::machines::ssh::{Master, SshTarget};
use std::path::Path;
use std::time::{Duration, Instant};
use support::{env_num, ms, print_pct};

const WITHIN: Duration = Duration::from_secs(30);

fn main() {
    let rounds: usize = env_num("LAB_SSH_ROUNDS", if cfg!(debug_assertions) { 3 } else { 20 });
    let Some(s) = SshMachine::new() else { return };
    let dir = tempfile::Builder::new().prefix("lab-ssh").tempdir_in("/tmp").unwrap();
    let target = SshTarget {
        destination: s.destination(),
        port: None,
        identity: Some(s.client_key.clone()),
        known_hosts: Some(s.known_hosts.clone()),
        lab: None,
    };
    let master = Master::new(target, dir.path().join("m.sock"));
    let binary = Path::new(common::LAB);
    let size_mb = std::fs::metadata(binary).unwrap().len() as f64 / (1 << 20) as f64;
    let (mut connect, mut command, mut stale, mut cold, mut warm) = (vec![], vec![], vec![], vec![], vec![]);
    let mut known = vec![];
    for _ in 0..rounds {
        master.exit();
        let t = Instant::now();
        master.up().unwrap();
        connect.push(ms(t.elapsed()));
        for _ in 0..5 {
            let t = Instant::now();
            master.run("true", b"", WITHIN).unwrap();
            command.push(ms(t.elapsed()));
        }
        let t = Instant::now();
        let lab = ensure_lab(&master, binary, env!("CARGO_PKG_VERSION"), None).unwrap();
        if lab.uploaded {
            cold.push(ms(t.elapsed()));
        } else {
            warm.push(ms(t.elapsed()));
        }
        let t = Instant::now();
        assert!(!ensure_lab(&master, binary, env!("CARGO_PKG_VERSION"), None).unwrap().uploaded);
        warm.push(ms(t.elapsed()));
        // What every link after the first costs: the build looked at, its identity known.
        let t = Instant::now();
        assert!(!ensure_lab(&master, binary, env!("CARGO_PKG_VERSION"), Some(&lab)).unwrap().uploaded);
        known.push(ms(t.elapsed()));
        // Cold again next round: the build removed there.
        master.run(&format!("rm -f '{}'", lab.path), b"", WITHIN).unwrap();
        // A stale socket: its master killed.
        let pid = common::sshd::master_pid(&dir.path().join("m.sock")) as i32;
        unsafe { libc::kill(pid, libc::SIGKILL) };
        common::wait_for(Duration::from_secs(10), "the master to go", || {
            (!Path::new(&format!("/proc/{pid}")).exists()).then_some(())
        });
        let t = Instant::now();
        master.run("true", b"", WITHIN).unwrap();
        stale.push(ms(t.elapsed()));
    }
    master.exit();
    println!(
        "reaching a machine over OpenSSH ({} build, veth between two network namespaces):",
        if cfg!(debug_assertions) { "debug" } else { "release" }
    );
    print_pct("a new master (login)", 40, connect);
    print_pct("a command through the master", 40, command);
    print_pct("a stale socket: redialled + command", 40, stale);
    print_pct(&format!("lab put there, cold ({size_mb:.0} MB uploaded)"), 40, cold);
    print_pct("lab put there, warm (found by hash)", 40, warm);
    print_pct("lab checked again (its identity known)", 40, known);
}
