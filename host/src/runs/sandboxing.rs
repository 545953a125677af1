//! A run's sandbox, from lab serve's side: which one a new run gets (its request's,
//! else lab.toml's `[sandbox] default`) and that it can be made here; the jail's
//! [`Plan`] (what its provider says its agent needs, its worktree, its hook
//! directory); its egress as the view shows it (the allowlist, what was reached and
//! refused) and as the operator edits it (`PUT /runs/{id}/egress`).

use super::api::{CreateRun, RunError};
use super::registry::{RunRecord, Status};
use super::{Run, Runs};
use crate::agents::provider::{CallErrorKind, Provider};
use crate::sandbox::egress::{self, Allowlist, EgressView};
use crate::sandbox::{EgressFiles, Kind, Needs, Plan};
use crate::store::config::{find_program, SandboxConfig};
use crate::store::fsutil;
use crate::store::paths::RunFiles;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How often a live sandboxed run's egress files are looked at (a `stat` of two).
const EGRESS_POLL: Duration = Duration::from_millis(300);

/// The program that makes a `kind` jail, found on lab serve's PATH (None for `none`); an
/// error that says how to install it when it is missing.
fn jail_program(kind: Kind) -> Result<Option<PathBuf>, String> {
    let Some(name) = kind.program() else { return Ok(None) };
    let path_var = std::env::var_os("PATH");
    find_program(Path::new(name), path_var.as_deref()).map(Some).ok_or_else(|| {
        format!(
            "the run asks for a `{}` sandbox, but `{name}` is not installed on this machine{}",
            kind.as_str(),
            if kind == Kind::Bwrap { " (apt-get install bubblewrap)" } else { "" }
        )
    })
}

/// lab.toml's `[sandbox]` checked (lab serve does not start on a bad one).
pub fn check_config(c: &SandboxConfig) -> Result<(), String> {
    if let Some(d) = &c.default {
        Kind::parse(d).map_err(|e| format!("[sandbox] default: {e}"))?;
    }
    Allowlist::parse(&c.allow).map_err(|e| format!("[sandbox] allow: {e}"))?;
    Ok(())
}

/// The repository's git directory a worktree's `.git` file leads to (`gitdir:
/// <repo>/.git/worktrees/<name>` → `<repo>/.git`): the agent's commits are written
/// there.
pub fn git_common_dir(worktree: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(worktree.join(".git")).ok()?;
    let gitdir = PathBuf::from(text.lines().find_map(|l| l.strip_prefix("gitdir: "))?.trim());
    let parent = gitdir.parent()?;
    (parent.file_name()? == "worktrees").then(|| parent.parent().map(Path::to_path_buf)).flatten()
}

impl Runs {
    /// The sandbox a new run gets: the one it asks for, else lab.toml's default.
    pub(super) fn sandbox_for(&self, req: &CreateRun) -> Result<Kind, RunError> {
        let asked = req.sandbox.as_deref().or(self.config.sandbox.default.as_deref()).unwrap_or("none");
        let kind = Kind::parse(asked).map_err(RunError::BadRequest)?;
        if let Some(why) = self.transport_for(req).no_sandbox().filter(|_| !kind.is_none()) {
            return Err(RunError::BadRequest(format!("`{}` sandbox: {why}", kind.as_str())));
        }
        // Never a run without the sandbox it asked for.
        jail_program(kind).map_err(RunError::LaunchFailed)?;
        Ok(kind)
    }

    /// The run's files: a sandboxed run's in a jail directory of its own (0700), made
    /// here.
    pub(super) fn files_for(&self, rec: &RunRecord) -> Result<RunFiles, String> {
        if !rec.sandbox.is_none() {
            let dir = self.home.jail_dir(&rec.id);
            fsutil::private_dir(&dir).map_err(|e| format!("making {}: {e}", dir.display()))?;
        }
        Ok(self.home.run_files(&rec.id))
    }

