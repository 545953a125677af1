#!/usr/bin/env bash
# Re-captures the real-Claude-Code fixtures under providers/claude-code/testdata/real*/.
#
#   scripts/capture-claude-fixtures.sh                 # every scenario, on the pin
#   scripts/capture-claude-fixtures.sh ask-single-esc  # just some
#   LAB_CLAUDE_VERSION=2.1.198 scripts/capture-claude-fixtures.sh stop-failure-auth
#                                                      # another release
# Captures of 2.1.198 go into testdata/real/, of any other release into
# testdata/real-<version>/.
#
# Each scenario runs the REAL `claude` (scripts/install-claude.sh) in its own tmux session
# on a private tmux socket, against the messages-standin binary on 127.0.0.1 (loopback
# only), with an isolated HOME seeded per docs/providers/claude-code/observed-2.1.198.md (and
# `firstStartVersion`, as a fresh install has it), the classic renderer pinned as lab
# pins it (`"tui": "default"`), and hooks
# (PreToolUse/PostToolUse on AskUserQuestion|ExitPlanMode, Notification, Stop) that append
# each payload to hooks.jsonl. It then drives the picker with tmux send-keys (250 ms apart)
# and copies: transcript.jsonl (final), transcript-while-pending.jsonl (snapshot while the
# dialog was open), hooks.jsonl ({received_ms, hook, payload}), keys.jsonl ({at_ms, key}),
# standin-requests.jsonl (a compact per-request summary). Needs tmux, jq, curl, cargo.
# Work files live in /tmp/lab-capture (fixed, so paths in fixtures are stable).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PIN="$(sed -n 's/^VERSION="${LAB_CLAUDE_VERSION:-\([^}]*\)}"$/\1/p' "$ROOT/scripts/install-claude.sh")"
# testdata/real/ holds the 2.1.198 captures (the provider's key recipes were measured on
# them); every other release goes into testdata/real-<version>/.
REAL_HOLDS=2.1.198
VERSION="${LAB_CLAUDE_VERSION:-$PIN}"
OUT="$ROOT/providers/claude-code/testdata/real"
[ "$VERSION" = "$REAL_HOLDS" ] || OUT="$OUT-$VERSION"
BASE=/tmp/lab-capture
SOCK="$BASE/tmux.sock"
KEY="sk-ant-api03-standin-0123456789abcdefghijklmnopqrstuvwxyz-test"
KEY_DELAY=0.25

die() { printf 'capture: error: %s\n' "$*" >&2; exit 1; }
log() { printf 'capture: %s\n' "$*" >&2; }
for t in tmux jq curl cargo; do command -v "$t" >/dev/null || die "$t is required"; done

CLAUDE="$("$ROOT/scripts/install-claude.sh" | tail -n 1)"
[ -x "$CLAUDE" ] || die "no claude executable"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/root/.cache/lab/target}"
cargo build -q -p messages-standin --manifest-path "$ROOT/Cargo.toml" || die "cannot build messages-standin"
STANDIN="$CARGO_TARGET_DIR/debug/messages-standin"

