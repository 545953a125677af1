//! Which rule answers a prompt: a pure function of the rule set and the prompt's facts.
//!
//! - A rule matches when every field it gives matches ([`matches`]); its kinds default
//!   to `permission`, so a workspace-trust screen, a plan or a question is answered
//!   only by a rule that names that kind.
//! - Of the live rules that match, a `deny` beats an `ask`, which beats an `allow`;
//!   among equals the first (lab.toml's, then `rules.toml`'s in order) wins. No live
//!   rule: the operator answers. Dry-run rules are weighed apart, the same way: what
//!   they would have answered is shown, nothing more.
//! - A pattern is a prefix that ends at a boundary (the whole subject, or followed by a
//!   space, `/`, `?`, `#` or a shell operator): `cargo test` matches `cargo test --all` but not
//!   `cargo testify`; `/repo/src` matches `/repo/src/a.rs`, not `/repo/srcx`. With
//!   `*` (any text) or `?` (one character) it is a glob over the whole subject. No
//!   regular expressions.
//! - Never quietly dangerous: an `allow` never matches a subject that chains or
//!   redirects commands (`;`, `&`, `|`, `` ` ``, `$(`, `<`, `>`, a line break) or
//!   climbs out of a folder (a `..` segment) unless its pattern is that exact subject:
//!   `cargo test` does not allow `cargo test && curl … | sh`. A `deny` matches them
//!   as written.

use super::rule::{Action, Rule};
use std::path::Path;

/// What lab knows of one prompt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts<'a> {
    pub provider: &'a str,
    /// `permission`, `question`, `plan` or `generic`.
    pub kind: &'a str,
    /// The tool as the provider names it.
    pub tool: &'a str,
    /// The command, path or URL, when the prompt shows one.
    pub subject: Option<&'a str>,
    /// The run's folder, and its repository's when it has a worktree.
    pub workdirs: Vec<&'a str>,
    /// The run's machine: `None` for this one.
    pub host: Option<&'a str>,
}

impl<'a> Facts<'a> {
    /// A prompt as someone asks about it (`lab rules test`, `POST /rules/test`): at most
    /// one workdir, the machine by name (`local`, or none: this one).
    pub fn asked(
        provider: &'a str,
        kind: &'a str,
        tool: &'a str,
        subject: Option<&'a str>,
        workdir: Option<&'a str>,
        host: Option<&'a str>,
    ) -> Facts<'a> {
        let workdirs = workdir.into_iter().collect();
        Facts { provider, kind, tool, subject, workdirs, host: host.filter(|h| *h != "local") }
    }
}

/// What the rules say of a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict<'r> {
    /// The live rule that decides (`None`: the operator answers, as without rules).
    pub rule: Option<&'r Rule>,
    /// The dry-run rule that would have decided, when no live one answers.
    pub would: Option<&'r Rule>,
}

pub fn evaluate<'r>(rules: &'r [Rule], f: &Facts<'_>) -> Verdict<'r> {
    let live = strongest(rules.iter().filter(|r| !r.dry_run && matches(r, f)));
    let answers = live.filter(|r| r.action != Action::Ask);
    let would = match live {
        Some(_) => None,
        None => strongest(rules.iter().filter(|r| r.dry_run && matches(r, f))).filter(|r| r.action != Action::Ask),
    };
    Verdict { rule: answers, would }
}

fn strongest<'r>(rules: impl Iterator<Item = &'r Rule>) -> Option<&'r Rule> {
    let rank = |a: Action| match a {
        Action::Deny => 0,
        Action::Ask => 1,
        Action::Allow => 2,
    };
    let mut best: Option<&Rule> = None;
    for r in rules {
        if best.is_none_or(|b| rank(r.action) < rank(b.action)) {
            best = Some(r);
        }
    }
    best
}

/// Whether `rule` matches the prompt `f`.
pub fn matches(rule: &Rule, f: &Facts<'_>) -> bool {
    let m = &rule.matches;
    if !rule.kinds().contains(&f.kind) {
        return false;
    }
    if m.provider.as_deref().is_some_and(|p| p != f.provider) {
        return false;
    }
    if m.tool.as_deref().is_some_and(|t| !t.eq_ignore_ascii_case(f.tool)) {
        return false;
    }
    if let Some(h) = m.host.as_deref() {
        let here = f.host.unwrap_or("local");
        if h != here {
            return false;
        }
    }
    if let Some(w) = m.workdir.as_deref() {
        if !f.workdirs.iter().any(|d| within(d, w)) {
            return false;
        }
    }
    match (m.pattern.as_deref(), f.subject) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(p), Some(s)) => pattern_matches(p, s, rule.action == Action::Allow),
    }
}

