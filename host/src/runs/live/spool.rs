//! The spool: the one file per run where the agent's dialog hook puts the prompt it is
//! showing (`lab hook dialog-spool`, atomically replaced by the next prompt, deleted by
//! `lab hook dialog-clear` when the prompt resolves). The tailer reads it
//! ([`crate::runs::live::tailer::Tail`]), the view decides when it is over
//! ([`crate::runs::live::view::spool_is_live`], rule 2) and the tailer then deletes it (GC); the
//! answer path waits on its write time ([`crate::runs::answer::keystrokes::DrawnWait`]). This module
//! holds the pure rules about a spooled prompt's identity.

use crate::agents::model::Dialog;
use crate::store::fsutil;
use std::path::{Path, PathBuf};

/// The answer-guard token of a spooled prompt. A prompt whose id is its transcript
/// call's own keeps it. Any other (a permission request carries no call id, so the
/// provider derives its id from the content) is told apart from an identical prompt
/// later in the run by the spool's write time: two `rm -rf build` approvals are two
/// prompts, and answering the first must not count for the second. The token depends on
/// the spool alone, so it stays the same when a later parse of the same spool finds the
/// call (`call_id` filled in): the operator's answer to the card they see still fits.
pub fn identify(mut dialog: Dialog, written_ns: i128) -> Dialog {
    if dialog.call_id.as_deref() != Some(dialog.id.as_str()) {
        dialog.id = format!("{}~{:x}", dialog.id, written_ns.max(0));
    }
    dialog
}

/// Largest plan file read for a plan dialog that names one instead of carrying its text.
pub const PLAN_FILE_MAX: u64 = 256 * 1024;

/// A plan dialog that names its plan file instead of carrying the text (WIT
/// `plan-body.plan-file`) gets the file's text, read only from inside one of `roots`
/// (the run's agent home and workdir: where an agent keeps its plans) and opened once
/// as an untrusted file ([`fsutil::open_beneath`]: no symlink below the root, no `..`,
/// no FIFO, device or kernel file), at most [`PLAN_FILE_MAX`] bytes of UTF-8. The path
/// comes from a hook payload the agent's side wrote: anything else (`/proc/self/environ`,
/// a FIFO, a symlink to a secret) leaves the dialog as it is (the card then shows no plan
/// text) and says why.
pub fn fill_plan_from_file(dialog: &mut Dialog, roots: &[PathBuf]) -> Result<(), String> {
    let Some(file) = plan_file_wanted(dialog) else { return Ok(()) };
    let text = read_plan_file(&file, roots)?;
    set_plan(dialog, text);
    Ok(())
}

/// The plan file a plan dialog names and whose text it lacks.
pub fn plan_file_wanted(dialog: &Dialog) -> Option<String> {
    match &dialog.body {
        crate::agents::model::DialogBody::Plan { plan: None, plan_file: Some(file), .. } => Some(file.clone()),
        _ => None,
    }
}

/// Give a plan dialog its plan's text.
pub fn set_plan(dialog: &mut Dialog, text: String) {
    if let crate::agents::model::DialogBody::Plan { plan, .. } = &mut dialog.body {
        *plan = Some(text);
    }
}

/// The text of plan file `file`, by the rules of [`fill_plan_from_file`] (also what a
/// runner does for a run on its machine).
pub fn read_plan_file(file: &str, roots: &[PathBuf]) -> Result<String, String> {
    let path = Path::new(file);
    if !path.is_absolute() {
        return Err(format!("the plan file {file:?} is not an absolute path"));
    }
    let Some(root) = roots.iter().find(|r| path.starts_with(r)) else {
        return Err(format!("the plan file {file} is outside the agent's home and workdir; it is not read"));
    };
    let f = fsutil::open_beneath(root, path)
        .map_err(|e| format!("the plan file {file} is not read: {e}"))?
        .ok_or_else(|| format!("the plan file {file} does not exist"))?;
    let text = fsutil::read_capped(f, PLAN_FILE_MAX as usize).map_err(|e| format!("the plan file {file}: {e}"))?;
    String::from_utf8(text).map_err(|_| format!("the plan file {file} is not UTF-8"))
}

/// The folders a run's plan files may be read from: its agent's home and its workdir,
/// each as the real path (symlinks above them are the operator's, resolved here once).
pub fn plan_roots(agent_home: Option<&Path>, workdir: &Path) -> Vec<PathBuf> {
    agent_home.into_iter().chain([workdir]).filter(|p| p.is_absolute()).filter_map(|p| p.canonicalize().ok()).collect()
}

