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
pub fn jailed_argv(plan: &Plan, argv: &[String], workdir: &str) -> Result<Vec<String>, String> {
    let jail = jail(plan.kind).ok_or("the plan names no sandbox")?;
    let mut inner = vec![plan.lab_exe.clone(), "agent-exec".into(), "--bridge".into(), plan.egress.socket.clone()];
    inner.push("--".into());
    inner.extend(argv.iter().cloned());
    jail.argv(plan, workdir, &inner)
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
    let full = jailed_argv(plan, argv, workdir)?;
    let mut cmd = Command::new(&full[0]);
    cmd.args(&full[1..]);
    env(&mut cmd);
    cmd.envs(proxy_env());
    for k in NOT_IN_JAIL {
        cmd.env_remove(k);
    }
    spare_from_terminal_signals();
    let mut child = cmd.spawn().map_err(|e| format!("cannot start the sandbox ({}): {e}", full[0]))?;
    child.wait().map(code_of).map_err(|e| e.to_string())
}

/// Inside the jail (`lab agent-exec --bridge <socket> -- <argv>`): the bridge, then the
/// agent; its exit code.
pub fn run_bridge(socket: &str, argv: &[String]) -> Result<i32, String> {
    let (program, args) = argv.split_first().ok_or("no program to run")?;
    bridge::start(socket.into(), BRIDGE_PORT)
        .map_err(|e| format!("cannot listen on 127.0.0.1:{BRIDGE_PORT} inside the sandbox: {e}"))?;
    spare_from_terminal_signals();
    let mut child = Command::new(program).args(args).spawn().map_err(|e| format!("cannot start {program}: {e}"))?;
    child.wait().map(code_of).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_runs_behind_the_bridge_inside_the_jail() {
        let plan = super::super::bwrap::tests::plan();
        let a = jailed_argv(&plan, &["/opt/agent/bin/agent".into(), "--x".into()], "/home/o/wt/r-1").unwrap();
        let start = a.iter().position(|x| x == "--chdir").unwrap() + 3;
        assert_eq!(
            &a[start..],
            ["/usr/local/bin/lab", "agent-exec", "--bridge", "/s/egress.sock", "--", "/opt/agent/bin/agent", "--x"]
        );
    }
}
