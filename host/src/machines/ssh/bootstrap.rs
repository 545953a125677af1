//! Putting lab on a machine reached over ssh: what the machine is (`uname -sm`, tmux
//! there or not), whether lab of this exact build is there — at a per-build path in
//! that user's cache, `${XDG_CACHE_HOME:-$HOME/.cache}/lab/bin/lab-<version>-<sha>`,
//! checked by its SHA-256 — and if not, this binary uploaded through the machine's
//! master: to a temporary name, its hash checked there, then moved into place (a cut
//! upload never leaves a half binary under the real name), and run once
//! (`--version`) to prove it runs there.

use super::{Master, SshError};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::time::Duration;

/// How long the look at the machine may take.
const PROBE_WITHIN: Duration = Duration::from_secs(20);
/// How long an upload may take (a release build is ~40 MB; a debug one ~180 MB).
pub const UPLOAD_WITHIN: Duration = Duration::from_secs(180);
/// Where lab's builds go there unless the host says (expanded by the machine's shell).
pub const DEFAULT_DIR: &str = "${XDG_CACHE_HOME:-$HOME/.cache}/lab/bin";

/// The folder lab's builds go in there, for the machine's shell (inside double quotes).
fn dir_of(target: &super::SshTarget) -> String {
    match target.lab.as_deref() {
        Some(d) => match d.strip_prefix("~/") {
            Some(rest) => format!("$HOME/{rest}"),
            None => d.to_string(),
        },
        None => DEFAULT_DIR.to_string(),
    }
}

/// lab on a machine, ready to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// Its path there.
    pub path: String,
    /// Whether this call uploaded it (else it was there, with the right hash).
    pub uploaded: bool,
    /// `uname -sm` there.
    pub system: String,
    /// The build's name: the start of its SHA-256 (16 hex digits).
    pub build: String,
}

/// What one look at the machine found.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Probe {
    system: String,
    tmux: bool,
    /// The build's path there, and its SHA-256 if it is there and runnable.
    path: String,
    sha256: Option<String>,
}

/// The name of this build there: its version and the start of its hash.
pub fn build_name(version: &str, sha256: &str) -> String {
    format!("lab-{version}-{}", &sha256[..16])
}

/// `uname -sm` of a machine this build runs on (this one's OS and architecture).
pub fn runs_on(system: &str) -> bool {
    let mut w = system.split_whitespace();
    let (os, arch) = (w.next().unwrap_or_default(), w.next().unwrap_or_default());
    let os_ok = os.eq_ignore_ascii_case(std::env::consts::OS);
    let arch_ok = arch == std::env::consts::ARCH || (std::env::consts::ARCH == "aarch64" && arch == "arm64");
    os_ok && arch_ok
}

fn parse_probe(text: &str) -> Result<Probe, String> {
    let mut lines = text.lines();
    let mut field = |k: &str| {
        lines.next().and_then(|l| l.strip_prefix(k)).map(str::to_string).ok_or_else(|| format!("no {k:?} in {text:?}"))
    };
    let system = field("system=")?;
    let tmux = field("tmux=")? == "yes";
    let path = field("path=")?;
    let sha = field("sha256=")?;
    let sha256 = (sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit())).then_some(sha);
    Ok(Probe { system, tmux, path, sha256 })
}

