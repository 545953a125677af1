//! Where an ACP run's agent is started: here as lab's child, here in its jail (`lab
//! agent-exec` from a launch file, as a tmux run's jailed agent), or on its host, the
//! runner there starting it and carrying its stdio ([`crate::machines::hosts::agents`]).
//! The session ([`crate::agents::acp::Session`]) is the same for all three.

use super::AcpRuns;
use crate::agents::acp::{self, AcpAgent};
use crate::runs::api::RunError;
use crate::runs::registry::RunRecord;
use crate::runs::Runs;
use crate::store::config::find_program;
use crate::store::fsutil;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How long one step on a host may take (a program looked for, a directory checked).
pub(super) const HOST_STEP: std::time::Duration = std::time::Duration::from_secs(10);

/// A started agent's command line, its environment, and where it is started.
pub(super) struct Placed {
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub spawner: Arc<dyn acp::process::Spawner>,
}

impl AcpRuns {
    /// Where `rec`'s agent runs and how it is started: lab's child here (in its jail,
    /// if it has a sandbox), or its host's runner's there; its argv and environment.
    pub(super) async fn place(&self, runs: &Arc<Runs>, rec: &RunRecord, agent: &AcpAgent) -> Result<Placed, String> {
        let pconf = agent.config.as_provider();
        let fix = || match agent.component {
            Some(_) => format!("set [providers.{}] program", rec.provider),
            None => format!("fix [agents.{}] acp", rec.provider),
        };
        let wanted = PathBuf::from(&agent.config.acp[0]);
        let (env, program, spawner): (_, _, Arc<dyn acp::process::Spawner>) = match &rec.host {
            None => {
                let env = crate::runs::launch::agent_env(&rec.provider, &pconf);
                let path = env.get("PATH").map(std::ffi::OsString::from).or_else(|| std::env::var_os("PATH"));
                let program = find_program(&wanted, path.as_deref()).ok_or_else(|| {
                    format!(
                        "program `{}` not found{}; {} in {}",
                        wanted.display(),
                        if wanted.components().count() > 1 { "" } else { " on PATH" },
                        fix(),
                        runs.home.config_file().display()
                    )
                })?;
                let spawner = match rec.sandbox.is_none() {
                    true => acp::process::Local::HERE,
                    false => acp::process::Local::JAILED,
                };
                (env, program.to_string_lossy().into_owned(), Arc::new(spawner))
            }
            // On its host: the runner's environment there, lab.toml's on top; the
            // program found there.
            Some(host) => {
                let runner = self.wait_connected(host, agent.config.start_timeout()).await?;
                let mut env: BTreeMap<String, String> = runner.env.iter().cloned().collect();
                env.extend(pconf.env.clone());
                let op = crate::machines::hosts::protocol::Op::Resolve { program: wanted.to_string_lossy().into() };
                let program = match self.hosts.call(host, op, HOST_STEP).await {
                    Ok(crate::machines::hosts::protocol::Reply::Text { text }) => text,
                    Ok(crate::machines::hosts::protocol::Reply::Error { message }) => {
                        return Err(format!("program `{}` on host {host}: {message}; {}", wanted.display(), fix()))
                    }
                    Ok(other) => return Err(format!("host {host} answered {other:?} for the program")),
                    Err(e) => return Err(format!("program `{}` on host {host}: {e}", wanted.display())),
                };
                let spawner = crate::machines::hosts::agents::HostSpawner {
                    hosts: self.hosts.clone(),
                    host: host.clone(),
                    run: rec.id.to_string(),
                };
                (env, program, Arc::new(spawner))
            }
        };
        let mut argv = agent.config.acp.clone();
        argv[0] = program;
        // A sandboxed agent is started in its jail by `lab agent-exec`, from a launch
        // file as a tmux run's is (its argv, workdir and environment never on a command
        // line), behind the egress proxy; its HOME is the run's own.
        let (argv, env) = match (rec.sandbox.is_none(), &rec.host) {
            (true, _) => (argv, env),
            (false, None) => self.jailed(runs, rec, argv, env).await?,
            (false, Some(host)) => self.jailed_there(runs, rec, host, argv, env).await?,
        };
        Ok(Placed { argv, env, spawner })
    }

