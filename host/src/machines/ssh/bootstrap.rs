//! Putting lab on a machine reached over ssh: what the machine is (`uname -sm`, tmux
//! there or not), whether lab of this exact build is there — at a per-build path in
//! that user's cache, `${XDG_CACHE_HOME:-$HOME/.cache}/lab/bin/lab-<version>-<sha>`,
//! checked by its SHA-256 — and if not, this binary uploaded through the machine's
//! master: to a temporary name, its hash checked there, then moved into place (a cut
//! upload never leaves a half binary under the real name), and run once
//! (`--version`) to prove it runs there.
//!
//! Only what nobody else there could have written is run ([`trusted`]): lab's folder
//! (made 0700) and the build must be the ssh user's or root's and writable by nobody
//! else, and every folder above lab's as the home's are on this side (the user's or
//! root's, shared ones sticky). A build is checked on every link: its identity there
//! (device, inode, modification and change times) against the one it had when it was
//! hashed — hashed again when that differs — and again in the very command that runs
//! it ([`run_checked`]).

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
    /// The file's identity there when it was checked: `device:inode:size:mtime:ctime`,
    /// the times to the nanosecond where its `stat` tells them (a copy rewritten within
    /// the second it was checked is another file).
    pub identity: String,
}

/// What one look at the machine found.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Probe {
    system: String,
    tmux: bool,
    /// The ssh user's uid there.
    uid: u32,
    /// The build's path there.
    path: String,
    /// lab's folder (its real path) and every folder above it, nearest first: owner,
    /// mode, path. When the folder is not there yet, its nearest existing ancestor first.
    dirs: Vec<(u32, u32, String)>,
    /// Whether the first of `dirs` is lab's folder itself (else it is to be made).
    dir_exists: bool,
    /// The build file: owner, mode (`lstat`), identity; none if it is not there.
    file: Option<(u32, u32, String)>,
    /// Its SHA-256 if it was hashed (not when its identity was the one lab knew).
    sha256: Option<String>,
}

/// Whether what lab is about to run there could have been written by anyone but the
/// ssh user (uid `uid`) or root. Pure: the module's rules over a [`Probe`]'s facts.
fn trusted(
    uid: u32,
    dirs: &[(u32, u32, String)],
    dir_exists: bool,
    file: Option<&(u32, u32, String)>,
) -> Result<(), String> {
    let ours = |owner: u32| owner == uid || owner == 0;
    let fix = "lab runs only what nobody else there can change (fix it: chown to the ssh user, chmod go-w)";
    for (i, (owner, mode, path)) in dirs.iter().enumerate() {
        let labs = i == 0 && dir_exists;
        let what = if labs { "lab's folder" } else { "a folder above lab's" };
        if mode & libc::S_IFMT != libc::S_IFDIR {
            return Err(format!("{what} {path} is not a directory; {fix}"));
        }
        if !ours(*owner) {
            return Err(format!(
                "{what} {path} is owned by uid {owner}, neither the ssh user's ({uid}) nor root's; {fix}"
            ));
        }
        let shared = mode & 0o022 != 0;
        let sticky = mode & libc::S_ISVTX != 0;
        if shared && (labs || !sticky) {
            return Err(format!(
                "{what} {path} may be written by group or others (mode {:04o}){}; {fix}",
                mode & 0o7777,
                if labs { "" } else { " and is not sticky" }
            ));
        }
    }
    if let Some((owner, mode, _)) = file {
        let path = dirs.first().map_or("", |d| d.2.as_str());
        if mode & libc::S_IFMT == libc::S_IFREG {
            if !ours(*owner) {
                return Err(format!(
                    "lab's build in {path} is owned by uid {owner}, neither the ssh user's ({uid}) nor root's; {fix}"
                ));
            }
            if mode & 0o022 != 0 {
                return Err(format!(
                    "lab's build in {path} may be written by group or others (mode {:04o}); {fix}",
                    mode & 0o7777
                ));
            }
        }
    }
    Ok(())
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

/// Whether `s` is an identity as lab's look prints it (digits, colons, the times'
/// decimal points).
fn is_identity(s: &str) -> bool {
    !s.is_empty() && s.len() < 100 && s.bytes().all(|b| b.is_ascii_digit() || b == b':' || b == b'.')
}

/// `<uid> <hex mode> <rest>` as `stat -c '%u %f …'` prints it.
fn owner_mode(s: &str) -> Option<(u32, u32, String)> {
    let mut w = s.splitn(3, ' ');
    let uid = w.next()?.parse().ok()?;
    let mode = u32::from_str_radix(w.next()?, 16).ok()?;
    Some((uid, mode, w.next().unwrap_or("").to_string()))
}

fn parse_probe(text: &str) -> Result<Probe, String> {
    let field = |k: &str| -> Result<String, String> {
        text.lines().find_map(|l| l.strip_prefix(k)).map(str::to_string).ok_or_else(|| format!("no {k:?} in {text:?}"))
    };
    let system = field("system=")?;
    let tmux = field("tmux=")? == "yes";
    let uid = field("uid=")?.parse().map_err(|_| format!("no uid in {text:?}"))?;
    let path = field("path=")?;
    let dirs: Vec<(u32, u32, String)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("dir="))
        .map(|d| owner_mode(d).ok_or_else(|| format!("a folder's facts are {d:?}")))
        .collect::<Result<_, _>>()?;
    if dirs.is_empty() {
        return Err(format!("no folder facts in {text:?}"));
    }
    let dir_exists = field("dir_exists=")? == "yes";
    let file = field("file=")?;
    let file = match file.as_str() {
        "" => None,
        f => Some(
            owner_mode(f).filter(|(_, _, id)| is_identity(id)).ok_or_else(|| format!("the build's facts are {f:?}"))?,
        ),
    };
    let sha = field("sha256=")?;
    let sha256 = (sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit())).then_some(sha);
    Ok(Probe { system, tmux, uid, path, dirs, dir_exists, file, sha256 })
}

