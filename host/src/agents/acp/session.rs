//! One ACP agent process and its session: the child under lab's supervision (its own
//! process group, stdio piped, stderr to a log), `initialize` and `session/new` (or
//! `session/load` after a lab restart), prompts one turn at a time, the agent's
//! `session/update`s into the run's [`Journal`], its permission requests and
//! elicitations into the run's spool until the operator answers, and its file-system
//! requests confined to the run's workdir ([`super::fs`]).

use super::dialog::Request;
use super::journal::Entry;
use super::recorder::Recorder;
use super::rpc::{Connection, Incoming, RpcError, INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND};
use crate::agents::model::Answer;
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// The ACP protocol version lab speaks.
pub const PROTOCOL_VERSION: u64 = 1;

/// How long `stop` waits for a turn to end after `session/cancel`, and then for the
/// process to exit after SIGTERM, before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// What starting a session needs.
pub struct Setup {
    /// The run (for logs).
    pub label: String,
    pub argv: Vec<String>,
    /// The agent's whole environment.
    pub env: BTreeMap<String, String>,
    /// The run's workdir: the session's cwd and the only place its files may be.
    pub cwd: PathBuf,
    pub journal: PathBuf,
    pub spool: PathBuf,
    pub stderr_log: PathBuf,
    /// Bound on `initialize` + `session/new` (or `session/load`) + `session/set_mode`.
    pub start_timeout: Duration,
    /// The session mode to set (`session/set_mode`), if any: the run's `permission_mode`.
    pub mode: Option<String>,
    /// Called after each change to the journal or the spool.
    pub wake: Arc<dyn Fn() + Send + Sync>,
    /// Told the session modes the agent offers, as soon as a new session says them.
    pub on_modes: Box<dyn Fn(Vec<String>) + Send + Sync>,
    /// Where the agent's `terminal/*` requests run (None: not offered).
    pub terminals: Option<Arc<super::terminal::Terminals>>,
    /// What a turn used, read from a prompt response without the protocol's `usage`
    /// (its provider's `turn-usage`; None: nothing to read it with).
    pub turn_usage: Option<TurnUsage>,
    /// Where the agent's process is started ([`super::process::Local`]: here).
    pub spawner: Arc<dyn super::process::Spawner>,
}

/// Reads a turn's tokens by model from a `session/prompt` response's JSON (an ACP
/// provider's `turn-usage`); empty when it finds none.
pub type TurnUsage = Arc<
    dyn Fn(
            String,
        )
            -> std::pin::Pin<Box<dyn std::future::Future<Output = Vec<(String, crate::agents::model::Tokens)>> + Send>>
        + Send
        + Sync,
>;

pub struct Session {
    label: String,
    conn: Arc<Connection>,
    session_id: Mutex<String>,
    /// The model the session said it uses, if it said ([`super::usage::session_model`]).
    model: Mutex<Option<String>>,
    turn_usage: Option<TurnUsage>,
    /// What the agent says, into the run's journal.
    rec: Recorder,
    spool: PathBuf,
    /// The workdir, resolved (None: the agent's files are not here, and lab serves no
    /// `fs/*` request), and as the agent was told it (its `cwd`).
    root: Option<PathBuf>,
    told: PathBuf,
    /// The agent's requests waiting for the operator, oldest first (the spool shows the
    /// first), with their JSON-RPC ids.
    pending: Mutex<VecDeque<(Value, Request)>>,
    next_n: AtomicU64,
    /// One prompt turn at a time.
    turn: tokio::sync::Mutex<()>,
    /// Prompts given (numbered in order) and sent so far.
    prompt_seq: AtomicU64,
    prompts_served: watch::Sender<u64>,
    /// `session/load` and `session/fork` replay the history: not journalled again.
    loading: AtomicBool,
    /// Whether the agent said it forks sessions (`sessionCapabilities.fork`).
    can_fork: AtomicBool,
    stopping: AtomicBool,
    /// Signals the agent's process group, wherever it runs.
    signal: Box<dyn Fn(super::process::Stop) + Send + Sync>,
    /// Why the process exited, once it has.
    exited: watch::Receiver<Option<String>>,
    wake: Arc<dyn Fn() + Send + Sync>,
    terminals: Option<Arc<super::terminal::Terminals>>,
}

