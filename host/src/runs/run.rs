//! One run: its record, its live state — the [`Tail`], changed only through
//! [`Run::update`] — its key lock, its transport and its published view ([`Snapshot`]),
//! and the [`Change`]s of its derived state that whoever listens hears of.

use super::answer::input::{self, ComposerLock};
use super::api::{AnswerProgress, RunBody, ViewBody};
use super::live::message_store::{self, MessageStore, Page};
use super::live::tailer::Tail;
use super::live::view::{Derived, RunState};
use super::providers::{Build, Pinned};
use super::registry::{Registry, RunRecord, Status};
use super::{answer::terminal_control, continuation::usage_limit, now_rfc3339, run_list, transport};
use crate::machines::terminal::Terminal;
use crate::store::paths::RunId;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{broadcast, watch, Notify};

/// What changed for subscribers: the derived view and how many messages exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub derived: Derived,
    pub message_count: usize,
    pub composer_lock: Option<ComposerLock>,
    pub answer: Option<AnswerProgress>,
    /// The run's changes in counts ([`work`]'s diff watch; null without a worktree).
    pub diff: Option<crate::worktree::diff::Summary>,
    /// The run's host is unreachable (its runner is not connected).
    pub disconnected: bool,
    /// Why the mirror of its transcript on a host stopped growing ([`mirror`]).
    pub transcript_stopped: Option<String>,
    /// The usage limit its agent hit, while that is its last word, and whether the run
    /// goes on by itself when it resets ([`usage_limit`]).
    pub usage_limit: Option<usage_limit::LimitView>,
    /// The device that has taken control of the run's terminal ([`terminal_control`]).
    pub keyboard: Option<terminal_control::Holder>,
    /// A sandboxed run's egress ([`sandboxing`]).
    pub egress: Option<crate::sandbox::egress::EgressView>,
    /// The dry-run rule that would have answered its newest prompt ([`Run::note_would_answer`]).
    pub would_answer: Option<super::api::WouldAnswer>,
}

/// A change of a run's derived view, as [`Core::changes`] reports it: whoever wants to
/// hear about state transitions of every run (the `[notify]` webhook) reads these.
#[derive(Debug, Clone)]
pub struct Change {
    pub run_id: RunId,
    pub provider: String,
    pub workdir: String,
    /// The view before; `None` for the first view of a run `lab serve` found when it
    /// started (its state was not reached while lab was watching).
    pub before: Option<Derived>,
    pub after: Derived,
    /// The answer rule that answered the prompt `after` shows (set by whoever applies
    /// the rules, before notifications): nobody is told of a prompt a rule answered.
    pub answered_by: Option<super::api::AnsweredBy>,
}

pub struct Run {
    pub id: RunId,
    pub(in crate::runs) record: Mutex<RunRecord>,
    pub(in crate::runs) tail: tokio::sync::Mutex<Tail>,
    /// Serialises everything that types into the pane (answers, messages). Owned
    /// guards: an answer's playback holds it after its POST has returned.
    pub(in crate::runs) keys: Arc<tokio::sync::Mutex<()>>,
    /// What is still owed to a run found at start-up ([`FoundAtStart`]).
    pub(in crate::runs) found: FoundAtStart,
    pub(in crate::runs) messages: Arc<MessageStore>,
    /// When someone last read the run's messages (GET or an event stream).
    pub(in crate::runs) looked_at: Mutex<std::time::Instant>,
    pub(in crate::runs) view: run_list::ViewCell<Snapshot>,
    pub(in crate::runs) wake: Notify,
    /// Its provider: the build it started with, kept until it ends.
    pub(in crate::runs) provider: Option<Pinned>,
    /// How lab reaches it, decided once when it is made ([`Run::transport`]).
    pub(in crate::runs) transport: Arc<dyn transport::Transport>,
    pub(in crate::runs) changes: broadcast::Sender<Change>,
}

/// What is still owed to a run `lab serve` found at start-up.
#[derive(Default)]
pub(in crate::runs) struct FoundAtStart {
    /// An ended run whose transcript has not been read yet: it is read when someone
    /// first looks at its chat ([`Core::ensure_loaded`]), so start-up and memory do not
    /// grow with the history of ended runs.
    pub(in crate::runs) unread: AtomicBool,
    /// The next view published is its first: it is reported with no `before` (see
    /// [`Change::before`]).
    pub(in crate::runs) first_view: AtomicBool,
}

