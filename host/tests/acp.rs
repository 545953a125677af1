//! ACP agents through lab (issue 33): a real `lab serve`, real tmux, and the scripted
//! ACP agent `fake-acp` (tools/fake-acp) speaking JSON-RPC on stdio — every message
//! kind, permissions and forms answered through the same API and guard, file requests
//! confined to the workdir, malformed output, a hung and a crashing agent, stop, and a
//! restart of lab mid-run.

mod common;

use common::acp_run::has_text;
use common::{wait_for, workspace_bin, Lab, World};
use serde_json::{json, Value};
use std::time::Duration;

fn fake_acp() -> std::path::PathBuf {
    workspace_bin("fake-acp", "fake-acp")
}

/// lab.toml naming fake-acp as the ACP agent `fake`, with `extra` lines.
fn configure(w: &World, env: &str, extra: &str) {
    w.write_config(&format!(
        "[agents.fake]\nacp = [{:?}]\ndisplay_name = \"Fake ACP\"\nenv = {{ {env} }}\n{extra}",
        fake_acp().display().to_string()
    ));
}

fn texts(v: &Value) -> Vec<String> {
    v["messages"].as_array().unwrap().iter().map(|m| m["text"].as_str().unwrap_or_default().to_string()).collect()
}

fn answer(lab: &Lab, id: &str, tool_id: &str, answers: Value) -> (u16, Value) {
    lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": tool_id, "answers": answers}))
}

fn pending(lab: &Lab, id: &str, kind: &str) -> Value {
    lab.wait_view(id, &format!("a pending {kind}"), |v| v["pending_dialog"]["kind"] == kind)["pending_dialog"].clone()
}

