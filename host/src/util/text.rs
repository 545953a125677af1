//! Text checks every layer may use: characters that hide text from whoever reads it,
//! how to name a character in an error, and where a text may be cut.

/// Bidirectional-text controls (the Trojan Source list, CVE-2021-42574): embeddings
/// and overrides, isolates, and the implicit marks. Line breaks of another kind are
/// controls already.
pub fn is_bidi_control(ch: char) -> bool {
    matches!(ch as u32, 0x202a..=0x202e | 0x2066..=0x2069 | 0x200e | 0x200f | 0x061c)
}

/// Invisible format characters that carry no meaning in an answer but can hide text
/// from whoever reads the card: zero-width space, the word joiner and invisible math
/// operators, the byte-order mark, the Mongolian vowel separator, and the tag
/// characters (U+E0000–U+E007F, used to smuggle invisible instructions to models).
/// Zero-width (non-)joiners stay: emoji and several scripts need them.
pub fn is_invisible_format(ch: char) -> bool {
    matches!(ch as u32, 0x200b | 0x2060..=0x2064 | 0xfeff | 0x180e | 0xe0000..=0xe007f)
}

/// `U+001B (ESC)`, `U+0085 (C1 control)`.
pub fn char_name(ch: char) -> String {
    const C0: [&str; 32] = [
        "NUL",
        "SOH",
        "STX",
        "ETX, Ctrl-C",
        "EOT, Ctrl-D",
        "ENQ",
        "ACK",
        "BEL",
        "BS",
        "TAB",
        "LF",
        "VT",
        "FF",
        "CR",
        "SO",
        "SI",
        "DLE",
        "DC1",
        "DC2",
        "DC3",
        "DC4",
        "NAK, Ctrl-U",
        "SYN",
        "ETB",
        "CAN",
        "EM",
        "SUB, Ctrl-Z",
        "ESC",
        "FS",
        "GS",
        "RS",
        "US",
    ];
    let name = match ch as u32 {
        c @ 0..=0x1f => C0[c as usize],
        0x7f => "DEL",
        0x80..=0x9f => "C1 control",
        _ => return format!("U+{:04X}", ch as u32),
    };
    format!("U+{:04X} ({name})", ch as u32)
}

/// The longest start of `text` at most `max` bytes long that ends on a character
/// boundary (all of it when it is shorter).
pub fn head(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_head_ends_on_a_character_boundary() {
        assert_eq!(super::head("héllo", 2), "h");
        assert_eq!(super::head("héllo", 3), "hé");
        assert_eq!(super::head("hi", 10), "hi");
        assert_eq!(super::head("", 0), "");
    }
}
