//! Runs in lab's tmux on this machine: the agent in its own session, looked at and typed
//! into through the terminal seam, closed by ending its session.

use super::{Resume, Transport};
use crate::agents::provider::Provider;
use crate::machines::terminal::{Sessions, Terminal};
use crate::machines::tmux::Tmux;
use crate::runs::api::{CreateRun, RunBody, RunError};
use crate::runs::launch::sandboxing::{jail_program, JailSite};
use crate::runs::launch::{agent_env, checked_request, prepare, Place};
use crate::runs::registry::RunRecord;
use crate::runs::{Core, Run, Runs};
use crate::sandbox::Plan;
use crate::store::config::find_program;
use crate::store::fsutil;
use crate::store::paths::RunId;
use futures_util::future::BoxFuture;
use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::Notify;

/// What lab holds of the runs in its tmux here, and only the transports touch: lab's
/// tmux server and the same sessions as the terminal seam.
pub(in crate::runs) struct TmuxRuns {
    /// lab's tmux server, for what only tmux has (an ACP run's windows).
    pub(in crate::runs) tmux: Tmux,
    /// The runs' sessions, through the terminal seam: where they are started, listed
    /// and ended, and everything that looks at a run's screen or types into it (lab's
    /// tmux server; in tests, one in memory).
    pub(in crate::runs) sessions: Arc<dyn Sessions>,
    /// lab's own binary: what a run's pane runs (`lab agent-exec`) and its hooks call.
    pub(in crate::runs) lab_exe: PathBuf,
    /// Wakes the liveness loop: tmux reported a closed session ([`crate::runs::live::liveness`]).
    pub(in crate::runs) liveness: Notify,
}

impl TmuxRuns {
    /// Runs whose sessions are `sessions` (lab's tmux server is still named, for an
    /// ACP run's windows).
    pub(in crate::runs) fn on(sessions: Arc<dyn Sessions>, tmux: Tmux, lab_exe: PathBuf) -> TmuxRuns {
        TmuxRuns { sessions, tmux, lab_exe, liveness: Notify::new() }
    }

    /// End session `name` here, if it is still there.
    pub(in crate::runs) async fn kill_session(&self, name: String) -> Result<(), RunError> {
        end_session(self.sessions.clone(), name).await
    }
}

/// End session `name` of `sessions`, if it is still there.
pub(in crate::runs) async fn end_session(sessions: Arc<dyn Sessions>, name: String) -> Result<(), RunError> {
    tokio::task::spawn_blocking(move || sessions.end(&name))
        .await
        .map_err(|e| RunError::Internal(e.to_string()))?
        .map_err(|e| RunError::Internal(e.to_string()))
}

impl Transport for TmuxRuns {
    fn terminal(&self, _rec: &RunRecord) -> Arc<dyn Terminal> {
        self.sessions.clone()
    }

    fn can_jail(&self, kind: crate::sandbox::Kind) -> Result<(), RunError> {
        crate::runs::launch::sandboxing::jail_program(kind).map(|_| ()).map_err(RunError::LaunchFailed)
    }

    fn launch<'a>(&'a self, runs: &'a Arc<Runs>, req: CreateRun) -> BoxFuture<'a, Result<RunBody, RunError>> {
        Box::pin(self.create_here(runs, req))
    }

    fn close<'a>(&'a self, _core: &'a Core, rec: &'a RunRecord) -> BoxFuture<'a, Result<(), RunError>> {
        Box::pin(self.kill_session(rec.tmux_target.clone()))
    }

    /// Looked for with every run here, in one `list-sessions`.
    fn resume(&self, _runs: &Arc<Runs>, run: Arc<Run>) -> Resume {
        Resume::AfterLiveness(run)
    }

    fn relaunch<'a>(
        &'a self,
        runs: &'a Arc<Runs>,
        rec: &'a mut RunRecord,
        continuing: &'a crate::runs::continuation::Continuing,
    ) -> BoxFuture<'a, Result<Option<String>, RunError>> {
        Box::pin(async move {
            let pinned = runs.providers.pin(&rec.provider).map_err(RunError::NotSupported)?;
            let files = runs.files_for(rec).map_err(RunError::LaunchFailed)?;
            let program = pinned.facts.info.default_program.clone();
            self.launch(runs, rec, pinned.provider.as_ref(), &program, &files, Some(continuing)).await.map_err(|msg| {
                let _ = files.remove();
                RunError::LaunchFailed(msg)
            })
        })
    }
}

impl TmuxRuns {
    /// Launch a run in lab's tmux here.
    pub(in crate::runs) async fn create_here(&self, runs: &Arc<Runs>, req: CreateRun) -> Result<RunBody, RunError> {
        let pinned = runs.providers.pin(&req.provider).map_err(RunError::BadRequest)?;
        let facts = pinned.facts.clone();
        let prompt = checked_request(&req)?;

        let id = RunId::generate();
        let mut rec =
            runs.new_record(&id, (&facts.info.name, &req), prompt, facts.dialog_hooker, self.sessions.place());
        rec.sandbox = runs.sandbox_for(&req)?;
        rec.worktree = runs.make_worktree(&rec, &req).await?;
        let files = match runs.files_for(&rec) {
            Ok(f) => f,
            Err(msg) => return Err(runs.launch_failed(rec, msg).await),
        };

        let continuing = req.fork.as_ref().map(|f| &f.continuing);
        let launched =
            self.launch(runs, &mut rec, pinned.provider.as_ref(), &facts.info.default_program, &files, continuing);
        let typed_prompt = match launched.await {
            Ok(typed) => typed,
            Err(msg) => {
                let _ = files.remove();
                return Err(runs.launch_failed(rec, msg).await);
            }
        };
        runs.registry.put(&rec).map_err(|e| RunError::Internal(format!("recording the run: {e}")))?;
        tracing::info!(run = %id, provider = %rec.provider, workdir = %rec.workdir, "run launched");
        let run = runs.follow_launched(rec, typed_prompt, pinned);
        Ok(runs.body_of(&run))
    }

