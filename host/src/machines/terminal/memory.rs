//! A terminal in memory: screens set by the test, everything typed recorded with when
//! it came, and an optional reaction that redraws a screen when a key arrives (the
//! agent, played by the test). Nothing is spawned; for tests of the answer path's
//! timing without tmux.

use super::{Sessions, Terminal, TerminalError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One thing typed into a screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Key(String),
    Literal(String),
    Paste(String),
}

/// What a screen does when something is typed into it: may redraw it.
pub type Reaction = Arc<dyn Fn(&Input, &mut String) + Send + Sync>;

#[derive(Default)]
struct Screen {
    text: String,
    typed: Vec<(Instant, Input)>,
    reaction: Option<Reaction>,
}

#[derive(Default)]
pub struct MemoryTerminal {
    screens: Mutex<HashMap<String, Screen>>,
    /// What each session was started with ([`Sessions::start`]), ended or not.
    started: Mutex<HashMap<String, Vec<String>>>,
}

impl MemoryTerminal {
    pub fn new() -> MemoryTerminal {
        MemoryTerminal::default()
    }

    /// Open (or redraw) `target`'s screen with `text`.
    pub fn draw(&self, target: &str, text: &str) {
        self.screens.lock().unwrap().entry(target.to_string()).or_default().text = text.to_string();
    }

    /// What `target`'s screen does with what is typed from now on.
    pub fn react(&self, target: &str, reaction: impl Fn(&Input, &mut String) + Send + Sync + 'static) {
        self.screens.lock().unwrap().entry(target.to_string()).or_default().reaction = Some(Arc::new(reaction));
    }

    /// The session ends: its screen is gone.
    pub fn close(&self, target: &str) {
        self.screens.lock().unwrap().remove(target);
    }

    /// What session `target` was started with, if lab started it.
    pub fn started(&self, target: &str) -> Option<Vec<String>> {
        self.started.lock().unwrap().get(target).cloned()
    }

    /// Everything typed into `target`, in order, with when it arrived.
    pub fn typed(&self, target: &str) -> Vec<(Instant, Input)> {
        self.screens.lock().unwrap().get(target).map(|s| s.typed.clone()).unwrap_or_default()
    }

    fn input(&self, target: &str, input: Input) -> Result<(), TerminalError> {
        let mut screens = self.screens.lock().unwrap();
        let Some(s) = screens.get_mut(target) else {
            return Err(TerminalError { action: "type".into(), message: format!("no session {target:?}") });
        };
        if let Some(r) = s.reaction.clone() {
            r(&input, &mut s.text);
        }
        s.typed.push((Instant::now(), input));
        Ok(())
    }
}

impl Terminal for MemoryTerminal {
    fn capture(&self, target: &str) -> Result<String, TerminalError> {
        let screens = self.screens.lock().unwrap();
        let s = screens
            .get(target)
            .ok_or_else(|| TerminalError { action: "capture".into(), message: format!("no session {target:?}") })?;
        Ok(s.text.clone())
    }

    fn key(&self, target: &str, key: &str) -> Result<(), TerminalError> {
        self.input(target, Input::Key(key.to_string()))
    }

    fn literal(&self, target: &str, text: &str) -> Result<(), TerminalError> {
        self.input(target, Input::Literal(text.to_string()))
    }

    fn paste(&self, target: &str, _buffer: &str, text: &str) -> Result<(), TerminalError> {
        self.input(target, Input::Paste(text.to_string()))
    }

    fn alive(&self, target: &str) -> bool {
        self.screens.lock().unwrap().contains_key(target)
    }

    fn attach_command(&self, target: &str) -> Vec<String> {
        vec!["memory-terminal".into(), target.to_string()]
    }
}

impl Sessions for MemoryTerminal {
    /// Opens an empty screen (the test draws the agent on it).
    fn start(&self, target: &str, argv: &[String]) -> Result<(), TerminalError> {
        let mut screens = self.screens.lock().unwrap();
        if screens.contains_key(target) {
            return Err(TerminalError { action: "start".into(), message: format!("duplicate session: {target}") });
        }
        screens.insert(target.to_string(), Screen::default());
        self.started.lock().unwrap().insert(target.to_string(), argv.to_vec());
        Ok(())
    }

    fn names(&self) -> Result<std::collections::BTreeSet<String>, TerminalError> {
        Ok(self.screens.lock().unwrap().keys().cloned().collect())
    }

    fn end(&self, target: &str) -> Result<(), TerminalError> {
        self.close(target);
        Ok(())
    }

    fn place(&self) -> String {
        "memory".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_typed_is_recorded_and_the_screen_reacts() {
        let t = MemoryTerminal::new();
        assert!(!t.alive("a") && t.capture("a").is_err() && t.key("a", "Enter").is_err());
        t.draw("a", "? Allow [y/n]");
        t.react("a", |i, screen| {
            if *i == Input::Key("y".into()) {
                *screen = "done".into();
            }
        });
        t.key("a", "Down").unwrap();
        assert_eq!(t.capture("a").unwrap(), "? Allow [y/n]");
        t.key("a", "y").unwrap();
        t.paste("a", "buf", "hello\nworld").unwrap();
        assert_eq!(t.capture("a").unwrap(), "done");
        let typed: Vec<Input> = t.typed("a").into_iter().map(|(_, i)| i).collect();
        assert_eq!(typed, [Input::Key("Down".into()), Input::Key("y".into()), Input::Paste("hello\nworld".into())]);
        t.close("a");
        assert!(!t.alive("a"));
    }
}
