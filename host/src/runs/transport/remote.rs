//! Runs on another machine (issue 34): launched through the host's runner, which
//! owns what is local there (its tmux, the agent's files) and sends up what lab serve
//! follows. lab serve keeps a **mirror** of each such run's transcript
//! (`<home>/remote/<run>.jsonl`) and writes the spool and marker the runner reports into
//! the run's usual files, so the tailer, the view, the guard and the provider work as
//! for a local run and do not know where it lives. The terminal is the host's
//! ([`crate::machines::hosts::RemoteTerminal`]). Nothing a runner says makes lab serve open a path
//! it names: run ids are checked against the runner's own runs, and the files written
//! are lab serve's own.

use crate::machines::hosts::protocol::{HookFile, LaunchFile, Op, Reply, Up};
use crate::machines::hosts::{HostEvent, RemoteTerminal, RunnerFacts};
use crate::machines::terminal::Terminal;
use crate::runs::api::{CreateRun, RunBody, RunError};
use crate::runs::launch::workspace::{WorkPlace, Workspace};
use crate::runs::launch::{checked_fields, prepare, Place};
use crate::runs::live::mirror::Appended;
use crate::runs::registry::{RunRecord, Status};
use crate::runs::transport::{Resume, Transport};
use crate::runs::{Core, Runs};
use crate::store::fsutil;
use crate::store::paths::{Home, RunFiles, RunId};
use crate::worktree::call::{WorkCall, WorkDone, WorkFailed, WorkOutcome};
use base64::Engine as _;
use futures_util::future::BoxFuture;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What lab holds of the runs on other machines, and only this transport touches: the
/// machines' runners and the bounded mirrors of their runs' transcripts.
pub(in crate::runs) struct RemoteRuns {
    /// Other machines' runners ([`crate::machines::hosts`]).
    hosts: Arc<crate::machines::hosts::Hosts>,
    /// The mirrors of runs on hosts, bounded ([`crate::runs::live::mirror`]).
    mirrors: crate::runs::live::mirror::Mirrors,
}

impl RemoteRuns {
    pub(in crate::runs) fn new(
        hosts: crate::machines::hosts::Hosts,
        mirrors: crate::runs::live::mirror::Mirrors,
    ) -> RemoteRuns {
        RemoteRuns { hosts: Arc::new(hosts), mirrors }
    }

    /// Other machines' runners.
    pub(in crate::runs) fn hosts(&self) -> Arc<crate::machines::hosts::Hosts> {
        self.hosts.clone()
    }
}

impl Transport for RemoteRuns {
    /// Checked on the host when the run is launched (its runner looks for the program).
    fn can_jail(&self, _kind: crate::sandbox::Kind) -> Result<(), RunError> {
        Ok(())
    }

