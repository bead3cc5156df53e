"""A slice's lease index and task hash are pinned out of Redis's packed
encodings (lua/lib.lua: RUN_PIN, TASK_PIN): a few dozen leases of ids about
52 bytes long kept :run a packed list that every ZADD and ZREM walked, and
the first 256 tasks of a slice did the same to :task. The pins are no tasks:
never listed, never counted, and the lease index's goes with its last lease."""
from harness import lua_constant, lua_source, now_ms, wait_for


def _slices(ids):
    return sorted({".".join(i.split(".")[:2]) for i in ids})


def test_leases_held_in_a_skiplist_and_the_pin_goes_with_the_last(redis, receiver,
                                                                   tickd_factory):
    t = tickd_factory(redis).start()
    at = now_ms() + 1500
    # 24 answers that take 3 s: their leases are held meanwhile
    res = t.batch([{"callback_url": receiver.url("/slow/3000"), "execute_at": at,
                    "timeout_ms": 20000} for _ in range(24)])
    ids = [r["id"] for r in res]
    wait_for(lambda: receiver.count() >= 24, 10, what="24 callbacks under way")
    for s in _slices(ids):
        assert redis.cli("OBJECT", "ENCODING", f"tickd:{{{s}}}:run").strip() == "skiplist"
        assert redis.cli("OBJECT", "ENCODING", f"tickd:{{{s}}}:task").strip() == "hashtable"
    # listed and counted as tasks: the 24, no pin
    code, page = t.request("GET", "/v1/tasks?status=running&limit=100")
    assert code == 200, page
    assert sorted(x["id"] for x in page["tasks"]) == sorted(ids)
    code, page = t.request("GET", "/v1/tasks?status=running&limit=100&order=newest")
    assert code == 200 and sorted(x["id"] for x in page["tasks"]) == sorted(ids), page
    for i in ids:
        wait_for(lambda i=i: t.get(i)[1]["status"] == "succeeded", 15, what=f"{i} succeeded")
    # the pin went with the last lease, and the key with it
    for s in _slices(ids):
        assert redis.cli("EXISTS", f"tickd:{{{s}}}:run").strip() == "0", s
    # and the slice was passed: nothing keeps its watermark back
    t.settled()
    code, page = t.request("GET", "/v1/tasks?status=running&limit=100")
    assert code == 200 and page["tasks"] == [], page


def test_the_claim_counts_leases_without_the_pin(redis):
    """claim.lua, as tickd runs it, on a real Redis: the leases it reports
    left in the slice (what lets the scheduler pass a slice) leave the pin
    out, and a stale lease dropped with no other left takes the pin (and the
    key) with it."""
    src = lua_source("claim")
    pin = lua_constant("RUN_PIN")
    assert len(pin) > 64
    keys = [f"t:{{202611270000.1}}:{k}" for k in ("due", "task", "del", "run", "ptr")]
    later = now_ms() + 600000

    def claim():
        out = redis.cli("EVAL", src, "5", *keys, "1500", "16", "5000", "1000", "16", "1").split()
        return int(out[1])  # the leases left

    # a live lease of another replica (its deadline ahead), and the pin
    redis.cli("ZADD", keys[3], "+inf", pin, str(later), "202611270000.1.1.a")
    assert claim() == 1
    # a lease whose task is gone: dropped, and the pin and the key with it
    redis.cli("ZADD", keys[3], "1", "202611270000.1.1.b")
    redis.cli("ZREM", keys[3], "202611270000.1.1.a")
    assert claim() == 0
    assert redis.cli("EXISTS", keys[3]).strip() == "0"


def test_a_lease_ended_by_ptr_takes_the_pin_with_the_last(redis):
    """ptr.lua, as tickd runs it: a lease ended where a retry's pointer lives
    (done, requeue, or a retry added elsewhere) takes the pin with it when it
    was the last, and leaves it while another lease is held."""
    src = lua_source("ptr")
    pin = lua_constant("RUN_PIN")
    keys = [f"t:{{202611270001.2}}:{k}" for k in ("due", "run", "ptr")]
    later = str(now_ms() + 600000)
    redis.cli("ZADD", keys[1], "+inf", pin, later, "a", later, "b")
    redis.cli("HSET", keys[2], "a", "1000", "b", "1000")
    redis.cli("EVAL", src, "3", *keys, "a", "done", "0", "0")
    # b's lease and the pin stay
    assert redis.cli("ZCARD", keys[1]).strip() == "2"
    assert redis.cli("ZSCORE", keys[1], "b").strip() == later
    assert redis.cli("ZSCORE", keys[1], pin).strip() == "inf"
    redis.cli("EVAL", src, "3", *keys, "b", "done", "0", "0")
    assert redis.cli("EXISTS", keys[1]).strip() == "0"
