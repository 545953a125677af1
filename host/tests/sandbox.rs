//! Sandboxes: runs jailed by bubblewrap, their egress through lab's proxy.
//!
//! - What cannot be sandboxed says so (an unknown kind, bubblewrap missing, a run with
//!   no sandbox asked to change its allowlist), with fake-claude: no real agent needed.
//! - The REAL `claude` in a `bwrap` sandbox against the Messages stand-in: its question
//!   reaches lab through its hooks (the run's jail directory is the one directory of
//!   lab's it sees) and is answered from lab; then a command it runs reaches the
//!   loopback server on its allowlist, is refused the other one (the refusal in the run's
//!   view), cannot connect around the proxy, cannot write outside its workdir and cannot
//!   read a file in another user's home; once the operator allows the refused server,
//!   the agent's retry reaches it. Nothing but loopback is ever a target.
//!
//! The real binary: `LAB_CLAUDE_BIN` (scripts/test sets it), bubblewrap on PATH; with
//! `CI=true` a missing one fails the test, otherwise it is skipped loudly.

mod common;

use common::*;
use messages_standin::{Matcher, Reply, Script, Standin};
use serde_json::json;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const STEP: Duration = Duration::from_secs(60);

/// bubblewrap, or a loud skip (a failure with `CI=true`).
fn bwrap() -> Option<PathBuf> {
    let found = ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"].iter().map(PathBuf::from).find(|p| p.exists());
    if found.is_none() {
        assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "bubblewrap is missing (scripts/test installs it)");
        eprintln!("SKIPPED: the sandbox tests need bubblewrap (apt-get install bubblewrap)");
    }
    found
}

/// A loopback HTTP server that answers every request with `name` and counts them.
struct Server {
    port: u16,
    hits: Arc<AtomicUsize>,
}

fn server(name: &'static str) -> Server {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut c) = conn else { continue };
            let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
            let mut buf = [0u8; 4096];
            let _ = c.read(&mut buf);
            counted.fetch_add(1, Ordering::SeqCst);
            let body = format!("reached-{name}");
            let _ = write!(c, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        }
    });
    Server { port, hits }
}

#[test]
fn what_cannot_be_sandboxed_says_so() {
    let w = World::new();
    w.use_fake_claude(&ask_then_idle());
    let lab = w.serve();
    let body =
        |sandbox: &str| json!({"provider": "claude-code", "workdir": w.workdir, "prompt": "hi", "sandbox": sandbox});
    let (status, err) = lab.post("/runs", &body("docker"));
    assert_eq!(status, 400, "{err}");
    assert!(err["message"].as_str().unwrap().contains("one of: none, bwrap, podman"), "{err}");

    // A run without a sandbox has no allowlist to change.
    let run = lab.create_run(&w, "claude-code", "hi");
    assert_eq!(run["sandbox"], "none");
    assert!(run["egress"].is_null(), "{run}");
    let id = run["id"].as_str().unwrap();
    let (status, err) = lab.put(&format!("/runs/{id}/egress"), &json!({"allow": ["example.com:443"]}));
    assert_eq!(status, 400, "{err}");
    assert!(err["message"].as_str().unwrap().contains("no sandbox"), "{err}");
    lab.stop();

    // bubblewrap not where lab serve looks: a clear error, never a run without one.
    let bin = w.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["tmux", "git"] {
        if let Some(p) =
            ["/usr/bin", "/bin", "/usr/local/bin"].iter().map(|d| Path::new(d).join(tool)).find(|p| p.exists())
        {
            std::os::unix::fs::symlink(p, bin.join(tool)).unwrap();
        }
    }
    let lab = Lab::start_with(&w, |cmd| {
        cmd.env("PATH", &bin);
    });
    let (status, err) = lab.post("/runs", &body("bwrap"));
    assert_eq!((status, err["error"].as_str()), (422, Some("launch_failed")), "{err}");
    let msg = err["message"].as_str().unwrap();
    assert!(msg.contains("`bwrap` is not installed") && msg.contains("apt-get install bubblewrap"), "{err}");
    let (_, runs) = lab.get("/runs");
    assert!(runs.as_array().unwrap().iter().all(|r| r["sandbox"] == "none"), "no run without its sandbox: {runs}");
    lab.stop();
}

/// The file another user keeps in their home: a user made for the test (root only),
/// else a stand-in under `/home`.
fn other_users_secret() -> PathBuf {
    let user = "labsbxother";
    let made = std::process::Command::new("useradd")
        .args(["-m", "-s", "/usr/sbin/nologin", user])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success() || s.code() == Some(9));
    let home = PathBuf::from("/home").join(user);
    std::fs::create_dir_all(&home).unwrap();
    let secret = home.join(format!("secret-{}", std::process::id()));
    std::fs::write(&secret, "the-other-users-secret").unwrap();
    if made {
        let _ =
            std::process::Command::new("chown").args([&format!("{user}:{user}"), secret.to_str().unwrap()]).status();
    }
    secret
}

