//! lab's access token and what is derived from it.
//!
//! - `<home>/token` (0600): 32 random bytes from the OS, hex; created on first use,
//!   replaced by `lab token --rotate`. `lab serve` reads it on every check, so a
//!   rotation takes effect at once.
//! - The session cookie (`lab_session`) is not the token: it is
//!   `sha256("lab_session" ‖ salt ‖ token)` with a salt drawn at each start, so a
//!   rotated token (or a restart) ends every session.
//! - Login codes: one-time, short-lived codes printed by `lab serve` in its login link.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "lab_session";
/// How long a login code printed at start stays valid.
pub const LOGIN_CODE_TTL: Duration = Duration::from_secs(600);

/// `n` random bytes from the OS RNG, as lowercase hex.
pub fn random_hex(n: usize) -> std::io::Result<String> {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf).map_err(|e| std::io::Error::other(format!("OS random number generator: {e}")))?;
    Ok(hex(&buf))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `<home>/token`.
pub fn token_path(home: &Path) -> PathBuf {
    home.join("token")
}

/// The token in `path`, or `None` if there is no token file yet. An empty file is an
/// error (never "no password").
pub fn read_token(path: &Path) -> std::io::Result<Option<String>> {
    let Some(bytes) = crate::fsutil::read_optional(path)? else { return Ok(None) };
    let text = String::from_utf8(bytes)
        .map_err(|_| std::io::Error::other(format!("{} is not text; run `lab token --rotate`", path.display())))?;
    let token = text.trim();
    if token.len() < 32 {
        return Err(std::io::Error::other(format!(
            "{} holds no usable token (too short); run `lab token --rotate`",
            path.display()
        )));
    }
    Ok(Some(token.to_string()))
}

/// The token, created (32 random bytes, 0600) if there is none yet.
pub fn ensure_token(home: &Path) -> std::io::Result<String> {
    match read_token(&token_path(home))? {
        Some(t) => Ok(t),
        None => rotate_token(home),
    }
}

/// Replace the token with a fresh one; every older token and session stops working.
pub fn rotate_token(home: &Path) -> std::io::Result<String> {
    // `lab token` may be the first thing run on a new home: make it private (0700)
    // whatever the umask, as `lab serve` would.
    crate::fsutil::private_dir(home)?;
    let token = random_hex(32)?;
    crate::fsutil::write_atomic(&token_path(home), format!("{token}\n").as_bytes(), 0o600)?;
    Ok(token)
}

/// Equality that takes the same time wherever the first difference is (the length
/// is not secret).
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The session cookie value for `token` under this start's `salt`.
pub fn session_value(token: &str, salt: &str) -> String {
    let mut h = Sha256::new();
    h.update(SESSION_COOKIE.as_bytes());
    h.update([0]);
    h.update(salt.as_bytes());
    h.update([0]);
    h.update(token.as_bytes());
    hex(&h.finalize())
}

/// Does the request carry `token`, as `Authorization: Bearer <token>` or as the session
/// cookie derived from it? `authorization` and `cookies` are the raw header values.
pub fn credentials_match<'a>(
    authorization: impl IntoIterator<Item = &'a str>,
    cookies: impl IntoIterator<Item = &'a str>,
    token: &str,
    salt: &str,
) -> bool {
    let bearer = authorization.into_iter().filter_map(|v| {
        let (scheme, rest) = v.trim().split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
    });
    let mut ok = false;
    for offered in bearer {
        ok |= ct_eq(offered.as_bytes(), token.as_bytes());
    }
    let session = session_value(token, salt);
    for offered in cookies.into_iter().flat_map(|c| c.split(';')).filter_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == SESSION_COOKIE).then_some(v)
    }) {
        ok |= ct_eq(offered.as_bytes(), session.as_bytes());
    }
    ok
}

/// One-time login codes: valid once, for [`LOGIN_CODE_TTL`].
#[derive(Default)]
pub struct LoginCodes {
    codes: Mutex<Vec<(String, Instant)>>,
}

