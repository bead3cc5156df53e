#!/bin/bash
# bench/callgrind.sh: instructions a callback and a POST, counted by
# valgrind --tool=callgrind (user space only). Counts, not seconds: the same
# figure on an idle or a busy machine, so a change can be judged on a shared VM.
#
#   bench/callgrind.sh        # the three rows below (about 3 minutes)
#
# - tickd, a callback: a burst of CG_N (5,000) tasks due at one instant to
#   bench/receiver.js, tickd under callgrind with collection on from 1.5 s
#   before the instant to the last arrival. Each callback is the request
#   make bench's burst makes (tickd_load.js --shape callback: a 102-byte
#   JSON body and a traceparent); CG_SHAPE= gives tasks without either, as
#   the counts before 2026-11-28 were taken. Valgrind's CPU has no SHA
#   instructions, so a traceparent's SHA-256 counts more here than it costs;
# - Redis, a callback: the same burst, redis-server under callgrind instead
#   (the claim and the settle scripts, and everything else Redis does then);
# - tickd, a POST: CG_POST_S (10) seconds of `wrk -t1 -c8` posting one task a
#   request (post.lua), tickd under callgrind.
# 5,000 rather than make bench's 20,000: under valgrind a process runs tens
# of times slower, and a burst of 20,000 lasts minutes, long enough for leases
# (a task's timeout + the margin) to run out, which a real burst never sees.
# What a slice costs once (its first entries kept compact by Redis) weighs
# four times more at 5,000 than at 20,000.
# One process a run is under valgrind; the others run as usual. Needs what
# bench/run.sh installs (run `make bench` once) and valgrind.
set -euo pipefail
BENCH=$(cd "$(dirname "$0")" && pwd)
N=${CG_N:-5000}
POST_S=${CG_POST_S:-10}

if [ -z "${CG_WHAT:-}" ]; then
  command -v valgrind >/dev/null || { echo "valgrind missing: apt-get install valgrind" >&2; exit 1; }
  command -v redis-server >/dev/null || { echo "redis-server missing: run make bench once" >&2; exit 1; }
  OUT=$(mktemp -d /tmp/tickd-cg.XXXXXX)
  for what in tickd-burst redis-burst tickd-post; do
    CG_WHAT=$what CG_OUT=$OUT bash "$0"
  done
  echo
  echo "| instructions | a callback (tickd) | a callback (Redis) | a POST (tickd) |"
  echo "| --- | ---: | ---: | ---: |"
  printf '| %s | %s | %s | %s |\n' "$(git -C "$BENCH" rev-parse --short HEAD 2>/dev/null || echo build)" \
    "$(cat "$OUT/tickd-burst")" "$(cat "$OUT/redis-burst")" "$(cat "$OUT/tickd-post")"
  echo "(callgrind files kept in $OUT)"
  exit 0
fi

OUT=$CG_OUT
callgrind() { # callgrind PREFIX: valgrind's command line, collection off
  echo valgrind --tool=callgrind --instr-atstart=no --dump-instr=no \
    "--callgrind-out-file=$OUT/$1.%p"
}
total() { # total PREFIX N: instructions of PREFIX's dump number N
  local f
  f=$(ls -t "$OUT/$1".*."$2" 2>/dev/null | head -1)
  [ -n "$f" ] || { echo "no callgrind dump $2 for $1" >&2; exit 1; }
  callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}
window() { # window PID CMD...: collection on while CMD runs; prints how long, in ms
  local pid=$1 t0
  shift
  t0=$(now_ms)
  callgrind_control -i on "$pid" >/dev/null
  "$@" >&2
  callgrind_control -d "$pid" >/dev/null
  callgrind_control -i off "$pid" >/dev/null
  echo $(($(now_ms) - t0))
}

if [ "$CG_WHAT" = redis-burst ]; then
  # redis-server (started by lib.sh) under callgrind, through a shim on PATH
  mkdir -p "$OUT/shim"
  printf '#!/bin/sh\nexec %s %s "$@"\n' "$(callgrind redis)" "$(command -v redis-server)" \
    >"$OUT/shim/redis-server"
  chmod +x "$OUT/shim/redis-server"
  PATH=$OUT/shim:$PATH
fi
source "$BENCH/lib.sh"
trap cleanup EXIT
if [ "$CG_WHAT" != redis-burst ]; then
  # tickd (the copy lib.sh made, its lua/ beside) under callgrind
  mv "$TICKD" "$TICKD.real"
  printf '#!/bin/sh\nexec %s %s "$@"\n' "$(callgrind tickd)" "$TICKD.real" >"$TICKD"
  chmod +x "$TICKD"
fi

prefix=tickd
[ "$CG_WHAT" = redis-burst ] && prefix=redis
tickd_start
case $CG_WHAT in
  tickd-burst | redis-burst)
    if [ "$CG_WHAT" = redis-burst ]; then PID=$(head -1 "$GPIDS"); else PID=$TICKD_PID; fi
    # what the process does with no task at all (ticks, reports) in 5 s,
    # taken off the burst's window pro rata: a slower burst is a longer window
    idle_ms=$(window "$PID" sleep 5)
    idle=$(total "$prefix" 1)
    rreset
    t=$(($(now_ms) + 20000))
    timeout 120 node "$BENCH/tickd_load.js" insert --url "$TURL" --cb "$CB/cb" --n "$N" \
      --batch 1000 --conc 2 --at "$t" ${CG_SHAPE---shape callback} >/dev/null
    while (($(now_ms) < t - 1500)); do sleep 0.05; done
    burst_ms=$(window "$PID" rwait "$N" 300 burst)
    [ "$(rstats | jq .dups)" = 0 ] || die "duplicate callbacks"
    all=$(total "$prefix" 2)
    all=$((all - idle * burst_ms / idle_ms))
    log "$CG_WHAT: idle $idle instructions in $idle_ms ms; burst window $burst_ms ms"
    ops=$N
    ;;
  tickd-post)
    post_load() {
      BENCH_CB_URL=$CB/cb timeout 120 wrk -t1 -c8 -d"${POST_S}s" -s "$BENCH/post.lua" \
        "$TURL/v1/tasks" >"$TMP/wrk.txt"
    }
    window "$TICKD_PID" post_load >/dev/null
    all=$(total "$prefix" 1)
    ops=$(wrk_reqs "$TMP/wrk.txt")
    (($(wrk_errors "$TMP/wrk.txt") == 0)) || die "wrk saw errors"
    ;;
esac
tickd_stop
echo $((all / ops)) >"$OUT/$CG_WHAT"
log "$CG_WHAT: $all instructions / $ops = $((all / ops))"
