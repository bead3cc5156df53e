#!/usr/bin/env bash
# tickd at scale (bench/README.md, "Scale"):
#
#   bench/scale.sh        (or: make bench-scale, from the repo root)
#
# Two redis-servers (no persistence), one empty, one holding SCALE_N
# (10,000,000) tasks due over the next day with 200-byte bodies, inserted
# through the batch API; one tickd, started on the one, then on the other.
# On each, SCALE_ROUNDS (5) rounds, the sides taking turns: single-POST
# ingest (wrk, 5 s), a 20,000-task burst (tasks/s), and GET and DELETE of
# 3,000 tasks due later (rate, p50, p99). Each median at SCALE_N must be at
# least 0.9x the empty one's. Then tickd stops, BACKLOG_N (1,000,000) tasks
# fall due while it is down, and it starts again: the backlog must drain
# (first callback to last) at no less than the burst's rate, oldest first
# (the rank correlation of arrival and due order, rho, at least 0.9). Writes
# its table into bench/results.md ("scale" part). Needs about 6 GiB of memory
# for Redis; about 8 minutes on 2 cores.
#
# Environment: SCALE_N, BACKLOG_N (smaller for a quick look: the table then
# says so), SCALE_ROUNDS; BENCH_TICKD and BENCH_KEEP as for bench/run.sh.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

SCALE_N=${SCALE_N:-10000000}
BACKLOG_N=${BACKLOG_N:-1000000}
BURST_N=20000
GETDEL_N=60000
T0=$(date +%s)

# single POST: wrk as in bench/run.sh (tasks due in 1 h, no key), 5 s
m_single() { # m_single NAME
  local f=$TMP/wrk-single-$1.txt
  BENCH_CB_URL=$CB/cb timeout 60 wrk -t2 -c64 -d5s --timeout 10s -s "$BENCH/post.lua" \
    "$TURL/v1/tasks" >"$f"
  (($(wrk_errors "$f") == 0)) || { cat "$f" >&2; die "single POST ($1): wrk saw errors"; }
  put "single_$1" "$(wrk_rate "$f")"
  log "single POST ($1): $(wrk_rate "$f") requests/s"
}

# BURST_N tasks due at one instant T: N / (last arrival - T)
m_burst() { # m_burst NAME
  local t r s c
  rreset
  t=$(($(now_ms) + 8000))
  r=$(timeout 60 node "$BENCH/tickd_load.js" insert --url "$TURL" --cb "$CB/cb" --n "$BURST_N" \
    --batch 1000 --conc 4 --at "$t")
  log "burst ($1): inserted, T - end = $((t - $(jq -r .end <<<"$r"))) ms"
  rwait "$BURST_N" 70 "burst ($1)" ||
    die "burst ($1): only $(rcount) of $BURST_N arrived"
  s=$(rstats)
  c=$(jq -r .count <<<"$s")
  put "burst_$1" "$(jq -r --argjson t "$t" --argjson n "$BURST_N" '($n / ((.last - $t) / 1000)) | floor' <<<"$s")"
  put "burst_p99_$1" "$(jq -r .p99 <<<"$s")"
  log "burst ($1): $c callbacks, $(get "burst_$1") tasks/s, lateness p99 $(get "burst_p99_$1") ms"
}

