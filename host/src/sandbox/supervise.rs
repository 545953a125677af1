//! `lab agent-exec`'s side of a jailed run. Outside the jail ([`run_jailed`]): the
//! egress proxy up on the plan's socket, then the jail, with the bridge and the agent
//! inside; it waits for the jail and passes its exit on, keeping the proxy up as long.
//! Inside ([`run_bridge`]): the bridge up on the jail's loopback, then the agent, whose
//! exit it passes on. Neither dies of the terminal's Ctrl-C or Ctrl-\ (the agent
//! decides what those do); a hang-up (the pane closed) ends them all, and the jail
//! dies with its keeper.

use super::egress::{bridge, proxy::Proxy};
use super::{jail, proxy_env, Plan, BRIDGE_PORT, NOT_IN_JAIL};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Command, ExitStatus};

extern "C" fn ignore(_: libc::c_int) {}

/// Let the terminal's interrupt and quit reach only the agent: a handler that does
/// nothing (unlike `SIG_IGN`, a handler is not inherited across exec).
fn spare_from_terminal_signals() {
    for sig in [libc::SIGINT, libc::SIGQUIT] {
        // SAFETY: installs an async-signal-safe handler that does nothing.
        unsafe {
            libc::signal(sig, ignore as *const () as libc::sighandler_t);
        }
    }
}

