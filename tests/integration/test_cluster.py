"""Redis Cluster and several replicas: a local 3-master + 3-replica cluster of
plain redis-server processes, three tickd replicas, one receiver."""
import collections
import signal
import time

import pytest

from harness import Cluster, now_ms, tcp_ports, wait_for

from conftest import FAST, replicas


def ingest(t, tasks):
    ids = []
    for i in range(0, len(tasks), 1000):
        res = t.batch(tasks[i:i + 1000])
        assert all("id" in r for r in res), [r for r in res if "id" not in r][:3]
        ids += [r["id"] for r in res]
    return ids


def test_minute_spreads_over_every_master(cluster, tickd_factory, receiver):
    t = tickd_factory(cluster.seeds()).start()
    minute = (now_ms() // 60000 + 5) * 60000
    ingest(t, [{"callback_url": receiver.url(), "execute_at": minute + i, "key": f"s{i}"}
               for i in range(400)])
    per_master = cluster.keys("tickd:{*}:due")
    slices = {p: {k.split("{")[1].split("}")[0] for k in ks} for p, ks in per_master.items()}
    assert len(slices) == 3
    for port, s in slices.items():
        # each master holds slices (buckets) of that one minute
        assert s, f"master {port} holds no slice of the minute"
    assert sum(len(s) for s in slices.values()) == 16  # every bucket used once


@pytest.mark.long
def test_20000_tasks_three_replicas_exactly_once(cluster, tickd_factory, receiver):
    ts = replicas(tickd_factory, cluster)
    start = now_ms() + 3000
    tasks = [{"callback_url": receiver.url(), "key": f"x{i}",
              "execute_at": start + (i * 15000) // 20000} for i in range(20000)]
    ids = ingest(ts[0], tasks[:10000]) + ingest(ts[1], tasks[10000:])
    wait_for(lambda: receiver.count() >= 20000, 60, 0.2, what="20000 callbacks")
    ts[0].settled(30)
    calls = receiver.by_task()
    assert set(calls) == set(ids)
    # Exactly once: no attempt of a task is made twice, by one replica or two
    # (the suite's receiver, on a loaded machine, may answer some after their
    # 10 s: those are retried, as new attempts; a replica held up past a
    # lease may not call again in the same attempt)
    twice = {i: [(c["headers"]["tickd-attempt"], round(c["t"] - start), c["peer"]) for c in cs]
             for i, cs in calls.items()
             if max(collections.Counter(c["headers"]["tickd-attempt"] for c in cs).values()) > 1}
    assert not twice, f"{len(twice)} tasks called twice in one attempt: {list(twice.items())[:5]}"
    # and a task called again was retried: its earlier attempts are recorded
    # as failed (a receiver too loaded to answer at all; one that failed
    # before the receiver saw it is not among the calls), its last succeeded
    again = [i for i, cs in calls.items() if len(cs) > 1]
    for i in again[:200]:
        task = ts[2].get(i)[1]
        hist = task["attempt_history"]
        assert task["status"] == "succeeded" and task["attempts"] >= len(calls[i]), task
        assert all(h.get("error") for h in hist[:-1]) and not hist[-1].get("error"), task
    fired = [t.request("GET", "/v1/stats")[1]["fired"] for t in ts]
    # every callback fired is a task's first attempt or a retry, but those
    # not made (tickd's own failure) and those not begun (reached past their
    # lease: at the pool, after they fired, or before): these fire again
    # without counting an attempt
    def total(name):
        return sum(t.metric(name) for t in ts)
    least = 20000 + total("tickd_task_retries_total") + total("tickd_callbacks_deferred_total")
    late = total("tickd_callbacks_late_total")
    assert least <= sum(fired) <= least + late, (fired, least, late)
    assert min(fired) > 20000 * 0.1, f"work not spread over the replicas: {fired}"


@pytest.mark.long
def test_kill9_one_replica_loses_nothing(cluster, tickd_factory, receiver):
    ts = replicas(tickd_factory, cluster)
    start = now_ms() + 2000
    ids = ingest(ts[0], [{"callback_url": receiver.url("/slow/200"), "key": f"k{i}",
                          "timeout_ms": 2000, "execute_at": start + i * 2} for i in range(3000)])
    wait_for(lambda: receiver.count() >= 500, 20, what="deliveries under way")
    held = ts[2].request("GET", "/v1/stats")[1]["held"]
    # stopped, then killed: the connections it sent its callbacks on are
    # read in between
    ts[2].proc.send_signal(signal.SIGSTOP)
    ports = tcp_ports(ts[2].proc.pid)
    ts[2].kill9()
    wait_for(lambda: set(ids) <= set(receiver.by_task()), 60, 0.2, what="all delivered")
    ts[0].settled(30)  # leases of the killed replica expire: their re-runs arrive
    calls = receiver.by_task()
    # a duplicate is one attempt delivered twice (a retry after a timeout is
    # a new attempt, with its own tickd-attempt)
    dups = {}
    for i, cs in calls.items():
        seen = collections.Counter(c["headers"]["tickd-attempt"] for c in cs)
        if any(n > 1 for n in seen.values()):
            dups[i] = cs
    # duplicates only among tasks the killed replica held: first sent by it
    # (on one of its connections; not by when they arrived, which a loaded
    # receiver delays), and no more of them than it held then (plus what it
    # claimed since)
    late = {i: [(c["peer"], c["headers"]["tickd-attempt"]) for c in cs]
            for i, cs in dups.items() if cs[0]["peer"] not in ports}
    assert not late, (len(late), sorted(ports), list(late.items())[:5])
    assert any(c["peer"] in ports for c in receiver.calls), "no callback of the killed replica seen"
    assert len(dups) <= max(held, 1) + 256, (len(dups), held)


def _flow(t, receiver, n, key, delay_ms=1500, again=False, until=None):
    """n POSTs, or fewer once until() holds (asked every 10); again: a 503 is
    sent again, up to three times, the same key and execute_at (idempotent),
    as a client does with an add not yet confirmed by WAIT."""
    out = []
    for i in range(n):
        if until and i and i % 10 == 0 and until():
            break
        task = {"callback_url": receiver.url(), "key": f"{key}{i}",
                "execute_at": now_ms() + delay_ms}
        code, body = t.request("POST", "/v1/tasks", task)
        for _ in range(3 if again else 0):
            if code != 503:
                break
            code, body = t.request("POST", "/v1/tasks", task)
        if code in (200, 201):
            out.append(body["id"])
        time.sleep(0.01)
    return out


@pytest.mark.long
@pytest.mark.parametrize("wait_replicas", [0, 1])
def test_master_failover_goes_on_without_restart(cluster, tickd_factory, receiver, wait_replicas):
    # a short WAIT timeout: adds the promoted master cannot replicate get
    # their 503 sooner, which keeps the test short
    ts = replicas(tickd_factory, cluster, n=2,
                  env={"TICKD_REDIS_WAIT_REPLICAS": str(wait_replicas),
                       "TICKD_REDIS_WAIT_TIMEOUT_MS": "300"})
    acked = _flow(ts[0], receiver, 100, "a")
    victim = cluster.masters()[0]
    victim.stop(signal.SIGKILL)
    # tasks keep coming while the cluster fails over (some POSTs get 503),
    # until it has: with wait_replicas, each add the promoted master takes
    # then waits out the WAIT timeout, and "m" below makes those
    acked += _flow(ts[1], receiver, 150, "b", until=lambda: cluster.failed_over(victim))
    wait_for(lambda: cluster.failed_over(victim), 30, 0.2, what="replica promoted")
    mid = _flow(ts[0], receiver, 60, "m", delay_ms=200)
    if wait_replicas:
        # the promoted master has no replica yet: its adds cannot be replicated
        # and answer 503, the others go through
        assert 0 < len(mid) < 60, len(mid)
    else:
        assert len(mid) == 60
    acked += mid
    # the old master comes back as a replica of the new one: all adds succeed
    victim.start()
    wait_for(cluster.replicas_synced, 30, 0.2, what="old master rejoined as replica")
    # (on a loaded machine the 300 ms WAIT can run out: sent again, as a
    # client does, the add is confirmed)
    after = _flow(ts[0], receiver, 100, "c", delay_ms=200, again=True)
    assert len(after) == 100, "tickd did not recover after the failover"
    wait_for(lambda: set(after) <= set(receiver.by_task()), 20, what="post-failover tasks")
    for t in ts:
        assert t.request("GET", "/healthz")[0] == 200
    delivered = set(receiver.by_task())
    lost = [i for i in acked if i not in delivered]
    if wait_replicas:
        # every POST answered 201 was on a replica: nothing lost
        wait_for(lambda: set(acked) <= set(receiver.by_task()), 20, what="all acked")
    else:
        print(f"\nwait_replicas=0: {len(lost)} of {len(acked)} acked tasks lost in failover")


def test_node_restart(cluster, tickd_factory, receiver):
    t = tickd_factory(cluster.seeds(), env=FAST).start()
    before = _flow(t, receiver, 50, "p", delay_ms=3000)
    m = cluster.masters()[1]
    m.stop()
    m.start()
    wait_for(cluster.healthy, 30, 0.2, what="cluster ok")
    after = _flow(t, receiver, 50, "q", delay_ms=500)
    wait_for(lambda: set(before + after) <= set(receiver.by_task()), 20, what="all delivered")


@pytest.mark.long
def test_resharding_moves_slots_under_load(cluster, tickd_factory, receiver):
    """Slots migrate between masters while tasks are added and claimed: tickd
    follows MOVED (and ASK mid-migration) and every task fires once."""
    import subprocess
    import threading
    t = tickd_factory(cluster.seeds(), env=FAST).start()
    src, dst = cluster.masters()[:2]
    ids = []
    ids += ingest(t, [{"callback_url": receiver.url(), "key": f"r{i}", "delay_ms": 4000 + i}
                      for i in range(1000)])
    out = {}

    def reshard():
        out["r"] = subprocess.run(
            ["redis-cli", "--cluster", "reshard", src.addr,
             "--cluster-from", src.cli("CLUSTER", "MYID"), "--cluster-to", dst.cli("CLUSTER", "MYID"),
             "--cluster-slots", "3000", "--cluster-yes", "--cluster-pipeline", "100"],
            capture_output=True, text=True, timeout=120)

    th = threading.Thread(target=reshard)
    th.start()
    while th.is_alive() and len(ids) < 6000:
        ids += ingest(t, [{"callback_url": receiver.url(), "delay_ms": 1500} for _ in range(100)])
        time.sleep(0.1)
    th.join()
    assert out["r"].returncode == 0, out["r"].stdout[-2000:] + out["r"].stderr
    ids += ingest(t, [{"callback_url": receiver.url(), "delay_ms": 500} for _ in range(200)])
    wait_for(lambda: set(ids) <= set(receiver.by_task()), 30, 0.2, what="all delivered")
    t.settled(30)
    calls = receiver.by_task()
    assert all(len(calls[i]) == 1 for i in ids)


@pytest.mark.long
def test_cluster_with_a_password(tmp_path, tickd_factory, receiver):
    """Every node wants a password: tickd AUTHs on each node it learns of
    (the seeds, then the masters of the slot map), on both connections to
    each (wait_replicas sends its WAITs on the second), and tasks spread over
    all masters fire once."""
    c = Cluster(str(tmp_path), password="clusterpw").start()
    try:
        bad = tickd_factory(c.seeds()).start(wait=False)
        assert bad.proc.wait(15) != 0
        assert "wants a password" in bad.logtext()
        # one seed only: the other masters are found through CLUSTER SLOTS
        env = dict(FAST, TICKD_REDIS_PASSWORD="clusterpw", TICKD_REDIS_WAIT_REPLICAS="1")
        ts = [tickd_factory(c.nodes[0].addr, env=env).start() for _ in range(2)]
        start = now_ms() + 2000
        ids = ingest(ts[0], [{"callback_url": receiver.url(), "key": f"pw{i}",
                              "execute_at": start + i} for i in range(3000)])
        per_master = c.keys("tickd:{*}:task")
        assert len(per_master) == 3 and all(per_master.values()), per_master
        # 60 s: a loaded machine (the whole suite) runs this cluster slowly
        wait_for(lambda: set(ids) <= set(receiver.by_task()), 60, 0.2, what="all delivered")
        ts[0].settled(30)
        calls = receiver.by_task()
        assert all(len(calls[i]) == 1 for i in ids)
        assert all(t.request("GET", "/healthz")[0] == 200 for t in ts)
    finally:
        c.stop()


@pytest.mark.long
def test_a_frozen_master_under_load_again_and_again(tmp_path, tickd_factory, receiver):
    """A master stops answering for longer than redis.timeout_ms while
    commands wait on it (SIGSTOP, short of the cluster's node timeout; tickd
    is stopped meanwhile too, so that every command waiting has run out of
    time when it goes on). The watchdog drops the connection, the waiting
    commands fail into their callbacks, and those send again to the same
    node at once. Each time, the node's link must end up with one connection
    that is its own (a late "connected" from the dropped one marked the link
    usable with no connection, and tickd crashed on its next slot map
    refresh); tickd goes on serving and every task fires."""
    import os
    c = Cluster(str(tmp_path), replicas=0).start()
    try:
        t = tickd_factory(c.seeds(), env=dict(FAST, TICKD_REDIS_TIMEOUT_MS="500")).start()
        ids = []
        for rnd in range(12):
            ids += ingest(t, [{"callback_url": receiver.url(), "delay_ms": 100 + 5 * i}
                              for i in range(400)])
            victim = c.nodes[rnd % 3]
            os.kill(victim.proc.pid, signal.SIGSTOP)
            time.sleep(0.1)
            os.kill(t.proc.pid, signal.SIGSTOP)
            time.sleep(1.0)
            os.kill(t.proc.pid, signal.SIGCONT)
            time.sleep(0.6)
            os.kill(victim.proc.pid, signal.SIGCONT)
            time.sleep(0.5)
            assert t.proc.poll() is None, f"tickd exited {t.proc.returncode}:\n{t.logtext()[-3000:]}"
        wait_for(lambda: set(ids) <= set(receiver.by_task()), 60, 0.2, what="all delivered")
        assert t.request("GET", "/healthz")[0] == 200
    finally:
        c.stop()


def _slot_keys(node, slot):
    n = int(node.cli("CLUSTER", "COUNTKEYSINSLOT", slot))
    return node.cli("CLUSTER", "GETKEYSINSLOT", slot, max(n, 1)).split() if n else []


def _tryagain(node):
    for line in node.cli("INFO", "errorstats").splitlines():
        if line.startswith("errorstat_TRYAGAIN:"):
            return int(line.split("count=")[1].split(",")[0])
    return 0


@pytest.mark.long
def test_no_script_runs_in_a_slot_while_it_moves(cluster, tickd_factory, receiver):
    """While a slot moves, a script must run where all of its keys are, or
    not at all: flow.lua names most of its keys from the one it is given,
    and the node that imports the slot served it (ASK) and wrote a key there
    the node that gives the slot still had; the move then stopped on
    "target key exists". Now every script names a key that never exists as
    well, so that both nodes answer TRYAGAIN until the move ends: the count
    made meanwhile lands once the slot has moved, and the move goes
    through."""
    t = tickd_factory(cluster.seeds(), env=FAST).start()
    t.post({"callback_url": receiver.url(), "queue": "fq", "delay_ms": 600000})
    key = "tickd:{flow}:n"
    slot = int(cluster.nodes[0].cli("CLUSTER", "KEYSLOT", key))
    masters = cluster.masters()
    src = next(m for m in masters if _slot_keys(m, slot))
    dst = next(m for m in masters if m is not src)
    wait_for(lambda: src.cli("HGET", key, "fq") == "1", 10, what="the first count")
    src_id, dst_id = src.cli("CLUSTER", "MYID"), dst.cli("CLUSTER", "MYID")
    before = _tryagain(dst) + _tryagain(src)
    assert dst.cli("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id) == "OK"
    assert src.cli("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id) == "OK"
    for i in range(3):
        t.post({"callback_url": receiver.url(), "queue": "fq", "delay_ms": 600000})
    # the count of those three is sent 20 ms on: it either ran on the
    # importing node (a key of the slot there) or was refused
    wait_for(lambda: _slot_keys(dst, slot) or _tryagain(dst) + _tryagain(src) > before, 10,
             what="the count sent while the slot moves")
    assert _slot_keys(dst, slot) == []
    keys = _slot_keys(src, slot)
    assert key in keys
    out = src.cli("MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS", *keys)
    assert out == "OK", out
    for m in (dst, src):
        assert m.cli("CLUSTER", "SETSLOT", slot, "NODE", dst_id) == "OK"
    for m in masters:
        if m not in (dst, src):
            m.cli("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
    wait_for(lambda: dst.cli("HGET", key, "fq") == "4", 15, 0.1, what="the count after the move")
