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

/// A query's terms as the ranking counts them in a message's text (lowercase): a
/// phrase is matched as it is written, a prefix as the start of a word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub text: String,
    pub prefix: bool,
}

/// The terms of `q` ([`to_fts`]'s, without the quoting).
pub fn terms(q: &str) -> Vec<Term> {
    let Some(fts) = to_fts(q) else { return Vec::new() };
    let mut out = Vec::new();
    let mut rest = fts.as_str();
    while let Some(start) = rest.find('"') {
        let after = &rest[start + 1..];
        // The closing quote: one not doubled.
        let mut end = 0;
        let b = after.as_bytes();
        while end < b.len() {
            if b[end] == b'"' {
                if b.get(end + 1) == Some(&b'"') {
                    end += 2;
                    continue;
                }
                break;
            }
            end += 1;
        }
        let text = after[..end].replace("\"\"", "\"").to_lowercase();
        rest = &after[(end + 1).min(after.len())..];
        let prefix = rest.starts_with('*');
        out.push(Term { text, prefix });
    }
    out
}

/// How well `lower` (a message's text, lowercased) matches `terms`, BM25-style over the
/// candidates being ranked: `df` how many of them hold each term, `n` how many there are,
/// `avg_len` their mean length in words.
pub fn score(lower: &str, terms: &[Term], df: &[usize], n: usize, avg_len: f64) -> f64 {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let len = lower.split_whitespace().count().max(1) as f64;
    terms
        .iter()
        .zip(df)
        .map(|(t, &df)| {
            let tf = count(lower, t) as f64;
            let idf = ((n as f64 - df as f64 + 0.5) / (df as f64 + 0.5) + 1.0).ln();
            idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg_len.max(1.0)))
        })
        .sum()
}

/// How often `t` occurs in `lower` (a prefix: words that start with it).
pub fn count(lower: &str, t: &Term) -> usize {
    if t.text.is_empty() {
        return 0;
    }
    lower
        .match_indices(&t.text)
        .filter(|(i, _)| {
            // At the start of a word; a whole term also ends one.
            let before = lower[..*i].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
            let end = i + t.text.len();
            let after = t.prefix || lower[end..].chars().next().is_none_or(|c| !c.is_alphanumeric());
            before && after
        })
        .count()
}

#[cfg(test)]
mod rank_tests {
    use super::*;

    #[test]
    fn terms_are_the_quoted_words_and_phrases_and_prefixes() {
        let t = terms(r#"Cache "the KEY bug" expla* say"s"#);
        let got: Vec<(&str, bool)> = t.iter().map(|t| (t.text.as_str(), t.prefix)).collect();
        assert_eq!(got, [("cache", false), ("the key bug", false), ("expla", true), ("say", false), ("s", false)]);
    }

    #[test]
    fn a_message_that_says_it_more_often_and_in_fewer_words_ranks_higher() {
        let t = terms("cache");
        let (n, avg) = (3, 8.0);
        let df = [3];
        let dense = score("cache cache miss", &t, &df, n, avg);
        let once = score("the cache is cold and everything misses today", &t, &df, n, avg);
        let none = score("cached values are caches, not the word", &t, &df, n, avg);
        assert!(dense > once && once > 0.0, "{dense} {once}");
        assert_eq!(none, 0.0, "whole words only");
        assert!(score("cached", &terms("cach*"), &[1], 1, 1.0) > 0.0, "a prefix starts a word");
    }
}
