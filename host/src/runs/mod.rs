//! Runs. This module owns [`Run`] (one run: its record, its live state — the
//! [`tailer::Tail`], changed only through [`Run::update`] — its key lock and its
//! published view) and [`Runs`] (every run, the registry, the providers, the file
//! watcher), with what `Runs` does to one run as a whole: start-up, lookup, the end.
//! Where a run lives and how lab speaks to it (tmux here, tmux on another machine, an
//! ACP agent) is a `Transport` each, in `transport/`: nothing else here asks.
//!
//! The map: one row per child, by part (`tests/structure.rs` holds it complete).
//!
//! | child | what it owns |
//! |---|---|
//! | [`core`] | the services every part uses: home, config, registry, providers, news, books, turns, file watch |
//! | [`registry`] | the runs' records on disk (redb), read a head at a time |
//! | [`api`] | the bodies and errors of the HTTP routes about runs |
//! | [`run_list`] | the run list as a client follows it: pages, a cursor, the list's news |
//! | [`rest`] | ended runs at rest: a record until looked at, back to rest when unwatched |
//! | [`ending`] | how runs end: last read, files removed, ends saved a batch at a time |
//! | [`liveness`] | learning that a run's tmux session is gone |
//! | [`providers`] | the providers serving new runs, swapped while lab serves |
//! | [`transport`] | where a run lives and how lab speaks to it: tmux here, a machine's runner, ACP |
//! | [`launch`] | launching a run here: spec, hooks, settings, worktree, first prompt |
//! | [`agent_env`] | the environment an agent starts with |
//! | [`agent_version`] | the agent's own version, for the operator |
//! | [`hook_settings`] | the commands the agent's hooks run, per binding |
//! | [`sandboxing`] | a run's sandbox from lab serve's side: which, its jail, its egress |
//! | [`workspace`] | where a run's worktree is and its git work is done |
//! | [`work`] | the run's work through the API: diff, review, merge, discard |
//! | [`follow`] | the tailer task per run, file notifications, screen looks, leftovers |
//! | [`tailer`] | one run's live state: its channels read, its view derived |
//! | [`transcript`] | the transcript reader, incremental |
//! | [`hook_channels`] | the spool, marker and session-info readers |
//! | [`hook_file`] | one hook file, read when it changed |
//! | [`spool`] | the spool's rules: the prompt waiting, plan files |
//! | [`screen`] | prompts read off the agent's screen |
//! | [`mirror`] | the bounded mirror of a transcript on another machine |
//! | [`message_store`] | a run's chat as seq-numbered messages, in pages |
//! | [`view`] | the run's view derived from its facts |
//! | [`answer`] | typing messages and playing answer plans, guarded |
//! | [`answer_guard`] | may lab play keys for this answer now? |
//! | [`input`] | the rules for operator text and the composer lock |
//! | [`keystrokes`] | the rules of a provider's answer plan |
//! | [`playback`] | what lab types into a terminal, paced, checked on screen |
//! | [`terminal_control`] | who holds a run's terminal |
//! | [`continuation`] | resume and fork |
//! | [`usage_limit`] | a run stopped at a usage limit, and going on when it resets |
//! | [`books`] | what lab keeps of runs' history besides records: usage, search |
//! | [`usage`] | what runs cost, per response, per model |
//! | [`search`] | search across every run's messages (SQLite FTS5) |

pub mod agent_env;
pub mod agent_version;
mod answer;
pub mod answer_guard;
mod api;
pub mod books;
mod continuation;
pub mod core;
mod ending;
mod follow;
pub mod hook_channels;
pub mod hook_file;
pub mod hook_settings;
pub mod input;
pub mod keystrokes;
mod launch;
pub mod mirror;
mod rest;
pub mod sandboxing;
pub mod search;
mod transport;
pub mod usage;
pub mod usage_limit;
pub use crate::util::time::now_rfc3339;
pub(crate) use launch::check_spec;
pub use rest::{give_back_freed_memory, Listed};
pub mod liveness;
pub mod message_store;
pub mod playback;
pub mod providers;
pub mod registry;
pub mod run_list;
pub mod screen;
pub mod spool;
pub mod tailer;
pub mod terminal_control;
pub mod transcript;
pub mod view;
mod work;
pub mod workspace;

