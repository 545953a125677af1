//! End-to-end: lab driving the REAL Codex CLI (pinned 0.171.0; 0.169.0 too, see
//! docs/compat-matrix.md) through its HTTP API.
//!
//! Each test starts its own world: a `lab serve` on a loopback port with its own home,
//! an agent HOME, a `CODEX_HOME` whose `config.toml` is the offline configuration of
//! docs/providers/codex/compat.md (a `standin` model provider with `wire_api =
//! "responses"` pointing at this test's `responses-standin` on 127.0.0.1, zero retries,
//! `approval_policy = "on-request"`, `sandbox_mode = "workspace-write"`, the workdir
//! trusted, plugins and analytics off), and a proxy trap on 127.0.0.1 that refuses every
//! non-loopback HTTP(S) request. lab.toml points `[providers.codex]` at
//! `$LAB_CODEX_BIN` and gives the agent its environment (`CODEX_HOME`, the stand-in's
//! key, the proxy variables): the provider hard-codes none of it. Every operator step
//! goes through lab's API (POST /runs, GET …/messages, GET …/events, POST
//! …/dialog/answer); each scenario also checks what codex sent to the stand-in, what it
//! ran, and that only the known announcement-tip fetch reached the trap.
//!
//! Scenarios: (1) a plain reply reaches the chat and the run goes idle; (2) an
//! escalated `exec_command` is a permission dialog (command, reason, codex's three rows,
//! tied to the rollout's call) and "Yes" from lab runs it; (3) "No" from lab: nothing
//! runs, idle; (4) "No" with feedback: the text is the next message; (5) "Yes, and don't
//! ask again": codex saves a rule; (6) an untrusted git folder's trust screen, read off
//! the pane, answered "Trust and continue" from lab; (7) a message from lab after idle;
//! (8) permission mode `never` reaches codex; (9) a 200 KiB first prompt typed in by lab;
//! (10) a repository's own hooks wait on codex's "Hooks need review" card and never run
//! unasked.
//!
//! The binary: `LAB_CODEX_BIN` (`scripts/install-codex.sh | tail -1`). Unset or not
//! executable: with `CI=true` every test fails; otherwise each prints a loud SKIPPED. At
//! most two codex processes run at a time. A failing test prints the pane, the
//! stand-in's requests and lab's log.

mod common;

use common::*;
use responses_standin::{toml_str, Matcher, ProxyTrap, Reply, Script, Standin};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

const LAUNCH_TIMEOUT: Duration = Duration::from_secs(60);
const STEP_TIMEOUT: Duration = Duration::from_secs(30);
const API_KEY: &str = "standin-key-0123456789";
/// The TUI's announcement tip, fetched through the proxy at every start (no switch in
/// 0.169.0); the trap refuses it.
const ANNOUNCEMENT_TIP: &str = "CONNECT raw.githubusercontent.com:443 ";
const APPROVAL_PROMPT: &str = "Would you like to run the following command?";

fn codex_bin() -> Option<PathBuf> {
    agent_bin("LAB_CODEX_BIN", "scripts/install-codex.sh", "the end-to-end tests against the real codex")
}

struct E2e {
    name: &'static str,
    lab: Option<Lab>,
    standin: Standin,
    trap: ProxyTrap,
    w: World,
    lab_log: PathBuf,
    _slot: Slot,
}

fn setup(name: &'static str, script: Script) -> Option<E2e> {
    setup_with(name, script, true)
}

/// [`setup`]; `trusted`: whether the config lists the workdir as trusted.
fn setup_with(name: &'static str, script: Script, trusted: bool) -> Option<E2e> {
    let bin = codex_bin()?;
    let slot = Slot::take(2);
    let w = World::new();
    let codex_home = w.dir.path().join("c");
    std::fs::create_dir_all(&codex_home).unwrap();
    let standin = Standin::start(script).expect("start the responses stand-in");
    let workdir = w.workdir.to_str().unwrap();
    let config = responses_standin::codex_config(&standin.url(), trusted.then_some(workdir));
    std::fs::write(codex_home.join("config.toml"), config).unwrap();
    let trap = ProxyTrap::start();
    let proxy = trap.url();
    let mut env = vec![
        ("CODEX_HOME".to_string(), codex_home.display().to_string()),
        (responses_standin::API_KEY_ENV.into(), API_KEY.into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("TERM".into(), "xterm-256color".into()),
        ("NO_PROXY".into(), "127.0.0.1,localhost,::1".into()),
        ("no_proxy".into(), "127.0.0.1,localhost,::1".into()),
    ];
    for v in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"] {
        env.push((v.into(), proxy.clone()));
    }
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k} = {}", toml_str(v))).collect();
    w.write_config(&format!(
        "[providers.codex]\nprogram = {}\nenv = {{ {} }}\n",
        toml_str(bin.to_str().unwrap()),
        env.join(", ")
    ));
    let lab_log = w.dir.path().join("lab-serve.log");
    let mut e = E2e { name, lab: None, standin, trap, w, lab_log, _slot: slot };
    e.start_lab();
    Some(e)
}

struct Run {
    id: String,
    target: String,
    events: EventLog,
}

impl E2e {
    fn lab(&self) -> &Lab {
        self.lab.as_ref().unwrap()
    }

