"""A Redis that may lose what tickd acknowledged: one that evicts keys is
refused (at start, and found at run time), one that lost its data is said
(FLUSHALL, a restart without persistence, a cluster master back empty), and a
tickd started while Redis is down waits for it instead of exiting."""
import os
import re
import shutil
import signal
import socket
import time

from harness import ROOT, Cluster, Redis, Tickd, free_port, now_ms, wait_for

WATCH = {"TICKD_REDIS_WATCH_MS": "100"}
TASK = {"callback_url": "http://127.0.0.1:9/x", "delay_ms": 3600000}


def test_an_evicting_redis_is_refused_at_start_and_nothing_is_written(tmp_path, tickd_factory):
    r = Redis(str(tmp_path), extra=["--maxmemory", "3mb",
                                    "--maxmemory-policy", "allkeys-lru"]).start()
    try:
        bad = tickd_factory(r).start(wait=False)
        assert bad.proc.wait(15) == 2
        log = bad.logtext()
        assert f"redis 127.0.0.1:{r.port}" in log and "allkeys-lru" in log, log
        assert "CONFIG SET maxmemory-policy noeviction" in log and "redis.allow_eviction" in log
        assert r.cli("KEYS", "tickd:*") == ""  # nothing half-written
        # accepted knowingly: it starts, and says so
        ok = tickd_factory(r, env={"TICKD_REDIS_ALLOW_EVICTION": "true"}).start()
        assert "W " in ok.logtext() and "redis.allow_eviction = true" in ok.logtext()
        assert ok.post(TASK)["id"]
        assert ok.stop() == 0
        # maxmemory 0 never evicts: started, with a warning for later
        r.cli("CONFIG", "SET", "maxmemory", "0")
        fine = tickd_factory(r).start()
        assert "would evict tasks once maxmemory is set" in fine.logtext()
        assert fine.stop() == 0
    finally:
        r.stop()


def test_eviction_found_at_run_time_refuses_adds_until_mended(tmp_path, tickd_factory):
    r = Redis(str(tmp_path), extra=["--maxmemory", "64mb"]).start()
    try:
        t = tickd_factory(r, env=WATCH).start()
        kept = t.post(TASK)["id"]
        assert 0 < t.metric("tickd_store_memory_used_ratio") < 0.9
        assert t.metric("tickd_store_refusing_adds") == 0
        r.cli("CONFIG", "SET", "maxmemory-policy", "volatile-lru")
        wait_for(lambda: t.post(TASK, expect=None)[0] == 503, 10, what="adds refused")
        code, body = t.post(TASK, expect=None)
        msg = body["error"]["message"]
        assert body["error"]["code"] == "unavailable"
        assert "volatile-lru" in msg and f"127.0.0.1:{r.port}" in msg and "noeviction" in msg
        code, health = t.request("GET", "/healthz")
        assert code == 503 and "volatile-lru" in health["store"]["refusing_adds"]
        assert t.metric("tickd_store_refusing_adds") == 1
        assert t.metric("tickd_store_evicting_masters") == 1
        code, res = t.request("POST", "/v1/tasks/batch", {"tasks": [TASK, TASK]})
        assert [x["error"]["code"] for x in res["results"]] == ["unavailable"] * 2, res
        assert t.get(kept)[0] == 200  # what is stored stays readable
        assert "adds refused: redis" in t.logtext()
        r.cli("CONFIG", "SET", "maxmemory-policy", "noeviction")
        wait_for(lambda: t.request("GET", "/healthz")[0] == 200, 10, what="healthy again")
        assert t.post(TASK)["id"]
        assert t.metric("tickd_store_refusing_adds") == 0
        assert "adds accepted again" in t.logtext()
        # close to maxmemory: a warning and the gauge, before adds fail
        used = int(re.search(r"used_memory:(\d+)", r.cli("INFO", "memory")).group(1))
        r.cli("CONFIG", "SET", "maxmemory", str(int(used * 1.04)))
        wait_for(lambda: t.metric("tickd_store_memory_used_ratio") > 0.9, 10, what="the gauge")
        wait_for(lambda: "redis memory at" in t.logtext(), 10, what="the warning")
        assert t.metric("tickd_store_refusing_adds") == 0  # noeviction: not refused
        r.cli("CONFIG", "SET", "maxmemory", "64mb")
    finally:
        r.stop()


def lost(t):
    return t.metric("tickd_store_data_lost_total")


