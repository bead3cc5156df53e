#!/usr/bin/env bash
# bench/post_cpu.sh: where a single POST's CPU goes. The same wrk load as
# make bench's single-POST row (wrk -t2 -c64, post.lua), ROUNDS times 5 s,
# against tickd (on a fresh Redis), against bench/noop_http.c (a server
# that answers at once and stores nothing) and against bench/store_http.c
# (the least a server that answers only once Redis holds the body can do:
# one RPUSH a request, pipelined, on a Redis of its own) and against the same
# built with -DPARSE_JSON ("parse-and-store": each body parsed with cJSON, the
# JSON library tickd uses, before it is stored) and with -DKEYSPACE too ("the
# keyspace's floor": each parsed task stored where tickd keeps it, by tickd's
# own add script, in its cheapest form; its tasks, like tickd's, pile up on
# that Redis over the rounds): CPU time a request of the
# server (in all, and its user and system parts), of Redis and of wrk, from
# /proc/PID/stat and wrk's own rusage, and the server's CPU a request over
# the do-nothing server's in the same round. Under the table, the verdict on
# the single POST's target (tickd ≤ 1.3x, the median of the rounds), judged
# with the keyspace's floor (the target is out of reach in a run where that
# floor misses it too), parse-and-store's median beside it.
# It prints a table and its verdict and, for the build in the tree (no
# BENCH_TICKD), writes both to the post part of bench/results.md.
#
#   bench/post_cpu.sh            (ROUNDS=3; BENCH_TICKD as for bench/run.sh)
# Three rounds by default: the median of two is their mean, which one round
# disturbed by the machine moves (1.76x and 1.17x in one run).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROUNDS=${ROUNDS:-3}
HZ=$(getconf CLK_TCK)
per_req() { awk -v a="$1" -v b="$2" -v n="$3" -v hz="$HZ" 'BEGIN {print (b - a) * 1e6 / hz / n}'; } # us, unrounded
us_per() { printf '%.1f' "$(per_req "$@")"; }
split_ticks() { awk '{print $14, $15}' "/proc/$1/stat"; } # user system, in 1/CLK_TCK s
NOOP_US= # the do-nothing server's CPU a request in this round (unrounded)
measure() { # measure NAME URL SERVER_PID [REDIS_PID]
  local f=$TMP/wrk-$1.txt r0=0 r1=0 n wu ws u0 y0 u1 y1 us
  read -r u0 y0 < <(split_ticks "$3"); [ -z "${4:-}" ] || r0=$(cpu_ticks "$4")
  BENCH_CB_URL=$CB/cb /usr/bin/time -f "%U %S" -o "$TMP/time" timeout 60 \
    wrk -t2 -c64 -d5s --timeout 10s -s "$BENCH/post.lua" "$2" >"$f"
  read -r u1 y1 < <(split_ticks "$3"); [ -z "${4:-}" ] || r1=$(cpu_ticks "$4")
  (($(wrk_errors "$f") == 0)) || { cat "$f" >&2; die "$1: wrk saw errors"; }
  n=$(wrk_reqs "$f")
  read -r wu ws <"$TMP/time"
  us=$(per_req $((u0 + y0)) $((u1 + y1)) "$n")
  [ "$3" != "$npid" ] || NOOP_US=$us
  (($(awk -v b="$NOOP_US" 'BEGIN {print (b > 0)}'))) || die "$1: no CPU time measured for the do-nothing server"
  awk -v a="$us" -v b="$NOOP_US" 'BEGIN {print a / b}' >>"$TMP/ratio-${1% (*}"
  printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$1" "$(printf '%.1f' "$us")" \
    "$(ratio "$us" "$NOOP_US")" \
    "$(us_per "$u0" "$u1" "$n")" "$(us_per "$y0" "$y1" "$n")" \
    "$([ -z "${4:-}" ] && echo "" || us_per "$r0" "$r1" "$n")" \
    "$(awk -v u="$wu" -v s="$ws" -v n="$n" 'BEGIN {printf "%.1f", (u + s) * 1e6 / n}')" \
    "$(wrk_rate "$f")" | out
}
command -v /usr/bin/time >/dev/null || die "needs /usr/bin/time (apt-get install time)"
cc -O2 -o "$TMP/noop_http" "$BENCH/noop_http.c"
nport=$(free_port)
"$TMP/noop_http" "$nport" &
echo $! >>"$WPIDS"
npid=$!
wait_until 5 "noop_http up" curl -s -o /dev/null "http://127.0.0.1:$nport/"
cc -O2 -o "$TMP/store_http" "$BENCH/store_http.c"
srport=$(free_port)
redis_up "$srport" store
srpid=$(tail -1 "$GPIDS")
sport=$(free_port)
"$TMP/store_http" "$sport" "$srport" &
echo $! >>"$WPIDS"
spid=$!
wait_until 5 "store_http up" curl -s -o /dev/null "http://127.0.0.1:$sport/"
command -v pkg-config >/dev/null && pkg-config --exists libcjson ||
  die "parse-and-store needs cJSON's headers (make deps installs libcjson-dev)"