/// The look at the machine, for its shell: `dir` is lab's folder (inside double
/// quotes), `name` the build's file name, `known` the identity lab hashed it at (its
/// hash is not read again while that holds).
fn probe_script(dir: &str, name: &str, known: &str) -> String {
    format!(
        "echo \"system=$(uname -sm)\"; if command -v tmux >/dev/null 2>&1; then echo tmux=yes; else echo tmux=no; fi; \
         echo \"uid=$(id -u)\"; d=\"{dir}\"; p=\"$d/{name}\"; echo \"path=$p\"; \
         if [ -d \"$d\" ]; then echo dir_exists=yes; e=\"$d\"; else echo dir_exists=no; e=\"$d\"; \
           while [ ! -d \"$e\" ]; do e=$(dirname \"$e\"); done; fi; \
         r=$(cd \"$e\" && pwd -P) || exit 1; \
         for i in $(seq 64); do echo \"dir=$(stat -c '%u %f' \"$r\") $r\"; [ \"$r\" = / ] && break; r=$(dirname \"$r\"); done; \
         if [ -e \"$p\" ] || [ -L \"$p\" ]; then echo \"file=$(stat -c '%u %f %d:%i:%s:%.9Y:%.9Z' \"$p\")\"; else echo file=; fi; \
         if [ -f \"$p\" ] && [ ! -L \"$p\" ] && [ -x \"$p\" ]; then \
           if [ \"$(stat -c '%d:%i:%s:%.9Y:%.9Z' \"$p\")\" = '{known}' ]; then echo sha256=known; \
           else echo \"sha256=$(sha256sum \"$p\" | cut -d' ' -f1)\"; fi; \
         else echo sha256=; fi"
    )
}

/// The command that runs `exe` (with `args`, already quoted for the shell) there only
/// if it is still the file lab checked (`identity`): else it says so and exits 97.
pub fn run_checked(exe: &str, identity: &str, args: &str) -> String {
    let p = crate::util::shell::quote(exe);
    let id = if is_identity(identity) { identity } else { "-" };
    format!(
        "if [ \"$(stat -c '%d:%i:%s:%.9Y:%.9Z' {p} 2>/dev/null)\" != '{id}' ]; then \
           echo \"lab: its build at {exe} changed since it was checked; it is checked again\" >&2; exit 97; fi; \
         exec {p} {args}",
        exe = exe.replace(['"', '`', '$', '\\'], "")
    )
}

