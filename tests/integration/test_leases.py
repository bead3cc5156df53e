"""A claim's fresh tasks share one lease (lua/lib.lua: leases of a claim's
fresh tasks): one member of :run a second of deadline, its ids in a list,
a count of those still running under it in :task. The settle that counts
the last off drops it; one that expires (its holder died) is opened by the
claim, each task still running under it taken again with a lease of its
own, once. The scripts as tickd runs them, on a real Redis; and the real
binary with a real receiver for what the API lists."""
import urllib.parse

from harness import lua_constant, lua_source, now_ms, wait_for
from redis_proto import command

REC = '"http://127.0.0.1:9/cb"\n\n10000\n\n\n{}'
SLICE = "202611270000.3"
KEYS = {k: f"t:{{{SLICE}}}:{k}" for k in
        ("due", "task", "del", "run", "ptr", "ok", "failed", "cancelled", "expired")}
LEASE = lua_constant("LEASE_HEAD")


def _add(redis, n, at):
    """n fresh tasks due at `at`, as add.lua stores them: their ids."""
    ids = [f"{SLICE}.{at}.k{i:04d}" for i in range(n)]
    for i in ids:
        redis.cli("ZADD", KEYS["due"], str(at), i + "\n" + REC)
    redis.cli("HINCRBY", KEYS["task"], "#open", str(n))
    return ids


def _claim(redis, limit):
    """claim.lua: (taken, the fresh tasks' ids, the ids taken again)."""
    out = command(redis.port, "EVAL", lua_source("claim"), 5,
                  *[KEYS[k] for k in ("due", "task", "del", "run", "ptr")],
                  1500, limit, 5000, 1000, limit)
    fresh, again, i = [], [], 3
    while i < len(out):
        if isinstance(out[i], bytes):
            fresh.append(out[i].split(b"\n", 1)[0].decode())
            i += 1
        else:
            again.append(out[i + 1].decode())
            assert out[i + 2] == 1, out[i:i + 4]  # its first attempt, again
            i += 4
    return out[2], fresh, again


def _settle(redis, ids, token, outcome=None, due=0):
    """settle.lua: the first attempts of ids succeeded (or ended as
    outcome, due again at due, in the general group)."""
    args = []
    for i in ids:
        if outcome:
            args += [i, outcome, 1, "", "", due, 1, "", now_ms(), 3, 0, ""]
        else:
            args += [i, '{"t":%d,"ms":3,"c":200}' % now_ms()]
    return command(redis.port, "EVAL", lua_source("settle"), 8,
                   *[KEYS[k] for k in ("due", "task", "del", "run", "ok", "failed", "cancelled",
                                        "expired")],
                   86400000, 604800000, token, *args)


def _leases(redis):
    """The claims' leases in :run: {token: (score, ids of its list, count)}."""
    out = {}
    run = command(redis.port, "ZRANGE", KEYS["run"], 0, -1, "WITHSCORES") or []
    for m, score in zip(run[::2], run[1::2]):
        m = m.decode()
        if m.startswith(LEASE):
            t = m[len(LEASE):]
            ids = [x.decode() for x in command(redis.port, "LRANGE", f"t:{{{SLICE}}}:l:{t}", 0, -1)]
            n = command(redis.port, "HGET", KEYS["task"], "#n:" + t)
            out[t] = (float(score), ids, n and int(n))
    return out


def _own(redis):
    """The ids in :run with a lease of their own."""
    run = command(redis.port, "ZRANGE", KEYS["run"], 0, -1) or []
    return sorted(m.decode() for m in run
                  if not m.decode().startswith(LEASE) and not m.decode().startswith("#pin"))


def _running(redis, order="asc"):
    """list.lua's running tasks of the slice, in order."""
    out = command(redis.port, "EVAL", lua_source("list"), 8,
                  *[KEYS[k] for k in ("due", "run", "ok", "failed", "cancelled", "del", "task",
                                       "expired")],
                  "running", order, "", "", 100, -1, -1, "", "0")
    return [x.decode() for x in out[4::2]]


def _state(redis, tid):
    import json
    raw = command(redis.port, "HGET", KEYS["task"], "s:" + tid)
    return raw and json.loads(raw)


