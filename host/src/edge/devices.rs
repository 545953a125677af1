//! The browsers and phones logged in to lab: one **device session** each, listed and
//! revocable one by one.
//!
//! - A login (the token in the form, the link `lab serve` prints, or a pairing code from
//!   `lab pair` / the UI's "Pair a phone") makes a device: an id, a name, how it came
//!   in, when, and when it was last seen. Its browser gets the cookie
//!   `lab_session=<id>.<secret>`; lab keeps only the secret's SHA-256.
//! - Devices live in `<home>/devices.json` (0600, written whole and atomically), so a
//!   paired phone stays paired across restarts (its push buttons keep working).
//! - A device is bound to the token it logged in under: `lab token --rotate` ends every
//!   device at once. One unused for [`IDLE_LIMIT`] ends too. At most [`MAX_DEVICES`]:
//!   a new login then ends the one seen longest ago.
//!
//! - A device also gets a **device key** at login (32 random bytes, hex; lab keeps its
//!   SHA-256): the page keeps it in its origin's storage and sends it with every API
//!   request (`X-Lab-Device-Key`). Browsers send a cookie to every port of a host; the
//!   key stays with lab's origin, so the cookie alone, caught by another server on
//!   another port of 127.0.0.1, opens nothing but the UI's static files.
//!
//! The decisions (is this cookie a live device, which one goes) are pure functions of
//! the records, the token and the time; [`Devices`] is their one owner and does the I/O.

use crate::util::secrets::{ct_eq, random_hex};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Devices kept at most.
pub const MAX_DEVICES: usize = 100;
/// A device not seen for this long is logged out.
pub const IDLE_LIMIT: Duration = Duration::from_secs(30 * 24 * 3600);
/// "Last seen" is written to disk at most this often per device (it is exact in memory).
const SEEN_WRITE_EVERY: u64 = 300;
/// A device's name at most, in characters.
pub const MAX_NAME: usize = 64;

/// How a device logged in (a login code's [`crate::edge::token::Grant`] names it too).
pub use crate::edge::token::Via;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Record {
    id: String,
    /// SHA-256 of the cookie's secret, hex.
    secret_sha256: String,
    /// Which token it logged in under ([`token_tag`]).
    token_tag: String,
    /// SHA-256 of its device key, hex (absent for a device logged in before keys: it
    /// must log in again to use the API).
    #[serde(default)]
    key_sha256: Option<String>,
    name: String,
    via: Via,
    /// Unix seconds.
    created: u64,
    last_seen: u64,
}

/// What `GET /devices` shows of one device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceBody {
    pub id: String,
    pub name: String,
    pub via: Via,
    pub created_at: String,
    pub last_seen_at: String,
    /// The device asking.
    pub current: bool,
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn rfc3339(secs: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}

fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

/// What binds a device to the token: a hash of it (never the token itself).
pub fn token_tag(token: &str) -> String {
    let mut input = b"lab_device\0".to_vec();
    input.extend_from_slice(token.as_bytes());
    sha256_hex(&input)[..32].to_string()
}

/// The cookie value's parts: `<id>.<secret>`, both lowercase hex of the right length.
fn parse_cookie(value: &str) -> Option<(&str, &str)> {
    let (id, secret) = value.split_once('.')?;
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    (hex(id, 16) && hex(secret, 64)).then_some((id, secret))
}

/// Is `r` a live device under the token tagged `tag` at `now`?
fn live(r: &Record, tag: &str, now: u64) -> bool {
    r.token_tag == tag && now.saturating_sub(r.last_seen) < IDLE_LIMIT.as_secs()
}

/// The index of the record `value` (a cookie) is the live session of, if any.
fn find(records: &[Record], value: &str, tag: &str, now: u64) -> Option<usize> {
    let (id, secret) = parse_cookie(value)?;
    let i = records.iter().position(|r| r.id == id)?;
    let r = &records[i];
    (ct_eq(sha256_hex(secret.as_bytes()).as_bytes(), r.secret_sha256.as_bytes()) && live(r, tag, now)).then_some(i)
}

