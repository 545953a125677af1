//! Answer rules against a real `lab serve`, real tmux and the scripted ACP agent
//! `fake-acp`: a prompt an allow rule matches goes on without the operator (the view
//! and the audit log name the rule, and the webhook is not called for it), a deny
//! refuses the call, a prompt no rule matches waits as before and calls the webhook,
//! a dry-run rule answers nothing, and the rules themselves are kept, checked and
//! audited.

mod common;

use common::acp_run::has_text;
use common::{wait_for, workspace_bin, Lab, World};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A webhook receiver on 127.0.0.1: the JSON body of every POST.
fn receiver() -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let got = Arc::new(Mutex::new(Vec::new()));
    let sink = got.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
            let mut r = BufReader::new(&stream);
            let mut len = 0;
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            if r.read_exact(&mut body).is_ok() {
                sink.lock().unwrap().push(serde_json::from_slice(&body).unwrap_or(Value::Null));
            }
            let _ = write!(stream, "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (url, got)
}

fn serve(w: &World, notify_url: &str) -> Lab {
    let fake = workspace_bin("fake-acp", "fake-acp");
    w.write_config(&format!(
        "[agents.fake]\nacp = [{:?}]\n\n[notify]\nurl = {notify_url:?}\nevents = [\"question\"]\n",
        fake.display().to_string()
    ));
    w.serve()
}

fn audit(lab: &Lab, id: &str, action: &str) -> Vec<Value> {
    let (s, a) = lab.get(&format!("/audit?run={id}"));
    assert_eq!(s, 200, "{a}");
    a["entries"].as_array().unwrap().iter().filter(|e| e["action"] == action).cloned().collect()
}