#[test]
fn an_acp_run_shows_every_kind_and_answers_permissions_and_forms_through_the_guard() {
    let w = World::new();
    configure(&w, "", "");
    let lab = w.serve();
    let (s, providers) = lab.get("/providers");
    assert_eq!(s, 200);
    let fake = providers.as_array().unwrap().iter().find(|p| p["name"] == "fake").expect("the ACP agent is listed");
    assert_eq!((&fake["transport"], &fake["display_name"]), (&json!("acp"), &json!("Fake ACP")));
    let transport =
        |name: &str| providers.as_array().unwrap().iter().find(|p| p["name"] == name).unwrap()["transport"].clone();
    assert_eq!([transport("claude-code"), transport("codex"), transport("gemini-cli")], ["tmux", "tmux", "acp"]);
    // What each can do, for an operator to pick knowingly: the prompt kinds lab answers,
    // resume and fork, usage, sandbox.
    let can =
        |name: &str| providers.as_array().unwrap().iter().find(|p| p["name"] == name).unwrap()["abilities"].clone();
    assert_eq!(
        can("claude-code"),
        json!({"prompts": ["permission", "plan", "question"], "resume": true, "fork": true, "usage": true, "sandbox": true})
    );
    assert_eq!(can("codex")["prompts"], json!(["permission"]), "{}", can("codex"));
    for acp in ["gemini-cli", "opencode", "fake"] {
        assert_eq!(
            can(acp),
            json!({"prompts": ["permission", "question"], "resume": true, "fork": false, "usage": true, "sandbox": true}),
            "{acp}"
        );
    }

    let run = lab.create_run(
        &w,
        "fake",
        "think:pondering;plan;say:hello there;run:echo ran > ran.txt;ask:Which database?;say:bye",
    );
    let id = run["id"].as_str().unwrap().to_string();
    assert_eq!(run["provider"], "fake");

    // The permission: the agent's own options; the composer is locked; a stale id refused.
    let d = pending(&lab, &id, "permission");
    let labels: Vec<&str> = d["options"].as_array().unwrap().iter().map(|o| o["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["Always Allow", "Allow", "Reject"], "{d}");
    let tool_id = d["tool_id"].as_str().unwrap().to_string();
    let (s, e) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "hi"}));
    assert_eq!((s, &e["error"]), (409, &json!("dialog_pending")), "{e}");
    let (s, e) = answer(&lab, &id, "acp-999~1", json!([{"option": 1}]));
    assert_eq!((s, &e["error"]), (409, &json!("dialog_changed")), "{e}");
    let (s, e) = answer(&lab, &id, &tool_id, json!([{"option": 7}]));
    assert_eq!(s, 400, "an option the dialog does not have: {e}");
    let (s, e) = answer(&lab, &id, &tool_id, json!([{"option": 1}]));
    assert_eq!(s, 202, "{e}");
    let (s, e) = answer(&lab, &id, &tool_id, json!([{"option": 1}]));
    // Refused either way: `no_dialog` while nothing waits, `dialog_changed` once the
    // agent's next request (the form, right behind it) is already pending.
    assert_eq!(s, 409, "answered once: {e}");
    assert!(e["error"] == "no_dialog" || e["error"] == "dialog_changed", "answered once: {e}");

    // The form: a question with the agent's choices.
    let q = pending(&lab, &id, "question");
    assert_eq!(q["questions"][0]["header"], "Database", "{q}");
    assert_eq!(q["questions"][0]["question"], "Which database?");
    let (s, e) = answer(&lab, &id, q["tool_id"].as_str().unwrap(), json!([{"option": 1}]));
    assert_eq!(s, 202, "{e}");

    let v = lab.wait_view(&id, "the turn's end", |v| v["state"] == "idle" && has_text(v, "bye"));
    assert!(w.workdir.join("ran.txt").exists(), "the allowed command ran");
    let msgs = v["messages"].as_array().unwrap();
    for (i, m) in msgs.iter().enumerate() {
        assert_eq!(m["seq"], i as u64, "stable, dense seqs");
    }
    assert_eq!((&msgs[0]["role"], &msgs[0]["kind"]), (&json!("user"), &json!("text")));
    let kinds: Vec<&str> = msgs.iter().map(|m| m["kind"].as_str().unwrap()).collect();
    for k in ["thinking", "plan", "tool_use", "tool_result"] {
        assert!(kinds.contains(&k), "{k} in {kinds:?}");
    }
    assert!(texts(&v).contains(&"hello there".to_string()), "chunks joined into one message: {:?}", texts(&v));
    assert!(has_text(&v, "Answered: Allow") && has_text(&v, "Answered: SQLite") && has_text(&v, "You chose SQLite."));
    let call = msgs.iter().find(|m| m["kind"] == "tool_use").unwrap();
    assert_eq!(call["tool_name"], "execute");

    // A second prompt from the composer; rejected this time: the command does not run.
    let (s, e) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "run:touch no.txt;say:after"}));
    assert_eq!(s, 202, "{e}");
    let d = pending(&lab, &id, "permission");
    let (s, _) = answer(&lab, &id, d["tool_id"].as_str().unwrap(), json!([{"option": 2}]));
    assert_eq!(s, 202);
    let v = lab.wait_view(&id, "the second turn's end", |v| v["state"] == "idle" && has_text(v, "after"));
    assert!(!w.workdir.join("no.txt").exists(), "a rejected command never ran");
    assert!(v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["kind"] == "tool_result" && m["text"] == "the user rejected it"));

    // Its terminal is a tmux session of lab's; stop ends both.
    let (_, r) = lab.get(&format!("/runs/{id}"));
    assert!(r["session_id"].as_str().unwrap().starts_with("fake-session-"), "{r}");
    let target = r["tmux_target"].as_str().unwrap().to_string();
    assert!(w.tmux(&["has-session", "-t", &target]).status.success());
    let (s, r) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!((s, &r["state"]), (200, &json!("ended")), "{r}");
    assert!(!w.tmux(&["has-session", "-t", &target]).status.success(), "the run's tmux session is gone");
    let (s, e) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "more"}));
    assert_eq!(s, 409, "{e}");
}