# GET, then DELETE, of GETDEL_N tasks due within the day (a fresh set each
# time), wrk -t2 -c16 (bench/ids.lua): GET for 3 s, going round the ids,
# DELETE for 2 s, each id once (a 404, of an id deleted twice, is an error).
# Redis's own time a call to tickd's scripts is read for each apart.
m_getdel() { # m_getdel NAME REDIS_PORT
  local f=$TMP/ids-$1 m k
  timeout 120 node "$BENCH/tickd_load.js" ids --url "$TURL" --cb "$CB/cb" --n "$GETDEL_N" \
    --out "$f" --req-bytes 200 >/dev/null || die "ids ($1) failed"
  for m in GET DELETE; do
    k=$(tr A-Z a-z <<<"${m:0:3}")
    timeout 30 redis-cli -p "$2" CONFIG RESETSTAT >/dev/null
    BENCH_IDS=$f BENCH_THREADS=2 BENCH_METHOD=$m timeout 60 wrk -t2 -c16 \
      -d"$([ $m = GET ] && echo 3 || echo 2)"s --latency -s "$BENCH/ids.lua" "$TURL" >"$f.$k"
    (($(wrk_errors "$f.$k") == 0)) || { cat "$f.$k" >&2; die "$m ($1): wrk saw errors"; }
    put "${k}_rate_$1" "$(wrk_rate "$f.$k")"
    put "${k}_p50_$1" "$(wrk_ms "$f.$k" 50)"
    put "${k}_p99_$1" "$(wrk_ms "$f.$k" 99)"
    put "${k}_rus_$1" "$(timeout 30 redis-cli -p "$2" INFO commandstats | tr -d '\r' |
      awk -F'[=,]' '/^cmdstat_evalsha:/ {print $6}')"
  done
  log "GET/DELETE ($1): GET $(get "get_rate_$1")/s p99 $(get "get_p99_$1") ms, Redis $(get "get_rus_$1") us a call;" \
    "DELETE $(get "del_rate_$1")/s p99 $(get "del_p99_$1") ms, Redis $(get "del_rus_$1") us a call"
}

measure() { # measure NAME ROUND REDIS_PORT
  m_single "$1"
  m_burst "$1"
  m_getdel "$1" "$3"
  local k
  for k in $KEYS; do put "${k}_$1_$2" "$(get "${k}_$1")"; done
}
KEYS="single burst burst_p99 get_rate get_p50 get_p99 get_rus del_rate del_p50 del_p99 del_rus"
median() { # median KEY: of its rounds
  local r
  for r in $(seq "$ROUNDS"); do num "${1}_$r"; done | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'
}

# Two Redis servers: this one fills up, the other stays empty (flushed before
# each of its rounds); tickd is started on one, then on the other, the
# measurements taking turns, ROUNDS of each: the table shows the medians.
ROUNDS=${SCALE_ROUNDS:-5}
EPORT=$(free_port)
redis_up "$EPORT" redis-empty
log "insert: $SCALE_N tasks due over the next day from 30 min on (200-byte bodies), batches of 1000, 8 in flight"
tickd_start
put mem_empty "$(used_memory)"
t=$(date +%s%3N)
# from 30 minutes on: none falls due during the run
r=$(timeout 900 node "$BENCH/tickd_load.js" insert --url "$TURL" --cb "$CB/cb" --n "$SCALE_N" \
  --batch 1000 --conc 8 --spread-min 1410 --spread-from-min 30 --req-bytes 200) || die "insert failed: $r"
put insert_rate "$((SCALE_N * 1000 / ($(date +%s%3N) - t)))"
log "inserted: $r; $(get insert_rate) tasks/s"
pending=$(tickd_stored)
put pending "$pending"
put mem_full "$(used_memory)"
log "pending: $pending; Redis used_memory $(used_memory)"
((pending >= SCALE_N)) || die "only $pending of $SCALE_N tasks stored"
on_side() { # on_side empty|full ROUND: tickd on that Redis, measured
  if [ "$1" = empty ]; then
    timeout 30 redis-cli -p "$EPORT" FLUSHALL >/dev/null
    log "round $2: an empty Redis"
    BENCH_ON_REDIS=127.0.0.1:$EPORT tickd_resume
  else
    log "round $2: $pending pending"
    tickd_resume
  fi
  measure "$1" "$2" "$([ "$1" = empty ] && echo "$EPORT" || echo "$RPORT")"
}
# CPU time (s) of the kernel's DAMON threads (kdamond.*), where the kernel
# runs one: a memory monitor that may page out cold memory, and so works on
# the full Redis's gigabytes
kdamond_s() {
  local d
  for d in /proc/[0-9]*; do
    if [[ $(cat "$d/comm" 2>/dev/null) == kdamond* ]]; then cpu_ticks "${d#/proc/}" 2>/dev/null || true; fi
  done | awk -v hz="$(getconf CLK_TCK)" '{t += $1} END {printf "%.1f", t / hz}'
}
kd0=$(kdamond_s); r0=$(date +%s)
# the sides take turns, the first of a round alternating too
for round in $(seq "$ROUNDS"); do
  if ((round % 2)); then on_side empty "$round"; on_side full "$round"
  else on_side full "$round"; on_side empty "$round"; fi