pub use api::{AnswerFailure, AnswerProgress, AnswerState, CreateRun, RunBody, RunError, ViewBody};
pub use work::WorkError;

pub use self::core::Core;
use self::core::{News, Turns};
use crate::agents::components::{ComponentHost, Limits};
use crate::machines::terminal::Terminal;
use crate::machines::tmux::Tmux;
use crate::store::config::Config;
use crate::store::paths::{Home, RunId};
use input::ComposerLock;
use message_store::{MessageStore, Page};
use providers::{Build, Pinned, Providers};
use registry::{Registry, RunRecord, Status};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use tailer::Tail;
use tokio::sync::{broadcast, watch, Notify};
use view::{Derived, RunState};

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
}

/// A change of a run's derived view, as [`Runs::changes`] reports it: whoever wants to
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
}

/// How long a run's messages stay in memory with nobody looking ([`Runs::evict_unwatched`]).
pub const EVICT_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// How many runs' ends [`Runs::end_all`] saves in one registry commit.
pub const ENDS_PER_COMMIT: usize = 64;

/// How many changes a slow reader of [`Runs::changes`] may fall behind before it
/// misses some (it is told how many).
const CHANGES_CAPACITY: usize = 1024;

pub struct Run {
    pub id: RunId,
    record: Mutex<RunRecord>,
    tail: tokio::sync::Mutex<Tail>,
    /// Serialises everything that types into the pane (answers, messages). Owned
    /// guards: an answer's playback holds it after its POST has returned.
    keys: Arc<tokio::sync::Mutex<()>>,
    /// What is still owed to a run found at start-up ([`FoundAtStart`]).
    found: FoundAtStart,
    messages: Arc<MessageStore>,
    /// When someone last read the run's messages (GET or an event stream).
    looked_at: Mutex<std::time::Instant>,
    view: run_list::ViewCell<Snapshot>,
    wake: Notify,
    /// Its provider: the build it started with, kept until it ends.
    provider: Option<Pinned>,
    /// How lab reaches it, decided once when it is made ([`Run::transport`]).
    transport: Arc<dyn transport::Transport>,
    changes: broadcast::Sender<Change>,
}

/// What is still owed to a run `lab serve` found at start-up.
#[derive(Default)]
struct FoundAtStart {
    /// An ended run whose transcript has not been read yet: it is read when someone
    /// first looks at its chat ([`Core::ensure_loaded`]), so start-up and memory do not
    /// grow with the history of ended runs.
    unread: AtomicBool,
    /// The next view published is its first: it is reported with no `before` (see
    /// [`Change::before`]).
    first_view: AtomicBool,
}