mkdir -p "$BASE"
STANDIN_PIDS=()
cleanup() {
  tmux -S "$SOCK" kill-server 2>/dev/null || true
  for p in "${STANDIN_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# The hook: one JSON line per payload.
cat > "$BASE/hook.sh" <<'EOF'
#!/bin/sh
ts=$(date +%s%3N)
payload=$(cat)
line=$(printf '%s' "$payload" | jq -c --arg ev "$1" --argjson ts "$ts" '{received_ms:$ts, hook:$ev, payload:.}' 2>/dev/null) \
  || line="{\"received_ms\":$ts,\"hook\":\"$1\",\"unparsed\":true}"
printf '%s\n' "$line" >> "$HOOK_LOG"
exit 0
EOF
chmod +x "$BASE/hook.sh"

now_ms() { date +%s%3N; }

# start NAME SCRIPT_JSON PROMPT [claude args...]
start() {
  local n=$1 script=$2 prompt=$3; shift 3
  local d="$BASE/$n"
  rm -rf "$d"; mkdir -p "$d/home" "$d/work"
  printf '%s\n' "$script" > "$d/script.json"
  cat > "$d/home/.claude.json" <<J
{"hasCompletedOnboarding": true, "theme": "dark", "firstStartVersion": "$VERSION",
 "customApiKeyResponses": {"approved": ["${KEY: -20}"], "rejected": []},
 "projects": {"$d/work": {"hasTrustDialogAccepted": true}}}
J
  local h="HOOK_LOG=$d/hooks.jsonl $BASE/hook.sh"
  cat > "$d/settings.json" <<J
{"tui": "default", "hooks": {
  "PreToolUse": [{"matcher": "AskUserQuestion|ExitPlanMode", "hooks": [{"type": "command", "command": "$h PreToolUse"}]}],
  "PostToolUse": [{"matcher": "AskUserQuestion|ExitPlanMode", "hooks": [{"type": "command", "command": "$h PostToolUse"}]}],
  "Notification": [{"hooks": [{"type": "command", "command": "$h Notification"}]}],
  "Stop": [{"hooks": [{"type": "command", "command": "$h Stop"}]}],
  "StopFailure": [{"hooks": [{"type": "command", "command": "$h StopFailure"}]}],
  "SessionEnd": [{"hooks": [{"type": "command", "command": "$h SessionEnd"}]}]
}}
J
  : > "$d/hooks.jsonl"; : > "$d/keys.jsonl"
  cat /proc/sys/kernel/random/uuid > "$d/sid"
  "$STANDIN" --script "$d/script.json" > "$d/standin.out" 2> "$d/standin.err" &
  STANDIN_PIDS+=($!); echo $! > "$d/standin.pid"
  for _ in $(seq 100); do grep -q '^listening on' "$d/standin.out" 2>/dev/null && break; sleep 0.05; done
  sed -n 's/^listening on .*://p' "$d/standin.out" > "$d/port"
  [ -s "$d/port" ] || die "$n: stand-in did not start"
  now_ms > "$d/t_launch"
  tmux -S "$SOCK" new-session -d -s "$n" -x 200 -y 50 -c "$d/work" \
    env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$d/home" TERM=xterm-256color LANG=C.UTF-8 \
    ANTHROPIC_BASE_URL="http://127.0.0.1:$(cat "$d/port")" ANTHROPIC_API_KEY="$KEY" \
    DISABLE_TELEMETRY=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 \
    ${EXTRA_ENV:-} "$CLAUDE" --session-id "$(cat "$d/sid")" --settings "$d/settings.json" "$@" "$prompt"
}

transcript() { local d="$BASE/$1"; printf '%s' "$d/home/.claude/projects/$(printf '%s' "$d/work" | sed 's/[^A-Za-z0-9]/-/g')/$(cat "$d/sid").jsonl"; }

# wait_hook NAME HOOK [NOTIFICATION_TYPE] [TIMEOUT_S]
wait_hook() {
  local n=$1 hook=$2 nt=${3:-} to=${4:-30} i
  for i in $(seq $((to * 20))); do
    if jq -en --arg h "$hook" --arg nt "$nt" \
         '[inputs | select(.hook==$h and ($nt=="" or .payload.notification_type==$nt))] | length > 0' \
         "$BASE/$n/hooks.jsonl" >/dev/null 2>&1; then return 0; fi
    sleep 0.05
  done
  die "$n: no $hook ${nt} hook within ${to}s"
}

# wait_screen NAME REGEX [TIMEOUT_S]
wait_screen() {
  local n=$1 re=$2 to=${3:-30} i
  for i in $(seq $((to * 20))); do
    tmux -S "$SOCK" capture-pane -p -t "$n" | grep -Eq "$re" && return 0
    sleep 0.05
  done
  tmux -S "$SOCK" capture-pane -p -t "$n" >&2
  die "$n: screen never matched /$re/"
}

# keys NAME KEY... ; "lit:TEXT" sends TEXT literally. Logged to keys.jsonl.
keys() {
  local n=$1 k; shift
  for k in "$@"; do
    case "$k" in
      lit:*) tmux -S "$SOCK" send-keys -t "$n" -l "${k#lit:}" ;;
      *) tmux -S "$SOCK" send-keys -t "$n" "$k" ;;
    esac
    jq -cn --argjson t "$(now_ms)" --arg k "$k" '{at_ms:$t, key:$k}' >> "$BASE/$n/keys.jsonl"
    sleep "$KEY_DELAY"
  done
}

snapshot() { cp "$(transcript "$1")" "$BASE/$1/transcript-while-pending.jsonl"; tmux -S "$SOCK" capture-pane -p -t "$1" > "$BASE/$1/screen-while-pending.txt"; }