/// Drop the dead (other token, idle too long), then make room for one more by ending
/// the ones seen longest ago.
fn prune(records: &mut Vec<Record>, tag: &str, now: u64) {
    records.retain(|r| live(r, tag, now));
    while records.len() >= MAX_DEVICES {
        let oldest = records.iter().enumerate().min_by_key(|(_, r)| r.last_seen).map(|(i, _)| i).unwrap_or(0);
        let r = records.remove(oldest);
        tracing::info!(device = %r.id, name = %r.name, "device logged out to make room for a new login");
    }
}

/// A device name given by the operator: trimmed, 1 to [`MAX_NAME`] characters, no
/// control, bidirectional or invisible characters.
pub fn check_name(name: &str) -> Result<String, String> {
    let name = name.trim();
    if name.is_empty() {
        return Err("name is empty".into());
    }
    if name.chars().count() > MAX_NAME {
        return Err(format!("name is longer than {MAX_NAME} characters"));
    }
    if let Some(ch) = name
        .chars()
        .find(|&c| c.is_control() || crate::util::text::is_bidi_control(c) || crate::util::text::is_invisible_format(c))
    {
        return Err(format!("name contains {}, which a device name cannot hold", crate::util::text::char_name(ch)));
    }
    Ok(name.to_string())
}

/// A name for a device that was given none, from its `User-Agent` (pure): "Firefox on
/// Android", "Safari on iPhone", "curl"; else "a browser".
pub fn name_from_user_agent(ua: &str) -> String {
    let has = |s: &str| ua.contains(s);
    let os = if has("iPhone") {
        Some("iPhone")
    } else if has("iPad") {
        Some("iPad")
    } else if has("Android") {
        Some("Android")
    } else if has("CrOS") {
        Some("ChromeOS")
    } else if has("Mac OS X") || has("Macintosh") {
        Some("macOS")
    } else if has("Windows") {
        Some("Windows")
    } else if has("Linux") {
        Some("Linux")
    } else {
        None
    };
    let browser = if has("Firefox/") || has("FxiOS/") {
        Some("Firefox")
    } else if has("Edg/") || has("EdgA/") || has("EdgiOS/") {
        Some("Edge")
    } else if has("OPR/") {
        Some("Opera")
    } else if has("SamsungBrowser/") {
        Some("Samsung Internet")
    } else if has("Chrome/") || has("CriOS/") || has("Chromium/") {
        Some("Chrome")
    } else if has("Safari/") {
        Some("Safari")
    } else {
        None
    };
    match (browser, os) {
        (Some(b), Some(o)) => format!("{b} on {o}"),
        (Some(b), None) => b.to_string(),
        (None, Some(o)) => format!("a browser on {o}"),
        (None, None) => {
            // A script: its tool's name (`curl/8.5.0` → `curl`), if it looks like one.
            let tool: String = ua.split('/').next().unwrap_or("").chars().take(MAX_NAME).collect();
            if !tool.is_empty() && tool.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
                tool
            } else {
                "a browser".into()
            }
        }
    }
}

/// The devices of one lab home.
pub struct Devices {
    path: PathBuf,
    records: Mutex<Vec<Record>>,
}

impl Devices {
    /// Open `<home>/devices.json`; missing is none, unreadable an error naming it
    /// (nothing is overwritten).
    pub fn open(path: PathBuf) -> anyhow::Result<Devices> {
        let records = crate::store::fsutil::load_json_list(&path, "devices", "; move it away to log every device out")?;
        Ok(Devices { path, records: Mutex::new(records) })
    }

    fn save(&self, records: &[Record]) -> std::io::Result<()> {
        crate::store::fsutil::save_json_list(&self.path, records)
    }

