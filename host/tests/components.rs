//! The plugin loader against the real components built with the project.

use lab::agents::components::{fixtures, CallErrorKind, ComponentHost, Limits, ProviderSet, Source, Version};
use lab::agents::model::{Answer, Content, KeyOp};
use std::path::Path;
use std::time::{Duration, Instant};

fn host(cache: Option<&Path>) -> ComponentHost {
    ComponentHost::new(
        cache.map(Path::to_path_buf),
        Limits { call_deadline: Duration::from_millis(500), memory_bytes: 32 << 20 },
    )
    .unwrap()
}

#[test]
fn capability_is_detected_both_ways() {
    let h = host(None);
    let (plain, p) = h.load_file(Path::new(fixtures::PLAINLOG)).unwrap();
    assert_eq!(plain.info.name, "plainlog");
    assert!(!plain.dialog_hooker && !p.dialog_hooker());
    assert_eq!(plain.wit_packages, vec!["lab:provider@0.9.0".to_string()]);

    let (cc, c) = h.load_file(Path::new(fixtures::CLAUDE_CODE)).unwrap();
    assert_eq!(cc.info.name, "claude-code");
    assert!(cc.dialog_hooker && c.dialog_hooker());
    assert!(cc.capabilities.screen_reader && c.screen_reader());
    assert_eq!(cc.info.display_name, "Claude Code");
}

#[test]
fn components_built_against_0_1_0_load_next_to_0_2_0_ones() {
    let h = host(None);
    let (plain, p) = h.load_file(Path::new(fixtures::PLAINLOG_V0_1_0)).unwrap();
    assert_eq!(plain.wit_packages, vec!["lab:provider@0.1.0".to_string()]);
    assert_eq!(plain.capabilities.version, Version::V0_1_0);
    assert!(!plain.dialog_hooker && !p.screen_reader());
    // What 0.1.0 did not have is reported as such, not as a failure of the component.
    assert_eq!(p.self_test_samples().blocking().unwrap_err().kind, CallErrorKind::Unsupported);
    let out = p
        .parse_transcript(b"{\"type\":\"tool_use\",\"id\":\"a1\",\"name\":\"ask\",\"input\":{}}\n".to_vec())
        .blocking()
        .unwrap();
    assert!(matches!(&out.messages[0].content, Content::ToolUse(u) if u.id == "a1" && u.name == "ask"));

    let (cc, c) = h.load_file(Path::new(fixtures::CLAUDE_CODE_V0_1_0)).unwrap();
    assert_eq!((cc.info.name.as_str(), cc.capabilities.version), ("claude-code", Version::V0_1_0));
    assert!(c.dialog_hooker() && !c.screen_reader());
    // Its three hook-context commands, built by the host from generic bindings.
    let wiring = c.hook_wiring().blocking().unwrap();
    assert_eq!(wiring.len(), 3);
    let files =
        lab::store::paths::RunFiles::new(Path::new("/run/lab"), &lab::store::paths::RunId::parse("r-1").unwrap());
    let hooks = lab::runs::launch::hook_settings::commands(Path::new("/usr/bin/lab"), &files, wiring);
    let doc = c.hook_settings("r-1".into(), hooks).blocking().unwrap().expect("a settings document");
    assert!(doc.contains("/usr/bin/lab hook dialog-spool /run/lab/r-1.spool.json"), "{doc}");
    // The suffix 0.1.0 components append lands on the clear command `lab hook` takes.
    assert!(doc.contains("/usr/bin/lab hook dialog-clear /run/lab/r-1.spool.json --id-field tool_use_id"), "{doc}");
    assert!(doc.contains("/usr/bin/lab hook blocked-marker /run/lab/r-1.marker.json"), "{doc}");
    // Its key list becomes a plan with the 0.1.0 timings.
    let spool = br#"{"hook_event_name":"PreToolUse","tool_name":"AskUserQuestion","tool_use_id":"toolu_1","tool_input":{"questions":[{"question":"Q?","header":"H","multiSelect":false,"options":[{"label":"a","description":""},{"label":"b","description":""}]}]}}"#;
    let d = c.pending_dialog(spool.to_vec(), Vec::new()).blocking().unwrap().expect("a dialog");
    assert_eq!((d.id.as_str(), d.call_id.as_deref(), d.kind()), ("toolu_1", Some("toolu_1"), "question"));
    let plan = c.plan_answer(d.clone(), vec![Answer::Option(1)]).blocking().unwrap();
    assert_eq!(plan.pause, Duration::from_millis(250));
    assert_eq!(plan.drawn_within, Duration::from_millis(1500));
    assert_eq!(plan.steps.last(), Some(&KeyOp::Key("Enter".into())));
    assert!(!c.is_drawn(d.clone(), "anything".into()).blocking().unwrap());
    let err = c.plan_answer(d, vec![Answer::Feedback { option: 0, text: "x".into() }]).blocking().unwrap_err();
    assert!(err.refusal().is_some(), "{err}");
}

