//! The `lab` command line: the one dispatcher for every subcommand.
//!
//! `lab hook …` (run by the agent's hooks, on the dialog path) and `lab agent-exec …`
//! (which starts the agent in its pane) are dispatched before the argument parser: no
//! clap, no runtime, no components, so they stay tiny and fast.
//!
//! Nothing else in lab calls into `cli`. The subcommands with more to them than a call
//! have their file here: [`check`] (`lab providers check`), [`scaffold`] (`lab
//! new-provider`), [`pair`], [`push_key`], and [`local_client`] for talking to the
//! running serve.

pub mod check;
pub mod local_client;
pub mod pair;
pub mod push_key;
pub mod scaffold;

use crate::agents::components::{ComponentHost, Limits, ProviderSet};
use crate::store::paths::{resolve_home, Home};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "lab",
    version,
    about = "Run coding agents in tmux and answer their dialogs from a web UI",
    after_help = "Also: `lab hook spool-write|spool-clear|marker-write <file> …` is what the agents' hooks \
                  run (it reads the hook payload on stdin and always exits 0), and `lab agent-exec` starts an \
                  agent inside its tmux pane. Neither is meant to be typed by hand."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API and the web UI.
    Serve {
        /// Address to listen on (loopback by default).
        #[arg(long, default_value = "127.0.0.1:7777")]
        addr: String,
        /// lab's state directory (default: $LAB_HOME, $XDG_STATE_HOME/lab, ~/.local/state/lab).
        #[arg(long)]
        home: Option<PathBuf>,
        /// Also answer to this Host (`name` or `name:port`), e.g. behind a reverse proxy. Repeatable.
        #[arg(long = "allowed-host", value_name = "HOST")]
        allowed_hosts: Vec<String>,
        /// Also accept requests from this origin (`https://name[:port]`). Repeatable.
        #[arg(long = "allowed-origin", value_name = "ORIGIN")]
        allowed_origins: Vec<String>,
        /// Require lab's token (the default; kept for scripts that pass it).
        #[arg(long, conflicts_with = "no_token")]
        require_token: bool,
        /// Serve loopback without the token: anyone on this machine (another user, a
        /// container on the host network, a port forward) can then start agents as you.
        /// Refused on any other address.
        #[arg(long)]
        no_token: bool,
        /// Mark this lab as a demo (GET /info, the UI's banner); set by the demo launcher.
        #[arg(long)]
        demo: bool,
        /// The working directory the UI proposes for demo runs.
        #[arg(long, requires = "demo")]
        demo_workdir: Option<PathBuf>,
    },
    /// Print lab's access token (created on first use), or replace it.
    Token {
        #[arg(long)]
        home: Option<PathBuf>,
        /// Replace the token: the old one and every session stop working at once.
        #[arg(long)]
        rotate: bool,
    },
    /// Pair a phone (or any browser): print a one-time login link, valid for five
    /// minutes, as a QR code. Needs a running `lab serve`; the device then shows under
    /// "Devices" in the UI, where it can be logged out.
    Pair {
        #[arg(long)]
        home: Option<PathBuf>,
        /// What to call the device in the list (default: from its browser, e.g. "Safari on iPhone").
        #[arg(long)]
        name: Option<String>,
        /// The address the phone opens lab at, e.g. `https://lab.example.org` behind a
        /// reverse proxy or a tailnet name (default: where `lab serve` listens).
        #[arg(long, value_name = "URL")]
        base_url: Option<String>,
        /// Where `lab serve` listens (default: what it wrote to <home>/serve.json).
        #[arg(long, value_name = "HOST:PORT")]
        addr: Option<String>,
    },
    /// Print lab's VAPID public key for Web Push, or replace the key pair (`--rotate`:
    /// every push subscription is removed, each browser subscribes again).
    PushKey {
        #[arg(long)]
        home: Option<PathBuf>,
        #[arg(long)]
        rotate: bool,
    },
    /// Print where lab keeps its state under its home (one `name path` a line, or
    /// `--json`): for launchers and scripts, so they never re-derive lab's layout.
    Paths {
        #[arg(long)]
        home: Option<PathBuf>,
        /// One JSON object instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// List the loaded provider components and ACP agents, or check a component.
    Providers {
        /// lab's home, as for every command; also accepted after the action.
        #[arg(long, global = true)]
        home: Option<PathBuf>,
        #[command(subcommand)]
        action: Option<ProvidersAction>,
    },
    /// The machines whose runners may connect: `add NAME` prints a new credential (once),
    /// `remove NAME` revokes it (a connected runner is cut off), `list`.
    Hosts {
        /// lab's home, as for every command; also accepted after the action.
        #[arg(long, global = true)]
        home: Option<PathBuf>,
        #[command(subcommand)]
        action: HostsAction,
    },
    /// Run lab's side of another machine: dial `lab serve` and keep one authenticated
    /// stream open. The credential (from `lab hosts add NAME`) comes from
    /// LAB_RUNNER_CREDENTIAL or --credential-file, never from argv.
    Runner {
        /// Where lab serve is: http(s)://host:port (the runner dials; nothing listens here).
        #[arg(long, value_name = "URL")]
        connect: String,
        /// This host's name, as added with `lab hosts add`.
        #[arg(long)]
        name: String,
        /// The runner's own lab home on this machine.
        #[arg(long)]
        home: Option<PathBuf>,
        /// A file (mode 0600) holding the credential.
        #[arg(long, value_name = "FILE")]
        credential_file: Option<PathBuf>,
        /// Allow http:// to a non-loopback address: only on a network that is encrypted
        /// already (WireGuard, a tailnet, an SSH tunnel).
        #[arg(long)]
        allow_http: bool,
    },
    /// Write a new provider crate (outside the lab tree) that builds into a component.
    NewProvider {
        /// The provider's name in lab: [a-z0-9-] (the crate is lab-provider-<name>).
        name: String,
        /// Also implement the dialog-hooker interface (live dialogs, keystroke answers).
        #[arg(long)]
        dialog_hooker: bool,
        /// Folder to create the crate folder in (default: the current folder).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// lab-provider-sdk to depend on (default: the sdk/ of the checkout lab was built from).
        #[arg(long)]
        sdk_path: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum HostsAction {
    /// Add a host: its credential on stdout (shown once; lab keeps only its hash).
    Add { name: String },
    /// The hosts that may connect.
    List,
    /// Revoke a host's credential; its runner is disconnected within seconds.
    Remove { name: String },
}

#[derive(Subcommand)]
enum ProvidersAction {
    /// List loaded providers (the default).
    List,
    /// Load a component as lab serve would and run a self-test through it.
    Check { file: PathBuf },
}

pub fn main() -> i32 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // The hot paths first. Arguments that are not UTF-8 are passed on lossily: these
    // commands report bad input themselves and never panic on it.
    let rest = || args.iter().skip(2).map(|a| a.to_string_lossy().into_owned()).collect::<Vec<String>>();
    match args.get(1).and_then(|a| a.to_str()) {
        Some("hook") => return crate::agents::hook::main(&rest()),
        Some("agent-exec") => return crate::agents::agent_exec::main(&rest()),
        Some("term-exec") => return crate::agents::acp::terminal::term_exec_main(&rest()),
        _ => {}
    }
    let cli = Cli::parse_from(args);
    if !matches!(cli.command, Command::Serve { .. } | Command::Runner { .. }) {
        init_tracing("error");
    }
    let result = match cli.command {
        Command::Serve { addr, home, allowed_hosts, allowed_origins, require_token, no_token, demo, demo_workdir } => {
            serve(
                addr,
                home,
                EdgeFlags {
                    allowed_hosts,
                    allowed_origins,
                    token: (require_token || no_token).then_some(require_token),
                },
                crate::edge::http::ServeInfo { demo, demo_workdir, token_required: true },
            )
        }
        Command::Token { home, rotate } => token(home, rotate),
        Command::PushKey { home, rotate } => push_key::run(home, rotate),
        Command::Pair { home, name, base_url, addr } => pair::run(home, name, base_url, addr),
        Command::Paths { home, json } => paths(home, json),
        Command::Providers { home, action: None | Some(ProvidersAction::List) } => list_providers(home),
        Command::Providers { home, action: Some(ProvidersAction::Check { file }) } => {
            crate::cli::check::run(&file, home)
        }
        Command::Hosts { home, action } => hosts(home, action),
        Command::Runner { connect, name, home, credential_file, allow_http } => resolve_home(home)
            .and_then(|home| runner(crate::runner::Options { connect, name, home, credential_file, allow_http })),
        Command::NewProvider { name, dialog_hooker, dir, sdk_path } => {
            crate::cli::scaffold::run(name, dialog_hooker, dir, sdk_path)
        }
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("lab: {e:#}");
            1
        }
    }
}

