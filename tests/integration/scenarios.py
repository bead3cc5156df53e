"""Scenarios run the same against every store (Redis and memory)."""
import json

from harness import wait_for


def request_arrives_exactly(tickd, receiver):
    """The callback is the request the task describes, with tickd's headers."""
    a = tickd.post({"callback_url": receiver.url("/a?x=1"), "method": "PUT",
                    "header": {"X-Trace": "abc", "Authorization": "Bearer t"},
                    "req": {"n": 1, "s": "é"}, "delay_ms": 200})
    b = tickd.post({"callback_url": receiver.url("/b"), "method": "POST",
                    "header": {"Content-Type": "text/plain"}, "req": "raw text\nline 2"})
    c = tickd.post({"callback_url": receiver.url("/c"), "method": "GET", "req": {"ignored": 1}})
    d = tickd.post({"callback_url": receiver.url("/d"), "method": "DELETE", "req": "x"})
    e = tickd.post({"callback_url": receiver.url("/e"), "method": "PATCH", "req": [1, 2]})
    wait_for(lambda: receiver.count() >= 5, 5, what="5 callbacks")
    got = {tid: c[0] for tid, c in receiver.by_task().items()}
    ca = got[a["id"]]
    assert ca["method"] == "PUT" and ca["path"] == "/a?x=1"
    assert ca["headers"]["x-trace"] == "abc" and ca["headers"]["authorization"] == "Bearer t"
    assert ca["headers"]["content-type"] == "application/json"
    assert json.loads(ca["body"]) == {"n": 1, "s": "é"}
    assert ca["headers"]["tickd-task-id"] == a["id"]
    assert ca["headers"]["tickd-attempt"] == "1"
    assert ca["headers"]["tickd-scheduled-at"] == str(a["execute_at"])
    cb = got[b["id"]]
    assert cb["method"] == "POST" and cb["body"] == b"raw text\nline 2"
    assert cb["headers"]["content-type"] == "text/plain"
    cc = got[c["id"]]
    assert cc["method"] == "GET" and cc["body"] == b""
    assert got[d["id"]]["method"] == "DELETE" and got[d["id"]]["body"] == b"x"
    assert "content-type" not in got[d["id"]]["headers"]
    assert got[e["id"]]["method"] == "PATCH" and json.loads(got[e["id"]]["body"]) == [1, 2]


def batch_with_one_bad_task(tickd, receiver):
    """One bad task in a batch fails alone; the others are stored and fire."""
    tasks = [{"callback_url": receiver.url(), "delay_ms": 300, "key": f"b{i}"} for i in range(5)]
    tasks[2] = {"callback_url": "nope"}
    res = tickd.batch(tasks)
    assert len(res) == 5
    assert res[2]["error"]["code"] == "invalid_argument"
    assert res[2]["error"]["message"].startswith("tasks[2].callback_url:")
    ok = [r["id"] for i, r in enumerate(res) if i != 2]
    wait_for(lambda: set(ok) <= set(receiver.by_task()), 5, what="batch delivered")
    code, r = tickd.request("POST", "/v1/tasks/batch", {"tasks": [{}] * 1001})
    assert code == 400 and r["error"]["message"].startswith("tasks:")
    tickd.settled()
    assert receiver.count() == 4


def retried_then_succeeds(tickd, receiver):
    """500 then 200: retried after the backoff, then succeeded."""
    t = tickd.post({"callback_url": receiver.url("/fail/1"),
                    "retry": {"max_attempts": 3, "backoff_ms": 300}})
    wait_for(lambda: tickd.get(t["id"])[1].get("attempts") == 1, 5, what="first attempt")
    g = tickd.get(t["id"])[1]
    assert g["status"] in ("scheduled", "running") and g["last_error"] == "HTTP 500"
    wait_for(lambda: tickd.get(t["id"])[1]["status"] == "succeeded", 10, what="succeeded")
    calls = receiver.by_task()[t["id"]]
    assert [c["headers"]["tickd-attempt"] for c in calls] == ["1", "2"]
    gap = calls[1]["t"] - calls[0]["t"]
    assert 240 - 5 <= gap <= 300 + 150, gap  # backoff 300 ms less up to 20 % jitter
    g = tickd.get(t["id"])[1]
    assert g["attempts"] == 2 and g["last_status_code"] == 500 and g["last_error"] == "HTTP 500"


def fails_after_max_attempts(tickd, receiver):
    """Always 500: failed after max_attempts, the last error kept."""
    t = tickd.post({"callback_url": receiver.url("/status/500"),
                    "retry": {"max_attempts": 4, "backoff_ms": 100}})
    wait_for(lambda: tickd.get(t["id"])[1]["status"] == "failed", 10, what="failed")
    tickd.settled()
    assert len(receiver.by_task()[t["id"]]) == 4
    g = tickd.get(t["id"])[1]
    assert g["attempts"] == 4 and g["last_status_code"] == 500 and "finished_at" in g
    assert g["last_error"] == "HTTP 500" and "next_attempt_at" not in g
    assert tickd.delete(t["id"])[0] == 409