/// The SDK builds 0.9.0; what was built against 0.2.0 (the bundled claude-code and the
/// plainlog fixture, as main built them before the move) loads and runs as before.
#[test]
fn components_built_against_0_2_0_load_next_to_0_9_0_ones() {
    let h = host(None);
    let (now, _) = h.load_file(Path::new(fixtures::CLAUDE_CODE)).unwrap();
    assert_eq!(now.capabilities.version, Version::V0_9_0);
    let (plain, p) = h.load_file(Path::new(fixtures::PLAINLOG_V0_2_0)).unwrap();
    assert_eq!(plain.wit_packages, vec!["lab:provider@0.2.0".to_string()]);
    assert_eq!((plain.capabilities.version, plain.capabilities.acp), (Version::V0_2_0, false));
    assert!(p.self_test_samples().blocking().is_ok());
    let (cc, c) = h.load_file(Path::new(fixtures::CLAUDE_CODE_V0_2_0)).unwrap();
    assert_eq!((cc.info.name.as_str(), cc.capabilities.version), ("claude-code", Version::V0_2_0));
    assert!(c.dialog_hooker() && c.screen_reader());
    let spool = br#"{"hook_event_name":"PreToolUse","tool_name":"AskUserQuestion","tool_use_id":"toolu_1","tool_input":{"questions":[{"question":"Q?","header":"H","multiSelect":false,"options":[{"label":"a","description":""},{"label":"b","description":""}]}]}}"#;
    let d = c.pending_dialog(spool.to_vec(), Vec::new()).blocking().unwrap().expect("a dialog");
    assert_eq!((d.id.as_str(), d.kind()), ("toolu_1", "question"));
    let plan = c.plan_answer(d.clone(), vec![Answer::Option(1)]).blocking().unwrap();
    assert_eq!(plan.steps.last(), Some(&KeyOp::Key("Enter".into())));
    // The same calls give the same answers from the 0.9.0 build.
    let (_, c3) = h.load_file(Path::new(fixtures::CLAUDE_CODE)).unwrap();
    let d3 = c3.pending_dialog(spool.to_vec(), Vec::new()).blocking().unwrap().expect("a dialog");
    assert_eq!(d3, d);
    assert_eq!(c3.plan_answer(d3, vec![Answer::Option(1)]).blocking().unwrap(), plan);
}

/// Components built against 0.3.0 (before `sessions`) load as they are: their agent
/// can do nothing with an earlier conversation and `continue-session` is not theirs;
/// the same provider built against 0.4.0 or later resumes and forks.
#[test]
fn components_built_against_0_3_0_load_and_can_neither_resume_nor_fork() {
    use lab::agents::model::{Abilities, Continuation, EarlierRun, LaunchRequest};
    let h = host(None);
    let (old, o) = h.load_file(Path::new(fixtures::CLAUDE_CODE_V0_3_0)).unwrap();
    assert_eq!(old.wit_packages, vec!["lab:provider@0.3.0".to_string()]);
    assert_eq!((old.capabilities.version, old.capabilities.abilities), (Version::V0_3_0, Abilities::default()));
    assert!(o.dialog_hooker() && o.screen_reader());
    let req = LaunchRequest {
        run_id: "r-1".into(),
        session_id: "0b6f7c1e-1111-4222-8333-444455556666".into(),
        workdir: "/w".into(),
        prompt: "go on".into(),
        permission_mode: None,
        program: "/usr/bin/claude".into(),
        env: vec![("HOME".into(), "/home/op".into())],
        hooks: Vec::new(),
        settings_path: None,
    };
    let earlier = EarlierRun {
        session_id: "11111111-2222-4333-8444-555555555555".into(),
        transcript_path: None,
        workdir: "/w".into(),
    };
    let err = o.continue_session(req.clone(), Continuation::Resume, earlier.clone()).blocking().unwrap_err();
    assert_eq!(err.kind, CallErrorKind::Unsupported);
    let (plain, _) = h.load_file(Path::new(fixtures::PLAINLOG_V0_3_0)).unwrap();
    assert_eq!((plain.capabilities.version, plain.capabilities.abilities), (Version::V0_3_0, Abilities::default()));
    let (acp, _) = h.load_file(Path::new(fixtures::ACP_FIXTURE_V0_3_0)).unwrap();
    assert!(acp.capabilities.acp && acp.capabilities.version == Version::V0_3_0);

    let (now, n) = h.load_file(Path::new(fixtures::CLAUDE_CODE)).unwrap();
    assert_eq!(now.capabilities.abilities, Abilities { resume: true, fork: true });
    let spec = n.continue_session(req.clone(), Continuation::Fork, earlier).blocking().unwrap();
    assert_eq!(
        &spec.argv[1..5],
        ["--resume", "11111111-2222-4333-8444-555555555555", "--fork-session", "--session-id"]
    );
    // A 0.9.0 provider that keeps the SDK's default bodies: nothing.
    let (plain, p) = h.load_file(Path::new(fixtures::PLAINLOG)).unwrap();
    assert_eq!((plain.capabilities.version, plain.capabilities.abilities), (Version::V0_9_0, Abilities::default()));
    let msg = lab::agents::model::Message::text(lab::agents::model::Role::Assistant, "limit", "");
    assert_eq!(p.usage_limit(msg).blocking().unwrap(), None);
}

