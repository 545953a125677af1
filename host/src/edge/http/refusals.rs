//! How refused requests reach the log without letting a web page fill it: any page can
//! send a no-cors request a thousand times a second, each with a path of ~400 KB. So a
//! refusal is logged cut (its method, the first [`PATH_SHOWN`] bytes of its path, the
//! remote address and the reason — never the request's headers' secrets), and at most
//! [`PER_WINDOW`] of them per [`WINDOW`]; the ones held back are counted, and the next
//! logged refusal says how many there were.

use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

/// Refusals logged per window at most.
pub const PER_WINDOW: u32 = 20;
/// The window.
pub const WINDOW: Duration = Duration::from_secs(10);
/// Bytes of a refused request's path that reach the log.
pub const PATH_SHOWN: usize = 200;

/// The rate of one process's refusal log.
#[derive(Debug)]
pub struct Limiter {
    start: Option<Instant>,
    logged: u32,
    held_back: u64,
}

impl Limiter {
    pub const fn new() -> Limiter {
        Limiter { start: None, logged: 0, held_back: 0 }
    }

    /// Whether a refusal at `now` may be logged; if so, how many were held back since
    /// the last one logged (`Some(0)`: none).
    pub fn admit(&mut self, now: Instant) -> Option<u64> {
        if self.start.is_none_or(|s| now.duration_since(s) >= WINDOW) {
            self.start = Some(now);
            self.logged = 0;
        }
        if self.logged >= PER_WINDOW {
            self.held_back += 1;
            return None;
        }
        self.logged += 1;
        Some(std::mem::take(&mut self.held_back))
    }
}

impl Default for Limiter {
    fn default() -> Self {
        Limiter::new()
    }
}

/// `path` cut to at most [`PATH_SHOWN`] bytes (on a character boundary), with `…` when
/// it was longer.
pub fn shown_path(path: &str) -> String {
    if path.len() <= PATH_SHOWN {
        return path.to_string();
    }
    format!("{}… ({} bytes)", crate::util::text::head(path, PATH_SHOWN), path.len())
}

static LIMITER: LazyLock<Mutex<Limiter>> = LazyLock::new(|| Mutex::new(Limiter::new()));

/// Log one refusal (at `warn` when credentials were wrong or a guard refused it, else
/// `info`), if the rate allows.
pub fn log(warn: bool, remote: &str, method: &str, path: &str, reason: &str) {
    let Some(held_back) = LIMITER.lock().map(|mut l| l.admit(Instant::now())).unwrap_or(None) else { return };
    let route = shown_path(path);
    if warn {
        tracing::warn!(%remote, %method, %route, held_back, "refused: {reason}");
    } else {
        tracing::info!(%remote, %method, %route, held_back, "refused: {reason}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_a_window_s_worth_is_logged_and_the_rest_is_counted() {
        let mut l = Limiter::new();
        let t0 = Instant::now();
        for i in 0..PER_WINDOW {
            assert_eq!(l.admit(t0 + Duration::from_millis(i.into())), Some(0));
        }
        for _ in 0..1000 {
            assert_eq!(l.admit(t0 + Duration::from_secs(1)), None);
        }
        // The next window: the first one logged says what was held back.
        assert_eq!(l.admit(t0 + WINDOW), Some(1000));
        assert_eq!(l.admit(t0 + WINDOW), Some(0));
    }

    #[test]
    fn paths_are_cut_on_a_character_boundary() {
        assert_eq!(shown_path("/runs/r-1"), "/runs/r-1");
        let long = format!("/{}", "é".repeat(300));
        let s = shown_path(&long);
        assert!(s.len() < PATH_SHOWN + 30 && s.ends_with(&format!("… ({} bytes)", long.len())), "{s}");
        assert!(s.starts_with('/'));
        assert_eq!(shown_path(&"a".repeat(PATH_SHOWN)), "a".repeat(PATH_SHOWN));
    }
}
