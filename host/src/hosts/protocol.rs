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
        /// The runner's tmux server socket there (for the attach command).
        tmux_socket: String,
    },
    /// The outcome of the [`Down::Call`] with the same `id`.
    Reply { id: u64, reply: Reply },
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
    /// Do `op` on the runner's terminal; answered by one [`Up::Reply`].
    Call { id: u64, op: Op },
}

/// What lab serve asks of the terminal on the runner's machine: the terminal seam
/// ([`crate::terminal::Terminal`]) and starting and ending a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Op {
    Capture {
        target: String,
    },
    Key {
        target: String,
        key: String,
    },
    Literal {
        target: String,
        text: String,
    },
    Paste {
        target: String,
        buffer: String,
        text: String,
    },
    Alive {
        target: String,
    },
    /// A new detached session `target` running `argv` (no shell).
    Start {
        target: String,
        argv: Vec<String>,
    },
    Kill {
        target: String,
    },
}

/// A call's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case", deny_unknown_fields)]
pub enum Reply {
    Done,
    Text {
        text: String,
    },
    Alive {
        alive: bool,
    },
    /// The runner refused the call or the terminal failed: why.
    Error {
        message: String,
    },
}

/// The most a typed or pasted text may hold.
pub const MAX_TEXT: usize = 256 << 10;
/// The most a session's command line may hold, all arguments together.
pub const MAX_ARGV: usize = 16 << 10;

/// Whether the runner does `op`: only sessions named as lab names them (`lab-…`),
/// key names as providers' plans use them, texts and command lines within bounds.
pub fn check_op(op: &Op) -> Result<(), String> {
    let target = match op {
        Op::Capture { target }
        | Op::Key { target, .. }
        | Op::Literal { target, .. }
        | Op::Paste { target, .. }
        | Op::Alive { target }
        | Op::Start { target, .. }
        | Op::Kill { target } => target,
    };
    let lab_name = |s: &str| {
        s.strip_prefix("lab-").is_some_and(|rest| {
            (1..=64).contains(&rest.len())
                && rest.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
    };
    if !lab_name(target) {
        return Err(format!("{target:?} is not a session lab names (lab-[a-z0-9-]+)"));
    }
    match op {
        Op::Key { key, .. }
            if key.is_empty() || key.len() > 16 || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') =>
        {
            Err(format!("{key:?} is not a key name ([A-Za-z0-9-]{{1,16}})"))
        }
        Op::Literal { text, .. } | Op::Paste { text, .. } if text.len() > MAX_TEXT => {
            Err(format!("a text of {} bytes is over the {MAX_TEXT}-byte limit", text.len()))
        }
        Op::Paste { buffer, .. } if !lab_name(buffer) => Err(format!("{buffer:?} is not a buffer lab names")),
        Op::Start { argv, .. } if argv.is_empty() || argv[0].is_empty() => Err("an empty command line".into()),
        Op::Start { argv, .. } if argv.iter().map(|a| a.len() + 1).sum::<usize>() > MAX_ARGV => {
            Err(format!("a command line over {MAX_ARGV} bytes"))
        }
        Op::Start { argv, .. } if argv.iter().any(|a| a.contains('\0')) => Err("a NUL byte in the command line".into()),
        _ => Ok(()),
    }
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
        let up = Up::Hello { hostname: "build-2".into(), home: "/home/lab/.lab".into(), tmux_socket: "/s".into() };
        let text = encode(&up);
        assert_eq!(text, r#"{"type":"hello","hostname":"build-2","home":"/home/lab/.lab","tmux_socket":"/s"}"#);
        assert_eq!(decode::<Up>(&text).unwrap(), up);
        let down = Down::Welcome { version: VERSION.into() };
        assert_eq!(decode::<Down>(&encode(&down)).unwrap(), down);
        for bad in [
            "",
            "null",
            "{}",
            r#"{"type":"nope"}"#,
            r#"{"type":"hello","hostname":"a"}"#,
            r#"{"type":"hello","hostname":"a","home":"b","tmux_socket":"c","extra":1}"#,
            r#"{"type":"reply","id":1,"reply":{"reply":"maybe"}}"#,
            "[1,2]",
        ] {
            assert!(matches!(decode::<Up>(bad), Err(FrameError::Malformed(_))), "{bad}");
        }
        let call = Down::Call { id: 7, op: Op::Key { target: "lab-r-1".into(), key: "Enter".into() } };
        assert_eq!(encode(&call), r#"{"type":"call","id":7,"op":{"op":"key","target":"lab-r-1","key":"Enter"}}"#);
        assert_eq!(decode::<Down>(&encode(&call)).unwrap(), call);
        let reply = Up::Reply { id: 7, reply: Reply::Alive { alive: true } };
        assert_eq!(decode::<Up>(&encode(&reply)).unwrap(), reply);
        let huge = format!(r#"{{"type":"hello","hostname":"{}","home":"","tmux_socket":""}}"#, "a".repeat(MAX_FRAME));
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
    fn the_runner_only_does_what_lab_would_ask() {
        let t = || "lab-r-0a1b".to_string();
        for ok in [
            Op::Capture { target: t() },
            Op::Key { target: t(), key: "Down".into() },
            Op::Literal { target: t(), text: "hi;".into() },
            Op::Paste { target: t(), buffer: "lab-r-0a1b".into(), text: "x\ny".into() },
            Op::Start { target: t(), argv: vec!["/usr/bin/lab".into(), "agent-exec".into()] },
            Op::Kill { target: t() },
        ] {
            assert_eq!(check_op(&ok), Ok(()), "{ok:?}");
        }
        for (bad, why) in [
            (Op::Capture { target: "main".into() }, "not a session lab names"),
            (Op::Capture { target: "lab-../x".into() }, "not a session lab names"),
            (Op::Alive { target: "lab-".into() }, "not a session lab names"),
            (Op::Key { target: t(), key: "C-c; kill-server".into() }, "not a key name"),
            (Op::Key { target: t(), key: String::new() }, "not a key name"),
            (Op::Literal { target: t(), text: "x".repeat(MAX_TEXT + 1) }, "over the"),
            (Op::Paste { target: t(), buffer: "b".into(), text: String::new() }, "not a buffer"),
            (Op::Start { target: t(), argv: vec![] }, "empty command line"),
            (Op::Start { target: t(), argv: vec!["x".repeat(MAX_ARGV)] }, "over"),
            (Op::Start { target: t(), argv: vec!["a\0b".into()] }, "NUL"),
        ] {
            let e = check_op(&bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn labels_are_cleaned() {
        assert_eq!(clean_label("a\u{1b}[31mb\nc"), "a[31mbc");
        assert_eq!(clean_label(&"x".repeat(300)).len(), 255);
    }
}
