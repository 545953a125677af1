//! Runs of ACP agents ([`crate::agents::acp`]): launching one (the agent as lab's child, a tmux
//! session of the run's own that shows the agent's log, so attaching still shows the
//! work and the liveness loop treats it like any run), its prompts, answers and stop,
//! and resuming it after `lab serve` restarts (`session/load`, else the run ends with
//! that reason). Everything else — the view, the guard, the composer lock, the API —
//! is the same as for tmux runs: the journal is the run's transcript, the request that
//! waits is its spool.

mod place;

use super::{Resume, Transport};
use crate::agents::acp::{self, AcpAgent, AnswerError, Open, Session, Setup, StartError};
use crate::agents::model::Answer;
use crate::runs::api::{AnswerProgress, AnswerState, CreateRun, RunBody, RunError};
use crate::runs::live::tailer::Tail;
use crate::runs::providers::Pinned;
use crate::runs::registry::RunRecord;
use crate::runs::{now_rfc3339, Core, Read, Run, Runs};
use crate::store::fsutil;
use crate::store::paths::RunId;
use futures_util::future::BoxFuture;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// An ACP run's journal (its chat, lab's own transcript of it) in `acp_dir`.
pub(in crate::runs) fn journal_of(acp_dir: &Path, id: &RunId) -> PathBuf {
    acp_dir.join(format!("{id}.jsonl"))
}

/// Whether `path` is [`journal_of`] run `id`, without making that path (asked for
/// every run on the liveness loop's turns).
pub(in crate::runs) fn is_journal_of(path: &Path, acp_dir: &Path, id: &RunId) -> bool {
    path.parent() == Some(acp_dir)
        && path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".jsonl")) == Some(id.as_str())
}

/// What lab holds of its ACP runs, and only this transport touches: the agents it can
/// run, each live run's agent session, and the modes each agent offered.
pub(in crate::runs) struct AcpRuns {
    /// `<home>/acp`: the ACP runs' journals.
    dir: PathBuf,
    /// The ACP agents lab can run, by name (lab.toml's and components' declarations),
    /// swapped whole when the providers are.
    agents: std::sync::RwLock<Arc<BTreeMap<String, AcpAgent>>>,
    /// The live ACP runs' agent sessions, by run.
    sessions: Mutex<HashMap<RunId, Arc<Session>>>,
    /// The session modes each ACP agent offered in its newest session.
    learned_modes: Mutex<HashMap<String, Vec<String>>>,
    /// Whether each ACP agent said it forks sessions, as its newest start said.
    learned_forks: Mutex<HashMap<String, bool>>,
    /// Runs being resumed: the agent's session loaded again, and the operator's next
    /// message, until the run is live again ([`Transport::resumed`]).
    resuming: Mutex<HashMap<RunId, (Arc<Session>, String)>>,
    /// Where each run's session showing its agent's log is: lab's tmux here.
    log_sessions: Arc<dyn crate::machines::terminal::Sessions>,
    /// Other machines' runners, which start the agents of runs there.
    hosts: Arc<crate::machines::hosts::Hosts>,
}

impl AcpRuns {
    pub(in crate::runs) fn new(
        dir: PathBuf,
        agents: BTreeMap<String, AcpAgent>,
        log_sessions: Arc<dyn crate::machines::terminal::Sessions>,
        hosts: Arc<crate::machines::hosts::Hosts>,
    ) -> AcpRuns {
        AcpRuns {
            log_sessions,
            hosts,
            dir,
            agents: std::sync::RwLock::new(Arc::new(agents)),
            sessions: Mutex::default(),
            learned_modes: Mutex::default(),
            learned_forks: Mutex::default(),
            resuming: Mutex::default(),
        }
    }

    /// The agents lab can run from now on (runs live go on with theirs).
    pub(in crate::runs) fn set_agents(&self, agents: BTreeMap<String, AcpAgent>) {
        *self.agents.write().unwrap() = Arc::new(agents);
    }

