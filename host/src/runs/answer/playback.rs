//! Playback: what lab types into a run's terminal, through the [`Terminal`] seam — a
//! provider's answer plan with its pauses, an operator's message as one paste and
//! Enter, and the wait until an agent is ready for its first prompt. What to type and
//! when it may be typed are decided elsewhere ([`crate::runs::answer::keystrokes`] checks plans and
//! decides the drawn wait, [`crate::runs::answer::input`] the paste's timing); this module types.
//! Every function blocks: async callers use `spawn_blocking`.

use crate::agents::model::AnswerPlan;
use crate::machines::terminal::{Terminal, TerminalError, There};
use crate::runs::{answer::input, answer::keystrokes};
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

/// Play the plan's steps into `target`, with its pause after each op but the last;
/// `sent` hears how many ops have gone so far. Stops at the first op that fails.
pub fn play(
    term: &dyn Terminal,
    target: &str,
    plan: &AnswerPlan,
    mut sent: impl FnMut(usize),
) -> Result<(), TerminalError> {
    term.play(target, &plan.steps, plan.pause, &mut sent)
}

/// Paste `text` into the terminal as one bracketed paste, then press Enter once the
/// agent has taken it in ([`input::enter_delay`]).
pub fn type_text(term: &dyn Terminal, target: &str, buffer: &str, text: &str) -> Result<(), TerminalError> {
    term.paste(target, buffer, text)?;
    std::thread::sleep(input::enter_delay(text.len(), input::PASTE_SETTLE));
    term.key(target, "Enter")
}

/// Wait until the agent in `target` is ready to be typed into ([`input::Readiness`]),
/// at most [`input::Readiness::TIMEOUT`]. False if its session is gone.
pub fn wait_until_ready(term: &dyn Terminal, target: &str) -> bool {
    let start = std::time::Instant::now();
    let mut readiness = input::Readiness::default();
    loop {
        if !term.alive(target) {
            return false;
        }
        let screen = term.capture(target).unwrap_or_default();
        if readiness.observe(&screen, std::time::Instant::now()) {
            return true;
        }
        if start.elapsed() >= input::Readiness::TIMEOUT {
            tracing::warn!(target, "the agent's pane never went quiet; typing the first prompt anyway");
            return true;
        }
        std::thread::sleep(input::Readiness::POLL);
    }
}

/// What an answer's playback reports as it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// The prompt is drawn and still, and still live: the keys start.
    Playing,
    /// This many of the plan's ops have been sent.
    Sent(usize),
    /// No key took: the plan is played again (the how-manieth time).
    Replay(u32),
}

/// How an answer's playback ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Played {
    /// The prompt went away after the keys: the answer took.
    Took,
    /// The prompt was not drawn and still within the plan's budget: nothing typed.
    NotOnScreen,
    /// The prompt stopped being the run's live one before the keys: nothing typed.
    NoLongerLive,
    /// The prompt is still there [`keystrokes::GONE_WITHIN`] after the keys (played
    /// `replays` + 1 times); `unchanged`: no key took at all.
    Lost { unchanged: bool, replays: u32 },
    /// The terminal refused an op.
    Failed(TerminalError),
}

/// Wait until `drawn` sees the prompt on `target`'s pane and the pane has held still
/// for `settle` ([`keystrokes::DrawnWait`]), within `within` + `settle` counted from now:
/// the pane then, or `None` (it never was: nothing may be typed).
async fn wait_drawn<DrawnF: Future<Output = bool>>(
    term: &Arc<dyn Terminal>,
    target: &str,
    within: std::time::Duration,
    settle: std::time::Duration,
    drawn: &impl Fn(String) -> DrawnF,
) -> Option<String> {
    let mut wait = keystrokes::DrawnWait::new(Instant::now(), within, settle);
    loop {
        let pane = capture(term, target).await;
        let is_drawn = drawn(pane.clone()).await;
        match wait.look(Instant::now(), is_drawn, &pane) {
            keystrokes::BeforeKeys::Play => return Some(pane),
            keystrokes::BeforeKeys::NotOnScreen => return None,
            keystrokes::BeforeKeys::Wait => tokio::time::sleep(keystrokes::DRAWN_POLL).await,
        }
    }
}

