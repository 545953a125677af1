//! POSIX shell quoting: hook commands, attach commands, hints printed for the operator.

/// Whether `s` is a plain word: one no shell reads as anything but itself (letters,
/// digits and `-_./=:,+@%`), so it stays one word however many shells parse it.
pub fn is_plain(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
}

/// Quote `s` as one POSIX shell word. Plain words stay as they are.
pub fn quote(s: &str) -> String {
    if is_plain(s) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Quote and join words into one command line.
pub fn join<I, S>(words: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    words.into_iter().map(|w| quote(w.as_ref())).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote("/usr/bin/lab"), "/usr/bin/lab");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
        assert_eq!(join(["lab", "hook", "x;y"]), "lab hook 'x;y'");
        assert!(is_plain("/home/lab/.lab/tmux.sock") && is_plain("=lab-r-1:"));
        assert!(!is_plain("/x/s d;touch${IFS}/x/PWNED;#") && !is_plain("") && !is_plain("a\nb"));
    }
}