    pub(in crate::runs) fn agents(&self) -> Arc<BTreeMap<String, AcpAgent>> {
        self.agents.read().unwrap().clone()
    }

    /// `<home>/acp`: the ACP runs' journals.
    pub(in crate::runs) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Let every agent go (`lab serve` stops): they are its children; their runs stay
    /// active and are resumed by the next serve.
    /// Every live agent asked to stop (SIGTERM), then waited for: one still there after
    /// the grace is killed ([`Session::kill`]).
    pub(in crate::runs) async fn detach_all(&self) {
        let sessions: Vec<Arc<Session>> = self.sessions.lock().unwrap().values().cloned().collect();
        for s in &sessions {
            s.detach();
        }
        futures_util::future::join_all(sessions.iter().map(|s| s.kill())).await;
    }

    /// Run `id`'s live agent session (none before it started or was resumed, nor after
    /// it ended).
    pub(in crate::runs) fn session(&self, id: &RunId) -> Option<Arc<Session>> {
        self.sessions.lock().unwrap().get(id).cloned()
    }
}

/// An ACP run speaks JSON-RPC to its agent while its session is live; its tmux session
/// here only shows the agent's log. Without a live session (resuming after a restart),
/// it is what any run here is.
impl Transport for AcpRuns {
    /// As a tmux run's: `lab agent-exec` starts the agent in its jail, here or on its
    /// host (the jail's program is looked for there when the agent starts).
    fn can_jail(&self, _kind: crate::sandbox::Kind) -> Result<(), RunError> {
        Ok(())
    }