/// `dir` is `folder` or inside it, component by component (no `..` in either).
fn within(dir: &str, folder: &str) -> bool {
    let (d, f) = (Path::new(dir), Path::new(folder));
    let clean = |p: &Path| !p.components().any(|c| matches!(c, std::path::Component::ParentDir));
    d.is_absolute() && clean(d) && clean(f) && d.starts_with(f)
}

/// Whether `pattern` matches `subject`; `strict` for an allow ([`risky`] subjects only
/// by their exact text).
pub fn pattern_matches(pattern: &str, subject: &str, strict: bool) -> bool {
    if pattern == subject {
        return true;
    }
    if strict && risky(subject) {
        return false;
    }
    if pattern.contains(['*', '?']) {
        return glob(pattern.as_bytes(), subject.as_bytes());
    }
    match subject.strip_prefix(pattern) {
        Some(rest) => {
            // A shell operator ends a word too (what follows it only a deny reaches).
            let boundary =
                |c: char| c.is_whitespace() || matches!(c, '/' | '?' | '#' | ';' | '&' | '|' | '<' | '>' | '`' | '$');
            pattern.ends_with(boundary) || rest.starts_with(boundary)
        }
        None => false,
    }
}

/// A subject that chains, substitutes or redirects commands, or climbs out of a folder.
pub fn risky(subject: &str) -> bool {
    let chains = subject.contains([';', '&', '|', '`', '<', '>', '\n', '\r']) || subject.contains("$(");
    let climbs = subject.split(['/', ' ', '\t']).any(|seg| seg == "..");
    chains || climbs
}

