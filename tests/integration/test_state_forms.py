"""The task state a claim writes for a first attempt, and the one the settle
writes when that attempt succeeds, are written by the scripts as text
(lua/lib.lua: state_run1, settle_ok1); every other state by cjson. Both must
be the same JSON: what is stored, and what the API answers, does not depend
on which path wrote it. Real binary, real redis-server, real receiver."""
import json

from harness import now_ms, wait_for


def stored_state(redis, tid):
    home = tid.rsplit(".", 2)[0]
    return json.loads(redis.cli("HGET", "tickd:{%s}:task" % home, "s:" + tid))


def settled_ok(tickd, tid):
    wait_for(lambda: tickd.get(tid)[1]["status"] == "succeeded", 15, what="succeeded " + tid)
    return tickd.get(tid)[1]


def test_first_attempt_states_are_the_json_of_every_other_path(tickd, redis, receiver):
    at = now_ms() + 600
    plain = tickd.post({"callback_url": receiver.url("/slow/700"), "execute_at": at})
    named = tickd.post({"callback_url": receiver.url("/ok"), "execute_at": at,
                        "queue": "q.state-1", "timeout_ms": 2500})
    # retried once: the first attempt fails, the second is settled by cjson
    again = tickd.post({"callback_url": receiver.url("/fail/1"), "execute_at": at,
                        "retry": {"max_attempts": 3, "backoff_ms": 50}})

    # while the slow one runs, its state is the claim's text, read as JSON
    wait_for(lambda: tickd.get(plain["id"])[1]["status"] == "running", 10, what="running")
    st = stored_state(redis, plain["id"])
    assert st == {"s": "running", "a": 0, "due": at, "to": 10000, "q": 1}, st

    for task, queue, timeout in ((plain, 1, 10000), (named, "q.state-1", 2500)):
        got = settled_ok(tickd, task["id"])
        st = stored_state(redis, task["id"])
        assert set(st) == {"s", "a", "due", "to", "q", "fin", "ft", "h"}, st
        assert (st["s"], st["a"], st["due"], st["to"], st["q"]) == \
            ("succeeded", 1, at, timeout, queue), st
        assert isinstance(st["fin"], int) and st["fin"] >= at, st
        assert isinstance(st["ft"], str) and st["ft"], st
        (h,) = st["h"]
        assert set(h) == {"t", "ms", "c"} and h["c"] == 200 and h["t"] >= at and h["ms"] >= 0, h
        assert got["attempts"] == 1, got

    got = settled_ok(tickd, again["id"])
    st = stored_state(redis, again["id"])
    assert st["s"] == "succeeded" and st["a"] == 2 and [h["c"] for h in st["h"]] == [500, 200], st

    # the API answers the same members for a task whichever path settled it
    first = tickd.get(named["id"])[1]
    # (but what the failed attempt left: its status and error)
    assert set(first) == set(got) - {"last_status_code", "last_error"}, (first, got)
    assert [set(a) for a in first["attempt_history"]] == \
        [set(got["attempt_history"][-1])], (first, got)


def test_a_claim_reads_each_records_own_timeout_and_queue(tickd, redis, receiver):
    """The claim reads a record's timeout and queue once for a run of records
    that begin alike (lua/claim.lua: rec_head), and again after one that does
    not; and a due once for a run of ids that hold the same (digits_dot).
    One batch (one slice) of tasks of six kinds that differ only in the
    timeout, only in the queue, in a queue that begins as another does, in
    the url and in the method. First a run of each kind due on a ms of its
    own (:due orders by due, so each kind's first record comes right after a
    run of the one before, long enough that the cache holds that one's head:
    the default queue before qa, qa before qab, /ok before /ok/x); then all
    of them due on one ms, in the random order of their keys, so that every
    kind follows every other. Each task's state must name its own due,
    timeout and queue."""
    at = now_ms() + 1500
    a, b, c, d, e, f = kinds = [
        ("/ok", None, 5000, None),
        ("/ok", None, 6000, None),
        ("/ok", None, 5000, "qa"),
        ("/ok", None, 5000, "qab"),
        ("/ok/x", None, 5000, None),
        ("/ok", "PUT", 5000, None),
    ]
    plan = [(kind, at + k) for k, kind in enumerate((a, c, d, b, f, e)) for _ in range(36)]
    plan += [(kinds[(i * 7 + i // 40) % len(kinds)], at + 6) for i in range(120)]
    tasks, want = [], []
    for (path, method, timeout, queue), due in plan:
        t = {"callback_url": receiver.url(path), "execute_at": due, "timeout_ms": timeout}
        if method:
            t["method"] = method
        if queue:
            t["queue"] = queue
        tasks.append(t)
        want.append((due, timeout, queue or 1))
    results = tickd.batch(tasks)
    ids = [r["id"] for r in results]
    assert len(set(ids)) == len(ids) and len({i.rsplit(".", 2)[0] for i in ids}) == 1, ids[:3]
    wait_for(lambda: all(tickd.get(i)[1]["status"] == "succeeded" for i in ids), 30,
             what="every task succeeded")
    got = [(st["due"], st["to"], st["q"]) for st in (stored_state(redis, i) for i in ids)]
    assert got == want, [(i, g, w) for i, g, w in zip(ids, got, want) if g != w][:5]
    # (on the last ms, the :due order put kinds side by side: a record was
    # read again after one of another kind, many times)
    mixed = sorted(range(216, len(ids)), key=lambda k: ids[k])
    changes = sum(want[x] != want[y] for x, y in zip(mixed, mixed[1:]))
    assert changes > 50, changes


def test_a_fresh_record_without_a_timeout_does_not_stop_its_slice(tickd, redis, receiver):
    """A fresh member whose record holds no timeout (no tickd writes one; a
    hand or another program may) is claimed with the default's lease, and
    the attempt fails on the record (the callback client reads it as bad):
    the claim of its slice must not fail on it, which would keep every other
    task of that slice from firing."""
    at = now_ms() + 2000
    (good,) = tickd.batch([{"callback_url": receiver.url("/ok"), "execute_at": at}])
    slice_ = good["id"].rsplit(".", 2)[0]
    bad_id = "%s.%d.%s" % (slice_, at, "B" * 22)
    bad_rec = '"%s"\n\nnot-a-timeout\n\n\n{}' % receiver.url("/ok")
    k = "tickd:{%s}" % slice_
    assert redis.cli("ZADD", k + ":due", str(at), bad_id + "\n" + bad_rec) == "1"
    redis.cli("HINCRBY", k + ":task", "#open", "1")
    assert tickd.final(good["id"], timeout=20)["status"] == "succeeded"
    # the bad one was claimed with the default's lease, and its attempt
    # recorded as failed, with why (GET cannot make a spec of its record)
    wait_for(lambda: redis.cli("HGET", k + ":task", "s:" + bad_id), 15, what="bad one's state")
    wait_for(lambda: stored_state(redis, bad_id)["s"] == "failed", 15, what="bad one failed")
    st = stored_state(redis, bad_id)
    assert (st["a"], st["to"], st["err"]) == (1, 10000, "stored task is not valid JSON"), st
