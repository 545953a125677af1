//! Reaching a machine with the system OpenSSH client, against a real OpenSSH server on
//! a machine the test makes ([`common::sshd`]): one master per machine, commands
//! through it, a stale socket dialled again without a hang, and host keys checked
//! strictly — an unknown and a changed key refused with the fingerprint and how to
//! accept it, a key the machine does not take refused as such.

mod common;

use common::sshd::{fingerprint, keygen, master_pid, SshMachine};
use lab::machines::ssh::{Master, SshError, SshTarget};
use std::time::{Duration, Instant};

const WITHIN: Duration = Duration::from_secs(15);

/// Ends a master when the test does, passed or failed (a master left in the
/// background would otherwise live until its keep-alives miss the machine).
struct Ends<'a>(&'a Master);

impl Drop for Ends<'_> {
    fn drop(&mut self) {
        self.0.exit();
    }
}

fn target(s: &SshMachine) -> SshTarget {
    SshTarget {
        destination: s.destination(),
        port: None,
        identity: Some(s.client_key.clone()),
        known_hosts: Some(s.known_hosts.clone()),
        lab: None,
    }
}

#[test]
fn one_master_per_machine_commands_through_it_and_host_keys_checked_strictly() {
    let Some(s) = SshMachine::new() else { return };
    let dir = tempfile::Builder::new().prefix("lab-ssh").tempdir_in("/tmp").unwrap();
    let offered = fingerprint(&s.host_key_pub);

    // An unknown host key: refused, with what the machine offers and how to accept it.
    let empty = dir.path().join("empty_known_hosts");
    std::fs::write(&empty, "").unwrap();
    let unknown = Master::new(SshTarget { known_hosts: Some(empty.clone()), ..target(&s) }, dir.path().join("u.sock"));
    let e = unknown.up().unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, SshError::HostKey(_)), "{e:?}");
    assert!(text.contains(&format!("ED25519 {offered}")), "{text}");
    assert!(text.contains(&format!("ssh-keyscan -p 22 {} >> {}", s.m.addr, empty.display())), "{text}");
    assert!(!dir.path().join("u.sock").exists());

    // Known: one master, and commands through it.
    let control = dir.path().join("m.sock");
    let master = Master::new(target(&s), control.clone());
    let _ends = Ends(&master);
    let t = Instant::now();
    master.up().unwrap_or_else(|e| panic!("{e}\n{}", s.sshd_log()));
    eprintln!("master up in {} ms", t.elapsed().as_millis());
    let out = master.run("uname -s; id -un", b"", WITHIN).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("Linux\n{}\n", s.user));
    let t = Instant::now();
    let out = master.run("cat", b"through the master", WITHIN).unwrap();
    eprintln!("a command through the master in {} ms", t.elapsed().as_millis());
    assert_eq!(out.stdout, b"through the master");
    assert_eq!(master.run("exit 42", b"", WITHIN).unwrap().status.code(), Some(42));
    let pid = master_pid(&control);

    // Its master killed (the socket stays behind): dialled again, no hang.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    common::wait_for(Duration::from_secs(10), "the master to go", || {
        (!std::path::Path::new(&format!("/proc/{pid}")).exists()).then_some(())
    });
    assert!(control.exists(), "a stale socket");
    assert!(!master.alive());
    let t = Instant::now();
    assert_eq!(master.run("echo again", b"", WITHIN).unwrap().stdout, b"again\n");
    eprintln!("a stale socket replaced and the command run in {} ms", t.elapsed().as_millis());
    assert_ne!(master_pid(&control), pid, "a new master");
    master.exit();
    assert!(!control.exists());

    // A changed host key: refused, with the key it now offers.
    let other = dir.path().join("other");
    keygen(&other);
    let changed_file = dir.path().join("changed_known_hosts");
    let other_pub = std::fs::read_to_string(other.with_extension("pub")).unwrap();
    std::fs::write(&changed_file, format!("{} {other_pub}", s.m.addr)).unwrap();
    let changed = Master::new(SshTarget { known_hosts: Some(changed_file), ..target(&s) }, dir.path().join("c.sock"));
    let e = changed.up().unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, SshError::HostKey(_)) && text.contains("has CHANGED") && text.contains(&offered), "{text}");

    // A key the machine does not take.
    let denied = Master::new(SshTarget { identity: Some(other), ..target(&s) }, dir.path().join("d.sock"));
    let e = denied.up().unwrap_err();
    assert!(matches!(e, SshError::Denied(_)) && e.to_string().contains("Permission denied"), "{e:?}");
}

