//! The `lab` command line (everything but `lab hook`, which main.rs dispatches first).

use crate::components::{ComponentHost, Limits, ProviderSet};
use crate::paths::{resolve_home, Home};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "lab", version, about = "Run coding agents in tmux and answer their dialogs from a web UI")]
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
    /// What the agent's hooks execute (see docs/compat.md §9).
    Hook {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(Subcommand)]
enum ProvidersAction {
    /// List loaded providers (the default).
    List,
}

pub fn main() -> i32 {
    let cli = Cli::parse();
    init_tracing(if matches!(cli.command, Command::Serve { .. }) { "info" } else { "error" });
    let result = match cli.command {
        Command::Serve { addr, home } => serve(addr, home),
        Command::Providers { home, action: None | Some(ProvidersAction::List) } => list_providers(home),
        Command::Hook { args } => return crate::hook::main(&args),
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

fn serve(_addr: String, _home: Option<PathBuf>) -> anyhow::Result<()> {
    anyhow::bail!("serve: not wired yet")
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