    fn put_allowlist<'a>(
        &'a self,
        _core: &'a Core,
        rec: &'a RunRecord,
        list: &'a crate::sandbox::egress::Allowlist,
    ) -> BoxFuture<'a, Result<(), RunError>> {
        Box::pin(allowlist_there(&self.hosts, rec.host.as_deref().unwrap_or_default(), &rec.id, list))
    }

    fn launch<'a>(&'a self, runs: &'a Arc<Runs>, req: CreateRun) -> BoxFuture<'a, Result<RunBody, RunError>> {
        let host = req.host.clone().unwrap_or_default();
        Box::pin(self.create_remote(runs, req, host))
    }

    /// The host's terminal, through its runner.
    fn terminal(&self, rec: &RunRecord) -> Arc<dyn Terminal> {
        let host = rec.host.clone().unwrap_or_default();
        Arc::new(RemoteTerminal::new(self.hosts.clone(), host, tokio::runtime::Handle::current()))
    }

    /// `Err(HostDown)` while the run's host is not connected.
    fn reachable(&self, rec: &RunRecord) -> Result<(), RunError> {
        host_reachable(&self.hosts, rec)
    }

    /// Its watch there ended and its session killed, through the runner.
    fn close<'a>(&'a self, _core: &'a Core, rec: &'a RunRecord) -> BoxFuture<'a, Result<(), RunError>> {
        Box::pin(async move { self.close_remote(rec).await.map_err(RunError::Internal) })
    }

    /// No path its payloads name is read here: its runner reads its plan files there.
    fn plan_files(&self, core: &Core, rec: &RunRecord, tail: &mut crate::runs::live::tailer::Tail) {
        tail.set_place(Arc::new(RemoteRun {
            hosts: self.hosts.clone(),
            host: rec.host.clone().unwrap_or_default(),
            workdir: rec.agent_dir().to_string_lossy().into_owned(),
            home: core.config.provider(&rec.provider).env.get("HOME").cloned(),
            mirror: core.home.mirror_file(&rec.id),
        }));
    }

    /// Its runner follows the transcript its agent named there.
    fn transcript_elsewhere<'a>(&'a self, runs: &'a Arc<Runs>, run: &'a Arc<crate::runs::Run>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Err(e) = self.watch_remote(runs, run).await {
                // Its runner follows it once connected again (the record names it).
                tracing::warn!(run = %run.id, error = %e, "cannot have the host follow the run's transcript yet");
            }
        })
    }

    /// Its runner reports its end.
    fn session_here(&self) -> bool {
        false
    }

    /// There, through its runner.
    fn workspace(&self, _core: &Core, rec: &RunRecord) -> Workspace {
        host_work(self.hosts(), rec.host.clone().unwrap_or_default())
    }

    /// Followed now: what its runner sends up is mirrored when the host connects.
    fn resume(&self, runs: &Arc<Runs>, run: Arc<crate::runs::Run>) -> Resume {
        runs.clone().spawn_tailer(run, true);
        Resume::Followed
    }

    /// Started again there, as it was launched; its mirror grows on from its end.
    fn relaunch<'a>(
        &'a self,
        runs: &'a Arc<Runs>,
        rec: &'a mut RunRecord,
        continuing: &'a crate::runs::continuation::Continuing,
    ) -> BoxFuture<'a, Result<Option<String>, RunError>> {
        Box::pin(async move {
            let pinned = runs.providers.pin(&rec.provider).map_err(RunError::NotSupported)?;
            let host = rec.host.clone().unwrap_or_default();
            let runner = runs.remote.hosts.facts(&host).ok_or_else(|| RunError::HostDown(host.clone()))?;
            let program = pinned.facts.info.default_program.clone();
            self.launch_remote(runs, rec, pinned.provider.as_ref(), &program, &runner, Some(continuing))
                .await
                .map_err(RunError::LaunchFailed)
        })
    }

    /// Its host's runner follows it again, from where the mirror ends.
    fn resumed<'a>(&'a self, runs: &'a Arc<Runs>, run: &'a Arc<crate::runs::Run>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Err(e) = self.watch_remote(runs, run).await {
                let why = format!("following the resumed run on its host failed: {e}");
                runs.record_error(run, &why);
                let _ = self.close_remote(&run.record()).await;
                runs.end(run, &why).await;
            }
        })
    }
}

/// How long a launch step on the runner may take.
const STEP: Duration = Duration::from_secs(15);

impl RemoteRuns {
    async fn step(&self, host: &str, op: Op) -> Result<Reply, String> {
        match self.hosts.call(host, op, STEP).await? {
            Reply::Error { message } => Err(message),
            r => Ok(r),
        }
    }