impl Run {
    /// A run as found or created, before its first view: `starting` (or `ended`).
    pub(in crate::runs) fn new(
        rec: RunRecord,
        tail: Tail,
        pinned: Option<Pinned>,
        transport: Arc<dyn transport::Transport>,
        changes: broadcast::Sender<Change>,
        listed: broadcast::Sender<RunId>,
    ) -> Arc<Run> {
        let messages = tail.messages();
        let initial = Snapshot {
            derived: Derived {
                state: if rec.status == Status::Active { RunState::Starting } else { RunState::Ended },
                pending_dialog: None,
                blocked: None,
                spool_is_stale: false,
                turn_idle: false,
            },
            message_count: 0,
            composer_lock: None,
            disconnected: false,
            transcript_stopped: None,
            answer: None,
            diff: None,
            usage_limit: None,
            keyboard: None,
            egress: None,
            would_answer: None,
        };
        let view = run_list::ViewCell::new(initial, rec.id.clone(), listed);
        Arc::new(Run {
            id: rec.id.clone(),
            record: Mutex::new(rec),
            tail: tokio::sync::Mutex::new(tail),
            keys: Arc::new(tokio::sync::Mutex::new(())),
            messages,
            looked_at: Mutex::new(std::time::Instant::now()),
            view,
            wake: Notify::new(),
            provider: pinned,
            transport,
            changes,
            found: FoundAtStart::default(),
        })
    }

    pub fn record(&self) -> RunRecord {
        self.record.lock().unwrap().clone()
    }

    /// How lab reaches the run: where it lives and how lab speaks to it.
    pub(in crate::runs) fn transport(&self) -> &dyn transport::Transport {
        &*self.transport
    }

    /// The terminal the run's agent lives in: this machine's tmux, or its host's.
    pub fn terminal(&self) -> Arc<dyn Terminal> {
        self.transport.terminal(&self.record())
    }

    pub fn subscribe(&self) -> watch::Receiver<Snapshot> {
        self.view.subscribe()
    }

    pub fn snapshot(&self) -> Snapshot {
        self.view.borrow().clone()
    }

    pub fn body(&self) -> RunBody {
        // The view first, then the record: never both at once (publishing takes them
        // in the other order).
        let (state, answer, diff, egress) = {
            let v = self.view.borrow();
            (v.derived.state, v.answer.clone(), v.diff, v.egress.clone())
        };
        let rec = self.record.lock().unwrap();
        let mut body = RunBody::of(&rec, state, answer, diff);
        body.egress = egress;
        // A live run's: which build it uses now (an ended one's is the record's alone,
        // as listed at rest).
        if rec.status == Status::Active {
            body.provider_build = self.provider.as_ref().map(|p| Build::of(&p.facts));
        }
        body
    }

    /// The view with the messages `page` selects (all of them by default).
    pub async fn view(&self, page: &Page) -> ViewBody {
        *self.looked_at.lock().unwrap() = std::time::Instant::now();
        let snap = self.snapshot();
        // Only the messages the published state was derived from: the tailer appends
        // to the store before it publishes, and a view must never show a message next
        // to a state from before it (a tool call beside "starting").
        let count = (snap.message_count as u64).min(self.messages.len());
        let (range, more_before, more_after) = message_store::select(page, count);
        let messages = self.messages.read(range).await;
        ViewBody {
            run_id: self.id.clone(),
            state: snap.derived.state,
            pending_dialog: snap.derived.pending_dialog,
            blocked: snap.derived.blocked,
            composer_lock: snap.composer_lock,
            answer: snap.answer,
            diff: snap.diff,
            disconnected: snap.disconnected,
            transcript_stopped: snap.transcript_stopped,
            usage_limit: snap.usage_limit,
            terminal_control: snap.keyboard,
            egress: snap.egress,
            would_answer: snap.would_answer,
            more_before,
            more_after,
            messages,
        }
    }

    /// The one way to change a run's live state (the tail: its channels' facts, the
    /// answered marks, the screen, prompt-pending, ended): under the tail's lock, read
    /// the channels first if `read` says so, let `change` act on the tail, then derive
    /// the view once, save the record in `records` if it changed, and publish the view
    /// (a view equal to the one published is not sent again, and reported as a
    /// [`Change`] only when the derived state moved). Returns what `change` returned
    /// and the view.
    pub(in crate::runs) async fn update<T>(
        &self,
        records: &Registry,
        read: Read,
        change: impl AsyncFnOnce(&mut Tail) -> T,
    ) -> (T, Derived) {
        let mut tail = self.tail.lock().await;
        if read == Read::Channels {
            tail.read().await;
        }
        let out = change(&mut tail).await;
        let derived = tail.derive().await;
        self.save_record(records, &tail);
        // Still under the lock: views are published in the order they were derived.
        self.publish(&tail, derived.clone());
        drop(tail);
        (out, derived)
    }

    /// Save the run's record if the live state taught it something
    /// ([`RunRecord::take_live_facts`]); under the tail's lock, so the record says
    /// `ended` before the view does.
    pub(in crate::runs) fn save_record(&self, records: &Registry, tail: &Tail) {
        if let Some(rec) = self.take_record_changes(tail) {
            if let Err(e) = records.put(&rec) {
                tracing::error!(run = %self.id, error = %e, "could not save the run's record");
            }
        }
    }