#[test]
fn permission_mode_sets_the_session_mode_the_agent_offers() {
    let w = World::new();
    configure(&w, "", "");
    let lab = w.serve();
    let (s, e) = lab.post(
        "/runs",
        &json!({"provider": "fake", "workdir": w.workdir, "prompt": "say:x", "permission_mode": "bogus"}),
    );
    assert!(s >= 400, "{e}");
    let m = e["message"].as_str().unwrap();
    assert!(m.contains("did not take permission_mode \"bogus\"") && m.contains("no mode"), "{e}");
    let (_, providers) = lab.get("/providers");
    let fake = providers.as_array().unwrap().iter().find(|p| p["name"] == "fake").unwrap();
    assert_eq!(fake["permission_modes"], json!(["ask", "yolo"]), "learnt from the agent, its current mode first");
    let (s, e) = lab.post(
        "/runs",
        &json!({"provider": "fake", "workdir": w.workdir, "prompt": "say:x", "permission_mode": "other"}),
    );
    assert_eq!(s, 400, "a mode the agent does not offer: {e}");
    let mut body = json!({"provider": "fake", "workdir": w.workdir, "prompt": "run:touch yolo.txt;say:done", "permission_mode": "yolo"});
    let (s, run) = lab.post("/runs", &body);
    assert_eq!(s, 201, "{run}");
    assert_eq!(run["permission_mode"], "yolo");
    lab.wait_view(run["id"].as_str().unwrap(), "the turn without a permission", |v| {
        v["state"] == "idle" && has_text(v, "done")
    });
    assert!(w.workdir.join("yolo.txt").exists(), "the mode took: no permission was asked");
    body["permission_mode"] = json!("ask");
    body["prompt"] = json!("run:touch ask.txt");
    let (s, run) = lab.post("/runs", &body);
    assert_eq!(s, 201, "{run}");
    pending(&lab, run["id"].as_str().unwrap(), "permission");
}

#[test]
fn file_requests_stay_in_the_workdir_and_unknown_methods_are_errors() {
    let w = World::new();
    configure(&w, "", "");
    let lab = w.serve();
    let wd = w.workdir.display();
    let outside = w.dir.path().join("outside.txt");
    std::fs::write(w.dir.path().join("secret.txt"), "s3cret").unwrap();
    let prompt = format!(
        "write:{wd}/sub/a.txt=hello;read:{wd}/sub/a.txt;read:{}/secret.txt;write:{}=x;read:{wd}/../secret.txt;termat:/tmp|ls;say:done",
        w.dir.path().display(),
        outside.display()
    );
    let run = lab.create_run(&w, "fake", &prompt);
    let id = run["id"].as_str().unwrap();
    let v = lab.wait_view(id, "the turn's end", |v| v["state"] == "idle" && has_text(v, "done"));
    // Text with nothing between it is one message (ACP has no message boundaries).
    let all = texts(&v).join("\n");
    assert!(all.contains("wrote it") && all.contains("read: hello"), "{all}");
    assert_eq!(std::fs::read_to_string(w.workdir.join("sub/a.txt")).unwrap(), "hello");
    assert_eq!(all.matches("read failed").count(), 2, "{all}");
    assert!(all.contains("secret.txt\" is outside the run's workdir"), "{all}");
    assert!(all.contains("write failed") && all.contains("outside.txt\" is outside"), "{all}");
    assert!(all.contains("has a `..` in it"), "{all}");
    assert!(
        all.contains("term failed: \"/tmp\" is outside the run's workdir"),
        "a terminal outside the workdir: {all}"
    );
    assert!(!has_text(&v, "s3cret"), "nothing outside the workdir was read");
    assert!(!outside.exists());
    let log = std::fs::read_to_string(w.home.join("logs/lab.log")).unwrap();
    assert!(log.contains("refused the agent's file request"), "refusals are logged");
}

