//! `lab service install|uninstall|status|logs`: lab serve as a user service that comes
//! back after a failure, a logout and a reboot — a systemd user unit on Linux, a launchd
//! agent on macOS — with the shell completions and the man page put where shells and
//! `man` find them. The files are [`unit`]'s pure functions of a [`unit::Spec`].

pub mod unit;

use crate::store::paths::resolve_home;
use anyhow::{bail, Context};
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use unit::{Places, Spec, UNIT};

#[derive(clap::Subcommand)]
pub enum ServiceAction {
    /// Write the service (systemd user unit; launchd agent on macOS), the completions
    /// and the man page, then enable and start it.
    Install {
        /// The address lab serve listens on.
        #[arg(long, default_value = "127.0.0.1:7777")]
        addr: String,
        /// lab's home (default: as for `lab serve`).
        #[arg(long)]
        home: Option<PathBuf>,
        /// Carry this variable's current value into the service (e.g. an API key the
        /// agents need). Repeatable. The unit file is kept 0600.
        #[arg(long = "env", value_name = "NAME")]
        env: Vec<String>,
        /// Keep lab running after you log out and start it at boot (`loginctl
        /// enable-linger`): asked when on a terminal, else only with this flag.
        #[arg(long)]
        linger: bool,
        /// Only write the files; do not enable or start the service.
        #[arg(long)]
        no_start: bool,
    },
    /// Stop and disable the service and remove what `install` wrote.
    Uninstall,
    /// Whether the service is installed, enabled, running, lingering, and answering.
    Status,
    /// lab serve's log (`<home>/logs/lab.log`): the last lines, or follow it.
    Logs {
        #[arg(long)]
        home: Option<PathBuf>,
        /// How many of the last lines.
        #[arg(short = 'n', long, default_value_t = 100)]
        lines: usize,
        /// Go on printing what is written.
        #[arg(short, long)]
        follow: bool,
    },
}

fn places() -> anyhow::Result<Places> {
    let home = std::env::var_os("HOME").map(PathBuf::from).context("HOME is not set")?;
    let var = |k: &str| std::env::var_os(k).map(PathBuf::from);
    Ok(Places::new(&home, var("XDG_CONFIG_HOME").as_deref(), var("XDG_DATA_HOME").as_deref()))
}

fn macos() -> bool {
    cfg!(target_os = "macos")
}

/// Run a program, saying what it did; its failure is returned, not fatal.
fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("`{program}` could not run: {e}"))?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if out.status.success() {
        Ok(text.trim().to_string())
    } else {
        Err(format!("`{program} {}` failed: {}", args.join(" "), text.trim()))
    }
}

pub fn main(action: ServiceAction) -> anyhow::Result<()> {
    match action {
        ServiceAction::Install { addr, home, env, linger, no_start } => install(addr, home, env, linger, no_start),
        ServiceAction::Uninstall => uninstall(),
        ServiceAction::Status => status(),
        ServiceAction::Logs { home, lines, follow } => logs(home, lines, follow),
    }
}