    /// `POST /runs` with a `host`.
    pub(in crate::runs) async fn create_remote(
        &self,
        runs: &Arc<Runs>,
        req: CreateRun,
        host: String,
    ) -> Result<RunBody, RunError> {
        let pinned = runs.providers.pin(&req.provider).map_err(RunError::BadRequest)?;
        let facts = pinned.facts.clone();
        let known = self.hosts.known(&host).map_err(|e| RunError::Internal(e.to_string()))?;
        if !known {
            return Err(RunError::BadRequest(format!(
                "unknown host `{host}` (`lab hosts add {host}` or lab.toml [hosts.{host}] makes one)"
            )));
        }
        let runner = self.hosts.facts(&host).ok_or_else(|| RunError::HostDown(host.clone()))?;
        // The workdir is the host's: checked there.
        let prompt = checked_fields(&req)?;
        self.step(&host, Op::IsDir { path: req.workdir.clone() })
            .await
            .map_err(|e| RunError::BadRequest(format!("workdir {} on host {host}: {e}", req.workdir)))?;

        let id = RunId::generate();
        let mut rec =
            runs.new_record(&id, (&facts.info.name, &req), prompt, facts.dialog_hooker, runner.tmux_socket.clone());
        rec.sandbox = runs.sandbox_for(&req)?;
        rec.host = Some(host.clone());
        rec.tmux_socket = runner.tmux_socket.clone();
        // Its worktree, as for a run here, made there (in the runner's home).
        rec.worktree = runs.make_worktree(&rec, &req).await?;
        let continuing = req.fork.as_ref().map(|f| &f.continuing);
        let launched = self.launch_remote(
            runs,
            &mut rec,
            pinned.provider.as_ref(),
            &facts.info.default_program,
            &runner,
            continuing,
        );
        let typed_prompt = match launched.await {
            Ok(typed) => typed,
            Err(msg) => {
                let _ = fsutil::remove_if_exists(&runs.home.mirror_file(&id));
                return Err(runs.launch_failed(rec, msg).await);
            }
        };
        runs.registry.put(&rec).map_err(|e| RunError::Internal(format!("recording the run: {e}")))?;
        tracing::info!(run = %id, provider = %rec.provider, %host, workdir = %rec.workdir, "run launched on a host");
        let run = runs.follow_launched(rec, typed_prompt, pinned);
        // Followed once it is a run here: what the runner reports from now on has a
        // run to go to (the runner sends what the files hold when it starts).
        let rec = run.record();
        let op = Op::Watch {
            run: id.to_string(),
            target: rec.tmux_target.clone(),
            transcript: rec.remote_transcript.clone(),
            offset: 0,
        };
        if let Err(e) = self.step(&host, op).await {
            let why = format!("following the run on host {host} failed: {e}");
            runs.record_error(&run, &why);
            let _ = self.close_remote(&rec).await;
            runs.end(&run, &why).await;
        }
        Ok(runs.body_of(&run))
    }

    async fn launch_remote(
        &self,
        runs: &Runs,
        rec: &mut RunRecord,
        provider: &dyn crate::agents::provider::Provider,
        default_program: &str,
        runner: &RunnerFacts,
        continuing: Option<&crate::runs::continuation::Continuing>,
    ) -> Result<Option<String>, String> {
        let host = rec.host.clone().expect("a remote run");
        let pconf = runs.config.provider(&rec.provider);
        let wanted = pconf.program.clone().unwrap_or_else(|| PathBuf::from(default_program));
        let program = match self.step(&host, Op::Resolve { program: wanted.to_string_lossy().into_owned() }).await {
            Ok(Reply::Text { text }) => text,
            Ok(other) => return Err(format!("host {host} answered {other:?} for the program")),
            Err(e) => return Err(format!("program `{}` on host {host}: {e}", wanted.display())),
        };
        let mut env: std::collections::BTreeMap<String, String> = runner.env.iter().cloned().collect();
        env.extend(pconf.env.clone());
        let there = Home::new(PathBuf::from(&runner.home));
        // A sandboxed run's files are in its jail directory there.
        let files = if rec.sandbox.is_none() {
            RunFiles::new(&there.runtime_dir(), &rec.id)
        } else {
            RunFiles::jailed(&there.jail_dir(&rec.id), &rec.id)
        };
        // A jailed agent's HOME is the run's own there (its transcript is there too).
        let operator_env = env.clone();
        if !rec.sandbox.is_none() {
            env.insert("HOME".into(), there.agent_home(&runs.home_of(rec)).to_string_lossy().into_owned());
        }
        let place = Place { lab_exe: PathBuf::from(&runner.lab_exe), files, env };
        let mut prepared = prepare(rec, provider, &program, &place, continuing).await?;
        if !rec.sandbox.is_none() {
            let found = jail_program_there(&self.hosts, &host, rec.sandbox).await?;
            let site = crate::runs::launch::sandboxing::JailSite {
                home: there.clone(),
                lab_exe: runner.lab_exe.clone(),
                jail_program: found,
                program_dir: std::path::Path::new(&program).parent().map(std::path::Path::to_path_buf),
                fallback_home: runner.env.iter().find(|(k, _)| k == "HOME").map(|(_, v)| v.clone()),
                local: false,
            };
            if let Some((plan, list)) = runs.jail_plan(rec, Some(provider), &operator_env, &site).await? {
                prepared.launch.sandbox = Some(plan);
                // First: it makes the run's jail directory there, where the rest goes.
                allowlist_there(&self.hosts, &host, &rec.id, &list).await.map_err(|e| e.to_string())?;
            }
        }
        // A first prompt too long for one argument is typed in once the agent is ready,
        // as here, in one paste over the stream: at most what one paste carries.
        if let Some(prompt) =
            prepared.typed_prompt.as_ref().filter(|p| p.len() > crate::machines::hosts::protocol::MAX_TEXT)
        {
            return Err(format!(
                "a first prompt of {} bytes is too long for a run on another host (at most {} bytes)",
                prompt.len(),
                crate::machines::hosts::protocol::MAX_TEXT
            ));
        }
        // The transcript is the host's: followed here through the run's mirror. One the
        // agent names only once started (its session info) is mirrored from then on.
        let mirror = runs.home.mirror_file(&rec.id);
        let dir = mirror.parent().expect("in remote/");
        fsutil::private_dir(dir).map_err(|e| format!("making {}: {e}", dir.display()))?;
        fsutil::private_file(&mirror).map_err(|e| format!("making {}: {e}", mirror.display()))?;
        if let Some(transcript) = rec.transcript_path.take() {
            rec.transcript_path = Some(mirror.to_string_lossy().into_owned());
            rec.remote_transcript = Some(transcript);
        }
        let run = rec.id.to_string();
        if let Some(doc) = prepared.settings {
            self.step(&host, Op::Write { run: run.clone(), file: LaunchFile::Settings, content: doc }).await?;
        }
        let launch = serde_json::to_string(&prepared.launch).map_err(|e| e.to_string())?;
        self.step(&host, Op::Write { run: run.clone(), file: LaunchFile::Launch, content: launch }).await?;
        self.step(&host, Op::Start { target: rec.tmux_target.clone(), argv: place.agent_exec_argv() })
            .await
            .map_err(|e| format!("starting the agent on host {host} failed: {e}"))?;
        Ok(prepared.typed_prompt)
    }

