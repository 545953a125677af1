//! The files `lab service install` writes, as pure functions of what it was given: a
//! systemd user unit, a launchd agent, and where each file goes.

use std::path::{Path, PathBuf};

/// What the service runs: `exe serve --addr … --home …`, with `PATH` (where the agents
/// and tmux are found) and any variables the operator asked to carry over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub exe: PathBuf,
    pub addr: String,
    pub home: PathBuf,
    pub path: String,
    /// `(NAME, value)` set for lab serve (and so for the agents it starts).
    pub env: Vec<(String, String)>,
}

/// The unit's name.
pub const UNIT: &str = "lab.service";
/// The launchd agent's label.
pub const LABEL: &str = "org.lab.serve";

impl Spec {
    /// A spec lab can write: absolute paths, no line breaks or NULs anywhere (a unit is
    /// line-based), variable names that are names.
    pub fn check(&self) -> Result<(), String> {
        for (what, p) in [("lab's binary", &self.exe), ("the home", &self.home)] {
            if !p.is_absolute() {
                return Err(format!("{what} must be an absolute path: {}", p.display()));
            }
        }
        let texts = [self.exe.to_string_lossy().into_owned(), self.home.to_string_lossy().into_owned()];
        let all = texts.iter().map(String::as_str).chain([self.addr.as_str(), self.path.as_str()]);
        let all = all.chain(self.env.iter().flat_map(|(k, v)| [k.as_str(), v.as_str()]));
        for t in all {
            if t.contains(['\n', '\r', '\0']) {
                return Err(format!("{t:?} holds a line break or a NUL: a service file cannot carry it"));
            }
        }
        for (k, _) in &self.env {
            let name_ok = !k.is_empty()
                && !k.starts_with(|c: char| c.is_ascii_digit())
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !name_ok {
                return Err(format!("{k:?} is not an environment variable's name"));
            }
        }
        Ok(())
    }

    /// The command line, as words.
    pub fn argv(&self) -> Vec<String> {
        vec![
            self.exe.to_string_lossy().into_owned(),
            "serve".into(),
            "--addr".into(),
            self.addr.clone(),
            "--home".into(),
            self.home.to_string_lossy().into_owned(),
        ]
    }
}

/// One word of a unit's command line or `Environment=` (systemd.service(5), "Command
/// lines"; systemd.unit(5), "Specifiers"): plain when it is only safe characters,
/// else double-quoted with `\` and `"` escaped; `%` is always `%%` (a specifier
/// otherwise) and, in a command line, `$` is `$$` (a variable otherwise).
pub fn systemd_word(word: &str, command_line: bool) -> String {
    let plain = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "/_.:@=,+-".contains(c));
    if plain {
        return word.to_string();
    }
    let mut out = String::from("\"");
    for c in word.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            '$' if command_line => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The systemd user unit.
pub fn systemd_unit(spec: &Spec) -> String {
    let exec: Vec<String> = spec.argv().iter().map(|w| systemd_word(w, true)).collect();
    let mut env = vec![systemd_word(&format!("PATH={}", spec.path), false)];
    env.extend(spec.env.iter().map(|(k, v)| systemd_word(&format!("{k}={v}"), false)));
    let env: String = env.iter().map(|e| format!("Environment={e}\n")).collect();
    format!(
        "# Written by `lab service install`; `lab service uninstall` removes it.\n\
         [Unit]\n\
         Description=lab: coding agents in tmux, answered from a web UI\n\
         Documentation=man:lab(1)\n\
         StartLimitIntervalSec=300\n\
         StartLimitBurst=5\n\
         \n\
         [Service]\n\
         Type=exec\n\
         ExecStart={exec}\n\
         {env}\
         WorkingDirectory=%h\n\
         Restart=on-failure\n\
         RestartSec=5s\n\
         # Only lab serve itself is stopped or restarted: its tmux server and the agents in\n\
         # it go on, and the next lab serve finds its runs again.\n\
         KillMode=process\n\
         TimeoutStopSec=30s\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        exec = exec.join(" "),
    )
}

/// Text for XML character data and attribute values.
fn xml(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The launchd agent (`~/Library/LaunchAgents/org.lab.serve.plist`): started at login,
/// started again when it exits with a failure, its output in lab's logs folder.
pub fn launchd_plist(spec: &Spec) -> String {
    let args: String = spec.argv().iter().map(|a| format!("    <string>{}</string>\n", xml(a))).collect();
    let mut env = vec![("PATH".to_string(), spec.path.clone())];
    env.extend(spec.env.iter().cloned());
    let env: String =
        env.iter().map(|(k, v)| format!("    <key>{}</key>\n    <string>{}</string>\n", xml(k), xml(v))).collect();
    let log = xml(&spec.home.join("logs/service.log").to_string_lossy());
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
         <!-- Written by `lab service install`; `lab service uninstall` removes it. -->\n\
         <plist version=\"1.0\">\n\
         <dict>\n\
         \x20 <key>Label</key>\n\
         \x20 <string>{LABEL}</string>\n\
         \x20 <key>ProgramArguments</key>\n\
         \x20 <array>\n\
         {args}\
         \x20 </array>\n\
         \x20 <key>EnvironmentVariables</key>\n\
         \x20 <dict>\n\
         {env}\
         \x20 </dict>\n\
         \x20 <key>RunAtLoad</key>\n\
         \x20 <true/>\n\
         \x20 <key>KeepAlive</key>\n\
         \x20 <dict>\n\
         \x20   <key>SuccessfulExit</key>\n\
         \x20   <false/>\n\
         \x20 </dict>\n\
         \x20 <key>AbandonProcessGroup</key>\n\
         \x20 <true/>\n\
         \x20 <key>StandardOutPath</key>\n\
         \x20 <string>{log}</string>\n\
         \x20 <key>StandardErrorPath</key>\n\
         \x20 <string>{log}</string>\n\
         </dict>\n\
         </plist>\n"
    )
}

