//! Ended runs at rest: an ended run nobody looks at is its record alone (no tail, view
//! or message store), listed as such; a look wakes it up (its chat read then), and one
//! nobody watches for [`EVICT_AFTER`] goes back to rest. Memory and start-up follow what
//! is being looked at, not the length of the history.

use super::registry::{RunRecord, Status};
use super::tailer::Tail;
use super::view::RunState;
use super::{Read, Run, RunBody, Runs, EVICT_AFTER};
use crate::paths::RunId;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What an ended run at rest keeps of its record: all the list shows; its prompt
/// (up to 256 KiB, and never listed) stays in the registry, read again when the run
/// wakes up ([`Runs::wake_up`]). Never saved: a run at rest changes nothing.
pub(super) fn resting(mut rec: RunRecord) -> RunRecord {
    rec.prompt = String::new();
    rec
}

/// A run in [`Runs::listing`].
pub enum Listed {
    Awake(Arc<Run>),
    AtRest(Arc<RunRecord>),
}

impl Listed {
    pub fn id(&self) -> &RunId {
        match self {
            Listed::Awake(r) => &r.id,
            Listed::AtRest(r) => &r.id,
        }
    }

    pub fn body(&self) -> RunBody {
        match self {
            Listed::Awake(r) => r.body(),
            Listed::AtRest(r) => RunBody::of(r, RunState::Ended, None, None),
        }
    }
}

impl Runs {
    /// Read an ended run's finished transcript if nobody has looked at it since
    /// `lab serve` started (see [`Run`]'s `unread`). Cheap once done.
    pub async fn ensure_loaded(&self, run: &Arc<Run>) {
        if !run.unread.load(Ordering::SeqCst) {
            return;
        }
        run.update(&self.registry, Read::AsIs, async |tail: &mut Tail| {
            if run.unread.swap(false, Ordering::SeqCst) {
                tail.read().await;
                // An ended chat never changes: its index is all it keeps; pages are read
                // from the transcript when asked for.
                run.messages.evict();
            }
        })
        .await;
    }

    /// Every [`EVICT_AFTER`]: the runs nobody has looked at for that long (no event
    /// stream open, no page read) drop the messages they hold in memory; their index
    /// stays, so a later look reads them again from the transcript.
    pub(super) fn spawn_evictions(self: Arc<Self>) {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(EVICT_AFTER);
            tick.tick().await;
            loop {
                tick.tick().await;
                let n = self.evict_unwatched(EVICT_AFTER);
                if n > 0 {
                    tracing::debug!(runs = n, "dropped the held messages of runs nobody looks at");
                }
            }
        });
    }

    /// Drop the held messages of runs unwatched for `idle`, and put the ended ones
    /// back at rest; how many runs let something go.
    pub fn evict_unwatched(&self, idle: std::time::Duration) -> usize {
        let mut n = 0;
        let awake: Vec<Arc<Run>> = self.runs.read().unwrap().values().cloned().collect();
        for run in awake {
            let unwatched = run.view.receiver_count() == 0 && run.looked_at.lock().unwrap().elapsed() >= idle;
            if !unwatched {
                continue;
            }
            let held = run.messages.resident() > 0;
            if held {
                run.messages.evict();
            }
            if self.put_to_rest(&run) || held {
                n += 1;
            }
        }
        n
    }

    /// A run that is a [`Run`] now, if it is one: never one at rest (for what only
    /// concerns runs being followed: file notifications, leftovers).
    pub(super) fn get_awake(&self, id: &RunId) -> Option<Arc<Run>> {
        self.runs.read().unwrap().get(id).cloned()
    }

    /// Make an ended run at rest a [`Run`] again (its chat read when it is looked at,
    /// [`Runs::ensure_loaded`]); None if there is no such run.
    pub(super) fn wake_up(&self, id: &RunId) -> Option<Arc<Run>> {
        let _turn = self.moving.lock().unwrap();
        if let Some(run) = self.get_awake(id) {
            return Some(run);
        }
        let rest = self.at_rest.write().unwrap().remove(id)?;
        // The whole record again (its prompt), as the registry keeps it.
        let rec = match self.registry.get(id) {
            Ok(Some(rec)) => rec,
            Ok(None) => Arc::unwrap_or_clone(rest),
            Err(e) => {
                tracing::warn!(run = %id, error = %e, "cannot read the run's record again; its prompt is not shown");
                Arc::unwrap_or_clone(rest)
            }
        };
        let run = self.attach(rec, false);
        run.unread.store(true, Ordering::SeqCst);
        Some(run)
    }

    /// Put an ended run that nobody watches back at rest: its record alone stays.
    /// Whether it went to rest.
    pub(super) fn put_to_rest(&self, run: &Arc<Run>) -> bool {
        let _turn = self.moving.lock().unwrap();
        let rec = run.record();
        let may_rest = rec.status == Status::Ended
            && rec.worktree.as_ref().is_none_or(|w| w.discarded)
            && run.view.receiver_count() == 0
            && self.acp_session(&run.id).is_none();
        if !may_rest || self.runs.write().unwrap().remove(&run.id).is_none() {
            return false;
        }
        if let Some(t) = &rec.transcript_path {
            self.transcripts.lock().unwrap().remove(Path::new(t));
        }
        self.at_rest.write().unwrap().insert(rec.id.clone(), Arc::new(resting(rec)));
        true
    }

    /// Every run's body, as `GET /runs` lists them (oldest first), those at rest
    /// included.
    pub fn bodies(&self) -> Vec<RunBody> {
        self.listing().iter().map(Listed::body).collect()
    }

    /// Every run, oldest first, those at rest included: handles only, each body made
    /// when asked for ([`Listed::body`]), so a long list can be sent a page at a time.
    pub fn listing(&self) -> Vec<Listed> {
        let mut v: Vec<(String, Listed)> = self
            .runs
            .read()
            .unwrap()
            .values()
            .map(|r| (r.record.lock().unwrap().created_at.clone(), Listed::Awake(r.clone())))
            .collect();
        v.extend(self.at_rest.read().unwrap().values().map(|r| (r.created_at.clone(), Listed::AtRest(r.clone()))));
        v.sort_by(|(a_at, a), (b_at, b)| a_at.cmp(b_at).then_with(|| a.id().cmp(b.id())));
        v.into_iter().map(|(_, l)| l).collect()
    }
}
