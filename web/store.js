// What the UI knows, shared by its parts.

export const store = {
  runs: new Map(), // id -> run object from GET /runs
  providers: [],
  liveState: new Map(), // id -> state from the selected run's SSE (fresher than the poll)
  currentView: null, // RunView | TerminalView | HomeView
};
