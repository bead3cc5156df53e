"""W3C Trace Context across the delay: the producer's traceparent is kept with
the task and every attempt of its callback carries the same trace id with a
span id of its own (trace.h), checked against the W3C rules here."""
import re
import subprocess

from harness import now_ms, wait_for

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def w3c(tp):
    """(trace id, span id, flags) of a traceparent sent by tickd, checked
    against the W3C rules for version 00."""
    m = TRACEPARENT.match(tp)
    assert m, tp
    trace, span, flags = m.groups()
    assert trace != "0" * 32 and span != "0" * 16, tp
    return trace, span, flags


def derived_span(parent, tid, attempt, due):
    """trace.h: the span of attempt n, due at due (ms), of task id under its
    stored parent, by OpenSSL's SipHash-2-4 under the documented key."""
    data = f"{parent}\n{due}".encode() + b"\0" + tid.encode() + b"\0" + str(attempt).encode()
    out = subprocess.run(["openssl", "mac", "-macopt", "hexkey:" + b"tickd trace span".hex(),
                          "-macopt", "size:8", "-in", "/dev/stdin", "SIPHASH"],
                         input=data, capture_output=True, check=True)
    return out.stdout.decode().strip().lower()


def calls_of(receiver, tid, n):
    wait_for(lambda: len(receiver.by_task().get(tid, [])) >= n, 20, what=f"{n} calls of {tid}")
    return receiver.by_task()[tid]


def test_each_attempt_continues_the_producers_trace_with_a_span_of_its_own(tickd, receiver):
    state = "congo=t61rcWkgMzE, rojo=00f067aa0ba902b7"
    code, body = tickd.request("POST", "/v1/tasks",
                               {"callback_url": receiver.url("/fail/2"), "delay_ms": 0,
                                "retry": {"max_attempts": 3, "backoff_ms": 1}},
                               headers={"traceparent": PARENT, "tracestate": state})
    assert code == 201, body
    tid = body["id"]
    calls = calls_of(receiver, tid, 3)
    spans = set()
    for n, c in enumerate(calls, 1):
        trace, span, flags = w3c(c["headers"]["traceparent"])
        assert trace == PARENT[3:35] and flags == "01"
        assert span != PARENT[36:52]
        due = c["headers"]["tickd-scheduled-at"]
        assert span == derived_span(PARENT, tid, n, due)  # stable: a function of the attempt
        assert c["headers"]["tracestate"] == state
        spans.add(span)
    assert len(spans) == 3
    assert tickd.get(tid)[1]["traceparent"] == PARENT  # kept with the task, shown


def test_a_task_field_wins_and_a_later_version_is_sent_as_00(tickd, receiver):
    mine = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
    code, body = tickd.request("POST", "/v1/tasks",
                               {"callback_url": receiver.url(), "traceparent": mine},
                               headers={"traceparent": PARENT})
    assert code == 201
    trace, _, flags = w3c(calls_of(receiver, body["id"], 1)[0]["headers"]["traceparent"])
    assert (trace, flags) == (mine[3:35], "00")
    exact = "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"  # 55, nothing after
    assert tickd.post({"callback_url": receiver.url(), "traceparent": exact})["id"]
    later = "cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-comes-next"
    tid = tickd.post({"callback_url": receiver.url(), "traceparent": later})["id"]
    assert tickd.get(tid)[1]["traceparent"] == "00" + later[2:55]
    w3c(calls_of(receiver, tid, 1)[0]["headers"]["traceparent"])


def test_a_batch_takes_the_requests_trace_for_each_task(tickd, receiver):
    results = tickd.request("POST", "/v1/tasks/batch",
                            {"tasks": [{"callback_url": receiver.url()}] * 3},
                            headers={"traceparent": PARENT})[1]["results"]
    spans = set()
    for r in results:
        trace, span, _ = w3c(calls_of(receiver, r["id"], 1)[0]["headers"]["traceparent"])
        assert trace == PARENT[3:35]
        spans.add(span)
    assert len(spans) == 3