/// lab put on a machine over ssh: uploaded once (checked by its hash there), found the
/// next time, a damaged copy replaced, a binary that is not the version it should be
/// refused.
#[test]
fn lab_is_put_on_a_machine_once_and_checked_by_its_hash() {
    use lab::machines::ssh::bootstrap::{build_name, ensure_lab};
    use sha2::Digest;
    let Some(s) = SshMachine::new() else { return };
    let dir = tempfile::Builder::new().prefix("lab-ssh").tempdir_in("/tmp").unwrap();
    let master = Master::new(target(&s), dir.path().join("m.sock"));
    let _ends = Ends(&master);
    master.up().unwrap_or_else(|e| panic!("{e}\n{}", s.sshd_log()));
    let version = env!("CARGO_PKG_VERSION");
    let binary = std::path::Path::new(common::LAB);
    let bytes = std::fs::read(binary).unwrap();
    let sha: String = sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    let there = s.m.user_home.join(".cache/lab/bin").join(build_name(version, &sha));

    let t = Instant::now();
    let first = ensure_lab(&master, binary, version, None).unwrap();
    eprintln!("bootstrap, cold ({} MB uploaded): {} ms", bytes.len() >> 20, t.elapsed().as_millis());
    assert!(first.uploaded && first.system.starts_with("Linux"), "{first:?}");
    assert_eq!(std::path::Path::new(&first.path), there);
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(&there).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o777), (s.m.uid, 0o700), "the machine user's own, private");
    assert_eq!(std::fs::read(&there).unwrap(), bytes);

    let t = Instant::now();
    let again = ensure_lab(&master, binary, version, None).unwrap();
    eprintln!("bootstrap, warm: {} ms", t.elapsed().as_millis());
    assert!(!again.uploaded, "{again:?}");
    assert_eq!(again.identity, first.identity);
    let t = Instant::now();
    let known = ensure_lab(&master, binary, version, Some(&again)).unwrap();
    eprintln!("bootstrap, warm, its identity known (not hashed again): {} ms", t.elapsed().as_millis());
    assert!(!known.uploaded, "{known:?}");

    // A damaged copy (its hash is not the build's) is replaced, its identity known or not.
    std::fs::write(&there, b"#!/bin/sh\necho lab 6.6.6\n").unwrap();
    let replaced = ensure_lab(&master, binary, version, Some(&known)).unwrap();
    assert!(replaced.uploaded && replaced.identity != known.identity, "{replaced:?}");
    assert_eq!(std::fs::read(&there).unwrap(), bytes);
    std::fs::write(&there, b"#!/bin/sh\necho lab 6.6.6\n").unwrap();
    assert!(ensure_lab(&master, binary, version, None).unwrap().uploaded);
    assert_eq!(std::fs::read(&there).unwrap(), bytes);

    // A binary that does not say the version lab expects is refused.
    let e = ensure_lab(&master, binary, "9.9.9", None).unwrap_err().to_string();
    assert!(e.contains(&format!("says \"lab {version}\", not \"lab 9.9.9\"")), "{e}");
    master.exit();
}