#[test]
fn a_real_claude_in_bwrap_reaches_only_its_allowlist_and_its_workdir() {
    let Some(claude) = agent_bin("LAB_CLAUDE_BIN", "scripts/install-claude.sh", "the sandboxed real claude test")
    else {
        return;
    };
    if bwrap().is_none() {
        return;
    }
    let _slot = Slot::take(2);
    let w = World::new();
    let (allowed, refused) = (server("allowed"), server("refused"));
    let secret = other_users_secret();
    let outside = w.home.join("escaped.txt");
    let command = format!(
        "curl -s -m 20 http://127.0.0.1:{a}/a; echo; curl -s -m 20 -o /dev/null -w 'refused-code=%{{http_code}}' http://127.0.0.1:{b}/b; echo; \
         echo inside > inside.txt && echo wrote-workdir; echo escaped > {out}; echo escaped > /usr/escaped || echo usr-refused; \
         cat {secret} || echo secret-refused; curl -s --noproxy '*' -m 5 http://127.0.0.1:{a}/direct || echo direct-refused; \
         mkdir -p ~/.claude && echo '{{\"hooks\":{{\"SessionStart\":[]}}}}' > ~/.claude/settings.json && echo planted-hook",
        a = allowed.port,
        b = refused.port,
        out = outside.display(),
        secret = secret.display(),
    );
    let retry = format!("curl -s -m 20 http://127.0.0.1:{}/again", refused.port);
    let script = Script::new()
        .turn(Matcher::Any, Reply::tool_use_with_text("AskUserQuestion", three_options(), "A question first."))
        .turn(
            Matcher::ToolResultForPrevious,
            Reply::tool_use("Bash", json!({"command": command, "description": "Reach things"})),
        )
        .turn(Matcher::ToolResultForPrevious, Reply::text("One server was refused."))
        .turn(
            Matcher::Contains("retry".into()),
            Reply::tool_use("Bash", json!({"command": retry, "description": "Again"})),
        )
        .turn(Matcher::ToolResultForPrevious, Reply::text("Reached it now."))
        .side_reply("Sandboxed run");
    let standin = Standin::start(script).unwrap();

    let seed = json!({
        "hasCompletedOnboarding": true,
        "theme": "dark",
        "customApiKeyResponses": {"approved": [&STANDIN_KEY[STANDIN_KEY.len() - 20..]], "rejected": []},
        "projects": {w.workdir.to_str().unwrap(): {"hasTrustDialogAccepted": true}}
    });
    std::fs::write(w.agent_home.join(".claude.json"), serde_json::to_vec_pretty(&seed).unwrap()).unwrap();
    std::fs::create_dir_all(w.agent_home.join(".claude")).unwrap();
    let mut env = claude_offline_env(standin.base_url());
    env.extend([
        ("LANG", "C.UTF-8".into()),
        ("TERM", "xterm-256color".into()),
        ("HOME", w.agent_home.display().to_string()),
    ]);
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k} = {v:?}")).collect();
    w.write_config(&format!(
        "[providers.claude-code]\nprogram = {:?}\nenv = {{ {} }}\n\n[sandbox]\ndefault = \"bwrap\"\nallow = [\"127.0.0.1:{}\"]\n",
        claude.display().to_string(),
        env.join(", "),
        allowed.port
    ));
    let lab = Lab::start_with(&w, |cmd| {
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy().into_owned();
            if k.starts_with("ANTHROPIC_") || k.starts_with("CLAUDE") || k == "TMUX" || k == "TMUX_PANE" {
                cmd.env_remove(&k);
            }
        }
    });

    // The default mode: each command is a permission prompt the operator answers in lab.
    let run = lab.create_run_in(&w.workdir, "claude-code", "Ask me, then reach the servers.", Some("default"));
    let id = run["id"].as_str().unwrap().to_string();
    assert_eq!(run["sandbox"], "bwrap", "lab.toml's default: {run}");
    let mut events = EventLog::open(&lab, &id);

    // The question comes through the hooks, from inside the jail.
    let (_, v) = events.wait(STEP, "the question on SSE", |v| !v["pending_dialog"].is_null());
    let d = &v["pending_dialog"];
    assert_eq!(d["source"], "spool", "{d}");
    let egress = &v["egress"];
    assert_eq!(egress["allow"], json!([standin_host(&standin), format!("127.0.0.1:{}", allowed.port)]), "{v}");
    let (status, body) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": d["tool_id"], "answers": [{"option": 1}]}));
    assert_eq!(status, 202, "{body}");
    approve_command(&lab, &w, &id);

    // The command's refusals, and the one server it reached.
    let v = wait_or_show(&lab, &w, &id, "the refusal in the run's view", |v| {
        v["egress"]["refused"].as_array().is_some_and(|r| r.iter().any(|s| s["port"] == refused.port))
    });
    let r = v["egress"]["refused"].as_array().unwrap().iter().find(|s| s["port"] == refused.port).unwrap().clone();
    assert_eq!((r["host"].as_str(), r["count"].as_u64()), (Some("127.0.0.1"), Some(1)), "{r}");
    let bash = wait_for(STEP, "the command's result at the stand-in", || {
        let uses = standin.emitted_tool_uses();
        let id = uses.iter().find(|u| u.name == "Bash")?.id.clone();
        standin.tool_results_for(&id).into_iter().next()
    });
    let out = bash.0;
    for expected in [
        "reached-allowed",
        "refused-code=403",
        "wrote-workdir",
        "usr-refused",
        "secret-refused",
        "direct-refused",
        "planted-hook",
    ] {
        assert!(out.contains(expected), "{expected:?} in the command's output:\n{out}");
    }
    assert!(!out.contains("the-other-users-secret"), "{out}");
    assert!(w.workdir.join("inside.txt").exists(), "the workdir is writable");
    // A path outside the workdir is the jail's own (an empty tmpfs), never the machine's.
    assert!(!outside.exists() && !Path::new("/usr/escaped").exists(), "nothing was written outside the workdir");
    assert_eq!((allowed.hits.load(Ordering::SeqCst), refused.hits.load(Ordering::SeqCst)), (1, 0));
    // The hook it planted is in its own home, never in the operator's Claude config.
    assert!(!w.agent_home.join(".claude/settings.json").exists(), "the operator's ~/.claude is not the agent's");
    assert!(w.home.join("homes").join(&id).join(".claude/settings.json").exists(), "the run's own");
    lab.wait_view(&id, "idle after the refusal", |v| v["state"] == "idle");

    // Allowed from lab: the agent's retry passes.
    let both =
        json!([format!("127.0.0.1:{}", allowed.port), format!("127.0.0.1:{}", refused.port), standin_host(&standin)]);
    let (status, e) = lab.put(&format!("/runs/{id}/egress"), &json!({"allow": both}));
    assert_eq!(status, 200, "{e}");
    assert_eq!(e["allow"], both);
    let still = e["refused"].as_array().unwrap();
    assert!(!still.iter().any(|s| s["port"] == refused.port), "what is allowed now is not shown refused: {e}");
    let (status, body) = lab.post(&format!("/runs/{id}/messages"), &json!({"text": "Allowed it, please retry."}));
    assert_eq!(status, 202, "{body}");
    approve_command(&lab, &w, &id);
    wait_for(STEP, "the retry to reach the refused server", || {
        (refused.hits.load(Ordering::SeqCst) == 1).then_some(())
    });
    // The agent's round trip first, at the model stand-in (it answers the retry's result
    // with the last word): one agent step, bounded as every other (a clean clone's busy
    // CI once took more than the 20 s a view wait allows, and said nothing of which side
    // was slow) ...
    let retry_use = wait_for(STEP, "the retry's command at the stand-in", || {
        standin.emitted_tool_uses().into_iter().filter(|u| u.name == "Bash").nth(1)
    });
    assert!(standin.wait_for_tool_result(&retry_use.id, STEP).is_some(), "the retry's result never reached the model");
    // ... then lab showing it, with the view and the pane if it does not.
    wait_or_show(&lab, &w, &id, "the agent's last word", |v| {
        v["messages"].as_array().is_some_and(|m| m.iter().any(|m| m["text"] == "Reached it now."))
    });
    let reached = |v: &serde_json::Value, port: u16| {
        v["egress"]["reached"].as_array().is_some_and(|r| r.iter().any(|s| s["port"] == port))
    };
    let v = wait_or_show(&lab, &w, &id, "the retry counted as reached", |v| reached(v, refused.port));
    assert!(reached(&v, allowed.port), "{}", v["egress"]);
    // The audit log has the operator's change.
    let (_, audit) = lab.get(&format!("/audit?run={id}"));
    assert!(audit["entries"].as_array().unwrap().iter().any(|e| e["action"] == "run.egress"), "{audit}");
    let _ = std::fs::remove_file(&secret);
    lab.stop();
}

