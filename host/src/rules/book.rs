//! The rule set: the operator's rules in `<home>/rules.toml` (0600, written whole and
//! atomically on each change) and lab.toml's `[[rules]]`, shared and read-only here.
//! One owner: lab serve's [`Book`]; `lab rules` changes it through the API. A change
//! takes effect for the next prompt: the engine reads [`Book::rules`] for each one.

use super::rule::{Rule, RULES_MAX};
use crate::store::fsutil;
use crate::store::paths::Home;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

/// Why the book refused a change.
#[derive(Debug, PartialEq, Eq)]
pub enum BookError {
    /// The rule is not one lab can keep (its check's words).
    Bad(String),
    NotFound,
    /// lab.toml's: changed there, not here.
    Shared,
    /// The file could not be written; nothing changed.
    Io(String),
}

impl std::fmt::Display for BookError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BookError::Bad(e) => write!(f, "{e}"),
            BookError::NotFound => write!(f, "no such rule"),
            BookError::Shared => write!(f, "the rule is lab.toml's: change it there"),
            BookError::Io(e) => write!(f, "the rules could not be saved: {e}"),
        }
    }
}

#[derive(Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    rule: Vec<Rule>,
}

pub struct Book {
    file: PathBuf,
    shared: Vec<Rule>,
    /// The operator's rules, as the file holds them.
    own: Mutex<Vec<Rule>>,
    /// Shared then own: what the engine weighs, swapped whole on each change.
    all: RwLock<Arc<[Rule]>>,
}

impl Book {
    /// The rules of `home`: lab.toml's `[[rules]]` (given, as parsed there) and
    /// `rules.toml`'s. A rule either file has that is not one lab can keep is an error
    /// naming the file and the rule: lab serve does not start on a rule set it cannot
    /// read whole.
    pub fn open(home: &Home, shared: &[toml::Value]) -> Result<Book, String> {
        let config = home.config_file();
        let mut shared_rules = Vec::new();
        for (i, v) in shared.iter().enumerate() {
            let mut r: Rule =
                v.clone().try_into().map_err(|e| format!("{}: [[rules]] number {}: {e}", config.display(), i + 1))?;
            r.id = format!("shared-{}", i + 1);
            r.shared = true;
            r.check().map_err(|e| format!("{}: rule {:?}: {e}", config.display(), r.name))?;
            shared_rules.push(r);
        }
        let file = home.rules_file();
        let own = match fsutil::read_optional(&file).map_err(|e| format!("{}: {e}", file.display()))? {
            None => Vec::new(),
            Some(bytes) => {
                let text = String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8", file.display()))?;
                let f: File = toml::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
                let mut seen = std::collections::HashSet::new();
                for r in &f.rule {
                    r.check().map_err(|e| format!("{}: rule {:?}: {e}", file.display(), r.name))?;
                    if r.id.is_empty() || r.shared || !seen.insert(r.id.clone()) {
                        return Err(format!("{}: rule {:?}: its id is missing or not unique", file.display(), r.name));
                    }
                }
                f.rule
            }
        };
        let book = Book { file, shared: shared_rules, own: Mutex::new(Vec::new()), all: RwLock::new(Arc::from([])) };
        book.set(own);
        Ok(book)
    }

    /// Every rule, lab.toml's first: what a prompt is weighed against now.
    pub fn rules(&self) -> Arc<[Rule]> {
        self.all.read().unwrap().clone()
    }

    pub fn get(&self, id: &str) -> Option<Rule> {
        self.rules().iter().find(|r| r.id == id).cloned()
    }

    /// Keep a new rule (its id given here); returns it as kept.
    pub fn add(&self, mut rule: Rule) -> Result<Rule, BookError> {
        rule.check().map_err(BookError::Bad)?;
        let mut own = self.own.lock().unwrap();
        if own.len() + self.shared.len() >= RULES_MAX {
            return Err(BookError::Bad(format!("lab keeps at most {RULES_MAX} rules")));
        }
        rule.id = format!("r-{}", crate::util::secrets::random_hex(6).map_err(|e| BookError::Io(e.to_string()))?);
        rule.shared = false;
        let mut next = own.clone();
        next.push(rule.clone());
        self.save(&next)?;
        *own = next.clone();
        drop(own);
        self.set(next);
        Ok(rule)
    }

    /// Replace rule `id` with `rule` (same id); returns the one replaced and the new one.
    pub fn replace(&self, id: &str, mut rule: Rule) -> Result<(Rule, Rule), BookError> {
        self.own_rule(id)?;
        rule.check().map_err(BookError::Bad)?;
        rule.id = id.to_string();
        rule.shared = false;
        let mut own = self.own.lock().unwrap();
        let at = own.iter().position(|r| r.id == id).ok_or(BookError::NotFound)?;
        let mut next = own.clone();
        let before = std::mem::replace(&mut next[at], rule.clone());
        self.save(&next)?;
        *own = next.clone();
        drop(own);
        self.set(next);
        Ok((before, rule))
    }

