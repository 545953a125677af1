//! The provider author kit, end to end: `lab new-provider` writes a crate outside the
//! workspace, plain `cargo build --release --target wasm32-wasip2` turns it into a
//! component, `lab providers check` accepts it, and an unmodified `lab serve` loads it
//! from `<home>/providers/` and runs it through the HTTP API.
//!
//! The generated crates build into one persistent target dir next to the test's own
//! (`<target>/provider-kit-target`, never the outer target dir: cargo holds its lock),
//! so only the first run compiles their dependencies.

mod common;

use common::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `<target>/provider-kit-target`, from `<target>/<profile>/deps/provider_kit-<hash>`.
fn kit_target() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).expect("the test runs from <target>/<profile>/deps").join("provider-kit-target")
}

/// A temp folder outside the lab workspace.
fn outside_dir() -> tempfile::TempDir {
    let d = tempfile::Builder::new().prefix("lab-kit").tempdir_in("/tmp").unwrap();
    assert!(!d.path().starts_with(concat!(env!("CARGO_MANIFEST_DIR"), "/..")));
    d
}

fn lab(args: &[&str]) -> Output {
    Command::new(LAB).args(args).output().expect("run lab")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Plain `cargo <args>` in `dir`, as a provider author runs it: the cargo on PATH
/// (so the crate's rust-toolchain.toml applies), none of the outer cargo's variables.
fn cargo(dir: &Path, args: &[&str]) {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(dir).args(args).env("CARGO_TARGET_DIR", kit_target());
    for (key, _) in std::env::vars() {
        let outer = key.starts_with("CARGO_") && key != "CARGO_HOME" && key != "CARGO_TARGET_DIR";
        if outer || key == "RUSTFLAGS" || key == "RUSTUP_TOOLCHAIN" {
            cmd.env_remove(key);
        }
    }
    let out = cmd.output().expect("run cargo");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "cargo {args:?} in {} failed:\n{stdout}\n{stderr}", dir.display());
}

/// `lab new-provider`, its unit tests, and the build; the component's path.
fn new_provider(parent: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let dir = scaffold(parent, name, extra);
    cargo(&dir, &["test", "--quiet"]);
    build(&dir, name)
}

/// `lab new-provider`; the crate's folder.
fn scaffold(parent: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let mut args = vec!["new-provider", name, "--dir", parent.to_str().unwrap()];
    args.extend(extra);
    let out = lab(&args);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let dir = parent.join(name);
    for f in ["Cargo.toml", "rust-toolchain.toml", "README.md", "src/lib.rs"] {
        assert!(dir.join(f).is_file(), "{f} missing:\n{stdout}");
    }
    let wasm_file = format!("lab_provider_{}.wasm", name.replace('-', "_"));
    assert!(stdout.contains(&wasm_file), "{stdout}");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(readme.contains("cargo build --release --target wasm32-wasip2"), "{readme}");
    assert!(readme.contains(&format!("target/wasm32-wasip2/release/{wasm_file}")), "{readme}");
    dir
}

/// The author's build command; the component's path.
fn build(dir: &Path, name: &str) -> PathBuf {
    cargo(dir, &["build", "--release", "--target", "wasm32-wasip2"]);
    let wasm_file = format!("lab_provider_{}.wasm", name.replace('-', "_"));
    let wasm = kit_target().join("wasm32-wasip2/release").join(wasm_file);
    assert!(wasm.is_file(), "{} was not built", wasm.display());
    wasm
}

fn check(file: &Path) -> (bool, String, String) {
    let out = lab(&["providers", "check", file.to_str().unwrap()]);
    let (stdout, stderr) = text(&out);
    (out.status.success(), stdout, stderr)
}

