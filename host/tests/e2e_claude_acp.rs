//! End-to-end: lab driving the REAL `@agentclientprotocol/claude-agent-acp` (pinned by
//! scripts/install-claude-acp.sh) as an ACP agent configured only in lab.toml
//! (`[agents.claude-acp]`), talking to a `messages-standin` on 127.0.0.1 as its model,
//! with an isolated HOME and `IS_SANDBOX=1` (the Agent SDK runs Claude Code with
//! `--dangerously-skip-permissions`, which it refuses as root otherwise). Every operator
//! step goes through lab's HTTP API; each scenario also checks what the agent did (the
//! file the command wrote, what reached the stand-in).
//!
//! The binary: `LAB_CLAUDE_ACP_BIN` (scripts/test sets it). Missing: with `CI=true` every
//! test fails; otherwise each prints a loud SKIPPED. At most 2 agents at a time.

mod common;

use common::acp_run::{has_text, option, AcpRun};
use common::*;
use messages_standin::{Matcher, Reply, Script, Standin};
use serde_json::{json, Value};
use std::path::PathBuf;

const KEY: &str = "sk-ant-api03-standin-0123456789abcdefghijklmnopqrstuvwxyz-test";

fn acp_bin() -> Option<PathBuf> {
    agent_bin(
        "LAB_CLAUDE_ACP_BIN",
        "scripts/install-claude-acp.sh",
        "the end-to-end tests against the real claude-agent-acp",
    )
}

type E2e = AcpRun<Standin>;

fn start(script: Script) -> Option<E2e> {
    let bin = acp_bin()?;
    let slot = Slot::take(2);
    let standin = Standin::start(script).unwrap();
    let w = World::new();
    w.write_config(&format!(
        "[agents.claude-acp]\nacp = [{bin:?}]\ndisplay_name = \"Claude (ACP)\"\nstart_timeout_secs = 120\n\
             env = {{ ANTHROPIC_BASE_URL = {url:?}, ANTHROPIC_API_KEY = {KEY:?}, IS_SANDBOX = \"1\", \
             DISABLE_AUTOUPDATER = \"1\", DISABLE_TELEMETRY = \"1\", DISABLE_ERROR_REPORTING = \"1\", \
             CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = \"1\" }}\n",
        bin = bin.display().to_string(),
        url = standin.base_url(),
    ));
    Some(AcpRun::serve(w, slot, "claude-acp", standin).in_mode("default"))
}

fn bash(command: &str) -> Value {
    json!({"command": command, "description": "Write a marker file"})
}

#[test]
fn a_permission_answered_allow_runs_the_command_and_a_stale_answer_is_refused() {
    let script = Script::new()
        .turn(Matcher::Any, Reply::tool_use_with_text("Bash", bash("echo acp > acp-ran.txt"), "I will write the file."))
        .after_tool_result("The file is written.");
    let Some(e) = start(script) else { return };
    let id = e.run("write the marker file");
    let d = e.pending(&id, "permission");
    let tool_id = d["tool_id"].as_str().unwrap().to_string();
    let allow = option(&d, "allow_once");
    let (s, r) = e.answer(&id, "acp-999~1", json!([{"option": allow}]));
    assert_eq!((s, &r["error"]), (409, &json!("dialog_changed")), "{r}");
    let (s, r) = e.answer(&id, &tool_id, json!([{"option": allow}]));
    assert_eq!(s, 202, "{r}");
    let (s, r) = e.answer(&id, &tool_id, json!([{"option": allow}]));
    assert_eq!((s, &r["error"]), (409, &json!("no_dialog")), "a stale answer: {r}");
    let v = e.wait(&id, "the reply after the command", |v| v["state"] == "idle" && has_text(v, "The file is written."));
    assert_eq!(std::fs::read_to_string(e.w.workdir.join("acp-ran.txt")).unwrap().trim(), "acp");
    assert!(has_text(&v, "I will write the file."), "the agent's text before the call: {:#}", v["messages"]);
    assert!(v["messages"].as_array().unwrap().iter().any(|m| m["kind"] == "tool_use"));
    e.stop_run(&id);
}

#[test]
fn a_permission_answered_reject_does_not_run_the_command() {
    let script = Script::new()
        .turn(Matcher::Any, Reply::tool_use("Bash", bash("echo no > acp-rejected.txt")))
        .after_tool_result("Understood, I did not run it.");
    let Some(e) = start(script) else { return };
    let id = e.run("try the command");
    e.answer_permission(&id, "reject_once");
    e.wait(&id, "the reply after the refusal", |v| v["state"] == "idle" && has_text(v, "I did not run it"));
    assert!(!e.w.workdir.join("acp-rejected.txt").exists(), "a rejected command never ran");
    e.stop_run(&id);
}

#[test]
fn a_question_is_answered_from_lab() {
    let script = Script::new()
        .turn(Matcher::Any, Reply::tool_use_with_text("AskUserQuestion", three_options(), "One question first."))
        .after_tool_result("Noted your choice.");
    let Some(e) = start(script) else { return };
    let id = e.run("ask me something");
    let d = e.pending(&id, "question");
    assert_eq!(d["questions"][0]["question"], "Which database should we use?", "{d}");
    let labels: Vec<&str> =
        d["questions"][0]["options"].as_array().unwrap().iter().map(|o| o["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["PostgreSQL", "SQLite", "Redis"], "{d}");
    let (s, r) = e.lab().post(&format!("/runs/{id}/messages"), &json!({"text": "hello?"}));
    assert_eq!((s, &r["error"]), (409, &json!("dialog_pending")), "{r}");
    let (s, r) = e.answer(&id, d["tool_id"].as_str().unwrap(), json!([{"option": 1}]));
    assert_eq!(s, 202, "{r}");
    e.wait(&id, "the reply after the answer", |v| v["state"] == "idle" && has_text(v, "Noted your choice."));
    let call = e.standin.emitted_tool_uses().into_iter().find(|t| t.name == "AskUserQuestion").expect("the question");
    let results = e.standin.tool_results_for(&call.id);
    assert!(results.iter().any(|(t, _)| t.contains("SQLite")), "the agent got the operator's choice: {results:?}");
    e.stop_run(&id);
}

#[test]
fn a_second_prompt_a_restart_of_lab_and_stop() {
    let script =
        Script::new().turn(Matcher::Any, Reply::text("First reply.")).turn(Matcher::Any, Reply::text("Second reply."));
    let Some(mut e) = start(script) else { return };
    let id = e.run("hello");
    e.wait(&id, "the first reply", |v| v["state"] == "idle" && has_text(v, "First reply."));
    e.restart();
    // The agent declares loadSession: the run is resumed under the same id.
    let v = e.wait(&id, "the run resumed", |v| has_text(v, "lab restarted") || v["state"] == "ended");
    assert_ne!(v["state"], "ended", "{}", e.lab().get(&format!("/runs/{id}")).1);
    assert!(has_text(&v, "First reply."), "the chat survived the restart");
    assert_eq!(
        v["messages"].as_array().unwrap().iter().filter(|m| m["text"] == "First reply.").count(),
        1,
        "no replay shown"
    );
    let (s, r) = e.lab().post(&format!("/runs/{id}/messages"), &json!({"text": "again"}));
    assert_eq!(s, 202, "{r}");
    e.wait(&id, "the second reply", |v| v["state"] == "idle" && has_text(v, "Second reply."));
    e.stop_run(&id);
}
