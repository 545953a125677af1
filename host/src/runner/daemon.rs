//! The runner on a machine lab reaches over ssh, as two commands (Zed's remote server
//! does the same):
//!
//! - `lab runner daemon --home H --build B`: the runner itself, in a session of its
//!   own (it outlives the ssh link that started it; so do the tmux runs it serves). It
//!   listens on `H/runtime/runner.sock` (the folder 0700; a peer of another uid is
//!   refused too) and serves one link at a time: a new one replaces the last (after a
//!   cut, lab serve's new link is the live one; the old one may not know yet that it is
//!   dead). Each link is the runner protocol as lines ([`crate::machines::hosts::lines`]),
//!   after a [`Greeting`].
//! - `lab runner proxy --home H --build B`: what lab serve runs over ssh. It reaches the
//!   daemon (starting it through the user's login shell if none listens, so agents get
//!   the PATH a login gives), checks it is this build ([`meet`]): an older one (or
//!   another build of this version) is stopped and this one started; a newer one is
//!   refused with both versions named. Then it copies bytes both ways between its
//!   stdio and the socket until either side ends.
//!
//! No credential: the ssh login is the proof both ways (lab serve checked the
//! machine's host key, the machine checked lab's key), and the socket is the user's.

use super::session::Session;
use crate::machines::hosts::lines::{read_frame, write_frame};
use crate::machines::hosts::protocol::{self, VERSION};
use crate::machines::tmux::Tmux;
use crate::store::paths::Home;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};

/// How long a daemon the proxy started has to listen.
pub const START_WITHIN: Duration = Duration::from_secs(10);
/// How long a daemon asked to stop (SIGTERM) has before it is killed.
pub const STOP_WITHIN: Duration = Duration::from_secs(5);
/// How long the daemon's greeting may take.
const GREET_WITHIN: Duration = Duration::from_secs(5);

/// The first line a daemon writes on every link: what it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Greeting {
    /// Its lab version.
    pub lab_runner: String,
    /// Its build (the start of its binary's SHA-256, as lab serve named it).
    pub build: String,
    pub pid: u32,
}

/// What a proxy does with the daemon it found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Meet {
    /// It is this build: link to it.
    Use,
    /// It is older, or another build of this version: stop it, start this one.
    Replace,
    /// It is newer: the lab serve that sent this proxy is older than the runner there.
    Refuse(String),
}

/// The numbers of a version (`0.12.3-dev` → [0, 12, 3]).
fn numbers(v: &str) -> Vec<u64> {
    v.split(['-', '+']).next().unwrap_or_default().split('.').map(|n| n.parse().unwrap_or(0)).collect()
}

/// What a proxy of `version`/`build` does with the daemon that greeted it.
pub fn meet(version: &str, build: &str, daemon: &Greeting) -> Meet {
    if daemon.lab_runner == version && daemon.build == build {
        return Meet::Use;
    }
    if numbers(&daemon.lab_runner) > numbers(version) {
        return Meet::Refuse(format!(
            "the runner on this machine is lab {} (build {}), newer than this lab serve's {version} (build {build}): \
             run lab {} or newer on lab serve's machine too",
            daemon.lab_runner, daemon.build, daemon.lab_runner
        ));
    }
    Meet::Replace
}

