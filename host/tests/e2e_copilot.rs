//! End-to-end: lab driving the REAL GitHub Copilot CLI (`@github/copilot`, pinned by
//! scripts/install-copilot.sh) as an ACP agent named only in lab.toml
//! (`[agents.copilot]`, `copilot --acp`), in its BYOK mode: its model provider is a
//! `messages-standin` on 127.0.0.1 (`COPILOT_PROVIDER_TYPE=anthropic`), so no GitHub
//! sign-in and nothing leaves the machine (npm's registry set to a closed loopback port).
//! Every operator step goes through lab's HTTP API; each scenario checks what the agent
//! did (the file the command wrote, what reached the stand-in).
//!
//! The binary: `LAB_COPILOT_BIN` (scripts/test sets it). Missing: with `CI=true` every
//! test fails; otherwise each prints a loud SKIPPED. At most 2 agents at a time.

mod common;

use common::acp_run::{has_text, option, AcpRun};
use common::*;
use messages_standin::{Matcher, Reply, Script, Standin};
use serde_json::{json, Value};
use std::path::PathBuf;

fn copilot_bin() -> Option<PathBuf> {
    agent_bin("LAB_COPILOT_BIN", "scripts/install-copilot.sh", "the end-to-end tests against the real Copilot CLI")
}

type E2e = AcpRun<Standin>;

fn start(script: Script) -> Option<E2e> {
    let bin = copilot_bin()?;
    let slot = Slot::take(2);
    let standin = Standin::start(script).unwrap();
    let w = World::new();
    w.write_config(&format!(
        "[agents.copilot]\nacp = [{bin:?}, \"--acp\"]\ndisplay_name = \"Copilot CLI\"\nstart_timeout_secs = 120\n\
             env = {{ COPILOT_PROVIDER_BASE_URL = {url:?}, COPILOT_PROVIDER_TYPE = \"anthropic\", \
             COPILOT_PROVIDER_API_KEY = \"sk-ant-standin\", COPILOT_MODEL = \"claude-sonnet-4.5\", \
             npm_config_registry = \"http://127.0.0.1:9/\" }}\n",
        bin = bin.display().to_string(),
        url = standin.base_url(),
    ));
    Some(AcpRun::serve(w, slot, "copilot", standin))
}

fn bash(command: &str) -> Value {
    json!({"command": command, "description": "Write a marker file"})
}

#[test]
fn a_shell_command_copilot_asks_about_is_allowed_from_lab_runs_and_its_usage_is_counted() {
    let script = Script::new()
        .turn(Matcher::Any, Reply::tool_use_with_text("bash", bash("echo cop > copilot-ran.txt"), "I will write it."))
        .after_tool_result("The file is written.");
    let Some(e) = start(script) else { return };
    let id = e.run("write the marker file");
    let d = e.pending(&id, "permission");
    assert!(d.to_string().contains("echo cop > copilot-ran.txt"), "the prompt shows the command: {d}");
    let allow = option(&d, "allow_once");
    let (s, r) = e.answer(&id, d["tool_id"].as_str().unwrap(), json!([{"option": allow}]));
    assert_eq!(s, 202, "{r}");
    let v = e.wait(&id, "the reply after the command", |v| v["state"] == "idle" && has_text(v, "The file is written."));
    assert_eq!(std::fs::read_to_string(e.w.workdir.join("copilot-ran.txt")).unwrap().trim(), "cop");
    assert!(v["messages"].as_array().unwrap().iter().any(|m| m["kind"] == "tool_use"), "{:#}", v["messages"]);
    let call = e.standin.emitted_tool_uses().into_iter().find(|t| t.name == "bash").expect("the bash call");
    assert!(!e.standin.tool_results_for(&call.id).is_empty(), "the command's result reached the model");
    // Usage: the protocol's `usage` of the prompt response, the turn's responses added
    // up by the agent (its `inputTokens` holds the cached tokens: lab takes them out);
    // counted once.
    let sent: Vec<Value> = e
        .standin
        .requests()
        .into_iter()
        .filter(|r| r.body["tools"].as_array().is_some_and(|t| !t.is_empty()))
        .filter_map(|r| r.reply?.usage)
        .collect();
    let sum = |k: &str| -> u64 { sent.iter().filter_map(|u| u[k].as_u64()).sum() };
    let (_, u) = e.lab().get(&format!("/runs/{id}/usage"));
    assert_eq!(u["responses"], 1, "one turn, one record: {u}");
    assert_eq!(u["output_tokens"], sum("output_tokens"), "{u}");
    assert_eq!(u["input_tokens"], sum("input_tokens"), "{u}");
    assert_eq!(u["cache_read_tokens"], sum("cache_read_input_tokens"), "{u}");
    assert_eq!(u["cache_write_tokens"], sum("cache_creation_input_tokens"), "{u}");
    e.stop_run(&id);
}

#[test]
fn a_shell_command_denied_from_lab_never_runs() {
    let script = Script::new()
        .turn(Matcher::Any, Reply::tool_use("bash", bash("echo no > copilot-denied.txt")))
        .after_tool_result("Understood, I did not run it.");
    let Some(e) = start(script) else { return };
    let id = e.run("try the command");
    e.answer_permission(&id, "reject_once");
    let v = e.wait(&id, "the run idle after the refusal", |v| v["state"] == "idle" && v["pending_dialog"].is_null());
    assert!(!e.w.workdir.join("copilot-denied.txt").exists(), "a denied command never ran: {:#}", v["messages"]);
    e.stop_run(&id);
}
