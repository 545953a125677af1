//! Runs. [`Runs`] is the set of runs — which there are, awake ([`Run`]) or at rest,
//! looked up, listed, started and ended as a set — and how each is reached: a
//! `Transport` per place and protocol (tmux here, tmux on another machine, an ACP
//! agent) in `transport/`, decided once per run; nothing else here asks where a run
//! lives. Both stand on the [`Core`], the services every part uses (the registry, the
//! providers, the news, the books), which is what a transport is handed; what is about
//! one run (answering it, its terminal, its work, its end) is the core's or the run's.
//! `tests/structure.rs` counts `Runs`' methods (at most 45) and keeps them out of files
//! that define types of their own.
//!
//! The map: one row per child — the set and its core first, then the transports, then
//! the rooms of what happens to one run (each room has its own map) — and
//! `tests/structure.rs` holds it and each room's complete.
//!
//! | child | what it owns |
//! |---|---|
//! | [`core`] | the services every part uses: home, config, registry, providers, news, books, turns, file watch |
//! | [`run`] | one run: its record, live state, key lock, transport and published view |
//! | [`registry`] | the runs' records on disk (redb), read a head at a time |
//! | [`start`] | start-up: stores opened, providers loaded, runs found picked up, background tasks |
//! | [`rest`] | ended runs at rest: a record until looked at, back to rest when unwatched |
//! | [`ending`] | how runs end: last read, files removed, ends saved a batch at a time |
//! | [`run_list`] | the run list as a client follows it: pages, a cursor, the list's news |
//! | [`api`] | the bodies and errors of the HTTP routes about runs |
//! | [`providers`] | the providers serving new runs, swapped while lab serves |
//! | [`transport`] | where a run lives and how lab speaks to it: tmux here, a machine's runner, ACP |
//! | [`launch`] | launching a run here and admitting a new one: its spec, environment, hooks, sandbox, worktree, first prompt |
//! | [`live`] | a run's live state as it is read: the tailer task, the transcript and hook channels, the screen, the chat's messages, the derived view, liveness, the mirror of a transcript elsewhere |
//! | [`answer`] | what lab types into a run: messages and answer plans, guarded, paced, checked on screen; who holds the terminal |
//! | [`work`] | the run's work through the API: diff, review, merge, discard |
//! | [`continuation`] | a run picked up again: resume and fork, and going on after a usage limit |
//! | [`books`] | what lab keeps of runs' history besides records: usage, search |
//! | [`usage`] | what runs cost, per response, per model |
//! | [`search`] | search across every run's messages (SQLite FTS5) |

pub mod answer;
mod api;
pub mod books;
pub mod continuation;
pub mod core;
mod ending;
pub mod launch;
pub mod live;
mod rest;
pub mod run;
pub mod search;
mod transport;
pub mod usage;
pub use crate::util::time::now_rfc3339;
pub(crate) use launch::check_spec;
pub use rest::give_back_freed_memory;
pub use run_list::Listed;
pub mod providers;
pub mod registry;
pub mod run_list;
mod start;
mod work;

pub use api::{
    AnswerFailure, AnswerProgress, AnswerState, AnsweredBy, CreateRun, RunBody, RunError, ViewBody, WouldAnswer,
};
pub use work::WorkError;

pub use self::core::{Core, Parts, Seams};
use crate::store::paths::RunId;
use providers::{Build, Pinned};
use registry::{RunRecord, Status};
use run::Read;
pub use run::{Change, Run, Snapshot};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

/// How long a run's messages stay in memory with nobody looking ([`Runs::evict_unwatched`]).
pub const EVICT_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// How many runs' ends [`Core::end_all`] saves in one registry commit.
pub const ENDS_PER_COMMIT: usize = 64;

/// How many changes a slow reader of [`Core::changes`] may fall behind before it
/// misses some (it is told how many).
const CHANGES_CAPACITY: usize = 1024;

/// Every run, and how each is reached: the set of runs (awake or at rest) and the
/// transports, on the [`Core`] of services they all use (its methods are called on
/// `Runs` as on the core: `Runs` derefs to it).
pub struct Runs {
    /// The services every part of `runs` uses ([`core`]).
    core: Arc<Core>,
    /// The runs in lab's tmux here: its server and terminal ([`transport::tmux`]).
    here: Arc<transport::tmux::TmuxRuns>,
    /// Where each run is: awake or at rest ([`Lives`]).
    lives: Lives,
    /// The ACP runs: the agents, their sessions ([`transport::acp`]).
    acp: Arc<transport::acp::AcpRuns>,
    /// The runs on other machines: their runners, their mirrors ([`transport::remote`]).
    remote: Arc<transport::remote::RemoteRuns>,
}

impl std::ops::Deref for Runs {
    type Target = Arc<Core>;
    fn deref(&self) -> &Arc<Core> {
        &self.core
    }
}

