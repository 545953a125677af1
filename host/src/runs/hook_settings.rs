//! Hook settings: the per-run settings file the agent is launched with. The host
//! builds the three `lab hook …` commands with this run's exact spool and marker paths
//! baked in; the provider turns them into its agent's settings document.

use crate::fsutil;
use crate::paths::{RunFiles, RunId};
use lab_provider_sdk::shell;
use lab_provider_sdk::HookContext;
use std::path::Path;

/// The commands the agent's hooks run, for one run.
pub fn context(lab_exe: &Path, run: &RunId, files: &RunFiles) -> HookContext {
    let lab = lab_exe.to_string_lossy();
    let cmd = |verb: &str, path: &Path| shell::join([lab.as_ref(), "hook", verb, path.to_string_lossy().as_ref()]);
    HookContext {
        run_id: run.to_string(),
        spool_write: cmd("spool-write", &files.spool),
        spool_clear: cmd("spool-clear", &files.spool),
        marker_write: cmd("marker-write", &files.marker),
    }
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
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn commands_carry_the_exact_paths_quoted() {
        let run = RunId::parse("r-1").unwrap();
        let files = RunFiles::new(Path::new("/home/o p/runtime"), &run);
        let ctx = context(Path::new("/usr/bin/lab"), &run, &files);
        assert_eq!(ctx.spool_write, "/usr/bin/lab hook spool-write '/home/o p/runtime/r-1.spool.json'");
        assert_eq!(ctx.spool_clear, "/usr/bin/lab hook spool-clear '/home/o p/runtime/r-1.spool.json'");
        assert_eq!(ctx.marker_write, "/usr/bin/lab hook marker-write '/home/o p/runtime/r-1.marker.json'");
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
