source /work/lab-live/lib.sh
PLAN='{"turns": [
 {"reply": {"text": "Thinking about the plan."}},
 {"reply": {"tool_use": {"name": "ExitPlanMode", "input": {}}}},
 {"reply": {"text": "After plan."}},
 {"reply": {"text": "More."}}
], "side_reply": "Plan"}'
n=richprobe
PRMATCH='^(?!(AskUserQuestion|ExitPlanMode)$).*' start $n "$PLAN" "Plan a hello function." --permission-mode plan
for i in $(seq 60); do P=$(curl -s "http://127.0.0.1:$(cat $BASE/$n/port)/_standin/requests" | grep -o '[^" ]*\.claude/plans/[^" \\]*' | head -1); [ -n "$P" ] && break; sleep 0.5; done
wait_screen $n 'for 0s' 30 >/dev/null; sleep 1
mkdir -p "$(dirname "$P")"; printf '# Hello plan\n\n1. Add a `hello` function.\n' > "$P"
keys $n "lit:go" Enter
wait_screen $n 'Would you like to proceed' 30 >/dev/null; sleep 0.3
sel() { cap $n | grep -E '^ *(❯ )?[0-9]\. ' ; echo --; }
keys $n Up; echo "after Up:"; sel
keys $n Up; echo "after Up Up:"; sel
keys $n Down Down Down Down Down; echo "after Down x5:"; sel
keys $n Up Up Up Up Up; echo "after Up x5:"; sel