/// `lab hosts add NAME --ssh …`: the machine reached first (its host key checked: an
/// unknown one refuses the add, with what it offers), lab put there, then recorded and
/// listed with how it is reached; removed like any host.
#[test]
fn lab_hosts_add_over_ssh_reaches_the_machine_then_records_it() {
    let Some(s) = SshMachine::new() else { return };
    let home = tempfile::Builder::new().prefix("lab-h").tempdir_in("/tmp").unwrap();
    let lab = |args: &[&str]| {
        let out =
            std::process::Command::new(common::LAB).args(["hosts", "--home"]).arg(home.path()).args(args).output();
        let out = out.unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (key, known) = (s.client_key.to_str().unwrap(), s.known_hosts.to_str().unwrap());
    let empty = home.path().join("empty_known_hosts");
    std::fs::write(&empty, "").unwrap();
    let dest = s.destination();

    let (ok, _, err) =
        lab(&["add", "far", "--ssh", &dest, "--identity", key, "--known-hosts", empty.to_str().unwrap()]);
    assert!(!ok, "{err}");
    assert!(err.contains(&fingerprint(&s.host_key_pub)) && err.contains("host `far` was not added"), "{err}");
    assert!(!lab(&["list"]).1.contains("far"));

    let (ok, out, err) = lab(&["add", "far", "--ssh", &dest, "--identity", key, "--known-hosts", known]);
    assert!(ok, "{err}");
    assert!(out.is_empty(), "no credential for a host reached over ssh: {out}");
    assert!(err.contains(&format!("host `far` added (ssh {dest}): Linux")) && err.contains("uploaded at"), "{err}");
    let (_, list, _) = lab(&["list"]);
    let row = list.lines().find(|l| l.starts_with("far ")).unwrap_or_else(|| panic!("{list}"));
    assert!(row.ends_with(&format!("ssh {dest}")), "{row}");
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(home.path().join("hosts.json")).unwrap()).unwrap();
    assert_eq!(file[0]["ssh"]["destination"], dest.as_str(), "{file}");
    assert_eq!(file[0]["credential_sha256"], "", "{file}");
    assert!(!home.path().join("runtime/ssh-far.sock").exists(), "no master left behind");

    let (ok, _, err) = lab(&["add", "far", "--ssh", &dest]);
    assert!(!ok && err.contains("exists"), "{err}");
    // Hosts lab.toml names are listed too (an added one of the same name wins).
    std::fs::write(home.path().join("lab.toml"), "[hosts.cfg]\nssh = \"lab@cfg-box\"\n[hosts.far]\nssh = \"x@y\"\n")
        .unwrap();
    let (_, list, _) = lab(&["list"]);
    assert!(
        list.lines().any(|l| l.starts_with("cfg ") && l.ends_with("(lab.toml)            ssh lab@cfg-box")),
        "{list}"
    );
    assert!(!list.contains("x@y"), "{list}");
    assert!(lab(&["remove", "far"]).0);
    // Removed, the lab.toml one of that name is the host now.
    let (_, list, _) = lab(&["list"]);
    let far: Vec<&str> = list.lines().filter(|l| l.starts_with("far ")).collect();
    assert_eq!(far.len(), 1, "{list}");
    assert!(far[0].ends_with("ssh x@y"), "{list}");
}

