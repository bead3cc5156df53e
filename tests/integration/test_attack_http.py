"""The API server against requests crafted to make it break its own rules
(issue 12, section 1), over raw sockets."""
import socket

import pytest

from test_http import connect


def read_all(s):
    s.settimeout(3)
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    return data


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
