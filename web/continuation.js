// Picking a conversation up again, in a run's header: "Resume" on a run that ended
// (POST /runs/{id}/resume), "Fork" on any run whose agent can copy its conversation
// (POST /runs/{id}/fork), each with an optional message; and the run's family — the
// run it was forked from and its own forks — as links.
import { api, enc } from "./api.js";
import { fullTime, h, shortId } from "./dom.js";
import { store } from "./store.js";

/**
 * The header's resume and fork controls for one run view. `onResumed(run)` is called
 * with the run as lab answered it; a fork opens the new run.
 */
export class Continuation {
  constructor({ runId, onResumed }) {
    this.runId = runId;
    this.onResumed = onResumed;
    this.how = null; // "resume" | "fork" while the form is open
    this.resumeBtn = h("button", { type: "button", "data-testid": "resume-button", hidden: true, onclick: () => this.open("resume") }, "Resume");
    this.forkBtn = h("button", { type: "button", "data-testid": "fork-button", hidden: true, onclick: () => this.open("fork") }, "Fork");
    this.input = h("textarea", {
      rows: 2, "data-testid": "continue-prompt", "aria-label": "Message to the agent (optional)",
      placeholder: "Message to the agent (optional)",
    });
    this.submitBtn = h("button", { type: "submit", class: "primary", "data-testid": "continue-submit" }, "Resume");
    this.error = h("p", { class: "header-error", role: "alert", "data-testid": "continue-error", hidden: true });
    this.hint = h("p", { class: "muted small" });
    this.form = h("form", {
      class: "continue-form", "data-testid": "continue-form", hidden: true,
      onsubmit: (e) => { e.preventDefault(); this.submit(); },
    },
      this.hint,
      this.input,
      h("div", { class: "continue-actions" }, this.submitBtn,
        h("button", { type: "button", onclick: () => this.close() }, "Cancel")),
      this.error);
    this.family = h("p", { class: "run-family", "data-testid": "run-family", hidden: true });
    // A usage limit the agent hit: when it resets, and whether the run goes on then.
    this.limitText = h("span", { "data-testid": "usage-limit-text" });
    this.autoResume = h("input", { type: "checkbox", "data-testid": "auto-resume", onchange: () => this.setAutoResume() });
    this.limit = h("div", { class: "usage-limit", "data-testid": "usage-limit", role: "status", hidden: true },
      this.limitText,
      h("label", { class: "auto-resume" }, this.autoResume, " Go on by itself when it resets"));
  }

  /** `PUT /runs/{id}/auto-resume`: the run goes on by itself once the limit resets (or not). */
  async setAutoResume() {
    const on = this.autoResume.checked;
    this.autoResume.disabled = true;
    const res = await api("PUT", `runs/${enc(this.runId)}/auto-resume`, { on });
    this.autoResume.disabled = false;
    if (!res.ok) {
      this.autoResume.checked = !on;
      this.error.textContent = res.message;
      this.error.hidden = false;
      return;
    }
    store.runs.set(this.runId, res.data);
  }

  /** The buttons (for the header's row). */
  buttons() {
    return [this.resumeBtn, this.forkBtn];
  }

  /** Show what `run` can be continued as, its family, and a usage limit its agent hit. */
  render(run, limit) {
    if (!run) return;
    this.limit.hidden = !limit;
    if (limit) {
      const when = limit.resets_at ? `It resets at ${fullTime(limit.resets_at)}.` : "The agent did not say when it resets.";
      const then = limit.resume_at ? ` The run goes on by itself at ${fullTime(limit.resume_at)}.` : "";
      this.limitText.textContent = `Usage limit reached: ${limit.text} — ${when}${then} `;
      const choice = run.resume_after_limit;
      if (!this.autoResume.disabled) this.autoResume.checked = !!(choice && choice.on);
      this.autoResume.title = choice ? `With the message: ${choice.prompt}` : "";
    }
    this.resumeBtn.hidden = !run.resumable;
    this.forkBtn.hidden = !run.forkable;
    if (this.how === "resume" && !run.resumable) this.close();
    const forks = [...store.runs.values()].filter((r) => r.parent === run.id);
    const sig = JSON.stringify([run.parent, forks.map((f) => f.id)]);
    if (this.family.dataset.sig !== sig) {
      this.family.dataset.sig = sig;
      const link = (id) => h("a", { href: `#/runs/${enc(id)}`, class: "mono", "data-testid": "family-link", "data-run-id": id }, shortId(id));
      const parts = [];
      if (run.parent) parts.push("Forked from ", link(run.parent));
      if (forks.length) {
        if (parts.length) parts.push(" · ");
        parts.push(forks.length === 1 ? "Fork: " : "Forks: ");
        forks.forEach((f, i) => { if (i) parts.push(", "); parts.push(link(f.id)); });
      }
      this.family.replaceChildren(...parts);
      this.family.hidden = !parts.length;
    }
  }

  open(how) {
    this.how = how;
    this.submitBtn.textContent = how === "resume" ? "Resume" : "Fork";
    this.hint.textContent = how === "resume"
      ? "The agent starts again with its conversation, in the same worktree. Say what to do next, or leave it empty."
      : "A new run starts from a copy of this conversation, in a worktree of its own with this run's files as they are now.";
    this.error.hidden = true;
    this.form.hidden = false;
    this.input.focus();
  }

  close() {
    this.how = null;
    this.form.hidden = true;
    this.input.value = "";
    this.error.hidden = true;
  }

  async submit() {
    const how = this.how;
    if (!how) return;
    const text = this.input.value;
    this.submitBtn.disabled = true;
    const res = await api("POST", `runs/${enc(this.runId)}/${how}`, text.trim() ? { prompt: text } : {});
    this.submitBtn.disabled = false;
    if (!res.ok) {
      this.error.textContent = res.message;
      this.error.hidden = false;
      return;
    }
    this.close();
    if (how === "resume") {
      store.runs.set(this.runId, res.data);
      this.onResumed(res.data);
    } else {
      store.runs.set(res.data.id, res.data);
      location.hash = `#/runs/${enc(res.data.id)}`;
    }
  }
}