    /// On its host, where its proxy reads it (here: lab serve's own file, written
    /// already).
    fn put_allowlist<'a>(
        &'a self,
        _core: &'a Core,
        rec: &'a RunRecord,
        list: &'a crate::sandbox::egress::Allowlist,
    ) -> BoxFuture<'a, Result<(), RunError>> {
        Box::pin(async move {
            match &rec.host {
                Some(host) => super::remote::allowlist_there(&self.hosts, host, &rec.id, list).await,
                None => Ok(()),
            }
        })
    }

    fn launch<'a>(&'a self, runs: &'a Arc<Runs>, req: CreateRun) -> BoxFuture<'a, Result<RunBody, RunError>> {
        match self.agents().get(&req.provider).cloned() {
            Some(agent) => Box::pin(self.create_acp(runs, req, agent)),
            None => {
                Box::pin(std::future::ready(Err(RunError::BadRequest(format!("unknown provider `{}`", req.provider)))))
            }
        }
    }

    fn send_message<'a>(
        &'a self,
        core: &'a Arc<Core>,
        run: &'a Arc<Run>,
        text: String,
    ) -> BoxFuture<'a, Result<(), RunError>> {
        match self.session(&run.id) {
            Some(session) => Box::pin(self.send_acp_message(core, run, session, text)),
            None => Box::pin(core.type_message(run, text)),
        }
    }

    fn answer<'a>(
        &'a self,
        core: &'a Arc<Core>,
        run: &'a Arc<Run>,
        tool_id: &'a str,
        answers: Vec<Answer>,
    ) -> BoxFuture<'a, Result<AnswerProgress, RunError>> {
        match self.session(&run.id) {
            Some(session) => Box::pin(self.answer_acp(core, run, session, tool_id, answers)),
            None => Box::pin(core.type_answer(run, tool_id, answers)),
        }
    }

    /// The protocol says it: the options' kinds ([`acp::dialog::prompt_facts`]).
    fn prompt_facts<'a>(
        &'a self,
        _run: &'a Arc<Run>,
        dialog: &'a crate::agents::model::Dialog,
    ) -> BoxFuture<'a, Option<crate::agents::model::PromptFacts>> {
        Box::pin(async move { acp::dialog::prompt_facts(dialog) })
    }

    /// The session showing the agent's log, in lab's tmux here.
    fn terminal(&self, _rec: &RunRecord) -> Arc<dyn crate::machines::terminal::Terminal> {
        self.log_sessions.clone()
    }

    /// The session that shows the agent's log, here.
    fn close<'a>(&'a self, _core: &'a Core, rec: &'a RunRecord) -> BoxFuture<'a, Result<(), RunError>> {
        Box::pin(super::tmux::end_session(self.log_sessions.clone(), rec.tmux_target.clone()))
    }

    /// The agent asked to stop (its session ends), then the run closed and ended.
    fn stop<'a>(&'a self, core: &'a Arc<Core>, run: &'a Arc<Run>) -> BoxFuture<'a, Result<(), RunError>> {
        match self.session(&run.id) {
            Some(session) => Box::pin(async move {
                self.stop_acp(core, run, session).await;
                Ok(())
            }),
            None => Box::pin(super::close_and_end(self, core, run)),
        }
    }

    /// lab's own journal, read natively; no provider. Its usage lines (what the agent
    /// said of each turn's tokens) go to the usage book like a transcript's.
    fn reader(&self, core: &Core, rec: &RunRecord, _pinned: Option<Pinned>) -> (Option<Pinned>, Tail) {
        let reader = Arc::new(acp::journal::JournalReader);
        let transcript = rec.transcript_path.as_ref().map(PathBuf::from);
        let mut tail = Tail::new(rec.id.clone(), reader, transcript, core.home.run_files(&rec.id), None);
        tail.set_books(core.books.clone());
        (None, tail)
    }

    /// While its agent's session is live.
    fn holds_live(&self, id: &RunId) -> bool {
        self.session(id).is_some()
    }

    /// The agent goes too (its session stopped, in the background).
    fn ended(&self, id: &RunId) {
        if let Some(s) = self.sessions.lock().unwrap().remove(id) {
            tokio::spawn(async move { s.stop().await });
        }
    }

    /// An ACP run is resumed by starting its agent again and asking it to load the
    /// session (`session/load`, where the agent offers `loadSession`); forked where the
    /// agent said it forks sessions (`session/fork`).
    fn abilities(&self, _core: &Core, rec: &RunRecord) -> Option<crate::agents::model::Abilities> {
        self.agent(&rec.provider)?;
        Some(crate::agents::model::Abilities { resume: true, fork: self.forks(&rec.provider) })
    }

    fn relaunch<'a>(
        &'a self,
        runs: &'a Arc<Runs>,
        rec: &'a mut RunRecord,
        continuing: &'a crate::runs::continuation::Continuing,
    ) -> BoxFuture<'a, Result<Option<String>, RunError>> {
        Box::pin(async move {
            let agent = self.agent(&rec.provider).ok_or_else(|| {
                RunError::NotSupported(format!("no ACP agent `{}` is configured any more", rec.provider))
            })?;
            let sid = continuing.earlier.session_id.clone();
            let _ = fsutil::remove_if_exists(&runs.home.run_files(&rec.id).spool);
            let session = self.start_acp(runs, rec, &agent, Open::Load(sid)).await.map_err(|e| match e {
                StartError::CannotResume | StartError::CannotFork => RunError::NotSupported(format!(
                    "the ACP agent `{}` cannot load a session again (it offers no loadSession)",
                    rec.provider
                )),
                StartError::Failed(e) => RunError::LaunchFailed(format!("resuming the agent failed: {e}")),
            })?;
            session.note("resumed: the agent's session was loaded again");
            self.resuming.lock().unwrap().insert(rec.id.clone(), (session, continuing.prompt.clone()));
            Ok(None)
        })
    }

    /// The loaded session is the run's from now on; the operator's message is its next
    /// prompt.
    fn resumed<'a>(&'a self, runs: &'a Arc<Runs>, run: &'a Arc<Run>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Some((session, prompt)) = self.resuming.lock().unwrap().remove(&run.id) else { return };
            self.adopt_acp(runs, run, session);
            run.wake();
            if !prompt.is_empty() {
                if let Err(e) = runs.send_message(run, &prompt).await {
                    runs.record_error(run, &format!("the resumed run's message was not sent: {e}"));
                }
            }
        })
    }

    /// The agent started again and asked to load its session (`session/load`); the run
    /// ends with the reason when it cannot.
    fn resume(&self, runs: &Arc<Runs>, run: Arc<Run>) -> Resume {
        self.resume_acp(runs, run.clone());
        runs.clone().spawn_tailer(run, true);
        Resume::Followed
    }
}

