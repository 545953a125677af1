//! `lab serve`: the composition root. It prepares the home, binds the listeners (and
//! the control socket), opens the stores and loads the providers the runs stand on
//! ([`compose`], what tests call too, with fakes), starts the runs, the edge's access
//! rules, the `[notify]` webhook and Web Push, and wires them together; then it serves
//! until a signal, and leaves the runs going in tmux.

use crate::store::paths::{resolve_home, Home};
use std::path::PathBuf;

/// `lab serve`'s flags about who may reach it (added to lab.toml's `[serve]`).
pub struct EdgeFlags {
    pub allowed_hosts: Vec<String>,
    pub allowed_origins: Vec<String>,
    /// `--require-token` (`Some(true)`), `--no-token` (`Some(false)`), or neither.
    pub token: Option<bool>,
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

/// What an answer rule did, into the audit log: `rule.answer` (or `rule.would_answer`
/// for a dry run), by `"rule"`, with the rule, the tool and what the prompt was about.
fn rule_audit(audit: std::sync::Arc<crate::edge::audit::Audit>) -> crate::rules::engine::OnApplied {
    std::sync::Arc::new(move |a: &crate::rules::engine::Applied| {
        let detail = serde_json::json!({
            "rule": a.rule.id,
            "name": a.rule.name,
            "action": a.rule.action.name(),
            "tool_id": a.tool_id,
            "tool": a.tool,
            "subject": a.subject.as_deref().map(crate::edge::audit::text_detail),
        });
        let action = if a.dry_run { "rule.would_answer" } else { "rule.answer" };
        let actor = crate::edge::audit::Actor::Other("rule".into());
        let refused = a.outcome.clone().err();
        audit.append(&crate::edge::audit::entry(actor, action, Some(a.run_id.clone()), detail, refused));
    })
}

/// `lab serve`: until SIGINT or SIGTERM.
pub fn serve(
    addr: String,
    home: Option<PathBuf>,
    flags: EdgeFlags,
    mut info: crate::edge::http::ServeInfo,
) -> anyhow::Result<()> {
    let home = Home::new(resolve_home(home)?);
    let config = crate::store::config::Config::load(&home.config_file())?;
    let sandbox = config.sandbox;
    crate::runs::launch::sandboxing::check_config(&sandbox)
        .map_err(|e| anyhow::anyhow!("{}: {e}", home.config_file().display()))?;
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
        let runs = compose(home.clone(), lab_exe, None).await?;
        let audit = std::sync::Arc::new(crate::edge::audit::Audit::new(&home.root));
        // The answer rules see every change first: the notifications hear of them after,
        // each prompt a rule answered marked so.
        let book = crate::rules::book::Book::open(&home, &config.rules).map_err(|e| anyhow::anyhow!(e))?;
        let rules = std::sync::Arc::new(crate::rules::Rules::new(book));
        let changes = crate::rules::engine::spawn(runs.clone(), rules.clone(), rule_audit(audit.clone()));
        if let Some(settings) = notify {
            crate::notify::spawn(settings, changes.subscribe())?;
        }
        let standing = {
            let access = edge.access.clone();
            std::sync::Arc::new(move |o: &crate::notify::push::subscriptions::Owner| access.owner_holds(o))
        };
        let push = crate::notify::push::Push::open(&home, standing)?;
        push.spawn(changes.subscribe());
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
        // What only the start ran (loading the providers, the checks) stays resident no
        // longer: its code and the memory it freed go back (util::memory).
        tokio::task::spawn_blocking(crate::util::memory::give_back);
        let search = runs.books().search.clone();
        let state = crate::edge::http::AppState {
            runs: runs.clone(),
            access: edge.access.clone(),
            push,
            served: std::sync::Arc::new(info),
            audit: audit.clone(),
            rules,
        };
        // The counts of refusals held back are written when their window ends.
        let sweeper = {
            let audit = audit.clone();
            tokio::spawn(async move {
                let mut every = tokio::time::interval(crate::edge::audit::STRANGER_WINDOW / 4);
                loop {
                    every.tick().await;
                    let audit = audit.clone();
                    let _ = tokio::task::spawn_blocking(move || audit.sweep(false)).await;
                }
            })
        };
        let control_app = crate::edge::http::control_router(state.clone());
        let app = crate::edge::http::router(state, edge.policy)
            .into_make_service_with_connect_info::<std::net::SocketAddr>();
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            shutdown_signal().await;
            runs.begin_shutdown().await;
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
        sweeper.abort();
        let _ = tokio::task::spawn_blocking(move || audit.sweep(true)).await;
        // The search index closed in order: the next start trusts it without reading it.
        let _ = tokio::task::spawn_blocking(move || search.close(std::time::Duration::from_secs(5))).await;
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

/// The runs' parts, opened and loaded, and the runs started on them: lab's home
/// prepared, lab.toml read, the registry opened first (a damaged one fails fast, with
/// its fix), the search index and the usage book opened (the index is looked at in the
/// background), the providers loaded from the bundle and `<home>/providers/` (or
/// `fakes`' with their terminal, in tests), lab's tmux server, the hosts lab.toml names
/// and the hosts file's.
pub async fn compose(
    home: Home,
    lab_exe: PathBuf,
    fakes: Option<crate::runs::Seams>,
) -> anyhow::Result<std::sync::Arc<crate::runs::Runs>> {
    use crate::runs::live::{liveness, mirror};
    use crate::runs::{books, providers, search, usage, Parts, Seams};
    use std::sync::Arc;
    home.prepare()?;
    let config = crate::store::config::Config::load(&home.config_file())?;
    let mirrors = mirror::Mirrors::new(config.runs.host_transcript_max_mb, config.runs.host_transcript_min_free_mb);
    // Before the (slower) providers: a damaged registry fails fast, with its fix.
    let registry = crate::runs::registry::Registry::open(&home.registry())?;
    // Returns at once: the index is looked at (and built if new) in the background.
    let (search, index_ready) = search::SearchIndex::open(&home.search_index(), config.search.max_mb << 20)?;
    let books = Arc::new(books::Books {
        usage: usage::UsageBook::open(home.usage_dir(), usage::Prices::new(&config.prices))?,
        search,
    });
    let cache = home.component_cache();
    let providers_dir = home.providers_dir();
    // A place to drop providers into, from the start (private, as all of lab's home;
    // an existing one is left as it is, and checked when loaded).
    {
        use std::os::unix::fs::DirBuilderExt;
        match std::fs::DirBuilder::new().mode(0o700).create(&providers_dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                tracing::warn!(dir = %providers_dir.display(), error = %e, "could not make the providers folder");
            }
            _ => {}
        }
    }
    // The folder as it was when loaded: a change from then on is loaded too.
    let providers_seen = providers::look(&providers_dir);
    let tmux = crate::machines::tmux::Tmux::new(home.tmux_socket())
        .with_closed_signal(home.runtime_dir().join(liveness::SIGNAL_FILE));
    let Seams { sessions, providers } = match fakes {
        Some(fakes) => fakes,
        None => Seams {
            sessions: Arc::new(tmux.clone()),
            providers: tokio::task::spawn_blocking(move || -> anyhow::Result<providers::Providers> {
                let host = crate::agents::components::ComponentHost::new(
                    Some(cache),
                    crate::agents::components::Limits::default(),
                )?;
                Ok(providers::Providers::load(host, providers_dir))
            })
            .await??,
        },
    };
    let hosts = crate::machines::hosts::Hosts::new(crate::machines::hosts::HostCredentials::new(home.hosts_file()));
    // The hosts lab.toml names, checked (a bad one keeps lab serve from starting).
    hosts.set_configured(crate::machines::hosts::over_ssh::configured(&config).map_err(anyhow::Error::msg)?);
    crate::runs::Runs::start(Parts {
        home,
        config,
        registry,
        books,
        index_ready,
        providers,
        providers_seen,
        sessions,
        tmux,
        lab_exe,
        hosts,
        mirrors,
    })
    .await
}