fn init_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("LAB_LOG").unwrap_or_else(|_| default.into());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

/// `lab token`: print the token (creating it on first use), or rotate it.
fn token(home: Option<PathBuf>, rotate: bool) -> anyhow::Result<()> {
    let home = resolve_home(home)?;
    let token =
        if rotate { crate::edge::token::rotate_token(&home)? } else { crate::edge::token::ensure_token(&home)? };
    if rotate {
        eprintln!("lab: new token; the old one and every login session no longer work");
    }
    println!("{token}");
    Ok(())
}

/// `lab hosts add|list|remove`.
fn hosts(home: Option<PathBuf>, action: HostsAction) -> anyhow::Result<()> {
    let home = Home::new(resolve_home(home)?);
    let creds = crate::machines::hosts::HostCredentials::new(home.hosts_file());
    match action {
        HostsAction::Add { name } => {
            let credential = creds.add(&name, std::time::SystemTime::now())?;
            println!("{credential}");
            eprintln!(
                "lab: host `{name}` added; its credential is above (shown once: lab keeps only its hash).\n\
                 On that machine, start its runner with the credential in its environment (never on argv):\n  \
                 {}=<credential> lab runner --connect <lab serve's URL> --name {name}\n\
                 `lab hosts remove {name}` revokes it.",
                crate::runner::CREDENTIAL_ENV
            );
        }
        HostsAction::List => {
            println!("{:<33} ADDED", "NAME");
            for h in creds.list()? {
                let added =
                    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(h.added));
                println!("{:<33} {added}", h.name);
            }
        }
        HostsAction::Remove { name } => {
            if !creds.remove(&name)? {
                anyhow::bail!("no host `{name}` (`lab hosts list` shows them)");
            }
            eprintln!(
                "lab: host `{name}` removed; a runner still connected with its credential is cut off within seconds"
            );
        }
    }
    Ok(())
}