    /// What `rec`'s jail gets (none for a run without a sandbox). Its allowlist file is
    /// written the first time (a resumed run keeps the operator's edits).
    pub(super) async fn jail_plan(
        &self,
        rec: &RunRecord,
        provider: &dyn Provider,
        program: &Path,
        env: &BTreeMap<String, String>,
        files: &RunFiles,
    ) -> Result<Option<Plan>, String> {
        let Some(found) = jail_program(rec.sandbox)? else { return Ok(None) };
        let jail = files.jail.as_ref().ok_or("the run has no jail directory")?;
        let needs = match provider.sandbox_needs(env.iter().map(|(k, v)| (k.clone(), v.clone())).collect()).await {
            Ok(n) => n,
            Err(e) if e.kind == CallErrorKind::Unsupported => {
                tracing::warn!(provider = %rec.provider, "the provider says nothing of what its agent needs in a sandbox (built before WIT 0.6.0): it gets its workdir and no hosts");
                Needs::default()
            }
            Err(e) => return Err(format!("the provider could not say what its agent needs in a sandbox: {e}")),
        };
        let home = PathBuf::from(env.get("HOME").cloned().or_else(|| std::env::var("HOME").ok()).unwrap_or("/".into()));
        let mut writable = vec![];
        match &rec.worktree {
            Some(wt) => {
                writable.push(PathBuf::from(&wt.path));
                writable.extend(git_common_dir(Path::new(&wt.path)));
            }
            None => writable.push(PathBuf::from(&rec.workdir)),
        }
        writable.push(jail.clone());
        for w in &needs.writable {
            let Some(p) = crate::sandbox::expand(w, &home) else {
                tracing::warn!(provider = %rec.provider, path = %w, "not bound into the sandbox: not an absolute or ~/ path");
                continue;
            };
            if w.ends_with('/') && !p.exists() {
                std::fs::create_dir_all(&p).map_err(|e| format!("making {}: {e}", p.display()))?;
            }
            writable.push(p);
        }
        let mut readable: Vec<PathBuf> =
            needs.readable.iter().filter_map(|r| crate::sandbox::expand(r, &home)).collect();
        // The agent's program, and what it is installed with (a package's directory).
        if let Ok(real) = std::fs::canonicalize(program) {
            readable.extend(real.parent().map(Path::to_path_buf));
        }
        let (allow_file, ledger_file) = self.home.egress_files(&rec.id);
        if !allow_file.exists() {
            let entries: Vec<&String> = needs.hosts.iter().chain(&self.config.sandbox.allow).collect();
            let list = Allowlist::parse(&entries).map_err(|e| format!("the run's allowlist: {e}"))?;
            if let Some(dir) = allow_file.parent() {
                fsutil::private_dir(dir).map_err(|e| format!("making {}: {e}", dir.display()))?;
            }
            egress::write_allow(&allow_file, &list).map_err(|e| format!("writing {}: {e}", allow_file.display()))?;
        }
        let s = |p: &Path| p.to_string_lossy().into_owned();
        Ok(Some(Plan {
            kind: rec.sandbox,
            program: s(&found),
            home: s(&home),
            writable: writable.iter().map(|p| s(p)).collect(),
            readable: readable.iter().map(|p| s(p)).collect(),
            lab_exe: s(&self.here.lab_exe),
            egress: EgressFiles {
                socket: s(&jail.join("egress.sock")),
                allow: s(&allow_file),
                ledger: s(&ledger_file),
            },
            image: self.config.sandbox.image.clone(),
        }))
    }

    /// `PUT /runs/{id}/egress`: replace a sandboxed run's allowlist; its proxy goes by
    /// it from its next connection.
    pub async fn set_egress(&self, id: &str, allow: Vec<String>) -> Result<EgressView, RunError> {
        let run = self.get(id)?;
        let rec = run.record();
        if rec.sandbox.is_none() {
            return Err(RunError::BadRequest("the run has no sandbox: it reaches the network without lab".into()));
        }
        let list = Allowlist::parse(&allow).map_err(RunError::BadRequest)?;
        let (allow_file, ledger_file) = self.home.egress_files(&rec.id);
        egress::write_allow(&allow_file, &list)
            .map_err(|e| RunError::Internal(format!("writing the allowlist: {e}")))?;
        let view = EgressView::read(&allow_file, &ledger_file);
        run.set_egress(Some(view.clone()));
        Ok(view)
    }

    /// Keep a sandboxed run's egress in its view: read now, then (while it is live)
    /// again whenever its files change.
    pub(super) fn watch_egress(&self, run: &Arc<Run>) {
        let rec = run.record();
        if rec.sandbox.is_none() {
            return;
        }
        let (allow_file, ledger_file) = self.home.egress_files(&rec.id);
        run.set_egress(Some(EgressView::read(&allow_file, &ledger_file)));
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        if rec.status != Status::Active {
            return;
        }
        let run = run.clone();
        rt.spawn(async move {
            let stamp = |p: &Path| std::fs::metadata(p).ok().and_then(|m| m.modified().ok().map(|t| (t, m.len())));
            let mut seen = (stamp(&allow_file), stamp(&ledger_file));
            loop {
                tokio::time::sleep(EGRESS_POLL).await;
                let now = (stamp(&allow_file), stamp(&ledger_file));
                if now != seen {
                    seen = now;
                    run.set_egress(Some(EgressView::read(&allow_file, &ledger_file)));
                }
                if run.record().status != Status::Active {
                    break;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worktree_leads_to_its_repository_s_git_directory() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(".git"), "gitdir: /repo/.git/worktrees/r-1\n").unwrap();
        assert_eq!(git_common_dir(d.path()), Some(PathBuf::from("/repo/.git")));
        std::fs::write(d.path().join(".git"), "gitdir: /elsewhere/x\n").unwrap();
        assert_eq!(git_common_dir(d.path()), None);
    }

    #[test]
    fn the_sandbox_config_is_checked() {
        let mut c = SandboxConfig::default();
        assert_eq!(check_config(&c), Ok(()));
        c.default = Some("docker".into());
        assert!(check_config(&c).unwrap_err().contains("[sandbox] default"));
        c.default = Some("bwrap".into());
        c.allow = vec!["no-port.example.com".into()];
        assert!(check_config(&c).unwrap_err().contains("[sandbox] allow"));
    }

    #[test]
    fn a_refused_destination_since_allowed_is_no_longer_shown_refused() {
        let d = tempfile::tempdir().unwrap();
        let (a, l) = (d.path().join("a.json"), d.path().join("l.json"));
        let mut ledger = egress::Ledger::default();
        ledger.count(&egress::Dest { host: "x.y".into(), port: 1 }, false, "t");
        ledger.count(&egress::Dest { host: "z.y".into(), port: 2 }, false, "t");
        std::fs::write(&l, serde_json::to_vec(&ledger).unwrap()).unwrap();
        egress::write_allow(&a, &Allowlist::parse(&["x.y:1"]).unwrap()).unwrap();
        let v = EgressView::read(&a, &l);
        assert_eq!(v.allow, ["x.y:1"]);
        assert_eq!(v.refused.iter().map(|s| s.host.as_str()).collect::<Vec<_>>(), ["z.y"]);
    }
}
