//! Providers swapped while lab serves: a build dropped into `<home>/providers/` serves
//! new runs with no restart, a run already live keeps the build it started with (and
//! answers its question on it), a corrupt file is refused with its reason while the
//! build before stays in service, and a removed file refuses new runs while the live
//! ones go on — all through `lab serve`'s HTTP API, real tmux and real components.

mod common;

use common::*;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// `GET /providers`'s entry for `name` in `state`.
fn provider(lab: &Lab, name: &str, state: &str) -> Option<Value> {
    let (status, list) = lab.get("/providers");
    assert_eq!(status, 200, "{list}");
    list.as_array().unwrap().iter().find(|p| p["name"] == name && p["state"] == state).cloned()
}

fn serving(lab: &Lab, name: &str) -> Value {
    provider(lab, name, "serving").unwrap_or_else(|| panic!("{name} does not serve"))
}

/// Wait until `name` serves from `source`.
fn wait_source(lab: &Lab, name: &str, source: &str) -> Value {
    wait_for(Duration::from_secs(20), &format!("{name} to serve from {source}"), || {
        provider(lab, name, "serving").filter(|p| p["source"] == source)
    })
}

fn run_build(lab: &Lab, id: &str) -> Value {
    let (status, run) = lab.get(&format!("/runs/{id}"));
    assert_eq!(status, 200, "{run}");
    run["provider_build"].clone()
}

/// The run's question answered with its first option, played to the end.
fn answer(lab: &Lab, id: &str) {
    let v = lab.wait_state(id, "question");
    let tool_id = v["pending_dialog"]["tool_id"].as_str().unwrap().to_string();
    let (status, body) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": tool_id, "answers": [{"option": 1}]}));
    assert_eq!(status, 202, "{body}");
    let v = lab.wait_view(id, "the answer to be played", |v| v["answer"]["state"] == "played");
    assert!(v["answer"]["error"].is_null(), "{v}");
    lab.wait_view(id, "the question to be resolved", |v| v["state"] != "question");
}

/// Copy `from` to `to` the way an operator drops a file in: written in place.
fn drop_in(from: &str, to: &Path) {
    std::fs::copy(from, to).unwrap();
}

#[test]
fn a_provider_swapped_while_lab_serves_serves_new_runs_and_the_live_ones_keep_theirs() {
    let w = World::new();
    let log = w.use_fake_claude(&ask_then_idle());
    let lab = w.serve();
    let file = w.home.join("providers").join("claude-code.wasm");
    let file_source = file.display().to_string();

    let bundled = serving(&lab, "claude-code");
    assert_eq!(bundled["source"], "bundled:claude-code", "{bundled}");
    assert_eq!(bundled["digest"].as_str().unwrap().len(), 16, "{bundled}");

    // A run on the bundled build, at its question.
    let a = lab.create_run(&w, "claude-code", "first")["id"].as_str().unwrap().to_string();
    assert_eq!(run_build(&lab, &a)["digest"], bundled["digest"]);
    lab.wait_state(&a, "question");

    // Another build of the provider (the one made against WIT 0.2.0) dropped in.
    let t = Instant::now();
    drop_in(lab::agents::components::fixtures::CLAUDE_CODE_V0_2_0, &file);
    let new = wait_source(&lab, "claude-code", &file_source);
    eprintln!("the dropped-in build served new runs {} ms after the copy", t.elapsed().as_millis());
    assert_ne!(new["digest"], bundled["digest"]);
    assert_eq!(new["wit"], "lab:provider@0.2.0", "{new}");
    assert_eq!(new["refused"], json!([]), "{new}");
    // The live run is listed on the build it uses.
    assert_eq!(
        new["runs"],
        json!([{"id": a, "version": bundled["version"], "digest": bundled["digest"], "source": "bundled:claude-code"}])
    );

    // A new run takes the new build, and asks its question through it.
    let b = lab.create_run(&w, "claude-code", "second")["id"].as_str().unwrap().to_string();
    assert_eq!(run_build(&lab, &b)["digest"], new["digest"]);
    assert_eq!(run_build(&lab, &b)["source"], file_source.as_str());
    lab.wait_state(&b, "question");

    // The run on the old build answers its question.
    answer(&lab, &a);
    assert_eq!(run_build(&lab, &a)["digest"], bundled["digest"], "it kept its build");

    // A corrupt file is refused with why; the build before stays in service.
    std::fs::write(&file, b"\0asm\x0d\0\x01\0 this is not a component").unwrap();
    let p = wait_for(Duration::from_secs(20), "the corrupt file to be refused", || {
        Some(serving(&lab, "claude-code")).filter(|p| !p["refused"].as_array().unwrap().is_empty())
    });
    assert_eq!(p["digest"], new["digest"], "{p}");
    let why = p["refused"][0]["error"].as_str().unwrap();
    assert!(why.contains("not a loadable WebAssembly component") && why.contains("stays in service"), "{why}");
    assert_eq!(p["refused"][0]["source"], file_source.as_str());
    let c = lab.create_run(&w, "claude-code", "third")["id"].as_str().unwrap().to_string();
    assert_eq!(run_build(&lab, &c)["digest"], new["digest"], "new runs go on with the build before");

    // The file removed: the bundled build serves new runs again; the runs on the
    // removed build go on (one answers its question).
    std::fs::remove_file(&file).unwrap();
    let back = wait_source(&lab, "claude-code", "bundled:claude-code");
    assert_eq!(back["digest"], bundled["digest"]);
    answer(&lab, &b);
    let d = lab.create_run(&w, "claude-code", "fourth")["id"].as_str().unwrap().to_string();
    assert_eq!(run_build(&lab, &d)["digest"], bundled["digest"]);

    // fake-claude heard both answers.
    let answers = wait_for(Duration::from_secs(10), "fake-claude to log two answers", || {
        let n = World::log_events(&log).into_iter().filter(|e| e["event"] == "answer").count();
        (n >= 2).then_some(n)
    });
    assert_eq!(answers, 2);
}

