//! What a jail may hold, decided before it is made (pure: paths in, verdicts out):
//! a workdir too broad to jail (the machine, a home), lab's own paths inside a bound
//! one (masked by an empty tmpfs), a workdir inside lab's own files (refused).

use std::path::{Component, Path, PathBuf};

/// Whether `p` is `ancestor` or inside it, component by component (`/a/bc` is not in
/// `/a/b`).
pub fn within(p: &Path, ancestor: &Path) -> bool {
    p.starts_with(ancestor)
}

/// Why `workdir` is too broad to jail, if it is: the whole machine, the folder that
/// holds users' homes, a user's home, or a folder that holds one of `homes` (the
/// agent's HOME, lab serve's). A jail with such a workdir bound read-write would hand
/// the agent every project, key and agent config of the account.
pub fn broad_workdir(workdir: &Path, homes: &[PathBuf]) -> Option<String> {
    let normal = lexical(workdir);
    if normal == Path::new("/") {
        return Some("the whole machine (/)".into());
    }
    if normal == Path::new("/home") {
        return Some("/home holds users' homes".into());
    }
    if let Some(h) = homes.iter().find(|h| within(h, &normal)) {
        return Some(if h == &normal {
            format!("{} is a home folder", normal.display())
        } else {
            format!("{} holds the home folder {}", normal.display(), h.display())
        });
    }
    if normal.parent() == Some(Path::new("/home")) || normal == Path::new("/root") {
        return Some(format!("{} is a user's home folder", normal.display()));
    }
    None
}

/// `p` with `.` and `..` taken out by its words alone (`/home/o/..` → `/home`).
pub fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// A bound path and what it is on the machine (symlinks resolved where it exists).
#[derive(Debug, Clone)]
pub struct Bound {
    /// Where the jail sees it (the path as bound).
    pub at: PathBuf,
    /// What it is on the machine.
    pub real: PathBuf,
}

/// The mount points to mask with an empty tmpfs: each of lab's own paths (`lab`, real
/// paths) that lies inside a bound path, where the jail sees it. A path of lab's the
/// jail does not hold (not inside any bind) needs none: the jail's root is empty but
/// for what is bound.
pub fn masks(lab: &[PathBuf], bound: &[Bound]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = vec![];
    for own in lab {
        for b in bound {
            if let Ok(rest) = own.strip_prefix(&b.real) {
                let at = b.at.join(rest);
                if !out.contains(&at) {
                    out.push(at);
                }
            }
        }
    }
    // One inside another is hidden by it already.
    let all = out.clone();
    out.retain(|m| !all.iter().any(|o| o != m && within(m, o)));
    out
}

/// A workdir inside lab's own files (its home, its worktrees folder) is refused: the
/// mask that hides them would hide the workdir too. A run's own worktree is lab's to
/// give and is not checked here.
pub fn workdir_in_lab(workdir_real: &Path, lab: &[PathBuf]) -> Option<String> {
    lab.iter().find(|l| within(workdir_real, l)).map(|l| {
        format!(
            "the workdir {} is inside lab's own files ({}): a jail there would see lab's token, sockets and other runs",
            workdir_real.display(),
            l.display()
        )
    })
}

/// Where a path a provider names is, once bounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NeedPath {
    /// `~/<rel>`: in the run's own home (its state), seeded from the operator's.
    State(PathBuf),
    /// An absolute path: allowed only inside the run's workdir (checked at launch).
    Absolute(PathBuf),
}

/// Paths of the operator's home no provider may have seeded or lent: other tools'
/// keys and tokens, lab's own home (and any `~/.*history` file: shells' and REPLs'
/// histories).
pub const NEVER_SEEDED: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".gitconfig",
    ".password-store",
    ".pki",
    ".mozilla",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".vault-token",
    ".terraform.d",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".config/gcloud",
    ".config/gh",
    ".config/git",
    ".config/google-chrome",
    ".config/chromium",
    ".local/share/keyrings",
    ".local/state/lab",
];