    /// Start the agent. Its argv, workdir and environment go to `lab agent-exec`
    /// through a private launch file, so tmux's command line is short and constant.
    /// A first prompt too large to be one argument (Linux's `MAX_ARG_STRLEN`) is left
    /// off the command line: the provider launches the agent without a prompt, and
    /// the prompt is returned to be typed in once the agent is ready.
    pub(in crate::runs) async fn launch(
        &self,
        runs: &Runs,
        rec: &mut RunRecord,
        provider: &dyn Provider,
        default_program: &str,
        files: &crate::store::paths::RunFiles,
        continuing: Option<&crate::runs::continuation::Continuing>,
    ) -> Result<Option<String>, String> {
        let pconf = runs.config.provider(&rec.provider);
        let path_var = std::env::var_os("PATH");
        let wanted = pconf.program.clone().unwrap_or_else(|| PathBuf::from(default_program));
        let program = find_program(&wanted, path_var.as_deref()).ok_or_else(|| {
            format!(
                "program `{}` not found{}; name it in {} as [providers.{}] program = \"/path/to/it\"",
                wanted.display(),
                if pconf.program.is_some() { "" } else { " on PATH" },
                runs.home.config_file().display(),
                rec.provider
            )
        })?;
        // A jailed agent's program as the jail has it: the file itself, in the folder
        // lent to the jail (a link to it, as npm's `.bin/` has, is not there).
        let program = match rec.sandbox.is_none() {
            true => program,
            false => std::fs::canonicalize(&program).unwrap_or(program),
        };
        let operator_env = agent_env(&rec.provider, &pconf);
        let mut env = operator_env.clone();
        // A jailed agent's HOME is the run's own (its transcript is there too).
        if !rec.sandbox.is_none() {
            env.insert("HOME".into(), runs.home.agent_home(&runs.home_of(rec)).to_string_lossy().into_owned());
        }
        let place = Place { lab_exe: self.lab_exe.clone(), files: files.clone(), env };
        let mut prepared = prepare(rec, provider, &program.to_string_lossy(), &place, continuing).await?;
        prepared.launch.sandbox = self.local_jail(runs, rec, provider, &program, &operator_env).await?;
        if let Some(doc) = &prepared.settings {
            crate::runs::launch::hook_settings::write(&runs.home.runtime_dir(), files, doc)?;
        }
        let launch_json = serde_json::to_vec(&prepared.launch).map_err(|e| e.to_string())?;
        fsutil::write_atomic(&files.launch, &launch_json, 0o600)
            .map_err(|e| format!("writing {}: {e}", files.launch.display()))?;
        let argv = place.agent_exec_argv();
        let sessions = self.sessions.clone();
        let name = rec.tmux_target.clone();
        tokio::task::spawn_blocking(move || sessions.start(&name, &argv))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("starting the agent in tmux failed: {e}"))?;
        Ok(prepared.typed_prompt)
    }
}

impl TmuxRuns {
    /// The plan of `rec`'s jail here, if it has a sandbox.
    async fn local_jail(
        &self,
        runs: &Runs,
        rec: &RunRecord,
        provider: &dyn Provider,
        program: &Path,
        env: &BTreeMap<String, String>,
    ) -> Result<Option<Plan>, String> {
        let Some(jail_program) = jail_program(rec.sandbox)? else { return Ok(None) };
        let site = JailSite {
            home: runs.home.clone(),
            lab_exe: self.lab_exe.to_string_lossy().into_owned(),
            jail_program,
            program_dir: std::fs::canonicalize(program).ok().and_then(|p| p.parent().map(Path::to_path_buf)),
            fallback_home: std::env::var("HOME").ok(),
            local: true,
        };
        Ok(runs.jail_plan(rec, Some(provider), env, &site).await?.map(|(plan, _)| plan))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real tmux on a socket of the test's own: closing a run here ends its session,
    /// and closing one whose session is gone already is no error.
    #[tokio::test]
    async fn closing_a_run_here_ends_its_session_and_a_gone_one_is_no_error() {
        let d = tempfile::Builder::new().prefix("lab-transport").tempdir_in("/tmp").unwrap();
        let here = {
            let tmux = Tmux::new(d.path().join("s"));
            TmuxRuns::on(Arc::new(tmux.clone()), tmux, PathBuf::from("/nonexistent/lab"))
        };
        struct Cleanup<'a>(&'a Tmux);
        impl Drop for Cleanup<'_> {
            fn drop(&mut self) {
                let _ = self.0.kill_session("lab-r-1");
                self.0.kill_server_if_empty();
            }
        }
        let _cleanup = Cleanup(&here.tmux);
        here.tmux.new_session("lab-r-1", &["cat".into()]).unwrap();
        assert!(here.tmux.has_session("lab-r-1"));
        here.kill_session("lab-r-1".into()).await.unwrap();
        assert!(!here.tmux.has_session("lab-r-1"));
        here.kill_session("lab-r-1".into()).await.expect("a session gone already is no error");
        let rec = super::super::tests::record("r-1", None, None);
        assert!(here.reachable(&rec).is_ok() && here.session_here(), "here: always reachable, looked for here");
    }
}