/// `lab runner daemon|proxy …`: its exit status.
pub fn main(args: &[String]) -> i32 {
    use clap::Parser;
    #[derive(Parser)]
    #[command(name = "lab runner", about = "The runner on a machine lab serve reaches over ssh")]
    enum Side {
        /// Serve lab serve's links on this machine's socket (started by `proxy`).
        Daemon {
            #[arg(long)]
            home: PathBuf,
            #[arg(long)]
            build: String,
        },
        /// Link this process's stdio to the daemon (started if need be).
        Proxy {
            #[arg(long)]
            home: PathBuf,
            #[arg(long)]
            build: String,
        },
    }
    let side = match Side::try_parse_from(std::iter::once("lab runner".to_string()).chain(args.iter().cloned())) {
        Ok(s) => s,
        Err(e) => {
            let _ = e.print();
            return 2;
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("LAB_LOG").unwrap_or_else(|_| "info".into());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(false).with_writer(std::io::stderr).try_init();
    let rt = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lab runner: {e}");
            return 1;
        }
    };
    let r = match side {
        Side::Daemon { home, build } => rt.block_on(daemon(home, build)),
        Side::Proxy { home, build } => rt.block_on(proxy(home, build)),
    };
    // Not waiting for a read of stdin that may never end (it is on a thread of its own).
    rt.shutdown_background();
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("lab runner: {e}");
            3
        }
    }
}

/// The daemon: serve links on the home's socket until SIGTERM or SIGINT.
pub async fn daemon(home: PathBuf, build: String) -> Result<(), String> {
    if !home.is_absolute() {
        return Err(format!("--home {} is not an absolute path", home.display()));
    }
    let home = Home::new(home);
    for d in [home.root.clone(), home.runtime_dir(), home.logs_dir()] {
        crate::store::fsutil::private_dir(&d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let sock = home.runner_socket();
    if UnixStream::connect(&sock).await.is_ok() {
        return Err(format!("a runner daemon listens on {} already", sock.display()));
    }
    let _ = std::fs::remove_file(&sock);
    let listener = UnixListener::bind(&sock).map_err(|e| format!("listening on {}: {e}", sock.display()))?;
    crate::store::fsutil::set_mode(&sock, 0o600).map_err(|e| format!("{}: {e}", sock.display()))?;
    let greeting =
        protocol::encode(&Greeting { lab_runner: VERSION.to_string(), build: build.clone(), pid: std::process::id() });
    tracing::info!(socket = %sock.display(), %build, pid = std::process::id(), "runner daemon listening");
    let tmux = Tmux::new(home.tmux_socket());
    let me = unsafe { libc::getuid() };
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("SIGTERM handler: {e}"))?;
    let current: Current = Default::default();
    let mut next_id = 0u64;
    loop {
        let stream = tokio::select! {
            a = listener.accept() => match a {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "accept");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        };
        match stream.peer_cred() {
            Ok(c) if c.uid() == me => {}
            other => {
                tracing::warn!(peer = ?other.map(|c| c.uid()), "a peer of another user; refused");
                continue;
            }
        }
        next_id += 1;
        let (id, current_) = (next_id, current.clone());
        let (home, tmux, greeting) = (home.clone(), tmux.clone(), greeting.clone());
        tokio::spawn(async move { link(stream, home, tmux, greeting, id, current_).await });
    }
    if let Some((_, old)) = current.lock().unwrap().take() {
        old.notify_one();
    }
    let _ = std::fs::remove_file(&sock);
    tracing::info!("runner daemon stopped");
    Ok(())
}

/// The live link (the last welcomed): its number, and how to end it.
type Current = std::sync::Arc<std::sync::Mutex<Option<(u64, std::sync::Arc<tokio::sync::Notify>)>>>;

/// One link, to its end. Once welcomed it is the live one: the one before is ended.
async fn link(stream: UnixStream, home: Home, tmux: Tmux, greeting: String, id: u64, current: Current) {
    let (r, mut w) = stream.into_split();
    let mut r = BufReader::new(r);
    let hello = protocol::encode(&super::hello(String::new(), &home.root, &tmux));
    if write_frame(&mut w, &greeting).await.is_err() || write_frame(&mut w, &hello).await.is_err() {
        return;
    }
    let (out, mut out_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut session = Session::new(tmux, home, out);
    let mut buf = Vec::new();
    let mut heard = Instant::now();
    let replaced = std::sync::Arc::new(tokio::sync::Notify::new());
    let why = loop {
        tokio::select! {
            _ = replaced.notified() => break "a newer link replaced it".to_string(),
            line = read_frame(&mut r, &mut buf) => match line {
                Ok(Some(text)) => {
                    heard = Instant::now();
                    let welcomed = session.welcomed();
                    if let Err(why) = session.on_frame(&text) {
                        break why;
                    }
                    if !welcomed && session.welcomed() {
                        if let Some((_, old)) = current.lock().unwrap().replace((id, replaced.clone())) {
                            tracing::info!("a new link replaces the last");
                            old.notify_one();
                        }
                    }
                }
                Ok(None) => break "lab serve's side closed the link".to_string(),
                Err(e) => break format!("the link broke: {e}"),
            },
            Some(up) = out_rx.recv() => {
                let Some(frame) = super::fit_frame(up) else { continue };
                if let Err(e) = write_frame(&mut w, &frame).await {
                    break format!("the link broke: {e}");
                }
            }
            _ = tokio::time::sleep_until((heard + super::SILENT_LIMIT).into()) => {
                break format!("lab serve was silent for {} s", super::SILENT_LIMIT.as_secs());
            }
        }
    };
    let mut live = current.lock().unwrap();
    if live.as_ref().is_some_and(|(n, _)| *n == id) {
        *live = None;
    }
    drop(live);
    tracing::info!(%why, "link ended");
}

/// The proxy: link stdio to the daemon of this build, to the end of either.
pub async fn proxy(home: PathBuf, build: String) -> Result<(), String> {
    if !home.is_absolute() {
        return Err(format!("--home {} is not an absolute path", home.display()));
    }
    let home = Home::new(home);
    let (mut from_daemon, mut to_daemon) = reach(&home, &build).await?;
    // Each read written on at once and flushed: a hook report is not held back for the next.
    let up = pump(&mut from_daemon, tokio::io::stdout());
    let down = async {
        pump(tokio::io::stdin(), &mut to_daemon).await;
        let _ = to_daemon.shutdown().await;
    };
    tokio::select! {
        _ = up => {}
        _ = down => {}
    }
    Ok(())
}

/// Copy `from` to `to` until either ends, flushing after every read.
async fn pump(mut from: impl AsyncRead + Unpin, mut to: impl AsyncWrite + Unpin) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).await.is_err() || to.flush().await.is_err() {
                    return;
                }
            }
        }
    }
}

