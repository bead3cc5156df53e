"""The console's endpoints (doc/api.md): GET /v1/history sums what every
replica counted, GET /v1/cluster lists the replicas alive and the Redis
nodes, GET /v1/schedules:preview gives a schedule's runs before it is saved.
Two real tickd replicas on one Redis and on a local Redis Cluster, callbacks
to a real receiver that succeeds, fails and fails for good."""
import re
import urllib.parse

import pytest

from conftest import FAST
from harness import Cluster, now_ms, wait_for

# What the mix below makes of the tasks, all replicas together.
WANT = {"succeeded": 8, "failed": 3, "retried": 4, "attempts_failed": 8, "expired": 1}


def mix(receiver):
    """Tasks, each with the outcomes it will have."""
    now = now_ms() + 300
    ok = [{"callback_url": receiver.url("/ok"), "execute_at": now + i * 10} for i in range(6)]
    # fails once, then succeeds: one retry each
    once = [{"callback_url": receiver.url("/fail/1"), "execute_at": now,
             "retry": {"max_attempts": 3, "backoff_ms": 100}} for _ in range(2)]
    # fails twice and ends failed: one retry each, in queue "mail"
    mail = [{"callback_url": receiver.url("/status/500"), "execute_at": now, "queue": "mail",
             "retry": {"max_attempts": 2, "backoff_ms": 100}} for _ in range(2)]
    # fails once and ends failed, in the default queue
    dead = [{"callback_url": receiver.url("/status/500"), "retry": {"max_attempts": 1}}]
    # fails once; its next attempt would begin after its expiry: ends expired
    late = [{"callback_url": receiver.url("/status/500"), "ttl_ms": 1500,
             "retry": {"max_attempts": 5, "backoff_ms": 5000}}]
    return ok + once + mail + dead + late


def metric(t, series):
    text = t.request("GET", "/metrics")[1].decode()
    return float(next(ln.split()[-1] for ln in text.splitlines()
                      if ln.startswith(series + " ")))


def own_counts(t):
    """What one replica counted itself (its /metrics)."""
    fails = sum(metric(t, f'tickd_callback_attempts_total{{outcome="{o}"}}')
                for o in ("http_error", "timeout", "connect_error", "denied"))
    return {"succeeded": metric(t, "tickd_tasks_succeeded_total"),
            "failed": metric(t, "tickd_tasks_failed_total"),
            "retried": metric(t, "tickd_task_retries_total"),
            "attempts_failed": fails,
            "expired": metric(t, "tickd_tasks_expired_total")}


def lateness_buckets(t):
    """(bounds in s, count per bucket) of tickd_callback_lateness_seconds in
    one replica's /metrics, the last bucket +Inf."""
    text = t.request("GET", "/metrics")[1].decode()
    rows = re.findall(r'^tickd_callback_lateness_seconds_bucket\{le="([^"]+)"\} (\d+)$', text,
                      re.M)
    cum = [int(n) for _, n in rows]
    return [float(le) for le, _ in rows[:-1]], [c - p for c, p in zip(cum, [0] + cum[:-1])]


def quantile_ms(bounds, counts, q):
    """As Prometheus's histogram_quantile: interpolated within the bucket."""
    rank, seen = q * sum(counts), 0
    for i, n in enumerate(counts):
        if n == 0 or seen + n < rank:
            seen += n
            continue
        if i == len(bounds):
            return bounds[-1] * 1000
        lo = bounds[i - 1] if i else 0
        return (lo + (bounds[i] - lo) * (rank - seen) / n) * 1000


def history(t, window="1h"):
    code, body = t.request("GET", f"/v1/history?window={window}")
    assert code == 200, body
    return body


def totals(h):
    return {k: h["total"][k] for k in WANT}


def run_mix(a, b, receiver):
    """Half the tasks posted through each replica; waits for every end."""
    tasks = mix(receiver)
    ids = [(a if i % 2 else b).post(task)["id"] for i, task in enumerate(tasks)]
    for tid in ids:
        wait_for(lambda: a.get(tid)[1]["status"] in ("succeeded", "failed", "expired"), 20,
                 what=f"task {tid} ended")


