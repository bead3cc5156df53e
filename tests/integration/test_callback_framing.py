"""How the callback client reads answers and writes requests, on both
paths where they differ (tickd's own HTTP/1.1 client for http://, libcurl
for URLs with credentials): answers framed every way HTTP/1.1 allows (and
some it does not), LF-only heads, bodies over 1 MiB, a body cut off by the
timeout, and the request's head and body as sent. The receiving end is a
raw socket server, scripted per path or given its answer."""
import time

import pytest

from receivers import PATHS, url_for


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
