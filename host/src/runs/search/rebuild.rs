//! A new search index (none was there, or a damaged one was moved aside) is filled
//! from every run's transcript, in the background, oldest run first: no run is lost.

use crate::runs::Runs;
use std::sync::Arc;

/// Messages read and indexed at once.
const PAGE: u64 = 1000;

impl Runs {
    /// Index every run lab knows again, from its transcript.
    pub(crate) fn spawn_reindex(self: Arc<Self>) {
        tokio::spawn(async move {
            let records = match self.registry.list() {
                Ok(r) => r,
                Err(e) => {
                    return tracing::warn!(error = %format!("{e:#}"), "the runs to index again could not be listed")
                }
            };
            let started = std::time::Instant::now();
            let (mut runs, mut messages) = (0usize, 0u64);
            for rec in records {
                let Ok(run) = self.get(rec.id.as_str()) else { continue };
                self.ensure_loaded(&run).await;
                let store = run.messages.clone();
                let mut at = 0;
                while at < store.len() {
                    let page = store.read(at..(at + PAGE).min(store.len())).await;
                    if page.is_empty() {
                        break;
                    }
                    at = page.last().map_or(at + PAGE, |m| m.seq + 1);
                    messages += page.len() as u64;
                    self.books.index(&run.id, &page);
                }
                runs += 1;
            }
            tracing::info!(runs, messages, secs = started.elapsed().as_secs_f64(), "the search index was built again");
        });
    }
}
