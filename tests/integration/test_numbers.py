"""Numbers from outside: every time and rate field goes through one bounded
parser (src/model/task.c: task_json_time, task_text_time, task_json_num); what it
cannot hold exactly is refused with a 400 naming the field, and what it takes
reads back unchanged. Times run from 1970 to 9999-12-31T23:59:59.999Z."""
import json

from harness import Receiver, now_ms, wait_for

TIME_MAX = 253402300799999  # 9999-12-31T23:59:59.999Z
HOUR_MS = 3600 * 1000


def refused(t, method, path, body=None, raw=None, field=""):
    code, res = t.request(method, path, body, raw=raw)
    assert code == 400, (path, body, raw, code, res)
    assert res["error"]["message"].startswith(field + ":"), res
    return res["error"]["message"]


def test_schedule_times_outside_the_bounds_are_refused(tickd):
    task = {"callback_url": "http://127.0.0.1:9/x"}
    for extra, field in (({"start_at": "1969-12-31T23:59:59Z"}, "start_at"),
                         ({"start_at": "1970-01-01T00:59:59+01:00"}, "start_at"),
                         ({"start_at": -1}, "start_at"),
                         ({"start_at": TIME_MAX + 1}, "start_at"),
                         ({"start_at": "9999-12-31T23:59:59-00:01"}, "start_at"),
                         ({"end_at": 2 ** 52}, "end_at")):
        refused(tickd, "POST", "/v1/schedules", dict(extra, every_ms=1000, task=task),
                field=field)
    code, res = tickd.request("GET", "/v1/schedules")
    assert code == 200 and res["schedules"] == [], res


def test_the_latest_time_reads_back_exactly(tickd):
    # 15 digits of ms: Redis's Lua JSON keeps 14 unless told otherwise
    body = {"key": "late", "every_ms": 1000, "start_at": "9999-12-31T23:59:59.999Z",
            "task": {"callback_url": "http://127.0.0.1:9/x"}}
    code, res = tickd.request("POST", "/v1/schedules", body)
    assert code == 201, res
    code, res = tickd.request("GET", "/v1/schedules/sch.late")
    assert code == 200, res
    assert res["start_at"] == TIME_MAX
    assert [r["at"] for r in res["next_runs"]] == [TIME_MAX]
    code, again = tickd.request("POST", "/v1/schedules", body)
    assert code == 200 and again["next_runs"] == res["next_runs"], again


def test_rates_and_flow_numbers_are_bounded(tickd):
    for body, field in (({"rate": 5e-324}, "rate"), ({"rate": 0.00009}, "rate"),
                        ({"rate": 1000000.5}, "rate"), ({"rate": 0.123456789012345}, "rate"),
                        ({"rate": 1, "burst": 1.5}, "burst"), ({"rate": 1, "burst": 0}, "burst"),
                        ({"max_concurrency": 1000001}, "max_concurrency")):
        refused(tickd, "PUT", "/v1/queues/q", body, field=field)
    refused(tickd, "PUT", "/v1/queues/q", raw=b'{"rate": 1e-400}', field="rate")
    refused(tickd, "PUT", "/v1/destinations/h.test", raw=b'{"rate": 1e400}', field="rate")
    for rate in (0.0001, 1000000, 0.12345678901234):
        code, res = tickd.request("PUT", "/v1/queues/q", {"rate": rate, "burst": 1000000})
        assert code == 200 and res["rate"] == rate and res["burst"] == 1000000, res
        code, res = tickd.request("POST", "/v1/queues/q/pause")  # written again by Lua
        assert code == 200 and res["rate"] == rate and res["paused"] is True, res


def test_retry_execute_at_is_bounded_in_both_forms(tickd):
    t = tickd.post({"callback_url": "http://127.0.0.1:9/x", "delay_ms": HOUR_MS})
    assert tickd.delete(t["id"])[0] in (200, 204)
    path = f"/v1/tasks/{t['id']}/retry"
    for at in ("99999999999999999999", 99999999999999999999, "10000-01-01T00:00:00Z",
               "9999-12-31T23:59:59.999Z", now_ms() + 11 * 366 * 86400 * 1000, -1, 1.5):
        refused(tickd, "POST", path, {"execute_at": at}, field="execute_at")
    refused(tickd, "POST", path, raw=b'{"execute_at": 1e-400}', field="execute_at")
    for at in (TIME_MAX + 1, "1969-12-31T23:59:59Z", "9999-12-31T23:59:59.999-00:01"):
        refused(tickd, "POST", "/v1/tasks",
                {"callback_url": "http://127.0.0.1:9/x", "expires_at": at}, field="expires_at")
    code, res = tickd.request("POST", path, {"execute_at": now_ms() + HOUR_MS})
    assert code == 200 and res["status"] == "scheduled", res