#[test]
fn a_removed_provider_refuses_new_runs_with_why_while_its_live_run_goes_on() {
    let w = World::with_plainlog(
        lab::agents::components::fixtures::PLAINLOG,
        r#"#!/bin/sh
t="$2"; mkdir -p "$(dirname "$t")"
printf '%s\n' '{"role":"user","text":"hi"}' >> "$t"
read -r line
printf '%s\n' "{\"role\":\"assistant\",\"text\":\"heard $line\"}" >> "$t"
sleep 600
"#,
    );
    let lab = w.serve();
    let file = w.home.join("providers").join("plainlog.wasm");
    let id = lab.create_run(&w, "plainlog", "hi")["id"].as_str().unwrap().to_string();
    lab.wait_view(&id, "the first message", |v| v["messages"].as_array().is_some_and(|m| !m.is_empty()));

    std::fs::remove_file(&file).unwrap();
    let gone = wait_for(Duration::from_secs(20), "plainlog to be removed", || provider(&lab, "plainlog", "removed"));
    assert_eq!(gone["source"], file.display().to_string().as_str());
    assert_eq!(gone["runs"][0]["id"], id.as_str(), "{gone}");
    assert!(provider(&lab, "plainlog", "serving").is_none());

    let (status, body) = lab.post("/runs", &json!({"provider": "plainlog", "workdir": w.workdir, "prompt": "again"}));
    assert_eq!(status, 400, "{body}");
    let msg = body["message"].as_str().unwrap_or_default();
    assert!(msg.contains("provider `plainlog` was removed") && msg.contains("runs already live go on"), "{body}");

    // The live run still takes a message and its chat is still read.
    let (status, body) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "ping"}));
    assert_eq!(status, 202, "{body}");
    lab.wait_view(&id, "the agent's reply", |v| {
        v["messages"].as_array().unwrap().iter().any(|m| m.to_string().contains("heard ping"))
    });

    // Put back, it serves again.
    drop_in(lab::agents::components::fixtures::PLAINLOG, &file);
    wait_source(&lab, "plainlog", &file.display().to_string());
    assert!(provider(&lab, "plainlog", "removed").is_none());
    lab.create_run(&w, "plainlog", "back");
}

