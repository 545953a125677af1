//! Web Push (docs/push.md): a run that starts waiting on the operator reaches the
//! browsers that subscribed, tab closed or not, through their push services.
//!
//! - **Keys** ([`Vapid`]): lab's VAPID key pair (RFC 8292), made on first use and kept
//!   in `<home>/push/vapid.key` (0600); `GET /push/key` gives its public half.
//! - **Subscriptions** ([`subscriptions::Store`]): checked, persisted, removed by the
//!   operator or when a push service answers 404/410.
//! - **What fires**: the webhook's [`notify::Transitions`] over question, needs_input
//!   and ended; **what is sent**: [`payload::payload`], cut to fit one push.
//! - **How**: RFC 8291 `aes128gcm` and the VAPID header by `web-push-native` (RustCrypto
//!   underneath, no hand-written cryptography), POSTed by one task per subscription and
//!   push, retried with backoff ([`notify::retry_delay`]); nothing waits on a delivery.

pub mod payload;
pub mod subscriptions;

use crate::notify;
use crate::runs::live::view::RunState;
use crate::runs::Change;
use crate::store::paths::Home;
use std::sync::Arc;
use std::time::Duration;
use subscriptions::{Store, Subscription};
use tokio::sync::broadcast;
use web_push_native::jwt_simple::algorithms::{ECDSAP256PublicKeyLike, ES256KeyPair};

/// The states pushed: where a run waits on the operator, and its end.
pub const EVENTS: [RunState; 3] = [RunState::Question, RunState::NeedsInput, RunState::Ended];
/// How long a push service keeps a push for a browser that is offline (`TTL`).
pub const TTL: Duration = Duration::from_secs(4 * 60 * 60);
/// One attempt (connect, send, answer) at most.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// The VAPID `sub` claim: a contact for the push service; lab has no operator address.
pub const CONTACT: &str = "mailto:lab@localhost";

/// lab's VAPID key pair.
pub struct Vapid {
    key: ES256KeyPair,
}

impl Vapid {
    /// Load `path`, or make a key pair and keep it there (0600) when there is none.
    pub fn load_or_create(path: &std::path::Path) -> anyhow::Result<Vapid> {
        if let Some(vapid) = Vapid::read(path)? {
            crate::store::fsutil::set_mode(path, 0o600)?;
            return Ok(vapid);
        }
        let vapid = Vapid::create(path)?;
        tracing::info!(path = %path.display(), "made lab's VAPID key pair for Web Push");
        Ok(vapid)
    }

    /// The key pair kept at `path`, changing nothing (None: there is none).
    pub fn read(path: &std::path::Path) -> anyhow::Result<Option<Vapid>> {
        use base64::Engine;
        let e = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let Some(bytes) = crate::store::fsutil::read_optional(path)? else { return Ok(None) };
        let text = String::from_utf8_lossy(&bytes);
        let raw =
            e.decode(text.trim()).map_err(|_| anyhow::anyhow!("{}: not a VAPID key (base64url)", path.display()))?;
        let key = ES256KeyPair::from_bytes(&raw)
            .map_err(|err| anyhow::anyhow!("{}: not a P-256 private key ({err})", path.display()))?;
        Ok(Some(Vapid { key }))
    }

    /// A new key pair, written to `path` (0600) in place of any older one.
    pub fn create(path: &std::path::Path) -> anyhow::Result<Vapid> {
        use base64::Engine;
        let e = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let key = ES256KeyPair::generate();
        crate::store::fsutil::write_atomic(path, format!("{}\n", e.encode(key.to_bytes())).as_bytes(), 0o600)?;
        Ok(Vapid { key })
    }

    /// The public key, base64url, uncompressed P-256 (what `applicationServerKey` takes).
    pub fn public_key(&self) -> String {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(self.key.public_key().public_key().to_bytes_uncompressed())
    }
}

/// The push service: keys, subscriptions, delivery.
pub struct Push {
    /// Swapped whole by [`Push::rotate_key`].
    vapid: std::sync::RwLock<Arc<Vapid>>,
    key_file: std::path::PathBuf,
    store: Store,
    client: reqwest::Client,
    /// Where pushes may go (checked when a subscription comes and at each send).
    rules: subscriptions::Rules,
    /// Whether a subscription's owner still stands.
    standing: subscriptions::Standing,
}