    /// `argv` with `env` in `rec`'s jail here: the launch file written, and the command
    /// that starts it (`lab agent-exec --launch-file …`) with its environment.
    async fn jailed(
        &self,
        runs: &Arc<Runs>,
        rec: &RunRecord,
        argv: Vec<String>,
        operator_env: BTreeMap<String, String>,
    ) -> Result<(Vec<String>, BTreeMap<String, String>), String> {
        let Some(jail_program) = crate::runs::launch::sandboxing::jail_program(rec.sandbox)? else {
            return Ok((argv, operator_env));
        };
        let files = runs.files_for(rec)?;
        // The program as the jail has it: the file itself, in the folder lent to the
        // jail (a link to it, as npm's `.bin/` has, is not there).
        let mut argv = argv;
        if let Ok(real) = std::fs::canonicalize(&argv[0]) {
            argv[0] = real.to_string_lossy().into_owned();
        }
        let site = crate::sandbox::JailSite {
            home: runs.home.clone(),
            lab_exe: runs.here.lab_exe.to_string_lossy().into_owned(),
            jail_program,
            program_dir: std::fs::canonicalize(&argv[0]).ok().and_then(|p| p.parent().map(Path::to_path_buf)),
            fallback_home: std::env::var("HOME").ok(),
            local: true,
        };
        let mut env = operator_env.clone();
        env.insert("HOME".into(), runs.home.agent_home(&runs.home_of(rec)).to_string_lossy().into_owned());
        let plan = runs.jail_plan(rec, None, &operator_env, &site).await?.map(|(plan, _)| plan);
        let launch = crate::agents::agent_exec::LaunchFile {
            argv,
            workdir: rec.agent_dir().to_string_lossy().into_owned(),
            env: env.clone(),
            sandbox: plan,
        };
        let json = serde_json::to_vec(&launch).map_err(|e| e.to_string())?;
        fsutil::private_dir(&runs.home.runtime_dir()).map_err(|e| format!("making the runtime folder: {e}"))?;
        fsutil::write_atomic(&files.launch, &json, 0o600)
            .map_err(|e| format!("writing {}: {e}", files.launch.display()))?;
        let place = crate::runs::launch::Place { lab_exe: runs.here.lab_exe.clone(), files, env: env.clone() };
        Ok((place.agent_exec_argv(), env))
    }
    /// [`AcpRuns::jailed`] on host `host`: the jail's plan made for that machine (its
    /// runner's home, its `lab`, its jail program), the allowlist and the launch file
    /// put there by its runner; the command there (`lab agent-exec --launch-file …`).
    async fn jailed_there(
        &self,
        runs: &Arc<Runs>,
        rec: &RunRecord,
        host: &str,
        argv: Vec<String>,
        operator_env: BTreeMap<String, String>,
    ) -> Result<(Vec<String>, BTreeMap<String, String>), String> {
        use crate::machines::hosts::protocol::{LaunchFile, Op, Reply};
        if rec.sandbox.is_none() {
            return Ok((argv, operator_env));
        }
        let runner = self.hosts.facts(host).ok_or_else(|| format!("host `{host}` is not connected"))?;
        let step = |op: Op| async move {
            match self.hosts.call(host, op, HOST_STEP).await? {
                Reply::Error { message } => Err(message),
                r => Ok(r),
            }
        };
        let found = crate::runs::transport::remote::jail_program_there(&self.hosts, host, rec.sandbox).await?;
        let there = crate::store::paths::Home::new(PathBuf::from(&runner.home));
        let site = crate::sandbox::JailSite {
            home: there.clone(),
            lab_exe: runner.lab_exe.clone(),
            jail_program: found,
            program_dir: Path::new(&argv[0]).parent().map(Path::to_path_buf),
            fallback_home: runner.env.iter().find(|(k, _)| k == "HOME").map(|(_, v)| v.clone()),
            local: false,
        };
        let mut env = operator_env.clone();
        env.insert("HOME".into(), there.agent_home(&runs.home_of(rec)).to_string_lossy().into_owned());
        let Some((plan, list)) = runs.jail_plan(rec, None, &operator_env, &site).await? else {
            return Ok((argv, operator_env));
        };
        let run = rec.id.to_string();
        // First: it makes the run's jail directory there, where the launch file goes.
        crate::runs::transport::remote::allowlist_there(&self.hosts, host, &rec.id, &list)
            .await
            .map_err(|e| e.to_string())?;
        let launch = crate::agents::agent_exec::LaunchFile {
            argv,
            workdir: rec.agent_dir().to_string_lossy().into_owned(),
            env: env.clone(),
            sandbox: Some(plan),
        };
        let launch = serde_json::to_string(&launch).map_err(|e| e.to_string())?;
        step(Op::Write { run, file: LaunchFile::Launch, content: launch }).await?;
        let files = crate::store::paths::RunFiles::jailed(&there.jail_dir(&rec.id), &rec.id);
        let place = crate::runs::launch::Place { lab_exe: PathBuf::from(&runner.lab_exe), files, env: env.clone() };
        Ok((place.agent_exec_argv(), env))
    }

    /// A run on host `host` in `workdir` can start: the host is known and connected,
    /// and the workdir is a directory there.
    pub(super) async fn check_host(&self, host: &str, workdir: &str) -> Result<(), RunError> {
        if !self.hosts.known(host).map_err(|e| RunError::Internal(e.to_string()))? {
            return Err(RunError::BadRequest(format!(
                "unknown host `{host}` (`lab hosts add {host}` or lab.toml [hosts.{host}] makes one)"
            )));
        }
        if !self.hosts.connected(host) {
            return Err(RunError::HostDown(host.to_string()));
        }
        let op = crate::machines::hosts::protocol::Op::IsDir { path: workdir.to_string() };
        match self.hosts.call(host, op, HOST_STEP).await {
            Ok(crate::machines::hosts::protocol::Reply::Done) => Ok(()),
            Ok(crate::machines::hosts::protocol::Reply::Error { message }) => {
                Err(RunError::BadRequest(format!("workdir {workdir} on host {host}: {message}")))
            }
            Ok(other) => Err(RunError::Internal(format!("host {host} answered {other:?} for the workdir"))),
            Err(e) => Err(RunError::HostDown(format!("{host}: {e}"))),
        }
    }

    /// Host `host`'s runner, once connected (a resumed run's after lab serve restarts:
    /// its runner links again first), within `limit`.
    async fn wait_connected(
        &self,
        host: &str,
        limit: std::time::Duration,
    ) -> Result<crate::machines::hosts::RunnerFacts, String> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(facts) = self.hosts.facts(host) {
                return Ok(facts);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!("host `{host}` is not connected"));
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
}
