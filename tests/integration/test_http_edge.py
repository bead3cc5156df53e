"""The API's HTTP server against hostile clients, over raw sockets: the
request that used to crash it, RFC 9112 framing and field syntax, and the
bounds on memory, connections, descriptors and time (issue 12, section 1)."""
import json
import re
import socket
import time

import pytest

from harness import SANITIZED, now_ms, read_to_end, rss_kib, wait_for
from test_http import Reader, connect

TASK = {"callback_url": "http://127.0.0.1:9/x", "execute_at": now_ms() + 3600000}
BODY = json.dumps(TASK).encode()


def post(extra, body=BODY, version="1.1", host=True):
    """A POST /v1/tasks head with `extra` fields, then `body` as is."""
    h = "Host: t\r\n" if host else ""
    return (f"POST /v1/tasks HTTP/{version}\r\n{h}Content-Type: application/json\r\n"
            f"{extra}\r\n").encode() + body


def chunked(body=BODY, size=None, ext=b""):
    size = size if size is not None else b"%x" % len(body)
    return size + ext + b"\r\n" + body + b"\r\n0\r\n\r\n"


def refused(tickd, wire, code=400, words=None):
    """`wire` gets `code` (a JSON error naming the reason) and the
    connection closes; tickd serves on."""
    s = connect(tickd)
    s.settimeout(3)
    s.sendall(wire)
    r = Reader(s)
    status, headers, body = r.response()
    assert status == code, (wire[:120], status, body)
    if words:
        assert words in body["error"]["message"], (wire[:120], body)
    assert headers["connection"] == "close" and r.closed(), wire[:120]
    s.close()
    assert tickd.request("GET", "/healthz")[0] == 200


# ---- never crash ---------------------------------------------------------


def test_nul_in_chunk_extension_is_400_not_a_crash(tickd):
    wire = (b"POST /healthz HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5;a\x00b\r\nhello\r\n0\r\n\r\n")
    refused(tickd, wire, 400, "chunk extension")
    assert tickd.proc.poll() is None


# ---- framing (RFC 9112 section 6) ----------------------------------------


def test_content_length_with_transfer_encoding_is_400(tickd):
    wire = post(f"Content-Length: {len(chunked())}\r\nTransfer-Encoding: chunked\r\n", chunked())
    refused(tickd, wire, 400, "Transfer-Encoding: not allowed with Content-Length")
    wire = post(f"Transfer-Encoding: chunked\r\nContent-Length: {len(chunked())}\r\n", chunked())
    refused(tickd, wire, 400, "Transfer-Encoding: not allowed with Content-Length")


def test_bad_content_length_forms_are_400(tickd):
    n = len(BODY)
    for field in [f"Content-Length: {n}\r\nContent-Length: {n + 1}\r\n",
                  f"Content-Length: {n}, {n + 1}\r\n",
                  f"Content-Length: \x0b{n}\r\n",
                  f"Content-Length: +{n}\r\n",
                  f"Content-Length: 0x{n:x}\r\n",
                  f"Content-Length: {n}.0\r\n",
                  "Content-Length: \r\n"]:
        refused(tickd, post(field), 400, "Content-Length")
    # the same length given twice (or as a list) is one length (RFC 9110 8.6)
    s = connect(tickd)
    s.sendall(post(f"Content-Length: {n}, {n}\r\nContent-Length: {n}\r\n"))
    assert Reader(s).response()[0] in (200, 201)
    s.close()


def test_transfer_codings_other_than_a_final_chunked_are_refused(tickd):
    for te, code in [("gzip", 400), ("chunked, gzip", 400), ("identity", 400),
                     ("chunked;q=1", 400), ("chunked, chunked", 400),
                     ("gzip, chunked", 501), ("gzip\r\nTransfer-Encoding: chunked", 501),
                     ("chunked\r\nTransfer-Encoding: chunked", 400)]:
        refused(tickd, post(f"Transfer-Encoding: {te}\r\n", chunked()), code, "Transfer-Encoding")
    # the codings are read case-insensitively, empty list elements skipped
    s = connect(tickd)
    s.sendall(post("Transfer-Encoding: , Chunked\r\n", chunked()))
    assert Reader(s).response()[0] in (200, 201)
    s.close()


def test_chunk_sizes_are_hex_digits_only(tickd):
    for size in [b"0x%x" % len(BODY), b"+%x" % len(BODY), b" %x" % len(BODY),
                 b"%x " % len(BODY), b"-1"]:
        refused(tickd, post("Transfer-Encoding: chunked\r\n", chunked(size=size)), 400,
                "chunk size")
    # too large for any body, and far too large for 64 bits
    for size in [b"fffffffffff", b"1" + b"0" * 40]:
        s = connect(tickd)
        s.settimeout(3)
        s.sendall(post("Transfer-Encoding: chunked\r\n", size + b"\r\n"))
        r = Reader(s)
        assert r.response()[0] in (400, 413) and r.closed()
    assert tickd.request("GET", "/healthz")[0] == 200


