"""The bounds the API's HTTP server holds against clients that hold on,
leave, flood or crowd it, over raw sockets: the idle, header and body
timeouts, max_connections and the descriptor reserve, the memory of
answers never read and of bodies sent without the token, and callbacks
kept going meanwhile."""
import json
import os
import re
import socket
import time

import pytest

from api_wire import BODY, TASK, Reader, connect, post, post_bytes, read_all
from harness import SANITIZED, now_ms, read_to_end, rss_kib, wait_for


def test_clients_that_leave_mid_request_do_not_hurt(tickd):
    # each client sends a whole request and closes before the answer comes
    for i in range(200):
        s = connect(tickd)
        s.sendall(post_bytes(json.dumps(dict(TASK, key=f"gone{i}")).encode()))
        s.close()
    # the tasks were still stored (the request was complete), and tickd serves on
    wait_for(lambda: tickd.get(tickd.post(dict(TASK, key="gone199"))["id"])[0] == 200, 5,
             what="tickd serving after abandoned requests")
    assert tickd.post(dict(TASK, key="gone0"), expect=(200,))["status"] == "scheduled"


def test_idle_connections_are_closed(redis, tickd_factory):
    t = tickd_factory(redis, env={"TICKD_SERVER_IDLE_TIMEOUT_MS": "400"}).start()
    quiet = connect(t)
    busy = connect(t)
    r = Reader(busy)
    start = time.monotonic()
    # the busy connection sends a request every 100 ms for 1.2 s and stays open
    while time.monotonic() - start < 1.2:
        busy.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        assert r.response()[0] == 200
        time.sleep(0.1)
    # the quiet one, silent all along, was closed after 0.4 s
    quiet.settimeout(2)
    assert Reader(quiet).closed()
    busy.close()


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_out_of_descriptors_pauses_accepts_without_spinning(redis, tickd_factory):
    t = tickd_factory(redis, nofile=64).start()
    clients = []
    for _ in range(120):   # more than tickd may hold open
        try:
            clients.append(socket.create_connection(("127.0.0.1", t.port), timeout=2))
        except OSError:
            break
    wait_for(lambda: "pausing accepts" in t.logtext(), 5, what="tickd pausing accepts")
    c0 = cpu_seconds(t.proc.pid)
    time.sleep(2)
    used = cpu_seconds(t.proc.pid) - c0
    assert used < 0.5, f"tickd used {used:.2f} s of CPU in 2 s while out of descriptors"
    assert "pausing accepts" in t.logtext()
    for c in clients:
        c.close()
    wait_for(lambda: t.request("GET", "/healthz")[0] == 200, 10, what="serving again")


def test_a_client_sending_after_an_error_answer_cannot_keep_the_connection(tickd):
    """After an error answer tickd reads and drops what still comes (so the
    client sees the answer, not a reset) for a short while only: a client
    that keeps sending, never reading, loses the connection all the same."""
    s = connect(tickd)
    s.sendall(b"GET /healthz HTTP/1.1\nHost: t\n\n")  # bare LF: 400, then close
    start = time.monotonic()
    closed = False
    while time.monotonic() - start < 8:
        try:
            s.sendall(b"x" * 100)
        except OSError:  # reset: tickd closed it
            closed = True
            break
        time.sleep(0.05)
    s.close()
    assert closed, "tickd kept a closing connection open while the client kept sending"
    assert time.monotonic() - start < 5


@pytest.mark.skipif(SANITIZED, reason="an ASan build's RSS is its quarantine and shadow memory")
def test_pipelined_flood_never_read_does_not_grow_memory(tickd):
    s = connect(tickd)
    s.setblocking(False)
    one = b"GET /v1/stats HTTP/1.1\r\nHost: t\r\n\r\n"
    block = one * 2000
    tickd.request("GET", "/v1/stats")
    before = rss_kib(tickd.proc.pid)
    sent, stalled, end = 0, None, time.monotonic() + 8
    # send until the server stops reading (the kernel's buffers are full for
    # 1 s), or 60 MB, never reading an answer
    while sent < 60_000_000 and time.monotonic() < end:
        try:
            sent += s.send(block)
            stalled = None
        except BlockingIOError:
            stalled = stalled or time.monotonic()
            if time.monotonic() - stalled > 1:
                break
            time.sleep(0.01)
    time.sleep(0.5)  # RSS measured after what tickd may still read: a window, no state
    grown = rss_kib(tickd.proc.pid) - before
    print(f"flood: {sent} bytes sent, RSS grew {grown} KiB")
    assert grown < 6 * 1024, f"tickd grew {grown} KiB after {sent} bytes of requests"
    assert sent < 20_000_000, f"tickd read {sent} bytes of requests whose answers were not read"
    # other clients are served meanwhile
    assert tickd.request("GET", "/healthz")[0] == 200
    s.close()