/// A run on a machine lab reaches over ssh: `lab hosts add --ssh` puts lab there,
/// lab serve starts the machine's runner daemon through its proxy and links to it with
/// no credential and no port of its own; fake-claude runs there, its question answered
/// from lab's API. Then the link is cut (the machine's network down and lab's ssh
/// master killed) for 10 s while a question waits: the host shows `connecting` with
/// the last error, the run `disconnected`; the answer sent into the cut fails visibly;
/// the agent goes on there (answered at the machine's own terminal), writes, and
/// raises a new question during the cut. When the link is back nothing it wrote is
/// missing, and that question is answered from lab.
#[test]
fn a_run_on_a_machine_over_ssh_goes_on_through_a_cut_and_is_answered_after() {
    use common::{fake_claude, three_options, wait_for, World};
    use serde_json::{json, Value};
    let Some(s) = SshMachine::new() else { return };
    let w = World::new();
    let m = &s.m;
    m.install("fake-claude", &fake_claude());
    // Over ssh the runner starts through the user's login shell: its PATH is the
    // machine's, as `.profile` makes it.
    m.write(&m.user_home.join(".profile"), format!("PATH=\"{}:$PATH\"; export PATH\n", m.bin.display()).as_bytes());
    let script = json!({"steps": [
        {"say": "Looking."}, {"ask": three_options()}, {"say": "Written during the cut."},
        {"ask": three_options()}, {"say": "Both answered."}, {"idle": {}}
    ]});
    m.write(&m.workdir.join("script.json"), &serde_json::to_vec(&script).unwrap());
    w.write_config(
        "[providers.claude-code]\nprogram = \"fake-claude\"\n\
         env = { FAKE_CLAUDE_SCRIPT = \"script.json\", FAKE_CLAUDE_LOG = \"fake.log\" }\n",
    );
    let dest = s.destination();
    let add = std::process::Command::new(common::LAB)
        .args(["hosts", "--home"])
        .arg(&w.home)
        .args(["add", "m1", "--ssh", &dest, "--identity"])
        .arg(&s.client_key)
        .arg("--known-hosts")
        .arg(&s.known_hosts)
        .output()
        .unwrap();
    assert!(add.status.success(), "{}", String::from_utf8_lossy(&add.stderr));
    let lab = common::Lab::start(&w);
    let host = |lab: &common::Lab| -> Value {
        let (st, list) = lab.get("/hosts");
        assert_eq!(st, 200, "{list}");
        list.as_array().unwrap().iter().find(|h| h["name"] == "m1").cloned().expect("host m1 listed")
    };
    let connected = |lab: &common::Lab, what: &str| {
        wait_for(Duration::from_secs(60), what, || Some(host(lab)).filter(|h| h["state"] == "connected"))
    };
    let h = connected(&lab, "host m1 linked over ssh");
    assert_eq!((&h["transport"], &h["version"]), (&json!("ssh"), &json!(env!("CARGO_PKG_VERSION"))), "{h}");
    let runner_home = m.user_home.join(".local/state/lab/runner");
    assert!(runner_home.join("runtime/runner.sock").exists(), "the runner daemon's socket there");

    let (st, run) = lab.post(
        "/runs",
        &json!({"provider": "claude-code", "workdir": m.workdir, "prompt": "Pick a database.", "host": "m1"}),
    );
    assert_eq!(st, 201, "{run}");
    let sock = runner_home.join("tmux.sock");
    assert_eq!(run["tmux_socket"], sock.to_str().unwrap(), "{run}");
    let (id, target) = (run["id"].as_str().unwrap().to_string(), run["tmux_target"].as_str().unwrap().to_string());
    let answer = |lab: &common::Lab, v: &Value| {
        let tool_id = &v["pending_dialog"]["tool_id"];
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": tool_id, "answers": [{"option": 1}]}))
    };
    let log = m.workdir.join("fake.log");
    let events = |name: &str| World::log_events(&log).into_iter().filter(|e| e["event"] == name).count();
    let v = lab.wait_view(&id, "the first question", |v| v["pending_dialog"]["source"] == "spool");

    // The cut: the machine's network down, lab's ssh master killed.
    let control = w.home.join("runtime/ssh-m1.sock");
    let master = master_pid(&control);
    let cut_at = Instant::now();
    m.set_link(false);
    unsafe { libc::kill(master as i32, libc::SIGKILL) };
    let h = wait_for(Duration::from_secs(30), "the host seen cut", || {
        Some(host(&lab)).filter(|h| h["state"] != "connected")
    });
    assert_eq!(h["state"], "connecting", "{h}");
    lab.wait_view(&id, "the run marked disconnected", |v| v["disconnected"] == true);
    // The answer sent into the cut fails visibly; the question still waits.
    let (st, b) = answer(&lab, &v);
    assert!(st >= 400, "an answer into a cut is refused, never played: {st} {b}");
    assert!(b.to_string().contains("m1"), "it names the host: {b}");
    assert_eq!(events("answer"), 0);
    // The agent goes on there meanwhile: answered at the machine's own terminal, it
    // writes and asks again.
    let keys = m.run("tmux", &["-S", sock.to_str().unwrap(), "send-keys", "-t", &target, "Enter"]);
    assert!(keys.status.success(), "{}", String::from_utf8_lossy(&keys.stderr));
    wait_for(Duration::from_secs(30), "the second question there", || {
        (World::log_events(&log).iter().filter(|e| e["event"] == "ready" && e["widget"] == "ask").count() >= 2)
            .then_some(())
    });
    let h = host(&lab);
    assert!(h["last_error"].as_str().is_some_and(|e| !e.is_empty()), "the last error is shown: {h}");
    std::thread::sleep(Duration::from_secs(10).saturating_sub(cut_at.elapsed()));
    m.set_link(true);
    let back_at = Instant::now();
    connected(&lab, "host m1 linked again");
    eprintln!("linked again {} ms after the link came back", back_at.elapsed().as_millis());

    let v = lab.wait_view(&id, "the second question, after the cut", |v| {
        v["pending_dialog"]["source"] == "spool" && v["messages"].to_string().contains("Written during the cut.")
    });
    assert_eq!(v["disconnected"], false, "{v}");
    let (st, b) = answer(&lab, &v);
    assert_eq!(st, 202, "{b}");
    wait_for(Duration::from_secs(30), "the second answer there", || (events("answer") == 2).then_some(()));
    // Played next to the agent: the drawn check and the keys there, in one trip. The
    // runner logs it once its last key is typed, which the agent may read first: wait
    // for the line.
    let daemon_log = runner_home.join("logs/runner.log");
    wait_for(Duration::from_secs(30), "the runner's log: the answer played there", || {
        std::fs::read_to_string(&daemon_log).ok().filter(|l| l.contains("an answer played here"))
    });
    let v = lab.wait_view(&id, "the turn's end", |v| v["messages"].to_string().contains("Both answered."));
    let text = v["messages"].to_string();
    assert!(text.contains("PostgreSQL") && text.contains("SQLite"), "both answers in the chat: {text}");
    let seqs: Vec<u64> = v["messages"].as_array().unwrap().iter().map(|m| m["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>(), "nothing lost, nothing twice");

    // The attach command reaches the machine as lab does.
    let (_, t) = lab.get(&format!("/runs/{id}/terminal"));
    let attach = t["attach"].as_str().unwrap();
    let want = format!(
        "ssh -t -i {} -o UserKnownHostsFile={} {dest} 'tmux -S {}",
        s.client_key.display(),
        s.known_hosts.display(),
        sock.display()
    );
    assert!(attach.starts_with(&want), "{attach}\nnot {want}");

    let (st, b) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!((st, &b["state"]), (200, &json!("ended")), "{b}");
    // Removed while linked: let go of within seconds, no longer listed.
    let out = std::process::Command::new(common::LAB)
        .args(["hosts", "--home"])
        .arg(&w.home)
        .args(["remove", "m1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_for(Duration::from_secs(15), "host m1 let go of", || {
        let (_, list) = lab.get("/hosts");
        (!list.to_string().contains("\"m1\"")).then_some(())
    });
    drop(lab);
}

/// The real `claude` on a machine lab.toml names (`[hosts.m1]`, lab's builds in a
/// folder of its choosing there), against the Messages stand-in on this side of the
/// link: its question answered from lab's API, through the runner lab serve started
/// over ssh.
#[test]
fn the_real_claude_on_a_machine_lab_toml_names_is_answered_over_ssh() {
    use common::{agent_bin, wait_for, World};
    use serde_json::json;
    let Some(claude) = agent_bin("LAB_CLAUDE_BIN", "scripts/install-claude.sh", "the real claude over ssh") else {
        return;
    };
    let Some(s) = SshMachine::new() else { return };
    let m = &s.m;
    let w = World::new();
    m.install_claude(&claude);
    m.write(&m.user_home.join(".profile"), format!("PATH=\"{}:$PATH\"; export PATH\n", m.bin.display()).as_bytes());
    let (standin, env) = m.claude_standin();
    w.write_config(&format!(
        "[providers.claude-code]\nprogram = \"claude\"\nenv = {{ {} }}\n\n\
         [hosts.m1]\nssh = \"{}\"\nidentity = \"{}\"\nknown_hosts = \"{}\"\nlab = \"~/lab-builds\"\n",
        env,
        s.destination(),
        s.client_key.display(),
        s.known_hosts.display()
    ));
    let lab = common::Lab::start_with(&w, |cmd| {
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy().into_owned();
            if k.starts_with("ANTHROPIC_") || k.starts_with("CLAUDE") || k == "TMUX" || k == "TMUX_PANE" {
                cmd.env_remove(&k);
            }
        }
    });
    let h = wait_for(Duration::from_secs(60), "host m1 linked over ssh", || {
        let (_, list) = lab.get("/hosts");
        list.as_array().unwrap().iter().find(|h| h["name"] == "m1" && h["state"] == "connected").cloned()
    });
    assert_eq!(h["transport"], "ssh", "{h}");
    let builds: Vec<String> = std::fs::read_dir(m.user_home.join("lab-builds"))
        .expect("lab's builds where lab.toml says")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(builds.iter().any(|b| b.starts_with(&format!("lab-{}-", env!("CARGO_PKG_VERSION")))), "{builds:?}");

    let (st, run) = lab.post(
        "/runs",
        &json!({"provider": "claude-code", "workdir": m.workdir, "prompt": "Please pick a database for me.", "host": "m1"}),
    );
    assert_eq!(st, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    let v = wait_for(Duration::from_secs(90), "claude's question", || {
        Some(lab.view(&id)).filter(|v| v["pending_dialog"]["source"] == "spool")
    });
    let d = &v["pending_dialog"];
    assert_eq!((&d["kind"], &d["answerable"]), (&json!("question"), &json!(true)), "{d}");
    let tool_id = d["tool_id"].as_str().unwrap().to_string();
    let (st, b) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": tool_id, "answers": [{"option": 1}]}));
    assert_eq!(st, 202, "{b}");
    let (result, is_error) =
        standin.wait_for_tool_result(&tool_id, Duration::from_secs(60)).expect("claude sent the answer to the model");
    assert!(result.contains("\"Which database should we use?\"=\"SQLite\""), "{result}");
    assert!(!is_error);
    wait_for(Duration::from_secs(60), "the turn's end", || {
        Some(lab.view(&id))
            .filter(|v| v["state"] == "idle" && v["messages"].to_string().contains("Thanks, noted your choice."))
    });
    let (st, b) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!((st, &b["state"]), (200, &json!("ended")), "{b}");
    drop(lab);
    standin.shutdown();
}

/// Fourth review, row 1: lab runs a build there only if nobody but the ssh user (or
/// root) could have written it or its folders, and checks it on every link. A host
/// whose lab folder sits in a folder anyone may write is refused, the reason in `GET
/// /hosts`, and nothing is put there. On a sound host, the build replaced between two
/// links (here by the user: another could not) is never run: the link after a cut
/// finds it changed, and puts lab's build back before running it.
#[test]
fn a_build_there_runs_only_if_nobody_else_could_write_it_and_is_checked_on_every_link() {
    use common::{wait_for, World};
    use serde_json::Value;
    use std::os::unix::fs::PermissionsExt;
    let Some(s) = SshMachine::new() else { return };
    let m = &s.m;
    let w = World::new();
    let shared = m.root.join("shared");
    std::fs::create_dir(&shared).unwrap();
    m.give(&shared);
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let host = |name: &str, lab: &str| {
        format!(
            "[hosts.{name}]\nssh = \"{}\"\nidentity = \"{}\"\nknown_hosts = \"{}\"\nlab = \"{lab}\"\n",
            s.destination(),
            s.client_key.display(),
            s.known_hosts.display()
        )
    };
    w.write_config(&format!("{}{}", host("open", &format!("{}/lab", shared.display())), host("sound", "~/builds")));
    let lab = common::Lab::start(&w);
    let row = |lab: &common::Lab, name: &str| -> Value {
        let (_, list) = lab.get("/hosts");
        list.as_array().unwrap().iter().find(|h| h["name"] == name).cloned().unwrap_or(Value::Null)
    };
    let open = wait_for(Duration::from_secs(60), "host `open` refused", || {
        Some(row(&lab, "open")).filter(|h| h["last_error"].as_str().is_some_and(|e| !e.is_empty()))
    });
    let why = open["last_error"].as_str().unwrap();
    assert!(
        why.contains(&format!(
            "a folder above lab's {} may be written by group or others (mode 0777)",
            shared.display()
        )),
        "{why}"
    );
    assert_ne!(open["state"], "connected", "{open}");
    assert!(!shared.join("lab").exists(), "nothing put in a folder others may write");

    let linked = |lab: &common::Lab, what: &str| {
        wait_for(Duration::from_secs(60), what, || Some(row(lab, "sound")).filter(|h| h["state"] == "connected"))
    };
    linked(&lab, "host `sound` linked");
    let builds = m.user_home.join("builds");
    let mode = std::fs::metadata(&builds).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "lab's folder there is made private");
    let build = std::fs::read_dir(&builds)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("lab-"))
        .expect("lab's build there");
    // The build replaced there while linked; then the link is cut.
    let ran = m.user_home.join("planted-ran");
    // (Renamed over it: the build runs there, so it cannot be written in place.)
    let planted = build.with_extension("planted");
    m.write(&planted, format!("#!/bin/sh\ntouch {}\nexit 1\n", ran.display()).as_bytes());
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::rename(&planted, &build).unwrap();
    let master = master_pid(&w.home.join("runtime/ssh-sound.sock"));
    unsafe { libc::kill(master as i32, libc::SIGKILL) };
    let ours = std::fs::read(common::LAB).unwrap();
    wait_for(Duration::from_secs(60), "lab's build put back there", || {
        std::fs::read(&build).ok().filter(|b| *b == ours)
    });
    linked(&lab, "host `sound` linked again");
    assert!(!ran.exists(), "a build that changed between links was run");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
    drop(lab);
}