impl LoginCodes {
    /// A fresh code, valid until `now + LOGIN_CODE_TTL`.
    pub fn issue(&self, now: Instant) -> std::io::Result<String> {
        let code = random_hex(16)?;
        self.codes.lock().unwrap().push((code.clone(), now + LOGIN_CODE_TTL));
        Ok(code)
    }

    /// Use `code`: true once if it was issued and has not expired; it is gone after.
    pub fn redeem(&self, code: &str, now: Instant) -> bool {
        let mut codes = self.codes.lock().unwrap();
        codes.retain(|(_, until)| *until > now);
        let mut found = None;
        for (i, (c, _)) in codes.iter().enumerate() {
            if ct_eq(c.as_bytes(), code.as_bytes()) {
                found = Some(i);
            }
        }
        found.map(|i| codes.remove(i)).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_made_in_a_new_home_leaves_it_private() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().join("new/home");
        let t = ensure_token(&home).unwrap();
        assert_eq!(t.len(), 64);
        assert_eq!(std::fs::metadata(&home).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(token_path(&home)).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(ensure_token(&home).unwrap(), t, "the same token the second time");
    }
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn constant_time_equality_is_equality() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(ct_eq(b"", b""));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"xbc"));
        assert!(!ct_eq(b"abc", b"abcd"));
        assert!(!ct_eq(b"abc", b""));
    }

    #[test]
    fn tokens_are_random_private_and_rotate() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().join("home");
        let t1 = ensure_token(&home).unwrap();
        assert_eq!(t1.len(), 64);
        assert!(t1.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(ensure_token(&home).unwrap(), t1, "a second use reads the same token");
        let mode = std::fs::metadata(token_path(&home)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let t2 = rotate_token(&home).unwrap();
        assert_ne!(t1, t2);
        assert_eq!(read_token(&token_path(&home)).unwrap().as_deref(), Some(t2.as_str()));
        std::fs::write(token_path(&home), "\n").unwrap();
        assert!(read_token(&token_path(&home)).is_err(), "an empty token file is not an empty password");
        assert!(read_token(&d.path().join("missing")).unwrap().is_none());
    }

    #[test]
    fn bearer_or_derived_cookie_and_nothing_else() {
        let token = "a".repeat(64);
        let salt = "s1";
        let cookie = format!("other=1; {SESSION_COOKIE}={}", session_value(&token, salt));
        let bearer = format!("Bearer {token}");
        let none: [&str; 0] = [];
        assert!(credentials_match([bearer.as_str()], none, &token, salt));
        assert!(credentials_match([format!("bearer  {token}").as_str()], none, &token, salt));
        assert!(credentials_match(none, [cookie.as_str()], &token, salt));
        assert!(!credentials_match(none, none, &token, salt));
        assert!(!credentials_match(["Bearer wrong"], none, &token, salt));
        assert!(!credentials_match([format!("Basic {token}").as_str()], none, &token, salt));
        // The raw token is not a session cookie; another salt (a restart) or token (a rotation) ends sessions.
        assert!(!credentials_match(none, [format!("{SESSION_COOKIE}={token}").as_str()], &token, salt));
        assert!(!credentials_match(none, [cookie.as_str()], &token, "s2"));
        assert!(!credentials_match(none, [cookie.as_str()], &"b".repeat(64), salt));
    }

    #[test]
    fn login_codes_work_once_and_expire() {
        let codes = LoginCodes::default();
        let t0 = Instant::now();
        let a = codes.issue(t0).unwrap();
        let b = codes.issue(t0).unwrap();
        assert_ne!(a, b);
        assert!(!codes.redeem("nope", t0));
        assert!(codes.redeem(&a, t0 + Duration::from_secs(1)));
        assert!(!codes.redeem(&a, t0 + Duration::from_secs(2)), "a code works once");
        assert!(!codes.redeem(&b, t0 + LOGIN_CODE_TTL), "an expired code does not work");
    }
}