/// After an answer's keys: whether its prompt went away ([`keystrokes::GoneCheck`]).
async fn gone<E, DrawnF: Future<Output = bool>, LiveF: Future<Output = Result<bool, E>>>(
    term: &Arc<dyn Terminal>,
    target: &str,
    before: &str,
    drawn: &impl Fn(String) -> DrawnF,
    live: &impl Fn() -> LiveF,
) -> keystrokes::AfterKeys {
    let mut check = keystrokes::GoneCheck::new(Instant::now(), before);
    loop {
        tokio::time::sleep(keystrokes::DRAWN_POLL).await;
        let still = live().await.unwrap_or(false);
        let pane = capture(term, target).await;
        let is_drawn = still && drawn(pane.clone()).await;
        match check.look(Instant::now(), still, is_drawn, &pane) {
            keystrokes::AfterKeys::Wait => continue,
            other => return other,
        }
    }
}

/// Play an answer onto its prompt: wait until `drawn` sees the prompt on the screen and
/// the screen has held still for the plan's settle time ([`keystrokes::DrawnWait`]),
/// ask `live` whether it is still the run's prompt, type the plan, then check that the
/// prompt went away ([`keystrokes::GoneCheck`]) — playing again, at most
/// [`keystrokes::MAX_REPLAYS`] times, only when no key took at all. `live`'s error
/// (the run ended) ends the playback with it.
///
/// With `there`, the first try is the terminal's own ([`Terminal::answer_there`]: the
/// drawn check and the keys where the agent runs, one trip), the guard asked just
/// before; if it typed nothing, the answer is played from here as above.
pub async fn play_answer<E, DrawnF: Future<Output = bool>, LiveF: Future<Output = Result<bool, E>>>(
    term: Arc<dyn Terminal>,
    target: &str,
    plan: &AnswerPlan,
    drawn: impl Fn(String) -> DrawnF,
    live: impl Fn() -> LiveF,
    report: impl Fn(Progress) + Clone + Send + 'static,
    there: Option<There>,
) -> Result<Played, E> {
    let mut replays = 0;
    let mut there = there;
    loop {
        if let Some(there) = there.take() {
            if !live().await? {
                return Ok(Played::NoLongerLive);
            }
            let (t, target2) = (term.clone(), target.to_string());
            let typed = tokio::task::spawn_blocking(move || t.answer_there(&target2, &there))
                .await
                .unwrap_or_else(|e| Err(TerminalError { action: "answer".into(), message: e.to_string() }));
            match typed {
                Ok(Some(before)) => {
                    report(Progress::Playing);
                    report(Progress::Sent(plan.steps.len()));
                    match gone(&term, target, &before, &drawn, &live).await {
                        keystrokes::AfterKeys::Lost { unchanged: true } if replays < keystrokes::MAX_REPLAYS => {
                            replays += 1;
                            report(Progress::Replay(replays));
                            continue;
                        }
                        keystrokes::AfterKeys::Lost { unchanged } => return Ok(Played::Lost { unchanged, replays }),
                        keystrokes::AfterKeys::Gone | keystrokes::AfterKeys::Wait => return Ok(Played::Took),
                    }
                }
                Ok(None) => {}
                Err(e) => return Ok(Played::Failed(e)),
            }
        }
        // 1–2. Only onto the prompt on screen, drawn and still, within the plan's budget
        //      counted from now; the guard again; the keys.
        let before = match type_onto_drawn(&term, target, plan, &drawn, &live, report.clone()).await? {
            Typed::Onto(before) => before,
            Typed::NotOnScreen => return Ok(Played::NotOnScreen),
            Typed::NoLongerLive => return Ok(Played::NoLongerLive),
            Typed::Failed(e) => return Ok(Played::Failed(e)),
        };
        // 3. Did it take? The prompt must go away.
        let outcome = gone(&term, target, &before, &drawn, &live).await;
        match outcome {
            keystrokes::AfterKeys::Gone | keystrokes::AfterKeys::Wait => return Ok(Played::Took),
            keystrokes::AfterKeys::Lost { unchanged: true } if replays < keystrokes::MAX_REPLAYS => {
                replays += 1;
                report(Progress::Replay(replays));
            }
            keystrokes::AfterKeys::Lost { unchanged } => return Ok(Played::Lost { unchanged, replays }),
        }
    }
}