/// `lab runner`.
fn runner(opts: crate::runner::Options) -> anyhow::Result<()> {
    init_tracing("info");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(crate::runner::run(opts)).map_err(|e| anyhow::anyhow!("runner stopped: {e}"))
}

fn paths(home: Option<PathBuf>, json: bool) -> anyhow::Result<()> {
    let list = Home::new(resolve_home(home)?).layout();
    if json {
        let map: serde_json::Map<String, serde_json::Value> =
            list.iter().map(|(k, p)| (k.to_string(), p.to_string_lossy().into_owned().into())).collect();
        println!("{}", serde_json::Value::Object(map));
    } else {
        for (k, p) in list {
            println!("{k} {}", p.display());
        }
    }
    Ok(())
}

/// `lab serve`'s flags about who may reach it (added to lab.toml's `[serve]`).
struct EdgeFlags {
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
    /// `--require-token` (`Some(true)`), `--no-token` (`Some(false)`), or neither.
    token: Option<bool>,
}

/// Whether a `lab serve` on `local` requires its token: always off loopback; on
/// loopback unless `--no-token` or `[serve] require_token = false` says otherwise (a
/// flag wins over lab.toml). Off loopback, turning it off is an error.
pub fn token_required(local: std::net::SocketAddr, flag: Option<bool>, config: Option<bool>) -> anyhow::Result<bool> {
    let wanted = flag.or(config).unwrap_or(true);
    if !wanted && !local.ip().is_loopback() {
        anyhow::bail!(
            "lab serves {} without its token only on loopback: {local} is reachable from other machines              (drop --no-token / require_token = false, or listen on 127.0.0.1)",
            if flag == Some(false) { "--no-token" } else { "require_token = false" }
        );
    }
    Ok(wanted)
}