/// How often subscriptions whose credential ended (a device logged out or expired, the
/// token rotated) are removed, pushes or not; each push checks too.
pub const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// How one delivery ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Delivered,
    /// 404 or 410: the subscription is gone (removed here).
    Gone,
    /// Another 4xx: retrying will not help.
    Refused(u16),
    /// Every attempt failed (5xx, 429, network).
    GaveUp(String),
    /// The credential it was made with ended: removed, not sent.
    Revoked,
}

/// What an answer's status means for a push: `Ok` delivered, `Err(true)` retry,
/// `Err(false)` give up.
pub fn judge(status: u16) -> Result<(), bool> {
    match status {
        200..=299 => Ok(()),
        408 | 425 | 429 | 500..=599 => Err(true),
        _ => Err(false),
    }
}

impl Push {
    /// Open the push service in `home` (its folder 0700, the key made if missing);
    /// `standing` says whether a subscription's owner still stands.
    pub fn open(home: &Home, standing: subscriptions::Standing) -> anyhow::Result<Arc<Push>> {
        let dir = home.push_dir();
        crate::store::fsutil::private_dir(&dir)?;
        let key_file = home.vapid_key_file();
        let vapid = std::sync::RwLock::new(Arc::new(Vapid::load_or_create(&key_file)?));
        let store = Store::open(home.push_subscriptions_file())?;
        let rules = subscriptions::Rules::from_env();
        if rules.loopback {
            tracing::warn!(
                "{}=1: pushes may go to loopback addresses over http",
                subscriptions::ALLOW_LOOPBACK_HTTP_ENV
            );
        }
        // Redirects are never followed (notify's client), and every name is resolved by
        // the guard: a push reaches public addresses only.
        let client = reqwest::Client::builder()
            .timeout(ATTEMPT_TIMEOUT)
            .connect_timeout(ATTEMPT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("lab/", env!("CARGO_PKG_VERSION")))
            .dns_resolver(Arc::new(subscriptions::Guarded(rules)))
            .build()
            .map_err(|e| anyhow::anyhow!("cannot set up the push HTTP client: {e}"))?;
        // The first sweep is the watch loop's first tick ([`Push::spawn`]).
        Ok(Arc::new(Push { vapid, key_file, store, client, rules, standing }))
    }

    fn vapid(&self) -> Arc<Vapid> {
        self.vapid.read().unwrap().clone()
    }

    pub fn public_key(&self) -> String {
        self.vapid().public_key()
    }