    /// End a remote run's session on its host (and stop following it there).
    pub(in crate::runs) async fn close_remote(&self, rec: &RunRecord) -> Result<(), String> {
        let host = rec.host.clone().expect("a remote run");
        let _ = self.step(&host, Op::Unwatch { run: rec.id.to_string() }).await;
        match self.step(&host, Op::Alive { target: rec.tmux_target.clone() }).await? {
            Reply::Alive { alive: false } => Ok(()),
            _ => self.step(&host, Op::Kill { target: rec.tmux_target.clone() }).await.map(|_| ()),
        }
    }

    /// The active runs of host `host`.
    pub(in crate::runs) fn runs_on(&self, runs: &Runs, host: &str) -> Vec<Arc<crate::runs::Run>> {
        runs.list()
            .into_iter()
            .filter(|r| {
                let rec = r.record();
                rec.host.as_deref() == Some(host) && rec.status == Status::Active && Self::ours(runs, &rec)
            })
            .collect()
    }

    /// Whether `rec`'s run is one of this transport's: on a host, in tmux there (an ACP
    /// agent on a host is the ACP transport's: its link's end is its agent's).
    fn ours(runs: &Runs, rec: &RunRecord) -> bool {
        super::way_of(rec, runs.acp.dir()) == super::Way::Remote
    }

    /// Runs on hosts that are not connected now (lab serve just started): shown
    /// disconnected, and ended if their runner does not come within the grace.
    pub(in crate::runs) fn await_hosts(&self, runs: &Arc<Runs>) {
        let mut hosts: Vec<String> = self.runs_on_any_host(runs);
        hosts.sort();
        hosts.dedup();
        for host in hosts.into_iter().filter(|h| !self.hosts.connected(h)) {
            self.host_gone(runs, host);
        }
    }

    fn runs_on_any_host(&self, runs: &Runs) -> Vec<String> {
        runs.list()
            .iter()
            .filter_map(|r| {
                let rec = r.record();
                (rec.status == Status::Active && Self::ours(runs, &rec)).then_some(rec.host).flatten()
            })
            .collect()
    }