def test_a_claims_fresh_tasks_share_a_lease_the_last_settle_drops(redis):
    ids = _add(redis, 5, now_ms() - 1000)
    taken, fresh, again = _claim(redis, 16)
    assert (taken, sorted(fresh), again) == (5, ids, []), (taken, fresh, again)
    (t, (score, lids, n)), = _leases(redis).items()
    assert (lids, n) == (ids, 5) and _own(redis) == []
    # scored the second its deadline (now + timeout + margin) rounds up to
    assert score % 1000 == 0 and now_ms() + 15000 <= score <= now_ms() + 16000 + 1000, score
    for i in ids:
        assert _state(redis, i)["l"] == int(t), _state(redis, i)
    assert _running(redis) == ids
    _settle(redis, ids[:3], "s1")
    assert _leases(redis) == {t: (score, ids, 2)}
    # listed running: the two it still holds
    assert _running(redis) == ids[3:] and _running(redis, "desc") == ids[:2:-1]
    # a settle sent again (its answer lost) counts nothing twice
    _settle(redis, ids[:3], "s1")
    assert _leases(redis)[t][2] == 2
    _settle(redis, ids[3:], "s2")
    assert _leases(redis) == {} and redis.cli("EXISTS", KEYS["run"]) == "0"
    assert redis.cli("EXISTS", f"t:{{{SLICE}}}:l:{t}") == "0"
    assert redis.cli("HEXISTS", KEYS["task"], "#n:" + t) == "0"
    for i in ids:
        st = _state(redis, i)
        assert st["s"] == "succeeded" and "l" not in st, st


def test_an_expired_lease_is_opened_each_task_taken_again_once(redis):
    ids = _add(redis, 6, now_ms() - 1000)
    assert _claim(redis, 16)[0] == 6
    (t, (score, _, _)), = _leases(redis).items()
    # ids[0] succeeded; ids[1] failed and waits for its retry, due later
    _settle(redis, ids[:1], "s1")
    _settle(redis, ids[1:2], "s2", outcome="retry", due=now_ms() + 600000)
    assert _leases(redis)[t][2] == 4
    # its holder died: the lease ran out
    redis.cli("ZADD", KEYS["run"], "1", LEASE + t)
    # a room of 3: three ids looked at, two of them still running under it
    taken, fresh, again = _claim(redis, 3)
    assert (taken, fresh, sorted(again)) == (3, [], ids[2:3]), (taken, fresh, again)
    assert _leases(redis)[t][1] == ids[3:] and _own(redis) == ids[2:3]
    taken, fresh, again = _claim(redis, 16)
    assert (fresh, sorted(again)) == ([], ids[3:]), (fresh, again)
    # the lease went once every id was looked at; each task now has its own
    assert _leases(redis) == {} and _own(redis) == ids[2:]
    assert redis.cli("EXISTS", f"t:{{{SLICE}}}:l:{t}") == "0"
    assert redis.cli("HEXISTS", KEYS["task"], "#n:" + t) == "0"
    for i in ids[2:]:
        st = _state(redis, i)
        assert st["s"] == "running" and "l" not in st, st
    assert _state(redis, ids[0])["s"] == "succeeded"
    assert _state(redis, ids[1])["s"] == "scheduled"
    # and they settle as any task with a lease of its own
    _settle(redis, ids[2:], "s3")
    assert redis.cli("EXISTS", KEYS["run"]) == "0"
    assert all(_state(redis, i)["s"] == "succeeded" for i in ids[2:])


def test_a_task_that_runs_under_a_lease_of_its_own_is_not_taken_from_an_old_one(redis):
    """A task of a claim's lease that was released, then claimed again with a
    lease of its own, is not taken again when the old lease runs out: it
    would run twice while its own lease still holds."""
    ids = _add(redis, 3, now_ms() - 1000)
    assert _claim(redis, 16)[0] == 3
    (t, _), = _leases(redis).items()
    # handed back (a replica stopping), then claimed again at once
    _settle(redis, ids[:1], "s1", outcome="release")
    taken, fresh, again = _claim(redis, 16)
    assert again == ids[:1] and _own(redis) == ids[:1], (taken, fresh, again)
    redis.cli("ZADD", KEYS["run"], "1", LEASE + t)
    taken, fresh, again = _claim(redis, 16)
    assert sorted(again) == ids[1:], again
    assert _own(redis) == ids and _leases(redis) == {}


