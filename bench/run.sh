#!/usr/bin/env bash
# tickd benchmarks against BullMQ and Redis itself (bench/README.md).
#
#   bench/run.sh          (or: make bench, from the repo root)
#
# One redis-server (no persistence) on a free port, one callback receiver
# (bench/receiver.js), and tickd started fresh (Redis flushed) for each of
# its workloads; the BullMQ side (bench/bullmq.js) runs on the same Redis and
# the same receiver. Prints a markdown table and writes it, with the
# machine's details, to bench/results.md. About 10 minutes.
#
# Environment: TICKD_* is passed to tickd as usual (e.g. TICKD_SERVER_WORKERS);
# BENCH_ONLY="ingest burst steady memory" runs a subset; BENCH_TICKD=path
# benchmarks another tickd binary (its scripts from ../lua beside it);
# BENCH_KEEP=1 keeps the temp dir (logs) after the run. The set-up is
# bench/lib.sh's.
set -euo pipefail

source "$(dirname "$0")/lib.sh"

want_bullmq=$(jq -r '.dependencies.bullmq' "$BENCH/package.json")
have_bullmq=$(jq -r '.version' "$BENCH/node_modules/bullmq/package.json" 2>/dev/null || true)
if [ "$have_bullmq" != "$want_bullmq" ] || [ ! -d "$BENCH/node_modules/ioredis" ]; then
  log "npm: installing bench/package.json (bullmq $want_bullmq, ioredis) into bench/node_modules"
  if [ -f "$BENCH/package-lock.json" ]; then npm_cmd=ci; else npm_cmd=install; fi
  timeout 300 npm "$npm_cmd" --prefix "$BENCH" --no-audit --no-fund --loglevel=error >&2 ||
    die "npm $npm_cmd --prefix bench failed"
fi

BWORKER_PID=
BWORKER_LOG=
bworker_start() { # bworker_start CONC: a BullMQ worker, running until bworker_stop
  BWORKER_LOG=$TMP/bworker.$(date +%s%N)
  node "$BENCH/bullmq.js" worker --redis "$RADDR" --conc "$1" >"$BWORKER_LOG.out" 2>"$BWORKER_LOG.log" &
  BWORKER_PID=$!
  echo "$BWORKER_PID" >>"$WPIDS"
  wait_until 15 "BullMQ worker ready" grep -q 'worker ready' "$BWORKER_LOG.log" ||
    { tail -5 "$BWORKER_LOG.log" >&2; return 1; }
}
bworker_stop() {
  [ -n "$BWORKER_PID" ] || return 0
  kill -TERM "$BWORKER_PID" 2>/dev/null || true
  for _ in $(seq 80); do kill -0 "$BWORKER_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$BWORKER_PID" 2>/dev/null || true
  wait "$BWORKER_PID" 2>/dev/null || true
  BWORKER_PID=
  log "BullMQ worker: $(tail -1 "$BWORKER_LOG.out" 2>/dev/null)"
}



# ---- 1. ingest ----------------------------------------------------------