/// Usage (0.5.0): the bundled claude-code reads a response's tokens from its
/// transcript lines (each line of a response repeats them; the host keeps one per id);
/// components built against 0.4.0 load, resume as before, and report no usage.
#[test]
fn usage_is_read_by_0_5_0_components_and_0_4_0_ones_load_without_it() {
    use lab::agents::model::{Abilities, Tokens};
    let h = host(None);
    let (now, n) = h.load_file(Path::new(fixtures::CLAUDE_CODE)).unwrap();
    assert!(now.capabilities.reads_usage());
    let line = r#"{"type":"assistant","timestamp":"2026-12-05T01:00:00Z","message":{"id":"msg_1","model":"claude-haiku-4-5","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":7,"output_tokens":3,"cache_read_input_tokens":100,"cache_creation_input_tokens":20}}}"#;
    let report = n.read_usage(format!("{line}\n{line}\n").into_bytes()).blocking().unwrap();
    assert_eq!(report.responses.len(), 2);
    assert_eq!(report.responses[0].response_id, "msg_1");
    assert_eq!(report.responses[0].tokens, Tokens { input: 7, output: 3, cache_read: 100, cache_write: 20 });
    assert_eq!(report.context.map(|c| c.used), Some(127));

    for (file, acp) in [
        (fixtures::CLAUDE_CODE_V0_4_0, false),
        (fixtures::PLAINLOG_V0_4_0, false),
        (fixtures::ACP_FIXTURE_V0_4_0, true),
    ] {
        let (old, o) = h.load_file(Path::new(file)).unwrap();
        assert_eq!(old.wit_packages, vec!["lab:provider@0.4.0".to_string()], "{file}");
        assert_eq!((old.capabilities.version, old.capabilities.acp), (Version::V0_4_0, acp), "{file}");
        assert!(!old.capabilities.reads_usage(), "{file}");
        assert_eq!(o.read_usage(line.as_bytes().to_vec()).blocking().unwrap_err().kind, CallErrorKind::Unsupported);
    }
    let (old, o) = h.load_file(Path::new(fixtures::CLAUDE_CODE_V0_4_0)).unwrap();
    assert_eq!(old.capabilities.abilities, Abilities { resume: true, fork: true });
    assert_eq!(o.parse_transcript(format!("{line}\n").into_bytes()).blocking().unwrap().messages.len(), 1);
}

