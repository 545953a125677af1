//! The interactive widgets (pickers, composer) as pure key-driven state machines, and a
//! plain clear-and-redraw screen so a human attached with tmux can follow along.

use crate::keys::Key;
use crate::script::Question;
use std::io::Write;

// ---------------------------------------------------------------------------------------
// AskUserQuestion picker (notes §7)
// ---------------------------------------------------------------------------------------

#[derive(Debug, PartialEq, Eq)]
pub enum AskOutcome {
    /// One entry per question: the chosen label(s) or the typed text; None = unanswered.
    Answered(Vec<Option<String>>),
    /// Esc, or "Cancel" on the review screen.
    Cancelled,
    /// "Chat about this".
    Chat,
}

pub struct AskPicker {
    qs: Vec<Question>,
    /// Several questions or a multiSelect one: tabs, then a "Submit answers" review screen.
    tabbed: bool,
    /// Current tab; `qs.len()` is the review screen.
    tab: usize,
    cursor: usize,
    answers: Vec<Option<String>>,
    other: Vec<String>,
    checked: Vec<Vec<bool>>,
    other_checked: Vec<bool>,
}

impl AskPicker {
    pub fn new(qs: Vec<Question>) -> AskPicker {
        let tabbed = qs.len() > 1 || qs.iter().any(|q| q.multi_select);
        let n = qs.len();
        AskPicker {
            tabbed,
            tab: 0,
            cursor: 0,
            answers: vec![None; n],
            other: vec![String::new(); n],
            checked: qs.iter().map(|q| vec![false; q.options.len()]).collect(),
            other_checked: vec![false; n],
            qs,
        }
    }

    fn advance(&mut self) -> Option<AskOutcome> {
        if !self.tabbed {
            return Some(AskOutcome::Answered(self.answers.clone()));
        }
        self.tab += 1;
        self.cursor = 0;
        None
    }

    pub fn on_key(&mut self, key: &Key) -> Option<AskOutcome> {
        if *key == Key::Esc {
            return Some(AskOutcome::Cancelled);
        }
        if self.tab >= self.qs.len() {
            // Review screen: "Submit answers" / "Cancel".
            match key {
                Key::Up => self.cursor = 0,
                Key::Down => self.cursor = 1,
                Key::Left | Key::BackTab => {
                    self.tab = self.qs.len() - 1;
                    self.cursor = 0;
                }
                Key::Enter if self.cursor == 0 => return Some(AskOutcome::Answered(self.answers.clone())),
                Key::Enter => return Some(AskOutcome::Cancelled),
                _ => {}
            }
            return None;
        }
        let t = self.tab;
        let n = self.qs[t].options.len();
        let multi = self.qs[t].multi_select;
        // Rows: options 0..n, "Type something." n, then (multiSelect) "Submit" n+1, and
        // "Chat about this" last.
        let last = if multi { n + 2 } else { n + 1 };
        let on_other = self.cursor == n;
        match key {
            // As on 2.1.198: Up cycles through options + "Type something." (from option 1
            // it wraps to "Type something."), Down clamps on "Chat about this".
            Key::Up if self.cursor == 0 => self.cursor = n,
            Key::Up => self.cursor -= 1,
            Key::Down => self.cursor = (self.cursor + 1).min(last),
            Key::Left | Key::BackTab if self.tabbed && !on_other && self.tab > 0 => {
                self.tab -= 1;
                self.cursor = 0;
            }
            Key::Right | Key::Tab if self.tabbed && !on_other => {
                self.tab += 1;
                self.cursor = 0;
            }
            Key::Enter if !multi => {
                if self.cursor < n {
                    self.answers[t] = Some(self.qs[t].options[self.cursor].label.clone());
                    return self.advance();
                } else if on_other {
                    // Empty: this is just "text mode"; typing then Enter submits.
                    if !self.other[t].is_empty() {
                        self.answers[t] = Some(self.other[t].clone());
                        return self.advance();
                    }
                } else {
                    return Some(AskOutcome::Chat);
                }
            }
            Key::Enter => {
                if self.cursor < n {
                    self.checked[t][self.cursor] ^= true;
                } else if on_other {
                    self.other_checked[t] ^= true;
                } else if self.cursor == last {
                    return Some(AskOutcome::Chat);
                } else {
                    let mut picked: Vec<String> = self.qs[t]
                        .options
                        .iter()
                        .zip(&self.checked[t])
                        .filter(|(_, c)| **c)
                        .map(|(o, _)| o.label.clone())
                        .collect();
                    if self.other_checked[t] && !self.other[t].is_empty() {
                        picked.push(self.other[t].clone());
                    }
                    self.answers[t] = Some(picked.join(", "));
                    return self.advance();
                }
            }
            Key::Char(c) if on_other => {
                self.other[t].push(*c);
                if multi {
                    self.other_checked[t] = true;
                }
            }
            Key::Newline if on_other => self.other[t].push('\n'),
            Key::Backspace if on_other => {
                self.other[t].pop();
                if multi && self.other[t].is_empty() {
                    self.other_checked[t] = false;
                }
            }
            Key::CtrlU if on_other => self.other[t].clear(),
            _ => {}
        }
        None
    }