    /// Start `lab serve` on this world (none of the caller's codex, OpenAI or proxy
    /// variables leak in: the runs get them from lab.toml only).
    fn start_lab(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.lab_log).unwrap();
        self.lab = Some(Lab::start_with(&self.w, |cmd| {
            for (k, _) in std::env::vars_os() {
                let k = k.to_string_lossy().into_owned();
                if k.starts_with("OPENAI_") || k.starts_with("CODEX") || k.contains("PROXY") || k.contains("proxy") {
                    cmd.env_remove(&k);
                }
                if k == "TMUX" || k == "TMUX_PANE" {
                    cmd.env_remove(&k);
                }
            }
            cmd.stderr(log);
        }));
    }

    /// Stop `lab serve` (its runs keep going in tmux) and start it again.
    fn restart_lab(&mut self) {
        if let Some(lab) = self.lab.take() {
            lab.stop();
        }
        self.start_lab();
    }

    fn create(&self, prompt: &str) -> Run {
        self.create_with(prompt, None)
    }

    fn create_with(&self, prompt: &str, permission_mode: Option<&str>) -> Run {
        let run = self.lab().create_run_in(&self.w.workdir, "codex", prompt, permission_mode);
        let id = run["id"].as_str().unwrap().to_string();
        let events = EventLog::open(self.lab(), &id);
        Run { id, target: run["tmux_target"].as_str().unwrap().to_string(), events }
    }

    fn wait_view(&self, run: &Run, timeout: Duration, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        wait_for(timeout, &format!("[{}] {what}", self.name), || Some(self.lab().view(&run.id)).filter(|v| pred(v)))
    }

    fn screen(&self, run: &Run) -> String {
        String::from_utf8_lossy(&self.w.tmux(&["capture-pane", "-p", "-t", &run.target]).stdout).into_owned()
    }

    fn spool(&self, run: &Run) -> PathBuf {
        self.w.runtime().join(format!("{}.spool.json", run.id))
    }

    /// The permission dialog for `command`, as it reaches SSE.
    fn wait_permission(&self, run: &mut Run, command: &str, reason: &str) -> Value {
        let (_, v) = run
            .events
            .wait(LAUNCH_TIMEOUT, "the permission dialog on SSE", |v| v["pending_dialog"]["kind"] == "permission");
        assert_eq!(v["state"], "question", "{v}");
        let d = v["pending_dialog"].clone();
        assert_eq!(
            (&d["source"], &d["answerable"], &d["tool_name"]),
            (&json!("spool"), &json!(true), &json!("Bash")),
            "{d}"
        );
        assert_eq!(d["permission"]["summary"], command, "{d}");
        assert_eq!(d["permission"]["reason"], reason, "{d}");
        let labels: Vec<&str> = d["options"].as_array().unwrap().iter().map(|o| o["label"].as_str().unwrap()).collect();
        assert_eq!(labels.len(), 3, "{d}");
        assert_eq!(labels[0], "Yes, proceed (y)");
        assert_eq!(labels[2], "No, and tell Codex what to do differently (esc)");
        assert_eq!(d["feedback_option"], 2, "No, then what to do instead: {d}");
        let call = self.standin.wait_for_call(0, STEP_TIMEOUT).expect("the stand-in sent the call");
        // The prompt is tied to the rollout's function_call (once it is there).
        let v = self.wait_view(run, STEP_TIMEOUT, "the dialog to name its call", |v| {
            v["pending_dialog"]["call_id"] == call.call_id.as_str()
        });
        let msgs = v["messages"].as_array().unwrap();
        let tu = msgs.iter().find(|m| m["kind"] == "tool_use").expect("the call is in the chat");
        assert_eq!(tu["tool_use_id"], call.call_id.as_str());
        assert_eq!(tu["text"], format!("exec_command: {command}"), "{tu}");
        d
    }

    fn answer(&self, run: &Run, d: &Value, option: u32) -> Value {
        self.answer_with(run, d, json!({"option": option}))
    }

    fn answer_with(&self, run: &Run, d: &Value, answer: Value) -> Value {
        let (status, body) = self
            .lab()
            .post(&format!("/runs/{}/dialog/answer", run.id), &json!({"tool_id": d["tool_id"], "answers": [answer]}));
        assert_eq!(status, 202, "{body}");
        body
    }

    fn codex_home(&self) -> PathBuf {
        self.w.dir.path().join("c")
    }

    /// Every request went to `POST /v1/responses` with the key; the trap saw nothing
    /// but the announcement tip.
    fn assert_network(&self) {
        for r in self.standin.requests() {
            assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/v1/responses"), "request {}", r.index);
            assert_eq!(r.header("authorization"), Some(format!("Bearer {API_KEY}").as_str()));
        }
        let seen = self.trap.seen();
        let beyond: Vec<&String> = seen.iter().filter(|l| !l.starts_with(ANNOUNCEMENT_TIP)).collect();
        assert!(beyond.is_empty(), "codex tried to reach beyond loopback: {beyond:?}");
    }
}

impl Drop for E2e {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("\n===== [{}] failed; diagnostics =====", self.name);
            let out = self.w.tmux(&["list-panes", "-a", "-F", "#{session_name}"]);
            for s in String::from_utf8_lossy(&out.stdout).lines() {
                let screen = self.w.tmux(&["capture-pane", "-p", "-t", s]);
                eprintln!("--- screen of {s}:\n{}", String::from_utf8_lossy(&screen.stdout).trim_end());
            }
            for r in self.standin.requests() {
                eprintln!("  #{} {} {} {:?} reply={:?}", r.index, r.method, r.path, r.kind, r.reply);
            }
            let log = std::fs::read_to_string(&self.lab_log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!("--- lab serve log (last {} lines):", tail.len());
            for l in tail.into_iter().rev() {
                eprintln!("  {l}");
            }
        }
        self.lab.take();
        let _ = self.w.tmux(&["kill-server"]);
    }
}