    /// A new VAPID key pair in place of the old one, at once. Every subscription was
    /// made with the old public key (push services refuse pushes signed by another), so
    /// all are removed: each browser subscribes again (its Push button). How many were
    /// removed is returned with the new public key.
    pub fn rotate_key(&self) -> anyhow::Result<(String, usize)> {
        let mut held = self.vapid.write().unwrap();
        let vapid = Vapid::create(&self.key_file)?;
        *held = Arc::new(vapid);
        let removed = self.store.clear()?;
        tracing::info!(removed, "lab's VAPID key pair was replaced; every push subscription was removed");
        Ok((held.public_key(), removed))
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Where pushes may go.
    pub fn rules(&self) -> subscriptions::Rules {
        self.rules
    }

    /// Whether `sub`'s owner still stands (one kept from before owners: no).
    pub fn holds(&self, sub: &Subscription) -> bool {
        sub.owner.as_ref().is_some_and(|o| (self.standing)(o))
    }

    /// Remove the subscriptions whose credential ended: how many.
    pub fn sweep(&self) -> usize {
        match self.store.retain(|s| self.holds(s)) {
            Ok(gone) => {
                for s in &gone {
                    tracing::info!(subscription = %s.id, owner = ?s.owner, "push subscription removed: the credential it was made with ended");
                }
                gone.len()
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot save the subscriptions");
                0
            }
        }
    }

    /// Watch `changes` and push each transition into [`EVENTS`] to every subscription.
    pub fn spawn(self: &Arc<Self>, mut changes: broadcast::Receiver<Change>) {
        let push = self.clone();
        tokio::spawn(async move {
            let mut transitions = notify::Transitions::default();
            let mut sweep = tokio::time::interval(SWEEP_EVERY);
            loop {
                let change = tokio::select! {
                    c = changes.recv() => c,
                    _ = sweep.tick() => {
                        push.sweep();
                        continue;
                    }
                };
                match change {
                    Ok(change) => {
                        if transitions.observe(&EVENTS, &change) {
                            push.send_all(&payload::payload(&change));
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "push fell behind the runs: some changes were not looked at")
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                }
            }
        });
    }

    /// Push `p` to every subscription, each in a task of its own.
    pub fn send_all(self: &Arc<Self>, p: &payload::PushPayload) {
        let body = Arc::new(payload::encode(p));
        self.sweep();
        for sub in self.store.list() {
            let (push, body, run) = (self.clone(), body.clone(), p.run_id.clone());
            tokio::spawn(async move {
                let outcome = push.deliver(&sub, &body).await;
                let host = endpoint_host(&sub.endpoint);
                match &outcome {
                    Outcome::Delivered => tracing::info!(run = %run, subscription = %sub.id, host, "push delivered"),
                    Outcome::Gone => {
                        tracing::info!(subscription = %sub.id, host, "the push service says the subscription is gone: removed it")
                    }
                    Outcome::Refused(s) => {
                        tracing::warn!(run = %run, subscription = %sub.id, host, status = s, "the push service refused a push")
                    }
                    Outcome::GaveUp(why) => {
                        tracing::warn!(run = %run, subscription = %sub.id, host, last_error = %why, "gave up on a push")
                    }
                    Outcome::Revoked => {
                        tracing::info!(run = %run, subscription = %sub.id, "not pushed: the credential it was made with ended")
                    }
                }
            });
        }
    }

    /// Encrypt `body` for `sub` and POST it, retrying with backoff.
    pub async fn deliver(&self, sub: &Subscription, body: &[u8]) -> Outcome {
        let mut attempt = 1;
        loop {
            // Checked before each attempt: a logout between two is not sent to.
            if !self.holds(sub) {
                self.sweep();
                return Outcome::Revoked;
            }
            let last = match self.post(sub, body).await {
                Ok(status) => match judge(status) {
                    Ok(()) => return Outcome::Delivered,
                    Err(_) if status == 404 || status == 410 => {
                        if let Err(e) = self.store.remove(&sub.id) {
                            tracing::warn!(subscription = %sub.id, error = %e, "cannot save the subscriptions");
                        }
                        return Outcome::Gone;
                    }
                    Err(false) => return Outcome::Refused(status),
                    Err(true) => format!("the push service answered {status}"),
                },
                Err(why) => why,
            };
            match notify::retry_delay(attempt) {
                Some(wait) => tokio::time::sleep(wait).await,
                None => return Outcome::GaveUp(last),
            }
            attempt += 1;
        }
    }

    /// One attempt: the status the push service answered, or why there was none.
    async fn post(&self, sub: &Subscription, body: &[u8]) -> Result<u16, String> {
        // Checked again: a subscription kept from before a rule, or an address literal
        // (which no resolver sees).
        let url = subscriptions::check_endpoint(&sub.endpoint, self.rules)?;
        let (public, auth) = subscriptions::decode_keys(&sub.keys)?;
        let endpoint: axum::http::Uri = sub.endpoint.parse().map_err(|e| format!("endpoint: {e}"))?;
        let req = web_push_native::WebPushBuilder::new(endpoint, public, auth)
            .with_valid_duration(TTL)
            .build(body.to_vec())
            .map_err(|e| format!("cannot encrypt the push: {e}"))?;
        let mut req = reqwest::Request::try_from(req).map_err(|e| format!("cannot build the request: {e}"))?;
        let vapid = vapid_header(&self.vapid().key, &url, TTL)?;
        let headers = req.headers_mut();
        headers.insert(reqwest::header::AUTHORIZATION, vapid);
        headers.insert("urgency", reqwest::header::HeaderValue::from_static("high"));
        let resp = self.client.execute(req).await.map_err(|e| {
            if e.is_timeout() {
                "timed out".to_string()
            } else {
                // Without the URL: its path is the browser's secret.
                let e = e.without_url();
                let mut why = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    why = format!("{why}: {s}");
                    source = s.source();
                }
                format!("request failed ({why})")
            }
        })?;
        Ok(resp.status().as_u16())
    }
}

/// The VAPID `Authorization` (RFC 8292) for a push to `endpoint`: a JWT whose `aud` is
/// the endpoint's origin — scheme, host and port (a port the scheme does not imply is
/// kept: a push service on another port checks it) — valid for `valid`.
pub fn vapid_header(
    key: &ES256KeyPair,
    endpoint: &reqwest::Url,
    valid: Duration,
) -> Result<reqwest::header::HeaderValue, String> {
    use web_push_native::jwt_simple::algorithms::ECDSAP256KeyPairLike;
    use web_push_native::jwt_simple::claims::Claims;
    let aud = endpoint.origin().ascii_serialization();
    let claims = Claims::create(valid.into()).with_audience(aud).with_subject(CONTACT);
    let token = key.sign(claims).map_err(|e| format!("cannot sign the VAPID token: {e}"))?;
    use base64::Engine;
    let k =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key.public_key().public_key().to_bytes_uncompressed());
    reqwest::header::HeaderValue::from_str(&format!("vapid t={token}, k={k}")).map_err(|e| e.to_string())
}