/// Sandboxes (0.6.0): the bundled claude-code says what its agent needs (its state,
/// its model API from the environment); a provider keeping the SDK's default needs
/// nothing; components built against 0.5.0 load, read usage as before, and cannot say
/// (the host then gives the safe default).
#[test]
fn sandbox_needs_come_from_0_6_0_components_and_0_5_0_ones_load_without_them() {
    let h = host(None);
    let (_, n) = h.load_file(Path::new(fixtures::CLAUDE_CODE)).unwrap();
    let env = vec![("ANTHROPIC_BASE_URL".to_string(), "http://127.0.0.1:4567".to_string())];
    let needs = n.sandbox_needs(env.clone()).blocking().unwrap();
    assert_eq!(needs.writable, ["~/.claude/", "~/.claude.json"]);
    assert_eq!(needs.hosts, ["127.0.0.1:4567"]);
    let (_, plain) = h.load_file(Path::new(fixtures::PLAINLOG)).unwrap();
    assert_eq!(plain.sandbox_needs(env.clone()).blocking().unwrap(), lab::sandbox::Needs::default());
    for (file, acp) in [
        (fixtures::CLAUDE_CODE_V0_5_0, false),
        (fixtures::PLAINLOG_V0_5_0, false),
        (fixtures::ACP_FIXTURE_V0_5_0, true),
    ] {
        let (old, o) = h.load_file(Path::new(file)).unwrap();
        assert_eq!(old.wit_packages, vec!["lab:provider@0.5.0".to_string()], "{file}");
        assert_eq!((old.capabilities.version, old.capabilities.acp), (Version::V0_5_0, acp), "{file}");
        assert_eq!(old.capabilities.reads_usage(), !acp, "{file}");
        assert_eq!(o.sandbox_needs(env.clone()).blocking().unwrap_err().kind, CallErrorKind::Unsupported);
    }
}

/// 0.8.0: a tmux provider says what answer rules need of its prompts (`answer-rules`);
/// the same provider built against 0.7.0 loads and runs, and cannot be asked (no rule
/// answers its prompts).
#[test]
fn prompt_facts_are_0_8_0_s_and_0_7_0_components_load_without_them() {
    let h = host(None);
    let spool = br#"{"session_id":"s","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"cargo test","description":"Run the tests"},"permission_suggestions":[]}"#;
    let (now, c) = h.load_file(Path::new(fixtures::CLAUDE_CODE)).unwrap();
    assert_eq!(now.capabilities.version, Version::V0_9_0);
    let d = c.pending_dialog(spool.to_vec(), Vec::new()).blocking().unwrap().expect("a dialog");
    let facts = c.prompt_facts(d.clone()).blocking().unwrap().expect("facts");
    assert_eq!(facts.subject.as_deref(), Some("cargo test"));
    assert_eq!((facts.allow_once, facts.refuse), (Some(0), Some(1)), "{d:?}");
    let (_, plain) = h.load_file(Path::new(fixtures::PLAINLOG)).unwrap();
    assert_eq!(plain.prompt_facts(d.clone()).blocking().unwrap_err().kind, CallErrorKind::Unsupported);
    for (file, acp) in [
        (fixtures::CLAUDE_CODE_V0_7_0, false),
        (fixtures::PLAINLOG_V0_7_0, false),
        (fixtures::ACP_FIXTURE_V0_7_0, true),
    ] {
        let (old, o) = h.load_file(Path::new(file)).unwrap();
        assert_eq!(old.wit_packages, vec!["lab:provider@0.7.0".to_string()], "{file}");
        assert_eq!((old.capabilities.version, old.capabilities.acp), (Version::V0_7_0, acp), "{file}");
        assert_eq!(o.prompt_facts(d.clone()).blocking().unwrap_err().kind, CallErrorKind::Unsupported, "{file}");
        if !acp {
            assert!(o.read_usage(Vec::new()).blocking().is_ok(), "{file}");
        }
    }
    let (_, old) = h.load_file(Path::new(fixtures::CLAUDE_CODE_V0_7_0)).unwrap();
    let d7 = old.pending_dialog(spool.to_vec(), Vec::new()).blocking().unwrap().expect("a dialog");
    assert_eq!(d7.id, d.id, "the same prompt, the same guard token");
}

