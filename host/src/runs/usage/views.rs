//! The usage the API serves, over every run lab knows: `GET /runs/{id}/usage` and
//! `GET /usage` ([`super::UsageBook`] counts; this names runs' providers).

use super::{Group, UsageRows};
use crate::runs::Runs;
use crate::store::paths::RunId;

impl Runs {
    /// The responses answered in `[from, to)` (Unix seconds), grouped.
    pub fn usage(&self, from: i64, to: i64, group: Group) -> UsageRows {
        let provider_of = |id: &RunId| -> Option<String> {
            if let Some(run) = self.lives.awake.read().unwrap().get(id) {
                return Some(run.record().provider);
            }
            self.registry.get(id).ok().flatten().map(|r| r.provider)
        };
        let book = &self.books.usage;
        UsageRows {
            rows: book.rows(from, to, group, provider_of),
            windows: book.windows(provider_of),
            prices_as_of: book.prices().as_of.clone(),
        }
    }
}
