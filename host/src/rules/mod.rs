//! Answer rules: the operator says once what may go ahead, and lab answers the
//! matching prompts of every run itself — through the operator's own guarded path, on
//! the record (the audit log), and without calling anyone for them (docs/rules.md).
//!
//! | child | what it owns |
//! |---|---|
//! | [`rule`] | one rule as written, and its checks |
//! | [`evaluate`] | which rule answers a prompt: a pure function of the rules and the prompt's facts |
//! | [`book`] | the rule set: `rules.toml` and lab.toml's shared rules |
//! | [`engine`] | applying them to every run's new prompts, before the notifications |
//! | [`from_card`] | "Always allow this…" on a card: the narrowest rule for its prompt, kept and applied |

pub mod book;
pub mod engine;
pub mod evaluate;
pub mod from_card;
pub mod rule;

use std::collections::HashMap;
use std::sync::Mutex;

/// The rule set and what its rules did today: lab serve's one owner of both.
pub struct Rules {
    pub book: book::Book,
    /// Prompts each rule answered, for the day they count (UTC, `YYYY-MM-DD`).
    today: Mutex<(String, HashMap<String, u64>)>,
}

impl Rules {
    pub fn new(book: book::Book) -> Rules {
        Rules { book, today: Mutex::new((String::new(), HashMap::new())) }
    }

    /// How many prompts rule `id` answered today (UTC).
    pub fn answered_today(&self, id: &str) -> u64 {
        let today = day();
        let t = self.today.lock().unwrap();
        if t.0 != today {
            return 0;
        }
        t.1.get(id).copied().unwrap_or(0)
    }

    pub(crate) fn count(&self, id: &str) {
        let today = day();
        let mut t = self.today.lock().unwrap();
        if t.0 != today {
            *t = (today, HashMap::new());
        }
        *t.1.entry(id.to_string()).or_default() += 1;
    }
}

fn day() -> String {
    crate::util::time::now_rfc3339().chars().take(10).collect()
}