def test_running_tasks_are_listed_from_a_claims_lease(redis, receiver, tickd_factory):
    """GET /v1/tasks?status=running lists the tasks of a claim's lease while
    they run, every page size, both orders, and none twice; each goes from
    the list when it is settled, the lease with the last."""
    t = tickd_factory(redis).start()
    at = now_ms() + 1500
    res = t.batch([{"callback_url": receiver.url("/slow/2500"), "execute_at": at,
                    "timeout_ms": 20000} for _ in range(30)])
    ids = [r["id"] for r in res]
    wait_for(lambda: receiver.count() >= 30, 10, what="30 callbacks under way")
    slices = sorted({".".join(i.split(".")[:2]) for i in ids})
    for s in slices:
        run = [m for m in redis.cli("ZRANGE", f"tickd:{{{s}}}:run", 0, -1).split("\n") if m]
        assert all(m.startswith(LEASE) or m.startswith("#pin") for m in run), run
    for order in ("oldest", "newest"):
        for size in (1, 7, 30, 100):
            seen, cursor = [], None
            while True:
                q = {"status": "running", "limit": size, "order": order}
                if cursor:
                    q["cursor"] = cursor
                code, page = t.request("GET", "/v1/tasks?" + urllib.parse.urlencode(q))
                assert code == 200, page
                assert all(x["status"] == "running" for x in page["tasks"]), page
                seen += [x["id"] for x in page["tasks"]]
                cursor = page["next_cursor"]
                if not cursor:
                    break
            assert sorted(seen) == sorted(ids) and len(seen) == len(set(seen)), (order, size)
    for i in ids:
        wait_for(lambda i=i: t.get(i)[1]["status"] == "succeeded", 15, what=f"{i} succeeded")
    t.settled()
    code, page = t.request("GET", "/v1/tasks?status=running&limit=100")
    assert code == 200 and page["tasks"] == [], page
    for s in slices:
        assert redis.cli("EXISTS", f"tickd:{{{s}}}:run") == "0", s
        fields = redis.cli("HKEYS", f"tickd:{{{s}}}:task").split("\n")
        assert not [f for f in fields if f.startswith("#n:")], fields
        assert not [k for k in redis.cli("KEYS", f"tickd:{{{s}}}:l:*").split("\n") if k], s


def test_a_schema2_keyspace_is_read_with_its_leases_and_upgraded(redis, receiver, tickd_factory):
    """A keyspace of schema 2, its replica gone while a fresh task ran under
    a lease of its own and a state of the claim's text with no token: the
    task runs again (once), settles, and the keyspace is marked schema 3."""
    import json
    import time
    redis.cli("HSET", "tickd:meta", "buckets", "16", "schema", "2")
    at = now_ms() + 3000
    sl = time.strftime("%Y%m%d%H%M", time.gmtime(at // 1000)) + ".7"
    tid = f"{sl}.{at}.oldlease"
    rec = json.dumps(receiver.url()) + '\n\n10000\n\n\n{"req":{"n":"old"}}'
    redis.cli("HSET", f"tickd:{{{sl}}}:task", tid, rec,
              "s:" + tid, '{"s":"running","a":0,"due":%d,"to":10000,"q":1}' % at, "#open", "1")
    redis.cli("ZADD", f"tickd:{{{sl}}}:run", str(now_ms() - 1000), tid)
    redis.cli("ZADD", "tickd:slices", "0", sl)
    t = tickd_factory(redis).start()
    assert redis.cli("HGET", "tickd:meta", "schema") == "3"
    wait_for(lambda: t.get(tid)[1]["status"] == "succeeded", 15, what="the old lease's task ran")
    code, got = t.get(tid)
    assert code == 200 and got["attempts"] == 1 and len(got["attempt_history"]) == 1, got
    assert [json.loads(c["body"]) for c in receiver.calls] == [{"n": "old"}]
    assert redis.cli("EXISTS", f"tickd:{{{sl}}}:run") == "0"
