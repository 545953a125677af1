//! A new search index (none was there, a damaged one was moved aside, or an earlier
//! build did not finish) is filled from every run's transcript, in the background, one
//! run at a time: each transcript read in chunks by the same reader and parser as a
//! run's tail (the same messages, numbered the same), nothing woken, nothing held. The
//! same pass counts the usage of runs that ended before lab counted usage (the ledger
//! takes a response it has once). No run is lost: the index is marked complete only
//! when every run was read.

use crate::runs::live::message_store::parse_chunk;
use crate::runs::live::transcript::{Step, TranscriptReader};
use crate::runs::live::view::SeqMessage;
use crate::runs::Core;
use std::path::PathBuf;
use std::sync::Arc;

impl Core {
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
                let (Some(path), Ok(pinned)) = (rec.transcript_path.as_ref(), self.providers.pin(&rec.provider)) else {
                    continue;
                };
                let provider = pinned.provider;
                let mut reader = TranscriptReader::new(Some(PathBuf::from(path)));
                let mut seq = 0u64;
                loop {
                    match reader.step(&rec.id) {
                        Step::Done | Step::Restarted => break,
                        Step::Read(chunks) => {
                            for c in chunks {
                                let out = parse_chunk(provider.as_ref(), &c.bytes, None).await;
                                let msgs: Vec<SeqMessage> = out
                                    .messages
                                    .into_iter()
                                    .map(|m| {
                                        seq += 1;
                                        SeqMessage::new(seq - 1, m)
                                    })
                                    .collect();
                                self.books.index(&rec.id, &msgs);
                                let end = c.at + c.bytes.len() as u64;
                                if provider.reads_usage() && self.books.uncounted(&rec.id, end) {
                                    if let Ok(report) = provider.read_usage(c.bytes).await {
                                        self.books.count(&rec.id, end, report);
                                    }
                                }
                                // Live runs' chunks share the provider's queue: theirs go between.
                                tokio::task::yield_now().await;
                            }
                        }
                    }
                }
                messages += seq;
                runs += 1;
                if self.news.shutdown.borrow().to_owned() {
                    return;
                }
            }
            self.books.search.mark_complete();
            tracing::info!(runs, messages, secs = started.elapsed().as_secs_f64(), "the search index was built again");
        });
    }
}
