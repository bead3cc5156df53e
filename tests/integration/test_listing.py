"""Finding tasks (GET /v1/tasks) and dead letters (retry, run now), against
the real binary, a real redis-server or the local Redis Cluster, and a real
receiver."""
import json
import urllib.parse
import urllib.request

import pytest

from conftest import replicas
from harness import TcpServer, lua_source, now_ms, read_head, wait_for


def walk(t, status, limit=500, order=None, **filters):
    """Every page of a listing: (ids in order, pages)."""
    ids, cursor, pages = [], None, 0
    while True:
        q = {"status": status, "limit": limit, **filters}
        if order:
            q["order"] = order
        if cursor:
            q["cursor"] = cursor
        code, res = t.request("GET", "/v1/tasks?" + urllib.parse.urlencode(q))
        assert code == 200, res
        assert len(res["tasks"]) <= limit
        for task in res["tasks"]:
            assert task["status"] == status or status in ("scheduled", "running"), task
        ids += [task["id"] for task in res["tasks"]]
        pages += 1
        cursor = res["next_cursor"]
        if not cursor:
            return ids, pages


def ingest(t, tasks):
    ids = []
    for i in range(0, len(tasks), 1000):
        res = t.batch(tasks[i:i + 1000])
        assert all("id" in r for r in res), [r for r in res if "id" not in r][:3]
        ids += [r["id"] for r in res]
    return ids


def mixed(t, receiver, n, replicas=()):
    """n tasks: 40 % scheduled an hour ahead, 30 % succeeded, 20 % failed,
    10 % cancelled; waits for the finals, which any of t and `replicas` may
    have recorded. Returns {status: set of ids}."""
    ns, nok, nf = n * 4 // 10, n * 3 // 10, n * 2 // 10
    nc = n - ns - nok - nf
    later = now_ms() + 3600_000
    sched = ingest(t, [{"callback_url": receiver.url(), "key": f"s{i}", "execute_at": later + i}
                       for i in range(ns + nc)])
    ok = ingest(t, [{"callback_url": receiver.url(), "key": f"o{i}"} for i in range(nok)])
    failed = ingest(t, [{"callback_url": receiver.url("/status/500"), "key": f"f{i}",
                         "retry": {"max_attempts": 1}} for i in range(nf)])
    cancelled = sched[ns:]
    for tid in cancelled:
        assert t.delete(tid)[0] == 204
    wait_for(lambda: sum(r.request("GET", "/v1/stats")[1]["settled"]
                         for r in (t, *replicas)) >= nok + nf, 60, 0.2,
             what="the finals recorded")
    return {"scheduled": set(sched[:ns]), "succeeded": set(ok), "failed": set(failed),
            "cancelled": set(cancelled)}