def test_flushall_is_said_counted_and_tickd_goes_on(redis, receiver, tickd_factory):
    t = tickd_factory(redis, env=WATCH).start()
    ids = [t.post(TASK)["id"] for _ in range(5)]
    assert lost(t) == 0
    before = now_ms()
    redis.cli("FLUSHALL")
    wait_for(lambda: lost(t) == 1, 10, what="data loss counted")
    log = t.logtext()
    assert "store lost data: redis 127.0.0.1:" in log and "was flushed" in log, log
    code, health = t.request("GET", "/healthz")
    assert code == 200 and health["store"]["data_lost"] == 1
    assert "marker" in health["store"]["data_lost_last"]
    code, stats = t.request("GET", "/v1/stats")
    assert stats["store"]["data_lost"] == 1
    assert stats["store"]["data_lost_last_at"] >= "2026"
    assert t.get(ids[0])[0] == 404  # gone, and said so
    # a new marker: counted once, not on every read after
    tid = t.post({"callback_url": receiver.url("/after"), "delay_ms": 300})["id"]
    wait_for(lambda: tid in receiver.by_task(), 15, what="a task after the loss")
    assert lost(t) == 1
    assert now_ms() - before < 15000


def test_a_restart_without_persistence_is_said(tmp_path, tickd_factory):
    r = Redis(str(tmp_path), extra=["--appendonly", "no"]).start()
    try:
        t = tickd_factory(r, env=WATCH).start()
        t.post(TASK)
        r.stop(signal.SIGKILL)
        r.start()
        wait_for(lambda: t.healthy() and lost(t) == 1, 15, what="data loss after restart")
        assert "tickd's data there is gone" in t.logtext()
        # a tickd started now finds the keyspace new: nothing to say
        other = tickd_factory(r, env=WATCH).start()
        assert lost(other) == 0
    finally:
        r.stop()


def test_watermarks_gone_while_stopped_are_said_at_start(redis, tickd_factory):
    t = tickd_factory(redis).start()
    assert t.stop() == 0
    assert redis.cli("DEL", "tickd:wm:{3}", "tickd:wm:{7}") == "2"
    again = tickd_factory(redis).start()
    log = again.logtext()
    assert "the watermarks of buckets 3, 7 were missing at start" in log, log
    assert lost(again) == 1


def test_a_tickd_started_while_redis_is_down_waits_for_it(tmp_path, receiver, tickd_factory):
    r = Redis(str(tmp_path))
    port = free_port()
    sock_path = str(tmp_path / "notify.sock")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(sock_path)
    notify.settimeout(15)
    t = tickd_factory(r, env={"NOTIFY_SOCKET": sock_path})
    t.port = port
    t.start(wait=False)
    # up for the service manager (no boot held), saying why it cannot serve
    first = notify.recv(512).decode()
    assert first.startswith("READY=1\nSTATUS=waiting for the store: redis 127.0.0.1:"), first
    wait_for(lambda: "store not reachable yet" in t.logtext(), 10, what="waiting said")
    code, health = t.request("GET", "/healthz")
    assert code == 503 and health["status"] == "starting", health
    assert "Connection refused" in health["redis"]
    code, body = t.post(TASK, expect=None)
    assert code == 503 and "not reached yet" in body["error"]["message"]
    assert t.proc.poll() is None
    r.start()
    try:
        wait_for(t.healthy, 15, what="tickd up once Redis is")
        while True:  # the tries' statuses, then serving
            msg = notify.recv(512).decode()
            if "waiting for the store" not in msg:
                break
        assert msg == "READY=1\nSTATUS=serving", msg
        tid = t.post({"callback_url": receiver.url("/late"), "delay_ms": 100})["id"]
        wait_for(lambda: tid in receiver.by_task(), 15, what="callback")
        # a SIGTERM while waiting ends it cleanly too
        r.stop()
        other = Tickd(str(tmp_path), redis=r)
        other.port = free_port()
        other.start(wait=False)
        wait_for(lambda: "store not reachable yet" in other.logtext(), 10)
        assert other.stop() == 0
    finally:
        r.stop()


def test_a_cluster_master_back_empty_is_said(tmp_path, tickd_factory):
    c = Cluster(str(tmp_path), masters=3, replicas=0).start()
    try:
        t = tickd_factory(c.seeds(), env=WATCH).start()
        for _ in range(10):
            t.post(TASK)
        victim = c.masters()[1]
        # no replica to take over: it comes back with its slots and no data
        victim.stop(signal.SIGKILL)
        for f in ("appendonly.aof", "appendonlydir", "dump.rdb"):
            p = os.path.join(victim.dir, f)
            if os.path.isdir(p):
                shutil.rmtree(p)
            elif os.path.exists(p):
                os.remove(p)
        victim.start()
        wait_for(c.healthy, 30, 0.2, what="cluster ok again")
        wait_for(lambda: lost(t) == 1, 20, what="loss on one master")
        assert f"store lost data: redis 127.0.0.1:{victim.port}" in t.logtext(), t.logtext()
    finally:
        c.stop()


