//! How runs end: their last read, their files removed, their ends recorded a batch
//! at a time, and why (with what their launcher said before its pane went, if it
//! said anything: [`super::live::liveness::last_words`]).

use super::{live::liveness, Core, Run, ENDS_PER_COMMIT};
use crate::store::paths::RunId;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Core {
    /// End a run: last read of its transcript, delete its spool, marker and settings
    /// file, record the end. Idempotent.
    pub async fn end(&self, run: &Arc<Run>, why: &str) {
        self.end_all(std::slice::from_ref(run), why).await;
    }

    /// End runs ([`Core::end`]) [`ENDS_PER_COMMIT`] at a time: each batch's ends are
    /// saved in one registry commit, before any of them is published. What a run's
    /// transcript has that its tail has not read yet is read first; a transcript never
    /// looked at since `lab serve` started (a run found dead at start) is not read at
    /// all: its chat is read when someone looks ([`Core::ensure_loaded`]). So ending
    /// costs what is new, not the run's history, and the ends of an interrupted start
    /// stay recorded batch by batch.
    pub async fn end_all(&self, runs: &[Arc<Run>], why: &str) {
        let mut runs: Vec<&Arc<Run>> = runs.iter().collect();
        // One order for the tails' locks, whoever ends more than one run.
        runs.sort_by(|a, b| a.id.cmp(&b.id));
        runs.dedup_by(|a, b| a.id == b.id);
        for batch in runs.chunks(ENDS_PER_COMMIT) {
            self.end_batch(batch, why).await;
        }
    }

    async fn end_batch(&self, batch: &[&Arc<Run>], why: &str) {
        // Under each tail's lock until the files are gone and the end is recorded: once
        // `ended` is set, the tailer publishes `ended` as soon as it gets the lock (and
        // removing the first file wakes it), so a client must not see `ended` while the
        // spool, marker or settings file still exists or `ended_at` is still unset.
        let mut ending = Vec::new();
        let mut records = Vec::new();
        for run in batch {
            let mut tail = run.tail.lock().await;
            if tail.ended {
                continue;
            }
            let read = tail.read_before_end().await;
            tail.ended = true;
            let files = self.home.run_files(&run.id);
            // What the launcher said before the pane went (the agent did not start, or a
            // jailed one exited with an error), after why the run ended.
            let reason = match liveness::last_words(&files.failed) {
                Some(said) => format!("{why}: {said}"),
                None => why.to_string(),
            };
            run.record.lock().unwrap().end_reason = Some(reason);
            if let Err(e) = files.remove() {
                tracing::warn!(run = %run.id, error = %e, "could not remove the run's files");
            }
            records.extend(run.take_record_changes(&tail));
            ending.push((*run, tail, read));
        }
        if ending.is_empty() {
            return;
        }
        // Temp files of hooks killed mid-write: nothing of the runs survives their end
        // (one look at runtime/ for the batch).
        let ids: Vec<&RunId> = ending.iter().map(|(run, _, _)| &run.id).collect();
        self.remove_runtime_files(|name, _| ids.iter().any(|id| crate::store::paths::is_temp_of(name, id)));
        if let Err(e) = self.registry.put_all(&records) {
            tracing::error!(runs = records.len(), error = %e, "could not record the runs' ends");
        }
        for (run, mut tail, read) in ending {
            if !read {
                run.found.unread.store(true, Ordering::SeqCst);
            }
            let derived = tail.derive().await;
            run.publish(&tail, derived);
            drop(tail);
            run.transport().ended(&run.id);
            tracing::info!(run = %run.id, why, "run ended");
            run.wake();
        }
    }
}