/// The stand-in agent, following the generated provider's contract
/// (`<program> --transcript <path> -- <prompt>`, JSONL role/text lines). It waits for
/// the test's go-files between steps, so every state is observed, not raced.
const AGENT: &str = r#"#!/bin/sh
[ "$1" = --transcript ] && [ "$3" = -- ] || { echo "unexpected argv: $*" >&2; exec sleep 600; }
t="$2"
mkdir -p "$(dirname "$t")"
wait_for() { while [ ! -e "$KIT_GO/$1" ]; do sleep 0.05; done; }
printf '{"role":"user","text":"%s","ts":"2025-01-01T00:00:00Z"}\n' "$4" >> "$t"
wait_for 1
printf '%s\n' '{"role":"assistant","tool_use":{"id":"t1","name":"ask_user","input":{"question":"Which database?","header":"DB","options":["PostgreSQL","SQLite"]}}}' >> "$t"
wait_for 2
printf '%s\n' '{"role":"tool","tool_use_id":"t1","text":"SQLite"}' >> "$t"
printf '%s\n' '{"role":"assistant","text":"Using SQLite."}' >> "$t"
exec sleep 600
"#;

#[test]
fn a_new_provider_builds_checks_installs_and_runs_in_lab_serve() {
    let outside = outside_dir();
    let wasm = new_provider(outside.path(), "echo-kit", &[]);

    let (ok, stdout, stderr) = check(&wasm);
    assert!(ok, "{stdout}\n{stderr}");
    for want in [
        "exports      base (no dialog-hooker)",
        "WIT package  lab:provider@0.9.0 (this lab loads lab:provider@0.9.0, lab:provider@0.8.0, lab:provider@0.7.0, lab:provider@0.6.0, lab:provider@0.5.0, lab:provider@0.4.0, lab:provider@0.3.0, lab:provider@0.2.0, lab:provider@0.1.0)",
        "loadable     yes",
        "provider     echo-kit 0.1.0",
        "map-dialog(ask_user): question dialog, 1 question, 2 options, not answerable",
        "result: OK",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }

    // Install it into a fresh lab home and start an unmodified lab serve.
    let w = World::new();
    std::fs::create_dir_all(w.home.join("providers")).unwrap();
    std::fs::copy(&wasm, w.home.join("providers/echo-kit.wasm")).unwrap();
    let agent = w.dir.path().join("echo-kit-agent");
    std::fs::write(&agent, AGENT).unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let go = w.dir.path().join("go");
    std::fs::create_dir_all(&go).unwrap();
    w.write_config(&format!(
        "[providers.echo-kit]\nprogram = {:?}\nenv = {{ KIT_GO = {:?} }}\n",
        agent.display().to_string(),
        go.display().to_string()
    ));
    let lab = w.serve();

    let (status, providers) = lab.get("/providers");
    assert_eq!(status, 200);
    let mine = providers.as_array().unwrap().iter().find(|p| p["name"] == "echo-kit").cloned();
    let mine = mine.unwrap_or_else(|| panic!("echo-kit not in GET /providers: {providers}"));
    assert_eq!(mine["dialog_hooker"], false, "{mine}");
    assert_eq!(mine["version"], "0.1.0");
    assert!(providers.as_array().unwrap().iter().any(|p| p["name"] == "claude-code"), "{providers}");

    let run = lab.create_run(&w, "echo-kit", "hello kit");
    let id = run["id"].as_str().unwrap().to_string();
    assert_eq!(run["provider"], "echo-kit");
    assert_eq!(run["dialog_hooker"], false);

    // The prompt line: the provider's turn signal says working.
    let v = lab.wait_state(&id, "working");
    assert_eq!(v["messages"][0]["role"], "user");
    assert_eq!(v["messages"][0]["text"], "hello kit");
    assert_eq!(v["messages"][0]["timestamp"], "2025-01-01T00:00:00Z");
    // The transcript is where the provider said: under the agent's HOME.
    let transcripts = w.agent_home.join(".echo-kit/sessions");
    assert_eq!(std::fs::read_dir(&transcripts).unwrap().count(), 1);

    // An unresolved ask_user call: the host's transcript fallback shows the provider's
    // dialog, not answerable (transcript-only).
    std::fs::write(go.join("1"), b"").unwrap();
    let v = lab.wait_state(&id, "question");
    let d = &v["pending_dialog"];
    assert_eq!(d["source"], "transcript", "{d}");
    assert_eq!(d["tool_id"], "t1");
    assert_eq!(d["answerable"], false);
    assert_eq!(d["questions"][0]["options"][1]["label"], "SQLite");
    let (status, body) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": "t1", "answers": [{"option": 1}]}));
    assert_eq!((status, body["error"].as_str()), (422, Some("not_answerable")), "{body}");

    // The tool_result (linked by tool_use_id) resolves it; the assistant text ends the turn.
    std::fs::write(go.join("2"), b"").unwrap();
    let v = lab.wait_state(&id, "idle");
    assert!(v["pending_dialog"].is_null(), "{v}");
    let msgs = v["messages"].as_array().unwrap();
    let got: Vec<(&str, &str, &str)> = msgs
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["kind"].as_str().unwrap(), m["text"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("user", "text", "hello kit"),
            ("assistant", "tool_use", "ask_user: Which database?"),
            ("tool", "tool_result", "SQLite"),
            ("assistant", "text", "Using SQLite."),
        ]
    );
    assert_eq!(msgs[1]["input"]["options"], json!(["PostgreSQL", "SQLite"]));
    assert_eq!(msgs[1]["tool_use_id"], msgs[2]["tool_use_id"]);
    let seqs: Vec<u64> = msgs.iter().map(|m| m["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, vec![0, 1, 2, 3]);

    let (status, body) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert!(status < 300, "{status} {body}");
    lab.wait_state(&id, "ended");
    lab.stop();
}

/// The stand-in for the generated dialog-hooker provider's agent: hooks on its command
/// line (`--hook <event>=<command>`), a trust screen before anything else (no hook can
/// run yet), then a permission prompt for a shell command, answered with keys.
const HOOK_AGENT: &str = r#"#!/bin/sh
t=; before=; after=
while [ $# -gt 0 ]; do
  case "$1" in
    --transcript) t="$2"; shift 2 ;;
    --hook) case "$2" in before_tool=*) before="${2#before_tool=}" ;; after_tool=*) after="${2#after_tool=}" ;; esac; shift 2 ;;
    --) prompt="$2"; break ;;
    *) echo "unexpected argv: $*" >&2; exec sleep 600 ;;
  esac
