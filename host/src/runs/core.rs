//! The core of `runs`: the services every part of it uses — the transports, launch,
//! the tail, the listing — handed to them by reference. What is about the set of runs
//! (which runs there are, awake or at rest) and how each is reached (the transports)
//! is [`super::Runs`]'s, which stands on a `Core`.

use super::api::RunError;
use super::live::tailer::Tail;
use super::providers::Pinned;
use super::registry::RunRecord;
use super::{books, continuation::usage_limit, live::follow, live::spool, Change, Run};
use crate::runs::providers::Providers;
use crate::runs::registry::Registry;
use crate::store::config::Config;
use crate::store::paths::{Home, RunId};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::{broadcast, watch};

/// The services of `runs`, one owner each.
pub struct Core {
    pub(in crate::runs) home: Home,
    pub(in crate::runs) config: Config,
    /// The providers lab serve runs with, swapped while it serves ([`super::providers`]).
    pub(in crate::runs) providers: Providers,
    /// Every run's record ([`super::registry`]).
    pub(in crate::runs) registry: Registry,
    /// The file notifications: the watcher and which run each transcript is
    /// ([`FileWatch`]).
    pub(in crate::runs) files: FileWatch,
    /// What it announces: shutdown, every run's view changes.
    pub(in crate::runs) news: News,
    /// What lab keeps of runs' history besides their records: usage, search ([`books`]).
    pub(in crate::runs) books: Arc<books::Books>,
    /// The work that takes turns across runs ([`Turns`]).
    pub(in crate::runs) turns: Turns,
}

/// What lab watches for its runs' file notifications, and only following touches: one
/// watcher (the runtime directory, and each transcript's directory once), and which
/// run each transcript is.
#[derive(Default)]
pub(in crate::runs) struct FileWatch {
    /// Transcript file → run.
    pub(in crate::runs) transcripts: std::sync::Mutex<std::collections::HashMap<std::path::PathBuf, RunId>>,
    pub(in crate::runs) watched_dirs: std::sync::Mutex<Vec<std::path::PathBuf>>,
    pub(in crate::runs) watcher: std::sync::Mutex<Option<notify::RecommendedWatcher>>,
}

/// What the runs announce to whoever listens.
pub(in crate::runs) struct News {
    /// Flips to true when `lab serve` shuts down, so open event streams end.
    pub(in crate::runs) shutdown: watch::Sender<bool>,
    /// Every run's view changes ([`Core::changes`]).
    pub(in crate::runs) changes: broadcast::Sender<Change>,
    /// Which run's list entry may have changed ([`Core::list_news`]).
    pub(in crate::runs) listed: broadcast::Sender<RunId>,
}

/// The work that takes turns across runs, so that many runs do not do it at once.
pub(in crate::runs) struct Turns {
    /// Merges and discards (they move branches of shared repositories).
    pub(in crate::runs) work: tokio::sync::Mutex<()>,
    /// The first reads of runs found at start ([`follow::CATCH_UP_AT_ONCE`] at once).
    pub(in crate::runs) catch_up: tokio::sync::Semaphore,
    /// Diff summaries, counted one at a time.
    pub(in crate::runs) diff_counting: tokio::sync::Mutex<()>,
    /// Runs waiting for a usage limit to reset before they go on ([`usage_limit`]).
    pub(in crate::runs) limit_waits: usage_limit::LimitWaits,
}

impl Default for Turns {
    fn default() -> Turns {
        Turns {
            work: tokio::sync::Mutex::new(()),
            catch_up: tokio::sync::Semaphore::new(follow::CATCH_UP_AT_ONCE),
            diff_counting: tokio::sync::Mutex::new(()),
            limit_waits: Default::default(),
        }
    }
}

impl Core {
    /// Every change of any run's derived view from now on, in order per run.
    pub fn changes(&self) -> broadcast::Receiver<Change> {
        self.news.changes.subscribe()
    }

    /// The id of each run whose list entry may have changed (added, its view or its
    /// record changed), as it happens; a receiver that falls behind is told how many
    /// it missed.
    pub fn list_news(&self) -> broadcast::Receiver<RunId> {
        self.news.listed.subscribe()
    }

    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.news.shutdown.subscribe()
    }

    pub fn home(&self) -> &Home {
        &self.home
    }

    /// What lab keeps of runs' history: usage, the search index.
    pub fn books(&self) -> Arc<books::Books> {
        self.books.clone()
    }
}