done
put kdamond "$(awk -v a="$kd0" -v b="$(kdamond_s)" 'BEGIN {printf "%.1f", b - a}')"
put rounds_s "$(($(date +%s) - r0))"
for side in empty full; do
  for k in $KEYS; do put "${k}_$side" "$(median "${k}_$side")"; done
done

# The backlog: BACKLOG_N tasks due over 10 s from T, inserted while tickd
# runs (T leaves room for an insert at 60,000 tasks/s); tickd stopped before
# T and started 5 s after the last is due.
t=$(($(now_ms) + 12000 + BACKLOG_N / 60))
log "backlog: $BACKLOG_N tasks due over 10 s from T = now + $(((t - $(now_ms)) / 1000)) s"
r=$(timeout 600 node "$BENCH/tickd_load.js" insert --url "$TURL" --cb "$CB/cb" --n "$BACKLOG_N" \
  --batch 1000 --conc 8 --at "$t" --window-ms 10000) || die "backlog insert failed: $r"
log "inserted: $r (T - end = $((t - $(jq -r .end <<<"$r"))) ms)"
(($(jq -r .end <<<"$r") < t - 5000)) || die "the backlog insert ended too close to T"
tickd_stop
log "tickd stopped; waiting until T + 15 s"
while (($(now_ms) < t + 15000)); do sleep 0.5; done
rreset
start=$(now_ms)
tickd_resume
log "tickd started again: draining"
rwait "$BACKLOG_N" 600 "the backlog" ||
  log "backlog: only $(rcount) of $BACKLOG_N arrived"
sleep 1
s=$(curl -sf --max-time 120 "$CB/stats?order=1")
log "backlog: $s"
put backlog_count "$(jq -r .count <<<"$s")"
put backlog_dups "$(jq -r .dups <<<"$s")"
# the drain: from the first callback to the last (tickd's start, until its
# first callback, is given apart)
put backlog_rate "$(jq -r --argjson n "$BACKLOG_N" '($n / ((.last - .first) / 1000)) | floor' <<<"$s")"
put backlog_rate_start "$(jq -r --argjson t "$start" --argjson n "$BACKLOG_N" '($n / ((.last - $t) / 1000)) | floor' <<<"$s")"
put backlog_first "$(jq -r --argjson t "$start" '(.first - $t) | floor' <<<"$s")"
put backlog_rho "$(jq -r '.order_rho * 1000 | round / 1000' <<<"$s")"
tickd_stop
secs=$(($(date +%s) - T0))

# ---- the table ------------------------------------------------------------

