source /work/lab-live/lib.sh
S='{"turns": [
 {"reply": {"tool_use": {"name": "AskUserQuestion", "text": "Question first.", "input": {"questions": [
   {"question": "Which database should we use?", "header": "Database", "multiSelect": false, "options": [
     {"label": "Postgres", "description": "Relational, robust"},
     {"label": "SQLite", "description": "Embedded, simple"}]}]}}}},
 {"reply": {"tool_use": {"name": "Bash", "text": "Step.", "input": {"command": "touch one.txt && echo one", "description": "Make one"}}}},
 {"reply": {"tool_use": {"name": "Bash", "text": "Step.", "input": {"command": "touch two.txt && echo two", "description": "Make two"}}}},
 {"reply": {"text": "Done."}}
], "side_reply": "Final"}'
SETTINGS_SRC=/work/lab-live/final-settings.json start final "$S" "Final check."
wait_screen final 'Enter to select' 60 >/dev/null; sleep 0.3
save final final-ask >/dev/null
keys final Down Down Down Up Up Up Down Enter
wait_screen final 'Do you want to proceed' 30 >/dev/null; sleep 0.3
save final final-bash-one >/dev/null
keys final 3 "lit:use mkdir instead" Enter
wait_screen final 'Do you want to proceed' 30 >/dev/null; sleep 0.3
save final final-bash-two >/dev/null
keys final 1
sleep 4; save final final-end
jq -c '{t:.received_ms, hook, tool:.payload.tool_name, nt:.payload.notification_type, id:.payload.tool_use_id}' $BASE/final/hooks.jsonl
jq -c '[.type, .message.content]' $(transcript final) | cut -c1-250
stop final