def test_a_start_with_a_cluster_master_down_waits_for_it(tmp_path, tickd_factory):
    c = Cluster(str(tmp_path), masters=3, replicas=0).start()
    try:
        down = c.nodes[1]
        down.stop(signal.SIGKILL)
        t = tickd_factory(c.nodes[0].addr)
        t.port = free_port()
        t.start(wait=False)
        wait_for(lambda: "store not reachable yet" in t.logtext() or t.proc.poll() is not None,
                 20, what="waiting or exit")
        assert t.proc.poll() is None, f"exited {t.proc.returncode}:\n{t.logtext()}"
        down.start()
        wait_for(t.healthy, 30, what="up once the master is back")
    finally:
        c.stop()


def test_a_missing_script_ends_the_start_whichever_it_is(tmp_path, redis, tickd_factory):
    d = tmp_path / "lua"
    shutil.copytree(os.path.join(ROOT, "lua"), d)
    os.remove(d / "claim.lua")
    t = tickd_factory(redis, env={"TICKD_REDIS_SCRIPTS_DIR": str(d)}).start(wait=False)
    assert t.proc.wait(15) == 2, t.logtext()
    assert "claim.lua" in t.logtext()


def test_while_adds_are_refused_schedules_retries_and_limits_are_too(tmp_path, tickd_factory,
                                                                    receiver):
    r = Redis(str(tmp_path), extra=["--maxmemory", "64mb"]).start()
    try:
        t = tickd_factory(r, env=WATCH).start()
        tid = t.post({"callback_url": receiver.url("/status/500"), "retry": {"max_attempts": 1}})["id"]
        wait_for(lambda: t.get(tid)[1]["status"] == "failed", 15)
        r.cli("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
        wait_for(lambda: t.request("GET", "/healthz")[0] == 503, 10, what="refusing")
        for method, path, body in [
                ("POST", "/v1/schedules", {"key": "ev", "every_ms": 60000,
                                           "task": {"callback_url": receiver.url()}}),
                ("POST", f"/v1/tasks/{tid}/retry", {}),
                ("PUT", "/v1/queues/q", {"rate": 5})]:
            code, res = t.request(method, path, body)
            assert code == 503 and "allkeys-lru" in res["error"]["message"], (path, code, res)
        # an operator's brake still goes through
        assert t.request("POST", "/v1/queues/q/pause")[0] == 200
        r.cli("CONFIG", "SET", "maxmemory-policy", "noeviction")
        wait_for(lambda: t.request("GET", "/healthz")[0] == 200, 10, what="mended")
        assert t.request("POST", f"/v1/tasks/{tid}/retry", {})[0] == 200
    finally:
        r.stop()


def test_while_waiting_for_a_redis_that_never_answers_the_api_answers_at_once(tickd_factory):
    """A Redis that takes connections and never answers (or a network that
    drops them) is waited for on a thread of its own: /healthz answers 503
    at once meanwhile, and a SIGTERM ends tickd promptly."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    port = silent.getsockname()[1]
    try:
        t = tickd_factory(f"127.0.0.1:{port},localhost:{port}")
        t.port = free_port()
        t.start(wait=False)
        def up():
            try:
                return t.request("GET", "/healthz")[0]
            except OSError:
                return False
        wait_for(up, 15, what="the API up")
        for _ in range(15):
            start = time.monotonic()
            code, body = t.request("GET", "/healthz")
            assert code == 503 and body["status"] == "starting", body
            assert time.monotonic() - start < 0.5
            time.sleep(0.1)  # 15 probes spread over 1.5 s: the sampling itself
        start = time.monotonic()
        assert t.stop() == 0
        assert time.monotonic() - start < 10
    finally:
        silent.close()


def test_scripts_flushed_are_sent_again_and_nothing_fails(redis, receiver, tickd_factory):
    """A node that lost its scripts (SCRIPT FLUSH, a failover to a replica
    that never loaded them) answers NOSCRIPT: each script call is sent again
    once with the script's source, so an add, a claim and a settle still
    work, and the task fires once."""
    t = tickd_factory(redis).start()
    first = t.post({"callback_url": receiver.url("/before"), "delay_ms": 200})["id"]
    wait_for(lambda: first in receiver.by_task(), 10, what="a task before the flush")
    assert redis.cli("SCRIPT", "FLUSH") == "OK"
    tid = t.post({"callback_url": receiver.url("/after"), "delay_ms": 300})["id"]
    code, body = t.request("POST", "/v1/tasks/batch", {"tasks": [
        {"callback_url": receiver.url("/b"), "delay_ms": 300, "key": f"b{i}"} for i in range(3)]})
    assert code == 200 and all("id" in r for r in body["results"]), body
    wait_for(lambda: tid in receiver.by_task(), 10, what="a task after the flush")
    wait_for(lambda: t.get(tid)[1]["status"] == "succeeded", 10, what="its settle")
    for r in body["results"]:
        wait_for(lambda: t.get(r["id"])[1]["status"] == "succeeded", 10, what="a batch task")
    assert len(receiver.by_task()[tid]) == 1