/// The edge for a listener on `local`: flags and `[serve]` together, checked.
fn edge(home: &Home, local: std::net::SocketAddr, flags: EdgeFlags) -> anyhow::Result<crate::edge::http::Edge> {
    use crate::edge::http::guard;
    let cfg = crate::store::config::Config::load(&home.config_file())?.serve;
    let allowed_hosts: Vec<String> = flags.allowed_hosts.into_iter().chain(cfg.allowed_hosts).collect();
    let allowed_origins: Vec<String> = flags.allowed_origins.into_iter().chain(cfg.allowed_origins).collect();
    if let Some(bad) = allowed_hosts.iter().find(|h| !guard::valid_host_entry(h)) {
        anyhow::bail!("allowed host {bad:?} is not a host name or address (`name` or `name:port`)");
    }
    if let Some(bad) = allowed_origins.iter().find(|o| !guard::valid_origin_entry(o)) {
        anyhow::bail!("allowed origin {bad:?} is not an origin (`https://name[:port]`)");
    }
    let required = token_required(local, flags.token, cfg.require_token)?;
    let access = crate::edge::http::auth::Access::new(&home.root, required)
        .map_err(|e| anyhow::anyhow!("cannot set up lab's token and devices: {e}"))?;
    Ok(crate::edge::http::Edge {
        policy: guard::Policy { bound: local, allowed_hosts, allowed_origins },
        access: std::sync::Arc::new(access),
    })
}

/// What `lab serve` prints first, in one write: where it listens and, when a token is
/// required, a one-time login link (never logged) and, off loopback, a warning.
fn banner(local: std::net::SocketAddr, edge: &crate::edge::http::Edge) -> anyhow::Result<String> {
    let mut out = format!("lab: serving on http://{local}\n");
    if !edge.access.required {
        out += "lab: WARNING: no token (--no-token): anyone who can reach this port on this machine — another \
                user, a container on the host network, a port forward, a local SSRF — can start agents as you \
                (docs/security.md)\n";
        if !edge.policy.allowed_hosts.is_empty() {
            out += "lab: WARNING: --allowed-host without the token: a reverse proxy in front of lab makes it \
                    reachable from anywhere without one\n";
        }
        return Ok(out);
    }
    if !local.ip().is_loopback() {
        out += &format!(
            "lab: WARNING: listening on {}, reachable from other machines: every request needs lab's token \
             (`lab token` prints it). Plain HTTP carries it in the clear: put an https reverse proxy in front \
             (docs/security.md).\n",
            local.ip()
        );
    }
    let code = edge.access.login_code()?;
    let shown = std::net::SocketAddr::new(connectable(local.ip()), local.port());
    out += &format!(
        "lab: login link (works once, for {} minutes): http://{shown}/login?code={code}\n",
        crate::edge::token::LOGIN_CODE_TTL.as_secs() / 60
    );
    Ok(out)
}

