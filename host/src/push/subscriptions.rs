//! The browsers that asked for pushes: each a PushSubscription (`endpoint`, `keys`),
//! checked when it comes in ([`check`], pure) and kept in `<home>/push/subscriptions.json`
//! (0600, written whole and atomically) so they survive restarts.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Mutex;

/// Subscriptions kept at most (a browser profile makes one; this is far above any desk).
pub const MAX_SUBSCRIPTIONS: usize = 200;
/// An endpoint URL's length at most.
pub const MAX_ENDPOINT: usize = 2048;

/// A PushSubscription's JSON as the browser gives it (`expirationTime` and the like are
/// taken and ignored).
#[derive(Debug, Clone, Deserialize)]
pub struct SubscriptionRequest {
    pub endpoint: String,
    pub keys: Keys,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Keys {
    /// The browser's P-256 public key, base64url, uncompressed (65 bytes).
    pub p256dh: String,
    /// The shared auth secret, base64url (16 bytes).
    pub auth: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscription {
    pub id: String,
    pub endpoint: String,
    pub keys: Keys,
    pub created_at: String,
}

/// What `GET /push/subscriptions` shows of one: not its keys.
#[derive(Debug, Clone, Serialize)]
pub struct SubscriptionBody {
    pub id: String,
    pub endpoint: String,
    pub created_at: String,
}

impl Subscription {
    pub fn body(&self) -> SubscriptionBody {
        SubscriptionBody { id: self.id.clone(), endpoint: self.endpoint.clone(), created_at: self.created_at.clone() }
    }
}

fn b64(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    let t = text.trim_end_matches('=');
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(t).ok()
}

/// The decoded keys of a subscription: the public key (a point on P-256) and the auth
/// secret.
pub fn decode_keys(keys: &Keys) -> Result<(web_push_native::p256::PublicKey, web_push_native::Auth), String> {
    let public = b64(&keys.p256dh).ok_or("keys.p256dh is not base64url")?;
    if public.len() != 65 || public[0] != 4 {
        return Err("keys.p256dh is not an uncompressed P-256 public key (65 bytes)".into());
    }
    let public = web_push_native::p256::PublicKey::from_sec1_bytes(&public)
        .map_err(|_| "keys.p256dh is not a point on P-256".to_string())?;
    let auth = b64(&keys.auth).ok_or("keys.auth is not base64url")?;
    if auth.len() != 16 {
        return Err("keys.auth is not 16 bytes".into());
    }
    Ok((public, web_push_native::Auth::clone_from_slice(&auth)))
}

/// Check a subscription request: an https endpoint (http only on a loopback address),
/// no credentials or fragment in it, and keys that decode.
pub fn check(req: &SubscriptionRequest) -> Result<(), String> {
    if req.endpoint.len() > MAX_ENDPOINT {
        return Err(format!("endpoint is longer than {MAX_ENDPOINT} characters"));
    }
    let url = reqwest::Url::parse(&req.endpoint).map_err(|e| format!("endpoint is not a URL ({e})"))?;
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    match url.scheme() {
        "https" => {}
        "http" if loopback => {}
        "http" => return Err("endpoint must be https (http only on a loopback address)".into()),
        other => return Err(format!("endpoint must be https, not {other}")),
    }
    if url.host().is_none() {
        return Err("endpoint has no host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("endpoint must not carry credentials".into());
    }
    if url.fragment().is_some() {
        return Err("endpoint must not have a fragment".into());
    }
    decode_keys(&req.keys).map(|_| ())
}

/// The kept subscriptions: one owner (this store), saved after every change.
#[derive(Debug)]
pub struct Store {
    path: PathBuf,
    list: Mutex<Vec<Subscription>>,
}

impl Store {
    /// Open the store at `path`; a missing file is an empty store, an unreadable one
    /// an error naming it (nothing is overwritten).
    pub fn open(path: PathBuf) -> anyhow::Result<Store> {
        let list = crate::fsutil::load_json_list(&path, "push subscriptions", "")?;
        Ok(Store { path, list: Mutex::new(list) })
    }

    fn save(&self, list: &[Subscription]) -> std::io::Result<()> {
        crate::fsutil::save_json_list(&self.path, list)
    }

    pub fn list(&self) -> Vec<Subscription> {
        self.list.lock().unwrap().clone()
    }

    /// Add a checked subscription; the same endpoint again replaces it (the browser made
    /// new keys) and keeps its id. `Err` when the store is full or cannot be saved.
    pub fn add(&self, req: SubscriptionRequest, now: String) -> Result<Subscription, String> {
        let mut list = self.list.lock().unwrap();
        let mut next = list.clone();
        let sub = match next.iter_mut().find(|s| s.endpoint == req.endpoint) {
            Some(s) => {
                s.keys = req.keys;
                s.clone()
            }
            None => {
                if next.len() >= MAX_SUBSCRIPTIONS {
                    return Err(format!("there are {MAX_SUBSCRIPTIONS} subscriptions already: remove one first"));
                }
                let u = uuid::Uuid::new_v4().simple().to_string();
                let s = Subscription {
                    id: format!("ps-{}", &u[..12]),
                    endpoint: req.endpoint,
                    keys: req.keys,
                    created_at: now,
                };
                next.push(s.clone());
                s
            }
        };
        self.save(&next).map_err(|e| format!("cannot save the subscriptions: {e}"))?;
        *list = next;
        Ok(sub)
    }

    /// Remove every subscription: how many there were.
    pub fn clear(&self) -> std::io::Result<usize> {
        let mut list = self.list.lock().unwrap();
        self.save(&[])?;
        let n = list.len();
        list.clear();
        Ok(n)
    }

    /// Remove one by id; false when there is none.
    pub fn remove(&self, id: &str) -> std::io::Result<bool> {
        let mut list = self.list.lock().unwrap();
        let next: Vec<Subscription> = list.iter().filter(|s| s.id != id).cloned().collect();
        if next.len() == list.len() {
            return Ok(false);
        }
        self.save(&next)?;
        *list = next;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real key pair's public half and a 16-byte secret, as a browser sends them.
    fn keys() -> Keys {
        use base64::Engine;
        use web_push_native::p256::elliptic_curve::sec1::ToEncodedPoint;
        let secret =
            web_push_native::p256::SecretKey::random(&mut web_push_native::p256::elliptic_curve::rand_core::OsRng);
        let e = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        Keys { p256dh: e.encode(secret.public_key().to_encoded_point(false).as_bytes()), auth: e.encode([7u8; 16]) }
    }

    fn req(endpoint: &str) -> SubscriptionRequest {
        SubscriptionRequest { endpoint: endpoint.into(), keys: keys() }
    }

    #[test]
    fn endpoints_are_https_or_loopback_http() {
        assert_eq!(check(&req("https://push.example.com/send/abc")), Ok(()));
        assert_eq!(check(&req("http://127.0.0.1:9000/p/1")), Ok(()));
        assert_eq!(check(&req("http://[::1]:9000/p/1")), Ok(()));
        assert_eq!(check(&req("http://localhost:9000/p/1")), Ok(()));
        for bad in [
            "http://push.example.com/x",
            "ftp://x/y",
            "not a url",
            "https://u:p@push.example.com/x",
            "https://p.example/x#f",
        ] {
            assert!(check(&req(bad)).is_err(), "{bad}");
        }
        assert!(check(&req(&format!("https://p.example/{}", "a".repeat(MAX_ENDPOINT)))).is_err());
    }

    #[test]
    fn keys_must_decode_to_a_point_and_16_bytes() {
        let mut r = req("https://p.example/x");
        r.keys.auth = "AAAA".into();
        assert!(check(&r).unwrap_err().contains("auth"));
        let mut r = req("https://p.example/x");
        r.keys.p256dh = "BAAA".into();
        assert!(check(&r).unwrap_err().contains("p256dh"));
        let mut r = req("https://p.example/x");
        r.keys.p256dh = format!("B{}", "A".repeat(86)); // 65 bytes, not on the curve
        assert!(check(&r).is_err());
    }

    #[test]
    fn the_store_keeps_one_per_endpoint_and_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("subscriptions.json");
        let store = Store::open(path.clone()).unwrap();
        let a = store.add(req("https://p.example/a"), "t1".into()).unwrap();
        let again = store.add(req("https://p.example/a"), "t2".into()).unwrap();
        assert_eq!(a.id, again.id);
        assert_ne!(a.keys, again.keys);
        let b = store.add(req("https://p.example/b"), "t3".into()).unwrap();
        let reopened = Store::open(path.clone()).unwrap();
        assert_eq!(reopened.list().len(), 2);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(reopened.remove(&b.id).unwrap());
        assert!(!reopened.remove(&b.id).unwrap());
        assert_eq!(Store::open(path.clone()).unwrap().list(), vec![again]);
        std::fs::write(&path, "{not json").unwrap();
        assert!(Store::open(path).unwrap_err().to_string().contains("not lab's list"));
    }
}