BAD = [
    ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1", "55 characters"),
    ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "version: ff"),
    ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", "trace id"),
    ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "parent id"),
    ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "trace id"),
    ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", "flags"),
    ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-", "55 characters"),
    ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", "55 characters"),
]


def test_invalid_trace_context_is_refused_as_a_field_and_ignored_as_a_header(tickd, receiver):
    for tp, why in BAD:
        code, body = tickd.post({"callback_url": receiver.url(), "traceparent": tp}, expect=None)
        assert code == 400 and body["error"]["message"].startswith("traceparent: "), (tp, body)
        assert why in body["error"]["message"], (tp, body)
        # the same as the request's header: ignored (W3C), the task stored untraced
        code, body = tickd.request("POST", "/v1/tasks", {"callback_url": receiver.url()},
                                   headers={"traceparent": tp, "tracestate": "a=b"})
        assert code == 201, body
        assert "traceparent" not in tickd.get(body["id"])[1]
        assert "traceparent" not in calls_of(receiver, body["id"], 1)[0]["headers"]
    for field, value, why in [("tracestate", "a=b", "needs traceparent"),
                              ("header", {"traceparent": PARENT}, "set by tickd")]:
        code, body = tickd.post({"callback_url": receiver.url(), field: value}, expect=None)
        assert code == 400 and why in body["error"]["message"], body
    for state in ["", "A=b", "a=b,c", "a=" + "x" * 600, ",".join(f"k{i}=v" for i in range(33))]:
        code, body = tickd.post({"callback_url": receiver.url(), "traceparent": PARENT,
                                 "tracestate": state}, expect=None)
        assert code == 400 and body["error"]["message"].startswith("tracestate: "), (state, body)


def test_each_schedule_run_starts_a_trace_unless_its_template_gives_one(tickd, receiver):
    start = now_ms() + 500
    for key, extra in [("fresh", {}), ("given", {"traceparent": PARENT})]:
        code, body = tickd.request("POST", "/v1/schedules", {
            "key": key, "every_ms": 1000, "start_at": start, "times": 2,
            "task": dict({"callback_url": receiver.url(f"/{key}")}, **extra)})
        assert code == 201, body
    wait_for(lambda: sum(c["path"] in ("/fresh", "/given") for c in receiver.calls) >= 4, 20,
             what="two runs of each")
    fresh = [w3c(c["headers"]["traceparent"]) for c in receiver.calls if c["path"] == "/fresh"]
    given = [w3c(c["headers"]["traceparent"]) for c in receiver.calls if c["path"] == "/given"]
    assert len({t for t, _, _ in fresh}) == 2  # a trace per run
    assert {t for t, _, _ in given} == {PARENT[3:35]}
    assert len({s for _, s, _ in given}) == 2


def test_a_schedule_stored_with_trace_headers_keeps_running(redis, receiver, tickd_factory):
    """A template stored before traceparent was a field of its own may carry it
    as a header, which a task may no longer set: its runs take it as the field."""
    t = tickd_factory(redis).start()
    code, _ = t.request("POST", "/v1/schedules", {
        "key": "old", "every_ms": 1000,
        "task": {"callback_url": receiver.url("/s"), "header": {"x-tp": PARENT}}})
    assert code == 201
    assert t.stop() == 0
    # as an earlier tickd stored it: the header named traceparent
    rewritten = 0
    for key in redis.cli("--scan", "--pattern", "tickd:*sdef").split():
        for f, v in zip(*[iter(redis.cli("HGETALL", key).split("\n"))] * 2):
            if "x-tp" in v:
                redis.cli("HSET", key, f, v.replace("x-tp", "traceparent"))
                rewritten += 1
    assert rewritten
    t.start()
    # runs made before the stop carry traces of their own; the later ones, the header's
    wait_for(lambda: any(c["path"] == "/s" and w3c(c["headers"]["traceparent"])[0] == PARENT[3:35]
                         for c in receiver.calls), 15, what="a run under the header's trace")
    assert "set by tickd, not allowed" not in t.logtext()
