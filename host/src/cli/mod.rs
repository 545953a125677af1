//! The `lab` command line: the one dispatcher for every subcommand.
//!
//! `lab hook …` (run by the agent's hooks, on the dialog path) and `lab agent-exec …`
//! (which starts the agent in its pane) are dispatched before the argument parser: no
//! clap, no runtime, no components, so they stay tiny and fast.
//!
//! Nothing else in lab calls into `cli`. The subcommands with more to them than a call
//! have their file here: [`check`] (`lab providers check`), [`scaffold`] (`lab
//! new-provider`), [`pair`], [`push_key`], [`doctor`], [`service`] (`lab service`),
//! [`completions`] (`lab completions`, `lab man`), and [`local_client`] for talking to
//! the running serve.

pub mod audit;
pub mod check;
pub mod completions;
pub mod doctor;
pub mod local_client;
pub mod pair;
pub mod push_key;
pub mod rules;
pub mod scaffold;
pub mod serve;
pub mod service;

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
    /// Print the audit log: every operator action, who did it, and whether lab applied
    /// it or refused it (and why), oldest first.
    Audit {
        #[arg(long)]
        home: Option<PathBuf>,
        /// Only this run's.
        #[arg(long)]
        run: Option<String>,
        /// From this time on (RFC 3339, e.g. 2026-12-05T10:00:00Z).
        #[arg(long)]
        from: Option<String>,
        /// Before this time (RFC 3339).
        #[arg(long)]
        to: Option<String>,
        /// The newest this many (default 500, at most 5000).
        #[arg(long)]
        limit: Option<usize>,
        /// One JSON object a line, as `GET /audit` has them.
        #[arg(long)]
        json: bool,
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
    /// The answer rules: what lab answers by itself, and how (docs/rules.md).
    Rules {
        /// lab's home, as for every command; also accepted after the action.
        #[arg(long, global = true)]
        home: Option<PathBuf>,
        #[command(subcommand)]
        action: rules::RulesAction,
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
    /// Check what lab needs — tmux, the agents, the providers, lab's home and files, the
    /// token, lab serve, the hosts, bubblewrap, the push key — each problem with its fix.
    /// Exits 1 when a check fails.
    Doctor {
        #[arg(long)]
        home: Option<PathBuf>,
        /// One JSON object: {"ok", "failed", "home", "checks": [{"area", "subject", "status", "detail", "fix"?}]}.
        #[arg(long)]
        json: bool,
    },
    /// lab serve as a user service that survives logout and reboot (systemd; launchd on
    /// macOS), with the completions and the man page.
    Service {
        #[command(subcommand)]
        action: service::ServiceAction,
    },
    /// Print the completion script for a shell (`lab completions bash > …`).
    Completions { shell: completions::Shell },
    /// Print lab's man page (roff): `lab man | man -l -`.
    Man,
    /// Write a new provider crate (outside the lab tree) that builds into a component.
    NewProvider {
        /// The provider's name in lab: [a-z0-9-] (the crate is lab-provider-<name>).
        name: String,
        /// Also implement the dialog-hooker interface (live dialogs, keystroke answers).
        #[arg(long, conflicts_with = "acp")]
        dialog_hooker: bool,
        /// An ACP provider instead: it declares an agent that speaks the Agent Client
        /// Protocol (lab speaks the protocol; its prompts are answered from lab).
        #[arg(long)]
        acp: bool,
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
    /// Add a host. With --ssh, one lab reaches with the system ssh client (reached now:
    /// its host key checked, lab put there); else one whose runner dials back, with
    /// its credential on stdout (shown once; lab keeps only its hash).
    Add {
        name: String,
        /// `[user@]host` (or an alias of your ssh config): lab reaches it over ssh.
        #[arg(long, value_name = "[USER@]HOST")]
        ssh: Option<String>,
        /// Its ssh port (else your ssh config's, else 22).
        #[arg(long, requires = "ssh")]
        port: Option<u16>,
        /// The private key to log in with (only it).
        #[arg(long, requires = "ssh", value_name = "FILE")]
        identity: Option<PathBuf>,
        /// The known-hosts file its host key is checked against (else yours).
        #[arg(long, requires = "ssh", value_name = "FILE")]
        known_hosts: Option<PathBuf>,
    },
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
        Some("runner") if matches!(args.get(2).and_then(|a| a.to_str()), Some("daemon" | "proxy")) => {
            return crate::runner::daemon::main(&rest());
        }
        _ => {}
    }
    let cli = Cli::parse_from(args);
    if !matches!(cli.command, Command::Serve { .. } | Command::Runner { .. }) {
        init_tracing("error");
    }
    let result = match cli.command {
        Command::Serve { addr, home, allowed_hosts, allowed_origins, require_token, no_token, demo, demo_workdir } => {
            serve::serve(
                addr,
                home,
                serve::EdgeFlags {
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
        Command::Audit { home, run, from, to, limit, json } => crate::cli::audit::run(home, run, from, to, limit, json),
        Command::Providers { home, action: None | Some(ProvidersAction::List) } => list_providers(home),
        Command::Providers { home, action: Some(ProvidersAction::Check { file }) } => {
            crate::cli::check::run(&file, home)
        }
        Command::Hosts { home, action } => hosts(home, action),
        Command::Rules { home, action } => rules::run(home, action),
        Command::Doctor { home, json } => doctor::run(home, json),
        Command::Service { action } => service::main(action),
        Command::Completions { shell } => print_bytes(&completions::completions(shell)),
        Command::Man => completions::man_page().map_err(Into::into).and_then(|page| print_bytes(&page)),
        Command::Runner { connect, name, home, credential_file, allow_http } => resolve_home(home)
            .and_then(|home| runner(crate::runner::Options { connect, name, home, credential_file, allow_http })),
        Command::NewProvider { name, dialog_hooker, acp, dir, sdk_path } => {
            use crate::cli::scaffold::Kind;
            let kind = match (acp, dialog_hooker) {
                (true, _) => Kind::Acp,
                (false, true) => Kind::DialogHooker,
                (false, false) => Kind::TranscriptOnly,
            };
            crate::cli::scaffold::run(name, kind, dir, sdk_path)
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

fn print_bytes(bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)?;
    Ok(out.flush()?)
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
        crate::cli::audit::cli_action(&home, "token.rotate", None, serde_json::json!({"via": "lab token --rotate"}));
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
        HostsAction::Add { name, ssh: Some(destination), port, identity, known_hosts } => {
            let absolute = |p: Option<PathBuf>| -> anyhow::Result<Option<PathBuf>> {
                Ok(match p {
                    Some(p) if p.is_relative() => Some(std::env::current_dir()?.join(p)),
                    p => p,
                })
            };
            let target = crate::machines::ssh::SshTarget {
                destination,
                port,
                identity: absolute(identity)?,
                known_hosts: absolute(known_hosts)?,
                lab: None,
            };
            let detail = serde_json::json!({"host": name, "ssh": target.destination, "via": "lab hosts add"});
            let added = add_ssh_host(&home, &creds, &name, target);
            crate::cli::audit::cli_result(&home.root, "host.add", detail, &added);
            added?;
        }
        HostsAction::Add { name, .. } => {
            let credential = creds.add(&name, std::time::SystemTime::now());
            let detail = serde_json::json!({"host": name, "via": "lab hosts add"});
            crate::cli::audit::cli_result(&home.root, "host.add", detail, &credential);
            let credential = credential?;
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
            println!("{:<33} {:<21} REACHED", "NAME", "ADDED");
            for h in creds.list()? {
                let added =
                    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(h.added));
                let reached = match &h.ssh {
                    Some(t) => format!("ssh {}", t.destination),
                    None => "dial-back".into(),
                };
                println!("{:<33} {:<21} {reached}", h.name, added.to_string());
            }
            // And those lab.toml names (added ones of the same name win).
            let config = crate::store::config::Config::load(&home.config_file())?;
            let added: Vec<String> = creds.list()?.into_iter().map(|h| h.name).collect();
            for (name, h) in config.hosts.iter().filter(|(n, _)| !added.contains(n)) {
                println!("{:<33} {:<21} ssh {}", name, "(lab.toml)", h.ssh);
            }
        }
        HostsAction::Remove { name } => {
            let ssh = creds.list()?.into_iter().find(|h| h.name == name).and_then(|h| h.ssh);
            let removed = creds.remove(&name).and_then(|found| {
                if found {
                    Ok(())
                } else {
                    Err(anyhow::anyhow!("no host `{name}` (`lab hosts list` shows them)"))
                }
            });
            let detail = serde_json::json!({"host": name, "via": "lab hosts remove"});
            crate::cli::audit::cli_result(&home.root, "host.remove", detail, &removed);
            removed?;
            if let Some(target) = ssh {
                // Its ssh master, if one is up, goes too.
                crate::machines::ssh::Master::new(target, home.ssh_control(&name)).exit();
            }
            eprintln!(
                "lab: host `{name}` removed; a runner still connected with its credential is cut off within seconds"
            );
        }
    }
    Ok(())
}

/// `lab hosts add NAME --ssh …`: reach the machine now — its host key checked (an
/// unknown or changed one refuses the add, with how to accept it), lab of this build
/// put there — then record it. A machine that cannot be reached now (down, no route)
/// is added with a warning; lab reaches it when it is back.
fn add_ssh_host(
    home: &Home,
    creds: &crate::machines::hosts::HostCredentials,
    name: &str,
    target: crate::machines::ssh::SshTarget,
) -> anyhow::Result<()> {
    use crate::machines::ssh::{bootstrap, Master, SshError};
    crate::machines::hosts::credentials::check_name(name).map_err(anyhow::Error::msg)?;
    target.check().map_err(anyhow::Error::msg)?;
    if creds.list()?.iter().any(|h| h.name == name) {
        anyhow::bail!("host `{name}` exists; `lab hosts remove {name}` first");
    }
    crate::store::fsutil::private_dir(&home.runtime_dir())?;
    let master = Master::new(target.clone(), home.ssh_control(name));
    let reached = master.up().and_then(|()| {
        let exe = std::env::current_exe().map_err(|e| SshError::Failed(format!("lab's own binary: {e}")))?;
        bootstrap::ensure_lab(&master, &exe, env!("CARGO_PKG_VERSION"), None)
    });
    master.exit();
    match reached {
        Err(e @ (SshError::HostKey(_) | SshError::Denied(_) | SshError::Unsuitable(_))) => {
            anyhow::bail!("{e}\nhost `{name}` was not added")
        }
        Err(e) => {
            creds.add_ssh(name, target.clone(), std::time::SystemTime::now())?;
            eprintln!("lab: host `{name}` added (ssh {}), but not reached now: {e}", target.destination);
        }
        Ok(lab) => {
            creds.add_ssh(name, target.clone(), std::time::SystemTime::now())?;
            eprintln!(
                "lab: host `{name}` added (ssh {}): {}; lab {} {} at {}",
                target.destination,
                lab.system,
                env!("CARGO_PKG_VERSION"),
                if lab.uploaded { "uploaded" } else { "already there" },
                lab.path
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
    use super::serve::token_required;

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
                Ok(Command::Hosts { home, action: HostsAction::Add { name, ssh: None, .. } }) => {
                    assert_eq!((home, name.as_str()), (h.clone(), "m1"))
                }
                _ => panic!("{args:?}"),
            }
        }
        match parse(&["hosts", "add", "far", "--ssh", "lab@10.0.0.2", "--port", "2222", "--home", "/h"]) {
            Ok(Command::Hosts { action: HostsAction::Add { ssh: Some(dest), port: Some(2222), .. }, .. }) => {
                assert_eq!(dest, "lab@10.0.0.2")
            }
            _ => panic!("hosts add --ssh"),
        }
        assert!(parse(&["hosts", "add", "m1", "--port", "22"]).is_err(), "--port goes with --ssh");
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