fn texts(v: &Value, role: &str) -> Vec<String> {
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == role && m["kind"] == "text")
        .map(|m| m["text"].as_str().unwrap_or("").to_string())
        .collect()
}

/// (1) A plain reply: the prompt and the answer show in the chat, the session id comes
/// from SessionStart, the run goes idle.
#[test]
fn a_plain_reply_shows_in_the_chat_and_the_run_goes_idle() {
    let script = Script::new().turn(Matcher::Contains("hello".into()), Reply::text("Hello from the stand-in."));
    let Some(e) = setup("plain_reply", script) else { return };
    let run = e.create("hello there");
    let v = e.wait_view(&run, LAUNCH_TIMEOUT, "idle with the reply", |v| {
        v["state"] == "idle" && texts(v, "assistant").iter().any(|t| t == "Hello from the stand-in.")
    });
    assert_eq!(texts(&v, "user"), ["hello there"], "only the operator's words, not codex's context: {v}");
    assert!(v["pending_dialog"].is_null());
    let (_, r) = e.lab().get(&format!("/runs/{}", run.id));
    assert_eq!(r["dialog_hooker"], true, "{r}");
    // The session id and rollout lab follows are codex's own, named by SessionStart: the
    // one rollout under the run's CODEX_HOME (given through lab.toml env).
    let sid = r["session_id"].as_str().expect("the session id from SessionStart");
    let rollouts: Vec<PathBuf> = walk(&e.codex_home().join("sessions"));
    assert_eq!(rollouts.len(), 1, "{rollouts:?}");
    let name = rollouts[0].file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with("rollout-") && name.ends_with(&format!("-{sid}.jsonl")), "{name} vs {sid}");
    // The rollout can be ahead of the TUI's drawing by a moment.
    wait_for(STEP_TIMEOUT, "the reply on codex's screen", || {
        e.screen(&run).contains("Hello from the stand-in.").then_some(())
    });
    e.assert_network();
}

/// (2) An escalated exec_command: a permission dialog with the command and the reason;
/// "Yes" from lab runs it, the stand-in gets its output, the dialog goes, idle.
#[test]
fn an_approval_prompt_is_a_dialog_and_yes_from_lab_runs_the_command() {
    let (command, reason) = ("touch approved.txt", "Stand-in wants to create approved.txt");
    let script = Script::new()
        .turn(Matcher::Contains("TOUCHME".into()), Reply::exec_command_escalated(command, reason))
        .after_output("Tool finished.");
    let Some(e) = setup("approve", script) else { return };
    let mut run = e.create("please TOUCHME");
    let d = e.wait_permission(&mut run, command, reason);
    assert!(!e.w.workdir.join("approved.txt").exists(), "ran before approval");
    assert!(e.spool(&run).exists());

    let body = e.answer(&run, &d, 0);
    assert_eq!(body["keys"], json!(["y"]), "{body}");
    let call = e.standin.emitted_calls()[0].call_id.clone();
    let output = e.standin.wait_for_output(&call, STEP_TIMEOUT).expect("function_call_output after Yes");
    assert!(output.contains("Process exited with code 0"), "{output}");
    assert!(e.w.workdir.join("approved.txt").exists());
    run.events.wait(STEP_TIMEOUT, "the dialog to leave the SSE view", |v| v["pending_dialog"].is_null());
    wait_for(STEP_TIMEOUT, "the spool to be cleared (PostToolUse, or lab's GC once the call has its result)", || {
        (!e.spool(&run).exists()).then_some(())
    });
    let v = e.wait_view(&run, STEP_TIMEOUT, "idle after the command", |v| v["state"] == "idle");
    let msgs = v["messages"].as_array().unwrap();
    let tr = msgs.iter().find(|m| m["kind"] == "tool_result" && m["tool_use_id"] == call.as_str()).expect("result");
    assert!(tr["text"].as_str().unwrap().contains("Process exited with code 0"), "{tr}");
    assert!(texts(&v, "assistant").iter().any(|t| t == "Tool finished."), "{v}");
    e.assert_network();
}

/// (3) "No" (Esc) from lab: the command does not run, nothing more is sent, the dialog
/// ends with the call's "aborted" result, the run goes idle.
#[test]
fn no_from_lab_cancels_the_command_and_the_run_goes_idle() {
    let (command, reason) = ("touch denied.txt", "Stand-in asks");
    let script = Script::new()
        .turn(Matcher::Contains("TOUCHME".into()), Reply::exec_command_escalated(command, reason))
        .after_output("This must not be needed.");
    let Some(e) = setup("deny", script) else { return };
    let mut run = e.create("please TOUCHME, then be denied");
    let d = e.wait_permission(&mut run, command, reason);
    let body = e.answer(&run, &d, 2);
    assert_eq!(body["keys"], json!(["Escape"]), "{body}");
    run.events.wait(STEP_TIMEOUT, "the dialog to leave the SSE view", |v| v["pending_dialog"].is_null());
    let v = e.wait_view(&run, STEP_TIMEOUT, "idle after the cancel", |v| v["state"] == "idle");
    let call = e.standin.emitted_calls()[0].call_id.clone();
    let msgs = v["messages"].as_array().unwrap();
    let tr = msgs.iter().find(|m| m["kind"] == "tool_result" && m["tool_use_id"] == call.as_str()).expect("result");
    assert!(tr["text"].as_str().unwrap().contains("aborted by user"), "{tr}");
    assert_eq!(tr["is_error"], true, "{tr}");
    assert!(msgs.iter().any(|m| m["kind"] == "interrupted"), "{v}");
    std::thread::sleep(Duration::from_secs(2));
    assert!(!e.w.workdir.join("denied.txt").exists(), "the denied command ran");
    assert!(e.standin.outputs_for(&call).is_empty(), "a request followed the denial");
    assert_eq!(e.standin.remaining_turns(), vec![1]);
    assert!(!e.screen(&run).contains(APPROVAL_PROMPT));
    wait_for(STEP_TIMEOUT, "the spool to be cleared (its call has a result)", || {
        (!e.spool(&run).exists()).then_some(())
    });
    e.assert_network();
}