/// lab of this build (`binary`, which says `version`) on the machine behind `master`:
/// found there, or uploaded. A machine lab's build cannot run on, or without tmux,
/// is an error naming what is missing; so is a folder or build there that someone
/// else could have written ([`trusted`]). `known`: the build as lab last checked it
/// there (its hash is read again only if its identity changed).
pub fn ensure_lab(
    master: &Master,
    binary: &Path,
    version: &str,
    known: Option<&Installed>,
) -> Result<Installed, SshError> {
    let dest = &master.target().destination;
    let sha = hash_of(binary).map_err(|e| SshError::Failed(format!("reading {}: {e}", binary.display())))?;
    let name = build_name(version, &sha);
    let build = sha[..16].to_string();
    let dir = dir_of(master.target());
    let known = known.filter(|k| k.build == build && is_identity(&k.identity));
    let out = master.run(&probe_script(&dir, &name, known.map_or("-", |k| k.identity.as_str())), b"", PROBE_WITHIN)?;
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
    trusted(found.uid, &found.dirs, found.dir_exists, found.file.as_ref())
        .map_err(|e| SshError::Unsuitable(format!("{dest}: {e}")))?;
    let identity = found.file.as_ref().map(|f| f.2.clone()).unwrap_or_default();
    let same = match (&found.sha256, known) {
        (Some(s), _) => *s == sha,
        (None, Some(k)) => text.lines().any(|l| l == "sha256=known") && k.identity == identity,
        (None, None) => false,
    };
    if same {
        return Ok(Installed { path: found.path, uploaded: false, system: found.system, build, identity });
    }
    let bytes = std::fs::read(binary).map_err(|e| SshError::Failed(format!("reading {}: {e}", binary.display())))?;
    if Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect::<String>() != sha {
        return Err(SshError::Failed(format!("{} changed while lab serve ran: restart it", binary.display())));
    }
    let upload = format!(
        "set -e; umask 077; d=\"{dir}\"; mkdir -p \"$d\"; chmod 700 \"$d\"; t=\"$d/.{name}.$$\"; \
         trap 'rm -f \"$t\"' EXIT; cat > \"$t\"; chmod 700 \"$t\"; \
         s=$(sha256sum \"$t\" | cut -d' ' -f1); \
         if [ \"$s\" != \"{sha}\" ]; then echo \"the upload arrived as $s, not {sha}\" >&2; exit 3; fi; \
         mv -f \"$t\" \"$d/{name}\"; trap - EXIT; \"$d/{name}\" --version; \
         echo \"identity=$(stat -c '%d:%i:%s:%.9Y:%.9Z' \"$d/{name}\")\""
    );
    let out = master.run(&upload, &bytes, UPLOAD_WITHIN)?;
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(SshError::Failed(format!("uploading lab to {dest} failed: {err}")));
    }
    let version_said = said.lines().next().unwrap_or("").trim();
    if version_said != format!("lab {version}") {
        return Err(SshError::Failed(format!("lab uploaded to {dest} says {version_said:?}, not \"lab {version}\"")));
    }
    let identity = said.lines().find_map(|l| l.strip_prefix("identity=")).filter(|i| is_identity(i));
    let Some(identity) = identity else {
        return Err(SshError::Failed(format!(
            "lab uploaded to {dest}, but its identity there could not be read: {said:?}"
        )));
    };
    Ok(Installed { path: found.path, uploaded: true, system: found.system, build, identity: identity.to_string() })
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

    const DIR: u32 = libc::S_IFDIR;
    const REG: u32 = libc::S_IFREG;

    #[test]
    fn a_look_at_the_machine_is_read() {
        let text = "system=Linux x86_64\ntmux=yes\nuid=1000\npath=/home/u/.cache/lab/bin/lab-1\ndir_exists=yes\n\
                    dir=1000 41c0 /home/u/.cache/lab/bin\ndir=0 41ed /home/u/my dir\ndir=0 41ed /\n\
                    file=1000 81c0 2049:1234:1700000000:1700000001\nsha256=\n";
        let p = parse_probe(text).unwrap();
        assert_eq!(
            p,
            Probe {
                system: "Linux x86_64".into(),
                tmux: true,
                uid: 1000,
                path: "/home/u/.cache/lab/bin/lab-1".into(),
                dirs: vec![
                    (1000, DIR | 0o700, "/home/u/.cache/lab/bin".into()),
                    (0, DIR | 0o755, "/home/u/my dir".into()),
                    (0, DIR | 0o755, "/".into())
                ],
                dir_exists: true,
                file: Some((1000, REG | 0o700, "2049:1234:1700000000:1700000001".into())),
                sha256: None
            }
        );
        let sha = "ab".repeat(32);
        let p = parse_probe(&format!(
            "system=Linux aarch64\ntmux=no\nuid=0\npath=/x\ndir_exists=no\ndir=0 41ed /\nfile=\nsha256={sha}\n"
        ))
        .unwrap();
        assert_eq!((p.tmux, p.sha256, p.file), (false, Some(sha), None));
        // What is not a hash is none; facts that are not facts are an error.
        let nope = "system=L\ntmux=yes\nuid=0\npath=/x\ndir_exists=no\ndir=0 41ed /\nfile=\nsha256=nope\n";
        assert_eq!(parse_probe(nope).unwrap().sha256, None);
        assert!(parse_probe(&nope.replace("file=\n", "file=0 81ed $(boom)\n")).is_err());
        assert!(parse_probe("Welcome to the machine!\n").is_err());
    }

    #[test]
    fn only_what_nobody_else_there_could_write_is_run() {
        let me = 1000;
        let d = |uid, mode, p: &str| (uid, DIR | mode, p.to_string());
        let home = [d(me, 0o700, "/home/u/.cache/lab/bin"), d(me, 0o755, "/home/u"), d(0, 0o755, "/")];
        let build = (me, REG | 0o700, "1:2:3:4".to_string());
        assert_eq!(trusted(me, &home, true, Some(&build)), Ok(()));
        // Under a sticky /tmp, made by lab: fine; not made yet: its parents are checked.
        let tmp = [d(me, 0o700, "/tmp/lab"), d(0, 0o1777, "/tmp"), d(0, 0o755, "/")];
        assert_eq!(trusted(me, &tmp, true, None), Ok(()));
        assert_eq!(trusted(me, &tmp[1..], false, None), Ok(()));
        let why = |dirs: &[(u32, u32, String)], exists, file: Option<&(u32, u32, String)>| {
            trusted(me, dirs, exists, file).unwrap_err()
        };
        // lab's folder shared, even sticky; another user's; a folder above it shared.
        assert!(why(&[d(me, 0o1777, "/tmp/lab"), d(0, 0o1777, "/tmp")], true, None)
            .contains("lab's folder /tmp/lab may be written"));
        assert!(why(&[d(me, 0o770, "/srv/lab"), d(0, 0o755, "/")], true, None).contains("mode 0770"));
        assert!(why(&[d(1001, 0o700, "/srv/lab"), d(0, 0o755, "/")], true, None).contains("owned by uid 1001"));
        assert!(why(&[d(me, 0o700, "/s/lab"), d(0, 0o777, "/s")], true, None)
            .contains("a folder above lab's /s may be written by group or others (mode 0777) and is not sticky"));
        assert!(why(&[d(0, 0o777, "/s")], false, None).contains("a folder above lab's /s"));
        // The build itself: another user's, or writable by others.
        assert!(why(&home, true, Some(&(1001, REG | 0o755, "x".into())))
            .contains("build in /home/u/.cache/lab/bin is owned by uid 1001"));
        assert!(why(&home, true, Some(&(me, REG | 0o777, "x".into()))).contains("mode 0777"));
        // Root's are trusted; a symlink there is replaced, not run.
        assert_eq!(trusted(me, &home, true, Some(&(0, REG | 0o755, "x".into()))), Ok(()));
        assert_eq!(trusted(me, &home, true, Some(&(1001, libc::S_IFLNK | 0o777, "x".into()))), Ok(()));
    }

    #[test]
    fn the_build_runs_only_if_it_is_still_the_file_checked() {
        let c = run_checked("/home/u/.cache/lab/bin/lab-1", "1:2:3:4", "runner proxy");
        assert!(
            c.contains("!= '1:2:3:4' ]")
                && c.contains("exit 97")
                && c.ends_with("exec /home/u/.cache/lab/bin/lab-1 runner proxy"),
            "{c}"
        );
        assert!(run_checked("/x", "1:2'; rm -rf /; '", "a").contains("!= '-' ]"), "not an identity: never matches");
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
