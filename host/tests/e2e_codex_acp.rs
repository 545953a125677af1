//! End-to-end: lab driving the REAL Codex ACP adapter (`@zed-industries/codex-acp`,
//! pinned by scripts/install-codex-acp.sh) as an ACP agent named only in lab.toml
//! (`[agents.codex-acp]`), configured like codex by its own `CODEX_HOME` (the
//! `responses-standin` on 127.0.0.1 as its model provider, no update check, no
//! analytics). Every operator step goes through lab's HTTP API; each scenario checks what
//! the agent did (the file the command wrote, what reached the stand-in).
//!
//! The binary: `LAB_CODEX_ACP_BIN` (scripts/test sets it). Missing: with `CI=true` every
//! test fails; otherwise each prints a loud SKIPPED. At most 2 agents at a time.

mod common;

use common::acp_run::{has_text, option, AcpRun, STEP};
use common::*;
use responses_standin::{Script, Standin, API_KEY_ENV};
use serde_json::json;
use std::path::PathBuf;

fn codex_acp_bin() -> Option<PathBuf> {
    agent_bin("LAB_CODEX_ACP_BIN", "scripts/install-codex-acp.sh", "the end-to-end tests against the real codex-acp")
}

type E2e = AcpRun<Standin>;

fn start(script: Script) -> Option<E2e> {
    let bin = codex_acp_bin()?;
    let slot = Slot::take(2);
    let standin = Standin::start(script).unwrap();
    let w = World::new();
    let codex_home = w.dir.path().join("codex-home");
    std::fs::create_dir_all(&codex_home).unwrap();
    let trusted = w.workdir.canonicalize().unwrap();
    std::fs::write(
        codex_home.join("config.toml"),
        responses_standin::codex_config(&standin.url(), Some(&trusted.display().to_string())),
    )
    .unwrap();
    w.write_config(&format!(
        "[agents.codex-acp]\nacp = [{bin:?}]\ndisplay_name = \"Codex (ACP)\"\nstart_timeout_secs = 120\n\
             env = {{ CODEX_HOME = {home:?}, {API_KEY_ENV} = \"standin-key\" }}\n",
        bin = bin.display().to_string(),
        home = codex_home.display().to_string(),
    ));
    Some(AcpRun::serve(w, slot, "codex-acp", standin))
}

#[test]
fn an_escalated_command_is_asked_about_allowed_from_lab_and_runs() {
    let script = Script::new()
        .exec_command_escalated("touch codex-acp-ran.txt", "Stand-in wants to create a file")
        .after_output("Tool finished.");
    let Some(e) = start(script) else { return };
    let id = e.run("make the file");
    let v = e.wait(&id, "the permission request", |v| v["pending_dialog"]["kind"] == "permission");
    let d = v["pending_dialog"].clone();
    assert!(d.to_string().contains("touch codex-acp-ran.txt"), "the prompt shows the command: {d}");
    let allow = option(&d, "allow_once");
    let (s, r) = e
        .lab()
        .post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": d["tool_id"], "answers": [{"option": allow}]}));
    assert_eq!(s, 202, "{r}");
    e.wait(&id, "the reply after the command", |v| v["state"] == "idle" && has_text(v, "Tool finished."));
    assert!(e.w.workdir.join("codex-acp-ran.txt").exists(), "the command ran");
    let call = e.standin.wait_for_call(0, STEP).expect("the command call");
    assert!(e.standin.wait_for_output(&call.call_id, STEP).is_some(), "its output reached the model");
    // codex-acp 0.16.0 says how full the context is (`usage_update`), and no turn's
    // tokens (its prompt responses carry no `usage`): lab shows what it says.
    let (_, u) = e.lab().get(&format!("/runs/{id}/usage"));
    assert!(u["context"]["used"].as_u64().is_some_and(|n| n > 0), "{u}");
    assert!(u["context"]["window"].as_u64().is_some_and(|n| n > 0), "{u}");
    assert_eq!(u["responses"], 0, "{u}");
    let (s, r) = e.lab().post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!((s, &r["state"]), (200, &json!("ended")), "{r}");
}