def check_walks(t, want, limit):
    for status, ids in want.items():
        got, pages = walk(t, status, limit)
        assert len(got) == len(set(got)), f"{status}: a task on two pages"
        assert set(got) == ids, (status, len(got), len(ids), list(set(ids) - set(got))[:3])
        assert pages >= len(ids) // limit
    # newest first: the same tasks, the other way round
    got, _ = walk(t, "scheduled", limit, order="newest")
    assert set(got) == want["scheduled"] and len(got) == len(want["scheduled"])
    # time order to the minute (a minute's slices one after the other)
    minutes = [int(i.split(".")[2]) // 60000 for i in got]
    assert minutes == sorted(minutes, reverse=True)


@pytest.mark.long
def test_10000_tasks_in_mixed_states_each_listed_once(tickd, receiver):
    want = mixed(tickd, receiver, 10000)
    check_walks(tickd, want, 500)
    # a page of a status holds that status's whole tasks
    code, res = tickd.request("GET", "/v1/tasks?status=failed&limit=3")
    assert code == 200 and len(res["tasks"]) == 3
    assert all(x["status"] == "failed" and x["last_status_code"] == 500 for x in res["tasks"])


def test_listing_across_the_masters_of_a_cluster(cluster, tickd_factory, receiver):
    ts = replicas(tickd_factory, cluster, n=2)
    want = mixed(ts[0], receiver, 2000, ts[1:])
    per_master = cluster.keys("tickd:{*}:failed")
    assert sum(1 for ks in per_master.values() if ks) >= 2  # spread over the masters
    check_walks(ts[1], want, 97)
    # the metrics' count of scheduled tasks is the whole cluster's, from any replica
    with urllib.request.urlopen(f"http://127.0.0.1:{ts[1].port}/metrics", timeout=10) as r:
        line = [ln for ln in r.read().decode().splitlines()
                if ln.startswith("tickd_tasks_scheduled ")]
    assert line == [f"tickd_tasks_scheduled {len(want['scheduled'])}"], line


def test_pages_are_stable_under_writes(tickd, receiver):
    later = now_ms() + 3600_000
    first = set(ingest(tickd, [{"callback_url": receiver.url(), "key": f"a{i}",
                                "execute_at": later + i * 50} for i in range(1500)]))
    seen, cursor, k = [], None, 0
    while True:
        q = {"status": "scheduled", "limit": 100}
        if cursor:
            q["cursor"] = cursor
        code, res = tickd.request("GET", "/v1/tasks?" + urllib.parse.urlencode(q))
        assert code == 200
        seen += [x["id"] for x in res["tasks"]]
        # meanwhile: more tasks, some before the cursor, some after
        ingest(tickd, [{"callback_url": receiver.url(), "key": f"b{k}-{j}",
                        "execute_at": later + j * 997} for j in range(20)])
        k += 1
        cursor = res["next_cursor"]
        if not cursor:
            break
    assert len(seen) == len(set(seen)), "a task on two pages"
    assert first <= set(seen), "a task there from the start was missed"


def test_dead_letter_flow(tickd, receiver):
    """A receiver that fails until told otherwise: the task fails, is listed
    as failed, is retried, and succeeds with its history kept."""
    t = tickd.post({"callback_url": receiver.url("/fail/1"), "retry": {"max_attempts": 1}})
    tid = t["id"]
    wait_for(lambda: tickd.get(tid)[1]["status"] == "failed", 10, what="the task failed")
    ids, _ = walk(tickd, "failed")
    assert ids == [tid]
    code, res = tickd.request("POST", f"/v1/tasks/{tid}/retry")
    assert code == 200 and res["status"] in ("scheduled", "running") and res["attempts"] == 0, res
    assert res["last_status_code"] == 500  # its history kept
    wait_for(lambda: tickd.get(tid)[1]["status"] == "succeeded", 10, what="the retry succeeded")
    assert walk(tickd, "failed")[0] == []
    assert walk(tickd, "succeeded")[0] == [tid]
    assert len(receiver.by_task()[tid]) == 2
    # retry of a task that did not fail: 409
    code, res = tickd.request("POST", f"/v1/tasks/{tid}/retry")
    assert code == 409 and "succeeded" in res["error"]["message"], res
    assert tickd.request("POST", "/v1/tasks/202611220000.0.1.nokey/retry")[0] == 404


def test_retry_later_and_run_now(tickd, receiver):
    t = tickd.post({"callback_url": receiver.url("/status/500"), "retry": {"max_attempts": 1}})
    wait_for(lambda: tickd.get(t["id"])[1]["status"] == "failed", 10)
    at = now_ms() + 2500
    code, res = tickd.request("POST", f"/v1/tasks/{t['id']}/retry", {"execute_at": at})
    assert code == 200 and res["next_attempt_at"] == at, res
    wait_for(lambda: len(receiver.by_task().get(t["id"], [])) == 2, 10, what="the retry")
    second = receiver.by_task()[t["id"]][1]["t"]
    assert at <= second <= at + 100, second - at
    # a task due in an hour, run now: fires now, once
    far = tickd.post({"callback_url": receiver.url(), "delay_ms": 3600_000})
    code, res = tickd.request("GET", f"/v1/tasks/{far['id']}")
    assert res["status"] == "scheduled"
    t0 = now_ms()
    code, res = tickd.request("POST", f"/v1/tasks/{far['id']}/run")
    assert code == 200, res
    wait_for(lambda: far["id"] in receiver.by_task(), 5, what="run now")
    assert receiver.by_task()[far["id"]][0]["t"] - t0 < 1500
    tickd.final(far["id"])  # done: it can fire no more
    assert len(receiver.by_task()[far["id"]]) == 1
    code, res = tickd.request("POST", f"/v1/tasks/{far['id']}/run")
    assert code == 409 and "succeeded" in res["error"]["message"]
    # retry of a scheduled task: 409
    other = tickd.post({"callback_url": receiver.url(), "delay_ms": 3600_000})
    code, res = tickd.request("POST", f"/v1/tasks/{other['id']}/retry")
    assert code == 409 and "scheduled" in res["error"]["message"]


def test_bulk_retry_and_filters(tickd, receiver):
    ingest(tickd, [{"callback_url": receiver.url("/fail/1"), "key": f"bulk{i}",
                    "retry": {"max_attempts": 1}} for i in range(250)])
    ingest(tickd, [{"callback_url": receiver.url("/status/500"), "key": f"other{i}",
                    "retry": {"max_attempts": 1}} for i in range(30)])
    wait_for(lambda: len(walk(tickd, "failed")[0]) == 280, 20, 0.2, what="280 failed")
    assert len(walk(tickd, "failed", key_prefix="bulk")[0]) == 250
    code, res = tickd.request("POST", "/v1/tasks/retry",
                              {"status": "failed", "key_prefix": "bulk", "limit": 200})
    assert code == 200 and res["retried"] == 200 and res["next_cursor"], res
    code, res = tickd.request("POST", "/v1/tasks/retry",
                              {"status": "failed", "key_prefix": "bulk", "cursor": res["next_cursor"]})
    assert code == 200 and res["retried"] == 50 and res["next_cursor"] is None, res
    wait_for(lambda: len(walk(tickd, "succeeded", key_prefix="bulk")[0]) == 250, 20, 0.2,
             what="the retried tasks succeeded")
    assert len(walk(tickd, "failed")[0]) == 30
    # execute_at window
    t0 = now_ms() + 3600_000
    ingest(tickd, [{"callback_url": receiver.url(), "key": f"w{i}", "execute_at": t0 + i * 1000}
                   for i in range(10)])
    got, _ = walk(tickd, "scheduled", **{"from": t0 + 2000, "to": t0 + 5000})
    assert len(got) == 3


def test_schedule_runs_by_schedule_id(tickd, receiver):
    tickd.request("POST", "/v1/schedules", {"key": "lr", "every_ms": 1000, "times": 3,
                                            "task": {"callback_url": receiver.url()}})
    wait_for(lambda: receiver.count() >= 3, 10)
    tickd.settled()  # each run's success recorded
    got, _ = walk(tickd, "succeeded", schedule_id="sch.lr")
    assert len(got) == 3 and all(":lr:" in i for i in got)


@pytest.mark.parametrize("store", ["redis", "memory"])
def test_schedule_id_lists_its_own_runs_alone(redis, tickd_factory, receiver, store):
    """The runs of schedule ab:1 are keyed s:ab:1:<version>, which starts as
    a run of schedule ab does (s:ab:<version>): neither is listed as the
    other's."""
    t = tickd_factory(redis if store == "redis" else None, store=store).start()
    for key in ("ab", "ab:1"):
        t.request("POST", "/v1/schedules", {"key": key, "every_ms": 1000, "times": 1,
                                            "task": {"callback_url": receiver.url()}})
    wait_for(lambda: receiver.count() >= 2, 10, what="a run of each")
    ids = [c["headers"]["tickd-task-id"] for c in receiver.calls]
    for tid in ids:
        t.final(tid)
    for sid, key in (("sch.ab", "s:ab:1"), ("sch.ab:1", "s:ab:1:1")):
        got, _ = walk(t, "succeeded", schedule_id=sid)
        assert got == [i for i in ids if i.endswith("." + key)], (sid, got)


BAD = [("", "status: required"), ("status=done", "status: done is not one of"),
       ("status=failed&limit=1001", "limit: must be an integer from 1 to 1000"),
       ("status=failed&limit=x", "limit:"), ("status=failed&cursor=zz", "cursor: malformed"),
       ("status=failed&order=up", "order: must be oldest or newest"),
       ("status=failed&colour=red", "colour: unknown parameter"),
       ("status=failed&from=yesterday", "from: must be"),
       ("status=failed&from=2000&to=1000", "to: must be after from"),
       ("status=failed&key_prefix=a%2Fb", "key_prefix:"),
       ("status=failed&schedule_id=x", "schedule_id: not a schedule id")]


@pytest.mark.parametrize("query,message", BAD, ids=[m for _, m in BAD])
def test_bad_listing_parameters(tickd, query, message):
    code, res = tickd.request("GET", "/v1/tasks?" + query)
    assert code == 400 and res["error"]["message"].startswith(message), res


def test_bad_retry_bodies(tickd):
    for body, message in [({"status": "scheduled"}, "status: only failed or cancelled"),
                          ({"status": "failed", "limit": 10001}, "limit:"),
                          ({"status": "failed", "colour": 1}, "colour: unknown field"),
                          ({}, "status: required")]:
        code, res = tickd.request("POST", "/v1/tasks/retry", body)
        assert code == 400 and res["error"]["message"].startswith(message), (body, res)
    for body, message in [({"execute_at": "soon"}, "execute_at:"),
                          ({"execute_at": 1, "when": 2}, "when: unknown field"),
                          ([1], "body: must be a JSON object"), ("now", "body: must be a JSON object"),
                          (None, "body: must be a JSON object")]:
        raw = json.dumps(body).encode()
        code, res = tickd.request("POST", "/v1/tasks/x/retry", raw=raw)
        assert code == 400 and res["error"]["message"].startswith(message), (body, res)
    code, res = tickd.request("POST", "/v1/tasks/x/retry", raw=b'{"execute_at":1,"execute_at":2}')
    assert code == 400 and res["error"]["message"] == "execute_at: given more than once", res
    assert tickd.request("GET", "/v1/tasks/x/retry")[0] == 405
    assert tickd.request("POST", "/v1/tasks/x/explode")[0] == 404


def test_attempt_history_keeps_the_last_attempts(tickd, receiver):
    """Each attempt's time, duration, status, error and (for a failed one) the
    first 1 KiB of the answer, made text: a raw receiver answers 500 with
    3000 bytes holding a NUL, a control byte and invalid UTF-8."""
    body = b"\x00bad\x01\xff" + "é".encode() + b"x" * 2990

    def answer(c):
        read_head(c)
        c.sendall(b"HTTP/1.1 500 Oops\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                  % len(body) + body)
    srv = TcpServer(answer, backlog=16)
    port = srv.port
    t = tickd.post({"callback_url": f"http://127.0.0.1:{port}/x",
                    "retry": {"max_attempts": 3, "backoff_ms": 100}})
    wait_for(lambda: tickd.get(t["id"])[1]["status"] == "failed", 15, what="3 attempts")
    srv.close()
    h = tickd.get(t["id"])[1]["attempt_history"]
    assert len(h) == 3, h
    assert [e["at"] for e in h] == sorted(e["at"] for e in h)
    for e in h:
        assert e["status_code"] == 500 and e["error"] == "HTTP 500" and 0 <= e["took_ms"] < 5000
        b = e["body"].encode()
        assert e["body"].startswith("?bad??é") and len(e["body"]) == 1024 - 1, e["body"][:20]
        assert b"\x00" not in b
    # a success: its time, duration and status, no body
    ok = tickd.post({"callback_url": receiver.url()})
    wait_for(lambda: tickd.get(ok["id"])[1]["status"] == "succeeded", 10)
    h = tickd.get(ok["id"])[1]["attempt_history"]
    assert len(h) == 1 and h[0]["status_code"] == 200 and "body" not in h[0], h


def test_succeeded_ids_are_read_from_a_member_a_settle(redis):
    """list.lua, as tickd runs it, on a real Redis: the succeeded index holds
    a member a settle (its ids, '\\n' between) beside members of one id (as an
    older build wrote them). Every id is listed once, by score, then the
    members' order, then the ids' in each; newest first is the same the
    other way round; a cursor that lands inside a member, or on a score that
    several members share, goes on after its id."""
    src = lua_source("list")
    keys = [f"t:{{202611270000.1}}:{k}"
            for k in ("due", "run", "ok", "failed", "cancelled", "del", "task", "expired")]
    redis.cli("ZADD", keys[2], "5", "a3\na1", "5", "a2", "6", "b1\nb0\nb7", "4", "c9", "7", "d")
    score = {"c9": "4", "a3": "5", "a1": "5", "a2": "5", "b1": "6", "b0": "6", "b7": "6", "d": "7"}
    want = ["c9", "a2", "a3", "a1", "b1", "b0", "b7", "d"]

    def page(order, after_score, after_id, limit):
        out = redis.cli("EVAL", src, "8", *keys, "succeeded", order, after_score, after_id,
                        str(limit), "-1", "-1", "", "").split("\n") + ["", ""]
        rest = [x for x in out[4:] if x]
        pairs = list(zip(rest[0::2], rest[1::2]))
        assert all(score[i] == s for i, s in pairs), pairs
        return [i for i, _ in pairs], out[2], out[3]

    for order, expect in (("asc", want), ("desc", want[::-1])):
        for limit in (1, 2, 3, 4, 100):
            got, s, i = [], "", ""
            while True:
                ids, s, i = page(order, s, i, limit)
                got += ids
                if len(ids) < limit:
                    break
            assert got == expect, (order, limit, got)


def test_a_settle_writes_one_index_member(redis, tickd, receiver):
    """A burst's successes are indexed a member a settle, not a member a
    task, and the listing shows each of them once, newest first the same
    tasks the other way round."""
    ids = ingest(tickd, [{"callback_url": receiver.url(), "key": f"m{i}"} for i in range(600)])
    wait_for(lambda: receiver.count() >= 600, 30, 0.1, what="600 callbacks")
    tickd.settled()
    asc, _ = walk(tickd, "succeeded", 7)
    desc, _ = walk(tickd, "succeeded", 7, order="newest")
    assert sorted(asc) == sorted(ids) and len(asc) == len(ids)
    assert desc == asc[::-1]
    members = sum(int(redis.cli("ZCARD", k)) for k in redis.cli("KEYS", "tickd:{*}:ok").split())
    assert 0 < members < len(ids) / 4, members


def test_a_page_boundary_inside_many_entries_of_one_score(redis):
    """list.lua with a SCAN_MAX of 7 (20,000 in tickd) over 700 entries, 600
    of them at one score (a burst's tasks due at one instant): every page
    goes on from its cursor, found by halving the entries of its score,
    where reading the entries up to it one by one spent the whole budget
    before the cursor, and the walk started over from the slice's first
    entry, for ever. Both orders, with and without a filter that refuses
    every entry."""
    src = lua_source("list").replace("local SCAN_MAX = 20000", "local SCAN_MAX = 7")
    assert "SCAN_MAX = 7" in src
    keys = [f"t:{{202611270000.1}}:{k}"
            for k in ("due", "run", "ok", "failed", "cancelled", "del", "task", "expired")]
    entries = [(4, f"a{i:03d}") for i in range(50)] + [(5, f"b{i:03d}") for i in range(600)] + \
              [(6, f"c{i:03d}") for i in range(50)]
    for i in range(0, len(entries), 100):
        redis.cli("ZADD", keys[3], *[x for s, m in entries[i:i + 100] for x in (s, m)])
    want = [m for _, m in sorted(entries)]

    def walk(order, limit, prefix):
        got, s, i, calls = [], "", "", 0
        while True:
            calls += 1
            assert calls < 2000, "the walk does not end"
            out = redis.cli("EVAL", src, "8", *keys, "failed", order, s, i, str(limit), "-1",
                            "-1", prefix, "").split("\n") + ["", ""]
            rest = [x for x in out[4:] if x]
            ids = rest[0::2]
            got += ids
            if out[1] == "1" or len(ids) == limit:
                assert out[3], "a page went on with no cursor"
                s, i = out[2], out[3]
                continue
            return got

    for order, expect in (("asc", want), ("desc", want[::-1])):
        for limit in (1, 50, 130):
            assert walk(order, limit, "") == expect, (order, limit)
        assert walk(order, 50, "zz") == []
