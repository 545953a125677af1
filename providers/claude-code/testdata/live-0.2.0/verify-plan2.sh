source /work/lab-live/lib.sh
PLAN='{"turns": [
 {"reply": {"tool_use": {"name": "ExitPlanMode", "input": {"plan": "# Plan\n\n1. Add a `hello` function.\n"}}}},
 {"reply": {"text": "Revising the plan."}}
], "side_reply": "Plan"}'
PRMATCH='^(?!(AskUserQuestion|ExitPlanMode)$).*' start planfb "$PLAN" "Plan a hello function." --permission-mode plan
wait_screen planfb 'Exit plan mode' 60 >/dev/null; sleep 0.5
save planfb plan-2-before >/dev/null
keys planfb Down Down Down  # operator moves the cursor: lands on 2, 1, 2
keys planfb 2 "lit:keep planning: add a test first" Enter
sleep 4; save planfb plan-2-feedback-after; hooks planfb
tail -4 $(transcript planfb) | jq -c '[.type, .message.content]' | cut -c1-300
stop planfb
