//! Other machines (issue 34), across a real network link: each test makes a "machine"
//! (common/machine.rs: a network namespace joined by a veth pair, a Unix user of its
//! own, its own folder, its own tmux server), starts a real `lab runner` there as that
//! user dialling `lab serve` on this side's address of the link, and drives runs on it
//! through lab's HTTP API only. The machine is taken down, and checked gone, at the end.
//!
//! - fake-claude on the machine and here at once: a question on each answered from
//!   lab, a message to each, the same chat (messages, seqs) from both, the agent's
//!   files the machine user's, the run's tmux session on the machine's own server.
//! - the real `claude` on the machine against the Messages stand-in (listening on this
//!   side of the link): its question answered from lab.
//! - the real `codex` on the machine against the Responses stand-in: its rollout, named
//!   only once it started, followed there and mirrored here; lab serve restarted while
//!   its approval waits; the same prompt answered from lab after.

mod common;

use common::machine::Machine;
use common::terminal::TermStream;
use common::{agent_bin, fake_claude, three_options, wait_for, walk, Lab, World, LAB};
use responses_standin as rs;
use serde_json::{json, Value};
use std::os::unix::fs::MetadataExt;
use std::process::Command;
use std::time::Duration;

/// `lab hosts add NAME` on lab serve's home: the runner's credential.
fn add_host(w: &World, name: &str) -> String {
    let out = Command::new(LAB).args(["hosts", "--home"]).arg(&w.home).args(["add", name]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// lab serve listening on this side of the machine's link (so it needs its token,
/// which the harness reads from its home), with `path_first` ahead on its PATH.
fn serve_for(w: &World, m: &Machine, path_first: Option<&std::path::Path>) -> Lab {
    serve_at(w, &format!("{}:0", m.peer), path_first)
}

/// [`serve_for`] at address `addr`.
fn serve_at(w: &World, addr: &str, path_first: Option<&std::path::Path>) -> Lab {
    Lab::start_on(w, addr, |cmd| {
        if let Some(dir) = path_first {
            let path = std::env::var("PATH").unwrap_or_default();
            cmd.env("PATH", format!("{}:{path}", dir.display()));
        }
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy().into_owned();
            if k.starts_with("ANTHROPIC_") || k.starts_with("CLAUDE") || k == "TMUX" || k == "TMUX_PANE" {
                cmd.env_remove(&k);
            }
        }
    })
}

fn wait_connected(lab: &Lab, m: &Machine, name: &str) -> Value {
    wait_for(Duration::from_secs(30), &format!("host {name} connected"), || {
        let (s, list) = lab.get("/hosts");
        assert_eq!(s, 200, "{list}");
        let h = list.as_array().unwrap().iter().find(|h| h["name"] == name).cloned();
        if h.is_none() || h.as_ref().unwrap()["state"] != "connected" {
            // Say why while waiting, if the runner gave up.
            let log = m.runner_log();
            assert!(!log.contains("refused"), "the runner was refused: {log}");
        }
        h.filter(|h| h["state"] == "connected")
    })
}

/// The messages of a view as (seq, role, kind, text): what must be the same for the
/// same agent doing the same thing, wherever it runs.
fn chat(v: &Value) -> Vec<(u64, String, String, String)> {
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let s = |k: &str| m[k].as_str().unwrap_or_default().to_string();
            (m["seq"].as_u64().unwrap(), s("role"), s("kind"), s("text"))
        })
        .collect()
}

