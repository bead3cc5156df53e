"""URLs leave tickd without what may be a credential: in the task.failed
event, in the log, and in the listings of tasks and schedules the userinfo
shows as *** and each query value as ***; GET of one task or schedule shows
the URL as it was sent. The real binary, Redis, a receiver answering 500
through libcurl (a URL with userinfo takes it) and one for the events."""
import json

from harness import Receiver, wait_for
from receivers import Raw

SECRETS = ("al1ce", "s3cretpw", "t0kenv4l", "s1gv4lue", "k3yv4l")


def test_event_log_and_listings_leave_credentials_out(redis, tickd_factory):
    tickd = tickd_factory(redis, env={"TICKD_SERVER_LOG_LEVEL": "debug"}).start()
    raw = Raw(lambda c: c.sendall(b"HTTP/1.1 500 No\r\nContent-Length: 0\r\n\r\n"))
    events = Receiver()
    try:
        url = f"http://al1ce:s3cretpw@127.0.0.1:{raw.port}/x?token=t0kenv4l&sig=s1gv4lue"
        shown = f"http://***@127.0.0.1:{raw.port}/x?token=***&sig=***"
        onf = events.url("/dead?key=k3yv4l")
        tid = tickd.post({"callback_url": url, "retry": {"max_attempts": 1},
                          "on_failure": {"callback_url": onf}})["id"]
        ev = wait_for(lambda: events.by_task().get(tid), what="the task.failed event")[0]
        # the event: the task's URL redacted, nothing of the secrets
        body = json.loads(ev["body"])
        assert body["type"] == "task.failed" and body["last_status_code"] == 500
        assert body["task"]["callback_url"] == shown, body
        assert not [s for s in SECRETS if s in ev["body"].decode()], ev["body"]
        # the listing: both URLs redacted; GET of the task: as sent
        code, listing = tickd.request("GET", "/v1/tasks?status=failed")
        assert code == 200
        [item] = listing["tasks"]
        assert item["callback_url"] == shown
        assert item["on_failure"]["callback_url"] == events.url("/dead?key=***")
        assert not [s for s in SECRETS if s in json.dumps(listing)], listing
        code, task = tickd.get(tid)
        assert task["callback_url"] == url and task["on_failure"]["callback_url"] == onf
        # a schedule's listing too
        code, sch = tickd.request("POST", "/v1/schedules", {
            "key": "redacted", "every_ms": 3600000, "start_at": "2099-01-01T00:00:00Z",
            "task": {"callback_url": url}})
        assert code == 201, sch
        code, schedules = tickd.request("GET", "/v1/schedules")
        assert code == 200 and schedules["schedules"][0]["task"]["callback_url"] == shown
        assert not [s for s in SECRETS if s in json.dumps(schedules)], schedules
        # the log, at debug level, holds none of them either
        log = tickd.logtext()
        assert tid in log
        assert not [s for s in SECRETS if s in log], log
    finally:
        raw.close()
        events.close()
