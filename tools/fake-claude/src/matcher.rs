//! Hook matchers as Claude Code reads them: empty or `*` matches everything; a matcher
//! made only of letters, digits, `_` and `|` is a list of exact names; anything else is
//! a JavaScript regular expression tested against the name (`new RegExp(m).test(name)`:
//! unanchored unless it says `^`/`$`). An invalid pattern matches nothing.
//!
//! The regex side is a small backtracking matcher for the subset hook matchers use:
//! literals, `.`, `^`, `$`, groups `( )` and `(?: )`, look-ahead `(?= )` and `(?! )`,
//! alternation `|`, the quantifiers `*` `+` `?` `{n}` `{n,}` `{n,m}` (a trailing `?`,
//! lazy, is accepted and ignored: only whether it matches counts), classes `[a-z_]` and
//! `[^…]`, and the escapes `\d \w \s \D \W \S` and `\<punctuation>`. Lab's claude-code
//! provider uses `^(?!(AskUserQuestion|ExitPlanMode)$).*` ("every tool but these").

/// Whether `matcher` selects `target` (a tool name, a notification type, …).
pub fn matches(matcher: &str, target: &str) -> bool {
    let m = matcher.trim();
    if m.is_empty() || m == "*" {
        return true;
    }
    if m.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|') {
        return m.split('|').any(|p| p == target);
    }
    match Regex::parse(m) {
        Ok(re) => re.test(target),
        Err(_) => false,
    }
}

#[derive(Debug, Clone)]
enum Node {
    Char(char),
    Any,
    Start,
    End,
    Class { negated: bool, items: Vec<ClassItem> },
    Group(Vec<Vec<Node>>),
    Look { negative: bool, alts: Vec<Vec<Node>> },
    Repeat { node: Box<Node>, min: usize, max: Option<usize> },
}

#[derive(Debug, Clone)]
enum ClassItem {
    Range(char, char),
    Digit(bool),
    Word(bool),
    Space(bool),
}

impl ClassItem {
    fn has(&self, c: char) -> bool {
        match *self {
            ClassItem::Range(a, b) => a <= c && c <= b,
            ClassItem::Digit(neg) => c.is_ascii_digit() != neg,
            ClassItem::Word(neg) => (c.is_ascii_alphanumeric() || c == '_') != neg,
            ClassItem::Space(neg) => c.is_whitespace() != neg,
        }
    }
}

#[derive(Debug)]
pub struct Regex {
    alts: Vec<Vec<Node>>,
}

