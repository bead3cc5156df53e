"""make soak: a long soak of tickd's hardened edge.

For SOAK_SECONDS (default 600) the real binary (TICKD_BIN, the ASan+UBSan
build under make soak) runs against a real redis-server and a real receiver
while hostile API clients and hostile receivers work on it, every one of them
bounded in rate, all on 127.0.0.1. Alongside, a steady stream of normal tasks
goes through POST /v1/tasks. The soak fails, saying why, if tickd exits, if its
RSS grows past RSS_BOUND_MIB after the first minute, if a normal task is not
called back exactly once or late (p99 over LATE_P99_MS), if a normal API
request fails, if SIGTERM does not give exit 0, or if a sanitizer reported
anything. Schedules run through it too: SOAK_SCHEDULES every-second
schedules must each run once a second with no run lost or made twice, while
other schedules are created, paused, resumed, replaced and deleted, and
hostile schedule bodies are refused with 400."""

import os
import random
import resource
import signal
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import (Receiver, Redis, TcpServer, Tickd, percentile, read_head,  # noqa: E402
                     rss_kib, wait_for)

SECONDS = int(os.environ.get("SOAK_SECONDS", "600"))
RATE = float(os.environ.get("SOAK_RATE", "50"))        # normal tasks per second
LATE_P99_MS = float(os.environ.get("SOAK_LATE_P99_MS", "250"))
API_P99_MS = float(os.environ.get("SOAK_API_P99_MS", "500"))
# What may grow after the first minute, when connections, wheel, pools and
# ASan's 16 MiB quarantine are at their working size: the edge bounds every
# per-connection buffer (a few MiB for a pipelined flood, max_body per body),
# so steady hostile load must not add up; 64 MiB leaves room for the
# allocator's arenas settling (one per thread) and for heap fragmentation,
# and is far below what a leak per request (about 10^6 requests here) makes.
RSS_BOUND_MIB = float(os.environ.get("SOAK_RSS_BOUND_MIB", "64"))
WARMUP = min(60.0, SECONDS / 4)
N_SCHEDULES = int(os.environ.get("SOAK_SCHEDULES", "20"))
MAX_BODY = 1048576
HEADER_TIMEOUT_MS, BODY_TIMEOUT_MS = 3000, 5000
IDLE_TIMEOUT_MS = 20000
HOST = "127.0.0.1"

stop = threading.Event()
lock = threading.Lock()
stats = {}        # counter name -> int
failures = []     # what failed the soak, in words


def bump(name, n=1):
    with lock:
        stats[name] = stats.get(name, 0) + n


def fail(msg):
    with lock:
        failures.append(msg)
    print(f"SOAK FAILURE: {msg}", flush=True)


def loop(fn, period):
    """fn() every `period` s until the soak ends; a crash of the client is a failure."""
    def run():
        while not stop.is_set():
            t0 = time.time()
            try:
                fn()
            except Exception as e:  # a client's own bug must not pass silently
                fail(f"{fn.__name__}: {type(e).__name__}: {e}")
                return
            stop.wait(max(0.0, period - (time.time() - t0)))
    th = threading.Thread(target=run, name=fn.__name__, daemon=True)
    th.start()
    return th


def connect(port, timeout=5.0):
    s = socket.create_connection((HOST, port), timeout=timeout)
    return s


def exchange(port, data, read_timeout=3.0):
    """Send data, read until close or read_timeout: the first line of the answer."""
    try:
        s = connect(port)
    except OSError:
        bump("hostile connect refused")
        return None
    with s:
        try:
            s.settimeout(5.0)
            s.sendall(data)
        except OSError:
            pass  # tickd may close mid-send (huge head, bad framing): fine
        s.settimeout(read_timeout)
        got = b""
        end = time.time() + read_timeout
        try:
            while time.time() < end and len(got) < 65536:
                b = s.recv(65536)
                if not b:
                    break
                got += b
        except OSError:
            pass
    return got.split(b"\r\n", 1)[0][:40]


# ---- hostile API clients --------------------------------------------------