/// A link to the daemon of this build: the one there, or one started (in place of an
/// older one).
async fn reach(home: &Home, build: &str) -> Result<(BufReader<OwnedReadHalf>, OwnedWriteHalf), String> {
    let sock = home.runner_socket();
    for _ in 0..2 {
        let stream = match UnixStream::connect(&sock).await {
            Ok(s) => s,
            Err(_) => {
                start(home, build)?;
                wait_listening(home, &sock).await?
            }
        };
        let (r, w) = stream.into_split();
        let mut r = BufReader::new(r);
        let mut buf = Vec::new();
        let greeting = match tokio::time::timeout(GREET_WITHIN, read_frame(&mut r, &mut buf)).await {
            Ok(Ok(Some(line))) => protocol::decode::<Greeting>(&line).map_err(|e| format!("the runner daemon: {e}"))?,
            Ok(Ok(None)) => return Err("the runner daemon closed the link before its greeting".into()),
            Ok(Err(e)) => return Err(format!("the runner daemon: {e}")),
            Err(_) => return Err(format!("the runner daemon did not greet within {} s", GREET_WITHIN.as_secs())),
        };
        match meet(VERSION, build, &greeting) {
            Meet::Use => return Ok((r, w)),
            Meet::Refuse(why) => return Err(why),
            Meet::Replace => {
                eprintln!(
                    "lab runner: replacing the runner daemon of lab {} (build {}) with {VERSION} (build {build})",
                    greeting.lab_runner, greeting.build
                );
                drop((r, w));
                stop(greeting.pid, &sock).await?;
            }
        }
    }
    Err("the runner daemon started is not this build".into())
}