def check_history_is_the_sum(a, b):
    # counts reach Redis every 2 s: wait for them, then hold both to the sum
    wait_for(lambda: totals(history(a)) == WANT, 15, what="the history of both replicas")
    ha, hb = history(a), history(b)
    assert totals(hb) == WANT
    mine = [own_counts(a), own_counts(b)]
    assert {k: mine[0][k] + mine[1][k] for k in WANT} == WANT, mine
    # a point per minute, the present one last; the counts are in the last few
    assert ha["window"] == "1h" and ha["step_ms"] == 60000 and len(ha["points"]) == 60
    assert ha["points"][-1]["t"] <= now_ms() < ha["to"]
    assert [p["t"] for p in ha["points"]] == list(range(ha["from"], ha["to"], 60000))
    summed = {k: sum(p[k] for p in ha["points"]) for k in WANT}
    assert summed == WANT
    # lateness: 16 attempts made, the quantiles from their buckets
    total = ha["total"]
    assert total["lateness_p50_ms"] is not None and total["lateness_p99_ms"] is not None
    assert 0 <= total["lateness_p50_ms"] <= total["lateness_p99_ms"] <= 60000
    # the same as the quantiles of both replicas' own histograms summed
    (bounds, ca), (_, cb) = lateness_buckets(a), lateness_buckets(b)
    summed_buckets = [x + y for x, y in zip(ca, cb)]
    assert sum(summed_buckets) == WANT["succeeded"] + WANT["attempts_failed"]
    for q, name in ((0.5, "lateness_p50_ms"), (0.99, "lateness_p99_ms")):
        assert total[name] == pytest.approx(quantile_ms(bounds, summed_buckets, q)), name
    busy = [p for p in ha["points"] if p["succeeded"] or p["attempts_failed"]]
    assert busy and all(p["lateness_p50_ms"] is not None for p in busy)
    assert all(p["lateness_p50_ms"] is None for p in ha["points"]
               if not (p["succeeded"] or p["attempts_failed"]))
    assert ha["failed_by_queue"] == [{"queue": "mail", "failed": 2},
                                     {"queue": "default", "failed": 1}]
    # the same minutes asked by from and to
    code, same = a.request("GET", f"/v1/history?from={ha['from']}&to={ha['to']}")
    assert code == 200 and same["window"] == "range" and same["points"] == ha["points"], same
    # the day: 144 points of 10 minutes, the same sums
    day = history(b, "24h")
    assert day["step_ms"] == 600000 and len(day["points"]) == 144
    assert {k: sum(p[k] for p in day["points"]) for k in WANT} == WANT
    assert day["failed_by_queue"] == ha["failed_by_queue"]


def cluster_view(t):
    code, body = t.request("GET", "/v1/cluster")
    assert code == 200, body
    return body


def listed(t):
    return sorted(r["listen"] for r in cluster_view(t)["replicas"])


def addr(t):
    return f"127.0.0.1:{t.port}"


def check_replicas(a, b, factory, redis_addr, env):
    both = sorted([addr(a), addr(b)])
    wait_for(lambda: listed(a) == both and listed(b) == both, 10, what="both replicas listed")
    for r in cluster_view(a)["replicas"]:
        assert r["version"] and r["started_at"] <= r["seen_at"] and r["uptime_ms"] >= 0, r
        assert re.fullmatch(r".+:\d+\.[0-9a-f]{6}", r["id"]), r
    # a replica stopped cleanly leaves at once, well within its 10 s
    stopped_at = now_ms()
    assert b.stop() == 0
    assert listed(a) == [addr(a)]
    assert now_ms() - stopped_at < 10000
    # one killed leaves when its report's 10 s end
    c = factory(redis_addr, env=env).start()
    wait_for(lambda: addr(c) in listed(a), 10, what="a third replica listed")
    c.kill9()
    assert addr(c) in listed(a)
    wait_for(lambda: listed(a) == [addr(a)], 15, what="the killed replica gone after its TTL")