/// 0.9.0: every provider may say where its agent keeps a login (`setup`), a tmux one
/// and an ACP one alike; one keeping the SDK's default says nothing; the same providers
/// built against 0.8.0 load and run, and cannot be asked.
#[test]
fn login_hints_are_0_9_0_s_and_0_8_0_components_load_without_them() {
    let h = host(None);
    let (_, c) = h.load_file(Path::new(fixtures::CLAUDE_CODE)).unwrap();
    let hints = c.login_hints(vec![]).blocking().unwrap().expect("hints");
    assert!(hints.files.iter().any(|f| f.starts_with("~/")), "{hints:?}");
    assert!(!hints.env.is_empty() && !hints.how.is_empty(), "{hints:?}");
    let moved = c.login_hints(vec![("CLAUDE_CONFIG_DIR".into(), "/srv/c".into())]).blocking().unwrap().unwrap();
    assert_eq!(moved.files, ["/srv/c/.credentials.json"], "the environment it starts with counts");
    for acp in [fixtures::GEMINI_CLI, fixtures::OPENCODE] {
        let (facts, a) = h.load_file(Path::new(acp)).unwrap();
        assert!(facts.capabilities.acp, "{acp}");
        assert!(a.login_hints(vec![]).blocking().unwrap().is_some(), "{acp}");
    }
    let (_, plain) = h.load_file(Path::new(fixtures::PLAINLOG)).unwrap();
    assert_eq!(plain.login_hints(vec![]).blocking().unwrap(), None, "the SDK's default");
    let (_, fake) = h.load_file(Path::new(fixtures::ACP_FIXTURE)).unwrap();
    assert_eq!(fake.login_hints(vec![]).blocking().unwrap(), None, "the SDK's default");
    for (file, acp) in [
        (fixtures::CLAUDE_CODE_V0_8_0, false),
        (fixtures::PLAINLOG_V0_8_0, false),
        (fixtures::ACP_FIXTURE_V0_8_0, true),
    ] {
        let (old, o) = h.load_file(Path::new(file)).unwrap();
        assert_eq!(old.wit_packages, vec!["lab:provider@0.8.0".to_string()], "{file}");
        assert_eq!((old.capabilities.version, old.capabilities.acp), (Version::V0_8_0, acp), "{file}");
        assert_eq!(o.login_hints(vec![]).blocking().unwrap_err().kind, CallErrorKind::Unsupported, "{file}");
        if !acp {
            assert!(o.read_usage(Vec::new()).blocking().is_ok(), "{file}");
        }
    }
    let spool = br#"{"session_id":"s","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"cargo test","description":"Run the tests"},"permission_suggestions":[]}"#;
    let (_, old) = h.load_file(Path::new(fixtures::CLAUDE_CODE_V0_8_0)).unwrap();
    let d8 = old.pending_dialog(spool.to_vec(), Vec::new()).blocking().unwrap().expect("a dialog");
    let facts = old.prompt_facts(d8).blocking().unwrap().expect("0.8.0's answer-rules still asked");
    assert_eq!(facts.subject.as_deref(), Some("cargo test"));
}

/// 0.7.0: an ACP provider reads what a turn used from its agent's own words
/// (`turn-usage`); one keeping the SDK's default says nothing; components built against
/// 0.6.0 load and run as before (a tmux one reads usage and says its sandbox needs, an
/// ACP one declares its agent) and cannot be asked `turn-usage`.
#[test]
fn turn_usage_is_0_7_0_s_and_0_6_0_components_load_without_it() {
    let h = host(None);
    let (_, fixture) = h.load_file(Path::new(fixtures::ACP_FIXTURE)).unwrap();
    assert_eq!(fixture.turn_usage(r#"{"stopReason":"end_turn"}"#.into()).blocking().unwrap(), vec![]);
    let (gem, g) = h.load_file(Path::new(fixtures::GEMINI_CLI)).unwrap();
    assert_eq!((gem.info.name.as_str(), gem.capabilities.acp), ("gemini-cli", true));
    let response = r#"{"stopReason":"end_turn","_meta":{"quota":{"token_count":{"input_tokens":20,"output_tokens":10},
        "model_usage":[{"model":"gemini-3.8-flash","token_count":{"input_tokens":10,"output_tokens":5}},
                       {"model":"auto","token_count":{"input_tokens":10,"output_tokens":5}}]}}}"#;
    let tokens = lab::agents::model::Tokens { input: 20, output: 10, cache_read: 0, cache_write: 0 };
    assert_eq!(g.turn_usage(response.into()).blocking().unwrap(), vec![("gemini-3.8-flash".to_string(), tokens)]);
    assert_eq!(g.turn_usage("not json".into()).blocking().unwrap(), vec![], "never fails");
    let env = vec![("ANTHROPIC_BASE_URL".to_string(), "http://127.0.0.1:4567".to_string())];
    for (file, acp) in [
        (fixtures::CLAUDE_CODE_V0_6_0, false),
        (fixtures::PLAINLOG_V0_6_0, false),
        (fixtures::ACP_FIXTURE_V0_6_0, true),
    ] {
        let (old, o) = h.load_file(Path::new(file)).unwrap();
        assert_eq!(old.wit_packages, vec!["lab:provider@0.6.0".to_string()], "{file}");
        assert_eq!((old.capabilities.version, old.capabilities.acp), (Version::V0_6_0, acp), "{file}");
        assert_eq!(old.capabilities.reads_usage(), !acp, "{file}");
        assert_eq!(o.turn_usage("{}".into()).blocking().unwrap_err().kind, CallErrorKind::Unsupported, "{file}");
        if acp {
            let launch = lab::agents::components::acp_declaration(&old, &o).unwrap();
            assert_eq!(launch.args, ["--declared-by", "component"]);
        } else {
            assert!(o.sandbox_needs(env.clone()).blocking().is_ok(), "{file}");
        }
    }
}

