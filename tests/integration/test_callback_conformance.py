"""One behaviour for both callback clients: a table of receiver behaviours,
each run through tickd's own HTTP/1.1 client (http://) and through libcurl
by three routes (a URL with user:password@, https:// with a private CA, and
a configured proxy), with the same recorded outcome required of every route:
the task's status, the attempts made (a failure is retried), the status code
kept, the kind of failure (the /metrics outcome label), a phrase of the
error, the stored start of a failed answer's body, and whether each attempt
ended by the answer or by the timeout.

Every route has its own tickd (and Redis), so that its /metrics count only
its own attempts. All the table's tasks are posted at once when the module
starts and run side by side; each test waits for one row's task."""
import os
import socket
import ssl
import struct
import time
import urllib.request
from collections import Counter

import pytest

from harness import Redis, SANITIZER_REPORT, TcpServer, Tickd, now_ms, read_request
from tls_kit import PKI

TIMEOUT_MS = 2000
ATTEMPTS = 2


# ---- receiver behaviours ---------------------------------------------------

def head_of(n):
    """A 200 answer whose head (status line to empty line) is n bytes."""
    out = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n"
    i = 0
    while len(out) + 2 < n:
        name = b"X-Fill-%d: " % i
        room = min(900, n - 2 - len(out) - len(name) - 2)
        if room < 1:  # too little left for another line: pad this one
            out = out[:-2] + b"b" * (n - 2 - len(out)) + b"\r\n"
            break
        out += name + b"a" * room + b"\r\n"
        i += 1
    out += b"\r\n"
    assert len(out) == n
    return out


def send(data, keep=False):
    """Answer with data; keep: the connection serves the next request."""
    def answer(c):
        c.sendall(data)
        return keep
    return answer


def send_pieces(pieces, gap_s=0.02):
    """Answer with each piece in turn, gap_s apart, keeping the connection."""
    def answer(c):
        for i, p in enumerate(pieces):
            if i:
                time.sleep(gap_s)
            c.sendall(p)
        return True
    return answer


def send_then_wait(data):
    """Answer with data, then say nothing more until the client gives up."""
    def answer(c):
        c.sendall(data)
        c.settimeout(10)
        try:
            while c.recv(65536):
                pass
        except OSError:
            pass
        return False
    return answer


def drip(data):
    """Answer with data three bytes at a time."""
    return send_pieces([data[i:i + 3] for i in range(0, len(data), 3)], gap_s=0.004)


def endless_chunks(c):
    c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"10000\r\n" + b"z" * 0x10000 + b"\r\n"
    deadline = time.time() + 20
    while time.time() < deadline:
        c.sendall(chunk)
    return False


def reset(c):
    """Close at once with a reset (None: and no TLS close_notify)."""
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return None


class Row:
    """A receiver behaviour and the outcome required on every route.
    code: last_status_code (None: none kept); kind: the outcome label of
    each attempt; err: a phrase of last_error (None: no error kept, "": not
    checked, the words being the client's); body: the stored start of the
    last attempt's answer body; ends: "answer" or "timeout"; held_ms: the
    retry waits at least that long (a Retry-After)."""

    def __init__(self, name, answer, ok, code, kind, err, body=None, ends="answer",
                 held_ms=None):
        self.name, self.answer, self.held_ms = name, answer, held_ms
        self.expect = {"status": "succeeded" if ok else "failed",
                       "attempts": 1 if ok else ATTEMPTS, "code": code, "kind": kind,
                       "err": err, "body": body, "ends": ends, "held": bool(held_ms)}


CHUNKED = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
           b"5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: t\r\n\r\n")
INTERIM = (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
           b"HTTP/1.1 204 No Content\r\n\r\n")
CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
LEN2 = b"\r\nContent-Length: 2\r\n\r\nok"  # ends a status or header line, then a body
BAD = "malformed answer"


def malformed(name, data, why=""):
    """An answer refused: no status kept, an attempt of its own kind, retried."""
    return Row(name, send(data), False, None, "connect_error", BAD + why)


