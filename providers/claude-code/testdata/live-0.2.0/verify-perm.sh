source /work/lab-live/lib.sh
W=/work/lab-live/runs/permfb/work
S=$(cat <<J
{"turns": [
 {"reply": {"tool_use": {"name": "Write", "text": "Writing.", "input": {"file_path": "$W/a.txt", "content": "alpha\n"}}}},
 {"reply": {"tool_use": {"name": "WebFetch", "text": "Fetch.", "input": {"url": "http://127.0.0.1:9/doc", "prompt": "Summarise"}}}},
 {"reply": {"tool_use": {"name": "Bash", "text": "Step.", "input": {"command": "touch c.txt && echo c", "description": "Make c"}}}},
 {"reply": {"text": "Done."}}
], "side_reply": "Perm"}
J
)
PRMATCH='^(?!(AskUserQuestion|ExitPlanMode)$).*' start permfb "$S" "Do things."
wait_screen permfb 'Do you want to create' 60 >/dev/null; sleep 0.5
keys permfb Down Down Tab "lit:name it b.txt instead" Enter
wait_screen permfb 'fetch this content' 30 >/dev/null; sleep 0.5
save permfb perm-webfetch-2 >/dev/null
keys permfb 3 "lit:do not fetch, use the local copy" Enter
wait_screen permfb 'Do you want to proceed' 30 >/dev/null; sleep 0.5
keys permfb Down Down    # operator moved the cursor to 3
save permfb perm-bash-cursor-moved >/dev/null
keys permfb 1
sleep 4; save permfb permfb-end; hooks permfb
jq -c '[.type, .message.content]' $(transcript permfb) | cut -c1-300
stop permfb
