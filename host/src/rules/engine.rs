//! Applying the rules: every change of every run's view is looked at, in order; a
//! prompt new to the view that a live rule answers is answered through the operator's
//! own guarded path ([`crate::runs::Core::answer_by_rule`]), and the change goes on to
//! the notifications marked with the rule, so nobody is called for it. Every other
//! change goes on as it came.

use super::evaluate::{evaluate, Facts};
use super::rule::{Action, Rule};
use super::Rules;
use crate::agents::model::{Answer, Dialog, DialogBody, PromptFacts};
use crate::runs::AnsweredBy;
use crate::runs::{Change, Run, Runs, WouldAnswer};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;

/// How long the provider may take to say a prompt's facts, and the answer to be
/// accepted; past that the operator answers it (and is called as usual).
pub const ANSWER_WITHIN: Duration = Duration::from_secs(5);
const NO_FACTS: &str = "its provider does not say which option allows or refuses a call (it predates answer rules)";
/// Changes the notifications may fall behind by.
const CAPACITY: usize = 1024;

/// What a rule did with a prompt: for the audit log.
#[derive(Debug, Clone)]
pub struct Applied {
    pub run_id: String,
    pub tool_id: String,
    pub rule: Rule,
    pub tool: String,
    pub subject: Option<String>,
    /// `Err`: why the answer was not given (the prompt then waits for the operator).
    pub outcome: Result<(), String>,
    /// The rule is a dry run: nothing was answered; `outcome` says whether it would
    /// have been.
    pub dry_run: bool,
}

/// Called for each prompt a rule answered or tried to.
pub type OnApplied = Arc<dyn Fn(&Applied) + Send + Sync>;

