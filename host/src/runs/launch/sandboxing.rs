//! A run's sandbox, from lab serve's side: which one a new run gets (its request's,
//! else lab.toml's `[sandbox] default`) and that it can be made here; the jail's
//! [`Plan`] (what its provider says its agent needs, its worktree, its hook
//! directory); its egress as the view shows it (the allowlist, what was reached and
//! refused) and as the operator edits it (`PUT /runs/{id}/egress`).

use crate::agents::provider::{CallErrorKind, Provider};
use crate::runs::api::{CreateRun, RunError};
use crate::runs::registry::{RunRecord, Status};
use crate::runs::Core;
use crate::runs::{Run, Runs};
use crate::sandbox::egress::{self, Allowlist, EgressView};
use crate::sandbox::{EgressFiles, Kind, Needs, Plan};
use crate::store::config::{find_program, SandboxConfig};
use crate::store::fsutil;
use crate::store::paths::RunFiles;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The program that makes a `kind` jail, found on lab serve's PATH (None for `none`); an
/// error that says how to install it when it is missing.
pub fn jail_program(kind: Kind) -> Result<Option<PathBuf>, String> {
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

pub use crate::worktree::jailed::git_common_dir;

pub use crate::sandbox::JailSite;

impl Runs {
    /// The sandbox a new run gets: the one it asks for, else lab.toml's default.
    pub(in crate::runs) fn sandbox_for(&self, req: &CreateRun) -> Result<Kind, RunError> {
        let asked = req.sandbox.as_deref().or(self.config.sandbox.default.as_deref()).unwrap_or("none");
        let kind = Kind::parse(asked).map_err(RunError::BadRequest)?;
        if !kind.is_none() {
            // Never a run without the sandbox it asked for.
            self.transport_for(req).can_jail(kind)?;
        }
        Ok(kind)
    }

    /// What `rec`'s jail gets at `site` (none for a run without a sandbox), and its
    /// allowlist: written here the first time (a resumed run keeps the operator's
    /// edits), for the caller to put where the proxy reads it if that is elsewhere.
    ///
    /// What the agent needs is its `provider`'s to say (None: an ACP agent, whose
    /// provider cannot say yet: its workdir, its own home, the program's folder and the
    /// hosts lab.toml's `[sandbox] allow` names).
    pub(in crate::runs) async fn jail_plan(
        &self,
        rec: &RunRecord,
        provider: Option<&dyn Provider>,
        env: &BTreeMap<String, String>,
        site: &JailSite,
    ) -> Result<Option<(Plan, Allowlist)>, String> {
        if rec.sandbox.is_none() {
            return Ok(None);
        }
        let asked = match provider {
            Some(p) => p.sandbox_needs(env.iter().map(|(k, v)| (k.clone(), v.clone())).collect()).await,
            None => Ok(Needs::default()),
        };
        let needs = match asked {
            Ok(n) => n,
            Err(e) if e.kind == CallErrorKind::Unsupported => {
                tracing::warn!(provider = %rec.provider, "the provider says nothing of what its agent needs in a sandbox (built before WIT 0.6.0): it gets its workdir and no hosts");
                Needs::default()
            }
            Err(e) => return Err(format!("the provider could not say what its agent needs in a sandbox: {e}")),
        };
        // Nothing a provider asks beyond its own state, its workdir and named hosts.
        crate::sandbox::bounds::check_needs(&needs)
            .map_err(|e| format!("the provider {} asks its sandbox for more than lab gives: {e}", rec.provider))?;
        // The operator's home, and the run's own: the agent's HOME in the jail.
        let home = PathBuf::from(env.get("HOME").cloned().or_else(|| site.fallback_home.clone()).unwrap_or("/".into()));
        let run_home = site.home.agent_home(&self.home_of(rec));
        let jail = site.home.jail_dir(&rec.id);
        let mut writable = vec![];
        // A worktree's repository read-only, what git writes there the run's own.
        let mut git = None;
        let root = match &rec.worktree {
            Some(wt) => {
                git = Some(crate::worktree::jailed::JailedGit::of(wt, &git_common_dir(wt))?);
                PathBuf::from(&wt.path)
            }
            None => PathBuf::from(&rec.workdir),
        };
        writable.push(root.clone());
        writable.push(jail.clone());
        let (mut made, mut seeds, mut lent) = (vec![run_home.clone()], vec![], vec![]);
        let s = |p: &Path| p.to_string_lossy().into_owned();
        let outside = |what: &str, p: &Path| {
            format!(
                "the provider {} asks its sandbox to {what} {}, outside the run's workdir and its own home: a sandboxed \
                 agent's state is under ~/ (unset the variable that moves it, e.g. its config folder, for a sandboxed run)",
                rec.provider,
                p.display()
            )
        };
        use crate::sandbox::bounds::{need_path, within, NeedPath};
        for w in &needs.writable {
            match need_path(w)? {
                NeedPath::State(rel) => {
                    let p = run_home.join(&rel);
                    if w.ends_with('/') {
                        made.push(p.clone());
                    } else {
                        seeds.push(crate::sandbox::Seed { from: s(&home.join(&rel)), to: s(&p) });
                    }
                    writable.push(p);
                }
                NeedPath::Absolute(p) if within(&p, &root) => writable.push(p),
                NeedPath::Absolute(p) => return Err(outside("write", &p)),
            }
        }
        let mut readable = vec![];
        for r in &needs.readable {
            match need_path(r)? {
                // The operator's file (a login), lent read-only into the run's home.
                NeedPath::State(rel) => lent.push(crate::sandbox::Bind {
                    from: s(&home.join(&rel)),
                    at: s(&run_home.join(&rel)),
                    write: false,
                }),
                NeedPath::Absolute(p) if within(&p, &root) => readable.push(p),
                NeedPath::Absolute(p) => return Err(outside("read", &p)),
            }
        }
        // The agent's program, and what it is installed with (a package's directory):
        // never a home or the machine, lent whole.
        if let Some(dir) = &site.program_dir {
            if let Some(why) = crate::sandbox::bounds::broad_workdir(dir, std::slice::from_ref(&home)) {
                return Err(format!(
                    "the agent's program is in {} ({why}): its jail would be lent all of it; install the program in \
                     a folder of its own and name it in lab.toml ([providers.{}] program)",
                    dir.display(),
                    rec.provider
                ));
            }
            readable.push(dir.clone());
        }
        let (allow_here, _) = self.home.egress_files(&rec.id);
        let list = if allow_here.exists() {
            egress::read_allow(&allow_here)
        } else {
            let entries: Vec<&String> = needs.hosts.iter().chain(&self.config.sandbox.allow).collect();
            let list = Allowlist::parse(&entries).map_err(|e| format!("the run's allowlist: {e}"))?;
            if let Some(dir) = allow_here.parent() {
                fsutil::private_dir(dir).map_err(|e| format!("making {}: {e}", dir.display()))?;
            }
            egress::write_allow(&allow_here, &list).map_err(|e| format!("writing {}: {e}", allow_here.display()))?;
            list
        };
        let masked = self.lab_inside_jail(rec, &home, &writable, &readable, site)?;
        let (allow_file, ledger_file) = site.home.egress_files(&rec.id);
        let plan = Plan {
            kind: rec.sandbox,
            program: s(&site.jail_program),
            home: s(&run_home),
            hidden: (home != run_home && home != Path::new("/")).then(|| s(&home)).into_iter().collect(),
            made: made.iter().map(|p| s(p)).collect(),
            seeds,
            writable: writable.iter().map(|p| s(p)).collect(),
            readable: readable.iter().map(|p| s(p)).collect(),
            lab_exe: site.lab_exe.clone(),
            masked: masked.iter().map(|p| s(p)).collect(),
            binds: git.as_ref().map(|g| g.binds()).unwrap_or_default().into_iter().chain(lent).collect(),
            git,
            egress: EgressFiles {
                socket: s(&jail.join("egress.sock")),
                allow: s(&allow_file),
                ledger: s(&ledger_file),
            },
            image: self.config.sandbox.image.clone(),
        };
        Ok(Some((plan, list)))
    }

    /// Whose home a sandboxed run's agent has: its own, or, for a fork of a sandboxed
    /// run, the one its conversation is in (its parent's, up the line).
    pub(in crate::runs) fn home_of(&self, rec: &RunRecord) -> crate::store::paths::RunId {
        let mut id = rec.id.clone();
        let mut parent = rec.parent.clone();
        for _ in 0..64 {
            let Some(p) = parent.and_then(|p| self.get(p.as_str()).ok()) else { break };
            let prec = p.record();
            if prec.sandbox.is_none() {
                break;
            }
            id = prec.id.clone();
            parent = prec.parent.clone();
        }
        id
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
        // Where its proxy reads it, if that is another machine.
        run.transport().put_allowlist(self, &rec, &list).await?;
        let view = EgressView::read(&allow_file, &ledger_file);
        run.set_egress(Some(view.clone()));
        Ok(view)
    }
}

impl Core {
    /// Keep a sandboxed run's egress in its view: read now, and again whenever its
    /// files change (lab's file watcher: [`Runs::read_egress`]); its jail directory here
    /// watched as the runtime directory is (its hook files are there).
    pub(in crate::runs) fn watch_egress(&self, run: &Arc<Run>) {
        let rec = run.record();
        if rec.sandbox.is_none() {
            return;
        }
        if rec.status == Status::Active && self.home.jail_dir(&rec.id).is_dir() {
            self.watch_jail(&rec);
        }
        self.read_egress(run);
    }
}

impl Core {
    /// The run's files: a sandboxed run's in a jail directory of its own (0700), made
    /// here.
    pub(in crate::runs) fn files_for(&self, rec: &RunRecord) -> Result<RunFiles, String> {
        if !rec.sandbox.is_none() {
            let dir = self.home.jail_dir(&rec.id);
            fsutil::private_dir(&dir).map_err(|e| format!("making {}: {e}", dir.display()))?;
            self.watch_jail(rec);
        }
        Ok(self.home.run_files(&rec.id))
    }

    /// Nothing of lab's inside the jail, whatever the workdir: a workdir inside lab's
    /// own files, or one too broad to jail (the machine, a home: unless lab.toml's
    /// `[sandbox] allow_broad_workdir`), is refused with why; lab's home and worktrees
    /// folder inside a bound path are masked (the mount points returned).
    fn lab_inside_jail(
        &self,
        rec: &RunRecord,
        home: &Path,
        writable: &[PathBuf],
        readable: &[PathBuf],
        site: &JailSite,
    ) -> Result<Vec<PathBuf>, String> {
        use crate::sandbox::bounds;
        // Symlinks resolved where they can be: here (a machine's paths are as given).
        let real = |p: &Path| if site.local { bounds::real(p) } else { bounds::lexical(p) };
        let worktrees = match (&self.config.runs.worktree_dir, site.local) {
            (Some(d), true) => d.clone(),
            _ => site.home.worktrees_dir(),
        };
        let lab = [real(&site.home.root), real(&worktrees)];
        if rec.worktree.is_none() {
            let workdir = real(Path::new(&rec.workdir));
            if let Some(why) = bounds::workdir_in_lab(&workdir, &lab) {
                return Err(format!("a sandboxed run cannot start there: {why}"));
            }
            if !self.config.sandbox.allow_broad_workdir {
                let homes: Vec<PathBuf> = [Some(home.to_path_buf()), site.fallback_home.as_ref().map(PathBuf::from)]
                    .into_iter()
                    .flatten()
                    .map(|h| real(&h))
                    .collect();
                if let Some(why) = bounds::broad_workdir(&workdir, &homes) {
                    return Err(format!(
                        "a sandboxed run cannot have {} as its workdir: {why}, and its jail would hand the agent all of it \
                         (every project, key and agent config there). Pick a project folder, or set \
                         `allow_broad_workdir = true` under [sandbox] in lab.toml",
                        rec.workdir
                    ));
                }
            }
        }
        let bound: Vec<bounds::Bound> =
            writable.iter().chain(readable).map(|p| bounds::Bound { at: p.clone(), real: real(p) }).collect();
        Ok(bounds::masks(&lab, &bound))
    }

    /// Watch a sandboxed run's jail directory here as the runtime directory is (its
    /// hook files are there); said in the log if it cannot be.
    fn watch_jail(&self, rec: &RunRecord) {
        if !self.watch_dir(&self.home.jail_dir(&rec.id)) {
            tracing::warn!(run = %rec.id, "cannot watch the run's jail directory: its hook files are polled");
        }
    }

    /// Read a sandboxed run's egress files into its view.
    pub(in crate::runs) fn read_egress(&self, run: &Run) {
        let rec = run.record();
        if rec.sandbox.is_none() {
            return;
        }
        let (allow_file, ledger_file) = self.home.egress_files(&rec.id);
        run.set_egress(Some(EgressView::read(&allow_file, &ledger_file)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worktree_leads_to_its_repository_s_git_directory() {
        let mut wt: crate::worktree::Worktree = serde_json::from_value(serde_json::json!({
            "path": "/wt/r-1", "branch": "lab/r-1", "base": "abc", "base_ref": null, "repo": "/repo",
            "git_dir": "/repo/.git/worktrees/r-1"
        }))
        .unwrap();
        assert_eq!(git_common_dir(&wt), PathBuf::from("/repo/.git"));
        wt.git_dir = String::new();
        assert_eq!(git_common_dir(&wt), PathBuf::from("/repo/.git"), "a record from before: the repository's");
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