/// Which session a started agent opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Open {
    /// A new one (`session/new`).
    New,
    /// This earlier one, again (`session/load`, after a restart or to resume a run).
    Load(String),
    /// A new one branched from this earlier one's conversation (`session/fork`, where
    /// the agent offers `sessionCapabilities.fork`).
    Fork(String),
}

/// Why a session could not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartError {
    /// Resuming was asked and the agent cannot load sessions.
    CannotResume,
    /// A fork was asked and the agent cannot fork sessions.
    CannotFork,
    Failed(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::CannotResume => f.write_str("the agent cannot load a session (no loadSession capability)"),
            StartError::CannotFork => f.write_str("the agent cannot fork a session (no sessionCapabilities.fork)"),
            StartError::Failed(s) => f.write_str(s),
        }
    }
}

impl Session {
    /// Spawn the agent and open a session: a new one, or `resume`'s (`session/load`).
    pub async fn start(setup: Setup, open: Open) -> Result<Arc<Session>, StartError> {
        let fail = |m: String| StartError::Failed(m);
        let files_here = setup.spawner.files_here();
        let cmd = super::process::Command {
            argv: setup.argv.clone(),
            env: setup.env.clone(),
            cwd: setup.cwd.clone(),
            stderr_log: setup.stderr_log.clone(),
        };
        let io = setup.spawner.spawn(cmd).await.map_err(fail)?;
        let (stdout, stdin) = (io.reader, io.writer);
        let (conn, incoming) = Connection::start(stdout, stdin, setup.label.clone());
        let (exit_tx, exited) = watch::channel(None);
        let root = match files_here {
            true => Some(std::fs::canonicalize(&setup.cwd).map_err(|e| fail(format!("{}: {e}", setup.cwd.display())))?),
            false => None,
        };
        let session = Arc::new(Session {
            label: setup.label.clone(),
            conn,
            session_id: Mutex::new(String::new()),
            model: Mutex::new(None),
            turn_usage: setup.turn_usage.clone(),
            rec: Recorder::new(setup.label.clone(), setup.journal),
            spool: setup.spool,
            root,
            told: setup.cwd.clone(),
            pending: Mutex::new(VecDeque::new()),
            next_n: AtomicU64::new(1),
            turn: tokio::sync::Mutex::new(()),
            prompt_seq: AtomicU64::new(0),
            prompts_served: watch::channel(0).0,
            loading: AtomicBool::new(open != Open::New),
            can_fork: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            signal: io.signal,
            exited,
            wake: setup.wake,
            terminals: if files_here { setup.terminals.clone() } else { None },
        });
        let stderr_log = setup.stderr_log.clone();
        let exiting = io.exited;
        tokio::spawn(async move {
            let why = exiting.await;
            let tail = stderr_tail(&stderr_log);
            let why = if tail.is_empty() { why } else { format!("{why}; its last words: {tail}") };
            let _ = exit_tx.send(Some(why));
        });
        tokio::spawn(session.clone().serve(incoming));
        let opened =
            tokio::time::timeout(setup.start_timeout, session.open(&setup.cwd, open, setup.mode, &*setup.on_modes))
                .await;
        let result = match opened {
            Ok(r) => r,
            Err(_) => Err(fail(format!(
                "the agent did not finish starting its session within {} s",
                setup.start_timeout.as_secs_f32()
            ))),
        };
        match result {
            Ok(()) => Ok(session),
            Err(e) => {
                session.kill().await;
                let e = match (e, session.exit_reason()) {
                    (StartError::Failed(m), Some(why)) => StartError::Failed(format!("{m} ({why})")),
                    (e, _) => e,
                };
                Err(e)
            }
        }
    }

