//! A run whose agent stopped because its account reached a usage limit: what the
//! agent said and when the limit resets (the provider reads it off the run's last
//! message, [`crate::agents::model::UsageLimit`]) is shown on the run; and when the
//! operator asked for it — for the run (`PUT /runs/{id}/auto-resume`, `POST /runs`'s
//! `resume_after_limit`) or for every new run (lab.toml `[runs] resume_after_limit`) —
//! lab picks the run up again once the limit resets, with a short message of the
//! operator's choosing: typed in if the agent still waits at its prompt, else the run
//! is resumed with it. Off by default; with no reset time known, lab never guesses.

use crate::agents::model::UsageLimit;
pub use crate::runs::api::LimitView;
use crate::runs::api::{RunBody, RunError};
pub use crate::runs::registry::AutoResume;
use crate::runs::registry::Status;
use crate::runs::Core;
use crate::runs::{Read, Run, Runs};
use crate::store::paths::RunId;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long after the reset time lab waits before it goes on (a limit counted on
/// another clock than lab's, by a little).
pub const AFTER_RESET: Duration = Duration::from_secs(2);

/// The view of `limit` for a run whose choice is `choice`.
pub fn view(limit: &UsageLimit, choice: Option<&AutoResume>) -> LimitView {
    let resets_at = limit.resets_at.and_then(rfc3339);
    let resume_at = match (choice, limit.resets_at) {
        (Some(c), Some(t)) if c.on => rfc3339(t + AFTER_RESET.as_secs() as i64),
        _ => None,
    };
    LimitView { resets_at, text: limit.text.clone(), resume_at }
}

/// Unix seconds as RFC 3339 UTC (None: out of range).
fn rfc3339(secs: i64) -> Option<String> {
    let t = UNIX_EPOCH.checked_add(Duration::from_secs(u64::try_from(secs).ok()?))?;
    Some(humantime::format_rfc3339_seconds(t).to_string())
}

/// How long from `now` until a run that hit `limit` goes on by itself, if it does.
pub fn wait(limit: &UsageLimit, choice: Option<&AutoResume>, now: SystemTime) -> Option<Duration> {
    choice.filter(|c| c.on)?;
    let at = UNIX_EPOCH.checked_add(Duration::from_secs(u64::try_from(limit.resets_at?).ok()?))? + AFTER_RESET;
    Some(at.duration_since(now).unwrap_or_default())
}

/// The waits for runs' limits to reset ([`Runs::spawn_limit_wait`]): the limit each
/// waits for, and the wait.
pub(in crate::runs) type LimitWaits =
    std::sync::Mutex<std::collections::BTreeMap<RunId, (UsageLimit, tokio::task::JoinHandle<()>)>>;

impl Runs {
    /// `PUT /runs/{id}/auto-resume` `{"on", "prompt"?}`: whether the run goes on by
    /// itself once a usage limit resets, and with what message.
    pub async fn set_auto_resume(
        self: &Arc<Self>,
        run: &Arc<Run>,
        on: bool,
        prompt: Option<String>,
    ) -> Result<RunBody, RunError> {
        let prompt = match prompt {
            Some(p) => crate::runs::answer::input::chat_text(&p).map_err(|e| RunError::text(e, "prompt"))?,
            None => run.record().resume_after_limit.map_or_else(|| self.limit_prompt(), |c| c.prompt),
        };
        let rec = {
            let mut rec = run.record.lock().unwrap();
            rec.resume_after_limit = Some(AutoResume { on, prompt });
            rec.clone()
        };
        self.registry.put(&rec).map_err(|e| RunError::Internal(format!("recording the run: {e}")))?;
        run.view.touch();
        // Its view says so, and a limit already hit is waited for.
        run.update(&self.registry, Read::AsIs, async |_: &mut crate::runs::live::tailer::Tail| ()).await;
        // A wait for a limit already hit starts again, with the new choice.
        if let Some((_, h)) = self.turns.limit_waits.lock().unwrap().remove(&run.id) {
            h.abort();
        }
        run.wake();
        Ok(self.body_of(run))
    }

    /// Wait for the limit `run`'s agent hit to reset, if the run goes on by itself
    /// then; one wait per run at a time (a newer limit or a changed choice starts it
    /// again).
    pub(in crate::runs) fn spawn_limit_wait(self: &Arc<Self>, run: &Arc<Run>, limit: UsageLimit) {
        let choice = run.record().resume_after_limit;
        let Some(delay) = wait(&limit, choice.as_ref(), SystemTime::now()) else { return };
        let mut waits = self.turns.limit_waits.lock().unwrap();
        if waits.get(&run.id).is_some_and(|(l, h)| *l == limit && !h.is_finished()) {
            return;
        }
        if let Some((_, h)) = waits.remove(&run.id) {
            h.abort();
        }
        let (runs, r, waited) = (self.clone(), run.clone(), limit.clone());
        tracing::info!(run = %run.id, resets_at = ?limit.resets_at, "the run goes on by itself when its usage limit resets");
        let handle = tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            runs.go_on_after_limit(&r, &waited).await;
        });
        waits.insert(run.id.clone(), (limit, handle));
    }

    /// The limit reset: the run goes on with its message, if it still waits on that
    /// limit and is still to go on.
    async fn go_on_after_limit(self: &Arc<Self>, run: &Arc<Run>, limit: &UsageLimit) {
        let still = run.tail.lock().await.usage_limit() == Some(limit);
        let rec = run.record();
        let Some(choice) = rec.resume_after_limit.filter(|c| c.on) else { return };
        if !still {
            return;
        }
        let result = if rec.status == Status::Active {
            self.send_message(run, &choice.prompt).await
        } else {
            self.resume(run, Some(choice.prompt.clone())).await.map(|_| ())
        };
        match result {
            Ok(()) => tracing::info!(run = %run.id, "the usage limit reset: the run goes on"),
            Err(e) => {
                tracing::warn!(run = %run.id, error = %e, "the usage limit reset, but the run could not go on");
                self.record_error(run, &format!("the usage limit reset, but the run could not go on: {e}"));
            }
        }
    }
}