    fn host_gone(&self, runs: &Arc<Runs>, host: String) {
        for run in self.runs_on(runs, &host) {
            run.set_disconnected(true);
        }
        let grace = Duration::from_secs(runs.config.runs.host_grace_secs.unwrap_or(60).clamp(1, 86_400));
        let since = self.hosts.down_since(&host);
        let runs = Arc::downgrade(runs);
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            let Some(runs) = runs.upgrade() else { return };
            if runs.remote.hosts.connected(&host) || runs.remote.hosts.down_since(&host) != since {
                return;
            }
            for run in runs.remote.runs_on(&runs, &host) {
                let why = format!(
                    "host {host}'s runner has been gone for {} s: the run is ended here (its session there may \
                     still run)",
                    grace.as_secs()
                );
                tracing::warn!(run = %run.id, %host, "{why}");
                runs.record_error(&run, &why);
                runs.end(&run, "its host's runner did not come back").await;
            }
        });
    }

    /// What happened to a host: its runner connected (follow its active runs again,
    /// from what the mirrors hold), went away, or reported on a run.
    ///
    /// Whatever waits on a runner's reply goes to a task of its own: the events come
    /// through a bounded queue that a runner's connection waits on when it is full, so
    /// waiting here for that connection to read a reply could hold both up.
    pub(in crate::runs) async fn on_host(&self, runs: &Arc<Runs>, host: String, event: HostEvent) {
        match event {
            HostEvent::Connected => {
                let runs = runs.clone();
                tokio::spawn(async move { runs.remote.follow_again(&runs, host).await });
            }
            HostEvent::Down => self.host_gone(runs, host),
            HostEvent::Report(up) => self.on_runner(runs, host, up).await,
        }
    }

    /// Host `host`'s runner (re)connected: have it follow each of its active runs from
    /// where the run's mirror ends.
    async fn follow_again(&self, runs: &Arc<Runs>, host: String) {
        for run in self.runs_on(runs, &host) {
            match self.watch_remote(runs, &run).await {
                Ok(()) => run.set_disconnected(false),
                Err(e) => {
                    tracing::warn!(run = %run.id, %host, error = %e, "cannot follow the run on its host again")
                }
            }
        }
    }

    /// Have a run's runner follow it (again, or now that its agent named its
    /// transcript): the transcript its record names from where the mirror ends, its
    /// hook files, its session.
    pub(in crate::runs) async fn watch_remote(
        &self,
        runs: &Arc<Runs>,
        run: &Arc<crate::runs::Run>,
    ) -> Result<(), String> {
        let rec = run.record();
        let Some(host) = rec.host.clone() else { return Ok(()) };
        let offset = std::fs::metadata(runs.home.mirror_file(&rec.id)).map(|m| m.len()).unwrap_or(0);
        tracing::debug!(run = %rec.id, %host, transcript = ?rec.remote_transcript, offset, "the host is to follow the run");
        let op = Op::Watch {
            run: rec.id.to_string(),
            target: rec.tmux_target.clone(),
            transcript: rec.remote_transcript.clone(),
            offset,
        };
        self.step(&host, op).await.map(|_| ())
    }

    /// What a host's runner reported on one of its runs: its transcript grew, its spool
    /// or marker changed, its session ended.
    async fn on_runner(&self, runs: &Arc<Runs>, host: String, up: Up) {
        // Only a run this transport follows there: an ACP run on the host is spoken to
        // from here (its spool and its end are lab serve's own), never told of by the
        // runner.
        let run_of = |run: &str| {
            let run = runs.get(run).ok()?;
            let rec = run.record();
            (rec.host.as_deref() == Some(host.as_str()) && rec.status == Status::Active && Self::ours(runs, &rec))
                .then_some(run)
        };
        match up {
            // Pane views go to their viewer, agents' stdio to their session
            // ([`crate::machines::hosts::link`]), never here.
            Up::Pane { .. } | Up::Agent { .. } => {}
            Up::Transcript { run, offset, data } => {
                let Some(run) = run_of(&run) else { return unknown(&host, &run) };
                let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(&data) else {
                    return tracing::warn!(%host, run = %run.id, "a transcript chunk that is not base64; dropped");
                };
                match self.mirrors.append(&run.id, &runs.home.mirror_file(&run.id), offset, &bytes) {
                    Ok(Appended::Added) => run.wake(),
                    Ok(Appended::Nothing) => {}
                    Ok(Appended::Stopped(why)) => run.set_transcript_stopped(Some(why)),
                    Err(e) => tracing::warn!(%host, run = %run.id, error = %e, "cannot mirror the transcript"),
                }
            }
            Up::RunFile { run, file, content } => {
                let Some(run) = run_of(&run) else { return unknown(&host, &run) };
                tracing::debug!(%host, run = %run.id, ?file, present = content.is_some(), "a hook file from the host");
                let files = runs.home.run_files(&run.id);
                let path = match file {
                    HookFile::Spool => files.spool,
                    HookFile::Marker => files.marker,
                    HookFile::Session => files.session,
                    // Its egress proxy's ledger, mirrored where the run's view reads it.
                    HookFile::Ledger => {
                        let ledger = runs.home.egress_files(&run.id).1;
                        if let Err(e) = fsutil::private_dir(ledger.parent().expect("in egress/")) {
                            return tracing::warn!(%host, run = %run.id, error = %e, "cannot keep the run's egress ledger");
                        }
                        ledger
                    }
                };
                let r = match content {
                    // What the file holds already (sent again after a reconnect, or when
                    // the runner follows the run anew) is not written again: a spooled
                    // prompt's identity is its write time here, and the card the operator
                    // is answering must keep it.
                    Some(c) if std::fs::read(&path).is_ok_and(|held| held == c.as_bytes()) => Ok(()),
                    // A copy (the runner sends it again after a restart): not synced.
                    Some(c) => fsutil::write_atomic_unsynced(&path, c.as_bytes(), 0o600),
                    None => fsutil::remove_if_exists(&path),
                };
                if let Err(e) = r {
                    tracing::warn!(%host, run = %run.id, error = %e, "cannot write the run's hook file");
                }
                run.wake();
            }
            Up::Ended { run } => {
                let Some(run) = run_of(&run) else { return unknown(&host, &run) };
                let runs = runs.clone();
                tokio::spawn(async move {
                    runs.end(&run, &format!("its session on host {host} closed")).await;
                    runs.remote.mirrors.forget(&run.id);
                });
            }
            Up::Reply { .. } | Up::Hello { .. } | Up::Pong => {}
        }
    }
}