    async fn open(
        &self,
        cwd: &std::path::Path,
        open: Open,
        mode: Option<String>,
        on_modes: &(dyn Fn(Vec<String>) + Send + Sync),
    ) -> Result<(), StartError> {
        let fail = |e: RpcError| StartError::Failed(e.to_string());
        let init = self
            .conn
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    "clientCapabilities": {
                        "fs": {"readTextFile": self.root.is_some(), "writeTextFile": self.root.is_some()},
                        "terminal": self.terminals.is_some(),
                        "elicitation": {"form": {}}
                    },
                    "clientInfo": {"name": "lab", "version": env!("CARGO_PKG_VERSION")}
                }),
            )
            .await
            .map_err(fail)?;
        let caps = &init["agentCapabilities"];
        let can_load = caps["loadSession"].as_bool().unwrap_or(false);
        let can_fork = caps["sessionCapabilities"]["fork"].is_object();
        self.can_fork.store(can_fork, Ordering::SeqCst);
        let cwd = cwd.to_string_lossy();
        // The modes a new session offers (session/load's result does not say them).
        let mut offered = Vec::new();
        match open {
            Open::New => {
                let r = self.conn.request("session/new", json!({"cwd": cwd, "mcpServers": []})).await.map_err(fail)?;
                let sid = r["sessionId"]
                    .as_str()
                    .ok_or_else(|| StartError::Failed("session/new returned no sessionId".into()))?;
                *self.session_id.lock().unwrap() = sid.to_string();
                *self.model.lock().unwrap() = super::usage::session_model(&r);
                offered = offered_modes(&r["modes"]);
                if !offered.is_empty() {
                    on_modes(offered.clone());
                }
                self.rec.write(Entry::Session { session_id: sid.to_string() });
            }
            Open::Load(sid) => {
                if !can_load {
                    return Err(StartError::CannotResume);
                }
                *self.session_id.lock().unwrap() = sid.clone();
                let r = self
                    .conn
                    .request("session/load", json!({"sessionId": sid, "cwd": cwd, "mcpServers": []}))
                    .await
                    .map_err(fail)?;
                *self.model.lock().unwrap() = super::usage::session_model(&r);
                self.replayed().await;
            }
            Open::Fork(from) => {
                if !can_fork {
                    return Err(StartError::CannotFork);
                }
                let r = self
                    .conn
                    .request("session/fork", json!({"sessionId": from, "cwd": cwd, "mcpServers": []}))
                    .await
                    .map_err(fail)?;
                let sid = r["sessionId"]
                    .as_str()
                    .filter(|s| !s.is_empty() && *s != from)
                    .ok_or_else(|| StartError::Failed("session/fork returned no new sessionId".into()))?;
                *self.session_id.lock().unwrap() = sid.to_string();
                *self.model.lock().unwrap() = super::usage::session_model(&r);
                offered = offered_modes(&r["modes"]);
                self.replayed().await;
                self.rec.write(Entry::Session { session_id: sid.to_string() });
            }
        }
        if let Some(mode) = mode {
            let sid = self.session_id();
            self.conn.request("session/set_mode", json!({"sessionId": sid, "modeId": mode})).await.map_err(|e| {
                let offered =
                    if offered.is_empty() { String::new() } else { format!(" (it offers {})", offered.join(", ")) };
                StartError::Failed(format!("the agent did not take permission_mode {mode:?}{offered}: {e}"))
            })?;
        }
        Ok(())
    }

    /// The history a loaded or forked session replays is over once every update sent
    /// before the response was taken (and skipped): what comes after it is new.
    async fn replayed(&self) {
        if let Some(fence) = self.conn.fence() {
            let _ = fence.await;
        }
        self.loading.store(false, Ordering::SeqCst);
        self.rec.clear_buffer();
    }

    /// Whether the agent said it forks sessions (known once it started).
    pub fn can_fork(&self) -> bool {
        self.can_fork.load(Ordering::SeqCst)
    }

    /// Say something in the chat (lab's own words).
    pub fn note(&self, text: &str) {
        self.rec.write(Entry::Note { text: text.to_string() });
        (self.wake)();
    }

    pub fn session_id(&self) -> String {
        self.session_id.lock().unwrap().clone()
    }

    /// Why the agent's process exited, once it has.
    pub fn exit_reason(&self) -> Option<String> {
        self.exited.borrow().clone()
    }

    /// Wait until the agent's process exits; why it did.
    pub async fn exited(&self) -> String {
        let mut rx = self.exited.clone();
        loop {
            if let Some(why) = rx.borrow_and_update().clone() {
                return why;
            }
            if rx.changed().await.is_err() {
                return "the agent exited".into();
            }
        }
    }

    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Send a prompt: journalled now, sent when the turn before it has ended.
    pub fn prompt(self: &Arc<Self>, text: String) {
        self.rec.write(Entry::User { text: text.clone() });
        (self.wake)();
        // Prompts are sent in the order they were given: each waits for its number.
        let mine = self.prompt_seq.fetch_add(1, Ordering::SeqCst);
        let s = self.clone();
        tokio::spawn(async move {
            let mut served = s.prompts_served.subscribe();
            let _ = served.wait_for(|n| *n == mine).await;
            let _next = NextPrompt(&s.prompts_served);
            let _turn = s.turn.lock().await;
            if s.stopping() || s.exit_reason().is_some() {
                return;
            }
            s.rec.write(Entry::Turn { working: true, reason: None });
            (s.wake)();
            let sid = s.session_id();
            let r = s
                .conn
                .request("session/prompt", json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}))
                .await;
            // The turn's updates (sent before its response) are in the journal first.
            if let Some(fence) = s.conn.fence() {
                let _ = fence.await;
            }
            s.rec.flush();
            match r {
                Ok(v) => {
                    // Unique per turn, across restarts of lab too.
                    let id = format!("{sid}@{}", humantime::format_rfc3339_nanos(std::time::SystemTime::now()));
                    let by_model = match (super::usage::turn_tokens(&v), &s.turn_usage) {
                        (Some(t), _) => vec![(s.model.lock().unwrap().clone(), t)],
                        (None, Some(read)) => {
                            read(v.to_string()).await.into_iter().map(|(m, t)| (Some(m), t)).collect()
                        }
                        (None, None) => Vec::new(),
                    };
                    let several = by_model.len() > 1;
                    for (model, t) in by_model {
                        let id = match (&model, several) {
                            (Some(m), true) => format!("{id}#{m}"),
                            _ => id.clone(),
                        };
                        s.rec.write(Entry::Usage {
                            id,
                            model,
                            input: t.input,
                            output: t.output,
                            cache_read: t.cache_read,
                            cache_write: t.cache_write,
                        });
                    }
                    s.rec.write(Entry::Turn { working: false, reason: v["stopReason"].as_str().map(str::to_string) })
                }
                Err(RpcError::Closed(_)) if s.stopping() => {}
                Err(e) => s.rec.write(Entry::Error { text: e.to_string() }),
            }
            (s.wake)();
        });
    }

    /// Answer the waiting request lab numbered `n` (the first one: the one shown).
    /// `Err(msg)`: the answers do not fit it (nothing sent).
    pub async fn answer(&self, n: u64, answers: &[Answer]) -> Result<(), AnswerError> {
        let (id, req, result) = {
            let mut q = self.pending.lock().unwrap();
            match q.front() {
                Some((_, r)) if r.n() == n => {}
                _ => return Err(AnswerError::Gone),
            }
            let result = q.front().unwrap().1.result(answers).map_err(AnswerError::Bad)?;
            let (id, req) = q.pop_front().unwrap();
            (id, req, result)
        };
        self.rec.write(Entry::Note { text: req.answered_text(answers) });
        let sent = self.conn.respond(&id, Ok(result)).await;
        self.show_first();
        sent.map_err(|e| AnswerError::Send(e.to_string()))
    }

    /// Spool the first waiting request, or remove the spool when none waits.
    fn show_first(&self) {
        let first = self.pending.lock().unwrap().front().map(|(_, r)| r.clone());
        let r = match first {
            Some(req) => {
                let bytes = serde_json::to_vec(&req).unwrap_or_default();
                crate::store::fsutil::write_atomic(&self.spool, &bytes, 0o600)
            }
            None => crate::store::fsutil::remove_if_exists(&self.spool),
        };
        if let Err(e) = r {
            tracing::error!(run = %self.label, error = %e, "could not write the run's spool");
        }
        (self.wake)();
    }

    /// Cancel what waits, end the turn, end the process (SIGTERM, then SIGKILL).
    pub async fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        let waiting: Vec<(Value, Request)> = self.pending.lock().unwrap().drain(..).collect();
        for (id, req) in waiting {
            let _ = self.conn.respond(&id, Ok(req.cancelled())).await;
        }
        let _ = crate::store::fsutil::remove_if_exists(&self.spool);
        if self.exit_reason().is_none() {
            let _ = self.conn.notify("session/cancel", json!({"sessionId": self.session_id()})).await;
            let _ = tokio::time::timeout(STOP_GRACE, self.turn.lock()).await;
        }
        self.rec.flush();
        if let Some(t) = &self.terminals {
            t.release_all();
        }
        self.kill().await;
    }

    /// `lab serve` is shutting down: the agent's process group gets SIGTERM and the run
    /// stays active (the next `lab serve` loads its session again).
    pub fn detach(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        if self.exit_reason().is_none() {
            (self.signal)(super::process::Stop::Term);
        }
    }

    /// End the process group: SIGTERM, then SIGKILL after [`STOP_GRACE`].
    pub async fn kill(&self) {
        if self.exit_reason().is_some() {
            return;
        }
        (self.signal)(super::process::Stop::Term);
        let mut rx = self.exited.clone();
        let ended = tokio::time::timeout(STOP_GRACE, rx.wait_for(|e| e.is_some())).await.is_ok();
        if !ended {
            (self.signal)(super::process::Stop::Kill);
            let _ = tokio::time::timeout(STOP_GRACE, rx.wait_for(|e| e.is_some())).await;
        }
    }

    /// The agent's messages, in order, until its stdout ends.
    async fn serve(self: Arc<Self>, mut incoming: mpsc::UnboundedReceiver<Incoming>) {
        while let Some(m) = incoming.recv().await {
            match m {
                Incoming::Fence(f) => {
                    let _ = f.send(());
                }
                Incoming::Notification { method, params } if method == "session/update" => {
                    self.update(&params["update"]);
                }
                Incoming::Notification { method, .. } => {
                    tracing::debug!(run = %self.label, %method, "ignored a notification from the agent");
                }
                Incoming::Request { id, method, params } if method.starts_with("terminal/") => {
                    // Waiting for a command's exit must not hold the agent's other messages.
                    let s = self.clone();
                    tokio::spawn(async move {
                        let result = s.terminal(&method, &params).await;
                        if let Err(e) = s.conn.respond(&id, result).await {
                            tracing::warn!(run = %s.label, error = %e, "could not answer the agent");
                        }
                    });
                }
                Incoming::Request { id, method, params } => {
                    let result = self.request(&method, &params);
                    if let Some(result) = result {
                        if let Err(e) = self.conn.respond(&id, result).await {
                            tracing::warn!(run = %self.label, error = %e, "could not answer the agent");
                        }
                    } else {
                        // Waits for the operator.
                        let n = self.next_n.fetch_add(1, Ordering::SeqCst);
                        let req = match method.as_str() {
                            "session/request_permission" => Request::permission(n, &params),
                            _ => Request::elicitation(n, &params),
                        };
                        match req {
                            Ok(req) => {
                                self.rec.flush();
                                // The call asked about, journalled if the agent named it
                                // nowhere else first.
                                if params["toolCall"]["toolCallId"].is_string() {
                                    self.rec.call(&params["toolCall"]);
                                }
                                let first = {
                                    let mut q = self.pending.lock().unwrap();
                                    q.push_back((id, req));
                                    q.len() == 1
                                };
                                if first {
                                    self.show_first();
                                }
                            }
                            Err(why) => {
                                tracing::warn!(run = %self.label, %method, %why, "refused a malformed request from the agent");
                                let _ = self.conn.respond(&id, Err((INVALID_PARAMS, why))).await;
                            }
                        }
                    }
                }
            }
        }
        self.rec.flush();
        (self.wake)();
    }

    /// The agent's request: answered at once (`Some`), or `None` for the ones that
    /// wait for the operator.
    fn request(&self, method: &str, params: &Value) -> Option<Result<Value, (i64, String)>> {
        match method {
            "session/request_permission" | "elicitation/create" => {
                if self.stopping() {
                    return Some(Err((INTERNAL_ERROR, "the run is stopping".into())));
                }
                None
            }
            "fs/read_text_file" | "fs/write_text_file" if self.root.is_none() => {
                Some(Err((METHOD_NOT_FOUND, format!("lab does not offer {method} to this agent (on another machine or in a sandbox, it reads and writes its files itself)"))))
            }
            "fs/read_text_file" => Some(self.read_file(params)),
            "fs/write_text_file" => Some(self.write_file(params)),
            other => {
                tracing::info!(run = %self.label, method = %other, "the agent asked for a method lab does not offer");
                Some(Err((METHOD_NOT_FOUND, format!("lab does not offer {other}"))))
            }
        }
    }

    async fn terminal(&self, method: &str, params: &Value) -> Result<Value, (i64, String)> {
        let Some(t) = &self.terminals else {
            return Err((METHOD_NOT_FOUND, format!("lab does not offer {method}")));
        };
        let r = match method {
            "terminal/create" => t.create(params),
            "terminal/output" => t.output(params),
            "terminal/wait_for_exit" => {
                t.wait_for_exit(params, || self.stopping() || self.exit_reason().is_some()).await
            }
            "terminal/kill" => t.kill(params),
            "terminal/release" => t.release(params),
            other => Err((METHOD_NOT_FOUND, format!("lab does not offer {other}"))),
        };
        if let Err((_, why)) = &r {
            tracing::warn!(run = %self.label, method, %why, "refused the agent's terminal request");
        }
        r
    }

    fn read_file(&self, params: &Value) -> Result<Value, (i64, String)> {
        let root = self.root.as_ref().ok_or((METHOD_NOT_FOUND, "no files here".to_string()))?;
        let path = params["path"].as_str().ok_or((INVALID_PARAMS, "no path".to_string()))?;
        let p = super::fs::confine(root, &self.told, path).map_err(|e| self.refuse_fs("read", path, e))?;
        let text = super::fs::read(root, &p, params["line"].as_u64(), params["limit"].as_u64())
            .map_err(|e| self.refuse_fs("read", path, e))?;
        Ok(json!({"content": text}))
    }

    fn write_file(&self, params: &Value) -> Result<Value, (i64, String)> {
        let path = params["path"].as_str().ok_or((INVALID_PARAMS, "no path".to_string()))?;
        let content = params["content"].as_str().ok_or((INVALID_PARAMS, "no content".to_string()))?;
        let root = self.root.as_ref().ok_or((METHOD_NOT_FOUND, "no files here".to_string()))?;
        let p = super::fs::confine(root, &self.told, path).map_err(|e| self.refuse_fs("write", path, e))?;
        super::fs::write(root, &p, content).map_err(|e| self.refuse_fs("write", path, e))?;
        Ok(json!(null))
    }

    fn refuse_fs(&self, what: &str, path: &str, why: String) -> (i64, String) {
        tracing::warn!(run = %self.label, op = what, path, %why, "refused the agent's file request");
        (INVALID_PARAMS, why)
    }

    /// One `session/update` (skipped while `session/load` replays the history).
    fn update(&self, u: &Value) {
        if self.loading.load(Ordering::SeqCst) {
            return;
        }
        if self.rec.update(u) {
            (self.wake)();
        }
    }
}

