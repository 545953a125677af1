//! Diff benchmark (not a test): `GET /runs/{id}/diff` on a large repository. Run with
//!
//!     cargo bench -p lab --bench diff                  # 5,000 files, 200 changed
//!     LAB_DIFF_FILES=20000 LAB_DIFF_CHANGED=1000 LAB_DIFF_SAMPLES=30 cargo bench -p lab --bench diff
//!
//! A repository of `LAB_DIFF_FILES` files (40 lines each, in 50 folders) with one
//! commit; a release `lab serve` with fake-claude idle in a run with its worktree; then
//! the "agent" edits `LAB_DIFF_CHANGED` files in the worktree (a fifth of them new,
//! untracked; the rest with three lines changed), and we print `GET /runs/{id}/diff`'s
//! time (HTTP, git and JSON included) over `LAB_DIFF_SAMPLES` requests: p50, p90, p99,
//! and the size of the answer. Everything is removed at the end.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/mod.rs"]
mod support;

use common::*;
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::Instant;
use support::{env_num, ms, pct};

fn git(dir: &Path, args: &[&str]) {
    let mut c = Command::new("git");
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("GIT_") {
            c.env_remove(k);
        }
    }
    let out = c.arg("-C").arg(dir).args(["-c", "user.name=b", "-c", "user.email=b@b"]).args(args).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn content(i: usize, changed: bool) -> String {
    (0..40)
        .map(|l| {
            if changed && l % 13 == 5 {
                format!("changed line {l} of file {i}\n")
            } else {
                format!("line {l} of file {i}: some text to diff\n")
            }
        })
        .collect()
}

fn main() {
    let files: usize = env_num("LAB_DIFF_FILES", 5000);
    let changed: usize = env_num("LAB_DIFF_CHANGED", 200);
    let samples: usize = env_num("LAB_DIFF_SAMPLES", 50);
    let w = World::new();
    let repo = w.workdir.canonicalize().unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    for i in 0..files {
        let dir = repo.join(format!("pkg{:02}", i % 50));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{i}.txt")), content(i, false)).unwrap();
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "base"]);

    w.use_fake_claude(&json!({"steps": [{"idle": {}}]}));
    let lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "hi");
    let id = run["id"].as_str().unwrap().to_string();
    let wt = Path::new(run["worktree"]["path"].as_str().unwrap()).to_path_buf();
    let new_files = changed / 5;
    for i in 0..changed - new_files {
        let n = i * (files / changed.max(1)).max(1);
        std::fs::write(wt.join(format!("pkg{:02}/f{n}.txt", n % 50)), content(n, true)).unwrap();
    }
    for i in 0..new_files {
        std::fs::write(wt.join(format!("pkg{:02}/new{i}.txt", i % 50)), content(files + i, false)).unwrap();
    }

    let mut times = Vec::with_capacity(samples);
    let mut bytes = 0;
    let mut listed = 0;
    for _ in 0..samples {
        let t = Instant::now();
        let r = lab.client.get(format!("{}/runs/{id}/diff", lab.url)).send().unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let body = r.bytes().unwrap();
        times.push(ms(t.elapsed()));
        bytes = body.len();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        listed = v["files"].as_array().map_or(0, Vec::len);
    }
    let p = pct(times);
    println!(
        "GET /runs/{{id}}/diff, {files} files, {changed} changed ({new_files} untracked), {listed} listed, {:.0} KiB: \
         p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms (n={})",
        bytes as f64 / 1024.0,
        p.p50,
        p.p90,
        p.p99,
        p.max,
        p.n
    );
    lab.stop();
}
