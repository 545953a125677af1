//! Ended runs at rest: an ended run nobody looks at is its record in the registry (no
//! tail, view or message store; in memory its id and date), listed from there; a look
//! wakes it up (its chat read then), and one nobody watches for [`EVICT_AFTER`] goes
//! back to rest. Memory and start-up follow what is being looked at, not the length of
//! the history.

use super::live::tailer::Tail;
use super::live::view::RunState;
use super::registry::Status;
use super::run_list::{self, Cursor, Listed};
use super::{Read, Run, RunBody, Runs, EVICT_AFTER};
use crate::runs::Core;
use crate::store::paths::RunId;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub use crate::util::memory::give_back_freed_memory;

impl Runs {
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
                // What the runs' reading freed since, in every thread's arena, goes back
                // to the system (at 50 idle runs that is ~7 of 21 MiB of heap).
                // So does the code only the start ran (it comes back if it runs again).
                let _ = tokio::task::spawn_blocking(crate::util::memory::give_back).await;
            }
        });
    }

    /// Drop the held messages of runs unwatched for `idle`, and put the ended ones
    /// back at rest; how many runs let something go.
    pub fn evict_unwatched(&self, idle: std::time::Duration) -> usize {
        let mut n = 0;
        let awake: Vec<Arc<Run>> = self.lives.awake.read().unwrap().values().cloned().collect();
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

    /// Make an ended run at rest a [`Run`] again (its chat read when it is looked at,
    /// [`Core::ensure_loaded`]); None if there is no such run.
    pub(super) fn wake_up(&self, id: &RunId) -> Option<Arc<Run>> {
        let _turn = self.lives.moving.lock().unwrap();
        if let Some(run) = self.lives.get_awake(id) {
            return Some(run);
        }
        let created_at = self.lives.at_rest.write().unwrap().remove(id)?;
        let rec = match self.registry.get(id) {
            Ok(Some(rec)) => rec,
            Ok(None) => return None,
            Err(e) => {
                // Still at rest: a later look may read it.
                tracing::warn!(run = %id, error = %e, "cannot read the run's record");
                self.lives.at_rest.write().unwrap().insert(id.clone(), created_at);
                return None;
            }
        };
        let run = self.attach(rec, false, None);
        run.found.unread.store(true, Ordering::SeqCst);
        Some(run)
    }

    /// Put an ended run that nobody watches back at rest: its record alone stays.
    /// Whether it went to rest.
    pub(super) fn put_to_rest(&self, run: &Arc<Run>) -> bool {
        let _turn = self.lives.moving.lock().unwrap();
        let rec = run.record();
        let may_rest = rec.status == Status::Ended
            && rec.may_rest()
            && run.view.receiver_count() == 0
            && !run.transport().holds_live(&run.id);
        if !may_rest || self.lives.awake.write().unwrap().remove(&run.id).is_none() {
            return false;
        }
        if let Some(t) = &rec.transcript_path {
            self.files.transcripts.lock().unwrap().remove(Path::new(t));
        }
        self.lives.at_rest.write().unwrap().insert(rec.id, rec.created_at);
        true
    }

    /// Every run's body, as `GET /runs` lists them (oldest first), those at rest
    /// included.
    pub fn bodies(&self) -> Vec<RunBody> {
        self.bodies_of(&self.listing())
    }

    /// Every run, oldest first, those at rest included: handles only, their bodies
    /// made when asked for ([`Runs::bodies_of`]), so a long list is read and sent a
    /// page at a time.
    pub fn listing(&self) -> Vec<Listed> {
        self.positioned().into_iter().map(|(_, l)| l).collect()
    }

    /// Every run with its place in the list, oldest first.
    fn positioned(&self) -> Vec<(Cursor, Listed)> {
        let mut v: Vec<(String, Listed)> = self
            .lives
            .awake
            .read()
            .unwrap()
            .values()
            .map(|r| (r.record.lock().unwrap().created_at.clone(), Listed::Awake(r.clone())))
            .collect();
        v.extend(self.lives.at_rest.read().unwrap().iter().map(|(id, at)| (at.clone(), Listed::AtRest(id.clone()))));
        v.sort_by(|(a_at, a), (b_at, b)| a_at.cmp(b_at).then_with(|| a.id().cmp(b.id())));
        v.into_iter().map(|(at, l)| (Cursor { created_at: at, id: l.id().to_string() }, l)).collect()
    }

    /// A page of the list ([`run_list::page`]): at most `limit` runs older than
    /// `before`, newest first, and where the next page starts.
    pub fn page(&self, limit: usize, before: Option<&Cursor>) -> (Vec<RunBody>, Option<Cursor>) {
        let (listed, next) = run_list::page(&self.positioned(), limit, before);
        (self.bodies_of(&listed), next)
    }

    /// What a client following the list is sent first: the newest page, and every run
    /// not ended beyond it (what waits for the operator is never on a later page).
    pub fn list_front(&self, limit: usize) -> (Vec<RunBody>, Option<Cursor>) {
        let all = self.positioned();
        let (front, next) = run_list::page(&all, limit, None);
        let older = all.len().saturating_sub(limit);
        let live: Vec<Listed> = all[..older]
            .iter()
            .rev()
            .filter_map(|(_, l)| match l {
                Listed::Awake(r) if r.view.borrow().derived.state != RunState::Ended => Some(l.clone()),
                _ => None,
            })
            .collect();
        let mut bodies = self.bodies_of(&front);
        bodies.extend(self.bodies_of(&live));
        (bodies, next)
    }

    /// One run's list entry, as `GET /runs` shows it (None if there is no such run).
    pub fn list_entry(&self, id: &RunId) -> Option<RunBody> {
        let listed = match self.lives.awake.read().unwrap().get(id) {
            Some(r) => Listed::Awake(r.clone()),
            None => {
                self.lives.at_rest.read().unwrap().get(id)?;
                Listed::AtRest(id.clone())
            }
        };
        self.bodies_of(&[listed]).pop()
    }

    /// The bodies of `page` (a piece of [`Runs::listing`]), the records of those at
    /// rest read in one registry transaction. A run whose record cannot be read is
    /// left out (said in the log).
    pub fn bodies_of(&self, page: &[Listed]) -> Vec<RunBody> {
        let resting: Vec<&RunId> = page
            .iter()
            .filter_map(|l| match l {
                Listed::AtRest(id) => Some(id),
                Listed::Awake(_) => None,
            })
            .collect();
        let mut records = match self.registry.get_many(&resting) {
            Ok(v) => v.into_iter(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the records of runs at rest; they are not listed");
                Vec::new().into_iter()
            }
        };
        page.iter()
            .filter_map(|l| match l {
                Listed::Awake(r) => Some(self.body_of(r)),
                Listed::AtRest(_) => records.next().flatten().map(|r| {
                    let mut body = RunBody::of(&r, RunState::Ended, None, None);
                    (body.resumable, body.forkable) = super::continuation::continuable(&r, self.abilities_of(&r));
                    body
                }),
            })
            .collect()
    }
}

impl Core {
    /// Read an ended run's finished transcript if nobody has looked at it since
    /// `lab serve` started (see [`Run`]'s `unread`). Cheap once done.
    pub async fn ensure_loaded(&self, run: &Arc<Run>) {
        if !run.found.unread.load(Ordering::SeqCst) {
            return;
        }
        run.update(&self.registry, Read::AsIs, async |tail: &mut Tail| {
            if run.found.unread.swap(false, Ordering::SeqCst) {
                tail.read().await;
                // An ended chat never changes: its index is all it keeps; pages are read
                // from the transcript when asked for.
                run.messages.evict();
            }
        })
        .await;
    }
}