wl_ingest() {
  local f n stored rate
  export BENCH_CB_URL=$CB/cb
  log "ingest: tickd POST /v1/tasks, wrk -t2 -c64 -d10s"
  tickd_start
  f=$TMP/wrk-single.txt
  timeout 60 wrk -t2 -c64 -d10s --timeout 10s -s "$BENCH/post.lua" "$TURL/v1/tasks" >"$f"
  cat "$f" >&2
  rate=$(wrk_rate "$f"); n=$(wrk_reqs "$f"); stored=$(tickd_stored)
  log "ingest single: $n requests, $stored tasks stored, $(wrk_errors "$f") errors"
  (($(wrk_errors "$f") == 0)) || { log "wrk saw errors"; return 1; }
  ((stored >= n)) || { log "fewer tasks stored ($stored) than answered ($n)"; return 1; }
  put ingest_single_tickd "$rate"

  # the machine's own limit for this load: the same wrk run against a
  # server that stores nothing and answers at once (bench/noop_http.c)
  log "ingest: the same wrk against bench/noop_http.c (does nothing)"
  local nport npid
  cc -O2 -o "$TMP/noop_http" "$BENCH/noop_http.c" || { log "cannot build noop_http"; return 1; }
  nport=$(free_port)
  "$TMP/noop_http" "$nport" &
  npid=$!
  echo "$npid" >>"$WPIDS"
  wait_until 5 "noop_http up" curl -s -o /dev/null "http://127.0.0.1:$nport/"
  f=$TMP/wrk-noop.txt
  timeout 60 wrk -t2 -c64 -d10s --timeout 10s -s "$BENCH/post.lua" "http://127.0.0.1:$nport/v1/tasks" >"$f"
  (($(wrk_errors "$f") == 0)) || { log "wrk saw errors against noop_http"; return 1; }
  put ingest_http_ceiling "$(wrk_rate "$f")"
  kill "$npid"; wait "$npid" 2>/dev/null || true

  log "ingest: tickd POST /v1/tasks/batch (1000 tasks), wrk -t2 -c4 -d10s"
  tickd_start
  f=$TMP/wrk-batch.txt
  BENCH_BATCH=1000 timeout 60 wrk -t2 -c4 -d10s --timeout 30s -s "$BENCH/batch.lua" "$TURL/v1/tasks/batch" >"$f"
  cat "$f" >&2
  rate=$(wrk_rate "$f"); n=$(wrk_reqs "$f"); stored=$(tickd_stored)
  log "ingest batch: $n requests, $stored tasks stored, $(wrk_errors "$f") errors"
  (($(wrk_errors "$f") == 0)) || { log "wrk saw errors"; return 1; }
  ((stored >= n * 1000)) || { log "fewer tasks stored ($stored) than answered ($((n * 1000)))"; return 1; }
  put ingest_batch_tickd "$(awk -v r="$rate" 'BEGIN {printf "%.0f", r * 1000}')"
  tickd_stop

  log "ingest: BullMQ Queue.add, 64 in flight, 10 s"
  flush
  f=$(timeout 60 node "$BENCH/bullmq.js" add --redis "$RADDR" --secs 10 --conc 64 --cb "$CB/cb")
  log "$f"
  put ingest_single_bullmq "$(jq -r .rate <<<"$f")"

  log "ingest: BullMQ Queue.addBulk (1000 jobs), 4 in flight, 10 s"
  flush
  f=$(timeout 60 node "$BENCH/bullmq.js" addbulk --redis "$RADDR" --secs 10 --conc 4 --batch 1000 --cb "$CB/cb")
  log "$f"
  put ingest_batch_bullmq "$(jq -r .rate <<<"$f")"

  # Redis's own limit for tickd's add: EVALSHA of lua/add.lua as tickd loads
  # it (after the definitions of lua/lib.lua it uses: build/tools/script_link)
  # with one task a call, pipelined, into one slice 10 minutes ahead (so the
  # STALE check passes)
  log "ingest: redis-benchmark EVALSHA add.lua -c 32 -P 64"
  flush
  local sha sec slice due end total=500000
  sha=$(rcli SCRIPT LOAD "$("$ROOT/build/tools/script_link" "$LUA" add)")
  [[ $sha =~ ^[0-9a-f]{40}$ ]] || { log "SCRIPT LOAD failed: $sha"; return 1; }
  sec=$(($(date +%s) + 600))
  slice=$(date -u -d "@$sec" +%Y%m%d%H%M).3
  due=$(((sec / 60) * 60000 + 30000))
  end=$(((sec / 60 + 1) * 60000))
  # a task as tickd stores one with no key of its own: a fresh :due member
  # (lua/lib.lua: its id, a newline, its record, src/model/task.h), sent as
  # tickd sends a call of fresh tasks: 'f', then its due and its member. An
  # add.lua of before (BENCH_TICKD) took a group: id, record, due, timeout,
  # queue ("" = the default), form; one before that a spec and no form
  local rec task again=(0)
  rec=$(printf '"%s"\n\n10000\n\n\n{}' "$CB/cb")
  task=(f "$due" "$slice.$due.k__rand_int__"$'\n'"$rec")
  # (an add.lua of before takes no "again" argument)
  grep -q 'grace_ms, again' "$LUA/add.lua" || again=()
  if ! grep -q "fresh tasks only: 'f'" "$LUA/add.lua"; then
    task=("$slice.$due.k__rand_int__" "$rec" "$due" 10000 "" f)
    if ! grep -q 'of 6: id, record' "$LUA/add.lua"; then
      rec="{\"key\":\"k__rand_int__\",\"callback_url\":\"$CB/cb\",\"method\":\"POST\",\"execute_at\":$due,\"retry\":{\"max_attempts\":5,\"backoff_ms\":1000},\"timeout_ms\":10000}"
      task=("$slice.$due.k__rand_int__" "$rec" "$due" 10000 "")
    fi
  fi
  f=$TMP/redis-benchmark.txt
  timeout 120 redis-benchmark -h 127.0.0.1 -p "$RPORT" -c 32 -P 64 -n "$total" -r 1000000000 -q \
    EVALSHA "$sha" 3 "tickd:{$slice}:due" "tickd:{$slice}:task" "tickd:{$slice}:del" \
    "$end" 30000 "${again[@]}" "${task[@]}" >"$f" 2>&1
  rate=$(tr '\r' '\n' <"$f" | grep -oE '[0-9]+(\.[0-9]+)? requests per second' | tail -1 | awk '{print $1}')
  stored=$(rcli ZCARD "tickd:{$slice}:due")
  log "redis-benchmark: $rate ops/s; $stored of $total stored"
  ((stored >= total * 99 / 100)) || { log "EVALSHA did not store the tasks: $(rcli EVALSHA "$sha" 3 a b c "$end" 30000 id '{}' 1 1 2>&1)"; return 1; }
  put ingest_redis_evalsha "$rate"
  flush
}

# ---- 2. burst dispatch --------------------------------------------------

