//! `lab doctor [--json]`: checks what lab needs and explains each problem with the
//! one line that fixes it — tmux, each agent (found, version against the release lab's
//! tests pin, logged in or not), the provider components (loaded, or refused and why), lab's home
//! (ownership, free space, its files intact), the token, lab serve (running, or its
//! address free), each host (through the running serve), bubblewrap, the push key.
//!
//! Exit status 1 when a check fails (a warning does not fail); `--json` prints
//! `{"ok", "failed", "checks": [{"area", "subject", "status", "detail", "fix"?}]}`.
//! Read-only: it changes nothing it looks at ([`probe`]); the verdicts are
//! [`finding`]'s pure functions.

pub mod finding;
pub mod probe;

use crate::store::config::Config;
use crate::store::paths::{resolve_home, Home};
use finding::{Finding, Status};
use std::io::Write;
use std::path::PathBuf;

/// Every check, in the order they are shown.
pub fn findings(home: &Home) -> Vec<Finding> {
    let config = Config::load(&home.config_file()).map_err(|e| format!("{e:#}"));
    let usable = config.clone().unwrap_or_default();
    let mut out = vec![probe::tmux()];
    out.extend(probe::providers_and_agents(home, &usable));
    out.extend(probe::home(home, &config));
    out.extend(probe::serve_and_hosts(home, &usable));
    out.push(probe::sandbox(&usable));
    const AREAS: [&str; 8] = ["tmux", "provider", "agent", "home", "serve", "host", "sandbox", "push"];
    out.sort_by_key(|f| AREAS.iter().position(|a| *a == f.area).unwrap_or(AREAS.len()));
    out
}

/// The report for a person: one line a check, its fix under it.
pub fn render(findings: &[Finding], out: &mut dyn Write) -> std::io::Result<()> {
    let mut area = "";
    for f in findings {
        if f.area != area {
            area = f.area;
            writeln!(out, "{area}")?;
        }
        let mark = match f.status {
            Status::Ok => "ok  ",
            Status::Info => "--  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        writeln!(out, "  {mark}  {}: {}", f.subject, f.detail)?;
        if let (Some(fix), true) = (&f.fix, f.status != Status::Ok) {
            writeln!(out, "        fix: {fix}")?;
        }
    }
    let failed = finding::failed(findings);
    let warned = findings.iter().filter(|f| f.status == Status::Warn).count();
    match failed {
        0 => writeln!(out, "\nlab doctor: nothing failed, {warned} warning(s)"),
        n => writeln!(out, "\nlab doctor: {n} failed, {warned} warning(s)"),
    }
}

/// `lab doctor`.
pub fn run(home: Option<PathBuf>, json: bool) -> anyhow::Result<()> {
    let home = Home::new(resolve_home(home)?);
    let found = findings(&home);
    let failed = finding::failed(&found);
    let mut stdout = std::io::stdout().lock();
    if json {
        let report = serde_json::json!({"ok": failed == 0, "failed": failed, "home": home.root, "checks": found});
        writeln!(stdout, "{report}")?;
    } else {
        render(&found, &mut stdout)?;
    }
    if failed > 0 {
        anyhow::bail!("{failed} check(s) failed");
    }
    Ok(())
}