/// The host of an endpoint, all the log says of it (its path is the browser's secret).
fn endpoint_host(endpoint: &str) -> String {
    reqwest::Url::parse(endpoint).ok().and_then(|u| u.host_str().map(str::to_string)).unwrap_or_else(|| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_delivered_retried_or_not() {
        assert_eq!(judge(201), Ok(()));
        assert_eq!(judge(503), Err(true));
        assert_eq!(judge(429), Err(true));
        assert_eq!(judge(400), Err(false));
        assert_eq!(judge(410), Err(false));
    }

    #[test]
    fn the_vapid_audience_is_the_endpoint_origin_port_included() {
        use web_push_native::jwt_simple::algorithms::ECDSAP256PublicKeyLike;
        use web_push_native::jwt_simple::claims::NoCustomClaims;
        let vapid = Vapid { key: ES256KeyPair::generate() };
        let key = &vapid.key;
        for (endpoint, aud) in [
            ("https://push.example.com:8443/send/a?b=c", "https://push.example.com:8443"),
            ("https://push.example.com/send/a", "https://push.example.com"),
            ("https://push.example.com:443/send/a", "https://push.example.com"),
            ("http://127.0.0.1:9000/p/1", "http://127.0.0.1:9000"),
        ] {
            let url = reqwest::Url::parse(endpoint).unwrap();
            let header = vapid_header(key, &url, TTL).unwrap();
            let header = header.to_str().unwrap();
            let (t, k) = header.strip_prefix("vapid t=").unwrap().split_once(", k=").unwrap();
            assert_eq!(k, vapid.public_key());
            // Verified with the public key alone, as a push service does.
            let claims = key.public_key().verify_token::<NoCustomClaims>(t, None).unwrap();
            let audiences = claims.audiences.unwrap().into_set();
            assert_eq!(audiences.into_iter().collect::<Vec<_>>(), vec![aud.to_string()], "{endpoint}");
            assert_eq!(claims.subject.as_deref(), Some(CONTACT));
        }
    }

    #[test]
    fn the_vapid_key_is_made_once_kept_private_and_loaded_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vapid.key");
        let a = Vapid::load_or_create(&path).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let b = Vapid::load_or_create(&path).unwrap();
        assert_eq!(a.public_key(), b.public_key());
        use base64::Engine;
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(a.public_key()).unwrap();
        assert_eq!((raw.len(), raw[0]), (65, 4));
        std::fs::write(&path, "garbage!").unwrap();
        assert!(Vapid::load_or_create(&path).is_err());
    }
}