def garbage_requests():
    hdr = b"Host: a\r\n"
    cases = [
        b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-A: a\x00b\r\n\r\n",
        b"GET /healthz HTTP/1.1\nHost: a\n\n",
        b"GET /healthz HTTP/1.1\r\nHost: a\nX: b\r\n\r\n",
        b"POST /v1/tasks HTTP/1.1\r\n" + hdr + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /v1/tasks HTTP/1.1\r\n" + hdr + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        b"POST /v1/tasks HTTP/1.1\r\n" + hdr + b"Content-Length: +5\r\n\r\nhello",
        b"POST /v1/tasks HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /v1/tasks HTTP/1.1\r\n" + hdr + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        b"POST /healthz HTTP/1.1\r\n" + hdr + b"Transfer-Encoding: chunked\r\n\r\n5;e=\x00x\r\nhello\r\n0\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\n" + hdr + b"X: " + b"a" * 200000 + b"\r\n\r\n",
        b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\n" + hdr + b"\r\n",
        b"GET /healthz HTTP/1.1\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(5000)) + hdr + b"\r\n",
    ]
    for size in (b"0x5", b"-5", b" 5", b"5 ", b"ffffffffffffffffffffff", b"", b"g", b"5;" + b"e" * 20000):
        cases.append(b"POST /v1/tasks HTTP/1.1\r\n" + hdr + b"Transfer-Encoding: chunked\r\n\r\n"
                     + size + b"\r\nhello\r\n0\r\n\r\n")
    cases.append(b"POST /v1/tasks HTTP/1.1\r\n" + hdr + b"Transfer-Encoding: chunked\r\n\r\n"
                 + b"1\r\na\r\n" * 3000 + b"0\r\n" + b"X-T: t\r\n" * 3000 + b"\r\n")
    return cases


GARBAGE = garbage_requests()
VALID = (b'POST /v1/tasks HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n'
         b'Content-Length: 44\r\n\r\n{"callback_url":"http://127.0.0.1:1/x","a":1}')


def hostile_garbage(port):
    def garbage():
        kind = random.random()
        if kind < 0.6:
            data = random.choice(GARBAGE)
            bump("garbage: framing violations")
        elif kind < 0.8:
            data = bytearray(VALID)
            for _ in range(random.randint(1, 8)):
                data[random.randrange(len(data))] = random.randrange(256)
            data = bytes(data)
            bump("garbage: mutated requests")
        else:
            data = os.urandom(random.randint(1, 4096))
            bump("garbage: random bytes")
        line = exchange(port, data, read_timeout=2.0)
        if line and line.startswith(b"HTTP/1.1 2") and data in GARBAGE[:11]:
            fail(f"framing violation answered {line!r}: {data[:80]!r}")
    return garbage


def hostile_pipeline(port):
    """One client pipelining GETs it never reads, reconnecting when dropped."""
    st = {"s": None}
    req = b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n" * 64

    def pipeline():
        if st["s"] is None:
            st["s"] = connect(port)
            st["s"].setblocking(False)
            st["t0"] = time.time()
            bump("pipeline: connections")
            bump("pipeline: blocked sends (tickd stopped reading)", 0)
        with lock:  # how long tickd keeps one never-read connection going
            k = "pipeline: longest connection held (s)"
            stats[k] = max(stats.get(k, 0), round(time.time() - st["t0"]))
        # the kernel's socket buffers take answers for a while (up to ~30 s
        # at this rate), then reading stops, the half head gets its 408, and
        # idle_ms without a byte written closes it, whatever the client sends
        held_max = (HEADER_TIMEOUT_MS + IDLE_TIMEOUT_MS) / 1000 + 30
        if time.time() - st["t0"] > held_max:
            fail(f"pipeline: a never-read connection held over {held_max:.0f} s")
            st["s"].close()
            st["s"] = None
            return
        try:
            n = st["s"].send(req)
            bump("pipeline: bytes accepted", n)
        except BlockingIOError:
            bump("pipeline: blocked sends (tickd stopped reading)")
        except OSError:
            st["s"].close()
            st["s"] = None
    return pipeline


