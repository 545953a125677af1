//! The core of `runs`: the services every part of it uses — the transports, launch,
//! the tail, the listing — handed to them by reference. What is about the set of runs
//! (which runs there are, awake or at rest) and how each is reached (the transports)
//! is [`super::Runs`]'s, which stands on a `Core`.

use super::{books, follow, usage_limit, Change};
use crate::runs::providers::Providers;
use crate::runs::registry::Registry;
use crate::store::config::Config;
use crate::store::paths::{Home, RunId};
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
    /// ([`follow::FileWatch`]).
    pub(in crate::runs) files: follow::FileWatch,
    /// What it announces: shutdown, every run's view changes.
    pub(in crate::runs) news: News,
    /// What lab keeps of runs' history besides their records: usage, search ([`books`]).
    pub(in crate::runs) books: Arc<books::Books>,
    /// The work that takes turns across runs ([`Turns`]).
    pub(in crate::runs) turns: Turns,
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