/// Where each run is: awake (a [`Run`] in memory, followed) or at rest.
#[derive(Default)]
struct Lives {
    /// The runs in memory.
    awake: RwLock<BTreeMap<RunId, Arc<Run>>>,
    /// Ended runs nobody has looked at since `lab serve` started, or for
    /// [`EVICT_AFTER`]: their id and creation date alone (the list's order); their
    /// record stays in the registry, read when listed or looked at, so memory does not
    /// grow with the history. The first [`Runs::get`] makes one a [`Run`] again
    /// ([`Runs::wake_up`]); a run is in one of the two maps, never both.
    at_rest: RwLock<BTreeMap<RunId, String>>,
    /// Moves between `awake` and `at_rest` take turns (a lookup never sees a run in
    /// neither).
    moving: Mutex<()>,
}

impl Lives {
    /// A run that is a [`Run`] now, if it is one: never one at rest (for what only
    /// concerns runs being followed: file notifications, leftovers).
    fn get_awake(&self, id: &RunId) -> Option<Arc<Run>> {
        self.awake.read().unwrap().get(id).cloned()
    }
}

impl Runs {
    /// End every open event stream (called when `lab serve` is asked to stop).
    pub async fn begin_shutdown(&self) {
        // ACP agents are lab serve's children: they go now (gone before lab serve is, so
        // the next one resumes their sessions with nothing left of them running), their
        // runs stay active.
        self.acp.detach_all().await;
        self.news.shutdown.send_replace(true);
        // The server stays up when empty (for its session-closed hook): lab stops one
        // it leaves with no session.
        self.here.sessions.shut_down();
    }

    pub fn get(&self, id: &str) -> Result<Arc<Run>, RunError> {
        let id = RunId::parse(id).ok_or(RunError::NotFound)?;
        if let Some(run) = self.lives.awake.read().unwrap().get(&id) {
            return Ok(run.clone());
        }
        self.wake_up(&id).ok_or(RunError::NotFound)
    }

    /// Every ACP agent ([`crate::agents::acp::agents::resolve`]: one owner per name),
    /// with the modes it takes (`permission_mode`), its default first.
    /// (Whether each forks sessions: as its newest start said.)
    pub fn acp_agents(&self) -> Vec<(String, crate::agents::acp::agents::AcpAgent, Vec<String>, bool)> {
        self.acp
            .agents()
            .iter()
            .map(|(name, a)| (name.clone(), a.clone(), self.acp.modes(name), self.acp.forks(name)))
            .collect()
    }

    /// How many active runs host `name` has.
    pub fn active_runs_on(&self, name: &str) -> usize {
        self.remote.runs_on(self, name).len()
    }

    /// Other machines' runners.
    pub fn hosts(&self) -> Arc<crate::machines::hosts::Hosts> {
        self.remote.hosts()
    }

    pub fn list(&self) -> Vec<Arc<Run>> {
        // The sort key once per run (not a clone of the whole record, prompt included,
        // per comparison).
        let mut v: Vec<(String, Arc<Run>)> = self
            .lives
            .awake
            .read()
            .unwrap()
            .values()
            .map(|r| (r.record.lock().unwrap().created_at.clone(), r.clone()))
            .collect();
        v.sort_by(|(a_at, a), (b_at, b)| a_at.cmp(b_at).then_with(|| a.id.cmp(&b.id)));
        v.into_iter().map(|(_, r)| r).collect()
    }

    /// Make the in-memory handle for a record. `prompt_pending`: lab has yet to type
    /// its first prompt (the composer stays locked until it has).
    /// `pinned`: the provider build it was launched with (else the one serving now).
    fn attach(&self, rec: RunRecord, prompt_pending: bool, pinned: Option<Pinned>) -> Arc<Run> {
        let transport = self.transport(&rec);
        let (pinned, mut tail) = transport.reader(self, &rec, pinned);
        transport.plan_files(self, &rec, &mut tail);
        let transcript = rec.transcript_path.as_ref().map(PathBuf::from);
        if rec.status != Status::Active {
            tail.ended = true;
        } else if transcript.is_none() && pinned.as_ref().is_some_and(|p| p.provider.dialog_hooker()) {
            // The agent names its transcript through its session-info hook (if at all).
            tail.await_session_info();
        }
        tail.prompt_pending = prompt_pending;
        let run = Run::new(rec, tail, pinned, transport, self.news.changes.clone(), self.news.listed.clone());
        if let Some(t) = transcript {
            self.files.transcripts.lock().unwrap().insert(t, run.id.clone());
        }
        self.lives.awake.write().unwrap().insert(run.id.clone(), run.clone());
        // New in the list, or back from rest (its entry as it was).
        run.view.touch();
        self.watch_egress(&run);
        run
    }
}

impl Runs {
    /// Which build each awake, active run uses, by provider name: `(run, build)`.
    pub fn builds_in_use(&self) -> BTreeMap<String, Vec<(RunId, Build)>> {
        let mut out: BTreeMap<String, Vec<(RunId, Build)>> = BTreeMap::new();
        for run in self.lives.awake.read().unwrap().values() {
            let Some(build) = run.provider.as_ref().map(|p| Build::of(&p.facts)) else { continue };
            let rec = run.record.lock().unwrap();
            if rec.status == Status::Active {
                out.entry(rec.provider.clone()).or_default().push((run.id.clone(), build));
            }
        }
        out
    }
}
