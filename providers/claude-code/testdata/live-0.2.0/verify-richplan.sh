source /work/lab-live/lib.sh
PLAN='{"turns": [
 {"reply": {"text": "Thinking about the plan."}},
 {"reply": {"tool_use": {"name": "ExitPlanMode", "input": {}}}},
 {"reply": {"text": "After plan."}},
 {"reply": {"text": "More."}}
], "side_reply": "Plan"}'
run() {  # NAME DIGIT
  local n=$1
  PRMATCH='^(?!(AskUserQuestion|ExitPlanMode)$).*' start $n "$PLAN" "Plan a hello function." --permission-mode plan
  for i in $(seq 60); do P=$(curl -s "http://127.0.0.1:$(cat $BASE/$n/port)/_standin/requests" | grep -o '[^" ]*\.claude/plans/[^" \\]*' | head -1); [ -n "$P" ] && break; sleep 0.5; done
  wait_screen $n 'Brewed|Baked|Worked|Cogitated|Thinking about the plan' 30 >/dev/null; sleep 1
  mkdir -p "$(dirname "$P")"; printf '# Hello plan\n\n1. Add a `hello` function.\n2. Write a test for it.\n' > "$P"
  keys $n "lit:go" Enter
  wait_screen $n 'Would you like to proceed' 30 >/dev/null; sleep 0.3
  save $n $n-before >/dev/null
  keys $n Down Down   # operator moved the cursor to row 3
  keys $n $2
  sleep 4; save $n $n-after
  jq -c '{t:.received_ms, hook, tool:.payload.tool_name, nt:.payload.notification_type, pm:.payload.permission_mode}' $BASE/$n/hooks.jsonl
  jq -c '[.type, .message.content]' $(transcript $n) | tail -5 | cut -c1-300
  stop $n
}
run richplan1 1
run richplan2 2