done
mkdir -p "$(dirname "$t")"
printf 'Welcome.
Trust this folder? [y/n]
'
read -r trust
[ "$trust" = y ] || { echo "not trusted: $trust"; exec sleep 600; }
printf '{"role":"user","text":"%s"}
' "$prompt" >> "$t"
payload='{"tool_use_id":"t2","tool_name":"run_shell","tool_input":{"command":"rm -rf build","why":"a clean build"}}'
printf '{"role":"assistant","tool_use":{"id":"t2","name":"run_shell","input":{"command":"rm -rf build"}}}
' >> "$t"
printf '%s' "$payload" | sh -c "$before"
printf 'Allow `rm -rf build`? [y/n]
'
read -r reply
printf '{"role":"tool","tool_use_id":"t2","text":"%s"}
' "$reply" >> "$t"
printf '%s' "$payload" | sh -c "$after"
printf '{"role":"assistant","text":"Done: %s"}
' "$reply" >> "$t"
exec sleep 600
"#;

/// The issue's proof that the interface says everything agent-specific: a provider
/// crate made by `lab new-provider --dialog-hooker`, knowing nothing but the SDK, brings
/// its own permission prompt (with its own options), its own answer timing and a screen
/// it reads before any hook runs — and an unmodified lab serve shows and answers them.
#[test]
fn a_dialog_hooker_provider_builds_checks_and_its_prompts_are_answered_in_lab_serve() {
    let outside = outside_dir();
    let wasm = new_provider(outside.path(), "hook-kit", &["--dialog-hooker"]);
    let (ok, stdout, stderr) = check(&wasm);
    assert!(ok, "{stdout}\n{stderr}");
    for want in [
        "exports      base, dialog-hooker, screen-reader",
        "map-dialog(ask_user): question dialog, 1 question, 2 options, answerable",
        "hook-settings (",
        "plan-answer(ask_user, first option)",
        "(played 100 ms apart once the prompt is drawn, waiting at most 3000 ms)",
        "plan-answer rejects an option out of range",
        "result: OK",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
    assert!(!stdout.contains("warn"), "{stdout}");

    // Installed, lab serve lists it with the capabilities detected.
    let w = World::new();
    std::fs::create_dir_all(w.home.join("providers")).unwrap();
    std::fs::copy(&wasm, w.home.join("providers/hook-kit.wasm")).unwrap();
    let agent = w.dir.path().join("hook-kit-agent");
    std::fs::write(&agent, HOOK_AGENT).unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    w.write_config(&format!("[providers.hook-kit]\nprogram = {:?}\n", agent.display().to_string()));
    let lab = w.serve();
    let (_, providers) = lab.get("/providers");
    let mine = providers.as_array().unwrap().iter().find(|p| p["name"] == "hook-kit").cloned().unwrap_or(Value::Null);
    assert_eq!((&mine["dialog_hooker"], &mine["screen_reader"]), (&json!(true), &json!(true)), "{providers}");

    // 1. The trust screen: no hook has run, no transcript exists; read off the screen.
    let run = lab.create_run(&w, "hook-kit", "clean up");
    let id = run["id"].as_str().unwrap().to_string();
    let v = lab.wait_view(&id, "the trust screen as a dialog", |v| v["pending_dialog"]["source"] == "screen");
    let d = &v["pending_dialog"];
    assert_eq!((&d["kind"], &d["answerable"], &v["state"]), (&json!("generic"), &json!(true), &json!("question")));
    assert_eq!(d["generic"]["title"], "Trust this folder? [y/n]");
    assert_eq!(d["options"][0]["label"], "Yes, trust it");
    let (status, body) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": d["tool_id"], "answers": [{"option": 0}]}));
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["keys"], json!(["y", "Enter"]));

    // 2. The agent's own permission prompt, with its options; denied with a reason.
    let v = lab.wait_view(&id, "the permission prompt", |v| v["pending_dialog"]["kind"] == "permission");
    let d = &v["pending_dialog"];
    assert_eq!((&d["source"], &d["answerable"]), (&json!("spool"), &json!(true)), "{d}");
    assert_eq!(d["permission"], json!({"tool": "run_shell", "summary": "rm -rf build", "reason": "a clean build"}));
    assert_eq!(d["options"][1]["label"], "Deny, and say why");
    assert_eq!(d["feedback_option"], 1);
    let answer = json!({"tool_id": d["tool_id"], "answers": [{"feedback": {"option": 1, "text": "not now"}}]});
    let (status, body) = lab.post(&format!("/runs/{id}/dialog/answer"), &answer);
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["keys"], json!(["n", "text:not now", "Enter"]));
    let v = lab.wait_view(&id, "the agent to go on", |v| v["state"] == "idle");
    let last = v["messages"].as_array().unwrap().last().cloned().unwrap_or(Value::Null);
    assert_eq!(last["text"], "Done: nnot now", "{v}");
    assert!(v["pending_dialog"].is_null());
    let (status, body) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert!(status < 300, "{status} {body}");
    lab.stop();
}

