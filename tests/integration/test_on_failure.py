"""on_failure and callback.on_failure_url: a task that ends failed is told
about once, with its attempts and last error, to its own on_failure receiver
or the configured one; never for a task that succeeded or was cancelled.
Real receivers (one for the tasks, one for the events), the real binary."""
import json

import pytest

from harness import Receiver, now_ms, wait_for


@pytest.fixture
def events():
    rec = Receiver()
    yield rec
    rec.close()


def events_of(rec, tid):
    return [c for c in rec.by_task().get(tid, []) if c["headers"].get("tickd-event")]


def wait_event(rec, tid, n=1, timeout=20):
    return wait_for(lambda: len(events_of(rec, tid)) >= n and events_of(rec, tid), timeout,
                    what=f"{n} task.failed event(s) of {tid}")


def test_fires_once_with_the_last_error(tickd, receiver, events):
    tid = tickd.post({"callback_url": receiver.url("/status/503"), "req": {"n": 1},
                      "header": {"Authorization": "Bearer for-the-receiver-only"},
                      "retry": {"max_attempts": 2, "backoff_ms": 50},
                      "on_failure": {"callback_url": events.url("/dead-letter"),
                                     "method": "PUT", "header": {"X-Team": "billing"}}})["id"]
    # a later task, failing too, tells when tid's event would have come twice
    marker = tickd.post({"callback_url": receiver.url("/status/500"),
                         "retry": {"max_attempts": 1}, "delay_ms": 1500,
                         "on_failure": {"callback_url": events.url("/dead-letter")}})["id"]
    ev = wait_event(events, tid)[0]
    wait_event(events, marker)
    assert len(events_of(events, tid)) == 1
    assert ev["method"] == "PUT" and ev["path"] == "/dead-letter"
    h = ev["headers"]
    assert h["tickd-event"] == "task.failed" and h["tickd-task-id"] == tid
    assert h["x-team"] == "billing" and h["content-type"] == "application/json"
    assert "authorization" not in h
    body = json.loads(ev["body"])
    assert body["type"] == "task.failed" and body["id"] == tid
    assert body["attempts"] == 2 and body["last_status_code"] == 503
    assert body["last_error"] == "HTTP 503"
    assert body["task"]["callback_url"] == receiver.url("/status/503")
    assert body["task"]["req"] == {"n": 1}
    assert "header" not in body["task"] and "on_failure" not in body["task"]
    code, task = tickd.get(tid)
    assert task["status"] == "failed" and body["failed_at"] >= task["finished_at"]
    assert task["on_failure"]["callback_url"] == events.url("/dead-letter")
    assert len(receiver.by_task()[tid]) == 2


def test_carries_a_connection_error_whole(tickd, events):
    tid = tickd.post({"callback_url": "http://127.0.0.1:9/nothing-listens",
                      "retry": {"max_attempts": 1},
                      "on_failure": {"callback_url": events.url()}})["id"]
    body = json.loads(wait_event(events, tid)[0]["body"])
    assert body["last_status_code"] is None
    assert "Connection refused" in body["last_error"], body
    assert body["last_error"] == tickd.get(tid)[1]["last_error"]


def test_never_for_succeeded_or_cancelled(tickd, receiver, events):
    onf = {"callback_url": events.url()}
    ok = tickd.post({"callback_url": receiver.url("/ok"), "on_failure": onf})["id"]
    # fails once, then waits long for its retry: cancelled meanwhile
    waiting = tickd.post({"callback_url": receiver.url("/status/500"), "on_failure": onf,
                          "retry": {"max_attempts": 3, "backoff_ms": 600000}})["id"]
    later = tickd.post({"callback_url": receiver.url("/ok"), "on_failure": onf,
                        "delay_ms": 600000})["id"]
    wait_for(lambda: tickd.get(ok)[1]["status"] == "succeeded", 15, what="ok succeeded")
    wait_for(lambda: tickd.get(waiting)[1]["attempts"] == 1, 15, what="first attempt")
    assert tickd.delete(waiting)[0] == 204
    assert tickd.delete(later)[0] == 204
    # a failing task after them all: its event comes after any of theirs would
    marker = tickd.post({"callback_url": receiver.url("/status/500"), "on_failure": onf,
                         "retry": {"max_attempts": 1}})["id"]
    wait_event(events, marker)
    assert events.by_task().keys() == {marker}


def test_global_url_for_tasks_naming_none(redis, tickd_factory, receiver, events):
    own = Receiver()
    try:
        t = tickd_factory(redis, env={"TICKD_CALLBACK_ON_FAILURE_URL": events.url("/all")}).start()
        plain = t.post({"callback_url": receiver.url("/status/404"),
                        "retry": {"max_attempts": 1}})["id"]
        named = t.post({"callback_url": receiver.url("/status/404"),
                        "retry": {"max_attempts": 1},
                        "on_failure": {"callback_url": own.url("/mine")}})["id"]
        ev = wait_event(events, plain)[0]
        assert ev["method"] == "POST" and ev["path"] == "/all"
        wait_event(own, named)
        # the task that named its own receiver is not told to the global one
        wait_for(lambda: t.get(named)[1]["status"] == "failed", 10, what="named failed")
        assert named not in events.by_task()
    finally:
        own.close()


