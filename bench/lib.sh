# bench/lib.sh: what bench/run.sh (make bench) and bench/scale.sh (make
# bench-scale) share, sourced by both after `set -euo pipefail`: the tools,
# the temp dir and the processes (one redis-server, the callback receiver,
# tickd), and the helpers that read them. BENCH_TICKD=path benchmarks another
# tickd binary (its scripts from ../lua beside it); BENCH_KEEP=1 keeps the
# temp dir (logs).

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH=$ROOT/bench
cd "$ROOT"

log() { printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---- what the benchmarks need -------------------------------------------

# command -> Debian package (only the missing ones are installed)
declare -A PKG=([node]=nodejs [npm]=npm [wrk]=wrk [redis-server]=redis-server
                [redis-cli]=redis-tools [redis-benchmark]=redis-tools [curl]=curl [jq]=jq)
missing=()
for c in "${!PKG[@]}"; do
  command -v "$c" >/dev/null 2>&1 || missing+=("${PKG[$c]}")
done
if ((${#missing[@]})); then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  [ "$(id -u)" = 0 ] || die "missing; run: sudo apt-get install -y ${missing[*]}"
  log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  timeout 300 apt-get update -qq || die "apt-get update failed"
  timeout 600 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    die "apt-get install ${missing[*]} failed"
fi
TICKD_SRC=${BENCH_TICKD:-$ROOT/build/tickd}
if [ -n "${BENCH_TICKD:-}" ]; then
  [ -x "$BENCH_TICKD" ] || die "BENCH_TICKD=$BENCH_TICKD is not an executable"
elif [ ! -x "$ROOT/build/tickd" ]; then
  log "build/tickd missing: make build/tickd"
  make -C "$ROOT" build/tickd >&2 || die "make build/tickd failed"
fi
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
(( $(ulimit -n) >= 12000 )) || log "warning: ulimit -n is $(ulimit -n); the 10,000-callback memory run needs ~12,000"

cpu_busy() { # percent of CPU time busy over the next second, all CPUs
  local a b
  a=$(awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat)
  sleep 1
  b=$(awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN {split(a, x, " "); split(b, y, " ");
    t = y[2] - x[2]; v = (t > 0) ? 100 * (y[1] - x[1]) / t : 0; printf "%.0f", v}'
}
BUSY0=$(cpu_busy)
((BUSY0 < 20)) ||
  log "warning: the CPUs were ${BUSY0} % busy before the run: other processes compete for them, the numbers will be low"

# ---- processes ----------------------------------------------------------

TMP=$(mktemp -d /tmp/tickd-bench.XXXXXX)
GPIDS=$TMP/pids.global   # redis, receiver
WPIDS=$TMP/pids.wl       # those of the workload running
RES=$TMP/results         # key=value, one a line, appended by the workloads
: >"$GPIDS"; : >"$WPIDS"; : >"$RES"

kill_list() { # TERM each pid of the file still alive, then KILL what is left
  local f=$1 p
  [ -s "$f" ] || return 0
  while read -r p; do kill -TERM "$p" 2>/dev/null || true; done <"$f"
  for _ in $(seq 50); do
    local alive=0
    while read -r p; do kill -0 "$p" 2>/dev/null && alive=1; done <"$f"
    ((alive)) || break
    sleep 0.1
  done
  while read -r p; do kill -KILL "$p" 2>/dev/null || true; done <"$f"
  : >"$f"
}
WL_PID=   # the subshell running a workload
cleanup() {
  local rc=$? c
  trap - EXIT INT TERM
  if [ -n "$WL_PID" ]; then
    for c in $(ps -o pid= --ppid "$WL_PID" 2>/dev/null); do kill -TERM "$c" 2>/dev/null || true; done
    kill -TERM "$WL_PID" 2>/dev/null || true
  fi
  kill_list "$WPIDS"
  kill_list "$GPIDS"
  if [ "${BENCH_KEEP:-0}" = 1 ] || ((rc != 0)); then log "logs kept in $TMP"; else rm -rf "$TMP"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
  node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}
now_ms() { date +%s%3N; }
tree_id() { # the commit measured, "-dirty" for changes beside the results the bench writes itself
  local id
  id=$(git -C "$ROOT" describe --always 2>/dev/null) || { echo '?'; return; }
  git -C "$ROOT" diff --quiet HEAD -- . ':(exclude)bench/results.md' 2>/dev/null || id=$id-dirty
  echo "$id"
}
put() { echo "$1=$2" >>"$RES"; }
get() { local v; v=$(grep "^$1=" "$RES" | tail -1 | cut -d= -f2-); echo "${v:-}"; }
num() { local v; v=$(get "$1"); [[ $v =~ ^-?[0-9.]+$ ]] && echo "$v" || echo ""; }
wait_until() { # wait_until SECONDS DESCRIPTION CMD...: poll CMD every 0.1 s
  local secs=$1 what=$2 end
  shift 2
  end=$(($(date +%s) + secs))
  until "$@"; do
    (($(date +%s) < end)) || { log "timed out after ${secs}s waiting for $what"; return 1; }
    sleep 0.1
  done
}

# a copy of the binary and its scripts: a rebuild during the run changes nothing
mkdir -p "$TMP/tickd/bin"
cp "$TICKD_SRC" "$TMP/tickd/bin/tickd"
if [ -d "$(dirname "$TICKD_SRC")/../lua" ]; then cp -r "$(dirname "$TICKD_SRC")/../lua" "$TMP/tickd/lua"
else cp -r "$ROOT/lua" "$TMP/tickd/lua"; fi
TICKD=$TMP/tickd/bin/tickd
LUA=$TMP/tickd/lua

RPORT=$(free_port)
CPORT=$(free_port)
TPORT=$(free_port)
RADDR=127.0.0.1:$RPORT
CB=http://127.0.0.1:$CPORT
TURL=http://127.0.0.1:$TPORT

rcli() { timeout 30 redis-cli -h 127.0.0.1 -p "$RPORT" "$@"; }
redis_up() { # redis_up PORT NAME: a redis-server without persistence, until the end
  mkdir -p "$TMP/$2"
  redis-server --port "$1" --bind 127.0.0.1 --dir "$TMP/$2" --save '' --appendonly no \
    --logfile "$TMP/$2/log" --daemonize no >/dev/null 2>&1 &
  echo $! >>"$GPIDS"
  wait_until 10 "redis-server :$1" sh -c "[ \"\$(redis-cli -p $1 PING 2>/dev/null)\" = PONG ]" ||
    die "redis-server did not start: $(tail -5 "$TMP/$2/log" 2>/dev/null)"
}
redis_up "$RPORT" redis

node "$BENCH/receiver.js" "$CPORT" >"$TMP/receiver.log" 2>&1 &
echo $! >>"$GPIDS"
wait_until 10 "receiver :$CPORT" curl -sf -o /dev/null "$CB/stats" ||
  die "receiver did not start: $(cat "$TMP/receiver.log")"

rstats() { curl -sf --max-time 10 "$CB/stats"; }
rreset() { curl -sf --max-time 10 -o /dev/null "$CB/reset"; }
rcount() { curl -sf --max-time 10 "$CB/count" | jq -r .count; }
rwait() { # rwait N SECONDS DESCRIPTION: until the receiver has N callbacks (one long poll)
  local c
  c=$(curl -sf --max-time $(($2 + 5)) "$CB/wait?n=$1&ms=$(($2 * 1000))" | jq -r .count) || c=0
  ((c >= $1)) || { log "timed out after $2 s waiting for $3 ($c of $1)"; return 1; }
}
used_memory() { rcli INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" {print $2}'; }
tickd_stored() { # tasks in every :due zset of the keyspace (one pipeline of ZCARDs)
  rcli --scan --pattern 'tickd:*:due' | awk '{print "ZCARD " $0}' | rcli | awk '{n += $1} END {print n + 0}'
}

TICKD_PID=
tickd_start() { # tickd_start [VAR=value...]: Redis flushed, a fresh tickd
  tickd_stop
  rcli FLUSHALL >/dev/null
  tickd_resume "$@"
}
tickd_resume() { # tickd_resume [VAR=value...]: tickd started on Redis as it is
  # (on $BENCH_ON_REDIS when set, another redis_up's address)
  tickd_stop
  env TICKD_SERVER_SHUTDOWN_GRACE_MS=1000 "$@" "$TICKD" --listen "127.0.0.1:$TPORT" \
    --redis "${BENCH_ON_REDIS:-$RADDR}" >>"$TMP/tickd.log" 2>&1 &
  TICKD_PID=$!
  echo "$TICKD_PID" >>"$WPIDS"
  local i
  for i in $(seq 150); do
    kill -0 "$TICKD_PID" 2>/dev/null || { log "tickd exited:"; tail -20 "$TMP/tickd.log" >&2; return 1; }
    curl -sf -o /dev/null --max-time 2 "$TURL/healthz" && return 0
    sleep 0.1
  done
  log "tickd not healthy after 15 s"
  return 1
}
tickd_stop() {
  [ -n "$TICKD_PID" ] || return 0
  kill -TERM "$TICKD_PID" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$TICKD_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$TICKD_PID" 2>/dev/null || true
  wait "$TICKD_PID" 2>/dev/null || true
  TICKD_PID=
}
flush() { rcli FLUSHALL >/dev/null; }

# The part of bench/results.md between the markers <!-- NAME --> and
# <!-- /NAME --> becomes the text on stdin; the file's other parts stay.
results_put() {
  local name=$1 f=$BENCH/results.md new
  new=$(cat)
  [ -f "$f" ] || echo "# tickd benchmark results" >"$f"
  if ! grep -q "^<!-- $name -->\$" "$f"; then printf '\n<!-- %s -->\n<!-- /%s -->\n' "$name" "$name" >>"$f"; fi
  awk -v name="$name" -v new="$new" '
    $0 == "<!-- " name " -->" {print; print new; skip = 1; next}
    $0 == "<!-- /" name " -->" {skip = 0}
    !skip {print}' "$f" >"$f.tmp" && mv "$f.tmp" "$f"
}

# ---- the report's figures and verdicts ------------------------------------

fmt() { # fmt VALUE [DECIMALS]: thousands grouped, "n/a" when empty
  [ -n "$1" ] || { echo "n/a"; return; }
  LC_ALL=C awk -v v="$1" -v d="${2:-0}" 'BEGIN {
    s = sprintf("%." d "f", v); split(s, p, "."); i = p[1]; neg = (i ~ /^-/); sub(/^-/, "", i)
    o = ""; while (length(i) > 3) { o = "," substr(i, length(i) - 2) o; i = substr(i, 1, length(i) - 3) }
    o = i o; if (neg) o = "-" o; if (d > 0) o = o "." p[2]; print o }'
}
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f×", a / b; else print "n/a"}' || echo "n/a"; }
quot() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) print a / b}' || true; } # a / b, unrounded; empty when either is missing
judge() { # judge AWK-CONDITION a b: met / missed / n/a
  [ -n "$2" ] && { [ -n "${3:-}" ] || [[ $1 != *b* ]]; } || { echo "n/a"; return; }
  awk -v a="$2" -v b="${3:-0}" "BEGIN {print ($1) ? \"met\" : \"**missed**\"}"
}

# judge_floor AWK-CONDITION a floor [DECIMALS [UNIT]]: as judge, and where tickd
# misses, says whether the floor measured in this run (what no scheduler
# beats on this machine: bench/floor's scripts, volley.c, parse-and-store)
# misses the same target too, i.e. the target is out of this machine's reach
# in this run
judge_floor() {
  local r
  r=$(judge "$1" "$2")
  if [ "$r" = "**missed**" ] && [ -n "$3" ] && [ "$(judge "$1" "$3")" = "**missed**" ]; then
    r="**missed**; out of reach in this run: the floor, $(fmt "$3" "${4:-1}")${5:-}, misses it too"
  fi
  echo "$r"
}

wrk_rate() { awk '/^Requests\/sec:/ {print $2}' "$1"; }
wrk_reqs() { awk '/requests in/ {print $1}' "$1"; }
wrk_ms() { # wrk_ms FILE P: the P % latency of wrk --latency, in ms
  awk -v p="$2%" '$1 == p {v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
    print v * (u == "us" ? 0.001 : u == "s" ? 1000 : 1)}' "$1"
}
wrk_errors() { # non-2xx responses + socket errors
  awk '/Non-2xx/ {n += $NF} /Socket errors/ {gsub(/,/, ""); n += $4 + $6 + $8 + $10} END {print n + 0}' "$1"
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # user + system, in 1/CLK_TCK s
mem_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null; }
