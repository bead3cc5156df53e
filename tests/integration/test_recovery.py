"""Failures: tickd killed or stopped, Redis restarted or down. Nothing a user
scheduled is lost; duplicates happen only after a crash."""
import signal
import socket
import threading
import time

import pytest

from harness import (SANITIZED, Redis, TcpServer, fnv1a, now_ms, pipe, read_request, rss_kib,
                     stored_keys, wait_for)

FAST_LEASE = {"TICKD_SCHEDULER_LEASE_MARGIN_MS": "500"}


def test_kill9_with_callbacks_in_flight(redis, receiver, tickd_factory):
    t1 = tickd_factory(redis, env=FAST_LEASE).start()
    ids = [r["id"] for r in t1.batch(
        [{"callback_url": receiver.url("/slow/1500"), "timeout_ms": 2000, "key": f"k{i}"}
         for i in range(50)])]
    wait_for(lambda: receiver.count() >= 10, 5, what="callbacks in flight")
    t1.kill9()
    t2 = tickd_factory(redis, env=FAST_LEASE).start()
    wait_for(lambda: all(t2.get(i)[1]["status"] == "succeeded" for i in ids), 30,
             interval=0.2, what="all 50 succeeded after restart")
    calls = receiver.by_task()
    assert set(ids) <= set(calls)


@pytest.mark.long
def test_stopped_then_overdue_tasks_fire(redis, receiver, tickd_factory):
    """Down for 10 s, longer than the slice grace (2 s here, the least;
    60 s by default) after the last task was due: the slices passed
    meanwhile are drained from the watermark."""
    grace = {"TICKD_SCHEDULER_SLICE_GRACE_MS": "2000"}
    t1 = tickd_factory(redis, env=grace).start()
    start = now_ms()
    ids = [r["id"] for r in t1.batch(
        [{"callback_url": receiver.url(), "execute_at": start + 2000 + i * 50, "key": f"o{i}"}
         for i in range(100)])]
    assert t1.stop() == 0
    # the downtime itself, what the test is about: longer than the grace
    # after the last task was due (start + 6.95 s)
    time.sleep(max(0, start + 10000 - now_ms()) / 1000)
    assert receiver.count() == 0
    # one connection to the receiver, so callbacks arrive in the order sent
    t2 = tickd_factory(redis, env=dict(grace, TICKD_SERVER_WORKERS="1",
                                       TICKD_SERVER_HOST_CONNECTIONS="1")).start()
    wait_for(lambda: receiver.count() >= 100, 20, what="100 overdue callbacks")
    calls = receiver.by_task()
    assert set(calls) == set(ids) and all(len(c) == 1 for c in calls.values())
    # oldest first
    order = sorted(ids, key=lambda i: calls[i][0]["t"])
    due = [int(i.split(".")[2]) for i in order]
    inversions = sum(1 for a, b in zip(due, due[1:]) if a > b)
    assert inversions <= 5, (inversions, due)


def test_redis_restart_while_running(redis, receiver, tickd_factory):
    # its markers read every 100 ms: a restart that kept the data is no loss
    t = tickd_factory(redis, env={"TICKD_REDIS_WATCH_MS": "100"}).start()
    before = t.post({"callback_url": receiver.url(), "delay_ms": 6000})
    redis.stop()
    wait_for(lambda: t.request("GET", "/healthz")[0] == 503, 5, what="unhealthy")
    redis.start()
    wait_for(lambda: t.request("GET", "/healthz")[0] == 200, 15, what="tickd reconnected")
    after = t.post({"callback_url": receiver.url(), "delay_ms": 500})
    wait_for(lambda: {before["id"], after["id"]} <= set(receiver.by_task()), 15,
             what="both delivered")
    assert "\ntickd_store_data_lost_total 0\n" in t.request("GET", "/metrics")[1].decode()
    assert "store lost data" not in t.logtext()