BURST_N=20000
# Rounds of the burst, tickd and BullMQ alternating; the table shows the
# median round of each. One round of each swings by +-25 % on a shared VM.
BURST_ROUNDS=${BENCH_BURST_ROUNDS:-3}
burst_wait() { # burst_wait T: until every task arrived, or T + 60 s
  rwait "$BURST_N" $((($1 + 60000 - $(now_ms)) / 1000)) "the burst" || true
}
burst_record() { # burst_record NAME T ROUND
  local s
  sleep 1 # late duplicates, if any
  s=$(rstats)
  log "burst $1 round $3: $s"
  # tasks/s over the whole burst: N / (last arrival - T); short of N counts as missed
  jq -r --argjson t "$2" --argjson n "$BURST_N" --arg r "$3" --arg w "$1" '
    "burst_count_\($w)_\($r)=\(.count)", "burst_dups_\($w)_\($r)=\(.dups)",
    "burst_p50_\($w)_\($r)=\(.p50)", "burst_p99_\($w)_\($r)=\(.p99)",
    "burst_max_\($w)_\($r)=\(.max)", "burst_conns_\($w)_\($r)=\(.conns)",
    "burst_rate_\($w)_\($r)=\(if .count >= $n then ($n / ((.last - $t) / 1000) | floor) else 0 end)"
  ' <<<"$s" >>"$RES"
}
burst_median() { # burst_median NAME: the median round's figures become burst_*_NAME
  local r k best
  # the median round by rate; its p50 / p99 are reported with it
  best=$(for r in $(seq "$BURST_ROUNDS"); do echo "$(get "burst_rate_$1_$r") $r"; done |
    sort -n | awk '{a[NR] = $2} END {print a[int((NR + 1) / 2)]}')
  for k in rate p50 p99 max conns cpu_tickd cpu_redis cpu_recv; do
    put "burst_${k}_$1" "$(get "burst_${k}_$1_$best")"
  done
  # every round must deliver each task exactly once
  local count=$BURST_N dups=0 c d
  for r in $(seq "$BURST_ROUNDS"); do
    c=$(num "burst_count_$1_$r"); d=$(num "burst_dups_$1_$r")
    ((${c:-0} < count)) && count=${c:-0}
    dups=$((dups + ${d:-0}))
  done
  put "burst_count_$1" "$count"
  put "burst_dups_$1" "$dups"
  put "burst_rounds_$1" "$(for r in $(seq "$BURST_ROUNDS"); do printf '%s ' "$(get "burst_rate_$1_$r")"; done)"
}

burst_tickd() { # burst_tickd ROUND [flow|floor]
  local t r name=tickd
  log "burst round $1: tickd${2:+ ($2)}, $BURST_N tasks due at one instant T"
  if [ "${2:-}" = floor ]; then
    # the least a claim and a settle of this keyspace can do (bench/floor),
    # run by tickd itself: what any design of these keys could reach here
    name=tickdfloor
    tickd_start TICKD_REDIS_SCRIPTS_DIR="$FLOOR_LUA"
  else
    tickd_start
  fi
  if [ "${2:-}" = flow ]; then
    # flow control on, the burst's own queue unlimited: the cost every task
    # of an unlimited queue pays once some queue has a limit
    name=tickdflow
    curl -sf -X PUT "$TURL/v1/queues/bench-other" -H 'Content-Type: application/json' \
      -d '{"rate": 1, "max_concurrency": 1}' >/dev/null || log "this build has no flow control"
    sleep 0.3
  fi
  rreset
  t=$(($(now_ms) + 8000))
  r=$(timeout 60 node "$BENCH/tickd_load.js" insert --url "$TURL" --cb "$CB/cb" --n "$BURST_N" \
    --batch 1000 --conc 4 --at "$t" --shape callback)
  log "inserted: $r (T - end = $((t - $(jq -r .end <<<"$r"))) ms)"
  # CPU of each process from just before T to the last arrival (its share
  # of a callback: tickd claims, calls and settles; Redis runs the scripts;
  # the receiver answers)
  while (($(now_ms) < t - 300)); do sleep 0.05; done
  local c0 c1
  rcli CONFIG RESETSTAT >/dev/null
  c0=$(burst_cpu)
  burst_wait "$t"
  c1=$(burst_cpu)
  # the script calls that made it: how many tasks a claim and a settle
  # carry (INFO commandstats, from just before T)
  log "burst $1 $name: Redis commands $(rcli INFO commandstats | tr -d '\r' |
    awk -F'[:=,]' -v n="$BURST_N" '/^cmdstat_/ && $3 > 0 {
      printf "%s %d (%.3f a task, %.1f us each) ", substr($1, 9), $3, $3 / n, $7}')"
  burst_record "$name" "$t" "$1"
  read -r a0 b0 r0 <<<"$c0"
  read -r a1 b1 r1 <<<"$c1"
  put "burst_cpu_tickd_${name}_$1" "$(us_each $((a1 - a0)) "$BURST_N")"
  put "burst_cpu_redis_${name}_$1" "$(us_each $((b1 - b0)) "$BURST_N")"
  put "burst_cpu_recv_${name}_$1" "$(us_each $((r1 - r0)) "$BURST_N")"
  tickd_stop
  flush
}

HZ=$(getconf CLK_TCK)
us_each() { awk -v t="$1" -v n="$2" -v hz="$HZ" 'BEGIN {printf "%.1f", t * 1e6 / hz / n}'; } # ticks -> us each
burst_cpu() { # CPU ticks of tickd, Redis, the receiver
  echo "$(cpu_ticks "$TICKD_PID") $(cpu_ticks "$(sed -n 1p "$GPIDS")") $(cpu_ticks "$(sed -n 2p "$GPIDS")")"
}

# What making an HTTP request costs here, and the receiver's limit: wrk
# (one thread, 64 connections) sending callback-shaped requests (tickd's
# headers, a 102-byte JSON body) to the same receiver for 5 s; wrk's CPU a
# request from its rusage, the receiver's rate. Run right after each tickd
# round (burst_wrk ROUND): the machine's speed drifts by a quarter within a
# run, and a ratio is read from the two figures taken together.
cb_lua() { # the callback-shaped request, as $TMP/cb.lua
  cp "$BENCH/cb.lua" "$TMP/cb.lua"
}

burst_wrk() {
  local f=$TMP/wrk-cb.txt wu ws n
  cb_lua
  /usr/bin/time -f "%U %S" -o "$TMP/time-cb" timeout 30 wrk -t1 -c64 -d5s -s "$TMP/cb.lua" "$CB/warm" >"$f"
  n=$(wrk_reqs "$f")
  read -r wu ws <"$TMP/time-cb"
  put "wrk_cb_us_$1" "$(awk -v u="$wu" -v s="$ws" -v n="$n" 'BEGIN {printf "%.1f", (u + s) * 1e6 / n}')"
  put "wrk_cb_rate_$1" "$(wrk_rate "$f")"
  log "callback-shaped wrk against the receiver: $(get "wrk_cb_rate_$1") requests/s, wrk $(get "wrk_cb_us_$1") us each"
}