/// lab of this build (`binary`, which says `version`) on the machine behind `master`:
/// found there, or uploaded. A machine lab's build cannot run on, or without tmux,
/// is an error naming what is missing.
pub fn ensure_lab(master: &Master, binary: &Path, version: &str) -> Result<Installed, SshError> {
    let dest = &master.target().destination;
    let sha = hash_of(binary).map_err(|e| SshError::Failed(format!("reading {}: {e}", binary.display())))?;
    let name = build_name(version, &sha);
    let build = sha[..16].to_string();
    let dir = dir_of(master.target());
    let probe = format!(
        "echo \"system=$(uname -sm)\"; if command -v tmux >/dev/null 2>&1; then echo tmux=yes; else echo tmux=no; fi; \
         p=\"{dir}/{name}\"; echo \"path=$p\"; \
         if [ -x \"$p\" ]; then echo \"sha256=$(sha256sum \"$p\" | cut -d' ' -f1)\"; else echo sha256=; fi"
    );
    let out = master.run(&probe, b"", PROBE_WITHIN)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let found = parse_probe(&text).map_err(|e| SshError::Failed(format!("looking at {dest}: {e}")))?;
    if !runs_on(&found.system) {
        return Err(SshError::Unsuitable(format!(
            "{dest} is `{}`; this lab is a {} {} build and cannot run there",
            found.system,
            std::env::consts::OS,
            std::env::consts::ARCH
        )));
    }
    if !found.tmux {
        return Err(SshError::Unsuitable(format!(
            "{dest} has no tmux (runs live in tmux there): install it on that machine (e.g. apt-get install tmux)"
        )));
    }
    if found.sha256.as_deref() == Some(sha.as_str()) {
        return Ok(Installed { path: found.path, uploaded: false, system: found.system, build });
    }
    let bytes = std::fs::read(binary).map_err(|e| SshError::Failed(format!("reading {}: {e}", binary.display())))?;
    if Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect::<String>() != sha {
        return Err(SshError::Failed(format!("{} changed while lab serve ran: restart it", binary.display())));
    }
    let upload = format!(
        "set -e; d=\"{dir}\"; mkdir -p \"$d\"; chmod 700 \"$d\"; t=\"$d/.{name}.$$\"; \
         trap 'rm -f \"$t\"' EXIT; cat > \"$t\"; chmod 700 \"$t\"; \
         s=$(sha256sum \"$t\" | cut -d' ' -f1); \
         if [ \"$s\" != \"{sha}\" ]; then echo \"the upload arrived as $s, not {sha}\" >&2; exit 3; fi; \
         mv -f \"$t\" \"$d/{name}\"; trap - EXIT; \"$d/{name}\" --version"
    );
    let out = master.run(&upload, &bytes, UPLOAD_WITHIN)?;
    let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(SshError::Failed(format!("uploading lab to {dest} failed: {err}")));
    }
    if said != format!("lab {version}") {
        return Err(SshError::Failed(format!("lab uploaded to {dest} says {said:?}, not \"lab {version}\"")));
    }
    Ok(Installed { path: found.path, uploaded: true, system: found.system, build })
}

/// The SHA-256 of `binary` (hex), hashed once per file, size and change time: a
/// reconnect does not read the whole binary again.
fn hash_of(binary: &Path) -> std::io::Result<String> {
    use std::os::unix::fs::MetadataExt;
    type Key = (std::path::PathBuf, u64, i64, i64);
    static SEEN: std::sync::Mutex<Option<(Key, String)>> = std::sync::Mutex::new(None);
    let m = std::fs::metadata(binary)?;
    let key: Key = (binary.to_path_buf(), m.len(), m.ctime(), m.ctime_nsec());
    if let Some((k, sha)) = SEEN.lock().unwrap().as_ref() {
        if *k == key {
            return Ok(sha.clone());
        }
    }
    let mut f = std::fs::File::open(binary)?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h)?;
    let sha: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    *SEEN.lock().unwrap() = Some((key, sha.clone()));
    Ok(sha)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_look_at_the_machine_is_read() {
        let p = parse_probe("system=Linux x86_64\ntmux=yes\npath=/home/u/.cache/lab/bin/lab-1\nsha256=\n").unwrap();
        assert_eq!(
            p,
            Probe {
                system: "Linux x86_64".into(),
                tmux: true,
                path: "/home/u/.cache/lab/bin/lab-1".into(),
                sha256: None
            }
        );
        let sha = "ab".repeat(32);
        let p = parse_probe(&format!("system=Linux aarch64\ntmux=no\npath=/x\nsha256={sha}\n")).unwrap();
        assert_eq!((p.tmux, p.sha256), (false, Some(sha)));
        // What is not a hash is none.
        assert_eq!(parse_probe("system=L\ntmux=yes\npath=/x\nsha256=nope\n").unwrap().sha256, None);
        assert!(parse_probe("Welcome to the machine!\n").is_err());
    }

    #[test]
    fn this_build_runs_only_where_its_os_and_architecture_are() {
        let here = format!(
            "{} {}",
            if std::env::consts::OS == "linux" { "Linux" } else { std::env::consts::OS },
            std::env::consts::ARCH
        );
        assert!(runs_on(&here), "{here}");
        assert!(!runs_on("Darwin x86_64") || std::env::consts::OS == "macos");
        assert!(!runs_on("Linux riscv64"));
        assert!(!runs_on(""));
    }

    #[test]
    fn a_build_is_named_by_its_version_and_hash() {
        assert_eq!(build_name("0.1.0", &"0123456789abcdef".repeat(4)), "lab-0.1.0-0123456789abcdef");
    }
}