/// A terminal the agent asks for is a window of the run's tmux session: its output and
/// exit status reach the agent; released, the window goes; kept, the operator sees it.
#[test]
fn terminals_are_windows_of_the_run_s_tmux_session() {
    let w = World::new();
    configure(&w, "", "");
    let lab = w.serve();
    let run = lab.create_run(
        &w,
        "fake",
        "term:echo hi from $FAKE_ACP_TERM in $(basename $PWD) && (exit 3);termkeep:echo kept;say:done",
    );
    let id = run["id"].as_str().unwrap();
    let v = lab.wait_view(id, "the turn's end", |v| v["state"] == "idle" && has_text(v, "done"));
    let all = texts(&v).join("\n");
    assert!(all.contains("term term-1 exit 3: hi from yes in w"), "output, env, cwd and exit code: {all}");
    assert!(all.contains("term term-2 exit 0: kept"), "{all}");
    let target = run["tmux_target"].as_str().unwrap();
    let windows = String::from_utf8(w.tmux(&["list-windows", "-t", target, "-F", "#{window_name}"]).stdout).unwrap();
    let names: Vec<&str> = windows.lines().collect();
    assert!(
        names.contains(&"term-2") && !names.contains(&"term-1"),
        "the released window went, the kept one stays: {names:?}"
    );
    let pane = String::from_utf8(w.tmux(&["capture-pane", "-p", "-t", &format!("{target}:term-2")]).stdout).unwrap();
    assert!(pane.contains("kept"), "the operator sees the command's output: {pane:?}");
    let (s, _) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!(s, 200);
    let left: Vec<_> =
        std::fs::read_dir(w.home.join("acp")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert!(left.iter().all(|f| !f.contains("term-")), "a stopped run's terminal files are gone: {left:?}");
}

#[test]
fn malformed_output_is_skipped_and_a_crash_ends_the_run_with_its_reason() {
    let w = World::new();
    configure(&w, "", "");
    let lab = w.serve();
    let run = lab.create_run(&w, "fake", "garbage;say:still here");
    let id = run["id"].as_str().unwrap();
    lab.wait_view(id, "the reply after the garbage", |v| v["state"] == "idle" && has_text(v, "still here"));
    let (s, _) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "say:going;crash"}));
    assert_eq!(s, 202);
    lab.wait_state(id, "ended");
    let (_, r) = lab.get(&format!("/runs/{id}"));
    let err = r["error"].as_str().unwrap_or_default();
    assert!(err.contains("status 3") && err.contains("crashing as asked"), "{r}");
    assert!(!w.tmux(&["has-session", "-t", r["tmux_target"].as_str().unwrap()]).status.success());
    let (s, _) = lab.get("/runs");
    assert_eq!(s, 200, "lab keeps serving");
}

#[test]
fn a_hung_agent_fails_its_launch_or_is_stopped_and_a_missing_one_is_named() {
    let w = World::new();
    configure(
        &w,
        "FAKE_ACP_HANG_INIT = \"1\"",
        "start_timeout_secs = 2\n[agents.missing]\nacp = [\"no-such-acp-agent-xyz\"]\n",
    );
    let lab = w.serve();
    let (s, e) = lab.post("/runs", &json!({"provider": "fake", "workdir": w.workdir, "prompt": "say:x"}));
    assert!(s >= 400, "{e}");
    assert!(e["message"].as_str().unwrap().contains("did not finish starting its session within 2"), "{e}");
    let (s, e) = lab.post("/runs", &json!({"provider": "missing", "workdir": w.workdir, "prompt": "say:x"}));
    assert!(s >= 400 && e["message"].as_str().unwrap().contains("not found"), "{e}");
    let (s, runs) = lab.get("/runs");
    assert_eq!(s, 200);
    assert!(
        runs.as_array().unwrap().iter().all(|r| r["state"] == "ended"),
        "failed launches are recorded as ended: {runs}"
    );
    lab.stop();

    // A turn that never ends: stop still ends the run (cancel, then the process).
    configure(&w, "", "");
    let lab = w.serve();
    let run = lab.create_run(&w, "fake", "say:working;hang");
    let id = run["id"].as_str().unwrap();
    // (Its text is gathered until the turn ends, so the chat shows only the prompt.)
    lab.wait_view(id, "the hung turn", |v| v["state"] == "working");
    let t0 = std::time::Instant::now();
    let (s, r) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!((s, &r["state"]), (200, &json!("ended")), "{r}");
    assert!(t0.elapsed() < Duration::from_secs(10), "stop took {:?}", t0.elapsed());
}

