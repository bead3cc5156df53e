"""The API server against requests crafted to make it break its own rules
(issue 12, section 1), over raw sockets."""
import pytest

from harness import read_to_end, rss_kib
from test_http import connect


def read_all(s):
    s.settimeout(3)
    return read_to_end(s, until_error=True)


@pytest.mark.parametrize("line,fields,code", [
    (b"HEAD /v1/stats HTTP/1.1", b"", b"401"),                    # the token gate
    (b"HEAD /healthz HTTP/1.1", b"Expect: x\r\n", b"417"),
    (b"HEAD /healthz HTTP/1.1", b"Content-Length: x\r\n", b"400"),
    (b"HEAD /healthz HTTP/1.1", b"Content-Length: 99999999\r\n", b"413"),
    (b"HEAD /healthz HTTP/1.1", b"Transfer-Encoding: gzip, chunked\r\n", b"501"),
])
def test_a_refused_head_request_gets_no_content(redis, tickd_factory, line, fields, code):
    # RFC 9110 9.3.2: no content in an answer to HEAD; a client or proxy
    # reads the bytes after the head as the next answer
    t = tickd_factory(redis, env={"TICKD_SERVER_API_TOKEN": "tok-9f2c"}).start()
    s = connect(t)
    s.sendall(line + b"\r\nHost: t\r\n" + fields + b"\r\n")
    data = read_all(s)
    s.close()
    assert data.startswith(b"HTTP/1.1 " + code), data[:80]
    assert data.endswith(b"\r\n\r\n"), data
    assert b"Content-Length: " in data


def test_an_error_after_a_head_request_still_has_content(tickd):
    # the HEAD flag ends with its answer: the next request's error has a body
    s = connect(tickd)
    s.sendall(b"HEAD /nope HTTP/1.1\r\nHost: t\r\n\r\nGET /x HTTP/1.1\nHost: t\n\n")
    data = read_all(s)
    s.close()
    first, rest = data.split(b"\r\n\r\n", 1)
    assert first.startswith(b"HTTP/1.1 404"), data
    assert rest.startswith(b"HTTP/1.1 400"), data
    assert rest.endswith(b"}\n"), rest


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
