//! The hosts lab knows: a runner that dials back, with one credential per host name
//! (made by `lab hosts add NAME`), or a machine lab reaches over ssh (`lab hosts add
//! NAME --ssh …`: no credential, the ssh link is the authentication); both removed by
//! `lab hosts remove NAME`.
//!
//! - `<home>/hosts.json` (0600, written whole and atomically) keeps each host's name,
//!   when it was added and the SHA-256 of its credential; the credential itself is
//!   shown once, to the operator who made it.
//! - A credential is `labr_<64 hex>` (32 random bytes): the prefix makes one found in a
//!   log or a paste recognisable, and it is never lab's access token.
//! - `lab serve` reads the file on every check, so a host added or removed while it runs
//!   counts at once (a removed host's live runner is disconnected: [`super::link`]).

use crate::util::secrets::{ct_eq, random_hex};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// The prefix of every runner credential.
pub const PREFIX: &str = "labr_";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRecord {
    pub name: String,
    /// SHA-256 of the credential, hex (empty for a host reached over ssh: none).
    #[serde(default)]
    pub credential_sha256: String,
    /// Where lab reaches it over ssh (none: its runner dials back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh: Option<crate::machines::ssh::SshTarget>,
    /// Unix seconds.
    pub added: u64,
}

/// Whether `name` may name a host: `a-z0-9-`, 1–32, a letter or digit first (it goes
/// into run records, logs and tmux names).
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = (1..=32).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!("{name:?} is not a host name: 1–32 of a-z, 0-9 and '-', not starting with '-'"))
    }
}