/// An ACP agent on a machine reached over ssh (issue 77): the runner daemon lab serve
/// started there through OpenSSH starts the agent as the login user, with the login
/// shell's PATH, and carries its stdio over the ssh session; its permission request is
/// answered from lab and the command runs there; a stop from lab ends the agent there.
#[test]
fn an_acp_agent_on_a_machine_over_ssh_is_answered_from_lab_and_stopped_there() {
    use common::{wait_for, World};
    use serde_json::json;
    use std::os::unix::fs::MetadataExt;
    let Some(s) = SshMachine::new() else { return };
    let w = World::new();
    let m = &s.m;
    m.install("fake-acp", &common::workspace_bin("fake-acp", "fake-acp"));
    m.write(&m.user_home.join(".profile"), format!("PATH=\"{}:$PATH\"; export PATH\n", m.bin.display()).as_bytes());
    w.write_config("[agents.fake]\nacp = [\"fake-acp\"]\n");
    let lab = serving_with_m1(&w, &s);

    let prompt = "run:id -u > ran.txt;hang";
    let (st, run) =
        lab.post("/runs", &json!({"provider": "fake", "workdir": m.workdir, "prompt": prompt, "host": "m1"}));
    assert_eq!(st, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    let v = lab.wait_view(&id, "the permission", |v| v["pending_dialog"]["kind"] == "permission");
    let d = &v["pending_dialog"];
    assert_eq!(d["permission"]["summary"], "id -u > ran.txt", "{d}");
    let (st, b) =
        lab.post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": d["tool_id"], "answers": [{"option": 1}]}));
    assert_eq!(st, 202, "{b}");
    // The command's result in the chat (the agent's next words stay buffered while
    // its turn goes on: it hangs).
    let v = lab.wait_view(&id, "the command's result", |v| v["messages"].to_string().contains("\"tool_result\""));
    let ran = m.workdir.join("ran.txt");
    assert_eq!(
        std::fs::metadata(&ran).unwrap_or_else(|e| panic!("{e}: {v}")).uid(),
        m.uid,
        "run as the login user there"
    );
    assert_eq!(std::fs::read_to_string(&ran).unwrap().trim(), m.uid.to_string());

    // Stopped from lab (mid-turn: it hangs): the agent there is gone.
    let there = || {
        let out = m.run("pgrep", &["-u", &m.uid.to_string(), "-x", "fake-acp"]);
        out.status.success()
    };
    assert!(there(), "the agent runs on the machine");
    let (st, b) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!((st, &b["state"]), (200, &json!("ended")), "{b}");
    wait_for(Duration::from_secs(15), "the agent there gone", || (!there()).then_some(()));
    drop(lab);
}

/// Answer rules on a machine reached over ssh (issue 78): a rule scoped to that
/// machine answers its run's prompt (the command runs there); one scoped to this
/// machine does not, and that prompt waits for the operator.
#[test]
fn an_answer_rule_for_a_machine_answers_its_runs_there_and_no_other_does() {
    use serde_json::json;
    let Some(s) = SshMachine::new() else { return };
    let w = common::World::new();
    let m = &s.m;
    m.install("fake-acp", &common::workspace_bin("fake-acp", "fake-acp"));
    m.write(&m.user_home.join(".profile"), format!("PATH=\"{}:$PATH\"; export PATH\n", m.bin.display()).as_bytes());
    w.write_config("[agents.fake]\nacp = [\"fake-acp\"]\n");
    let lab = serving_with_m1(&w, &s);
    for (name, pattern, host) in [("on m1", "touch on-m1*", "m1"), ("here only", "touch here-only*", "local")] {
        let rule =
            json!({"name": name, "action": "allow", "match": {"tool": "execute", "pattern": pattern, "host": host}});
        let (st, r) = lab.post("/rules", &rule);
        assert_eq!(st, 201, "{r}");
    }
    let prompt = "run:touch on-m1.txt;run:touch here-only.txt;hang";
    let (st, run) =
        lab.post("/runs", &json!({"provider": "fake", "workdir": m.workdir, "prompt": prompt, "host": "m1"}));
    assert_eq!(st, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    let v = lab.wait_view(&id, "the second permission, waiting", |v| {
        v["pending_dialog"]["permission"]["summary"] == "touch here-only.txt"
    });
    assert_eq!(v["answer"]["answered_by"]["name"], "on m1", "{}", v["answer"]);
    assert!(m.workdir.join("on-m1.txt").exists(), "the first command ran there");
    assert!(!m.workdir.join("here-only.txt").exists(), "a rule for this machine answered a prompt there");
    let (st, b) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!((st, &b["state"]), (200, &json!("ended")), "{b}");
    drop(lab);
}

/// The real OpenCode on a machine reached over ssh (issue 77), its model the Messages
/// stand-in on this side of the link: the runner daemon there starts it, lab speaks ACP
/// to it over the ssh session; the command it asks about is allowed from lab and runs
/// there as the login user, its result reaches the model, and its usage is counted.
#[test]
fn the_real_opencode_on_a_machine_over_ssh_asks_from_there_and_runs_there() {
    use common::{agent_bin, wait_for, World};
    use messages_standin::{Matcher, Reply, Script, Standin};
    use serde_json::json;
    use std::os::unix::fs::MetadataExt;
    let Some(opencode) = agent_bin("LAB_OPENCODE_BIN", "scripts/install-opencode.sh", "the real OpenCode over ssh")
    else {
        return;
    };
    let Some(s) = SshMachine::new() else { return };
    let _slot = common::Slot::take(2);
    let m = &s.m;
    let w = World::new();
    // The native program itself (npm's `.bin/` link points at it).
    m.install("opencode", &std::fs::canonicalize(&opencode).unwrap());
    m.write(&m.user_home.join(".profile"), format!("PATH=\"{}:$PATH\"; export PATH\n", m.bin.display()).as_bytes());
    let command = json!({"command": "id -u > oc-there.txt", "description": "Write a marker file"});
    let script = Script::new().turn(Matcher::Any, Reply::tool_use("bash", command)).after_tool_result("Ran it there.");
    let standin = Standin::start_on((m.peer, 0), script).expect("the messages stand-in on the link");
    let config = json!({
        "model": "anthropic/claude-sonnet-4-5",
        "provider": {"anthropic": {"options": {"baseURL": format!("{}/v1", standin.base_url()), "apiKey": "sk-ant-standin"}}},
        "share": "disabled",
    });
    w.write_config(&format!(
        "[providers.opencode]\nprogram = \"opencode\"\n\
         env = {{ OPENCODE_CONFIG_CONTENT = {config:?}, OPENCODE_DISABLE_MODELS_FETCH = \"true\", \
         npm_config_registry = \"http://127.0.0.1:9/\" }}\n",
        config = config.to_string(),
    ));
    let lab = serving_with_m1(&w, &s);

    let (st, run) = lab.post(
        "/runs",
        &json!({"provider": "opencode", "workdir": m.workdir, "prompt": "write the marker", "host": "m1"}),
    );
    assert_eq!(st, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    let v = wait_for(Duration::from_secs(90), "OpenCode's permission request", || {
        Some(lab.view(&id)).filter(|v| v["pending_dialog"]["kind"] == "permission")
    });
    let d = &v["pending_dialog"];
    let once = d["options"].as_array().unwrap().iter().position(|o| o["description"] == "allow_once").unwrap();
    let (st, b) = lab
        .post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": d["tool_id"], "answers": [{"option": once}]}));
    assert_eq!(st, 202, "{b}");
    wait_for(Duration::from_secs(90), "the reply after the command", || {
        Some(lab.view(&id)).filter(|v| v["state"] == "idle" && v["messages"].to_string().contains("Ran it there."))
    });
    let ran = m.workdir.join("oc-there.txt");
    assert_eq!(std::fs::metadata(&ran).unwrap().uid(), m.uid, "run there as the login user");
    let call = standin.emitted_tool_uses().into_iter().find(|t| t.name == "bash").expect("the bash call");
    assert!(!standin.tool_results_for(&call.id).is_empty(), "the command's result reached the model");
    let (st, u) = lab.get(&format!("/runs/{id}/usage"));
    assert_eq!((st, &u["responses"]), (200, &json!(1)), "the turn's usage, counted once: {u}");
    let (st, b) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!((st, &b["state"]), (200, &json!("ended")), "{b}");
    drop(lab);
    standin.shutdown();
}

/// `lab hosts add m1 --ssh` for machine `s`, then lab serve for `w`, once m1 is linked.
fn serving_with_m1(w: &common::World, s: &SshMachine) -> common::Lab {
    let add = std::process::Command::new(common::LAB)
        .args(["hosts", "--home"])
        .arg(&w.home)
        .args(["add", "m1", "--ssh", &s.destination(), "--identity"])
        .arg(&s.client_key)
        .arg("--known-hosts")
        .arg(&s.known_hosts)
        .output()
        .unwrap();
    assert!(add.status.success(), "{}", String::from_utf8_lossy(&add.stderr));
    let lab = common::Lab::start(w);
    common::wait_for(Duration::from_secs(60), "host m1 linked over ssh", || {
        let (_, list) = lab.get("/hosts");
        list.as_array().unwrap().iter().find(|h| h["name"] == "m1" && h["state"] == "connected").cloned()
    });
    lab
}