fn serve(
    addr: String,
    home: Option<PathBuf>,
    flags: EdgeFlags,
    mut info: crate::edge::http::ServeInfo,
) -> anyhow::Result<()> {
    let home = Home::new(resolve_home(home)?);
    // Private modes set explicitly (not through the umask, which the agents inherit).
    home.prepare()?;
    let log = crate::store::fsutil::private_file(&home.log_file())
        .map_err(|e| anyhow::anyhow!("opening {}: {e}", home.log_file().display()))?;
    init_serve_tracing(log);
    let lab_exe = std::env::current_exe()?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        let (listener, twin) = bind_with_twin(&addr).await?;
        let local = listener.local_addr()?;
        let edge = edge(&home, local, flags)?;
        info.token_required = edge.access.required;
        let notify = crate::notify::Settings::load(&home, local)?;
        let runs = crate::runs::Runs::start(home.clone(), lab_exe).await?;
        if let Some(settings) = notify {
            crate::notify::spawn(settings, runs.changes())?;
        }
        let standing = {
            let access = edge.access.clone();
            std::sync::Arc::new(move |o: &crate::notify::push::subscriptions::Owner| access.owner_holds(o))
        };
        let push = crate::notify::push::Push::open(&home, standing)?;
        push.spawn(runs.changes());
        tracing::info!(home = %home.root.display(), token_required = edge.access.required, "lab serving on http://{local}");
        if !local.ip().is_loopback() {
            tracing::warn!("lab is listening on {local}, reachable from other machines: the token is required");
        }
        let banner = banner(local, &edge)?;
        // Listening before serve.json and the banner say this serve is up: `lab pair` run
        // the moment they appear reaches it.
        let control = ControlSocket::bind(&home)?;
        let serve_file = ServeFileGuard::write(&home, local)?;
        {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            // One write: a reader that stops after the first line loses nothing it needs.
            let _ = out.write_all(banner.as_bytes()).and_then(|()| out.flush());
        }
        let control_app = crate::edge::http::control_router(edge.access.clone()).layer(axum::Extension(push.clone()));
        let app = crate::edge::http::router(runs.clone(), edge)
            .layer(axum::Extension(std::sync::Arc::new(info)))
            .layer(axum::Extension(push))
            .into_make_service_with_connect_info::<std::net::SocketAddr>();
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            shutdown_signal().await;
            runs.begin_shutdown();
            let _ = stop_tx.send(true);
        });
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        if let Some(listener) = control.listener {
            let stop = stop_rx.clone();
            tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, control_app).with_graceful_shutdown(stopped(stop)).await {
                    tracing::warn!(error = %e, "the control socket stopped");
                }
            });
        }
        let main = axum::serve(nodelay(listener), app.clone()).with_graceful_shutdown(stopped(stop_rx.clone()));
        match twin {
            Some(twin) => {
                tracing::info!("also serving on http://{}", twin.local_addr()?);
                let twin = axum::serve(nodelay(twin), app).with_graceful_shutdown(stopped(stop_rx));
                let (a, b) = tokio::join!(main, twin);
                a?;
                b?;
            }
            None => main.await?,
        }
        drop(serve_file);
        drop(control.guard);
        tracing::info!("lab stopped; runs keep going in tmux and are picked up by the next `lab serve`");
        Ok(())
    })
}

/// `<home>/serve.sock`: the running serve's control socket ([`crate::edge::http::control_router`]).
struct ControlSocket {
    /// None when it cannot be made (a home path too long for a socket): said in the log;
    /// the CLI then says it cannot reach this serve.
    listener: Option<tokio::net::UnixListener>,
    guard: Option<ControlGuard>,
}

/// Removes the control socket at a clean stop (if it is still this serve's).
struct ControlGuard(PathBuf, u64);