def test_transfer_encoding_in_http10_is_400(tickd):
    refused(tickd, post("Transfer-Encoding: chunked\r\n", chunked(), version="1.0"), 400,
            "HTTP/1.0")


# ---- field syntax --------------------------------------------------------


def test_control_characters_in_field_values_are_400(tickd):
    for value in [b"a\x00b", b"a\x01b", b"a\x1fb", b"a\x7fb", b"a\x0bb"]:
        wire = b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Thing: " + value + b"\r\n\r\n"
        refused(tickd, wire, 400, "X-Thing: control character")
    for value in [b"a\rb", b"a\nb"]:
        wire = b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Thing: " + value + b"\r\n\r\n"
        refused(tickd, wire, 400, "bare")
    # HTAB and obs-text are allowed
    s = connect(tickd)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Thing: a\tb\xe9\r\n\r\n")
    assert Reader(s).response()[0] == 200
    s.close()


def test_http11_needs_exactly_one_host(tickd):
    refused(tickd, b"GET /healthz HTTP/1.1\r\n\r\n", 400, "Host: missing")
    refused(tickd, b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400,
            "Host: given more than once")
    refused(tickd, b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400,
            "Host: given more than once")
    # HTTP/1.0 may leave it out
    s = connect(tickd)
    s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
    assert Reader(s).response()[0] == 200
    s.close()


def test_absolute_form_target_is_routed_on_its_path(tickd):
    s = connect(tickd)
    r = Reader(s)
    s.sendall(f"GET http://127.0.0.1:{tickd.port}/healthz HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert r.response()[0] == 200
    s.sendall(post(f"Content-Length: {len(BODY)}\r\n").replace(
        b"POST /v1/tasks", b"POST HTTP://tickd.example/v1/tasks"))
    status, _, body = r.response()
    assert status == 201 and body["id"], body
    s.close()


def test_absolute_form_and_head_are_still_behind_the_api_token(redis, tickd_factory):
    t = tickd_factory(redis, env={"TICKD_SERVER_API_TOKEN": "tok-9f2c"}).start()
    for line in [b"GET http://t/v1/stats HTTP/1.1", b"HEAD /v1/stats HTTP/1.1",
                 b"HEAD http://t/v1/tasks/x HTTP/1.1"]:
        s = connect(t)
        s.sendall(line + b"\r\nHost: t\r\n\r\n")
        data = s.recv(4096)
        assert data.startswith(b"HTTP/1.1 401"), (line, data[:60])
        s.close()
    s = connect(t)
    s.sendall(b"GET http://t/v1/stats HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer tok-9f2c\r\n\r\n")
    assert Reader(s).response()[0] == 200
    s.close()


def test_head_works_wherever_get_does(tickd):
    tid = tickd.post(TASK)["id"]
    for path in ["/healthz", "/v1/stats", f"/v1/tasks/{tid}"]:
        s = connect(tickd)
        s.sendall(f"HEAD {path} HTTP/1.1\r\nHost: t\r\n\r\nGET {path} HTTP/1.1\r\nHost: t\r\n"
                  f"Connection: close\r\n\r\n".encode())
        head, rest = read_to_end(s).split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 200"), (path, head)
        assert b"Content-Length: " in head
        # no body after HEAD's answer: the GET's answer comes next
        assert rest.startswith(b"HTTP/1.1 200"), (path, rest[:80])
        s.close()


def test_connection_is_a_list_of_tokens(tickd):
    # a token that merely contains "close" does not close
    s = connect(tickd)
    r = Reader(s)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: x-close-y\r\n\r\n")
    status, headers, _ = r.response()
    assert status == 200 and "connection" not in headers
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: upgrade\r\n"
              b"Connection: TE, Close\r\n\r\n")
    status, headers, _ = r.response()
    assert status == 200 and headers["connection"] == "close" and r.closed()
    # HTTP/1.0: keep-alive anywhere in the list
    s = connect(tickd)
    r = Reader(s)
    s.sendall(b"GET /healthz HTTP/1.0\r\nConnection: foo , Keep-Alive\r\n\r\n")
    status, headers, _ = r.response()
    assert status == 200 and headers["connection"] == "keep-alive"
    s.sendall(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive-ish\r\n\r\n")
    status, headers, _ = r.response()
    assert headers["connection"] == "close" and r.closed()


def test_bare_lf_is_refused_at_once(tickd):
    for wire in [b"GET /healthz HTTP/1.1\nHost: t\n\n",
                 b"GET /healthz HTTP/1.1\r\nHost: t\n\r\n",
                 b"GET /healthz HTTP/1.1\r\nHost: t\r\n\n"]:
        start = time.monotonic()
        refused(tickd, wire, 400, "bare LF")
        assert time.monotonic() - start < 1, "the answer waited"


# ---- bounded resources ---------------------------------------------------


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
    time.sleep(0.5)
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
