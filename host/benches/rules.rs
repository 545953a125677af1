//! Answer-rule benchmark (not a test): how long a prompt an allow rule matches waits.
//! Run with
//!
//!     cargo bench -p lab --bench rules
//!
//! A real `lab serve`, real tmux and fake-claude (through the claude-code provider and
//! its hooks) asking the same Bash permission `LAB_RULES_PROMPTS` times (default 60);
//! one allow rule matches it. Measured from the agent's own log: from the prompt drawn
//! and its PermissionRequest hook done (`ready`) to the answer's first key reaching the
//! agent, and to the rule's answer accepted by lab (its audit entry). The first includes
//! the provider's paced answer (the prompt must be seen drawn and still for its
//! `settle` before a key is typed: the seed's pinned send-keys pacing).

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/mod.rs"]
mod support;

use common::*;
use serde_json::{json, Value};
use std::time::{Duration, SystemTime};

fn at(v: &Value, key: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339(v[key].as_str()?).ok()
}

fn ms(from: SystemTime, to: SystemTime) -> f64 {
    to.duration_since(from).unwrap_or_default().as_secs_f64() * 1e3
}

fn main() {
    let n: usize = std::env::var("LAB_RULES_PROMPTS").ok().and_then(|v| v.parse().ok()).unwrap_or(60);
    let w = World::new();
    let mut steps: Vec<Value> = (0..n).map(|_| json!({"bash": {"command": "cargo test", "output": "ok"}})).collect();
    steps.push(json!({"idle": {}}));
    let log = w.use_fake_claude(&json!({"steps": steps}));
    let lab = w.serve();
    let (s, rule) = lab.post(
        "/rules",
        &json!({"name": "tests", "action": "allow", "match": {"tool": "Bash", "pattern": "cargo test"}}),
    );
    assert_eq!(s, 201, "{rule}");
    let run = lab.create_run(&w, "claude-code", "benchmark");
    let id = run["id"].as_str().unwrap().to_string();
    wait_for(Duration::from_secs(60 + 2 * n as u64), "every prompt answered by the rule", || {
        let approved = World::log_events(&log).iter().filter(|e| e["outcome"] == "approved").count();
        (approved >= n).then_some(())
    });
    let events = World::log_events(&log);
    // Each bash prompt drawn, then the first key the agent got after it.
    let mut drawn = Vec::new();
    let mut to_key = Vec::new();
    let mut pending: Option<SystemTime> = None;
    for e in &events {
        if e["event"] == "ready" && e["widget"] == "bash" {
            pending = at(e, "ts");
            drawn.extend(pending);
        } else if e["event"] == "key" {
            if let (Some(d), Some(k)) = (pending.take(), at(e, "ts")) {
                to_key.push(ms(d, k));
            }
        }
    }
    let (_, audit) = lab.get(&format!("/audit?run={id}"));
    let accepted: Vec<SystemTime> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "rule.answer" && e["outcome"] == "applied")
        .filter_map(|e| at(e, "t"))
        .collect();
    let to_accept: Vec<f64> = drawn.iter().zip(&accepted).map(|(d, a)| ms(*d, *a)).collect();
    println!("{n} Bash permission prompts of fake-claude, each answered by one allow rule:");
    support::print_pct("prompt drawn → the rule's answer accepted", 44, to_accept);
    support::print_pct("prompt drawn → the answer's first key at the agent", 44, to_key);
    assert_eq!(accepted.len(), n, "every prompt answered by the rule: {audit}");
    lab.stop();
}
