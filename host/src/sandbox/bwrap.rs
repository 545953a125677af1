//! The bubblewrap jail: every namespace of its own (network included: only loopback,
//! where the bridge to the proxy listens), `/usr` and the parts of `/etc` programs need
//! read-only, a private `/tmp`, `/proc` and `/dev`, every home hidden, and bound at their
//! own paths only the [`Plan`]'s paths. It dies with `lab agent-exec`.

use super::{Jail, Plan};
use std::path::Path;

/// The top-level directories a system's programs live in besides `/usr`: bound
/// read-only, or made the same symlinks (a merged-`/usr` system's `/bin → usr/bin`).
const SYSTEM_ROOTS: &[&str] = &["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/// What of `/etc` a program needs (names, users, the resolver's files, TLS roots, the
/// linker's cache, the alternatives `/usr/bin` links through); the rest (shadow, ssh
/// host keys, sudoers, …) is not there.
pub const ETC: &[&str] = &[
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "environment",
    "gitconfig",
    "group",
    "host.conf",
    "hostname",
    "hosts",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "profile",
    "protocols",
    "resolv.conf",
    "services",
    "ssl",
    "terminfo",
    "timezone",
];

/// One of [`SYSTEM_ROOTS`] as this system has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Root {
    Symlink(String),
    Dir,
    Missing,
}

/// The bubblewrap jail, with the facts of this system it needs.
pub struct Bwrap {
    pub roots: Vec<(&'static str, Root)>,
}

impl Bwrap {
    pub fn of_this_system() -> Bwrap {
        let roots = SYSTEM_ROOTS
            .iter()
            .map(|r| {
                let kind = match std::fs::symlink_metadata(r) {
                    Ok(m) if m.file_type().is_symlink() => match std::fs::read_link(r) {
                        Ok(t) => Root::Symlink(t.to_string_lossy().into_owned()),
                        Err(_) => Root::Missing,
                    },
                    Ok(m) if m.is_dir() => Root::Dir,
                    _ => Root::Missing,
                };
                (*r, kind)
            })
            .collect();
        Bwrap { roots }
    }
}

fn push(out: &mut Vec<String>, args: &[&str]) {
    out.extend(args.iter().map(|s| s.to_string()));
}

impl Jail for Bwrap {
    fn argv(&self, plan: &Plan, workdir: &str, inner: &[String]) -> Result<Vec<String>, String> {
        if !Path::new(workdir).is_absolute() || !Path::new(&plan.home).is_absolute() {
            return Err("the workdir and HOME must be absolute".into());
        }
        let mut a = vec![plan.program.clone()];
        push(&mut a, &["--unshare-all", "--die-with-parent"]);
        push(&mut a, &["--ro-bind", "/usr", "/usr"]);
        for (root, kind) in &self.roots {
            match kind {
                Root::Symlink(t) => push(&mut a, &["--symlink", t, root]),
                Root::Dir => push(&mut a, &["--ro-bind", root, root]),
                Root::Missing => {}
            }
        }
        for e in ETC {
            let p = format!("/etc/{e}");
            push(&mut a, &["--ro-bind-try", &p, &p]);
        }
        push(&mut a, &["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]);
        // Every home hidden, the agent's too: only what the plan binds is in it.
        push(&mut a, &["--tmpfs", "/home", "--tmpfs", "/root", "--tmpfs", &plan.home]);
        for r in plan.readable.iter().chain([&plan.lab_exe]) {
            push(&mut a, &["--ro-bind-try", r, r]);
        }
        for w in &plan.writable {
            push(&mut a, &["--bind-try", w, w]);
        }
        // The jail's own root (where the mount points were made) read-only too.
        push(&mut a, &["--remount-ro", "/", "--chdir", workdir, "--"]);
        a.extend(inner.iter().cloned());
        Ok(a)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::sandbox::{EgressFiles, Kind};

    pub fn plan() -> Plan {
        Plan {
            kind: Kind::Bwrap,
            program: "/usr/bin/bwrap".into(),
            home: "/home/o".into(),
            writable: vec!["/home/o/wt/r-1".into(), "/home/o/.agent".into()],
            readable: vec!["/opt/agent/bin".into()],
            lab_exe: "/usr/local/bin/lab".into(),
            egress: EgressFiles { socket: "/s/egress.sock".into(), allow: "/a".into(), ledger: "/l".into() },
            image: None,
        }
    }

    fn pos(a: &[String], seq: &[&str]) -> usize {
        a.windows(seq.len())
            .position(|w| w.iter().zip(seq).all(|(x, y)| x == y))
            .unwrap_or_else(|| panic!("{seq:?} in {a:?}"))
    }

    #[test]
    fn the_jail_hides_homes_then_binds_the_plan_s_paths_and_runs_the_agent_in_its_workdir() {
        let b = Bwrap {
            roots: vec![("/bin", Root::Symlink("usr/bin".into())), ("/lib32", Root::Missing), ("/lib", Root::Dir)],
        };
        let inner = vec!["/usr/local/bin/lab".to_string(), "agent-exec".into(), "--bridge".into()];
        let a = b.argv(&plan(), "/home/o/wt/r-1", &inner).unwrap();
        assert_eq!(a[0], "/usr/bin/bwrap");
        assert!(a.contains(&"--unshare-all".to_string()) && a.contains(&"--die-with-parent".to_string()));
        pos(&a, &["--symlink", "usr/bin", "/bin"]);
        pos(&a, &["--ro-bind", "/lib", "/lib"]);
        assert!(!a.contains(&"/lib32".to_string()));
        pos(&a, &["--ro-bind-try", "/etc/passwd", "/etc/passwd"]);
        assert!(!a.iter().any(|x| x == "/etc" || x.contains("shadow")), "never all of /etc: {a:?}");
        let hidden = pos(&a, &["--tmpfs", "/home/o"]);
        let wt = pos(&a, &["--bind-try", "/home/o/wt/r-1", "/home/o/wt/r-1"]);
        let state = pos(&a, &["--bind-try", "/home/o/.agent", "/home/o/.agent"]);
        let lab = pos(&a, &["--ro-bind-try", "/usr/local/bin/lab", "/usr/local/bin/lab"]);
        assert!(hidden < wt && hidden < state && hidden < lab, "binds after the home is hidden");
        let end = pos(&a, &["--chdir", "/home/o/wt/r-1", "--"]);
        assert_eq!(&a[end + 3..], &inner[..]);
        assert!(!a.iter().any(|x| x.contains("share-net")), "its own network");
    }

    #[test]
    fn a_relative_workdir_is_refused() {
        let b = Bwrap { roots: vec![] };
        assert!(b.argv(&plan(), "wt", &[]).is_err());
    }
}
