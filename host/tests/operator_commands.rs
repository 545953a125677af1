//! The operator's commands around lab serve: `lab doctor` on a healthy home and on broken
//! ones (each problem named with its fix), `lab service install` (the unit verified by
//! systemd's own checker, its ExecStart line run as written), `lab completions`, `lab man`.

mod common;

use common::{wait_for, Lab, World, LAB};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// `lab doctor --json --home <home>` with `path` as PATH; its exit status and report.
fn doctor(home: &Path, path: &str, agent_home: &Path) -> (i32, Value) {
    let out = Command::new(LAB)
        .args(["doctor", "--json", "--home"])
        .arg(home)
        .env("PATH", path)
        .env("HOME", agent_home)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .env_remove("CLAUDE_CODE_OAUTH_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    });
    (out.status.code().unwrap_or(-1), report)
}

fn check<'a>(report: &'a Value, area: &str, subject: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["area"] == area && c["subject"].as_str().is_some_and(|s| s.contains(subject)))
        .unwrap_or_else(|| panic!("no {area} check of {subject}: {report:#}"))
}

fn system_path() -> String {
    std::env::var("PATH").unwrap()
}

/// A plainlog agent that answers `--version`.
fn plainlog_world() -> World {
    World::with_plainlog(
        lab::agents::components::fixtures::PLAINLOG,
        "#!/bin/sh\n[ \"$1\" = --version ] && { echo 'plain-agent 1.4.2'; exit 0; }\nsleep 30\n",
    )
}

#[test]
fn doctor_passes_on_a_healthy_home_with_lab_serve_running() {
    let w = plainlog_world();
    let lab = Lab::start(&w);
    let (code, report) = doctor(&w.home, &system_path(), &w.agent_home);
    let failed: Vec<&Value> = report["checks"].as_array().unwrap().iter().filter(|c| c["status"] == "fail").collect();
    assert_eq!((code, report["ok"].as_bool()), (0, Some(true)), "failed: {failed:#?}");
    assert_eq!(check(&report, "tmux", "tmux")["status"], "ok");
    assert_eq!(check(&report, "serve", "lab serve")["status"], "ok", "{report:#}");
    assert!(check(&report, "serve", "lab serve")["detail"]
        .as_str()
        .unwrap()
        .contains(lab.url.trim_start_matches("http://")));
    assert_eq!(check(&report, "serve", "token")["status"], "ok");
    let agent = check(&report, "agent", "plainlog");
    assert_eq!(agent["status"], "ok", "{agent}");
    assert!(agent["detail"].as_str().unwrap().starts_with("1.4.2 at "), "{agent}");
    assert_eq!(check(&report, "provider", "plainlog")["status"], "ok");
    assert_eq!(check(&report, "home", &w.home.display().to_string())["status"], "ok");
    // The human form says the same, and exits 0.
    let out = Command::new(LAB).args(["doctor", "--home"]).arg(&w.home).env("HOME", &w.agent_home).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("lab doctor: nothing failed"), "{text}");
    lab.stop();
}