/// The view of a real agent's `run` on machine `m` once `pred` holds, within 90 s (a
/// launch takes 1.4–3 s here when idle, much longer on a loaded 2-core machine); else
/// a failure with the view, the agent's pane and the runner's log.
fn wait_agent(lab: &Lab, m: &Machine, run: &Value, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let id = run["id"].as_str().unwrap();
    let start = std::time::Instant::now();
    loop {
        let v = lab.view(id);
        if pred(&v) {
            return v;
        }
        if start.elapsed() > Duration::from_secs(90) {
            let sock = m.lab_home.join("tmux.sock");
            let target = run["tmux_target"].as_str().unwrap();
            let out = m.run("tmux", &["-S", sock.to_str().unwrap(), "capture-pane", "-p", "-t", target]);
            let pane = String::from_utf8_lossy(&out.stdout);
            panic!("no {what} within 90 s: {v}\nthe pane:\n{pane}\nthe runner:\n{}", m.runner_log());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// lab serve for `w` with `fake`'s folder first on its PATH, and machine `m`'s runner
/// connected to it as host `m1`.
fn linked_as_m1(w: &World, m: &mut Machine, fake: &std::path::Path) -> Lab {
    let cred = add_host(w, "m1");
    let lab = serve_for(w, m, Some(fake.parent().unwrap()));
    m.start_runner(&lab.url, "m1", &cred);
    wait_connected(&lab, m, "m1");
    lab
}

fn has_session(m: &Machine, socket: &str, target: &str) -> bool {
    m.run("tmux", &["-S", socket, "has-session", "-t", &format!("={target}")]).status.success()
}

#[test]
fn fake_claude_on_a_machine_and_here_at_once_are_answered_from_lab_alike() {
    let Some(mut m) = Machine::new() else { return };
    let w = World::new();
    let fake = fake_claude();
    m.install("fake-claude", &fake);
    // The same agent and script on both machines, named by relative paths (the
    // agent's cwd is its workdir): each run logs into its own workdir.
    // The plan is written to a file under the agent's HOME and only named in the hook
    // payload (as 2.1.332 does): on the machine, its runner reads it.
    let plan = "# The plan\n\n1. Read it where it was written.";
    let script = json!({"steps": [
        {"ask": three_options()}, {"say": "Chose it."}, {"idle": {}},
        {"say": "Got your message."}, {"plan": {"plan": plan, "file_only": true}}, {"idle": {}}
    ]});
    let bytes = serde_json::to_vec_pretty(&script).unwrap();
    std::fs::write(w.workdir.join("script.json"), &bytes).unwrap();
    m.write(&m.workdir.join("script.json"), &bytes);
    w.write_config(
        "[providers.claude-code]\nprogram = \"fake-claude\"\n\
         env = { FAKE_CLAUDE_SCRIPT = \"script.json\", FAKE_CLAUDE_LOG = \"fake.log\" }\n",
    );
    let cred = add_host(&w, "m1");
    let lab = serve_for(&w, &m, Some(fake.parent().unwrap()));
    assert!(lab.token.is_some(), "lab serve on a non-loopback address needs its token");
    assert!(lab.url.starts_with(&format!("http://{}:", m.peer)), "{}", lab.url);
    m.start_runner(&lab.url, "m1", &cred);
    let h = wait_connected(&lab, &m, "m1");
    assert_eq!(h["version"], env!("CARGO_PKG_VERSION"), "{h}");

    let body = |workdir: &std::path::Path, host: Option<&str>| {
        let mut b = json!({"provider": "claude-code", "workdir": workdir, "prompt": "Pick a database."});
        if let Some(h) = host {
            b["host"] = json!(h);
        }
        b
    };
    let (s, here) = lab.post("/runs", &body(&w.workdir, None));
    assert_eq!(s, 201, "{here}");
    let (s, there) = lab.post("/runs", &body(&m.workdir, Some("m1")));
    assert_eq!(s, 201, "{there}");
    assert!(here["host"].is_null(), "{here}");
    assert_eq!(there["host"], "m1");
    let sock = m.lab_home.join("tmux.sock");
    assert_eq!(there["tmux_socket"], sock.to_str().unwrap(), "the machine's own tmux server");
    let ids: Vec<String> = [&here, &there].iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
    let (_, hosts) = lab.get("/hosts");
    assert_eq!(hosts[0]["runs"], 1, "{hosts}");

    // A question on each, answered from lab's HTTP API.
    for id in &ids {
        // The question from the spool (on a loaded machine the pane may be read first and shown as
        // a screen prompt until the spool arrives).
        let v = lab.wait_view(id, "the question from the spool", |v| v["pending_dialog"]["source"] == "spool");
        let d = &v["pending_dialog"];
        assert_eq!((&d["source"], &d["answerable"]), (&"spool".into(), &true.into()), "{d}");
        let (s, b) = lab
            .post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": d["tool_id"], "answers": [{"option": 1}]}));
        assert_eq!(s, 202, "{b}");
    }
    for log in [w.workdir.join("fake.log"), m.workdir.join("fake.log")] {
        let answer = wait_for(Duration::from_secs(30), "fake-claude to log the answer", || {
            World::log_events(&log).into_iter().find(|e| e["event"] == "answer")
        });
        assert!(answer.to_string().contains("SQLite"), "{answer}");
    }
    // The agent on the machine ran as the machine's user, its hook files are there.
    assert_eq!(m.workdir.join("fake.log").metadata().unwrap().uid(), m.uid, "the agent ran as the machine's user");
    let settings = m.lab_home.join("runtime").join(format!("{}.settings.json", ids[1]));
    assert_eq!(settings.metadata().expect("the run's settings on the machine").uid(), m.uid);
    assert!(!w.home.join("runtime").join(format!("{}.settings.json", ids[1])).exists(), "and not here");

    // A message to each; then a plan dialog on each, with the text of the file its agent
    // wrote (there: read by the runner); the same chat from both.
    for id in &ids {
        lab.wait_view(id, "the turn's end", |v| {
            v["state"] == "idle" && v["messages"].to_string().contains("Chose it.")
        });
        let (s, b) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "hello there"}));
        assert_eq!(s, 202, "{b}");
    }
    let views: Vec<Value> = ids
        .iter()
        .map(|id| {
            lab.wait_view(id, "the reply and the plan", |v| {
                v["pending_dialog"]["kind"] == "plan" && v["messages"].to_string().contains("Got your message.")
            })
        })
        .collect();
    for v in &views {
        assert_eq!(v["pending_dialog"]["plan"], plan, "{}", v["pending_dialog"]);
    }
    let plans = m.user_home.join(".claude").join("plans");
    assert!(std::fs::read_dir(&plans).expect("the plan file on the machine").next().is_some());
    let (a, b) = (chat(&views[0]), chat(&views[1]));
    assert!(a.len() >= 5, "{a:?}");
    assert_eq!(a, b, "the run on the machine has the chat of the run here");
    for (i, m) in a.iter().enumerate() {
        assert_eq!(m.0, i as u64, "dense seqs");
    }

    // The attach command names the machine and its tmux server, where the session is.
    let (_, t) = lab.get(&format!("/runs/{}/terminal", ids[1]));
    let attach = t["attach"].as_str().unwrap();
    assert!(attach.starts_with(&format!("ssh -t m1 'tmux -S {}", sock.display())), "{t}");
    let target = there["tmux_target"].as_str().unwrap();
    assert!(has_session(&m, sock.to_str().unwrap(), target), "the session is on the machine's tmux server");
    assert!(
        !w.home.join("tmux.sock").exists() || !w.tmux(&["has-session", "-t", &format!("={target}")]).status.success()
    );

    // Its live terminal streams from the machine: the screen, and a resize from the
    // one in control comes back as the pane's new size; a closed view leaves no tmux
    // client behind there.
    let mut s = TermStream::open(&lab.url, lab.token.as_deref(), &ids[1], &[]).unwrap();
    s.wait_said(Duration::from_secs(30), "the pane's size", |m| m["type"] == "size");
    s.wait_screen(Duration::from_secs(30), "the agent's screen on the machine", |t| t.contains("Got your message."));
    let (st, b) = lab.post(&format!("/runs/{}/terminal/control", ids[1]), &json!({"take": true}));
    assert_eq!(st, 200, "{b}");
    s.wait_said(Duration::from_secs(30), "control", |m| m["type"] == "control" && m["you"] == true);
    s.send(&json!({"resize": [90, 25]}));
    s.wait_said(Duration::from_secs(30), "the new size", |m| m["type"] == "size" && m["cols"] == 90 && m["rows"] == 25);
    s.close();
    lab.wait_view(&ids[1], "control let go", |v| v["terminal_control"].is_null());
    wait_for(Duration::from_secs(30), "no tmux client left on the machine", || {
        let out = m.run("tmux", &["-S", sock.to_str().unwrap(), "list-clients"]);
        String::from_utf8_lossy(&out.stdout).trim().is_empty().then_some(())
    });

    for id in &ids {
        let (s, b) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
        assert_eq!((s, &b["state"]), (200, &"ended".into()), "{b}");
    }
    assert!(!has_session(&m, sock.to_str().unwrap(), target), "stopped: the session on the machine is gone");
    drop(lab);
    m.remove();
}

