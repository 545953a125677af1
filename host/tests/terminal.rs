//! The live terminal and the audit log through `lab serve`'s HTTP API, with real tmux
//! and fake-claude: the stream draws the agent's screen and follows it; keys are taken
//! only from the one who took control; while control is held the composer and the
//! answers are refused; a closed view lets go of control; every action of a scripted
//! session is in the audit log once, with who did it and how it went, in a private
//! file `lab audit` prints too.

mod common;

use common::terminal::TermStream;
use common::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

fn audit(lab: &Lab, query: &str) -> Vec<Value> {
    let (s, b) = lab.get(&format!("/audit{query}"));
    assert_eq!(s, 200, "{b}");
    b["entries"].as_array().unwrap().clone()
}

fn actions(entries: &[Value]) -> Vec<String> {
    entries.iter().map(|e| format!("{}:{}", e["action"].as_str().unwrap(), e["outcome"].as_str().unwrap())).collect()
}

#[test]
fn the_stream_draws_the_pane_and_takes_keys_only_from_the_one_in_control() {
    let w = World::new();
    let fake_log = w.use_fake_claude(&json!({"steps": [{"ask": three_options()}, {"say": "Chose it."}, {"idle": {}}, {"say": "Heard you."}, {"idle": {}}]}));
    let lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "Pick a database.");
    let id = run["id"].as_str().unwrap().to_string();
    let v = lab.wait_view(&id, "the question", |v| v["pending_dialog"]["source"] == "spool");
    let tool_id = v["pending_dialog"]["tool_id"].clone();

    // No token, a foreign origin: refused before any stream opens.
    assert_eq!(TermStream::open(&lab.url, None, &id, &[]).err(), Some(401));
    let foreign = [("origin", "http://evil.example")];
    assert_eq!(TermStream::open(&lab.url, lab.token.as_deref(), &id, &foreign).err(), Some(403));

    let mut s = TermStream::open(&lab.url, lab.token.as_deref(), &id, &[]).unwrap();
    let size = s.wait_said(T, "the pane's size", |m| m["type"] == "size");
    assert_eq!((size["cols"].as_u64(), size["rows"].as_u64()), (Some(200), Some(50)));
    let c = s.wait_said(T, "who has control", |m| m["type"] == "control");
    assert_eq!((c["holder"].clone(), c["you"].clone()), (Value::Null, json!(false)));
    s.wait_screen(T, "the question on the screen", |t| t.contains("Which database"));

    // Read-only: keys are refused and nothing reaches the agent.
    s.send(&json!({"keys": "3"}));
    let r = s.wait_said(T, "a refusal", |m| m["type"] == "refused");
    assert!(r["reason"].as_str().unwrap().contains("take control first"), "{r}");
    s.send(&json!({"resize": [80, 20]}));

    // Take control: the composer and the answers are refused, with the reason.
    let (st, b) = lab.post(&format!("/runs/{id}/terminal/control"), &json!({"take": true}));
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["terminal_control"]["device_id"], "bearer");
    s.wait_said(T, "control is ours", |m| m["type"] == "control" && m["you"] == true);
    let v = lab.view(&id);
    assert_eq!(v["composer_lock"]["code"], "terminal_controlled", "{v}");
    assert_eq!(v["terminal_control"]["device_id"], "bearer");
    let (st, b) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": tool_id, "answers": [{"option": 1}]}));
    assert_eq!((st, b["error"].as_str()), (409, Some("terminal_controlled")), "{b}");

    // Keys from the stream answer the question in the pane, then type a message.
    wait_for(T, "the agent's question, ready for keys", || {
        World::log_events(&fake_log).into_iter().find(|e| e["event"] == "ready" && e["widget"] == "ask")
    });
    s.send(&json!({"keys": "\r"}));
    lab.wait_view(&id, "the question answered in the pane", |v| {
        v["pending_dialog"].is_null() && v["state"] == "idle" && v.to_string().contains("Chose it.")
    });
    // (Typed once the agent's composer reads keys: what a person at the pane sees.)
    wait_for(T, "the agent's composer, ready", || {
        World::log_events(&fake_log).into_iter().find(|e| e["event"] == "ready" && e["widget"] == "composer")
    });
    s.send(&json!({"keys": "typed; in the pane\r"}));
    lab.wait_view(&id, "the typed line in the chat", |v| {
        v["messages"].as_array().unwrap().iter().any(|m| m["role"] == "user" && m["text"] == "typed; in the pane")
    });
    s.wait_screen(T, "the reply on the screen", |t| t.contains("Heard you."));
    // A resize from the one in control: the pane's new size comes back.
    s.send(&json!({"resize": [100, 30]}));
    s.wait_said(T, "the new size", |m| m["type"] == "size" && m["cols"] == 100 && m["rows"] == 30);
    // The message route stays locked while control is held.
    let (st, b) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "from the composer"}));
    assert_eq!((st, b["error"].as_str()), (409, Some("terminal_controlled")), "{b}");

    // The view that held control closes: control is let go, the composer opens.
    s.close();
    lab.wait_view(&id, "control let go", |v| v["terminal_control"].is_null() && v["composer_lock"].is_null());
    let (st, b) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "from the composer"}));
    assert_eq!(st, 202, "{b}");

    let log = audit(&lab, &format!("?run={id}"));
    assert_eq!(
        actions(&log),
        [
            "run.start:applied",
            "terminal.take:applied",
            "dialog.answer:refused",
            "message.send:refused",
            "terminal.release:applied",
            "message.send:applied"
        ],
        "{log:#?}"
    );
    assert_eq!(log[4]["detail"]["why"], "its terminal view closed");
    assert!(log.iter().all(|e| e["actor"] == "bearer"), "{log:#?}");
    lab.stop();
}

