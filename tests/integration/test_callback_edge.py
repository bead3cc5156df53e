"""The callback client at its edges, on both paths (tickd's own HTTP/1.1
client for http://, libcurl for URLs with credentials): IPv6 and numeric
IPv4 literals, LF-only answers, bodies over 1 MiB, a body cut off by the
timeout, per-host state freed once unused, and tickd's own failures (out of
descriptors) that must not use up a task's attempts."""
import http.server
import socket
import threading
import time

import pytest

from harness import TcpServer, read_head, wait_for

PATHS = ["h1", "curl"]


def url_for(kind, host, port, path="/ok"):
    """The callback URL taking one client path: credentials send it through
    libcurl (the built-in client leaves them to it)."""
    cred = "u:p@" if kind == "curl" else ""
    return f"http://{cred}{host}:{port}{path}"


class Raw(TcpServer):
    """A TCP server that reads one request head and runs answer(conn) for it."""

    def __init__(self, answer, family=socket.AF_INET, host="127.0.0.1"):
        self.heads = []
        self.answer = answer
        super().__init__(self.serve, host=host, family=family)

    def serve(self, c):
        head, _ = read_head(c)
        if head is not None:
            self.heads.append(head.decode("latin-1"))
            self.answer(c)


@pytest.fixture
def raw_servers():
    made = []

    def make(answer, **kw):
        s = Raw(answer, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def ok_answer(c):
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")


# ---- addresses ------------------------------------------------------------

@pytest.mark.parametrize("kind", PATHS)
def test_ipv6_literal(tickd, raw_servers, kind):
    srv = raw_servers(ok_answer, family=socket.AF_INET6, host="::1")
    t = tickd.post({"callback_url": url_for(kind, "[::1]", srv.port), "retry": {"max_attempts": 1}})
    g = tickd.final(t["id"])
    assert g["status"] == "succeeded", g
    host = [ln for ln in srv.heads[0].split("\r\n") if ln.lower().startswith("host:")][0]
    assert host.split(":", 1)[1].strip() == f"[::1]:{srv.port}"


@pytest.mark.parametrize("kind", PATHS)
@pytest.mark.parametrize("host", ["0177.0.0.1", "127.1", "2130706433", "0x7f000001",
                                  "0x7f.0.0.1", "127.0.1"])
def test_numeric_ipv4_forms_reach_127_0_0_1(tickd, raw_servers, kind, host):
    """Each form means 127.0.0.1 to libcurl (inet_aton's reading: parts in
    decimal, octal or hex); the built-in client must read them the same way,
    not, say, 0177.0.0.1 as 177.0.0.1."""
    srv = raw_servers(ok_answer)
    t = tickd.post({"callback_url": url_for(kind, host, srv.port), "timeout_ms": 3000,
                    "retry": {"max_attempts": 1}})
    g = tickd.final(t["id"])
    assert g["status"] == "succeeded", (host, g)
    assert len(srv.heads) == 1
    # and the Host header names the address the same way on both paths
    hosthdr = [ln for ln in srv.heads[0].split("\r\n") if ln.lower().startswith("host:")][0]
    assert hosthdr.split(":", 1)[1].strip() == f"127.0.0.1:{srv.port}", hosthdr


# ---- answers --------------------------------------------------------------

@pytest.mark.parametrize("kind", PATHS)
def test_lf_only_answer_head(tickd, raw_servers, kind):
    srv = raw_servers(lambda c: c.sendall(b"HTTP/1.1 201 Created\nContent-Length: 2\n"
                                          b"X-A: 1\n\nok"))
    t = tickd.post({"callback_url": url_for(kind, "127.0.0.1", srv.port),
                    "retry": {"max_attempts": 1}})
    g = tickd.final(t["id"])
    assert g["status"] == "succeeded" and "last_error" not in g, g


def endless_chunks(c):
    """A chunked body that never ends: 64 KiB chunks for as long as the
    client reads."""
    c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"10000\r\n" + b"z" * 0x10000 + b"\r\n"
    deadline = time.time() + 20
    while time.time() < deadline:
        c.sendall(chunk)


@pytest.mark.parametrize("kind", PATHS)
def test_endless_chunked_body_not_read_past_1mib(tickd, raw_servers, kind):
    """The body is read (and dropped) up to 1 MiB; past that the connection
    closes and the answer's status stands. Read to its end, it would run into
    the timeout."""
    srv = raw_servers(endless_chunks)
    t0 = time.time()
    t = tickd.post({"callback_url": url_for(kind, "127.0.0.1", srv.port), "timeout_ms": 8000,
                    "retry": {"max_attempts": 1}})
    g = tickd.final(t["id"], timeout=20)
    assert g["status"] == "succeeded" and "last_error" not in g, g
    assert time.time() - t0 < 6, "the body was read on instead of cut at 1 MiB"


@pytest.mark.parametrize("kind", PATHS)
def test_body_cut_off_by_timeout_keeps_status(tickd, raw_servers, kind):
    """The head arrives, the body stalls: the receiver has answered, so its
    status decides (a 2xx succeeds, nothing is called twice), and the
    record says the body was cut off."""
    def stall(code):
        def answer(c):
            c.sendall(f"HTTP/1.1 {code} X\r\nContent-Length: 100\r\n\r\nabc".encode())
            time.sleep(4)
        return answer

    ok = raw_servers(stall(200))
    bad = raw_servers(stall(503))
    a = tickd.post({"callback_url": url_for(kind, "127.0.0.1", ok.port), "timeout_ms": 800,
                    "retry": {"max_attempts": 2, "backoff_ms": 100}})
    b = tickd.post({"callback_url": url_for(kind, "127.0.0.1", bad.port), "timeout_ms": 800,
                    "retry": {"max_attempts": 2, "backoff_ms": 100}})
    ga = tickd.final(a["id"])
    assert ga["status"] == "succeeded" and ga["attempts"] == 1, ga
    assert ga["last_status_code"] == 200 and "cut off by the timeout" in ga["last_error"], ga
    assert len(ok.heads) == 1
    gb = tickd.final(b["id"])
    assert gb["status"] == "failed" and gb["attempts"] == 2, gb
    assert gb["last_status_code"] == 503 and "cut off by the timeout" in gb["last_error"], gb


# ---- per-host state -------------------------------------------------------

def test_host_state_freed_once_unused(redis, tickd_factory):
    """Callbacks to many distinct hosts leave no state behind once those
    hosts are no longer called (keepalive_ms after the last one)."""
    srv = _AnyLoopback(("0.0.0.0", 0), _OkHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    try:
        t = tickd_factory(redis, env={"TICKD_SERVER_KEEPALIVE_MS": "1000"}).start()
        n = 300
        ids = [r["id"] for r in t.batch([
            {"callback_url": f"http://127.0.{i // 200}.{1 + i % 200}:{port}/ok",
             "retry": {"max_attempts": 1}} for i in range(n)])]
        wait_for(lambda: t.request("GET", "/v1/stats")[1]["hosts"] >= 50, 10,
                 what="host state while called")
        for tid in ids:
            g = t.final(tid)
            assert g["status"] == "succeeded", g
        wait_for(lambda: t.request("GET", "/v1/stats")[1]["hosts"] == 0, 10,
                 what="host state freed")
    finally:
        srv.shutdown()
        srv.server_close()


class _AnyLoopback(http.server.ThreadingHTTPServer):
    """Bound to every address: 127.0.x.y are all distinct hosts reaching it."""
    daemon_threads = True
    request_queue_size = 1024


class _OkHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


# ---- tickd's own failures -------------------------------------------------

@pytest.mark.parametrize("kind", PATHS)
def test_out_of_descriptors_is_not_an_attempt(redis, tickd_factory, kind):
    """Under a descriptor limit, a burst of callbacks to a slow receiver runs
    tickd out of descriptors: those that could not even open a socket were
    never made, so they do not count as attempts. Every task (one attempt
    allowed) still succeeds once descriptors come back."""
    def slow(c):
        time.sleep(1.0)
        ok_answer(c)

    srv = Raw(slow)
    try:
        t = tickd_factory(redis, nofile=96, env={"TICKD_SERVER_WORKERS": "1", "TICKD_SERVER_HOST_CONNECTIONS": "1000"}).start()
        due = int(time.time() * 1000) + 1500
        n = 120
        ids = [r["id"] for r in t.batch([
            {"callback_url": url_for(kind, "127.0.0.1", srv.port, f"/t{i}"),
             "execute_at": due, "timeout_ms": 5000, "retry": {"max_attempts": 1}}
            for i in range(n)])]
        done = {}
        def all_final():
            for tid in ids:
                if tid not in done:
                    g = t.get(tid)[1]
                    if g["status"] in ("succeeded", "failed"):
                        done[tid] = g
            return len(done) == n
        wait_for(all_final, 60, interval=0.2, what=f"{n} tasks final")
        failed = [g for g in done.values() if g["status"] != "succeeded"]
        assert not failed, failed[:3]
        assert len(done) == n
        assert all(g["attempts"] == 1 for g in done.values())
        log = t.logtext()
        assert "without counting an attempt" in log, "the limit was never reached: test is void"
    finally:
        srv.close()
