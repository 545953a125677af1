//! Security tests: state on disk (docs/security.md "What is on disk"). A damaged
//! registry is a clear error; modes hold whatever the umask while the agent keeps the
//! operator's; only lab's own compiled code is loaded from the cache; hooks killed
//! mid-write leave nothing behind once the run ends or lab restarts.

use crate::common::*;
use serde_json::{json, Value};
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

fn idle_script() -> Value {
    json!({"steps": [{"say": "Ready."}, {"idle": {}}]})
}

fn run_id(run: &Value) -> String {
    run["id"].as_str().unwrap().to_string()
}

/// `lab serve` on `home` that is expected to refuse to start: its exit code and stderr.
fn serve_expecting_exit(home: &Path) -> (Option<i32>, String) {
    let mut child = Command::new(LAB)
        .args(["serve", "--addr", "127.0.0.1:0", "--home"])
        .arg(home)
        .env("LAB_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("lab serve kept running on a damaged registry");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    (status.code(), err)
}

/// A registry written by a real `lab serve` holding one run.
fn real_registry() -> Vec<u8> {
    let w = World::new();
    w.use_fake_claude(&idle_script());
    let lab = w.serve();
    let id = run_id(&lab.create_run(&w, "claude-code", "hello"));
    lab.wait_state(&id, "idle");
    lab.stop();
    std::fs::read(w.home.join("registry.redb")).unwrap()
}

#[test]
fn a_damaged_registry_is_a_clear_error_and_is_left_untouched() {
    let good = real_registry();
    let mut x = 0x9E3779B97F4A7C15u64;
    let mut noise = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    };
    let over = |at: usize, with: Vec<u8>| {
        let mut b = good.clone();
        b[at..at + with.len()].copy_from_slice(&with);
        b
    };
    // Where the run record lives (its prompt), not the preallocated empty middle.
    let record = good.windows(5).position(|w| w == b"hello").expect("the record is in the file");
    let cases = vec![
        ("truncated to 4 KiB", good[..4096].to_vec()),
        ("0 bytes", Vec::new()),
        ("random bytes over the header", over(0, noise(256))),
        ("random bytes in the middle (over the records)", over(record.saturating_sub(2048), noise(8192))),
        ("a text file", b"registry? no, a shopping list\n".repeat(100)),
    ];
    for (what, bytes) in cases {
        let w = World::new();
        let registry = w.home.join("registry.redb");
        std::fs::write(&registry, &bytes).unwrap();
        let (code, stderr) = serve_expecting_exit(&w.home);
        assert_eq!(code, Some(1), "{what}: exit code {code:?} (101 would be a panic); stderr:\n{stderr}");
        assert!(!stderr.contains("panicked at"), "{what}: {stderr}");
        assert!(stderr.contains(&format!("{} is damaged", "registry.redb")), "{what}: {stderr}");
        assert!(stderr.contains(&registry.display().to_string()), "{what}: the path is named: {stderr}");
        assert!(stderr.contains("mv "), "{what}: says what to do: {stderr}");
        assert_eq!(std::fs::read(&registry).unwrap(), bytes, "{what}: the registry was changed");
    }
}

#[test]
fn a_registry_left_by_a_killed_lab_still_opens() {
    let w = World::new();
    w.use_fake_claude(&idle_script());
    let mut lab = w.serve();
    let id = run_id(&lab.create_run(&w, "claude-code", "hello"));
    lab.wait_state(&id, "idle");
    lab.child.kill().unwrap(); // SIGKILL: no clean close of the database
    lab.child.wait().unwrap();
    drop(lab);
    let lab = w.serve();
    let (status, runs) = lab.get("/runs");
    assert_eq!(status, 200);
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
}

