//! Runs: launching agents in tmux, following them (tailer), deriving their view,
//! answering their dialogs (answer guard + keystrokes), and ending them.

pub mod answer_guard;
pub mod hook_settings;
pub mod input;
pub mod keystrokes;
pub mod liveness;
pub mod registry;
pub mod screen;
pub mod spool;
pub mod tailer;
pub mod view;

use crate::components::{ComponentHost, Limits, ProviderHandle, ProviderSet};
use crate::config::{find_program, Config};
use crate::fsutil;
use crate::model::{Answer, LaunchRequest, Transcript};
use crate::paths::{Home, RunId};
use crate::tmux::{Tmux, TmuxError};
use answer_guard::GuardError;
use input::{ComposerLock, TextError};
use registry::{Registry, RunRecord, Status};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;
use tailer::{SharedMessages, Tail};
use tokio::sync::{broadcast, watch, Notify};
use view::{Derived, PendingDialog, RunState, SeqMessage};

/// Errors the HTTP API turns into `{"error", "message"}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    #[error("no run with that id")]
    NotFound,
    #[error("{0}")]
    BadRequest(String),
    #[error("a dialog is pending: answer it first")]
    DialogPending,
    /// The agent waits on something else lab knows of (see [`input::composer_lock`]).
    #[error("{message}")]
    ComposerLocked { code: &'static str, message: String },
    /// Text over its documented size limit.
    #[error("{0}")]
    TooLarge(String),
    #[error("a different dialog is pending ({pending})")]
    DialogChanged { pending: String },
    #[error("no dialog is pending for that tool_id (nothing pending, or it was already answered)")]
    NoDialog,
    #[error("this dialog cannot be answered from lab: answer it in the terminal")]
    NotAnswerable,
    #[error("the run has ended")]
    RunEnded,
    #[error("{0}")]
    LaunchFailed(String),
    #[error("{0}")]
    Internal(String),
}

impl From<ComposerLock> for RunError {
    fn from(l: ComposerLock) -> Self {
        match l.code {
            "run_ended" => RunError::RunEnded,
            "dialog_pending" => RunError::DialogPending,
            code => RunError::ComposerLocked { code, message: l.message },
        }
    }
}

impl RunError {
    /// Refused operator text: too long → 413, anything else → 400.
    fn text(e: TextError, field: &str) -> Self {
        match e {
            TextError::TooLong { .. } => RunError::TooLarge(e.describe(field)),
            _ => RunError::BadRequest(e.describe(field)),
        }
    }
}

impl From<GuardError> for RunError {
    fn from(e: GuardError) -> Self {
        match e {
            GuardError::NoDialog => RunError::NoDialog,
            GuardError::DialogChanged { pending } => RunError::DialogChanged { pending },
        }
    }
}

/// What changed for subscribers: the derived view and how many messages exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub derived: Derived,
    pub message_count: usize,
    pub composer_lock: Option<ComposerLock>,
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

/// How many changes a slow reader of [`Runs::changes`] may fall behind before it
/// misses some (it is told how many).
const CHANGES_CAPACITY: usize = 1024;

/// The body of `GET /runs/{id}/messages` and of each SSE event.
#[derive(Debug, Clone, Serialize)]
pub struct ViewBody {
    pub run_id: RunId,
    pub state: RunState,
    pub pending_dialog: Option<PendingDialog>,
    pub blocked: Option<crate::model::Blocked>,
    /// Why `POST /runs/{id}/messages` would be refused now (`{"code", "message"}`), or
    /// null when a message can be sent.
    pub composer_lock: Option<ComposerLock>,
    pub messages: Vec<SeqMessage>,
}

/// A run as `GET /runs/{id}` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct RunBody {
    pub id: RunId,
    pub provider: String,
    pub workdir: String,
    pub state: RunState,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    pub tmux_target: String,
    pub tmux_socket: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub permission_mode: Option<String>,
    pub dialog_hooker: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub struct Run {
    pub id: RunId,
    record: Mutex<RunRecord>,
    tail: tokio::sync::Mutex<Tail>,
    /// Serialises everything that types into the pane (answers, messages).
    keys: tokio::sync::Mutex<()>,
    /// lab has yet to type the run's first prompt (one too large for the agent's
    /// command line): messages wait until it has.
    prompt_pending: AtomicBool,
    messages: SharedMessages,
    view: watch::Sender<Snapshot>,
    wake: Notify,
    provider: Option<ProviderHandle>,
    changes: broadcast::Sender<Change>,
    /// The next view published is the first of a run found at start-up: it is reported
    /// with no `before` (see [`Change::before`]).
    found_at_start: AtomicBool,
}

