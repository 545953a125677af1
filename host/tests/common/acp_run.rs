//! An ACP agent driven end to end through lab's API, the same for every real agent
//! (e2e_claude_acp, e2e_codex_acp, e2e_gemini, e2e_opencode): a world whose lab.toml
//! names the agent, lab serving it, a slot (a few real agents at once at most), and the
//! operator's steps — start a run, wait for a state, answer a prompt, restart lab, stop.

use super::{wait_for, Lab, Slot, World};
use serde_json::{json, Value};
use std::time::Duration;

/// What a step of a real agent may take on a loaded machine.
pub const STEP: Duration = Duration::from_secs(90);

/// One agent's end-to-end world; `S` is the model-API stand-in it talks to.
pub struct AcpRun<S> {
    pub w: World,
    pub standin: S,
    lab: Option<Lab>,
    provider: String,
    /// The `permission_mode` runs start in (None: the agent's own default).
    mode: Option<String>,
    _slot: Slot,
}

impl<S> AcpRun<S> {
    /// lab serving `w` (its lab.toml written), runs started with `provider`.
    pub fn serve(w: World, slot: Slot, provider: &str, standin: S) -> AcpRun<S> {
        let lab = w.serve();
        AcpRun { w, standin, lab: Some(lab), provider: provider.to_string(), mode: None, _slot: slot }
    }

    /// Runs start in `mode`.
    pub fn in_mode(mut self, mode: &str) -> AcpRun<S> {
        self.mode = Some(mode.to_string());
        self
    }

    pub fn lab(&self) -> &Lab {
        self.lab.as_ref().expect("lab serves")
    }

    /// lab stopped and started again on the same home (its agents go with it).
    pub fn restart(&mut self) {
        self.lab.take().expect("lab serves").stop();
        self.lab = Some(self.w.serve());
    }

    /// A run in the workdir with `prompt` (and `permission_mode`, when given): its id.
    pub fn run_in_mode(&self, prompt: &str, mode: Option<&str>) -> String {
        let mut body = json!({"provider": self.provider, "workdir": self.w.workdir, "prompt": prompt});
        if let Some(m) = mode {
            body["permission_mode"] = json!(m);
        }
        let (s, r) = self.lab().post("/runs", &body);
        assert_eq!(s, 201, "POST /runs: {r}");
        r["id"].as_str().unwrap().to_string()
    }

    pub fn run(&self, prompt: &str) -> String {
        self.run_in_mode(prompt, self.mode.as_deref())
    }

    /// The run's view once `pred` holds for it (at most [`STEP`]).
    pub fn wait(&self, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        wait_for(STEP, what, || Some(self.lab().view(id)).filter(|v| pred(v)))
    }

    /// The run's pending dialog once it is of `kind`.
    pub fn pending(&self, id: &str, kind: &str) -> Value {
        self.wait(id, &format!("a {kind} dialog"), |v| v["pending_dialog"]["kind"] == kind)["pending_dialog"].clone()
    }

    pub fn answer(&self, id: &str, tool_id: &str, answers: Value) -> (u16, Value) {
        self.lab().post(&format!("/runs/{id}/dialog/answer"), &json!({"tool_id": tool_id, "answers": answers}))
    }

    /// The run's permission request, once shown, answered from lab with its option of ACP
    /// kind `kind` (`allow_once`, `reject_once`…): the dialog as it was.
    pub fn answer_permission(&self, id: &str, kind: &str) -> Value {
        let d = self.pending(id, "permission");
        let (s, r) = self.answer(id, d["tool_id"].as_str().unwrap(), json!([{"option": option(&d, kind)}]));
        assert_eq!(s, 202, "{r}");
        d
    }

    pub fn stop_run(&self, id: &str) {
        let (s, r) = self.lab().post(&format!("/runs/{id}/stop"), &json!({}));
        assert_eq!((s, &r["state"]), (200, &json!("ended")), "{r}");
    }
}

/// The dialog's option of ACP kind `kind` (lab shows it as the option's description;
/// the labels are the agent's own).
pub fn option(d: &Value, kind: &str) -> usize {
    d["options"]
        .as_array()
        .unwrap()
        .iter()
        .position(|o| o["description"] == kind)
        .unwrap_or_else(|| panic!("{kind} in {d}"))
}

/// Whether the agent or lab said `needle` in the run's chat: the operator's own prompt
/// does not count (a turn's prompt is in the chat, the run still idle, before its turn
/// starts). The agent's words count however its stream was cut into messages (a
/// permission request in the middle of its sentence ends a message: "I will w", then
/// the prompt, then "rite the file.").
pub fn has_text(v: &Value, needle: &str) -> bool {
    let msgs = v["messages"].as_array().unwrap();
    let text = |m: &&Value| m["text"].as_str().unwrap_or_default().to_string();
    let said = msgs.iter().filter(|m| m["role"] != "user").any(|m| text(&m).contains(needle));
    let agent: String =
        msgs.iter().filter(|m| m["role"] == "assistant" && m["kind"] == "text").map(|m| text(&m)).collect();
    said || agent.contains(needle)
}

/// The text of the run's first tool result (what the command it ran printed).
pub fn tool_output(v: &Value) -> String {
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["kind"] == "tool_result")
        .and_then(|m| m["text"].as_str())
        .unwrap_or_else(|| panic!("the command's output: {v}"))
        .to_string()
}