def test_event_retried_by_its_own_policy(tickd, receiver, events):
    tid = tickd.post({"callback_url": receiver.url("/status/500"), "retry": {"max_attempts": 1},
                      "on_failure": {"callback_url": events.url("/fail/2")}})["id"]
    evs = wait_event(events, tid, 3, timeout=30)
    assert [e["headers"]["tickd-attempt"] for e in evs] == ["1", "2", "3"]
    assert len({e["body"] for e in evs}) == 1


def test_signed_like_any_callback(redis, tickd_factory, receiver, events):
    from test_signing import gen_secret, verify
    secret = gen_secret()
    t = tickd_factory(redis, env={"TICKD_CALLBACK_SIGNING_SECRETS": secret}).start()
    tid = t.post({"callback_url": receiver.url("/status/500"), "retry": {"max_attempts": 1},
                  "on_failure": {"callback_url": events.url()}})["id"]
    ev = wait_event(events, tid)[0]
    assert ev["headers"]["webhook-id"] == tid + "~task.failed"
    assert verify([secret], [ev]) == [[(True, None)]]


def test_no_task_id_is_an_events_webhook_id(redis, tickd_factory, receiver, events):
    """A receiver de-duplicates by webhook-id: the event about task k must not
    share it with a task keyed k.task.failed (one bucket: the same slice)."""
    from test_signing import gen_secret
    t = tickd_factory(redis, env={"TICKD_CALLBACK_SIGNING_SECRETS": gen_secret(),
                                  "TICKD_SCHEDULER_BUCKETS": "1"}).start()
    at = now_ms() + 500
    failing, other = t.batch([
        {"key": "k", "callback_url": receiver.url("/status/500"), "execute_at": at,
         "retry": {"max_attempts": 1}, "on_failure": {"callback_url": events.url()}},
        {"key": "k.task.failed", "callback_url": events.url(), "execute_at": at}])
    ev = wait_event(events, failing["id"])[0]
    call = wait_for(lambda: events.by_task().get(other["id"]), 10, what="the other task")[0]
    assert ev["headers"]["webhook-id"] != call["headers"]["webhook-id"]


@pytest.mark.parametrize("onf,message", [
    ("http://x", "on_failure: must be an object with callback_url, method, header"),
    ({}, "on_failure.callback_url: required"),
    ({"callback_url": "ftp://x"}, "on_failure.callback_url: must be an absolute http:// or https:// URL"),
    ({"callback_url": "http://127.0.0.1:9/", "method": "TRACE"},
     "on_failure.method: must be one of GET, POST, PUT, PATCH, DELETE"),
    ({"callback_url": "http://127.0.0.1:9/", "header": {"tickd-event": "x"}},
     "on_failure.header.tickd-event: set by tickd, not allowed"),
    ({"callback_url": "http://127.0.0.1:9/", "retry": {}}, "on_failure.retry: unknown field"),
    ({"callback_url": "http://169.254.169.254/"}, "on_failure.callback_url: "),
])
def test_bad_on_failure_is_400_naming_the_field(tickd, onf, message):
    code, body = tickd.post({"callback_url": "http://127.0.0.1:9/", "on_failure": onf},
                            expect=None)
    assert code == 400 and body["error"]["message"].startswith(message), body


def test_bad_global_url_stops_tickd(tmp_path):
    import os
    import subprocess
    from harness import TICKD
    for url, why in [("ftp://x/", "must be an absolute http:// or https:// URL"),
                     ("http://169.254.169.254/", "169.254")]:
        r = subprocess.run([TICKD, "--store", "memory", "--listen", "127.0.0.1:0"],
                           env={**os.environ, "TICKD_CALLBACK_ON_FAILURE_URL": url},
                           capture_output=True, text=True, timeout=20)
        assert r.returncode == 2 and "callback.on_failure_url: " in r.stderr \
            and why in r.stderr, r.stderr


def test_stop_waits_for_events_and_never_crashes(redis, tickd_factory, receiver, events):
    """SIGTERM while a task's last attempt runs: its end is recorded during
    the stop, and its event is sent within the grace period before tickd
    exits 0 (the workers stay until every attempt is recorded)."""
    t = tickd_factory(redis).start()
    tid = t.post({"callback_url": receiver.url("/slow/3000"), "timeout_ms": 400,
                  "retry": {"max_attempts": 1},
                  "on_failure": {"callback_url": events.url("/slow/300")}})["id"]
    wait_for(lambda: receiver.by_task().get(tid), 10, what="the attempt under way")
    assert t.stop() == 0, t.logtext()
    log = t.logtext()
    assert len(events_of(events, tid)) == 1, log
    assert "not sent" not in log and "Sanitizer" not in log
