//! Launch and answer with no wasm and no tmux: lab's own `Runs` (registry, launch,
//! spool, tailer, answer guard, playback) on a fake provider and the terminal in
//! memory, asserting on what the provider was asked and what was started and typed —
//! as zellij tests its panes against fakes.

use lab::agents::components::{Capabilities, ComponentFacts, Source, Version};
use lab::agents::model::{
    Answer, AnswerPlan, Blocked, Channel, Dialog, DialogBody, DialogOption, HookBinding, HookCommand, KeyOp,
    LaunchRequest, LaunchSpec, Message, ParseOutput, ProviderInfo, Role, SessionFacts, ToolUse, Transcript,
};
use lab::agents::provider::{CallError, CallErrorKind, Provider, Reply};
use lab::machines::terminal::memory::{Input, MemoryTerminal};
use lab::runs::providers::{Pinned, Providers};
use lab::runs::{AnswerState, CreateRun, Seams};
use lab::store::paths::Home;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The agent's prompt on its screen, as the fake draws it.
const PROMPT_ON_SCREEN: &str = "Deploy now?\n> 1. Yes\n  2. No";

/// A provider for a made-up agent: transcript lines `{"text"}`; spools `{"title",
/// "options"}` (a generic prompt); answers are Down × option, then Enter. It keeps
/// what it was asked.
#[derive(Default)]
struct Fake {
    launches: Mutex<Vec<LaunchRequest>>,
    settings_for: Mutex<Vec<(String, Vec<HookCommand>)>>,
    plans: Mutex<Vec<Vec<Answer>>>,
}

fn reply<T: Send + 'static>(v: T) -> Reply<T> {
    Box::pin(std::future::ready(Ok(v)))
}

impl Provider for Fake {
    fn dialog_hooker(&self) -> bool {
        true
    }
    fn parse_transcript(&self, chunk: Vec<u8>) -> Reply<ParseOutput> {
        let mut out = ParseOutput::default();
        for line in chunk.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let v: Value = serde_json::from_slice(line).unwrap();
            out.messages.push(Message::text(Role::Assistant, v["text"].as_str().unwrap(), ""));
        }
        reply(out)
    }
    fn map_dialog(&self, _call: ToolUse) -> Reply<Option<Dialog>> {
        reply(None)
    }
    fn pending_dialog(&self, spool: Vec<u8>, _open_calls: Vec<ToolUse>) -> Reply<Option<Dialog>> {
        let v: Value = serde_json::from_slice(&spool).unwrap();
        let options = v["options"].as_array().unwrap().iter();
        reply(Some(Dialog {
            id: String::new(),
            call_id: Some(v["call"].as_str().unwrap().into()),
            tool_name: "Ask".into(),
            body: DialogBody::Generic {
                title: v["title"].as_str().unwrap().into(),
                text: String::new(),
                options: options
                    .map(|o| DialogOption { label: o.as_str().unwrap().into(), description: String::new() })
                    .collect(),
            },
            answerable: true,
            deep_link: None,
        }))
    }
    fn blocked_state(&self, _marker: Vec<u8>) -> Reply<Blocked> {
        Box::pin(std::future::ready(Err(CallError {
            provider: "fake".into(),
            function: "blocked-state",
            kind: CallErrorKind::Unsupported,
        })))
    }
    fn session_info(&self, _payload: Vec<u8>) -> Reply<SessionFacts> {
        reply(SessionFacts::default())
    }
    fn launch(&self, req: LaunchRequest) -> Reply<LaunchSpec> {
        self.launches.lock().unwrap().push(req.clone());
        let transcript = PathBuf::from(&req.workdir).join("transcript.jsonl");
        let mut argv = vec![req.program.clone(), "--session".into(), req.session_id.clone()];
        if !req.prompt.is_empty() {
            argv.extend(["--prompt".into(), req.prompt.clone()]);
        }
        reply(LaunchSpec {
            argv,
            transcript: Transcript::Path(transcript.to_string_lossy().into_owned()),
            session_id: Some(req.session_id),
            env: vec![("FAKE_AGENT_MODE".into(), "test".into())],
        })
    }
    fn hook_wiring(&self) -> Reply<Vec<HookBinding>> {
        reply(vec![HookBinding { event: "Ask".into(), matcher: None, channel: Channel::DialogSpool }])
    }
    fn hook_settings(&self, run_id: String, hooks: Vec<HookCommand>) -> Reply<Option<String>> {
        let doc = json!({"run": run_id, "hooks": hooks.iter().map(|h| h.command.clone()).collect::<Vec<_>>()});
        self.settings_for.lock().unwrap().push((run_id, hooks));
        reply(Some(doc.to_string()))
    }
    fn plan_answer(&self, _dialog: Dialog, answers: Vec<Answer>) -> Reply<AnswerPlan> {
        self.plans.lock().unwrap().push(answers.clone());
        let Some(Answer::Option(i)) = answers.first() else {
            return Box::pin(std::future::ready(Err(CallError {
                provider: "fake".into(),
                function: "plan-answer",
                kind: CallErrorKind::Refused("the fake takes one option".into()),
            })));
        };
        let mut steps: Vec<KeyOp> = (0..*i).map(|_| KeyOp::Key("Down".into())).collect();
        steps.push(KeyOp::Key("Enter".into()));
        reply(AnswerPlan {
            drawn_within: Duration::from_secs(5),
            settle: Duration::from_millis(50),
            pause: Duration::from_millis(20),
            steps,
        })
    }
    fn is_drawn(&self, _dialog: Dialog, pane: String) -> Reply<bool> {
        reply(pane.contains("Deploy now?"))
    }
}