/// The run's command is a permission prompt: answered "Yes" from lab.
fn approve_command(lab: &Lab, w: &World, id: &str) {
    let v =
        wait_or_show(lab, w, id, "the command's permission prompt", |v| v["pending_dialog"]["kind"] == "permission");
    let d = &v["pending_dialog"];
    assert_eq!((d["source"].as_str(), d["tool_name"].as_str()), (Some("spool"), Some("Bash")), "{d}");
    let (status, body) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": d["tool_id"], "answers": [{"option": 0}]}));
    assert_eq!(status, 202, "{body}");
}

/// Wait for the run's view to satisfy `pred`; on a timeout, fail with its view and
/// what its pane shows.
fn wait_or_show(
    lab: &Lab,
    w: &World,
    id: &str,
    what: &str,
    pred: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + STEP;
    loop {
        let v = lab.view(id);
        if pred(&v) {
            return v;
        }
        if std::time::Instant::now() > deadline {
            let pane = w.tmux(&["capture-pane", "-p", "-t", &format!("lab-{id}")]);
            let mut v = v;
            v["messages"] = json!(v["messages"].as_array().map(|m| m.len()));
            let (_, run) = lab.get(&format!("/runs/{id}"));
            panic!(
                "timed out waiting for {what}; the view: {v}\nwhy it ended: {}\nthe pane:\n{}",
                run["end_reason"],
                String::from_utf8_lossy(&pane.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The stand-in's `host:port`, as the provider put it on the allowlist.
fn standin_host(s: &Standin) -> String {
    s.base_url().trim_start_matches("http://").trim_end_matches('/').to_string()
}

/// fake-claude in `w` running `steps` (its script in `dir`, which the jail must see),
/// with lab.toml's `[sandbox]` as `sandbox`.
fn fake_in_jail(w: &World, dir: &Path, steps: serde_json::Value, sandbox: &str) {
    let script = dir.join("script.json");
    std::fs::write(&script, serde_json::to_vec_pretty(&steps).unwrap()).unwrap();
    w.write_config(&format!(
        "[providers.claude-code]\nprogram = {:?}\nenv = {{ FAKE_CLAUDE_SCRIPT = {:?} }}\n\n[sandbox]\n{sandbox}\n",
        fake_claude().display().to_string(),
        script.display().to_string(),
    ));
}

/// A jailed agent that exits with an error takes its pane with it: why it ended is
/// kept in the run (its launcher's last words), so the operator sees more than "its
/// session is gone".
#[test]
fn a_jailed_agent_that_exits_with_an_error_says_so_in_why_its_run_ended() {
    if bwrap().is_none() {
        return;
    }
    let w = World::new();
    fake_in_jail(&w, &w.workdir, json!({"steps": [{"say": "Leaving."}, {"exit": 3}]}), "default = \"bwrap\"");
    let lab = w.serve();
    let (status, run) = lab.post("/runs", &json!({"provider": "claude-code", "workdir": w.workdir, "prompt": "Go."}));
    assert_eq!(status, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    wait_or_show(&lab, &w, &id, "the run's end", |v| v["state"] == "ended");
    let (_, run) = lab.get(&format!("/runs/{id}"));
    assert_eq!(run["end_reason"], "its tmux session is gone: the agent exited with code 3 in its sandbox", "{run}");
    assert!(!w.home.join(format!("runtime/{id}.box")).exists(), "its files went with it");
}

/// What a run's `sh` step printed, once it is in the run's view.
fn probe_output(lab: &Lab, w: &World, id: &str) -> String {
    let v = wait_or_show(lab, w, id, "the probe's output", |v| {
        v["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["text"].as_str().is_some_and(|t| t.starts_with("sh: "))))
    });
    let m = v["messages"].as_array().unwrap();
    m.iter().find_map(|m| m["text"].as_str().filter(|t| t.starts_with("sh: "))).unwrap().to_string()
}

/// Row 1 of the fourth review: a workdir that holds lab's home. Refused when it is too
/// broad (a home) or inside lab's files, with why; allowed by lab.toml, the jail sees
/// the workdir but none of lab's files in it (token, config, tmux socket, egress
/// files, other runs), and what it writes there reaches nothing of lab's.
#[test]
fn a_jail_never_holds_lab_s_files_whatever_the_workdir() {
    if bwrap().is_none() {
        return;
    }
    let w = World::new();
    let steps = json!({"steps": [{"say": "Probing."}, {"sh": "cd h && for f in token lab.toml tmux.sock egress registry.json; do test -e $f && echo SEEN-$f; done; \
        echo runtime: $(ls runtime); echo homes: $(ls homes); echo top: $(ls -A); echo planted > planted && echo wrote-planted; \
        perl -e 'open(T, \"<\", \"/dev/tty\") or die \"tty: $!\\n\"; my $c = \"x\"; ioctl(T, 0x5412, $c) or die \"sti: $!\\n\"; print \"STI-PASSED\\n\"'; \
        echo done-probing"}, {"idle": {}}]});
    fake_in_jail(&w, w.dir.path(), steps.clone(), "default = \"bwrap\"");
    let lab = w.serve();
    let body = |workdir: &Path| json!({"provider": "claude-code", "workdir": workdir, "prompt": "Probe."});
    // The agent's home (and lab serve's): too broad, unless lab.toml says so.
    let (status, err) = lab.post("/runs", &body(&w.agent_home));
    assert_eq!((status, err["error"].as_str()), (422, Some("launch_failed")), "{err}");
    let msg = err["message"].as_str().unwrap();
    assert!(msg.contains("is a home folder") && msg.contains("allow_broad_workdir = true"), "{msg}");
    // Folders that hold it: too.
    let (status, err) = lab.post("/runs", &body(w.dir.path()));
    assert_eq!(status, 422, "{err}");
    assert!(err["message"].as_str().unwrap().contains("holds the home folder"), "{err}");
    // lab's own home, or a folder in it: never.
    for inside in [w.home.clone(), w.home.join("runtime")] {
        let (status, err) = lab.post("/runs", &body(&inside));
        assert_eq!(status, 422, "{err}");
        assert!(err["message"].as_str().unwrap().contains("inside lab's own files"), "{err}");
    }
    lab.stop();

    // Allowed by the operator: the jail holds the folder, but nothing of lab's in it.
    fake_in_jail(&w, w.dir.path(), steps, "default = \"bwrap\"\nallow_broad_workdir = true");
    let lab = w.serve();
    let token_before = std::fs::read(w.home.join("token")).unwrap();
    let (status, run) = lab.post("/runs", &body(w.dir.path()));
    assert_eq!(status, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    let out = probe_output(&lab, &w, &id);
    assert!(out.contains("done-probing") && out.contains("wrote-planted"), "the probe ran in the jail: {out}");
    assert!(!out.contains("SEEN-"), "nothing of lab's home is in the jail: {out}");
    assert!(!out.contains("STI-PASSED"), "no keys pushed into the pane: {out}");
    assert!(out.contains("sti: Operation not permitted"), "TIOCSTI refused: {out}");
    assert!(out.contains(&format!("runtime: {id}.box")), "of runtime/, only the run's own folder: {out}");
    assert!(out.contains(&format!("homes: {id}\n")), "of homes/, only the run's own: {out}");
    assert!(out.contains("top: homes runtime\n"), "of lab's home, only the ways to the run's own: {out}");
    assert!(!w.home.join("planted").exists(), "what the agent wrote where lab's home is reached nothing of lab's");
    assert_eq!(std::fs::read(w.home.join("token")).unwrap(), token_before);
    assert!(w.home.join("tmux.sock").exists() && w.home.join("lab.toml").exists(), "they are there, outside");
    lab.stop();
}

/// Row 2 of the fourth review: a sandboxed worktree run's git. In its jail the agent
/// commits on its own branch, and cannot write the repository's config (a
/// `core.fsmonitor` would run when the operator next types `git status`), its hooks,
/// another branch, a new branch or another worktree's folder. Its commit reaches the
/// repository's `lab/<id>` when lab looks at the run's work.
#[test]
fn a_jailed_worktree_commits_on_its_branch_and_writes_nothing_else_of_the_repository() {
    if bwrap().is_none() {
        return;
    }
    let w = World::new();
    let repo = w.workdir.clone();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    git(&repo, &["add", "a.txt"]);
    git(&repo, &["commit", "-qm", "first"]);
    git(&repo, &["branch", "other"]);
    std::fs::write(repo.join("a.txt"), "two\n").unwrap();
    git(&repo, &["commit", "-qam", "second"]);
    let other_before = git(&repo, &["rev-parse", "other"]);
    let g = repo.join(".git");
    let probe = format!(
        "G={g}; git config core.fsmonitor 'touch {g}/../pwned' && echo CONFIG-WRITTEN || echo config-refused; \
         echo x > $G/hooks/post-checkout && echo HOOK-WRITTEN || echo hook-refused; \
         git update-ref refs/heads/other HEAD && echo OTHER-MOVED || echo other-refused; \
         git branch newbranch && echo NEW-BRANCH || echo branch-refused; \
         touch $G/worktrees/x && echo WT-META || echo wt-meta-refused; \
         echo jailed > jailed.txt && git add jailed.txt && git -c user.name=J -c user.email=j@x commit -qm jailed && echo committed; \
         echo done-probing",
        g = g.display()
    );
    // The script where the jail sees it: in the repository, so in the worktree (the
    // agent's cwd: the path is relative).
    let steps = json!({"steps": [{"say": "Probing git."}, {"sh": probe}, {"idle": {}}]});
    std::fs::write(repo.join("script.json"), serde_json::to_vec_pretty(&steps).unwrap()).unwrap();
    git(&repo, &["add", "script.json"]);
    git(&repo, &["commit", "-qm", "script"]);
    w.write_config(&format!(
        "[providers.claude-code]\nprogram = {:?}\nenv = {{ FAKE_CLAUDE_SCRIPT = \"script.json\" }}\n\n[sandbox]\ndefault = \"bwrap\"\n",
        fake_claude().display().to_string(),
    ));
    let lab = w.serve();
    let (status, run) =
        lab.post("/runs", &json!({"provider": "claude-code", "workdir": repo, "prompt": "Commit.", "worktree": true}));
    assert_eq!(status, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    let branch = run["worktree"]["branch"].as_str().unwrap().to_string();
    let wt = PathBuf::from(run["worktree"]["path"].as_str().unwrap());
    let out = probe_output(&lab, &w, &id);
    assert!(out.contains("done-probing"), "the probe ran: {out}");
    for refused in ["config-refused", "hook-refused", "other-refused", "branch-refused", "wt-meta-refused"] {
        assert!(out.contains(refused), "{refused}: {out}");
    }
    assert!(out.contains("committed"), "git commit works in the jail: {out}");
    // Nothing of the repository but the run's own branch moved.
    let cfg = std::fs::read_to_string(g.join("config")).unwrap();
    assert!(!cfg.contains("fsmonitor"), "{cfg}");
    assert!(!g.join("hooks/post-checkout").exists() && !g.join("worktrees/x").exists());
    assert_eq!(git(&repo, &["rev-parse", "other"]), other_before);
    assert!(git(&repo, &["branch", "--list", "newbranch"]).is_empty());
    // The commit reaches the branch when lab looks at the run's work.
    let (status, diff) = lab.get(&format!("/runs/{id}/diff"));
    assert_eq!(status, 200, "{diff}");
    assert_eq!(git(&repo, &["log", "-1", "--format=%s", &branch]), "jailed");
    assert_eq!(git(&repo, &["cat-file", "-p", &format!("{branch}:jailed.txt")]), "jailed");
    assert_eq!(git(&wt, &["status", "--porcelain"]), "", "the worktree's index follows the commit");
    git(&repo, &["fsck", "--no-dangling"]);
    lab.stop();
}

/// Row 3 of the fourth review: a sandboxed run's agent state is the run's own home,
/// seeded from the operator's (its state file copied, its login lent read-only), never
/// the operator's real settings, hooks or other keys: a hook the agent plants there
/// never reaches the operator's own agent config.
#[test]
fn a_jailed_agent_s_state_is_the_run_s_own_and_never_reaches_the_operator_s() {
    if bwrap().is_none() {
        return;
    }
    let w = World::new();
    let op = &w.agent_home;
    std::fs::create_dir_all(op.join(".claude")).unwrap();
    std::fs::create_dir_all(op.join(".ssh")).unwrap();
    std::fs::write(op.join(".claude/settings.json"), r#"{"model":"operator's"}"#).unwrap();
    std::fs::write(op.join(".claude/.credentials.json"), "operator-login").unwrap();
    std::fs::write(op.join(".claude.json"), r#"{"hasCompletedOnboarding":true}"#).unwrap();
    std::fs::write(op.join(".ssh/id_ed25519"), "operator-ssh-key").unwrap();
    let hook = r#"{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch /tmp/pwned"}]}]}}"#;
    let probe = format!(
        "echo home=$HOME; echo login: $(cat ~/.claude/.credentials.json); \
         echo x > ~/.claude/.credentials.json && echo LOGIN-WRITTEN || echo login-refused; \
         test -e ~/.claude/settings.json && echo SETTINGS-SEEN || echo settings-absent; \
         echo '{hook}' > ~/.claude/settings.json && echo planted-hook; \
         grep -q hasCompletedOnboarding ~/.claude.json && echo state-seeded; echo '{{}}' > ~/.claude.json && echo rewrote-state; \
         cat {op}/.ssh/id_ed25519 ~/.ssh/id_ed25519 || echo ssh-hidden; echo done-probing",
        op = op.display()
    );
    let scripts = w.workdir.join(".scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    fake_in_jail(
        &w,
        &scripts,
        json!({"steps": [{"say": "Probing state."}, {"sh": probe}, {"idle": {}}]}),
        "default = \"bwrap\"",
    );
    let lab = w.serve();
    let (status, run) =
        lab.post("/runs", &json!({"provider": "claude-code", "workdir": w.workdir, "prompt": "Probe."}));
    assert_eq!(status, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    let out = probe_output(&lab, &w, &id);
    let run_home = w.home.join("homes").join(&id);
    assert!(out.contains("done-probing"), "{out}");
    assert!(out.contains(&format!("home={}", run_home.display())), "the agent's HOME is the run's: {out}");
    assert!(out.contains("login: operator-login") && out.contains("login-refused"), "the login lent read-only: {out}");
    assert!(out.contains("settings-absent"), "the operator's settings are not the run's: {out}");
    assert!(out.contains("state-seeded") && out.contains("rewrote-state") && out.contains("planted-hook"), "{out}");
    assert!(out.contains("ssh-hidden") && !out.contains("operator-ssh-key"), "{out}");
    // The operator's own config is as it was; what the agent wrote is the run's.
    assert_eq!(std::fs::read_to_string(op.join(".claude/settings.json")).unwrap(), r#"{"model":"operator's"}"#);
    assert_eq!(std::fs::read_to_string(op.join(".claude/.credentials.json")).unwrap(), "operator-login");
    assert_eq!(std::fs::read_to_string(op.join(".claude.json")).unwrap(), r#"{"hasCompletedOnboarding":true}"#);
    assert!(std::fs::read_to_string(run_home.join(".claude/settings.json")).unwrap().contains("SessionStart"));
    // Its transcript is in its home, and read from there.
    let projects = run_home.join(".claude/projects");
    assert!(projects.is_dir(), "the transcript is the run's");
    lab.stop();
}

/// Rows 5 and 6 of the fourth review, the egress proxy: a name on the allowlist is
/// reached only at a public address (`localhost` is refused, though allowed by name),
/// an address the allowlist names is reached as named; a plain request reaches the
/// server with the Host of the destination let through, not the agent's; a flood of
/// refused names never pushes an earlier refusal out of the ledger: it keeps its count,
/// the rest are counted together.
#[test]
fn the_proxy_reaches_names_only_at_public_addresses_and_a_flood_loses_no_refusal() {
    if bwrap().is_none() {
        return;
    }
    let w = World::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut c) = conn else { continue };
            let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
            let mut buf = [0u8; 4096];
            let n = c.read(&mut buf).unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]).to_string();
            let host = head.lines().find_map(|l| l.strip_prefix("Host: ")).unwrap_or("-").to_string();
            let body = format!("seen-host={host}");
            let _ = write!(c, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        }
    });
    let probe = format!(
        "curl -s -m 10 -o /dev/null -w 'name=%{{http_code}}\\n' http://localhost:{port}/name; \
         curl -s -m 10 -H 'Host: other.example' http://127.0.0.1:{port}/literal; echo; \
         curl -s -m 10 -o /dev/null -w 'first=%{{http_code}}\\n' http://127.0.0.1:1/first; \
         curl -s -m 60 -o /dev/null 'http://127.0.0.1:[30001-30300]/flood'; \
         curl -s -m 10 -o /dev/null -w 'again=%{{http_code}}\\n' http://127.0.0.1:1/again; echo done-probing"
    );
    let scripts = w.workdir.join(".scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    fake_in_jail(
        &w,
        &scripts,
        json!({"steps": [{"say": "Probing egress."}, {"sh": probe}, {"idle": {}}]}),
        &format!("default = \"bwrap\"\nallow = [\"localhost:{port}\", \"127.0.0.1:{port}\"]"),
    );
    let lab = w.serve();
    let (status, run) = lab.post("/runs", &json!({"provider": "claude-code", "workdir": w.workdir, "prompt": "Go."}));
    assert_eq!(status, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    let out = probe_output(&lab, &w, &id);
    assert!(out.contains("done-probing"), "{out}");
    assert!(out.contains("name=403"), "localhost is no public address: {out}");
    assert!(out.contains(&format!("seen-host=127.0.0.1:{port}")), "the Host let through: {out}");
    assert!(out.contains("first=403") && out.contains("again=403"), "{out}");
    let v = wait_or_show(&lab, &w, &id, "the flood counted", |v| {
        v["egress"]["refused_others"]["count"].as_u64().is_some_and(|c| c > 0)
    });
    let refused = v["egress"]["refused"].as_array().unwrap();
    let first = refused.iter().find(|s| s["port"] == 1).unwrap_or_else(|| panic!("the first refusal kept: {v}"));
    assert_eq!(first["count"], 2, "{first}");
    assert!(
        refused.iter().any(|s| s["host"] == "localhost"
            && s["port"] == port
            && s["why"].as_str().is_some_and(|w| w.contains("no public address"))),
        "refused though allowed, and why: {}",
        v["egress"]
    );
    let others = &v["egress"]["refused_others"];
    assert_eq!(
        refused.len() as u64 + others["count"].as_u64().unwrap(),
        2 + 300,
        "every refused destination counted once, in its entry or with the others: {}",
        v["egress"]
    );
    lab.stop();
}

/// The agent's program's folder is lent to the jail read-only: never a home. A program
/// kept loose in the operator's home is refused for a sandboxed run, with why.
#[test]
fn a_program_kept_loose_in_a_home_is_not_lent_with_the_home() {
    if bwrap().is_none() {
        return;
    }
    let w = World::new();
    let loose = w.agent_home.join("fake-claude");
    std::fs::copy(fake_claude(), &loose).unwrap();
    w.write_config(&format!(
        "[providers.claude-code]\nprogram = {:?}\n\n[sandbox]\ndefault = \"bwrap\"\n",
        loose.display().to_string()
    ));
    let lab = w.serve();
    let (status, err) = lab.post("/runs", &json!({"provider": "claude-code", "workdir": w.workdir, "prompt": "hi"}));
    assert_eq!((status, err["error"].as_str()), (422, Some("launch_failed")), "{err}");
    let msg = err["message"].as_str().unwrap();
    assert!(msg.contains("the agent's program is in") && msg.contains("is a home folder"), "{msg}");
    lab.stop();
}

/// podman, for real: Debian's podman (with runc and the ulimits this kind of machine
/// needs: the containers.conf `scripts/lib/podman-image` writes) runs the run in a
/// container of an image built from Debian's own packages by that script; the same
/// plan holds there: the question comes through the hooks from inside, its HOME is the
/// run's own, the operator's home and lab's are not there, and the network is reached
/// only through lab's proxy (the allowed server reached, the other refused with 403).
#[test]
fn a_podman_jail_runs_the_agent_on_the_same_plan() {
    let Some((image, conf)) = podman_image() else { return };
    let w = World::new();
    let (allowed, refused) = (server("allowed"), server("refused"));
    let probe = format!(
        "echo home=$HOME; grep -h ^VERSION_CODENAME /etc/os-release; ls -A {op} | wc -l; test -e {lab}/token && echo LAB-SEEN; echo done-probing",
        op = w.agent_home.display(),
        lab = w.home.display()
    );
    std::fs::write(w.agent_home.join("operator-file"), "x").unwrap();
    let scripts = w.workdir.join(".scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    let script = scripts.join("script.json");
    let steps = json!({"steps": [
        {"say": "In a container."}, {"ask": three_options()}, {"sh": probe},
        {"fetch": format!("http://127.0.0.1:{}/a", allowed.port)},
        {"fetch": format!("http://127.0.0.1:{}/b", refused.port)}, {"idle": {}}
    ]});
    std::fs::write(&script, serde_json::to_vec_pretty(&steps).unwrap()).unwrap();
    w.write_config(&format!(
        "[providers.claude-code]\nprogram = {:?}\nenv = {{ FAKE_CLAUDE_SCRIPT = {:?}, CONTAINERS_CONF = {conf:?} }}\n\n\
         [sandbox]\ndefault = \"podman\"\nimage = {image:?}\nallow = [\"127.0.0.1:{}\"]\n",
        fake_claude().display().to_string(),
        script.display().to_string(),
        allowed.port
    ));
    let lab = w.serve();
    let (status, run) = lab.post("/runs", &json!({"provider": "claude-code", "workdir": w.workdir, "prompt": "Go."}));
    assert_eq!(status, 201, "{run}");
    assert_eq!(run["sandbox"], "podman");
    let id = run["id"].as_str().unwrap().to_string();
    let v = wait_or_show(&lab, &w, &id, "the question through the hooks, from the container", |v| {
        v["pending_dialog"]["source"] == "spool"
    });
    let (status, body) = lab.post(
        &format!("/runs/{id}/dialog/answer"),
        &json!({"tool_id": v["pending_dialog"]["tool_id"], "answers": [{"option": 0}]}),
    );
    assert_eq!(status, 202, "{body}");
    let out = probe_output(&lab, &w, &id);
    let release = std::fs::read_to_string("/etc/os-release").unwrap();
    let codename = release.lines().find(|l| l.starts_with("VERSION_CODENAME=")).unwrap_or("VERSION_CODENAME=");
    assert!(out.contains("done-probing") && out.contains(codename), "{out}");
    assert!(out.contains(&format!("home={}", w.home.join("homes").join(&id).display())), "{out}");
    assert!(out.contains("\n0\n") && !out.contains("LAB-SEEN"), "the operator's home and lab's are not there: {out}");
    let v = wait_or_show(&lab, &w, &id, "the fetches through lab's proxy", |v| {
        let m = v["messages"].to_string();
        m.contains("reached-allowed") && m.contains("403 Forbidden")
    });
    assert!(v["egress"]["refused"].as_array().unwrap().iter().any(|s| s["port"] == refused.port), "{}", v["egress"]);
    assert_eq!((allowed.hits.load(Ordering::SeqCst), refused.hits.load(Ordering::SeqCst)), (1, 0));
    let (s, b) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!(s, 200, "{b}");
    lab.stop();
}

/// An ACP agent in a bwrap jail (issue 77): `lab agent-exec` starts it from its launch
/// file in the jail and lab speaks ACP over its stdio through it. Its permission request
/// is answered from lab and the command it then runs is jailed: the run's own HOME, its
/// workdir writable, the operator's home hidden and not writable; lab serves it no file
/// of its own (it would read and write outside the jail for it). A stop ends it, and its
/// jail's files go.
#[test]
fn an_acp_agent_in_bwrap_is_answered_from_lab_and_its_commands_stay_jailed() {
    if bwrap().is_none() {
        return;
    }
    let w = World::new();
    let op = &w.agent_home;
    std::fs::create_dir_all(op.join(".ssh")).unwrap();
    std::fs::write(op.join(".ssh/id_ed25519"), "operator-ssh-key").unwrap();
    let probe = format!(
        "echo home=$HOME\ncat {op}/.ssh/id_ed25519 || echo ssh-hidden\n\
         touch {op}/outside\necho x >> /etc/hostname && echo WROTE-ETC || echo etc-refused\nid -u > ran.txt && echo ran-in-workdir\n",
        op = op.display()
    );
    std::fs::write(w.workdir.join("probe.sh"), probe).unwrap();
    w.write_config(&format!(
        "[agents.fake]\nacp = [{:?}]\n",
        common::workspace_bin("fake-acp", "fake-acp").display().to_string()
    ));
    let lab = w.serve();
    let (status, run) = lab.post(
        "/runs",
        &json!({"provider": "fake", "workdir": w.workdir, "prompt": "run:sh probe.sh;read:probe.sh;say:probed", "sandbox": "bwrap"}),
    );
    assert_eq!(status, 201, "{run}");
    assert_eq!(run["sandbox"], "bwrap", "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    let v = wait_or_show(&lab, &w, &id, "the permission", |v| v["pending_dialog"]["kind"] == "permission");
    assert!(v["egress"].is_object(), "a jailed run's egress is shown: {v}");
    let d = &v["pending_dialog"];
    let (status, b) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": d["tool_id"], "answers": [{"option": 1}]}));
    assert_eq!(status, 202, "{b}");
    let v = wait_or_show(&lab, &w, &id, "the turn's end", |v| {
        v["state"] == "idle" && v["messages"].to_string().contains("probed")
    });
    let out = common::acp_run::tool_output(&v);
    let run_home = w.home.join("homes").join(&id);
    assert!(out.contains(&format!("home={}", run_home.display())), "the agent's HOME is the run's: {out}");
    assert!(out.contains("ssh-hidden") && !out.contains("operator-ssh-key"), "{out}");
    // The operator's home is a scratch folder of the jail's: nothing written there
    // reaches it; the system is read-only.
    assert!(!op.join("outside").exists(), "{out}");
    assert!(out.contains("etc-refused"), "{out}");
    assert!(out.contains("ran-in-workdir") && w.workdir.join("ran.txt").exists(), "{out}");
    assert!(v["messages"].to_string().contains("read failed: lab does not offer fs/read_text_file"), "{v}");

    let (status, b) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!((status, &b["state"]), (200, &json!("ended")), "{b}");
    wait_for(STEP, "its jail's files gone", || (!w.home.join(format!("runtime/{id}.box")).exists()).then_some(()));
    lab.stop();
}

/// An ACP agent in a podman jail (issue 77): spoken to over its stdio through the
/// container — no terminal for it, so its lines stay as it wrote them — its permission
/// answered from lab, the command it then runs inside the container.
#[test]
fn an_acp_agent_in_podman_is_answered_from_lab() {
    let Some((image, conf)) = podman_image() else { return };
    let w = World::new();
    std::fs::write(w.workdir.join("probe.sh"), "grep -h ^VERSION_CODENAME /etc/os-release\necho home=$HOME\n").unwrap();
    w.write_config(&format!(
        "[agents.fake]\nacp = [{:?}]\nenv = {{ CONTAINERS_CONF = {conf:?} }}\n\n[sandbox]\nimage = {image:?}\n",
        common::workspace_bin("fake-acp", "fake-acp").display().to_string(),
    ));
    let lab = w.serve();
    let (status, run) = lab.post(
        "/runs",
        &json!({"provider": "fake", "workdir": w.workdir, "prompt": "run:sh probe.sh;say:probed", "sandbox": "podman"}),
    );
    assert_eq!(status, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    let v = wait_or_show(&lab, &w, &id, "the permission", |v| v["pending_dialog"]["kind"] == "permission");
    let d = &v["pending_dialog"];
    let (status, b) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": d["tool_id"], "answers": [{"option": 1}]}));
    assert_eq!(status, 202, "{b}");
    let v = wait_or_show(&lab, &w, &id, "the turn's end", |v| {
        v["state"] == "idle" && v["messages"].to_string().contains("probed")
    });
    let out = v["messages"].to_string();
    assert!(out.contains("VERSION_CODENAME="), "ran in the container's system: {out}");
    assert!(out.contains(&format!("home={}", w.home.join("homes").join(&id).display())), "{out}");
    let (status, b) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!(status, 200, "{b}");
    lab.stop();
}

/// The podman test image and the containers.conf it runs with (`scripts/lib/podman-image`
/// makes them once), or a loud skip (a failure with `CI=true`) without bubblewrap or
/// podman.
fn podman_image() -> Option<(String, String)> {
    bwrap()?;
    let podman = ["/usr/bin/podman", "/usr/local/bin/podman"].iter().map(PathBuf::from).find(|p| p.exists());
    if podman.is_none() {
        assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "podman is missing (scripts/test installs it)");
        eprintln!("SKIPPED: the podman tests need podman, runc and mmdebstrap (apt-get install podman runc mmdebstrap catatonit)");
        return None;
    }
    let script_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/lib/podman-image");
    let made = std::process::Command::new(script_path).output().unwrap();
    assert!(made.status.success(), "the test image: {}", String::from_utf8_lossy(&made.stderr));
    let made = String::from_utf8(made.stdout).unwrap();
    let mut lines = made.lines();
    let (image, conf) = (lines.next().unwrap().to_string(), lines.next().unwrap().to_string());
    Some((image, conf))
}
