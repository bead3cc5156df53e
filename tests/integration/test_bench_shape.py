"""The bench compares like with like (bench/README.md): the callback tickd
sends for a task of `tickd_load.js --shape callback` is the request wrk sends
from bench/cb.lua (the receiver's limit, wrk's CPU a request) and the one
bench/volley.c writes (the steady rows' floor): the same header fields and
values but the task id, due and span, and the same body. A header tickd
adds or drops, or a body the loader and the floors no longer share, fails
here before it makes a ratio of unlike requests."""
import json
import os
import re
import socket
import subprocess

from harness import ROOT, free_port, lua_source, now_ms, wait_for

BENCH = os.path.join(ROOT, "bench")
ID = re.compile(r"^\d{12}\.\d+\.\d{13}\.[A-Za-z0-9]{22}$")
TRACEPARENT = re.compile(r"^00-[0-9a-f]{32}-[0-9a-f]{16}-01$")
# fields that name one task, its due or its span: compared by form
PER_TASK = {"tickd-task-id", "tickd-scheduled-at", "traceparent"}


def wrk_lua(script, prog, env=None):
    """bench/<script> run by Lua 5.1 as wrk would, then prog (what it writes)."""
    prog = "wrk = {headers = {}}\ndofile(arg[1])\n" + prog
    return subprocess.run(["lua5.1", "-", os.path.join(BENCH, script)], input=prog.encode(),
                          capture_output=True, check=True, env=env).stdout


def cb_lua():
    """bench/cb.lua as wrk would run it: (method, {name: value} with
    lowercase names, body)."""
    out = wrk_lua("cb.lua", "io.write(wrk.method, '\\n', #wrk.body, '\\n', wrk.body)\n"
                  "for k, v in pairs(wrk.headers) do io.write('\\n', k, '\\t', v) end\n").decode()
    method, n, rest = out.split("\n", 2)
    body, rest = rest[:int(n)], rest[int(n):]
    headers = dict(ln.split("\t", 1) for ln in rest.split("\n") if ln)
    return method, {k.lower(): v for k, v in headers.items()}, body.encode()


def same_request(got, method, headers, body, auto=("host", "content-length")):
    """got (a Scripted record) is method, headers (but the fields its client
    adds itself, `auto`) and body, the per-task fields by their form."""
    assert got["line"].split(" ")[0] == method, got["line"]
    want = {k: v for k, v in headers.items() if k not in auto}
    have = {k: v for k, v in got["headers"].items() if k not in auto}
    assert set(have) == set(want), (sorted(have), sorted(want))
    for k in want:
        if k == "tickd-task-id":
            assert ID.match(have[k]) and ID.match(want[k]), (have[k], want[k])
        elif k == "tickd-scheduled-at":
            assert re.fullmatch(r"\d{13}", have[k]) and re.fullmatch(r"\d{13}", want[k])
        elif k == "traceparent":
            assert TRACEPARENT.match(have[k]) and TRACEPARENT.match(want[k])
            assert have[k][3:35] == want[k][3:35]  # the producer's trace
        else:
            assert have[k] == want[k], (k, have[k], want[k])
    assert got["headers"]["content-length"] == str(len(body))
    assert got["body"] == body


def test_tickds_callback_is_wrks_request(tickd, scripted):
    method, headers, body = cb_lua()
    # the ones the comparison rests on are there at all
    assert {"user-agent", "accept", "content-type", "traceparent"} <= set(headers)
    at = now_ms() + 1500
    r = subprocess.run(["node", os.path.join(BENCH, "tickd_load.js"), "insert",
                        "--url", f"http://127.0.0.1:{tickd.port}", "--cb", scripted.url("/ok"),
                        "--n", "1", "--batch", "1", "--conc", "1", "--at", str(at),
                        "--shape", "callback"], capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tasks"] == 1
    wait_for(lambda: scripted.requests, 15, what="the callback")
    got = scripted.requests[0]
    same_request(got, method, headers, body)
    assert got["headers"]["host"] == f"127.0.0.1:{scripted.port}"


def test_volleys_request_is_wrks(scripted, tmp_path):
    method, headers, body = cb_lua()
    volley = str(tmp_path / "volley")
    subprocess.run(["cc", "-O2", "-o", volley, os.path.join(BENCH, "volley.c")], check=True)
    # one request every 50 ms for 1 s over one connection
    r = subprocess.run([volley, "127.0.0.1", str(scripted.port), "/ok", "1", "50", "1", "1"],
                       capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    wait_for(lambda: scripted.requests, 5, what="volley's request")
    same_request(scripted.requests[0], method, headers, body)


def post_lua_body():
    """bench/post.lua's body, with its callback URL, as wrk sends it."""
    return wrk_lua("post.lua", "io.write(wrk.body)\n",
                   dict(os.environ, BENCH_CB_URL="http://127.0.0.1:9/cb"))


def test_keyspace_floor_stores_what_tickd_stores(redis, tickd_factory, tmp_path):
    """post_cpu.sh judges the single POST by "the keyspace's floor"
    (store_http.c -DKEYSPACE): a task it stores through lua/add.lua must be
    the task tickd would have stored, read back by tickd's GET, and its
    answer tickd's. A record or add.lua changed without it fails here."""
    exe = str(tmp_path / "keyspace_http")
    subprocess.run(["cc", "-O2", "-DPARSE_JSON", "-DKEYSPACE", "-o", exe,
                    os.path.join(BENCH, "store_http.c"), "-lcjson"], check=True)
    sha = redis.cli("SCRIPT", "LOAD", lua_source("add"))
    port = free_port()
    floor = subprocess.Popen([exe, str(port), str(redis.port), sha])
    body = post_lua_body()
    try:
        def post():
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"POST /v1/tasks HTTP/1.1\r\nHost: t\r\nContent-Type: application/json"
                          b"\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                got = b""
                while b"\r\n\r\n" not in got or not got.endswith(b"}\n"):
                    chunk = s.recv(4096)
                    if not chunk:
                        raise OSError(f"closed after {got!r}")
                    got += chunk
                return got
        wait_for(lambda: _answers(post), 5, what="the floor up")
        head, answer = post().split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 201 ")
        a = json.loads(answer)
        assert ID.match(a["id"]) and a["key"] == a["id"][-22:] and a["status"] == "scheduled"
        t = tickd_factory(redis).start()
        code, task = t.get(a["id"])
        assert code == 200, task
        ours = t.post(json.loads(body))
        code, mine = t.get(ours["id"])
        # the same task but for what names it and its due time
        for k in ("id", "key", "execute_at", "next_attempt_at"):
            task.pop(k), mine.pop(k)
        assert task == mine
        assert set(a) == set(ours) and a["execute_at"] - now_ms() > 3500000
        # and the same record stored (GET reads some records alike: "" and
        # POST for the method, a full spec as it is)
        assert _record(redis, a["id"]) == _record(redis, ours["id"])
    finally:
        floor.kill()
        floor.wait()


def _record(redis, tid):
    """The record stored for task tid: its :due member after the id, as
    redis-cli --no-raw quotes it (one line a member)."""
    slice_ = tid.rsplit(".", 2)[0]
    got = [m for m in redis.cli("--no-raw", "ZRANGE", f"tickd:{{{slice_}}}:due", "0", "-1")
           .splitlines() if tid in m]
    assert len(got) == 1, (tid, got)
    return got[0].split(tid, 1)[1]


def _answers(post):
    try:
        return post().startswith(b"HTTP/1.1 201 ")
    except OSError:
        return False