finish() {
  local n=$1 d="$BASE/$1" o="$OUT/$1"
  sleep 1
  rm -rf "$o"; mkdir -p "$o"
  # Newer releases copy each request's system prompt, tool list and reminders into the
  # transcript (`api-request-blob`, `api-request-shape`, attachment texts): left out,
  # they are Claude Code's text, not lab's concern (the lines' shapes stay).
  local strip='select(.type != "api-request-blob" and .type != "api-request-shape")
    | if .type == "attachment" then (del(.rendered)
        | if .attachment.type == "plan_mode" then . else .attachment |= {type} end) else . end'
  jq -c "$strip" "$(transcript "$n")" > "$o/transcript.jsonl"
  for f in transcript-while-pending.jsonl screen-while-pending.txt hooks.jsonl keys.jsonl; do
    [ -s "$d/$f" ] && cp "$d/$f" "$o/$f"
  done
  if [ -s "$o/transcript-while-pending.jsonl" ]; then
    jq -c "$strip" "$d/transcript-while-pending.jsonl" > "$o/transcript-while-pending.jsonl"
    cmp -s "$o/transcript.jsonl" "$o/transcript-while-pending.jsonl" && rm "$o/transcript-while-pending.jsonl"
  fi
  sed -i 's/[[:space:]]*$//' "$o/screen-while-pending.txt" 2>/dev/null || true
  curl -s "http://127.0.0.1:$(cat "$d/port")/_standin/requests" | jq -c '.[] | {index, at_unix_ms, elapsed_ms, method, path, query, kind, model, stream,
      tools: (if .body.tools then [.body.tools[].name] else null end),
      last_user_message: (if .body.messages then ([.body.messages[] | select(.role=="user")] | last
        | if .content | type == "array" then .content |= map(select((.text // "") | startswith("<system-reminder>") | not)) else . end) else null end),
      trailing_roles: (if .body.messages then [.body.messages[-3:][] | .role] else null end),
      reply}' > "$o/standin-requests.jsonl"
  chmod 644 "$o"/*
  tmux -S "$SOCK" kill-session -t "$n" 2>/dev/null || true
  kill "$(cat "$d/standin.pid")" 2>/dev/null || true
  log "$n: captured into ${o#"$ROOT"/}"
}

ASK1='{"turns": [
 {"reply": {"tool_use": {"name": "AskUserQuestion", "text": "I need to ask you something.", "input": {"questions": [
   {"question": "Which database should we use?", "header": "Database", "multiSelect": false, "options": [
     {"label": "Postgres", "description": "Relational, robust"},
     {"label": "SQLite", "description": "Embedded, simple"},
     {"label": "MongoDB", "description": "Document store"}]}]}}}},
 {"match": "tool_result_for_previous", "reply": {"text": "Thanks, noted your choice."}}
], "side_reply": "Pick a database"}'
ASK2='{"turns": [
 {"reply": {"tool_use": {"name": "AskUserQuestion", "input": {"questions": [
   {"question": "Which database should we use?", "header": "Database", "multiSelect": false, "options": [
     {"label": "Postgres", "description": "Relational, robust"},
     {"label": "SQLite", "description": "Embedded, simple"},
     {"label": "MongoDB", "description": "Document store"}]},
   {"question": "Which web framework?", "header": "Framework", "multiSelect": false, "options": [
     {"label": "Axum", "description": "Tokio-based"},
     {"label": "Actix", "description": "Actor-based"}]}]}}}},
 {"match": "tool_result_for_previous", "reply": {"text": "Thanks, noted both choices."}}
], "side_reply": "Pick a stack"}'
MULTI='{"turns": [
 {"reply": {"tool_use": {"name": "AskUserQuestion", "input": {"questions": [
   {"question": "Which features do you want?", "header": "Features", "multiSelect": true, "options": [
     {"label": "Auth", "description": "Login and sessions"},
     {"label": "Search", "description": "Full-text search"},
     {"label": "Export", "description": "CSV export"}]}]}}}},
 {"match": "tool_result_for_previous", "reply": {"text": "Thanks, noted the features."}}
], "side_reply": "Pick features"}'
PLAN='{"turns": [
 {"reply": {"tool_use": {"name": "ExitPlanMode", "input": {"plan": "# Plan\n\n1. Add a `hello` function.\n2. Write a test for it.\n"}}}},
 {"match": "tool_result_for_previous", "reply": {"text": "Plan approved; starting."}}
], "side_reply": "Plan a hello function"}'
# The plan as a model writes it on 2.1.332: into the plan file Claude Code names in the
# request (the stand-in fills the path in), ExitPlanMode loaded through ToolSearch, then
# called with no input. On a release without ToolSearch that step is an error result.
PLANFILE='{"turns": [
 {"reply": {"tool_use": {"name": "Write", "text": "I will write the plan.", "input": {"file_path": "{{path_with:/.claude/plans/}}", "content": "# Plan\n\n1. Add a `hello` function.\n2. Write a test for it.\n"}}}},
 {"match": "tool_result_for_previous", "reply": {"tool_use": {"name": "ToolSearch", "input": {"query": "select:ExitPlanMode", "max_results": 1}}}},
 {"match": "tool_result_for_previous", "reply": {"tool_use": {"name": "ExitPlanMode", "input": {}}}},
 {"match": "tool_result_for_previous", "reply": {"text": "Plan approved; starting."}}
], "side_reply": "Plan a hello function"}'
bash_script() { printf '{"turns": [
 {"reply": {"tool_use": {"name": "Bash", "text": "Let me run a command.", "input": {"command": "%s", "description": "Run a command"}}}},
 {"match": "tool_result_for_previous", "reply": {"text": "The command ran."}}
], "side_reply": "Run a command"}' "$1"; }

PICKER='Enter to select'

scenario_ask-single-answered() {   # option index 1 (SQLite) with the climb recipe; then wait for idle_prompt
  start "$1" "$ASK1" "Please pick a database for me."
  wait_hook "$1" PreToolUse; wait_screen "$1" "$PICKER"
  wait_hook "$1" Notification permission_prompt 20; snapshot "$1"
  keys "$1" Up Up Up Up Down Enter
  wait_hook "$1" Stop; wait_hook "$1" Notification idle_prompt 90
  finish "$1"
}
scenario_ask-single-esc() {
  start "$1" "$ASK1" "Please pick a database for me."
  wait_hook "$1" PreToolUse; wait_screen "$1" "$PICKER"; snapshot "$1"
  keys "$1" Escape
  wait_screen "$1" 'User declined to answer'
  finish "$1"
}
scenario_ask-single-other-text() {
  start "$1" "$ASK1" "Please pick a database for me."
  wait_hook "$1" PreToolUse; wait_screen "$1" "$PICKER"; snapshot "$1"
  keys "$1" Up Up Up Up Down Down Down "lit:CockroachDB, please" Enter
  wait_hook "$1" Stop
  finish "$1"
}
scenario_ask-single-afk-timeout() {   # never answered: resolves by itself 60 s after the last key
  start "$1" "$ASK1" "Please pick a database for me."
  wait_hook "$1" PreToolUse; wait_screen "$1" "$PICKER"; snapshot "$1"
  wait_screen "$1" 'auto-continue in' 60
  tmux -S "$SOCK" capture-pane -p -t "$1" > "$BASE/$1/screen-countdown.txt"
  jq -cn --argjson t "$(now_ms)" '{at_ms:$t, key:"(none: countdown seen on screen)"}' >> "$BASE/$1/keys.jsonl"
  wait_hook "$1" PostToolUse "" 40; wait_hook "$1" Stop
  finish "$1"
  sed 's/[[:space:]]*$//' "$BASE/$1/screen-countdown.txt" > "$OUT/$1/screen-countdown.txt"
}
scenario_ask-two-questions() {   # Q1 → index 2 (MongoDB), Q2 → index 1 (Actix), review → Submit
  start "$1" "$ASK2" "Pick a stack for me."
  wait_hook "$1" PreToolUse; wait_screen "$1" "$PICKER"; snapshot "$1"
  keys "$1" Down Down Enter Down Enter Enter
  wait_hook "$1" Stop
  finish "$1"
}
scenario_ask-multi-select() {   # toggle 0 and 2, move to Submit, review → Submit
  start "$1" "$MULTI" "Pick features."
  wait_hook "$1" PreToolUse; wait_screen "$1" "$PICKER"; snapshot "$1"
  keys "$1" Enter Down Down Enter Down Down Enter Enter
  wait_hook "$1" Stop
  finish "$1"
}
scenario_exit-plan-mode-approved() {
  start "$1" "$PLAN" "Plan a hello function." --permission-mode plan
  wait_hook "$1" PreToolUse; wait_screen "$1" 'Exit plan mode'
  wait_hook "$1" Notification permission_prompt 20; snapshot "$1"
  keys "$1" Enter
  wait_hook "$1" Stop
  finish "$1"
}
scenario_exit-plan-mode-rejected() {
  start "$1" "$PLAN" "Plan a hello function." --permission-mode plan
  wait_hook "$1" PreToolUse; wait_screen "$1" 'Exit plan mode'; snapshot "$1"
  keys "$1" Down Enter
  wait_screen "$1" "rejected Claude's plan"
  finish "$1"
}
scenario_exit-plan-mode-plan-file() {   # row 2: "Yes, manually approve edits"
  start "$1" "$PLANFILE" "Plan a hello function." --permission-mode plan
  wait_hook "$1" PreToolUse "" 60; wait_screen "$1" 'Would you like to proceed'
  wait_hook "$1" Notification permission_prompt 20; sleep 1; snapshot "$1"
  keys "$1" 2
  wait_hook "$1" Stop "" 60
  finish "$1"
}
scenario_bash-permission-prompt() {
  start "$1" "$(bash_script 'touch standin-was-here.txt && echo touched')" "Create a marker file."
  wait_screen "$1" 'Do you want to proceed'
  wait_hook "$1" Notification permission_prompt 20; snapshot "$1"
  keys "$1" Enter
  wait_hook "$1" Stop
  finish "$1"
}
scenario_bash-readonly-no-prompt() {
  start "$1" "$(bash_script 'echo hello-from-standin')" "Run a greeting command."
  wait_hook "$1" Stop
  finish "$1"
}

# error_script STATUS TYPE MESSAGE [TIMES]: every main request (and its retries, up to
# TIMES) fails with that API error.
error_script() {
  local turns="" i
  for i in $(seq "${4:-1}"); do
    turns="$turns${turns:+,}{\"reply\": {\"error\": {\"status\": $1, \"type\": \"$2\", \"message\": \"$3\"}}}"
  done
  printf '{"turns": [%s], "side_reply": "Fail"}' "$turns"
}
# A turn the API refuses: which hook fires (Stop or StopFailure), what the transcript and
# the screen say, and that the agent is back at its prompt.
stop_failure() {
  local n=$1; shift
  start "$n" "$(error_script "$@")" "Say hello."
  local i
  for i in $(seq 2400); do
    grep -Eq '"hook":"(Stop|StopFailure)"' "$BASE/$n/hooks.jsonl" && break
    sleep 0.05
  done
  sleep 3; snapshot "$n"
  # Whether the agent then says it waits at its prompt (idle_prompt, ~60 s on 2.1.198).
  [ -n "${WAIT_IDLE:-}" ] && { wait_hook "$n" Notification idle_prompt 90 || true; }
  finish "$n"
}
scenario_stop-failure-auth() { stop_failure "$1" 401 authentication_error "invalid x-api-key"; }
scenario_stop-failure-billing() {
  stop_failure "$1" 400 invalid_request_error "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."
}
scenario_stop-failure-overloaded() { EXTRA_ENV="CLAUDE_CODE_MAX_RETRIES=1" stop_failure "$1" 529 overloaded_error "Overloaded" 4; }
scenario_stop-failure-rate-limit() { WAIT_IDLE=1 EXTRA_ENV="CLAUDE_CODE_MAX_RETRIES=1" stop_failure "$1" 429 rate_limit_error "Number of request tokens has exceeded your per-minute rate limit" 4; }

ALL=(ask-single-answered ask-single-esc ask-single-other-text ask-two-questions ask-multi-select
     exit-plan-mode-approved exit-plan-mode-rejected exit-plan-mode-plan-file bash-permission-prompt bash-readonly-no-prompt
     ask-single-afk-timeout stop-failure-auth stop-failure-billing stop-failure-overloaded
     stop-failure-rate-limit)
[ $# -gt 0 ] && ALL=("$@")
for s in "${ALL[@]}"; do
  declare -F "scenario_$s" >/dev/null || die "unknown scenario $s (known: ${ALL[*]})"
  log "$s: running"
  "scenario_$s" "$s"
done
log "done"