/// (4) "No" with feedback from lab: the command does not run, the text reaches the model
/// as the next message, the run goes idle with the model's answer.
#[test]
fn no_with_feedback_from_lab_cancels_and_sends_what_to_do_instead() {
    let (command, reason) = ("touch refused.txt", "Stand-in asks");
    let script = Script::new()
        .turn(Matcher::Contains("TOUCHME".into()), Reply::exec_command_escalated(command, reason))
        .turn(Matcher::Contains("use mkdir instead".into()), Reply::text("OK, mkdir it is."));
    let Some(e) = setup("deny_feedback", script) else { return };
    let mut run = e.create("please TOUCHME");
    let d = e.wait_permission(&mut run, command, reason);
    let body = e.answer_with(&run, &d, json!({"feedback": {"option": 2, "text": "use mkdir instead"}}));
    assert_eq!(body["keys"], json!(["Escape", "text:use mkdir instead", "Enter"]), "{body}");
    let v = e.wait_view(&run, STEP_TIMEOUT, "idle with the answer to the feedback", |v| {
        v["state"] == "idle" && texts(v, "assistant").iter().any(|t| t == "OK, mkdir it is.")
    });
    assert_eq!(texts(&v, "user"), ["please TOUCHME", "use mkdir instead"], "{v}");
    assert!(v["pending_dialog"].is_null());
    let call = e.standin.emitted_calls()[0].call_id.clone();
    // The refused call's output travels with the next message: codex's "aborted by user".
    let outputs = e.standin.outputs_for(&call);
    assert!(!outputs.is_empty() && outputs.iter().all(|o| o.contains("aborted by user")), "{outputs:?}");
    assert!(!e.w.workdir.join("refused.txt").exists(), "the refused command ran");
    assert!(e.standin.remaining_turns().is_empty());
    e.assert_network();
}

/// Answer rules (issue 78): codex's approval prompt a rule matches is answered by lab
/// itself — an allow runs the command (the answer names the rule, the audit log has
/// it), a deny refuses it and its message reaches the model as the next message.
#[test]
fn answer_rules_allow_and_deny_codex_s_approval_prompts() {
    let (command, reason) = ("touch ruled.txt", "Stand-in wants to create ruled.txt");
    let script = Script::new()
        .turn(Matcher::Contains("TOUCHME".into()), Reply::exec_command_escalated(command, reason))
        .after_output("Tool finished.")
        .turn(Matcher::Contains("DELETEME".into()), Reply::exec_command_escalated("rm -f ruled.txt", reason))
        .turn(Matcher::Contains("Never delete files here".into()), Reply::text("Understood, nothing deleted."));
    let Some(e) = setup("rules", script) else { return };
    let workdir = e.w.workdir.display().to_string();
    let (s, allow) = e.lab().post(
        "/rules",
        &json!({"name": "touch here", "action": "allow",
                "match": {"provider": "codex", "tool": "Bash", "pattern": "touch", "workdir": workdir}}),
    );
    assert_eq!(s, 201, "{allow}");
    let (s, deny) = e.lab().post(
        "/rules",
        &json!({"name": "no deleting", "action": "deny", "message": "Never delete files here.", "match": {"pattern": "rm"}}),
    );
    assert_eq!(s, 201, "{deny}");
    let run = e.create("please TOUCHME");
    let v = e.wait_view(&run, STEP_TIMEOUT, "idle after the allowed command", |v| {
        v["state"] == "idle" && texts(v, "assistant").iter().any(|t| t == "Tool finished.")
    });
    assert!(e.w.workdir.join("ruled.txt").exists(), "the rule let the command run");
    assert_eq!(v["answer"]["answered_by"], json!({"rule": allow["id"], "name": "touch here"}), "{}", v["answer"]);
    let (_, audit) = e.lab().get(&format!("/audit?run={}", run.id));
    let ruled: Vec<&Value> =
        audit["entries"].as_array().unwrap().iter().filter(|x| x["action"] == "rule.answer").collect();
    assert_eq!((ruled.len(), &ruled[0]["outcome"]), (1, &json!("applied")), "{audit}");

    let (s, _) = e.lab().post(&format!("/runs/{}/messages", run.id), &json!({"text": "now DELETEME"}));
    assert_eq!(s, 202);
    let v = e.wait_view(&run, STEP_TIMEOUT, "idle after the denied command", |v| {
        v["state"] == "idle" && texts(v, "assistant").iter().any(|t| t == "Understood, nothing deleted.")
    });
    assert!(e.w.workdir.join("ruled.txt").exists(), "the denied command ran");
    assert_eq!(v["answer"]["answered_by"]["name"], "no deleting", "{}", v["answer"]);
    assert!(
        texts(&v, "user").iter().any(|t| t == "Never delete files here."),
        "the rule's message went as the next message: {v}"
    );
    e.assert_network();
}