/// `lab new-provider --acp`: an ACP provider from the SDK alone — checked, installed
/// in a home's providers folder, and an unmodified lab serve runs the agent it declares
/// (here the scripted ACP agent of lab's tests, named by lab.toml's `program`), its
/// permission request answered from lab.
#[test]
fn an_acp_provider_made_by_new_provider_runs_its_agent_in_lab_serve() {
    let outside = outside_dir();
    let wasm = new_provider(outside.path(), "acp-kit", &["--acp"]);
    let (ok, stdout, stderr) = check(&wasm);
    assert!(ok, "{stdout}\n{stderr}");
    for want in ["exports      acp-agent", "launch (", "acp-kit ; env: none", "result: OK"] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
    let w = World::new();
    std::fs::create_dir_all(w.home.join("providers")).unwrap();
    std::fs::copy(&wasm, w.home.join("providers/acp-kit.wasm")).unwrap();
    let agent = workspace_bin("fake-acp", "fake-acp");
    w.write_config(&format!("[providers.acp-kit]\nprogram = {:?}\n", agent.display().to_string()));
    let lab = w.serve();
    let (_, providers) = lab.get("/providers");
    let mine = providers.as_array().unwrap().iter().find(|p| p["name"] == "acp-kit").cloned().unwrap_or(Value::Null);
    assert_eq!(mine["transport"], "acp", "{providers}");
    let run = lab.create_run(&w, "acp-kit", "run:echo kit > kit.txt;say:done");
    let id = run["id"].as_str().unwrap().to_string();
    let v = lab.wait_view(&id, "the permission request", |v| v["pending_dialog"]["kind"] == "permission");
    let d = &v["pending_dialog"];
    let allow = d["options"].as_array().unwrap().iter().position(|o| o["description"] == "allow_once").unwrap();
    let (status, body) = lab
        .post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": d["tool_id"], "answers": [{"option": allow}]}));
    assert_eq!(status, 202, "{body}");
    lab.wait_view(&id, "the turn's end", |v| v["state"] == "idle" && v["pending_dialog"].is_null());
    assert_eq!(std::fs::read_to_string(w.workdir.join("kit.txt")).unwrap().trim(), "kit");
    let (status, body) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert!(status < 300, "{status} {body}");
    lab.stop();
}