impl Drop for ControlGuard {
    fn drop(&mut self) {
        let ours = std::fs::symlink_metadata(&self.0).is_ok_and(|m| std::os::unix::fs::MetadataExt::ino(&m) == self.1);
        if ours {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

impl ControlSocket {
    /// Bind it: a socket file left by a serve that stopped is replaced; one a live serve
    /// answers on means another serve runs for this home (an error).
    fn bind(home: &Home) -> anyhow::Result<ControlSocket> {
        let path = home.control_socket();
        if std::os::unix::net::UnixStream::connect(&path).is_ok() {
            anyhow::bail!("another `lab serve` runs for {} (it answers on {})", home.root.display(), path.display());
        }
        match std::fs::symlink_metadata(&path) {
            Ok(m) if std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()) => std::fs::remove_file(&path)?,
            Ok(_) => anyhow::bail!("{} is not a socket: move it away", path.display()),
            Err(_) => {}
        }
        // In the 0700 home (nobody else can reach it even for the moment before the chmod),
        // then 0600. (lab never changes its umask: the agents inherit it.)
        let listener = tokio::net::UnixListener::bind(&path)
            .and_then(|l| crate::store::fsutil::set_mode(&path, 0o600).map(|()| l));
        match listener {
            Ok(l) => {
                let ino =
                    std::fs::symlink_metadata(&path).map(|m| std::os::unix::fs::MetadataExt::ino(&m)).unwrap_or(0);
                Ok(ControlSocket { listener: Some(l), guard: Some(ControlGuard(path, ino)) })
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "no control socket: `lab pair` and `lab push-key --rotate` cannot reach this serve");
                Ok(ControlSocket { listener: None, guard: None })
            }
        }
    }
}

/// `<home>/serve.json` while serving (where `lab pair` finds this serve): written at
/// start, removed at a clean stop if it is still this process's.
struct ServeFileGuard(PathBuf);

impl ServeFileGuard {
    fn write(home: &Home, local: std::net::SocketAddr) -> anyhow::Result<ServeFileGuard> {
        let addr = std::net::SocketAddr::new(connectable(local.ip()), local.port());
        let f = crate::edge::pairing::ServeFile { addr: addr.to_string(), pid: std::process::id() };
        let path = home.serve_file();
        crate::store::fsutil::write_atomic(&path, &serde_json::to_vec(&f)?, 0o600)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
        Ok(ServeFileGuard(path))
    }
}

impl Drop for ServeFileGuard {
    fn drop(&mut self) {
        let ours = crate::store::fsutil::read_optional(&self.0)
            .ok()
            .flatten()
            .and_then(|b| serde_json::from_slice::<crate::edge::pairing::ServeFile>(&b).ok())
            .is_some_and(|f| f.pid == std::process::id());
        if ours {
            let _ = crate::store::fsutil::remove_if_exists(&self.0);
        }
    }
}

/// An address this machine can connect to for one lab listens on (`0.0.0.0` → loopback).
fn connectable(ip: std::net::IpAddr) -> std::net::IpAddr {
    match ip {
        std::net::IpAddr::V4(a) if a.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(a) if a.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        other => other,
    }
}

/// Listen on `addr`; for `127.0.0.1:PORT`, hold `[::1]:PORT` too. Browsers try `[::1]`
/// first for `localhost:PORT`: were it free, another local user could listen there and
/// receive the operator's browser (and its login link). Taken by another process: lab
/// refuses to start, saying so. No IPv6 on this machine: lab serves 127.0.0.1 alone.
/// With port 0 the pair is drawn again (a few times) when the v6 twin of the port the
/// kernel gave is taken.
/// Every accepted connection without Nagle's delay: small frames (an event, a runner's
/// report right after another) go out at once instead of waiting up to a delayed ACK
/// (~40 ms).
fn nodelay(
    listener: tokio::net::TcpListener,
) -> axum::serve::TapIo<tokio::net::TcpListener, impl FnMut(&mut tokio::net::TcpStream) + Send + 'static> {
    use axum::serve::ListenerExt;
    listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY on a connection");
        }
    })
}

async fn bind_with_twin(addr: &str) -> anyhow::Result<(tokio::net::TcpListener, Option<tokio::net::TcpListener>)> {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
    let listen = |a: String| async move {
        tokio::net::TcpListener::bind(&a).await.map_err(|e| anyhow::anyhow!("cannot listen on {a}: {e}"))
    };
    for _ in 0..8 {
        let v4 = listen(addr.to_string()).await?;
        let local = v4.local_addr()?;
        if local.ip() != std::net::IpAddr::V4(Ipv4Addr::LOCALHOST) {
            return Ok((v4, None));
        }
        let v6 = SocketAddr::new(Ipv6Addr::LOCALHOST.into(), local.port());
        match tokio::net::TcpListener::bind(v6).await {
            Ok(twin) => return Ok((v4, Some(twin))),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                if addr.ends_with(":0") {
                    continue;
                }
                anyhow::bail!(
                    "another process already listens on {v6}, where browsers go first for localhost:{}: it would \
                     receive your browser (and its login link). Stop it, or choose another port with --addr",
                    local.port()
                );
            }
            Err(e) => {
                tracing::warn!(error = %e, "no IPv6 loopback here: serving 127.0.0.1 only");
                return Ok((v4, None));
            }
        }
    }
    anyhow::bail!("cannot find a free port on both 127.0.0.1 and [::1]")
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

fn init_serve_tracing(log: std::fs::File) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_from_env("LAB_LOG").unwrap_or_else(|_| "info".into());
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(tracing_subscriber::fmt::layer().with_ansi(false).with_writer(std::sync::Mutex::new(log)))
        .try_init();
}

