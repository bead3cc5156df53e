"""The HTTP layer under the API, spoken to over raw sockets: keep-alive and
pipelining, chunked bodies, Expect: 100-continue, HTTP/1.0, and the answers
the server gives for itself (400, 413, 417, 431, 501), always as JSON."""
import json
import os
import socket
import time

from harness import now_ms, wait_for

# a fixed execute_at, so that the same key gives the same id
TASK = {"callback_url": "http://127.0.0.1:9/x", "execute_at": now_ms() + 3600000}


def connect(tickd):
    s = socket.create_connection(("127.0.0.1", tickd.port), timeout=10)
    return s


def post_bytes(body, extra="", version="1.1"):
    return (f"POST /v1/tasks HTTP/{version}\r\nHost: t\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n").encode() + body


class Reader:
    """Reads HTTP responses off a socket, one at a time."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("connection closed")
        self.buf += chunk

    def response(self):
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
        n = int(headers.get("content-length", "0"))
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, headers, json.loads(body) if body else None

    def closed(self):
        """True once the server has closed the connection (nothing more came)."""
        try:
            self._fill()
        except (EOFError, ConnectionResetError):
            return True
        return False


def test_pipelined_requests_are_answered_in_order(tickd):
    s = connect(tickd)
    bodies = [json.dumps(dict(TASK, key=f"pipe{i}")).encode() for i in range(20)]
    # all twenty in one write, a GET of a missing task in the middle
    wire = b"".join(post_bytes(b) for b in bodies[:10])
    wire += b"GET /v1/tasks/nope HTTP/1.1\r\nHost: t\r\n\r\n"
    wire += b"".join(post_bytes(b) for b in bodies[10:])
    s.sendall(wire)
    r = Reader(s)
    keys = []
    for i in range(21):
        status, headers, body = r.response()
        if i == 10:
            assert status == 404 and body["error"]["code"] == "not_found"
            continue
        assert status == 201 and headers["content-type"] == "application/json", (status, body)
        keys.append(body["key"])
    assert keys == [f"pipe{i}" for i in range(20)]
    # the connection stays open for more
    s.sendall(post_bytes(bodies[0]))
    status, _, body = r.response()
    assert status == 200 and body["key"] == "pipe0"
    s.close()


def test_chunked_body(tickd):
    s = connect(tickd)
    body = json.dumps(dict(TASK, key="chunky")).encode()
    parts = [body[:7], body[7:20], body[20:]]
    wire = b"POST /v1/tasks HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
    s.sendall(wire)
    for p in parts:
        s.sendall(b"%x;ext=1\r\n%s\r\n" % (len(p), p))
        time.sleep(0.05)
    s.sendall(b"0\r\nX-Trailer: yes\r\n\r\n")
    status, _, got = Reader(s).response()
    assert status == 201 and got["key"] == "chunky", got
    s.close()
    assert tickd.get(got["id"])[0] == 200


def test_bad_chunked_body_is_400_and_closes(tickd):
    s = connect(tickd)
    s.sendall(b"POST /v1/tasks HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
              b"zz\r\nabc\r\n0\r\n\r\n")
    r = Reader(s)
    status, headers, body = r.response()
    assert status == 400 and body["error"]["message"].startswith("body: malformed chunked")
    assert headers["connection"] == "close" and r.closed()


def test_expect_100_continue(tickd):
    s = connect(tickd)
    body = json.dumps(dict(TASK, key="expect")).encode()
    s.sendall(post_bytes(b"", extra="Expect: 100-continue\r\n").replace(
        b"Content-Length: 0", b"Content-Length: %d" % len(body)))
    r = Reader(s)
    while b"\r\n\r\n" not in r.buf:
        r._fill()
    assert r.buf.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), r.buf
    r.buf = r.buf[len(b"HTTP/1.1 100 Continue\r\n\r\n"):]
    s.sendall(body)
    status, _, got = r.response()
    assert status == 201 and got["key"] == "expect"
    s.close()


def test_body_over_max_body_is_413_json(tickd):
    s = connect(tickd)
    n = (1 << 20) + 1
    s.sendall(b"POST /v1/tasks HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % n)
    r = Reader(s)
    status, headers, body = r.response()
    assert status == 413 and body["error"]["code"] == "payload_too_large"
    assert "server.max_body" in body["error"]["message"]
    assert headers["connection"] == "close"
    # the client may still be sending: the server reads and drops it, then closes
    try:
        s.sendall(b"a" * 200000)
    except (BrokenPipeError, ConnectionResetError):
        pass
    assert r.closed()


def test_server_errors_are_json_and_close(tickd):
    cases = [
        (b"NOT A REQUEST\r\n\r\n", 400, "bad_request"),
        (b"GET /healthz HTTP/2.0\r\n\r\n", 400, "bad_request"),
        (b"GET /healthz HTTP/1.1\r\nbad header line\r\n\r\n", 400, "bad_request"),
        (b"POST /v1/tasks HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, "bad_request"),
        (b"POST /v1/tasks HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501,
         "not_implemented"),
        (b"POST /v1/tasks HTTP/1.1\r\nHost: t\r\nExpect: magic\r\nContent-Length: 2\r\n\r\n{}",
         417, "expectation_failed"),
        (b"GET /healthz HTTP/1.1\r\nX-Big: " + b"b" * 17000 + b"\r\n\r\n", 431, "header_too_large"),
        (b"GET /healthz HTTP/1.1\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(70)) + b"\r\n",
         431, "header_too_large"),
    ]
    for wire, code, name in cases:
        s = connect(tickd)
        s.sendall(wire)
        r = Reader(s)
        status, headers, body = r.response()
        assert (status, body["error"]["code"]) == (code, name), (wire[:60], status, body)
        assert headers["connection"] == "close" and r.closed(), wire[:60]
    # and the server is still fine
    assert tickd.request("GET", "/healthz")[0] == 200


def test_http10_closes_unless_keep_alive(tickd):
    body = json.dumps(TASK).encode()
    s = connect(tickd)
    s.sendall(post_bytes(body, version="1.0"))
    r = Reader(s)
    status, headers, _ = r.response()
    assert status == 201 and headers["connection"] == "close" and r.closed()

    s = connect(tickd)
    s.sendall(post_bytes(body, extra="Connection: keep-alive\r\n", version="1.0") * 2)
    r = Reader(s)
    for _ in range(2):
        status, headers, _ = r.response()
        assert status == 201 and headers["connection"] == "keep-alive"
    s.close()


def test_head_has_no_body(tickd):
    s = connect(tickd)
    s.sendall(b"HEAD /v1/tasks/nope HTTP/1.1\r\nHost: t\r\n\r\n"
              b"GET /v1/tasks/nope HTTP/1.1\r\nHost: t\r\n\r\n")
    r = Reader(s)
    while b"\r\n\r\n" not in r.buf:
        r._fill()
    head, rest = r.buf.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 404") and b"Content-Length: " in head
    r.buf = rest   # no body after the HEAD answer: the GET's answer is next
    status, _, body = r.response()
    assert status == 404 and body["error"]["code"] == "not_found"
    s.close()


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


def test_request_sent_while_the_previous_one_waits(redis, tickd_factory):
    # Redis down: the POST waits (redis.timeout_ms) before its 503, and the
    # next request, sent on its own while it waits, is answered after it, intact
    t = tickd_factory(redis).start()
    s = connect(t)
    r = Reader(s)
    redis.stop()
    s.sendall(post_bytes(json.dumps(TASK).encode()))
    time.sleep(0.3)
    s.sendall(b"GET /v1/stats HTTP/1.1\r\nHost: t\r\n\r\n")
    time.sleep(0.3)
    s.sendall(b"GET /v1/tasks/nope HTTP/1.1\r\nHost: t\r\n\r\n")
    status, _, body = r.response()
    assert status == 503 and body["error"]["code"] == "unavailable"
    status, _, body = r.response()
    assert status == 200 and "claimed" in body, body
    status, _, body = r.response()
    assert status in (404, 503), (status, body)
    s.close()


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