#[test]
fn a_broken_new_file_is_listed_as_refused_with_its_reason() {
    let w = World::new();
    let lab = w.serve();
    let dir = w.home.join("providers");
    std::fs::write(dir.join("broken.wasm"), b"not wasm at all").unwrap();
    let p = wait_for(Duration::from_secs(20), "the broken file to be refused", || provider(&lab, "broken", "refused"));
    assert_eq!(p["source"], dir.join("broken.wasm").display().to_string().as_str());
    assert!(p["error"].as_str().unwrap().contains("not a loadable WebAssembly component"), "{p}");
    // The bundled providers serve on.
    serving(&lab, "claude-code");
    // Fixed, it serves.
    drop_in(lab::agents::components::fixtures::PLAINLOG, &dir.join("broken.wasm"));
    wait_source(&lab, "plainlog", &dir.join("broken.wasm").display().to_string());
    assert!(provider(&lab, "broken", "refused").is_none());
}

/// Resume and fork are the provider's to offer: a build made against WIT 0.3.0 (no
/// `sessions`) answers both `422 not_supported` saying so, and lists its ended run as
/// neither resumable nor forkable; once a build that can serves again, the same run is.
#[test]
fn a_provider_built_against_0_3_0_answers_resume_and_fork_not_supported() {
    let w = World::new();
    w.use_fake_claude(&json!({"steps": [{"say": "Done."}, {"idle": {}}]}));
    let file = w.home.join("providers").join("claude-code.wasm");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    drop_in(lab::agents::components::fixtures::CLAUDE_CODE_V0_3_0, &file);
    let lab = w.serve();
    assert_eq!(serving(&lab, "claude-code")["wit"], "lab:provider@0.3.0");
    let id = lab.create_run(&w, "claude-code", "hello")["id"].as_str().unwrap().to_string();
    lab.wait_state(&id, "idle");
    let (status, body) = lab.post(&format!("/runs/{id}/fork"), &json!({}));
    assert_eq!((status, body["error"].as_str()), (422, Some("not_supported")), "{body}");
    assert!(body["message"].as_str().unwrap().contains("provider `claude-code` cannot fork"), "{body}");
    let (status, body) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["resumable"].as_bool(), body["forkable"].as_bool()), (Some(false), Some(false)), "{body}");
    let (status, body) = lab.post(&format!("/runs/{id}/resume"), &json!({"prompt": "go on"}));
    assert_eq!((status, body["error"].as_str()), (422, Some("not_supported")), "{body}");
    assert!(body["message"].as_str().unwrap().contains("provider `claude-code` cannot resume"), "{body}");
    assert_eq!(lab.get(&format!("/runs/{id}")).1["state"], "ended", "nothing changed");

    // The bundled build (0.6.0) serves again: the same run can be resumed and forked.
    std::fs::remove_file(&file).unwrap();
    wait_source(&lab, "claude-code", "bundled:claude-code");
    let (_, body) = lab.get(&format!("/runs/{id}"));
    assert_eq!((body["resumable"].as_bool(), body["forkable"].as_bool()), (Some(true), Some(true)), "{body}");
    // Bad input loses nothing: an unknown field, a prompt of control characters.
    let (status, body) = lab.post(&format!("/runs/{id}/resume"), &json!({"prompt": "x", "fork": true}));
    assert_eq!(status, 400, "{body}");
    let (status, body) = lab.post(&format!("/runs/{id}/resume"), &json!({"prompt": "a\u{7}b"}));
    assert_eq!((status, body["error"].as_str()), (400, Some("bad_request")), "{body}");
    assert_eq!(lab.get(&format!("/runs/{id}")).1["state"], "ended");
}

/// A component that asks its sandbox for more than lab gives a provider (the whole
/// filesystem writable, the operator's ssh keys, every `.com` host) is refused at load
/// and listed with why; no run is ever made of it.
#[test]
fn a_component_asking_its_sandbox_for_too_much_is_refused_at_load() {
    let w = World::new();
    let lab = w.serve();
    let file = w.home.join("providers").join("greedy.wasm");
    drop_in(lab::agents::components::fixtures::GREEDY, &file);
    let p =
        wait_for(Duration::from_secs(20), "the greedy component to be refused", || provider(&lab, "greedy", "refused"));
    assert_eq!(p["source"], file.display().to_string().as_str());
    let why = p["error"].as_str().unwrap();
    assert!(why.contains("asks its sandbox for more than lab gives") && why.contains("\"/\""), "{why}");
    assert!(provider(&lab, "greedy", "serving").is_none());
    let (status, body) =
        lab.post("/runs", &json!({"provider": "greedy", "workdir": w.workdir, "prompt": "hi", "sandbox": "bwrap"}));
    assert!(status >= 400, "{status} {body}");
}
