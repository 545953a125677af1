//! Liveness: learning that a run's tmux session is gone, at no cost while nothing
//! happens.
//!
//! - Fast path: the tmux server's `session-closed` hook writes [`SIGNAL_FILE`] in
//!   `runtime/` (see [`crate::machines::tmux`]); lab's file watcher sees it and wakes the loop
//!   here, which asks tmux once for all session names and ends the active runs whose
//!   session is not among them. A session closing is seen in milliseconds.
//! - Backstop: the same reconciliation runs once at start (runs whose session died
//!   while lab was down), and every [`RECONCILE_INTERVAL`] (a server killed outright
//!   runs no hook; a lost file notification). One `tmux list-sessions` per interval,
//!   whatever the number of runs.

use crate::runs::registry::Status;
use crate::runs::{Run, Runs};
use crate::store::paths::RunId;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// The file the tmux hook writes in `runtime/` when a session closes. Its name can
/// never be a run's (run ids have no `_`), so start-up's clean-up removes it as a
/// leftover and nothing mistakes it for a run's file.
pub const SIGNAL_FILE: &str = "tmux_session_closed";

/// How often the backstop reconciliation runs when tmux reports nothing.
pub const RECONCILE_INTERVAL: Duration = Duration::from_secs(15);

/// Whether a file in `runtime/` is the session-closed signal.
pub fn is_signal(file_name: &str) -> bool {
    file_name == SIGNAL_FILE
}

/// The active runs (id, tmux session name) whose session is not in `sessions`.
pub fn gone<'a>(active: &'a [(RunId, String)], sessions: &BTreeSet<String>) -> Vec<&'a RunId> {
    active.iter().filter(|(_, session)| !sessions.contains(session)).map(|(id, _)| id).collect()
}

/// Reconcile at start, then whenever tmux signals a closed session or the interval
/// passes. `found`: the active runs in lab's tmux found at start, not followed yet:
/// the first reconciliation ends those whose session is gone (their history unread)
/// and starts following the others.
pub(in crate::runs) fn spawn(runs: Arc<Runs>, found: Vec<Arc<Run>>) {
    tokio::spawn(async move {
        let sessions = runs.here.sessions.clone();
        // A server that outlived the last `lab serve` (or was started by someone
        // else) gets lab's hook again.
        match tokio::task::spawn_blocking(move || sessions.set_up()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot set up the tmux server; runs' ends are found by polling"),
            Err(e) => tracing::warn!(error = %e, "setting up the tmux server failed"),
        }
        let mut found = Some(found);
        loop {
            let why = if found.is_some() { GONE_AT_START } else { GONE };
            let listed = reconcile(&runs, why).await;
            if let Some(found) = found.take() {
                // Ended by the reconciliation, or live: followed from now on. (If tmux
                // could not be asked, followed all the same: their tailers and the next
                // reconciliation find out.)
                for run in found {
                    if !run.tail.lock().await.ended {
                        runs.clone().spawn_tailer(run, true);
                    }
                }
                if !listed {
                    tracing::debug!("the runs found at start are followed without a first look at tmux");
                }
            }
            tokio::select! {
                _ = runs.here.liveness.notified() => {}
                _ = tokio::time::sleep(RECONCILE_INTERVAL) => {}
            }
        }
    });
}

/// Why a run ended whose session closed while lab served.
const GONE: &str = "its tmux session is gone";
/// Why a run ended whose session was gone when lab serve started: it ended while lab
/// was stopped, or the machine restarted (its agent's conversation can be resumed).
const GONE_AT_START: &str =
    "its tmux session was gone when lab serve started (the agent exited while lab was stopped, or the machine restarted)";

/// End the active runs whose tmux session is gone, saying `why`: one `list-sessions` for
/// all, their ends saved in batches ([`Core::end_all`]). Whether tmux could be asked.
async fn reconcile(runs: &Arc<Runs>, why: &str) -> bool {
    // The active runs first: a run launched after the listing is not judged by it
    // (a run is registered only once its session exists).
    // Runs on other hosts: their runner reports their end.
    let active: Vec<Arc<Run>> = runs
        .list()
        .into_iter()
        .filter(|r| {
            let rec = r.record();
            rec.status == Status::Active && runs.transport(&rec).session_here()
        })
        .collect();
    if active.is_empty() {
        return true;
    }
    let here = runs.here.sessions.clone();
    let sessions = match tokio::task::spawn_blocking(move || here.names()).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cannot list tmux sessions; trying again later");
            return false;
        }
        Err(e) => {
            tracing::warn!(error = %e, "listing tmux sessions failed");
            return false;
        }
    };
    let pairs: Vec<(RunId, String)> = active.iter().map(|r| (r.id.clone(), r.record().tmux_target)).collect();
    let gone: BTreeSet<&RunId> = gone(&pairs, &sessions).into_iter().collect();
    let ended: Vec<Arc<Run>> = active.iter().filter(|r| gone.contains(&r.id)).cloned().collect();
    runs.end_all(&ended, why).await;
    true
}

/// A run's `failed` file as one line of text to show: read as the agent's side writes
/// it (never through a symlink, at most [`crate::store::paths::LAUNCH_FAILED_CAP`]
/// bytes), control and invisible characters made spaces. None if there is none (or
/// it cannot be read: said in the log).
pub(in crate::runs) fn last_words(path: &std::path::Path) -> Option<String> {
    let bytes = match crate::store::fsutil::read_untrusted(path, crate::store::paths::LAUNCH_FAILED_CAP) {
        Ok(b) => b?,
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "the launcher's last words cannot be read");
            return None;
        }
    };
    let text: String = String::from_utf8_lossy(&bytes)
        .chars()
        .map(|c| {
            let hidden =
                c.is_control() || crate::util::text::is_bidi_control(c) || crate::util::text::is_invisible_format(c);
            if hidden {
                ' '
            } else {
                c
            }
        })
        .collect();
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_whose_session_is_not_listed_are_gone() {
        let id = |s: &str| RunId::parse(s).unwrap();
        let active = vec![(id("r-1"), "lab-r-1".to_string()), (id("r-2"), "lab-r-2".to_string())];
        let listed = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert!(gone(&active, &listed(&["lab-r-1", "lab-r-2", "other"])).is_empty());
        assert_eq!(gone(&active, &listed(&["lab-r-2"])), [&id("r-1")]);
        assert_eq!(gone(&active, &listed(&[])), [&id("r-1"), &id("r-2")], "no server: every run ended");
        // Names are compared whole, never as prefixes.
        assert_eq!(gone(&active, &listed(&["lab-r-10", "lab-r-2"])), [&id("r-1")]);
    }

    #[test]
    fn the_signal_file_is_never_a_run_s_file() {
        assert!(is_signal(SIGNAL_FILE));
        let owner = crate::store::paths::RunFiles::owner(SIGNAL_FILE).unwrap();
        assert!(RunId::parse(owner).is_none(), "{owner} must not parse as a run id");
        assert!(crate::store::paths::runtime_file_is_garbage(SIGNAL_FILE, false, Duration::ZERO));
    }
}