    /// Remove rule `id`; returns it.
    pub fn remove(&self, id: &str) -> Result<Rule, BookError> {
        self.own_rule(id)?;
        let mut own = self.own.lock().unwrap();
        let at = own.iter().position(|r| r.id == id).ok_or(BookError::NotFound)?;
        let mut next = own.clone();
        let gone = next.remove(at);
        self.save(&next)?;
        *own = next.clone();
        drop(own);
        self.set(next);
        Ok(gone)
    }

    fn own_rule(&self, id: &str) -> Result<(), BookError> {
        if self.shared.iter().any(|r| r.id == id) {
            return Err(BookError::Shared);
        }
        Ok(())
    }

    fn save(&self, rules: &[Rule]) -> Result<(), BookError> {
        let text = toml::to_string(&File { rule: rules.to_vec() }).map_err(|e| BookError::Io(e.to_string()))?;
        let head = "# lab's answer rules (docs/rules.md): changed by `lab rules` and the web UI.\n";
        fsutil::write_atomic(&self.file, format!("{head}{text}").as_bytes(), 0o600)
            .map_err(|e| BookError::Io(format!("{}: {e}", self.file.display())))
    }

    fn set(&self, own: Vec<Rule>) {
        let all: Vec<Rule> = self.shared.iter().cloned().chain(own.iter().cloned()).collect();
        *self.own.lock().unwrap() = own;
        *self.all.write().unwrap() = Arc::from(all);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::rule::{Action, Match};
    use std::os::unix::fs::PermissionsExt;

    fn allow(name: &str, pattern: &str) -> Rule {
        Rule {
            id: String::new(),
            name: name.into(),
            action: Action::Allow,
            message: None,
            matches: Match { tool: Some("Shell".into()), pattern: Some(pattern.into()), ..Default::default() },
            dry_run: false,
            shared: false,
        }
    }

    #[test]
    fn rules_are_kept_in_a_private_file_and_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path().to_path_buf());
        let shared: Vec<toml::Value> = vec![toml::from_str(
            "name = \"no pushes\"\naction = \"deny\"\nmessage = \"ask first\"\n[match]\npattern = \"git push\"\n",
        )
        .unwrap()];
        let book = Book::open(&home, &shared).unwrap();
        let a = book.add(allow("tests", "cargo test")).unwrap();
        let b = book.add(allow("build", "cargo build")).unwrap();
        assert!(a.id.starts_with("r-") && a.id != b.id);
        let ids: Vec<String> = book.rules().iter().map(|r| r.id.clone()).collect();
        assert_eq!(ids, ["shared-1".to_string(), a.id.clone(), b.id.clone()]);
        let mode = std::fs::metadata(home.rules_file()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let (_, changed) = book.replace(&a.id, allow("tests, all", "cargo test --all")).unwrap();
        assert_eq!(changed.id, a.id);
        book.remove(&b.id).unwrap();
        assert_eq!(book.remove(&b.id), Err(BookError::NotFound));
        assert_eq!(book.remove("shared-1"), Err(BookError::Shared));
        assert!(matches!(book.add(allow("", "x")), Err(BookError::Bad(_))));
        let again = Book::open(&home, &shared).unwrap();
        let names: Vec<String> = again.rules().iter().map(|r| r.name.clone()).collect();
        assert_eq!(names, ["no pushes", "tests, all"]);
        assert!(again.rules()[0].shared && !again.rules()[1].shared);
    }

    #[test]
    fn a_file_lab_cannot_read_whole_is_refused_with_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path().to_path_buf());
        std::fs::write(home.rules_file(), "[[rule]]\nid = \"r-1\"\nname = \"x\"\naction = \"allow\"\n").unwrap();
        let e = Book::open(&home, &[]).err().unwrap();
        assert!(e.contains("rules.toml") && e.contains("names a tool or a pattern"), "{e}");
        std::fs::write(home.rules_file(), "[[rule]]\nname = \"x\"\naction = \"deny\"\n").unwrap();
        assert!(Book::open(&home, &[]).err().unwrap().contains("id"));
        let shared: Vec<toml::Value> = vec![toml::from_str("name = \"x\"\naction = \"maybe\"\n").unwrap()];
        std::fs::remove_file(home.rules_file()).unwrap();
        assert!(Book::open(&home, &shared).err().unwrap().contains("[[rules]] number 1"));
    }
}