#[test]
fn the_real_claude_on_a_machine_is_answered_from_lab() {
    let Some(claude) = agent_bin("LAB_CLAUDE_BIN", "scripts/install-claude.sh", "the real claude on a machine") else {
        return;
    };
    let Some(mut m) = Machine::new() else { return };
    let w = World::new();
    m.install_claude(&claude);
    let (standin, env) = m.claude_standin();
    // `claude`: found on the machine's PATH (where it is installed), not here.
    w.write_config(&format!("[providers.claude-code]\nprogram = \"claude\"\nenv = {{ {env} }}\n"));
    let cred = add_host(&w, "m1");
    let lab = serve_for(&w, &m, None);
    m.start_runner(&lab.url, "m1", &cred);
    wait_connected(&lab, &m, "m1");

    let (s, run) = lab.post(
        "/runs",
        &json!({"provider": "claude-code", "workdir": m.workdir, "prompt": "Please pick a database for me.", "host": "m1"}),
    );
    assert_eq!(s, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    let v = wait_agent(&lab, &m, &run, "a question", |v| !v["pending_dialog"].is_null());
    let d = &v["pending_dialog"];
    assert_eq!(
        (&d["kind"], &d["answerable"], &d["source"]),
        (&"question".into(), &true.into(), &"spool".into()),
        "{d}"
    );
    let labels: Vec<&str> =
        d["questions"][0]["options"].as_array().unwrap().iter().map(|o| o["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["PostgreSQL", "SQLite", "Redis"]);
    let tool_id = d["tool_id"].as_str().unwrap().to_string();
    assert!(standin.emitted_tool_uses().iter().any(|t| t.id == tool_id), "the stand-in's tool_use");

    let (s, b) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": tool_id, "answers": [{"option": 1}]}));
    assert_eq!(s, 202, "{b}");
    let (result, is_error) =
        standin.wait_for_tool_result(&tool_id, Duration::from_secs(60)).expect("claude sent the answer to the model");
    assert!(result.contains("\"Which database should we use?\"=\"SQLite\""), "{result}");
    assert!(!is_error);
    let v = wait_for(Duration::from_secs(60), "the turn's end", || {
        Some(lab.view(&id))
            .filter(|v| v["state"] == "idle" && v["messages"].to_string().contains("Thanks, noted your choice."))
    });
    assert!(v["pending_dialog"].is_null(), "{v}");
    let seqs: Vec<u64> = v["messages"].as_array().unwrap().iter().map(|m| m["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    // Its usage, read here from the transcript mirrored from there: the sum over the
    // responses the stand-in sent, each counted once.
    let keys = ["input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"];
    let mut sent = [0u64; 4];
    for u in standin.main_requests().into_iter().filter_map(|r| r.reply.and_then(|r| r.usage)) {
        for (i, k) in keys.iter().enumerate() {
            sent[i] += u[k].as_u64().unwrap();
        }
    }
    assert!(sent[2] > 0, "{sent:?}");
    wait_for(Duration::from_secs(30), "the run's usage from the machine", || {
        let (_, u) = lab.get(&format!("/runs/{id}/usage"));
        let got = ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"]
            .map(|k| u[k].as_u64().unwrap_or(u64::MAX));
        (got == sent).then_some(())
    });

    let (s, b) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!((s, &b["state"]), (200, &"ended".into()), "{b}");
    drop(lab);
    standin.shutdown();
    m.remove();
}

/// The real `codex` on a machine against the Responses stand-in (listening on this side
/// of the link): codex names its rollout only once started (SessionStart's session
/// info), a path on the machine that its runner follows and mirrors; its approval
/// prompt is answered from lab and the command runs there.
#[test]
fn the_real_codex_on_a_machine_names_its_rollout_there_and_is_answered_from_lab() {
    let Some(codex) = agent_bin("LAB_CODEX_BIN", "scripts/install-codex.sh", "the real codex on a machine") else {
        return;
    };
    let Some(mut m) = Machine::new() else { return };
    let w = World::new();
    m.install("codex", &codex);
    let (command, reason) = ("touch approved.txt", "Stand-in wants to create approved.txt");
    let script = rs::Script::new()
        .turn(rs::Matcher::Contains("TOUCHME".into()), rs::Reply::exec_command_escalated(command, reason))
        .after_output("Tool finished.");
    let standin = rs::Standin::start_on((m.peer, 0), script, None).expect("the responses stand-in on the link");
    // codex's home on the machine: the offline configuration, the workdir trusted.
    let codex_home = m.user_home.join(".codex");
    std::fs::create_dir(&codex_home).unwrap();
    m.give(&codex_home);
    let config = rs::codex_config(&standin.url(), Some(m.workdir.to_str().unwrap()));
    m.write(&codex_home.join("config.toml"), config.as_bytes());
    let env = [
        ("CODEX_HOME", codex_home.to_str().unwrap()),
        (rs::API_KEY_ENV, "standin-key-0123456789"),
        ("LANG", "C.UTF-8"),
        ("TERM", "xterm-256color"),
    ];
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k} = {}", rs::toml_str(v))).collect();
    // `codex`: found on the machine's PATH (where it is installed), not here.
    w.write_config(&format!("[providers.codex]\nprogram = \"codex\"\nenv = {{ {} }}\n", env.join(", ")));
    let cred = add_host(&w, "m1");
    // At a port of its own: lab serve is restarted there below.
    let port = std::net::TcpListener::bind((m.peer, 0)).unwrap().local_addr().unwrap().port();
    let addr = format!("{}:{port}", m.peer);
    let mut lab = serve_at(&w, &addr, None);
    m.start_runner(&lab.url, "m1", &cred);
    wait_connected(&lab, &m, "m1");

    let (s, run) = lab
        .post("/runs", &json!({"provider": "codex", "workdir": m.workdir, "prompt": "please TOUCHME", "host": "m1"}));
    assert_eq!(s, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    let v = wait_agent(&lab, &m, &run, "the approval", |v| v["pending_dialog"]["source"] == "spool");
    let d = &v["pending_dialog"];
    assert_eq!((&d["kind"], &d["answerable"]), (&"permission".into(), &true.into()), "{d}");
    assert_eq!(d["permission"]["summary"], command, "{d}");
    assert!(!m.workdir.join("approved.txt").exists(), "ran before approval");

    // The rollout is the machine's (under its CODEX_HOME), named by SessionStart; lab
    // serve keeps its mirror and the record names both.
    let (_, r) = lab.get(&format!("/runs/{id}"));
    let sid = r["session_id"].as_str().expect("the session id from SessionStart").to_string();
    let call = standin.wait_for_call(0, Duration::from_secs(30)).expect("the stand-in sent the call");
    let v = lab
        .wait_view(&id, "the call in the mirrored chat", |v| v["pending_dialog"]["call_id"] == call.call_id.as_str());
    let msgs = v["messages"].as_array().unwrap();
    assert!(msgs.iter().any(|m| m["kind"] == "tool_use" && m["tool_use_id"] == call.call_id.as_str()), "{v}");
    let mirror = w.home.join("remote").join(format!("{id}.jsonl"));
    let mirrored = std::fs::read_to_string(&mirror).expect("the mirror");
    assert!(mirrored.contains(&sid), "the mirror is codex's rollout");
    let rollout = walk(&codex_home.join("sessions"));
    assert_eq!(rollout.len(), 1, "{rollout:?}");
    assert!(rollout[0].file_name().unwrap().to_str().unwrap().ends_with(&format!("-{sid}.jsonl")));
    assert!(std::fs::read_to_string(&rollout[0]).unwrap().starts_with(&mirrored[..mirrored.len().min(200)]));

    // lab serve restarted while the approval waits: the runner comes back, follows the
    // rollout its record names from where the mirror ends, sends the spool again; the
    // prompt is the same prompt (the token an answer names is kept).
    let token = v["pending_dialog"]["tool_id"].clone();
    lab.stop();
    lab = serve_at(&w, &addr, None);
    wait_connected(&lab, &m, "m1");
    let v = lab.wait_view(&id, "the approval again after the restart", |v| {
        v["pending_dialog"]["source"] == "spool" && v["pending_dialog"]["call_id"] == call.call_id.as_str()
    });
    let settled = std::time::Instant::now();
    while settled.elapsed() < Duration::from_millis(1500) {
        let v = lab.view(&id);
        assert_eq!(v["pending_dialog"]["tool_id"], token, "the same prompt after the runner came back: {v}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let d = &v["pending_dialog"];

    let (s, b) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": d["tool_id"], "answers": [{"option": 0}]}));
    assert_eq!(s, 202, "{b}");
    let output = standin.wait_for_output(&call.call_id, Duration::from_secs(60)).expect("the command's output");
    assert!(output.contains("Process exited with code 0"), "{output}");
    assert_eq!(
        m.workdir.join("approved.txt").metadata().expect("the command ran on the machine").uid(),
        m.uid,
        "as the machine's user"
    );
    let v = lab.wait_view(&id, "idle after the command", |v| {
        v["state"] == "idle" && v["messages"].to_string().contains("Tool finished.")
    });
    assert!(v["pending_dialog"].is_null(), "{v}");
    let seqs: Vec<u64> = v["messages"].as_array().unwrap().iter().map(|m| m["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    let rollout = std::fs::read(&rollout[0]).unwrap();
    assert_eq!(std::fs::read(&mirror).unwrap(), rollout, "the mirror holds the rollout, each byte once");

    let (s, b) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!((s, &b["state"]), (200, &"ended".into()), "{b}");
    drop(lab);
    standin.shutdown();
    m.remove();
}

/// Resume and fork (issue 56) of a run on a machine: its agent starts again there, in
/// its worktree there, the chat read on through the mirror; a fork is a new run on the
/// same machine in a worktree branched there from the parent's files (its uncommitted
/// file included), starting with the parent's conversation.
#[test]
fn a_run_on_a_machine_is_resumed_and_forked_there() {
    let Some(mut m) = Machine::new() else { return };
    let w = World::new();
    let fake = fake_claude();
    m.install("fake-claude", &fake);
    let script = json!({"steps": [{"say": "Noted."}, {"idle": {}}]});
    let script_path = m.user_home.join("script.json");
    m.write(&script_path, &serde_json::to_vec_pretty(&script).unwrap());
    w.write_config(&format!(
        "[providers.claude-code]\nprogram = \"fake-claude\"\nenv = {{ FAKE_CLAUDE_SCRIPT = {:?} }}\n",
        script_path.display().to_string()
    ));
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["-c", "user.email=op@example.com", "-c", "user.name=op", "commit", "-q", "--allow-empty", "-m", "start"],
    ] {
        let mut a = vec!["-C", m.workdir.to_str().unwrap()];
        a.extend_from_slice(args);
        let out = m.run("git", &a);
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let lab = linked_as_m1(&w, &mut m, &fake);
    let (s, run) = lab.post(
        "/runs",
        &json!({"provider": "claude-code", "workdir": m.workdir, "prompt": "Remember PAPAYA.", "host": "m1"}),
    );
    assert_eq!(s, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    let worktree = run["worktree"]["path"].as_str().expect("a worktree there").to_string();
    wait_agent(&lab, &m, &run, "the first reply", |v| {
        v["state"] == "idle" && v["messages"].to_string().contains("Noted.")
    });
    let (s, stopped) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!((s, stopped["resumable"].as_bool()), (200, Some(true)), "{stopped}");

    let (s, resumed) = lab.post(&format!("/runs/{id}/resume"), &json!({"prompt": "Which word?"}));
    assert_eq!(s, 200, "{resumed}");
    assert_eq!(resumed["host"], "m1");
    let v = wait_agent(&lab, &m, &run, "the resumed reply", |v| {
        v["state"] == "idle" && v["messages"].to_string().matches("Noted.").count() == 2
    });
    let users: Vec<String> =
        chat(&v).into_iter().filter(|(_, role, kind, _)| role == "user" && kind == "text").map(|c| c.3).collect();
    assert_eq!(users, ["Remember PAPAYA.", "Which word?"], "read on through the mirror");

    m.write(&std::path::Path::new(&worktree).join("notes.txt"), b"from the parent\n");
    let (s, fork) = lab.post(&format!("/runs/{id}/fork"), &json!({"prompt": "Fork it."}));
    assert_eq!(s, 201, "{fork}");
    assert_eq!((fork["host"].as_str(), fork["parent"].as_str()), (Some("m1"), Some(id.as_str())), "{fork}");
    let fork_tree = fork["worktree"]["path"].as_str().unwrap().to_string();
    assert_eq!(std::fs::read(std::path::Path::new(&fork_tree).join("notes.txt")).unwrap(), b"from the parent\n");
    let fv = wait_agent(&lab, &m, &fork, "the fork's reply", |v| {
        let t = v["messages"].to_string();
        v["state"] == "idle" && t.contains("Remember PAPAYA.") && t.contains("Fork it.")
    });
    assert!(chat(&fv).len() >= 4, "{fv}");
    for id in [id.as_str(), fork["id"].as_str().unwrap()] {
        let (s, b) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
        assert_eq!(s, 200, "{b}");
    }
    drop(lab);
    m.remove();
}

/// A sandboxed run on a machine: its runner makes the jail there (its own lab, its own
/// bubblewrap), its agent's refused destination reaches lab's view through the link,
/// and an allowlist changed from lab is the one its proxy there goes by.
#[test]
fn a_sandboxed_run_on_a_machine_is_jailed_there_and_its_egress_is_seen_and_set_from_lab() {
    let Some(mut m) = Machine::new() else { return };
    if !["/usr/bin/bwrap", "/bin/bwrap"].iter().any(|p| std::path::Path::new(p).exists()) {
        assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "bubblewrap is missing (scripts/test installs it)");
        return;
    }
    let w = World::new();
    let fake = fake_claude();
    m.install("fake-claude", &fake);
    // The jail sees the workdir and the agent's state: the script is in the workdir.
    let fake_dir = m.workdir.join(".fake");
    std::fs::create_dir_all(&fake_dir).unwrap();
    m.give(&fake_dir);
    let script = json!({"steps": [
        {"say": "Fetching."}, {"fetch": "http://127.0.0.1:9/first"}, {"wait_file": "go"},
        {"fetch": "http://127.0.0.1:9/again"}, {"idle": {}}
    ]});
    let script_path = fake_dir.join("script.json");
    m.write(&script_path, &serde_json::to_vec_pretty(&script).unwrap());
    let state = m.user_home.join(".claude");
    std::fs::create_dir_all(&state).unwrap();
    m.give(&state);
    w.write_config(&format!(
        "[providers.claude-code]\nprogram = \"fake-claude\"\nenv = {{ FAKE_CLAUDE_SCRIPT = {:?} }}\n",
        script_path.display().to_string()
    ));
    let lab = linked_as_m1(&w, &mut m, &fake);
    let (s, run) = lab.post(
        "/runs",
        &json!({"provider": "claude-code", "workdir": m.workdir, "prompt": "Fetch.", "host": "m1", "sandbox": "bwrap"}),
    );
    assert_eq!(s, 201, "{run}");
    assert_eq!(run["sandbox"], "bwrap");
    let id = run["id"].as_str().unwrap().to_string();
    // Two facts that reach lab by two ways (the ledger mirrored from there, the agent's
    // transcript mirrored from there): waited for together, never one then the other.
    let refused = |v: &Value| v["egress"]["refused"].as_array().is_some_and(|r| r.iter().any(|s| s["port"] == 9));
    wait_agent(&lab, &m, &run, "the refusal there, in lab's view, and the agent told 403 by its proxy there", |v| {
        refused(v) && v["messages"].to_string().contains("403 Forbidden")
    });
    assert!(m.lab_home.join("runtime").join(format!("{id}.box")).is_dir(), "its jail directory is the runner's");
    // Allowed from lab: the proxy there lets the retry through (nothing listens: 502).
    let (s, e) = lab.put(&format!("/runs/{id}/egress"), &json!({"allow": ["127.0.0.1:9"]}));
    assert_eq!(s, 200, "{e}");
    m.write(&m.workdir.join("go"), b"");
    wait_agent(&lab, &m, &run, "the retry let through there (counted reached; the agent told 502)", |v| {
        v["egress"]["reached"].as_array().is_some_and(|r| r.iter().any(|s| s["port"] == 9))
            && v["messages"].to_string().contains("502 Bad Gateway")
    });
    let (s, b) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!(s, 200, "{b}");
    drop(lab);
    m.remove();
}

/// An ACP agent on a machine (issue 77): lab serve speaks ACP to it from here, its
/// runner there starts it and carries its stdio. It runs as the machine's user in the
/// machine's workdir, with the machine's environment; its permission requests are
/// answered from lab (allowed: the command runs there; rejected: it never does); the
/// file requests lab serves only for agents here are refused to it; and when the
/// machine's link ends, its agent goes with it and the run ends saying so.
#[test]
fn an_acp_agent_on_a_machine_runs_there_is_answered_from_lab_and_ends_with_its_link() {
    use common::acp_run::has_text;
    let Some(mut m) = Machine::new() else { return };
    let w = World::new();
    let fake = common::workspace_bin("fake-acp", "fake-acp");
    m.install("fake-acp", &fake);
    w.write_config("[agents.fake]\nacp = [\"fake-acp\"]\ndisplay_name = \"Fake ACP\"\n");
    // Not on lab serve's PATH: the program is looked for on the machine only.
    let cred = add_host(&w, "m1");
    let lab = serve_for(&w, &m, None);
    m.start_runner(&lab.url, "m1", &cred);
    wait_connected(&lab, &m, "m1");

    let prompt = "env:HOME;say:here;run:id -u > ran.txt;read:ran.txt;say:bye";
    let (s, run) =
        lab.post("/runs", &json!({"provider": "fake", "workdir": m.workdir, "prompt": prompt, "host": "m1"}));
    assert_eq!(s, 201, "{run}");
    assert_eq!(run["host"], "m1", "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    let v = wait_agent(&lab, &m, &run, "the permission", |v| v["pending_dialog"]["kind"] == "permission");
    assert!(has_text(&v, &format!("HOME={}", m.user_home.display())), "the machine's environment: {v}");
    let d = &v["pending_dialog"];
    let (s, b) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": d["tool_id"], "answers": [{"option": 1}]}));
    assert_eq!(s, 202, "{b}");
    let v = wait_agent(&lab, &m, &run, "the turn's end", |v| v["state"] == "idle" && has_text(v, "bye"));
    let ran = m.workdir.join("ran.txt");
    let meta = std::fs::metadata(&ran).unwrap_or_else(|e| panic!("ran there: {e}\n{v}"));
    assert_eq!(meta.uid(), m.uid, "run as the machine's user");
    assert_eq!(std::fs::read_to_string(&ran).unwrap().trim(), m.uid.to_string());
    assert!(!w.workdir.join("ran.txt").exists());
    // lab serves no file of its own machine to an agent on another.
    assert!(has_text(&v, "read failed: lab does not offer fs/read_text_file"), "{v}");

    // A second prompt, rejected: it never runs there.
    let (s, b) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "run:touch no.txt;say:after"}));
    assert_eq!(s, 202, "{b}");
    let v = wait_agent(&lab, &m, &run, "the second permission", |v| v["pending_dialog"]["kind"] == "permission");
    let d = &v["pending_dialog"];
    let (s, b) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": d["tool_id"], "answers": [{"option": 2}]}));
    assert_eq!(s, 202, "{b}");
    wait_agent(&lab, &m, &run, "the second turn's end", |v| v["state"] == "idle" && has_text(v, "after"));
    assert!(!m.workdir.join("no.txt").exists(), "a rejected command never ran");

    // The link ends: the agent with it, and the run says why.
    m.stop_runner();
    let v = wait_agent(&lab, &m, &run, "the run's end", |v| v["state"] == "ended");
    let (_, rec) = lab.get(&format!("/runs/{id}"));
    let err = rec["error"].as_str().unwrap_or_default();
    // Said by lab serve when the link ends; or by the runner, if its agent's end (on
    // the SIGTERM it sent as it stopped) got up before the link went.
    assert!(err.contains("the link to host `m1` ended") || err.contains("signal 15"), "{rec}\n{v}");
    drop(lab);
    m.remove();
}

/// An ACP agent jailed on a machine (issue 77): its runner starts `lab agent-exec` there
/// on the launch file and allowlist lab put there; lab speaks ACP to the jailed agent
/// over the link. The command it asks about is allowed from lab and runs in the jail
/// there: the run's own home there, its workdir writable, the machine user's home
/// hidden. An allowlist set from lab is the one its proxy there goes by.
#[test]
fn an_acp_agent_jailed_on_a_machine_is_answered_from_lab_and_its_command_stays_jailed() {
    let Some(mut m) = Machine::new() else { return };
    if !["/usr/bin/bwrap", "/bin/bwrap"].iter().any(|p| std::path::Path::new(p).exists()) {
        assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "bubblewrap is missing (scripts/test installs it)");
        return;
    }
    let w = World::new();
    let fake = common::workspace_bin("fake-acp", "fake-acp");
    m.install("fake-acp", &fake);
    let secret = m.user_home.join("secret.txt");
    m.write(&secret, b"machine-user-secret");
    let probe = format!(
        "echo home=$HOME\ncat {s} || echo secret-hidden\nid -u > jailed.txt && echo wrote-workdir\n",
        s = secret.display()
    );
    m.write(&m.workdir.join("probe.sh"), probe.as_bytes());
    w.write_config("[agents.fake]\nacp = [\"fake-acp\"]\n");
    let lab = linked_as_m1(&w, &mut m, &fake);
    let (s, run) = lab.post(
        "/runs",
        &json!({"provider": "fake", "workdir": m.workdir, "prompt": "run:sh probe.sh;say:probed", "host": "m1", "sandbox": "bwrap"}),
    );
    assert_eq!(s, 201, "{run}");
    assert_eq!((&run["sandbox"], &run["host"]), (&json!("bwrap"), &json!("m1")), "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    let v = wait_agent(&lab, &m, &run, "the permission", |v| v["pending_dialog"]["kind"] == "permission");
    assert!(m.lab_home.join("runtime").join(format!("{id}.box")).is_dir(), "its jail directory is the runner's");
    let d = &v["pending_dialog"];
    let (s, b) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": d["tool_id"], "answers": [{"option": 1}]}));
    assert_eq!(s, 202, "{b}");
    let v = wait_agent(&lab, &m, &run, "the turn's end", |v| {
        v["state"] == "idle" && v["messages"].to_string().contains("probed")
    });
    let out = common::acp_run::tool_output(&v);
    let run_home = m.lab_home.join("homes").join(&id);
    assert!(out.contains(&format!("home={}", run_home.display())), "the run's own home there: {out}");
    assert!(out.contains("secret-hidden") && !out.contains("machine-user-secret"), "{out}");
    assert!(out.contains("wrote-workdir"), "{out}");
    assert_eq!(std::fs::metadata(m.workdir.join("jailed.txt")).unwrap().uid(), m.uid);

    // The allowlist set from lab is the one there.
    let (s, e) = lab.put(&format!("/runs/{id}/egress"), &json!({"allow": ["127.0.0.1:9"]}));
    assert_eq!(s, 200, "{e}");
    let there = std::fs::read_to_string(m.lab_home.join("egress").join(format!("{id}.allow.json"))).unwrap();
    assert!(there.contains("127.0.0.1:9"), "{there}");
    let (s, b) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!(s, 200, "{b}");
    drop(lab);
    m.remove();
}
