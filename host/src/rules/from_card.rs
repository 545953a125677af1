//! "Always allow this…" on a permission card: the narrowest rule that matches the
//! prompt — its provider, its tool, its exact command, path or URL as the pattern, and
//! the scope the operator picked (this repository, this machine, everywhere) — kept,
//! then applied to the prompt at once through the same guarded path as every rule.

use super::engine::rule_answer;
use super::rule::{Action, Match, Rule};
use super::Rules;
use crate::agents::model::{Dialog, DialogBody};
use crate::runs::{AnswerProgress, AnsweredBy, Run, RunError, Runs};
use std::sync::Arc;

/// Where the rule holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The run's repository (its worktree's, else its folder).
    Repository,
    /// The run's machine.
    Machine,
    Everywhere,
}

/// Why no rule was made.
#[derive(Debug)]
pub enum CardError {
    Run(RunError),
    /// The prompt is not one a rule can name (no subject, no option that allows it
    /// once, not a permission).
    Unfit(String),
    Book(super::book::BookError),
}

/// The narrowest allow rule for a prompt of `tool` about `subject`, in `scope`.
pub fn narrowest(scope: Scope, provider: &str, tool: &str, subject: &str, repo: &str, machine: &str) -> Rule {
    let shown: String = subject.chars().take(60).collect();
    let cut = if shown.len() < subject.len() { "…" } else { "" };
    let (workdir, host, where_) = match scope {
        Scope::Repository => (Some(repo.to_string()), None, format!(" in {repo}")),
        Scope::Machine => (None, Some(machine.to_string()), format!(" on {machine}")),
        Scope::Everywhere => (None, None, String::new()),
    };
    Rule {
        id: String::new(),
        name: format!("Allow {tool} {shown}{cut}{where_}").chars().take(super::rule::NAME_MAX).collect(),
        action: Action::Allow,
        message: None,
        matches: Match {
            provider: Some(provider.to_string()),
            tool: Some(tool.to_string()),
            kinds: None,
            pattern: Some(subject.to_string()),
            workdir,
            host,
        },
        dry_run: false,
        shared: false,
    }
}

/// Make the rule for the prompt `tool_id` of `run` in `scope`, keep it, and answer the
/// prompt with it.
pub async fn allow_always(
    runs: &Arc<Runs>,
    rules: &Rules,
    run: &Arc<Run>,
    tool_id: &str,
    scope: Scope,
) -> Result<(Rule, AnswerProgress), CardError> {
    let dialog: Dialog = match run.snapshot().derived.pending_dialog.map(|p| p.dialog) {
        None => return Err(CardError::Run(RunError::NoDialog)),
        Some(d) if d.id != tool_id => return Err(CardError::Run(RunError::DialogChanged { pending: d.id })),
        Some(d) => d,
    };
    let DialogBody::Permission { tool, .. } = &dialog.body else {
        return Err(CardError::Unfit("only a permission prompt makes an allow rule".into()));
    };
    let facts = runs.prompt_facts(run, &dialog).await.ok_or_else(|| {
        CardError::Unfit("its provider does not say what the prompt is about (it predates answer rules)".into())
    })?;
    let subject = facts
        .subject
        .clone()
        .ok_or_else(|| CardError::Unfit("the prompt names no command, path or URL a rule could match".into()))?;
    let rec = run.record();
    let repo = rec.worktree.as_ref().map_or(rec.workdir.clone(), |w| w.repo.clone());
    let machine = rec.host.clone().unwrap_or_else(|| "local".into());
    let rule = narrowest(scope, &rec.provider, tool, &subject, &repo, &machine);
    let answer = rule_answer(&rule, &dialog, &facts).map_err(CardError::Unfit)?;
    let kept = rules.book.add(rule).map_err(CardError::Book)?;
    let by = AnsweredBy { rule: kept.id.clone(), name: kept.name.clone() };
    let progress = runs.answer_by_rule(run, tool_id, answer, by).await.map_err(CardError::Run)?;
    rules.count(&kept.id);
    Ok((kept, progress))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::evaluate::{evaluate, Facts};

    #[test]
    fn the_rule_from_a_card_matches_its_prompt_and_no_wider_than_asked() {
        let r = narrowest(Scope::Repository, "agent-a", "Shell", "cargo test", "/home/op/repo", "local");
        assert!(r.check().is_ok(), "{r:?}");
        assert_eq!(r.name, "Allow Shell cargo test in /home/op/repo");
        let facts = |subject, workdir, host| Facts {
            provider: "agent-a",
            kind: "permission",
            tool: "Shell",
            subject: Some(subject),
            workdirs: vec![workdir],
            host,
        };
        let rules = vec![Rule { id: "r".into(), ..r }];
        let answers = |f: &Facts<'_>| evaluate(&rules, f).rule.is_some();
        assert!(answers(&facts("cargo test", "/home/op/repo", None)));
        assert!(answers(&facts("cargo test --all", "/home/op/repo/sub", None)), "the same command, more arguments");
        assert!(!answers(&facts("cargo test; rm -rf ~", "/home/op/repo", None)), "never a chained one");
        assert!(!answers(&facts("cargo test", "/home/op/other", None)), "another repository");
        let machine = narrowest(Scope::Machine, "agent-b", "Shell", "ls", "/r", "m1");
        assert_eq!((machine.matches.host.as_deref(), machine.matches.workdir.as_deref()), (Some("m1"), None));
        let anywhere = narrowest(Scope::Everywhere, "agent-b", "Shell", &"x".repeat(200), "/r", "m1");
        assert_eq!((&anywhere.matches.host, &anywhere.matches.workdir), (&None, &None));
        assert!(anywhere.name.ends_with('…') && anywhere.check().is_ok());
    }
}