/// The modes every path under lab's home must have: dirs 0700, lab's files 0600,
/// sockets with no group/other bits. `lab.toml` is the operator's file.
fn check_home_modes(home: &Path) -> usize {
    let mut seen = 0;
    let mut stack = vec![home.to_path_buf()];
    let mut problems = Vec::new();
    while let Some(p) = stack.pop() {
        let meta = std::fs::symlink_metadata(&p).unwrap();
        let m = meta.mode() & 0o7777;
        let ft = meta.file_type();
        seen += 1;
        if ft.is_dir() {
            if m != 0o700 {
                problems.push(format!("{} is a directory with mode {m:04o}", p.display()));
            }
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else if ft.is_socket() {
            if m & 0o077 != 0 {
                problems.push(format!("{} is a socket with mode {m:04o}", p.display()));
            }
        } else if p.file_name().is_some_and(|n| n == "lab.toml") {
            seen -= 1;
        } else if !ft.is_file() || m != 0o600 {
            problems.push(format!("{} has mode {m:04o} ({ft:?})", p.display()));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    seen
}

/// The process umask of the agent in a run's tmux pane.
fn agent_umask(w: &World, id: &str) -> String {
    let out = w.tmux(&["list-panes", "-t", &format!("lab-{id}"), "-F", "#{pane_pid}"]);
    let pid = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status.lines().find_map(|l| l.strip_prefix("Umask:")).unwrap().trim().to_string()
}

#[test]
fn modes_hold_whatever_the_umask_and_the_agent_keeps_the_operators() {
    let w = World::new();
    w.use_fake_claude(&json!({"steps": [{"say": "Asking."}, {"ask": three_options()}, {"idle": {}}]}));
    // A home a previous, umask-following lab left too open.
    std::fs::create_dir_all(w.home.join("logs")).unwrap();
    std::fs::write(w.home.join("logs/lab.log"), "old line\n").unwrap();
    std::fs::write(w.home.join("token"), format!("{}\n", "ab".repeat(32))).unwrap();
    let too_open = [
        (w.home.clone(), 0o775),
        (w.home.join("logs"), 0o775),
        (w.home.join("logs/lab.log"), 0o664),
        (w.home.join("token"), 0o644),
    ];
    for (p, m) in too_open {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    }
    let start = |w: &World| {
        Lab::start_with(w, |cmd| {
            // SAFETY: umask is async-signal-safe and cannot fail.
            unsafe {
                cmd.pre_exec(|| {
                    libc::umask(0o002);
                    Ok(())
                });
            }
        })
    };
    let lab = start(&w);
    let id = run_id(&lab.create_run(&w, "claude-code", "hello"));
    lab.wait_state(&id, "question");
    assert!(w.runtime().join(format!("{id}.spool.json")).exists());
    assert!(w.runtime().join(format!("{id}.settings.json")).exists());
    assert_eq!(agent_umask(&w, &id), "0002", "the agent runs with the operator's umask");

    let seen = check_home_modes(&w.home);
    // home, logs/, lab.log, token, registry, cache/, cache/components/, an entry,
    // runtime/, settings, spool, tmux.sock
    assert!(seen >= 12, "only {seen} paths under the home");
    assert!(std::fs::read_to_string(w.home.join("logs/lab.log")).unwrap().starts_with("old line\n"));
    lab.stop();

    // A restart (the cache is used now) keeps it so.
    let lab = start(&w);
    lab.wait_state(&id, "question");
    check_home_modes(&w.home);
}

/// Fourth review, row 6: a component in `providers/` that is a symlink into a folder
/// others may write is refused (the folder named), though the file it leads to is the
/// operator's own; its bundled namesake goes on serving. The same component moved
/// into a folder of the operator's loads.
#[test]
fn a_component_symlinked_into_a_shared_folder_is_not_loaded() {
    use lab::agents::components::fixtures;
    let w = World::new();
    let shared = w.dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::copy(fixtures::PLAINLOG, shared.join("plainlog.wasm")).unwrap();
    std::fs::set_permissions(&shared, PermissionsExt::from_mode(0o777)).unwrap();
    std::fs::set_permissions(shared.join("plainlog.wasm"), PermissionsExt::from_mode(0o644)).unwrap();
    let providers = w.home.join("providers");
    std::fs::create_dir_all(&providers).unwrap();
    let link = providers.join("plainlog.wasm");
    std::os::unix::fs::symlink(shared.join("plainlog.wasm"), &link).unwrap();
    let lab = w.serve();
    let (status, list) = lab.get("/providers");
    assert_eq!(status, 200, "{list}");
    let rows = list.as_array().unwrap();
    assert!(!rows.iter().any(|p| p["name"] == "plainlog" && p["state"] == "serving"), "loaded: {list}");
    let refused = rows.iter().find(|p| p["name"] == "plainlog" && p["state"] == "refused").expect("refused");
    let why = refused["error"].as_str().unwrap();
    assert!(why.contains(&format!("its folder {}", shared.display())) && why.contains("not sticky"), "{why}");
    // Moved into a folder of the operator's own: it loads (the providers folder is
    // watched).
    let own = w.dir.path().join("own");
    std::fs::create_dir(&own).unwrap();
    std::fs::rename(shared.join("plainlog.wasm"), own.join("plainlog.wasm")).unwrap();
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(own.join("plainlog.wasm"), &link).unwrap();
    wait_for(Duration::from_secs(20), "the component from the operator's folder", || {
        let (_, list) = lab.get("/providers");
        list.as_array()?.iter().find(|p| p["name"] == "plainlog" && p["state"] == "serving").cloned()
    });
    std::fs::set_permissions(&shared, PermissionsExt::from_mode(0o700)).unwrap();
    lab.stop();
}

#[test]
fn only_lab_s_own_compiled_code_is_loaded_from_the_cache() {
    use lab::agents::components::{fixtures, ComponentHost, Limits};
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("cache/components");
    let host = ComponentHost::new(Some(dir.clone()), Limits::default()).unwrap();
    let bytes = std::fs::read(fixtures::PLAINLOG).unwrap();
    assert!(!host.compile(&bytes).unwrap().1, "an empty cache compiles");
    let entries: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(entries.len(), 1);
    let entry = entries[0].clone();
    assert_eq!(mode(&entry), 0o600);
    assert_eq!(mode(&dir), 0o700);
    assert!(host.compile(&bytes).unwrap().1, "a private entry of lab's own is loaded");

    let ino = |p: &Path| std::fs::symlink_metadata(p).unwrap().ino();
    type Tamper<'a> = (&'static str, Box<dyn Fn() + 'a>);
    let mut tampered: Vec<Tamper<'_>> = vec![
        (
            "group-writable entry",
            Box::new(|| std::fs::set_permissions(&entry, PermissionsExt::from_mode(0o620)).unwrap()),
        ),
        (
            "world-writable entry",
            Box::new(|| std::fs::set_permissions(&entry, PermissionsExt::from_mode(0o602)).unwrap()),
        ),
        (
            "entry is a symlink",
            Box::new(|| {
                let real = d.path().join("real.cwasm");
                std::fs::copy(&entry, &real).unwrap();
                std::fs::remove_file(&entry).unwrap();
                std::os::unix::fs::symlink(&real, &entry).unwrap();
            }),
        ),
        (
            "entry is a fifo",
            Box::new(|| {
                std::fs::remove_file(&entry).unwrap();
                let c = std::ffi::CString::new(entry.to_str().unwrap()).unwrap();
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            }),
        ),
        (
            "group-writable cache directory",
            Box::new(|| std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o770)).unwrap()),
        ),
    ];
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        tampered.push((
            "entry owned by another user",
            Box::new(|| std::os::unix::fs::chown(&entry, Some(4242), Some(4242)).unwrap()),
        ));
    }
    for (what, tamper) in tampered {
        tamper();
        // What sits at the path after the tampering (a symlink or fifo itself): it still
        // exists when the replacement is created, so the two inodes must differ. (An
        // inode the tampering freed could be reused by the replacement.)
        let before = ino(&entry);
        let start = Instant::now();
        let (_, cached) = host.compile(&bytes).unwrap();
        assert!(!cached, "{what}: the entry was loaded");
        assert!(start.elapsed() < Duration::from_secs(60), "{what}: took {:?}", start.elapsed());
        // Replaced atomically by a fresh private entry, which is then used.
        let meta = std::fs::symlink_metadata(&entry).unwrap();
        assert!(meta.file_type().is_file(), "{what}: {:?}", meta.file_type());
        assert_eq!(meta.mode() & 0o7777, 0o600, "{what}");
        assert_eq!(meta.uid(), unsafe { libc::geteuid() }, "{what}");
        assert_ne!(meta.ino(), before, "{what}: the entry was replaced, not rewritten in place");
        assert_eq!(mode(&dir), 0o700, "{what}");
        assert!(host.compile(&bytes).unwrap().1, "{what}: the fresh entry is used");
    }
}

