"""Tasks that expire: with expires_at or ttl_ms, a task no attempt has begun
by then ends `expired`, never called (a queue paused, tickd down, retries
past it), on the Redis store, the memory store and a cluster; an attempt begun
is never cut short."""
import json

from harness import Receiver, now_ms, wait_for
from conftest import replicas

FAST = {"TICKD_SCHEDULER_TICK_MS": "200", "TICKD_SCHEDULER_LOOKAHEAD_MS": "250"}


def final(t, tid, timeout=20):
    wait_for(lambda: t.get(tid)[1]["status"] in ("succeeded", "failed", "expired"), timeout,
             what=f"{tid} final")
    return t.get(tid)[1]


def test_bad_expiry_is_refused_naming_the_field(tickd, receiver):
    at = now_ms() + 60000
    for task, why in [
        ({"execute_at": at, "expires_at": at}, "expires_at: must be after execute_at"),
        ({"execute_at": at, "expires_at": at - 1000}, "expires_at: must be after execute_at"),
        ({"ttl_ms": -5}, "ttl_ms: must be an integer from 1"),
        ({"ttl_ms": 0}, "ttl_ms: must be an integer from 1"),
        ({"ttl_ms": 1.5}, "ttl_ms: must be an integer"),
        ({"ttl_ms": 1000, "expires_at": at}, "expires_at: give expires_at or ttl_ms, not both"),
        ({"expires_at": "yesterday"}, "expires_at: "),
    ]:
        code, body = tickd.post(dict({"callback_url": receiver.url()}, **task), expect=None)
        assert code == 400 and body["error"]["message"].startswith(why), (task, body)
    code, body = tickd.request("POST", "/v1/schedules", {
        "key": "x", "every_ms": 60000, "task": {"callback_url": receiver.url(), "expires_at": at}})
    assert code == 400 and "task.expires_at: not allowed in a template" in body["error"]["message"]
    # an RFC 3339 expires_at is kept as ms
    tid = tickd.post({"callback_url": receiver.url(), "execute_at": at,
                      "expires_at": "2099-01-01T00:00:00Z"})["id"]
    assert tickd.get(tid)[1]["expires_at"] == 4070908800000


def expire_while_paused(t, receiver, events):
    code, _ = t.request("PUT", "/v1/queues/slow", {"paused": True})
    assert code == 200
    tid = t.post({"callback_url": receiver.url("/never"), "queue": "slow", "ttl_ms": 600,
                  "on_failure": {"callback_url": events.url("/events")}})["id"]
    kept = t.post({"callback_url": receiver.url("/later"), "queue": "slow"})["id"]
    wait_for(lambda: t.get(tid)[1].get("waiting") == "paused", 15, what="held back by the pause")
    wait_for(lambda: now_ms() > t.get(tid)[1]["expires_at"] + 50, 5, what="past its expiry")
    t.request("PUT", "/v1/queues/slow", {"paused": False})
    task = final(t, tid)
    assert task["status"] == "expired" and task["attempts"] == 0, task
    assert task["last_error"].startswith("expired: its expires_at ") and task["finished_at"]
    assert final(t, kept)["status"] == "succeeded"  # the queue goes on
    assert "/never" not in [c["path"] for c in receiver.calls]
    wait_for(lambda: events.count() >= 1, 15, what="the task.expired event")
    ev = json.loads(events.calls[0]["body"])
    assert ev["type"] == "task.expired" and ev["id"] == tid, ev
    assert events.calls[0]["headers"]["tickd-event"] == "task.expired"
    code, page = t.request("GET", "/v1/tasks?status=expired")
    assert [x["id"] for x in page["tasks"]] == [tid], page
    return tid


def test_expires_while_its_queue_is_paused(tickd, receiver):
    events = Receiver()
    try:
        tid = expire_while_paused(tickd, receiver, events)
    finally:
        events.close()
    assert tickd.metric("tickd_tasks_expired_total") == 1
    # never called after its expiry: not even by a retry
    code, body = tickd.request("POST", f"/v1/tasks/{tid}/retry", {})
    assert code == 409 and "expires_at" in body["error"]["message"], body
    code, body = tickd.request("POST", "/v1/tasks/retry", {"status": "expired"})
    assert code == 400 and "expires_at" in body["error"]["message"], body


def test_expires_between_retries_on_the_memory_store(tickd_factory, receiver):
    t = tickd_factory(store="memory").start()
    events = Receiver()
    try:
        tid = t.post({"callback_url": receiver.url("/status/500"), "ttl_ms": 1000,
                      "retry": {"max_attempts": 5, "backoff_ms": 2000},
                      "on_failure": {"callback_url": events.url("/events")}})["id"]
        task = final(t, tid)
        assert task["status"] == "expired" and task["attempts"] == 1, task
        wait_for(lambda: events.count() >= 1, 15, what="the task.expired event")
        assert json.loads(events.calls[0]["body"])["type"] == "task.expired"
        code, page = t.request("GET", "/v1/tasks?status=expired")
        assert [x["id"] for x in page["tasks"]] == [tid], page
    finally:
        events.close()


def test_expires_during_downtime_and_the_catch_up_says_so(redis, receiver, tickd_factory):
    t = tickd_factory(redis, env=FAST).start()
    at = now_ms() + 1500
    gone = t.post({"callback_url": receiver.url("/gone"), "execute_at": at,
                   "expires_at": at + 300})["id"]
    kept = t.post({"callback_url": receiver.url("/kept"), "execute_at": at,
                   "ttl_ms": 3600000})["id"]
    assert t.stop() == 0
    wait_for(lambda: now_ms() > at + 600, 5, what="both due, one past its expiry")
    t.start()
    assert final(t, gone)["status"] == "expired"
    assert final(t, kept)["status"] == "succeeded"
    assert [c["path"] for c in receiver.calls] == ["/kept"]
    assert f"task {gone} expired: its expires_at" in t.logtext()


