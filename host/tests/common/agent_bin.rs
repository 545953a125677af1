//! The real agent binaries the end-to-end suites drive. One lookup for every suite
//! (host/tests/common includes it; tools/responses-standin/tests by `#[path]`).

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The executable the environment variable `var` names (`install`, a script of the
/// project's, installs the pinned version and prints its path). When it is missing, the
/// suite is skipped with a loud note — but with `CI=true` nothing may be skipped, so it
/// fails. `what`: what needs it, for the messages ("the end-to-end tests against the
/// real codex").
pub fn agent_bin(var: &str, install: &str, what: &str) -> Option<PathBuf> {
    let bin = std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from);
    let usable = |p: &Path| p.is_file() && p.metadata().is_ok_and(|m| m.permissions().mode() & 0o111 != 0);
    if let Some(b) = bin.as_ref().filter(|b| usable(b)) {
        return Some(b.clone());
    }
    let why = match &bin {
        None => format!("{var} is not set"),
        Some(b) => format!("{var}={} is not an executable file", b.display()),
    };
    let how = format!("export {var}=$({install} | tail -n 1) (scripts/test does)");
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{why}. With CI=true {what} must run: {how}");
    }
    // Straight to the process's stderr: libtest would swallow eprintln! of a passing test.
    let _ = writeln!(
        std::io::stderr(),
        "\n************************************************************************\n\
         SKIPPED: {what} need {var}: {how}\n({why})\n\
         ************************************************************************"
    );
    None
}
