//! What lab keeps of runs' history besides their records, fed by their tails as they
//! read: usage ([`super::usage`]) and the search index ([`super::search`]).

use super::live::view::SeqMessage;
use super::search::SearchIndex;
use super::usage::UsageBook;
use crate::agents::model::UsageReport;
use crate::store::paths::RunId;
use std::sync::Arc;

pub struct Books {
    /// Tokens and cost per run.
    pub usage: UsageBook,
    /// Every run's messages, searchable.
    pub search: Arc<SearchIndex>,
}

impl Books {
    /// What a transcript chunk ending `end` bytes into the file said about usage.
    pub fn count(&self, run: &RunId, end: u64, report: UsageReport) {
        self.usage.take(run, end, report);
    }

    /// Whether a chunk ending `end` bytes into the run's transcript is yet to be asked
    /// about usage (not when the run's log says it was read that far).
    pub fn uncounted(&self, run: &RunId, end: u64) -> bool {
        end > self.usage.read_to(run)
    }

    /// A run's new messages.
    pub fn index(&self, run: &RunId, messages: &[SeqMessage]) {
        self.search.add(run, messages);
    }

    /// The run's transcript was replaced and is read again from its start: its
    /// messages are numbered anew.
    pub fn renumbered(&self, run: &RunId) {
        self.search.forget(run);
        self.usage.restarted(run);
    }
}