/// Lets the next prompt go when a prompt's turn is over (or skipped).
struct NextPrompt<'a>(&'a watch::Sender<u64>);

impl Drop for NextPrompt<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n += 1);
    }
}

/// Why an answer was not sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerError {
    /// The request is no longer the one waiting.
    Gone,
    /// The answers do not fit it.
    Bad(String),
    Send(String),
}

/// The mode ids of `session/new`'s `modes` (`{currentModeId, availableModes: [{id}]}`),
/// the current one first.
fn offered_modes(modes: &Value) -> Vec<String> {
    let mut ids: Vec<String> = modes["availableModes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["id"].as_str().map(str::to_string))
        .collect();
    if let Some(cur) = modes["currentModeId"].as_str() {
        if let Some(i) = ids.iter().position(|m| m == cur) {
            let m = ids.remove(i);
            ids.insert(0, m);
        }
    }
    ids
}

/// The last lines of the agent's stderr (at most 5 lines, 600 bytes), for an end's reason.
fn stderr_tail(path: &std::path::Path) -> String {
    let Ok(bytes) = std::fs::read(path) else { return String::new() };
    let start = bytes.len().saturating_sub(4096);
    let text = String::from_utf8_lossy(&bytes[start..]);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(5)..].join(" | ");
    tail.chars().rev().take(600).collect::<Vec<_>>().into_iter().rev().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offered_modes_start_with_the_current_one() {
        let m = json!({"currentModeId": "auto", "availableModes": [{"id": "default"}, {"id": "plan"}, {"id": "auto"}]});
        assert_eq!(offered_modes(&m), ["auto", "default", "plan"]);
        assert!(offered_modes(&Value::Null).is_empty());
    }
}