impl Run {
    pub fn record(&self) -> RunRecord {
        self.record.lock().unwrap().clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<Snapshot> {
        self.view.subscribe()
    }

    pub fn snapshot(&self) -> Snapshot {
        self.view.borrow().clone()
    }

    pub fn body(&self) -> RunBody {
        let r = self.record();
        RunBody {
            id: r.id,
            provider: r.provider,
            workdir: r.workdir,
            state: self.view.borrow().derived.state,
            created_at: r.created_at,
            ended_at: r.ended_at,
            tmux_target: r.tmux_target,
            tmux_socket: Some(r.tmux_socket),
            session_id: r.session_id,
            permission_mode: r.permission_mode,
            dialog_hooker: r.dialog_hooker,
            error: r.error,
        }
    }

    /// The view with the messages whose seq is greater than `after`.
    pub fn view_after(&self, after: Option<u64>) -> ViewBody {
        let snap = self.snapshot();
        let messages = {
            // Only the messages the published state was derived from: the tailer appends
            // to the list before it publishes, and a view must never show a message next
            // to a state from before it (a tool call beside "starting").
            let all = self.messages.read().unwrap();
            let end = snap.message_count.min(all.len());
            let start = after.map(|a| usize::try_from(a.saturating_add(1)).unwrap_or(usize::MAX)).unwrap_or(0).min(end);
            all[start..end].to_vec()
        };
        ViewBody {
            run_id: self.id.clone(),
            state: snap.derived.state,
            pending_dialog: snap.derived.pending_dialog,
            blocked: snap.derived.blocked,
            composer_lock: snap.composer_lock,
            messages,
        }
    }

    /// Why a message cannot be typed now, from `derived` and the messages.
    fn composer_lock(&self, derived: &Derived) -> Option<ComposerLock> {
        let messages = self.messages.read().unwrap();
        input::composer_lock(derived, &messages, self.prompt_pending.load(Ordering::SeqCst))
    }

    fn publish(&self, derived: Derived) {
        let message_count = self.messages.read().unwrap().len();
        let composer_lock = self.composer_lock(&derived);
        let snap = Snapshot { derived, message_count, composer_lock };
        self.view.send_if_modified(|cur| {
            if *cur == snap {
                return false;
            }
            let found_at_start = self.found_at_start.swap(false, Ordering::SeqCst);
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
}

/// The request body of `POST /runs`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateRun {
    pub provider: String,
    pub workdir: String,
    pub prompt: String,
    #[serde(default)]
    pub permission_mode: Option<String>,
}

pub struct Runs {
    home: Home,
    config: Config,
    providers: ProviderSet,
    registry: Registry,
    tmux: Tmux,
    lab_exe: PathBuf,
    runs: RwLock<BTreeMap<RunId, Arc<Run>>>,
    /// Transcript file → run, for file notifications.
    transcripts: Mutex<HashMap<PathBuf, RunId>>,
    watched_dirs: Mutex<Vec<PathBuf>>,
    watcher: Mutex<Option<notify::RecommendedWatcher>>,
    /// Flips to true when `lab serve` shuts down, so open event streams end.
    shutdown: watch::Sender<bool>,
    /// Every run's view changes ([`Runs::changes`]).
    changes: broadcast::Sender<Change>,
    /// Wakes the liveness loop: tmux reported a closed session ([`liveness`]).
    liveness: Notify,
}

pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

impl Runs {
    /// Load providers, open the registry, resume active runs (their tmux sessions
    /// outlive `lab serve`), end the ones whose session is gone, and start watching.
    pub async fn start(home: Home, lab_exe: PathBuf) -> anyhow::Result<Arc<Runs>> {
        home.prepare()?;
        let config = Config::load(&home.config_file())?;
        // Before the (slower) providers: a damaged registry fails fast, with its fix.
        let registry = Registry::open(&home.registry())?;
        let cache = home.component_cache();
        let providers_dir = home.providers_dir();
        let providers = tokio::task::spawn_blocking(move || -> anyhow::Result<ProviderSet> {
            let host = ComponentHost::new(Some(cache), Limits::default())?;
            Ok(ProviderSet::load_all(&host, &providers_dir))
        })
        .await??;
        for (f, _) in &providers.loaded {
            tracing::info!(provider = %f.info.name, version = %f.info.version, dialog_hooker = f.dialog_hooker, source = %f.source, "provider loaded");
        }
        let tmux = Tmux::new(home.tmux_socket()).with_closed_signal(home.runtime_dir().join(liveness::SIGNAL_FILE));
        let runs = Arc::new(Runs {
            home,
            config,
            providers,
            registry,
            tmux,
            lab_exe,
            runs: RwLock::new(BTreeMap::new()),
            transcripts: Mutex::new(HashMap::new()),
            watched_dirs: Mutex::new(Vec::new()),
            watcher: Mutex::new(None),
            shutdown: watch::channel(false).0,
            changes: broadcast::channel(CHANGES_CAPACITY).0,
            liveness: Notify::new(),
        });
        runs.start_watcher()?;
        for rec in runs.registry.list()? {
            let active = rec.status == Status::Active;
            let run = runs.attach(rec, false);
            run.found_at_start.store(true, Ordering::SeqCst);
            if active {
                runs.clone().spawn_tailer(run);
            } else {
                // Read the finished transcript once so its chat can be shown.
                let mut tail = run.tail.lock().await;
                let d = tail.refresh().await;
                drop(tail);
                run.publish(d);
            }
        }
        runs.gc_orphans();
        liveness::spawn(runs.clone());
        Ok(runs)
    }

    /// End every open event stream (called when `lab serve` is asked to stop).
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
        // The server stays up when empty (for its session-closed hook): lab stops one
        // it leaves with no session.
        self.tmux.kill_server_if_empty();
    }

    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Every change of any run's derived view from now on, in order per run.
    pub fn changes(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    pub fn home(&self) -> &Home {
        &self.home
    }

    pub fn tmux(&self) -> &Tmux {
        &self.tmux
    }

    pub fn providers(&self) -> &ProviderSet {
        &self.providers
    }

    pub fn get(&self, id: &str) -> Result<Arc<Run>, RunError> {
        let id = RunId::parse(id).ok_or(RunError::NotFound)?;
        self.runs.read().unwrap().get(&id).cloned().ok_or(RunError::NotFound)
    }

    pub fn list(&self) -> Vec<Arc<Run>> {
        let mut v: Vec<_> = self.runs.read().unwrap().values().cloned().collect();
        v.sort_by(|a, b| a.record().created_at.cmp(&b.record().created_at).then_with(|| a.id.cmp(&b.id)));
        v
    }

    /// Make the in-memory handle for a record. `prompt_pending`: lab has yet to type
    /// its first prompt (the composer stays locked until it has).
    fn attach(&self, rec: RunRecord, prompt_pending: bool) -> Arc<Run> {
        let provider = self.providers.get(&rec.provider).map(|(_, h)| h.clone());
        let files = self.home.run_files(&rec.id);
        let transcript = rec.transcript_path.as_ref().map(PathBuf::from);
        let tail = match &provider {
            Some(p) => Tail::new(
                rec.id.clone(),
                Arc::new(p.clone()),
                transcript.clone(),
                files,
                Some(format!("/#/runs/{}/terminal", rec.id)),
            ),
            None => {
                tracing::warn!(run = %rec.id, provider = %rec.provider, "the run's provider is not loaded; its chat cannot be read");
                Tail::new_inert(rec.id.clone(), files)
            }
        };
        let mut tail = tail;
        if rec.status != Status::Active {
            tail.ended = true;
        } else if transcript.is_none() && provider.as_ref().is_some_and(|p| p.dialog_hooker()) {
            // The agent names its transcript through its session-info hook (if at all).
            tail.await_session_info();
        }
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
        };
        let (view, _) = watch::channel(initial);
        let run = Arc::new(Run {
            id: rec.id.clone(),
            record: Mutex::new(rec),
            tail: tokio::sync::Mutex::new(tail),
            keys: tokio::sync::Mutex::new(()),
            prompt_pending: AtomicBool::new(prompt_pending),
            messages,
            view,
            wake: Notify::new(),
            provider,
            changes: self.changes.clone(),
            found_at_start: AtomicBool::new(false),
        });
        if let Some(t) = transcript {
            self.transcripts.lock().unwrap().insert(t, run.id.clone());
        }
        self.runs.write().unwrap().insert(run.id.clone(), run.clone());
        run
    }

    /// Launch a run.
    pub async fn create(self: &Arc<Self>, req: CreateRun) -> Result<RunBody, RunError> {
        let (facts, provider) = self
            .providers
            .get(&req.provider)
            .map(|(f, h)| (f.clone(), h.clone()))
            .ok_or_else(|| RunError::BadRequest(format!("unknown provider `{}`", req.provider)))?;
        input::workdir(&req.workdir).map_err(RunError::BadRequest)?;
        if !Path::new(&req.workdir).is_dir() {
            return Err(RunError::BadRequest(format!("workdir {} is not an existing directory", req.workdir)));
        }
        let prompt = input::chat_text(&req.prompt).map_err(|e| RunError::text(e, "prompt"))?;
        if let Some(m) = &req.permission_mode {
            if m.is_empty() || m.len() > 32 || !m.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
                return Err(RunError::BadRequest(format!("invalid permission_mode {m:?}")));
            }
        }

        let id = RunId::generate();
        let files = self.home.run_files(&id);
        let mut rec = RunRecord {
            id: id.clone(),
            provider: facts.info.name.clone(),
            workdir: req.workdir.clone(),
            prompt,
            permission_mode: req.permission_mode.clone(),
            status: Status::Active,
            created_at: now_rfc3339(),
            ended_at: None,
            tmux_target: format!("lab-{id}"),
            tmux_socket: self.tmux.socket.to_string_lossy().into_owned(),
            session_id: None,
            transcript_path: None,
            dialog_hooker: facts.dialog_hooker,
            error: None,
        };

        let typed_prompt = match self.launch(&mut rec, &provider, &facts.info.default_program, &files).await {
            Ok(typed) => typed,
            Err(msg) => {
                for f in files.all() {
                    let _ = fsutil::remove_if_exists(f);
                }
                rec.status = Status::Failed;
                rec.ended_at = Some(now_rfc3339());
                rec.error = Some(msg.clone());
                if let Err(e) = self.registry.put(&rec) {
                    tracing::error!(run = %id, error = %e, "could not record the failed run");
                }
                let run = self.attach(rec, false);
                run.publish(Derived {
                    state: RunState::Ended,
                    pending_dialog: None,
                    blocked: None,
                    spool_is_stale: false,
                    turn_idle: false,
                });
                tracing::warn!(run = %id, error = %msg, "launch failed");
                return Err(RunError::LaunchFailed(msg));
            }
        };
        self.registry.put(&rec).map_err(|e| RunError::Internal(format!("recording the run: {e}")))?;
        tracing::info!(run = %id, provider = %rec.provider, workdir = %rec.workdir, "run launched");
        let run = self.attach(rec, typed_prompt.is_some());
        if let Some(prompt) = typed_prompt {
            self.clone().spawn_first_prompt(run.clone(), prompt);
        }
        self.clone().spawn_tailer(run.clone());
        Ok(run.body())
    }

    /// Start the agent. Its argv, workdir and environment go to `lab agent-exec`
    /// through a private launch file, so tmux's command line is short and constant.
    /// A first prompt too large to be one argument (Linux's `MAX_ARG_STRLEN`) is left
    /// off the command line: the provider launches the agent without a prompt, and
    /// the prompt is returned to be typed in once the agent is ready.
    async fn launch(
        &self,
        rec: &mut RunRecord,
        provider: &ProviderHandle,
        default_program: &str,
        files: &crate::paths::RunFiles,
    ) -> Result<Option<String>, String> {
        let pconf = self.config.provider(&rec.provider);
        let path_var = std::env::var_os("PATH");
        let wanted = pconf.program.clone().unwrap_or_else(|| PathBuf::from(default_program));
        let program = find_program(&wanted, path_var.as_deref()).ok_or_else(|| {
            format!(
                "program `{}` not found{}; name it in {} as [providers.{}] program = \"/path/to/it\"",
                wanted.display(),
                if pconf.program.is_some() { "" } else { " on PATH" },
                self.home.config_file().display(),
                rec.provider
            )
        })?;
        let mut env: BTreeMap<String, String> = std::env::vars().collect();
        env.extend(pconf.env.clone());
        // lab's own log settings are not the agent's business.
        env.remove("LAB_LOG");

        let (hooks, settings_path) = if provider.dialog_hooker() {
            let bindings = provider.hook_wiring().await.map_err(|e| e.to_string())?;
            hook_settings::validate(&bindings)?;
            let hooks = hook_settings::commands(&self.lab_exe, files, bindings);
            let doc =
                provider.hook_settings(rec.id.to_string(), hooks.clone()).await.map_err(|e| match e.refusal() {
                    Some(msg) => format!("the provider could not make hook settings: {msg}"),
                    None => e.to_string(),
                })?;
            let settings_path = match doc {
                Some(doc) => {
                    hook_settings::write(&self.home.runtime_dir(), files, &doc)?;
                    Some(files.settings.to_string_lossy().into_owned())
                }
                None => None,
            };
            (hooks, settings_path)
        } else {
            (Vec::new(), None)
        };
        let session_id = uuid::Uuid::new_v4().to_string();
        let request = |prompt: String| LaunchRequest {
            run_id: rec.id.to_string(),
            session_id: session_id.clone(),
            workdir: rec.workdir.clone(),
            prompt,
            permission_mode: rec.permission_mode.clone(),
            program: program.to_string_lossy().into_owned(),
            settings_path: settings_path.clone(),
            env: env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            hooks: hooks.clone(),
        };
        let spec_for = move |req: LaunchRequest| async move {
            provider.launch(req).await.map_err(|e| match e.refusal() {
                Some(msg) => format!("the provider refused to launch: {msg}"),
                None => e.to_string(),
            })
        };
        let mut spec = spec_for(request(rec.prompt.clone())).await?;
        let mut typed_prompt = None;
        if input::oversized_argument(&spec.argv).is_some() {
            spec = spec_for(request(String::new())).await?;
            typed_prompt = Some(rec.prompt.clone());
        }
        if spec.argv.is_empty() {
            return Err("the provider returned an empty argv".into());
        }
        if let Some(i) = input::oversized_argument(&spec.argv) {
            return Err(format!(
                "argument {i} of the agent's command line is {} bytes long; Linux takes at most {} bytes per argument",
                spec.argv[i].len(),
                input::MAX_ARG_STRLEN - 1
            ));
        }
        if let Transcript::Path(t) = &spec.transcript {
            if !Path::new(t).is_absolute() {
                return Err(format!("the provider returned a relative transcript path {t:?}"));
            }
        }
        for (k, v) in spec.env {
            if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
                return Err(format!("the provider returned an invalid environment variable {k:?}"));
            }
            env.insert(k, v);
        }
        rec.session_id = spec.session_id;
        rec.transcript_path = match spec.transcript {
            Transcript::Path(p) => Some(p),
            Transcript::FromSessionInfo | Transcript::None => None,
        };
        let launch = crate::agent_exec::LaunchFile { argv: spec.argv, workdir: rec.workdir.clone(), env };
        let launch_json = serde_json::to_vec(&launch).map_err(|e| e.to_string())?;
        fsutil::write_atomic(&files.launch, &launch_json, 0o600)
            .map_err(|e| format!("writing {}: {e}", files.launch.display()))?;
        let argv: Vec<String> = vec![
            self.lab_exe.to_string_lossy().into_owned(),
            "agent-exec".into(),
            "--launch-file".into(),
            files.launch.to_string_lossy().into_owned(),
        ];
        let tmux = self.tmux.clone();
        let name = rec.tmux_target.clone();
        tokio::task::spawn_blocking(move || tmux.new_session(&name, &argv))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("starting the agent in tmux failed: {e}"))?;
        Ok(typed_prompt)
    }

    /// Type a run's first prompt into its agent once the agent is ready (its pane drawn
    /// and quiet, [`input::Readiness`]), then unlock the composer.
    fn spawn_first_prompt(self: Arc<Self>, run: Arc<Run>, prompt: String) {
        tokio::spawn(async move {
            let tmux = self.tmux.clone();
            let target = run.record().tmux_target;
            let alive = {
                let (tmux, target) = (tmux.clone(), target.clone());
                tokio::task::spawn_blocking(move || wait_until_ready(&tmux, &target)).await.unwrap_or(false)
            };
            let keys = run.keys.lock().await;
            let ended = run.tail.lock().await.ended;
            if alive && !ended {
                let buffer = format!("lab-{}", run.id);
                let result = tokio::task::spawn_blocking(move || type_text(&tmux, &target, &buffer, &prompt))
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|r| r.map_err(|e| e.to_string()));
                match result {
                    Ok(()) => tracing::info!(run = %run.id, "typed the first prompt into the agent"),
                    Err(e) => {
                        tracing::error!(run = %run.id, error = %e, "could not type the first prompt");
                        let rec = {
                            let mut rec = run.record.lock().unwrap();
                            rec.error = Some(format!("typing the first prompt into the agent failed: {e}"));
                            rec.clone()
                        };
                        if let Err(e) = self.registry.put(&rec) {
                            tracing::error!(run = %run.id, error = %e, "could not record the error");
                        }
                    }
                }
            }
            run.prompt_pending.store(false, Ordering::SeqCst);
            drop(keys);
            let mut tail = run.tail.lock().await;
            let d = tail.derive().await;
            drop(tail);
            run.publish(d);
            run.wake();
        });
    }

    /// Follow a run until it ends: a full refresh on every wake (file notifications,
    /// answers, messages, its end) and whenever the backstop poll's look (a `stat` of
    /// its files, [`tailer::Backoff`]) finds a change or a time-based deadline passes.
    fn spawn_tailer(self: Arc<Self>, run: Arc<Run>) {
        tokio::spawn(async move {
            let mut backoff = tailer::Backoff::default();
            let mut watched = false;
            let mut refresh = true;
            let mut look = false;
            let mut pane = screen::PaneWatch::default();
            let started = std::time::Instant::now();
            loop {
                if refresh {
                    let mut tail = run.tail.lock().await;
                    let mut derived = tail.refresh().await;
                    let ended = tail.ended;
                    self.record_session_facts(&run, tail.session_id.clone(), tail.transcript_path());
                    watched = tail.transcript_path().is_none_or(|t| self.watch_transcript_dir(t));
                    look = !ended
                        && screen::should_look(&derived, tail.has_spool(), run.prompt_pending.load(Ordering::SeqCst));
                    if look {
                        let current = tail.screen().cloned();
                        let shown = self.read_screen(&run, &mut pane, derived.state, started.elapsed(), current).await;
                        if shown.as_ref().map(|d| &d.id) != tail.screen().map(|d| &d.id) {
                            tail.set_screen(shown);
                            derived = tail.derive().await;
                        }
                    } else if tail.screen().is_some() && derived.state != RunState::Question {
                        tail.set_screen(None);
                        derived = tail.derive().await;
                    }
                    if !look {
                        pane.reset();
                    }
                    drop(tail);
                    run.publish(derived);
                    if ended {
                        break;
                    }
                }
                let deadline = run.tail.lock().await.grace_remaining();
                let deadline =
                    if look { Some(deadline.map_or(screen::POLL, |d| d.min(screen::POLL))) } else { deadline };
                let delay = tailer::poll_delay(backoff.next_delay(), watched, deadline);
                tokio::select! {
                    _ = run.wake.notified() => {
                        backoff.reset();
                        refresh = true;
                    }
                    _ = tokio::time::sleep(delay) => {
                        let changed = run.tail.lock().await.changed_on_disk();
                        if changed {
                            backoff.reset();
                        }
                        refresh = changed || deadline.is_some();
                    }
                }
            }
        });
    }

    /// Keep what the agent said about its session in the run's record: its session id,
    /// and a transcript path it named late (session-info), which is then watched too.
    fn record_session_facts(&self, run: &Arc<Run>, session_id: Option<String>, transcript: Option<&Path>) {
        let changed = {
            let mut rec = run.record.lock().unwrap();
            let mut changed = false;
            if rec.session_id.is_none() && session_id.is_some() {
                rec.session_id = session_id;
                changed = true;
            }
            if let Some(t) = transcript.filter(|_| rec.transcript_path.is_none()) {
                rec.transcript_path = Some(t.to_string_lossy().into_owned());
                self.transcripts.lock().unwrap().insert(t.to_path_buf(), run.id.clone());
                changed = true;
            }
            changed.then(|| rec.clone())
        };
        if let Some(rec) = changed {
            if let Err(e) = self.registry.put(&rec) {
                tracing::warn!(run = %run.id, error = %e, "could not record the transcript path");
            }
        }
    }

    /// One look at a run's pane ([`screen`]): what prompt it shows, if any.
    async fn read_screen(
        &self,
        run: &Arc<Run>,
        pane: &mut screen::PaneWatch,
        state: RunState,
        running_for: std::time::Duration,
        current: Option<crate::model::Dialog>,
    ) -> Option<crate::model::Dialog> {
        let tmux = self.tmux.clone();
        let target = run.record().tmux_target;
        let Some(text) = tokio::task::spawn_blocking(move || tmux.capture(&target).ok()).await.ok().flatten() else {
            return current;
        };
        let quiet_for = pane.observe(&text, std::time::Instant::now());
        if quiet_for < screen::QUIET {
            // Still moving: keep what was read before (if anything) until it settles.
            return current;
        }
        let read = match &run.provider {
            Some(p) if p.screen_reader() => match p.read_screen(text.clone()).await {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(run = %run.id, error = %e, "the provider could not read the screen");
                    None
                }
            },
            _ => None,
        };
        screen::decide(read, state, &text, quiet_for, running_for)
    }

    /// End a run: last read of its transcript, delete its spool, marker and settings
    /// file, record the end. Idempotent.
    pub async fn end(&self, run: &Arc<Run>, why: &str) {
        let mut tail = run.tail.lock().await;
        if tail.ended {
            return;
        }
        tail.refresh().await;
        tail.ended = true;
        let derived = tail.derive().await;
        // Keep the tail locked until the files are gone and the end is recorded: once
        // `ended` is set, the tailer publishes `ended` as soon as it gets the lock (and
        // removing the first file wakes it), so a client must not see `ended` while the
        // spool, marker or settings file still exists or `ended_at` is still unset.
        for f in self.home.run_files(&run.id).all() {
            if let Err(e) = fsutil::remove_if_exists(f) {
                tracing::warn!(run = %run.id, file = %f.display(), error = %e, "could not remove a run file");
            }
        }
        // Temp files of hooks killed mid-write: nothing of the run survives its end.
        self.remove_runtime_files(|name, _| crate::paths::is_temp_of(name, &run.id));
        let rec = {
            let mut rec = run.record.lock().unwrap();
            rec.status = Status::Ended;
            rec.ended_at = Some(now_rfc3339());
            rec.clone()
        };
        if let Err(e) = self.registry.put(&rec) {
            tracing::error!(run = %run.id, error = %e, "could not record the end of the run");
        }
        drop(tail);
        tracing::info!(run = %run.id, why, "run ended");
        run.publish(derived);
        run.wake();
    }

    /// `POST /runs/{id}/stop`.
    pub async fn stop(&self, run: &Arc<Run>) -> Result<(), RunError> {
        let _keys = run.keys.lock().await;
        let name = run.record().tmux_target;
        let tmux = self.tmux.clone();
        tokio::task::spawn_blocking(move || if tmux.has_session(&name) { tmux.kill_session(&name) } else { Ok(()) })
            .await
            .map_err(|e| RunError::Internal(e.to_string()))?
            .map_err(|e| RunError::Internal(e.to_string()))?;
        self.end(run, "stopped by the operator").await;
        Ok(())
    }

    /// `POST /runs/{id}/messages`: paste the text into the agent, then Enter — under
    /// the run's key lock and only if a fresh read finds the composer unlocked
    /// ([`input::composer_lock`]).
    pub async fn send_message(&self, run: &Arc<Run>, text: &str) -> Result<(), RunError> {
        let text = input::chat_text(text).map_err(|e| RunError::text(e, "text"))?;
        let _keys = run.keys.lock().await;
        {
            let mut tail = run.tail.lock().await;
            if tail.ended {
                return Err(RunError::RunEnded);
            }
            let d = tail.refresh().await;
            let lock = run.composer_lock(&d);
            drop(tail);
            run.publish(d);
            if let Some(lock) = lock {
                return Err(lock.into());
            }
        }
        let tmux = self.tmux.clone();
        let target = run.record().tmux_target;
        let buffer = format!("lab-{}", run.id);
        tokio::task::spawn_blocking(move || type_text(&tmux, &target, &buffer, &text))
            .await
            .map_err(|e| RunError::Internal(e.to_string()))?
            .map_err(|e| RunError::Internal(format!("typing into the agent failed: {e}")))?;
        run.wake();
        Ok(())
    }

    /// `POST /runs/{id}/dialog/answer`: the answer guard, then the paced keystrokes.
    pub async fn answer(&self, run: &Arc<Run>, tool_id: &str, answers: Vec<Answer>) -> Result<Vec<String>, RunError> {
        for a in &answers {
            match a {
                Answer::Other(text) | Answer::Feedback { text, .. } => {
                    input::other_text(text).map_err(|e| RunError::text(e, "the answer's text"))?;
                }
                Answer::Option(_) | Answer::Options(_) => {}
            }
        }
        let provider = run.provider.clone().ok_or(RunError::NotAnswerable)?;
        if !provider.dialog_hooker() {
            return Err(RunError::NotAnswerable);
        }
        let _keys = run.keys.lock().await;
        // 1. The guard on a fresh read, and the provider's plan for this prompt.
        let (dialog, plan, captured) = {
            let mut tail = run.tail.lock().await;
            if tail.ended {
                return Err(RunError::NoDialog);
            }
            let d = tail.refresh().await;
            drop(d);
            let dialog = self.guarded(&tail, tool_id)?;
            let plan = provider.plan_answer(dialog.clone(), answers).await.map_err(|e| match e.refusal() {
                Some(msg) => RunError::BadRequest(msg.to_string()),
                None => RunError::Internal(e.to_string()),
            })?;
            keystrokes::validate(&plan).map_err(RunError::Internal)?;
            (dialog, plan, tail.live_dialog_captured())
        };
        // 2. Wait until the prompt is drawn (the provider reads the pane), at most the
        //    plan's budget counted from when the prompt was captured.
        let captured_ago = captured.and_then(|t| SystemTime::now().duration_since(t).ok()).unwrap_or_default();
        let wait = keystrokes::DrawnWait::new(std::time::Instant::now(), captured_ago, plan.drawn_within);
        let target = run.record().tmux_target;
        // At least one look, however old the prompt: a late answer is when the operator
        // may have moved things in the terminal.
        loop {
            let tmux = self.tmux.clone();
            let t = target.clone();
            let pane =
                tokio::task::spawn_blocking(move || tmux.capture(&t).unwrap_or_default()).await.unwrap_or_default();
            let drawn = provider.is_drawn(dialog.clone(), pane).await.unwrap_or(false);
            if wait.done(std::time::Instant::now(), drawn) {
                break;
            }
            tokio::time::sleep(keystrokes::DRAWN_POLL).await;
        }
        // 3. The guard again (the prompt may have gone while it was drawn), then play.
        {
            let mut tail = run.tail.lock().await;
            if tail.ended {
                return Err(RunError::NoDialog);
            }
            tail.refresh().await;
            self.guarded(&tail, tool_id)?;
            tail.mark_answered(tool_id);
            let d = tail.derive().await;
            drop(tail);
            run.publish(d);
        }
        let tmux = self.tmux.clone();
        let played: Vec<String> = plan.steps.iter().map(keystrokes::describe).collect();
        let result = tokio::task::spawn_blocking(move || keystrokes::play(&tmux, &target, &plan))
            .await
            .map_err(|e| RunError::Internal(e.to_string()))
            .and_then(|r| r.map_err(|e| RunError::Internal(format!("playing the answer failed: {e}"))));
        if let Err(e) = result {
            let mut tail = run.tail.lock().await;
            tail.unmark_answered(tool_id);
            return Err(e);
        }
        run.wake();
        Ok(played)
    }

    /// The answer guard on the tail's current facts: the live prompt, if it is the one
    /// `tool_id` names and lab can answer it.
    fn guarded(&self, tail: &tailer::Tail, tool_id: &str) -> Result<crate::model::Dialog, RunError> {
        answer_guard::check(tail.live_dialog(), tail.resolved(), tail.answered(), tool_id)?;
        let dialog = tail.live_dialog().cloned().ok_or(RunError::NoDialog)?;
        if !dialog.answerable {
            return Err(RunError::NotAnswerable);
        }
        Ok(dialog)
    }

    fn start_watcher(self: &Arc<Self>) -> anyhow::Result<()> {
        use notify::Watcher;
        // A path that changed, or None: events were lost (the kernel's queue overflowed),
        // so every run and the liveness loop look again.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Option<PathBuf>>();
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
            Ok(ev) if ev.need_rescan() => {
                let _ = tx.send(None);
            }
            Ok(ev) => {
                for p in ev.paths {
                    let _ = tx.send(Some(p));
                }
            }
            Err(_) => {
                let _ = tx.send(None);
            }
        })?;
        watcher.watch(&self.home.runtime_dir(), notify::RecursiveMode::NonRecursive)?;
        *self.watcher.lock().unwrap() = Some(watcher);
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            while let Some(path) = rx.recv().await {
                let Some(runs) = me.upgrade() else { break };
                match path {
                    Some(path) if runs.is_liveness_signal(&path) => runs.liveness.notify_one(),
                    Some(path) => {
                        if let Some(run) = runs.run_for_path(&path) {
                            run.wake();
                        }
                    }
                    None => {
                        tracing::debug!("file notifications were lost; every run looks again");
                        runs.liveness.notify_one();
                        for run in runs.list() {
                            run.wake();
                        }
                    }
                }
            }
        });
        Ok(())
    }

    /// Whether `path` is the file tmux's session-closed hook writes.
    fn is_liveness_signal(&self, path: &Path) -> bool {
        path.parent() == Some(self.home.runtime_dir().as_path())
            && path.file_name().and_then(|n| n.to_str()).is_some_and(liveness::is_signal)
    }

    /// Which run a changed file belongs to: runtime files are named `<run-id>.…`
    /// (temp files `.<run-id>.…`); transcripts are looked up by path.
    fn run_for_path(&self, path: &Path) -> Option<Arc<Run>> {
        if path.parent() == Some(self.home.runtime_dir().as_path()) {
            let id = crate::paths::RunFiles::owner(path.file_name()?.to_str()?)?;
            return self.get(id).ok();
        }
        let id = self.transcripts.lock().unwrap().get(path).cloned()?;
        self.runs.read().unwrap().get(&id).cloned()
    }

    /// Watch the directory of a run's transcript; whether it is watched (false: not
    /// there yet, or it cannot be, and the tailer polls at its fastest).
    fn watch_transcript_dir(&self, transcript: &Path) -> bool {
        use notify::Watcher;
        let Some(dir) = transcript.parent() else { return false };
        let mut watched = self.watched_dirs.lock().unwrap();
        if watched.iter().any(|d| d == dir) {
            return true;
        }
        if !dir.is_dir() {
            return false;
        }
        if let Some(w) = self.watcher.lock().unwrap().as_mut() {
            match w.watch(dir, notify::RecursiveMode::NonRecursive) {
                Ok(()) => {
                    watched.push(dir.to_path_buf());
                    return true;
                }
                Err(e) => tracing::debug!(dir = %dir.display(), error = %e, "cannot watch; polling instead"),
            }
        }
        false
    }

    /// Delete runtime files that belong to no active run (left by a crash), and temp
    /// files of active runs old enough that no hook is still writing them.
    fn gc_orphans(&self) {
        let now = SystemTime::now();
        self.remove_runtime_files(|name, modified| {
            let id = crate::paths::RunFiles::owner(name).unwrap_or_default();
            let active = self.get(id).is_ok_and(|r| r.record().status == Status::Active);
            let age = modified.and_then(|m| now.duration_since(m).ok()).unwrap_or_default();
            crate::paths::runtime_file_is_garbage(name, active, age)
        });
    }

    /// Remove the files in runtime/ for which `garbage(name, modified)` says so.
    fn remove_runtime_files(&self, garbage: impl Fn(&str, Option<SystemTime>) -> bool) {
        let Ok(rd) = std::fs::read_dir(self.home.runtime_dir()) else { return };
        for entry in rd.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let modified = entry.metadata().ok().and_then(|m| m.modified().ok());
            if garbage(name, modified) {
                tracing::info!(file = %entry.path().display(), "removing a leftover runtime file");
                if let Err(e) = fsutil::remove_if_exists(&entry.path()) {
                    tracing::warn!(file = %entry.path().display(), error = %e, "could not remove a runtime file");
                }
            }
        }
    }
}

/// Paste `text` into the pane as one bracketed paste, then press Enter once the agent
/// has taken it in (blocking).
fn type_text(tmux: &Tmux, target: &str, buffer: &str, text: &str) -> Result<(), TmuxError> {
    tmux.paste(target, buffer, text)?;
    std::thread::sleep(input::enter_delay(text.len(), input::PASTE_SETTLE));
    tmux.send_key(target, "Enter")
}

/// Wait until the agent in `target` is ready to be typed into ([`input::Readiness`]),
/// at most [`input::Readiness::TIMEOUT`] (blocking). False if its session is gone.
fn wait_until_ready(tmux: &Tmux, target: &str) -> bool {
    let start = std::time::Instant::now();
    let mut readiness = input::Readiness::default();
    loop {
        if !tmux.has_session(target) {
            return false;
        }
        let screen = tmux.capture(target).unwrap_or_default();
        if readiness.observe(&screen, std::time::Instant::now()) {
            return true;
        }
        if start.elapsed() >= input::Readiness::TIMEOUT {
            tracing::warn!(target, "the agent's pane never went quiet; typing the first prompt anyway");
            return true;
        }
        std::thread::sleep(input::Readiness::POLL);
    }
}
