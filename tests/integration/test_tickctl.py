"""tickctl, the command-line client, driven as a user drives it: the real
build/tickctl against the real tickd on a real redis-server, callbacks to a
real receiver, and tickctl listen receiving signed callbacks from tickd and
forged or garbage requests from a socket. Output is read as printed: the
tables and detail views by column, --json parsed."""
import base64
import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone

import http.server
import pytest

from harness import ROOT, TICKD, free_port, now_ms, read_to_end, wait_for

TICKCTL = os.environ.get("TICKCTL_BIN", os.path.join(ROOT, "build", "tickctl"))


def env_for(t=None, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKD_")}
    if t is not None:
        env["TICKD_URL"] = f"http://127.0.0.1:{t.port}"
    env.update(extra)
    return env


def ctl(t, *args, env=None, input=None, timeout=20):
    """Run tickctl against tickd t (None: no TICKD_URL)."""
    return subprocess.run([TICKCTL, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, input=input,
                          env=env if env is not None else env_for(t))


def ok(t, *args, **kw):
    r = ctl(t, *args, **kw)
    assert r.returncode == 0, (args, r.returncode, r.stdout, r.stderr)
    return r.stdout


def js(t, *args, **kw):
    return json.loads(ok(t, "--json", *args, **kw))


def rfc3339(ms):
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + \
        f"{ms % 1000:03d}Z"


def table(text):
    """The rows of a tickctl table as dicts, checking that every column
    starts where its head does."""
    lines = text.rstrip("\n").split("\n")
    head = lines[0]
    names = head.split()
    assert names == ["ID", "STATUS", "DUE", "ATTEMPTS", "URL"], head
    starts = [head.index(n) for n in names]
    rows = []
    for line in lines[1:]:
        cells = line.split()
        assert len(cells) == len(names), line
        for name, start, cell in zip(names, starts, cells):
            assert line[start:start + len(cell)] == cell, (name, line, head)
        rows.append(dict(zip(names, cells)))
    return rows


def detail(text):
    """tickctl get's "field  value" lines as a dict (headers as a list)."""
    out = {"header": []}
    for line in text.split("\n"):
        if not line or line.startswith(" ") or line.endswith(":"):
            continue
        k, _, v = line.partition(" ")
        if k == "header":
            out["header"].append(v.strip())
        else:
            out[k] = v.strip()
    return out


def status_of(t, tid):
    return js(t, "get", tid)["status"]


# ---- add, get, ls, cancel, run ---------------------------------------------

def test_add_get_ls_cancel_run(tickd, receiver):
    t0 = now_ms()
    tid = ok(tickd, "add", receiver.url("/later"), "--in", "1h", "--key", "my-k1",
             "--header", "X-A: b", "--body", '{"hi":1}').strip()
    assert re.fullmatch(r"\d{12}\.\d+\.\d+\.my-k1", tid), tid

    # get, for people: one field a line
    d = detail(ok(tickd, "get", tid))
    assert d["id"] == tid and d["status"] == "scheduled" and d["key"] == "my-k1"
    assert d["callback"] == "POST " + receiver.url("/later")
    assert "X-A: b" in d["header"] and "Content-Type: application/json" in d["header"]
    assert d["body"] == '{"hi":1}'
    assert d["attempts"].startswith("0 of 5")
    # and as the API has it
    task = js(tickd, "get", tid)
    assert task["req"] == '{"hi":1}' and task["header"]["X-A"] == "b"
    assert t0 + 3600_000 <= task["execute_at"] <= now_ms() + 3600_000
    assert d["execute_at"].startswith(rfc3339(task["execute_at"]) + " (in 59m")

    # --at: RFC 3339 or Unix ms
    at = (now_ms() // 1000 + 7200) * 1000 + 250
    t2 = ok(tickd, "add", receiver.url("/at"), "--at", rfc3339(at)).strip()
    assert js(tickd, "get", t2)["execute_at"] == at
    t3 = ok(tickd, "add", receiver.url("/ms"), "--at", at + 60000).strip()
    assert js(tickd, "get", t3)["execute_at"] == at + 60000

    # ls: the table, aligned, due times as RFC 3339 UTC, in time order (to
    # the minute: the three are minutes apart)
    rows = table(ok(tickd, "ls"))
    assert [r["ID"] for r in rows] == [tid, t2, t3]
    r = rows[0]
    assert r["STATUS"] == "scheduled" and r["ATTEMPTS"] == "0/5" and r["URL"] == receiver.url("/later")
    assert r["DUE"] == rfc3339(task["execute_at"])
    assert rows[1]["DUE"] == rfc3339(at)
    listed = js(tickd, "ls")
    assert [x["id"] for x in listed["tasks"]] == [tid, t2, t3] and listed["next_cursor"] is None

    # pages: --limit, the cursor said on stderr, --all
    r1 = ctl(tickd, "ls", "--limit", 2)
    assert r1.returncode == 0 and [x["ID"] for x in table(r1.stdout)] == [tid, t2]
    cursor = re.search(r"--cursor '([^']+)'", r1.stderr).group(1)
    assert [x["ID"] for x in table(ok(tickd, "ls", "--limit", 2, "--cursor", cursor))] == [t3]
    assert [x["ID"] for x in table(ok(tickd, "ls", "--limit", 1, "--all"))] == [tid, t2, t3]
    assert [x["id"] for x in js(tickd, "ls", "--limit", 1, "--all")["tasks"]] == [tid, t2, t3]
    assert [x["ID"] for x in table(ok(tickd, "ls", "--key-prefix", "my-"))] == [tid]

    # run: due now, fires once
    before = now_ms()
    row = table(ok(tickd, "run", t2))[0]
    assert row["ID"] == t2 and row["STATUS"] in ("scheduled", "running")
    wait_for(lambda: t2 in receiver.by_task(), 5, what="the run-now callback")
    assert receiver.by_task()[t2][0]["t"] - before < 2500
    wait_for(lambda: status_of(tickd, t2) == "succeeded", 5)
    assert detail(ok(tickd, "get", t2))["status"] == "succeeded"

    # cancel: it never fires
    assert ok(tickd, "cancel", tid) == f"cancelled {tid}\n"
    assert status_of(tickd, tid) == "cancelled"
    assert [x["ID"] for x in table(ok(tickd, "ls", "--status", "cancelled"))] == [tid]
    # errors are the API's, exit code 1
    r = ctl(tickd, "cancel", t2)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("tickctl: 409 conflict: id: the task is succeeded"), r.stderr
    r = ctl(tickd, "get", "202611220000.0.1.nokey")
    assert (r.returncode, r.stderr) == (1, "tickctl: 404 not found: id: no such task\n")
    r = ctl(tickd, "run", t2)
    assert r.returncode == 1 and "409 conflict" in r.stderr and "only a scheduled task" in r.stderr
    r = ctl(tickd, "add", "ftp://example.com/x")
    assert r.returncode == 1 and r.stderr.startswith("tickctl: 400 invalid argument: callback_url"), r.stderr
    # an id is one path segment, whatever it holds
    r = ctl(tickd, "get", "../stats")
    assert r.returncode == 1 and "404" in r.stderr

    # stats
    s = dict(line.split(None, 1) for line in ok(tickd, "stats").strip().split("\n"))
    assert int(s["fired"]) >= 1 and "schedules.passes" in s
    assert js(tickd, "stats")["fired"] >= 1


def test_add_in_a_second_fires_on_time_with_its_body(tickd, receiver):
    t0 = now_ms()
    tid = ok(tickd, "add", receiver.url("/soon"), "--in", "1s", "--method", "PUT",
             "--body", "plain text", "--max-attempts", 2, "--timeout", "2s").strip()
    task = js(tickd, "get", tid)
    assert t0 + 1000 <= task["execute_at"] <= now_ms() + 1000
    assert task["retry"]["max_attempts"] == 2 and task["timeout_ms"] == 2000
    wait_for(lambda: tid in receiver.by_task(), 5, what="the callback")
    call = receiver.by_task()[tid][0]
    assert call["method"] == "PUT" and call["body"] == b"plain text"
    assert "content-type" not in call["headers"]  # not JSON: no Content-Type said
    assert 0 <= call["t"] - task["execute_at"] < 500
    # the body from a file and from standard input, byte for byte
    body = '{"a": [1, 2],\n "b": "\u00e9"}'
    path = os.path.join(tickd.tmp, "body.json")
    with open(path, "w") as f:
        f.write(body)
    t1 = ok(tickd, "add", receiver.url("/f"), "--in", "1h", "--body", "@" + path).strip()
    t2 = ok(tickd, "add", receiver.url("/s"), "--in", "1h", "--body", "-", input=body).strip()
    for x in (t1, t2):
        got = js(tickd, "get", x)
        assert got["req"] == body and got["header"]["Content-Type"] == "application/json"


# ---- the token, tickd down, usage --------------------------------------------

def test_token_from_the_environment_or_the_flag(redis, tickd_factory):
    # tickd starts with tickctl's variables in its environment
    t = tickd_factory(redis, env={"TICKD_SERVER_API_TOKEN": "tok-9f2c", "TICKD_TOKEN": "x",
                                  "TICKD_URL": "http://127.0.0.1:1"}).start()
    r = ctl(t, "ls")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("tickctl: 401 unauthorized: Authorization: missing"), r.stderr
    assert "TICKD_TOKEN" in r.stderr
    r = ctl(t, "ls", env=env_for(t, TICKD_TOKEN="wrong"))
    assert r.returncode == 1 and "401 unauthorized: Authorization: wrong token" in r.stderr
    r = ctl(t, "add", "http://127.0.0.1:9/x", "--in", "1h", "--token", "wrong", "--body", "x" * 5000)
    assert r.returncode == 1 and "401" in r.stderr
    tid = ok(t, "add", "http://127.0.0.1:9/x", "--in", "1h",
             env=env_for(t, TICKD_TOKEN="tok-9f2c")).strip()
    assert table(ok(t, "ls", "--token", "tok-9f2c"))[0]["ID"] == tid
    # the flag wins over the variable
    assert ok(t, "get", tid, "--token", "tok-9f2c", env=env_for(t, TICKD_TOKEN="wrong"))


def test_tickd_down_is_exit_code_3():
    port = free_port()
    for args, env in [(("stats",), env_for(TICKD_URL=f"http://127.0.0.1:{port}")),
                      (("--url", f"http://127.0.0.1:{port}/", "ls"), env_for())]:
        r = ctl(None, *args, env=env)
        assert r.returncode == 3, (r.returncode, r.stderr)
        assert r.stderr.startswith(f"tickctl: cannot reach tickd at http://127.0.0.1:{port}: "), r.stderr
        assert "refused" in r.stderr.lower() or "connect" in r.stderr.lower()
        assert r.stdout == ""


BAD_USAGE = [
    [], ["frobnicate"], ["add"], ["add", "http://x/", "--in", "5"], ["add", "http://x/", "--in", "5q"],
    ["add", "http://x/", "--in", "5m", "--at", "2030-01-01T00:00:00Z"],
    ["add", "http://x/", "--at", "tomorrow"], ["add", "http://x/", "--at", "2030-02-30T00:00:00Z"],
    ["add", "http://x/", "--header", "NoColon"], ["add", "http://x/", "--max-attempts", "0"],
    ["add", "http://x/", "--bogus"], ["add", "http://x/", "--in"], ["add", "a", "b"],
    ["get"], ["get", "a", "b"], ["ls", "--status", "done"], ["ls", "--limit", "0"],
    ["ls", "--limit", "1001"], ["ls", "extra"], ["retry"], ["retry", "x", "--status", "failed"],
    ["retry", "--status", "scheduled"], ["retry", "--status", "failed", "--limit", "10001"],
    ["listen", "--port", "70000"], ["listen", "--status", "99"], ["stats", "--json=yes"],
    ["listen", "--secret", "nope"], ["--url", "ftp://x", "stats"], ["-x"], ["help", "nope"],
]


@pytest.mark.parametrize("args", BAD_USAGE, ids=[" ".join(a) or "nothing" for a in BAD_USAGE])
def test_bad_usage_is_exit_code_2(args):
    # no tickd: a usage error is found before any request
    r = ctl(None, *args, env=env_for(TICKD_URL="http://127.0.0.1:1"))
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.startswith(("tickctl: ", "usage: tickctl")), r.stderr
    assert "--help" in r.stderr


def test_help_on_every_command():
    r = ctl(None, "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: tickctl")
    for code in ("0  done", "1  the API answered an error", "2  usage", "3  tickd cannot be reached",
                 "4  listen"):
        assert code in r.stdout, code
    assert ctl(None, "help").stdout == r.stdout
    for cmd in ("add", "get", "ls", "cancel", "retry", "run", "stats", "listen"):
        a, b, c = ctl(None, cmd, "--help"), ctl(None, "help", cmd), ctl(None, cmd, "-h")
        assert a.returncode == b.returncode == c.returncode == 0, cmd
        assert a.stdout == b.stdout == c.stdout and a.stdout.startswith(f"usage: tickctl {cmd}")
    assert "--in DURATION" in ctl(None, "add", "--help").stdout
    assert ctl(None, "--version").stdout.startswith("tickctl ")


# ---- dead letters ------------------------------------------------------------

class Switch:
    """A receiver that answers `code` (500 until told otherwise), counting calls by task."""

    def __init__(self):
        self.code = 500
        self.calls = {}
        sw = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                tid = self.headers.get("tickd-task-id")
                sw.calls[tid] = sw.calls.get(tid, 0) + 1
                self.send_response(sw.code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_dead_letter_flow(tickd):
    sw = Switch()
    try:
        ids = [ok(tickd, "add", sw.url, "--max-attempts", 1, "--key", f"dl{i}").strip()
               for i in range(3)]
        wait_for(lambda: all(status_of(tickd, x) == "failed" for x in ids), 10,
                 what="the tasks failed")
        rows = table(ok(tickd, "ls", "--status", "failed"))
        assert sorted(r["ID"] for r in rows) == sorted(ids)
        assert all(r["STATUS"] == "failed" and r["ATTEMPTS"] == "1/1" for r in rows)
        d = detail(ok(tickd, "get", ids[0]))
        assert d["last_status"] == "500" and d["last_error"] == "HTTP 500"
        sw.code = 200
        # one by id
        row = table(ok(tickd, "retry", ids[0]))[0]
        assert row["ID"] == ids[0] and row["STATUS"] in ("scheduled", "running")
        assert row["ATTEMPTS"] == "0/1"
        wait_for(lambda: status_of(tickd, ids[0]) == "succeeded", 10, what="the retry succeeded")
        assert detail(ok(tickd, "get", ids[0]))["status"] == "succeeded"
        assert sw.calls[ids[0]] == 2
        # the rest in bulk
        assert ok(tickd, "retry", "--status", "failed") == "retried 2 tasks\n"
        wait_for(lambda: all(status_of(tickd, x) == "succeeded" for x in ids), 10,
                 what="the bulk retry succeeded")
        r = ctl(tickd, "ls", "--status", "failed")
        assert r.returncode == 0 and r.stdout == "" and r.stderr == "no tasks\n"
        assert sorted(r["ID"] for r in table(ok(tickd, "ls", "--status", "succeeded"))) == sorted(ids)
        # a task that did not fail is not retried
        r = ctl(tickd, "retry", ids[0])
        assert r.returncode == 1 and "409 conflict" in r.stderr and "succeeded" in r.stderr
        assert js(tickd, "retry", "--status", "failed") == {"retried": 0, "next_cursor": None}
    finally:
        sw.close()


# ---- listen -------------------------------------------------------------------

class Listen:
    """tickctl listen on a free port, its output in files."""

    def __init__(self, tmp, *args):
        self.out = os.path.join(tmp, f"listen-{time.monotonic_ns()}.out")
        self.err = self.out[:-4] + ".err"
        with open(self.out, "wb") as o, open(self.err, "wb") as e:
            self.proc = subprocess.Popen([TICKCTL, "listen", "--port", "0", *map(str, args)],
                                         stdout=o, stderr=e, env=env_for())
        m = wait_for(lambda: re.search(r"listening on http://127\.0\.0\.1:(\d+)/", self.errtext()),
                     5, what="tickctl listen's address")
        self.port = int(m.group(1))

    def text(self):
        with open(self.out) as f:
            return f.read()

    def errtext(self):
        with open(self.err) as f:
            return f.read()

    def blocks(self):
        return [b for b in self.text().split("\n\n") if b.strip()]

    def wait_blocks(self, n):
        return wait_for(lambda: len(self.blocks()) >= n and self.blocks(), 10,
                        what=f"{n} requests printed")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(5)


def post(port, path, body, headers):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method="POST",
                                 headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def sign(secret, msg_id, ts, body):
    key = base64.b64decode(secret[len("whsec_"):])
    mac = hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def raw(port, data):
    """Send bytes on a fresh connection; what came back before the close."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        return read_to_end(s, until_error=True)


def test_listen_prints_and_verifies_signed_callbacks(redis, tickd_factory, tmp_path):
    secret = subprocess.run([TICKD, "--gen-secret"], capture_output=True, text=True,
                            timeout=10).stdout.strip()
    t = tickd_factory(redis, env={"TICKD_CALLBACK_SIGNING_SECRETS": secret}).start()
    ln = Listen(str(tmp_path), "--secret", secret)
    try:
        # a callback from tickd, scheduled with tickctl
        tid = ok(t, "add", f"http://127.0.0.1:{ln.port}/hook", "--in", "1s",
                 "--body", '{"hi":1}').strip()
        block = ln.wait_blocks(1)[0]
        lines = block.split("\n")
        assert re.fullmatch(r"--- POST /hook \(\d{4}-\d\d-\d\dT[\d:.]+Z\)", lines[0]), lines[0]
        assert f"tickd-task-id: {tid}" in lines and "tickd-attempt: 1" in lines
        assert f"webhook-id: {tid}" in lines and "Content-Type: application/json" in lines
        due = js(t, "get", tid)["execute_at"]
        assert f"tickd-scheduled-at: {due} ({rfc3339(due)})" in lines
        late = int(re.search(r"^lateness: (-?\d+) ms$", block, re.M).group(1))
        assert 0 <= late < 500, late
        assert "signature: valid" in lines
        assert lines[-2:] == ['{"hi":1}', "answered: 200"], lines
        assert "body (8 bytes):" in lines
        wait_for(lambda: status_of(t, tid) == "succeeded", 5)

        # signed here with the same secret: valid; a tampered body, a stale
        # timestamp, another secret, no signature: 401 and INVALID
        now = int(time.time())
        body = b'{"x": 1}'
        assert post(ln.port, "/mine", body, {"webhook-id": "m1", "webhook-timestamp": str(now),
                                             "webhook-signature": sign(secret, "m1", now, body),
                                             "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-"
                                                            "00f067aa0ba902b7-01"})[0] == 200
        forged = [
            (b'{"x": 2}', {"webhook-id": "m1", "webhook-timestamp": str(now),
                           "webhook-signature": sign(secret, "m1", now, body)},
             "no signature matches the secret"),
            (body, {"webhook-id": "m1", "webhook-timestamp": str(now - 600),
                    "webhook-signature": sign(secret, "m1", now - 600, body)},
             "s old (the tolerance is 300 s)"),  # 600 s, or 601 past a second's turn
            (body, {"webhook-id": "m1", "webhook-timestamp": str(now),
                    "webhook-signature": sign("whsec_" + base64.b64encode(b"k" * 32).decode(),
                                              "m1", now, body)},
             "no signature matches the secret"),
            (body, {}, "no webhook-id header"),
        ]
        for data, headers, why in forged:
            code, answer = post(ln.port, "/forged", data, headers)
            assert code == 401 and why.encode() in answer, (code, answer)
        blocks = ln.wait_blocks(2 + len(forged))
        assert "signature: valid" in blocks[1] and "answered: 200" in blocks[1]
        assert "trace: 4bf92f3577b34da6a3ce929d0e0e4736 (span 00f067aa0ba902b7)" in blocks[1]
        for b, (_, _, why) in zip(blocks[2:], forged):
            assert b.startswith("--- POST /forged ")
            assert "signature: INVALID (" in b and why in b and b.endswith("answered: 401"), b

        # hostile bytes: garbage, a head over 16 KiB, a body over 1 MiB, a
        # torn request; each refused or dropped, and the receiver goes on
        got = raw(ln.port, b"\x00\xff\x16\x03 GARBAGE\r\n\r\n")
        assert got == b"" or got.startswith(b"HTTP/1.1 400"), got
        got = raw(ln.port, b"POST /x HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n")
        assert got == b"" or got.startswith(b"HTTP/1.1 4"), got
        got = raw(ln.port, b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n" +
                  b"z" * 100000)
        assert got == b"" or got.startswith(b"HTTP/1.1 4"), got
        raw(ln.port, b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        assert ln.proc.poll() is None, ln.errtext()
        n = len(ln.blocks())
        # none of them was taken for a callback
        assert n == 2 + len(forged), ln.text()[-2000:]
        # and the next callback is served
        t2 = ok(t, "add", f"http://127.0.0.1:{ln.port}/after", "--body", "again").strip()
        block = ln.wait_blocks(n + 1)[n]
        assert f"tickd-task-id: {t2}" in block and "signature: valid" in block
        assert block.endswith("again\nanswered: 200")
        wait_for(lambda: status_of(t, t2) == "succeeded", 5)
        # an invalid signature came: exit code 4
        assert ln.stop() == 4
    finally:
        ln.stop()


def test_listen_answers_the_status_asked_as_json_lines(tickd, tmp_path):
    ln = Listen(str(tmp_path), "--status", 503, "--json", "--count", 2)
    try:
        # tickd retries a 503: the second attempt is the listener's last
        tid = ok(tickd, "add", f"http://127.0.0.1:{ln.port}/j?q=1", "--max-attempts", 2,
                 "--backoff", "100ms", "--body", "x").strip()
        assert ln.proc.wait(10) == 0  # no --secret: nothing invalid
        lines = [json.loads(x) for x in ln.text().strip().split("\n")]
        assert len(lines) == 2
        for i, x in enumerate(lines, 1):
            assert x["method"] == "POST" and x["path"] == "/j?q=1" and x["body"] == "x"
            assert x["headers"]["tickd-task-id"] == tid and x["headers"]["tickd-attempt"] == str(i)
            assert x["answered"] == 503 and x["signature"] is None
            assert 0 <= x["lateness_ms"] < 1000
        wait_for(lambda: status_of(tickd, tid) == "failed", 5)
        assert js(tickd, "get", tid)["last_status_code"] == 503
    finally:
        ln.stop()
    # the port is taken: said, exit code 1
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        r = subprocess.run([TICKCTL, "listen", "--port", str(s.getsockname()[1])],
                           capture_output=True, text=True, timeout=5)
        assert r.returncode == 1 and "cannot listen on 127.0.0.1:" in r.stderr, r.stderr


# ---- the man page --------------------------------------------------------------

def test_man_page_renders_and_covers_every_command():
    page = os.path.join(ROOT, "doc", "tickctl.1")
    groff = subprocess.run(["groff", "-man", "-ww", "-z", page], capture_output=True, text=True,
                           timeout=30) if shutil.which("groff") else None
    if groff is not None:
        assert groff.returncode == 0 and groff.stderr == "", groff.stderr
    with open(page) as f:
        text = f.read().replace("\\-", "-")
    for cmd in ("add", "get", "ls", "cancel", "retry", "run", "stats", "listen", "help"):
        assert f"tickctl {cmd}" in text or f'"{cmd} ' in text or f"B {cmd}" in text, cmd
    for opt in ("--in", "--at", "--method", "--header", "--body", "--key", "--status", "--limit",
                "--cursor", "--all", "--port", "--secret", "--count", "--url", "--token", "--json"):
        assert opt in text, opt
    exits = text[text.index(".SH EXIT STATUS"):text.index(".SH EXAMPLES")]
    assert [ln for ln in exits.split("\n") if re.fullmatch(r"\.B [0-9]", ln)] == \
        [".B 0", ".B 1", ".B 2", ".B 3", ".B 4"]


def test_queues_pause_resume(tickd, receiver):
    out = ok(tickd, "queues")
    rows = out.splitlines()
    assert rows[0].split()[:3] == ["QUEUE", "RATE/S", "MAX_CONC"]
    assert [r.split()[0] for r in rows[1:]] == ["default"]
    out = ok(tickd, "pause", "mail")
    assert out.splitlines()[1].split()[0] == "mail" and out.rstrip().endswith("paused")
    tid = ok(tickd, "add", receiver.url(), "--queue", "mail").strip()
    wait_for(lambda: js(tickd, "get", tid).get("waiting") == "paused", 5, what="held back")

    # the per-queue counts are sent apart from the task's state (every 20 ms)
    def mail_row():
        return [r for r in ok(tickd, "queues").splitlines() if r.startswith("mail")][0].split()
    wait_for(lambda: mail_row()[3:5] == ["1", "1"], 5, what="mail counting 1 open, 1 waiting")
    assert mail_row()[-1] == "paused"
    assert receiver.count() == 0
    assert not ok(tickd, "resume", "mail").rstrip().endswith("paused")
    wait_for(lambda: receiver.count() == 1, 5, what="the callback after resume")
    r = ctl(tickd, "pause", "no such/queue")
    assert r.returncode == 2 and "queue name" in r.stderr
    r = ctl(tickd, "pause")
    assert r.returncode == 2 and "needs a queue" in r.stderr


# ---- a hostile server ------------------------------------------------------------

# what no string from a server may bring to the terminal: C0 controls but tab
# and line feed (ESC opens every escape sequence), DEL, C1 controls, and the
# bidi controls that reorder a line
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
NASTY = "a\x1b]0;owned\x07b\x1b[2Jc\u009b31md\u202eevil\u2066e\u200ff\x7fg\rh"


class Hostile:
    """A real HTTP server speaking the API's JSON with hostile strings in it:
    answers[(method, path)] is (status, object), or a function of the query
    giving one; every request is counted."""

    def __init__(self, answers):
        self.answers, self.requests = answers, 0
        hs = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                hs.requests += 1
                path, _, query = self.path.partition("?")
                a = hs.answers.get((self.command, path), (404, {"error": {
                    "code": "not_" + NASTY, "message": "no such thing: " + NASTY}}))
                code, obj = a(urllib.parse.parse_qs(query)) if callable(a) else a
                body = json.dumps(obj, ensure_ascii=False).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = answer

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.env = env_for(None, TICKD_URL=f"http://127.0.0.1:{self.server.server_address[1]}")

    def run(self, *args, timeout=5):
        """tickctl's exit code and output, checked to be UTF-8 without a
        character a terminal would act on."""
        r = subprocess.run([TICKCTL, *args], capture_output=True, timeout=timeout, env=self.env)
        out, err = r.stdout.decode(), r.stderr.decode()
        for name, text in (("stdout", out), ("stderr", err)):
            bad = sorted(set(UNSAFE.findall(text)))
            assert not bad, (args, name, bad, text)
        return r.returncode, out, err

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hostile():
    servers = []

    def make(answers):
        servers.append(Hostile(answers))
        return servers[-1]
    yield make
    for s in servers:
        s.close()


def nasty_task(i):
    return {"id": f"t{i}-{NASTY}", "status": "sched\u009buled", "execute_at": 1_800_000_000_000,
            "attempts": 0, "callback_url": f"http://x/{NASTY}", "method": "POST",
            "header": {f"X-{NASTY}": NASTY}, "req": NASTY, "last_error": NASTY,
            "retry": {"max_attempts": 5, "backoff_ms": 1000}}


def test_every_server_string_is_cleaned_before_it_is_printed(hostile):
    page = {"tasks": [nasty_task(1), nasty_task(2)], "next_cursor": None}
    h = hostile({("GET", "/v1/tasks"): (200, page),
                 ("GET", "/v1/tasks/t1"): (200, nasty_task(1)),
                 ("POST", "/v1/tasks"): (201, {"id": NASTY}),
                 ("GET", "/v1/stats"): (200, {NASTY: NASTY, "n": {NASTY: 1}}),
                 ("GET", "/v1/queues"): (200, {"queues": [{"name": NASTY, "rate": 1}]})})
    for args in (["ls"], ["get", "t1"], ["add", "http://x/"], ["stats"], ["queues"],
                 ["get", "nope"]):
        code, out, err = h.run(*args)
        assert code == (1 if args[-1] == "nope" else 0), (args, code, err)
        assert "owned" in out + err, (args, out, err)  # the text shown, the controls not
    # --json: the same JSON values, their controls escaped
    for args, want in ((["ls"], page), (["ls", "--all"], page), (["get", "t1"], nasty_task(1)),
                       (["stats"], {NASTY: NASTY, "n": {NASTY: 1}})):
        code, out, _ = h.run("--json", *args)
        assert code == 0 and json.loads(out) == want, (args, out)


def test_next_cursor_is_checked_before_it_is_printed_or_followed(hostile):
    bad = "\x1b]0;owned\x07"
    h = hostile({("GET", "/v1/tasks"): (200, {"tasks": [nasty_task(1)], "next_cursor": bad}),
                 ("POST", "/v1/tasks/retry"): (200, {"retried": 1, "next_cursor": bad})})
    for args in (["ls"], ["ls", "--all"], ["retry", "--status", "failed", "--all"]):
        code, out, err = h.run(*args)
        assert code == 1 and "next_cursor is no cursor tickd gives" in err, (args, code, err)
    assert h.requests == 3


@pytest.mark.parametrize("cycle", [1, 2])
def test_all_stops_at_a_cursor_given_before(hostile, cycle):
    """A server that answers one cursor (or a cycle of two) for ever: --all
    stops with an error at once, instead of asking (and holding) for ever."""
    def page(q):
        at = int(q.get("cursor", ["c0"])[0][1:])
        return 200, {"tasks": [nasty_task(at)], "next_cursor": f"c{(at + 1) % cycle}"}

    def retry(q):
        return 200, {"retried": 1, "next_cursor": "c0"}
    h = hostile({("GET", "/v1/tasks"): page, ("POST", "/v1/tasks/retry"): retry})
    code, out, err = h.run("ls", "--all")
    assert code == 1 and "gave a cursor given before: stopping" in err, (code, err)
    assert out == "" and h.requests == cycle + 1
    code, out, err = h.run("retry", "--status", "failed", "--all")
    assert code == 1 and "gave a cursor given before: stopping" in err, (code, err)
    assert "2 tasks were retried" in err and h.requests == cycle + 3


def test_add_with_ttl_and_traceparent_and_list_the_expired(tickd, receiver):
    tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    tid = ok(tickd, "add", receiver.url("/x"), "--in", "1h", "--ttl", "30m",
             "--traceparent", tp).strip()
    task = js(tickd, "get", tid)
    assert task["expires_at"] == task["execute_at"] + 1800000 and task["traceparent"] == tp
    shown = ok(tickd, "get", tid)
    assert "expires_at" in shown and tp in shown, shown
    # one that expires at once while its queue is paused, then listed
    assert tickd.request("PUT", "/v1/queues/shut", {"paused": True})[0] == 200
    gone = tickd.post({"callback_url": receiver.url("/y"), "queue": "shut", "ttl_ms": 200})["id"]
    wait_for(lambda: status_of(tickd, gone) == "expired", 15, what="expired")
    assert gone in ok(tickd, "ls", "--status", "expired")