fn list_providers(home: Option<PathBuf>) -> anyhow::Result<()> {
    let home = Home::new(resolve_home(home)?);
    let host = ComponentHost::new(Some(home.component_cache()), Limits::default())?;
    let set = ProviderSet::load_all(&host, &home.providers_dir());
    println!("{:<16} {:<10} {:<14} FILE", "NAME", "VERSION", "DIALOG-HOOKER");
    for (facts, _) in &set.loaded {
        let hooker = if facts.dialog_hooker { "yes" } else { "no" };
        println!("{:<16} {:<10} {:<14} {}", facts.info.name, facts.info.version, hooker, facts.source);
    }
    for f in &set.failed {
        println!("skipped {}: {}", f.source, f.error);
    }
    // ACP agents (transport acp): declared by components, or lab.toml's [agents].
    let config = crate::store::config::Config::load(&home.config_file())?;
    let tmux_providers: Vec<&str> = set.loaded.iter().map(|(f, _)| f.info.name.as_str()).collect();
    let (agents, unused) = crate::agents::acp::agents::resolve(&config, &tmux_providers, &set.acp);
    for (name, a) in &agents {
        let version = a.component.as_ref().map_or("-", |c| c.info.version.as_str());
        let origin = match &a.component {
            Some(c) => c.source.to_string(),
            None => format!("[agents.{name}] in {}", home.config_file().display()),
        };
        println!("{name:<16} {version:<10} {:<14} {origin} (transport acp: {})", "yes", a.config.acp.join(" "));
    }
    for line in unused {
        println!("{line}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::token_required;

    /// `--home` is taken wherever it is on the command line, after an action too.
    #[test]
    fn home_is_accepted_anywhere_on_the_command_line() {
        use super::{Cli, Command, HostsAction, ProvidersAction};
        use clap::Parser;
        use std::path::PathBuf;
        let parse = |args: &[&str]| Cli::try_parse_from([&["lab"], args].concat()).map(|c| c.command);
        let h = Some(PathBuf::from("/h"));
        for args in [["hosts", "--home", "/h", "add", "m1"], ["hosts", "add", "m1", "--home", "/h"]] {
            match parse(&args) {
                Ok(Command::Hosts { home, action: HostsAction::Add { name } }) => {
                    assert_eq!((home, name.as_str()), (h.clone(), "m1"))
                }
                _ => panic!("{args:?}"),
            }
        }
        match parse(&["providers", "check", "p.wasm", "--home", "/h"]) {
            Ok(Command::Providers { home, action: Some(ProvidersAction::Check { file }) }) => {
                assert_eq!((home, file), (h.clone(), PathBuf::from("p.wasm")))
            }
            _ => panic!("providers check … --home"),
        }
        for args in [
            &["token", "--rotate", "--home", "/h"][..],
            &["paths", "--json", "--home", "/h"],
            &["serve", "--home", "/h"],
        ] {
            let home = match parse(args) {
                Ok(Command::Token { home, .. } | Command::Paths { home, .. } | Command::Serve { home, .. }) => home,
                _ => panic!("{args:?}"),
            };
            assert_eq!(home, h, "{args:?}");
        }
    }

    #[test]
    fn the_token_is_required_unless_turned_off_on_loopback() {
        let lo: std::net::SocketAddr = "127.0.0.1:7777".parse().unwrap();
        let lo6: std::net::SocketAddr = "[::1]:7777".parse().unwrap();
        let lan: std::net::SocketAddr = "0.0.0.0:7777".parse().unwrap();
        // The default, everywhere.
        assert!(token_required(lo, None, None).unwrap());
        assert!(token_required(lan, None, None).unwrap());
        // Off on loopback by the flag or lab.toml; the flag wins.
        assert!(!token_required(lo, Some(false), None).unwrap());
        assert!(!token_required(lo6, None, Some(false)).unwrap());
        assert!(token_required(lo, Some(true), Some(false)).unwrap());
        assert!(!token_required(lo, Some(false), Some(true)).unwrap());
        // Never off elsewhere.
        let e = token_required(lan, Some(false), None).unwrap_err().to_string();
        assert!(e.contains("--no-token") && e.contains("only on loopback"), "{e}");
        assert!(token_required(lan, None, Some(false)).unwrap_err().to_string().contains("require_token = false"));
    }
}
