//! The `lab` command line: the one dispatcher for every subcommand.
//!
//! `lab hook …` (run by the agent's hooks, on the dialog path) and `lab agent-exec …`
//! (which starts the agent in its pane) are dispatched before the argument parser: no
//! clap, no runtime, no components, so they stay tiny and fast.

use crate::components::{ComponentHost, Limits, ProviderSet};
use crate::paths::{resolve_home, Home};
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
    },
    /// List the loaded provider components, or check one.
    Providers {
        #[arg(long)]
        home: Option<PathBuf>,
        #[command(subcommand)]
        action: Option<ProvidersAction>,
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
        Some("hook") => return crate::hook::main(&rest()),
        Some("agent-exec") => return crate::agent_exec::main(&rest()),
        _ => {}
    }
    let cli = Cli::parse_from(args);
    if !matches!(cli.command, Command::Serve { .. }) {
        init_tracing("error");
    }
    let result = match cli.command {
        Command::Serve { addr, home } => serve(addr, home),
        Command::Providers { home, action: None | Some(ProvidersAction::List) } => list_providers(home),
        Command::Providers { home, action: Some(ProvidersAction::Check { file }) } => crate::check::run(&file, home),
        Command::NewProvider { name, dialog_hooker, dir, sdk_path } => {
            crate::scaffold::run(name, dialog_hooker, dir, sdk_path)
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

fn serve(addr: String, home: Option<PathBuf>) -> anyhow::Result<()> {
    let home = Home::new(resolve_home(home)?);
    std::fs::create_dir_all(home.logs_dir())?;
    let log = std::fs::OpenOptions::new().create(true).append(true).open(home.logs_dir().join("lab.log"))?;
    init_serve_tracing(log);
    let lab_exe = std::env::current_exe()?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        let listener =
            tokio::net::TcpListener::bind(&addr).await.map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
        let runs = crate::runs::Runs::start(home.clone(), lab_exe).await?;
        let local = listener.local_addr()?;
        tracing::info!(home = %home.root.display(), "lab serving on http://{local}");
        println!("lab: serving on http://{local}");
        use std::io::Write;
        std::io::stdout().flush().ok();
        let app = crate::http::router(runs.clone());
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                shutdown_signal().await;
                runs.begin_shutdown();
            })
            .await?;
        tracing::info!("lab stopped; runs keep going in tmux and are picked up by the next `lab serve`");
        Ok(())
    })
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
    Ok(())
}