#[test]
fn doctor_names_each_problem_of_a_broken_home_with_its_fix() {
    let w = plainlog_world();
    // First: a component that is not one, an agent lab.toml names that is nowhere, and a
    // table for a provider that does not exist.
    std::fs::write(w.home.join("providers/broken.wasm"), b"not a component").unwrap();
    w.write_config(
        "[providers.plainlog]\nprogram = \"/nonexistent/agent\"\n[providers.no-such-provider]\nprogram = \"/bin/true\"\n",
    );
    let (code, report) = doctor(&w.home, &system_path(), &w.agent_home);
    assert_eq!((code, report["ok"].as_bool()), (1, Some(false)), "{report:#}");
    let refused = check(&report, "provider", "broken.wasm");
    assert_eq!(refused["status"], "fail", "{refused}");
    assert!(refused["detail"].as_str().unwrap().starts_with("refused: "), "{refused}");
    assert!(refused["fix"].as_str().unwrap().contains("lab providers check"), "{refused}");
    assert_eq!(check(&report, "provider", "plainlog")["status"], "ok", "the good component still loads");
    let agent = check(&report, "agent", "plainlog");
    assert_eq!(agent["status"], "fail", "an agent lab.toml names that is nowhere: {agent}");
    assert!(agent["fix"].as_str().unwrap().contains("[providers.plainlog] program"), "{agent}");
    assert_eq!(check(&report, "provider", "[providers.no-such-provider]")["status"], "warn");
    assert_eq!(check(&report, "tmux", "tmux")["status"], "ok");

    // Then: lab's home open to everyone, and tmux not on PATH.
    std::fs::set_permissions(&w.home, std::fs::Permissions::from_mode(0o777)).unwrap();
    let empty_bin = w.dir.path().join("bin");
    std::fs::create_dir_all(&empty_bin).unwrap();
    let (code, report) = doctor(&w.home, &empty_bin.display().to_string(), &w.agent_home);
    let out = Command::new(LAB)
        .args(["doctor", "--home"])
        .arg(&w.home)
        .env("PATH", &empty_bin)
        .env("HOME", &w.agent_home)
        .output()
        .unwrap();
    std::fs::set_permissions(&w.home, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(code, 1, "{report:#}");
    let tmux = check(&report, "tmux", "tmux");
    assert_eq!(tmux["status"], "fail");
    assert!(tmux["fix"].as_str().unwrap().contains("install"), "{tmux}");
    let home = check(&report, "home", &w.home.display().to_string());
    assert_eq!(home["status"], "fail", "{home}");
    assert!(home["detail"].as_str().unwrap().contains("mode 0777"), "{home}");
    assert!(home["fix"].as_str().unwrap().contains("chmod 700"), "{home}");
    // The human form names them too, and exits 1.
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    for named in ["FAIL  tmux", "mode 0777", "fix: chmod 700", "broken.wasm", "lab doctor: "] {
        assert!(text.contains(named), "{named:?} in:\n{text}");
    }
}

/// Logged in or not, from where the provider says a login is: a key in the agent's
/// environment (lab.toml's env), or the credentials file in its HOME; a provider that
/// does not say (the SDK's default) gets "cannot tell".
#[test]
fn doctor_says_whether_each_agent_is_logged_in() {
    let w = plainlog_world();
    let agent = w.dir.path().join("claude");
    std::fs::write(&agent, "#!/bin/sh\necho '2.1.332 (Claude Code)'\n").unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let plain = std::fs::read_to_string(w.home.join("lab.toml")).unwrap();
    let config = |extra: &str| {
        w.write_config(&format!("{plain}[providers.claude-code]\nprogram = {:?}\n{extra}", agent.display().to_string()))
    };
    let login = |report: &Value| check(report, "agent", "claude-code login").clone();
    // Nothing: not logged in, with the provider's how-to.
    config("");
    let (_, report) = doctor(&w.home, &system_path(), &w.agent_home);
    let l = login(&report);
    assert_eq!(l["status"], "warn", "{l}");
    assert!(l["detail"].as_str().unwrap().contains("not logged in"), "{l}");
    assert!(l["fix"].as_str().unwrap().contains("ANTHROPIC_API_KEY"), "{l}");
    assert_eq!(check(&report, "agent", "plainlog login")["status"], "info", "the SDK's default: cannot tell");
    // A key in lab.toml's env for it.
    config("env = { ANTHROPIC_API_KEY = \"sk-test\" }\n");
    let (_, report) = doctor(&w.home, &system_path(), &w.agent_home);
    assert_eq!(login(&report)["detail"], "logged in (ANTHROPIC_API_KEY)");
    // The credentials file a login leaves in the agent's HOME.
    config("");
    std::fs::create_dir_all(w.agent_home.join(".claude")).unwrap();
    std::fs::write(w.agent_home.join(".claude/.credentials.json"), "{\"claudeAiOauth\":{}}").unwrap();
    let (code, report) = doctor(&w.home, &system_path(), &w.agent_home);
    assert_eq!(login(&report)["detail"], "logged in (~/.claude/.credentials.json)");
    assert_eq!(check(&report, "agent", "claude-code")["status"], "ok", "2.1.332 is the pinned release");
    assert_eq!(code, 0, "{report:#}");
}

#[test]
fn doctor_names_a_host_lab_serve_cannot_reach_with_its_last_error() {
    let w = World::new();
    // Port 1 on loopback: nothing listens, ssh is refused at once.
    w.write_config("[hosts.m1]\nssh = \"lab@127.0.0.1\"\nport = 1\n");
    let lab = Lab::start(&w);
    // The fact to wait for: lab serve tried it and kept why it failed.
    wait_for(Duration::from_secs(60), "m1's first failed try", || {
        let (_, hosts) = lab.get("/hosts");
        hosts.as_array()?.iter().find(|h| h["name"] == "m1" && h["last_error"].is_string()).cloned()
    });
    let (code, report) = doctor(&w.home, &system_path(), &w.agent_home);
    assert_eq!(code, 1, "{report:#}");
    let m1 = check(&report, "host", "m1");
    assert_eq!(m1["status"], "fail", "{m1}");
    assert!(m1["detail"].as_str().unwrap().contains("last error"), "{m1}");
    assert!(m1["fix"].as_str().unwrap().contains("lab hosts remove m1"), "{m1}");
    lab.stop();
}

fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `lab service install --no-start` writes a unit systemd accepts, the completions and
/// the man page; its ExecStart line, run as written, serves; uninstall removes it all.
#[test]
fn the_service_unit_verifies_and_its_exec_start_serves() {
    let w = World::new();
    let user_home = w.dir.path().join("u");
    std::fs::create_dir_all(&user_home).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let lab_service = |args: &[&str]| {
        let mut c = Command::new(LAB);
        c.arg("service").args(args).env("HOME", &user_home).env_remove("XDG_CONFIG_HOME").env_remove("XDG_DATA_HOME");
        c
    };
    let out = run_ok(lab_service(&["install", "--no-start", "--addr", &addr, "--home"]).arg(&w.home));
    let said = String::from_utf8_lossy(&out.stderr);
    let unit_file = user_home.join(".config/systemd/user/lab.service");
    assert!(said.contains(&unit_file.display().to_string()), "{said}");
    let unit = std::fs::read_to_string(&unit_file).unwrap();
    assert_eq!(std::fs::metadata(&unit_file).unwrap().permissions().mode() & 0o777, 0o600);
    for f in [
        ".local/share/bash-completion/completions/lab",
        ".local/share/zsh/site-functions/_lab",
        ".config/fish/completions/lab.fish",
        ".local/share/man/man1/lab.1",
    ] {
        assert!(user_home.join(f).exists(), "{f}");
    }

    // systemd's own checker, as the user's manager would load it: no complaint at all.
    if let Ok(sa) = which("systemd-analyze") {
        let runtime = w.dir.path().join("xdg-runtime");
        std::fs::create_dir_all(&runtime).unwrap();
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
        let out = Command::new(sa)
            .args(["verify", "--user"])
            .arg(&unit_file)
            .env("XDG_RUNTIME_DIR", &runtime)
            // The unit's Documentation=man:lab(1) is looked up: the page install wrote.
            .env("MANPATH", user_home.join(".local/share/man"))
            .env("HOME", &user_home)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let complaints = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && complaints.trim().is_empty(), "systemd-analyze verify: {complaints}\n{unit}");
    } else if std::env::var_os("CI").is_some() {
        panic!("systemd-analyze is missing (scripts/test installs systemd)");
    }

    // The ExecStart line, as written: unquoted by systemd's rules, run with the unit's PATH.
    let exec = unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).unwrap();
    let words = systemd_words(exec);
    assert_eq!(words[1..4], ["serve", "--addr", addr.as_str()]);
    let unit_path = unit.lines().find_map(|l| l.strip_prefix("Environment=PATH=")).unwrap().to_string();
    let mut serve = Command::new(&words[0])
        .args(&words[1..])
        .env_clear()
        .env("PATH", &unit_path)
        .env("HOME", &user_home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(5)).no_proxy().build().unwrap();
    let info: Value = wait_for(Duration::from_secs(60), "the service's lab serve to answer", || {
        let token = std::fs::read_to_string(w.home.join("token")).ok()?;
        let r = client.get(format!("http://{addr}/info")).bearer_auth(token.trim()).send().ok()?;
        r.status().is_success().then(|| r.json().ok()).flatten()
    });
    assert_eq!(info["version"], env!("CARGO_PKG_VERSION"));
    common::terminate(&mut serve);

    // Status sees it; uninstall takes every file away.
    let status = lab_service(&["status"]).output().unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("installed") && text.contains(&unit_file.display().to_string()), "{text}");
    run_ok(&mut lab_service(&["uninstall"]));
    assert!(!unit_file.exists());
    assert!(!user_home.join(".local/share/man/man1/lab.1").exists());
    let status = lab_service(&["status"]).output().unwrap();
    assert_eq!(status.status.code(), Some(1), "not installed is a failure for scripts");
}

