//! fake-acp: a scripted ACP agent. One JSON-RPC message a line on stdin/stdout.
//!
//! A prompt's text is a script of steps separated by `;` (see README.md):
//! `say:TEXT`, `think:TEXT`, `plan`, `run:CMD` (a permission, then `sh -c CMD` when
//! allowed), `ask:QUESTION` (a form: Postgres / SQLite / other), `read:PATH`,
//! `write:PATH=TEXT`, `term:CMD` (a terminal running `sh -c CMD`, waited for, its output
//! said, released), `termkeep:CMD` (not released), `termat:DIR|CMD` (in DIR),
//! `garbage`, `crash`, `hang`, `session` (says `session=<its session id>`), `sleep:MS`, `args` (says its arguments), `env:NAME` (says
//! `NAME=value`).
//! Environment: `FAKE_ACP_NO_LOAD=1` (no loadSession), `FAKE_ACP_NO_FORK=1` (no
//! `sessionCapabilities.fork`; with it, `session/fork` answers `<id>-fork-<pid>`), `FAKE_ACP_HANG_INIT=1` (never
//! answers initialize), `FAKE_ACP_LOG=FILE` (appends every line it reads).

use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

struct Agent {
    out: Mutex<std::io::Stdout>,
    next_id: AtomicI64,
    waiting: Mutex<HashMap<i64, mpsc::Sender<Value>>>,
    cancelled: AtomicBool,
    cwd: Mutex<String>,
    session: Mutex<String>,
    /// The session mode: `ask` (the default) asks before `run:`; `yolo` does not.
    mode: Mutex<String>,
}

impl Agent {
    fn send(&self, v: Value) {
        let mut o = self.out.lock().unwrap();
        let _ = writeln!(o, "{v}");
        let _ = o.flush();
    }
    fn raw(&self, s: &str) {
        let mut o = self.out.lock().unwrap();
        let _ = writeln!(o, "{s}");
        let _ = o.flush();
    }
    fn update(&self, u: Value) {
        let sid = self.session.lock().unwrap().clone();
        self.send(json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": u}}));
    }
    fn say(&self, text: &str) {
        // In two chunks: lab joins them into one message.
        let mid = text.char_indices().nth(text.chars().count() / 2).map_or(0, |(i, _)| i);
        for part in [&text[..mid], &text[mid..]] {
            self.update(json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": part}}));
        }
    }
    /// A request of the agent's; waits for lab's response.
    fn ask(&self, method: &str, params: Value) -> Value {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::channel();
        self.waiting.lock().unwrap().insert(id, tx);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        rx.recv().unwrap_or(json!({"error": {"message": "closed"}}))
    }
}

fn main() {
    let agent = Arc::new(Agent {
        out: Mutex::new(std::io::stdout()),
        next_id: AtomicI64::new(1000),
        waiting: Mutex::new(HashMap::new()),
        cancelled: AtomicBool::new(false),
        cwd: Mutex::new(String::new()),
        session: Mutex::new(String::new()),
        mode: Mutex::new("ask".into()),
    });
    let log = std::env::var("FAKE_ACP_LOG").ok();
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if let Some(l) = &log {
            if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(l) {
                let _ = writeln!(f, "{line}");
            }
        }
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            eprintln!("fake-acp: not JSON: {line}");
            continue;
        };
        let id = msg.get("id").cloned();
        match (msg["method"].as_str(), id) {
            (None, Some(id)) => {
                let waiter = id.as_i64().and_then(|i| agent.waiting.lock().unwrap().remove(&i));
                if let Some(w) = waiter {
                    let _ = w.send(msg.clone());
                }
            }
            (Some("session/cancel"), None) => agent.cancelled.store(true, Ordering::SeqCst),
            (Some(_), None) => {}
            (Some(method), Some(id)) => {
                let reply = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
                match method {
                    "initialize" => {
                        if std::env::var("FAKE_ACP_HANG_INIT").is_ok() {
                            continue;
                        }
                        let load = std::env::var("FAKE_ACP_NO_LOAD").is_err();
                        let fork = if std::env::var("FAKE_ACP_NO_FORK").is_err() { json!({}) } else { json!(null) };
                        agent.send(reply(json!({"protocolVersion": 1, "agentCapabilities": {"loadSession": load,
                            "sessionCapabilities": {"fork": fork}},
                            "agentInfo": {"name": "fake-acp", "version": "1.0.0"}})));
                    }
                    "session/new" => {
                        *agent.cwd.lock().unwrap() = msg["params"]["cwd"].as_str().unwrap_or_default().to_string();
                        let sid = format!("fake-session-{}", std::process::id());
                        *agent.session.lock().unwrap() = sid.clone();
                        agent.send(reply(json!({"sessionId": sid, "modes": {"currentModeId": "ask",
                            "availableModes": [{"id": "yolo", "name": "Yolo"}, {"id": "ask", "name": "Ask"}]}})));
                    }
                    "session/load" => {
                        *agent.cwd.lock().unwrap() = msg["params"]["cwd"].as_str().unwrap_or_default().to_string();
                        *agent.session.lock().unwrap() = msg["params"]["sessionId"].as_str().unwrap_or_default().to_string();
                        // The history, replayed as the protocol says (lab must not show it twice).
                        agent.update(json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "(replayed prompt)"}}));
                        agent.say("(replayed reply)");
                        agent.send(reply(json!(null)));
                    }
                    "session/fork" => {
                        // A new session with the earlier one's history, replayed.
                        *agent.cwd.lock().unwrap() = msg["params"]["cwd"].as_str().unwrap_or_default().to_string();
                        let from = msg["params"]["sessionId"].as_str().unwrap_or_default().to_string();
                        let sid = format!("{from}-fork-{}", std::process::id());
                        *agent.session.lock().unwrap() = sid.clone();
                        agent.update(json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "(replayed prompt)"}}));
                        agent.say("(replayed reply)");
                        agent.send(reply(json!({"sessionId": sid})));
                    }
                    "session/set_mode" => match msg["params"]["modeId"].as_str() {
                        Some(m @ ("ask" | "yolo")) => {
                            *agent.mode.lock().unwrap() = m.to_string();
                            agent.send(reply(json!({})));
                        }
                        other => agent.send(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": format!("no mode {other:?}")}})),
                    },
                    "session/prompt" => {
                        let text: String = msg["params"]["prompt"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|b| b["text"].as_str())
                            .collect();
                        let a = agent.clone();
                        std::thread::spawn(move || {
                            a.cancelled.store(false, Ordering::SeqCst);
                            let stop = run_script(&a, &text);
                            if let Some(stop) = stop {
                                a.send(json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": stop}}));
                            }
                        });
                    }
                    other => agent.send(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("no {other}")}})),
                }
            }
            (None, None) => {}
        }
    }
}

