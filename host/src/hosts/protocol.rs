//! The runner stream: what `lab runner` and `lab serve` say to each other over one
//! WebSocket (`GET /runners/connect`), and the rules both sides check. Pure: encoding,
//! decoding and the checks; the I/O is in [`super::link`] (serve) and
//! [`crate::runner`] (the runner).
//!
//! The upgrade request carries `Authorization: Bearer <credential>` (from `lab hosts
//! add NAME`), [`NAME_HEADER`] and [`VERSION_HEADER`]. lab serve answers 401 for a
//! wrong credential, 409 for another lab version (naming both) or a host already
//! connected, else upgrades. Then each side sends JSON text frames ([`Up`], [`Down`]),
//! at most [`MAX_FRAME`] bytes; anything else ends the connection with a reason.

use serde::{Deserialize, Serialize};

/// The runner's host name (as added with `lab hosts add`).
pub const NAME_HEADER: &str = "x-lab-runner-name";
/// The runner's lab version ([`VERSION`]); it must equal lab serve's.
pub const VERSION_HEADER: &str = "x-lab-runner-version";
/// The route runners dial.
pub const PATH: &str = "/runners/connect";
/// The version both ends must run: this lab's.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The largest frame either side accepts.
pub const MAX_FRAME: usize = 1 << 20;

/// WebSocket close codes lab serve ends a runner's connection with (4000–4999 are the
/// application's): the runner stops for these instead of dialling again.
pub mod close {
    /// The host's credential was removed (`lab hosts remove`).
    pub const REVOKED: u16 = 4001;
    /// The runner sent something that is not the protocol.
    pub const PROTOCOL: u16 = 4002;
    /// Another runner connected with the same name and this one was replaced.
    pub const REPLACED: u16 = 4003;
}

/// Runner → lab serve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Up {
    /// First frame: who and where the runner is.
    Hello {
        /// The machine's own host name (shown to the operator; not trusted for anything).
        hostname: String,
        /// The runner's lab home on that machine.
        home: String,
    },
}

/// lab serve → runner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Down {
    /// The answer to `hello`: the runner is connected.
    Welcome {
        /// lab serve's version.
        version: String,
    },
}

/// Why a frame was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("a frame of {0} bytes is over the {MAX_FRAME}-byte limit")]
    TooLarge(usize),
    #[error("not a message of the runner protocol: {0}")]
    Malformed(String),
}

/// Decode one text frame.
pub fn decode<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, FrameError> {
    if text.len() > MAX_FRAME {
        return Err(FrameError::TooLarge(text.len()));
    }
    serde_json::from_str(text).map_err(|e| FrameError::Malformed(e.to_string()))
}

/// Encode one frame.
pub fn encode<T: Serialize>(msg: &T) -> String {
    serde_json::to_string(msg).expect("protocol messages serialise")
}

/// The refusal for a runner of another version, naming both (None: the same).
pub fn version_refusal(runner: &str) -> Option<String> {
    (runner != VERSION).then(|| {
        format!(
            "this lab serve is version {VERSION} and the runner is version {}: run the same lab on both machines",
            if runner.is_empty() { "(not given)" } else { runner }
        )
    })
}

/// What the hello's free text may hold: printable, at most 255 characters.
pub fn clean_label(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(255).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_refuse_what_is_not_the_protocol() {
        let up = Up::Hello { hostname: "build-2".into(), home: "/home/lab/.lab".into() };
        let text = encode(&up);
        assert_eq!(text, r#"{"type":"hello","hostname":"build-2","home":"/home/lab/.lab"}"#);
        assert_eq!(decode::<Up>(&text).unwrap(), up);
        let down = Down::Welcome { version: VERSION.into() };
        assert_eq!(decode::<Down>(&encode(&down)).unwrap(), down);
        for bad in [
            "",
            "null",
            "{}",
            r#"{"type":"nope"}"#,
            r#"{"type":"hello","hostname":"a"}"#,
            r#"{"type":"hello","hostname":"a","home":"b","extra":1}"#,
            "[1,2]",
        ] {
            assert!(matches!(decode::<Up>(bad), Err(FrameError::Malformed(_))), "{bad}");
        }
        let huge = format!(r#"{{"type":"hello","hostname":"{}","home":""}}"#, "a".repeat(MAX_FRAME));
        assert_eq!(decode::<Up>(&huge), Err(FrameError::TooLarge(huge.len())));
    }

    #[test]
    fn another_version_is_refused_naming_both() {
        assert_eq!(version_refusal(VERSION), None);
        let e = version_refusal("0.0.1-old").unwrap();
        assert!(e.contains(&format!("version {VERSION}")) && e.contains("version 0.0.1-old"), "{e}");
        assert!(version_refusal("").unwrap().contains("(not given)"));
    }

    #[test]
    fn labels_are_cleaned() {
        assert_eq!(clean_label("a\u{1b}[31mb\nc"), "a[31mbc");
        assert_eq!(clean_label(&"x".repeat(300)).len(), 255);
    }
}