#[test]
fn a_matching_prompt_is_answered_by_its_rule_and_no_other_is() {
    let w = World::new();
    let (url, hooks) = receiver();
    let lab = serve(&w, &url);
    let workdir = w.workdir.display().to_string();

    // The rules: checked, kept with an id, audited.
    let (s, e) = lab.post("/rules", &json!({"name": "everything", "action": "allow", "match": {}}));
    assert_eq!((s, &e["error"]), (400, &json!("bad_request")), "{e}");
    let (s, allow) = lab.post(
        "/rules",
        &json!({"name": "touch in the repo", "action": "allow",
                "match": {"provider": "fake", "tool": "execute", "pattern": "touch allowed*", "workdir": workdir}}),
    );
    assert_eq!(s, 201, "{allow}");
    let allow_id = allow["id"].as_str().unwrap().to_string();
    let (s, deny) = lab.post(
        "/rules",
        &json!({"name": "no deleting", "action": "deny", "message": "never delete here",
                "match": {"tool": "execute", "pattern": "rm"}}),
    );
    assert_eq!(s, 201, "{deny}");
    let (s, dry) = lab.post(
        "/rules",
        &json!({"name": "maybe echo", "action": "allow", "dry_run": true, "match": {"pattern": "echo"}}),
    );
    assert_eq!(s, 201, "{dry}");
    let (_, list) = lab.get("/rules");
    assert_eq!(list.as_array().unwrap().len(), 3, "{list}");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(w.home.join("rules.toml")).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);

    // An allowed command runs with nobody answering; its rule is on the answer.
    let run = lab.create_run(&w, "fake", "run:touch allowed.txt;say:one");
    let id = run["id"].as_str().unwrap().to_string();
    let v = lab.wait_view(&id, "the turn's end", |v| v["state"] == "idle" && has_text(v, "one"));
    assert!(w.workdir.join("allowed.txt").exists(), "the rule let the command run");
    assert_eq!(v["answer"]["answered_by"], json!({"rule": allow_id, "name": "touch in the repo"}), "{}", v["answer"]);
    let e = audit(&lab, &id, "rule.answer");
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(
        (&e[0]["outcome"], &e[0]["actor"], &e[0]["detail"]["rule"]),
        (&json!("applied"), &json!("rule"), &json!(allow_id))
    );

    // A denied one is refused: the agent hears it, nothing ran.
    let (s, _) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "run:rm -f allowed.txt;say:two"}));
    assert_eq!(s, 202);
    let v = lab.wait_view(&id, "the second turn's end", |v| v["state"] == "idle" && has_text(v, "two"));
    assert!(w.workdir.join("allowed.txt").exists(), "the denied command never ran");
    assert!(v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["kind"] == "tool_result" && m["text"] == "the user rejected it"));
    assert_eq!(v["answer"]["answered_by"]["name"], "no deleting");

    // One no rule answers (the dry run says it would have): it waits for the operator,
    // and the webhook is called for it, and for it only.
    let (s, _) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "run:echo hi;say:three"}));
    assert_eq!(s, 202);
    // (The dry run's note comes beside the view that shows the prompt, a moment after it.)
    let v = lab.wait_view(&id, "a waiting permission and the dry run's note", |v| {
        v["pending_dialog"]["kind"] == "permission" && v["would_answer"]["tool_id"] == v["pending_dialog"]["tool_id"]
    });
    let tool_id = v["pending_dialog"]["tool_id"].as_str().unwrap().to_string();
    assert!(v["answer"]["tool_id"] != json!(tool_id), "nothing answered it: {}", v["answer"]);
    assert_eq!(v["would_answer"]["name"], "maybe echo", "the card says what the dry run would do: {v}");
    assert_eq!((&v["would_answer"]["tool_id"], &v["would_answer"]["action"]), (&json!(tool_id), &json!("allow")));
    let would = audit(&lab, &id, "rule.would_answer");
    assert_eq!((would.len(), &would[0]["detail"]["name"]), (1, &json!("maybe echo")), "{would:?}");
    wait_for(Duration::from_secs(20), "the webhook for the waiting prompt", || {
        (!hooks.lock().unwrap().is_empty()).then_some(())
    });
    let (s, e) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": tool_id, "answers": [{"option": 1}]}));
    assert_eq!(s, 202, "{e}");
    lab.wait_view(&id, "the third turn's end", |v| v["state"] == "idle" && has_text(v, "three"));
    let got = hooks.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "only the prompt no rule answered called: {got:?}");
    assert_eq!(got[0]["dialog"]["tool_id"], json!(tool_id));

    // A run the operator turned rules off for: its prompts wait, whatever the rules say.
    let (s, body) = lab.put(&format!("/runs/{id}/rules"), &json!({"on": false}));
    assert_eq!((s, &body["answer_rules"]), (200, &json!(false)), "{body}");
    let (s, _) =
        lab.post(&format!("/runs/{id}/messages"), &json!({"text": "say:a;say:b;run:touch allowed-off.txt;say:off"}));
    assert_eq!(s, 202);
    let v = lab.wait_view(&id, "a permission waiting with rules off", |v| v["pending_dialog"]["kind"] == "permission");
    let off_tool = v["pending_dialog"]["tool_id"].as_str().unwrap().to_string();
    let (s, e) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": off_tool, "answers": [{"option": 2}]}));
    assert_eq!(s, 202, "{e}");
    lab.wait_view(&id, "the rules-off turn's end", |v| v["state"] == "idle" && has_text(v, "off"));
    assert!(!w.workdir.join("allowed-off.txt").exists(), "no rule answered it; the operator refused it");
    let (s, body) = lab.put(&format!("/runs/{id}/rules"), &json!({"on": true}));
    assert_eq!((s, &body["answer_rules"]), (200, &json!(true)), "{body}");

    // Rules changed take effect for the next prompt; lab.toml's cannot be changed here.
    let (s, r) = lab.put(
        &format!("/rules/{allow_id}"),
        &json!({"name": "touch in the repo", "action": "ask", "match": {"tool": "execute", "pattern": "touch"}}),
    );
    assert_eq!((s, &r["action"]), (200, &json!("ask")), "{r}");
    let (s, _) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "run:touch allowed2.txt;say:four"}));
    assert_eq!(s, 202);
    lab.wait_view(&id, "a waiting permission again", |v| v["pending_dialog"]["kind"] == "permission");
    assert!(!w.workdir.join("allowed2.txt").exists());
    let (s, _) = lab.delete(&format!("/rules/{allow_id}"));
    assert_eq!(s, 204);
    let (s, e) = lab.delete(&format!("/rules/{allow_id}"));
    assert_eq!((s, &e["error"]), (404, &json!("not_found")), "{e}");
    let all = lab.get("/audit").1["entries"].as_array().unwrap().clone();
    let actions: Vec<&str> =
        all.iter().filter_map(|e| e["action"].as_str()).filter(|a| a.starts_with("rule.")).collect();
    for a in ["rule.add", "rule.change", "rule.remove"] {
        assert!(actions.contains(&a), "{a} in {actions:?}");
    }
    let (_, t) = lab.post("/rules/test", &json!({"provider": "fake", "tool": "execute", "subject": "rm -rf /"}));
    assert_eq!((&t["action"], &t["rule"]["name"]), (&json!("deny"), &json!("no deleting")), "{t}");
    lab.stop();
}