#[test]
fn a_restart_loads_the_session_again_or_ends_the_run_saying_why() {
    let w = World::new();
    configure(&w, "", "");
    let lab = w.serve();
    let run = lab.create_run(&w, "fake", "say:first answer");
    let id = run["id"].as_str().unwrap().to_string();
    lab.wait_view(&id, "the first turn", |v| v["state"] == "idle" && has_text(v, "first answer"));
    lab.stop();

    let lab = w.serve();
    let v = lab.wait_view(&id, "the resumed session", |v| has_text(v, "lab restarted"));
    assert!(has_text(&v, "first answer"), "the chat survived the restart");
    let (s, e) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "say:second answer"}));
    assert_eq!(s, 202, "{e}");
    let v = lab.wait_view(&id, "the second turn", |v| v["state"] == "idle" && has_text(v, "second answer"));
    assert!(!has_text(&v, "replayed"), "session/load's replay is not shown twice: {:?}", texts(&v));
    let first = v["messages"].as_array().unwrap().iter().filter(|m| m["text"] == "first answer").count();
    assert_eq!(first, 1);
    lab.stop();

    // An agent that cannot load sessions: the run ends with that reason.
    configure(&w, "FAKE_ACP_NO_LOAD = \"1\"", "");
    let lab = w.serve();
    lab.wait_state(&id, "ended");
    let (_, r) = lab.get(&format!("/runs/{id}"));
    assert!(r["error"].as_str().unwrap_or_default().contains("cannot load its session"), "{r}");
    let target = r["tmux_target"].as_str().unwrap().to_string();
    wait_for(Duration::from_secs(5), "the run's tmux session to go", || {
        (!w.tmux(&["has-session", "-t", &target]).status.success()).then_some(())
    });
    assert!(has_text(&lab.view(&id), "second answer"), "the ended run's chat is still there");
}

