//! Picking a conversation up again: an ended run resumed under its own id, in its own
//! worktree, with its agent's conversation restored (`POST /runs/{id}/resume`), and a
//! run forked into a new one whose conversation starts from a copy of its parent's, in
//! a worktree of its own branched from the parent's files as they are
//! (`POST /runs/{id}/fork`). The provider says what its agent can do
//! ([`Abilities`]) and how (`continue-session`); what may be continued is decided here
//! ([`resumable`], [`forkable`]) from the record alone.
//!
//! | child | what it owns |
//! |---|---|
//! | [`usage_limit`] | a run stopped at a usage limit, and going on when it resets |

pub mod usage_limit;

use crate::agents::model::{Abilities, Continuation, EarlierRun};
pub(in crate::runs) use crate::runs::api::{Continuing, ForkOf};
use crate::runs::api::{CreateRun, RunBody, RunError};
use crate::runs::live::tailer::Tail;
use crate::runs::registry::{RunRecord, Status};
use crate::runs::{answer::input, Core, Read, Run, Runs};
use std::sync::Arc;

/// Why `rec`'s run cannot be resumed (None: it can), with its provider's abilities
/// (`None`: its provider is not loaded).
pub fn not_resumable(rec: &RunRecord, abilities: Option<Abilities>) -> Option<RunError> {
    match rec.status {
        Status::Active => {
            return Some(RunError::NotResumable("the run is still live: there is nothing to resume".into()))
        }
        Status::Failed => {
            return Some(RunError::NotResumable(
                "the run's launch failed, so there is no conversation to resume".into(),
            ))
        }
        Status::Ended => {}
    }
    if let Some(why) = cannot_continue(rec, abilities, Continuation::Resume) {
        return Some(why);
    }
    match &rec.worktree {
        Some(wt) if wt.discarded => {
            Some(RunError::NoWorktree("the run's worktree was discarded: fork it instead, or start a new run".into()))
        }
        _ => None,
    }
}

/// Why `rec`'s run cannot be forked (None: it can).
pub fn not_forkable(rec: &RunRecord, abilities: Option<Abilities>) -> Option<RunError> {
    if rec.status == Status::Failed {
        return Some(RunError::NotResumable("the run's launch failed, so there is no conversation to fork".into()));
    }
    cannot_continue(rec, abilities, Continuation::Fork)
}

/// What resume and fork both need: a provider that can, an agent session lab knows.
fn cannot_continue(rec: &RunRecord, abilities: Option<Abilities>, how: Continuation) -> Option<RunError> {
    let verb = how.verb();
    let Some(a) = abilities else {
        return Some(RunError::NotSupported(format!(
            "provider `{}` is not loaded, so its run cannot be {verb}d",
            rec.provider
        )));
    };
    let can = match how {
        Continuation::Resume => a.resume,
        Continuation::Fork => a.fork,
    };
    if !can {
        return Some(RunError::NotSupported(format!(
            "provider `{}` cannot {verb} its agent's conversations (a provider built against lab:provider 0.4.0 \
             says so in its `sessions` interface; older ones cannot)",
            rec.provider
        )));
    }
    if rec.session_id.is_none() {
        return Some(RunError::NotResumable(format!(
            "the agent never named its session, so there is no conversation to {verb}"
        )));
    }
    None
}

/// Whether `rec`'s body says it can be resumed and forked.
pub fn continuable(rec: &RunRecord, abilities: Option<Abilities>) -> (bool, bool) {
    (not_resumable(rec, abilities).is_none(), not_forkable(rec, abilities).is_none())
}

/// A resumed run's transcript is read on from where it ended: the provider's resume
/// must write to the transcript the run had (one it names late is looked at then).
pub(in crate::runs) fn check_resumed_transcript(
    spec: &crate::agents::model::Transcript,
    c: &Continuing,
) -> Result<(), String> {
    match (spec, &c.earlier.transcript_path) {
        (crate::agents::model::Transcript::Path(p), Some(earlier)) if p != earlier => Err(format!(
            "the provider resumes the conversation into another transcript ({p}) than the run's ({earlier}); \
             lab would show its history twice, so the agent was not started"
        )),
        _ => Ok(()),
    }
}