/// A 0.9.0 ACP provider: loaded, its declaration read, and nothing of a tmux provider
/// asked of it; in a provider set it is an ACP agent, not a tmux provider.
#[test]
fn an_acp_provider_declares_its_agent() {
    let h = host(None);
    let (facts, p) = h.load_file(Path::new(fixtures::ACP_FIXTURE)).unwrap();
    assert_eq!(facts.wit_packages, vec!["lab:provider@0.9.0".to_string()]);
    assert!(facts.capabilities.acp && !facts.dialog_hooker && !p.screen_reader());
    assert_eq!((facts.info.name.as_str(), facts.info.default_program.as_str()), ("fake-acp", "fake-acp"));
    assert_eq!(facts.info.permission_modes, ["ask", "yolo"]);
    let launch = lab::agents::components::acp_declaration(&facts, &p).unwrap();
    assert_eq!(launch.args, ["--declared-by", "component"]);
    assert_eq!(launch.env, [("FAKE_ACP_DECLARED".to_string(), "yes".to_string())]);
    assert_eq!(launch.start_timeout_secs, Some(20));
    let err = p.parse_transcript(b"x\n".to_vec()).blocking().unwrap_err();
    assert_eq!(err.kind, CallErrorKind::Unsupported);
    assert_eq!(p.hook_wiring().blocking().unwrap_err().kind, CallErrorKind::Unsupported);
    // A tmux provider has no declaration.
    let (_, plain) = h.load_file(Path::new(fixtures::PLAINLOG)).unwrap();
    assert_eq!(plain.acp_launch().blocking().unwrap_err().kind, CallErrorKind::Unsupported);

    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("providers");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixtures::ACP_FIXTURE, dir.join("fake-acp.wasm")).unwrap();
    let set = ProviderSet::load_all(&host(None), &dir);
    assert!(set.failed.is_empty(), "{:?}", set.failed);
    assert!(set.get("fake-acp").is_none(), "not a tmux provider");
    let (facts, launch) = set.get_acp("fake-acp").expect("an ACP provider");
    assert_eq!(facts.source, Source::File(dir.join("fake-acp.wasm")));
    assert_eq!(launch.args, ["--declared-by", "component"]);
    assert_eq!(set.loaded.len() + set.acp.len(), lab::agents::components::BUNDLED.len() + 1);
    assert!(set.acp_handle("fake-acp").is_some(), "kept to read what its agent says of a turn");
}

#[test]
fn a_base_only_component_refuses_dialog_hooker_calls_cleanly() {
    let h = host(None);
    let (_, p) = h.load_file(Path::new(fixtures::PLAINLOG)).unwrap();
    let err = p.hook_settings("r".into(), Vec::new()).blocking().unwrap_err();
    assert_eq!(err.kind, CallErrorKind::Unsupported);
    // and it still works afterwards
    assert_eq!(p.info().blocking().unwrap().name, "plainlog");
}

#[test]
fn a_looping_call_is_stopped_by_its_deadline_and_the_provider_recovers() {
    let h = host(None);
    let (_, p) = h.load_file(Path::new(fixtures::UNRULY)).unwrap();
    let start = Instant::now();
    let err = p.parse_transcript(b"loop".to_vec()).blocking().unwrap_err();
    let took = start.elapsed();
    assert!(matches!(err.kind, CallErrorKind::Timeout { millis: 500 }), "{err}");
    assert!(took < Duration::from_secs(5), "deadline took {took:?}");
    assert!(err.to_string().contains("deadline"), "{err}");
    // The store was rebuilt: ordinary calls work again.
    assert!(p.parse_transcript(b"fine".to_vec()).blocking().unwrap().messages.is_empty());
}