/// Start applying `rules` to every run of `runs`; the changes, marked where a rule
/// answered, come out of the returned sender (subscribe before the first prompt).
pub fn spawn(runs: Arc<Runs>, rules: Arc<Rules>, on_applied: OnApplied) -> broadcast::Sender<Change> {
    let (tx, _) = broadcast::channel(CAPACITY);
    let out = tx.clone();
    let mut changes = runs.changes();
    tokio::spawn(async move {
        loop {
            match changes.recv().await {
                Ok(change) => {
                    let change = consider(&runs, &rules, &on_applied, change).await;
                    let _ = out.send(change);
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(
                        missed = n,
                        "the answer rules fell behind the runs: some prompts wait for the operator"
                    )
                }
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
    });
    tx
}

/// The prompt `change` brings, if it is new to the view and lab could answer it.
fn new_prompt(change: &Change) -> Option<&Dialog> {
    let d = &change.after.pending_dialog.as_ref()?.dialog;
    let before = change.before.as_ref().and_then(|b| b.pending_dialog.as_ref()).map(|p| &p.dialog.id);
    (d.answerable && before != Some(&d.id)).then_some(d)
}

async fn consider(runs: &Arc<Runs>, rules: &Rules, on_applied: &OnApplied, mut change: Change) -> Change {
    let Some(dialog) = new_prompt(&change) else { return change };
    let set = rules.book.rules();
    if set.is_empty() {
        return change;
    }
    let Ok(run) = runs.get(change.run_id.as_str()) else { return change };
    let rec = run.record();
    if rec.rules_off {
        return change;
    }
    let facts = match tokio::time::timeout(ANSWER_WITHIN, runs.prompt_facts(&run, dialog)).await {
        Ok(f) => f,
        Err(_) => {
            tracing::warn!(run = %run.id, "the provider did not say the prompt's facts in time: the operator answers it");
            None
        }
    };
    let pf = facts.clone().unwrap_or_default();
    let tool = match &dialog.body {
        DialogBody::Permission { tool, .. } => tool.clone(),
        _ => dialog.tool_name.clone(),
    };
    // The machine's name is a fact a rule may match, not a branch on where it is.
    let machine = rec.host.clone();
    let mut workdirs = vec![rec.workdir.as_str()];
    if let Some(w) = &rec.worktree {
        workdirs.extend([w.repo.as_str(), w.path.as_str()]);
    }
    let f = Facts {
        provider: &rec.provider,
        kind: dialog.kind(),
        tool: &tool,
        subject: pf.subject.as_deref(),
        workdirs,
        host: machine.as_deref(),
    };
    let verdict = evaluate(&set, &f);
    let applied = |rule: &Rule, outcome| Applied {
        run_id: run.id.to_string(),
        tool_id: dialog.id.clone(),
        rule: rule.clone(),
        tool: tool.clone(),
        subject: pf.subject.clone(),
        outcome,
        dry_run: rule.dry_run,
    };
    if let Some(would) = verdict.would {
        // Answers nothing: said in the audit log, and the operator answers.
        let outcome = match &facts {
            Some(pf) => rule_answer(would, dialog, pf).map(|_| ()),
            None => Err(NO_FACTS.into()),
        };
        if outcome.is_ok() {
            run.note_would_answer(WouldAnswer {
                tool_id: dialog.id.clone(),
                rule: would.id.clone(),
                name: would.name.clone(),
                action: would.action.name(),
            });
        }
        on_applied(&applied(would, outcome));
    }
    let Some(rule) = verdict.rule else { return change };
    let mut applied = applied(rule, Ok(()));
    let answer = match facts {
        Some(pf) => rule_answer(rule, dialog, &pf),
        None => Err(NO_FACTS.into()),
    };
    let by = AnsweredBy { rule: rule.id.clone(), name: rule.name.clone() };
    applied.outcome = match answer {
        Ok(answer) => answer_now(runs, &run, &dialog.id, answer, by.clone()).await,
        Err(e) => Err(e),
    };
    match &applied.outcome {
        Ok(()) => {
            rules.count(&rule.id);
            tracing::info!(run = %run.id, rule = %rule.id, action = rule.action.name(), "a prompt answered by a rule");
            change.answered_by = Some(by);
        }
        Err(e) => {
            tracing::warn!(run = %run.id, rule = %rule.id, error = %e, "a rule matched a prompt it could not answer")
        }
    }
    on_applied(&applied);
    change
}

async fn answer_now(
    runs: &Arc<Runs>,
    run: &Arc<Run>,
    tool_id: &str,
    answer: Answer,
    by: AnsweredBy,
) -> Result<(), String> {
    match tokio::time::timeout(ANSWER_WITHIN, runs.answer_by_rule(run, tool_id, answer, by)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("the answer was not accepted within {} s", ANSWER_WITHIN.as_secs())),
    }
}

/// The answer `rule` gives `dialog`: the option that lets this one call go ahead, or
/// the one that refuses it (with the rule's message where that option takes text).
pub fn rule_answer(rule: &Rule, dialog: &Dialog, pf: &PromptFacts) -> Result<Answer, String> {
    let in_range = |i: u32| (i as usize) < dialog.options().len();
    match rule.action {
        Action::Allow => match pf.allow_once.filter(|i| in_range(*i)) {
            Some(i) => Ok(Answer::Option(i)),
            None => Err("the prompt has no option that allows only this call".into()),
        },
        Action::Deny => {
            let Some(i) = pf.refuse.filter(|i| in_range(*i)) else {
                return Err("the prompt has no option that refuses the call".into());
            };
            let feedback = match &dialog.body {
                DialogBody::Permission { feedback_option, .. } | DialogBody::Plan { feedback_option, .. } => {
                    *feedback_option
                }
                _ => None,
            };
            match (&rule.message, feedback == Some(i)) {
                (Some(text), true) if !text.trim().is_empty() => Ok(Answer::Feedback { option: i, text: text.clone() }),
                _ => Ok(Answer::Option(i)),
            }
        }
        Action::Ask => Err("an ask rule answers nothing".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::model::DialogOption;
    use crate::rules::rule::Match;

    fn dialog(feedback: Option<u32>) -> Dialog {
        let opt = |l: &str| DialogOption { label: l.into(), description: String::new() };
        Dialog {
            id: "perm-1".into(),
            call_id: None,
            tool_name: "Shell".into(),
            body: DialogBody::Permission {
                tool: "Shell".into(),
                summary: "ls".into(),
                reason: None,
                options: vec![opt("Yes"), opt("Yes, always"), opt("No")],
                feedback_option: feedback,
            },
            answerable: true,
            deep_link: None,
        }
    }
    fn rule(action: Action, message: Option<&str>) -> Rule {
        Rule {
            id: "r-1".into(),
            name: "r".into(),
            action,
            message: message.map(str::to_string),
            matches: Match::default(),
            dry_run: false,
            shared: false,
        }
    }

    #[test]
    fn a_rule_answers_with_the_option_its_provider_names() {
        let pf = PromptFacts { subject: None, allow_once: Some(0), refuse: Some(2) };
        assert_eq!(rule_answer(&rule(Action::Allow, None), &dialog(Some(2)), &pf), Ok(Answer::Option(0)));
        assert_eq!(
            rule_answer(&rule(Action::Deny, Some("use make")), &dialog(Some(2)), &pf),
            Ok(Answer::Feedback { option: 2, text: "use make".into() })
        );
        assert_eq!(rule_answer(&rule(Action::Deny, Some("use make")), &dialog(None), &pf), Ok(Answer::Option(2)));
        assert_eq!(rule_answer(&rule(Action::Deny, None), &dialog(Some(2)), &pf), Ok(Answer::Option(2)));
        let none = PromptFacts::default();
        assert!(rule_answer(&rule(Action::Allow, None), &dialog(None), &none).is_err());
        assert!(rule_answer(&rule(Action::Deny, None), &dialog(None), &none).is_err());
        let out_of_range = PromptFacts { subject: None, allow_once: Some(7), refuse: None };
        assert!(rule_answer(&rule(Action::Allow, None), &dialog(None), &out_of_range).is_err());
    }
}