/// The SHA-256 of `credential`, hex: what the hosts file keeps, and the key both ends
/// of the runner link prove with ([`super::protocol::proof`]).
pub fn key_of(credential: &str) -> String {
    Sha256::digest(credential.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// The hosts file of one lab home.
pub struct HostCredentials {
    path: PathBuf,
}

impl HostCredentials {
    pub fn new(path: PathBuf) -> Self {
        HostCredentials { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every host, as the file says now (missing: none; unreadable: an error naming it).
    pub fn list(&self) -> anyhow::Result<Vec<HostRecord>> {
        crate::store::fsutil::load_json_list(&self.path, "hosts", "; move it away and add the hosts again")
    }

    /// Add host `name`: its new credential. A name already there is refused (remove it
    /// first: an existing runner's credential is never replaced silently).
    pub fn add(&self, name: &str, now: SystemTime) -> anyhow::Result<String> {
        check_name(name).map_err(anyhow::Error::msg)?;
        let mut records = self.list()?;
        if records.iter().any(|r| r.name == name) {
            anyhow::bail!("host `{name}` exists; `lab hosts remove {name}` first to give it a new credential");
        }
        let credential = format!("{PREFIX}{}", random_hex(32)?);
        let added = now.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        records.push(HostRecord { name: name.into(), credential_sha256: key_of(&credential), ssh: None, added });
        if let Some(dir) = self.path.parent() {
            crate::store::fsutil::private_dir(dir)?;
        }
        crate::store::fsutil::save_json_list(&self.path, &records)?;
        Ok(credential)
    }

    /// Add host `name`, reached over ssh at `target`. A name already there is refused.
    pub fn add_ssh(&self, name: &str, target: crate::machines::ssh::SshTarget, now: SystemTime) -> anyhow::Result<()> {
        check_name(name).map_err(anyhow::Error::msg)?;
        target.check().map_err(anyhow::Error::msg)?;
        let mut records = self.list()?;
        if records.iter().any(|r| r.name == name) {
            anyhow::bail!("host `{name}` exists; `lab hosts remove {name}` first");
        }
        let added = now.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        records.push(HostRecord { name: name.into(), credential_sha256: String::new(), ssh: Some(target), added });
        if let Some(dir) = self.path.parent() {
            crate::store::fsutil::private_dir(dir)?;
        }
        crate::store::fsutil::save_json_list(&self.path, &records)?;
        Ok(())
    }

    /// Remove host `name`: `Ok(false)` when there is none.
    pub fn remove(&self, name: &str) -> anyhow::Result<bool> {
        let mut records = self.list()?;
        let before = records.len();
        records.retain(|r| r.name != name);
        if records.len() == before {
            return Ok(false);
        }
        crate::store::fsutil::save_json_list(&self.path, &records)?;
        Ok(true)
    }

    /// Host `name`'s proof key now: the SHA-256 of its credential
    /// ([`super::protocol::proof`]). None for a host not there, or when the file cannot
    /// be read (said in the log: nobody is accepted then).
    pub fn key(&self, name: &str) -> Option<String> {
        match self.list() {
            // A host reached over ssh has no credential: no runner dials in as it.
            Ok(records) => records
                .into_iter()
                .find(|r| r.name == name && super::reach_of(r).dials_in())
                .map(|r| r.credential_sha256),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the hosts file: no runner is accepted");
                None
            }
        }
    }

    /// Whether host `name`'s credential is still the one whose key is `key` (removed,
    /// or removed and added again with a new credential: no).
    pub fn is_current(&self, name: &str, key: &str) -> bool {
        self.key(name).is_some_and(|k| ct_eq(k.as_bytes(), key.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["build-2", "a", "0box", "x".repeat(32).as_str()] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-a", "Build", "a_b", "a.b", "a b", "x".repeat(33).as_str(), "../x"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn add_check_remove() {
        let d = tempfile::tempdir().unwrap();
        let c = HostCredentials::new(d.path().join("hosts.json"));
        assert!(c.list().unwrap().is_empty());
        let cred = c.add("build-2", SystemTime::now()).unwrap();
        assert!(cred.starts_with(PREFIX) && cred.len() == PREFIX.len() + 64, "{cred}");
        assert!(c.is_current("build-2", &key_of(&cred)));
        let key = c.key("build-2").unwrap();
        assert!(c.is_current("build-2", &key));
        assert!(!c.is_current("build-3", &key_of(&cred)), "another name");
        assert!(!c.is_current("build-2", &key_of(&cred[..cred.len() - 1])), "a prefix of it");
        assert!(!c.is_current("build-2", &key_of(&cred[PREFIX.len()..])), "without the prefix");
        let text = std::fs::read_to_string(c.path()).unwrap();
        assert!(!text.contains(&cred[PREFIX.len()..]), "only the hash is kept");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(c.path()).unwrap().permissions().mode() & 0o777, 0o600);
        let e = c.add("build-2", SystemTime::now()).unwrap_err().to_string();
        assert!(e.contains("exists"), "{e}");
        assert!(c.add("Bad Name", SystemTime::now()).is_err());
        let other = c.add("laptop", SystemTime::now()).unwrap();
        assert_ne!(other, cred);
        assert!(c.remove("build-2").unwrap());
        assert!(!c.remove("build-2").unwrap());
        assert!(!c.is_current("build-2", &key_of(&cred)), "revoked");
        assert!(!c.is_current("build-2", &key), "revoked");
        let again = c.add("build-2", SystemTime::now()).unwrap();
        assert!(!c.is_current("build-2", &key), "the same name with a new credential is not the old one");
        assert!(c.is_current("build-2", &key_of(&again)));
        assert!(c.is_current("laptop", &key_of(&other)));
    }

    #[test]
    fn a_damaged_file_accepts_nobody_and_is_not_overwritten() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("hosts.json");
        std::fs::write(&path, b"{not json").unwrap();
        let c = HostCredentials::new(path.clone());
        assert!(!c.is_current("a", &key_of("labr_x")));
        assert!(c.add("a", SystemTime::now()).unwrap_err().to_string().contains("not lab's list of hosts"));
        assert_eq!(std::fs::read(&path).unwrap(), b"{not json");
    }

    #[test]
    fn a_host_reached_over_ssh_has_no_credential_a_runner_could_dial_in_with() {
        let d = tempfile::tempdir().unwrap();
        let c = HostCredentials::new(d.path().join("hosts.json"));
        let target = crate::machines::ssh::SshTarget { destination: "lab@10.0.0.2".into(), ..Default::default() };
        c.add_ssh("far", target.clone(), SystemTime::now()).unwrap();
        let far = c.list().unwrap().into_iter().find(|r| r.name == "far").unwrap();
        assert_eq!((far.ssh, far.credential_sha256.as_str()), (Some(target.clone()), ""));
        assert_eq!(c.key("far"), None);
        assert!(!c.is_current("far", &key_of("")), "no key, not even the empty one's");
        assert!(c.add_ssh("far", target.clone(), SystemTime::now()).unwrap_err().to_string().contains("exists"));
        assert!(c.add("far", SystemTime::now()).is_err());
        let bad = crate::machines::ssh::SshTarget { destination: "-oProxyCommand=x".into(), ..Default::default() };
        assert!(c.add_ssh("other", bad, SystemTime::now()).is_err());
        assert!(c.remove("far").unwrap());
    }
}
