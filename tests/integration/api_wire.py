"""Speaking to tickd's API over raw sockets, for the tests of its HTTP
server (test_http_framing.py, test_http_limits.py): a connection, a reader
of answers, request bytes built by hand, and the check that a request is
refused with the connection closed."""
import json
import socket

from harness import now_ms, read_to_end


# a fixed execute_at, so that the same key gives the same id
TASK = {"callback_url": "http://127.0.0.1:9/x", "execute_at": now_ms() + 3600000}


def connect(tickd):
    s = socket.create_connection(("127.0.0.1", tickd.port), timeout=10)
    return s


def post_bytes(body, extra="", version="1.1"):
    """A whole POST /v1/tasks request: `body` with its Content-Length."""
    return post(f"Content-Length: {len(body)}\r\n{extra}", body, version)


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


def read_all(s):
    s.settimeout(3)
    return read_to_end(s, until_error=True)


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
