"""The callback client: answers framed every way HTTP/1.1 allows (and some
it does not), kept connections reused and replaced when the host closed
them, names resolved, and a configured proxy sending everything through
libcurl. The receiving end is a raw socket server scripted per path."""
import socket
import threading
import time

import pytest

from harness import TcpServer, read_request, wait_for

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

# path -> the bytes of the answer (a list: sent piece by piece, 20 ms apart),
# and whether the connection closes after it
SCRIPTS = {
    "/ok": ([OK], False),
    "/": ([OK], False),
    "/chunked": ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                  b"5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n"
                  b"X-Trailer: t\r\n\r\n"], False),
    "/to-close": ([b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nbody up to the close"], True),
    "/interim": ([b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
                  b"HTTP/1.1 204 No Content\r\n\r\n"], False),
    "/http10": ([b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"], True),
    "/big": ([b"HTTP/1.1 200 OK\r\nContent-Length: 3000000\r\n\r\n" + b"x" * 3000000], True),
    "/medium": ([b"HTTP/1.1 200 OK\r\nContent-Length: 500000\r\n\r\n" + b"y" * 250000,
                 b"y" * 250000], False),
    "/chunk-drip": ([bytes([c]) for c in b"HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n"
                     b"\r\n3\r\nabc\r\n0\r\n\r\n"], False),
    "/drip": ([bytes([c]) for c in b"HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello"], False),
    "/not-found": ([b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found"], False),
    "/garbage": ([b"SPDY/3 200 OK\r\n\r\n"], True),
    "/two-lengths": ([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"], True),
    "/bad-chunk": ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"], True),
    "/silent-close": ([], True),
}


class Scripted(TcpServer):
    """A TCP server answering each request by its path (SCRIPTS). It records
    every request (its head, body and which connection brought it). With
    close_idle_ms it closes a kept connection that long after each answer, as
    servers with a short keep-alive timeout do."""

    def __init__(self, close_idle_ms=None):
        self.close_idle_ms = close_idle_ms
        self.requests = []
        self.conns = 0
        self.peer_closed = []  # (connection, time) of each close by the client
        self.lock = threading.Lock()
        super().__init__(self.serve, backlog=512)

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def serve(self, c):
        with self.lock:
            self.conns += 1
            n = self.conns
        idle_s = self.close_idle_ms / 1000 if self.close_idle_ms is not None else None
        buf = b""
        while True:
            try:
                req = read_request(c, buf, idle_s=idle_s)
            except socket.timeout:
                return  # idle too long: close, as the keep-alive timeout says
            if req is None:
                with self.lock:
                    self.peer_closed.append((n, time.time()))
                return
            line, hdrs, body, buf = req
            with self.lock:
                self.requests.append({"line": line, "headers": hdrs, "body": body,
                                      "conn": n, "t": time.time()})
            path = line.split(" ")[1].split("?")[0]
            if path.startswith("http://"):  # a proxy's absolute form
                path = "/ok"
            pieces, close = SCRIPTS[path]
            for i, p in enumerate(pieces):
                if i:
                    time.sleep(0.02)  # each piece in a segment of its own
                c.sendall(p)
            if close:
                return

    def by_task(self):
        with self.lock:
            out = {}
            for r in self.requests:
                out.setdefault(r["headers"].get("tickd-task-id"), []).append(r)
            return out


@pytest.fixture
def scripted():
    s = Scripted()
    yield s
    s.close()


def test_answers_framed_every_way(tickd, scripted):
    ok = ["/chunked", "/to-close", "/interim", "/http10", "/big", "/medium", "/chunk-drip",
          "/drip", "/ok"]
    bad = {"/not-found": "HTTP 404", "/garbage": "malformed answer: bad status line",
           "/two-lengths": "malformed answer: two Content-Lengths",
           "/bad-chunk": "malformed answer: bad chunk size",
           "/silent-close": "closed before the answer ended"}
    ids = {}
    for path in ok + list(bad):
        t = tickd.post({"callback_url": scripted.url(path), "retry": {"max_attempts": 1}})
        ids[path] = t["id"]
    for path in ok:
        g = tickd.final(ids[path])
        assert g["status"] == "succeeded", (path, g)
    for path, err in bad.items():
        g = tickd.final(ids[path])
        assert g["status"] == "failed" and err in g.get("last_error", ""), (path, g)
    assert tickd.get(ids["/not-found"])[1]["last_status_code"] == 404


def test_request_head_and_body(tickd, scripted):
    a = tickd.post({"callback_url": scripted.url("/ok?q=1#frag"), "method": "PUT",
                    "header": {"X-A": "1", "User-Agent": "mine/2"}, "req": {"k": "v"}})
    b = tickd.post({"callback_url": scripted.url("/ok"), "method": "GET", "req": "ignored"})
    c = tickd.post({"callback_url": f"http://127.0.0.1:{scripted.port}?only=query",
                    "method": "POST"})
    for t in (a, b, c):
        g = tickd.final(t["id"])
        assert g["status"] == "succeeded", g
    got = {tid: r[0] for tid, r in scripted.by_task().items()}
    ra, rb, rc = got[a["id"]], got[b["id"]], got[c["id"]]
    assert ra["line"] == "PUT /ok?q=1 HTTP/1.1"
    assert ra["headers"]["host"] == f"127.0.0.1:{scripted.port}"
    assert ra["headers"]["user-agent"] == "mine/2" and ra["headers"]["x-a"] == "1"
    assert ra["headers"]["content-type"] == "application/json"
    assert ra["headers"]["content-length"] == str(len(ra["body"])) and ra["body"] == b'{"k":"v"}'
    assert ra["headers"]["tickd-attempt"] == "1"
    assert rb["line"] == "GET /ok HTTP/1.1" and rb["body"] == b""
    assert "content-length" not in rb["headers"] and rb["headers"]["user-agent"] == "tickd/1"
    assert rc["line"] == "POST /?only=query HTTP/1.1"
    assert rc["headers"]["content-length"] == "0" and "content-type" not in rc["headers"]


def test_kept_connections_are_reused(tickd, scripted):
    ids = []
    for i in range(30):
        ids.append(tickd.post({"callback_url": scripted.url("/ok")})["id"])
        time.sleep(0.02)
    for tid in ids:
        assert tickd.final(tid)["status"] == "succeeded"
    # two workers: a connection each would do; far fewer than one per call
    assert scripted.conns <= 4, scripted.conns


def test_connection_closed_while_idle_is_replaced(tickd_factory, redis):
    """The host closes kept connections 100 ms after an answer: the next call
    finds its connection dead before any answer and goes again on a new one,
    without an error or a second attempt."""
    s = Scripted(close_idle_ms=100)
    try:
        t = tickd_factory(redis, env={"TICKD_SERVER_WORKERS": "1"}).start()
        ids = []
        for i in range(6):
            ids.append(t.post({"callback_url": s.url("/ok"), "retry": {"max_attempts": 1}})["id"])
            time.sleep(0.3)
        for tid in ids:
            g = t.final(tid)
            assert g["status"] == "succeeded" and g["attempts"] == 1, g
        assert s.conns >= 6
    finally:
        s.close()


def test_unused_connection_closes_after_keepalive(tickd_factory, redis, scripted):
    """A kept connection unused for server.keepalive_ms is closed by tickd, so
    a host no longer called holds no descriptor; the next call opens anew."""
    t = tickd_factory(redis, env={"TICKD_SERVER_WORKERS": "1",
                                  "TICKD_SERVER_KEEPALIVE_MS": "400"}).start()
    a = t.post({"callback_url": scripted.url("/ok")})
    assert t.final(a["id"])["status"] == "succeeded"
    answered = scripted.requests[0]["t"]
    wait_for(lambda: scripted.peer_closed, timeout=5)
    conn, when = scripted.peer_closed[0]
    assert conn == scripted.requests[0]["conn"]
    assert 0.3 <= when - answered < 2.5, when - answered
    b = t.post({"callback_url": scripted.url("/ok")})
    assert t.final(b["id"])["status"] == "succeeded"
    assert scripted.by_task()[b["id"]][0]["conn"] != conn


def test_host_names_resolve(tickd, scripted):
    t = tickd.post({"callback_url": f"http://localhost:{scripted.port}/ok"})
    assert tickd.final(t["id"])["status"] == "succeeded"
    r = scripted.by_task()[t["id"]][0]
    assert r["headers"]["host"] == f"localhost:{scripted.port}"
    u = tickd.post({"callback_url": "http://no-such-host.invalid/x", "timeout_ms": 3000,
                    "retry": {"max_attempts": 1}})
    g = tickd.final(u["id"], timeout=20)
    assert g["status"] == "failed" and "no-such-host.invalid" in g["last_error"], g


def test_a_proxy_sends_callbacks_through_libcurl(tickd_factory, redis, scripted):
    t = tickd_factory(redis, env={"http_proxy": f"http://127.0.0.1:{scripted.port}"}).start()
    a = t.post({"callback_url": "http://127.0.0.1:9/via-proxy?x=1", "req": {"n": 1},
                "header": {"X-A": "1"}})
    assert t.final(a["id"])["status"] == "succeeded"
    r = scripted.by_task()[a["id"]][0]
    assert r["line"] == "POST http://127.0.0.1:9/via-proxy?x=1 HTTP/1.1", r
    assert r["headers"]["x-a"] == "1" and r["body"] == b'{"n":1}'
    assert r["headers"]["content-type"] == "application/json"