fn lab_rules(w: &World, args: &[&str]) -> (bool, String, String) {
    let out =
        std::process::Command::new(common::LAB).arg("rules").args(args).arg("--home").arg(&w.home).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `lab rules`: with no serve running, `rules.toml` is changed in place; with one, the
/// change goes through it (it takes effect for its next prompt) — the same commands.
#[test]
fn lab_rules_adds_lists_tests_and_removes_with_or_without_a_serve() {
    let w = World::new();
    let workdir = w.workdir.display().to_string();
    let (ok, id, e) =
        lab_rules(&w, &["add", "tests", "--allow", "--tool", "Bash", "--pattern", "cargo test", "--workdir", &workdir]);
    assert!(ok, "{e}");
    let id = id.trim().to_string();
    assert!(id.starts_with("r-"), "{id}");
    let (ok, _, e) = lab_rules(&w, &["add", "everything", "--allow"]);
    assert!(!ok && e.contains("names a tool or a pattern"), "{e}");
    let (ok, out, _) = lab_rules(
        &w,
        &[
            "test",
            "--provider",
            "claude-code",
            "--tool",
            "Bash",
            "--subject",
            "cargo test --all",
            "--workdir",
            &workdir,
        ],
    );
    assert!(ok && out.starts_with(&format!("allow: rule {id} (tests)")), "{out}");
    let (_, out, _) = lab_rules(
        &w,
        &[
            "test",
            "--provider",
            "claude-code",
            "--tool",
            "Bash",
            "--subject",
            "cargo test && rm -rf ~",
            "--workdir",
            &workdir,
        ],
    );
    assert!(out.starts_with("ask:"), "never a chained command: {out}");

    // With a serve: through it, and it answers with what it keeps.
    let (url, _) = receiver();
    let lab = serve(&w, &url);
    let (_, list) = lab.get("/rules");
    assert_eq!(list[0]["id"], json!(id), "{list}");
    let (ok, second, e) =
        lab_rules(&w, &["add", "no pushes", "--deny", "--message", "ask first", "--pattern", "git push"]);
    assert!(ok, "{e}");
    let (_, list) = lab.get("/rules");
    assert_eq!(list.as_array().unwrap().len(), 2, "the serve has it at once: {list}");
    let (ok, out, _) = lab_rules(&w, &["list"]);
    assert!(ok && out.contains("tests") && out.contains("no pushes") && out.contains("pattern=git push"), "{out}");
    let (ok, _, e) = lab_rules(&w, &["remove", second.trim()]);
    assert!(ok, "{e}");
    let (ok, _, e) = lab_rules(&w, &["remove", second.trim()]);
    assert!(!ok && e.contains("no such rule"), "{e}");
    let (_, list) = lab.get("/rules");
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    let audit = lab.get("/audit").1;
    let actions: Vec<&str> = audit["entries"].as_array().unwrap().iter().filter_map(|e| e["action"].as_str()).collect();
    assert!(actions.contains(&"rule.add") && actions.contains(&"rule.remove"), "{actions:?}");
    lab.stop();
}