    /// The run's record, if the live state taught it something (kept in memory now;
    /// the caller saves it).
    pub(in crate::runs) fn take_record_changes(&self, tail: &Tail) -> Option<RunRecord> {
        let mut rec = self.record.lock().unwrap();
        let live = rec.take_live_facts(tail.session_id.as_deref(), tail.transcript_path(), tail.ended, now_rfc3339);
        let remote = rec.take_remote_transcript(tail.transcript_elsewhere());
        let changed = (live || remote).then(|| rec.clone());
        if changed.is_some() {
            self.view.touch();
        }
        changed
    }

    /// Publish the view derived from `tail`, with the composer lock that follows from it
    /// ([`input::composer_lock`]: the open tool call, the first prompt still to type).
    pub(in crate::runs) fn publish(&self, tail: &Tail, derived: Derived) {
        let message_count = tail.message_count();
        let composer_lock = input::composer_lock(&derived, tail.open_call(), tail.prompt_pending);
        let usage_limit =
            tail.usage_limit().map(|l| usage_limit::view(l, self.record.lock().unwrap().resume_after_limit.as_ref()));
        self.view.send_if_modified(|cur| {
            // The answer's progress is kept where it is ([`Run::update_answer`]).
            let snap = Snapshot {
                derived,
                message_count,
                // A device at the terminal locks the composer before anything else.
                composer_lock: cur.keyboard.as_ref().map(terminal_control::lock).or(composer_lock),
                keyboard: cur.keyboard.clone(),
                answer: cur.answer.clone(),
                diff: cur.diff,
                disconnected: cur.disconnected,
                transcript_stopped: cur.transcript_stopped.clone(),
                usage_limit,
                egress: cur.egress.clone(),
                would_answer: cur.would_answer.clone(),
            };
            if *cur == snap {
                return false;
            }
            let found_at_start = self.found.first_view.swap(false, Ordering::SeqCst);
            if found_at_start || cur.derived != snap.derived {
                let (provider, workdir) = {
                    let r = self.record.lock().unwrap();
                    (r.provider.clone(), r.workdir.clone())
                };
                // Never blocks; an error only means nobody listens.
                let _ = self.changes.send(Change {
                    run_id: self.id.clone(),
                    provider,
                    workdir,
                    before: (!found_at_start).then(|| cur.derived.clone()),
                    after: snap.derived.clone(),
                    answered_by: None,
                });
            }
            *cur = snap;
            true
        });
    }

    /// Show that a dry-run rule would have answered the prompt it names (beside the
    /// view as it stands; a newer note replaces it).
    pub fn note_would_answer(&self, note: super::api::WouldAnswer) {
        self.view.send_if_modified(|cur| {
            let changed = cur.would_answer.as_ref() != Some(&note);
            cur.would_answer = Some(note);
            changed
        });
    }

    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Show whether the run's host is unreachable (beside the view as it stands).
    pub(in crate::runs) fn set_transcript_stopped(&self, why: Option<String>) {
        self.view.send_if_modified(|cur| {
            let changed = cur.transcript_stopped != why;
            cur.transcript_stopped = why;
            changed
        });
    }

    pub(in crate::runs) fn set_disconnected(&self, disconnected: bool) {
        self.view.send_if_modified(|cur| std::mem::replace(&mut cur.disconnected, disconnected) != disconnected);
    }

    /// Show a new answer's progress beside the view as it stands (the state and
    /// messages stay those last published).
    pub(in crate::runs) fn start_answer(&self, mut progress: AnswerProgress) {
        // An answer rule's ([`Core::answer_by_rule`]): named from its first view on.
        progress.answered_by = super::answer::ANSWERED_BY.try_with(Clone::clone).ok();
        self.view.send_modify(|cur| cur.answer = Some(progress));
    }

    /// Change the newest answer's progress, if it is still `tool_id`'s.
    /// Publish the run's diff summary (kept where it is by [`Run::update`]).
    pub(in crate::runs) fn set_diff(&self, diff: Option<crate::worktree::diff::Summary>) {
        self.view.send_if_modified(|cur| {
            let changed = cur.diff != diff;
            cur.diff = diff;
            changed
        });
    }

    /// Publish the run's egress ([`sandboxing`]).
    pub(in crate::runs) fn set_egress(&self, egress: Option<crate::sandbox::egress::EgressView>) {
        self.view.send_if_modified(|cur| {
            let changed = cur.egress != egress;
            cur.egress = egress;
            changed
        });
    }