@pytest.mark.long
def test_single_redis(redis, receiver, tickd_factory):
    a, b = tickd_factory(redis).start(), tickd_factory(redis).start()
    run_mix(a, b, receiver)
    check_history_is_the_sum(a, b)
    view = cluster_view(a)
    assert view["store"] == "redis" and view["refusing_adds"] is None
    [node] = view["nodes"]
    assert node["address"] == redis.addr and node["role"] == "master" and node["reachable"]
    assert node["used_memory"] > 0 and node["maxmemory"] == 0
    assert node["maxmemory_policy"] == "noeviction" and node["refusing"] is None
    assert node["version"] == redis.cli("INFO", "server").split("redis_version:")[1].split()[0]
    check_replicas(a, b, tickd_factory, redis, None)
    # the history lives in minute keys that expire (three days)
    keys = [k for k in redis.cli("--scan", "--pattern", "tickd:{hist.*").split() if k]
    assert keys and all(0 < int(redis.cli("TTL", k)) <= 3 * 86400 for k in keys)


@pytest.mark.long
def test_cluster(tmp_path, receiver, tickd_factory):
    cl = Cluster(str(tmp_path)).start()
    try:
        a = tickd_factory(cl.seeds(), env=FAST).start()
        b = tickd_factory(cl.seeds(), env=FAST).start()
        run_mix(a, b, receiver)
        check_history_is_the_sum(a, b)
        nodes = cluster_view(b)["nodes"]
        masters = sorted(r.addr for r in cl.masters())
        assert sorted(n["address"] for n in nodes if n["role"] == "master") == masters
        reps = [n for n in nodes if n["role"] == "replica"]
        assert len(reps) == 3 and all(n["reachable"] and n["primary"] in masters for n in reps)
        assert sorted(n["address"] for n in reps) == sorted(
            r.addr for r in cl.nodes if r.addr not in masters)
        assert all(n["reachable"] and n["used_memory"] > 0 for n in nodes if n["role"] == "master")
        check_replicas(a, b, tickd_factory, cl.seeds(), FAST)
    finally:
        cl.stop()


def preview(t, **params):
    return t.request("GET", "/v1/schedules:preview?" + urllib.parse.urlencode(params))


@pytest.mark.parametrize("definition", [
    {"cron": "0 9 * * MON-FRI", "tz": "Europe/Berlin"},
    {"cron": "*/10 * * * * *"},
    {"cron": "30 2 * * *", "tz": "America/New_York", "times": 3},
    {"every_ms": 90000, "start_at": "2030-01-01T00:00:00Z"},
])
def test_preview_is_the_saved_schedules_next_runs(tickd, receiver, definition):
    code, shown = preview(tickd, **definition)
    assert code == 200, shown
    code, saved = tickd.request("POST", "/v1/schedules",
                                dict(definition, task={"callback_url": receiver.url()}))
    assert code == 201, saved
    if definition.get("cron", "").startswith("*/10"):
        # every 10 s: the preview and the save may fall either side of a run
        assert shown["next_runs"][1:] == saved["next_runs"][:4] or \
            shown["next_runs"] == saved["next_runs"]
    else:
        assert shown["next_runs"] == saved["next_runs"]
    assert len(shown["next_runs"]) == min(5, definition.get("times", 5))
    # count, and nothing stored
    code, more = preview(tickd, count=12, **definition)
    assert code == 200 and len(more["next_runs"]) == min(12, definition.get("times", 12))
    code, page = tickd.request("GET", "/v1/schedules")
    assert [s["id"] for s in page["schedules"]] == [saved["id"]]


@pytest.mark.parametrize("params,why", [
    ({"cron": "0 9 32 * *"}, "cron: field 3 (day of month): 32 is out of range 1-31"),
    ({"cron": "0 9 * * *", "tz": "Mars/Olympus"}, "tz: unknown time zone 'Mars/Olympus'"),
    ({"cron": "0 9 * * *", "every_ms": 60000}, "every_ms: give every_ms or cron, not both"),
    ({"every_ms": 500}, "every_ms: must be an integer from 1000"),
    ({"every_ms": "soon"}, "every_ms: must be an integer from 1000"),
    ({"every_ms": 60000, "times": 0}, "times: must be an integer >= 1"),
    ({"every_ms": 60000, "start_at": "2030-01-01T00:00:00Z", "end_at": "2029-01-01T00:00:00Z"},
     "end_at: before start_at"),
    ({}, "cron: required (or every_ms)"),
])
def test_preview_refuses_what_a_schedule_refuses(tickd, receiver, params, why):
    code, body = preview(tickd, **params)
    assert code == 400 and body["error"]["message"].startswith(why), body
    # the same words as creating the schedule
    code, created = tickd.request("POST", "/v1/schedules",
                                  dict(params, task={"callback_url": receiver.url()}))
    assert code == 400 and created["error"]["message"] == body["error"]["message"], created


