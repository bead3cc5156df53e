"""callback.proxy and callback.no_proxy: http:// and https:// callbacks
through a real forward proxy (a small one here: CONNECT tunnels for https://,
absolute-form requests for http://), hosts in no_proxy called directly, and
the destination policy applied to the proxy's address."""
import socket
import threading

import pytest

from harness import TcpServer, pipe, read_head
from tls_kit import PKI, TLSReceiver, finished


class Proxy(TcpServer):
    """A forward HTTP proxy on a free port. It records the first line of
    every request it is sent ("CONNECT host:port HTTP/1.1", "POST
    http://host:port/path HTTP/1.1"), then carries the bytes both ways."""

    def __init__(self, refuse=False):
        self.refuse = refuse  # answer every CONNECT 403
        self.lines = []
        self.lock = threading.Lock()
        super().__init__(self.serve, backlog=64)

    def serve(self, c):
        head, rest = read_head(c)
        if head is None:
            return
        line = head.split(b"\r\n", 1)[0].decode()
        with self.lock:
            self.lines.append(line)
        method, target, version = line.split(" ")
        if method == "CONNECT" and self.refuse:
            c.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            c.close()
            return
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
            up = socket.create_connection((host, int(port)))
            c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            # absolute form: to the origin in origin form; the connection is
            # kept for this origin (enough for one receiver per test)
            hostport, path = target.split("://", 1)[1].split("/", 1)
            host, port = hostport.rsplit(":", 1)
            up = socket.create_connection((host, int(port)))
            rest = (f"{method} /{path} {version}\r\n".encode() + head.partition(b"\r\n")[2] +
                    b"\r\n\r\n" + rest)
        if rest:
            up.sendall(rest)
        threading.Thread(target=pipe, args=(up, c), daemon=True).start()
        pipe(c, up)

    def seen(self):
        with self.lock:
            return list(self.lines)


class Socks5(Proxy):
    """A SOCKS5 proxy (no authentication, CONNECT only), recording
    "SOCKS5 host:port" for each connection: the host as the client sent it,
    an address (socks5://) or a name (socks5h://)."""

    def serve(self, c):
        def take(n):
            buf = b""
            while len(buf) < n:
                d = c.recv(n - len(buf))
                if not d:
                    raise OSError("closed")
                buf += d
            return buf
        try:
            _, nmethods = take(2)
            take(nmethods)
            c.sendall(b"\x05\x00")
            _, cmd, _, atyp = take(4)
            if atyp == 1:
                host = socket.inet_ntoa(take(4))
            elif atyp == 3:
                host = take(take(1)[0]).decode()
            else:
                host = socket.inet_ntop(socket.AF_INET6, take(16))
            port = int.from_bytes(take(2), "big")
            with self.lock:
                self.lines.append(f"SOCKS5 {host}:{port}")
            up = socket.create_connection((host, port))
            c.sendall(b"\x05\x00\x00\x01" + bytes(6))
        except OSError:
            c.close()
            return
        threading.Thread(target=pipe, args=(up, c), daemon=True).start()
        pipe(c, up)


@pytest.fixture
def proxy():
    p = Proxy()
    yield p
    p.close()


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return PKI(str(tmp_path_factory.mktemp("pki")))



def test_http_callback_through_the_proxy(redis, tickd_factory, receiver, proxy):
    t = tickd_factory(redis, env={"TICKD_CALLBACK_PROXY": f"http://127.0.0.1:{proxy.port}"}).start()
    tid = t.post({"callback_url": receiver.url("/ok"), "req": {"a": 1}})["id"]
    assert finished(t, tid)["status"] == "succeeded"
    assert f"POST http://127.0.0.1:{receiver.port}/ok HTTP/1.1" in proxy.seen()
    call = receiver.by_task()[tid][0]
    assert call["body"] == b'{"a":1}' and call["headers"]["tickd-attempt"] == "1"


def test_https_callback_tunnelled(redis, tickd_factory, pki, proxy):
    rec = TLSReceiver(pki)
    try:
        t = tickd_factory(redis, env={"TICKD_CALLBACK_PROXY": f"http://127.0.0.1:{proxy.port}",
                                      "TICKD_CALLBACK_CA_FILE": pki.path("ca.crt")}).start()
        tid = t.post({"callback_url": rec.url("/tls")})["id"]
        assert finished(t, tid)["status"] == "succeeded"
        assert f"CONNECT 127.0.0.1:{rec.port} HTTP/1.1" in proxy.seen()
        assert rec.by_task()[tid][0]["path"] == "/tls"
    finally:
        rec.close()