/// Where a hook for run `id` spools.
fn spool_of(w: &World, id: &str) -> PathBuf {
    w.runtime().join(format!("{id}.spool.json"))
}

fn temp_files(runtime: &Path, id: Option<&str>) -> Vec<String> {
    std::fs::read_dir(runtime)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') && n.contains(".tmp."))
        .filter(|n| id.is_none_or(|id| n.starts_with(&format!(".{id}."))))
        .collect()
}

/// Plant a temp file as a hook killed mid-write leaves it, `age` old.
fn plant_temp(runtime: &Path, id: &str, tag: u32, age: Duration) -> PathBuf {
    let p = runtime.join(format!(".{id}.spool.json.tmp.{tag}.{tag}"));
    let f = std::fs::File::create(&p).unwrap();
    f.set_modified(SystemTime::now() - age).unwrap();
    p
}

/// A hook payload of about `size` bytes.
fn payload(size: usize) -> Vec<u8> {
    format!(r#"{{"tool_use_id":"toolu_big","tool_name":"X","pad":"{}"}}"#, "y".repeat(size)).into_bytes()
}

fn hook(spool: &Path) -> Command {
    let mut c = Command::new(LAB);
    c.args(["hook", "spool-write"]).arg(spool).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

#[test]
fn hooks_killed_mid_write_leave_nothing_after_stop_and_restart() {
    let w = World::new();
    w.use_fake_claude(&idle_script());
    let lab = w.serve();
    let id = run_id(&lab.create_run(&w, "claude-code", "hello"));
    let other = run_id(&lab.create_run(&w, "claude-code", "hello again"));
    lab.wait_state(&id, "idle");
    let spool = spool_of(&w, &id);
    let body = payload(900 << 10);

    // How long one uninterrupted write takes, to aim the kills into it.
    let t0 = Instant::now();
    let mut c = hook(&spool).spawn().unwrap();
    c.stdin.take().unwrap().write_all(&body).unwrap();
    let out = c.wait_with_output().unwrap();
    let full = t0.elapsed();
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    assert_eq!(std::fs::read(&spool).unwrap(), body);
    std::fs::remove_file(&spool).unwrap();

    let mut left_behind = 0;
    let mut x = 12345u64;
    for i in 0..100u32 {
        let mut c = hook(&spool).spawn().unwrap();
        let mut stdin = c.stdin.take().unwrap();
        // Streamed in pieces, then killed somewhere between "stdin done" and "renamed".
        for piece in body.chunks(body.len() / 4 + 1) {
            stdin.write_all(piece).unwrap();
            std::thread::sleep(Duration::from_micros(200));
        }
        drop(stdin);
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let delay = full.mul_f64(((x >> 33) % 1000) as f64 / 1000.0);
        std::thread::sleep(delay);
        unsafe {
            libc::kill(c.id() as i32, libc::SIGKILL);
        }
        c.wait().unwrap();
        // Never a partial spool: absent or whole.
        if let Ok(got) = std::fs::read(&spool) {
            assert_eq!(got.len(), body.len(), "kill {i}: a partial spool");
        }
        left_behind = temp_files(&w.runtime(), Some(&id)).len();
    }
    // Whether the kills landed in the write window depends on the machine: plant two
    // leftovers as well, one fresh and one old.
    plant_temp(&w.runtime(), &id, 1, Duration::ZERO);
    plant_temp(&w.runtime(), &id, 2, Duration::from_secs(3600));
    eprintln!("{left_behind} temp files left by the kills themselves");

    let (status, body_) = lab.post(&format!("/runs/{id}/stop"), &json!({}));
    assert_eq!(status, 200, "{body_}");
    assert_eq!(temp_files(&w.runtime(), Some(&id)), Vec::<String>::new(), "after /stop");
    assert!(!spool.exists());

    // Start-up: the other run is still active. Its old temp file and those of runs
    // lab does not know go; a fresh one (a hook may be writing it right now) stays
    // until the run ends.
    let old = plant_temp(&w.runtime(), &other, 3, Duration::from_secs(120));
    let fresh = plant_temp(&w.runtime(), &other, 4, Duration::ZERO);
    let stray = plant_temp(&w.runtime(), "r-000000000000", 5, Duration::ZERO);
    lab.stop();
    let lab = w.serve();
    lab.wait_state(&other, "idle");
    assert!(!old.exists() && !stray.exists(), "{:?}", temp_files(&w.runtime(), None));
    assert!(fresh.exists());
    let (status, _) = lab.post(&format!("/runs/{other}/stop"), &json!({}));
    assert_eq!(status, 200);
    assert_eq!(temp_files(&w.runtime(), None), Vec::<String>::new(), "after the last /stop");
    lab.stop();
    let _lab = w.serve();
    assert_eq!(temp_files(&w.runtime(), None), Vec::<String>::new(), "after a restart");
    assert_eq!(runtime_files(&w.runtime()), Vec::<String>::new(), "runtime/ is empty: no run is active");
}

#[test]
fn a_runaway_hook_payload_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let spool = d.path().join("r-1.spool.json");
    let mut c = hook(&spool).spawn().unwrap();
    let mut stdin = c.stdin.take().unwrap();
    // 64 MiB offered; the hook stops reading after its limit and exits.
    let writer = std::thread::spawn(move || {
        let chunk = vec![b' '; 1 << 20];
        for _ in 0..64 {
            if stdin.write_all(&chunk).is_err() {
                return false;
            }
        }
        true
    });
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("limit"), "{stderr}");
    assert!(!writer.join().unwrap(), "the hook read everything instead of stopping at its limit");
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "nothing written, no temp file");
}

