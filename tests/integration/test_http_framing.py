"""How the API's HTTP server reads requests and frames its answers (RFC
9112, RFC 9110), spoken to over raw sockets: keep-alive and pipelining,
chunked bodies and their syntax, Content-Length and Transfer-Encoding,
Expect: 100-continue, HTTP/1.0, HEAD, absolute-form targets, Connection
tokens and field syntax, and the answers the server gives for itself (400,
413, 417, 431, 501), always as JSON, closing once the framing is lost."""
import json
import time

import pytest

from api_wire import (BODY, TASK, Reader, chunked, connect, post, post_bytes, read_all,
                      refused)
from harness import read_to_end


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


def test_nul_in_chunk_extension_is_400_not_a_crash(tickd):
    wire = (b"POST /healthz HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5;a\x00b\r\nhello\r\n0\r\n\r\n")
    refused(tickd, wire, 400, "chunk extension")
    assert tickd.proc.poll() is None


def test_content_length_with_transfer_encoding_is_400(tickd):
    wire = post(f"Content-Length: {len(chunked())}\r\nTransfer-Encoding: chunked\r\n", chunked())
    refused(tickd, wire, 400, "Transfer-Encoding: not allowed with Content-Length")
    wire = post(f"Transfer-Encoding: chunked\r\nContent-Length: {len(chunked())}\r\n", chunked())
    refused(tickd, wire, 400, "Transfer-Encoding: not allowed with Content-Length")


def test_bad_content_length_forms_are_400(tickd):
    n = len(BODY)
    for field in [f"Content-Length: {n}\r\nContent-Length: {n + 1}\r\n",
                  f"Content-Length: {n}, {n + 1}\r\n",
                  f"Content-Length: \x0b{n}\r\n",
                  f"Content-Length: +{n}\r\n",
                  f"Content-Length: 0x{n:x}\r\n",
                  f"Content-Length: {n}.0\r\n",
                  "Content-Length: \r\n"]:
        refused(tickd, post(field), 400, "Content-Length")
    # the same length given twice (or as a list) is one length (RFC 9110 8.6)
    s = connect(tickd)
    s.sendall(post(f"Content-Length: {n}, {n}\r\nContent-Length: {n}\r\n"))
    assert Reader(s).response()[0] in (200, 201)
    s.close()


def test_transfer_codings_other_than_a_final_chunked_are_refused(tickd):
    for te, code in [("gzip", 400), ("chunked, gzip", 400), ("identity", 400),
                     ("chunked;q=1", 400), ("chunked, chunked", 400),
                     ("gzip, chunked", 501), ("gzip\r\nTransfer-Encoding: chunked", 501),
                     ("chunked\r\nTransfer-Encoding: chunked", 400)]:
        refused(tickd, post(f"Transfer-Encoding: {te}\r\n", chunked()), code, "Transfer-Encoding")
    # the codings are read case-insensitively, empty list elements skipped
    s = connect(tickd)
    s.sendall(post("Transfer-Encoding: , Chunked\r\n", chunked()))
    assert Reader(s).response()[0] in (200, 201)
    s.close()


def test_chunk_sizes_are_hex_digits_only(tickd):
    for size in [b"0x%x" % len(BODY), b"+%x" % len(BODY), b" %x" % len(BODY),
                 b"%x " % len(BODY), b"-1"]:
        refused(tickd, post("Transfer-Encoding: chunked\r\n", chunked(size=size)), 400,
                "chunk size")
    # too large for any body, and far too large for 64 bits
    for size in [b"fffffffffff", b"1" + b"0" * 40]:
        s = connect(tickd)
        s.settimeout(3)
        s.sendall(post("Transfer-Encoding: chunked\r\n", size + b"\r\n"))
        r = Reader(s)
        assert r.response()[0] in (400, 413) and r.closed()
    assert tickd.request("GET", "/healthz")[0] == 200


def test_transfer_encoding_in_http10_is_400(tickd):
    refused(tickd, post("Transfer-Encoding: chunked\r\n", chunked(), version="1.0"), 400,
            "HTTP/1.0")


