# source me. Live harness (from scripts/capture-claude-fixtures.sh).
BASE=/work/lab-live/runs
SOCK=/work/lab-live/tmux.sock
KEY="sk-ant-api03-standin-0123456789abcdefghijklmnopqrstuvwxyz-test"
CLAUDE=/root/.cache/lab/claude-code/2.1.198/node_modules/@anthropic-ai/claude-code-linux-x64/claude
STANDIN=/work/lab-live/messages-standin
mkdir -p $BASE
cat > /work/lab-live/hook.sh <<'H'
#!/bin/sh
ts=$(date +%s%3N)
payload=$(cat)
line=$(printf '%s' "$payload" | jq -c --arg ev "$1" --argjson ts "$ts" '{received_ms:$ts, hook:$ev, payload:.}' 2>/dev/null) \
  || line="{\"received_ms\":$ts,\"hook\":\"$1\",\"unparsed\":true}"
printf '%s\n' "$line" >> "$HOOK_LOG"
exit 0
H
chmod +x /work/lab-live/hook.sh
now_ms() { date +%s%3N; }
# start NAME SCRIPT PROMPT [claude args]; env TRUST=0 to skip trust; PRMATCH=<matcher for PermissionRequest>
start() {
  local n=$1 script=$2 prompt=$3; shift 3
  local d="$BASE/$n"
  rm -rf "$d"; mkdir -p "$d/home" "$d/work"
  printf '%s\n' "$script" > "$d/script.json"
  local proj="\"$d/work\": {\"hasTrustDialogAccepted\": true}"
  [ "${TRUST:-1}" = 0 ] && proj=""
  cat > "$d/home/.claude.json" <<J
{"hasCompletedOnboarding": true, "theme": "dark",
 "customApiKeyResponses": {"approved": ["${KEY: -20}"], "rejected": []},
 "projects": {$proj}}
J
  local h="HOOK_LOG=$d/hooks.jsonl /work/lab-live/hook.sh"
  local prm=""
  [ -n "${PRMATCH:-}" ] && prm="\"matcher\": \"$PRMATCH\","
  cat > "$d/settings.json" <<J
{"hooks": {
  "PreToolUse": [{"matcher": "${PREMATCH:-.*}", "hooks": [{"type": "command", "command": "$h PreToolUse", "timeout": 10}]}],
  "PostToolUse": [{"matcher": "${PREMATCH:-.*}", "hooks": [{"type": "command", "command": "$h PostToolUse", "timeout": 10}]}],
  "PermissionRequest": [{$prm "hooks": [{"type": "command", "command": "$h PermissionRequest", "timeout": 10}]}],
  "Notification": [{"hooks": [{"type": "command", "command": "$h Notification", "timeout": 10}]}],
  "Stop": [{"hooks": [{"type": "command", "command": "$h Stop", "timeout": 10}]}]
}}
J
  [ -n "${SETTINGS_SRC:-}" ] && sed "s#@D@#$d#g" "$SETTINGS_SRC" > "$d/settings.json"
  : > "$d/hooks.jsonl"; : > "$d/keys.jsonl"
  cat /proc/sys/kernel/random/uuid > "$d/sid"
  "$STANDIN" --script "$d/script.json" > "$d/standin.out" 2> "$d/standin.err" &
  echo $! > "$d/standin.pid"
  for _ in $(seq 100); do grep -q '^listening on' "$d/standin.out" 2>/dev/null && break; sleep 0.05; done
  sed -n 's/^listening on .*://p' "$d/standin.out" > "$d/port"
  tmux -S "$SOCK" new-session -d -s "$n" -x 200 -y 50 -c "$d/work" \
    env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$d/home" TERM=xterm-256color LANG=C.UTF-8 \
    ANTHROPIC_BASE_URL="http://127.0.0.1:$(cat "$d/port")" ANTHROPIC_API_KEY="$KEY" \
    DISABLE_TELEMETRY=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 \
    "$CLAUDE" --session-id "$(cat "$d/sid")" --settings "$d/settings.json" "$@" ${prompt:+"$prompt"}
}
cap() { tmux -S "$SOCK" capture-pane -p -t "$1" | sed 's/[[:space:]]*$//'; }
save() { cap "$1" > "$BASE/$1/$2.txt"; cat "$BASE/$1/$2.txt"; }
wait_screen() { local n=$1 re=$2 to=${3:-30} i; for i in $(seq $((to * 20))); do cap "$n" | grep -Eq "$re" && return 0; sleep 0.05; done; cap "$n"; echo "NO MATCH /$re/"; return 1; }
keys() { local n=$1 k; shift; for k in "$@"; do case "$k" in lit:*) tmux -S "$SOCK" send-keys -t "$n" -l "${k#lit:}";; *) tmux -S "$SOCK" send-keys -t "$n" "$k";; esac; jq -cn --argjson t "$(now_ms)" --arg k "$k" '{at_ms:$t, key:$k}' >> "$BASE/$n/keys.jsonl"; sleep 0.25; done; }
hooks() { jq -c '{t:.received_ms, hook, tool:.payload.tool_name, nt:.payload.notification_type, id:.payload.tool_use_id}' "$BASE/$1/hooks.jsonl"; }
stop() { tmux -S "$SOCK" kill-session -t "$1" 2>/dev/null; kill "$(cat "$BASE/$1/standin.pid")" 2>/dev/null; true; }
transcript() { local d="$BASE/$1"; printf '%s' "$d/home/.claude/projects/$(printf '%s' "$d/work" | sed 's/[^A-Za-z0-9]/-/g')/$(cat "$d/sid").jsonl"; }
