//! Answering: typing the operator's messages and playing the provider's answer plans,
//! both under the run's key lock and behind a fresh check (the composer lock, the
//! answer guard).

use super::launch::type_text;
use super::*;
use crate::components::ProviderHandle;

impl Runs {
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

    /// `POST /runs/{id}/dialog/answer`: the answer guard on a fresh read and the
    /// provider's plan, then the paced keystrokes in the background. Returns the
    /// answer's progress as it starts (its keys included) once the guard has accepted
    /// and playback has started; the prompt counts as answered from then on, and the
    /// rest shows as the run's [`AnswerProgress`]. Answers to different runs never wait
    /// on each other; to one run they take turns with its messages (the run's key lock,
    /// held until the last key).
    pub async fn answer(
        self: &Arc<Self>,
        run: &Arc<Run>,
        tool_id: &str,
        answers: Vec<Answer>,
    ) -> Result<AnswerProgress, RunError> {
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
        let keys = run.keys.clone().lock_owned().await;
        // The guard on a fresh read, and the provider's plan for this prompt.
        let (dialog, plan, captured) = {
            let mut tail = run.tail.lock().await;
            if tail.ended {
                return Err(RunError::NoDialog);
            }
            tail.refresh().await;
            let dialog = self.guarded(&tail, tool_id)?;
            let plan = provider.plan_answer(dialog.clone(), answers).await.map_err(|e| match e.refusal() {
                Some(msg) => RunError::BadRequest(msg.to_string()),
                None => RunError::Internal(e.to_string()),
            })?;
            keystrokes::validate(&plan).map_err(RunError::Internal)?;
            // Answered from now on: a second answer to it is refused (`no_dialog`), and
            // the view no longer offers it.
            tail.mark_answered(tool_id);
            let d = tail.derive().await;
            let captured = tail.live_dialog_captured();
            drop(tail);
            run.publish(d);
            (dialog, plan, captured)
        };
        let described = plan.steps.iter().map(keystrokes::describe).collect();
        let start = AnswerProgress {
            tool_id: tool_id.to_string(),
            state: AnswerState::Waiting,
            keys: described,
            played: 0,
            error: None,
            started_at: now_rfc3339(),
            finished_at: None,
        };
        run.start_answer(start.clone());
        let (runs, run2, tool_id) = (self.clone(), run.clone(), tool_id.to_string());
        tokio::spawn(async move {
            let result = runs.play_answer(&run2, &provider, &tool_id, dialog, plan, captured).await;
            if let Err(e) = &result {
                // Not played: the prompt is offered again if it is still there.
                let mut tail = run2.tail.lock().await;
                tail.unmark_answered(&tool_id);
                let d = tail.derive().await;
                drop(tail);
                run2.publish(d);
                tracing::warn!(run = %run2.id, tool_id, error = %e, "an answer was not played");
            }
            run2.update_answer(&tool_id, |p| {
                p.finished_at = Some(now_rfc3339());
                match result {
                    Ok(()) => p.state = AnswerState::Played,
                    Err(e) => {
                        p.state = AnswerState::Failed;
                        p.error = Some(AnswerFailure { error: e.code(), message: e.to_string() });
                    }
                }
            });
            run2.wake();
            drop(keys);
        });
        Ok(start)
    }

    /// An accepted answer's playback (under the run's key lock, which the caller holds):
    /// wait until the prompt is drawn, check the guard again, then send the keys.
    async fn play_answer(
        &self,
        run: &Arc<Run>,
        provider: &ProviderHandle,
        tool_id: &str,
        dialog: crate::model::Dialog,
        plan: crate::model::AnswerPlan,
        captured: Option<SystemTime>,
    ) -> Result<(), RunError> {
        // 1. Wait until the prompt is drawn (the provider reads the pane), at most the
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
                if drawn && !plan.settle.is_zero() {
                    // Drawn, but the agent takes keys a moment later (the provider says).
                    tokio::time::sleep(plan.settle).await;
                }
                break;
            }
            tokio::time::sleep(keystrokes::DRAWN_POLL).await;
        }
        // 2. The guard again (the prompt may have gone while it was drawn), then play.
        {
            let mut tail = run.tail.lock().await;
            if tail.ended {
                return Err(RunError::NoDialog);
            }
            tail.refresh().await;
            // This answer's own mark aside: is the prompt still the live one?
            tail.unmark_answered(tool_id);
            let still = self.guarded(&tail, tool_id);
            tail.mark_answered(tool_id);
            still?;
        }
        run.update_answer(tool_id, |p| p.state = AnswerState::Playing);
        let tmux = self.tmux.clone();
        let (run2, id) = (run.clone(), tool_id.to_string());
        tokio::task::spawn_blocking(move || {
            keystrokes::play(&tmux, &target, &plan, |sent| run2.update_answer(&id, |p| p.played = sent))
        })
        .await
        .map_err(|e| RunError::Internal(e.to_string()))?
        .map_err(|e| RunError::Internal(format!("playing the answer failed: {e}")))
    }

    /// The answer guard on the tail's current facts: the live prompt, if it is the one
    /// `tool_id` names and lab can answer it.
    pub(super) fn guarded(&self, tail: &tailer::Tail, tool_id: &str) -> Result<crate::model::Dialog, RunError> {
        answer_guard::check(tail.live_dialog(), tail.resolved(), tail.answered(), tool_id)?;
        let dialog = tail.live_dialog().cloned().ok_or(RunError::NoDialog)?;
        if !dialog.answerable {
            return Err(RunError::NotAnswerable);
        }
        Ok(dialog)
    }
}