#[test]
fn a_memory_hog_hits_the_cap_and_the_provider_recovers() {
    let h = host(None);
    let (_, p) = h.load_file(Path::new(fixtures::UNRULY)).unwrap();
    let err = p.parse_transcript(b"hog".to_vec()).blocking().unwrap_err();
    assert_eq!(err.kind, CallErrorKind::OutOfMemory { cap_mib: 32 }, "{err}");
    assert!(p.parse_transcript(b"fine".to_vec()).blocking().is_ok());
}

#[test]
fn a_panicking_component_traps_with_a_clear_error() {
    let h = host(None);
    let (_, p) = h.load_file(Path::new(fixtures::UNRULY)).unwrap();
    let err = p.parse_transcript(b"panic".to_vec()).blocking().unwrap_err();
    assert!(matches!(err.kind, CallErrorKind::Trap(_)), "{err}");
    assert!(err.to_string().starts_with("provider `unruly`: `parse-transcript` trapped"), "{err}");
    assert!(p.parse_transcript(b"fine".to_vec()).blocking().is_ok());
}

#[test]
fn bad_files_are_reported_and_skipped() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("providers");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("garbage.wasm"), b"not wasm at all").unwrap();
    // A core module, not a component.
    std::fs::write(dir.join("core.wasm"), b"\0asm\x01\0\0\0").unwrap();
    std::fs::copy(fixtures::PLAINLOG, dir.join("plainlog.wasm")).unwrap();
    std::fs::write(dir.join("ignored.txt"), b"x").unwrap();
    let set = ProviderSet::load_all(&host(None), &dir);
    let mut names: Vec<_> = set.facts().map(|f| f.info.name.clone()).collect();
    names.sort();
    let mut want: Vec<String> = lab::agents::components::BUNDLED.iter().map(|(n, _)| n.to_string()).collect();
    want.push("plainlog".into());
    want.sort();
    assert_eq!(names, want);
    assert_eq!(set.failed.len(), 2, "{:?}", set.failed);
    for f in &set.failed {
        assert!(matches!(&f.source, Source::File(p) if p.extension().unwrap() == "wasm"));
        assert!(!f.error.is_empty());
    }
}

#[test]
fn a_dropped_in_component_replaces_the_bundled_one_of_the_same_name() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("providers");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixtures::CLAUDE_CODE, dir.join("my-claude.wasm")).unwrap();
    let set = ProviderSet::load_all(&host(None), &dir);
    let (facts, _) = set.get("claude-code").unwrap();
    assert_eq!(facts.source, Source::File(dir.join("my-claude.wasm")));
    // Replaced, not added: as many providers as are bundled.
    assert_eq!(set.loaded.len() + set.acp.len(), lab::agents::components::BUNDLED.len());
}

/// A component another user could have written (the file or `providers/` writable by
/// group or others) is never loaded: the bundled provider stays, and the failure says
/// why. Before, any readable `.wasm` there was loaded.
#[test]
fn a_component_others_could_write_is_not_loaded() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("providers");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("my-claude.wasm");
    std::fs::copy(fixtures::CLAUDE_CODE, &file).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let set = ProviderSet::load_all(&host(None), &dir);
    assert_eq!(set.get("claude-code").unwrap().0.source, Source::Bundled("claude-code"));
    assert_eq!(set.failed.len(), 1, "{:?}", set.failed.iter().map(|f| &f.error).collect::<Vec<_>>());
    assert!(set.failed[0].error.contains("writable by group or others (mode 0666)"), "{}", set.failed[0].error);

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let set = ProviderSet::load_all(&host(None), &dir);
    assert_eq!(set.get("claude-code").unwrap().0.source, Source::Bundled("claude-code"));
    assert!(set.failed[0].error.contains("providers: it is writable by group or others"), "{}", set.failed[0].error);

    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let set = ProviderSet::load_all(&host(None), &dir);
    assert_eq!(set.get("claude-code").unwrap().0.source, Source::File(file), "the operator's own loads");
}

