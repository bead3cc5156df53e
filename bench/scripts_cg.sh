#!/bin/bash
# bench/scripts_cg.sh: Redis's instructions a task in the add, the claim and
# the settle scripts alone, counted by valgrind --tool=callgrind: no tickd,
# no receiver, no timing. A redis-server under callgrind is fed by
# `redis-cli --pipe`: SG_N (20,480) fresh tasks added to SG_SLICES (16)
# slices in calls of SG_ADD_BATCH (15: what single POSTs make, wrk -c64),
# then every slice claimed in calls of SG_BATCH (256), then every task
# settled as a first attempt's success, in calls of the same size, in the
# order they were added (SG_SETTLE_ORDER=claimed: in the order the claims
# took them, as tickd's settles come, in about the order its callbacks went
# out: what a change whose cost depends on which claim a task came from,
# such as a lease a claim, is judged by; doc/performance.md). The same
# figure on an idle or a busy machine: to judge a change of lua/ in seconds.
#
#   bench/scripts_cg.sh [LUA_DIR]        # lua/ by default
#
# SG_SPREAD_MS=10000 spreads the tasks' dues over that many ms (a backlog:
# each task due on its own millisecond), instead of one instant (a burst).
# SG_AHEAD_MS=20000 makes them due that long after now instead of a minute
# ago, each claim looking far enough ahead to take them: claimed before they
# are due, as a replica claims a steady load (with SG_SPREAD_MS, each on its
# own millisecond, each lease its own).
# SG_CONFIG="name value" is given to Redis by CONFIG SET first (for example
# "hash-max-listpack-entries 0", to see what the packed encodings cost).
# SG_CPU=1 runs Redis without valgrind and prints its CPU time a task
# (user + system, /proc/PID/stat) instead: what the instructions come to on
# this machine, as noisy as the machine is.
# LUA_DIR without a lib.lua (or an add.lua) of its own takes lua/'s
# (bench/floor/: the least a claim and a settle of this keyspace can do,
# bench/README.md).
# Each script is loaded as tickd loads it, after the definitions of lib.lua
# it uses (build/tools/script_link, built when missing).
# Needs valgrind (not with SG_CPU), redis-server and python3.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LUA=$(cd "${1:-$ROOT/lua}" && pwd)
LIB=$LUA/lib.lua
[ -f "$LIB" ] || LIB=$ROOT/lua/lib.lua
ADD_LUA=$LUA/add.lua
[ -f "$ADD_LUA" ] || ADD_LUA=$ROOT/lua/add.lua
ADD_BATCH=${SG_ADD_BATCH:-15}
CPU=${SG_CPU:-}
N=${SG_N:-20480}
SLICES=${SG_SLICES:-16}
BATCH=${SG_BATCH:-256}
N=$((SLICES * (N / SLICES)))  # as many in each slice
ORDER=${SG_SETTLE_ORDER:-added}
case $ORDER in added | claimed) ;; *) echo "SG_SETTLE_ORDER: added or claimed, not $ORDER" >&2; exit 1 ;; esac
NEED="redis-server redis-cli python3"
[ -n "$CPU" ] || NEED="$NEED valgrind callgrind_control callgrind_annotate"
for c in $NEED; do
  command -v $c >/dev/null || { echo "$c missing" >&2; exit 1; }
