//! lab's access token and what is derived from it.
//!
//! - `<home>/token` (0600): 32 random bytes from the OS, hex; created on first use,
//!   replaced by `lab token --rotate`. `lab serve` reads it on every check, so a
//!   rotation takes effect at once.
//! - The session cookie (`lab_session`) is not the token: it names one logged-in
//!   device ([`crate::edge::devices`]), bound to the token, so a rotation ends every device.
//! - Login codes: one-time, short-lived codes: the login link `lab serve` prints, and
//!   pairing codes (`lab pair`, the UI's "Pair a phone").

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::util::secrets::{ct_eq, random_hex};

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "lab_session";
/// How long a login code printed at start stays valid.
pub const LOGIN_CODE_TTL: Duration = Duration::from_secs(600);
/// How long a pairing code (`lab pair`, "Pair a phone") stays valid.
pub const PAIR_CODE_TTL: Duration = Duration::from_secs(300);

/// `<home>/token` ([`crate::store::paths::Home::token_file`]).
pub fn token_path(home: &Path) -> PathBuf {
    crate::store::paths::Home::new(home.to_path_buf()).token_file()
}

/// The token in `path`, or `None` if there is no token file yet. An empty file is an
/// error (never "no password").
pub fn read_token(path: &Path) -> std::io::Result<Option<String>> {
    let Some(bytes) = crate::store::fsutil::read_optional(path)? else { return Ok(None) };
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
    crate::store::fsutil::private_dir(home)?;
    let token = random_hex(32)?;
    crate::store::fsutil::write_atomic(&token_path(home), format!("{token}\n").as_bytes(), 0o600)?;
    Ok(token)
}

/// Does the request carry `token` as `Authorization: Bearer <token>`? `authorization`
/// is the raw header values. (Browsers use a device's cookie: [`crate::edge::devices`].)
pub fn bearer_matches<'a>(authorization: impl IntoIterator<Item = &'a str>, token: &str) -> bool {
    let bearer = authorization.into_iter().filter_map(|v| {
        let (scheme, rest) = v.trim().split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
    });
    let mut ok = false;
    for offered in bearer {
        ok |= ct_eq(offered.as_bytes(), token.as_bytes());
    }
    ok
}

/// The `lab_session` values in raw `Cookie` header values.
pub fn session_cookies<'a>(cookies: impl IntoIterator<Item = &'a str>) -> impl Iterator<Item = &'a str> {
    cookies.into_iter().flat_map(|c| c.split(';')).filter_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == SESSION_COOKIE).then_some(v)
    })
}

/// How a device logged in ([`crate::edge::devices`] keeps it with the device).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// The token, typed into the login form (or POSTed by a script).
    Token,
    /// The one-time link `lab serve` prints at start.
    LoginLink,
    /// A pairing code from `lab pair` or "Pair a phone".
    Pairing,
}

/// What a login code lets in: a device of this kind and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub via: Via,
    pub name: Option<String>,
}

/// Codes outstanding at most: a new one past this drops the oldest.
const MAX_CODES: usize = 32;

/// One-time login codes: each valid once, until its own expiry.
#[derive(Default)]
pub struct LoginCodes {
    codes: Mutex<Vec<(String, Instant, Grant)>>,
}

impl LoginCodes {
    /// A fresh code for `grant`, valid until `now + ttl`.
    pub fn issue(&self, now: Instant, ttl: Duration, grant: Grant) -> std::io::Result<String> {
        let code = random_hex(16)?;
        let mut codes = self.codes.lock().unwrap();
        codes.retain(|(_, until, _)| *until > now);
        if codes.len() >= MAX_CODES {
            codes.remove(0);
        }
        codes.push((code.clone(), now + ttl, grant));
        Ok(code)
    }

    /// Use `code`: its grant once, if it was issued and has not expired; it is gone after.
    pub fn redeem(&self, code: &str, now: Instant) -> Option<Grant> {
        let mut codes = self.codes.lock().unwrap();
        codes.retain(|(_, until, _)| *until > now);
        let mut found = None;
        for (i, (c, _, _)) in codes.iter().enumerate() {
            if ct_eq(c.as_bytes(), code.as_bytes()) {
                found = Some(i);
            }
        }
        found.map(|i| codes.remove(i).2)
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
    fn the_bearer_token_and_nothing_else() {
        let token = "a".repeat(64);
        assert!(bearer_matches([format!("Bearer {token}").as_str()], &token));
        assert!(bearer_matches([format!("bearer  {token}").as_str()], &token));
        assert!(bearer_matches(["Bearer wrong", format!("Bearer {token}").as_str()], &token));
        assert!(!bearer_matches(["Bearer wrong"], &token));
        assert!(!bearer_matches([format!("Basic {token}").as_str()], &token));
        assert!(!bearer_matches([token.as_str()], &token));
        let none: [&str; 0] = [];
        assert!(!bearer_matches(none, &token));
        let cookies: Vec<&str> = session_cookies(["a=1; lab_session=x.y", "lab_session=z; b=2"]).collect();
        assert_eq!(cookies, ["x.y", "z"]);
    }

    #[test]
    fn login_codes_work_once_and_expire() {
        let codes = LoginCodes::default();
        let t0 = Instant::now();
        let grant = |via| Grant { via, name: None };
        let a = codes.issue(t0, LOGIN_CODE_TTL, grant(Via::LoginLink)).unwrap();
        let named = Grant { via: Via::Pairing, name: Some("phone".into()) };
        let b = codes.issue(t0, PAIR_CODE_TTL, named.clone()).unwrap();
        let c = codes.issue(t0, LOGIN_CODE_TTL, grant(Via::LoginLink)).unwrap();
        assert_ne!(a, b);
        assert!(codes.redeem("nope", t0).is_none());
        assert_eq!(codes.redeem(&a, t0 + Duration::from_secs(1)), Some(grant(Via::LoginLink)));
        assert!(codes.redeem(&a, t0 + Duration::from_secs(2)).is_none(), "a code works once");
        assert!(codes.redeem(&b, t0 + PAIR_CODE_TTL).is_none(), "an expired code does not work");
        assert_eq!(codes.redeem(&c, t0 + PAIR_CODE_TTL), Some(grant(Via::LoginLink)), "each code its own expiry");
        // Many outstanding: the oldest goes, so memory stays bounded.
        let first = codes.issue(t0, LOGIN_CODE_TTL, grant(Via::Pairing)).unwrap();
        for _ in 0..MAX_CODES {
            codes.issue(t0, LOGIN_CODE_TTL, grant(Via::Pairing)).unwrap();
        }
        assert!(codes.redeem(&first, t0).is_none());
        assert!(codes.redeem(&b, t0).is_none());
    }
}