#[test]
fn every_action_of_a_session_is_in_the_audit_log_once_with_who_and_how_it_went() {
    let w = World::new();
    w.use_fake_claude(&json!({"steps": [{"ask": three_options()}, {"say": "Chose it."}, {"idle": {}}]}));
    // The command line's own actions (before lab serve starts: they need no server).
    let add =
        std::process::Command::new(LAB).args(["hosts", "--home"]).arg(&w.home).args(["add", "m9"]).output().unwrap();
    assert!(add.status.success(), "{}", String::from_utf8_lossy(&add.stderr));
    let rm = std::process::Command::new(LAB)
        .args(["hosts", "--home"])
        .arg(&w.home)
        .args(["remove", "nosuch"])
        .output()
        .unwrap();
    assert!(!rm.status.success());
    let lab = w.serve();
    let run = lab.create_run(&w, "claude-code", "Pick a database.");
    let id = run["id"].as_str().unwrap().to_string();
    let v = lab.wait_view(&id, "the question", |v| v["pending_dialog"]["source"] == "spool");
    let tool_id = v["pending_dialog"]["tool_id"].clone();
    let (st, _) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": "not-it", "answers": [{"option": 0}]}));
    assert_eq!(st, 409, "an answer the guard refuses");
    let (st, b) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": tool_id, "answers": [{"option": 1}]}));
    assert_eq!(st, 202, "{b}");
    lab.wait_view(&id, "idle", |v| v["state"] == "idle" && v.to_string().contains("Chose it."));
    let (st, b) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "Thanks, that is all."}));
    assert_eq!(st, 202, "{b}");
    // A device logs in with a pairing code, and is logged out.
    let (st, pair) = lab.post("/pair", &json!({"name": "Test phone"}));
    assert_eq!(st, 201, "{pair}");
    let code = pair["url"].as_str().unwrap().split("code=").nth(1).unwrap().to_string();
    let anon = reqwest::blocking::Client::new();
    let r = anon.post(format!("{}/login", lab.url)).json(&json!({"code": code})).send().unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let (_, devices) = lab.get("/devices");
    let phone = devices["devices"].as_array().unwrap().iter().find(|d| d["name"] == "Test phone").unwrap().clone();
    let r = lab
        .client
        .delete(format!("{}/devices/{}", lab.url, phone["id"].as_str().unwrap()))
        .header("content-type", "application/json")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    let (st, b) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!(st, 200, "{b}");
    let (st, b) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "Still there?"}));
    assert_eq!((st, b["error"].as_str()), (409, Some("run_ended")), "a message to an ended run is refused");
    // Reads are not actions.
    let _ = lab.get(&format!("/runs/{id}"));
    let _ = lab.get("/audit");

    let all = audit(&lab, "");
    assert_eq!(
        actions(&all),
        [
            "host.add:applied",
            "host.remove:refused",
            "run.start:applied",
            "dialog.answer:refused",
            "dialog.answer:applied",
            "message.send:applied",
            "device.pair:applied",
            "device.login:applied",
            "device.logout:applied",
            "run.stop:applied",
            "message.send:refused",
        ],
        "{all:#?}"
    );
    let by = |a: &str, o: &str| all.iter().find(|e| e["action"] == a && e["outcome"] == o).unwrap().clone();
    assert!(by("message.send", "refused")["reason"].as_str().unwrap().starts_with("run_ended: "));
    assert_eq!(by("dialog.answer", "applied")["detail"], json!({"tool_id": tool_id, "answers": [{"option": 1}]}));
    let refused = by("dialog.answer", "refused");
    assert!(refused["reason"].as_str().unwrap().starts_with("dialog_changed: "), "{refused}");
    assert_eq!(by("message.send", "applied")["detail"], json!({"text": "Thanks, that is all.", "chars": 20}));
    let login = by("device.login", "applied");
    assert_eq!(login["actor"], json!({"device_id": phone["id"], "device_name": "Test phone"}), "the device logged in");
    let logout = by("device.logout", "applied");
    assert_eq!(logout["actor"], "bearer");
    assert_eq!(logout["detail"]["device"]["device_name"], "Test phone");
    assert_eq!(by("run.start", "applied")["run_id"], id.as_str());
    assert_eq!(by("host.add", "applied")["detail"]["host"], "m9");
    assert!(all.iter().all(|e| !e.to_string().contains(&code)), "no login code in the log");

    // Filters, bounds and bad parameters.
    assert_eq!(audit(&lab, &format!("?run={id}")).len(), 6);
    assert_eq!(actions(&audit(&lab, "?limit=2")), ["run.stop:applied", "message.send:refused"]);
    assert!(audit(&lab, "?to=2000-01-01T00:00:00Z").is_empty());
    assert_eq!(audit(&lab, "?from=2000-01-01T00:00:00Z").len(), all.len());
    for bad in ["?from=yesterday", "?limit=0", "?limit=100000", "?nope=1"] {
        assert_eq!(lab.get(&format!("/audit{bad}")).0, 400, "{bad}");
    }

    // The file is private, and `lab audit` prints the same entries.
    let mode = std::fs::metadata(w.home.join("audit.jsonl")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let out = std::process::Command::new(LAB).args(["audit", "--json", "--home"]).arg(&w.home).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed: Vec<Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(printed, all);
    let text = std::process::Command::new(LAB).args(["audit", "--run", &id, "--home"]).arg(&w.home).output().unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert_eq!(text.lines().count(), 6, "{text}");
    assert!(text.lines().any(|l| l.contains("dialog.answer") && l.contains("REFUSED dialog_changed")), "{text}");
    lab.stop();
}