# paired_median A B OUT: of the rounds' pairs (A_r, B_r), the one whose
# ratio A_r / B_r is the median becomes OUT_a, OUT_b
paired_median() {
  local r best
  best=$(for r in $(seq "$BURST_ROUNDS"); do
    awk -v a="$(num "$1_$r")" -v b="$(num "$2_$r")" -v r="$r" \
      'BEGIN {if (a != "" && b > 0) printf "%.6f %d\n", a / b, r}'
  done | sort -n | awk '{a[NR] = $2} END {if (NR) print a[int((NR + 1) / 2)]}')
  [ -n "$best" ] || return 0
  put "$3_a" "$(get "$1_$best")"
  put "$3_b" "$(get "$2_$best")"
}

burst_bullmq() { # burst_bullmq ROUND
  local t r
  log "burst round $1: BullMQ, $BURST_N jobs due at T, Worker concurrency 200"
  rreset
  bworker_start 200
  t=$(($(now_ms) + 8000))
  r=$(timeout 60 node "$BENCH/bullmq.js" insert --redis "$RADDR" --cb "$CB/cb" --n "$BURST_N" \
    --batch 1000 --conc 4 --at "$t" --shape callback)
  log "inserted: $r (T - end = $((t - $(jq -r .end <<<"$r"))) ms)"
  burst_wait "$t"
  burst_record bullmq "$t" "$1"
  bworker_stop
  flush
}