#[test]
fn a_provider_that_misbehaves_fails_the_self_test() {
    let outside = outside_dir();
    let dir = scaffold(outside.path(), "bad-kit", &[]);
    // Two classic mistakes: a panic on an edge case, and a dialog that is not linked to
    // its call.
    let lib = dir.join("src/lib.rs");
    let src = std::fs::read_to_string(&lib).unwrap();
    let src = src.replacen(
        "jsonl::parse_lines(chunk, parse_line)",
        "let _ = std::str::from_utf8(chunk).unwrap();\n        jsonl::parse_lines(chunk, parse_line)",
        1,
    );
    let src = src.replacen("call_id: Some(call.id.clone()),", "call_id: Some(format!(\"dialog-{}\", call.id)),", 1);
    std::fs::write(&lib, src).unwrap();
    let wasm = build(&dir, "bad-kit");

    let (ok, stdout, stderr) = check(&wasm);
    assert!(!ok, "{stdout}");
    assert!(stdout.contains("loadable     yes"), "{stdout}");
    assert!(
        stdout.contains("FAIL  on bytes that are not UTF-8: provider `bad-kit`: `parse-transcript` trapped"),
        "{stdout}"
    );
    assert!(stdout.contains("FAIL  map-dialog(ask_user) gave call_id Some(\"dialog-toolu_check_1\")"), "{stdout}");
    assert!(stdout.contains("result: FAILED (2 failure(s)"), "{stdout}");
    assert!(stderr.contains("the self-test failed (2 failures)"), "{stderr}");
}