/// A home another local user could plant files in is refused at start, saying which
/// path and why: under a directory others may write that is not sticky, with
/// `runtime/` (or another of lab's directories) a symlink, or with a `lab.toml` others
/// may write (it names the agent's program). Before, lab started on each of them.
#[test]
fn a_home_others_could_plant_files_in_is_refused_at_start() {
    let d = tempfile::tempdir().unwrap();
    let shared = d.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (code, err) = serve_expecting_exit(&shared.join("h"));
    assert_ne!(code, Some(0));
    assert!(
        err.contains(&format!("{} cannot hold lab's home", shared.display())) && err.contains("not sticky"),
        "{err}"
    );
    assert!(!shared.join("h").exists(), "nothing was created there");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();

    let w = World::new();
    w.use_fake_claude(&idle_script());
    let elsewhere = d.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, w.home.join("runtime")).unwrap();
    let (code, err) = serve_expecting_exit(&w.home);
    assert_ne!(code, Some(0));
    assert!(err.contains("runtime: it is a symlink"), "{err}");
    std::fs::remove_file(w.home.join("runtime")).unwrap();

    let config = w.home.join("lab.toml");
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (code, err) = serve_expecting_exit(&w.home);
    assert_ne!(code, Some(0));
    assert!(err.contains("lab.toml: it is writable by group or others (mode 0666)"), "{err}");
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();

    // Fixed, the same home serves.
    let lab = w.serve();
    let id = run_id(&lab.create_run(&w, "claude-code", "hello"));
    lab.wait_state(&id, "idle");
}

