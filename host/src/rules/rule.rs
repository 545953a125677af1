//! One answer rule as the operator writes it (`rules.toml`, `POST /rules`), and the
//! checks it passes before lab keeps it.

use serde::{Deserialize, Serialize};

/// What a rule says of the prompts it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// lab answers with the option that lets this one call go ahead.
    Allow,
    /// lab answers with the option that refuses it (with the rule's message, where the
    /// prompt takes text).
    Deny,
    /// The operator answers (what every prompt no rule matches gets): a narrower `ask`
    /// keeps an `allow` from reaching some prompts.
    Ask,
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Deny => "deny",
            Action::Ask => "ask",
        }
    }
}

/// The prompt kinds a rule may name; without `kinds`, a rule matches permission
/// prompts only.
pub const KINDS: [&str; 4] = ["permission", "question", "plan", "generic"];

/// Which prompts a rule is for: every field given must match (absent: any).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Match {
    /// The run's provider (`claude-code`, `codex`, an ACP agent's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The tool as the provider names it (`Bash`, `Edit`, `exec_command`, an ACP
    /// tool kind such as `execute`); compared without regard to ASCII case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Prompt kinds (`permission` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kinds: Option<Vec<String>>,
    /// The command, path or URL the prompt shows: a prefix ending at a word or path
    /// boundary, or a glob (`*` any text, `?` one character) when it has `*` or `?`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// The run's folder or repository is this folder or inside it (an absolute path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
    /// The machine (`lab hosts` name) the run is on; `local` for this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// An answer rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// lab's name for it (given by lab; `shared-<n>` for lab.toml's).
    #[serde(default)]
    pub id: String,
    pub name: String,
    pub action: Action,
    /// What the agent is told when a `deny` refuses its call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, rename = "match")]
    pub matches: Match,
    /// Shows what it would have answered, on the card, and answers nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// From lab.toml: read here, changed only there.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
}

/// The longest name, message and pattern (characters).
pub const NAME_MAX: usize = 80;
pub const MESSAGE_MAX: usize = 1000;
pub const PATTERN_MAX: usize = 1000;
/// The most rules lab keeps (each prompt is checked against all of them).
pub const RULES_MAX: usize = 1000;

impl Rule {
    /// Whether lab can keep this rule: a clear error for the first thing wrong.
    pub fn check(&self) -> Result<(), String> {
        let name = self.name.trim();
        if name.is_empty() {
            return Err("name is empty: give the rule a name".into());
        }
        text("name", &self.name, NAME_MAX)?;
        if let Some(m) = &self.message {
            text("message", m, MESSAGE_MAX)?;
            if self.action != Action::Deny {
                return Err("message is what a deny tells the agent: only a deny rule has one".into());
            }
        }
        let m = &self.matches;
        for (field, v) in [("provider", &m.provider), ("tool", &m.tool), ("host", &m.host)] {
            if let Some(v) = v {
                if v.trim().is_empty() || v.trim() != v {
                    return Err(format!("match.{field} is empty or has spaces around it"));
                }
                text(&format!("match.{field}"), v, NAME_MAX)?;
            }
        }
        if let Some(kinds) = &m.kinds {
            if kinds.is_empty() {
                return Err("match.kinds is empty (leave it out for permission prompts)".into());
            }
            if let Some(k) = kinds.iter().find(|k| !KINDS.contains(&k.as_str())) {
                return Err(format!("match.kinds: unknown kind {k:?} (known: {})", KINDS.join(", ")));
            }
        }
        if let Some(p) = &m.pattern {
            if p.is_empty() {
                return Err("match.pattern is empty (leave it out to match any)".into());
            }
            text("match.pattern", p, PATTERN_MAX)?;
        }
        if let Some(w) = &m.workdir {
            let path = std::path::Path::new(w);
            if !path.is_absolute() || path.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
                return Err(format!("match.workdir {w:?} is not an absolute path without `..`"));
            }
            text("match.workdir", w, PATTERN_MAX)?;
        }
        // An allow for every call of every tool is not a rule but lab's prompts turned
        // off: it has to say which tool or which command, path or URL.
        if self.action == Action::Allow && m.tool.is_none() && m.pattern.is_none() {
            return Err("an allow rule names a tool or a pattern (match.tool, match.pattern)".into());
        }
        Ok(())
    }

    /// The kinds it matches.
    pub fn kinds(&self) -> Vec<&str> {
        match &self.matches.kinds {
            Some(k) => k.iter().map(String::as_str).collect(),
            None => vec!["permission"],
        }
    }
}

fn text(field: &str, v: &str, max: usize) -> Result<(), String> {
    if v.chars().count() > max {
        return Err(format!("{field} is longer than {max} characters"));
    }
    if v.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err(format!("{field} has a control character"));
    }
    if field != "message" && field != "match.pattern" && v.contains('\n') {
        return Err(format!("{field} has a line break"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn rule(action: Action, m: Match) -> Rule {
        Rule { id: "r1".into(), name: "r".into(), action, message: None, matches: m, dry_run: false, shared: false }
    }

    #[test]
    fn a_rule_is_checked_before_lab_keeps_it() {
        let tool = |t: &str| Match { tool: Some(t.into()), ..Default::default() };
        assert!(rule(Action::Allow, tool("Shell")).check().is_ok());
        assert!(rule(Action::Allow, Match::default()).check().unwrap_err().contains("names a tool or a pattern"));
        assert!(rule(Action::Deny, Match::default()).check().is_ok(), "a deny of everything is the operator's call");
        let mut r = rule(Action::Allow, tool("Shell"));
        r.message = Some("no".into());
        assert!(r.check().unwrap_err().contains("only a deny"));
        r.name = " ".into();
        assert!(r.check().unwrap_err().contains("name is empty"));
        let m = Match { kinds: Some(vec!["trust".into()]), tool: Some("x".into()), ..Default::default() };
        assert!(rule(Action::Allow, m).check().unwrap_err().contains("unknown kind"));
        let m = Match { workdir: Some("repo/src".into()), tool: Some("x".into()), ..Default::default() };
        assert!(rule(Action::Allow, m).check().unwrap_err().contains("absolute"));
        let m = Match { workdir: Some("/repo/../etc".into()), tool: Some("x".into()), ..Default::default() };
        assert!(rule(Action::Allow, m).check().unwrap_err().contains("absolute"));
        let m = Match { tool: Some(" Shell".into()), ..Default::default() };
        assert!(rule(Action::Allow, m).check().unwrap_err().contains("spaces"));
        let m = Match { pattern: Some("x".repeat(PATTERN_MAX + 1)), ..Default::default() };
        assert!(rule(Action::Allow, m).check().unwrap_err().contains("longer"));
        let mut r = rule(Action::Deny, tool("Shell"));
        r.name = "a\u{1b}[31m".into();
        assert!(r.check().unwrap_err().contains("control"));
    }

    #[test]
    fn a_rule_reads_and_writes_as_the_api_shows_it() {
        let r: Rule = serde_json::from_str(
            r#"{"name": "tests", "action": "allow", "match": {"tool": "Shell", "pattern": "cargo test"}, "dry_run": false}"#,
        )
        .unwrap();
        assert_eq!(r.kinds(), ["permission"]);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["match"], serde_json::json!({"tool": "Shell", "pattern": "cargo test"}));
        assert!(serde_json::from_str::<Rule>(r#"{"name": "x", "action": "always"}"#).is_err());
        assert!(serde_json::from_str::<Rule>(r#"{"name": "x", "action": "ask", "match": {"regex": "."}}"#).is_err());
    }
}