done
W=$(mktemp -d /tmp/tickd-scripts-cg.XXXXXX)
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
VG=(valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$W/cg.%p")
[ -z "$CPU" ] || VG=()
"${VG[@]}" redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no >"$W/redis.log" 2>&1 &
VP=$!
trap 'redis-cli -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || kill $VP 2>/dev/null; rm -rf "$W"' EXIT
for _ in $(seq 300); do redis-cli -p "$PORT" PING >/dev/null 2>&1 && break; sleep 0.1; done
if [ -n "${SG_CONFIG:-}" ]; then redis-cli -p "$PORT" CONFIG SET $SG_CONFIG >/dev/null; fi
[ -x "$ROOT/build/tools/script_link" ] || make -s -C "$ROOT" build/tools/script_link >&2
mkdir -p "$W/lua"
cp "$LIB" "$W/lua/lib.lua"
load() { # load NAME [FILE]
  cp "${2:-$LUA/$1.lua}" "$W/lua/$1.lua"
  redis-cli -p "$PORT" SCRIPT LOAD "$("$ROOT/build/tools/script_link" "$W/lua" "$1")"
}
ADD=$(load add "$ADD_LUA")
CLAIM=$(load claim)
SETTLE=$(load settle)

# the calls, as RESP: fresh members ("id\nrecord", lua/lib.lua) due a minute
# ago, the claims, the settles
AHEAD=${SG_AHEAD_MS:-}
python3 - "$W" "$N" "$SLICES" "$BATCH" "$CLAIM" "$SETTLE" "${SG_SPREAD_MS:-0}" \
  "$ROOT/tests/integration" "$ADD" "$ADD_BATCH" \
  "$(grep -q "fresh tasks only: 'f'" "$ADD_LUA" && echo 1 || echo 0)" "$AHEAD" \
  "$ORDER" <<'PY'
import random, string, sys, time
w, n, nsl, b, claim, settle = sys.argv[1], *map(int, sys.argv[2:5]), *sys.argv[5:7]
spread = int(sys.argv[7])
sys.path.insert(0, sys.argv[8])
from redis_proto import resp
add, ab = sys.argv[9], int(sys.argv[10])
pairs = sys.argv[11] == "1"
ahead = int(sys.argv[12]) if sys.argv[12] else None
order = sys.argv[13]
random.seed(1)
at = int(time.time() * 1000) + (ahead if ahead is not None else -60000)
# how far a claim looks ahead: past the last due when they are not yet due
reach = ahead + spread + 60000 if ahead is not None else 1500
minute = time.strftime("%Y%m%d%H%M", time.gmtime(at / 1000))
rec = '"http://127.0.0.1:8080/cb"\n\n10000\n\n\n{}'
def key():
    return "".join(random.choice(string.ascii_letters + string.digits) for _ in range(22))
def due(i):
    return at + (i * spread) // (n // nsl) if spread else at
slices = [(f"{minute}.{s}", [f"{minute}.{s}.{due(i)}.{key()}" for i in range(n // nsl)])
          for s in range(nsl)]
with open(f"{w}/slices", "w") as f:
    f.write("".join(s + "\n" for s, _ in slices))
def keys(s, names):
    return [f"tickd:{{{s}}}:{k}" for k in names]
# the adds as tickd sends them (fresh tasks only: 'f', then a pair a task,
# its due and its :due member; an add.lua of before takes a group a task: id,
# record, due, timeout, queue, form), the fence last of the KEYS; past the
# slice's end with a grace that lets them in
with open(f"{w}/add.resp", "wb") as f:
    for s, ids in slices:
        end = (at // 60000 + 1) * 60000
        for i in range(0, len(ids), ab):
            args = ["EVALSHA", add, 4, *keys(s, ["due", "task", "del", "fence"]), end, 3600000, "0"]
            if pairs:
                args.append("f")
            for t in ids[i:i + ab]:
                if pairs:
                    args += [t.split(".")[2], f"{t}\n{rec}"]
                else:
                    args += [t, rec, t.split(".")[2], 10000, "", "f"]
            f.write(resp(*args))
with open(f"{w}/claim.resp", "wb") as f:
    for s, ids in slices:
        for i in range(0, len(ids), b):
            f.write(resp("EVALSHA", claim, 5, *keys(s, ["due", "task", "del", "run", "ptr"]),
                         reach, b, 5000, 1000, b))
# (claimed: :due's order, due then id)
with open(f"{w}/settle.resp", "wb") as f:
    for s, ids in slices:
        if order == "claimed":
            ids = sorted(ids)
        for i in range(0, len(ids), b):
            args = ["EVALSHA", settle, 8,
                    *keys(s, ["due", "task", "del", "run", "ok", "failed", "cancelled", "expired"]),
                    86400000, 604800000, f"t{i}"]
            for t in ids[i:i + b]:
                args += [t, '{"t":%d,"ms":3,"c":200}' % (int(t.split(".")[2]) + 1)]
            f.write(resp(*args))
PY
pipe() { # pipe FILE: sent; dies on any error reply
  local out
  out=$(redis-cli -p "$PORT" --pipe <"$W/$1")
  grep -q "errors: 0," <<<"$out" || { echo "$1: $out" >&2; exit 1; }
}
cpu() { awk '{print $14 + $15}' "/proc/$VP/stat"; }  # ticks
if [ -n "$CPU" ]; then
  a0=$(cpu); pipe add.resp; c0=$(cpu); pipe claim.resp; c1=$(cpu); pipe settle.resp; c2=$(cpu)
else
  callgrind_control -i on $VP >/dev/null
  pipe add.resp
  callgrind_control -d $VP >/dev/null
  callgrind_control -z $VP >/dev/null
  pipe claim.resp
  callgrind_control -d $VP >/dev/null
  callgrind_control -z $VP >/dev/null
  pipe settle.resp
  callgrind_control -d $VP >/dev/null
  callgrind_control -i off $VP >/dev/null
fi
ok=0
# (the succeeded index: a member a settle, its ids with '\n' between)
COUNT_OK="local n = 0 for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  n = n + select(2, string.gsub(m, '[^\n]+', '')) end return n"
while read -r s; do
  ok=$((ok + $(redis-cli -p "$PORT" EVAL "$COUNT_OK" 1 "tickd:{$s}:ok")))
done <"$W/slices"
(( ok == N )) || { echo "$ok of $N tasks settled as succeeded" >&2; exit 1; }
rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo lua)
if [ -n "$CPU" ]; then
  us() { python3 -c "print('%.2f' % ($1 / $(getconf CLK_TCK) / $N * 1e6))"; }
  echo "| Redis's CPU a task (us) | add (calls of $ADD_BATCH) | claim | settle | claim + settle |"
  echo "| --- | ---: | ---: | ---: | ---: |"
  printf '| %s %s | %s | %s | %s | %s |\n' "$rev" "${1:-lua}" "$(us $((c0 - a0)))" \
    "$(us $((c1 - c0)))" "$(us $((c2 - c1)))" "$(us $((c2 - c0)))"
  exit 0
fi
total() { callgrind_annotate "$(ls "$W"/cg.$VP.$1)" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'; }
a=$(total 1)
c=$(total 2)
s=$(total 3)
echo "| instructions a task | add (calls of $ADD_BATCH) | claim | settle | claim + settle |"
echo "| --- | ---: | ---: | ---: | ---: |"
printf '| %s | %s | %s | %s | %s |\n' "$rev" \
  $((a / N)) $((c / N)) $((s / N)) $(((c + s) / N))