def test_post_while_redis_down_is_503_and_stores_nothing(redis, receiver, tickd_factory):
    """Each POST made while Redis is down says the task was not stored. Its
    tries meet the link's reconnects: one queued on a connection still
    being made (a loopback connect answers EINPROGRESS, then refused) never
    left tickd, and must not turn the answer into "may have been stored"
    (300 POSTs spread over 3.3 s: some did, before rcluster told)."""
    t = tickd_factory(redis).start()
    redis.stop()
    # until tickd has seen its connection close, a POST is sent to a socket
    # the kernel may still take: that answer says "may have been stored"
    # (test_an_add_sent_and_never_answered...); this test is about the ones after
    wait_for(lambda: t.request("GET", "/healthz")[0] == 503, 5, what="unhealthy")
    answers = []

    def post(k):
        time.sleep(k * 0.011)
        try:
            answers.append(t.request("POST", "/v1/tasks",
                                     {"callback_url": receiver.url(), "key": f"x{k}"}))
        except Exception as e:  # noqa: BLE001 (shown by the assertion below)
            answers.append((None, {"error": {"code": repr(e), "message": ""}}))

    threads = [threading.Thread(target=post, args=(k,)) for k in range(300)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(answers) == 300
    for code, body in answers:
        assert code == 503 and body["error"]["code"] == "unavailable", (code, body)
        assert "not stored" in body["error"]["message"], body
    redis.start()
    assert stored_keys(redis) == []
    wait_for(lambda: t.request("GET", "/healthz")[0] == 200, 15, what="reconnected")


def test_a_repost_is_acknowledged_only_once_a_replica_has_it(tmp_path, redis, receiver,
                                                             tickd_factory):
    """The 503 "stored but not confirmed" says to POST again; that re-POST
    finds the task stored and must not answer 200 before a replica has it
    (its own call wrote nothing, so a WAIT alone would confirm nothing)."""
    replica = Redis(str(tmp_path), name="replica",
                    extra=["--replicaof", "127.0.0.1", str(redis.port)]).start()
    try:
        wait_for(lambda: "master_link_status:up" in replica.cli("INFO", "replication"), 10)
        # and the master counts it (online once its first ACK came)
        wait_for(lambda: "state=online" in redis.cli("INFO", "replication"), 10,
                 what="the replica online at the master")
        t = tickd_factory(redis, env={"TICKD_REDIS_WAIT_REPLICAS": "1",
                                      "TICKD_REDIS_WAIT_TIMEOUT_MS": "200"}).start()
        task = {"callback_url": receiver.url(), "execute_at": now_ms() + 600000, "key": "again"}
        assert t.post(dict(task, key="warm"))["id"]  # a replica answers: 201
        replica.proc.send_signal(signal.SIGSTOP)
        try:
            code, first = t.request("POST", "/v1/tasks", task)
            assert code == 503 and "not confirmed" in first["error"]["message"], first
            code, again = t.request("POST", "/v1/tasks", task)
            assert code == 503 and "not confirmed" in again["error"]["message"], again
            code, res = t.request("POST", "/v1/tasks/batch", {"tasks": [task]})
            assert res["results"][0]["error"]["code"] == "unavailable", res
        finally:
            replica.proc.send_signal(signal.SIGCONT)
        code, ok = t.request("POST", "/v1/tasks", task)
        assert code == 200 and ok["id"] == res["results"][0]["id"], (code, ok, first)
    finally:
        replica.stop()


def test_stored_but_not_replicated_names_the_id_single_and_batch(redis, receiver, tickd_factory):
    """wait_replicas with no replica: the write is on the master, unconfirmed.
    The answer says so (not "not stored") and gives the id, in a batch too."""
    t = tickd_factory(redis, env={"TICKD_REDIS_WAIT_REPLICAS": "1",
                                  "TICKD_REDIS_WAIT_TIMEOUT_MS": "50"}).start()
    task = {"callback_url": receiver.url(), "delay_ms": 600000}
    code, body = t.request("POST", "/v1/tasks", dict(task, key="one"))
    assert code == 503 and "not confirmed by 1 replica" in body["error"]["message"], body
    results = t.batch([dict(task, key="b1"), dict(task, key="b2")])
    for r in results:
        assert r["error"]["code"] == "unavailable", r
        assert "stored on the master but not confirmed" in r["error"]["message"], r
        assert "not stored" not in r["error"]["message"], r
        assert t.get(r["id"])[0] == 200  # it was stored


class HoldingReceiver:
    """Records each call's arrival and its end: answered (200), or closed by
    tickd first. The first call is held hold_s before its answer, the others
    answered at once; a held call watches its connection meanwhile."""

    def __init__(self, hold_s):
        self.hold_s = hold_s
        self.calls = []
        self.lock = threading.Lock()
        self.srv = TcpServer(self.serve)

    def url(self):
        return f"http://127.0.0.1:{self.srv.port}/hold"

    def serve(self, c):
        buf = b""
        while True:
            req = read_request(c, buf)
            if req is None:
                return
            buf = req[3]
            call = {"t": now_ms(), "attempt": req[1].get("tickd-attempt"), "end": None}
            with self.lock:
                first = not self.calls
                self.calls.append(call)
            if first and self.hold_s:
                c.settimeout(self.hold_s)
                try:
                    if c.recv(1) == b"":
                        call["end"], call["closed"] = now_ms(), True
                        return
                except socket.timeout:
                    pass
                c.settimeout(None)
            call["end"] = now_ms()
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")


@pytest.mark.parametrize("late_ms", [2500, 8500])
def test_a_callback_begun_late_never_outlives_its_lease(redis, tickd_factory, late_ms):
    """A task's lease ends at its due + timeout_ms + lease_margin_ms; past it,
    the task is claimed again. A tickd held up between the claim and the due
    (stopped here, as an overloaded machine holds it up) reaches the call
    late. 2.5 s late (a 6 s timeout, a 2 s margin: 5.5 s of lease left), the
    attempt is given what the lease has left less half the margin, and a
    receiver that has not answered by then is cut: a failed attempt, retried.
    8.5 s late, the lease is over: the call is not begun, and the task is
    called once the next claim takes it. Before, the late attempt ran its
    whole timeout while the expired lease was claimed again: one task called
    twice at once, in the same attempt."""
    margin = 2000
    lease_end = 6000 + margin   # after the due
    rec = HoldingReceiver(hold_s=5.5 if late_ms < lease_end else 0)
    # a 3 s lookahead: claimed 2 s or more before its due, time enough to
    # stop tickd before it fires
    t = tickd_factory(redis, env={"TICKD_SCHEDULER_LEASE_MARGIN_MS": str(margin),
                                  "TICKD_SCHEDULER_LOOKAHEAD_MS": "3000"}).start()
    due = now_ms() + 4500
    tid = t.post({"callback_url": rec.url(), "timeout_ms": 6000, "execute_at": due})["id"]
    wait_for(lambda: t.get(tid)[1]["status"] == "running", 5, 0.02, what="claimed ahead of its due")
    t.proc.send_signal(signal.SIGSTOP)
    try:
        time.sleep(max(0, due + late_ms - now_ms()) / 1000)
    finally:
        t.proc.send_signal(signal.SIGCONT)
    task = t.final(tid, timeout=30)
    assert task["status"] == "succeeded", task
    time.sleep(1.5)  # a second claim, if any, comes within a tick
    calls = list(rec.calls)
    # never two at once: each call ended (answered, or closed by tickd)
    # before the next began
    for a, b in zip(calls, calls[1:]):
        assert a["end"] is not None and a["end"] <= b["t"], calls
    if late_ms < lease_end:
        # cut at the lease's end less half the margin, a failed attempt;
        # the retry answered
        assert [c["attempt"] for c in calls] == ["1", "2"] and calls[0].get("closed"), calls
        assert calls[0]["end"] < due + lease_end, (calls[0]["end"] - due, calls)
        assert task["attempts"] == 2, task
        assert "cut at its lease's end" in task["attempt_history"][0]["error"], task
        assert t.metric("tickd_callbacks_late_total") == 0
    else:
        # its lease over: not begun, no attempt counted; called once
        assert [c["attempt"] for c in calls] == ["1"], calls
        assert calls[0]["t"] >= due + lease_end, (calls[0]["t"] - due, calls)
        assert task["attempts"] == 1, task
        assert t.metric("tickd_callbacks_late_total") == 1


def test_a_call_queued_for_a_connection_past_its_lease_is_not_begun(redis, receiver,
                                                                    tickd_factory):
    """One connection to the receiver, held 9 s by a slow call; a task due
    just after it, with a 1 s timeout, waits for that connection past its
    lease (its due + 1 s + a 2 s margin), and is claimed again meanwhile.
    When the connection frees, the calls whose lease is over are not begun
    and nothing is recorded of them (a "no connection" failure recorded then
    ends the run of the claim that took the task since): the task is called
    once, in its first attempt."""
    t = tickd_factory(redis, env={"TICKD_SCHEDULER_LEASE_MARGIN_MS": "2000",
                                  "TICKD_SERVER_WORKERS": "1",
                                  "TICKD_SERVER_HOST_CONNECTIONS": "1"}).start()
    at = now_ms() + 2000
    slow = t.post({"callback_url": receiver.url("/slow/9000"), "timeout_ms": 10000,
                   "execute_at": at})["id"]
    quick = t.post({"callback_url": receiver.url(), "timeout_ms": 1000, "execute_at": at + 50})["id"]
    assert t.final(slow, timeout=30)["status"] == "succeeded"
    task = t.final(quick, timeout=30)
    assert task["status"] == "succeeded" and task["attempts"] == 1, task
    calls = receiver.by_task()[quick]
    assert [c["headers"]["tickd-attempt"] for c in calls] == ["1"], calls
    assert t.metric("tickd_callbacks_late_total") >= 1


def test_sigterm_hands_back_claims_and_exits_0(redis, receiver, tickd_factory):
    t1 = tickd_factory(redis).start()
    slow = t1.post({"callback_url": receiver.url("/slow/800")})
    wait_for(lambda: receiver.count() == 1, 5, what="slow call started")
    # claimed into the lookahead, not fired yet when SIGTERM comes
    soon = t1.post({"callback_url": receiver.url(), "delay_ms": 1200})
    wait_for(lambda: t1.get(soon["id"])[1]["status"] == "running", 1, what="soon claimed")
    assert t1.stop(signal.SIGTERM) == 0
    log = t1.logtext()
    assert "shutting down" in log and "stopped" in log
    assert t1.proc is None
    # the call in flight finished and was recorded; the unfired claim went back
    import subprocess
    t2 = tickd_factory(redis).start()
    assert t2.get(slow["id"])[1]["status"] == "succeeded"
    wait_for(lambda: t2.get(soon["id"])[1]["status"] == "succeeded", 10, what="handed-back fired")
    assert len(receiver.by_task()[soon["id"]]) == 1


def test_a_refused_write_keeps_the_task_until_it_goes_through(redis, receiver, tickd_factory):
    """Redis answers a step of recording an attempt with an error (here the
    retry's slice holds a key of the wrong type; OOM, NOPERM or a slot still
    migrating past the redis timeout come back the same way). The steps after
    it wait: the task stays leased, and once Redis takes the write its retry
    is queued. Going on past the refused step dropped the lease and left the
    task "scheduled" with no entry that would ever fire it."""
    import calendar
    t = tickd_factory(redis).start()
    # a long timeout_ms: the lease must outlast the refused writes
    task = t.post({"callback_url": receiver.url("/status/500"), "delay_ms": 3000,
                   "timeout_ms": 60000, "key": "refused",
                   "retry": {"max_attempts": 3, "backoff_ms": 120000}})
    tid = task["id"]
    minute, bucket = tid.split(".")[:2]
    home = calendar.timegm(time.strptime(minute, "%Y%m%d%H%M"))
    # the retry is due 96..120 s after the attempt: in one of the next 3 minutes
    later = [time.strftime("%Y%m%d%H%M", time.gmtime(home + 60 * k)) + "." + bucket
             for k in (1, 2, 3)]
    for s in later:
        redis.cli("SET", f"tickd:{{{s}}}:ptr", "not a hash")
    wait_for(lambda: receiver.count() == 1, 8, what="first attempt")
    wait_for(lambda: "WRONGTYPE" in t.logtext(), 5, what="the refused write logged")
    # the marker in another bucket: due in the next minute (the attempt came
    # late in one), one without a key could land in a slice made unreadable
    # above, whose claim fails until the end
    other = next(k for k in (f"m{i}" for i in range(100)) if fnv1a(k) % 16 != int(bucket))
    t.past(receiver, now_ms() + 500, key=other)
    assert t.get(tid)[1]["status"] == "running"  # leased until recorded
    assert redis.cli("ZSCORE", f"tickd:{{{minute}.{bucket}}}:run", tid) != ""
    for s in later:
        redis.cli("DEL", f"tickd:{{{s}}}:ptr")
    wait_for(lambda: t.get(tid)[1]["status"] == "scheduled", 10, what="attempt recorded")
    g = t.get(tid)[1]
    assert g["attempts"] == 1 and g["last_error"] == "HTTP 500"
    queued = [s for s in later if redis.cli("ZSCORE", f"tickd:{{{s}}}:due", tid) != ""]
    assert len(queued) == 1, "the retry is in no slice: it would never fire"
    assert redis.cli("HGET", f"tickd:{{{queued[0]}}}:ptr", tid) != ""
    assert redis.cli("ZSCORE", f"tickd:{{{minute}.{bucket}}}:run", tid) == ""
    assert len(receiver.by_task()[tid]) == 1


def test_a_refused_claim_leaves_the_task_due(redis, receiver, tickd_factory):
    """The claim script fails after it has begun (a key of its slice has the
    wrong type): the task stays in :due, and fires once the slice is sound.
    A script keeps the writes it made before the one that failed, so every
    script removes entries only after writing what replaces them."""
    t = tickd_factory(redis).start()
    due = now_ms() + 4000
    tid = t.post({"callback_url": receiver.url(), "execute_at": due, "key": "claim"})["id"]
    home = ".".join(tid.split(".")[:2])
    redis.cli("SET", f"tickd:{{{home}}}:ptr", "not a hash")
    wait_for(lambda: "WRONGTYPE" in t.logtext(), 8, what="the refused claim logged")
    # past its due time: a task of another bucket, due later, has fired
    other = next(k for k in (f"m{i}" for i in range(100)) if fnv1a(k) % 16 != fnv1a("claim") % 16)
    t.past(receiver, due + 500, key=other)
    assert not receiver.by_task().get(tid)
    assert t.get(tid)[1]["status"] == "scheduled"
    assert redis.cli("ZSCORE", f"tickd:{{{home}}}:due", tid) != ""
    redis.cli("DEL", f"tickd:{{{home}}}:ptr")
    wait_for(lambda: t.get(tid)[1]["status"] == "succeeded", 10, what="fired once sound")
    assert len(receiver.by_task()[tid]) == 1


class _RedisProxy:
    """A TCP proxy in front of a Redis that can play dead: while dead it
    accepts each connection and closes it at once, as a proxy or a load
    balancer in front of a stopped node does."""

    def __init__(self, port):
        self.port_to, self.dead, self.accepted, self.pairs = port, False, 0, []
        self.srv = TcpServer(self._serve)
        self.port = self.srv.port

    def _serve(self, c):
        self.accepted += 1
        if self.dead:
            return
        u = socket.create_connection(("127.0.0.1", self.port_to))
        self.pairs.append((c, u))
        threading.Thread(target=pipe, args=(u, c), daemon=True).start()
        pipe(c, u)
        u.close()

    def die(self):
        self.dead = True
        for c, u in self.pairs:
            for s in (c, u):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.pairs = []


def test_a_node_that_accepts_and_drops_holds_no_memory(redis, receiver, tickd_factory):
    """Redis behind a proxy that accepts each connection and drops it: tickd
    connects again and again. Each connection loads the scripts on itself
    alone; they were sent again on the next connections until their
    deadline, a dozen scripts (about 300 KB) for every connection made
    meanwhile, so that tickd grew by tens of MB while the node stayed away.
    Once the node is back, the scripts are loaded and a task fires."""
    proxy = _RedisProxy(redis.port)
    t = tickd_factory(f"127.0.0.1:{proxy.port}",
                      env={"TICKD_REDIS_TIMEOUT_MS": "10000"}).start()
    assert t.request("GET", "/healthz")[0] == 200
    base = rss_kib(t.proc.pid)
    proxy.die()
    seen, peak, end = proxy.accepted, base, time.time() + 6
    while time.time() < end:
        peak = max(peak, rss_kib(t.proc.pid))
        time.sleep(0.1)
    assert proxy.accepted - seen >= 20, "tickd did not come back to the node"
    if not SANITIZED:  # an ASan build's RSS is its quarantine and shadow memory
        assert peak - base < 8 * 1024, (base, peak)
    proxy.dead = False
    wait_for(lambda: t.request("GET", "/healthz")[0] == 200, 15, what="healthy again")
    tid = t.post({"callback_url": receiver.url(), "delay_ms": 200})["id"]
    wait_for(lambda: tid in receiver.by_task(), 15, what="the task after the outage")


class _LosingProxy:
    """A TCP proxy in front of a Redis that, once an add of a task whose
    callback URL holds `mark` has gone through to Redis, forwards nothing
    more from Redis on that connection and closes it as soon as Redis holds
    the task: the add ran, its answer was lost."""

    def __init__(self, redis, mark, then_dead=False):
        self.port_to, self.mark, self.lost = redis.port, mark.encode(), 0
        self.ran = lambda: any(mark in m for k in redis.cli("KEYS", "tickd:*:due").split()
                               for m in redis.cli("ZRANGE", k, 0, -1).splitlines())
        self.then_dead, self.dead = then_dead, False   # then: every connection closed at once
        self.srv = TcpServer(self._serve)
        self.port = self.srv.port

    def _serve(self, c):
        if self.dead:
            return
        u = socket.create_connection(("127.0.0.1", self.port_to))
        armed = threading.Event()

        def close():
            for s in (c, u):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        def up():   # tickd -> Redis; armed once the mark is on its way
            try:
                while (data := c.recv(65536)):
                    marked = self.mark in data and not self.lost
                    if marked:   # before it goes: its answer must not get through
                        self.lost += 1
                        armed.set()
                    u.sendall(data)
                    if marked:
                        wait_for(self.ran, 10, what="the command ran in Redis")
                        self.dead = self.then_dead
                        close()
                        return
            except OSError:
                pass

        threading.Thread(target=up, daemon=True).start()
        try:
            while (data := u.recv(65536)):
                if armed.is_set():
                    continue   # every answer from here on is lost
                c.sendall(data)
        except OSError:
            pass
        close()


@pytest.mark.parametrize("wait", [False, True], ids=["alone", "wait_replicas"])
def test_an_add_whose_answer_is_lost_is_sent_again_and_stores_once(tmp_path, redis, receiver,
                                                                   tickd_factory, wait):
    """The add of a task (a fresh one: no key given) ran in Redis, and its
    answer was lost with the connection. rcluster sends the call again,
    marked so (lua/add.lua's "again"): the second run finds the task its
    first run stored (201 all the same), so the slice counts it open once,
    and it fires once. With wait_replicas, the second run wrote nothing on
    its connection, so a write of that connection (P:{slice}:w) goes before
    the WAIT: a WAIT alone would confirm nothing. (Without the mark the
    second run writes the same member again, which counts nothing twice
    either, lua/add.lua; it is the wait_replicas form that fails then: no
    write before the WAIT.)"""
    env, replica = {}, None
    if wait:
        replica = Redis(str(tmp_path), name="replica",
                        extra=["--replicaof", "127.0.0.1", str(redis.port)]).start()
        wait_for(lambda: "state=online" in redis.cli("INFO", "replication"), 10,
                 what="the replica online at the master")
        env = {"TICKD_REDIS_WAIT_REPLICAS": "1", "TICKD_REDIS_WAIT_TIMEOUT_MS": "2000"}

    try:
        proxy = _LosingProxy(redis, "/lost-answer")
        t = tickd_factory(f"127.0.0.1:{proxy.port}", env=env).start()
        code, body = t.request("POST", "/v1/tasks", {"callback_url": receiver.url("/lost-answer"),
                                                     "delay_ms": 8000})
        assert code == 201, (code, body)
        assert proxy.lost == 1, "no answer was lost: the test proved nothing"
        tid = body["id"]
        slice_ = ".".join(tid.split(".")[:2])
        assert redis.cli("HGET", f"tickd:{{{slice_}}}:task", "#open") == "1"
        assert redis.cli("ZCARD", f"tickd:{{{slice_}}}:due") == "1"  # (due beyond the lookahead)
        assert redis.cli("EXISTS", f"tickd:{{{slice_}}}:w") == ("1" if wait else "0")
        wait_for(lambda: t.get(tid)[1]["status"] == "succeeded", 10, what="the task fired")
        assert len(receiver.by_task()[tid]) == 1
        assert redis.cli("HGET", f"tickd:{{{slice_}}}:task", "#open") == "0"
    finally:
        if replica:
            replica.stop()


def test_an_add_sent_and_never_answered_says_it_may_be_stored(redis, receiver, tickd_factory):
    """The add ran in Redis, its answer was lost, and Redis stays out of
    reach past redis.timeout_ms: the 503 gives the task's id and says it may
    have been stored, not that it was not; once Redis is back, the id finds
    the task, which fires once."""
    proxy = _LosingProxy(redis, "/maybe", then_dead=True)
    t = tickd_factory(f"127.0.0.1:{proxy.port}", env={"TICKD_REDIS_TIMEOUT_MS": "1500"}).start()
    code, body = t.request("POST", "/v1/tasks", {"callback_url": receiver.url("/maybe"),
                                                 "delay_ms": 6000})
    assert code == 503 and body["error"]["code"] == "unavailable", (code, body)
    assert "may have been stored" in body["error"]["message"], body
    assert "not stored" not in body["error"]["message"], body
    tid = body["id"]
    proxy.dead = False
    wait_for(lambda: t.request("GET", "/healthz")[0] == 200, 15, what="Redis back")
    code, got = t.get(tid)
    assert code == 200, (code, got)
    wait_for(lambda: t.get(tid)[1]["status"] == "succeeded", 15, what="the task fired")
    assert len(receiver.by_task()[tid]) == 1