/// Whether `dialog` is a plan with neither its text nor a plan file: a later parse of
/// the same spool, with more of the transcript, may find it.
pub fn lacks_plan_text(dialog: &Dialog) -> bool {
    matches!(&dialog.body, crate::agents::model::DialogBody::Plan { plan: None, plan_file: None, .. })
}

/// The ids a cleared spool's prompt is known by (its own and its call's), so the
/// transcript fallback does not show it again.
pub fn ids(dialog: &Dialog) -> impl Iterator<Item = String> {
    std::iter::once(dialog.id.clone()).chain(dialog.call_id.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::model::DialogBody;

    fn d(id: &str, call: Option<&str>) -> Dialog {
        Dialog {
            id: id.into(),
            call_id: call.map(str::to_string),
            tool_name: "T".into(),
            body: DialogBody::Generic { title: "t".into(), text: "x".into(), options: Vec::new() },
            answerable: true,
            deep_link: None,
        }
    }

    #[test]
    fn prompts_without_a_call_are_told_apart_by_their_spool_s_write_time() {
        assert_eq!(identify(d("toolu_1", Some("toolu_1")), 5).id, "toolu_1");
        let a = identify(d("perm-3f2a", None), 1_700_000_000_000_000_001);
        let b = identify(d("perm-3f2a", None), 1_700_000_000_000_000_002);
        assert!(a.id.starts_with("perm-3f2a~") && a.id != b.id);
        assert_eq!(identify(d("perm-3f2a", None), 1_700_000_000_000_000_001).id, a.id, "stable for one spool");
        // The call found later (a re-parse of the same spool): the same token.
        assert_eq!(identify(d("perm-3f2a", Some("toolu_9")), 1_700_000_000_000_000_001).id, a.id);
        assert_eq!(ids(&d("p", Some("c"))).collect::<Vec<_>>(), ["p", "c"]);
        assert_eq!(ids(&d("p", None)).collect::<Vec<_>>(), ["p"]);
    }

    fn plan(text: Option<&str>, file: Option<&str>) -> Dialog {
        let body = DialogBody::Plan {
            plan: text.map(str::to_string),
            options: Vec::new(),
            feedback_option: None,
            plan_file: file.map(str::to_string),
        };
        Dialog { body, ..d("p", Some("p")) }
    }

    fn plan_text(d: &Dialog) -> Option<&str> {
        match &d.body {
            DialogBody::Plan { plan, .. } => plan.as_deref(),
            _ => None,
        }
    }

    #[test]
    fn a_plan_named_by_its_file_is_read_from_it_within_limits() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("plan.md");
        std::fs::write(&f, "# Plan\n1. go").unwrap();
        let roots = plan_roots(None, dir.path());
        let fill = |p: &mut Dialog| fill_plan_from_file(p, &roots);
        let f = roots[0].join("plan.md");
        let mut p = plan(None, Some(f.to_str().unwrap()));
        fill(&mut p).unwrap();
        assert_eq!(plan_text(&p), Some("# Plan\n1. go"));
        // The payload's own text wins; no file, nothing to do.
        let mut p = plan(Some("inline"), Some(f.to_str().unwrap()));
        fill(&mut p).unwrap();
        assert_eq!(plan_text(&p), Some("inline"));
        // Refused, and the dialog stays without text: relative, missing, a folder, too big, not UTF-8.
        let big = roots[0].join("big.md");
        std::fs::write(&big, vec![b'x'; PLAN_FILE_MAX as usize + 1]).unwrap();
        let bin = roots[0].join("bin.md");
        std::os::unix::fs::symlink("/etc/hostname", roots[0].join("link.md")).unwrap();
        let link = roots[0].join("link.md");
        std::fs::write(&bin, [0xff, 0xfe]).unwrap();
        for bad in [
            "plan.md",
            "/nonexistent/plan.md",
            "/proc/self/environ",
            "/etc/hostname",
            "/dev/zero",
            roots[0].to_str().unwrap(),
            big.to_str().unwrap(),
            bin.to_str().unwrap(),
            link.to_str().unwrap(),
        ] {
            let mut p = plan(None, Some(bad));
            assert!(fill(&mut p).is_err(), "{bad}");
            assert_eq!(plan_text(&p), None, "{bad}");
        }
    }
}
