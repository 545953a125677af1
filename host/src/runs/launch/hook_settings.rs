//! Hook settings: the commands the agent's hooks run, one per binding the provider
//! asks for (`dialog-hooker.hook-wiring`), with this run's exact files baked in; and the
//! per-run settings file the provider may make of them.

use crate::agents::model::{Channel, HookBinding, HookCommand};
use crate::store::fsutil;
use crate::store::paths::RunFiles;
use crate::util::shell;
use std::path::Path;

/// The `lab hook …` command for each binding (see [`crate::agents::hook`]).
pub fn commands(lab_exe: &Path, files: &RunFiles, bindings: Vec<HookBinding>) -> Vec<HookCommand> {
    let lab = lab_exe.to_string_lossy().into_owned();
    bindings
        .into_iter()
        .map(|binding| {
            let file = |p: &Path| p.to_string_lossy().into_owned();
            let mut words = vec![lab.clone(), "hook".to_string()];
            match &binding.channel {
                Channel::DialogSpool => words.extend(["dialog-spool".into(), file(&files.spool)]),
                Channel::DialogClear(pointers) => {
                    words.extend(["dialog-clear".into(), file(&files.spool)]);
                    for p in pointers {
                        words.extend(["--match".into(), p.clone()]);
                    }
                }
                Channel::BlockedMarker => words.extend(["blocked-marker".into(), file(&files.marker)]),
                Channel::SessionInfo => words.extend(["session-info".into(), file(&files.session)]),
            }
            HookCommand { command: shell::join(&words), binding }
        })
        .collect()
}

/// Refuse bindings the host cannot build a working command for.
pub fn validate(bindings: &[HookBinding]) -> Result<(), String> {
    for b in bindings {
        if let Channel::DialogClear(pointers) = &b.channel {
            if let Some(p) = pointers.iter().find(|p| !(p.is_empty() || p.starts_with('/')) || p.len() > 256) {
                return Err(format!("the provider's clear for `{}` has an invalid JSON pointer {p:?}", b.event));
            }
        }
    }
    Ok(())
}

/// Check the provider's document is JSON and write it (0600) under runtime/ (0700).
pub fn write(runtime_dir: &Path, files: &RunFiles, document: &str) -> Result<(), String> {
    serde_json::from_str::<serde_json::Value>(document)
        .map_err(|e| format!("the provider's hook settings are not valid JSON: {e}"))?;
    fsutil::private_dir(runtime_dir).map_err(|e| format!("creating {}: {e}", runtime_dir.display()))?;
    fsutil::write_atomic(&files.settings, document.as_bytes(), 0o600)
        .map_err(|e| format!("writing {}: {e}", files.settings.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::paths::RunId;
    use std::os::unix::fs::PermissionsExt;

    fn binding(channel: Channel) -> HookBinding {
        HookBinding { event: "E".into(), matcher: None, channel }
    }

    #[test]
    fn commands_carry_the_exact_paths_quoted_per_channel() {
        let run = RunId::parse("r-1").unwrap();
        let files = RunFiles::new(Path::new("/home/o p/runtime"), &run);
        let cmds = commands(
            Path::new("/usr/bin/lab"),
            &files,
            vec![
                binding(Channel::DialogSpool),
                binding(Channel::DialogClear(vec!["/tool_name".into(), "/tool_input".into()])),
                binding(Channel::BlockedMarker),
                binding(Channel::SessionInfo),
            ],
        );
        let c: Vec<&str> = cmds.iter().map(|c| c.command.as_str()).collect();
        assert_eq!(c[0], "/usr/bin/lab hook dialog-spool '/home/o p/runtime/r-1.spool.json'");
        assert_eq!(
            c[1],
            "/usr/bin/lab hook dialog-clear '/home/o p/runtime/r-1.spool.json' --match /tool_name --match /tool_input"
        );
        assert_eq!(c[2], "/usr/bin/lab hook blocked-marker '/home/o p/runtime/r-1.marker.json'");
        assert_eq!(c[3], "/usr/bin/lab hook session-info '/home/o p/runtime/r-1.session.json'");
        // Every command (here with a path that needs no quoting) parses back to what
        // `lab hook` does.
        let plain = RunFiles::new(Path::new("/run/lab"), &run);
        let bindings = cmds.iter().map(|c| c.binding.clone()).collect();
        for cmd in commands(Path::new("/usr/bin/lab"), &plain, bindings) {
            let words: Vec<String> = cmd.command.split(' ').skip(2).map(str::to_string).collect();
            let (action, file) = crate::agents::hook::parse_args(&words).expect(&cmd.command);
            assert!(file.starts_with("/run/lab/r-1."), "{}", cmd.command);
            match &cmd.binding.channel {
                Channel::DialogClear(p) => {
                    assert_eq!(action, crate::agents::hook::Action::Clear { pointers: p.clone() })
                }
                _ => assert_eq!(action, crate::agents::hook::Action::Write),
            }
        }
        assert!(validate(&[binding(Channel::DialogClear(vec!["tool_name".into()]))]).is_err());
        assert!(validate(&[binding(Channel::DialogClear(vec!["/a~1b".into()]))]).is_ok());
    }

    #[test]
    fn writes_private_files_and_rejects_bad_json() {
        let d = tempfile::tempdir().unwrap();
        let runtime = d.path().join("runtime");
        let files = RunFiles::new(&runtime, &RunId::parse("r-2").unwrap());
        assert!(write(&runtime, &files, "{not json").is_err());
        assert!(!files.settings.exists());
        write(&runtime, &files, r#"{"hooks":{}}"#).unwrap();
        assert_eq!(std::fs::metadata(&runtime).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(&files.settings).unwrap().permissions().mode() & 0o777, 0o600);
    }
}
