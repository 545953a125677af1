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

/// The jail's mounts below its system, in the order bwrap makes them: by depth (a
/// parent before what is inside it), and at one depth: hidden homes, read-only binds,
/// read-write binds, masks.
fn mounts(plan: &Plan) -> Vec<(usize, u8, Vec<String>)> {
    let depth = |p: &str| Path::new(p).components().count();
    let mut m: Vec<(usize, u8, Vec<String>)> = vec![];
    let mut add = |rank: u8, op: &str, p: &str| {
        let args =
            if op == "--tmpfs" { vec![op.to_string(), p.to_string()] } else { vec![op.into(), p.into(), p.into()] };
        m.push((depth(p), rank, args));
    };
    for h in ["/home", "/root", plan.home.as_str()].into_iter().chain(plan.hidden.iter().map(String::as_str)) {
        add(0, "--tmpfs", h);
    }
    for r in plan.readable.iter().chain([&plan.lab_exe]) {
        add(1, "--ro-bind-try", r);
    }
    for w in &plan.writable {
        add(2, "--bind-try", w);
    }
    for k in &plan.masked {
        add(3, "--tmpfs", k);
    }
    for b in &plan.binds {
        let op = if b.write { "--bind-try" } else { "--ro-bind-try" };
        m.push((depth(&b.at), if b.write { 2 } else { 1 }, vec![op.into(), b.from.clone(), b.at.clone()]));
    }
    m.sort_by_key(|(d, r, _)| (*d, *r));
    m
}

fn push(out: &mut Vec<String>, args: &[&str]) {
    out.extend(args.iter().map(|s| s.to_string()));
}

impl Jail for Bwrap {
    fn argv(&self, plan: &Plan, workdir: &str, inner: &[String], _env: &[String]) -> Result<Vec<String>, String> {
        if !Path::new(workdir).is_absolute() || !Path::new(&plan.home).is_absolute() {
            return Err("the workdir and HOME must be absolute".into());
        }
        let mut a = vec![plan.program.clone()];
        // Not `--new-session`: the agent keeps the pane as its terminal (it is told of
        // a resize); pushing keys into it (TIOCSTI) is refused by the bridge's filter.
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
        // Mounted parents first, so a path inside another is mounted over it: every
        // home hidden (the agent's too), then what the plan binds, lab's own paths
        // inside those masked, and what of them is the run's bound again.
        for (_, _, args) in mounts(plan) {
            a.extend(args);
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
            ..Plan::default()
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
        let a = b.argv(&plan(), "/home/o/wt/r-1", &inner, &[]).unwrap();
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
    fn lab_s_home_inside_the_workdir_is_masked_and_the_run_s_own_files_come_back_over_it() {
        let b = Bwrap { roots: vec![] };
        let mut p = plan();
        p.writable = vec!["/home/o/.local/state/lab/runtime/r-1.box".into(), "/home/o".into()];
        p.masked = vec!["/home/o/.local/state/lab".into()];
        let a = b.argv(&p, "/home/o", &[], &[]).unwrap();
        let hidden = pos(&a, &["--tmpfs", "/home/o"]);
        let workdir = pos(&a, &["--bind-try", "/home/o", "/home/o"]);
        let mask = pos(&a, &["--tmpfs", "/home/o/.local/state/lab"]);
        let own = pos(
            &a,
            &["--bind-try", "/home/o/.local/state/lab/runtime/r-1.box", "/home/o/.local/state/lab/runtime/r-1.box"],
        );
        assert!(hidden < workdir && workdir < mask && mask < own, "{a:?}");
    }

    #[test]
    fn a_relative_workdir_is_refused() {
        let b = Bwrap { roots: vec![] };
        assert!(b.argv(&plan(), "wt", &[], &[]).is_err());
    }
}
