// What runs cost: `#/usage` (charts per day, per provider and per model, a table per
// run, from GET /usage), a run's tokens and cost in its header (GET /runs/{id}/usage),
// and the account's rate-limit windows in the sidebar's header on every page.
// The charts are SVG drawn here: no library, no CDN.
import { api, enc } from "./api.js";
import { h, shortId } from "./dom.js";
import { store } from "./store.js";

const SVG = "http://www.w3.org/2000/svg";
const FIELDS = ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"];
const FIELD_LABEL = { input_tokens: "input", output_tokens: "output", cache_read_tokens: "cache read", cache_write_tokens: "cache write" };
const WINDOWS_EVERY_MS = 60000;

/** Every token a row counts. */
export function totalTokens(row) {
  return FIELDS.reduce((a, k) => a + (Number(row && row[k]) || 0), 0);
}

/** 1234 → "1.2k", 5_600_000 → "5.6M". */
export function formatTokens(n) {
  n = Number(n) || 0;
  if (n < 1000) return String(n);
  if (n < 1e6) return `${(n / 1e3).toFixed(n < 1e4 ? 1 : 0)}k`;
  return `${(n / 1e6).toFixed(n < 1e7 ? 1 : 0)}M`;
}

/** A cost in dollars, or "cost unknown" (a model lab has no price for). */
export function formatCost(usd) {
  if (usd === null || usd === undefined) return "cost unknown";
  if (usd > 0 && usd < 0.01) return `$${usd.toFixed(4)}`;
  return `$${usd.toFixed(2)}`;
}

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

/**
 * Bars of `rows` ({key, …figures}), one per row, stacked by kind of token; each bar says
 * its numbers in its tooltip and its data attributes (what the browser test reads).
 */
export function barChart(rows, { testid, label }) {
  const W = 640, H = 180, PAD = 28, GAP = 6;
  const max = Math.max(1, ...rows.map(totalTokens));
  const bw = rows.length ? Math.max(4, Math.min(48, (W - PAD - GAP * rows.length) / rows.length)) : 0;
  const bars = rows.map((r, i) => {
    const x = PAD + i * (bw + GAP);
    let y = H - PAD;
    const parts = FIELDS.map((k) => {
      const hgt = ((Number(r[k]) || 0) / max) * (H - 2 * PAD);
      y -= hgt;
      return svg("rect", { x, y, width: bw, height: Math.max(0, hgt), class: `bar-${k}` });
    });
    const tip = `${r.key}: ${totalTokens(r).toLocaleString()} tokens (${FIELDS.map((k) => `${FIELD_LABEL[k]} ${Number(r[k] || 0).toLocaleString()}`).join(", ")}), ${formatCost(r.cost_usd)}`;
    return svg("g", { class: "bar", "data-testid": "usage-bar", "data-key": r.key, "data-tokens": totalTokens(r), "data-cost": r.cost_usd ?? "" },
      svg("title", {}, tip), ...parts,
      svg("text", { x: x + bw / 2, y: H - PAD + 14, "text-anchor": "middle", class: "bar-label" }, rows.length > 14 ? "" : shortKey(r.key)));
  });
  return svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "usage-chart", role: "img", "aria-label": label, "data-testid": testid },
    svg("line", { x1: PAD, y1: H - PAD, x2: W, y2: H - PAD, class: "axis" }),
    svg("text", { x: 2, y: PAD - 8, class: "axis-label" }, formatTokens(max)),
    ...bars);
}

function shortKey(key) {
  return /^\d{4}-\d{2}-\d{2}$/.test(key) ? key.slice(5) : key.length > 12 ? `${key.slice(0, 11)}…` : key;
}

function legend() {
  return h("p", { class: "usage-legend" }, ...FIELDS.map((k) => h("span", {}, h("i", { class: `swatch bar-${k}`, "aria-hidden": "true" }), FIELD_LABEL[k])));
}

export class UsageView {
  constructor(root) {
    this.root = root;
    this.status = h("p", { class: "run-meta", role: "status", "data-testid": "usage-status" }, "Loading…");
    this.body = h("div", { class: "usage-body" });
    this.root.replaceChildren(h("section", { class: "usage-view", "data-testid": "usage-view" },
      h("header", { class: "run-header" }, h("h2", {}, "Usage"), h("a", { href: "#/", class: "small" }, "Back to runs")),
      h("p", { class: "run-meta" }, "Tokens and cost of the last 30 days, as the agents' transcripts counted them: each model response once. ",
        "A model lab has no price for shows its cost as unknown (lab.toml's [prices] adds one)."),
      this.status, this.body));
    this.load();
  }