impl Core {
    /// A new run's choice: the request's, else lab.toml's `[runs]`.
    pub(in crate::runs) fn auto_resume_for(&self, requested: Option<bool>) -> AutoResume {
        AutoResume {
            on: requested.or(self.config.runs.resume_after_limit).unwrap_or(false),
            prompt: self.limit_prompt(),
        }
    }

    fn limit_prompt(&self) -> String {
        self.config
            .runs
            .resume_after_limit_prompt
            .clone()
            .unwrap_or_else(|| crate::store::config::DEFAULT_LIMIT_PROMPT.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(resets_at: Option<i64>) -> UsageLimit {
        UsageLimit { resets_at, text: "You've hit your session limit".into() }
    }

    #[test]
    fn a_run_goes_on_after_the_reset_only_when_asked_and_a_reset_is_known() {
        let on = AutoResume { on: true, prompt: "Go on.".into() };
        let off = AutoResume { on: false, prompt: "Go on.".into() };
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        assert_eq!(wait(&limit(Some(1_010)), Some(&on), now), Some(Duration::from_secs(12)));
        assert_eq!(wait(&limit(Some(900)), Some(&on), now), Some(Duration::ZERO), "reset already: at once");
        assert_eq!(wait(&limit(Some(1_010)), Some(&off), now), None);
        assert_eq!(wait(&limit(Some(1_010)), None, now), None, "a run made before the choice existed: off");
        assert_eq!(wait(&limit(None), Some(&on), now), None, "no reset time: lab does not guess");
        assert_eq!(wait(&limit(Some(-5)), Some(&on), now), None);
    }

    #[test]
    fn the_view_says_when_it_resets_and_when_lab_goes_on() {
        let on = AutoResume { on: true, prompt: "Go on.".into() };
        let v = view(&limit(Some(1_796_426_456)), Some(&on));
        assert_eq!(v.resets_at.as_deref(), Some("2026-12-04T23:20:56Z"));
        assert_eq!(v.resume_at.as_deref(), Some("2026-12-04T23:20:58Z"));
        let v = view(&limit(None), Some(&on));
        assert_eq!((v.resets_at, v.resume_at), (None, None));
        assert_eq!(view(&limit(Some(1_796_426_456)), None).resume_at, None);
    }
}