def hostile_slow(port, n_heads=40, n_bodies=20):
    """Slowloris heads and bodies: a byte a second each; tickd must cut them
    within its header/body timeout. A cut one is replaced."""
    conns = []  # [sock, kind, opened_at]

    def open_one(kind):
        try:
            s = connect(port)
        except OSError:
            return
        s.setblocking(False)
        try:
            if kind == "body":
                s.send(b"POST /v1/tasks HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
                       b"Content-Length: 100000\r\n\r\n{")
            else:
                s.send(b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-Slow: ")
        except OSError:
            pass
        conns.append([s, kind, time.time()])

    def slow():
        now = time.time()
        for c in list(conns):
            s, kind, t0 = c
            closed = False
            try:
                got = s.recv(4096)
                closed = True  # an answer (408/400) or EOF: tickd ended it
                if got:
                    bump(f"slow {kind} connections answered")
            except BlockingIOError:
                try:
                    s.send(b"a")
                except BlockingIOError:
                    pass
                except OSError:
                    closed = True
            except OSError:
                closed = True
            limit = (HEADER_TIMEOUT_MS if kind == "head" else BODY_TIMEOUT_MS) / 1000
            held = now - t0
            if closed:
                s.close()
                conns.remove(c)
                bump(f"slow {kind} connections cut")
                with lock:
                    stats[f"slow {kind} longest held (s)"] = max(
                        stats.get(f"slow {kind} longest held (s)", 0), round(held, 1))
            elif held > limit + 5:
                fail(f"a slowloris {kind} is still open after {held:.1f} s (limit {limit} s)")
                s.close()
                conns.remove(c)
        while sum(1 for c in conns if c[1] == "head") < n_heads:
            open_one("head")
        while sum(1 for c in conns if c[1] == "body") < n_bodies:
            open_one("body")
    return slow


def hostile_idle(port, n=300):
    conns = []

    def idle():
        for s in list(conns):
            try:
                if s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                    raise OSError
            except BlockingIOError:
                continue
            except OSError:
                pass
            s.close()
            conns.remove(s)
            bump("idle connections closed by tickd")
        while len(conns) < n:
            try:
                conns.append(connect(port))
                bump("idle connections opened")
            except OSError:
                bump("idle connect failures")
                break
    return idle


def hostile_body_flood(port):
    big = b'{"callback_url":"http://127.0.0.1:1/x","req":"' + b"a" * (MAX_BODY - 100) + b'"}'
    over = b"a" * (MAX_BODY + 1)

    def body_flood():
        if random.random() < 0.7:
            body, want = big, (b"HTTP/1.1 201", b"HTTP/1.1 200", b"HTTP/1.1 400")
        else:
            body, want = over, (b"HTTP/1.1 413",)
        line = exchange(port, b"POST /v1/tasks HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
                        b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body, read_timeout=10.0)
        bump("body floods (~1 MiB)")
        if line is not None and line and not line.startswith(want):
            fail(f"a {len(body)}-byte body got {line!r}, wanted one of {want}")
    return body_flood


# ---- hostile receivers ----------------------------------------------------

class HostileReceiver(TcpServer):
    """Raw-socket receiver misbehaving by path: /endless (chunked body without
    end), /stall (head, two bytes, then nothing), /lfonly (LF-only head, a
    valid answer), /garbage (not HTTP), /reset (RST after reading)."""

    def __init__(self):
        super().__init__(self.serve, host=HOST)

    def serve(self, c):
        with c:
            c.settimeout(5.0)
            try:
                got, _ = read_head(c, limit=65536)
            except OSError:
                return
            if got is None:
                return
            path = got.split(b" ", 2)[1] if got.count(b" ") >= 2 else b"/"
            kind = path.strip(b"/").split(b"/")[0].decode(errors="replace")
            bump(f"hostile receiver: {kind}")
            end = time.time() + 20  # bounded: no receiver holds on longer
            try:
                if kind == "endless":
                    c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                    chunk = b"4000\r\n" + b"x" * 0x4000 + b"\r\n"
                    while time.time() < end and not stop.is_set():
                        c.sendall(chunk)
                        time.sleep(0.005)  # at most ~3 MB/s per callback
                elif kind == "stall":
                    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nab")
                    while time.time() < end and not stop.is_set() and c.recv(1):
                        pass
                elif kind == "lfonly":
                    c.sendall(b"HTTP/1.1 200 OK\nContent-Length: 2\nConnection: close\n\nok")
                elif kind == "garbage":
                    c.sendall(b"HTTP/9 OK\x00\xff\r\n" + os.urandom(200) + b"\r\n\r\n")
                elif kind == "reset":
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
            except OSError:
                pass  # tickd hung up: what it should do with an endless body


def hostile_tasks(tickd, rport):
    kinds = ["endless", "stall", "lfonly", "garbage", "reset"]

    def hostile_task():
        kind = random.choice(kinds)
        code, body = tickd.request("POST", "/v1/tasks", {
            "callback_url": f"http://{HOST}:{rport}/{kind}", "delay_ms": random.randint(0, 2000),
            "timeout_ms": 2000, "retry": {"max_attempts": 2, "backoff_ms": 500}})
        if code != 201:
            fail(f"POST of a task to the {kind} receiver -> {code} {body}")
        bump("tasks to hostile receivers")
    return hostile_task


# ---- normal traffic -------------------------------------------------------

normal = {}        # task id -> execute_at (ms)
post_ms, get_ms = [], []


def normal_tasks(tickd, recv_url, batch=5):
    """RATE tasks a second, due 1-3 s ahead, in bursts of `batch` per tick."""
    def normal_post():
        for _ in range(batch):
            t0 = time.time()
            try:
                code, body = tickd.request("POST", "/v1/tasks", {
                    "callback_url": recv_url, "delay_ms": random.randint(1000, 3000),
                    "timeout_ms": 5000})
            except OSError as e:
                fail(f"a normal POST /v1/tasks failed: {e}")
                continue
            with lock:
                post_ms.append((time.time() - t0) * 1000)
            if code != 201:
                fail(f"a normal POST /v1/tasks -> {code} {body}")
                continue
            with lock:
                normal[body["id"]] = body["execute_at"]
    return normal_post


def normal_gets(tickd):
    def normal_get():
        with lock:
            ids = list(normal)[-50:]
        for path in ["/healthz"] + ([f"/v1/tasks/{random.choice(ids)}"] if ids else []):
            t0 = time.time()
            try:
                code, body = tickd.request("GET", path)
            except OSError as e:
                fail(f"a normal GET {path} failed: {e}")
                continue
            with lock:
                get_ms.append((time.time() - t0) * 1000)
            if code != 200:
                fail(f"a normal GET {path} -> {code} {body}")
    return normal_get


# ---- schedules ---------------------------------------------------------------

def schedule_churn(tickd, recv_url):
    """One schedule's life: created, paused, resumed, replaced, deleted."""
    n = [0]

    def churn():
        n[0] += 1
        key = f"churn{n[0]}"
        sid = f"sch.{key}"
        body = {"key": key, "every_ms": 1000, "task": {"callback_url": recv_url}}
        steps = [("POST", "/v1/schedules", body, 201), ("POST", f"/v1/schedules/{sid}/pause", None, 200),
                 ("POST", f"/v1/schedules/{sid}/resume", None, 200),
                 ("PUT", f"/v1/schedules/{sid}", dict(body, every_ms=2000), 200),
                 ("GET", f"/v1/schedules/{sid}", None, 200), ("DELETE", f"/v1/schedules/{sid}", None, 204),
                 ("GET", f"/v1/schedules/{sid}", None, 404)]
        for method, path, b, want in steps:
            code, res = tickd.request(method, path, b)
            if code != want:
                fail(f"{method} {path} -> {code} {res} (want {want})")
                return
        bump("schedules created and deleted")
    return churn


def hostile_schedules(tickd):
    bodies = [b'{"cron":"' + b"*/" * 100 + b'","task":{"callback_url":"http://h/"}}',
              b'{"cron":"0 0 32 * *","task":{"callback_url":"http://h/"}}',
              b'{"cron":"* * * * *","tz":"../../../../etc/passwd","task":{"callback_url":"http://h/"}}',
              b'{"every_ms":1000,"times":-1,"task":{"callback_url":"http://h/"}}',
              b'{"every_ms":1e400,"task":{"callback_url":"http://h/"}}',
              b'{"cron":"\u0000","task":{"callback_url":"http://h/"}}',
              b'{"every_ms":1000,"task":{"callback_url":"http://h/","execute_at":1}}']

    def hostile_schedule():
        raw = random.choice(bodies)
        if random.random() < 0.5:  # a random byte flipped
            i = random.randrange(len(raw))
            raw = raw[:i] + bytes([random.randrange(256)]) + raw[i + 1:]
        code, res = tickd.request("POST", "/v1/schedules", raw=raw)
        if code not in (400, 201):
            fail(f"a hostile schedule body -> {code} {res}")
        if code == 201:  # a flipped byte made a valid one: remove it
            tickd.request("DELETE", f"/v1/schedules/{res['id']}")
        bump("hostile schedule bodies")
    return hostile_schedule


def check_schedules(recv, start_ms, end_ms):
    """Each steady schedule ran once a second from start to end."""
    runs = {}
    for tid, calls in recv.by_task().items():
        parts = (tid or "").split(".")
        if len(parts) < 4 or not parts[3].startswith("s:soak"):
            continue
        key = parts[3].split(":")[1]
        runs.setdefault(key, {}).setdefault(int(parts[2]), set()).add(tid)
        if len(calls) > 1:
            fail(f"schedule run {tid} called back {len(calls)} times")
    lost = made_twice = 0
    for i in range(N_SCHEDULES):
        by_at = runs.get(f"soak{i}", {})
        made_twice += sum(1 for ids in by_at.values() if len(ids) > 1)
        ats = sorted(a for a in by_at if start_ms <= a <= end_ms)
        if not ats:
            fail(f"schedule soak{i} never ran")
            continue
        lost += sum((b - a) // 1000 - 1 for a, b in zip(ats, ats[1:]) if b - a != 1000)
    if lost:
        fail(f"{lost} schedule runs lost")
    if made_twice:
        fail(f"{made_twice} schedule runs made twice")
    return sum(len(r) for r in runs.values()), lost, made_twice


def pct(v):
    if not v:
        return "-"
    return f"{percentile(v, 50):.0f} / {percentile(v, 99):.0f} / {max(v):.0f}"


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    tmp = tempfile.mkdtemp(prefix="tickd-soak-")
    redis = Redis(tmp).start()
    recv = Receiver()
    hostile = HostileReceiver()
    env = {"TICKD_SERVER_HEADER_TIMEOUT_MS": str(HEADER_TIMEOUT_MS),
           "TICKD_SERVER_IDLE_TIMEOUT_MS": str(IDLE_TIMEOUT_MS),
           "TICKD_SERVER_BODY_TIMEOUT_MS": str(BODY_TIMEOUT_MS),
           "TICKD_SERVER_MAX_BODY": str(MAX_BODY),
           "ASAN_OPTIONS": os.environ.get(
               "ASAN_OPTIONS", "quarantine_size_mb=16:detect_leaks=1:abort_on_error=1"),
           "UBSAN_OPTIONS": os.environ.get("UBSAN_OPTIONS", "print_stacktrace=1")}
    tickd = Tickd(tmp, redis, env=env).start()
    pid = tickd.proc.pid
    print(f"soak: {SECONDS} s against {os.path.basename(tickd.args and os.environ.get('TICKD_BIN', 'tickd'))} "
          f"pid {pid}, log {tickd.log}", flush=True)
    port = tickd.port

    for i in range(N_SCHEDULES):
        code, res = tickd.request("POST", "/v1/schedules", {
            "key": f"soak{i}", "every_ms": 1000, "task": {"callback_url": recv.url("/sched")}})
        if code != 201:
            fail(f"POST /v1/schedules -> {code} {res}")
    sched_start = time.time() * 1000 + 5000

    t_start = time.time()
    threads = [
        loop(schedule_churn(tickd, recv.url("/churn")), 0.5),
        loop(hostile_schedules(tickd), 0.1),
        loop(normal_tasks(tickd, recv.url("/ok")), 5 / RATE),
        loop(normal_gets(tickd), 0.2),
        loop(hostile_garbage(port), 0.05),
        loop(hostile_garbage(port), 0.05),
        loop(hostile_pipeline(port), 0.01),
        loop(hostile_slow(port), 1.0),
        loop(hostile_idle(port), 5.0),
        loop(hostile_body_flood(port), 0.5),
        loop(hostile_tasks(tickd, hostile.port), 0.2),
    ]

    rss = []  # (seconds since start, KiB)
    next_rss = t_start
    while time.time() - t_start < SECONDS and not stop.is_set():
        if tickd.proc.poll() is not None:
            fail(f"tickd exited with {tickd.proc.returncode} after {time.time() - t_start:.0f} s")
            break
        if time.time() >= next_rss:
            rss.append((time.time() - t_start, rss_kib(pid)))
            next_rss += 5
            if len(rss) % 12 == 0:
                print(f"  t={rss[-1][0]:4.0f}s rss={rss[-1][1] / 1024:.1f} MiB "
                      f"tasks={len(normal)} callbacks={recv.count()} failures={len(failures)}",
                      flush=True)
        time.sleep(0.2)
    stop.set()
    for th in threads:
        th.join(30)
    alive = tickd.proc.poll() is None
    sched_end = time.time() * 1000 - 5000
    for i in range(N_SCHEDULES if alive else 0):
        tickd.request("DELETE", f"/v1/schedules/sch.soak{i}")

    # every normal task is called back, exactly once
    with lock:
        tasks = dict(normal)
    if alive:
        def all_called():
            by = recv.by_task()
            return all(t in by for t in tasks)
        try:
            wait_for(all_called, 20, 0.2, what="every normal task's callback")
        except AssertionError:
            pass
        time.sleep(2)  # a duplicate would come now
    by = recv.by_task()
    missing = [t for t in tasks if t not in by]
    twice = [t for t in tasks if len(by.get(t, [])) > 1]
    late = [by[t][0]["t"] - tasks[t] for t in tasks if t in by]
    early = [x for x in late if x < 0]
    if missing:
        fail(f"{len(missing)} of {len(tasks)} normal tasks never called back, e.g. {missing[:3]}")
    if twice:
        fail(f"{len(twice)} normal tasks called back more than once, e.g. {twice[:3]}")
    if early:
        fail(f"{len(early)} normal tasks called back early (by up to {-min(early):.0f} ms)")
    if late and percentile(late, 99) > LATE_P99_MS:
        fail(f"normal task lateness p99 {percentile(late, 99):.0f} ms > {LATE_P99_MS:.0f} ms")
    api = post_ms + get_ms
    if api and percentile(api, 99) > API_P99_MS:
        fail(f"normal API request p99 {percentile(api, 99):.0f} ms > {API_P99_MS:.0f} ms")

    sched_runs, sched_lost, sched_twice = check_schedules(recv, sched_start, sched_end)

    # RSS after the first minute
    after = [r for t, r in rss if t >= WARMUP]
    growth = (max(after) - after[0]) / 1024 if after else 0.0
    if growth > RSS_BOUND_MIB:
        fail(f"RSS grew {growth:.1f} MiB after the first {WARMUP:.0f} s (bound {RSS_BOUND_MIB:.0f} MiB)")

    # SIGTERM gives 0, and no sanitizer report
    rc = tickd.stop(signal.SIGTERM, timeout=60) if alive else tickd.proc.returncode
    if alive and rc != 0:
        fail(f"tickd exited {rc} on SIGTERM (want 0)")
    log = tickd.logtext()
    bad = [ln for ln in log.splitlines()
           if "ERROR: AddressSanitizer" in ln or "runtime error:" in ln or "ERROR: LeakSanitizer" in ln]
    if bad:
        fail(f"sanitizer report in the log: {bad[0]}")
    if failures and (bad or not alive or rc):
        print("---- last 60 lines of tickd's log ----\n" + "\n".join(log.splitlines()[-60:]))
    recv.close()
    redis.stop()

    mib = [r / 1024 for _, r in rss]
    print("\n==== soak summary " + "=" * 50)
    rows = [
        ("duration (s)", f"{SECONDS}"),
        ("tickd alive to the end / SIGTERM exit", f"{alive} / {rc}"),
        ("RSS samples (every 5 s)", f"{len(rss)}"),
        ("RSS min / first after warm-up / max (MiB)",
         f"{min(mib):.1f} / {after[0] / 1024 if after else 0:.1f} / {max(mib):.1f}" if mib else "-"),
        ("RSS last (MiB)", f"{mib[-1]:.1f}" if mib else "-"),
        (f"RSS growth after {WARMUP:.0f} s (MiB, bound {RSS_BOUND_MIB:.0f})", f"{growth:.1f}"),
        ("normal tasks posted / called once / missing / twice",
         f"{len(tasks)} / {len(tasks) - len(missing) - len(twice)} / {len(missing)} / {len(twice)}"),
        (f"lateness p50 / p99 / max (ms, p99 bound {LATE_P99_MS:.0f})", pct(late)),
        (f"runs of {N_SCHEDULES} every-second schedules / lost / made twice",
         f"{sched_runs} / {sched_lost} / {sched_twice}"),
        ("POST /v1/tasks p50 / p99 / max (ms)", pct(post_ms)),
        ("GET p50 / p99 / max (ms)", pct(get_ms)),
        (f"all normal API p99 (ms, bound {API_P99_MS:.0f})",
         f"{percentile(api, 99):.0f}" if api else "-"),
    ] + sorted((k, str(v)) for k, v in stats.items()) + [
        ("sanitizer reports", f"{len(bad)}"),
        ("failures", f"{len(failures)}"),
    ]
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k:<{w}}  {v}")
    if failures:
        print("\nSOAK FAILED:")
        for f in failures[:20]:
            print(f"  - {f}")
        return 1
    print("\nSOAK PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