fn git(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// In a repository an ACP run gets its worktree like any run: the agent's session, its
/// terminals and its file requests are there (the checkout the operator started from
/// is outside it), and the diff shows what it did.
#[test]
fn an_acp_run_in_a_repository_works_in_its_own_worktree() {
    let w = World::new();
    configure(&w, "", "");
    let repo = w.workdir.canonicalize().unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "# app\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let lab = w.serve();
    let run = lab.create_run(
        &w,
        "fake",
        &format!("term:echo made > made.txt;write:{}/escape.txt=x;say:done", repo.display()),
    );
    let id = run["id"].as_str().unwrap();
    let wt = std::path::PathBuf::from(run["worktree"]["path"].as_str().expect("a worktree"));
    assert_ne!(wt, repo);
    let v = lab.wait_view(id, "the turn's end", |v| v["state"] == "idle" && has_text(v, "done"));
    let all = texts(&v).join("\n");
    assert!(all.contains("term term-1 exit 0"), "{all}");
    assert!(
        all.contains("write failed") && all.contains("outside the run's workdir"),
        "the checkout is not the run's: {all}"
    );
    assert!(wt.join("made.txt").exists() && !repo.join("made.txt").exists() && !repo.join("escape.txt").exists());
    let (s, diff) = lab.get(&format!("/runs/{id}/diff"));
    assert_eq!(s, 200, "{diff}");
    let files: Vec<&str> = diff["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(files, ["made.txt"], "{diff}");
}

/// An ACP agent declared by a provider component (WIT 0.3.0 and later `acp-agent`) instead of
/// lab.toml's `[agents]`: dropped into `<home>/providers`, listed with its transport,
/// version and modes, started with its declared arguments and environment (lab.toml's
/// `[providers.<name>]` program and env applied over them), and driven like any ACP run.
#[test]
fn an_acp_agent_declared_by_a_component_runs_like_one_in_lab_toml() {
    let w = World::new();
    let providers = w.home.join("providers");
    std::fs::create_dir_all(&providers).unwrap();
    std::fs::copy(lab::agents::components::fixtures::ACP_FIXTURE, providers.join("fake-acp.wasm")).unwrap();
    // The declared command is `fake-acp` on PATH; lab.toml points it at the build, adds
    // an env var and replaces none of the declared ones.
    w.write_config(&format!(
        "[providers.fake-acp]\nprogram = {:?}\nenv = {{ FROM_LAB_TOML = \"1\" }}\n\
         [agents.fake-acp]\nacp = [\"not-used\"]\n",
        fake_acp().display().to_string()
    ));
    // `lab providers` lists it, what it runs, and the lab.toml agent it shadows.
    let out = std::process::Command::new(common::LAB).args(["providers", "--home"]).arg(&w.home).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let line = text.lines().find(|l| l.starts_with("fake-acp ")).unwrap_or_else(|| panic!("listed:\n{text}"));
    assert!(line.contains("fake-acp.wasm (transport acp: ") && line.ends_with("--declared-by component)"), "{line}");
    assert!(line.contains(&fake_acp().display().to_string()), "lab.toml's program: {line}");
    assert!(text.contains("[agents.fake-acp] is not used: the ACP provider"), "{text}");
    let lab = w.serve();
    let (s, providers) = lab.get("/providers");
    assert_eq!(s, 200);
    let p = providers.as_array().unwrap().iter().find(|p| p["name"] == "fake-acp").expect("listed");
    assert_eq!(p["transport"], "acp", "{p}");
    assert_eq!(p["display_name"], "Fake ACP (declared)");
    assert_eq!(p["wit"], "lab:provider@0.9.0");
    assert_eq!(p["version"], "0.1.0");
    assert_eq!(p["permission_modes"], json!(["ask", "yolo"]));
    assert!(p["description"].as_str().unwrap().contains("declared by a component"), "{p}");

    // A mode the declaration does not name is refused before anything starts.
    let (s, e) = lab.post(
        "/runs",
        &json!({"provider": "fake-acp", "workdir": w.workdir, "prompt": "say:x", "permission_mode": "sometimes"}),
    );
    assert_eq!(s, 400, "{e}");
    assert!(e["message"].as_str().unwrap_or_default().contains("ask, yolo"), "{e}");

    let run = lab.create_run_in(
        &w.workdir,
        "fake-acp",
        "args;env:FAKE_ACP_DECLARED;env:FROM_LAB_TOML;run:echo ran > declared.txt;say:done",
        Some("yolo"),
    );
    let id = run["id"].as_str().unwrap().to_string();
    let v = lab.wait_view(&id, "the turn's end", |v| v["state"] == "idle" && has_text(v, "done"));
    assert!(has_text(&v, "args: --declared-by component"), "{:?}", texts(&v));
    assert!(has_text(&v, "FAKE_ACP_DECLARED=yes") && has_text(&v, "FROM_LAB_TOML=1"), "{:?}", texts(&v));
    assert!(w.workdir.join("declared.txt").exists(), "yolo mode (set through session/set_mode) ran it unasked");
    assert!(v["pending_dialog"].is_null(), "{v}");

    // A prompt from the composer; stop.
    let (s, e) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "say:next"}));
    assert_eq!(s, 202, "{e}");
    lab.wait_view(&id, "the second turn", |v| v["state"] == "idle" && has_text(v, "next"));
    let (s, _) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!(s, 200);
    lab.wait_view(&id, "ended", |v| v["state"] == "ended");

    // In the default mode (`ask`, the first declared) its permission is a dialog
    // answered through the API.
    let run = lab.create_run(&w, "fake-acp", "run:echo asked > asked.txt;say:end");
    let id = run["id"].as_str().unwrap().to_string();
    let d = pending(&lab, &id, "permission");
    let (s, e) = answer(&lab, &id, d["tool_id"].as_str().unwrap(), json!([{"option": 1}]));
    assert_eq!(s, 202, "{e}");
    lab.wait_view(&id, "the end", |v| v["state"] == "idle" && has_text(v, "end"));
    assert!(w.workdir.join("asked.txt").exists());
}