impl AcpRuns {
    /// The ACP agent `name` (declared by a component, or lab.toml's `[agents.<name>]`).
    pub(in crate::runs) fn agent(&self, name: &str) -> Option<AcpAgent> {
        self.agents().get(name).cloned()
    }

    /// Whether ACP agent `name` forks sessions (`sessionCapabilities.fork`), as its
    /// newest start said (not known before its first run: no).
    pub(in crate::runs) fn forks(&self, name: &str) -> bool {
        self.learned_forks.lock().unwrap().get(name).copied().unwrap_or(false)
    }

    /// The modes an ACP agent takes (`permission_mode`), its default first: lab.toml's
    /// `permission_modes`, else what the agent offered in its last new session (none
    /// known before its first run).
    pub(in crate::runs) fn modes(&self, name: &str) -> Vec<String> {
        match self.agents().get(name).and_then(|a| a.config.permission_modes.clone()) {
            Some(m) => m,
            None => self.learned_modes.lock().unwrap().get(name).cloned().unwrap_or_default(),
        }
    }

    fn files(runs: &Runs, id: &RunId) -> (PathBuf, PathBuf) {
        let dir = runs.home.acp_dir();
        (journal_of(&dir, id), dir.join(format!("{id}.stderr.log")))
    }

    /// `POST /runs` for an ACP agent.
    pub(in crate::runs) async fn create_acp(
        &self,
        runs: &Arc<Runs>,
        req: CreateRun,
        agent: AcpAgent,
    ) -> Result<RunBody, RunError> {
        let prompt = crate::runs::launch::checked_request(&req)?;
        if let Some(m) = &req.permission_mode {
            let known = self.modes(&req.provider);
            if !known.is_empty() && !known.contains(m) {
                return Err(RunError::BadRequest(format!(
                    "permission_mode {m:?} is not one of the agent's: {}",
                    known.join(", ")
                )));
            }
        }
        if let Some(host) = &req.host {
            self.check_host(host, &req.workdir).await?;
        }
        let id = RunId::generate();
        let (journal, stderr) = Self::files(runs, &id);
        let mut rec = runs.new_record(&id, (&req.provider, &req), prompt.clone(), true, self.log_sessions.place());
        rec.host = req.host.clone();
        rec.sandbox = runs.sandbox_for(&req)?;
        rec.transcript_path = Some(journal.to_string_lossy().into_owned());
        rec.worktree = runs.make_worktree(&rec, &req).await?;
        // A fork's chat starts as its parent's (lab's own journal, copied); its agent
        // branches the parent's session (`session/fork`).
        let open = match &req.fork {
            None => Open::New,
            Some(f) => {
                let parent = journal_of(&runs.home.acp_dir(), &f.parent);
                if let Err(e) = fsutil::private_dir(&runs.home.acp_dir())
                    .and_then(|()| std::fs::copy(&parent, &journal).map(|_| ()))
                {
                    tracing::warn!(run = %id, parent = %f.parent, error = %e, "the fork's chat starts empty");
                }
                Open::Fork(f.continuing.earlier.session_id.clone())
            }
        };
        let forked_from = req.fork.as_ref().map(|f| f.parent.clone());
        let started = match self.start_acp(runs, &rec, &agent, open).await {
            Ok(s) => Ok(s),
            Err(StartError::CannotFork) => Err(format!(
                "the ACP agent `{}` cannot fork a session (it offers no sessionCapabilities.fork)",
                rec.provider
            )),
            Err(e) => Err(e.to_string()),
        };
        let session = match started {
            Ok(s) => s,
            Err(msg) => {
                let _ = fsutil::remove_if_exists(&journal);
                tracing::info!(run = %id, stderr = %stderr.display(), "the ACP agent's log");
                rec.transcript_path = None;
                return Err(runs.launch_failed(rec, msg).await);
            }
        };
        rec.session_id = Some(session.session_id());

        runs.registry.put(&rec).map_err(|e| RunError::Internal(format!("recording the run: {e}")))?;
        tracing::info!(run = %id, provider = %rec.provider, workdir = %rec.workdir, "ACP run launched");
        let run = runs.attach(rec, false, None);
        self.adopt_acp(runs, &run, session.clone());
        if let Some(parent) = forked_from {
            session.note(&format!("forked from run {parent}: the agent's session was branched"));
        }
        // A fork without a message waits idle for one.
        if !prompt.is_empty() {
            session.prompt(prompt);
        }
        if run.record().worktree.is_some() {
            runs.core.clone().spawn_diff_watch(run.clone());
        }
        runs.clone().spawn_tailer(run.clone(), false);
        Ok(runs.body_of(&run))
    }