/// The operator's optional message, checked as every chat message is ("": none).
fn checked_prompt(prompt: Option<String>) -> Result<String, RunError> {
    match prompt {
        None => Ok(String::new()),
        Some(p) => input::chat_text(&p).map_err(|e| RunError::text(e, "prompt")),
    }
}

/// The conversation `rec`'s run had, for its provider.
fn earlier_of(rec: &RunRecord) -> EarlierRun {
    EarlierRun {
        session_id: rec.session_id.clone().unwrap_or_default(),
        transcript_path: rec.remote_transcript.clone().or_else(|| rec.transcript_path.clone()),
        workdir: rec.agent_dir().to_string_lossy().into_owned(),
    }
}

impl Runs {
    /// What `rec`'s run can be continued with: its provider's abilities as the build
    /// serving now says (a resume or fork launches with it), as far as the way the run
    /// is reached allows (None: the provider is not loaded).
    pub(in crate::runs) fn abilities_of(&self, rec: &RunRecord) -> Option<Abilities> {
        self.transport(rec).abilities(self, rec)
    }

    /// `POST /runs/{id}/resume`: the ended run live again under its id, in its worktree
    /// and on its machine, its agent's conversation restored; `prompt` its next
    /// message. Nothing changes when it cannot be (the error says why).
    pub async fn resume(self: &Arc<Self>, run: &Arc<Run>, prompt: Option<String>) -> Result<RunBody, RunError> {
        let prompt = checked_prompt(prompt)?;
        // Its history read first: the tail reads on from where it ends.
        self.ensure_loaded(run).await;
        let keys = run.keys.clone().lock_owned().await;
        let rec = run.record();
        if let Some(why) = not_resumable(&rec, self.abilities_of(&rec)) {
            return Err(why);
        }
        let transport = self.transport(&rec);
        transport.reachable(&rec)?;
        let continuing = Continuing { how: Continuation::Resume, earlier: earlier_of(&rec), prompt };
        let mut next =
            RunRecord { status: Status::Active, ended_at: None, error: None, end_reason: None, ..rec.clone() };
        let typed = transport.relaunch(self, &mut next, &continuing).await?;
        // What the provider did not name again stays as recorded.
        next.session_id = next.session_id.or(rec.session_id.clone());
        next.transcript_path = next.transcript_path.or(rec.transcript_path.clone());
        next.remote_transcript = next.remote_transcript.or(rec.remote_transcript.clone());
        self.registry.put(&next).map_err(|e| RunError::Internal(format!("recording the run: {e}")))?;
        *run.record.lock().unwrap() = next;
        run.view.touch();
        let pending = typed.is_some();
        run.update(&self.registry, Read::AsIs, async |tail: &mut Tail| tail.revive(pending)).await;
        drop(keys);
        tracing::info!(run = %run.id, provider = %rec.provider, "run resumed");
        if let Some(prompt) = typed {
            self.core.clone().spawn_first_prompt(run.clone(), prompt);
        }
        self.clone().spawn_tailer(run.clone(), false);
        transport.resumed(self, run).await;
        Ok(self.body_of(run))
    }

