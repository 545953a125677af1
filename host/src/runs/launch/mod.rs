//! Launching a run: the provider's launch spec, the hook commands and settings file,
//! the private launch file `lab agent-exec` reads, the tmux session, and typing a first
//! prompt too large for the command line once the agent is ready. It owns nothing past
//! the launch: the new run's record goes to the registry and its live state to
//! [`Run`].
//!
//! | child | what it owns |
//! |---|---|
//! | [`agent_env`] | the environment an agent starts with |
//! | [`agent_version`] | the agent's own version, for the operator |
//! | [`hook_settings`] | the commands the agent's hooks run, per binding |
//! | [`sandboxing`] | a run's sandbox from lab serve's side: which, its jail, its egress |
//! | [`workspace`] | where a run's worktree is and its git work is done |
//! | [`new_run`] | a new run joins the set: launched by its transport, recorded, followed |

pub mod agent_env;
pub mod agent_version;
pub mod hook_settings;
pub(in crate::runs) mod new_run;
pub mod sandboxing;
pub mod workspace;

use crate::agents::model::{Channel, HookCommand, LaunchRequest, LaunchSpec, Transcript};
use crate::agents::provider::Provider;
use crate::runs::answer::input;
use crate::runs::answer::playback::{type_text, wait_until_ready};
use crate::runs::api::{CreateRun, RunError};
use crate::runs::live::tailer::Tail;
use crate::runs::registry::RunRecord;
use crate::runs::{now_rfc3339, Core, Read, Run};
use crate::store::paths::RunId;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

impl Core {
    /// A new run's record, active from now, its tmux session on `tmux_socket` (what
    /// its launch learns is added to it).
    pub(in crate::runs) fn new_record(
        &self,
        id: &RunId,
        (provider, req): (&str, &CreateRun),
        prompt: String,
        hooker: bool,
        tmux_socket: String,
    ) -> RunRecord {
        RunRecord {
            permission_mode: req.permission_mode.clone(),
            tmux_socket,
            dialog_hooker: hooker,
            parent: req.fork.as_ref().map(|f| f.parent.clone()),
            resume_after_limit: Some(self.auto_resume_for(req.resume_after_limit)),
            ..RunRecord::new(id.clone(), provider, &req.workdir, &prompt, &now_rfc3339())
        }
    }
}

impl Core {
    /// Type a run's first prompt into its agent once the agent is ready (its pane drawn
    /// and quiet, [`input::Readiness`]), then unlock the composer.
    pub(in crate::runs) fn spawn_first_prompt(self: Arc<Self>, run: Arc<Run>, prompt: String) {
        tokio::spawn(async move {
            let term = run.terminal();
            let target = run.record().tmux_target;
            let alive = {
                let (term, target) = (term.clone(), target.clone());
                tokio::task::spawn_blocking(move || wait_until_ready(term.as_ref(), &target)).await.unwrap_or(false)
            };
            let keys = run.keys.lock().await;
            let ended = run.tail.lock().await.ended;
            if alive && !ended {
                let buffer = format!("lab-{}", run.id);
                let result = tokio::task::spawn_blocking(move || type_text(term.as_ref(), &target, &buffer, &prompt))
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|r| r.map_err(|e| e.to_string()));
                match result {
                    Ok(()) => tracing::info!(run = %run.id, "typed the first prompt into the agent"),
                    Err(e) => {
                        tracing::error!(run = %run.id, error = %e, "could not type the first prompt");
                        self.record_error(&run, &format!("typing the first prompt into the agent failed: {e}"));
                    }
                }
            }
            // Before the key lock goes: a message waiting for it finds the composer open.
            run.update(&self.registry, Read::AsIs, async |tail: &mut Tail| tail.prompt_pending = false).await;
            drop(keys);
            run.wake();
        });
    }
}

/// What every new run's request is checked for, whatever its transport: an existing
/// absolute workdir, a prompt within the chat's limits (returned), a permission mode of
/// plain characters.
pub(in crate::runs) fn checked_request(req: &CreateRun) -> Result<String, RunError> {
    input::workdir(&req.workdir).map_err(RunError::BadRequest)?;
    if !Path::new(&req.workdir).is_dir() {
        return Err(RunError::BadRequest(format!("workdir {} is not an existing directory", req.workdir)));
    }
    checked_fields(req)
}

/// What a new run's request is checked for wherever its workdir is: an absolute
/// workdir of plain characters, a prompt within the chat's limits (returned), a
/// permission mode of plain characters. (Whether the workdir exists is asked where
/// the agent runs.)
pub(in crate::runs) fn checked_fields(req: &CreateRun) -> Result<String, RunError> {
    input::workdir(&req.workdir).map_err(RunError::BadRequest)?;
    let prompt = match &req.fork {
        // A fork without a message starts idle (its conversation is its parent's).
        Some(_) if req.prompt.is_empty() => String::new(),
        _ => input::chat_text(&req.prompt).map_err(|e| RunError::text(e, "prompt"))?,
    };
    if let Some(m) = &req.permission_mode {
        if m.is_empty() || m.len() > 32 || !m.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            return Err(RunError::BadRequest(format!("invalid permission_mode {m:?}")));
        }
    }
    Ok(prompt)
}