/// (5) "Yes, and don't ask again" from lab: `p` runs the command and codex saves a rule.
#[test]
fn yes_and_dont_ask_again_from_lab_saves_codex_rule() {
    let (command, reason) = ("touch remembered.txt", "Stand-in asks");
    let script = Script::new()
        .turn(Matcher::Contains("TOUCHME".into()), Reply::exec_command_escalated(command, reason))
        .after_output("Done.");
    let Some(e) = setup("dont_ask_again", script) else { return };
    let mut run = e.create("please TOUCHME");
    let d = e.wait_permission(&mut run, command, reason);
    assert_eq!(
        d["options"][1]["label"],
        format!("Yes, and don't ask again for commands that start with `{command}` (p)")
    );
    let body = e.answer(&run, &d, 1);
    assert_eq!(body["keys"], json!(["p"]), "{body}");
    let call = e.standin.emitted_calls()[0].call_id.clone();
    e.standin.wait_for_output(&call, STEP_TIMEOUT).expect("function_call_output after p");
    assert!(e.w.workdir.join("remembered.txt").exists());
    e.wait_view(&run, STEP_TIMEOUT, "idle after the command", |v| {
        v["state"] == "idle" && v["pending_dialog"].is_null()
    });
    let rules = std::fs::read_to_string(e.codex_home().join("rules/default.rules")).expect("codex saved a rule");
    assert!(rules.contains("remembered.txt"), "{rules}");
    e.assert_network();
}

/// (6) A git repository codex has not been told to trust: its folder-trust screen is a
/// dialog read off the screen; "Trust and continue" from lab saves the trust and the
/// first prompt is answered.
#[test]
fn an_untrusted_git_folder_shows_the_trust_screen_and_trust_from_lab_goes_on() {
    let script = Script::new().turn(Matcher::Contains("hello".into()), Reply::text("Hello after trust."));
    let Some(e) = setup_with("trust_folder", script, false) else { return };
    let git = std::process::Command::new("git").args(["init", "-q"]).current_dir(&e.w.workdir).status().unwrap();
    assert!(git.success());
    let mut run = e.create("hello there");
    let (_, v) =
        run.events.wait(LAUNCH_TIMEOUT, "the trust screen on SSE", |v| v["pending_dialog"]["kind"] == "generic");
    let d = v["pending_dialog"].clone();
    assert_eq!(
        (&d["source"], &d["tool_name"], &d["answerable"]),
        (&json!("screen"), &json!("trust_folder"), &json!(true))
    );
    assert_eq!(d["generic"]["title"], format!("Trust {}?", e.w.workdir.display()), "{d}");
    assert_eq!(d["options"][0]["label"], "Trust and continue");
    assert!(e.standin.requests().is_empty(), "nothing was sent before the trust");
    let body = e.answer(&run, &d, 0);
    assert_eq!(body["keys"], json!(["Enter"]), "{body}");
    e.wait_view(&run, LAUNCH_TIMEOUT, "idle with the reply", |v| {
        v["state"] == "idle" && texts(v, "assistant").iter().any(|t| t == "Hello after trust.")
    });
    let config = std::fs::read_to_string(e.codex_home().join("config.toml")).unwrap();
    assert!(config.contains(&format!("[projects.\"{}\"]", e.w.workdir.display())), "{config}");
    e.assert_network();
}