    /// Log a device in under `token`: its id and cookie value (`<id>.<secret>`).
    pub fn login(&self, token: &str, name: String, via: Via, now: SystemTime) -> std::io::Result<(String, String)> {
        self.login_with_key(token, name, via, now).map(|(id, cookie, _)| (id, cookie))
    }

    /// Log a device in under `token`: its id, cookie value and device key.
    pub fn login_with_key(
        &self,
        token: &str,
        name: String,
        via: Via,
        now: SystemTime,
    ) -> std::io::Result<(String, String, String)> {
        let (id, secret, key) = (random_hex(8)?, random_hex(32)?, random_hex(32)?);
        let now = unix(now);
        let tag = token_tag(token);
        let mut records = self.records.lock().unwrap();
        prune(&mut records, &tag, now);
        records.push(Record {
            id: id.clone(),
            secret_sha256: sha256_hex(secret.as_bytes()),
            token_tag: tag,
            key_sha256: Some(sha256_hex(key.as_bytes())),
            name,
            via,
            created: now,
            last_seen: now,
        });
        if let Err(e) = self.save(&records) {
            records.pop();
            return Err(e);
        }
        Ok((id.clone(), format!("{id}.{secret}"), key))
    }

    /// Whether `key` is device `id`'s device key (constant time; none given, or a
    /// device without one: no).
    pub fn key_matches(&self, id: &str, key: Option<&str>) -> bool {
        let Some(key) = key else { return false };
        let records = self.records.lock().unwrap();
        records
            .iter()
            .find(|r| r.id == id)
            .and_then(|r| r.key_sha256.as_deref())
            .is_some_and(|h| ct_eq(sha256_hex(key.as_bytes()).as_bytes(), h.as_bytes()))
    }

    /// The id of the live device whose cookie value is `value`, if any; it is seen now.
    pub fn check(&self, value: &str, token: &str, now: SystemTime) -> Option<String> {
        let now = unix(now);
        let mut records = self.records.lock().unwrap();
        let i = find(&records, value, &token_tag(token), now)?;
        let write = now.saturating_sub(records[i].last_seen) >= SEEN_WRITE_EVERY;
        records[i].last_seen = now;
        let id = records[i].id.clone();
        if write {
            if let Err(e) = self.save(&records) {
                tracing::warn!(error = %e, "cannot save when a device was last seen");
            }
        }
        Some(id)
    }

    /// The live devices under `token`, the one seen last first.
    pub fn list(&self, token: &str, now: SystemTime, current: Option<&str>) -> Vec<DeviceBody> {
        let (tag, now) = (token_tag(token), unix(now));
        let records = self.records.lock().unwrap();
        let mut out: Vec<&Record> = records.iter().filter(|r| live(r, &tag, now)).collect();
        out.sort_by(|a, b| b.last_seen.cmp(&a.last_seen).then(b.created.cmp(&a.created)));
        out.into_iter()
            .map(|r| DeviceBody {
                id: r.id.clone(),
                name: r.name.clone(),
                via: r.via,
                created_at: rfc3339(r.created),
                last_seen_at: rfc3339(r.last_seen),
                current: current == Some(r.id.as_str()),
            })
            .collect()
    }

    /// Device `id`'s name, live or not (as long as it is on the list).
    pub fn name(&self, id: &str) -> Option<String> {
        self.records.lock().unwrap().iter().find(|r| r.id == id).map(|r| r.name.clone())
    }

    /// Whether device `id` is live under `token` at `now` (not logged out, not of
    /// another token, not idle too long). Nothing is updated.
    pub fn is_live(&self, id: &str, token: &str, now: SystemTime) -> bool {
        let (tag, now) = (token_tag(token), unix(now));
        self.records.lock().unwrap().iter().any(|r| r.id == id && live(r, &tag, now))
    }