    /// Start the agent for `rec` (a new session, or `resume`'s), and the run's tmux
    /// session showing its log if there is none.
    async fn start_acp(
        &self,
        runs: &Arc<Runs>,
        rec: &RunRecord,
        agent: &AcpAgent,
        open: Open,
    ) -> Result<Arc<Session>, StartError> {
        let fail = StartError::Failed;
        let dir = runs.home.acp_dir();
        fsutil::private_dir(&dir).map_err(|e| fail(format!("making {}: {e}", dir.display())))?;
        let place::Placed { argv, env, spawner } = self.place(runs, rec, agent).await.map_err(fail)?;
        let (journal, stderr_log) = Self::files(runs, &rec.id);
        let wake = {
            let (runs, id) = (Arc::downgrade(runs), rec.id.clone());
            Arc::new(move || {
                if let Some(run) = runs.upgrade().and_then(|r| r.get(id.as_str()).ok()) {
                    run.wake();
                }
            })
        };
        let setup = Setup {
            label: rec.id.to_string(),
            argv,
            env: env.clone(),
            cwd: rec.agent_dir(),
            journal,
            spool: runs.home.run_files(&rec.id).spool,
            stderr_log: stderr_log.clone(),
            start_timeout: agent.config.start_timeout(),
            mode: rec.permission_mode.clone(),
            wake,
            terminals: Some(Arc::new(acp::terminal::Terminals::new(acp::terminal::Places {
                run: rec.id.to_string(),
                dir: dir.clone(),
                runtime: runs.home.runtime_dir(),
                lab_exe: runs.here.lab_exe.clone(),
                root: std::fs::canonicalize(rec.agent_dir()).unwrap_or_else(|_| rec.agent_dir()),
                env: env.clone(),
                windows: Arc::new(TmuxWindows {
                    tmux: runs.here.tmux.clone(),
                    session: rec.tmux_target.clone(),
                    lab_exe: runs.here.lab_exe.clone(),
                }),
            }))),
            spawner,
            turn_usage: runs.providers().acp_handle(&rec.provider).cloned().map(|handle| {
                let run = rec.id.clone();
                let read: acp::session::TurnUsage = Arc::new(move |response: String| {
                    let (handle, run) = (handle.clone(), run.clone());
                    Box::pin(async move {
                        match handle.turn_usage(response).await {
                            Ok(by_model) => by_model,
                            // A provider built before WIT 0.7.0 reads nothing of it.
                            Err(e) if e.kind == crate::agents::provider::CallErrorKind::Unsupported => Vec::new(),
                            Err(e) => {
                                tracing::warn!(%run, error = %e, "the provider could not read the turn's usage");
                                Vec::new()
                            }
                        }
                    })
                });
                read
            }),
            on_modes: {
                let (runs, name) = (Arc::downgrade(runs), rec.provider.clone());
                Box::new(move |modes| {
                    if let Some(runs) = runs.upgrade() {
                        runs.acp.learned_modes.lock().unwrap().insert(name.clone(), modes);
                    }
                })
            },
        };
        let session = Session::start(setup, open).await?;
        self.learned_forks.lock().unwrap().insert(rec.provider.clone(), session.can_fork());
        // The run's terminal: the agent's log, followed.
        let sessions = runs.here.sessions.clone();
        let name = rec.tmux_target.clone();
        let argv: Vec<String> = ["tail", "-n", "+1", "-F"]
            .iter()
            .map(|s| s.to_string())
            .chain([stderr_log.to_string_lossy().into()])
            .collect();
        let made =
            tokio::task::spawn_blocking(
                move || {
                    if sessions.alive(&name) {
                        Ok(())
                    } else {
                        sessions.start(&name, &argv)
                    }
                },
            )
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()));
        if let Err(e) = made {
            session.stop().await;
            return Err(fail(format!("starting the run's tmux session failed: {e}")));
        }
        Ok(session)
    }

    /// Keep the run's session, and end the run when the agent's process exits by itruns.
    fn adopt_acp(&self, runs: &Arc<Runs>, run: &Arc<Run>, session: Arc<Session>) {
        self.sessions.lock().unwrap().insert(run.id.clone(), session.clone());
        let (runs, run) = (runs.clone(), run.clone());
        tokio::spawn(async move {
            let why = session.exited().await;
            if session.stopping() {
                return;
            }
            tracing::warn!(run = %run.id, %why, "the ACP agent exited");
            runs.record_error(&run, &why);
            let _ = runs.close_session(&run).await;
            runs.end(&run, "the agent exited").await;
        });
    }

    /// After a restart: the active ACP runs get their agent back with `session/load`;
    /// one whose agent cannot (or is no longer configured) ends, saying why.
    pub(in crate::runs) fn resume_acp(&self, runs: &Arc<Runs>, run: Arc<Run>) {
        let runs = runs.clone();
        tokio::spawn(async move {
            let rec = run.record();
            let why = match (runs.acp.agent(&rec.provider), rec.session_id.clone()) {
                (None, _) => format!("lab restarted and no ACP agent `{}` is configured any more", rec.provider),
                (Some(_), None) => "lab restarted before the agent's session began".to_string(),
                (Some(agent), Some(sid)) => {
                    let _ = fsutil::remove_if_exists(&runs.home.run_files(&rec.id).spool);
                    match runs.acp.start_acp(&runs, &rec, &agent, Open::Load(sid)).await {
                        Ok(session) => {
                            tracing::info!(run = %rec.id, "resumed the ACP run's session after a restart");
                            session.note("lab restarted: the agent's session was loaded again");
                            runs.acp.adopt_acp(&runs, &run, session);
                            run.wake();
                            return;
                        }
                        Err(StartError::CannotResume | StartError::CannotFork) => {
                            "lab restarted and the agent cannot load its session again".to_string()
                        }
                        Err(StartError::Failed(e)) => format!("lab restarted and resuming the agent failed: {e}"),
                    }
                }
            };
            tracing::warn!(run = %rec.id, %why, "ending an ACP run");
            runs.record_error(&run, &why);
            let _ = runs.close_session(&run).await;
            runs.end(&run, "its ACP agent could not be resumed").await;
        });
    }

    /// `POST /runs/{id}/messages` for an ACP run: the next prompt (after the turn that
    /// runs, if any).
    pub(in crate::runs) async fn send_acp_message(
        &self,
        core: &Arc<Core>,
        run: &Arc<Run>,
        session: Arc<Session>,
        text: String,
    ) -> Result<(), RunError> {
        let (ended, _) = run.update(&core.registry, Read::Channels, async |tail: &mut Tail| tail.ended).await;
        if ended {
            return Err(RunError::RunEnded);
        }
        if let Some(lock) = run.snapshot().composer_lock {
            return Err(lock.into());
        }
        session.prompt(text);
        Ok(())
    }

    /// `POST /runs/{id}/dialog/answer` for an ACP run: the same guard on a fresh read,
    /// then the agent's request answered with the result the operator chose.
    pub(in crate::runs) async fn answer_acp(
        &self,
        core: &Arc<Core>,
        run: &Arc<Run>,
        session: Arc<Session>,
        tool_id: &str,
        answers: Vec<Answer>,
    ) -> Result<AnswerProgress, RunError> {
        let _keys = run.keys.lock().await;
        let (sent, _) = run
            .update(&core.registry, Read::Channels, async |tail: &mut Tail| {
                if tail.ended {
                    return Err(RunError::NoDialog);
                }
                let dialog = core.guarded(tail, tool_id, crate::runs::answer::Guard::New)?;
                let n = acp::dialog::request_number(&dialog.id).ok_or(RunError::NotAnswerable)?;
                match session.answer(n, &answers).await {
                    Ok(()) => {
                        tail.mark_answered(tool_id);
                        Ok(())
                    }
                    Err(AnswerError::Gone) => Err(RunError::NoDialog),
                    Err(AnswerError::Bad(m)) => Err(RunError::BadRequest(m)),
                    Err(AnswerError::Send(m)) => Err(RunError::Internal(format!("answering the agent failed: {m}"))),
                }
            })
            .await;
        sent?;
        run.wake();
        let now = now_rfc3339();
        let progress = AnswerProgress {
            tool_id: tool_id.to_string(),
            state: AnswerState::Played,
            keys: Vec::new(),
            played: 0,
            replays: 0,
            error: None,
            started_at: now.clone(),
            finished_at: Some(now),
            answered_by: None,
        };
        run.start_answer(progress.clone());
        Ok(progress)
    }

    /// `POST /runs/{id}/stop` for an ACP run: cancel, end the agent, close its terminal.
    pub(in crate::runs) async fn stop_acp(&self, core: &Arc<Core>, run: &Arc<Run>, session: Arc<Session>) {
        session.stop().await;
        self.sessions.lock().unwrap().remove(&run.id);
        let _ = core.close_session(run).await;
        core.end(run, "stopped by the operator").await;
    }
}