/// Where the runs reach the world, when given from outside (`cli::serve::compose`):
/// tests give a terminal in memory and providers of their own.
pub struct Seams {
    /// Where runs' sessions are started, looked at and typed into.
    pub sessions: Arc<dyn crate::machines::terminal::Sessions>,
    pub providers: Providers,
}

impl Core {
    /// `POST /runs/{id}/stop`.
    pub async fn stop(self: &Arc<Self>, run: &Arc<Run>) -> Result<(), RunError> {
        run.transport().stop(self, run).await
    }

    /// Close the run's tmux session (here or on its machine), if it is still there.
    pub(in crate::runs) async fn close_session(self: &Arc<Self>, run: &Run) -> Result<(), RunError> {
        run.transport().close(self, &run.record()).await
    }
}

impl Core {
    /// How a run whose transcript its provider reads is read: the provider's tail (of
    /// the build `pinned`, else the one serving now), or an inert one (no chat) when
    /// the provider is not loaded.
    pub(in crate::runs) fn provider_reader(&self, rec: &RunRecord, pinned: Option<Pinned>) -> (Option<Pinned>, Tail) {
        let files = self.home.run_files(&rec.id);
        let transcript = rec.transcript_path.as_ref().map(PathBuf::from);
        match pinned.map_or_else(|| self.providers.pin(&rec.provider), Ok) {
            Ok(p) => {
                let terminal = Some(format!("/#/runs/{}/terminal", rec.id));
                let mut tail = Tail::new(rec.id.clone(), p.provider.clone(), transcript, files, terminal);
                tail.set_books(self.books.clone());
                (Some(p), tail)
            }
            Err(why) => {
                tracing::warn!(run = %rec.id, provider = %rec.provider, "{why}; the run's chat cannot be read");
                (None, Tail::new_inert(rec.id.clone(), files))
            }
        }
    }

    /// The plan files a run here names are read here, under its agent's directories:
    /// its workdir and the agent's home as its launch gets it (lab.toml's `env` for the
    /// provider, else lab serve's own).
    pub(in crate::runs) fn plan_files_here(&self, rec: &RunRecord, tail: &mut Tail) {
        let agent_home =
            self.config.provider(&rec.provider).env.get("HOME").cloned().or_else(|| std::env::var("HOME").ok());
        let plan_roots = spool::plan_roots(agent_home.as_deref().map(Path::new), &rec.agent_dir());
        tail.set_place(Arc::new(super::live::hook_channels::ThisMachine { plan_roots }));
    }

    /// Keep why a run went wrong in its record (shown as its `error`).
    pub(in crate::runs) fn record_error(&self, run: &Run, why: &str) {
        let rec = {
            let mut rec = run.record.lock().unwrap();
            rec.error = Some(why.to_string());
            rec.clone()
        };
        if let Err(e) = self.registry.put(&rec) {
            tracing::error!(run = %run.id, error = %e, "could not record the error");
        }
        run.view.touch();
    }
}

/// What a [`super::Runs`] is made of, opened and loaded by the composition root
/// (`cli::serve::compose`, which tests call too, with fakes): nothing in [`super::Runs::start`]
/// opens a store or loads a component.
pub struct Parts {
    pub home: Home,
    pub config: crate::store::config::Config,
    pub registry: crate::runs::registry::Registry,
    pub books: Arc<books::Books>,
    /// Says when the search index has been looked at (and whether it is to be built).
    pub index_ready: super::search::Ready,
    pub providers: crate::runs::providers::Providers,
    /// The providers' folder as it was when they were loaded (a change is loaded too).
    pub providers_seen: Vec<(String, [i64; 8])>,
    /// Where runs' sessions are started, looked at and typed into.
    pub sessions: Arc<dyn crate::machines::terminal::Sessions>,
    /// lab's tmux server, for what only tmux has (an ACP run's windows).
    pub tmux: crate::machines::tmux::Tmux,
    /// lab's own binary: what a run's pane runs and its hooks call.
    pub lab_exe: std::path::PathBuf,
    /// Other machines' runners.
    pub hosts: crate::machines::hosts::Hosts,
    /// The mirrors of transcripts on other machines.
    pub mirrors: super::live::mirror::Mirrors,
}