ROWS = [
    # answers framed every way HTTP/1.1 allows
    Row("ok", send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", keep=True),
        True, 200, "2xx", None),
    Row("no-reason-phrase", send(b"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok", keep=True),
        True, 200, "2xx", None),
    Row("lf-only-head", send(b"HTTP/1.1 201 Created\nContent-Length: 2\nX-A: 1\n\nok", keep=True),
        True, 201, "2xx", None),
    Row("interim-1xx-then-204", send(INTERIM, keep=True), True, 204, "2xx", None),
    Row("http-1.0", send(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"),
        True, 200, "2xx", None),
    Row("chunked-with-trailer", send(CHUNKED, keep=True), True, 200, "2xx", None),
    Row("body-to-the-close", send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nto the close"),
        True, 200, "2xx", None),
    Row("body-to-a-close-that-never-comes",
        send_then_wait(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nno end"),
        True, 200, "2xx", None),
    Row("dripped-answer", drip(b"HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello"),
        True, 201, "2xx", None),
    Row("dripped-chunked-answer",
        drip(b"HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
        True, 202, "2xx", None),
    Row("body-of-500-kb-in-two-pieces",
        send_pieces([b"HTTP/1.1 200 OK\r\nContent-Length: 500000\r\n\r\n" + b"y" * 250000,
                     b"y" * 250000]), True, 200, "2xx", None),
    Row("chunked-beside-length",
        send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n"
             b"2\r\nok\r\n0\r\n\r\n", keep=True), True, 200, "2xx", None),
    Row("folded-header-line",
        send(b"HTTP/1.1 200 OK\r\nX-A: 1\r\n  folded\r\nContent-Length: 2\r\n\r\nok", keep=True),
        True, 200, "2xx", None),
    Row("head-of-64-kib", send(head_of(65536), keep=True), True, 200, "2xx", None),
    Row("body-of-3-mb", send(b"HTTP/1.1 200 OK\r\nContent-Length: 3000000\r\n\r\n" + b"x" * 3000000),
        True, 200, "2xx", None),
    Row("endless-chunked-body", endless_chunks, True, 200, "2xx", None),
    Row("chunk-extension-of-5-kb",
        send(CHUNKED_HEAD + b"2;" + b"e" * 5000 + b"\r\nok\r\n0\r\n\r\n", keep=True),
        True, 200, "2xx", None),
    Row("trailer-line-of-4095-bytes",
        send(CHUNKED_HEAD + b"2\r\nok\r\n0\r\nX-T: " + b"t" * 4088 + b"\r\n\r\n", keep=True),
        True, 200, "2xx", None),
    # statuses other than 2xx: retried, the body's start kept
    Row("404-with-body", send(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found", keep=True),
        False, 404, "http_error", "HTTP 404", body="not found"),
    Row("500-chunked-body",
        send(b"HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", keep=True),
        False, 500, "http_error", "HTTP 500", body="hello"),
    Row("500-long-body", send(b"HTTP/1.1 500 Oops\r\nContent-Length: 3000\r\n\r\n" + b"e" * 3000, keep=True),
        False, 500, "http_error", "HTTP 500", body="e" * 1024),
    Row("500-gzip-chunked-body",
        send(b"HTTP/1.1 500 Oops\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
             keep=True), False, 500, "http_error", "HTTP 500", body="hello"),
    # a body that runs to the close, or over 1 MiB, is not read: none kept
    Row("500-gzip-body-to-the-close", send(b"HTTP/1.1 500 Oops\r\nTransfer-Encoding: gzip\r\n\r\nhello"),
        False, 500, "http_error", "HTTP 500"),
    Row("500-body-of-3-mb", send(b"HTTP/1.1 500 Oops\r\nContent-Length: 3000000\r\n\r\n" + b"x" * 3000000),
        False, 500, "http_error", "HTTP 500"),
    Row("302-redirect", send(b"HTTP/1.1 302 Found\r\nLocation: /ok\r\nContent-Length: 0\r\n\r\n", keep=True),
        False, 302, "http_error", "HTTP 302"),
    # the head came, the body was cut short: the receiver has answered
    Row("200-body-cut-by-timeout",
        send_then_wait(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc"),
        True, 200, "2xx", "cut off by the timeout", ends="timeout"),
    Row("503-body-cut-by-timeout",
        send_then_wait(b"HTTP/1.1 503 Busy\r\nContent-Length: 100\r\n\r\nabc"),
        False, 503, "http_error", "cut off by the timeout", body="abc", ends="timeout"),
    Row("200-body-cut-by-close", send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc"),
        True, 200, "2xx", "closed before the answer's body ended"),
    Row("503-body-cut-by-close", send(b"HTTP/1.1 503 Busy\r\nContent-Length: 100\r\n\r\nabc"),
        False, 503, "http_error", "closed before the answer's body ended", body="abc"),
    Row("chunked-body-cut-by-close",
        send(CHUNKED_HEAD + b"5\r\nab"),
        True, 200, "2xx", "closed before the answer's body ended"),
    # malformed answers: no status kept, retried
    malformed("not-http", b"SPDY/3 200 OK\r\n\r\n", ": bad status line"),
    malformed("status-999", b"HTTP/1.1 999 Odd" + LEN2, ": bad status line"),
    malformed("status-missing", b"HTTP/1.1 OK" + LEN2, ": bad status line"),
    malformed("http-1.9", b"HTTP/1.9 200 OK" + LEN2, ": bad status line"),
    malformed("http-2-status-line", b"HTTP/2 200" + LEN2, ": bad status line"),
    malformed("lower-case-http", b"http/1.1 200 OK" + LEN2, ": bad status line"),
    malformed("two-lengths", b"HTTP/1.1 200 OK\r\nContent-Length: 3" + LEN2, ": two Content-Lengths"),
    malformed("length-not-digits", b"HTTP/1.1 200 OK\r\nContent-Length: 2 2\r\n\r\nok",
              ": bad Content-Length"),
    malformed("bad-chunk-size", CHUNKED_HEAD + b"zz\r\n"),
    malformed("chunk-size-of-17-digits", CHUNKED_HEAD + b"00000000000000002\r\nok\r\n0\r\n\r\n"),
    malformed("trailer-line-of-4096-bytes",
              CHUNKED_HEAD + b"2\r\nok\r\n0\r\nX-T: " + b"t" * 4089 + b"\r\n\r\n"),
    malformed("header-line-without-colon", b"HTTP/1.1 200 OK\r\nNoColonHere" + LEN2),
    malformed("folded-line-after-status-line", b"HTTP/1.1 200 OK\r\n  folded" + LEN2),
    malformed("nul-in-head", b"HTTP/1.1 200 OK\r\nX-A: a\x00b" + LEN2),
    malformed("head-over-64-kib", head_of(65537), ": head over 64 KiB"),
    Row("101-switching-protocols",
        send_then_wait(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                       b"Connection: Upgrade\r\n\r\n"),
        False, None, "connect_error", BAD + ": 101 Switching Protocols"),
    # no answer, or not all of its head
    Row("head-never-ends", send_then_wait(b"HTTP/1.1 200 OK\r\nX-A: 1\r\n"),
        False, None, "timeout", "", ends="timeout"),
    Row("interim-then-silence", send_then_wait(b"HTTP/1.1 100 Continue\r\n\r\n"),
        False, None, "timeout", "", ends="timeout"),
    Row("silence", send_then_wait(b""), False, None, "timeout", "", ends="timeout"),
    Row("status-line-then-close", send(b"HTTP/1.1 200 OK\r\n"), False, None, "connect_error", ""),
    Row("interim-then-close", send(b"HTTP/1.1 100 Continue\r\n\r\n"),
        False, None, "connect_error", ""),
    Row("close-without-answer", send(b""), False, None, "connect_error", ""),
    Row("reset", reset, False, None, "connect_error", ""),
    # last: the hold it asks for delays what follows to the same host
    Row("503-retry-after-1-s",
        send(b"HTTP/1.1 503 Busy\r\nRetry-After: 1\r\nContent-Length: 4\r\n\r\nbusy", keep=True),
        False, 503, "http_error", "HTTP 503", body="busy", held_ms=1000),
]
BY_NAME = {r.name: r for r in ROWS}
assert len(BY_NAME) == len(ROWS)

ROUTES = ["own", "curl-userinfo", "curl-tls", "curl-proxy"]


class TableReceiver:
    """One server for every row, plain and TLS: the last segment of the
    request's path names the row whose answer it gets. A connection serves
    requests until a row's answer leaves it unfit for another."""

    def __init__(self, pki):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(pki.path("srv.crt"), pki.path("srv.key"))
        self.servers = [TcpServer(self.serve, backlog=512),
                        TcpServer(self.serve_tls, backlog=512)]
        self.plain, self.tls = (s.port for s in self.servers)

    def serve_tls(self, c):
        try:
            c = self.ctx.wrap_socket(c, server_side=True)
        except (OSError, ssl.SSLError):
            return
        self.serve(c)

    def serve(self, c):
        clean = True
        try:
            buf = b""
            while True:
                req = read_request(c, buf)
                if req is None:
                    return
                line, _, _, buf = req
                row = line.split(" ")[1].split("?")[0].rsplit("/", 1)[1]
                keep = BY_NAME[row].answer(c)
                if not keep:
                    clean = keep is not None
                    break
        except (OSError, ssl.SSLError):
            pass
        finally:
            try:
                if clean and isinstance(c, ssl.SSLSocket):
                    c.unwrap()  # close_notify: the TLS stream ends cleanly
            except (OSError, ssl.SSLError, ValueError):
                pass
            c.close()

    def close(self):
        for s in self.servers:
            s.close()


class SmallPKI(PKI):
    """The CA and the receiver's certificate, nothing else, on P-256 keys:
    the receiver makes every row's handshake at once, and RSA's would take
    longer than a row's timeout."""

    KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]

    def __init__(self, d):
        self.dir = d
        os.makedirs(d, exist_ok=True)
        self.ca("ca", "tickd-test-ca")
        self.leaf("srv", "ca", "127.0.0.1", "IP:127.0.0.1,DNS:localhost", "serverAuth")


def url_of(route, rec, row):
    if route == "own":
        return f"http://127.0.0.1:{rec.plain}/{row}"
    if route == "curl-userinfo":
        return f"http://u:p@127.0.0.1:{rec.plain}/{row}"
    if route == "curl-tls":
        return f"https://127.0.0.1:{rec.tls}/{row}"
    # the receiver is the proxy: it answers the absolute-form request itself
    return f"http://127.0.0.1:9/{row}"


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """{route: (tickd, {row: task id})}, every task posted."""
    tmp = str(tmp_path_factory.mktemp("conformance"))
    pki = SmallPKI(os.path.join(tmp, "pki"))
    rec = TableReceiver(pki)
    started = []
    out = {}
    try:
        for route in ROUTES:
            env = {"TICKD_SERVER_HOST_CONNECTIONS": "256",
                   "TICKD_CALLBACK_CA_FILE": pki.path("ca.crt")}
            if route == "curl-proxy":
                env["TICKD_CALLBACK_PROXY"] = f"http://127.0.0.1:{rec.plain}"
            r = Redis(tmp, name=f"redis-{route}").start()
            t = Tickd(tmp, redis=r, env=env, name=f"tickd-{route}")
            started.append((r, t))
            t.start()
            out[route] = t
        # the rows start 25 ms apart, not all at once: the receiver's TLS
        # handshakes, all at once on a busy machine, could take longer than
        # a row's timeout
        at = now_ms() + 500
        for route in ROUTES:
            t = out[route]
            res = t.batch([{"callback_url": url_of(route, rec, row.name), "key": row.name,
                            "execute_at": at + 25 * i, "timeout_ms": TIMEOUT_MS,
                            "retry": {"max_attempts": ATTEMPTS, "backoff_ms": 50}}
                           for i, row in enumerate(ROWS)])
            out[route] = (t, {row.name: x["id"] for row, x in zip(ROWS, res)})
        yield out
    finally:
        for r, t in started:
            if t.proc and t.proc.poll() is None:
                t.kill9()
            r.stop()
        rec.close()
    for _, t in started:
        text = t.logtext()
        found = [s for s in SANITIZER_REPORT if s in text]
        assert not found, f"{t.log}: sanitizer report:\n{text[-4000:]}"


def kind_of(g, code):
    """The outcome label of the task's last attempt, from its record."""
    if g["status"] == "succeeded":
        return "2xx"
    if code:
        return "http_error"
    err = g.get("last_error", "").lower()
    return "timeout" if "timeout" in err or "timed out" in err else "connect_error"


def outcome(g, row):
    hist = g.get("attempt_history", [])
    err = g.get("last_error")
    want = row.expect["err"]
    took = [h["took_ms"] for h in hist]
    code = hist[-1].get("status_code") if hist else None
    assert g.get("last_status_code", code) == code, g
    timed = [ms >= TIMEOUT_MS * 0.9 for ms in took]
    return {"status": g["status"], "attempts": g["attempts"],
            "code": code, "kind": kind_of(g, code),
            # the phrase, when it is in the error (else the error, whole)
            "err": (None if err is None else
                    want if want and want in err else
                    "" if want == "" else err),
            "body": hist[-1].get("body") if hist else None,
            "ends": ("timeout" if all(timed) else "answer" if not any(timed) else
                     f"mixed {took}"),
            # the retry waited for the answer's Retry-After (backoff_ms is 50)
            "held": bool(len(hist) > 1 and hist[1]["at"] - hist[0]["at"] - hist[0]["took_ms"]
                         >= 0.9 * (row.held_ms or 10 ** 9))}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("row", [r.name for r in ROWS])
def test_row(table, route, row):
    t, ids = table[route]
    g = t.final(ids[row], timeout=30)
    assert outcome(g, BY_NAME[row]) == BY_NAME[row].expect, g


@pytest.mark.parametrize("route", ROUTES)
def test_attempts_counted_by_outcome(table, route):
    """Each route's /metrics count every attempt of the table under the
    row's outcome label: the label, not only the words, is the same."""
    t, ids = table[route]
    for tid in ids.values():
        t.final(tid, timeout=30)
    want = Counter()
    for row in ROWS:
        want[row.expect["kind"]] += row.expect["attempts"]
    with urllib.request.urlopen(f"http://127.0.0.1:{t.port}/metrics", timeout=10) as r:
        text = r.read().decode()
    got = Counter()
    for line in text.splitlines():
        if line.startswith("tickd_callback_attempts_total{"):
            label = line.split('outcome="', 1)[1].split('"', 1)[0]
            got[label] = int(float(line.rsplit(" ", 1)[1]))
    assert +got == +want, (got, want)