/// Where an agent is launched: the `lab` there (for hooks and `agent-exec`), the run's
/// files there, and the environment it starts with (before the provider's additions).
pub(in crate::runs) struct Place {
    pub lab_exe: PathBuf,
    pub files: crate::store::paths::RunFiles,
    pub env: BTreeMap<String, String>,
}

impl Place {
    /// The command the run's terminal session runs: `lab agent-exec` on its launch file.
    pub fn agent_exec_argv(&self) -> Vec<String> {
        vec![
            self.lab_exe.to_string_lossy().into_owned(),
            "agent-exec".into(),
            "--launch-file".into(),
            self.files.launch.to_string_lossy().into_owned(),
        ]
    }
}

/// What a launch writes where the agent runs, decided with the provider.
pub(in crate::runs) struct Prepared {
    /// The provider's hook settings document, for `files.settings`.
    pub settings: Option<String>,
    /// For `files.launch`.
    pub launch: crate::agents::agent_exec::LaunchFile,
    /// A first prompt too long for the command line, to type once the agent is ready.
    pub typed_prompt: Option<String>,
}

/// Ask the provider how to launch `rec`'s agent at `place` with `program` (resolved
/// there): hook commands, settings, the launch spec (checked); `rec` learns the
/// session id and transcript path. `continuing`: the launch continues an earlier
/// conversation (the provider's `continue-session`, with the operator's next message
/// in place of the record's first prompt).
pub(in crate::runs) async fn prepare(
    rec: &mut RunRecord,
    provider: &dyn Provider,
    program: &str,
    place: &Place,
    continuing: Option<&crate::runs::continuation::Continuing>,
) -> Result<Prepared, String> {
    let mut env = place.env.clone();
    let (hooks, settings, settings_path) = if provider.dialog_hooker() {
        let bindings = provider.hook_wiring().await.map_err(|e| e.to_string())?;
        hook_settings::validate(&bindings)?;
        let hooks = hook_settings::commands(&place.lab_exe, &place.files, bindings);
        let doc = provider.hook_settings(rec.id.to_string(), hooks.clone()).await.map_err(|e| match e.refusal() {
            Some(msg) => format!("the provider could not make hook settings: {msg}"),
            None => e.to_string(),
        })?;
        if let Some(doc) = &doc {
            serde_json::from_str::<serde_json::Value>(doc)
                .map_err(|e| format!("the provider's hook settings are not valid JSON: {e}"))?;
        }
        let settings_path = doc.as_ref().map(|_| place.files.settings.to_string_lossy().into_owned());
        (hooks, doc, settings_path)
    } else {
        (Vec::new(), None, None)
    };
    let session_id = uuid::Uuid::new_v4().to_string();
    let agent_dir = rec.agent_dir().to_string_lossy().into_owned();
    let request = |prompt: String| LaunchRequest {
        run_id: rec.id.to_string(),
        session_id: session_id.clone(),
        workdir: agent_dir.clone(),
        prompt,
        permission_mode: rec.permission_mode.clone(),
        program: program.to_string(),
        settings_path: settings_path.clone(),
        env: env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        hooks: hooks.clone(),
    };
    let spec_for = move |req: LaunchRequest| async move {
        let asked = match continuing {
            None => provider.launch(req).await,
            Some(c) => provider.continue_session(req, c.how, c.earlier.clone()).await,
        };
        asked.map_err(|e| match e.refusal() {
            Some(msg) => format!("the provider refused to launch: {msg}"),
            None => e.to_string(),
        })
    };
    let prompt = continuing.map_or(&rec.prompt, |c| &c.prompt).clone();
    let mut spec = spec_for(request(prompt.clone())).await?;
    let mut typed_prompt = None;
    if input::oversized_argument(&spec.argv).is_some() {
        spec = spec_for(request(String::new())).await?;
        typed_prompt = Some(prompt);
    }
    check_spec(&spec, program, &hooks)?;
    if let Some(c) = continuing.filter(|c| c.how == crate::agents::model::Continuation::Resume) {
        crate::runs::continuation::check_resumed_transcript(&spec.transcript, c)?;
    }
    crate::runs::launch::agent_env::add_component_vars(&mut env, spec.env)?;
    rec.session_id = spec.session_id;
    rec.transcript_path = match spec.transcript {
        Transcript::Path(p) => Some(p),
        Transcript::FromSessionInfo | Transcript::None => None,
    };
    let launch = crate::agents::agent_exec::LaunchFile { argv: spec.argv, workdir: agent_dir, env, sandbox: None };
    Ok(Prepared { settings, launch, typed_prompt })
}

