//! Answering: typing the operator's messages and playing the provider's answer plans,
//! both under the run's key lock and behind a fresh check (the composer lock, the
//! answer guard). It owns the playback of an answer (in its own task, holding the key
//! lock to the last key); the answered marks are the live state's, set and cleared
//! through [`Run::update`], and the progress is the run's view's.
//!
//! | child | what it owns |
//! |---|---|
//! | [`answer_guard`] | may lab play keys for this answer now? |
//! | [`input`] | the rules for operator text and the composer lock |
//! | [`keystrokes`] | the rules of a provider's answer plan |
//! | [`playback`] | what lab types into a terminal, paced, checked on screen |
//! | [`terminal_control`] | who holds a run's terminal |

pub mod answer_guard;
pub mod input;
pub mod keystrokes;
pub mod playback;
pub mod terminal_control;

use crate::agents::model::Answer;
use crate::agents::provider::Provider;
use crate::runs::api::{AnswerFailure, AnswerProgress, AnswerState, RunError};
use crate::runs::live::tailer::Tail;
use crate::runs::{now_rfc3339, Core, Read, Run};
use playback::type_text;
use std::sync::Arc;

tokio::task_local! {
    /// The answer rule an answer being given in this task is by ([`Core::answer_by_rule`]).
    pub(in crate::runs) static ANSWERED_BY: crate::runs::api::AnsweredBy;
}

/// Which answer the guard is for: a new one, or one being played (whose own mark on
/// its prompt does not count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::runs) enum Guard {
    New,
    Playing,
}

impl Core {
    /// `POST /runs/{id}/messages`: paste the text into the agent, then Enter — under
    /// the run's key lock and only if a fresh read finds the composer unlocked
    /// ([`input::composer_lock`]).
    pub async fn send_message(self: &Arc<Self>, run: &Arc<Run>, text: &str) -> Result<(), RunError> {
        let text = input::chat_text(text).map_err(|e| RunError::text(e, "text"))?;
        run.transport().send_message(self, run, text).await
    }

    /// A message typed into the run's terminal ([`Core::send_message`] of a run whose
    /// transport types keys): pasted, then Enter.
    pub(in crate::runs) async fn type_message(&self, run: &Arc<Run>, text: String) -> Result<(), RunError> {
        run.transport().reachable(&run.record())?;
        let _keys = run.keys.lock().await;
        let (ended, _) = run.update(&self.registry, Read::Channels, async |tail: &mut Tail| tail.ended).await;
        if ended {
            return Err(RunError::RunEnded);
        }
        // The lock the view shows after that read (or a newer one's: views are published
        // in order).
        let snap = run.snapshot();
        if let Some(lock) = snap.composer_lock {
            return Err(lock.into());
        }
        // An answer accepted whose playback has not started yet (it waits for these
        // keys): its keys go first.
        if snap.answer.as_ref().is_some_and(|a| matches!(a.state, AnswerState::Waiting | AnswerState::Playing)) {
            return Err(input::answer_pending_lock().into());
        }
        let term = run.terminal();
        let target = run.record().tmux_target;
        let buffer = format!("lab-{}", run.id);
        tokio::task::spawn_blocking(move || type_text(term.as_ref(), &target, &buffer, &text))
            .await
            .map_err(|e| RunError::Internal(e.to_string()))?
            .map_err(|e| RunError::Internal(format!("typing into the agent failed: {e}")))?;
        run.wake();
        Ok(())
    }

    /// `POST /runs/{id}/dialog/answer`: the answer guard on a fresh read and the
    /// provider's plan, then the paced keystrokes in the background. Returns the
    /// answer's progress as it starts (its keys included) once the guard has accepted;
    /// the prompt counts as answered from then on, and the rest shows as the run's
    /// [`AnswerProgress`]. The POST waits on nothing of other runs, nor on this run's
    /// key lock: playback takes its turn with the run's messages and earlier answers
    /// (the lock, held until the last key) in the background, and a message sent
    /// before it started is refused (`answer_pending`).
    pub async fn answer(
        self: &Arc<Self>,
        run: &Arc<Run>,
        tool_id: &str,
        answers: Vec<Answer>,
    ) -> Result<AnswerProgress, RunError> {
        // A device at the terminal: lab types nothing, an answer included.
        if let Some(h) = run.snapshot().keyboard {
            return Err(crate::runs::answer::terminal_control::lock(&h).into());
        }
        for a in &answers {
            match a {
                Answer::Other(text) | Answer::Feedback { text, .. } => {
                    input::other_text(text).map_err(|e| RunError::text(e, "the answer's text"))?;
                }
                Answer::Option(_) | Answer::Options(_) => {}
            }
        }
        run.transport().answer(self, run, tool_id, answers).await
    }