fn install(addr: String, home: Option<PathBuf>, env: Vec<String>, linger: bool, no_start: bool) -> anyhow::Result<()> {
    let exe = std::env::current_exe().and_then(std::fs::canonicalize).context("lab's own binary")?;
    let home = resolve_home(home)?;
    let home = if home.is_absolute() { home } else { std::env::current_dir()?.join(home) };
    addr.parse::<std::net::SocketAddr>()
        .with_context(|| format!("--addr {addr:?} is not HOST:PORT (an IP address)"))?;
    let mut vars = Vec::new();
    for name in env {
        let value = std::env::var(&name).with_context(|| format!("--env {name}: it is not set here"))?;
        vars.push((name, value));
    }
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    let spec = Spec { exe: exe.clone(), addr, home, path, env: vars };
    spec.check().map_err(anyhow::Error::msg)?;
    if exe.components().any(|c| c.as_os_str() == "target") {
        eprintln!(
            "lab: note: the service runs {} — a build folder (`cargo clean` removes it). \
             `cargo install --locked --path host` puts lab in ~/.cargo/bin; install the service from there.",
            exe.display()
        );
    }
    let places = places()?;
    let (file, text) = if macos() {
        (&places.launchd_plist, unit::launchd_plist(&spec))
    } else {
        (&places.systemd_unit, unit::systemd_unit(&spec))
    };
    write_file(file, text.as_bytes(), 0o600)?;
    eprintln!("lab: wrote {}", file.display());
    write_extras(&places)?;
    if no_start {
        eprintln!("lab: not started (--no-start)");
        return Ok(());
    }
    if macos() {
        let uid = crate::store::fsutil::euid();
        let _ = run("launchctl", &["bootout", &format!("gui/{uid}"), &file.to_string_lossy()]);
        run("launchctl", &["bootstrap", &format!("gui/{uid}"), &file.to_string_lossy()]).map_err(anyhow::Error::msg)?;
        eprintln!("lab: started; it starts again at every login");
        return Ok(());
    }
    let started = run("systemctl", &["--user", "daemon-reload"])
        .and_then(|_| run("systemctl", &["--user", "enable", "--now", UNIT]));
    if let Err(why) = started {
        bail!(
            "the unit is written, but systemd's user manager did not take it: {why}\n\
             On a machine without a user session (a container, plain ssh as root), run lab serve another way, \
             or start one: `loginctl enable-linger $USER`, then `systemctl --user enable --now {UNIT}`"
        );
    }
    eprintln!("lab: {UNIT} enabled and started (`lab service status`, `lab service logs`)");
    ensure_linger(linger)
}

/// Ask for lingering (the user manager, and lab with it, running without a login).
fn ensure_linger(flag: bool) -> anyhow::Result<()> {
    let user = std::env::var("USER").or_else(|_| run("id", &["-un"])).unwrap_or_default();
    if lingering(&user) {
        return Ok(());
    }
    let asked = !flag && std::io::stdin().is_terminal() && {
        eprint!(
            "lab: keep lab running after you log out, and start it at boot? (loginctl enable-linger {user}) [y/N] "
        );
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        matches!(line.trim(), "y" | "Y" | "yes")
    };
    if flag || asked {
        run("loginctl", &["enable-linger", &user]).map_err(anyhow::Error::msg)?;
        eprintln!("lab: lingering on: lab runs without a login and starts at boot");
    } else {
        eprintln!(
            "lab: lab stops when you log out (your user manager ends). To keep it: loginctl enable-linger {user}"
        );
    }
    Ok(())
}

fn lingering(user: &str) -> bool {
    !user.is_empty() && Path::new("/var/lib/systemd/linger").join(user).exists()
}

/// The completions for bash, zsh and fish, and the man page.
fn write_extras(places: &Places) -> anyhow::Result<()> {
    use crate::cli::completions::{completions, man_page, Shell};
    for (shell, file) in [(Shell::Bash, &places.bash), (Shell::Zsh, &places.zsh), (Shell::Fish, &places.fish)] {
        write_file(file, &completions(shell), 0o644)?;
    }
    write_file(&places.man, &man_page()?, 0o644)?;
    eprintln!(
        "lab: wrote the completions ({}, {}, {}) and the man page ({}); zsh finds its file when {} is on $fpath",
        places.bash.display(),
        places.zsh.display(),
        places.fish.display(),
        places.man.display(),
        places.zsh.parent().map(|p| p.display().to_string()).unwrap_or_default()
    );
    Ok(())
}

fn write_file(path: &Path, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("making {}", dir.display()))?;
    }
    crate::store::fsutil::write_atomic(path, bytes, mode).with_context(|| format!("writing {}", path.display()))
}