row() { # row WHAT KEY: full vs empty, target >= 0.9x (rates)
  local e f
  e=$(num "${2}_empty"); f=$(num "${2}_full")
  echo "| $1 | $(fmt "$e") | $(fmt "$f") | $(ratio "$f" "$e") | ≥ 0.9× | $(judge 'a >= 0.9 * b' "$f" "$e") |"
}
lat() { # lat WHAT KEY: ms, info
  echo "| $1 | $(fmt "$(num "${2}_empty")" 2) | $(fmt "$(num "${2}_full")" 2) | $(ratio "$(num "${2}_full")" "$(num "${2}_empty")") | — | info |"
}
brate=$(num burst_full); drate=$(num backlog_rate); rho=$(num backlog_rho)
table=$(
  echo "| at $(fmt "$pending") pending vs empty Redis | empty | $(fmt "$pending") pending | ratio | target | result |"
  echo "| --- | ---: | ---: | ---: | --- | --- |"
  row "single POST /v1/tasks, wrk -c64, 5 s (requests/s)" single
  row "burst, $(fmt $BURST_N) due at one instant (tasks/s)" burst
  row "GET /v1/tasks/{id} over $(fmt $GETDEL_N) tasks, wrk -c16, 3 s (requests/s)" get_rate
  row "DELETE /v1/tasks/{id} of the same, wrk -c16, 2 s (requests/s)" del_rate
  lat "GET latency p50 (ms)" get_p50
  lat "GET latency p99 (ms)" get_p99
  lat "DELETE latency p50 (ms)" del_p50
  lat "DELETE latency p99 (ms)" del_p99
  lat "Redis's time a GET (us, its script)" get_rus
  lat "Redis's time a DELETE (us, its script)" del_rus
  lat "burst lateness p99 (ms)" burst_p99
  echo "| backlog of $(fmt "$BACKLOG_N") due while tickd was stopped: drain rate vs the burst at $(fmt "$pending") pending (tasks/s) | — | $(fmt "$drate") | $(ratio "$drate" "$brate") | ≥ 1× the burst | $(judge 'a >= b && a > 0' "$drate" "$brate") |"
  echo "| the same: oldest first, rank correlation of arrival and due order (1 = strictly) | — | $(fmt "$rho" 3) | — | ≥ 0.9 | $(judge 'a >= 0.9' "$rho") |"
)
mem_per=$(awk -v a="$(num mem_full)" -v b="$(num mem_empty)" -v n="$SCALE_N" 'BEGIN {printf "%.0f", (a - b) / n}')
notes=$(
  echo "- insert of $(fmt "$SCALE_N") tasks (batches of 1000, 8 in flight, each batch due in one minute picked among the 1,410 from 30 minutes on): $(fmt "$(num insert_rate)") tasks/s"
  echo "- medians of $ROUNDS rounds, the two sides taking turns (the first of a round alternating); rounds (empty / full): single POST $(for r in $(seq "$ROUNDS"); do printf '%s/%s ' "$(num single_empty_$r)" "$(num single_full_$r)"; done); burst $(for r in $(seq "$ROUNDS"); do printf '%s/%s ' "$(num burst_empty_$r)" "$(num burst_full_$r)"; done); GET $(for r in $(seq "$ROUNDS"); do printf '%s/%s ' "$(num get_rate_empty_$r)" "$(num get_rate_full_$r)"; done); DELETE $(for r in $(seq "$ROUNDS"); do printf '%s/%s ' "$(num del_rate_empty_$r)" "$(num del_rate_full_$r)"; done)"
  echo "- Redis used_memory with $(fmt "$pending") pending (the empty run's own tasks included): $(fmt "$(num mem_full)") bytes; the $(fmt "$SCALE_N") inserted took $(fmt "$mem_per") bytes a task"
  echo "- backlog: $(fmt "$(num backlog_count)") of $(fmt "$BACKLOG_N") arrived, $(fmt "$(num backlog_dups)") duplicates; the first $(fmt "$(num backlog_first)") ms after tickd was started; counted from the start, the drain rate is $(fmt "$(num backlog_rate_start)") tasks/s"
  ((SCALE_N == 10000000 && BACKLOG_N == 1000000)) || echo "- **a reduced run**: SCALE_N=$SCALE_N, BACKLOG_N=$BACKLOG_N"
  echo "- the kernel's DAMON monitor (kdamond) used $(num kdamond) s of CPU during the $(num rounds_s) s of the rounds (0: none ran)"
  echo "- the run took $((secs / 60)) min $((secs % 60)) s"
)
echo
echo "$table"
echo
echo "$notes"
{
  echo "## Scale (make bench-scale)"
  echo
  echo "Written by bench/scale.sh ($(date -u +%Y-%m-%dT%H:%MZ), tickd $(tree_id), $(nproc) CPUs); see bench/README.md."
  echo
  echo "$table"
  echo
  echo "$notes"
} | results_put scale
log "wrote the scale part of bench/results.md"