    /// `POST /runs/{id}/fork`: a new run (`201`) whose conversation starts from a copy
    /// of `parent`'s, in a worktree branched from the parent's files as they are now,
    /// on the parent's machine; `prompt` its first message (none: it starts idle).
    pub async fn fork(self: &Arc<Self>, parent: &Arc<Run>, prompt: Option<String>) -> Result<RunBody, RunError> {
        let prompt = checked_prompt(prompt)?;
        let rec = parent.record();
        if let Some(why) = not_forkable(&rec, self.abilities_of(&rec)) {
            return Err(why);
        }
        let worktree = rec.worktree.clone().filter(|w| !w.discarded);
        let continuing = Continuing { how: Continuation::Fork, earlier: earlier_of(&rec), prompt: prompt.clone() };
        let req = CreateRun {
            provider: rec.provider.clone(),
            workdir: rec.workdir.clone(),
            prompt,
            permission_mode: rec.permission_mode.clone(),
            worktree: None,
            host: rec.host.clone(),
            resume_after_limit: rec.resume_after_limit.as_ref().map(|c| c.on),
            // A fork is jailed as its parent is.
            sandbox: Some(rec.sandbox.as_str().to_string()),
            fork: Some(ForkOf { parent: rec.id.clone(), worktree, continuing }),
        };
        let body = self.create(req).await?;
        tracing::info!(run = %body.id, parent = %rec.id, "run forked");
        Ok(body)
    }
}

impl Core {
    /// A run's body, with what it can be continued as.
    pub fn body_of(&self, run: &Run) -> RunBody {
        let mut body = run.body();
        let rec = run.record();
        (body.resumable, body.forkable) = continuable(&rec, run.transport().abilities(self, &rec));
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(status: Status, session: Option<&str>) -> RunRecord {
        let id = crate::store::paths::RunId::parse("r-1").unwrap();
        RunRecord {
            status,
            session_id: session.map(String::from),
            transcript_path: Some("/t.jsonl".into()),
            ..RunRecord::new(id, "p", "/w", "hi", "t0").ended("t1")
        }
    }

    const BOTH: Option<Abilities> = Some(Abilities { resume: true, fork: true });

    #[test]
    fn an_ended_run_with_a_session_resumes_and_forks_where_its_provider_can() {
        assert_eq!(continuable(&rec(Status::Ended, Some("s")), BOTH), (true, true));
        assert_eq!(continuable(&rec(Status::Active, Some("s")), BOTH), (false, true), "a live run forks only");
        assert_eq!(continuable(&rec(Status::Failed, Some("s")), BOTH), (false, false));
        assert_eq!(continuable(&rec(Status::Ended, None), BOTH), (false, false), "no session, nothing to carry");
        let resume_only = Some(Abilities { resume: true, fork: false });
        assert_eq!(continuable(&rec(Status::Ended, Some("s")), resume_only), (true, false));
        assert_eq!(continuable(&rec(Status::Ended, Some("s")), Some(Abilities::default())), (false, false));
        assert_eq!(continuable(&rec(Status::Ended, Some("s")), None), (false, false));
    }

    #[test]
    fn why_not_is_said_with_the_code_a_client_acts_on() {
        let code = |e: Option<RunError>| e.map(|e| e.code());
        let none = Some(Abilities::default());
        assert_eq!(code(not_resumable(&rec(Status::Ended, Some("s")), none)), Some("not_supported"));
        assert_eq!(code(not_forkable(&rec(Status::Ended, Some("s")), None)), Some("not_supported"));
        assert_eq!(code(not_resumable(&rec(Status::Active, Some("s")), BOTH)), Some("not_resumable"));
        assert_eq!(code(not_resumable(&rec(Status::Ended, None), BOTH)), Some("not_resumable"));
        let mut discarded = rec(Status::Ended, Some("s"));
        discarded.worktree = Some(crate::worktree::Worktree {
            path: "/wt".into(),
            branch: "lab/r-1".into(),
            base: "abc".into(),
            base_ref: None,
            repo: "/w".into(),
            git_dir: String::new(),
            subdir: String::new(),
            merged: None,
            discarded: true,
        });
        assert_eq!(code(not_resumable(&discarded, BOTH)), Some("no_worktree"));
        assert_eq!(code(not_forkable(&discarded, BOTH)), None, "a fork branches from the parent's base then");
        let msg = not_resumable(&rec(Status::Ended, Some("s")), none).unwrap().to_string();
        assert!(msg.contains("provider `p` cannot resume"), "{msg}");
    }
}