struct Parser<'a> {
    s: &'a [char],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn alternation(&mut self) -> Result<Vec<Vec<Node>>, String> {
        let mut alts = vec![self.sequence()?];
        while self.eat('|') {
            alts.push(self.sequence()?);
        }
        Ok(alts)
    }

    fn sequence(&mut self) -> Result<Vec<Node>, String> {
        let mut seq = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom()?;
            seq.push(self.quantified(atom)?);
        }
        Ok(seq)
    }

    fn quantified(&mut self, atom: Node) -> Result<Node, String> {
        let (min, max) = match self.peek() {
            Some(c @ ('*' | '+' | '?')) => {
                self.i += 1;
                match c {
                    '*' => (0, None),
                    '+' => (1, None),
                    _ => (0, Some(1)),
                }
            }
            Some('{') => match self.braces() {
                Some(b) => b,
                None => return Ok(atom), // a literal `{`, as in JavaScript
            },
            _ => return Ok(atom),
        };
        if matches!(atom, Node::Start | Node::End | Node::Look { .. }) {
            return Err("nothing to repeat".into());
        }
        self.eat('?'); // lazy: same answer for a yes/no test
        Ok(Node::Repeat { node: Box::new(atom), min, max })
    }

    /// `{n}`, `{n,}`, `{n,m}` at the cursor (consumed), or None (nothing consumed).
    fn braces(&mut self) -> Option<(usize, Option<usize>)> {
        let rest: String = self.s[self.i..].iter().collect();
        let end = rest.find('}')?;
        let inner = &rest[1..end];
        let (a, b) = match inner.split_once(',') {
            Some((a, b)) => (a, Some(b)),
            None => (inner, None),
        };
        let min: usize = a.parse().ok()?;
        let max = match b {
            None => Some(min),
            Some("") => None,
            Some(b) => Some(b.parse().ok()?),
        };
        self.i += rest[..=end].chars().count();
        Some((min, max))
    }

    fn atom(&mut self) -> Result<Node, String> {
        let c = self.peek().ok_or("unexpected end")?;
        self.i += 1;
        Ok(match c {
            '.' => Node::Any,
            '^' => Node::Start,
            '$' => Node::End,
            '(' => {
                let look = if self.eat('?') {
                    if self.eat(':') {
                        None
                    } else if self.eat('=') {
                        Some(false)
                    } else if self.eat('!') {
                        Some(true)
                    } else {
                        return Err("unsupported group".into());
                    }
                } else {
                    None
                };
                let alts = self.alternation()?;
                if !self.eat(')') {
                    return Err("unclosed group".into());
                }
                match look {
                    Some(negative) => Node::Look { negative, alts },
                    None => Node::Group(alts),
                }
            }
            ')' => return Err("unmatched )".into()),
            '*' | '+' | '?' => return Err("nothing to repeat".into()),
            '[' => self.class()?,
            '\\' => match self.escape()? {
                Ok(ch) => Node::Char(ch),
                Err(item) => Node::Class { negated: false, items: vec![item] },
            },
            other => Node::Char(other),
        })
    }

    /// After a `\`: a literal character, or a class shorthand.
    fn escape(&mut self) -> Result<Result<char, ClassItem>, String> {
        let c = self.peek().ok_or("trailing backslash")?;
        self.i += 1;
        Ok(match c {
            'd' => Err(ClassItem::Digit(false)),
            'D' => Err(ClassItem::Digit(true)),
            'w' => Err(ClassItem::Word(false)),
            'W' => Err(ClassItem::Word(true)),
            's' => Err(ClassItem::Space(false)),
            'S' => Err(ClassItem::Space(true)),
            'n' => Ok('\n'),
            't' => Ok('\t'),
            c if c.is_ascii_alphanumeric() => return Err(format!("unsupported escape \\{c}")),
            c => Ok(c),
        })
    }

    fn class(&mut self) -> Result<Node, String> {
        let negated = self.eat('^');
        let mut items = Vec::new();
        let mut first = true;
        loop {
            let c = self.peek().ok_or("unclosed class")?;
            if c == ']' && !first {
                self.i += 1;
                break;
            }
            first = false;
            self.i += 1;
            let lo = if c == '\\' {
                match self.escape()? {
                    Ok(ch) => ch,
                    Err(item) => {
                        items.push(item);
                        continue;
                    }
                }
            } else {
                c
            };
            if self.peek() == Some('-') && self.s.get(self.i + 1).is_some_and(|&n| n != ']') {
                self.i += 1;
                let mut hi = self.peek().ok_or("unclosed class")?;
                self.i += 1;
                if hi == '\\' {
                    hi = self.escape()?.map_err(|_| "a class shorthand cannot end a range".to_string())?;
                }
                if hi < lo {
                    return Err("range out of order".into());
                }
                items.push(ClassItem::Range(lo, hi));
            } else {
                items.push(ClassItem::Range(lo, lo));
            }
        }
        Ok(Node::Class { negated, items })
    }
}

type Cont<'a> = &'a mut dyn FnMut(usize) -> bool;

fn seq_at(nodes: &[Node], s: &[char], pos: usize, k: Cont) -> bool {
    let Some((node, rest)) = nodes.split_first() else { return k(pos) };
    node_at(node, s, pos, &mut |p| seq_at(rest, s, p, k))
}

fn alts_at(alts: &[Vec<Node>], s: &[char], pos: usize, k: Cont) -> bool {
    for seq in alts {
        if seq_at(seq, s, pos, k) {
            return true;
        }
    }
    false
}