def test_control_characters_in_field_values_are_400(tickd):
    for value in [b"a\x00b", b"a\x01b", b"a\x1fb", b"a\x7fb", b"a\x0bb"]:
        wire = b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Thing: " + value + b"\r\n\r\n"
        refused(tickd, wire, 400, "X-Thing: control character")
    for value in [b"a\rb", b"a\nb"]:
        wire = b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Thing: " + value + b"\r\n\r\n"
        refused(tickd, wire, 400, "bare")
    # HTAB and obs-text are allowed
    s = connect(tickd)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Thing: a\tb\xe9\r\n\r\n")
    assert Reader(s).response()[0] == 200
    s.close()


def test_http11_needs_exactly_one_host(tickd):
    refused(tickd, b"GET /healthz HTTP/1.1\r\n\r\n", 400, "Host: missing")
    refused(tickd, b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400,
            "Host: given more than once")
    refused(tickd, b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400,
            "Host: given more than once")
    # HTTP/1.0 may leave it out
    s = connect(tickd)
    s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
    assert Reader(s).response()[0] == 200
    s.close()


def test_absolute_form_target_is_routed_on_its_path(tickd):
    s = connect(tickd)
    r = Reader(s)
    s.sendall(f"GET http://127.0.0.1:{tickd.port}/healthz HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert r.response()[0] == 200
    s.sendall(post(f"Content-Length: {len(BODY)}\r\n").replace(
        b"POST /v1/tasks", b"POST HTTP://tickd.example/v1/tasks"))
    status, _, body = r.response()
    assert status == 201 and body["id"], body
    s.close()


def test_absolute_form_and_head_are_still_behind_the_api_token(redis, tickd_factory):
    t = tickd_factory(redis, env={"TICKD_SERVER_API_TOKEN": "tok-9f2c"}).start()
    for line in [b"GET http://t/v1/stats HTTP/1.1", b"HEAD /v1/stats HTTP/1.1",
                 b"HEAD http://t/v1/tasks/x HTTP/1.1"]:
        s = connect(t)
        s.sendall(line + b"\r\nHost: t\r\n\r\n")
        data = s.recv(4096)
        assert data.startswith(b"HTTP/1.1 401"), (line, data[:60])
        s.close()
    s = connect(t)
    s.sendall(b"GET http://t/v1/stats HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer tok-9f2c\r\n\r\n")
    assert Reader(s).response()[0] == 200
    s.close()


def test_head_works_wherever_get_does(tickd):
    tid = tickd.post(TASK)["id"]
    for path in ["/healthz", "/v1/stats", f"/v1/tasks/{tid}"]:
        s = connect(tickd)
        s.sendall(f"HEAD {path} HTTP/1.1\r\nHost: t\r\n\r\nGET {path} HTTP/1.1\r\nHost: t\r\n"
                  f"Connection: close\r\n\r\n".encode())
        head, rest = read_to_end(s).split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 200"), (path, head)
        assert b"Content-Length: " in head
        # no body after HEAD's answer: the GET's answer comes next
        assert rest.startswith(b"HTTP/1.1 200"), (path, rest[:80])
        s.close()


def test_connection_is_a_list_of_tokens(tickd):
    # a token that merely contains "close" does not close
    s = connect(tickd)
    r = Reader(s)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: x-close-y\r\n\r\n")
    status, headers, _ = r.response()
    assert status == 200 and "connection" not in headers
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: upgrade\r\n"
              b"Connection: TE, Close\r\n\r\n")
    status, headers, _ = r.response()
    assert status == 200 and headers["connection"] == "close" and r.closed()
    # HTTP/1.0: keep-alive anywhere in the list
    s = connect(tickd)
    r = Reader(s)
    s.sendall(b"GET /healthz HTTP/1.0\r\nConnection: foo , Keep-Alive\r\n\r\n")
    status, headers, _ = r.response()
    assert status == 200 and headers["connection"] == "keep-alive"
    s.sendall(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive-ish\r\n\r\n")
    status, headers, _ = r.response()
    assert headers["connection"] == "close" and r.closed()


def test_bare_lf_is_refused_at_once(tickd):
    for wire in [b"GET /healthz HTTP/1.1\nHost: t\n\n",
                 b"GET /healthz HTTP/1.1\r\nHost: t\n\r\n",
                 b"GET /healthz HTTP/1.1\r\nHost: t\r\n\n"]:
        start = time.monotonic()
        refused(tickd, wire, 400, "bare LF")
        assert time.monotonic() - start < 1, "the answer waited"


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