/// What the tail of a run on a host knows of where it lives: the plan files its
/// dialogs name are read by its runner, from inside the agent's home or workdir there
/// (the rules of a local run's plan files); a transcript its agent names late is a path
/// there, followed here through the run's mirror.
#[derive(Clone)]
pub struct RemoteRun {
    pub hosts: Arc<crate::machines::hosts::Hosts>,
    pub host: String,
    pub workdir: String,
    /// The agent's HOME as lab.toml sets it (none: the runner's own).
    pub home: Option<String>,
    /// Where the run's transcript is mirrored here.
    pub mirror: PathBuf,
}

impl crate::runs::live::hook_channels::Whereabouts for RemoteRun {
    fn read_plan<'a>(
        &'a self,
        file: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send + 'a>> {
        Box::pin(self.read(file))
    }

    /// The path is the host's: its runner follows it, and what it sends up is read
    /// here from the run's mirror (lab serve opens no path a host's payload names).
    fn transcript(&self, named: PathBuf) -> (PathBuf, Option<String>) {
        (self.mirror.clone(), Some(named.to_string_lossy().into_owned()))
    }
}

impl RemoteRun {
    /// How long a runner has to read a plan file.
    const WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

    /// The text of plan file `file` on the host, or why not.
    pub async fn read(&self, file: &str) -> Result<String, String> {
        let op = Op::ReadPlan { path: file.to_string(), workdir: self.workdir.clone(), home: self.home.clone() };
        match self.hosts.call(&self.host, op, Self::WITHIN).await {
            Ok(crate::machines::hosts::protocol::Reply::Text { text })
                if text.len() as u64 <= crate::runs::live::spool::PLAN_FILE_MAX =>
            {
                Ok(text)
            }
            Ok(crate::machines::hosts::protocol::Reply::Error { message }) => {
                Err(format!("host {}: {message}", self.host))
            }
            Ok(_) => Err(format!("host {} answered something else than the plan's text", self.host)),
            Err(e) => Err(e),
        }
    }
}

/// A report on a run the host does not have (ended, another host's, made up): dropped.
/// At debug level: a runner cannot fill lab's log by making them up.
fn unknown(host: &str, run: &str) {
    tracing::debug!(%host, run = %run.chars().take(80).collect::<String>(), "a runner spoke of a run it does not have; ignored");
}

/// The most bytes of patches a diff from a host carries (it travels in one frame).
pub const HOST_DIFF_LIMIT: usize = 512 << 10;
/// How long a host has for one piece of git work (git's own limit, and the way).
const HOST_WITHIN: Duration = Duration::from_secs(crate::worktree::GIT_TIMEOUT.as_secs() + 15);

