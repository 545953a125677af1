//! scripts/ensure-toolchain, the first step of scripts/serve and scripts/test, run
//! against a stub `rustup` on PATH: where the pinned toolchain exists without the
//! wasm32-wasip2 target (or the lint components), it adds them; where rustup is
//! missing it stops with a message that says what to install.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/ensure-toolchain")
}

fn pinned_channel() -> String {
    let toml = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../rust-toolchain.toml")).unwrap();
    let line = toml.lines().find(|l| l.trim_start().starts_with("channel")).expect("a channel line");
    line.split('"').nth(1).unwrap().to_string()
}

/// A fake rustup that answers from files and records every call.
struct Stub {
    dir: tempfile::TempDir,
}

impl Stub {
    fn new(targets: &[&str], components: &[&str]) -> Stub {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::fs::write(dir.path().join("targets"), targets.join("\n") + "\n").unwrap();
        std::fs::write(dir.path().join("components"), components.join("\n") + "\n").unwrap();
        let d = dir.path().display();
        let rustup = format!(
            r#"#!/bin/sh
echo "$*" >> {d}/calls
case "$1 $2" in
  "target list") cat {d}/targets ;;
  "component list") cat {d}/components ;;
  "target add") echo "$3" >> {d}/targets ;;
  "component add") echo "$3-x86_64-unknown-linux-gnu" >> {d}/components ;;
  "run "*) exit 0 ;;
  *) echo "stub rustup: unexpected $*" >&2; exit 3 ;;
esac
"#
        );
        let path = bin.join("rustup");
        std::fs::write(&path, rustup).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Stub { dir }
    }

    fn run(&self) -> Output {
        run_with_path(&format!("{}:/usr/bin:/bin", self.dir.path().join("bin").display()))
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("calls")).unwrap_or_default().lines().map(String::from).collect()
    }
}

fn run_with_path(path: &str) -> Output {
    Command::new("bash").arg(script()).env_clear().env("PATH", path).env("HOME", "/nonexistent").output().unwrap()
}

#[test]
fn a_pinned_toolchain_without_the_wasm_target_gets_it_added() {
    let channel = pinned_channel();
    let stub = Stub::new(
        &["x86_64-unknown-linux-gnu"],
        &["rustc-x86_64-unknown-linux-gnu", "clippy-x86_64-unknown-linux-gnu", "rustfmt-x86_64-unknown-linux-gnu"],
    );
    let out = stub.run();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let calls = stub.calls();
    assert!(calls.contains(&format!("target add wasm32-wasip2 --toolchain {channel}")), "{calls:?}");
    assert!(!calls.iter().any(|c| c.starts_with("component add")), "nothing else was missing: {calls:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("adding the wasm32-wasip2 target"));
}

#[test]
fn missing_lint_components_are_added_and_a_complete_toolchain_is_left_alone() {
    let channel = pinned_channel();
    let stub = Stub::new(&["wasm32-wasip2", "x86_64-unknown-linux-gnu"], &["rustc-x86_64-unknown-linux-gnu"]);
    let out = stub.run();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let adds: Vec<_> = stub.calls().into_iter().filter(|c| c.contains(" add ")).collect();
    assert_eq!(
        adds,
        vec![
            format!("component add clippy --toolchain {channel}"),
            format!("component add rustfmt --toolchain {channel}")
        ]
    );

    // Second run: everything is there now, so nothing is added.
    let before = stub.calls().len();
    assert!(stub.run().status.success());
    assert!(!stub.calls()[before..].iter().any(|c| c.contains(" add ")), "{:?}", stub.calls());
}

#[test]
fn without_rustup_it_stops_and_says_what_to_run() {
    let empty = tempfile::tempdir().unwrap();
    // bash, sed, grep and friends only: no rustup anywhere on this PATH.
    let out = run_with_path(&format!("{}:/usr/bin:/bin", empty.path().display()));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rustup is not on PATH"), "{err}");
    assert!(err.contains(&format!("rustup toolchain install {} --target wasm32-wasip2", pinned_channel())), "{err}");
}