#[test]
fn a_service_refuses_what_would_break_its_unit() {
    let w = World::new();
    let user_home = w.dir.path().join("u");
    std::fs::create_dir_all(&user_home).unwrap();
    let out = Command::new(LAB)
        .args(["service", "install", "--no-start", "--env", "LAB_TEST_ODD", "--home"])
        .arg(&w.home)
        .env("HOME", &user_home)
        .env("LAB_TEST_ODD", "a\nExecStartPre=/bin/false")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line break"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!user_home.join(".config/systemd/user/lab.service").exists(), "nothing written");
}

/// Unquote a systemd command line (double quotes, `\\` and `\"` in them, `%%`, `$$`).
fn systemd_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c == ' ' {
            chars.next();
            continue;
        }
        let mut w = String::new();
        if c == '"' {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => w.extend(chars.next()),
                    c => w.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ' ' {
                    break;
                }
                w.push(c);
                chars.next();
            }
        }
        words.push(w.replace("%%", "%").replace("$$", "$"));
    }
    words
}

fn which(program: &str) -> Result<std::path::PathBuf, ()> {
    std::env::split_paths(&std::env::var_os("PATH").ok_or(())?).map(|d| d.join(program)).find(|p| p.is_file()).ok_or(())
}

#[test]
fn completions_and_the_man_page_are_printed() {
    for shell in ["bash", "zsh", "fish"] {
        let out = run_ok(Command::new(LAB).args(["completions", shell]));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("doctor") && text.contains("service"), "{shell}");
    }
    // bash loads the script and completes `lab do` to `doctor`.
    let script = run_ok(Command::new(LAB).args(["completions", "bash"])).stdout;
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), script).unwrap();
    let probe = format!(
        "source {}; COMP_WORDS=(lab do); COMP_CWORD=1; COMP_LINE='lab do'; COMP_POINT=6; _lab lab do lab; echo \"${{COMPREPLY[@]}}\"",
        file.path().display()
    );
    let out = run_ok(Command::new("bash").args(["--norc", "-c", &probe]));
    assert!(String::from_utf8_lossy(&out.stdout).split_whitespace().any(|w| w == "doctor"), "{:?}", out);
    let page = run_ok(Command::new(LAB).arg("man")).stdout;
    let page = String::from_utf8_lossy(&page);
    assert!(page.contains(".TH lab 1") && page.contains("LAB DOCTOR"), "{}", &page[..300.min(page.len())]);
    let odd = Command::new(LAB).args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(odd.status.code(), Some(2), "an unknown shell is a usage error");
    assert!(String::from_utf8_lossy(&odd.stderr).contains("bash"), "it lists the shells it knows");
}