    pub fn render(&self) -> Vec<String> {
        let mut l = Vec::new();
        if self.tabbed {
            let mut bar = String::from("←  ");
            for (i, q) in self.qs.iter().enumerate() {
                let mark = if self.answers[i].is_some() { "☒" } else { "☐" };
                let name = if q.header.is_empty() { format!("Q{}", i + 1) } else { q.header.clone() };
                if i == self.tab {
                    bar.push_str(&format!("[{mark} {name}]  "));
                } else {
                    bar.push_str(&format!("{mark} {name}  "));
                }
            }
            if self.tab >= self.qs.len() {
                bar.push_str("[✔ Submit]  →");
            } else {
                bar.push_str("✔ Submit  →");
            }
            l.push(bar);
            l.push(String::new());
        }
        if self.tab >= self.qs.len() {
            l.push("Review your answers".into());
            l.push(String::new());
            for (q, a) in self.qs.iter().zip(&self.answers) {
                l.push(format!(" ● {}", q.question));
                l.push(format!("   → {}", a.as_deref().unwrap_or("(not answered)")));
            }
            if self.answers.iter().any(Option::is_none) {
                l.push(String::new());
                l.push("⚠ You have not answered all questions".into());
            }
            l.push(String::new());
            l.push("Ready to submit your answers?".into());
            l.push(String::new());
            l.push(format!("{} 1. Submit answers", if self.cursor == 0 { "❯" } else { " " }));
            l.push(format!("{} 2. Cancel", if self.cursor == 1 { "❯" } else { " " }));
            return l;
        }
        let t = self.tab;
        let q = &self.qs[t];
        let n = q.options.len();
        if !self.tabbed && !q.header.is_empty() {
            l.push(format!("☐ {}", q.header));
            l.push(String::new());
        }
        l.push(q.question.clone());
        l.push(String::new());
        let arrow = |i: usize| if self.cursor == i { "❯" } else { " " };
        for (i, o) in q.options.iter().enumerate() {
            if q.multi_select {
                let b = if self.checked[t][i] { "[✔]" } else { "[ ]" };
                l.push(format!("{} {}. {b} {}", arrow(i), i + 1, o.label));
            } else {
                l.push(format!("{} {}. {}", arrow(i), i + 1, o.label));
            }
            if !o.description.is_empty() {
                l.push(format!("     {}", o.description));
            }
        }
        let other =
            if self.other[t].is_empty() { "Type something.".to_string() } else { self.other[t].replace('\n', "⏎") };
        let caret = if self.cursor == n { "█" } else { "" };
        if q.multi_select {
            let b = if self.other_checked[t] { "[✔]" } else { "[ ]" };
            l.push(format!("{} {}. {b} {other}{caret}", arrow(n), n + 1));
            l.push(format!("{}    {}", arrow(n + 1), if self.tab + 1 < self.qs.len() { "Next" } else { "Submit" }));
            l.push("  ────────────────────".into());
            l.push(format!("{} {}. Chat about this", arrow(n + 2), n + 2));
        } else {
            l.push(format!("{} {}. {other}{caret}", arrow(n), n + 1));
            l.push("  ────────────────────".into());
            l.push(format!("{} {}. Chat about this", arrow(n + 1), n + 2));
        }
        l.push(String::new());
        if self.qs.len() > 1 {
            l.push("Enter to select · Tab/Arrow keys to navigate · Esc to cancel".into());
        } else {
            l.push("Enter to select · ↑/↓ to navigate · Esc to cancel".into());
        }
        l
    }
}