  async load() {
    const groups = ["day", "provider", "model", "run"];
    const answers = await Promise.all(groups.map((g) => api("GET", `usage?group=${g}`)));
    if (this.destroyed) return;
    const bad = answers.find((a) => !a.ok);
    if (bad) { this.status.textContent = `Could not load usage: ${bad.message}`; return; }
    const [day, provider, model, run] = answers.map((a) => a.data.rows);
    const total = day.reduce((a, r) => a + totalTokens(r), 0);
    const costs = day.map((r) => r.cost_usd);
    const cost = costs.includes(null) ? null : costs.reduce((a, c) => a + c, 0);
    this.status.textContent = day.length
      ? `${formatTokens(total)} tokens, ${formatCost(cost)} (prices as of ${answers[0].data.prices_as_of}).`
      : "No usage yet: runs show here once their agent has answered.";
    this.status.dataset.tokens = String(total);
    const section = (title, rows, testid) => h("section", { class: "usage-section" }, h("h3", {}, title),
      rows.length ? barChart(rows, { testid, label: `Tokens ${title.toLowerCase()}` }) : h("p", { class: "muted" }, "Nothing yet."));
    this.body.replaceChildren(
      legend(),
      section("Per day", day, "usage-chart-day"),
      section("Per provider", provider, "usage-chart-provider"),
      section("Per model", model, "usage-chart-model"),
      h("section", { class: "usage-section" }, h("h3", {}, "Per run"), this.table(run)));
  }

  table(rows) {
    const sorted = [...rows].sort((a, b) => totalTokens(b) - totalTokens(a));
    return h("table", { class: "usage-table", "data-testid": "usage-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "Run"), ...FIELDS.map((k) => h("th", { class: "num" }, FIELD_LABEL[k])), h("th", { class: "num" }, "cost"))),
      h("tbody", {}, ...sorted.map((r) => {
        const run = store.runs.get(r.key);
        return h("tr", { "data-testid": "usage-row", "data-key": r.key, "data-tokens": totalTokens(r) },
          h("td", {}, h("a", { href: `#/runs/${enc(r.key)}` }, run && run.workdir ? `${run.workdir.split("/").pop()} · ${shortId(r.key)}` : r.key)),
          ...FIELDS.map((k) => h("td", { class: "num" }, Number(r[k] || 0).toLocaleString())),
          h("td", { class: "num" }, formatCost(r.cost_usd)));
      })));
  }

  destroy() { this.destroyed = true; }
}

/**
 * A run's tokens and cost, for its header: `el` is filled from GET /runs/{id}/usage,
 * again at most every few seconds while `refresh()` is called (new messages).
 */
export class RunUsage {
  constructor(runId) {
    this.runId = runId;
    this.el = h("span", { class: "run-usage", "data-testid": "run-usage", hidden: true });
    this.last = 0;
    this.timer = null;
    this.refresh();
  }

  refresh() {
    if (this.timer) return;
    const wait = Math.max(0, this.last + 3000 - Date.now());
    this.timer = setTimeout(() => { this.timer = null; this.load(); }, wait);
  }

  async load() {
    this.last = Date.now();
    const res = await api("GET", `runs/${enc(this.runId)}/usage`);
    if (!res.ok || !res.data || this.destroyed) return;
    const u = res.data;
    const tokens = totalTokens(u);
    this.el.hidden = u.responses === 0;
    this.el.dataset.tokens = String(tokens);
    this.el.dataset.cost = u.cost_usd ?? "";
    const ctx = u.context && u.context.window ? ` · context ${Math.round((100 * u.context.used) / u.context.window)}%` : "";
    this.el.textContent = `${formatTokens(tokens)} tokens · ${formatCost(u.cost_usd)}${ctx}`;
    this.el.title = `${u.responses} responses: ${FIELDS.map((k) => `${FIELD_LABEL[k]} ${Number(u[k] || 0).toLocaleString()}`).join(", ")}`
      + (u.context ? `; context in use ${u.context.used.toLocaleString()}${u.context.window ? ` of ${u.context.window.toLocaleString()}` : ""} tokens` : "");
  }

  destroy() { this.destroyed = true; clearTimeout(this.timer); }
}

/** The account windows the agents report ("codex 5h 12 % · resets 14:05"), kept fresh. */
export function startLimitWindows() {
  const el = document.getElementById("limit-windows");
  if (!el) return;
  const load = async () => {
    const res = await api("GET", "usage?group=provider");
    if (!res.ok || !res.data) return;
    const parts = [];
    for (const p of res.data.windows || []) {
      for (const w of p.windows) {
        const resets = w.resets_at ? ` · resets ${new Date(w.resets_at * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })}` : "";
        parts.push(h("span", { class: "limit-window", "data-testid": "limit-window", title: `${p.provider}: ${w.name} window ${w.used_percent}% used${resets}` },
          `${p.provider} ${w.name} ${Math.round(w.used_percent)}%${resets}`));
      }
    }
    el.replaceChildren(...parts);
    el.hidden = parts.length === 0;
  };
  load();
  setInterval(load, WINDOWS_EVERY_MS);
}
