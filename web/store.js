// What the UI knows, shared by its parts.

export const store = {
  runs: new Map(), // id -> run object from GET /runs
  providers: [],
  liveState: new Map(), // id -> state from the selected run's SSE (fresher than the poll)
  currentView: null, // RunView | TerminalView | HomeView
};

/** The agent's name for the UI: the display name of the run's provider (GET /providers). */
export function agentName(run) {
  const p = run && store.providers.find((x) => x.name === run.provider);
  const name = p && (p.display_name || p.name);
  return name ? String(name) : "The agent";
}