#[test]
fn the_compile_cache_hits_and_misses_on_change() {
    let cache = tempfile::tempdir().unwrap();
    let h = host(Some(cache.path()));
    let bytes = std::fs::read(fixtures::PLAINLOG).unwrap();
    let (f1, _) = h.load(Source::Bundled("plainlog"), &bytes).unwrap();
    assert!(!f1.from_cache);
    let (f2, _) = h.load(Source::Bundled("plainlog"), &bytes).unwrap();
    assert!(f2.from_cache);
    // A damaged cache entry is recompiled, not trusted.
    for e in std::fs::read_dir(cache.path()).unwrap() {
        std::fs::write(e.unwrap().path(), b"damaged").unwrap();
    }
    let (f3, p3) = h.load(Source::Bundled("plainlog"), &bytes).unwrap();
    assert!(!f3.from_cache);
    assert_eq!(p3.info().blocking().unwrap().name, "plainlog");
    // Different component bytes never hit another component's entry.
    let other = std::fs::read(fixtures::UNRULY).unwrap();
    let (f4, _) = h.load(Source::Bundled("unruly"), &other).unwrap();
    assert!(!f4.from_cache);
}

/// `lab providers check` on the bundled hooker provider and on components built
/// against WIT 0.1.0.
fn report(file: &Path) -> (anyhow::Result<lab::cli::check::Outcome>, String) {
    let mut out = Vec::new();
    let res = lab::cli::check::check(file, Some(std::path::PathBuf::from("/nonexistent/lab-home")), &mut out);
    (res, String::from_utf8(out).unwrap())
}

#[test]
fn check_passes_the_bundled_hooker_provider_with_its_hooker_exercised() {
    let (res, text) = report(Path::new(fixtures::CLAUDE_CODE));
    assert_eq!(res.unwrap().failures, 0, "{text}");
    assert!(text.contains("exports      base, dialog-hooker, screen-reader"), "{text}");
    assert!(text.contains("hook-settings"), "{text}");
    assert!(text.contains("plan-answer(AskUserQuestion, first option)"), "{text}");
    assert!(text.contains("replaces lab's bundled `claude-code`"), "{text}");
}

#[test]
fn check_passes_components_built_against_0_1_0() {
    for f in [fixtures::PLAINLOG_V0_1_0, fixtures::CLAUDE_CODE_V0_1_0] {
        let (res, text) = report(Path::new(f));
        assert_eq!(res.unwrap().failures, 0, "{text}");
        assert!(text.contains("lab:provider@0.1.0 (this lab loads"), "{text}");
        assert!(text.contains("(no self-test samples: built against lab:provider@0.1.0)"), "{text}");
    }
}

/// The folder's changes, loaded while the old builds go on: a new build serves, a live
/// handle of the old one still answers, a corrupt build is refused and the one before
/// stays, a removed file is gone.
#[test]
fn a_reload_swaps_builds_and_keeps_the_old_ones_working() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("providers");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("plainlog.wasm");
    std::fs::copy(fixtures::PLAINLOG_V0_2_0, &file).unwrap();
    let h = host(None);
    let one = ProviderSet::load_all(&h, &dir);
    let (old_facts, old) = one.get("plainlog").unwrap().clone();
    assert_eq!(old_facts.capabilities.version, Version::V0_2_0);

    // Unchanged: the same build (nothing compiled again).
    let same = one.reload(&h, &dir);
    assert_eq!(same.get("plainlog").unwrap().0.digest, old_facts.digest);

    std::fs::copy(fixtures::PLAINLOG, &file).unwrap();
    let two = one.reload(&h, &dir);
    let (new_facts, _) = two.get("plainlog").unwrap();
    assert_eq!(new_facts.capabilities.version, Version::V0_9_0);
    assert_ne!(new_facts.digest, old_facts.digest);
    assert!(two.failed.is_empty(), "{:?}", two.failed);
    drop(one);
    // The old build's instance still serves whoever holds it.
    let out = old.parse_transcript(b"{\"role\":\"user\",\"text\":\"hi\",\"ts\":\"t1\"}\n".to_vec()).blocking().unwrap();
    assert_eq!(out.messages.len(), 1, "{out:?}");

    std::fs::write(&file, b"\0asm but not really").unwrap();
    let three = two.reload(&h, &dir);
    assert_eq!(three.get("plainlog").unwrap().0.digest, new_facts.digest, "the build before stays");
    assert_eq!(three.failed.len(), 1);
    let why = &three.failed[0].error;
    assert!(why.contains("not a loadable WebAssembly component") && why.contains("stays in service"), "{why}");

    std::fs::remove_file(&file).unwrap();
    let four = three.reload(&h, &dir);
    assert!(four.get("plainlog").is_none() && four.failed.is_empty());
    assert_eq!(four.loaded.len() + four.acp.len(), lab::agents::components::BUNDLED.len());
}
