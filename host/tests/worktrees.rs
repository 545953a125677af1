//! A worktree per run, with real git and fake-claude editing files: the run's branch and
//! folder, its diff against the base (equal to `git diff`), review comments reaching the
//! agent, merge (and a conflicting one changing nothing), discard, and two runs in one
//! repository never touching each other's files.

mod common;

use common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn git_cmd(dir: &Path) -> Command {
    let mut c = Command::new("git");
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("GIT_") {
            c.env_remove(k);
        }
    }
    c.arg("-C").arg(dir).args([
        "-c",
        "user.name=Test",
        "-c",
        "user.email=test@example.com",
        "-c",
        "core.quotepath=false",
    ]);
    c
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(dir).args(args).output().unwrap();
    assert!(out.status.success(), "git {args:?} in {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn git_ok(dir: &Path, args: &[&str]) -> bool {
    git_cmd(dir).args(args).output().unwrap().status.success()
}

const LIB: &str = "pub fn one() -> u32 {\n    1\n}\n\npub fn two() -> u32 {\n    2\n}\n";

/// The world's workdir as a repository on `main` with one commit.
fn make_repo(w: &World) -> PathBuf {
    let repo = w.workdir.canonicalize().unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(repo.join("src")).unwrap();
    std::fs::write(repo.join("src/lib.rs"), LIB).unwrap();
    std::fs::write(repo.join("old.txt"), "to be removed\n").unwrap();
    std::fs::write(repo.join("README.md"), "# app\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    repo
}

fn edits() -> Value {
    json!({"steps": [
        {"say": "Editing."},
        {"write": {"path": "src/lib.rs", "text": LIB.replace("    2\n", "    2 + 0\n")}},
        {"write": {"path": "new.txt", "text": "a new file\nline two\n"}},
        {"write": {"path": "img.bin", "bytes": [0, 159, 146, 150, 0, 1, 2]}},
        {"write": {"path": "old.txt", "delete": true}},
        {"idle": {"say": "Done editing."}}
    ]})
}

fn id_of(run: &Value) -> String {
    run["id"].as_str().unwrap().to_string()
}

/// The cwd fake-claude started in, for the run whose session id is `session`.
fn started_in(log: &Path, session: &str) -> String {
    wait_for(Duration::from_secs(20), "fake-claude's start", || {
        World::log_events(log)
            .into_iter()
            .find(|e| e["event"] == "start" && e["session_id"] == session)
            .map(|e| e["cwd"].as_str().unwrap_or("").to_string())
    })
}

fn wait_composer(log: &Path, n: usize) {
    wait_for(Duration::from_secs(20), "the agent's composer", || {
        let ready =
            World::log_events(log).iter().filter(|e| e["event"] == "ready" && e["widget"] == "composer").count();
        (ready >= n).then_some(())
    });
}

#[test]
fn a_run_works_on_its_own_branch_and_its_diff_review_merge_and_discard_go_through_git() {
    let w = World::new();
    let repo = make_repo(&w);
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let log = w.use_fake_claude(&edits());
    let lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "edit things");
    let id = id_of(&run);
    let wt = &run["worktree"];
    assert_eq!(wt["branch"], format!("lab/{id}"), "{run}");
    assert_eq!(wt["base"], base);
    assert_eq!(wt["base_ref"], "main");
    assert_eq!(wt["repo"], repo.to_str().unwrap());
    let path = PathBuf::from(wt["path"].as_str().unwrap());
    assert!(path.starts_with(w.home.join("worktrees")), "{}", path.display());
    assert!(!path.starts_with(&repo));
    assert_eq!(git(&path, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(), format!("lab/{id}"));
    let sid = run["session_id"].as_str().unwrap_or_default().to_string();
    assert_eq!(started_in(&log, &sid), path.to_str().unwrap(), "the agent runs in the worktree");
    wait_composer(&log, 1);
    assert!(path.join("img.bin").exists() && !path.join("old.txt").exists());
    // The view (so the event stream) counts the changes as the agent makes them.
    // (A count made while the agent wrote may have caught a file made but not yet
    // written: the one after its last write is whole.)
    let whole = json!({"files_changed": 4, "additions": 3, "deletions": 2});
    lab.wait_view(&id, "the diff summary after the agent's last write", |v| v["diff"] == whole);
    // The repository's own checkout is untouched.
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    assert!(repo.join("old.txt").exists() && !repo.join("new.txt").exists());

    // The diff: committed, uncommitted and untracked, as git shows it.
    let (status, diff) = lab.get(&format!("/runs/{id}/diff"));
    assert_eq!(status, 200, "{diff}");
    assert_eq!(diff["base"], base);
    assert_eq!(diff["head"], base);
    assert_eq!(diff["truncated"], false);
    let files = diff["files"].as_array().unwrap();
    let file = |p: &str| files.iter().find(|f| f["path"] == p).unwrap_or_else(|| panic!("{p} not in {diff}")).clone();
    assert_eq!(files.len(), 4, "{diff}");
    assert_eq!(file("src/lib.rs")["status"], "modified");
    assert_eq!(
        (file("src/lib.rs")["additions"].as_u64(), file("src/lib.rs")["deletions"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(file("new.txt")["status"], "added");
    assert_eq!(file("new.txt")["additions"], 2);
    assert_eq!(file("img.bin")["binary"], true);
    assert_eq!(file("old.txt")["status"], "deleted");
    assert_eq!(diff["files_changed"], 4);
    let patch: String = files.iter().map(|f| f["patch"].as_str().unwrap()).collect();
    // The operator's way: stage everything, `git diff base`. lab's diff is the same
    // (and does not depend on what the agent staged).
    git(&path, &["add", "-A"]);
    assert_eq!(patch, git(&path, &["diff", "-M", "--cached", &base]));
    let (_, again) = lab.get(&format!("/runs/{id}/diff"));
    assert_eq!(again["files"], diff["files"]);
    git(&path, &["reset", "-q"]);

    // Review comments reach the agent with path, line and that line's text.
    let (status, body) = lab.post(
        &format!("/runs/{id}/review"),
        &json!({"summary": "Two things.", "comments": [
            {"path": "src/lib.rs", "line": 6, "text": "Why + 0?"},
            {"path": "old.txt", "line": 1, "side": "old", "text": "Keep this file."}
        ]}),
    );
    assert_eq!(status, 202, "{body}");
    let said = wait_for(Duration::from_secs(20), "the review in the agent", || {
        World::log_events(&log)
            .into_iter()
            .find(|e| e["event"] == "user_message" && e["text"].as_str().unwrap_or("").contains("Review"))
            .map(|e| e["text"].as_str().unwrap().to_string())
    });
    assert!(said.contains("src/lib.rs line 6:\n   >     2 + 0\n   Why + 0?"), "{said}");
    assert!(said.contains("old.txt line 1 (before your change):\n   > to be removed\n   Keep this file."), "{said}");
    assert!(said.contains("Two things."), "{said}");
    for (bad, want) in [
        (json!({"comments": [{"path": "../etc/passwd", "line": 1, "text": "x"}]}), 400),
        (json!({"comments": [{"path": "src/lib.rs", "line": 99, "text": "x"}]}), 400),
        (json!({"comments": [{"path": "nope.rs", "line": 1, "text": "x"}]}), 400),
        (json!({"comments": []}), 400),
        (json!({"comments": [{"path": "src/lib.rs", "line": 1, "text": "x", "extra": 1}]}), 400),
    ] {
        let (status, body) = lab.post(&format!("/runs/{id}/review"), &bad);
        assert_eq!(status, want, "{bad} → {body}");
        assert_eq!(body["error"], "bad_request");
    }

    // Merge: the agent's uncommitted changes committed first, then merged into main.
    wait_composer(&log, 2);
    let (status, merged) = lab.post(&format!("/runs/{id}/merge"), &json!({}));
    assert_eq!(status, 200, "{merged}");
    let commit = merged["commit"].as_str().unwrap().to_string();
    assert_eq!(git(&repo, &["rev-parse", "main"]).trim(), commit);
    let parents = git(&repo, &["log", "-1", "--format=%P", &commit]);
    let tip = git(&repo, &["rev-parse", &format!("lab/{id}")]).trim().to_string();
    assert_eq!(parents.trim(), format!("{base} {tip}"));
    assert!(git(&repo, &["log", "-1", "--format=%B", &tip]).contains("uncommitted changes"));
    assert_eq!(git(&repo, &["status", "--porcelain"]), "", "the checkout follows the merge");
    assert!(repo.join("new.txt").exists() && !repo.join("old.txt").exists());
    assert_eq!(git(&path, &["status", "--porcelain"]), "", "the worktree's changes are its branch's now");
    assert_eq!(merged["run"]["worktree"]["merged"], commit);
    let (status, body) = lab.post(&format!("/runs/{id}/merge"), &json!({}));
    assert_eq!((status, body["error"].as_str()), (409, Some("nothing_to_merge")), "{body}");
    let (status, body) = lab.post(&format!("/runs/{id}/merge"), &json!({"strategy": "rebase"}));
    assert_eq!(status, 400, "{body}");

    // Discard: only once the run has ended; then worktree and branch are gone.
    let (status, body) = lab.post(&format!("/runs/{id}/discard"), &json!({}));
    assert_eq!((status, body["error"].as_str()), (409, Some("run_active")), "{body}");
    assert!(path.exists());
    let (status, _) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!(status, 200);
    let (status, body) = lab.post(&format!("/runs/{id}/discard"), &json!({}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["worktree"]["discarded"], true);
    assert!(!path.exists());
    assert!(!git_ok(&repo, &["show-ref", "--verify", "--quiet", &format!("refs/heads/lab/{id}")]));
    assert!(git(&repo, &["worktree", "list"]).lines().count() == 1);
    let (status, body) = lab.get(&format!("/runs/{id}/diff"));
    assert_eq!((status, body["error"].as_str()), (409, Some("no_worktree")), "{body}");
    assert_eq!(lab.view(&id)["diff"], Value::Null);
    // The record keeps it through a restart.
    lab.stop();
    let lab = w.serve();
    let (_, run) = lab.get(&format!("/runs/{id}"));
    assert_eq!(run["worktree"]["discarded"], true);
    assert_eq!(git(&repo, &["rev-parse", "main"]).trim(), commit);
}

#[test]
fn two_runs_in_one_repository_keep_apart_and_a_conflicting_merge_changes_nothing() {
    let w = World::new();
    let repo = make_repo(&w);
    let script = |text: &str| {
        json!({"steps": [
            {"write": {"path": "src/lib.rs", "text": LIB.replace("    2\n", &format!("    {text}\n"))}},
            {"write": {"path": "shared.txt", "text": text}},
            {"idle": {}}
        ]})
    };
    // Two providers' worth of scripts: the runs differ by their first prompt only, so
    // each run reads its text from the prompt through two scripts in two configs.
    let log = w.use_fake_claude(&script("20"));
    let lab = w.serve();
    let a = lab.create_run(&w, "claude-code", "first");
    let a_path = PathBuf::from(a["worktree"]["path"].as_str().unwrap());
    wait_composer(&log, 1);
    lab.stop();
    w.use_fake_claude(&script("30"));
    let lab = w.serve();
    let b = lab.create_run(&w, "claude-code", "second");
    let b_path = PathBuf::from(b["worktree"]["path"].as_str().unwrap());
    wait_for(Duration::from_secs(20), "the second run's edit", || {
        std::fs::read_to_string(b_path.join("shared.txt")).ok().filter(|t| t == "30")
    });
    assert_ne!(a_path, b_path);
    assert_eq!(std::fs::read_to_string(a_path.join("shared.txt")).unwrap(), "20");
    assert!(!repo.join("shared.txt").exists());

    let (status, m) =
        lab.post(&format!("/runs/{}/merge", id_of(&a)), &json!({"strategy": "squash", "message": "A's work"}));
    assert_eq!(status, 200, "{m}");
    let squashed = m["commit"].as_str().unwrap().to_string();
    assert_eq!(git(&repo, &["log", "-1", "--format=%P%n%s", &squashed]).lines().collect::<Vec<_>>().len(), 2);
    assert_eq!(git(&repo, &["log", "-1", "--format=%s", &squashed]).trim(), "A's work");
    assert_eq!(
        git(&repo, &["log", "-1", "--format=%P", &squashed]).split_whitespace().count(),
        1,
        "squash: one parent"
    );

    // B changed the same lines: a conflict, and nothing moves.
    let before = (
        git(&repo, &["rev-parse", "HEAD"]),
        git(&repo, &["status", "--porcelain"]),
        git(&b_path, &["rev-parse", "HEAD"]),
        git(&b_path, &["status", "--porcelain"]),
    );
    let (status, body) = lab.post(&format!("/runs/{}/merge", id_of(&b)), &json!({}));
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"], "merge_conflict");
    assert_eq!(body["files"], json!(["shared.txt", "src/lib.rs"]));
    let after = (
        git(&repo, &["rev-parse", "HEAD"]),
        git(&repo, &["status", "--porcelain"]),
        git(&b_path, &["rev-parse", "HEAD"]),
        git(&b_path, &["status", "--porcelain"]),
    );
    assert_eq!(before, after);

    // A base checkout with its own changes where a merge writes: base_dirty.
    git(&b_path, &["checkout", "-q", "--", "src/lib.rs"]);
    std::fs::remove_file(b_path.join("shared.txt")).unwrap();
    std::fs::write(b_path.join("README.md"), "# app, by B\n").unwrap();
    std::fs::write(repo.join("README.md"), "# app, edited by hand\n").unwrap();
    let (status, body) = lab.post(&format!("/runs/{}/merge", id_of(&b)), &json!({}));
    assert_eq!((status, body["error"].as_str()), (409, Some("base_dirty")), "{body}");
    assert_eq!(body["files"], json!(["README.md"]));
    assert_eq!(std::fs::read_to_string(repo.join("README.md")).unwrap(), "# app, edited by hand\n");
}

#[test]
fn a_run_outside_a_repository_or_refusing_a_worktree_runs_in_its_workdir() {
    let w = World::new();
    let log = w.use_fake_claude(&json!({"steps": [{"idle": {}}]}));
    let lab = w.serve();
    // Not a repository: no worktree, and asking for one is a clear 400.
    let (status, body) =
        lab.post("/runs", &json!({"provider": "claude-code", "workdir": w.workdir, "prompt": "hi", "worktree": true}));
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("not in a git repository"), "{body}");
    let plain = lab.create_run(&w, "claude-code", "hi");
    assert_eq!(plain["worktree"], Value::Null);
    assert_eq!(lab.view(&id_of(&plain))["diff"], Value::Null);
    let (status, body) = lab.get(&format!("/runs/{}/diff", id_of(&plain)));
    assert_eq!((status, body["error"].as_str()), (409, Some("no_worktree")), "{body}");
    let (status, body) = lab.post(&format!("/runs/{}/review", id_of(&plain)), &json!({"summary": "x"}));
    assert_eq!((status, body["error"].as_str()), (409, Some("no_worktree")), "{body}");

    // A repository, but `"worktree": false`: the agent works in the checkout itself.
    let repo = make_repo(&w);
    let (status, run) = lab.post(
        "/runs",
        &json!({"provider": "claude-code", "workdir": repo.join("src"), "prompt": "hi", "worktree": false}),
    );
    assert_eq!(status, 201, "{run}");
    assert_eq!(run["worktree"], Value::Null);
    let sid = run["session_id"].as_str().unwrap_or_default().to_string();
    assert_eq!(started_in(&log, &sid), repo.join("src").to_str().unwrap());
    // A subfolder of a repository: the agent starts at the same place in its worktree.
    let sub = lab.create_run_in(&repo.join("src"), "claude-code", "hi", None);
    let wt_path = PathBuf::from(sub["worktree"]["path"].as_str().unwrap());
    let sid = sub["session_id"].as_str().unwrap_or_default().to_string();
    assert_eq!(started_in(&log, &sid), wt_path.join("src").to_str().unwrap());
    assert_eq!(git(&repo, &["worktree", "list"]).lines().count(), 2);
}

#[test]
fn a_review_waits_like_a_message_while_the_agent_asks_something() {
    let w = World::new();
    make_repo(&w);
    w.use_fake_claude(&ask_then_idle());
    let lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "hi");
    let id = id_of(&run);
    lab.wait_state(&id, "question");
    let (status, body) = lab.post(
        &format!("/runs/{id}/review"),
        &json!({"comments": [{"path": "README.md", "line": 1, "text": "Shorter."}]}),
    );
    assert_eq!((status, body["error"].as_str()), (409, Some("dialog_pending")), "{body}");
    let (status, body) = lab.post(&format!("/runs/{id}/discard"), &json!({}));
    assert_eq!((status, body["error"].as_str()), (409, Some("run_active")), "{body}");
}

/// An executable script that leaves `marks/<name>` behind when anything runs it.
fn marker_script(dir: &Path, marks: &Path, name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\ntouch '{}/{name}'\ncat\n", marks.display())).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn marks_left(marks: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(marks).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn lab_s_git_runs_nothing_a_repository_or_the_agent_s_side_names() {
    let w = World::new();
    let repo = make_repo(&w);
    let marks = w.home.join("marks");
    let scripts = w.home.join("scripts");
    std::fs::create_dir_all(&marks).unwrap();
    std::fs::create_dir_all(&scripts).unwrap();
    // A repository from a tarball: it names a command everywhere git could run one.
    std::fs::write(repo.join(".gitattributes"), "* filter=evil merge=evil diff=evil\n").unwrap();
    git(&repo, &["add", ".gitattributes"]);
    git(&repo, &["commit", "-q", "-m", "attributes"]);
    let hooks = repo.join(".git/hooks");
    for hook in
        ["post-checkout", "post-merge", "pre-commit", "post-commit", "reference-transaction", "post-index-change"]
    {
        marker_script(&hooks, &marks, hook);
    }
    let mark = |name: &str| marker_script(&scripts, &marks, name).to_string_lossy().into_owned();
    for (key, value) in [
        ("core.fsmonitor", mark("fsmonitor")),
        ("filter.evil.clean", mark("clean")),
        ("filter.evil.smudge", mark("smudge")),
        ("filter.evil.process", mark("process")),
        ("merge.evil.driver", mark("merge-driver")),
        ("diff.evil.textconv", mark("textconv")),
        ("diff.evil.command", mark("diff-command")),
        ("diff.external", mark("external-diff")),
    ] {
        git(&repo, &["config", key, &value]);
    }
    let log = w.use_fake_claude(&edits());
    let lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "edit things");
    let id = id_of(&run);
    let path = PathBuf::from(run["worktree"]["path"].as_str().unwrap());
    assert!(path.join("src/lib.rs").exists(), "the worktree was checked out: {run}");
    wait_composer(&log, 1);
    lab.wait_view(&id, "the diff summary", |v| v["diff"]["files_changed"] == 4);
    let (status, diff) = lab.get(&format!("/runs/{id}/diff"));
    assert_eq!(status, 200, "{diff}");
    let (status, body) = lab.post(
        &format!("/runs/{id}/review"),
        &json!({"comments": [{"path": "old.txt", "line": 1, "side": "old", "text": "Keep it."}]}),
    );
    assert_eq!(status, 202, "{body}");
    wait_composer(&log, 2);
    let (status, merged) = lab.post(&format!("/runs/{id}/merge"), &json!({}));
    assert_eq!(status, 200, "{merged}");
    assert!(repo.join("new.txt").exists(), "the operator's checkout followed the merge");
    assert_eq!(marks_left(&marks), Vec::<String>::new(), "made, diffed, reviewed and merged without running any");

    // The agent's side swaps the worktree's `.git` file for a repository of its own
    // whose config names a monitor and a filter: lab runs no git there, and says so.
    std::fs::remove_file(path.join(".git")).unwrap();
    git(&path, &["init", "-q"]);
    git(&path, &["config", "core.fsmonitor", &mark("agent-fsmonitor")]);
    git(&path, &["config", "filter.evil.clean", &mark("agent-clean")]);
    git(&path, &["config", "core.hooksPath", hooks.to_str().unwrap()]);
    std::fs::write(path.join("after.txt"), "more\n").unwrap();
    let (status, body) = lab.get(&format!("/runs/{id}/diff"));
    assert_eq!((status, body["error"].as_str()), (409, Some("no_worktree")), "{body}");
    assert!(body["message"].as_str().unwrap_or("").contains(".git is no longer the file lab wrote"), "{body}");
    let (status, body) = lab.post(&format!("/runs/{id}/merge"), &json!({}));
    assert_eq!(status, 409, "{body}");
    let (status, body) = lab.post(
        &format!("/runs/{id}/review"),
        &json!({"comments": [{"path": "old.txt", "line": 1, "side": "old", "text": "Again."}]}),
    );
    assert_eq!(status, 409, "{body}");
    let (status, _) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "one more"}));
    assert!(status < 300);
    wait_composer(&log, 3);
    // Discard still takes it away (its folder removed by lab, not by git in it).
    let (status, _) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!(status, 200);
    let (status, body) = lab.post(&format!("/runs/{id}/discard"), &json!({}));
    assert_eq!(status, 200, "{body}");
    assert!(!path.exists());
    assert_eq!(git(&repo, &["worktree", "list"]).lines().count(), 1);
    assert_eq!(marks_left(&marks), Vec::<String>::new(), "nothing the agent's repository names ran");
}