// ---------------------------------------------------------------------------------------
// Numbered choice (ExitPlanMode "1. Yes / 2. No", Bash permission prompt)
// ---------------------------------------------------------------------------------------

#[derive(Debug, PartialEq, Eq)]
pub enum ChoiceOutcome {
    Picked(usize),
    Esc,
}

pub struct Choice {
    pub title: Vec<String>,
    pub options: Vec<String>,
    pub cursor: usize,
    pub footer: String,
}

impl Choice {
    pub fn new(title: Vec<String>, options: &[&str]) -> Choice {
        Choice {
            title,
            options: options.iter().map(|s| s.to_string()).collect(),
            cursor: 0,
            footer: "Enter to confirm · Esc to cancel".into(),
        }
    }

    pub fn on_key(&mut self, key: &Key) -> Option<ChoiceOutcome> {
        let last = self.options.len().saturating_sub(1);
        match key {
            Key::Up => self.cursor = self.cursor.saturating_sub(1),
            Key::Down => self.cursor = (self.cursor + 1).min(last),
            Key::Enter => return Some(ChoiceOutcome::Picked(self.cursor)),
            Key::Esc => return Some(ChoiceOutcome::Esc),
            Key::Char(c) => {
                if let Some(d) = c.to_digit(10) {
                    let d = d as usize;
                    if d >= 1 && d <= self.options.len() {
                        return Some(ChoiceOutcome::Picked(d - 1));
                    }
                }
            }
            _ => {}
        }
        None
    }

    pub fn render(&self) -> Vec<String> {
        let mut l = self.title.clone();
        l.push(String::new());
        for (i, o) in self.options.iter().enumerate() {
            l.push(format!("{} {}. {o}", if self.cursor == i { "❯" } else { " " }, i + 1));
        }
        l.push(String::new());
        l.push(self.footer.clone());
        l
    }
}

// ---------------------------------------------------------------------------------------
// Composer (the prompt box at the bottom of an idle Claude Code)
// ---------------------------------------------------------------------------------------

#[derive(Debug, PartialEq, Eq)]
pub enum ComposerOutcome {
    Submit(String),
    /// Ctrl-C twice on an empty composer.
    Exit,
}

#[derive(Default)]
pub struct Composer {
    pub text: String,
    armed_exit: bool,
}

impl Composer {
    pub fn on_key(&mut self, key: &Key) -> Option<ComposerOutcome> {
        let was_armed = std::mem::replace(&mut self.armed_exit, false);
        match key {
            Key::Char(c) => self.text.push(*c),
            Key::Newline => self.text.push('\n'),
            Key::Paste(t) => self.text.push_str(t),
            Key::Backspace => {
                self.text.pop();
            }
            Key::CtrlU => self.text.clear(),
            Key::CtrlC if self.text.is_empty() => {
                if was_armed {
                    return Some(ComposerOutcome::Exit);
                }
                self.armed_exit = true;
            }
            Key::CtrlC => self.text.clear(),
            Key::Enter if !self.text.trim().is_empty() => {
                return Some(ComposerOutcome::Submit(std::mem::take(&mut self.text)));
            }
            _ => {}
        }
        None
    }