/// A link the agent's side planted in the workdir is never followed by lab's file
/// access: a dangling one to a dotfile outside (`notes.md` → `~/.profile`), one to a
/// secret, a linked folder out, a FIFO.
#[test]
fn file_requests_never_follow_a_link_out_of_the_workdir() {
    let w = World::new();
    configure(&w, "", "");
    let lab = w.serve();
    let wd = w.workdir.display();
    let profile = w.dir.path().join("profile");
    std::fs::write(w.dir.path().join("secret.txt"), "s3cret").unwrap();
    std::os::unix::fs::symlink(&profile, w.workdir.join("notes.md")).unwrap();
    std::os::unix::fs::symlink(w.dir.path().join("secret.txt"), w.workdir.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(w.dir.path(), w.workdir.join("up")).unwrap();
    let fifo = w.workdir.join("pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let prompt = format!(
        "write:{wd}/notes.md=touch pwned;write:{wd}/link.txt=gone;read:{wd}/link.txt;write:{wd}/up/made.txt=x;\
read:{wd}/pipe;write:{wd}/pipe=x;write:{wd}/ok.txt=fine;say:done"
    );
    let run = lab.create_run(&w, "fake", &prompt);
    let id = run["id"].as_str().unwrap();
    let v = lab.wait_view(id, "the turn's end", |v| v["state"] == "idle" && has_text(v, "done"));
    let all = texts(&v).join("\n");
    assert_eq!(all.matches("write failed").count(), 4, "{all}");
    assert_eq!(all.matches("read failed").count(), 2, "{all}");
    assert_eq!(all.matches("symlink").count(), 4, "{all}");
    assert!(all.contains("FIFO"), "{all}");
    assert!(!profile.exists(), "the dangling link was not followed out");
    assert_eq!(std::fs::read_to_string(w.dir.path().join("secret.txt")).unwrap(), "s3cret");
    assert!(!w.dir.path().join("made.txt").exists());
    assert!(!has_text(&v, "s3cret"));
    assert_eq!(std::fs::read_to_string(w.workdir.join("ok.txt")).unwrap(), "fine");
}

/// An ACP provider component dropped in while lab serves is listed and runs; removed,
/// new runs of it are refused with why while its live run goes on taking prompts.
#[test]
fn an_acp_component_swapped_while_lab_serves() {
    let w = World::new();
    w.write_config(&format!("[providers.fake-acp]\nprogram = {:?}\n", fake_acp().display().to_string()));
    let lab = w.serve();
    let listed = |state: &str| {
        let (s, providers) = lab.get("/providers");
        assert_eq!(s, 200, "{providers}");
        providers.as_array().unwrap().iter().find(|p| p["name"] == "fake-acp" && p["state"] == state).cloned()
    };
    assert!(listed("serving").is_none());

    let file = w.home.join("providers").join("fake-acp.wasm");
    std::fs::copy(lab::agents::components::fixtures::ACP_FIXTURE, &file).unwrap();
    let p = wait_for(Duration::from_secs(20), "the ACP provider to serve", || listed("serving"));
    assert_eq!((p["transport"].as_str(), p["source"].as_str()), (Some("acp"), file.to_str()), "{p}");
    let run = lab.create_run_in(&w.workdir, "fake-acp", "say:hello", Some("yolo"));
    let id = run["id"].as_str().unwrap().to_string();
    lab.wait_view(&id, "the first turn", |v| v["state"] == "idle" && has_text(v, "hello"));

    std::fs::remove_file(&file).unwrap();
    wait_for(Duration::from_secs(20), "the ACP provider to be removed", || listed("removed"));
    let (s, e) = lab.post("/runs", &json!({"provider": "fake-acp", "workdir": w.workdir, "prompt": "say:x"}));
    assert_eq!(s, 400, "{e}");
    assert!(e["message"].as_str().unwrap_or_default().contains("provider `fake-acp` was removed"), "{e}");
    let (s, e) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "say:still here"}));
    assert_eq!(s, 202, "{e}");
    lab.wait_view(&id, "the live run's next turn", |v| v["state"] == "idle" && has_text(v, "still here"));
}

