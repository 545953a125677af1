//! What `lab doctor` looks at, read-only: programs on PATH, lab's home and files, the
//! running serve (through its control socket), the components. Each function gathers
//! facts and hands them to a pure verdict in [`super::finding`].
//!
//! Nothing here changes anything: no file is made or re-moded (but a compiled component
//! added to lab serve's compile cache, when that cache exists), no store is opened for
//! writing (the registry, which a running serve holds locked, is not opened at all), and
//! the only programs run are `tmux -V`, each agent's `--version` (in a scratch
//! directory, as lab serve asks it) and a bubblewrap jail running `true`.

use super::finding::{self, AgentFacts, Finding, Serving};
use crate::agents::components::{ComponentHost, Limits, ProviderSet};
use crate::store::config::{find_program, Config};
use crate::store::paths::Home;
use std::path::Path;
use std::time::Duration;

/// How long a program doctor runs may take.
const RUN_LIMIT: Duration = Duration::from_secs(5);

/// `program args…` with a deadline: its stdout+stderr, or why there is none.
fn output_of(program: &Path, args: &[&str]) -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let mut child = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| e.to_string())?;
    let deadline = std::time::Instant::now() + RUN_LIMIT;
    let status = loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(s) => break s,
            None if std::time::Instant::now() > deadline => {
                // SAFETY: kill(2) on the process group made for this child only.
                unsafe {
                    libc::kill(-(child.id() as i32), libc::SIGKILL);
                }
                let _ = child.wait();
                return Err(format!("no answer within {} s", RUN_LIMIT.as_secs()));
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let mut text = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.by_ref().take(64 * 1024).read_to_string(&mut text);
    }
    if let Some(mut err) = child.stderr.take() {
        let _ = err.by_ref().take(64 * 1024).read_to_string(&mut text);
    }
    if status.success() {
        Ok(text)
    } else {
        Err(format!("{status}: {}", text.lines().next().unwrap_or("").trim()))
    }
}

pub fn tmux() -> Finding {
    let path = std::env::var_os("PATH");
    let Some(tmux) = find_program(Path::new("tmux"), path.as_deref()) else { return finding::tmux(None) };
    let shown = tmux.display().to_string();
    match output_of(&tmux, &["-V"]) {
        Ok(text) => finding::tmux(Some((&shown, text.trim()))),
        Err(why) => finding::tmux(Some((&shown, &why))),
    }
}

/// The components (bundled and `<home>/providers/*.wasm`) as lab serve would load them,
/// and the agents they (and lab.toml's `[agents]`) run.
pub fn providers_and_agents(home: &Home, config: &Config) -> Vec<Finding> {
    let mut out = Vec::new();
    // The compile cache lab serve keeps, when there is one (doctor makes no folder).
    let cache = Some(home.component_cache()).filter(|c| c.is_dir());
    let host = match ComponentHost::new(cache, Limits::default()) {
        Ok(h) => h,
        Err(e) => {
            out.push(Finding::new(
                "provider",
                "engine",
                finding::Status::Fail,
                format!("no WebAssembly engine: {e:#}"),
            ));
            return out;
        }
    };
    let set = ProviderSet::load_all(&host, &home.providers_dir());
    for (f, _) in &set.loaded {
        out.push(finding::provider_loaded(&f.info.name, &f.info.version, &f.source.to_string()));
    }
    for (f, _) in &set.acp {
        out.push(finding::provider_loaded(&f.info.name, &f.info.version, &f.source.to_string()));
    }
    for f in &set.failed {
        out.push(finding::provider_refused(&f.source.to_string(), &f.error));
    }
    let matrix = finding::matrix(include_str!("../../../../docs/compat-matrix.md"));
    let of_matrix = |display: &str| matrix.iter().find(|(t, _, _)| t == display).cloned();
    let path_var = std::env::var_os("PATH");
    let env_of = |pass_env: Option<&[String]>, explicit: &std::collections::BTreeMap<String, String>| {
        crate::runs::launch::agent_env::decide(std::env::vars_os(), pass_env, explicit).env
    };
    let mut agents: Vec<Agent> = Vec::new();
    for (f, handle) in &set.loaded {
        let p = config.provider(&f.info.name);
        let program = p.program.clone().map_or_else(|| f.info.default_program.clone(), |p| p.display().to_string());
        agents.push(Agent {
            name: f.info.name.clone(),
            display: f.info.display_name.clone(),
            program,
            configured: config.providers.contains_key(&f.info.name),
            env: env_of(p.pass_env.as_deref(), &p.env),
            handle: Some(handle.clone()),
        });
    }
    let tmux_names: Vec<&str> = set.loaded.iter().map(|(f, _)| f.info.name.as_str()).collect();
    let (acp, unused) = crate::agents::acp::agents::resolve(config, &tmux_names, &set.acp);
    for (name, a) in &acp {
        let Some(program) = a.config.acp.first().cloned() else { continue };
        agents.push(Agent {
            name: name.clone(),
            display: a.display_name(name),
            program,
            configured: config.providers.contains_key(name) || config.agents.contains_key(name),
            env: env_of(a.config.pass_env.as_deref(), &a.config.env),
            handle: set.acp_handle(name).cloned(),
        });
    }
    // lab.toml's tables for providers that are not there (a typo, a removed component).
    for name in config.providers.keys() {
        if !agents.iter().any(|a| &a.name == name) {
            out.push(
                Finding::new(
                    "provider",
                    format!("[providers.{name}]"),
                    finding::Status::Warn,
                    format!("lab.toml configures `{name}`, but no provider of that name is loaded"),
                )
                .fix("check the name against `lab providers`, or remove the table"),
            );
        }
    }
    for line in unused {
        out.push(Finding::new("provider", "lab.toml", finding::Status::Warn, line));
    }
    // Every agent's `--version` at once (each at most 5 s).
    let path_of = |a: &Agent| a.env.get("PATH").map(std::ffi::OsString::from).or_else(|| path_var.clone());
    let found: Vec<Option<std::path::PathBuf>> =
        agents.iter().map(|a| find_program(Path::new(&a.program), path_of(a).as_deref())).collect();
    let asks = found.iter().zip(&agents).map(|(f, a)| {
        let path = path_of(a);
        async move {
            match f {
                Some(p) => crate::runs::launch::agent_version::probe(p, path.as_deref()).await,
                None => None,
            }
        }
    });
    let versions: Vec<Option<String>> = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt.block_on(futures_util::future::join_all(asks)),
        Err(_) => vec![None; agents.len()],
    };
    for ((a, found), version) in agents.into_iter().zip(found).zip(versions) {
        let (pinned, tested) = of_matrix(&a.display).map(|(_, p, t)| (Some(p), t)).unwrap_or_default();
        let present = found.is_some();
        out.push(finding::agent(&AgentFacts {
            name: a.name.clone(),
            program: a.program.clone(),
            configured: a.configured,
            path: found.map(|p| p.display().to_string()),
            version,
            pinned,
            tested,
        }));
        if present {
            out.push(login(&a));
        }
    }
    out
}

