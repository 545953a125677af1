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

/// Whose credential a subscription was made with: it ends when that credential does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Owner {
    /// A logged-in device (its id): logged out, expired or ended by a token rotation,
    /// its subscriptions go.
    Device(String),
    /// A script with lab's token (a tag of it, never the token): rotated, they go.
    Token(String),
    /// Anyone on this machine: a lab that needs no token (`--no-token`).
    Anyone,
}

/// Whether an owner's credential still stands (lab serve's access rules decide).
pub type Standing = std::sync::Arc<dyn Fn(&Owner) -> bool + Send + Sync>;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscription {
    pub id: String,
    pub endpoint: String,
    pub keys: Keys,
    pub created_at: String,
    /// Absent in subscriptions kept before they were bound: such a one is bound to
    /// nothing that can be revoked, and is removed.
    #[serde(default)]
    pub owner: Option<Owner>,
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

/// The environment variable that lets lab serve push over `http://` to a loopback
/// address (`1`): tests and local push stand-ins only.
pub const ALLOW_LOOPBACK_HTTP_ENV: &str = "LAB_PUSH_ALLOW_LOOPBACK_HTTP";

/// Where pushes may go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rules {
    /// Loopback addresses (and `http://` to them) too: [`ALLOW_LOOPBACK_HTTP_ENV`].
    pub loopback: bool,
}

impl Rules {
    /// The rules lab serve's environment sets.
    pub fn from_env() -> Rules {
        Rules { loopback: std::env::var(ALLOW_LOOPBACK_HTTP_ENV).is_ok_and(|v| v.trim() == "1") }
    }
}

pub use crate::util::net::is_public;

/// Whether a push may go to `ip` under `rules`: why not, if not.
pub fn address_allowed(ip: std::net::IpAddr, rules: Rules) -> Result<(), String> {
    if is_public(ip) || (rules.loopback && ip.is_loopback()) {
        Ok(())
    } else {
        Err(format!("{ip} is not a public address (push endpoints are on the internet)"))
    }
}

/// Check an endpoint URL under `rules`: https (http only to loopback, and only when
/// the rules allow loopback), no credentials or fragment, and a host that is a public
/// address or a name (a name's addresses are checked each time a push is sent: [`Guarded`]).
pub fn check_endpoint(endpoint: &str, rules: Rules) -> Result<reqwest::Url, String> {
    if endpoint.len() > MAX_ENDPOINT {
        return Err(format!("endpoint is longer than {MAX_ENDPOINT} characters"));
    }
    let url = reqwest::Url::parse(endpoint).map_err(|e| format!("endpoint is not a URL ({e})"))?;
    let ip = match url.host() {
        Some(url::Host::Ipv4(ip)) => Some(std::net::IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Some(std::net::IpAddr::V6(ip)),
        Some(url::Host::Domain(d)) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            (d == "localhost" || d.ends_with(".localhost"))
                .then_some(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))
        }
        None => return Err("endpoint has no host".into()),
    };
    if let Some(ip) = ip {
        address_allowed(ip, rules).map_err(|e| format!("endpoint: {e}"))?;
    }
    match url.scheme() {
        "https" => {}
        "http" if rules.loopback && ip.is_some_and(|ip| ip.is_loopback()) => {}
        "http" => return Err("endpoint must be https".into()),
        other => return Err(format!("endpoint must be https, not {other}")),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("endpoint must not carry credentials".into());
    }
    if url.fragment().is_some() {
        return Err("endpoint must not have a fragment".into());
    }
    Ok(url)
}

/// Check a subscription request: its endpoint ([`check_endpoint`]) and keys that decode.
pub fn check(req: &SubscriptionRequest, rules: Rules) -> Result<(), String> {
    check_endpoint(&req.endpoint, rules)?;
    decode_keys(&req.keys).map(|_| ())
}