fn facts() -> ComponentFacts {
    ComponentFacts {
        source: Source::File("/fake/fake.wasm".into()),
        info: ProviderInfo {
            name: "fake".into(),
            display_name: "Fake agent".into(),
            version: "9.9.9".into(),
            description: String::new(),
            // Found as is: an absolute program that exists.
            default_program: "/bin/true".into(),
            permission_modes: Vec::new(),
        },
        capabilities: Capabilities {
            version: Version::V0_3_0,
            dialog_hooker: true,
            screen_reader: false,
            acp: false,
            abilities: Default::default(),
        },
        dialog_hooker: true,
        wit_packages: Vec::new(),
        from_cache: false,
        digest: "feedfacefeedface".into(),
        prompt_kinds: vec!["permission".into()],
    }
}

/// Wait (at most 20 s) until `f` says Some.
async fn until<T>(what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn typed_keys(term: &MemoryTerminal, target: &str) -> Vec<Input> {
    term.typed(target).into_iter().map(|(_, i)| i).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launch_and_answer_through_a_fake_provider_and_a_terminal_in_memory() {
    let d = tempfile::tempdir().unwrap();
    let (home, workdir) = (d.path().join("home"), d.path().join("work"));
    std::fs::create_dir_all(&workdir).unwrap();
    let term = Arc::new(MemoryTerminal::new());
    let fake = Arc::new(Fake::default());
    let seams = Seams {
        sessions: term.clone(),
        providers: Providers::fixed(vec![Pinned { facts: facts(), provider: fake.clone() }]),
    };
    let runs = lab::cli::serve::compose(Home::new(home.clone()), PathBuf::from("/opt/lab/bin/lab"), Some(seams))
        .await
        .unwrap();

    // Launch: a prompt too long for one argument is typed once the agent is ready.
    let prompt = format!("Ship it. {}", "x".repeat(140_000));
    let req: CreateRun =
        serde_json::from_value(json!({"provider": "fake", "workdir": workdir, "prompt": prompt})).unwrap();
    let body = runs.create(req).await.unwrap();
    let (id, target) = (body.id.to_string(), body.tmux_target.clone());
    assert_eq!(body.tmux_socket.as_deref(), Some("memory"));
    assert_eq!(body.provider_build.as_ref().map(|b| b.digest.as_str()), Some("feedfacefeedface"));

    // What the provider was asked: first with the prompt (too long), then without it.
    let launches = fake.launches.lock().unwrap().clone();
    assert_eq!(launches.len(), 2, "{:?}", launches.iter().map(|l| l.prompt.len()).collect::<Vec<_>>());
    assert_eq!(launches[0].prompt, prompt);
    assert_eq!(launches[1].prompt, "");
    let req = &launches[1];
    assert_eq!((req.run_id.as_str(), req.program.as_str()), (id.as_str(), "/bin/true"));
    assert_eq!(req.workdir, workdir.to_string_lossy());
    let files = Home::new(home.clone()).run_files(&lab::store::paths::RunId::parse(&id).unwrap());
    assert_eq!(req.settings_path.as_deref(), Some(files.settings.to_string_lossy().as_ref()));
    // Its hooks call lab's `hook dialog-spool` on this run's spool.
    assert_eq!(req.hooks.len(), 1);
    let hook = &req.hooks[0].command;
    assert!(
        hook.starts_with("/opt/lab/bin/lab hook dialog-spool") && hook.contains(&format!("{id}.spool.json")),
        "{hook}"
    );
    let settings: Value = serde_json::from_slice(&std::fs::read(&files.settings).unwrap()).unwrap();
    assert_eq!(settings, json!({"run": id, "hooks": [hook]}));

    // What was started: `lab agent-exec` on the launch file, which holds the fake's
    // command line and environment.
    assert_eq!(
        term.started(&target).unwrap(),
        ["/opt/lab/bin/lab", "agent-exec", "--launch-file", &files.launch.to_string_lossy()]
    );
    let launch: Value = serde_json::from_slice(&std::fs::read(&files.launch).unwrap()).unwrap();
    assert_eq!(launch["argv"], json!(["/bin/true", "--session", req.session_id]));
    assert_eq!(launch["env"]["FAKE_AGENT_MODE"], "test");

    // The agent draws its screen; once it is quiet, the prompt is pasted, then Enter.
    term.draw(&target, "fake agent ready\n>");
    let typed = until("the first prompt to be typed", async || {
        let t = typed_keys(&term, &target);
        (t.len() >= 2).then_some(t)
    })
    .await;
    assert_eq!(typed, [Input::Paste(prompt.clone()), Input::Key("Enter".into())]);

    // Answer: the agent writes a line, its hook spools a prompt and draws it.
    let transcript = workdir.join("transcript.jsonl");
    std::fs::write(&transcript, "{\"text\":\"About to deploy.\"}\n").unwrap();
    let spool = json!({"call": "call-1", "title": "Deploy now?", "options": ["Yes", "No"]});
    let tmp = files.spool.with_extension("tmp");
    std::fs::write(&tmp, spool.to_string()).unwrap();
    std::fs::rename(&tmp, &files.spool).unwrap();
    term.draw(&target, PROMPT_ON_SCREEN);
    // The agent: Enter takes the prompt away.
    term.react(&target, |input, screen| {
        if *input == Input::Key("Enter".into()) {
            *screen = "Deploying…".into();
        }
    });
    let run = runs.get(&id).unwrap();
    let page = lab::runs::live::message_store::Page::default();
    let view = until("the prompt in the view", async || {
        let v = run.view(&page).await;
        v.pending_dialog.is_some().then_some(v)
    })
    .await;
    assert_eq!(view.messages.len(), 1, "the agent's line is in the chat");
    let tool_id = view.pending_dialog.unwrap().dialog.id;

    let before = typed_keys(&term, &target).len();
    let start = runs.answer(&run, &tool_id, vec![Answer::Option(1)]).await.unwrap();
    assert_eq!(start.keys, ["Down", "Enter"]);
    let done = until("the answer to be played", async || {
        let a = run.snapshot().answer?;
        matches!(a.state, AnswerState::Played | AnswerState::Failed | AnswerState::Lost).then_some(a)
    })
    .await;
    assert_eq!(done.state, AnswerState::Played, "{done:?}");
    assert_eq!(fake.plans.lock().unwrap().clone(), [vec![Answer::Option(1)]]);
    let keys: Vec<(Instant, Input)> = term.typed(&target).into_iter().skip(before).collect();
    assert_eq!(
        keys.iter().map(|(_, i)| i.clone()).collect::<Vec<_>>(),
        [Input::Key("Down".into()), Input::Key("Enter".into())]
    );
    // Paced as the plan says.
    assert!(keys[1].0 - keys[0].0 >= Duration::from_millis(20), "{:?}", keys[1].0 - keys[0].0);

    // A second answer to the same prompt is refused (the guard), and nothing is typed.
    let again = runs.answer(&run, &tool_id, vec![Answer::Option(0)]).await.unwrap_err();
    assert_eq!(again.code(), "no_dialog", "{again}");
    assert_eq!(typed_keys(&term, &target).len(), before + 2);

    // The session goes: the run ends (the in-memory terminal's names are the truth).
    term.close(&target);
    runs.stop(&run).await.ok();
    until("the run to end", async || {
        (run.snapshot().derived.state == lab::runs::live::view::RunState::Ended).then_some(())
    })
    .await;
    runs.begin_shutdown().await;
}
