source /work/lab-live/lib.sh
PLAN='{"turns": [
 {"reply": {"text": "Thinking about the plan."}},
 {"reply": {"tool_use": {"name": "ExitPlanMode", "input": {}}}},
 {"reply": {"text": "After plan."}},
 {"reply": {"text": "More."}}
], "side_reply": "Plan"}'
run() {  # NAME KEYS...
  local n=$1; shift
  PRMATCH='^(?!(AskUserQuestion|ExitPlanMode)$).*' start $n "$PLAN" "Plan a hello function." --permission-mode plan
  for i in $(seq 60); do P=$(curl -s "http://127.0.0.1:$(cat $BASE/$n/port)/_standin/requests" | grep -o '[^" ]*\.claude/plans/[^" \\]*' | head -1); [ -n "$P" ] && break; sleep 0.5; done
  wait_screen $n 'for 0s' 30 >/dev/null; sleep 1
  mkdir -p "$(dirname "$P")"; printf '# Hello plan\n\n1. Add a `hello` function.\n2. Write a test for it.\n' > "$P"
  keys $n "lit:go" Enter
  wait_screen $n 'Would you like to proceed' 30 >/dev/null; sleep 0.3
  save $n $n-before >/dev/null
  keys $n "$@"
  sleep 4; save $n $n-after | grep -v '^$' | tail -12
  echo "== $n: keys $*"
  jq -c '{t:.received_ms, hook, tool:.payload.tool_name, nt:.payload.notification_type, pm:.payload.permission_mode}' $BASE/$n/hooks.jsonl
  jq -c '[.type, .message.content]' $(transcript $n) | tail -5 | cut -c1-300
  stop $n
}
run richA Down 1
run richB 2
run richC 3 Enter
