//! Runs in lab's tmux on this machine: the agent in its own session, looked at and typed
//! into through the terminal seam, closed by ending its session.

use super::{Resume, Transport};
use crate::machines::terminal::{Sessions, Terminal};
use crate::machines::tmux::Tmux;
use crate::runs::api::{CreateRun, RunBody, RunError};
use crate::runs::registry::RunRecord;
use crate::runs::{Core, Run, Runs};
use futures_util::future::BoxFuture;
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
    /// Wakes the liveness loop: tmux reported a closed session ([`crate::runs::liveness`]).
    pub(in crate::runs) liveness: Notify,
}

impl TmuxRuns {
    /// Runs whose sessions are `sessions` (lab's tmux server is still named, for an
    /// ACP run's windows).
    pub(in crate::runs) fn on(sessions: Arc<dyn Sessions>, tmux: Tmux, lab_exe: PathBuf) -> TmuxRuns {
        TmuxRuns { sessions, tmux, lab_exe, liveness: Notify::new() }
    }

    /// The sessions as the terminal seam.
    pub(in crate::runs) fn terminal(&self) -> Arc<dyn Terminal> {
        self.sessions.clone()
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
        crate::runs::sandboxing::jail_program(kind).map(|_| ()).map_err(RunError::LaunchFailed)
    }

    fn launch<'a>(&'a self, runs: &'a Arc<Runs>, req: CreateRun) -> BoxFuture<'a, Result<RunBody, RunError>> {
        Box::pin(runs.create_here(req))
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
            runs.launch(rec, pinned.provider.as_ref(), &program, &files, Some(continuing)).await.map_err(|msg| {
                let _ = files.remove();
                RunError::LaunchFailed(msg)
            })
        })
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