/// (10) A trusted repository whose own `.codex/config.toml` adds a hook (as a freshly
/// cloned one can): codex runs none of it on lab's say-so. Its "Hooks need review"
/// screen is a card that waits for the operator, nothing reaches the model before it,
/// and "Continue without trusting" from lab goes on with the repository's hook never
/// run, while lab's own hooks (trusted for this run on the command line) still work.
/// Before, lab passed `--dangerously-bypass-hook-trust` and the hook ran unasked.
#[test]
fn a_repositorys_own_hook_waits_for_the_operator_and_never_runs_unasked() {
    let script = Script::new().turn(Matcher::Contains("hello".into()), Reply::text("Hello without their hooks."));
    let Some(e) = setup("repo_hooks", script) else { return };
    let git = std::process::Command::new("git").args(["init", "-q"]).current_dir(&e.w.workdir).status().unwrap();
    assert!(git.success());
    let planted = e.w.dir.path().join("planted-by-the-repository");
    std::fs::create_dir_all(e.w.workdir.join(".codex")).unwrap();
    let hook = format!("touch {}", planted.display());
    let config = format!(
        "[hooks]\nUserPromptSubmit = [{{ hooks = [{{ type = \"command\", command = {} }}] }}]\nSessionStart = [{{ hooks = [{{ type = \"command\", command = {} }}] }}]\n",
        toml_str(&hook),
        toml_str(&hook)
    );
    std::fs::write(e.w.workdir.join(".codex/config.toml"), config).unwrap();
    let mut run = e.create("hello there");
    let (_, v) =
        run.events.wait(LAUNCH_TIMEOUT, "the hooks-review card on SSE", |v| v["pending_dialog"]["kind"] == "generic");
    let d = v["pending_dialog"].clone();
    assert_eq!(
        (&d["source"], &d["tool_name"], &d["answerable"]),
        (&json!("screen"), &json!("hooks_review"), &json!(true)),
        "{d}"
    );
    assert_eq!(d["generic"]["title"], "Hooks need review", "{d}");
    let text = d["generic"]["text"].as_str().unwrap();
    assert!(text.starts_with("2 hooks are new or changed."), "only the repository's two, not lab's: {text}");
    let labels: Vec<&str> = d["options"].as_array().unwrap().iter().map(|o| o["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["Review hooks", "Trust all and continue", "Continue without trusting (hooks won't run)"]);
    std::thread::sleep(Duration::from_secs(2));
    assert!(e.standin.requests().is_empty(), "the run waits for the operator: nothing was sent");
    assert!(!planted.exists(), "the repository's hook ran before the operator answered");
    let body = e.answer(&run, &d, 2);
    assert_eq!(body["keys"], json!(["3"]), "{body}");
    let v = e.wait_view(&run, LAUNCH_TIMEOUT, "idle with the reply", |v| {
        v["state"] == "idle" && texts(v, "assistant").iter().any(|t| t == "Hello without their hooks.")
    });
    assert!(v["pending_dialog"].is_null(), "{v}");
    assert!(!planted.exists(), "the repository's hook ran");
    // lab's SessionStart hook ran (trusted on the command line): the rollout was found.
    assert!(texts(&v, "user").iter().any(|t| t.contains("hello there")), "{v}");
    let config = std::fs::read_to_string(e.codex_home().join("config.toml")).unwrap();
    assert!(!config.contains("hooks.state"), "nothing trusted in the user's config: {config}");
    e.assert_network();
}

/// (7) A message sent from lab once the run is idle (a bracketed paste, then Enter) is
/// submitted: it reaches the model and its answer shows in the chat.
#[test]
fn a_message_from_lab_after_idle_reaches_the_model() {
    let script = Script::new().turn(Matcher::Contains("hello".into()), Reply::text("First answer.")).turn(
        Matcher::All(vec![Matcher::NewUserTurn, Matcher::Contains("second question".into())]),
        Reply::text("Second answer."),
    );
    let Some(e) = setup("message", script) else { return };
    let run = e.create("hello there");
    e.wait_view(&run, LAUNCH_TIMEOUT, "idle with the first answer", |v| {
        v["state"] == "idle" && texts(v, "assistant").iter().any(|t| t == "First answer.")
    });
    let (status, body) = e.lab().post(&format!("/runs/{}/messages", run.id), &json!({"text": "a second question"}));
    assert!((200..300).contains(&status), "{status} {body}");
    let v = e.wait_view(&run, STEP_TIMEOUT, "idle with the second answer", |v| {
        v["state"] == "idle" && texts(v, "assistant").iter().any(|t| t == "Second answer.")
    });
    assert_eq!(texts(&v, "user"), ["hello there", "a second question"], "{v}");
    assert!(e.standin.remaining_turns().is_empty());
    e.assert_network();
}

/// (8) Permission mode `never` reaches codex as `-a never` (the config says
/// `on-request`): an escalated command is refused without a prompt, and the model is
/// told why.
#[test]
fn never_mode_refuses_an_escalated_command_without_asking() {
    let script = Script::new()
        .turn(Matcher::Contains("TOUCHME".into()), Reply::exec_command_escalated("touch unasked.txt", "Stand-in asks"))
        .after_output("Refused without asking.");
    let Some(e) = setup("never_mode", script) else { return };
    let run = e.create_with("please TOUCHME", Some("never"));
    let (_, r) = e.lab().get(&format!("/runs/{}", run.id));
    assert_eq!(r["permission_mode"], "never", "{r}");
    let v = e.wait_view(&run, LAUNCH_TIMEOUT, "idle after the refusal", |v| {
        v["state"] == "idle" && texts(v, "assistant").iter().any(|t| t == "Refused without asking.")
    });
    let call = e.standin.emitted_calls()[0].call_id.clone();
    let outputs = e.standin.outputs_for(&call);
    assert!(outputs.len() == 1 && outputs[0].contains("approval policy is Never"), "{outputs:?}");
    assert!(!e.w.workdir.join("unasked.txt").exists());
    assert!(!e.spool(&run).exists(), "no prompt was spooled");
    assert!(v["pending_dialog"].is_null());
    e.assert_network();
}

/// (9) A first prompt too long for codex's argv (200 KiB): lab starts codex without it and
/// types it in once codex is ready; it reaches the model whole.
#[test]
fn a_prompt_too_large_for_argv_is_typed_in_and_reaches_the_model_whole() {
    let prompt = distinct_lines("prompt", 200 * 1024);
    let script =
        Script::new().turn(Matcher::Contains("prompt line 000000".into()), Reply::text("Read your long prompt."));
    let Some(e) = setup("long_prompt", script) else { return };
    let run = e.create(&prompt);
    let whole = e.standin.wait_until(Duration::from_secs(90), |reqs| {
        reqs.iter().any(|r| r.is_turn() && responses_standin::last_user_text(&r.body) == prompt)
    });
    assert!(whole, "the 200 KiB prompt never reached the model whole");
    e.wait_view(&run, STEP_TIMEOUT, "idle with the reply", |v| {
        v["state"] == "idle" && texts(v, "assistant").iter().any(|t| t == "Read your long prompt.")
    });
    e.assert_network();
}

/// (5b) The rule "don't ask again" saved is used: the same command, asked for again in
/// the run, runs with no dialog.
#[test]
fn a_remembered_command_runs_next_time_without_a_dialog() {
    let (command, reason) = ("touch again.txt", "Stand-in asks");
    let script = Script::new()
        .turn(Matcher::Contains("TOUCHME".into()), Reply::exec_command_escalated(command, reason))
        .after_output("Done.")
        .turn(
            Matcher::All(vec![Matcher::NewUserTurn, Matcher::Contains("AGAIN".into())]),
            Reply::exec_command_escalated(command, reason),
        )
        .after_output("Done again.");
    let Some(e) = setup("remembered", script) else { return };
    let mut run = e.create("please TOUCHME");
    let d = e.wait_permission(&mut run, command, reason);
    e.answer(&run, &d, 1);
    e.wait_view(&run, STEP_TIMEOUT, "idle after the first command", |v| {
        v["state"] == "idle" && texts(v, "assistant").iter().any(|t| t == "Done.")
    });
    std::fs::remove_file(e.w.workdir.join("again.txt")).unwrap();
    let (status, body) = e.lab().post(&format!("/runs/{}/messages", run.id), &json!({"text": "please AGAIN"}));
    assert!((200..300).contains(&status), "{status} {body}");
    // Until the second command's output reaches the model, no dialog ever shows.
    let second = wait_for(STEP_TIMEOUT, "the second call", || e.standin.emitted_calls().get(1).cloned());
    let start = std::time::Instant::now();
    while e.standin.outputs_for(&second.call_id).is_empty() {
        let v = e.lab().view(&run.id);
        assert!(v["pending_dialog"].is_null(), "a dialog for a remembered command: {v}");
        assert!(start.elapsed() < STEP_TIMEOUT, "the remembered command never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(e.w.workdir.join("again.txt").exists());
    e.wait_view(&run, STEP_TIMEOUT, "idle after the second command", |v| {
        v["state"] == "idle" && texts(v, "assistant").iter().any(|t| t == "Done again.")
    });
    e.assert_network();
}

/// (10) `lab serve` restarts while an approval is pending: the dialog is still shown,
/// and answering it works.
#[test]
fn a_lab_restart_while_an_approval_is_pending_keeps_it_answerable() {
    let (command, reason) = ("touch after-restart.txt", "Stand-in asks");
    let script = Script::new()
        .turn(Matcher::Contains("TOUCHME".into()), Reply::exec_command_escalated(command, reason))
        .after_output("Done.");
    let Some(mut e) = setup("restart", script) else { return };
    let mut run = e.create("please TOUCHME");
    let d = e.wait_permission(&mut run, command, reason);
    e.restart_lab();
    let v = e.wait_view(&run, STEP_TIMEOUT, "the dialog after the restart", |v| v["state"] == "question");
    assert_eq!(v["pending_dialog"]["tool_id"], d["tool_id"], "{v}");
    assert_eq!(v["pending_dialog"]["answerable"], true);
    e.answer(&run, &d, 0);
    let call = e.standin.emitted_calls()[0].call_id.clone();
    e.standin.wait_for_output(&call, STEP_TIMEOUT).expect("function_call_output after the restart");
    assert!(e.w.workdir.join("after-restart.txt").exists());
    e.wait_view(&run, STEP_TIMEOUT, "idle", |v| v["state"] == "idle" && v["pending_dialog"].is_null());
    e.assert_network();
}

/// (11) The operator answers in the terminal instead: the dialog disappears in lab.
#[test]
fn keys_in_the_terminal_instead_make_the_dialog_go() {
    let (command, reason) = ("touch by-hand.txt", "Stand-in asks");
    let script = Script::new()
        .turn(Matcher::Contains("TOUCHME".into()), Reply::exec_command_escalated(command, reason))
        .after_output("Done.");
    let Some(e) = setup("terminal", script) else { return };
    let mut run = e.create("please TOUCHME");
    e.wait_permission(&mut run, command, reason);
    // The operator answers what they see: the prompt drawn whole on the pane (the hook
    // reaches lab before codex draws it; on a busy machine by far), then, as lab's own
    // answer does, the settle: codex drops a key sent the instant its prompt is drawn.
    wait_for(STEP_TIMEOUT, "the approval prompt drawn on the pane", || {
        let screen = e.screen(&run);
        (screen.contains(APPROVAL_PROMPT)
            && screen.contains("Press enter to confirm or esc to cancel")
            && screen.contains(&format!("$ {command}")))
        .then_some(())
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(e.w.tmux(&["send-keys", "-t", &run.target, "y"]).status.success());
    run.events.wait(STEP_TIMEOUT, "the dialog to leave the SSE view", |v| v["pending_dialog"].is_null());
    let call = e.standin.emitted_calls()[0].call_id.clone();
    e.standin.wait_for_output(&call, STEP_TIMEOUT).expect("function_call_output after y in the terminal");
    wait_for(STEP_TIMEOUT, "the spool to be cleared", || (!e.spool(&run).exists()).then_some(()));
    e.wait_view(&run, STEP_TIMEOUT, "idle", |v| v["state"] == "idle");
    e.assert_network();
}

/// (12) The same component installed in `<home>/providers/` (not bundled) works the
/// same: swapping a provider needs no rebuild.
#[test]
fn the_component_installed_from_the_providers_folder_works_the_same() {
    let (command, reason) = ("touch from-file.txt", "Stand-in asks");
    let script = Script::new()
        .turn(Matcher::Contains("TOUCHME".into()), Reply::exec_command_escalated(command, reason))
        .after_output("Done.");
    let Some(mut e) = setup("from_file", script) else { return };
    let dir = e.w.home.join("providers");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(lab::agents::components::fixtures::CODEX, dir.join("codex.wasm")).unwrap();
    e.restart_lab();
    let log = std::fs::read_to_string(&e.lab_log).unwrap();
    assert!(log.contains("component replaces the bundled provider"), "{log}");
    let mut run = e.create("please TOUCHME");
    let d = e.wait_permission(&mut run, command, reason);
    e.answer(&run, &d, 0);
    let call = e.standin.emitted_calls()[0].call_id.clone();
    e.standin.wait_for_output(&call, STEP_TIMEOUT).expect("function_call_output");
    e.wait_view(&run, STEP_TIMEOUT, "idle", |v| v["state"] == "idle" && v["pending_dialog"].is_null());
    e.assert_network();
}

/// Whether the stand-in got a turn whose input holds every one of `needles`.
fn standin_saw(e: &E2e, needles: &[&str]) -> bool {
    e.standin.requests().iter().any(|r| {
        let input = r.body["input"].to_string();
        needles.iter().all(|n| input.contains(n))
    })
}

/// Resume and fork (issue 56) with the real Codex: a run told a word is stopped, lab
/// serve restarted, and the run resumed with a question (`codex resume <id>`): the model
/// gets the earlier turn with it, and the chat goes on after the old messages, none
/// twice. Forked (`codex fork <id>`), the new run's first request carries the earlier
/// turns too, and the parent is left as it was.
#[test]
fn a_stopped_run_is_resumed_after_a_restart_and_forked() {
    let script = Script::new()
        .turn(Matcher::Contains("PAPAYA".into()), Reply::text("Noted the word."))
        .turn(Matcher::Contains("Which word".into()), Reply::text("It was PAPAYA."))
        .turn(Matcher::Contains("Fork:".into()), Reply::text("Forked, and it was PAPAYA."));
    let Some(mut e) = setup("resume_fork", script) else { return };
    let run = e.create("Remember the word PAPAYA.");
    e.wait_view(&run, LAUNCH_TIMEOUT, "idle with the first answer", |v| {
        v["state"] == "idle" && texts(v, "assistant").iter().any(|t| t == "Noted the word.")
    });
    let (status, stopped) = e.lab().post(&format!("/runs/{}/stop", run.id), &json!({}));
    assert_eq!((status, stopped["state"].as_str()), (200, Some("ended")), "{stopped}");
    e.restart_lab();
    let (_, listed) = e.lab().get(&format!("/runs/{}", run.id));
    assert_eq!((listed["resumable"].as_bool(), listed["forkable"].as_bool()), (Some(true), Some(true)), "{listed}");

    let (status, resumed) =
        e.lab().post(&format!("/runs/{}/resume", run.id), &json!({"prompt": "Which word did I ask for?"}));
    assert_eq!(status, 200, "{resumed}");
    wait_for(LAUNCH_TIMEOUT, "[resume_fork] the resumed turn with the earlier one", || {
        standin_saw(&e, &["Remember the word PAPAYA.", "Which word did I ask for?"]).then_some(())
    });
    let v = wait_for(STEP_TIMEOUT, "[resume_fork] the resumed run's answer", || {
        Some(e.lab().view(&run.id)).filter(|v| texts(v, "assistant").iter().any(|t| t == "It was PAPAYA."))
    });
    assert_eq!(texts(&v, "user"), ["Remember the word PAPAYA.", "Which word did I ask for?"], "{v}");
    assert_eq!(texts(&v, "assistant"), ["Noted the word.", "It was PAPAYA."], "none twice: {v}");

    let (status, fork) = e.lab().post(&format!("/runs/{}/fork", run.id), &json!({"prompt": "Fork: say it again."}));
    assert_eq!(status, 201, "{fork}");
    assert_eq!(fork["parent"], run.id.as_str());
    let fork_id = fork["id"].as_str().unwrap().to_string();
    wait_for(LAUNCH_TIMEOUT, "[resume_fork] the fork's turn with the parent's", || {
        standin_saw(&e, &["Remember the word PAPAYA.", "Fork: say it again."]).then_some(())
    });
    wait_for(STEP_TIMEOUT, "[resume_fork] the fork's answer", || {
        Some(e.lab().view(&fork_id)).filter(|v| texts(v, "assistant").iter().any(|t| t == "Forked, and it was PAPAYA."))
    });
    assert_eq!(texts(&e.lab().view(&run.id), "user").len(), 2, "the parent is untouched");
    for id in [run.id.as_str(), fork_id.as_str()] {
        let (status, body) = e.lab().post(&format!("/runs/{id}/stop"), &json!({}));
        assert_eq!(status, 200, "{body}");
    }
    e.assert_network();
}

/// Usage: a codex run with a command; lab's totals are the sum over the responses the
/// stand-in sent for its turns (codex's `token_usage_record`s, never its `token_count`
/// repeats: input without the cached tokens, which are cache reads), and the context
/// window is codex's own.
#[test]
fn a_runs_usage_is_the_sum_over_the_responses_the_api_sent() {
    let script = Script::new()
        .turn(Matcher::Contains("COUNTME".into()), Reply::exec_command("echo counted"))
        .after_output("All counted.");
    let Some(e) = setup("usage", script) else { return };
    let run = e.create("please COUNTME");
    e.wait_view(&run, LAUNCH_TIMEOUT, "idle after the command", |v| {
        v["state"] == "idle" && texts(v, "assistant").iter().any(|t| t == "All counted.")
    });
    let mut sent = [0u64; 4];
    let mut responses = 0;
    for r in e.standin.turn_requests() {
        let Some(u) = r.reply.and_then(|r| r.usage) else { continue };
        let cached = u["input_tokens_details"]["cached_tokens"].as_u64().unwrap();
        sent[0] += u["input_tokens"].as_u64().unwrap() - cached;
        sent[1] += u["output_tokens"].as_u64().unwrap();
        sent[2] += cached;
        responses += 1;
    }
    assert!(responses >= 2, "{responses}");
    let u = wait_for(STEP_TIMEOUT, "[usage] lab's totals to reach the stand-in's", || {
        let (_, u) = e.lab().get(&format!("/runs/{}/usage", run.id));
        let got = ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"]
            .map(|k| u[k].as_u64().unwrap_or(u64::MAX));
        (got == sent).then_some(u)
    });
    assert_eq!(u["responses"].as_u64(), Some(responses), "{u}");
    assert!(u["context"]["window"].as_u64().is_some_and(|w| w > 0), "codex names its window: {u}");
    e.assert_network();
}