/// Folders of the home that hold many tools' state: a provider names its own inside.
const SHARED: &[&str] = &[".config", ".local", ".local/share", ".local/state", ".cache", ".cargo"];

/// A path a provider names in `sandbox.needs`, bounded: `~/<rel>` with `rel` a
/// hidden entry of the home (an agent's own state: `.agent/`, `.agent.json`,
/// `.config/opencode/`), none of [`NEVER_SEEDED`] nor a folder of many tools'; or an
/// absolute path (inside the workdir, checked at launch). Anything else is refused
/// with why.
pub fn need_path(p: &str) -> Result<NeedPath, String> {
    let climbs = |q: &Path| q.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir));
    if let Some(rest) = p.strip_prefix("~/") {
        let rel = Path::new(rest.trim_end_matches('/'));
        if rest.trim_end_matches('/').is_empty() || climbs(rel) || rel.is_absolute() {
            return Err(format!("{p:?}: the whole home, or a path that climbs out of it"));
        }
        if !rest.starts_with('.') {
            return Err(format!("{p:?}: an agent's own state is a hidden entry of its home (~/.name)"));
        }
        if SHARED.iter().any(|s| rel == Path::new(s)) {
            return Err(format!("{p:?} holds many tools' state: name the agent's own folder in it"));
        }
        if let Some(n) = NEVER_SEEDED.iter().find(|n| within(rel, Path::new(n)) || within(Path::new(n), rel)) {
            return Err(format!("{p:?}: ~/{n} is never given to a sandboxed agent"));
        }
        let first = rel.components().next().map(|c| c.as_os_str().to_string_lossy().into_owned()).unwrap_or_default();
        if first.ends_with("history") || first.ends_with("_hist") {
            return Err(format!("{p:?}: a history file is never given to a sandboxed agent"));
        }
        return Ok(NeedPath::State(rel.to_path_buf()));
    }
    let abs = Path::new(p);
    if abs.is_absolute() && !climbs(abs) && abs != Path::new("/") {
        return Ok(NeedPath::Absolute(abs.to_path_buf()));
    }
    Err(format!("{p:?}: not ~/… or an absolute path"))
}

/// What a provider's `sandbox.needs` may ask, checked whatever the run: every path
/// bounded ([`need_path`]), what it reads of its state inside a folder of state it
/// writes (the operator's file lent read-only: a login), every host a `host:port` with
/// no wildcard above a registrable domain ([`host_bound`]).
pub fn check_needs(needs: &super::Needs) -> Result<(), String> {
    let mut dirs: Vec<PathBuf> = vec![];
    for w in &needs.writable {
        if let NeedPath::State(rel) = need_path(w).map_err(|e| format!("writable {e}"))? {
            if w.ends_with('/') {
                dirs.push(rel);
            }
        }
    }
    for r in &needs.readable {
        if let NeedPath::State(rel) = need_path(r).map_err(|e| format!("readable {e}"))? {
            if !dirs.iter().any(|d| within(&rel, d) && &rel != d) {
                return Err(format!(
                    "readable {r:?}: what an agent reads of the operator's home is a file inside a folder of state it writes"
                ));
            }
        }
    }
    for h in &needs.hosts {
        host_bound(h).map_err(|e| format!("hosts {e}"))?;
    }
    Ok(())
}