/// How one try at an answer's keys ended ([`type_onto_drawn`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Typed {
    /// The keys went onto this pane (the prompt drawn and still, and live).
    Onto(String),
    /// The prompt was not drawn and still within the plan's budget: nothing typed.
    NotOnScreen,
    /// The guard said the prompt is no longer the run's: nothing typed.
    NoLongerLive,
    /// The terminal refused an op (the progress said how many went).
    Failed(TerminalError),
}

/// One try at an answer's keys — the one player both ends of a machine's link use:
/// wait until `drawn` sees the prompt on `target` drawn and still for the plan's settle
/// time, within its budget counted from now ([`keystrokes::DrawnWait`]); ask `live`
/// once more (the prompt may have gone while it was drawn); type the plan with its
/// pauses ([`Terminal::play`]). Here, inside [`play_answer`]; on a runner, next to its
/// agent (`runner::answer`, whose guard lab serve asked just before the trip).
pub async fn type_onto_drawn<E, DrawnF: Future<Output = bool>, LiveF: Future<Output = Result<bool, E>>>(
    term: &Arc<dyn Terminal>,
    target: &str,
    plan: &AnswerPlan,
    drawn: &impl Fn(String) -> DrawnF,
    live: &impl Fn() -> LiveF,
    report: impl Fn(Progress) + Send + 'static,
) -> Result<Typed, E> {
    let Some(before) = wait_drawn(term, target, plan.drawn_within, plan.settle, drawn).await else {
        return Ok(Typed::NotOnScreen);
    };
    if !live().await? {
        return Ok(Typed::NoLongerLive);
    }
    report(Progress::Playing);
    let (t, target, plan) = (term.clone(), target.to_string(), plan.clone());
    let typed = tokio::task::spawn_blocking(move || play(t.as_ref(), &target, &plan, |n| report(Progress::Sent(n))))
        .await
        .unwrap_or_else(|e| Err(TerminalError { action: "play".into(), message: e.to_string() }));
    Ok(match typed {
        Ok(()) => Typed::Onto(before),
        Err(e) => Typed::Failed(e),
    })
}