/// The program that makes a `kind` jail, found on host `host` by its runner.
pub(in crate::runs) async fn jail_program_there(
    hosts: &crate::machines::hosts::Hosts,
    host: &str,
    kind: crate::sandbox::Kind,
) -> Result<PathBuf, String> {
    let Some(name) = kind.program() else { return Err("the run has no sandbox".into()) };
    match hosts.call(host, Op::Resolve { program: name.into() }, STEP).await {
        Ok(Reply::Text { text }) => Ok(PathBuf::from(text)),
        Ok(Reply::Error { message }) | Err(message) => {
            Err(format!("the run asks for a `{}` sandbox, but host {host} has no `{name}` ({message})", kind.as_str()))
        }
        Ok(other) => Err(format!("host {host} answered {other:?} for `{name}`")),
    }
}

/// Put run `run`'s allowlist on host `host`, where its egress proxy reads it (the
/// first one makes the run's jail directory there).
pub(in crate::runs) async fn allowlist_there(
    hosts: &crate::machines::hosts::Hosts,
    host: &str,
    run: &RunId,
    list: &crate::sandbox::egress::Allowlist,
) -> Result<(), RunError> {
    let op = Op::Write { run: run.to_string(), file: LaunchFile::EgressAllow, content: allow_doc(list)? };
    match hosts.call(host, op, STEP).await {
        Ok(Reply::Error { message }) | Err(message) => {
            Err(RunError::HostDown(format!("putting the allowlist on host {host}: {message}")))
        }
        Ok(_) => Ok(()),
    }
}

/// `Err(HostDown)` while the host of `rec`'s run (if it has one) is not connected.
pub(in crate::runs) fn host_reachable(hosts: &crate::machines::hosts::Hosts, rec: &RunRecord) -> Result<(), RunError> {
    match &rec.host {
        Some(h) if !hosts.connected(h) => Err(RunError::HostDown(h.clone())),
        _ => Ok(()),
    }
}

/// Git work done on host `host`, by its runner (a run's there, whatever speaks to its
/// agent).
pub(in crate::runs) fn host_work(hosts: Arc<crate::machines::hosts::Hosts>, host: String) -> Workspace {
    Workspace::at(HostWork { hosts, host })
}

/// Git work done on a run's host, by its runner.
struct HostWork {
    hosts: Arc<crate::machines::hosts::Hosts>,
    host: String,
}

impl WorkPlace for HostWork {
    fn exec(&self, call: WorkCall) -> BoxFuture<'_, Result<WorkDone, WorkFailed>> {
        Box::pin(async move {
            let host = &self.host;
            match self.hosts.call(host, Op::Work { call: Box::new(call) }, HOST_WITHIN).await {
                Ok(Reply::Text { text }) => serde_json::from_str::<WorkOutcome>(&text)
                    .map_err(|e| WorkFailed::Failed(format!("host {host} answered what is not a work outcome: {e}")))?,
                Ok(Reply::Error { message }) => Err(WorkFailed::Failed(format!("host {host}: {message}"))),
                Ok(other) => Err(WorkFailed::Failed(format!("host {host} answered {other:?}"))),
                Err(e) => Err(WorkFailed::Failed(e)),
            }
        })
    }

    fn diff_limit(&self) -> usize {
        HOST_DIFF_LIMIT
    }
}

/// A run's allowlist as its file holds it (`{"allow": […]}`).
fn allow_doc(list: &crate::sandbox::egress::Allowlist) -> Result<String, RunError> {
    serde_json::to_string(&crate::sandbox::egress::AllowFile { allow: list.entries() })
        .map_err(|e| RunError::Internal(e.to_string()))
}

#[cfg(test)]
mod transport_tests {
    use super::*;
    use crate::machines::hosts::{HostCredentials, Hosts};

    /// A run on a host that is not connected: nothing can be typed to it (a clear
    /// `host_down`, not a hang), its session is not looked for here, and its terminal
    /// and git work are its host's.
    #[test]
    fn a_run_on_a_host_that_is_not_connected_is_not_reachable_and_not_looked_for_here() {
        let d = tempfile::tempdir().unwrap();
        let remote = RemoteRuns::new(
            Hosts::new(HostCredentials::new(d.path().join("hosts.json"))),
            crate::runs::live::mirror::Mirrors::new(None, None),
        );
        let rec = crate::runs::transport::tests::record("r-1", Some("m1"), None);
        assert!(matches!(remote.reachable(&rec), Err(RunError::HostDown(h)) if h == "m1"));
        assert!(!remote.session_here());
    }
}