fn code_of(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// The argv that starts `argv` jailed as `plan` says, in `workdir`, behind the bridge.
pub fn jailed_argv(plan: &Plan, argv: &[String], workdir: &str, env: &[String]) -> Result<Vec<String>, String> {
    let jail = jail(plan.kind).ok_or("the plan names no sandbox")?;
    let mut inner = vec![plan.lab_exe.clone(), "agent-exec".into(), "--bridge".into(), plan.egress.socket.clone()];
    inner.push("--".into());
    inner.extend(argv.iter().cloned());
    jail.argv(plan, workdir, &inner, env)
}

/// Outside the jail: start the proxy and the jailed agent (`cmd` has the agent's
/// environment already), wait for it; its exit code.
pub fn run_jailed(plan: &Plan, argv: &[String], workdir: &str, env: impl FnOnce(&mut Command)) -> Result<i32, String> {
    let socket = Path::new(&plan.egress.socket);
    if std::fs::symlink_metadata(socket).is_ok_and(|m| m.file_type().is_socket()) {
        let _ = std::fs::remove_file(socket);
    }
    let listener = UnixListener::bind(socket)
        .map_err(|e| format!("cannot open the egress proxy's socket {}: {e}", socket.display()))?;
    Proxy::new(&plan.egress).serve(listener);
    super::make_state(plan).map_err(|e| format!("making the run's home: {e}"))?;
    // The jail's program with the agent's environment, whose names a container is told.
    let mut cmd = Command::new(&plan.program);
    env(&mut cmd);
    cmd.envs(proxy_env());
    for k in NOT_IN_JAIL {
        cmd.env_remove(k);
    }
    let names: Vec<String> =
        cmd.get_envs().filter(|(_, v)| v.is_some()).map(|(k, _)| k.to_string_lossy().into_owned()).collect();
    let full = jailed_argv(plan, argv, workdir, &names)?;
    cmd.args(&full[1..]);
    spare_from_terminal_signals();
    let mut child = cmd.spawn().map_err(|e| format!("cannot start the sandbox ({}): {e}", full[0]))?;
    child.wait().map(code_of).map_err(|e| e.to_string())
}

/// The seccomp program the jailed agent runs under: `ioctl` with TIOCSTI (push bytes
/// into the terminal's input, to be read by whatever reads the pane after the jail) or
/// TIOCLINUX is refused with EPERM; every other call is let through. Classic BPF over
/// `struct seccomp_data` (nr at 0, arch at 4, args from 16, 8 bytes each: the low half
/// of args[1] at 24 on a little-endian machine).
fn terminal_filter() -> Option<Vec<libc::sock_filter>> {
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    const ALLOW: u32 = 0x7fff_0000;
    const EPERM: u32 = 0x0005_0000 | 1; // SECCOMP_RET_ERRNO | EPERM
    let arch: u32 = if cfg!(target_arch = "x86_64") {
        0xC000_003E
    } else if cfg!(target_arch = "aarch64") {
        0xC000_00B7
    } else {
        return None;
    };
    let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    Some(vec![
        op(LD_W_ABS, 0, 0, 4),
        op(JEQ_K, 1, 0, arch),
        op(RET_K, 0, 0, ALLOW), // another ABI's calls: not this filter's to judge
        op(LD_W_ABS, 0, 0, 0),
        op(JEQ_K, 0, 3, libc::SYS_ioctl as u32),
        op(LD_W_ABS, 0, 0, 24),
        op(JEQ_K, 2, 0, 0x5412), // TIOCSTI
        op(JEQ_K, 1, 0, 0x541C), // TIOCLINUX
        op(RET_K, 0, 0, ALLOW),
        op(RET_K, 0, 0, EPERM),
    ])
}

/// Put this process (and so the agent it starts) under [`terminal_filter`]. The
/// agent keeps the pane as its controlling terminal (bwrap's `--new-session` would
/// take it away, and with it the resize signal a TUI redraws on), but cannot type
/// into it.
pub fn refuse_terminal_injection() -> Result<(), String> {
    let Some(filter) = terminal_filter() else {
        return Err("no terminal filter for this architecture".into());
    };
    let prog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut libc::sock_filter };
    // SAFETY: prctl with a filter that outlives the call (the kernel copies it).
    let rc = unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            -1
        } else {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                &prog as *const _ as libc::c_ulong,
            )
        }
    };
    if rc != 0 {
        return Err(format!("cannot install the terminal filter: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Inside the jail (`lab agent-exec --bridge <socket> -- <argv>`): the bridge, then the
/// agent (under [`refuse_terminal_injection`]); its exit code.
pub fn run_bridge(socket: &str, argv: &[String]) -> Result<i32, String> {
    let (program, args) = argv.split_first().ok_or("no program to run")?;
    bridge::start(socket.into(), BRIDGE_PORT)
        .map_err(|e| format!("cannot listen on 127.0.0.1:{BRIDGE_PORT} inside the sandbox: {e}"))?;
    if let Err(e) = refuse_terminal_injection() {
        if terminal_filter().is_some() {
            return Err(e);
        }
        eprintln!("lab: {e}: the agent could push keys into its terminal");
    }
    spare_from_terminal_signals();
    let mut child = Command::new(program).args(args).spawn().map_err(|e| format!("cannot start {program}: {e}"))?;
    child.wait().map(code_of).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filtered_process_cannot_type_into_its_terminal_but_can_ask_its_size() {
        let (mut pty, mut tty) = (0, 0);
        // SAFETY: openpty writes two fds.
        let rc = unsafe { libc::openpty(&mut pty, &mut tty, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
        assert_eq!(rc, 0, "a pty");
        // A filter is the calling thread's (and its children's): a thread of its own.
        let (sti, errno, winsz) = std::thread::spawn(move || {
            refuse_terminal_injection().unwrap();
            let c = b'x';
            // SAFETY: plain ioctls on fds this test opened.
            let sti = unsafe { libc::ioctl(tty, libc::TIOCSTI, &c) };
            let errno = std::io::Error::last_os_error().raw_os_error();
            let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
            let winsz = unsafe { libc::ioctl(tty, libc::TIOCGWINSZ, &mut ws) };
            (sti, errno, winsz)
        })
        .join()
        .unwrap();
        assert_eq!((sti, errno), (-1, Some(libc::EPERM)), "TIOCSTI refused");
        assert_eq!(winsz, 0, "the size is still asked");
        unsafe {
            libc::close(pty);
            libc::close(tty);
        }
    }

    #[test]
    fn the_agent_runs_behind_the_bridge_inside_the_jail() {
        let plan = super::super::bwrap::tests::plan();
        let a = jailed_argv(&plan, &["/opt/agent/bin/agent".into(), "--x".into()], "/home/o/wt/r-1", &[]).unwrap();
        let start = a.iter().position(|x| x == "--chdir").unwrap() + 3;
        assert_eq!(
            &a[start..],
            ["/usr/local/bin/lab", "agent-exec", "--bridge", "/s/egress.sock", "--", "/opt/agent/bin/agent", "--x"]
        );
    }
}