/// One agent lab can run, as doctor looks at it.
struct Agent {
    name: String,
    display: String,
    program: String,
    configured: bool,
    /// The environment it starts with (lab.toml's `pass_env` and `env` over this one).
    env: std::collections::BTreeMap<String, String>,
    handle: Option<crate::agents::components::ProviderHandle>,
}

/// Whether the agent is logged in: its provider says where a login is (a variable, a
/// file), and doctor looks there.
fn login(a: &Agent) -> Finding {
    let env: Vec<(String, String)> = a.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let hints = a.handle.as_ref().and_then(|h| h.login_hints(env).blocking().ok().flatten());
    let Some(hints) = hints else { return finding::login(&a.name, None) };
    let home = a.env.get("HOME").cloned().or_else(|| std::env::var("HOME").ok()).unwrap_or_default();
    let set_var = hints.env.iter().find(|k| a.env.get(*k).is_some_and(|v| !v.is_empty())).cloned();
    let file = hints
        .files
        .iter()
        .find(|f| {
            let path = match f.strip_prefix("~/") {
                Some(rest) => Path::new(&home).join(rest),
                None => Path::new(f.as_str()).to_path_buf(),
            };
            path.is_absolute() && std::fs::metadata(&path).is_ok_and(|m| m.is_file() && m.len() > 0)
        })
        .cloned();
    finding::login(&a.name, Some((&hints, set_var.or(file))))
}

/// lab's home, its files, the token and the push key.
pub fn home(home: &Home, config: &Result<Config, String>) -> Vec<Finding> {
    use crate::store::fsutil::Kind;
    use crate::store::ownership;
    use std::os::unix::fs::MetadataExt;
    let root = home.root.display().to_string();
    let mode = std::fs::metadata(&home.root).ok().map(|m| m.mode() & 0o7777);
    let mut out = finding::home(&root, ownership::check_home(&home.root), mode, free_bytes(&home.root));
    let shown = |p: &Path| p.display().to_string();
    // lab.toml, and the rules (its [[rules]] and rules.toml).
    let cfg = home.config_file();
    out.push(finding::store(
        "lab.toml",
        &shown(&cfg),
        cfg.exists().then(|| config.as_ref().map(|_| "read".to_string()).map_err(Clone::clone)),
    ));
    let rules = home.rules_file();
    let shared = config.as_ref().map(|c| c.rules.clone()).unwrap_or_default();
    let checked_rules = || crate::rules::book::Book::open(home, &shared).map(|b| format!("{} rules", b.rules().len()));
    out.push(finding::store("rules", &shown(&rules), (rules.exists() || !shared.is_empty()).then(checked_rules)));
    // lab's own files: its, private, not a symlink.
    for (name, path) in
        [("registry", home.registry()), ("audit log", home.audit_file()), ("devices", home.devices_file())]
    {
        let checked = std::fs::symlink_metadata(&path).ok().map(|m| {
            ownership::check_own(&path, Kind::File)?;
            if m.mode() & 0o077 != 0 {
                return Err(format!("mode {:04o}: others can read it (lab makes it 0600)", m.mode() & 0o7777));
            }
            Ok(format!("{} KiB", m.len().div_ceil(1024)))
        });
        out.push(finding::store(name, &shown(&path), checked));
    }
    // The search index: SQLite's own check, read-only (a running serve writes it in
    // WAL mode; a reader never blocks it).
    let index = home.search_index();
    out.push(finding::store("search index", &shown(&index), index.exists().then(|| search_index_check(&index))));
    // The token and the push key.
    let token = home.token_file();
    out.push(finding::token(&shown(&token), std::fs::metadata(&token).ok().map(|m| m.mode() & 0o7777)));
    let key = home.vapid_key_file();
    let key_checked = std::fs::metadata(&key).ok().map(|m| {
        crate::notify::push::Vapid::read(&key).map_err(|e| format!("{e:#}"))?;
        Ok(m.mode() & 0o7777)
    });
    out.push(finding::push_key(&shown(&key), key_checked));
    out
}

