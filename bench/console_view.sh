#!/usr/bin/env bash
# bench/console_view.sh: the web console's time to its first view with
# TASKS (default 1,000,000) tasks stored: they are added through
# POST /v1/tasks/batch, due in an hour, then bench/console_view.mjs opens the
# overview and the task listing in chromium, 5 times each. Prints the times
# (ms) and writes no results file. Needs make's tests/node packages.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
TASKS=${TASKS:-1000000}
tickd_start
log "adding $TASKS tasks, due in an hour"
timeout 900 node "$BENCH/tickd_load.js" insert --url "$TURL" --cb "$CB/cb" --n "$TASKS" \
  --batch 1000 --conc 8 --delay 3600000 >/dev/null
log "stored: $(tickd_stored) tasks"
node "$BENCH/console_view.mjs" "$TURL" 5
tickd_stop
