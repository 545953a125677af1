//! Runs: launching agents in tmux, following them (tailer), deriving their view,
//! answering their dialogs (answer guard + keystrokes), and ending them.

pub mod answer_guard;
pub mod hook_settings;
pub mod keystrokes;
pub mod registry;
pub mod tailer;
pub mod view;

use crate::components::{ComponentHost, Limits, ProviderHandle, ProviderSet};
use crate::config::{find_program, Config};
use crate::fsutil;
use crate::paths::{Home, RunId};
use crate::tmux::Tmux;
use answer_guard::GuardError;
use lab_provider_sdk::{Answer, LaunchRequest};
use registry::{Registry, RunRecord, Status};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};
use tailer::{SharedMessages, Tail};
use tokio::sync::{watch, Notify};
use view::{Derived, PendingDialog, RunState, SeqMessage};

/// The backstop poll: file notifications do the fast path.
pub const POLL_INTERVAL: Duration = Duration::from_millis(1000);

/// Errors the HTTP API turns into `{"error", "message"}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    #[error("no run with that id")]
    NotFound,
    #[error("{0}")]
    BadRequest(String),
    #[error("a dialog is pending: answer it first")]
    DialogPending,
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
}

/// The body of `GET /runs/{id}/messages` and of each SSE event.
#[derive(Debug, Clone, Serialize)]
pub struct ViewBody {
    pub run_id: RunId,
    pub state: RunState,
    pub pending_dialog: Option<PendingDialog>,
    pub blocked: Option<lab_provider_sdk::Blocked>,
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
    messages: SharedMessages,
    view: watch::Sender<Snapshot>,
    wake: Notify,
    provider: Option<ProviderHandle>,
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
            let all = self.messages.read().unwrap();
            let start =
                after.map(|a| usize::try_from(a.saturating_add(1)).unwrap_or(usize::MAX)).unwrap_or(0).min(all.len());
            all[start..].to_vec()
        };
        ViewBody {
            run_id: self.id.clone(),
            state: snap.derived.state,
            pending_dialog: snap.derived.pending_dialog,
            blocked: snap.derived.blocked,
            messages,
        }
    }

    fn publish(&self, derived: Derived) {
        let message_count = self.messages.read().unwrap().len();
        let snap = Snapshot { derived, message_count };
        self.view.send_if_modified(|cur| {
            if *cur == snap {
                false
            } else {
                *cur = snap;
                true
            }
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
}

pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

impl Runs {
    /// Load providers, open the registry, resume active runs (their tmux sessions
    /// outlive `lab serve`), end the ones whose session is gone, and start watching.
    pub async fn start(home: Home, lab_exe: PathBuf) -> anyhow::Result<Arc<Runs>> {
        std::fs::create_dir_all(&home.root)?;
        fsutil::private_dir(&home.runtime_dir())?;
        let config = Config::load(&home.config_file())?;
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
        let registry = Registry::open(&home.registry())?;
        let tmux = Tmux::new(home.tmux_socket());
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
        });
        runs.start_watcher()?;
        for rec in runs.registry.list()? {
            let active = rec.status == Status::Active;
            let run = runs.attach(rec);
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
        runs.clone().spawn_liveness();
        Ok(runs)
    }

    /// End every open event stream (called when `lab serve` is asked to stop).
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
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

    /// Make the in-memory handle for a record.
    fn attach(&self, rec: RunRecord) -> Arc<Run> {
        let provider = self.providers.get(&rec.provider).map(|(_, h)| h.clone());
        let files = self.home.run_files(&rec.id);
        let transcript = rec.transcript_path.as_ref().map(PathBuf::from);
        let tail = match &provider {
            Some(p) => Tail::new(
                rec.id.clone(),
                p.clone(),
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
        }
        let messages = tail.messages();
        let initial = Snapshot {
            derived: Derived {
                state: if rec.status == Status::Active { RunState::Starting } else { RunState::Ended },
                pending_dialog: None,
                blocked: None,
                spool_is_stale: false,
            },
            message_count: 0,
        };
        let (view, _) = watch::channel(initial);
        let run = Arc::new(Run {
            id: rec.id.clone(),
            record: Mutex::new(rec),
            tail: tokio::sync::Mutex::new(tail),
            keys: tokio::sync::Mutex::new(()),
            messages,
            view,
            wake: Notify::new(),
            provider,
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
        let workdir = Path::new(&req.workdir);
        if !workdir.is_absolute() {
            return Err(RunError::BadRequest("workdir must be an absolute path".into()));
        }
        if !workdir.is_dir() {
            return Err(RunError::BadRequest(format!("workdir {} is not a directory", req.workdir)));
        }
        if req.prompt.trim().is_empty() {
            return Err(RunError::BadRequest("prompt is empty".into()));
        }
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
            prompt: req.prompt.clone(),
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

        match self.launch(&mut rec, &provider, &facts.info.default_program, &files).await {
            Ok(()) => {}
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
                let run = self.attach(rec);
                run.publish(Derived {
                    state: RunState::Ended,
                    pending_dialog: None,
                    blocked: None,
                    spool_is_stale: false,
                });
                tracing::warn!(run = %id, error = %msg, "launch failed");
                return Err(RunError::LaunchFailed(msg));
            }
        }
        self.registry.put(&rec).map_err(|e| RunError::Internal(format!("recording the run: {e}")))?;
        tracing::info!(run = %id, provider = %rec.provider, workdir = %rec.workdir, "run launched");
        let run = self.attach(rec);
        self.clone().spawn_tailer(run.clone());
        Ok(run.body())
    }

    async fn launch(
        &self,
        rec: &mut RunRecord,
        provider: &ProviderHandle,
        default_program: &str,
        files: &crate::paths::RunFiles,
    ) -> Result<(), String> {
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
        let env: Vec<(String, String)> = env.into_iter().collect();

        let settings_path = if provider.dialog_hooker() {
            let ctx = hook_settings::context(&self.lab_exe, &rec.id, files);
            let doc = provider
                .hook_settings(ctx)
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("the provider could not make hook settings: {e}"))?;
            hook_settings::write(&self.home.runtime_dir(), files, &doc)?;
            Some(files.settings.to_string_lossy().into_owned())
        } else {
            None
        };
        let spec = provider
            .launch(LaunchRequest {
                run_id: rec.id.to_string(),
                session_id: uuid::Uuid::new_v4().to_string(),
                workdir: rec.workdir.clone(),
                prompt: rec.prompt.clone(),
                permission_mode: rec.permission_mode.clone(),
                program: program.to_string_lossy().into_owned(),
                settings_path,
                env: env.clone(),
            })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("the provider refused to launch: {e}"))?;
        if spec.argv.is_empty() {
            return Err("the provider returned an empty argv".into());
        }
        if let Some(t) = &spec.transcript_path {
            if !Path::new(t).is_absolute() {
                return Err(format!("the provider returned a relative transcript path {t:?}"));
            }
        }
        rec.session_id = spec.session_id;
        rec.transcript_path = spec.transcript_path;
        // The environment goes through a private file, not the command line.
        let env_map: BTreeMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let env_json = serde_json::to_vec(&env_map).map_err(|e| e.to_string())?;
        fsutil::write_atomic(&files.env, &env_json, 0o600)
            .map_err(|e| format!("writing {}: {e}", files.env.display()))?;
        let mut argv: Vec<String> = vec![
            self.lab_exe.to_string_lossy().into_owned(),
            "agent-exec".into(),
            "--env-file".into(),
            files.env.to_string_lossy().into_owned(),
            "--".into(),
        ];
        argv.extend(spec.argv);
        let tmux = self.tmux.clone();
        let name = rec.tmux_target.clone();
        let workdir = PathBuf::from(&rec.workdir);
        tokio::task::spawn_blocking(move || tmux.new_session(&name, &workdir, &argv))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("starting the agent in tmux failed: {e}"))
    }

    fn spawn_tailer(self: Arc<Self>, run: Arc<Run>) {
        tokio::spawn(async move {
            loop {
                {
                    let mut tail = run.tail.lock().await;
                    let derived = tail.refresh().await;
                    let ended = tail.ended;
                    if let Some(sid) = tail.session_id.clone() {
                        let mut rec = run.record.lock().unwrap();
                        if rec.session_id.is_none() {
                            rec.session_id = Some(sid);
                        }
                    }
                    if let Some(t) = tail.transcript_path() {
                        self.watch_transcript_dir(t);
                    }
                    drop(tail);
                    run.publish(derived);
                    if ended {
                        break;
                    }
                }
                tokio::select! {
                    _ = run.wake.notified() => {}
                    _ = tokio::time::sleep(POLL_INTERVAL) => {}
                }
            }
        });
    }

    /// Every poll interval: runs whose tmux session is gone have ended.
    fn spawn_liveness(self: Arc<Self>) {
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(POLL_INTERVAL).await;
                let active: Vec<Arc<Run>> =
                    self.list().into_iter().filter(|r| r.record().status == Status::Active).collect();
                for run in active {
                    let tmux = self.tmux.clone();
                    let name = run.record().tmux_target;
                    let alive = tokio::task::spawn_blocking(move || tmux.has_session(&name)).await.unwrap_or(true);
                    if !alive {
                        self.end(&run, "its tmux session is gone").await;
                    }
                }
            }
        });
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

    /// `POST /runs/{id}/messages`: type the text into the agent, then Enter.
    pub async fn send_message(&self, run: &Arc<Run>, text: &str) -> Result<(), RunError> {
        if text.trim().is_empty() {
            return Err(RunError::BadRequest("text is empty".into()));
        }
        let _keys = run.keys.lock().await;
        {
            let mut tail = run.tail.lock().await;
            if tail.ended {
                return Err(RunError::RunEnded);
            }
            let d = tail.refresh().await;
            let pending = d.pending_dialog.is_some();
            drop(tail);
            run.publish(d);
            if pending {
                return Err(RunError::DialogPending);
            }
        }
        let tmux = self.tmux.clone();
        let target = run.record().tmux_target;
        let buffer = format!("lab-{}", run.id);
        let text = text.to_string();
        tokio::task::spawn_blocking(move || {
            if text.contains('\n') {
                tmux.paste(&target, &buffer, &text)?;
            } else {
                tmux.send_literal(&target, &text)?;
            }
            std::thread::sleep(keystrokes::KEY_DELAY);
            tmux.send_key(&target, "Enter")
        })
        .await
        .map_err(|e| RunError::Internal(e.to_string()))?
        .map_err(|e| RunError::Internal(format!("typing into the agent failed: {e}")))?;
        run.wake();
        Ok(())
    }

    /// `POST /runs/{id}/dialog/answer`: the answer guard, then the paced keystrokes.
    pub async fn answer(&self, run: &Arc<Run>, tool_id: &str, answers: Vec<Answer>) -> Result<Vec<String>, RunError> {
        let provider = run.provider.clone().ok_or(RunError::NotAnswerable)?;
        if !provider.dialog_hooker() {
            return Err(RunError::NotAnswerable);
        }
        let _keys = run.keys.lock().await;
        // The hook that spooled the dialog fired before the picker was drawn: let it
        // settle before typing into it (the guard below then sees the fresh state).
        let settle = keystrokes::settle_wait(&self.home.run_files(&run.id).spool, SystemTime::now());
        if !settle.is_zero() {
            tokio::time::sleep(settle).await;
        }
        let ops = {
            let mut tail = run.tail.lock().await;
            if tail.ended {
                return Err(RunError::NoDialog);
            }
            tail.refresh().await;
            answer_guard::check(tail.spool(), tail.resolved(), tail.answered(), tool_id)?;
            let dialog = tail.spool().and_then(|s| s.dialog.clone()).ok_or(RunError::NotAnswerable)?;
            if !dialog.answerable {
                return Err(RunError::NotAnswerable);
            }
            let ops = provider
                .answer_keys(dialog, answers)
                .await
                .map_err(|e| RunError::Internal(e.to_string()))?
                .map_err(RunError::BadRequest)?;
            keystrokes::validate(&ops).map_err(RunError::Internal)?;
            tail.mark_answered(tool_id);
            let d = tail.derive().await;
            drop(tail);
            run.publish(d);
            ops
        };
        let tmux = self.tmux.clone();
        let target = run.record().tmux_target;
        let played: Vec<String> = ops.iter().map(keystrokes::describe).collect();
        let result = tokio::task::spawn_blocking(move || keystrokes::play(&tmux, &target, &ops, keystrokes::KEY_DELAY))
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

    fn start_watcher(self: &Arc<Self>) -> anyhow::Result<()> {
        use notify::Watcher;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<PathBuf>();
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if let Ok(ev) = res {
                for p in ev.paths {
                    let _ = tx.send(p);
                }
            }
        })?;
        watcher.watch(&self.home.runtime_dir(), notify::RecursiveMode::NonRecursive)?;
        *self.watcher.lock().unwrap() = Some(watcher);
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            while let Some(path) = rx.recv().await {
                let Some(runs) = me.upgrade() else { break };
                if let Some(run) = runs.run_for_path(&path) {
                    run.wake();
                }
            }
        });
        Ok(())
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

    fn watch_transcript_dir(&self, transcript: &Path) {
        use notify::Watcher;
        let Some(dir) = transcript.parent() else { return };
        if !dir.is_dir() {
            return;
        }
        let mut watched = self.watched_dirs.lock().unwrap();
        if watched.iter().any(|d| d == dir) {
            return;
        }
        if let Some(w) = self.watcher.lock().unwrap().as_mut() {
            match w.watch(dir, notify::RecursiveMode::NonRecursive) {
                Ok(()) => watched.push(dir.to_path_buf()),
                Err(e) => tracing::debug!(dir = %dir.display(), error = %e, "cannot watch; polling instead"),
            }
        }
    }

    /// Delete runtime files that belong to no active run (left by a crash).
    fn gc_orphans(&self) {
        let Ok(rd) = std::fs::read_dir(self.home.runtime_dir()) else { return };
        for entry in rd.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let id = crate::paths::RunFiles::owner(name).unwrap_or_default();
            let active = self.get(id).is_ok_and(|r| r.record().status == Status::Active);
            if !active {
                tracing::info!(file = %entry.path().display(), "removing a runtime file of no active run");
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}