def test_malformed_cursors_are_400_before_any_script(tickd):
    for i in range(2):
        tickd.post({"callback_url": "http://127.0.0.1:9/x", "key": f"c{i}", "delay_ms": HOUR_MS})
    code, res = tickd.request("GET", "/v1/tasks?status=scheduled&limit=1")
    assert code == 200 and res["next_cursor"], res
    slice_, score, tid = res["next_cursor"].split("~")
    for cur in (f"{slice_}~..~{tid}", f"{slice_}~1e5~{tid}", f"{slice_}~+5~{tid}",
                f"{slice_}~~{tid}", f"{slice_}x~{score}~{tid}", f"{slice_}~{score}~{tid}/x",
                f"{slice_.split('.')[0]}.~{score}~{tid}", f"{slice_}~{score}~{tid}~"):
        refused(tickd, "GET", "/v1/tasks?status=scheduled&cursor=" + cur.replace("+", "%2B"),
                field="cursor")
        refused(tickd, "POST", "/v1/tasks/retry", {"status": "failed", "cursor": cur},
                field="cursor")
    code, res = tickd.request("GET", f"/v1/tasks?status=scheduled&cursor={slice_}~{score}~{tid}")
    assert code == 200 and len(res["tasks"]) == 1, res


def test_numbers_that_would_change_are_refused(tickd, receiver):
    url = receiver.url()
    for raw, field in ((b'{"callback_url":"%s","req":{"x":1e-400}}', "req.x"),
                       (b'{"callback_url":"%s","req":[0,-1E-999]}', "req[1]"),
                       (b'{"callback_url":"%s","delay_ms":1e-400}', "delay_ms"),
                       (b'{"callback_url":"%s","timeout_ms":1e999}', "timeout_ms")):
        refused(tickd, "POST", "/v1/tasks", raw=raw.replace(b"%s", url.encode()), field=field)
    raw = (b'{"tasks":[{"callback_url":"%s","key":"fine"},'
           b'{"callback_url":"%s","req":{"x":1e-400}}]}').replace(b"%s", url.encode())
    code, res = tickd.request("POST", "/v1/tasks/batch", raw=raw)
    assert code == 200, res
    assert res["results"][0]["status"] == "scheduled"
    assert res["results"][1]["error"]["message"].startswith("tasks[1].req.x: a number"), res
    # zero written any way is zero
    created = tickd.post({"callback_url": url, "req": {"z": 0, "e": 0.0}, "delay_ms": 0})
    wait_for(lambda: created["id"] in receiver.by_task(), 10, what="callback")
    sent = json.loads(receiver.by_task()[created["id"]][0]["body"])
    assert sent == {"z": 0, "e": 0}


def test_retry_after_past_any_range_holds_for_the_cap(tickd):
    # one receiver through the own client, one through libcurl (a URL with
    # credentials): both hold their destination the longest, an hour
    own, curl = Receiver(), Receiver()
    try:
        busy = "/busy/99999999999999999999/1"
        tickd.post({"callback_url": own.url(busy)})
        tickd.post({"callback_url": curl.url(busy).replace("http://", "http://u:p@")})
        for rec in (own, curl):
            dest = f"/v1/destinations/127.0.0.1:{rec.port}"
            held = wait_for(lambda: tickd.request("GET", dest)[1]["held_until"], 10,
                            what=f"a hold on {dest}")
            assert abs(held - (now_ms() + HOUR_MS)) < 10000, held - now_ms()
    finally:
        own.close()
        curl.close()


def test_a_stored_schedule_from_before_1970_reads_back_and_runs(tickd, redis, receiver):
    # stored as an earlier tickd took it (start_at before 1970): it shows,
    # lists and runs, rather than answering 500 and being claimed for ever
    body = {"key": "old", "every_ms": 1000, "start_at": 0, "times": 2,
            "task": {"callback_url": receiver.url()}}
    code, res = tickd.request("POST", "/v1/schedules", body)
    assert code == 201, res
    key = next(k for k in redis.cli("--scan", "--pattern", "tickd:{sc.*}:sdef").split()
               if redis.cli("HEXISTS", k, "sch.old") == "1")
    stored = json.loads(redis.cli("HGET", key, "sch.old"))
    stored["start_at"] = -1000
    redis.cli("HSET", key, "sch.old", json.dumps(stored, separators=(",", ":")))
    code, res = tickd.request("GET", "/v1/schedules/sch.old")
    assert code == 200 and res["start_at"] == -1000, res
    code, res = tickd.request("GET", "/v1/schedules")
    assert code == 200 and [s["id"] for s in res["schedules"]] == ["sch.old"], res
    wait_for(lambda: len(receiver.calls) >= 2, 15, what="its two runs")
    code, res = tickd.request("GET", "/v1/schedules/sch.old")
    assert code == 200 and res["runs"] == 2 and res["state"] == "completed", res