/// The screen's visible text ("" when it cannot be read: nothing is drawn there).
pub async fn capture(term: &Arc<dyn Terminal>, target: &str) -> String {
    let (t, target) = (term.clone(), target.to_string());
    tokio::task::spawn_blocking(move || t.capture(&target).unwrap_or_default()).await.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::model::KeyOp;
    use crate::machines::terminal::memory::{Input, MemoryTerminal};
    use std::time::Duration;

    fn plan(steps: Vec<KeyOp>, pause: Duration) -> AnswerPlan {
        AnswerPlan { drawn_within: Duration::from_secs(1), settle: Duration::ZERO, pause, steps }
    }

    /// Each op goes as the plan says, with the plan's pause between two ops and none
    /// after the last; the progress counts every op sent.
    #[test]
    fn a_plan_is_played_op_by_op_with_its_pause_between_and_none_after() {
        let t = MemoryTerminal::new();
        t.draw("r", "? Pick one");
        let pause = Duration::from_millis(40);
        let p = plan(vec![KeyOp::Key("Down".into()), KeyOp::Literal("yes;".into()), KeyOp::Key("Enter".into())], pause);
        let mut progress = Vec::new();
        let start = Instant::now();
        play(&t, "r", &p, |n| progress.push(n)).unwrap();
        let took = start.elapsed();
        assert_eq!(progress, [1, 2, 3]);
        let typed = t.typed("r");
        let inputs: Vec<&Input> = typed.iter().map(|(_, i)| i).collect();
        assert_eq!(inputs, [&Input::Key("Down".into()), &Input::Literal("yes;".into()), &Input::Key("Enter".into())]);
        for w in typed.windows(2) {
            assert!(w[1].0 - w[0].0 >= pause, "the pause between two ops: {:?}", w[1].0 - w[0].0);
        }
        assert!(took >= pause * 2 && took < pause * 3, "two pauses, none after the last op: {took:?}");
    }

    /// A terminal that fails stops the plan there: the ops after it are not typed, and
    /// the progress says how many went.
    #[test]
    fn a_failing_terminal_stops_the_plan_at_the_op_that_failed() {
        let t = MemoryTerminal::new();
        t.draw("r", "? Pick one");
        let p = plan(vec![KeyOp::Key("Down".into()), KeyOp::Key("Enter".into())], Duration::from_millis(10));
        let mut sent = 0;
        // The agent's session ends right after the first key.
        let e = play(&t, "r", &p, |n| {
            sent = n;
            t.close("r");
        })
        .unwrap_err();
        assert_eq!(sent, 1);
        assert_eq!(e.action, "type");
        assert!(e.message.contains("no session"), "{e}");
    }

    /// A message is one paste and then Enter, after the paste had time to land.
    #[test]
    fn a_message_is_one_paste_then_enter() {
        let t = MemoryTerminal::new();
        t.draw("r", "> ");
        let text = "line one\nline two";
        type_text(&t, "r", "lab-r", text).unwrap();
        let typed = t.typed("r");
        assert_eq!(typed.len(), 2);
        assert_eq!(typed[0].1, Input::Paste(text.into()));
        assert_eq!(typed[1].1, Input::Key("Enter".into()));
        assert!(typed[1].0 - typed[0].0 >= input::enter_delay(text.len(), input::PASTE_SETTLE));
        assert!(type_text(&t, "gone", "lab-x", "hi").is_err(), "no session: an error, nothing typed");
    }

    /// The first prompt waits for a still screen, and not at all for a session gone.
    #[test]
    fn the_first_prompt_waits_for_a_still_screen_and_not_for_a_gone_session() {
        let t = MemoryTerminal::new();
        assert!(!wait_until_ready(&t, "r"), "no session");
        t.draw("r", "Welcome\n> ");
        let start = Instant::now();
        assert!(wait_until_ready(&t, "r"));
        assert!(start.elapsed() < input::Readiness::TIMEOUT, "a still screen is ready before the timeout");
    }

    // ---- an answer's playback: its timing rules against the in-memory terminal ----

    use std::sync::Mutex;

    fn answer_plan(drawn_within: Duration, settle: Duration) -> AnswerPlan {
        AnswerPlan { drawn_within, settle, pause: Duration::from_millis(5), steps: vec![KeyOp::Key("1".into())] }
    }

    /// The progress reported, in order.
    fn recorder() -> (Arc<Mutex<Vec<Progress>>>, impl Fn(Progress) + Clone + Send + 'static) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        (seen, move |p| s.lock().unwrap().push(p))
    }

    fn drawn(pane: String) -> std::future::Ready<bool> {
        std::future::ready(pane.contains("? Allow"))
    }

    fn live() -> std::future::Ready<Result<bool, &'static str>> {
        std::future::ready(Ok(true))
    }

    /// No key before the prompt is drawn and has held still for the plan's settle time;
    /// then the keys, and the prompt going away is an answer that took.
    #[tokio::test]
    async fn keys_wait_for_the_prompt_drawn_and_still_and_the_prompt_going_away_is_an_answer_that_took() {
        let t = Arc::new(MemoryTerminal::new());
        t.draw("r", "thinking…");
        t.react("r", |i, screen| {
            if *i == Input::Key("1".into()) {
                *screen = "ok, running it".into();
            }
        });
        let settle = Duration::from_millis(200);
        let t2 = t.clone();
        let drawn_at = Arc::new(Mutex::new(None));
        let d2 = drawn_at.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            t2.draw("r", "? Allow Shell(ls)  1. Yes  2. No");
            *d2.lock().unwrap() = Some(Instant::now());
        });
        let (seen, report) = recorder();
        let term: Arc<dyn Terminal> = t.clone();
        let out = play_answer(term, "r", &answer_plan(Duration::from_secs(2), settle), drawn, live, report, None).await;
        assert_eq!(out, Ok(Played::Took));
        let typed = t.typed("r");
        assert_eq!(typed.len(), 1, "played once: {typed:?}");
        let drawn_at = drawn_at.lock().unwrap().expect("drawn");
        assert!(typed[0].0 - drawn_at >= settle, "the first key waited for the settle time after the prompt was drawn");
        assert_eq!(*seen.lock().unwrap(), [Progress::Playing, Progress::Sent(1)]);
    }

    /// A prompt never drawn within the plan's budget (counted from the answer) gets no
    /// key; nor does one that stopped being the run's prompt; the guard's error ends it.
    #[tokio::test]
    async fn nothing_is_typed_onto_a_prompt_not_drawn_in_time_or_no_longer_live() {
        let t = Arc::new(MemoryTerminal::new());
        t.draw("r", "thinking…");
        let term: Arc<dyn Terminal> = t.clone();
        let (within, settle) = (Duration::from_millis(200), Duration::from_millis(50));
        let start = Instant::now();
        let (_, report) = recorder();
        let out = play_answer(term.clone(), "r", &answer_plan(within, settle), drawn, live, report.clone(), None).await;
        assert_eq!(out, Ok(Played::NotOnScreen));
        assert!(start.elapsed() >= within + settle, "the whole budget was given: {:?}", start.elapsed());

        t.draw("r", "? Allow Shell(ls)");
        let gone = || std::future::ready(Ok::<bool, &str>(false));
        let plan = answer_plan(Duration::from_secs(1), Duration::ZERO);
        let out = play_answer(term.clone(), "r", &plan, drawn, gone, report.clone(), None).await;
        assert_eq!(out, Ok(Played::NoLongerLive));
        let ended = || std::future::ready(Err::<bool, &str>("run_ended"));
        assert_eq!(play_answer(term, "r", &plan, drawn, ended, report, None).await, Err("run_ended"));
        assert!(t.typed("r").is_empty(), "no key in any of them");
    }

    /// Keys that do not take at all (the screen unchanged) are played once more, and
    /// then the answer is lost; keys of which some took are never played again.
    #[tokio::test]
    async fn keys_that_do_not_take_are_played_once_more_then_the_answer_is_lost() {
        let t = Arc::new(MemoryTerminal::new());
        t.draw("r", "? Allow Shell(ls)");
        let term: Arc<dyn Terminal> = t.clone();
        let (seen, report) = recorder();
        let plan = answer_plan(Duration::from_secs(1), Duration::ZERO);
        let out = play_answer(term.clone(), "r", &plan, drawn, live, report, None).await;
        assert_eq!(out, Ok(Played::Lost { unchanged: true, replays: keystrokes::MAX_REPLAYS }));
        assert_eq!(t.typed("r").len() as u32, keystrokes::MAX_REPLAYS + 1);
        assert!(seen.lock().unwrap().contains(&Progress::Replay(1)));

        // A screen that changed (some key took) is not played again.
        let t = Arc::new(MemoryTerminal::new());
        t.draw("r", "? Allow Shell(ls)");
        t.react("r", |_, screen| screen.push_str(" 1"));
        let term: Arc<dyn Terminal> = t.clone();
        let (_, report) = recorder();
        let out = play_answer(term, "r", &plan, drawn, live, report, None).await;
        assert_eq!(out, Ok(Played::Lost { unchanged: false, replays: 0 }));
        assert_eq!(t.typed("r").len(), 1);
    }
}