/// `lab agent-exec` runs only a launch file `lab serve` could have written: a 0600
/// regular file of lab's user in a 0700 directory of lab's user. A symlink, a file
/// others may read or write, one in a directory others may use (or, run as root,
/// another user's) runs nothing. Before, it ran whatever file was at the path.
#[test]
fn agent_exec_runs_only_lab_s_own_launch_file() {
    let d = tempfile::tempdir().unwrap();
    let runtime = d.path().join("runtime");
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let marker = d.path().join("ran");
    let launch = serde_json::to_vec(&json!({
        "argv": ["/bin/sh", "-c", format!("touch {}", marker.display())],
        "workdir": d.path(),
        "env": {"PATH": "/usr/bin:/bin"},
    }))
    .unwrap();
    let exec = |file: &Path| {
        let out =
            Command::new(LAB).args(["agent-exec", "--launch-file"]).arg(file).stdin(Stdio::null()).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let write = |name: &str, mode: u32| {
        let p = runtime.join(name);
        std::fs::write(&p, &launch).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    };
    let refused = |file: &Path, why: &str| {
        let (code, err) = exec(file);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(why), "{why}: {err}");
        assert!(!marker.exists(), "{} ran", file.display());
    };
    refused(&write("open.launch.json", 0o644), "mode 0644");
    let target = write("target.launch.json", 0o600);
    let link = runtime.join("link.launch.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    refused(&link, "symlink");
    if unsafe { libc::geteuid() } == 0 {
        let theirs = write("theirs.launch.json", 0o600);
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        refused(&theirs, "owned by uid 65534");
    }
    let file = write("ok.launch.json", 0o600);
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o770)).unwrap();
    refused(&file, "mode 0770");
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let file = write("ok.launch.json", 0o600);
    let (code, err) = exec(&file);
    assert_eq!(code, Some(0), "{err}");
    assert!(marker.exists(), "lab's own launch file runs");
    assert!(!file.exists(), "and is deleted");
}