/// Suffixes under which anyone registers a name: a wildcard right above one of these
/// lets in everyone's site (with the one-label ones: `*.com`).
const OPEN_SUFFIXES: &[&str] = &[
    "co.uk",
    "org.uk",
    "ac.uk",
    "gov.uk",
    "com.au",
    "net.au",
    "org.au",
    "co.jp",
    "ne.jp",
    "or.jp",
    "com.br",
    "com.cn",
    "com.mx",
    "co.in",
    "co.nz",
    "co.za",
    "com.tr",
    "com.tw",
    "com.sg",
    "com.hk",
    "github.io",
    "githubusercontent.com",
    "gitlab.io",
    "herokuapp.com",
    "vercel.app",
    "netlify.app",
    "pages.dev",
    "workers.dev",
    "web.app",
    "firebaseapp.com",
    "appspot.com",
    "azurewebsites.net",
    "cloudfront.net",
    "amazonaws.com",
    "blogspot.com",
    "ngrok.io",
    "ngrok-free.app",
    "fly.dev",
    "onrender.com",
    "repl.co",
    "glitch.me",
    "r2.dev",
];

/// One entry of a provider's hosts: `host:port` (a name, an address, `[v6]`), or
/// `*.domain:port` with `domain` a registrable name or below one (never `*`, `*.com`,
/// `*.co.uk`, `*.github.io`).
pub fn host_bound(entry: &str) -> Result<(), String> {
    let (host, port) = entry.rsplit_once(':').ok_or_else(|| format!("{entry:?}: no port"))?;
    port.parse::<u16>().ok().filter(|p| *p != 0).ok_or_else(|| format!("{entry:?}: no port"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(format!("{entry:?}: no host"));
    }
    let Some(domain) = host.strip_prefix("*.") else {
        if host.contains('*') {
            return Err(format!("{entry:?}: a wildcard is only `*.domain`"));
        }
        return Ok(());
    };
    let domain = domain.to_ascii_lowercase();
    if domain.contains('*') || domain.parse::<std::net::IpAddr>().is_ok() {
        return Err(format!("{entry:?}: a wildcard is only `*.domain`"));
    }
    if !domain.contains('.') || OPEN_SUFFIXES.contains(&domain.as_str()) {
        return Err(format!("{entry:?}: a wildcard above a registrable domain lets in anyone's site"));
    }
    Ok(())
}

/// `p` with symlinks resolved when it exists (else as given).
pub fn real(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn the_machine_and_homes_are_too_broad_a_workdir() {
        let homes = [p("/home/o")];
        for (w, says) in [
            ("/", "whole machine"),
            ("/home", "users' homes"),
            ("/root", "home folder"),
            ("/home/o", "is a home folder"),
            ("/home/o/", "is a home folder"),
            ("/home/someone", "a user's home"),
            ("/home/o/..", "users' homes"),
        ] {
            let why = broad_workdir(Path::new(w), &homes).unwrap_or_else(|| panic!("{w} is broad"));
            assert!(why.contains(says), "{w}: {why}");
        }
        let why = broad_workdir(Path::new("/srv"), &[p("/srv/users/o")]).unwrap();
        assert!(why.contains("holds the home folder /srv/users/o"), "{why}");
        for w in ["/home/o/proj", "/srv/work", "/tmp/x", "/home/o/.local/state/lab/worktrees/r-1", "/homework"] {
            assert_eq!(broad_workdir(Path::new(w), &homes), None, "{w}");
        }
    }

    #[test]
    fn lab_s_paths_inside_a_bind_are_masked_where_the_jail_sees_them() {
        let lab = [p("/home/o/.local/state/lab"), p("/srv/wt")];
        let bound = [
            Bound { at: p("/home/o"), real: p("/home/o") },
            Bound { at: p("/work"), real: p("/srv") },
            Bound { at: p("/home/o/proj"), real: p("/home/o/proj") },
        ];
        assert_eq!(masks(&lab, &bound), [p("/home/o/.local/state/lab"), p("/work/wt")]);
        assert!(masks(&lab, &bound[2..]).is_empty(), "a project beside lab's home holds none of it");
        let nested = [p("/h/lab"), p("/h/lab/worktrees")];
        assert_eq!(
            masks(&nested, &bound[..1].iter().map(|_| Bound { at: p("/h"), real: p("/h") }).collect::<Vec<_>>()),
            [p("/h/lab")]
        );
        assert!(masks(
            &[p("/home/o/.local/state/labx")],
            &[Bound { at: p("/home/o/.local/state/lab"), real: p("/home/o/.local/state/lab") }]
        )
        .is_empty());
    }

    #[test]
    fn a_provider_s_paths_are_its_own_state_or_absolute() {
        assert_eq!(need_path("~/.agent/"), Ok(NeedPath::State(p(".agent"))));
        assert_eq!(need_path("~/.agent.json"), Ok(NeedPath::State(p(".agent.json"))));
        assert_eq!(need_path("~/.config/acme/"), Ok(NeedPath::State(p(".config/acme"))));
        assert_eq!(need_path("/srv/state/"), Ok(NeedPath::Absolute(p("/srv/state/"))));
        for (bad, why) in [
            ("~/", "whole home"),
            ("~", "not ~/"),
            ("/", "not ~/"),
            ("~/../etc", "climbs"),
            ("~/.a/../../etc", "climbs"),
            ("~/Documents/", "hidden entry"),
            ("~/.ssh/", "never given"),
            ("~/.ssh/id_ed25519", "never given"),
            ("~/.config/", "many tools"),
            ("~/.config/gh/hosts.yml", "never given"),
            ("~/.local/state/lab/", "never given"),
            ("~/.local/", "many tools"),
            ("~/.some_shell_history", "history"),
            ("relative", "not ~/"),
            ("/a/../etc/shadow", "not ~/"),
        ] {
            let e = need_path(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn a_provider_reads_of_the_operator_s_home_only_a_login_inside_its_state() {
        let n = |w: &[&str], r: &[&str], h: &[&str]| super::super::Needs {
            writable: w.iter().map(|s| s.to_string()).collect(),
            readable: r.iter().map(|s| s.to_string()).collect(),
            hosts: h.iter().map(|s| s.to_string()).collect(),
        };
        let ok = n(&["~/.agent/", "~/.agent.json"], &["~/.agent/login.json"], &["api.example.com:443"]);
        assert_eq!(check_needs(&ok), Ok(()));
        assert!(check_needs(&n(&["~/.agent/"], &["~/.agent/"], &[])).unwrap_err().contains("inside a folder"));
        assert!(check_needs(&n(&["~/.agent.json"], &["~/.agent.json"], &[])).is_err(), "a file is no folder");
        assert!(check_needs(&n(&["~/"], &[], &[])).unwrap_err().starts_with("writable"));
        assert!(check_needs(&n(&[], &[], &["*.com:443"])).unwrap_err().starts_with("hosts"));
    }

    #[test]
    fn hosts_are_names_with_a_port_and_no_wildcard_above_a_registrable_domain() {
        for ok in [
            "api.example.com:443",
            "127.0.0.1:8080",
            "[::1]:9",
            "*.example.com:443",
            "*.api.example.co.uk:443",
            "localhost:4000",
        ] {
            assert_eq!(host_bound(ok), Ok(()), "{ok}");
        }
        for bad in [
            "*:443",
            "*.com:443",
            "*.co.uk:443",
            "*.github.io:443",
            "api.example.com",
            "x.com:0",
            "a*.b.com:443",
            "*.*.com:1",
            "*.10.0.0.1:1",
            ":443",
        ] {
            assert!(host_bound(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_workdir_inside_lab_s_files_is_refused() {
        let lab = [p("/h/lab"), p("/srv/wt")];
        assert!(workdir_in_lab(Path::new("/h/lab"), &lab).unwrap().contains("lab's own files (/h/lab)"));
        assert!(workdir_in_lab(Path::new("/h/lab/runtime"), &lab).is_some());
        assert!(workdir_in_lab(Path::new("/srv/wt/r-2"), &lab).is_some());
        assert_eq!(workdir_in_lab(Path::new("/h/labwork"), &lab), None);
        assert_eq!(workdir_in_lab(Path::new("/h"), &lab), None, "holding it is masked, not refused");
    }
}