fn search_index_check(path: &Path) -> Result<String, String> {
    use rusqlite::OpenFlags;
    let db =
        rusqlite::Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
            .map_err(|e| format!("cannot open it: {e}"))?;
    let _ = db.busy_timeout(Duration::from_secs(2));
    let verdict: String =
        db.query_row("PRAGMA quick_check", [], |r| r.get(0)).map_err(|e| format!("cannot check it: {e}"))?;
    if verdict != "ok" {
        return Err(format!("damaged ({verdict}): lab rebuilds it from the transcripts if you remove it"));
    }
    let size = std::fs::metadata(path).map(|m| m.len() >> 20).unwrap_or(0);
    Ok(format!("intact, {size} MiB"))
}

fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let existing = path.ancestors().find(|p| p.exists())?;
    let c = std::ffi::CString::new(existing.as_os_str().as_bytes()).ok()?;
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs(3) on a NUL-terminated path into a zeroed struct it fills.
    (unsafe { libc::statvfs(c.as_ptr(), &mut s) } == 0).then(|| s.f_bavail as u64 * s.f_frsize as u64)
}

/// What the running serve says of itself and its hosts, through its control socket;
/// without one, whether its address is free.
pub fn serve_and_hosts(home: &Home, config: &Config) -> Vec<Finding> {
    let mut out = Vec::new();
    let addr = crate::cli::local_client::serve_addr(home).ok().flatten().unwrap_or_else(|| "127.0.0.1:7777".into());
    let token = crate::edge::token::read_token(&home.token_file()).ok().flatten();
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return vec![Finding::new("serve", "lab serve", finding::Status::Fail, e.to_string())],
    };
    let ask = |path: &str| -> Option<serde_json::Value> {
        let token = token.as_deref()?;
        let get = axum::http::Method::GET;
        rt.block_on(crate::cli::local_client::control(home, token, get, path, serde_json::Value::Null)).ok()
    };
    let info = if home.control_socket().exists() { ask("/info") } else { None };
    match info {
        Some(info) => {
            let version = info["version"].as_str().unwrap_or("?").to_string();
            out.push(finding::serve(&Serving::Running { addr: addr.clone(), version }));
            let hosts = ask("/hosts").and_then(|v| v.as_array().cloned()).unwrap_or_default();
            for h in hosts {
                let s = |k: &str| h[k].as_str().map(str::to_string);
                out.push(finding::host(
                    &s("name").unwrap_or_default(),
                    &s("state").unwrap_or_default(),
                    s("version").as_deref(),
                    s("last_error").as_deref(),
                ));
            }
        }
        None => {
            out.push(finding::serve(&match std::net::TcpListener::bind(&addr) {
                Ok(_) => Serving::Stopped { addr: addr.clone() },
                Err(e) => Serving::PortTaken { addr: addr.clone(), why: e.to_string() },
            }));
            let creds = crate::machines::hosts::HostCredentials::new(home.hosts_file());
            let mut names: Vec<String> =
                creds.list().map(|l| l.into_iter().map(|h| h.name).collect()).unwrap_or_default();
            names.extend(config.hosts.keys().cloned());
            names.sort();
            names.dedup();
            for name in names {
                out.push(
                    Finding::new(
                        "host",
                        name,
                        finding::Status::Info,
                        "not checked: only a running lab serve reaches hosts",
                    )
                    .fix("start lab serve, then run lab doctor again"),
                );
            }
        }
    }
    out
}

/// bubblewrap: on PATH, and a jail made here (`bwrap … true`).
pub fn sandbox(config: &Config) -> Finding {
    let wanted = config.sandbox.default.as_deref() == Some("bwrap");
    let path = std::env::var_os("PATH");
    let Some(bwrap) = find_program(Path::new("bwrap"), path.as_deref()) else {
        return finding::bwrap(wanted, None, None);
    };
    let trial = output_of(
        &bwrap,
        &["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--die-with-parent", "true"],
    )
    .map(|_| ());
    finding::bwrap(wanted, Some(&bwrap.display().to_string()), Some(trial))
}
