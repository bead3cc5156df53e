"""Raw receivers for the tests of the callback client
(test_callback_framing.py, test_callback_connections.py and others): one
scripted per path (Scripted; the `scripted` fixture of conftest.py), one that
reads a head and runs a given answer (Raw; the `raw_servers` fixture), and
the two paths a callback can take (PATHS, url_for)."""
import socket
import threading
import time

from harness import TcpServer, read_head, read_request


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

    def __init__(self, close_idle_ms=None, port=0):
        self.close_idle_ms = close_idle_ms
        self.requests = []
        self.conns = 0
        self.accepted = []  # (connection, time) of each accept
        self.peer_closed = []  # (connection, time) of each close by the client
        self.lock = threading.Lock()
        super().__init__(self.serve, backlog=512, port=port)

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def serve(self, c):
        with self.lock:
            self.conns += 1
            n = self.conns
            self.accepted.append((n, time.time()))
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


def ok_answer(c):
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