impl Run {
    /// A run as found or created, before its first view: `starting` (or `ended`).
    fn new(
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
    pub(super) async fn update<T>(
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
    fn save_record(&self, records: &Registry, tail: &Tail) {
        if let Some(rec) = self.take_record_changes(tail) {
            if let Err(e) = records.put(&rec) {
                tracing::error!(run = %self.id, error = %e, "could not save the run's record");
            }
        }
    }

    /// The run's record, if the live state taught it something (kept in memory now;
    /// the caller saves it).
    fn take_record_changes(&self, tail: &Tail) -> Option<RunRecord> {
        let mut rec = self.record.lock().unwrap();
        let live = rec.take_live_facts(tail.session_id.as_deref(), tail.transcript_path(), tail.ended, now_rfc3339);
        let remote = rec.take_remote_transcript(tail.remote_transcript());
        let changed = (live || remote).then(|| rec.clone());
        if changed.is_some() {
            self.view.touch();
        }
        changed
    }

    /// Publish the view derived from `tail`, with the composer lock that follows from it
    /// ([`input::composer_lock`]: the open tool call, the first prompt still to type).
    fn publish(&self, tail: &Tail, derived: Derived) {
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
                });
            }
            *cur = snap;
            true
        });
    }

    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Show whether the run's host is unreachable (beside the view as it stands).
    pub(super) fn set_transcript_stopped(&self, why: Option<String>) {
        self.view.send_if_modified(|cur| {
            let changed = cur.transcript_stopped != why;
            cur.transcript_stopped = why;
            changed
        });
    }

    pub(super) fn set_disconnected(&self, disconnected: bool) {
        self.view.send_if_modified(|cur| std::mem::replace(&mut cur.disconnected, disconnected) != disconnected);
    }

    /// Show a new answer's progress beside the view as it stands (the state and
    /// messages stay those last published).
    fn start_answer(&self, progress: AnswerProgress) {
        self.view.send_modify(|cur| cur.answer = Some(progress));
    }

    /// Change the newest answer's progress, if it is still `tool_id`'s.
    /// Publish the run's diff summary (kept where it is by [`Run::update`]).
    pub(super) fn set_diff(&self, diff: Option<crate::worktree::diff::Summary>) {
        self.view.send_if_modified(|cur| {
            let changed = cur.diff != diff;
            cur.diff = diff;
            changed
        });
    }

    /// Publish the run's egress ([`sandboxing`]).
    pub(super) fn set_egress(&self, egress: Option<crate::sandbox::egress::EgressView>) {
        self.view.send_if_modified(|cur| {
            let changed = cur.egress != egress;
            cur.egress = egress;
            changed
        });
    }

    fn update_answer(&self, tool_id: &str, f: impl FnOnce(&mut AnswerProgress)) {
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
pub(super) enum Read {
    /// Read what changed on disk first (a fresh read: the guard, the composer lock).
    Channels,
    /// Act on the facts as they are.
    AsIs,
}

/// Where [`Runs`] reaches the world, when given from outside ([`Runs::start_with`]):
/// tests give a terminal in memory and providers of their own.
pub struct Seams {
    /// Where runs' sessions are started, looked at and typed into.
    pub sessions: Arc<dyn crate::machines::terminal::Sessions>,
    pub providers: Providers,
}

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
    /// Load providers, open the registry, resume active runs (their tmux sessions
    /// outlive `lab serve`), end the ones whose session is gone, and start watching.
    pub async fn start(home: Home, lab_exe: PathBuf) -> anyhow::Result<Arc<Runs>> {
        Runs::start_with(home, lab_exe, None).await
    }

    /// [`Runs::start`] on `seams` given from outside, else lab's tmux server and the
    /// providers loaded from the bundle and `<home>/providers/`.
    pub async fn start_with(home: Home, lab_exe: PathBuf, seams: Option<Seams>) -> anyhow::Result<Arc<Runs>> {
        home.prepare()?;
        let config = Config::load(&home.config_file())?;
        let mirrors = mirror::Mirrors::new(config.runs.host_transcript_max_mb, config.runs.host_transcript_min_free_mb);
        // Before the (slower) providers: a damaged registry fails fast, with its fix.
        let registry = Registry::open(&home.registry())?;
        // Returns at once: the index is looked at (and built if new) in the background.
        let (search, index_ready) = search::SearchIndex::open(&home.search_index(), config.search.max_mb << 20)?;
        let books = Arc::new(books::Books {
            usage: usage::UsageBook::open(home.usage_dir(), usage::Prices::new(&config.prices))?,
            search,
        });
        let cache = home.component_cache();
        let providers_dir = home.providers_dir();
        // A place to drop providers into, from the start (private, as all of lab's home;
        // an existing one is left as it is, and checked when loaded).
        {
            use std::os::unix::fs::DirBuilderExt;
            match std::fs::DirBuilder::new().mode(0o700).create(&providers_dir) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                    tracing::warn!(dir = %providers_dir.display(), error = %e, "could not make the providers folder");
                }
                _ => {}
            }
        }
        // The folder as it was when loaded: a change from then on is loaded too.
        let look = providers::look(&providers_dir);
        let tmux = Tmux::new(home.tmux_socket()).with_closed_signal(home.runtime_dir().join(liveness::SIGNAL_FILE));
        let Seams { sessions, providers } = match seams {
            Some(seams) => seams,
            None => Seams {
                sessions: Arc::new(tmux.clone()),
                providers: tokio::task::spawn_blocking(move || -> anyhow::Result<Providers> {
                    let host = ComponentHost::new(Some(cache), Limits::default())?;
                    Ok(Providers::load(host, providers_dir))
                })
                .await??,
            },
        };
        let set = providers.now();
        for (f, _) in &set.loaded {
            tracing::info!(provider = %f.info.name, version = %f.info.version, build = %f.digest, dialog_hooker = f.dialog_hooker, source = %f.source, "provider loaded");
        }
        let acp_agents = providers::acp_agents(&config, &set);
        let home_hosts = home.hosts_file();
        let acp_dir = home.acp_dir();
        let runs = Arc::new(Runs {
            core: Arc::new(Core {
                home,
                config,
                providers,
                registry,
                files: follow::FileWatch::default(),
                news: News {
                    shutdown: watch::channel(false).0,
                    changes: broadcast::channel(CHANGES_CAPACITY).0,
                    listed: broadcast::channel(run_list::NEWS_CAPACITY).0,
                },
                books,
                turns: Turns::default(),
            }),
            here: Arc::new(transport::tmux::TmuxRuns::on(sessions.clone(), tmux, lab_exe)),
            lives: Lives::default(),
            acp: Arc::new(transport::acp::AcpRuns::new(acp_dir, acp_agents, sessions)),
            remote: Arc::new(transport::remote::RemoteRuns::new(
                crate::machines::hosts::Hosts::new(crate::machines::hosts::HostCredentials::new(home_hosts)),
                mirrors,
            )),
        });
        {
            // What runners report reaches their runs, in order, one at a time.
            let (tx, mut rx) = tokio::sync::mpsc::channel(crate::machines::hosts::link::EVENTS_QUEUE);
            runs.remote.hosts().set_events(tx);
            let weak = Arc::downgrade(&runs);
            tokio::spawn(async move {
                while let Some((host, event)) = rx.recv().await {
                    let Some(runs) = weak.upgrade() else { break };
                    runs.remote.on_host(&runs, host, event).await;
                }
            });
        }
        // Hosts lab reaches over ssh: linked by lab serve itself, for as long as it runs.
        let configured = crate::machines::hosts::over_ssh::configured(&runs.config).map_err(anyhow::Error::msg)?;
        runs.remote.hosts().set_configured(configured);
        crate::machines::hosts::over_ssh::spawn(
            runs.remote.hosts(),
            runs.home.clone(),
            runs.here.lab_exe.clone(),
            runs.news.shutdown.subscribe(),
        );
        runs.start_watcher()?;
        // Active runs in lab's tmux: followed once liveness has seen their session
        // (one `list-sessions` for all); those whose session is gone are ended without
        // reading their history ([`Runs::end_all`]).
        let mut in_tmux = Vec::new();
        // Ended runs rest in the registry, read when first looked at or listed; until
        // then their id and date are all they cost.
        let (resting, records) = runs.registry.sift(|head| !head.may_rest())?;
        runs.lives.at_rest.write().unwrap().extend(resting.into_iter().map(|h| (h.id, h.created_at)));
        for rec in records {
            let active = rec.status == Status::Active;
            let run = runs.attach(rec, false, None);
            run.found.first_view.store(true, Ordering::SeqCst);
            let rec = run.record();
            if rec.worktree.as_ref().is_some_and(|w| !w.discarded) {
                runs.core.clone().spawn_diff_watch(run.clone());
            }
            if !active {
                // Its chat is read when first looked at.
                run.found.unread.store(true, Ordering::SeqCst);
            } else if let transport::Resume::AfterLiveness(run) = runs.transport(&rec).resume(&runs, run) {
                in_tmux.push(run);
            }
        }
        runs.gc_orphans();
        runs.remote.await_hosts(&runs);
        // Each agent's own version, asked now in the background for GET /providers.
        for (f, _) in &set.loaded {
            runs.agent_version(&f.info.name, &f.info.default_program);
        }
        runs.clone().spawn_provider_watch(look);
        {
            let runs = Arc::downgrade(&runs);
            tokio::spawn(async move {
                if index_ready.await == Ok(search::Opened::Fresh) {
                    if let Some(runs) = runs.upgrade() {
                        runs.core.clone().spawn_reindex();
                    }
                }
            });
        }
        liveness::spawn(runs.clone(), in_tmux);
        runs.clone().spawn_evictions();
        Ok(runs)
    }

    /// End every open event stream (called when `lab serve` is asked to stop).
    pub fn begin_shutdown(&self) {
        // ACP agents are lab serve's children: they go now, their runs stay active.
        self.acp.detach_all();
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
    pub fn acp_agents(&self) -> Vec<(String, crate::agents::acp::agents::AcpAgent, Vec<String>)> {
        self.acp.agents().iter().map(|(name, a)| (name.clone(), a.clone(), self.acp.modes(name))).collect()
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

impl Core {
    /// `POST /runs/{id}/stop`.
    pub async fn stop(self: &Arc<Self>, run: &Arc<Run>) -> Result<(), RunError> {
        run.transport().stop(self, run).await
    }

    /// Close the run's tmux session (here or on its machine), if it is still there.
    async fn close_session(self: &Arc<Self>, run: &Run) -> Result<(), RunError> {
        run.transport().close(self, &run.record()).await
    }
}

impl Core {
    /// How a run whose transcript its provider reads is read: the provider's tail (of
    /// the build `pinned`, else the one serving now), or an inert one (no chat) when
    /// the provider is not loaded.
    pub(in crate::runs) fn provider_reader(&self, rec: &RunRecord, pinned: Option<Pinned>) -> (Option<Pinned>, Tail) {
        let files = self.home.run_files(&rec.id);
        let transcript = rec.transcript_path.as_ref().map(PathBuf::from);
        match pinned.map_or_else(|| self.providers.pin(&rec.provider), Ok) {
            Ok(p) => {
                let terminal = Some(format!("/#/runs/{}/terminal", rec.id));
                let mut tail = Tail::new(rec.id.clone(), p.provider.clone(), transcript, files, terminal);
                tail.set_books(self.books.clone());
                (Some(p), tail)
            }
            Err(why) => {
                tracing::warn!(run = %rec.id, provider = %rec.provider, "{why}; the run's chat cannot be read");
                (None, Tail::new_inert(rec.id.clone(), files))
            }
        }
    }

    /// The plan files a run here names are read here, under its agent's directories:
    /// its workdir and the agent's home as its launch gets it (lab.toml's `env` for the
    /// provider, else lab serve's own).
    pub(in crate::runs) fn plan_files_here(&self, rec: &RunRecord, tail: &mut Tail) {
        let agent_home =
            self.config.provider(&rec.provider).env.get("HOME").cloned().or_else(|| std::env::var("HOME").ok());
        tail.set_plan_roots(spool::plan_roots(agent_home.as_deref().map(Path::new), &rec.agent_dir()));
    }

    /// Keep why a run went wrong in its record (shown as its `error`).
    fn record_error(&self, run: &Run, why: &str) {
        let rec = {
            let mut rec = run.record.lock().unwrap();
            rec.error = Some(why.to_string());
            rec.clone()
        };
        if let Err(e) = self.registry.put(&rec) {
            tracing::error!(run = %run.id, error = %e, "could not record the error");
        }
        run.view.touch();
    }
}

#[cfg(test)]
mod update_tests {
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
        let tmux = Tmux::new(dir.join("tmux.sock"));
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