    pub fn render(&self) -> Vec<String> {
        let mut l = vec!["────────────────────────────────────────".to_string()];
        let mut first = true;
        for line in self.text.split('\n') {
            l.push(format!("{} {line}", if first { ">" } else { " " }));
            first = false;
        }
        if let Some(last) = l.last_mut() {
            last.push('█');
        }
        l.push("────────────────────────────────────────".into());
        l.push(if self.armed_exit { "Press Ctrl-C again to exit".into() } else { "? for shortcuts".into() });
        l
    }
}

// ---------------------------------------------------------------------------------------
// Screen
// ---------------------------------------------------------------------------------------

pub struct Screen {
    header: Vec<String>,
    history: Vec<String>,
    status: String,
}

impl Screen {
    pub fn new(header: Vec<String>) -> Screen {
        Screen { header, history: Vec::new(), status: String::new() }
    }

    /// Adds an entry to the conversation shown above the widget.
    pub fn push(&mut self, text: &str) {
        for line in text.split('\n') {
            self.history.push(line.to_string());
        }
        self.history.push(String::new());
        if self.history.len() > 2000 {
            self.history.drain(..1000);
        }
    }

    pub fn set_status(&mut self, s: &str) {
        self.status = s.to_string();
    }

    /// Clears the terminal and draws header, the tail of the history, then the widget.
    pub fn draw(&self, widget: &[String]) {
        let (rows, cols) = term_size();
        let mut lines: Vec<&str> = self.header.iter().map(String::as_str).collect();
        let fixed = lines.len() + widget.len() + 2;
        let room = rows.saturating_sub(fixed);
        let start = self.history.len().saturating_sub(room);
        lines.extend(self.history[start..].iter().map(String::as_str));
        if !self.status.is_empty() {
            lines.push(&self.status);
        }
        lines.extend(widget.iter().map(String::as_str));
        let mut out = String::from("\x1b[H\x1b[2J");
        for (i, l) in lines.iter().enumerate() {
            if i > 0 {
                out.push_str("\r\n");
            }
            out.extend(l.chars().filter(|c| !c.is_control()).take(cols.max(1)));
        }
        let mut so = std::io::stdout().lock();
        let _ = so.write_all(out.as_bytes());
        let _ = so.flush();
    }
}

