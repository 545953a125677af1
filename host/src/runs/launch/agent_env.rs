//! What environment an agent starts with. lab decides it, not the provider component:
//!
//! 1. Of `lab serve`'s own environment: all of it, as contract.md says, unless
//!    `[providers.<name>] pass_env` in lab.toml narrows it to an allowlist: then only
//!    the basics every program needs ([`BASIC`]: `PATH`, `HOME`, the locale, the
//!    terminal, proxies, CA bundles…) and what it names (names, or prefixes ending in
//!    `*`). An operator who runs `lab serve` from a shell full of API keys lists the
//!    agent's own there, and the other keys stay out.
//! 2. Then `[providers.<name>] env` from lab.toml, as written.
//! 3. Never `LAB_LOG` or a tmux server's `TMUX` / `TMUX_PANE`.
//!
//! The component sees only that result (in its launch request) and may **add**
//! variables in its launch spec, but never replace one lab set, nor set one of the
//! dynamic loader's ([`LOADER_PREFIXES`]): so it can neither widen what of lab's
//! environment the agent gets nor redirect what lab set.
//!
//! All decisions are pure functions of their inputs; `launch.rs` gathers them.

use std::collections::BTreeMap;
use std::ffi::OsString;

/// Passed from lab serve's environment with any `pass_env`.
pub const BASIC: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TMPDIR",
    "TERM",
    "COLORTERM",
    "XDG_*",
    "SSH_AUTH_SOCK",
    "TMUX_TMPDIR",
    "EDITOR",
    "VISUAL",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
];

/// Never passed or set, whoever asks: lab's log filter, and what leads tmux commands to
/// lab's server.
pub const NEVER: &[&str] = &["LAB_LOG", "TMUX", "TMUX_PANE"];

/// Names a component may not set: they make the dynamic loader load other code.
pub const LOADER_PREFIXES: &[&str] = &["LD_", "DYLD_"];

/// Does `name` match a `pass_env` entry (`NAME`, or `PREFIX*`)?
pub fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// Is `entry` a valid `pass_env` entry (lab.toml checks its own)?
pub use crate::store::config::valid_pass_env as valid_pattern;

/// What [`decide`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Decided {
    pub env: BTreeMap<String, String>,
    /// Variables of lab serve's left out because lab.toml's `pass_env` does not name them.
    pub not_passed: Vec<String>,
    /// Variables of lab serve's left out because their name or value is not UTF-8
    /// (the launch file is JSON).
    pub not_utf8: Vec<String>,
}

/// The agent's environment from lab serve's own (`inherited`), lab.toml's
/// `pass_env` (`None`: all of it) and its `env`.
pub fn decide(
    inherited: impl IntoIterator<Item = (OsString, OsString)>,
    pass_env: Option<&[String]>,
    explicit: &BTreeMap<String, String>,
) -> Decided {
    let mut out = Decided::default();
    let passed = |name: &str| match pass_env {
        None => true,
        Some(list) => BASIC.iter().copied().chain(list.iter().map(String::as_str)).any(|p| matches(p, name)),
    };
    for (k, v) in inherited {
        match (k.into_string(), v.into_string()) {
            (Ok(k), Ok(v)) => {
                if NEVER.contains(&k.as_str()) {
                    continue;
                }
                if passed(&k) {
                    out.env.insert(k, v);
                } else {
                    out.not_passed.push(k);
                }
            }
            (k, _) => out.not_utf8.push(k.unwrap_or_else(|k| k.to_string_lossy().into_owned())),
        }
    }
    for (k, v) in explicit {
        if !NEVER.contains(&k.as_str()) {
            out.env.insert(k.clone(), v.clone());
        }
    }
    out.not_passed.sort();
    out
}

/// Of the variables left out, the ones that look like credentials (worth a hint).
pub fn credential_like(names: &[String]) -> Vec<&str> {
    const WORDS: &[&str] = &["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH"];
    names.iter().map(String::as_str).filter(|n| WORDS.iter().any(|w| n.to_ascii_uppercase().contains(w))).collect()
}