/// Where `lab service install` puts each file, from the user's `HOME` and the XDG base
/// directories (unset or relative ones ignored, as the spec says).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Places {
    pub systemd_unit: PathBuf,
    pub launchd_plist: PathBuf,
    pub bash: PathBuf,
    pub zsh: PathBuf,
    pub fish: PathBuf,
    pub man: PathBuf,
}

impl Places {
    pub fn new(home: &Path, xdg_config: Option<&Path>, xdg_data: Option<&Path>) -> Places {
        let config = xdg_config.filter(|p| p.is_absolute()).map_or_else(|| home.join(".config"), Path::to_path_buf);
        let data = xdg_data.filter(|p| p.is_absolute()).map_or_else(|| home.join(".local/share"), Path::to_path_buf);
        Places {
            systemd_unit: config.join("systemd/user").join(UNIT),
            launchd_plist: home.join("Library/LaunchAgents").join(format!("{LABEL}.plist")),
            bash: data.join("bash-completion/completions/lab"),
            zsh: data.join("zsh/site-functions/_lab"),
            fish: config.join("fish/completions/lab.fish"),
            man: data.join("man/man1/lab.1"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Spec {
        Spec {
            exe: "/home/op/.cargo/bin/lab".into(),
            addr: "127.0.0.1:7777".into(),
            home: "/home/op/.local/state/lab".into(),
            path: "/home/op/.local/bin:/usr/bin:/bin".into(),
            env: vec![],
        }
    }

    #[test]
    fn words_are_quoted_for_systemd() {
        assert_eq!(systemd_word("/usr/bin/lab", true), "/usr/bin/lab");
        assert_eq!(systemd_word("/my dir/lab", true), "\"/my dir/lab\"");
        assert_eq!(systemd_word("50%", true), "\"50%%\"");
        assert_eq!(systemd_word("a$HOME", true), "\"a$$HOME\"");
        assert_eq!(systemd_word("KEY=a$b", false), "\"KEY=a$b\"", "Environment= does not expand $");
        assert_eq!(systemd_word("say \"hi\"\\", true), "\"say \\\"hi\\\"\\\\\"");
        assert_eq!(systemd_word("", true), "\"\"");
    }

    #[test]
    fn the_unit_runs_lab_serve_as_given_and_restarts_on_failure_only() {
        let unit = systemd_unit(&Spec { env: vec![("API_KEY".into(), "k%1".into())], ..spec() });
        assert!(unit.contains(
            "\nExecStart=/home/op/.cargo/bin/lab serve --addr 127.0.0.1:7777 --home /home/op/.local/state/lab\n"
        ));
        assert!(unit.contains("\nEnvironment=PATH=/home/op/.local/bin:/usr/bin:/bin\n"));
        assert!(unit.contains("\nEnvironment=\"API_KEY=k%%1\"\n"));
        assert!(unit.contains("\nRestart=on-failure\n"));
        assert!(unit.contains("\nKillMode=process\n"));
        assert!(unit.contains("\nWantedBy=default.target\n"));
    }

    #[test]
    fn a_spec_with_a_line_break_or_a_relative_path_is_refused() {
        assert!(spec().check().is_ok());
        assert!(Spec { home: "state/lab".into(), ..spec() }.check().unwrap_err().contains("absolute"));
        let injected = Spec { path: "/bin\nExecStartPre=/bin/rm -rf ~".into(), ..spec() };
        assert!(injected.check().unwrap_err().contains("line break"));
        let bad_name = Spec { env: vec![("A B".into(), "1".into())], ..spec() };
        assert!(bad_name.check().is_err());
    }

    #[test]
    fn the_plist_escapes_what_xml_needs() {
        let p = launchd_plist(&Spec { home: "/Users/a&b/lab".into(), ..spec() });
        assert!(p.contains("<string>/Users/a&amp;b/lab</string>"));
        assert!(p.contains("<string>org.lab.serve</string>"));
        assert!(!p.contains("a&b"));
    }

    #[test]
    fn places_follow_the_xdg_directories() {
        let p = Places::new(Path::new("/home/op"), None, Some(Path::new("relative/ignored")));
        assert_eq!(p.systemd_unit, PathBuf::from("/home/op/.config/systemd/user/lab.service"));
        assert_eq!(p.bash, PathBuf::from("/home/op/.local/share/bash-completion/completions/lab"));
        let q = Places::new(Path::new("/home/op"), Some(Path::new("/cfg")), Some(Path::new("/data")));
        assert_eq!(q.fish, PathBuf::from("/cfg/fish/completions/lab.fish"));
        assert_eq!(q.man, PathBuf::from("/data/man/man1/lab.1"));
    }
}