fn term_size() -> (usize, usize) {
    // SAFETY: TIOCGWINSZ fills a winsize struct or fails.
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0 {
            return (ws.ws_row as usize, ws.ws_col as usize);
        }
    }
    (40, 120)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::QOption;

    fn q(text: &str, labels: &[&str], multi: bool) -> Question {
        Question {
            question: text.into(),
            header: "H".into(),
            options: labels.iter().map(|l| QOption { label: l.to_string(), description: String::new() }).collect(),
            multi_select: multi,
        }
    }

    fn drive(p: &mut AskPicker, keys: &[Key]) -> Option<AskOutcome> {
        for k in keys {
            if let Some(o) = p.on_key(k) {
                return Some(o);
            }
        }
        None
    }

    #[test]
    fn single_question_recipe_selects_option_i() {
        for i in 0..3 {
            let mut p = AskPicker::new(vec![q("Q?", &["A", "B", "C"], false)]);
            let mut keys = vec![Key::Up; 4];
            keys.extend(vec![Key::Down; i]);
            keys.push(Key::Enter);
            let want = ["A", "B", "C"][i].to_string();
            assert_eq!(drive(&mut p, &keys), Some(AskOutcome::Answered(vec![Some(want)])));
        }
        // Down clamps at "Chat about this".
        let mut p = AskPicker::new(vec![q("Q?", &["A"], false)]);
        assert_eq!(drive(&mut p, &[Key::Down, Key::Down, Key::Down, Key::Enter]), Some(AskOutcome::Chat));
        // Up wraps from option 1 to "Type something." and cycles over options + Other.
        let mut p = AskPicker::new(vec![q("Q?", &["A", "B", "C"], false)]);
        let keys = [Key::Up, Key::Char('x'), Key::Up, Key::Enter];
        assert_eq!(drive(&mut p, &keys), Some(AskOutcome::Answered(vec![Some("C".into())])));
        // From "Chat about this", Up goes to "Type something.".
        let mut p = AskPicker::new(vec![q("Q?", &["A", "B"], false)]);
        let keys = [Key::Down, Key::Down, Key::Down, Key::Down, Key::Up, Key::Char('z'), Key::Enter];
        assert_eq!(drive(&mut p, &keys), Some(AskOutcome::Answered(vec![Some("z".into())])));
    }

    #[test]
    fn other_text_and_escape() {
        let mut p = AskPicker::new(vec![q("Q?", &["A", "B"], false)]);
        let mut keys = vec![Key::Down, Key::Down, Key::Enter];
        keys.extend("x é".chars().map(Key::Char));
        keys.extend([Key::Backspace, Key::Char('e'), Key::Enter]);
        assert_eq!(drive(&mut p, &keys), Some(AskOutcome::Answered(vec![Some("x e".into())])));
        let mut p = AskPicker::new(vec![q("Q?", &["A"], false)]);
        assert_eq!(drive(&mut p, &[Key::Down, Key::Esc]), Some(AskOutcome::Cancelled));
    }

    #[test]
    fn tabbed_and_multiselect() {
        let mut p = AskPicker::new(vec![q("Q1?", &["A", "B"], false), q("Q2?", &["C", "D"], false)]);
        let keys = [Key::Down, Key::Enter, Key::Enter, Key::Enter];
        assert_eq!(drive(&mut p, &keys), Some(AskOutcome::Answered(vec![Some("B".into()), Some("C".into())])));
        let mut p = AskPicker::new(vec![q("Q?", &["A", "B", "C"], true)]);
        let keys = [Key::Enter, Key::Down, Key::Down, Key::Enter, Key::Down, Key::Down, Key::Enter, Key::Enter];
        assert_eq!(drive(&mut p, &keys), Some(AskOutcome::Answered(vec![Some("A, C".into())])));
        let mut p = AskPicker::new(vec![q("Q?", &["A"], true)]);
        assert_eq!(
            drive(&mut p, &[Key::Down, Key::Down, Key::Enter, Key::Down, Key::Enter]),
            Some(AskOutcome::Cancelled)
        );
        // The compat §7 multi-select "other" recipe: Up × (N+1), Down × N, text, Down, Enter, Enter.
        let mut p = AskPicker::new(vec![q("Q?", &["A", "B", "C"], true)]);
        let mut keys = vec![Key::Up; 4];
        keys.extend(vec![Key::Down; 3]);
        keys.extend("Webhooks".chars().map(Key::Char));
        keys.extend([Key::Down, Key::Enter, Key::Enter]);
        assert_eq!(drive(&mut p, &keys), Some(AskOutcome::Answered(vec![Some("Webhooks".into())])));
        // multiSelect has "Chat about this" too, below Submit.
        let mut p = AskPicker::new(vec![q("Q?", &["A"], true)]);
        assert_eq!(drive(&mut p, &[Key::Down, Key::Down, Key::Down, Key::Down, Key::Enter]), Some(AskOutcome::Chat));
    }

    #[test]
    fn choice_and_composer() {
        let mut c = Choice::new(vec![], &["Yes", "No"]);
        assert_eq!(c.on_key(&Key::Char('2')), Some(ChoiceOutcome::Picked(1)));
        assert_eq!(c.on_key(&Key::Down), None);
        assert_eq!(c.on_key(&Key::Enter), Some(ChoiceOutcome::Picked(1)));
        let mut m = Composer::default();
        assert_eq!(m.on_key(&Key::Enter), None);
        for ch in "hi!".chars() {
            m.on_key(&Key::Char(ch));
        }
        assert_eq!(m.on_key(&Key::Enter), Some(ComposerOutcome::Submit("hi!".into())));
        assert_eq!(m.on_key(&Key::CtrlC), None);
        assert_eq!(m.on_key(&Key::CtrlC), Some(ComposerOutcome::Exit));
    }
}