/// Add the component's variables to lab's `env`: new names only, none of the
/// loader's or [`NEVER`], each a valid name and value.
pub fn add_component_vars(env: &mut BTreeMap<String, String>, vars: Vec<(String, String)>) -> Result<(), String> {
    for (k, v) in vars {
        if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
            return Err(format!("the provider returned an invalid environment variable {k:?}"));
        }
        if LOADER_PREFIXES.iter().any(|p| k.starts_with(p)) || NEVER.contains(&k.as_str()) {
            return Err(format!("the provider may not set {k} in the agent's environment"));
        }
        if env.contains_key(&k) {
            return Err(format!(
                "the provider may not replace {k} in the agent's environment (lab sets it: lab.toml's env or pass_env)"
            ));
        }
        env.insert(k, v);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect()
    }

    #[test]
    fn only_the_basics_and_what_lab_toml_passes_reach_the_agent() {
        let inherited = os(&[
            ("PATH", "/bin"),
            ("HOME", "/h"),
            ("LC_ALL", "C.UTF-8"),
            ("MODEL_API_KEY", "sk-1"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_REGION", "eu"),
            ("LAB_LOG", "debug"),
            ("TMUX", "/tmp/x,1,0"),
            ("RANDOM_THING", "x"),
        ]);
        let all = decide(inherited.clone(), None, &BTreeMap::new());
        assert!(all.not_passed.is_empty(), "no pass_env: all of it (contract.md)");
        assert!(all.env.contains_key("MODEL_API_KEY") && all.env.contains_key("RANDOM_THING"));
        assert!(!all.env.contains_key("LAB_LOG") && !all.env.contains_key("TMUX"));
        let d = decide(inherited.clone(), Some(&[]), &BTreeMap::new());
        assert_eq!(d.env.keys().collect::<Vec<_>>(), ["HOME", "LC_ALL", "PATH"]);
        assert_eq!(d.not_passed, ["AWS_REGION", "AWS_SECRET_ACCESS_KEY", "MODEL_API_KEY", "RANDOM_THING"]);
        assert_eq!(credential_like(&d.not_passed), ["AWS_SECRET_ACCESS_KEY", "MODEL_API_KEY"]);

        let explicit = BTreeMap::from([("BASE_URL".to_string(), "http://127.0.0.1:9".to_string())]);
        let d = decide(inherited.clone(), Some(&["MODEL_API_KEY".into(), "AWS_*".into()]), &explicit);
        assert_eq!(
            d.env.keys().collect::<Vec<_>>(),
            ["AWS_REGION", "AWS_SECRET_ACCESS_KEY", "BASE_URL", "HOME", "LC_ALL", "MODEL_API_KEY", "PATH"]
        );
        assert_eq!(d.not_passed, ["RANDOM_THING"]);

        let d = decide(inherited, Some(&["*".into()]), &BTreeMap::from([("TMUX".to_string(), "x".to_string())]));
        assert!(d.not_passed.is_empty());
        assert!(!d.env.contains_key("LAB_LOG") && !d.env.contains_key("TMUX"), "never, even with *");
    }

    #[test]
    fn non_utf8_variables_are_left_out_by_name() {
        use std::os::unix::ffi::OsStringExt;
        let d = decide(vec![(OsString::from("PATH"), OsString::from_vec(b"caf\xe9".to_vec()))], None, &BTreeMap::new());
        assert_eq!(d.not_utf8, ["PATH"]);
        assert!(d.env.is_empty());
    }

    #[test]
    fn patterns() {
        assert!(matches("AWS_*", "AWS_REGION") && !matches("AWS_*", "AWSX") && matches("*", "ANY"));
        assert!(matches("PATH", "PATH") && !matches("PATH", "PATHS"));
        for ok in ["PATH", "AWS_*", "*", "a1_"] {
            assert!(valid_pattern(ok), "{ok}");
        }
        for bad in ["", "A B", "A=B", "**", "A*B", "*A"] {
            assert!(!valid_pattern(bad), "{bad}");
        }
    }

    #[test]
    fn a_component_adds_but_never_replaces_or_loads_code() {
        let mut env = BTreeMap::from([("PATH".to_string(), "/bin".to_string())]);
        add_component_vars(&mut env, vec![("AGENT_MODE".into(), "lab".into())]).unwrap();
        assert_eq!(env["AGENT_MODE"], "lab");
        let err = |vars: Vec<(&str, &str)>| {
            let mut e = env.clone();
            add_component_vars(&mut e, vars.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
                .unwrap_err()
        };
        assert!(err(vec![("PATH", "/evil")]).contains("may not replace PATH"));
        assert!(err(vec![("LD_PRELOAD", "/x.so")]).contains("may not set LD_PRELOAD"));
        assert!(err(vec![("DYLD_INSERT_LIBRARIES", "/x")]).contains("may not set"));
        assert!(err(vec![("TMUX", "x")]).contains("may not set TMUX"));
        assert!(err(vec![("A=B", "x")]).contains("invalid"));
        assert!(err(vec![("A", "x\0")]).contains("invalid"));
    }
}