cc -O2 -DPARSE_JSON -o "$TMP/parse_store_http" "$BENCH/store_http.c" $(pkg-config --cflags --libs libcjson)
pport=$(free_port)
"$TMP/parse_store_http" "$pport" "$srport" &
echo $! >>"$WPIDS"
ppid=$!
wait_until 5 "parse-and-store up" curl -s -o /dev/null "http://127.0.0.1:$pport/"
# the keyspace's floor: parse-and-store writing each task where tickd keeps
# it, through tickd's add script (on the same Redis as store-only)
cc -O2 -DPARSE_JSON -DKEYSPACE -o "$TMP/keyspace_http" "$BENCH/store_http.c" $(pkg-config --cflags --libs libcjson)
[ -x "$ROOT/build/tools/script_link" ] || make -s -C "$ROOT" build/tools/script_link >&2
add_sha=$(timeout 30 redis-cli -p "$srport" SCRIPT LOAD "$("$ROOT/build/tools/script_link" "$ROOT/lua" add)")
kport=$(free_port)
"$TMP/keyspace_http" "$kport" "$srport" "$add_sha" &
echo $! >>"$WPIDS"
kpid=$!
wait_until 5 "the keyspace's floor up" curl -s -o /dev/null "http://127.0.0.1:$kport/"
tickd_start
rpid=$(head -1 "$GPIDS")
OUTF=$TMP/post.md
out() { tee -a "$OUTF"; } # the lines printed, kept for results.md
echo "| server | server us/request | ÷ do-nothing | of it user | of it system | Redis us/request | wrk us/request | requests/s |" | out
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" | out
for r in $(seq "$ROUNDS"); do
  timeout 30 redis-cli -p "$srport" DEL store_http:tasks >/dev/null # the bodies of the rounds before
  measure "do-nothing ($r)" "http://127.0.0.1:$nport/v1/tasks" "$npid"
  measure "store-only ($r)" "http://127.0.0.1:$sport/v1/tasks" "$spid" "$srpid"
  measure "parse-and-store ($r)" "http://127.0.0.1:$pport/v1/tasks" "$ppid" "$srpid"
  measure "keyspace floor ($r)" "http://127.0.0.1:$kport/v1/tasks" "$kpid" "$srpid"
  measure "tickd ($r)" "$TURL/v1/tasks" "$TICKD_PID" "$rpid"
done
median() { # median FILE: of its numbers, unrounded; fails on an empty file
  sort -g "$1" | awk '{v[NR] = $1} END {if (!NR) exit 1
    print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
t=$(median "$TMP/ratio-tickd") || die "no rounds of tickd"
f=$(median "$TMP/ratio-parse-and-store") || die "no rounds of parse-and-store"
k=$(median "$TMP/ratio-keyspace floor") || die "no rounds of the keyspace floor"
echo | out
echo "tickd's CPU a request ÷ the do-nothing server's, the median of $ROUNDS rounds: $(fmt "$t" 2)×;" \
  "target ≤ 1.3×: $(judge_floor 'a <= 1.3' "$t" "$k" 2) (the keyspace's floor, the least a" \
  "server that stores tasks where tickd keeps them does: $(fmt "$k" 2)×; parse-and-store, one" \
  "that parses and stores anywhere: $(fmt "$f" 2)×)" | out
if [ -z "${BENCH_TICKD:-}" ]; then
  results_put post <<EOF
## The single POST's CPU (bench/post_cpu.sh)

Written by bench/post_cpu.sh ($(date -u +%Y-%m-%dT%H:%MZ), $("$TICKD" --version 2>/dev/null | head -1) $(tree_id)); see bench/README.md.

$(cat "$OUTF")
EOF
  log "wrote the post part of bench/results.md"
fi