/// Start the daemon in a session of its own, through the user's login shell.
fn start(home: &Home, build: &str) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    for d in [home.root.clone(), home.runtime_dir(), home.logs_dir()] {
        crate::store::fsutil::private_dir(&d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let exe = super::own_exe().map_err(|e| format!("this program's path: {e}"))?;
    let log_path = home.runner_log();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&log_path)
        .map_err(|e| format!("{}: {e}", log_path.display()))?;
    let err = log.try_clone().map_err(|e| e.to_string())?;
    let shell = std::env::var("SHELL").ok().filter(|s| Path::new(s).is_absolute()).unwrap_or_else(|| "/bin/sh".into());
    let q = |p: &Path| crate::util::shell::quote(&p.to_string_lossy());
    let line =
        format!("exec {} runner daemon --home {} --build {}", q(&exe), q(&home.root), crate::util::shell::quote(build));
    let mut c = std::process::Command::new(&shell);
    c.args(["-l", "-c", &line]).stdin(std::process::Stdio::null()).stdout(log).stderr(err).current_dir(&home.root);
    // SAFETY: setsid is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let child = c.spawn().map_err(|e| format!("starting the runner daemon ({shell}): {e}"))?;
    // Reaped if it ends while this proxy lives; else init's.
    std::thread::spawn(move || {
        let mut child = child;
        let _ = child.wait();
    });
    Ok(())
}

use std::os::unix::fs::OpenOptionsExt;

async fn wait_listening(home: &Home, sock: &Path) -> Result<UnixStream, String> {
    let start = Instant::now();
    loop {
        if let Ok(s) = UnixStream::connect(sock).await {
            return Ok(s);
        }
        if start.elapsed() > START_WITHIN {
            let log = std::fs::read_to_string(home.runner_log()).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            return Err(format!(
                "the runner daemon did not listen within {} s ({}): {}",
                START_WITHIN.as_secs(),
                home.runner_log().display(),
                tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
            ));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Stop the daemon `pid` that listens on `sock`: SIGTERM, then SIGKILL after
/// [`STOP_WITHIN`]; its tmux runs go on (tmux is a server of its own).
async fn stop(pid: u32, sock: &Path) -> Result<(), String> {
    let Ok(pid) = i32::try_from(pid) else { return Err(format!("the daemon's pid {pid}")) };
    if pid <= 1 {
        return Err(format!("the daemon said its pid is {pid}"));
    }
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let start = Instant::now();
    loop {
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        if !alive {
            let _ = std::fs::remove_file(sock);
            return Ok(());
        }
        if start.elapsed() > STOP_WITHIN {
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = std::fs::remove_file(sock);
            tokio::time::sleep(Duration::from_millis(50)).await;
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_uses_its_build_replaces_older_and_refuses_newer() {
        let g = |v: &str, b: &str| Greeting { lab_runner: v.into(), build: b.into(), pid: 7 };
        assert_eq!(meet("0.5.0", "aaaa", &g("0.5.0", "aaaa")), Meet::Use);
        assert_eq!(meet("0.5.0", "aaaa", &g("0.5.0", "bbbb")), Meet::Replace, "another build of this version");
        assert_eq!(meet("0.5.0", "aaaa", &g("0.4.9", "bbbb")), Meet::Replace);
        assert_eq!(meet("0.10.0", "aaaa", &g("0.9.3", "bbbb")), Meet::Replace, "numbers, not text");
        let Meet::Refuse(why) = meet("0.5.0", "aaaa", &g("0.6.0", "cccc")) else { panic!("a newer daemon") };
        assert!(why.contains("lab 0.6.0") && why.contains("0.5.0"), "{why}");
        let greeting = protocol::encode(&g("0.5.0", "aaaa"));
        assert_eq!(greeting, r#"{"lab_runner":"0.5.0","build":"aaaa","pid":7}"#);
        assert!(protocol::decode::<Greeting>(r#"{"lab_runner":"0.5.0","build":"a","pid":1,"x":2}"#).is_err());
    }
}