    pub(in crate::runs) fn update_answer(&self, tool_id: &str, f: impl FnOnce(&mut AnswerProgress)) {
        self.view.send_if_modified(|cur| match cur.answer.as_mut() {
            Some(p) if p.tool_id == tool_id => {
                let before = p.clone();
                f(p);
                *p != before
            }
            _ => false,
        });
    }
}

/// Whether [`Run::update`] reads the run's channels before its change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::runs) enum Read {
    /// Read what changed on disk first (a fresh read: the guard, the composer lock).
    Channels,
    /// Act on the facts as they are.
    AsIs,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run's live state and the registry its record is saved in.
    struct World {
        run: Arc<Run>,
        changes: broadcast::Receiver<Change>,
        records: Registry,
        _dir: tempfile::TempDir,
    }

    fn world() -> World {
        let id = RunId::parse("r-1").unwrap();
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().to_path_buf();
        let rec = RunRecord {
            tmux_target: "=lab-r-1:".into(),
            tmux_socket: "/s".into(),
            ..RunRecord::new(id.clone(), "p", "/w", "go", &now_rfc3339())
        };
        let tail = Tail::new_inert(id.clone(), crate::store::paths::RunFiles::new(&dir, &id));
        let records = Registry::open(&dir.join("runs.redb")).unwrap();
        records.put(&rec).unwrap();
        let (changes, rx) = broadcast::channel(16);
        let tmux = crate::machines::tmux::Tmux::new(dir.join("tmux.sock"));
        let here = Arc::new(transport::tmux::TmuxRuns::on(Arc::new(tmux.clone()), tmux, dir.join("lab")));
        let run = Run::new(rec, tail, None, here, changes, broadcast::channel(16).0);
        World { run, changes: rx, records, _dir: d }
    }

    /// A change is derived and published once; an update that changes nothing
    /// publishes nothing and reports no change.
    #[tokio::test]
    async fn an_update_publishes_once_per_change_and_never_for_none() {
        let World { run, mut changes, records: r, _dir } = world();
        let mut view = run.subscribe();
        let (out, derived) = run.update(&r, Read::AsIs, async |_: &mut Tail| 7).await;
        assert_eq!((out, derived.state), (7, RunState::Starting), "an inert run with no messages yet");
        assert!(!view.has_changed().unwrap(), "the same view as the first: not sent again");
        assert!(changes.try_recv().is_err(), "nor reported");

        let (_, ended) = run.update(&r, Read::Channels, async |tail: &mut Tail| tail.ended = true).await;
        assert_eq!(ended.state, RunState::Ended);
        assert!(view.has_changed().unwrap());
        assert_eq!(run.snapshot().derived.state, RunState::Ended);
        let c = changes.try_recv().unwrap();
        assert_eq!((c.before.map(|b| b.state), c.after.state), (Some(RunState::Starting), RunState::Ended));
        assert!(changes.try_recv().is_err(), "one change, one report");
        view.borrow_and_update();
        run.update(&r, Read::Channels, async |_: &mut Tail| ()).await;
        assert!(!view.has_changed().unwrap(), "ended stays ended: nothing more sent");
    }

    /// What `change` returns comes back, an error included, and the view is still the
    /// one derived after it.
    #[tokio::test]
    async fn an_update_returns_what_the_change_returned() {
        let World { run, records: r, _dir, .. } = world();
        let (out, _): (Result<(), &str>, _) = run.update(&r, Read::AsIs, async |_: &mut Tail| Err("refused")).await;
        assert_eq!(out, Err("refused"));
        let (marked, _) = run
            .update(&r, Read::AsIs, async |tail: &mut Tail| {
                tail.mark_answered("d1");
                tail.answered().contains("d1")
            })
            .await;
        assert!(marked);
    }

    /// The record is saved when the live state taught it something (here: the end),
    /// and only then: a copy changed behind the run's back stays as it is until then.
    #[tokio::test]
    async fn an_update_saves_the_record_only_when_it_changed() {
        let World { run, records: r, _dir, .. } = world();
        let mut behind = r.get(&run.id).unwrap().unwrap();
        behind.prompt = "changed behind the run's back".into();
        r.put(&behind).unwrap();
        run.update(&r, Read::Channels, async |tail: &mut Tail| tail.mark_answered("d1")).await;
        assert_eq!(r.get(&run.id).unwrap().unwrap(), behind, "nothing the record keeps changed: not written");
        run.update(&r, Read::AsIs, async |tail: &mut Tail| tail.ended = true).await;
        let saved = r.get(&run.id).unwrap().unwrap();
        assert_eq!((saved.status, saved.prompt.as_str()), (Status::Ended, "go"), "the run's own record, ended");
        assert!(saved.ended_at.is_some());
        assert_eq!(run.record(), saved);
        assert_eq!(run.snapshot().derived.state, RunState::Ended, "and the view says so");
    }
}