    /// End device `id` at once: `Ok(false)` when there is none.
    pub fn revoke(&self, id: &str) -> std::io::Result<bool> {
        let mut records = self.records.lock().unwrap();
        let Some(i) = records.iter().position(|r| r.id == id) else { return Ok(false) };
        let r = records.remove(i);
        if let Err(e) = self.save(&records) {
            records.insert(i, r);
            return Err(e);
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn store() -> (tempfile::TempDir, Devices) {
        let d = tempfile::tempdir().unwrap();
        let devices = Devices::open(d.path().join("devices.json")).unwrap();
        (d, devices)
    }

    const T: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const T2: &str = "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";

    #[test]
    fn a_device_key_is_its_own() {
        let (_d, devices) = store();
        let (a, _, key_a) = devices.login_with_key(T, "phone".into(), Via::Pairing, at(1_000_000)).unwrap();
        let (b, _, key_b) = devices.login_with_key(T, "laptop".into(), Via::Token, at(1_000_000)).unwrap();
        assert_eq!(key_a.len(), 64);
        assert!(devices.key_matches(&a, Some(&key_a)) && devices.key_matches(&b, Some(&key_b)));
        assert!(!devices.key_matches(&a, Some(&key_b)), "another device's key");
        assert!(!devices.key_matches(&a, None) && !devices.key_matches(&a, Some("")));
        assert!(!devices.key_matches("0000000000000000", Some(&key_a)));
        let text = std::fs::read_to_string(&devices.path).unwrap();
        assert!(!text.contains(&key_a), "only the key's hash is kept");
    }

    #[test]
    fn a_device_is_live_until_revoked_rotated_or_idle() {
        let (_d, devices) = store();
        let (id, _) = devices.login(T, "phone".into(), Via::Pairing, at(1_000_000)).unwrap();
        assert!(devices.is_live(&id, T, at(1_000_001)));
        assert!(!devices.is_live(&id, T2, at(1_000_001)), "another token");
        assert!(!devices.is_live(&id, T, at(1_000_000 + IDLE_LIMIT.as_secs())), "idle too long");
        assert!(!devices.is_live("0000000000000000", T, at(1_000_001)));
        devices.revoke(&id).unwrap();
        assert!(!devices.is_live(&id, T, at(1_000_001)), "logged out");
    }

    #[test]
    fn a_login_is_a_cookie_that_works_until_revoked() {
        let (d, devices) = store();
        let (id, cookie) = devices.login(T, "phone".into(), Via::Pairing, at(1_000_000)).unwrap();
        assert!(cookie.starts_with(&format!("{id}.")) && !cookie.contains(T));
        assert_eq!(devices.check(&cookie, T, at(1_000_010)).as_deref(), Some(id.as_str()));
        // Only the secret's hash is on disk, 0600.
        let file = std::fs::read_to_string(d.path().join("devices.json")).unwrap();
        assert!(!file.contains(cookie.split_once('.').unwrap().1) && file.contains("phone"), "{file}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(d.path().join("devices.json")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // Wrong secret, wrong shape, other device's id: no.
        let (other, _) = devices.login(T, "laptop".into(), Via::Token, at(1_000_000)).unwrap();
        let forged = format!("{other}.{}", cookie.split_once('.').unwrap().1);
        assert!(devices.check(&forged, T, at(1_000_020)).is_none());
        assert!(devices.check(&id, T, at(1_000_020)).is_none());
        assert!(devices.check("", T, at(1_000_020)).is_none());
        assert!(devices.check(&cookie.to_uppercase(), T, at(1_000_020)).is_none());
        // Revoked: gone at once, and a second revoke finds nothing.
        assert!(devices.revoke(&id).unwrap());
        assert!(devices.check(&cookie, T, at(1_000_030)).is_none());
        assert!(!devices.revoke(&id).unwrap());
        assert_eq!(devices.list(T, at(1_000_030), None).len(), 1);
    }

    #[test]
    fn devices_survive_a_reopen_and_end_with_a_rotation_or_idleness() {
        let (d, devices) = store();
        let (id, cookie) = devices.login(T, "phone".into(), Via::Pairing, at(1_000_000)).unwrap();
        drop(devices);
        let devices = Devices::open(d.path().join("devices.json")).unwrap();
        assert_eq!(devices.check(&cookie, T, at(1_000_100)).as_deref(), Some(id.as_str()), "a restart keeps it");
        assert!(devices.check(&cookie, T2, at(1_000_100)).is_none(), "another token ends it");
        assert!(devices.list(T2, at(1_000_100), None).is_empty());
        // Seen keeps it alive; idle for IDLE_LIMIT ends it.
        let later = 1_000_100 + IDLE_LIMIT.as_secs() - 1;
        assert!(devices.check(&cookie, T, at(later)).is_some());
        assert!(devices.check(&cookie, T, at(later + IDLE_LIMIT.as_secs())).is_none());
    }

    #[test]
    fn the_list_says_which_is_current_and_shows_no_secret() {
        let (_d, devices) = store();
        let (a, _) = devices.login(T, "one".into(), Via::Token, at(10)).unwrap();
        let (b, cookie_b) = devices.login(T, "two".into(), Via::LoginLink, at(20)).unwrap();
        devices.check(&cookie_b, T, at(30));
        let list = devices.list(T, at(40), Some(&a));
        assert_eq!(list.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(), [b.as_str(), a.as_str()]);
        assert!(list[1].current && !list[0].current);
        assert_eq!(list[0].via, Via::LoginLink);
        assert_eq!(list[1].created_at, "1970-01-01T00:00:10Z");
        let json = serde_json::to_string(&list).unwrap();
        assert!(!json.contains(cookie_b.split_once('.').unwrap().1) && !json.contains("secret"), "{json}");
    }

    #[test]
    fn a_full_list_ends_the_device_seen_longest_ago() {
        let (_d, devices) = store();
        let mut cookies = Vec::new();
        for i in 0..MAX_DEVICES as u64 {
            cookies.push(devices.login(T, format!("d{i}"), Via::Token, at(100 + i)).unwrap().1);
        }
        devices.check(&cookies[0], T, at(1_000));
        devices.login(T, "new".into(), Via::Pairing, at(1_001)).unwrap();
        assert_eq!(devices.list(T, at(1_002), None).len(), MAX_DEVICES);
        assert!(devices.check(&cookies[0], T, at(1_002)).is_some(), "seen lately: kept");
        assert!(devices.check(&cookies[1], T, at(1_002)).is_none(), "seen longest ago: ended");
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("devices.json");
        std::fs::write(&p, "{not json").unwrap();
        let e = Devices::open(p.clone()).err().unwrap().to_string();
        assert!(e.contains("devices.json") && e.contains("not lab's list of devices"), "{e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{not json", "nothing overwritten");
    }

    #[test]
    fn names_are_checked_or_made_from_the_user_agent() {
        assert_eq!(check_name("  Anna's phone ").unwrap(), "Anna's phone");
        assert!(check_name("   ").is_err());
        assert!(check_name(&"x".repeat(MAX_NAME + 1)).is_err());
        assert!(check_name("a\u{1b}[31mb").unwrap_err().contains("ESC"));
        assert!(check_name("a\u{202e}b").is_err());
        assert!(check_name("a\u{200b}b").is_err());
        let cases = [
            ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Mobile Safari/537.36", "Chrome on Android"),
            ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1", "Safari on iPhone"),
            ("Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0", "Firefox on Linux"),
            ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36 Edg/126.0", "Edge on Windows"),
            ("Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15", "Safari on macOS"),
            ("curl/8.5.0", "curl"),
            ("", "a browser"),
            ("<script>", "a browser"),
        ];
        for (ua, want) in cases {
            assert_eq!(name_from_user_agent(ua), want, "{ua}");
        }
    }
}