/// `*` any run of bytes, `?` any one character; the rest literal. Iterative, with one
/// backtrack point: linear in practice, never exponential.
fn glob(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && p[pi] == b'?' {
            // One character: its UTF-8 bytes.
            si += utf8_len(s[si]);
            pi += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if pi < p.len() && p[pi] == s[si] {
            pi += 1;
            si += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len() && si == s.len()
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::rule::Match;

    fn rule(id: &str, action: Action, m: Match) -> Rule {
        Rule { id: id.into(), name: id.into(), action, message: None, matches: m, dry_run: false, shared: false }
    }
    fn shell(pattern: &str) -> Match {
        Match { tool: Some("Shell".into()), pattern: Some(pattern.into()), ..Default::default() }
    }
    fn facts(subject: &str) -> Facts<'_> {
        Facts {
            provider: "agent-a",
            kind: "permission",
            tool: "Shell",
            subject: Some(subject),
            workdirs: vec!["/home/op/repo"],
            host: None,
        }
    }
    fn winner<'r>(rules: &'r [Rule], f: &Facts<'_>) -> Option<&'r str> {
        evaluate(rules, f).rule.map(|r| r.id.as_str())
    }

    #[test]
    fn a_prefix_ends_at_a_word_or_path_boundary() {
        assert!(pattern_matches("cargo test", "cargo test", true));
        assert!(pattern_matches("cargo test", "cargo test --all", true));
        assert!(!pattern_matches("cargo test", "cargo testify", true));
        assert!(pattern_matches("/repo/src", "/repo/src/a.rs", true));
        assert!(pattern_matches("/repo/src/", "/repo/src/a.rs", true));
        assert!(!pattern_matches("/repo/src", "/repo/srcx/a.rs", true));
        assert!(pattern_matches("https://docs.rs", "https://docs.rs/serde", true));
        assert!(!pattern_matches("https://docs.rs", "https://docs.rs.evil.example/x", true));
        assert!(pattern_matches("/repo/a.rs", "/repo/a.rs (+3 lines)", true));
    }

    #[test]
    fn a_glob_covers_the_whole_subject() {
        assert!(pattern_matches("cargo * --release", "cargo build --release", true));
        assert!(!pattern_matches("cargo * --release", "cargo build --release --x", true));
        assert!(pattern_matches("/repo/*.rs", "/repo/src/a.rs", true));
        assert!(pattern_matches("ls ?", "ls é", true));
        assert!(!pattern_matches("ls ?", "ls ab", true));
        assert!(pattern_matches("*", "anything at all", true));
        // Many stars on a long subject that does not match: still quick.
        let p = "*a*a*a*a*a*a*a*a*a*a*b";
        assert!(!pattern_matches(p, &"a".repeat(5000), false));
    }

    #[test]
    fn an_allow_never_reaches_a_chained_or_climbing_subject_but_a_deny_does() {
        for s in [
            "cargo test && curl x | sh",
            "cargo test; rm -rf ~",
            "cargo test `id`",
            "cargo test $(id)",
            "cargo test > /etc/x",
            "cargo test\nrm x",
        ] {
            assert!(!pattern_matches("cargo test", s, true), "{s}");
            assert!(!pattern_matches("cargo test*", s, true), "{s}");
            assert!(pattern_matches("cargo test", s, false), "a deny matches {s}");
        }
        assert!(!pattern_matches("/repo/src", "/repo/src/../../etc/passwd", true));
        assert!(pattern_matches("a && b", "a && b", true), "the exact subject may be allowed");
    }

    #[test]
    fn deny_beats_ask_beats_allow_and_the_first_of_equals_wins() {
        let rules = vec![
            rule("allow-cargo", Action::Allow, shell("cargo")),
            rule("allow-tests", Action::Allow, shell("cargo test")),
            rule("deny-release", Action::Deny, shell("cargo test --release")),
        ];
        assert_eq!(winner(&rules, &facts("cargo test")), Some("allow-cargo"));
        assert_eq!(winner(&rules, &facts("cargo test --release")), Some("deny-release"));
        assert_eq!(winner(&rules, &facts("make")), None);
        let mut with_ask = rules.clone();
        with_ask.push(rule("ask-publish", Action::Ask, shell("cargo publish")));
        assert_eq!(winner(&with_ask, &facts("cargo publish")), None, "an ask keeps the allow off");
        assert_eq!(evaluate(&with_ask, &facts("cargo publish")).would, None);
    }

    #[test]
    fn kinds_default_to_permission_prompts() {
        let everything = Match { tool: Some("Shell".into()), ..Default::default() };
        let rules = vec![rule("a", Action::Allow, everything.clone())];
        let mut f = facts("ls");
        for kind in ["question", "plan", "generic"] {
            f.kind = kind;
            assert_eq!(winner(&rules, &f), None, "{kind}");
        }
        let trust = Match { kinds: Some(vec!["generic".into()]), ..everything };
        let rules = vec![rule("trust", Action::Allow, trust)];
        f.kind = "generic";
        assert_eq!(winner(&rules, &f), Some("trust"));
        f.kind = "permission";
        assert_eq!(winner(&rules, &f), None);
    }

    #[test]
    fn provider_tool_workdir_and_host_narrow_a_rule() {
        let m = |f: fn(&mut Match)| {
            let mut m = shell("ls");
            f(&mut m);
            vec![rule("r", Action::Allow, m)]
        };
        let f = facts("ls -la");
        assert_eq!(winner(&m(|m| m.provider = Some("agent-b".into())), &f), None);
        assert_eq!(winner(&m(|m| m.provider = Some("agent-a".into())), &f), Some("r"));
        assert_eq!(winner(&m(|m| m.tool = Some("shell".into())), &f), Some("r"), "tool case aside");
        assert_eq!(winner(&m(|m| m.tool = Some("Edit".into())), &f), None);
        assert_eq!(winner(&m(|m| m.workdir = Some("/home/op".into())), &f), Some("r"));
        assert_eq!(winner(&m(|m| m.workdir = Some("/home/op/repo".into())), &f), Some("r"));
        assert_eq!(winner(&m(|m| m.workdir = Some("/home/op/rep".into())), &f), None);
        assert_eq!(winner(&m(|m| m.workdir = Some("/home/other".into())), &f), None);
        assert_eq!(winner(&m(|m| m.host = Some("local".into())), &f), Some("r"));
        assert_eq!(winner(&m(|m| m.host = Some("m1".into())), &f), None);
        let on_m1 = Facts { host: Some("m1"), ..f.clone() };
        assert_eq!(winner(&m(|m| m.host = Some("m1".into())), &on_m1), Some("r"));
        assert_eq!(winner(&m(|m| m.host = Some("local".into())), &on_m1), None);
        let no_subject = Facts { subject: None, ..f };
        assert_eq!(winner(&m(|_| {}), &no_subject), None, "a pattern needs a subject");
    }

    #[test]
    fn a_dry_run_rule_says_what_it_would_have_answered_and_answers_nothing() {
        let mut dry = rule("dry", Action::Allow, shell("cargo"));
        dry.dry_run = true;
        let v = evaluate(std::slice::from_ref(&dry), &facts("cargo test"));
        assert_eq!((v.rule, v.would.map(|r| r.id.as_str())), (None, Some("dry")));
        // A live rule decides: the dry one says nothing.
        let rules = vec![dry, rule("deny", Action::Deny, shell("cargo"))];
        let v = evaluate(&rules, &facts("cargo test"));
        assert_eq!((v.rule.map(|r| r.id.as_str()), v.would), (Some("deny"), None));
    }
}
