"""Text is UTF-8 (RFC 3629) wherever it comes in or goes out, against the
real binary and Redis: a string of a request body that is not UTF-8 is
refused with 400 naming the field, nothing stored; a receiver's answer that
is not UTF-8 is stored cleaned (each bad byte '?'); a 400 quoting such bytes
quotes them cleaned. Every answer is read with a strict UTF-8 decoder."""
import json
import re
import socket

import pytest

from harness import wait_for
from receivers import PATHS, Raw, url_for

BAD = b"A\xff\x80\x80B\xf8\x88\x80C"  # F5-FF lead no UTF-8 sequence


def send(tickd, head, body=b""):
    """(status, body as JSON): the answer must be UTF-8 (strict decoder)."""
    s = socket.create_connection(("127.0.0.1", tickd.port), timeout=30)
    s.sendall(head + (b"Content-Length: %d\r\n\r\n" % len(body) if body else b"\r\n") + body)
    data = b""
    while True:
        d = s.recv(65536)
        data += d
        h, _, b = data.partition(b"\r\n\r\n")
        m = re.search(rb"\r\ncontent-length: *(\d+)", h, re.I)
        if not d or (m and len(b) >= int(m.group(1))):
            break
    s.close()
    status = int(data.split(b" ", 2)[1])
    return status, json.loads(b.decode("utf-8"))


def post(tickd, path, body):
    return send(tickd, b"POST " + path.encode() + b" HTTP/1.1\r\nHost: t\r\n"
                b"Content-Type: application/json\r\n", body)


def stored(redis):
    return [k for k in redis.cli("--scan", "--pattern", "*").split()
            if k.endswith((":task", ":sdef"))]


@pytest.mark.parametrize("field,body", [
    ("req", b'{"callback_url":"%s","req":"' + BAD + b'"}'),
    ("req.a[1].b", b'{"callback_url":"%s","req":{"a":[1,{"b":"\xed\xa0\x80"}]}}'),
    ("header.X-A", b'{"callback_url":"%s","header":{"X-A":"v\xc0\xaf"}}'),
    ("key", b'{"callback_url":"%s","key":"k\xf4\x90\x80\x80"}'),
    ("queue", b'{"callback_url":"%s","queue":"q\xe2\x82"}'),
    ("on_failure.callback_url", b'{"callback_url":"%s","on_failure":{"callback_url":"%s\xff"}}'),
    ("callback_url", b'{"callback_url":"%s\xf8\x88\x80\x80\x80"}'),
    ("cro???", b'{"callback_url":"%s","cro\xff\x80\x80":1}'),
])
def test_a_task_string_not_utf8_is_refused_naming_it(tickd, redis, receiver, field, body):
    url = receiver.url().encode()
    code, ans = post(tickd, "/v1/tasks", body.replace(b"%s", url))
    assert code == 400, ans
    assert ans["error"]["code"] == "invalid_argument"
    assert ans["error"]["message"].startswith(f"{field}: not valid UTF-8 (byte 0x"), ans
    assert stored(redis) == []


def test_batch_schedule_and_queue_refuse_strings_not_utf8(tickd, redis, receiver):
    url = receiver.url().encode()
    code, ans = post(tickd, "/v1/tasks/batch", b'{"tasks":[{"callback_url":"' + url +
                     b'"},{"callback_url":"' + url + b'","req":"' + BAD + b'"}]}')
    assert code == 400 and ans["error"]["message"].startswith(
        "tasks[1].req: not valid UTF-8 (byte 0xFF at byte 1"), ans
    code, ans = post(tickd, "/v1/schedules", b'{"every_ms":1000,"task":{"callback_url":"' + url +
                     b'","header":{"X-\xff":"v"}}}')
    assert code == 400 and ans["error"]["message"].startswith(
        "task.header.X-?: not valid UTF-8"), ans
    code, ans = send(tickd, b"PUT /v1/queues/q HTTP/1.1\r\nHost: t\r\n"
                     b"Content-Type: application/json\r\n", b'{"rate\xff\x80\x80":1}')
    assert code == 400 and ans["error"]["message"].startswith("rate???: not valid UTF-8"), ans
    assert stored(redis) == []
    # text that is UTF-8 is taken, and sent exactly
    tid = tickd.post({"callback_url": receiver.url(), "req": "caf\u00e9 \U0001F600 \U0010FFFF"})["id"]
    call = wait_for(lambda: receiver.by_task().get(tid), what="the callback")[0]
    assert call["body"].decode("utf-8") == "caf\u00e9 \U0001F600 \U0010FFFF"


def test_errors_quote_bytes_from_outside_as_utf8(tickd):
    code, ans = send(tickd, b"GET /v1/tasks?status=%FF%80%80x%F8%88%80 HTTP/1.1\r\nHost: t\r\n")
    assert code == 400 and ans["error"]["message"].startswith("status: ???x??? is not one of"), ans
    code, ans = send(tickd, b"POST /v1/tasks HTTP/1.1\r\nHost: t\r\nContent-Type: text/" + BAD +
                     b"\r\n", b"{}")
    assert code == 415, ans
    assert ans["error"]["message"] == "Content-Type: must be application/json, not text/A???B???C"


@pytest.mark.parametrize("kind", PATHS)
def test_a_receivers_answer_not_utf8_reads_back_as_utf8(tickd, kind):
    raw = Raw(lambda c: c.sendall(b"HTTP/1.1 500 Oops\r\nContent-Length: %d\r\n\r\n" % len(BAD)
                                  + BAD))
    try:
        tid = tickd.post({"callback_url": url_for(kind, "127.0.0.1", raw.port, "/x"),
                          "retry": {"max_attempts": 1}})["id"]
        get = b"GET /v1/tasks/" + tid.encode() + b" HTTP/1.1\r\nHost: t\r\n"
        task = wait_for(lambda: (lambda t: t["status"] == "failed" and t)(send(tickd, get)[1]),
                        what=f"task {tid} failed")
    finally:
        raw.close()
    assert task["last_status_code"] == 500
    assert task["attempt_history"][-1]["body"] == "A???B???C", task
    # and in a listing
    code, listing = send(tickd, b"GET /v1/tasks?status=failed HTTP/1.1\r\nHost: t\r\n")
    assert code == 200
    assert [t["attempt_history"][-1]["body"] for t in listing["tasks"]] == ["A???B???C"]


def test_a_record_stored_not_utf8_still_answers_utf8(tickd, redis):
    """A record written before the check (by an older build) is answered
    cleaned: the answer is UTF-8 whatever Redis holds."""
    tid = tickd.post({"callback_url": "http://127.0.0.1:1/", "retry": {"max_attempts": 1}})["id"]
    get = b"GET /v1/tasks/" + tid.encode() + b" HTTP/1.1\r\nHost: t\r\n"
    wait_for(lambda: send(tickd, get)[1]["status"] == "failed", what=f"task {tid} failed")
    key = "tickd:{%s}:task" % tid.rsplit(".", 2)[0]
    state = json.loads(redis.cli("HGET", key, "s:" + tid))
    # lone surrogates reach redis-cli's argv as the raw bytes FF 80 80
    state["err"] = "old A\udcff\udc80\udc80B"
    redis.cli("HSET", key, "s:" + tid, json.dumps(state, ensure_ascii=False))
    code, task = send(tickd, get)
    assert code == 200 and task["last_error"] == "old A???B", task
