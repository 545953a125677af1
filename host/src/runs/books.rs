//! What lab keeps of runs' history besides their records, fed by their tails as they
//! read: usage ([`super::usage`]) and the search index ([`super::search`]).

use super::search::SearchIndex;
use super::usage::UsageBook;
use super::view::SeqMessage;
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
    /// What a transcript chunk said about usage.
    pub fn count(&self, run: &RunId, report: UsageReport) {
        self.usage.take(run, report);
    }

    /// A run's new messages.
    pub fn index(&self, run: &RunId, messages: &[SeqMessage]) {
        self.search.add(run, messages);
    }

    /// The run's transcript is read again from its start: its messages are numbered anew.
    pub fn renumbered(&self, run: &RunId) {
        self.search.forget(run);
    }
}