/// Run a prompt's steps; the stop reason, or None to never answer (hang).
fn run_script(a: &Agent, text: &str) -> Option<&'static str> {
    let mut n = 0;
    for step in text.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        if a.cancelled.load(Ordering::SeqCst) {
            return Some("cancelled");
        }
        n += 1;
        let (verb, arg) = step.split_once(':').unwrap_or((step, ""));
        match verb {
            "say" => a.say(arg),
            // What it was started with: its arguments, or one environment variable.
            "args" => a.say(&format!("args: {}", std::env::args().skip(1).collect::<Vec<_>>().join(" "))),
            "env" => a.say(&format!("{arg}={}", std::env::var(arg).unwrap_or_else(|_| "(unset)".into()))),
            "think" => {
                a.update(json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": arg}}))
            }
            "plan" => a.update(json!({"sessionUpdate": "plan", "entries": [
                {"content": "look around", "priority": "high", "status": "completed"},
                {"content": "do the work", "priority": "medium", "status": "pending"}]})),
            "sleep" => std::thread::sleep(std::time::Duration::from_millis(arg.parse().unwrap_or(100))),
            "run" => {
                // Unique across the agent's turns, as a real agent's call ids are.
                static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let k = CALLS.fetch_add(1, Ordering::SeqCst);
                let call = format!("call-{n}-{k}-{}", std::process::id());
                a.update(json!({"sessionUpdate": "tool_call", "toolCallId": call, "title": arg, "kind": "execute", "status": "pending", "rawInput": {"command": arg}}));
                let r = if *a.mode.lock().unwrap() == "yolo" {
                    json!({"result": {"outcome": {"outcome": "selected", "optionId": "allow"}}})
                } else {
                    a.ask(
                        "session/request_permission",
                        json!({"sessionId": *a.session.lock().unwrap(),
                        "toolCall": {"toolCallId": call, "title": arg, "kind": "execute"},
                        "options": [{"optionId": "allow_always", "name": "Always Allow", "kind": "allow_always"},
                                    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                                    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"}]}),
                    )
                };
                let outcome = &r["result"]["outcome"];
                if outcome["outcome"] == "cancelled" {
                    return Some("cancelled");
                }
                if outcome["optionId"].as_str().is_some_and(|o| o.starts_with("allow")) {
                    let out = std::process::Command::new("sh")
                        .arg("-c")
                        .arg(arg)
                        .current_dir(&*a.cwd.lock().unwrap())
                        .output();
                    let text =
                        out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_else(|e| e.to_string());
                    a.update(json!({"sessionUpdate": "tool_call_update", "toolCallId": call, "status": "completed",
                        "content": [{"type": "content", "content": {"type": "text", "text": text}}]}));
                } else {
                    a.update(json!({"sessionUpdate": "tool_call_update", "toolCallId": call, "status": "failed", "rawOutput": "the user rejected it"}));
                }
            }
            "ask" => {
                let call = format!("ask-{n}-{}", std::process::id());
                a.update(json!({"sessionUpdate": "tool_call", "toolCallId": call, "title": "AskUserQuestion", "kind": "other", "status": "pending"}));
                let r = a.ask(
                    "elicitation/create",
                    json!({"mode": "form", "sessionId": *a.session.lock().unwrap(), "toolCallId": call, "message": arg,
                    "requestedSchema": {"type": "object", "properties": {
                        "question_0": {"type": "string", "title": "Database", "oneOf": [
                            {"const": "Postgres", "title": "Postgres", "description": "a server"},
                            {"const": "SQLite", "title": "SQLite", "description": "a file"}]},
                        "question_0_custom": {"type": "string", "title": "Other"}}}}),
                );
                let c = &r["result"]["content"];
                let chosen = c["question_0"].as_str().or(c["question_0_custom"].as_str()).unwrap_or("nothing");
                a.update(json!({"sessionUpdate": "tool_call_update", "toolCallId": call, "status": "completed", "rawOutput": chosen}));
                if r["result"]["action"] == "cancel" {
                    return Some("cancelled");
                }
                a.say(&format!("You chose {chosen}."));
            }
            "read" => {
                let r = a.ask("fs/read_text_file", json!({"sessionId": *a.session.lock().unwrap(), "path": arg}));
                match r["result"]["content"].as_str() {
                    Some(t) => a.say(&format!("read: {t}")),
                    None => a.say(&format!("read failed: {}", r["error"]["message"].as_str().unwrap_or("?"))),
                }
            }
            "write" => {
                let (path, content) = arg.split_once('=').unwrap_or((arg, ""));
                let r = a.ask(
                    "fs/write_text_file",
                    json!({"sessionId": *a.session.lock().unwrap(), "path": path, "content": content}),
                );
                match r.get("error") {
                    Some(e) => a.say(&format!("write failed: {}", e["message"].as_str().unwrap_or("?"))),
                    None => a.say("wrote it"),
                }
            }
            "term" | "termkeep" | "termat" => {
                let sid = a.session.lock().unwrap().clone();
                let (cwd, cmd) = match verb {
                    "termat" => arg.split_once('|').map(|(d, c)| (d.to_string(), c)).unwrap_or_default(),
                    _ => (a.cwd.lock().unwrap().clone(), arg),
                };
                let r = a.ask(
                    "terminal/create",
                    json!({"sessionId": sid, "command": "sh", "args": ["-c", cmd], "cwd": cwd,
                    "env": [{"name": "FAKE_ACP_TERM", "value": "yes"}], "outputByteLimit": 4000}),
                );
                let Some(tid) = r["result"]["terminalId"].as_str().map(str::to_string) else {
                    a.say(&format!("term failed: {}", r["error"]["message"].as_str().unwrap_or("?")));
                    continue;
                };
                let w = a.ask("terminal/wait_for_exit", json!({"sessionId": sid, "terminalId": tid}));
                let o = a.ask("terminal/output", json!({"sessionId": sid, "terminalId": tid}));
                a.say(&format!(
                    "term {tid} exit {}: {}",
                    w["result"]["exitCode"],
                    o["result"]["output"].as_str().unwrap_or("?").trim()
                ));
                if verb != "termkeep" {
                    a.ask("terminal/release", json!({"sessionId": sid, "terminalId": tid}));
                }
            }
            "terminal" => {
                let r = a.ask("terminal/create", json!({"sessionId": *a.session.lock().unwrap(), "command": "ls"}));
                a.say(&format!("terminal: {}", r["error"]["message"].as_str().unwrap_or("created")));
            }
            "garbage" => {
                a.raw("this is not json");
                a.raw("{\"jsonrpc\":\"2.0\"}");
                a.raw("{\"jsonrpc\":\"2.0\",\"id\":424242,\"result\":{}}");
                a.raw("[1,2,3]");
            }
            "crash" => {
                eprintln!("fake-acp: crashing as asked");
                std::process::exit(3);
            }
            "session" => {
                let sid = a.session.lock().unwrap().clone();
                a.say(&format!("session={sid}"))
            }
            "hang" => return None,
            other => a.say(&format!("unknown step {other:?}")),
        }
    }
    Some("end_turn")
}