/// Terminal windows in a run's tmux session.
struct TmuxWindows {
    tmux: crate::machines::tmux::Tmux,
    session: String,
    lab_exe: PathBuf,
}

impl acp::terminal::Windows for TmuxWindows {
    fn open(&self, name: &str, launch: &Path) -> Result<(), String> {
        let argv = [
            self.lab_exe.to_string_lossy().into_owned(),
            "agent-exec".into(),
            "--launch-file".into(),
            launch.to_string_lossy().into_owned(),
        ];
        self.tmux.new_window(&self.session, name, &argv).map_err(|e| e.to_string())
    }

    fn close(&self, name: &str) {
        if let Err(e) = self.tmux.kill_window(&self.session, name) {
            tracing::debug!(window = name, error = %e, "closing a terminal window");
        }
    }
}

#[cfg(test)]
mod transport_tests {
    use super::*;

    /// Without a live agent session (before it starts, after it ended) an ACP run holds
    /// nothing that keeps it from resting, and its end lets go of nothing.
    #[test]
    fn without_a_live_session_an_acp_run_holds_nothing() {
        let tmux = crate::machines::tmux::Tmux::new(PathBuf::from("/nonexistent/tmux.sock"));
        let d = tempfile::tempdir().unwrap();
        let hosts =
            crate::machines::hosts::Hosts::new(crate::machines::hosts::HostCredentials::new(d.path().join("h.json")));
        let acp = AcpRuns::new(PathBuf::from("/home/op/.lab/acp"), BTreeMap::new(), Arc::new(tmux), Arc::new(hosts));
        let id = RunId::parse("r-1").unwrap();
        assert!(acp.session(&id).is_none());
        assert!(!acp.holds_live(&id));
        acp.ended(&id);
        assert!(acp.session(&id).is_none() && !acp.holds_live(&id));
    }
}
