// Search across every run (GET /search): the box above the run list (`/` focuses it
// from anywhere but a text field), its hits below it; a hit opens its run at that
// message (`#/runs/<id>/at/<seq>`), which the chat loads, scrolls to and highlights.
import { api, enc } from "./api.js";
import { h, shortId } from "./dom.js";
import { store } from "./store.js";

const LIMIT = 30;

/** The snippet with the match (between « and ») as <mark>, as text nodes only. */
export function snippetNodes(snippet) {
  const out = [];
  for (const [i, part] of String(snippet).split(/[«»]/).entries()) {
    if (!part) continue;
    out.push(i % 2 ? h("mark", {}, part) : part);
  }
  return out;
}

export function initSearch() {
  const form = document.getElementById("search-form");
  const input = document.getElementById("search-input");
  const results = document.getElementById("search-results");
  if (!form || !input || !results) return;
  let asked = 0;
  const run = async () => {
    const q = input.value.trim();
    const mine = ++asked;
    if (!q) { results.replaceChildren(); results.hidden = true; return; }
    const res = await api("GET", `search?q=${enc(q)}&limit=${LIMIT}`);
    if (mine !== asked) return;
    results.hidden = false;
    if (!res.ok) { results.replaceChildren(h("li", { class: "search-note", role: "alert" }, res.message)); return; }
    const hits = res.data.hits || [];
    if (!hits.length) { results.replaceChildren(h("li", { class: "search-note", "data-testid": "search-none" }, `Nothing found for “${q}”.`)); return; }
    results.replaceChildren(...hits.map((hit) => {
      const r = store.runs.get(hit.run_id);
      const where = r && r.workdir ? r.workdir.split("/").pop() : shortId(hit.run_id);
      return h("li", {},
        h("a", { href: `#/runs/${enc(hit.run_id)}/at/${hit.seq}`, class: "search-hit", "data-testid": "search-hit", "data-run-id": hit.run_id, "data-seq": hit.seq,
          onclick: () => { results.hidden = true; } },
          h("span", { class: "search-where" }, `${where} · ${hit.role}`),
          h("span", { class: "search-snippet" }, ...snippetNodes(hit.snippet))));
    }));
  };
  form.addEventListener("submit", (e) => { e.preventDefault(); run(); });
  let timer = null;
  input.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(run, 250); });
  input.addEventListener("keydown", (e) => { if (e.key === "Escape") { input.value = ""; run(); input.blur(); } });
  document.addEventListener("keydown", (e) => {
    if (e.key !== "/" || e.ctrlKey || e.metaKey || e.altKey) return;
    const t = e.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    e.preventDefault();
    input.focus();
    input.select();
  });
}