#[test]
fn check_accepts_the_plainlog_fixture() {
    let (ok, stdout, stderr) = check(Path::new(lab::agents::components::fixtures::PLAINLOG));
    assert!(ok, "{stdout}\n{stderr}");
    for want in [
        "exports      base (no dialog-hooker)",
        "provider     plainlog 0.1.0",
        "parse-transcript on 3 sample lines",
        "parse-transcript is deterministic",
        "map-dialog(ask): question dialog, 1 question, 2 options, not answerable",
        "result: OK",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn check_refuses_bad_files_with_a_reason_and_a_failing_exit_code() {
    let d = outside_dir();
    let plainlog = std::fs::read(lab::agents::components::fixtures::PLAINLOG).unwrap();
    // The same component, as if built against lab:provider@1.0.0 (same-length rename
    // of every interface name, so the binary stays valid).
    let mut other_version = plainlog.clone();
    for iface in ["base", "types", "sessions", "usage", "sandbox", "setup"] {
        let from = format!("lab:provider/{iface}@0.9.0");
        let to = format!("lab:provider/{iface}@1.0.0");
        other_version = replace_all(&other_version, from.as_bytes(), to.as_bytes());
    }
    let cases: [(&str, Vec<u8>, &str); 4] = [
        ("garbage.wasm", b"not wasm at all".to_vec(), "not a WebAssembly file"),
        ("core.wasm", b"\0asm\x01\0\0\0".to_vec(), "a core WebAssembly module, not a component"),
        ("empty.wasm", b"\0asm\x0d\0\x01\0".to_vec(), "it exports no lab:provider interface"),
        (
            "v100.wasm",
            other_version,
            "it was built against lab:provider@1.0.0; this lab loads lab:provider@0.9.0, lab:provider@0.8.0, lab:provider@0.7.0, lab:provider@0.6.0, lab:provider@0.5.0, lab:provider@0.4.0, lab:provider@0.3.0, lab:provider@0.2.0, lab:provider@0.1.0",
        ),
    ];
    for (name, bytes, why) in cases {
        let f = d.path().join(name);
        std::fs::write(&f, bytes).unwrap();
        let (ok, stdout, stderr) = check(&f);
        assert!(!ok, "{name} passed:\n{stdout}");
        assert!(stdout.contains("loadable     no"), "{name}:\n{stdout}");
        assert!(stdout.contains(why) && stderr.contains(why), "{name}: want {why:?}\n{stdout}\n{stderr}");
        assert!(stderr.starts_with("lab: ") && stderr.contains("cannot be loaded by this lab"), "{stderr}");
    }
    let (ok, _, stderr) = check(&d.path().join("missing.wasm"));
    assert!(!ok && stderr.contains("cannot read"), "{stderr}");
    let (_, stdout, _) = check(&d.path().join("v100.wasm"));
    assert!(
        stdout.contains("WIT package  lab:provider@1.0.0 (this lab loads lab:provider@0.9.0, lab:provider@0.8.0, lab:provider@0.7.0, lab:provider@0.6.0, lab:provider@0.5.0, lab:provider@0.4.0, lab:provider@0.3.0, lab:provider@0.2.0, lab:provider@0.1.0)"),
        "{stdout}"
    );

    // A component that loads but misbehaves fails the self-test (non-zero exit).
    let unruly = Path::new(lab::agents::components::fixtures::UNRULY);
    let (ok, stdout, _) = check(unruly);
    assert!(ok, "unruly only misbehaves on request:\n{stdout}");
    assert!(stdout.contains("warn  launch refused a sample request"), "{stdout}");

    // A component asking its sandbox for more than lab gives fails: lab serve refuses it.
    let greedy = Path::new(lab::agents::components::fixtures::GREEDY);
    let (ok, stdout, _) = check(greedy);
    assert!(!ok, "{stdout}");
    assert!(stdout.contains("lab serve refuses it: it asks its sandbox for more than lab gives"), "{stdout}");
}

fn replace_all(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let mut out = hay.to_vec();
    let mut i = 0;
    let mut n = 0;
    while i + from.len() <= out.len() {
        if &out[i..i + from.len()] == from {
            out[i..i + from.len()].copy_from_slice(to);
            n += 1;
            i += from.len();
        } else {
            i += 1;
        }
    }
    assert!(n > 0, "{:?} not found", String::from_utf8_lossy(from));
    out
}

#[test]
fn new_provider_refuses_bad_names_and_existing_folders() {
    let d = outside_dir();
    let parent = d.path().to_str().unwrap();
    for bad in ["Echo", "my_agent", "a b", "../escape", "a/b", "é"] {
        let out = lab(&["new-provider", bad, "--dir", parent]);
        let (_, stderr) = text(&out);
        assert!(!out.status.success(), "{bad:?} accepted");
        assert!(stderr.contains("use only a-z, 0-9 and -"), "{bad:?}: {stderr}");
    }
    let out = lab(&["new-provider", "", "--dir", parent]);
    assert!(!out.status.success() && text(&out).1.contains("empty"), "{:?}", text(&out));
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "nothing is written for a bad name");

    std::fs::create_dir(d.path().join("taken")).unwrap();
    std::fs::write(d.path().join("taken/keep.txt"), b"mine").unwrap();
    let out = lab(&["new-provider", "taken", "--dir", parent]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success() && stderr.contains("already exists"), "{stderr}");
    assert_eq!(std::fs::read_dir(d.path().join("taken")).unwrap().count(), 1);

    let out = lab(&["new-provider", "fine", "--dir", parent, "--sdk-path", "/nonexistent/sdk"]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success() && stderr.contains("no lab-provider-sdk at /nonexistent/sdk"), "{stderr}");
    assert!(!d.path().join("fine").exists());

    // It does not check the name against the bundled ones, but says what installing does.
    let out = lab(&["new-provider", "claude-code", "--dir", parent]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("replaces lab's bundled `claude-code`"), "{stdout}");
}
