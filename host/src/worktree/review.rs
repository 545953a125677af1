//! Review comments as one message to the agent: each comment quoted with its file, its
//! line and that line's text, so the agent needs no diff view to know what is meant.

use serde::Deserialize;
use std::path::{Component, Path};

/// Comments in one review at most.
pub const MAX_COMMENTS: usize = 200;
/// A quoted line is cut to this many characters.
pub const QUOTE_MAX: usize = 300;

/// Which side of the diff a comment's line number counts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The file as the agent left it.
    #[default]
    New,
    /// The file at the base commit.
    Old,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Comment {
    pub path: String,
    pub line: u32,
    #[serde(default)]
    pub side: Side,
    pub text: String,
}

/// A path a comment may name: relative, inside the repository, no `..`.
pub fn check_path(path: &str) -> Result<(), String> {
    let p = Path::new(path);
    let plain = !path.is_empty()
        && path.len() <= 4096
        && !path.contains('\0')
        && p.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if plain {
        Ok(())
    } else {
        Err(format!("comment path {path:?} is not a relative path inside the repository"))
    }
}

/// Line `line` (from 1) of `content`, for quoting: control characters shown as `�`,
/// cut to [`QUOTE_MAX`] characters. An error names a line past the end.
pub fn line_text(content: &[u8], line: u32, path: &str) -> Result<String, String> {
    let text = String::from_utf8_lossy(content);
    let count = text.lines().count();
    let Some(l) = (line as usize).checked_sub(1).and_then(|i| text.lines().nth(i)) else {
        return Err(format!("{path} has no line {line} (it has {count})"));
    };
    let mut shown: String =
        l.chars().take(QUOTE_MAX).map(|c| if c.is_control() && c != '\t' { '\u{fffd}' } else { c }).collect();
    if l.chars().count() > QUOTE_MAX {
        shown.push('…');
    }
    Ok(shown)
}

/// The message the agent gets: the summary, then each comment with where it is, the
/// line quoted, and what the operator said.
pub fn message(comments: &[(Comment, String)], summary: Option<&str>) -> String {
    let mut m = String::from("Review of your changes");
    match comments.len() {
        0 => m.push_str(".\n"),
        1 => m.push_str(" (1 comment):\n"),
        n => m.push_str(&format!(" ({n} comments):\n")),
    }
    if let Some(s) = summary.map(str::trim).filter(|s| !s.is_empty()) {
        m.push('\n');
        m.push_str(s);
        m.push('\n');
    }
    for (i, (c, text)) in comments.iter().enumerate() {
        let side = match c.side {
            Side::New => "",
            Side::Old => " (before your change)",
        };
        m.push_str(&format!("\n{}. {} line {}{side}:\n", i + 1, c.path, c.line));
        m.push_str(&format!("   > {text}\n"));
        for l in c.text.trim().lines() {
            m.push_str("   ");
            m.push_str(l);
            m.push('\n');
        }
    }
    if !comments.is_empty() {
        m.push_str("\nPlease address each comment.");
    }
    m.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_relative_paths_inside_the_repository_are_taken() {
        assert!(check_path("src/a.rs").is_ok());
        assert!(check_path("./a").is_ok());
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a\0b"] {
            assert!(check_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_line_is_quoted_plainly_and_a_missing_one_is_named() {
        let content = b"one\ntwo \x1b[31mred\nthree";
        assert_eq!(line_text(content, 1, "f").unwrap(), "one");
        assert_eq!(line_text(content, 2, "f").unwrap(), "two \u{fffd}[31mred");
        assert_eq!(line_text(content, 3, "f").unwrap(), "three");
        assert_eq!(line_text(content, 4, "f").unwrap_err(), "f has no line 4 (it has 3)");
        assert!(line_text(content, 0, "f").is_err());
        let long = "x".repeat(QUOTE_MAX + 5);
        assert_eq!(line_text(long.as_bytes(), 1, "f").unwrap().chars().count(), QUOTE_MAX + 1);
    }

    #[test]
    fn the_message_quotes_each_comment_with_its_place() {
        let c = |path: &str, line, side, text: &str| Comment { path: path.into(), line, side, text: text.into() };
        let m = message(
            &[
                (c("src/a.rs", 12, Side::New, "Rename this.\nAnd test it."), "let x = 1;".into()),
                (c("b.txt", 3, Side::Old, "Why was this removed?"), "keep me".into()),
            ],
            Some("Close, two things."),
        );
        assert_eq!(
            m,
            "Review of your changes (2 comments):\n\nClose, two things.\n\n\
1. src/a.rs line 12:\n   > let x = 1;\n   Rename this.\n   And test it.\n\n\
2. b.txt line 3 (before your change):\n   > keep me\n   Why was this removed?\n\nPlease address each comment."
        );
        assert_eq!(message(&[], Some("Looks good; commit it.")), "Review of your changes.\n\nLooks good; commit it.");
    }
}