    /// What answer rules need of the run's prompt `dialog`, from its transport (the
    /// protocol's word for an ACP agent, the provider's for one in a terminal).
    pub async fn prompt_facts(
        &self,
        run: &Arc<Run>,
        dialog: &crate::agents::model::Dialog,
    ) -> Option<crate::agents::model::PromptFacts> {
        run.transport().prompt_facts(run, dialog).await
    }

    /// [`Core::answer`] in the operator's place: the same guarded path (a device at the
    /// terminal, the answer guard, the key lock, the provider's plan or the ACP reply),
    /// the answer's progress then naming the rule `by`.
    pub async fn answer_by_rule(
        self: &Arc<Self>,
        run: &Arc<Run>,
        tool_id: &str,
        answer: Answer,
        by: crate::runs::api::AnsweredBy,
    ) -> Result<AnswerProgress, RunError> {
        // The answer's progress names the rule as it starts ([`Run::start_answer`], in
        // this task).
        let mut progress = ANSWERED_BY.scope(by.clone(), self.answer(run, tool_id, vec![answer])).await?;
        progress.answered_by = Some(by);
        Ok(progress)
    }

    /// `PUT /runs/{id}/rules` `{"on"}`: whether answer rules answer the run's prompts
    /// (off: every one waits for the operator). Recorded, so it holds across restarts.
    pub fn set_answer_rules(&self, run: &Arc<Run>, on: bool) -> Result<(), RunError> {
        let rec = {
            let mut rec = run.record.lock().unwrap();
            rec.rules_off = !on;
            rec.clone()
        };
        self.registry.put(&rec).map_err(|e| RunError::Internal(format!("recording the run: {e}")))?;
        run.view.touch();
        Ok(())
    }

    /// An answer typed into the run's terminal ([`Core::answer`] of a run whose
    /// transport types keys): the provider's plan, played in the background.
    pub(in crate::runs) async fn type_answer(
        self: &Arc<Self>,
        run: &Arc<Run>,
        tool_id: &str,
        answers: Vec<Answer>,
    ) -> Result<AnswerProgress, RunError> {
        let provider = run.provider.as_ref().map(|p| p.provider.clone()).ok_or(RunError::NotAnswerable)?;
        if !provider.dialog_hooker() {
            return Err(RunError::NotAnswerable);
        }
        run.transport().reachable(&run.record())?;
        // The run's keys if nobody types into it now; else playback waits its turn (an
        // earlier answer still playing, a message being pasted), not this POST.
        let keys = run.keys.clone().try_lock_owned().ok();
        // The guard on a fresh read, and the provider's plan for this prompt.
        let (accepted, _) = run
            .update(&self.registry, Read::Channels, async |tail: &mut Tail| {
                if tail.ended {
                    return Err(RunError::NoDialog);
                }
                let dialog = self.guarded(tail, tool_id, Guard::New)?;
                let plan = provider.plan_answer(dialog.clone(), answers).await.map_err(|e| match e.refusal() {
                    Some(msg) => RunError::BadRequest(msg.to_string()),
                    None => RunError::Internal(e.to_string()),
                })?;
                keystrokes::validate(&plan).map_err(RunError::Internal)?;
                // Answered from now on: a second answer to it is refused (`no_dialog`),
                // and the view no longer offers it.
                tail.mark_answered(tool_id);
                Ok((dialog, plan))
            })
            .await;
        let (dialog, plan) = accepted?;
        let described = plan.steps.iter().map(keystrokes::describe).collect();
        let start = AnswerProgress {
            tool_id: tool_id.to_string(),
            state: AnswerState::Waiting,
            keys: described,
            played: 0,
            replays: 0,
            error: None,
            started_at: now_rfc3339(),
            finished_at: None,
            answered_by: None,
        };
        run.start_answer(start.clone());
        let (runs, run2, tool_id) = (self.clone(), run.clone(), tool_id.to_string());
        let keys_of_run = run.keys.clone();
        tokio::spawn(async move {
            let keys = match keys {
                Some(k) => k,
                None => keys_of_run.lock_owned().await,
            };
            let result = runs.play_answer(&run2, provider.as_ref(), &tool_id, dialog, plan).await;
            if let Err(e) = &result {
                // Not played: the prompt is offered again if it is still there.
                run2.update(&runs.registry, Read::AsIs, async |tail: &mut Tail| tail.unmark_answered(&tool_id)).await;
                tracing::warn!(run = %run2.id, tool_id, error = %e, "an answer was not played");
            }
            run2.update_answer(&tool_id, |p| {
                p.finished_at = Some(now_rfc3339());
                match result {
                    Ok(()) => p.state = AnswerState::Played,
                    Err(e) => {
                        let lost = matches!(e, RunError::AnswerLost(_));
                        p.state = if lost { AnswerState::Lost } else { AnswerState::Failed };
                        p.error = Some(AnswerFailure { error: e.code(), message: e.to_string() });
                    }
                }
            });
            run2.wake();
            drop(keys);
        });
        Ok(start)
    }