/// Resume (issue 56) of an ended ACP run: its agent started again and asked to load the
/// session (`session/load`), the operator's message its next prompt, the chat going on
/// after the old messages with none replayed twice; an agent that does not fork sessions
/// offers no fork; an agent that cannot load sessions answers `422 not_supported` and
/// the run stays ended.
#[test]
fn a_stopped_acp_run_is_resumed_by_loading_its_session() {
    let w = World::new();
    configure(&w, "FAKE_ACP_NO_FORK = \"1\"", "");
    let lab = w.serve();
    let id = lab.create_run(&w, "fake", "say:first answer")["id"].as_str().unwrap().to_string();
    lab.wait_view(&id, "the first turn", |v| v["state"] == "idle" && has_text(v, "first answer"));
    let (s, stopped) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!(s, 200, "{stopped}");
    assert_eq!((stopped["resumable"].as_bool(), stopped["forkable"].as_bool()), (Some(true), Some(false)), "{stopped}");
    let (s, e) = lab.post(&format!("/runs/{id}/fork"), &json!({}));
    assert_eq!((s, e["error"].as_str()), (422, Some("not_supported")), "{e}");

    let (s, resumed) = lab.post(&format!("/runs/{id}/resume"), &json!({"prompt": "say:second answer"}));
    assert_eq!(s, 200, "{resumed}");
    let v = lab.wait_view(&id, "the resumed turn", |v| v["state"] == "idle" && has_text(v, "second answer"));
    assert!(!has_text(&v, "replayed"), "session/load's replay is not shown twice: {:?}", texts(&v));
    let first = v["messages"].as_array().unwrap().iter().filter(|m| m["text"] == "first answer").count();
    assert_eq!(first, 1, "{:?}", texts(&v));
    assert!(has_text(&v, "resumed: the agent's session was loaded again"), "{:?}", texts(&v));
    let (s, _) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!(s, 200);
    lab.stop();

    configure(&w, "FAKE_ACP_NO_LOAD = \"1\"", "");
    let lab = w.serve();
    let (s, e) = lab.post(&format!("/runs/{id}/resume"), &json!({}));
    assert_eq!((s, e["error"].as_str()), (422, Some("not_supported")), "{e}");
    assert!(e["message"].as_str().unwrap().contains("cannot load a session again"), "{e}");
    assert_eq!(lab.get(&format!("/runs/{id}")).1["state"], "ended");
}

/// Fork of an ACP run whose agent forks sessions (issue 77; ACP `session/fork`, offered
/// as `sessionCapabilities.fork`): a new run whose chat starts as its parent's, whose
/// agent branched the parent's session (a new session id, the history not shown
/// twice), its message the fork's first prompt; the parent goes on in its own session.
#[test]
fn an_acp_run_is_forked_where_its_agent_forks_sessions() {
    let w = World::new();
    configure(&w, "", "");
    let lab = w.serve();
    let id = lab.create_run(&w, "fake", "session;say:parent answer")["id"].as_str().unwrap().to_string();
    let v = lab.wait_view(&id, "the first turn", |v| v["state"] == "idle" && has_text(v, "parent answer"));
    // (Said in one message with the words after it: chunks are joined.)
    let parent_session = texts(&v)
        .into_iter()
        .find_map(|t| t.strip_suffix("parent answer").filter(|s| s.starts_with("session=")).map(String::from))
        .expect("said its session");
    let (_, body) = lab.get(&format!("/runs/{id}"));
    assert_eq!(body["forkable"], true, "{body}");
    let (_, providers) = lab.get("/providers");
    let fake = providers.as_array().unwrap().iter().find(|p| p["name"] == "fake").unwrap();
    assert_eq!(fake["abilities"]["fork"], true, "{fake}");

    let (s, fork) = lab.post(&format!("/runs/{id}/fork"), &json!({"prompt": "session;say:fork answer"}));
    assert_eq!(s, 201, "{fork}");
    let fid = fork["id"].as_str().unwrap().to_string();
    assert_eq!(fork["parent"], id, "{fork}");
    let v = lab.wait_view(&fid, "the fork's turn", |v| v["state"] == "idle" && has_text(v, "fork answer"));
    let said = texts(&v);
    assert!(said[1].ends_with("parent answer"), "the parent's chat first: {said:?}");
    assert!(has_text(&v, &format!("forked from run {id}")), "{said:?}");
    assert!(!has_text(&v, "replayed"), "the fork's replay is not shown: {said:?}");
    let branched = format!("{parent_session}-fork-");
    assert!(said.last().unwrap().starts_with(&branched), "branched from {parent_session}: {said:?} {v}");
    let seqs: Vec<u64> = v["messages"].as_array().unwrap().iter().map(|m| m["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>(), "stable, dense seqs");

    // The parent goes on in its own session.
    let (s, e) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "session;say:parent again"}));
    assert_eq!(s, 202, "{e}");
    let v = lab.wait_view(&id, "the parent's next turn", |v| v["state"] == "idle" && has_text(v, "parent again"));
    let own = texts(&v).into_iter().filter(|t| t.starts_with(&parent_session) && !t.contains("-fork-")).count();
    assert_eq!(own, 2, "{:?}", texts(&v));
    assert!(!has_text(&v, "fork answer"));
    lab.stop();
}
