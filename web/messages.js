// Transcript messages as chat bubbles and collapsible tool rows.
import { fullTime, h } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

function prettyMaybeJson(text) {
  const t = String(text ?? "");
  const s = t.trim();
  if (!(s.startsWith("{") || s.startsWith("["))) return { text: t, obj: null };
  try {
    const obj = JSON.parse(s);
    return { text: JSON.stringify(obj, null, 2), obj };
  } catch {
    return { text: t, obj: null };
  }
}

export function firstLine(text, max = 100) {
  const line = String(text ?? "").split("\n").find((l) => l.trim()) || "";
  const t = line.trim();
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

function toolPreview(obj, text) {
  if (obj && typeof obj === "object" && !Array.isArray(obj)) {
    for (const k of ["command", "file_path", "path", "pattern", "url", "query", "description", "prompt", "skill"]) {
      if (typeof obj[k] === "string" && obj[k].trim()) return firstLine(obj[k]);
    }
    if (Array.isArray(obj.questions) && obj.questions[0]?.question) return firstLine(obj.questions[0].question);
    return "";
  }
  return firstLine(text);
}

const MAX_PRE = 60000;
function preBlock(text, cls = "") {
  const t = String(text ?? "");
  const pre = h("pre", { class: `tool-body ${cls}` }, t.length > MAX_PRE ? t.slice(0, MAX_PRE) : t);
  if (t.length <= MAX_PRE) return pre;
  const more = h("button", {
    type: "button", class: "link-button",
    onclick: () => { pre.textContent = t; more.remove(); },
  }, `Show all ${t.length.toLocaleString()} characters`);
  return h("div", {}, pre, more);
}

const ROLE_LABEL = { user: "You", assistant: "Agent", system: "System", tool: "Tool" };

export function renderMessage(m, toolNames) {
  const role = String(m.role || "");
  const kind = String(m.kind || "");
  const attrs = {
    class: `msg role-${role.replace(/\W/g, "")} kind-${kind.replace(/\W/g, "")}`,
    "data-testid": "message",
    "data-role": role,
    "data-kind": kind,
    "data-seq": m.seq,
    title: m.timestamp ? fullTime(m.timestamp) : null,
  };

  if (kind === "tool_use") {
    const { text, obj } = prettyMaybeJson(m.text);
    const name = m.tool_name || "tool";
    // The provider's summary often starts with the tool's name, which the row shows.
    const summary = String(m.text ?? "");
    const stripped = summary.startsWith(`${name}: `) ? summary.slice(name.length + 2) : summary;
    const fromInput = m.input && typeof m.input === "object" ? toolPreview(m.input, "") : "";
    const preview = fromInput || (obj ? toolPreview(obj, m.text) : firstLine(stripped));
    const detail = m.input !== undefined ? JSON.stringify(m.input, null, 2) : text;
    return h("article", attrs,
      h("details", { class: "tool" },
        h("summary", {},
          h("span", { class: "tool-icon", "aria-hidden": "true" }, "⚙"),
          h("span", { class: "tool-name", "data-testid": "tool-name" }, name),
          h("span", { class: "tool-preview" }, preview)),
        preBlock(detail)));
  }

  if (kind === "tool_result") {
    const name = m.tool_name || (m.tool_use_id && toolNames.get(m.tool_use_id)) || "tool";
    const body = String(m.text ?? "");
    const lines = body ? body.split("\n").length : 0;
    return h("article", attrs,
      h("details", { class: "tool result" },
        h("summary", {},
          h("span", { class: "tool-icon", "aria-hidden": "true" }, "↳"),
          h("span", { class: "tool-name", "data-testid": "tool-name" }, name),
          h("span", { class: "tool-preview" }, body ? `${firstLine(body, 80)}${lines > 1 ? ` (${lines} lines)` : ""}` : "(empty result)")),
        preBlock(body)));
  }

  if (kind === "thinking" || kind === "redacted_thinking") {
    return h("article", attrs,
      h("details", { class: "thinking" },
        h("summary", {}, h("span", { class: "tool-icon", "aria-hidden": "true" }, "…"), "Thinking"),
        h("div", { class: "md", html: renderMarkdown(m.text) })));
  }

  if (role === "system") {
    return h("article", attrs, h("div", { class: "sys" }, m.text ?? ""));
  }

  if (kind === "text" || kind === "") {
    return h("article", attrs,
      h("div", { class: "who" }, ROLE_LABEL[role] || role),
      h("div", { class: "md bubble", html: renderMarkdown(m.text) }));
  }

  // Unknown kinds: shown plainly, collapsed when long.
  const text = String(m.text ?? "");
  if (text.length > 200 || text.includes("\n")) {
    return h("article", attrs,
      h("details", { class: "tool other" },
        h("summary", {}, h("span", { class: "tool-name" }, kind), h("span", { class: "tool-preview" }, firstLine(text))),
        preBlock(text)));
  }
  return h("article", attrs, h("div", { class: "sys" }, h("span", { class: "kind-tag" }, kind), " ", text));
}
