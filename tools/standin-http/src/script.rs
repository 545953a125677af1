//! What both stand-ins' scripts are made of: turns (a matcher, a reply, an optional
//! delay), each used up by the first request that fits it, and the JSON file they are
//! read from.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::Path;
use std::time::Duration;

/// One scripted step: consumed by the first request `when` fits. `M` is the stand-in's
/// matcher, `R` its reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Turn<M: Default, R> {
    #[serde(default, rename = "match")]
    pub when: M,
    pub reply: R,
    /// Wait this long before answering (the response headers included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
}

impl<M: Default, R> Turn<M, R> {
    /// A turn answered at once, or after `delay`.
    pub fn new(when: M, reply: R, delay: Option<Duration>) -> Self {
        Turn { when, reply, delay_ms: delay.map(|d| d.as_millis() as u64) }
    }
    pub fn delay(&self) -> Option<Duration> {
        self.delay_ms.map(Duration::from_millis)
    }
}

/// Which of a script's turns are used up.
#[derive(Clone, Debug, Default)]
pub struct Consumed(Vec<bool>);

impl Consumed {
    pub fn new(turns: usize) -> Self {
        Consumed(vec![false; turns])
    }

    /// The first turn not used up that `fits`, now used up.
    pub fn pick<M: Default, R>(&mut self, turns: &[Turn<M, R>], fits: impl Fn(&M) -> bool) -> Option<usize> {
        let i = (0..turns.len().min(self.0.len())).find(|&i| !self.0[i] && fits(&turns[i].when))?;
        self.0[i] = true;
        Some(i)
    }

    /// The indices of the turns not used up yet.
    pub fn remaining(&self) -> Vec<usize> {
        self.0.iter().enumerate().filter(|(_, c)| !**c).map(|(i, _)| i).collect()
    }
}

/// Read and parse a JSON script file (a parse error is `InvalidData`).
pub fn read_json<T: DeserializeOwned>(path: &Path) -> io::Result<T> {
    let text = std::fs::read_to_string(path)?;
    serde_json::from_str(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_turn_is_used_once_by_the_first_request_it_fits() {
        let turns: Vec<Turn<u8, &str>> =
            vec![Turn::new(1, "a", None), Turn::new(2, "b", None), Turn::new(1, "c", None)];
        let mut used = Consumed::new(turns.len());
        assert_eq!(used.pick(&turns, |m| *m == 1), Some(0));
        assert_eq!(used.pick(&turns, |m| *m == 1), Some(2));
        assert_eq!(used.pick(&turns, |m| *m == 1), None);
        assert_eq!(used.remaining(), vec![1]);
        assert_eq!(Turn::new(0u8, (), Some(Duration::from_millis(1500))).delay(), Some(Duration::from_millis(1500)));
    }

    #[test]
    fn a_turn_s_json_has_match_reply_and_delay_ms() {
        let t: Turn<String, String> = serde_json::from_str(r#"{"reply": "hi", "delay_ms": 5}"#).unwrap();
        assert_eq!((t.when.as_str(), t.reply.as_str(), t.delay()), ("", "hi", Some(Duration::from_millis(5))));
        let v = serde_json::to_value(Turn::new("m".to_string(), 1, None)).unwrap();
        assert_eq!(v, serde_json::json!({"match": "m", "reply": 1}));
        let dir = std::env::temp_dir().join(format!("standin-script-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("bad.json");
        std::fs::write(&f, "{").unwrap();
        assert_eq!(read_json::<Turn<String, String>>(&f).unwrap_err().kind(), io::ErrorKind::InvalidData);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