fn uninstall() -> anyhow::Result<()> {
    let places = places()?;
    if macos() {
        let uid = crate::store::fsutil::euid();
        let _ = run("launchctl", &["bootout", &format!("gui/{uid}"), &places.launchd_plist.to_string_lossy()]);
    } else if places.systemd_unit.exists() {
        if let Err(why) = run("systemctl", &["--user", "disable", "--now", UNIT]) {
            eprintln!("lab: {why} (removing the files anyway)");
        }
    }
    let mut removed = 0;
    for f in [&places.systemd_unit, &places.launchd_plist, &places.bash, &places.zsh, &places.fish, &places.man] {
        match std::fs::remove_file(f) {
            Ok(()) => {
                removed += 1;
                eprintln!("lab: removed {}", f.display());
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => eprintln!("lab: {}: {e}", f.display()),
        }
    }
    if !macos() {
        let _ = run("systemctl", &["--user", "daemon-reload"]);
    }
    if removed == 0 {
        eprintln!("lab: the service was not installed");
    }
    eprintln!("lab: lingering, if you turned it on, stays: loginctl disable-linger $USER turns it off");
    Ok(())
}

fn status() -> anyhow::Result<()> {
    let places = places()?;
    let file = if macos() { &places.launchd_plist } else { &places.systemd_unit };
    let mut out = std::io::stdout().lock();
    if !file.exists() {
        writeln!(out, "installed   no ({} is absent): `lab service install`", file.display())?;
        bail!("the service is not installed");
    }
    writeln!(out, "installed   {}", file.display())?;
    let exec = std::fs::read_to_string(file).unwrap_or_default();
    if let Some(line) = exec.lines().find(|l| l.starts_with("ExecStart=")) {
        writeln!(out, "runs        {}", &line["ExecStart=".len()..])?;
    }
    if macos() {
        let uid = crate::store::fsutil::euid();
        let state = run("launchctl", &["print", &format!("gui/{uid}/{}", unit::LABEL)]);
        writeln!(out, "launchd     {}", if state.is_ok() { "loaded" } else { "not loaded" })?;
        return Ok(());
    }
    let ask = |what: &str| {
        run("systemctl", &["--user", what, UNIT]).unwrap_or_else(|e| e.lines().last().unwrap_or("").into())
    };
    writeln!(out, "enabled     {}", ask("is-enabled"))?;
    writeln!(out, "active      {}", ask("is-active"))?;
    let user = std::env::var("USER").unwrap_or_default();
    let linger = if lingering(&user) { "yes: it runs without a login" } else { "no: it stops when you log out" };
    writeln!(out, "lingering   {linger}")?;
    Ok(())
}

fn logs(home: Option<PathBuf>, lines: usize, follow: bool) -> anyhow::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let home = crate::store::paths::Home::new(resolve_home(home)?);
    let path = home.log_file();
    let mut f = std::fs::File::open(&path)
        .with_context(|| format!("{} (has lab serve run with this home?)", path.display()))?;
    // The last `lines` lines: read the tail (at most 4 MiB) and cut.
    let len = f.metadata()?.len();
    let start = len.saturating_sub(4 << 20);
    f.seek(SeekFrom::Start(start))?;
    let mut tail = Vec::new();
    f.read_to_end(&mut tail)?;
    let text = String::from_utf8_lossy(&tail);
    let all: Vec<&str> = text.lines().collect();
    let mut out = std::io::stdout().lock();
    for l in &all[all.len().saturating_sub(lines)..] {
        writeln!(out, "{l}")?;
    }
    out.flush()?;
    if !follow {
        return Ok(());
    }
    let mut pos = len;
    loop {
        std::thread::sleep(std::time::Duration::from_millis(500));
        let now = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if now < pos {
            pos = 0; // rotated or truncated: from its start
        }
        if now > pos {
            let mut f = std::fs::File::open(&path)?;
            f.seek(SeekFrom::Start(pos))?;
            let mut buf = Vec::new();
            f.take(now - pos).read_to_end(&mut buf)?;
            out.write_all(&buf)?;
            out.flush()?;
            pos = now;
        }
    }
}
