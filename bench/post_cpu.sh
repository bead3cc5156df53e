#!/usr/bin/env bash
# bench/post_cpu.sh: where a single POST's CPU goes. The same wrk load as
# make bench's single-POST row (wrk -t2 -c64, post.lua), ROUNDS times 5 s,
# against tickd (on a fresh Redis), against bench/noop_http.c (a server
# that answers at once and stores nothing) and against bench/store_http.c
# (the least a server that answers only once Redis holds the body can do:
# one RPUSH a request, pipelined, on a Redis of its own) and against the same
# built with -DPARSE_JSON ("parse-and-store": each body parsed with cJSON, the
# JSON library tickd uses, before it is stored): CPU time a request of the
# server (in all, and its user and system parts), of Redis and of wrk, from
# /proc/PID/stat and wrk's own rusage, and the server's CPU a request over
# the do-nothing server's in the same round.
# It prints a table; it writes no results file.
#
#   bench/post_cpu.sh            (ROUNDS=2; BENCH_TICKD as for bench/run.sh)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROUNDS=${ROUNDS:-2}
HZ=$(getconf CLK_TCK)
us_per() { awk -v a="$1" -v b="$2" -v n="$3" -v hz="$HZ" 'BEGIN {printf "%.1f", (b - a) * 1e6 / hz / n}'; }
split_ticks() { awk '{print $14, $15}' "/proc/$1/stat"; } # user system, in 1/CLK_TCK s
NOOP_US= # the do-nothing server's CPU a request in this round
measure() { # measure NAME URL SERVER_PID [REDIS_PID]
  local f=$TMP/wrk-$1.txt r0=0 r1=0 n wu ws u0 y0 u1 y1 us
  read -r u0 y0 < <(split_ticks "$3"); [ -z "${4:-}" ] || r0=$(cpu_ticks "$4")
  BENCH_CB_URL=$CB/cb /usr/bin/time -f "%U %S" -o "$TMP/time" timeout 60 \
    wrk -t2 -c64 -d5s --timeout 10s -s "$BENCH/post.lua" "$2" >"$f"
  read -r u1 y1 < <(split_ticks "$3"); [ -z "${4:-}" ] || r1=$(cpu_ticks "$4")
  (($(wrk_errors "$f") == 0)) || { cat "$f" >&2; die "$1: wrk saw errors"; }
  n=$(wrk_reqs "$f")
  read -r wu ws <"$TMP/time"
  us=$(us_per $((u0 + y0)) $((u1 + y1)) "$n")
  [ "$3" != "$npid" ] || NOOP_US=$us
  printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$1" "$us" \
    "$(awk -v a="$us" -v b="$NOOP_US" 'BEGIN {if (b > 0) printf "%.2fx", a / b}')" \
    "$(us_per "$u0" "$u1" "$n")" "$(us_per "$y0" "$y1" "$n")" \
    "$([ -z "${4:-}" ] && echo "" || us_per "$r0" "$r1" "$n")" \
    "$(awk -v u="$wu" -v s="$ws" -v n="$n" 'BEGIN {printf "%.1f", (u + s) * 1e6 / n}')" \
    "$(wrk_rate "$f")"
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
tickd_start
rpid=$(head -1 "$GPIDS")
echo "| server | server us/request | ÷ do-nothing | of it user | of it system | Redis us/request | wrk us/request | requests/s |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for r in $(seq "$ROUNDS"); do
  measure "do-nothing ($r)" "http://127.0.0.1:$nport/v1/tasks" "$npid"
  measure "store-only ($r)" "http://127.0.0.1:$sport/v1/tasks" "$spid" "$srpid"
  measure "parse-and-store ($r)" "http://127.0.0.1:$pport/v1/tasks" "$ppid" "$srpid"
  measure "tickd ($r)" "$TURL/v1/tasks" "$TICKD_PID" "$rpid"
done