def test_preview_parameters_and_methods(tickd):
    for params, why in [({"every_ms": 60000, "count": 0}, "count: must be an integer from 1 to 100"),
                        ({"every_ms": 60000, "count": 101}, "count: must be an integer from 1"),
                        ({"every_ms": 60000, "key": "x"}, "key: unknown parameter")]:
        code, body = preview(tickd, **params)
        assert code == 400 and body["error"]["message"].startswith(why), body
    for path in ("/v1/schedules:preview?every_ms=60000", "/v1/history", "/v1/cluster"):
        code, body = tickd.request("POST", path, {})
        assert code == 405 and body["error"]["code"] == "method_not_allowed", body
    code, body = tickd.request("GET", "/v1/history?window=7d")
    assert code == 400 and body["error"]["message"] == "window: must be 1h or 24h", body
    t = now_ms()
    for query, why in [(f"from={t}", "to: give from and to together"),
                       (f"to={t}", "from: give from and to together"),
                       (f"window=1h&from={t - 60000}&to={t}", "window: give window or from and to"),
                       (f"from={t}&to={t}", "to: must be after from"),
                       (f"from={t - 4 * 86400000}&to={t}", "to: at most 3 days after from"),
                       (f"from=yesterday&to={t}", "from: ")]:
        code, body = tickd.request("GET", "/v1/history?" + query)
        assert code == 400 and body["error"]["message"].startswith(why), (query, body)
    # a point a minute up to three hours, then a point per 10 minutes
    start = (t // 60000 - 180) * 60000
    code, body = tickd.request("GET", f"/v1/history?from={start}&to={start + 180 * 60000}")
    assert code == 200 and body["step_ms"] == 60000 and len(body["points"]) == 180, body
    code, body = tickd.request("GET", f"/v1/history?from={start - 60000}&to={start + 180 * 60000}")
    assert code == 200 and body["step_ms"] == 600000 and len(body["points"]) == 19, body
    assert body["from"] <= start - 60000 and body["to"] >= start + 180 * 60000
    code, body = tickd.request("GET", "/v1/cluster?x=1")
    assert code == 400 and body["error"]["message"].startswith("x: unknown parameter"), body


def test_memory_store(tickd_factory, receiver):
    t = tickd_factory(store="memory").start()
    tid = t.post({"callback_url": receiver.url("/status/500"), "queue": "q1",
                  "retry": {"max_attempts": 1}})["id"]
    wait_for(lambda: t.get(tid)[1]["status"] == "failed", 10, what="the task failed")
    wait_for(lambda: history(t)["total"]["failed"] == 1, 10, what="the failure in the history")
    assert history(t)["failed_by_queue"] == [{"queue": "q1", "failed": 1}]
    view = cluster_view(t)
    assert view["store"] == "memory" and view["nodes"] == []
    assert [r["listen"] for r in view["replicas"]] == [addr(t)]


def test_a_read_only_token_reads_the_console(redis, tickd_factory):
    """The console's three routes are reads: a token of server.read_tokens
    may use them; without a token they are 401 as every /v1/ route."""
    t = tickd_factory(redis, env={"TICKD_SERVER_API_TOKEN": "adm-1",
                                  "TICKD_SERVER_READ_TOKENS": "ro-1"}).start()
    ro = {"Authorization": "Bearer ro-1"}
    for path in ("/v1/history?window=24h", "/v1/cluster",
                 "/v1/schedules:preview?every_ms=60000&count=2"):
        code, body = t.request("GET", path, headers=ro)
        assert code == 200, (path, body)
        assert t.request("GET", path)[0] == 401
    code, body = t.request("GET", "/v1/cluster", headers=ro)
    assert [r["listen"] for r in body["replicas"]] == [addr(t)], body
