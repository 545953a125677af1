//! An operator's search words as an FTS5 query: the pure part of [`super`].
//!
//! What the box takes: words (every one must match, in any order), `"a phrase"` (those
//! words in that order), `word*` (a prefix). Everything else is text: a word is quoted
//! before it reaches FTS5, so `-`, `:`, `(` or `NEAR` in a query are searched for, not
//! taken as FTS5 syntax, and no query is a syntax error.

/// The FTS5 `MATCH` expression for `q`; None when it holds nothing to search for.
pub fn to_fts(q: &str) -> Option<String> {
    let mut terms: Vec<String> = Vec::new();
    let mut rest = q.trim();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('"') {
            // A phrase, to the next quote (or the end).
            let (phrase, tail) = after.split_once('"').unwrap_or((after, ""));
            let (phrase, prefix) = match tail.strip_prefix('*') {
                Some(t) => {
                    rest = t;
                    (phrase, true)
                }
                None => {
                    rest = tail;
                    (phrase, false)
                }
            };
            push(&mut terms, phrase, prefix);
        } else {
            let end = rest.find(|c: char| c.is_whitespace() || c == '"').unwrap_or(rest.len());
            let word = &rest[..end];
            rest = &rest[end..];
            let (word, prefix) = match word.strip_suffix('*') {
                Some(w) => (w.trim_end_matches('*'), true),
                None => (word, false),
            };
            push(&mut terms, word, prefix);
        }
        rest = rest.trim_start();
    }
    (!terms.is_empty()).then(|| terms.join(" "))
}

/// A term as an FTS5 string (`"…"`, quotes doubled), `*` after it for a prefix. A term
/// with no letter or digit in it matches nothing FTS5 indexes: it is left out.
fn push(terms: &mut Vec<String>, text: &str, prefix: bool) {
    if !text.chars().any(char::is_alphanumeric) {
        return;
    }
    let quoted = format!("\"{}\"", text.replace('"', "\"\""));
    terms.push(if prefix { quoted + "*" } else { quoted });
}

#[cfg(test)]
mod tests {
    use super::to_fts;

    #[test]
    fn words_phrases_and_prefixes_become_quoted_terms() {
        assert_eq!(to_fts("cache bug").as_deref(), Some(r#""cache" "bug""#));
        assert_eq!(to_fts(r#""the cache bug" fix"#).as_deref(), Some(r#""the cache bug" "fix""#));
        assert_eq!(to_fts("expla*").as_deref(), Some(r#""expla"*"#));
        assert_eq!(to_fts(r#""cache b"*"#).as_deref(), Some(r#""cache b"*"#));
    }

    #[test]
    fn fts_syntax_in_a_query_is_text_and_never_an_error() {
        assert_eq!(to_fts("NEAR(a b) -x col:y").as_deref(), Some(r#""NEAR(a" "b)" "-x" "col:y""#));
        assert_eq!(to_fts(r#"an "unclosed phrase"#).as_deref(), Some(r#""an" "unclosed phrase""#));
        assert_eq!(to_fts("  * \" \" -- "), None);
        assert_eq!(to_fts(""), None);
    }
}