def api_connections(t):
    """tickd_api_connections, asked on a connection read to its end: the
    count includes this connection, and tickd has closed it on return."""
    with socket.create_connection(("127.0.0.1", t.port), timeout=5) as c:
        c.sendall(b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        data = read_to_end(c)
    m = re.search(rb"^tickd_api_connections (\d+)", data, re.M)
    return int(m.group(1)) if m else None


def test_max_connections_pauses_accepting(redis, tickd_factory):
    t = tickd_factory(redis, env={"TICKD_SERVER_MAX_CONNECTIONS": "20"}).start()
    wait_for(lambda: api_connections(t) == 1, 5, what="no connection open but the asking one")
    idle = [connect(t) for _ in range(20)]
    late = connect(t)   # the kernel completes it; tickd does not take it yet
    late.settimeout(1)
    late.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
    try:
        got = late.recv(100)
    except socket.timeout:
        got = None
    assert got is None, got
    idle.pop().close()
    late.settimeout(3)
    assert Reader(late).response()[0] == 200
    assert "pausing accepts" in t.logtext()
    for c in idle:
        c.close()


def test_slow_heads_and_bodies_lose_their_connection(redis, tickd_factory):
    t = tickd_factory(redis, env={"TICKD_SERVER_HEADER_TIMEOUT_MS": "800",
                                  "TICKD_SERVER_BODY_TIMEOUT_MS": "800"}).start()
    head = connect(t)
    head.sendall(b"GET /healthz HTTP/1.1\r\n")
    body = connect(t)
    body.sendall(post(f"Content-Length: {len(BODY)}\r\n", BODY[:5]))
    start = time.monotonic()
    # one byte every 200 ms keeps the idle timer (60 s) from firing
    while time.monotonic() - start < 2.5:
        for s, b in ((head, b"X"), (body, b" ")):
            try:
                s.sendall(b)
            except OSError:
                pass
        time.sleep(0.2)
    for s, words in ((head, "server.header_timeout_ms"), (body, "server.body_timeout_ms")):
        s.settimeout(2)
        r = Reader(s)
        status, _, got = r.response()
        assert status == 408 and words in got["error"]["message"], got
        assert r.closed()


def test_idle_and_slowloris_crowd_does_not_delay_tasks_or_clients(redis, receiver,
                                                                    tickd_factory):
    t = tickd_factory(redis, env={"TICKD_SERVER_HEADER_TIMEOUT_MS": "1000"}).start()
    due = now_ms() + 3000
    task = t.post({"callback_url": receiver.url("/ok"), "execute_at": due})
    idle = [connect(t) for _ in range(2000)]
    slow = [connect(t) for _ in range(200)]
    for s in slow:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n")
        s.setblocking(False)
    start = time.monotonic()
    latencies = []
    open_slow = set(slow)
    while time.monotonic() - start < 4:
        for s in list(open_slow):
            try:
                s.send(b"X")
            except OSError:
                open_slow.discard(s)
        t0 = time.monotonic()
        assert t.request("GET", "/healthz")[0] == 200
        latencies.append(time.monotonic() - t0)
        time.sleep(0.2)
    # every slow client got its 408 and lost its connection
    for s in slow:
        s.setblocking(True)
        s.settimeout(2)
        r = Reader(s)
        try:
            assert r.response()[0] == 408
            assert r.closed()
        except (ConnectionResetError, EOFError):
            pass   # closed: the answer was dropped behind the client's bytes
        s.close()
    calls = receiver.by_task().get(task["id"])
    assert calls, "the task did not fire"
    late = calls[0]["t"] - due
    print(f"crowd: task {late:.0f} ms late, slowest request {max(latencies) * 1000:.0f} ms")
    assert -1 <= late < 500, f"fired {late:.0f} ms late"
    assert max(latencies) < 0.5, f"a normal request took {max(latencies):.2f} s"
    for s in idle:
        s.close()


def test_api_clients_cannot_starve_callbacks_of_descriptors(redis, receiver, tickd_factory):
    # RLIMIT_NOFILE 512 (as `prlimit --nofile=512:512`): the API gets
    # 512 - min(256 + max_inflight, 512/2) = 256 connections, and more idle
    # clients than that are left in the kernel's backlog
    t = tickd_factory(redis, nofile=512).start()
    due = now_ms() + 2500
    task = t.post({"callback_url": receiver.url("/ok"), "execute_at": due,
                   "retry": {"max_attempts": 1}})
    idle = []
    for _ in range(600):
        idle.append(socket.create_connection(("127.0.0.1", t.port), timeout=5))
    wait_for(lambda: receiver.by_task().get(task["id"]), 6, what="the callback")
    for s in idle:
        s.close()
    got = wait_for(lambda: (lambda g: g if g["status"] != "running" else None)(
        t.get(task["id"])[1]), 5, what="the task settled")
    assert got["status"] == "succeeded", got
    assert "Too many open files" not in t.logtext()


def test_without_the_token_no_body_is_buffered(redis, tickd_factory):
    # /healthz and /metrics are open, but take no body: a client without the
    # token must not make tickd hold server.max_body per connection
    t = tickd_factory(redis, env={"TICKD_SERVER_API_TOKEN": "tok-9f2c"}).start()
    before = rss_kib(t.proc.pid)
    socks = []
    for _ in range(60):
        s = connect(t)
        s.sendall(b"POST /healthz HTTP/1.1\r\nHost: t\r\nContent-Length: 1048576\r\n\r\n"
                  + b"x" * 1048575)
        socks.append(s)
    head = read_all(socks[0])
    grown = rss_kib(t.proc.pid) - before
    for s in socks:
        s.close()
    print(f"60 unauthenticated 1 MiB bodies: RSS grew {grown} KiB")
    assert head.startswith(b"HTTP/1.1 413"), head[:80]
    assert grown < 16 * 1024, grown
    # chunked too, and a body on /v1/ still needs the token first
    s = connect(t)
    s.sendall(b"POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert read_all(s).startswith(b"HTTP/1.1 413")
    s = connect(t)
    s.sendall(b"POST /v1/tasks HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\n")
    assert read_all(s).startswith(b"HTTP/1.1 401")
    # the open routes still answer without a body
    assert t.request("GET", "/healthz")[0] == 200
