//! `lab-demo [--state-dir DIR] [--lab PATH] [--claude PATH] [lab serve options]`
//!
//! Sets up the demo's state (see the library docs), starts the Messages API stand-in
//! with its built-in demo conversation on 127.0.0.1 (in this process), writes lab.toml,
//! and runs `lab serve --demo` as a child until it exits. SIGINT/SIGTERM/SIGHUP are
//! passed on to lab; if this process dies, the kernel sends lab SIGTERM
//! (`PR_SET_PDEATHSIG`). When lab has exited, the demo's tmux server (its runs' agents
//! cannot go on without the stand-in) and the stand-in go with this process.
//!
//! Prints `lab-demo: stand-in on http://127.0.0.1:PORT` first; lab then prints
//! `lab: serving on http://…` and its one-time login link.

use lab_demo::{agent_env, claude_config, lab_toml, serve_env, Args, LabPaths, Layout, DEMO_KEY, USAGE};
use messages_standin::{Script, Standin};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// The last SIGINT/SIGTERM/SIGHUP received (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
}

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("lab-demo: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if args.serve_args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("lab-demo: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(args: Args) -> Result<ExitCode, String> {
    let root = match args.state_dir {
        Some(d) => d,
        None => {
            Layout::default_root(std::env::var("XDG_STATE_HOME").ok().as_deref(), std::env::var("HOME").ok().as_deref())
                .ok_or("neither XDG_STATE_HOME nor HOME is an absolute path: give --state-dir")?
        }
    };
    let root = std::path::absolute(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    let layout = Layout::new(root);
    let claude = match args.claude {
        Some(c) => c,
        None => find_on_path("claude")
            .ok_or("no `claude` on PATH: give --claude (scripts/install-claude.sh installs the pinned one)")?,
    };
    if !is_executable(&claude) {
        return Err(format!("{} is not an executable file", claude.display()));
    }
    let lab = match args.lab {
        Some(l) => l,
        None => {
            sibling_lab().or_else(|| find_on_path("lab")).ok_or("no `lab` next to lab-demo or on PATH: give --lab")?
        }
    };

    for d in [&layout.lab_home, &layout.agent_home, &layout.workdir] {
        std::fs::create_dir_all(d).map_err(|e| format!("creating {}: {e}", d.display()))?;
    }
    let paths = lab_paths(&lab, &layout.lab_home)?;
    let existing = std::fs::read(layout.claude_json()).ok().and_then(|b| serde_json::from_slice(&b).ok());
    let config = claude_config(existing, DEMO_KEY, &layout.workdir);
    write(&layout.claude_json(), &serde_json::to_vec_pretty(&config).expect("JSON"))?;

    // Runs left by an earlier demo that did not get to clean up (SIGKILL) talk to a
    // stand-in that is gone: end them before lab picks them up.
    kill_tmux_server(&paths);
    let standin = Standin::start(Script::demo()).map_err(|e| format!("cannot start the Messages API stand-in: {e}"))?;
    let env = agent_env(&standin.base_url(), &layout.agent_home);
    write(&paths.config, lab_toml(&claude, &env).as_bytes())?;

    println!("lab-demo: stand-in on {}", standin.base_url());
    println!(
        "lab-demo: demo — the agent ({}) talks to a scripted stand-in on this machine; nothing leaves it.",
        claude.display()
    );
    println!(
        "lab-demo: open the login link below, start a run in {} (permission mode: plan), type anything.",
        layout.workdir.display()
    );
    let _ = std::io::stdout().flush();

    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
    let parent = std::process::id() as libc::pid_t;
    let mut cmd = Command::new(&lab);
    cmd.arg("serve")
        .arg("--home")
        .arg(&layout.lab_home)
        .arg("--demo")
        .arg("--demo-workdir")
        .arg(&layout.workdir)
        .args(&args.serve_args)
        .env_clear()
        .envs(serve_env(std::env::vars(), &layout.agent_home))
        .stdin(Stdio::null());
    // SAFETY: prctl and getppid are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 || libc::getppid() != parent {
                return Err(std::io::Error::other("lab-demo exited before lab serve started"));
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| format!("cannot start {}: {e}", lab.display()))?;

    let mut asked_to_stop: Option<Instant> = None;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => return Err(format!("waiting for lab serve: {e}")),
        }
        let sig = SIGNAL.load(Ordering::SeqCst);
        match asked_to_stop {
            None if sig != 0 => {
                // SAFETY: plain kill(2) of our own child.
                unsafe {
                    libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
                }
                asked_to_stop = Some(Instant::now());
            }
            Some(at) if at.elapsed() > Duration::from_secs(15) => {
                let _ = child.kill();
            }
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(100));
    };

    // The demo's runs cannot go on without the stand-in: end them with it.
    kill_tmux_server(&paths);
    standin.shutdown();
    eprintln!("lab-demo: stopped (lab serve {status}); the stand-in is gone too");
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(c.clamp(1, 255) as u8),
        None if asked_to_stop.is_some() => ExitCode::SUCCESS,
        None => ExitCode::from(1),
    })
}

/// Where lab keeps its state under `home`, as `lab paths` tells.
fn lab_paths(lab: &Path, home: &Path) -> Result<LabPaths, String> {
    let out = Command::new(lab)
        .arg("paths")
        .arg("--home")
        .arg(home)
        .arg("--json")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {} paths: {e}", lab.display()))?;
    if !out.status.success() {
        return Err(format!("{} paths failed: {}", lab.display(), String::from_utf8_lossy(&out.stderr).trim()));
    }
    LabPaths::parse(&String::from_utf8_lossy(&out.stdout))
}

/// Ends the demo's tmux server (its runs), if one is running.
fn kill_tmux_server(paths: &LabPaths) {
    let _ = Command::new("tmux")
        .arg("-S")
        .arg(&paths.tmux_socket)
        .arg("kill-server")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("writing {}: {e}", path.display()))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.is_file() && p.metadata().is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| is_executable(p))
}

/// `lab` in the same folder as this binary (both are built into `target/<profile>/`).
fn sibling_lab() -> Option<PathBuf> {
    let lab = std::env::current_exe().ok()?.parent()?.join("lab");
    is_executable(&lab).then_some(lab)
}