wl_burst() {
  local r
  # warm the receiver (node's JIT) with callback-shaped requests first, so
  # that no round, whoever runs it, meets it cold
  cb_lua
  timeout 30 wrk -t1 -c64 -d3s -s "$TMP/cb.lua" "$CB/warm" >/dev/null
  rreset
  # tickd's scripts with bench/floor's claim and settle in place of its own
  FLOOR_LUA=$TMP/floor-lua
  rm -rf "$FLOOR_LUA" && cp -r "$LUA" "$FLOOR_LUA" && cp "$BENCH"/floor/*.lua "$FLOOR_LUA/"
  for r in $(seq "$BURST_ROUNDS"); do
    burst_tickd "$r"
    burst_wrk "$r"
    burst_tickd "$r" flow
    burst_tickd "$r" floor
    burst_bullmq "$r"
  done
  paired_median burst_cpu_tickd_tickd wrk_cb_us pair_cpu
  paired_median burst_rate_tickd wrk_cb_rate pair_rate
  paired_median burst_rate_tickdfloor wrk_cb_rate pair_floor_rate
  # flow control on against tickd's round just before it, as the CPU against
  # its wrk run: rounds minutes apart differ by the machine's drift alone
  paired_median burst_rate_tickdflow burst_rate_tickd pair_flow
  burst_median tickd
  burst_median tickdflow
  burst_median tickdfloor
  burst_median bullmq
}

# ---- 3. steady timing ---------------------------------------------------

steady_record() { # steady_record NAME SENT
  local s sent=$2
  rwait "$sent" 15 "steady $1" || true
  s=$(rstats)
  log "steady $1: $s"
  put "steady_count_$1" "$(jq -r .count <<<"$s")"
  put "steady_sent_$1" "$sent"
  put "steady_p50_$1" "$(jq -r .p50 <<<"$s")"
  put "steady_p99_$1" "$(jq -r .p99 <<<"$s")"
  put "steady_max_$1" "$(jq -r .max <<<"$s")"
}

# steady_tickd NAME BATCH AHEAD: tickd under a batch of BATCH tasks every
# 50 ms for 15 s, each due AHEAD ms after it is posted
steady_tickd() {
  local r
  log "steady: tickd, $2 tasks / 50 ms ($(($2 * 20))/s), each due $3 ms after, 15 s"
  tickd_start
  rreset
  r=$(timeout 60 node "$BENCH/tickd_load.js" steady --url "$TURL" --cb "$CB/cb" --secs 15 --batch "$2" \
    --every 50 --ahead "$3" --shape callback)
  log "generator: $r"
  steady_record "$1" "$(jq -r .sent <<<"$r")"
  tickd_stop
}

# steady_bullmq NAME BATCH: the same load through BullMQ (addBulk, delay
# 2 s), one Worker of concurrency 200
steady_bullmq() {
  local r
  log "steady: BullMQ, addBulk of $2 / 50 ms ($(($2 * 20))/s), delay 2 s, 15 s, Worker concurrency 200"
  flush
  bworker_start 200
  rreset
  r=$(timeout 60 node "$BENCH/bullmq.js" steady --redis "$RADDR" --cb "$CB/cb" --secs 15 --batch "$2" \
    --every 50 --ahead 2000 --shape callback)
  log "generator: $r"
  steady_record "$1" "$(jq -r .sent <<<"$r")"
  bworker_stop
  flush
}

wl_steady() {
  local r
  cc -O2 -o "$TMP/volley" "$BENCH/volley.c"
  steady_tickd tickd 100 2000
  steady_tickd tickd10k 500 2000
  # the same, each batch posted 25 ms off the instant it is due at: above,
  # the batch due 2 s later is parsed and stored while the instant's
  # callbacks go out, which the floor (volley.c) never does; this row
  # shows the scheduler's lateness without that (doc/performance.md,
  # "Lateness at 10,000/s")
  steady_tickd tickd10koff 500 2025

  # the floor: the same batches sent at their exact millisecond by
  # bench/volley.c over tickd's 64 connections, no scheduler and no store
  local port=${CB#http://127.0.0.1:}
  port=${port%%/*}
  local b
  for b in 100 500; do
    log "steady: volley.c, $b callback-shaped requests at one instant every 50 ms, 15 s"
    rreset
    r=$(timeout 60 "$TMP/volley" 127.0.0.1 "$port" /cb "$b" 50 15 64)
    log "volley: $r"
    steady_record "volley$b" "$(jq -r .sent <<<"$r")"
  done

  steady_bullmq bullmq 100
  steady_bullmq bullmq10k 500
}

# ---- 4. memory ----------------------------------------------------------

MEM_N=100000
INFLIGHT_N=10000
wl_memory() {
  local before after r n
  log "memory: tickd, Redis used_memory for $MEM_N pending tasks (200-byte body, due in 1 h)"
  tickd_start
  sleep 0.5
  before=$(used_memory)
  r=$(timeout 120 node "$BENCH/tickd_load.js" insert --url "$TURL" --cb "$CB/cb" --n "$MEM_N" \
    --batch 1000 --conc 4 --delay 3600000 --req-bytes 200)
  log "inserted: $r"
  sleep 0.5
  after=$(used_memory)
  n=$(tickd_stored)
  ((n == MEM_N)) || { log "tickd stored $n tasks, not $MEM_N"; return 1; }
  put mem_tickd "$(((after - before) / MEM_N))"
  log "tickd: used_memory $before -> $after"
  tickd_stop

  log "memory: BullMQ, Redis used_memory for $MEM_N delayed jobs (200-byte body, due in 1 h)"
  flush
  before=$(used_memory)
  r=$(timeout 120 node "$BENCH/bullmq.js" insert --redis "$RADDR" --cb "$CB/cb" --n "$MEM_N" \
    --batch 1000 --conc 4 --delay 3600000 --req-bytes 200)
  log "inserted: $r"
  sleep 0.5
  after=$(used_memory)
  n=$(rcli ZCARD bull:bench:delayed)
  ((n == MEM_N)) || { log "BullMQ holds $n delayed jobs, not $MEM_N"; return 1; }
  put mem_bullmq "$(((after - before) / MEM_N))"
  log "BullMQ: used_memory $before -> $after"
  flush

  log "memory: tickd RSS with $INFLIGHT_N callbacks in flight to $CB/slow (20 s)"
  # every callback on its own connection: a tickd that caps connections per
  # receiving host (server.host_connections) gets the cap lifted for this run
  local extra=(TICKD_SERVER_MAX_INFLIGHT=$((INFLIGHT_N + 2000)))
  grep -q '^host_connections' <<<"$("$TICKD" --print-config)" &&
    extra+=(TICKD_SERVER_HOST_CONNECTIONS=$INFLIGHT_N)
  tickd_start "${extra[@]}"
  sleep 0.5
  put rss_idle_tickd "$(mem_kb "$TICKD_PID")"
  rreset
  r=$(timeout 60 node "$BENCH/tickd_load.js" insert --url "$TURL" --cb "$CB/slow?ms=20000" \
    --n "$INFLIGHT_N" --batch 1000 --conc 4 --delay 2000 --timeout-ms 60000)
  log "inserted: $r"
  wait_until 30 "receiver slow_open >= $((INFLIGHT_N * 99 / 100))" \
    sh -c "[ \$(curl -sf $CB/stats | jq -r .slow_open) -ge $((INFLIGHT_N * 99 / 100)) ]" || true
  sleep 1
  put rss_tickd "$(mem_kb "$TICKD_PID")"
  put rss_calling_tickd "$(rstats | jq -r .slow_open)"
  log "tickd: $(curl -sf "$TURL/v1/stats"); receiver: $(rstats | jq -c '{slow_open, slow_total}'); RSS $(get rss_tickd) kB"
  tickd_stop
  flush

  log "memory: BullMQ worker RSS with $INFLIGHT_N jobs in flight to $CB/slow (20 s)"
  sleep 1 # the receiver sees the closed sockets go
  bworker_start "$INFLIGHT_N"
  put rss_idle_bullmq "$(mem_kb "$BWORKER_PID")"
  r=$(timeout 60 node "$BENCH/bullmq.js" insert --redis "$RADDR" --cb "$CB/slow?ms=20000" \
    --n "$INFLIGHT_N" --batch 1000 --conc 4 --delay 2000)
  log "inserted: $r"
  wait_until 30 "receiver slow_open >= $((INFLIGHT_N * 99 / 100))" \
    sh -c "[ \$(curl -sf $CB/stats | jq -r .slow_open) -ge $((INFLIGHT_N * 99 / 100)) ]" || true
  sleep 1
  put rss_bullmq "$(mem_kb "$BWORKER_PID")"
  put rss_calling_bullmq "$(rstats | jq -r .slow_open)"
  log "BullMQ worker: receiver $(rstats | jq -c '{slow_open, slow_total}'); RSS $(get rss_bullmq) kB"
  bworker_stop
  flush
}

SCHED_N=${SCHED_N:-100000}
wl_schedules() {
  local before after r start since created
  log "schedules: tickd, $SCHED_N schedules every minute (every_ms 60000), their runs evenly over one minute"
  tickd_start
  sleep 0.5
  before=$(used_memory)
  start=$(($(now_ms) + 30000))  # creating 100,000 takes 12-17 s here
  r=$(timeout 120 node "$BENCH/tickd_load.js" schedules --url "$TURL" --cb "$CB/cb" --n "$SCHED_N" \
    --conc 64 --req-bytes 200 --spread ms --start "$start")
  log "created: $r"
  created=$(jq -r .end <<<"$r")
  ((created < start - 4000)) || { log "creating took too long: runs began before it ended"; return 1; }
  after=$(used_memory)
  put sched_mem_tickd "$(((after - before) / SCHED_N))"
  rreset
  # one whole minute of runs, every schedule once, then its tail
  sleep $(((start + 60000 - $(now_ms)) / 1000 + 3))
  since=$start
  r=$(curl -sf "$CB/stats?since=$since")
  log "receiver: $(jq -c '{count, dups, p50, p99, max}' <<<"$r"); tickd: $(curl -sf "$TURL/v1/stats" | jq -c .schedules)"
  put sched_count_tickd "$(jq -r .count <<<"$r")"
  put sched_dups_tickd "$(jq -r .dups <<<"$r")"
  put sched_p50_tickd "$(jq -r .p50 <<<"$r")"
  put sched_p99_tickd "$(jq -r .p99 <<<"$r")"
  tickd_stop
  flush

  log "schedules: BullMQ, Redis used_memory for $SCHED_N job schedulers (every 60000 ms)"
  before=$(used_memory)
  r=$(timeout 120 node "$BENCH/bullmq.js" schedulers --redis "$RADDR" --cb "$CB/cb" --n "$SCHED_N" \
    --conc 64 --req-bytes 200)
  log "created: $r"
  sleep 0.5
  after=$(used_memory)
  put sched_mem_bullmq "$(((after - before) / SCHED_N))"
  flush
}

# ---- run ----------------------------------------------------------------

run_wl() { # run_wl NAME: the workload in a subshell with errexit; a failure is reported, not fatal
  local rc=0
  log "=== $1"
  (set -e; "wl_$1") &
  WL_PID=$!
  wait "$WL_PID" || rc=$?
  WL_PID=
  kill_list "$WPIDS"
  ((rc == 0)) || { log "workload $1 FAILED (rc=$rc); logs in $TMP"; put "failed_$1" 1; BENCH_KEEP=1; }
}

started=$(date +%s)
only=${BENCH_ONLY:-ingest burst steady memory schedules}
for w in $only; do run_wl "$w"; done
log "workloads done in $(($(date +%s) - started)) s"

# ---- report -------------------------------------------------------------

ist=$(num ingest_single_tickd); isb=$(num ingest_single_bullmq); ihc=$(num ingest_http_ceiling)
ibt=$(num ingest_batch_tickd); ibr=$(num ingest_redis_evalsha); ibb=$(num ingest_batch_bullmq)
brt=$(num burst_rate_tickd); brb=$(num burst_rate_bullmq)
brf=$(num pair_flow_a); brft=$(num pair_flow_b) # flow on, and tickd's round before it
bpt=$(num burst_p99_tickd); bpb=$(num burst_p99_bullmq)
b5t=$(num burst_p50_tickd); b5b=$(num burst_p50_bullmq)
spt=$(num steady_p99_tickd); spb=$(num steady_p99_bullmq)
s5t=$(num steady_p50_tickd); s5b=$(num steady_p50_bullmq)
smt=$(num steady_max_tickd); smb=$(num steady_max_bullmq)
v1p5=$(num steady_p50_volley100); v1p9=$(num steady_p99_volley100)
v5p5=$(num steady_p50_volley500); v5p9=$(num steady_p99_volley500)
s5k=$(num steady_p50_tickd10k); s9k=$(num steady_p99_tickd10k); smk=$(num steady_max_tickd10k)
b5k=$(num steady_p50_bullmq10k); b9k=$(num steady_p99_bullmq10k); bmk=$(num steady_max_bullmq10k)
sck=$(num steady_count_tickd10k); ssk=$(num steady_sent_tickd10k)
s5o=$(num steady_p50_tickd10koff); s9o=$(num steady_p99_tickd10koff)
bcr=$(num burst_cpu_redis_tickd); bcv=$(num burst_cpu_recv_tickd)
pct=$(num pair_cpu_a); wcu=$(num pair_cpu_b); prt=$(num pair_rate_a); wcr=$(num pair_rate_b)
bfr=$(num burst_cpu_redis_tickdfloor); pfr=$(num pair_floor_rate_a); wfr=$(num pair_floor_rate_b)
mt=$(num mem_tickd); mb=$(num mem_bullmq)
rt=$(num rss_tickd); rb=$(num rss_bullmq)
sct=$(num sched_count_tickd); s9t=$(num sched_p99_tickd); s0t=$(num sched_p50_tickd)
smmt=$(num sched_mem_tickd); smmb=$(num sched_mem_bullmq)
mib() { [ -n "$1" ] && awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}' || echo ""; }
# burst complete? (every task delivered once)
for s in tickd tickdflow tickdfloor bullmq; do
  c=$(num "burst_count_$s")
  [ -z "$c" ] || ((c >= BURST_N)) || log "burst $s delivered $c of $BURST_N"
done

table=$(
  echo "| workload | tickd | BullMQ / Redis | tickd ÷ peer | target | result |"
  echo "| --- | ---: | ---: | ---: | --- | --- |"
  echo "| ingest, single POST /v1/tasks vs Queue.add, 64 in flight (tasks/s) | $(fmt "$ist") | $(fmt "$isb") (BullMQ) | $(ratio "$ist" "$isb") | ≥ 3× BullMQ | $(judge 'a >= 3 * b' "$ist" "$isb") |"
  echo "| ingest, single POST vs the same wrk against a server that does nothing (requests/s) | $(fmt "$ist") | $(fmt "$ihc") (no-op) | $(ratio "$ist" "$ihc") | — | info: the machine's limit |"
  echo "| ingest, batch of 1000 vs redis-benchmark EVALSHA add.lua -P 64 (tasks/s) | $(fmt "$ibt") | $(fmt "$ibr") (Redis) | $(ratio "$ibt" "$ibr") | ≥ 60 % of Redis | $(judge 'a >= 0.6 * b' "$ibt" "$ibr") |"
  echo "| ingest, batch of 1000 vs Queue.addBulk of 1000 (tasks/s) | $(fmt "$ibt") | $(fmt "$ibb") (BullMQ) | $(ratio "$ibt" "$ibb") | — | info |"
  echo "| burst, $(fmt $BURST_N) due at one instant (tasks/s) | $(fmt "$brt") | $(fmt "$brb") | $(ratio "$brt" "$brb") | ≥ 3× BullMQ | $(judge 'a >= 3 * b && a > 0' "$brt" "$brb") |"
  echo "| burst with flow control on (another queue limited; the burst's queue unlimited) vs without (tasks/s) | $(fmt "$brf") | $(fmt "$brft") (tickd) | $(ratio "$brf" "$brft") | ≥ 90 % of tickd without | $(judge 'a >= 0.9 * b && a > 0' "$brf" "$brft") |"
  echo "| burst: tickd's CPU a callback vs wrk's a callback-shaped request to the same receiver (us) | $(fmt "$pct" 1) | $(fmt "$wcu" 1) (wrk) | $(ratio "$pct" "$wcu") | ≤ 1.3× wrk | $(judge 'a <= 1.3 * b' "$pct" "$wcu") |"
  echo "| burst: Redis's CPU a callback (claim and settle; us) | $(fmt "$bcr" 1) | — | — | ≤ 8 us | $(judge_floor 'a <= 8' "$bcr" "$bfr") |"
  echo "| burst: the receiver's CPU a callback (us) | $(fmt "$bcv" 1) | — | — | — | info |"
  echo "| burst rate vs the receiver's limit (callback-shaped wrk, requests/s) | $(fmt "$prt") | $(fmt "$wcr") (receiver) | $(ratio "$prt" "$wcr") | ≥ 0.85× | $(judge_floor 'a >= 0.85' "$(quot "$prt" "$wcr")" "$(quot "$pfr" "$wfr")" 2 ×) |"
  echo "| burst at the keyspace's floor (tickd running bench/floor's claim and settle, which leave out the features lua/ keeps): Redis's CPU a callback (us) | $(fmt "$bfr" 1) | $(fmt "$bcr" 1) (lua/) | $(ratio "$bfr" "$bcr") | — | info: the least any design of these keys costs Redis here |"
  echo "| burst at the keyspace's floor: rate vs the receiver's limit (requests/s) | $(fmt "$pfr") | $(fmt "$wfr") (receiver) | $(ratio "$pfr" "$wfr") | — | info: the most any design of these keys reaches here |"
  echo "| burst lateness p99 (ms) | $(fmt "$bpt" 1) | $(fmt "$bpb" 1) | $(ratio "$bpt" "$bpb") | lower than BullMQ | $(judge 'a < b' "$bpt" "$bpb") |"
  echo "| burst lateness p50 (ms) | $(fmt "$b5t" 1) | $(fmt "$b5b" 1) | $(ratio "$b5t" "$b5b") | — | info |"
  echo "| steady 2,000/s due +2 s, lateness p50 (ms) | $(fmt "$s5t" 1) | $(fmt "$s5b" 1) | $(ratio "$s5t" "$s5b") | — | info |"
  echo "| steady 2,000/s due +2 s, lateness p99 (ms) | $(fmt "$spt" 1) | $(fmt "$spb" 1) | $(ratio "$spt" "$spb") | ≤ 5 ms | $(judge_floor 'a <= 5' "$spt" "$v1p9") |"
  echo "| steady 2,000/s due +2 s, lateness max (ms) | $(fmt "$smt" 1) | $(fmt "$smb" 1) | $(ratio "$smt" "$smb") | — | info |"
  echo "| steady 2,000/s: the receiver's floor, the same batches sent at their millisecond by volley.c (no scheduler, no store), lateness p50 / p99 (ms) | $(fmt "$s5t" 1) / $(fmt "$spt" 1) | $(fmt "$v1p5" 1) / $(fmt "$v1p9" 1) (volley) | $(ratio "$spt" "$v1p9") | — | info |"
  echo "| steady 10,000/s (500 / 50 ms) due +2 s, lateness p50 (ms) | $(fmt "$s5k" 1) | $(fmt "$b5k" 1) | $(ratio "$s5k" "$b5k") | — | info |"
  echo "| steady 10,000/s, lateness p99 (ms); all arrived | $(fmt "$s9k" 1) | $(fmt "$b9k" 1) | $(ratio "$s9k" "$b9k") | ≤ 20 ms, none lost | $(if [ -z "$sck" ] || [ -z "$ssk" ]; then echo "n/a"; elif ((sck < ssk)); then echo "**missed**: $(fmt "$sck") of $(fmt "$ssk") arrived"; else judge_floor 'a <= 20' "$s9k" "$v5p9"; fi) |"
  echo "| steady 10,000/s, lateness max (ms) | $(fmt "$smk" 1) | $(fmt "$bmk" 1) | $(ratio "$smk" "$bmk") | — | info |"
  echo "| steady 10,000/s: the receiver's floor (volley.c, 500 at one instant), lateness p50 / p99 (ms) | $(fmt "$s5k" 1) / $(fmt "$s9k" 1) | $(fmt "$v5p5" 1) / $(fmt "$v5p9" 1) (volley) | $(ratio "$s9k" "$v5p9") | — | info |"
  echo "| steady 10,000/s, each batch posted 25 ms off the instant it is due at (its ingest away from the callbacks), lateness p50 / p99 (ms) | $(fmt "$s5o" 1) / $(fmt "$s9o" 1) | $(fmt "$v5p5" 1) / $(fmt "$v5p9" 1) (volley) | $(ratio "$s9o" "$v5p9") | — | info |"
  echo "| Redis used_memory per pending task, 200-byte body (bytes) | $(fmt "$mt") | $(fmt "$mb") | $(ratio "$mt" "$mb") | ≤ BullMQ | $(judge 'a <= b' "$mt" "$mb") |"
  echo "| $(fmt $SCHED_N) schedules every minute, runs evenly over it: run lateness p99 (ms) | $(fmt "$s9t" 1) | — | — | ≤ 50 ms | $(judge 'a <= 50' "$s9t") |"
  echo "| the same: run lateness p50 (ms) | $(fmt "$s0t" 1) | — | — | — | info |"
  echo "| Redis used_memory per schedule, 200-byte body (bytes; BullMQ: per job scheduler with its next job) | $(fmt "$smmt") | $(fmt "$smmb") | $(ratio "$smmt" "$smmb") | — | info |"
  echo "| process RSS, $(fmt $INFLIGHT_N) callbacks in flight (MiB; tickd vs BullMQ worker) | $(fmt "$(mib "$rt")" 1) | $(fmt "$(mib "$rb")" 1) | $(ratio "$rt" "$rb") | — | info |"
)
notes=$(
  echo "- burst with flow control on, each round against tickd's round just before it (the row of flow control shows the pair whose ratio is the median): $(for r in $(seq "$BURST_ROUNDS"); do printf '%s/s against %s/s; ' "$(get "burst_rate_tickdflow_$r")" "$(get "burst_rate_tickd_$r")"; done)"
  echo "- burst tickd, each round and the wrk run right after it (the rows of the CPU a callback and of the receiver's limit show the round whose ratio is the median): $(for r in $(seq "$BURST_ROUNDS"); do printf '%s/s and %s us against %s/s and %s us; ' "$(get "burst_rate_tickd_$r")" "$(get "burst_cpu_tickd_tickd_$r")" "$(get "wrk_cb_rate_$r")" "$(get "wrk_cb_us_$r")"; done)"
  for s in tickd tickdflow tickdfloor bullmq; do
    c=$(num "burst_count_$s"); d=$(num "burst_dups_$s")
    echo "- burst $s: tasks/s of each of $BURST_ROUNDS rounds: $(get "burst_rounds_$s")(median in the table); fewest callbacks arrived in a round: $(fmt "$c") of $(fmt $BURST_N), duplicates in all rounds: $(fmt "$d"); new TCP connections to the receiver in the median round: $(fmt "$(num "burst_conns_$s")")"
    [ "$s" = tickdflow ] || [ "$s" = tickdfloor ] || echo "- steady $s: $(fmt "$(num "steady_count_$s")") of $(fmt "$(num "steady_sent_$s")") callbacks arrived at 2,000/s, $(fmt "$(num "steady_count_${s}10k")") of $(fmt "$(num "steady_sent_${s}10k")") at 10,000/s"
  done
  echo "- idle RSS: tickd $(fmt "$(mib "$(num rss_idle_tickd)")" 1) MiB, BullMQ worker $(fmt "$(mib "$(num rss_idle_bullmq)")" 1) MiB; in flight at the RSS reading: tickd $(fmt "$(num rss_calling_tickd)"), BullMQ $(fmt "$(num rss_calling_bullmq)")"
  echo "- schedules tickd: $(fmt "$sct") runs arrived in the minute ($(fmt $SCHED_N) expected), duplicates $(fmt "$(num sched_dups_tickd)")"
  for w in ingest burst steady memory schedules; do
    [ -z "$(get "failed_$w")" ] || echo "- workload $w FAILED; its cells are n/a or partial"
  done
)

echo
echo "$table"
echo
echo "$notes"

if [ -n "${BENCH_ONLY:-}" ] || [ -n "${BENCH_TICKD:-}" ]; then
  log "BENCH_ONLY / BENCH_TICKD set: bench/results.md left as it was"
  exit 0
fi
cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
{
  echo "Written by bench/run.sh ($(date -u +%Y-%m-%dT%H:%MZ)); see bench/README.md for what each row measures."
  echo
  echo "$table"
  echo
  echo "$notes"
  echo
  echo "### Machine"
  echo
  echo "- CPUs: $(nproc) × ${cpu:-unknown}"
  echo "- kernel: $(uname -sr); CPUs busy before the run (other processes) ${BUSY0} %"
  echo "- tickd: $("$TICKD" --version 2>/dev/null) ($(tree_id)), default config$(env | grep -q '^TICKD_' && echo " with $(env | grep '^TICKD_' | sort | tr '\n' ' ')") (workers = nproc) except the RSS run (max_inflight $((INFLIGHT_N + 2000)), no connection cap per host)"
  echo "- redis-server: $(redis-server --version | awk '{print $3}' | sed 's/v=//'), no persistence, on the same machine"
  echo "- node: $(node --version), bullmq $(jq -r .version "$BENCH/node_modules/bullmq/package.json"), ioredis $(jq -r .version "$BENCH/node_modules/ioredis/package.json")"
  echo "- wrk: $(wrk -v 2>&1 | head -1 | awk '{print $2}')"
} | results_put bench
log "wrote the bench part of bench/results.md"