def test_expires_between_retries_and_an_attempt_begun_is_not_cut(tickd, receiver):
    # the first attempt is made; the retry 2 s later is past the expiry
    tid = tickd.post({"callback_url": receiver.url("/status/500"), "ttl_ms": 1000,
                      "retry": {"max_attempts": 5, "backoff_ms": 2000}})["id"]
    task = final(tickd, tid)
    assert task["status"] == "expired" and task["attempts"] == 1, task
    assert len(receiver.by_task()[tid]) == 1
    assert len(task["attempt_history"]) == 1 and task["last_status_code"] == 500
    # a slow answer outlives its expiry: it is waited for, and counts
    slow = tickd.post({"callback_url": receiver.url("/slow/800"), "ttl_ms": 300})["id"]
    assert final(tickd, slow)["status"] == "succeeded"


def test_expiry_on_a_cluster(cluster, receiver, tickd_factory):
    t = replicas(tickd_factory, cluster, n=1, env=FAST)[0]
    t.request("PUT", "/v1/queues/cq", {"paused": True})
    ids = [t.post({"callback_url": receiver.url("/c"), "queue": "cq", "ttl_ms": 400,
                   "key": f"k{i}"})["id"] for i in range(6)]
    keep = t.post({"callback_url": receiver.url("/keep"), "queue": "cq", "ttl_ms": 600000})["id"]
    wait_for(lambda: all(t.get(i)[1].get("waiting") == "paused" for i in ids), 15)
    wait_for(lambda: now_ms() > max(t.get(i)[1]["expires_at"] for i in ids) + 50, 5)
    t.request("PUT", "/v1/queues/cq", {"paused": False})
    assert all(final(t, i)["status"] == "expired" for i in ids)
    assert final(t, keep)["status"] == "succeeded"
    assert [c["path"] for c in receiver.calls] == ["/keep"]
    # the slices of every master list their expired ones
    code, page = t.request("GET", "/v1/tasks?status=expired&limit=100")
    assert sorted(x["id"] for x in page["tasks"]) == sorted(ids)


def test_a_task_expires_while_its_queue_stays_paused(tickd, receiver):
    """Held back by a pause that is never lifted, it still ends at its expiry
    (listed, counted, its event sent): it does not wait for the resume."""
    assert tickd.request("PUT", "/v1/queues/held", {"paused": True})[0] == 200
    tid = tickd.post({"callback_url": receiver.url("/never"), "queue": "held",
                      "ttl_ms": 300})["id"]
    task = final(tickd, tid)
    assert task["status"] == "expired", task
    assert now_ms() < task["expires_at"] + 5000  # not a park's 30-60 s later
    assert receiver.count() == 0
    code, body = tickd.post({"callback_url": receiver.url(), "execute_at": now_ms() - 5000,
                             "expires_at": now_ms() - 1000}, expect=None)
    assert code == 400 and "expires_at: already past" in body["error"]["message"], body
    code, body = tickd.post({"callback_url": receiver.url(), "execute_at": now_ms() - 5000,
                             "ttl_ms": 1000}, expect=None)
    assert code == 400 and body["error"]["message"].startswith("ttl_ms: "), body


def test_a_task_waiting_for_a_connection_is_not_called_past_its_expiry(redis, receiver,
                                                                        tickd_factory):
    t = tickd_factory(redis, env=dict(FAST, TICKD_SERVER_WORKERS="1",
                                      TICKD_SERVER_HOST_CONNECTIONS="1")).start()
    at = now_ms() + 1500
    slow = t.post({"callback_url": receiver.url("/slow/2500"), "execute_at": at})["id"]
    tid = t.post({"callback_url": receiver.url("/expiring"), "execute_at": at + 10,
                  "ttl_ms": 500})["id"]
    task = final(t, tid)
    assert final(t, slow)["status"] == "succeeded"
    assert task["status"] == "expired" and task["attempts"] == 0, task
    assert "/expiring" not in [c["path"] for c in receiver.calls]


def test_a_retry_due_after_the_expiry_ends_the_task_at_once(tickd, receiver):
    tid = tickd.post({"callback_url": receiver.url("/status/500"), "ttl_ms": 1000,
                      "retry": {"max_attempts": 3, "backoff_ms": 20000}})["id"]
    task = final(tickd, tid)
    assert task["status"] == "expired" and task["attempts"] == 1, task
    assert now_ms() < task["expires_at"] + 1000  # at the attempt's end, not at the retry
    assert task["last_status_code"] == 500 and len(task["attempt_history"]) == 1


def test_no_retry_at_or_past_the_expiry(tickd, receiver):
    tid = tickd.post({"callback_url": receiver.url("/status/500"), "ttl_ms": 60000,
                      "retry": {"max_attempts": 1}})["id"]
    task = final(tickd, tid)
    assert task["status"] == "failed"
    code, body = tickd.request("POST", f"/v1/tasks/{tid}/retry",
                               {"execute_at": task["expires_at"]})
    assert code == 409 and "expires_at" in body["error"]["message"], body
    code, _ = tickd.request("POST", f"/v1/tasks/{tid}/retry", {})
    assert code == 200  # before it: runs