/// The push client's resolver: a name's addresses that a push may go to
/// ([`address_allowed`]), resolved at each connection, so a name that points at a
/// private address (or is made to, later) reaches nothing.
#[derive(Debug, Clone, Copy)]
pub struct Guarded(pub Rules);

impl reqwest::dns::Resolve for Guarded {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let rules = self.0;
        Box::pin(async move {
            let host = name.as_str().to_string();
            let all: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<std::net::SocketAddr> =
                all.iter().copied().filter(|a| address_allowed(a.ip(), rules).is_ok()).collect();
            if allowed.is_empty() {
                let e: Box<dyn std::error::Error + Send + Sync> =
                    format!("{host} resolves to no public address ({} found)", all.len()).into();
                return Err(e);
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
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
        let list = crate::store::fsutil::load_json_list(&path, "push subscriptions", "")?;
        Ok(Store { path, list: Mutex::new(list) })
    }

    fn save(&self, list: &[Subscription]) -> std::io::Result<()> {
        crate::store::fsutil::save_json_list(&self.path, list)
    }

    pub fn list(&self) -> Vec<Subscription> {
        self.list.lock().unwrap().clone()
    }

    /// Add a checked subscription made by `owner`; the same endpoint again replaces it
    /// (the browser made new keys, or another login made it) and keeps its id. `Err`
    /// when the store is full or cannot be saved.
    pub fn add(&self, req: SubscriptionRequest, owner: Owner, now: String) -> Result<Subscription, String> {
        let mut list = self.list.lock().unwrap();
        let mut next = list.clone();
        let sub = match next.iter_mut().find(|s| s.endpoint == req.endpoint) {
            Some(s) => {
                s.keys = req.keys;
                s.owner = Some(owner);
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
                    owner: Some(owner),
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

    /// Remove every subscription `keep` says no to: those removed.
    pub fn retain(&self, keep: impl Fn(&Subscription) -> bool) -> std::io::Result<Vec<Subscription>> {
        let mut list = self.list.lock().unwrap();
        let (kept, gone): (Vec<Subscription>, Vec<Subscription>) = list.iter().cloned().partition(|s| keep(s));
        if !gone.is_empty() {
            self.save(&kept)?;
            *list = kept;
        }
        Ok(gone)
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

    const STRICT: Rules = Rules { loopback: false };
    const LOOPBACK: Rules = Rules { loopback: true };

    #[test]
    fn endpoints_are_https_to_a_public_address() {
        assert_eq!(check(&req("https://push.example.com/send/abc"), STRICT), Ok(()));
        assert_eq!(check(&req("https://8.8.8.8/send/abc"), STRICT), Ok(()));
        assert_eq!(check(&req("https://[2606:4700::1111]:8443/p"), STRICT), Ok(()));
        for private in [
            "https://127.0.0.1/p",
            "https://localhost/p",
            "https://a.localhost./p",
            "https://10.1.2.3/p",
            "https://172.16.0.1/p",
            "https://192.168.1.1/p",
            "https://169.254.169.254/latest/meta-data",
            "https://100.64.0.1/p",
            "https://0.0.0.0/p",
            "https://0x7f.1/p",
            "https://2130706433/p",
            "https://[::1]/p",
            "https://[::ffff:169.254.169.254]/p",
            "https://[::ffff:7f00:1]/p",
            "https://[64:ff9b::a9fe:a9fe]/p",
            "https://[fe80::1]/p",
            "https://[fd00::1]/p",
            "https://[::]/p",
            "https://224.0.0.1/p",
            "https://255.255.255.255/p",
            "https://198.18.0.1/p",
            "https://240.0.0.1/p",
        ] {
            let e = check(&req(private), STRICT).unwrap_err();
            assert!(e.contains("not a public address"), "{private}: {e}");
        }
        for bad in ["http://127.0.0.1:9000/p/1", "http://localhost:9000/p/1"] {
            assert!(check(&req(bad), STRICT).is_err(), "{bad}: loopback http needs the test setting");
        }
        // The test setting: http (and https) to loopback, nothing else private.
        assert_eq!(check(&req("http://127.0.0.1:9000/p/1"), LOOPBACK), Ok(()));
        assert_eq!(check(&req("http://[::1]:9000/p/1"), LOOPBACK), Ok(()));
        assert_eq!(check(&req("http://localhost:9000/p/1"), LOOPBACK), Ok(()));
        assert!(check(&req("http://10.0.0.1:9000/p/1"), LOOPBACK).is_err());
        assert!(check(&req("https://169.254.169.254/p"), LOOPBACK).is_err());
        for bad in [
            "http://push.example.com/x",
            "ftp://x/y",
            "not a url",
            "https://u:p@push.example.com/x",
            "https://p.example/x#f",
        ] {
            assert!(check(&req(bad), LOOPBACK).is_err(), "{bad}");
        }
        assert!(check(&req(&format!("https://p.example/{}", "a".repeat(MAX_ENDPOINT))), STRICT).is_err());
    }

    #[tokio::test]
    async fn names_resolve_only_to_allowed_addresses() {
        use reqwest::dns::Resolve;
        use std::str::FromStr;
        let name = |n: &str| reqwest::dns::Name::from_str(n).unwrap();
        // `localhost` resolves to loopback: nothing under the strict rules.
        let e = Guarded(STRICT).resolve(name("localhost")).await.err().expect("refused").to_string();
        assert!(e.contains("no public address"), "{e}");
        let addrs: Vec<_> = Guarded(LOOPBACK).resolve(name("localhost")).await.unwrap().collect();
        assert!(!addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
    }

    #[test]
    fn keys_must_decode_to_a_point_and_16_bytes() {
        let mut r = req("https://p.example/x");
        r.keys.auth = "AAAA".into();
        assert!(check(&r, STRICT).unwrap_err().contains("auth"));
        let mut r = req("https://p.example/x");
        r.keys.p256dh = "BAAA".into();
        assert!(check(&r, STRICT).unwrap_err().contains("p256dh"));
        let mut r = req("https://p.example/x");
        r.keys.p256dh = format!("B{}", "A".repeat(86)); // 65 bytes, not on the curve
        assert!(check(&r, STRICT).is_err());
    }

    #[test]
    fn the_store_keeps_one_per_endpoint_and_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("subscriptions.json");
        let store = Store::open(path.clone()).unwrap();
        let phone = Owner::Device("d1".into());
        let a = store.add(req("https://p.example/a"), phone.clone(), "t1".into()).unwrap();
        let again = store.add(req("https://p.example/a"), Owner::Device("d2".into()), "t2".into()).unwrap();
        assert_eq!(again.owner, Some(Owner::Device("d2".into())), "the last login that made it owns it");
        assert_eq!(a.id, again.id);
        assert_ne!(a.keys, again.keys);
        let b = store.add(req("https://p.example/b"), phone, "t3".into()).unwrap();
        let reopened = Store::open(path.clone()).unwrap();
        assert_eq!(reopened.list().len(), 2);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(reopened.remove(&b.id).unwrap());
        assert!(!reopened.remove(&b.id).unwrap());
        assert_eq!(Store::open(path.clone()).unwrap().list(), vec![again.clone()]);
        // Bound to a device: removed with it.
        let c = reopened.add(req("https://p.example/c"), Owner::Token("tag".into()), "t4".into()).unwrap();
        let gone = reopened.retain(|s| s.owner != Some(Owner::Device("d2".into()))).unwrap();
        assert_eq!(gone, vec![again]);
        assert_eq!(Store::open(path.clone()).unwrap().list(), vec![c]);
        std::fs::write(&path, "{not json").unwrap();
        assert!(Store::open(path).unwrap_err().to_string().contains("not lab's list"));
    }
}