@pytest.mark.parametrize("scheme,host,seen", [("socks5", "127.0.0.1", "127.0.0.1"),
                                               ("socks5h", "localhost", "localhost")])
def test_socks5_carries_http_and_https(redis, tickd_factory, receiver, pki, scheme, host, seen):
    p = Socks5()
    rec = TLSReceiver(pki)
    try:
        t = tickd_factory(redis, env={"TICKD_CALLBACK_PROXY": f"{scheme}://127.0.0.1:{p.port}",
                                      "TICKD_CALLBACK_CA_FILE": pki.path("ca.crt")}).start()
        plain = t.post({"callback_url": f"http://{host}:{receiver.port}/plain"})["id"]
        tls = t.post({"callback_url": f"https://{host}:{rec.port}/tls"})["id"]
        assert finished(t, plain)["status"] == "succeeded"
        assert finished(t, tls)["status"] == "succeeded"
        assert {f"SOCKS5 {seen}:{receiver.port}", f"SOCKS5 {seen}:{rec.port}"} <= set(p.seen())
    finally:
        rec.close()
        p.close()


def test_no_proxy_hosts_called_directly(redis, tickd_factory, receiver, proxy):
    t = tickd_factory(redis, env={"TICKD_CALLBACK_PROXY": f"http://127.0.0.1:{proxy.port}",
                                  "TICKD_CALLBACK_NO_PROXY": "localhost"}).start()
    direct = t.post({"callback_url": f"http://localhost:{receiver.port}/direct"})["id"]
    proxied = t.post({"callback_url": receiver.url("/proxied")})["id"]
    assert finished(t, direct)["status"] == "succeeded"
    assert finished(t, proxied)["status"] == "succeeded"
    seen = proxy.seen()
    assert any("/proxied" in s for s in seen) and not any("/direct" in s for s in seen), seen


def test_policy_applies_to_the_proxy_address(redis, tickd_factory, receiver, proxy):
    t = tickd_factory(redis, env={"TICKD_CALLBACK_PROXY": f"http://127.0.0.1:{proxy.port}",
                                  "TICKD_CALLBACK_DENY": "127.0.0.1/32"}).start()
    tid = t.post({"callback_url": f"http://localhost:{receiver.port}/ok"})["id"]
    task = finished(t, tid)
    assert task["status"] == "failed" and "destination denied by policy" in task["last_error"]
    assert proxy.seen() == [] and receiver.count() == 0


def test_dead_proxy_error_says_so(redis, tickd_factory, receiver):
    from harness import free_port
    port = free_port()
    t = tickd_factory(redis, env={"TICKD_CALLBACK_PROXY": f"http://127.0.0.1:{port}"}).start()
    tid = t.post({"callback_url": receiver.url("/ok"), "retry": {"max_attempts": 1}})["id"]
    task = finished(t, tid)
    assert task["status"] == "failed", task
    assert task["last_error"].startswith("proxy unreachable (callback.proxy): Couldn't connect"), task


def test_tunnel_refused_by_the_proxy(redis, tickd_factory, pki):
    p = Proxy(refuse=True)
    try:
        t = tickd_factory(redis, env={"TICKD_CALLBACK_PROXY": f"http://127.0.0.1:{p.port}"}).start()
        tid = t.post({"callback_url": "https://127.0.0.1:9/x", "retry": {"max_attempts": 1}})["id"]
        task = finished(t, tid)
        assert task["status"] == "failed", task
        assert task["last_error"].startswith("proxy refused the tunnel (callback.proxy): HTTP 403"), task
    finally:
        p.close()


@pytest.mark.parametrize("url,why", [
    ("http://127.0.0.1", "callback.proxy: give the port"),
    ("http://127.0.0.1:3128/x", "callback.proxy: no path after host:port"),
    ("gopher://127.0.0.1:70", "callback.proxy: must be http://, https://, socks5:// or socks5h://"),
])
def test_bad_proxy_stops_tickd(url, why):
    import os
    import subprocess
    from harness import TICKD
    r = subprocess.run([TICKD, "--store", "memory", "--listen", "127.0.0.1:0"],
                       env={**os.environ, "TICKD_CALLBACK_PROXY": url},
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 2 and why in r.stderr, r.stderr