/// The environment a provider's agent starts with ([`crate::runs::launch::agent_env`]), with a
/// warning for what is left out that the operator may have meant to pass.
pub(in crate::runs) fn agent_env(
    provider: &str,
    pconf: &crate::store::config::ProviderConfig,
) -> BTreeMap<String, String> {
    let d = crate::runs::launch::agent_env::decide(std::env::vars_os(), pconf.pass_env.as_deref(), &pconf.env);
    for name in &d.not_utf8 {
        tracing::warn!(variable = %name, "not passed to the agent: lab serve's environment has it as bytes that are not UTF-8");
    }
    let credentials = crate::runs::launch::agent_env::credential_like(&d.not_passed);
    if !credentials.is_empty() {
        tracing::info!(
            provider,
            variables = %credentials.join(", "),
            "not passed to the agent from lab serve's environment: name them in lab.toml [providers.{provider}] pass_env to pass them"
        );
    }
    d.env
}

/// Whether lab starts what a provider's `launch` returned (`lab providers check` runs
/// the same rules on a sample): an argv that starts with `program`, the one lab chose
/// ([`check_program`]), with no argument longer than Linux takes; an absolute
/// transcript path; a transcript named by session info only with a hook that feeds
/// it; environment variables a component may set ([`crate::runs::launch::agent_env::add_component_vars`]
/// on what lab sets, here nothing).
pub fn check_spec(spec: &LaunchSpec, program: &str, hooks: &[HookCommand]) -> Result<(), String> {
    let Some(argv0) = spec.argv.first() else {
        return Err("the provider returned an empty argv".into());
    };
    // lab runs the program the operator chose (lab.toml's, else the provider's
    // default found on PATH), never another one a component names.
    check_program(argv0, program)?;
    if let Some(i) = input::oversized_argument(&spec.argv) {
        return Err(format!(
            "argument {i} of the agent's command line is {} bytes long; Linux takes at most {} bytes per argument",
            spec.argv[i].len(),
            input::MAX_ARG_STRLEN - 1
        ));
    }
    match &spec.transcript {
        Transcript::Path(t) if !Path::new(t).is_absolute() => {
            return Err(format!("the provider returned a relative transcript path {t:?}"));
        }
        Transcript::FromSessionInfo if !hooks.iter().any(|h| h.binding.channel == Channel::SessionInfo) => {
            return Err(
                "the provider's transcript comes from session info, but no hook binding feeds session-info".into()
            );
        }
        _ => {}
    }
    crate::runs::launch::agent_env::add_component_vars(&mut BTreeMap::new(), spec.env.clone())
}

/// The agent's command line starts with the program lab chose (lab.toml's, else the
/// provider's default found on PATH), never with another one the component names.
pub(in crate::runs) fn check_program(argv0: &str, program: &str) -> Result<(), String> {
    if argv0 == program {
        return Ok(());
    }
    Err(format!(
        "the provider's command line starts with {argv0:?}, not with the program lab chose ({program:?}); lab runs only that one"
    ))
}

#[cfg(test)]
mod program_tests {
    use super::*;
    use crate::agents::model::HookBinding;

    #[test]
    fn the_command_line_starts_with_lab_s_program() {
        assert_eq!(super::check_program("/opt/agent", "/opt/agent"), Ok(()));
        let err = super::check_program("/bin/sh", "/opt/agent").unwrap_err();
        assert!(err.contains("\"/bin/sh\"") && err.contains("/opt/agent"), "{err}");
    }

    #[test]
    fn a_launch_spec_is_checked_as_lab_starts_it() {
        let spec = |argv: &[&str], transcript: Transcript, env: &[(&str, &str)]| LaunchSpec {
            argv: argv.iter().map(|a| a.to_string()).collect(),
            transcript,
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            session_id: None,
        };
        let abs = || Transcript::Path("/t/x.jsonl".into());
        let session = [HookCommand {
            binding: HookBinding { event: "session-begins".into(), matcher: None, channel: Channel::SessionInfo },
            command: "lab hook session-info".into(),
        }];
        assert_eq!(check_spec(&spec(&["/a", "-p"], abs(), &[("X_MODE", "1")]), "/a", &[]), Ok(()));
        assert_eq!(check_spec(&spec(&["/a"], Transcript::FromSessionInfo, &[]), "/a", &session), Ok(()));
        let err = |s: LaunchSpec, hooks: &[HookCommand]| check_spec(&s, "/a", hooks).unwrap_err();
        assert!(err(spec(&[], abs(), &[]), &[]).contains("empty argv"));
        assert!(err(spec(&["/b"], abs(), &[]), &[]).contains("not with the program lab chose"));
        let long = "x".repeat(input::MAX_ARG_STRLEN);
        assert!(err(spec(&["/a", &long], abs(), &[]), &[]).contains("argument 1 of the agent's command line"));
        assert!(err(spec(&["/a"], Transcript::Path("t.jsonl".into()), &[]), &[]).contains("relative transcript path"));
        assert!(
            err(spec(&["/a"], Transcript::FromSessionInfo, &[]), &[]).contains("no hook binding feeds session-info")
        );
        assert!(err(spec(&["/a"], abs(), &[("LD_PRELOAD", "/x.so")]), &[]).contains("may not set LD_PRELOAD"));
    }
}