    /// An accepted answer's playback (under the run's key lock, which the caller holds),
    /// through the terminal seam ([`playback::play_answer`]: the drawn wait, the
    /// guard again, the keys, the check that they took), reported as the answer's
    /// progress.
    async fn play_answer(
        &self,
        run: &Arc<Run>,
        provider: &dyn Provider,
        tool_id: &str,
        dialog: crate::agents::model::Dialog,
        plan: crate::agents::model::AnswerPlan,
    ) -> Result<(), RunError> {
        let target = run.record().tmux_target;
        let term = run.terminal();
        // A provider that fails to tell is taken as "not drawn": fail closed.
        let drawn = |pane: String| {
            let dialog = dialog.clone();
            async move { provider.is_drawn(dialog, pane).await.unwrap_or(false) }
        };
        let live = || self.still_live(run, tool_id);
        let (run2, id) = (run.clone(), tool_id.to_string());
        let report = move |p: playback::Progress| match p {
            playback::Progress::Playing => run2.update_answer(&id, |a| {
                a.state = AnswerState::Playing;
                a.played = 0;
            }),
            playback::Progress::Sent(n) => run2.update_answer(&id, |a| a.played = n),
            playback::Progress::Replay(n) => {
                tracing::warn!(run = %run2.id, tool_id = %id, "no key of the answer took (the prompt is unchanged); playing it again");
                run2.update_answer(&id, |a| a.replays = n)
            }
        };
        // On another machine: the drawn check and the keys there, in one trip, with the
        // build this run pinned (the runner bundles the same builds, by digest).
        let there = match (&run.record().host, &run.provider) {
            (Some(_), Some(pinned)) => Some(crate::machines::terminal::There {
                build: pinned.facts.digest.clone(),
                dialog: dialog.clone(),
                plan: plan.clone(),
                look: plan.drawn_within.min(std::time::Duration::from_secs(1)),
            }),
            _ => None,
        };
        let secs = keystrokes::GONE_WITHIN.as_secs();
        match playback::play_answer(term, &target, &plan, drawn, live, report, there).await? {
            playback::Played::Took => Ok(()),
            playback::Played::NoLongerLive => Err(RunError::NoDialog),
            playback::Played::NotOnScreen => Err(RunError::NotOnScreen(format!(
                "the prompt was not on the agent's screen (drawn and still for {} ms) within {} ms of the answer, so nothing was typed: look at the terminal",
                plan.settle.as_millis(),
                (plan.drawn_within + plan.settle).as_millis()
            ))),
            playback::Played::Failed(e) => Err(RunError::Internal(format!("playing the answer failed: {e}"))),
            playback::Played::Lost { unchanged: true, replays } => Err(RunError::AnswerLost(format!(
                "the keys were typed {} times but the prompt is still on the agent's screen, unchanged, {secs} s later: answer it in the terminal",
                replays + 1
            ))),
            playback::Played::Lost { unchanged: false, .. } => Err(RunError::AnswerLost(format!(
                "the keys were typed but the prompt is still on the agent's screen {secs} s later (it changed, so some took): look at the terminal"
            ))),
        }
    }

    /// Whether the prompt `tool_id` is still the run's live one, on a fresh read (this
    /// answer's own mark aside); `run_ended` once the run is over.
    async fn still_live(&self, run: &Arc<Run>, tool_id: &str) -> Result<bool, RunError> {
        let (still, _) = run
            .update(&self.registry, Read::Channels, async |tail: &mut Tail| {
                if tail.ended {
                    return Err(RunError::RunEnded);
                }
                Ok(self.guarded(tail, tool_id, Guard::Playing).is_ok())
            })
            .await;
        still
    }
}

impl Core {
    /// The answer guard on the tail's current facts: the live prompt, if it is the one
    /// `tool_id` names and lab can answer it.
    pub(in crate::runs) fn guarded(
        &self,
        tail: &Tail,
        tool_id: &str,
        guard: Guard,
    ) -> Result<crate::agents::model::Dialog, RunError> {
        let check = match guard {
            Guard::New => answer_guard::check,
            Guard::Playing => answer_guard::check_playing,
        };
        check(tail.live_dialog(), tail.resolved(), tail.answered(), tool_id)?;
        let dialog = tail.live_dialog().cloned().ok_or(RunError::NoDialog)?;
        if !dialog.answerable {
            return Err(RunError::NotAnswerable);
        }
        Ok(dialog)
    }
}