fn node_at(node: &Node, s: &[char], pos: usize, k: Cont) -> bool {
    match node {
        Node::Char(c) => s.get(pos) == Some(c) && k(pos + 1),
        Node::Any => s.get(pos).is_some_and(|&c| c != '\n' && c != '\r') && k(pos + 1),
        Node::Start => pos == 0 && k(pos),
        Node::End => pos == s.len() && k(pos),
        Node::Class { negated, items } => {
            s.get(pos).is_some_and(|&c| items.iter().any(|i| i.has(c)) != *negated) && k(pos + 1)
        }
        Node::Group(alts) => alts_at(alts, s, pos, k),
        Node::Look { negative, alts } => {
            let found = alts_at(alts, s, pos, &mut |_| true);
            found != *negative && k(pos)
        }
        Node::Repeat { node, min, max } => repeat_at(node, *min, *max, 0, s, pos, k),
    }
}

/// Greedy: as many as possible, then fewer. An iteration that consumes nothing ends it.
fn repeat_at(node: &Node, min: usize, max: Option<usize>, count: usize, s: &[char], pos: usize, k: Cont) -> bool {
    if max.is_none_or(|m| count < m)
        && node_at(node, s, pos, &mut |p| (p != pos || count < min) && repeat_at(node, min, max, count + 1, s, p, k))
    {
        return true;
    }
    count >= min && k(pos)
}

impl Regex {
    pub fn parse(pattern: &str) -> Result<Regex, String> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut p = Parser { s: &chars, i: 0 };
        let alts = p.alternation()?;
        if p.i != chars.len() {
            return Err("unmatched )".into());
        }
        Ok(Regex { alts })
    }

    /// JavaScript's `RegExp.prototype.test`: a match anywhere in `text`.
    pub fn test(&self, text: &str) -> bool {
        let s: Vec<char> = text.chars().collect();
        (0..=s.len()).any(|start| alts_at(&self.alts, &s, start, &mut |_| true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lists_are_exact_names() {
        assert!(matches("AskUserQuestion|ExitPlanMode", "ExitPlanMode"));
        assert!(!matches("AskUserQuestion|ExitPlanMode", "Bash"));
        assert!(!matches("AskUser", "AskUserQuestion"));
        assert!(matches("", "Bash"));
        assert!(matches("*", "Bash"));
        assert!(matches(" Bash ", "Bash"));
    }

    #[test]
    fn the_providers_every_tool_but_the_dialog_tools() {
        let m = "^(?!(AskUserQuestion|ExitPlanMode)$).*";
        for t in ["Bash", "Write", "Edit", "WebFetch", "mcp__db__query", "AskUserQuestionX", "XExitPlanMode"] {
            assert!(matches(m, t), "{t}");
        }
        for t in ["AskUserQuestion", "ExitPlanMode"] {
            assert!(!matches(m, t), "{t}");
        }
    }

    #[test]
    fn javascript_regex_subset() {
        assert!(matches("mcp__.*", "mcp__db__query"));
        assert!(matches("Edit|Write.*", "Writer"), "unanchored like RegExp.test");
        assert!(matches("^Edit$|^Write$", "Write"));
        assert!(!matches("^Edit$|^Write$", "Writer"));
        assert!(matches("Notebook.*", "NotebookEdit"));
        assert!(matches("^[A-Z][a-z]+$", "Bash"));
        assert!(!matches("^[A-Z][a-z]+$", "WebFetch"));
        assert!(matches("^[^_]+$", "Bash"));
        assert!(!matches("^[^_]+$", "mcp__x"));
        assert!(matches(r"^\w+__\w+$", "mcp__x"));
        assert!(matches("^a{2,3}$", "aaa"));
        assert!(!matches("^a{2,3}$", "aaaa"));
        assert!(matches("^(?:ab)+$", "ababab"));
        assert!(matches("^(?=B).*h$", "Bash"));
        assert!(matches(r"^Web\.?Fetch$", "WebFetch"));
        assert!(matches("^(a*)*$", "aaaa"), "an empty iteration ends the repetition");
    }

    #[test]
    fn an_invalid_pattern_matches_nothing() {
        for m in ["(Bash", "Bash)", "*Bash", "[a-", "^(?<n>x)", r"\q"] {
            assert!(!matches(m, "Bash"), "{m}");
        }
    }
}
