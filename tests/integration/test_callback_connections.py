"""Where the callback client connects and what it keeps: kept connections
reused, replaced when the host closed them and closed when unused, host
names resolved, IPv6 and numeric IPv4 literals, a configured proxy sending
everything through libcurl, per-host state freed once unused, and tickd's
own failures (out of descriptors) that must not use up a task's
attempts."""
import http.server
import random
import socket
import threading
import time

import pytest

from harness import now_ms, settings_in_force, wait_for
from receivers import PATHS, Raw, Scripted, ok_answer, url_for


def test_kept_connections_are_reused(tickd, scripted):
    # one call at a time (each waited for: calls that overlapped on a slow
    # machine each took a connection, and the count said so): the first
    # call's connection serves them all
    for i in range(20):
        tid = tickd.post({"callback_url": scripted.url("/ok")})["id"]
        assert tickd.final(tid)["status"] == "succeeded"
    assert scripted.conns == 1, scripted.conns


def _naps(t):
    return t.request("GET", "/v1/stats")[1]["callback_naps"]


def test_answers_are_read_together_and_waiting_costs_no_naps(redis, tickd_factory, receiver):
    """While 8 or more plain http:// callbacks wait for their answers, the
    main loop's first turn with nothing else to do after a callback's read
    or write naps before it waits in epoll_wait, so that the answers
    arriving meanwhile are read together (h1.c, h1_nap_cb); only a
    callback's I/O brings the next nap. A burst of 300: naps taken, every
    callback made once. Then 16 callbacks a receiver holds for 3 s: no nap
    while they wait. (A proxy in the environment would send them through
    libcurl, which never naps: none here.)"""
    tickd = tickd_factory(redis, env={"http_proxy": "", "all_proxy": "",
                                      "ALL_PROXY": ""}).start()
    at = now_ms() + 1500
    burst = tickd.batch([{"callback_url": receiver.url("/ok"), "key": f"b{i}",
                          "execute_at": at} for i in range(300)])
    wait_for(lambda: receiver.count() >= 300, 20, what="300 callbacks")
    tickd.settled()
    calls = receiver.by_task()
    assert set(calls) == {r["id"] for r in burst}
    assert all(len(c) == 1 for c in calls.values()), "a task fired twice"
    assert _naps(tickd) > 0

    at = now_ms() + 1000
    tickd.batch([{"callback_url": receiver.url("/slow/3000"), "key": f"s{i}", "execute_at": at}
                 for i in range(16)])
    wait_for(lambda: receiver.count() >= 316, 10, what="16 slow callbacks sent")
    time.sleep(0.3)   # the nap after the last send, and the one that ends them
    before = _naps(tickd)
    time.sleep(2)
    assert receiver.count() == 316 and receiver.inflight == 16, "the slow answers came early"
    assert _naps(tickd) - before == 0
    wait_for(lambda: tickd.request("GET", "/v1/stats")[1]["calling"] == 0, 10,
             what="the slow callbacks answered")


def test_connection_closed_while_idle_is_replaced(tickd_factory, redis):
    """The host closes kept connections 100 ms after an answer: the next call
    finds its connection dead before any answer and goes again on a new one,
    without an error or a second attempt."""
    s = Scripted(close_idle_ms=100)
    try:
        t = tickd_factory(redis, env={"TICKD_SERVER_WORKERS": "1"}).start()
        ids = []
        for i in range(6):
            ids.append(t.post({"callback_url": s.url("/ok"), "retry": {"max_attempts": 1}})["id"])
            time.sleep(0.3)
        for tid in ids:
            g = t.final(tid)
            assert g["status"] == "succeeded" and g["attempts"] == 1, g
        assert s.conns >= 6
    finally:
        s.close()


def test_unused_connection_closes_after_keepalive(tickd_factory, redis, scripted):
    """A kept connection unused for server.keepalive_ms is closed by tickd, so
    a host no longer called holds no descriptor; the next call opens anew."""
    t = tickd_factory(redis, env={"TICKD_SERVER_WORKERS": "1",
                                  "TICKD_SERVER_KEEPALIVE_MS": "400"}).start()
    a = t.post({"callback_url": scripted.url("/ok")})
    assert t.final(a["id"])["status"] == "succeeded"
    answered = scripted.requests[0]["t"]
    wait_for(lambda: scripted.peer_closed, timeout=5)
    conn, when = scripted.peer_closed[0]
    assert conn == scripted.requests[0]["conn"]
    assert 0.3 <= when - answered < 2.5, when - answered
    b = t.post({"callback_url": scripted.url("/ok")})
    assert t.final(b["id"])["status"] == "succeeded"
    assert scripted.by_task()[b["id"]][0]["conn"] != conn


def limits_in_force(t, queue, body):
    """PUT a queue's limits, and wait until t has read them."""
    code, res = t.request("PUT", f"/v1/queues/{queue}", body)
    assert code == 200, res
    settings_in_force(t)


@pytest.mark.parametrize("limits", ["none", "another queue's"])
def test_connections_open_before_the_tasks_are_due(tickd, scripted, limits):
    """Tasks claimed ahead of their time have their connections opened then:
    20 due at one instant 1.2 s on each find a connection already accepted
    by the receiver, which a call that connected at its due time would not.
    The same while another queue has a limit: a limit keeps back only the
    calls it applies to (the build before opened none ahead while any limit
    existed, and a burst's first calls came some 10 ms later)."""
    if limits != "none":
        limits_in_force(tickd, "other", {"rate": 1, "max_concurrency": 1})
    due = int(time.time() * 1000) + 1200
    ids = [r["id"] for r in tickd.batch([{"callback_url": scripted.url("/ok"), "execute_at": due}
                                         for _ in range(20)])]
    for tid in ids:
        assert tickd.final(tid)["status"] == "succeeded"
    accepted = dict(scripted.accepted)
    reqs = [r for r in scripted.requests if r["headers"].get("tickd-task-id") in ids]
    assert len(reqs) == 20
    assert all(r["t"] >= due / 1000 - 0.005 for r in reqs), "a call went before its time"
    late = [(r["conn"], round(due / 1000 - accepted[r["conn"]], 3)) for r in reqs
            if accepted[r["conn"]] > due / 1000 - 0.2]
    assert not late, late
    # as many as the instant needs, no more: one a call at most
    assert len({r["conn"] for r in reqs}) <= scripted.conns <= 20, scripted.conns


def test_calls_a_limit_applies_to_open_no_connection_ahead(tickd, scripted):
    """A queue allowed one call at a time: its 10 tasks due at one instant go
    one after another over one kept connection, none opened ahead for them
    (connections for the whole batch would sit idle at a destination the
    limit protects)."""
    limits_in_force(tickd, "one", {"max_concurrency": 1})
    due = int(time.time() * 1000) + 1200
    ids = [r["id"] for r in tickd.batch([{"callback_url": scripted.url("/ok"), "execute_at": due,
                                          "queue": "one"} for _ in range(10)])]
    for tid in ids:
        assert tickd.final(tid)["status"] == "succeeded"
    assert len(scripted.requests) == 10
    assert scripted.conns == 1, scripted.conns


def _prefix_receivers():
    """Two receivers, one's port the other's followed by a digit (P and
    10 P + k): the first one's scheme and authority begin the second one's
    URLs."""
    rnd = random.Random()
    for _ in range(200):
        p = rnd.randrange(1024, 6554)
        try:
            a = Scripted(port=p)
        except OSError:
            continue
        for k in range(10):
            try:
                return a, Scripted(port=10 * p + k)
            except OSError:
                pass
        a.close()
    pytest.skip("no free pair of ports P, 10 P + k")


def test_each_call_reaches_its_own_host_when_one_authority_begins_another(tickd):
    """Calls due at one instant alternate between http://127.0.0.1:P and
    http://127.0.0.1:P0 (a digit more): each host gets its own calls and no
    other's (the client finds the host called last by its key and what
    ends the authority, not by the key alone)."""
    a, b = _prefix_receivers()
    try:
        due = int(time.time() * 1000) + 1000
        tasks = [{"callback_url": (a if i % 2 == 0 else b).url(f"/ok?n={i}"), "execute_at": due}
                 for i in range(40)]
        ids = [r["id"] for r in tickd.batch(tasks)]
        for tid in ids:
            assert tickd.final(tid)["status"] == "succeeded"
        for rec, want in ((a, ids[0::2]), (b, ids[1::2])):
            got = sorted(r["headers"].get("tickd-task-id") for r in rec.requests)
            assert got == sorted(want), (rec.port, len(got))
    finally:
        a.close()
        b.close()


def test_connections_opened_ahead_hold_a_quarter_of_the_descriptors(tickd_factory, redis, scripted):
    """With 128 descriptors, at most 32 connections are opened ahead: 100
    calls due at one instant to one host (its cap 1000) would otherwise open
    100 before they are due. The rest connect at their time, and all 100
    succeed."""
    t = tickd_factory(redis, nofile=128, env={"TICKD_SERVER_WORKERS": "1",
                                              "TICKD_SERVER_HOST_CONNECTIONS": "1000"}).start()
    due = int(time.time() * 1000) + 1500
    ids = [r["id"] for r in t.batch([{"callback_url": scripted.url("/ok"), "execute_at": due}
                                     for _ in range(100)])]
    wait_for(lambda: len(scripted.accepted) >= 32, timeout=5, what="32 connections ahead")
    time.sleep(0.3)  # any more would come now
    ahead = [n for n, at in scripted.accepted if at < due / 1000 - 0.1]
    assert len(ahead) == 32, len(ahead)
    for tid in ids:
        assert t.final(tid)["status"] == "succeeded"


def test_no_connection_ahead_to_a_denied_address(tickd_factory, redis, scripted):
    """A connection opened ahead asks the policy as a call's does: a name
    whose address is denied gets none, ahead or at its time."""
    t = tickd_factory(redis, env={"TICKD_CALLBACK_DENY": "127.0.0.0/8 ::1/128"}).start()
    url = f"http://localhost:{scripted.port}/ok"
    # the first call looks the name up (its address is then known ahead)
    first = t.post({"callback_url": url, "retry": {"max_attempts": 1}})
    assert t.final(first["id"])["status"] == "failed"
    due = int(time.time() * 1000) + 1200
    ids = [r["id"] for r in t.batch([{"callback_url": url, "execute_at": due,
                                      "retry": {"max_attempts": 1}} for _ in range(5)])]
    for tid in ids:
        g = t.final(tid)
        assert g["status"] == "failed", g
        assert g["last_error"].startswith("destination denied by policy: "), g
    assert scripted.conns == 0, scripted.accepted


def test_host_names_resolve(tickd, scripted):
    t = tickd.post({"callback_url": f"http://localhost:{scripted.port}/ok"})
    assert tickd.final(t["id"])["status"] == "succeeded"
    r = scripted.by_task()[t["id"]][0]
    assert r["headers"]["host"] == f"localhost:{scripted.port}"
    u = tickd.post({"callback_url": "http://no-such-host.invalid/x", "timeout_ms": 3000,
                    "retry": {"max_attempts": 1}})
    g = tickd.final(u["id"], timeout=20)
    assert g["status"] == "failed" and "no-such-host.invalid" in g["last_error"], g


def test_a_proxy_sends_callbacks_through_libcurl(tickd_factory, redis, scripted):
    t = tickd_factory(redis, env={"http_proxy": f"http://127.0.0.1:{scripted.port}"}).start()
    a = t.post({"callback_url": "http://127.0.0.1:9/via-proxy?x=1", "req": {"n": 1},
                "header": {"X-A": "1"}})
    assert t.final(a["id"])["status"] == "succeeded"
    r = scripted.by_task()[a["id"]][0]
    assert r["line"] == "POST http://127.0.0.1:9/via-proxy?x=1 HTTP/1.1", r
    assert r["headers"]["x-a"] == "1" and r["body"] == b'{"n":1}'
    assert r["headers"]["content-type"] == "application/json"


@pytest.mark.parametrize("kind", PATHS)
def test_ipv6_literal(tickd, raw_servers, kind):
    srv = raw_servers(ok_answer, family=socket.AF_INET6, host="::1")
    t = tickd.post({"callback_url": url_for(kind, "[::1]", srv.port), "retry": {"max_attempts": 1}})
    g = tickd.final(t["id"])
    assert g["status"] == "succeeded", g
    host = [ln for ln in srv.heads[0].split("\r\n") if ln.lower().startswith("host:")][0]
    assert host.split(":", 1)[1].strip() == f"[::1]:{srv.port}"


@pytest.mark.parametrize("kind", PATHS)
@pytest.mark.parametrize("host", ["0177.0.0.1", "127.1", "2130706433", "0x7f000001",
                                  "0x7f.0.0.1", "127.0.1"])
def test_numeric_ipv4_forms_reach_127_0_0_1(tickd, raw_servers, kind, host):
    """Each form means 127.0.0.1 to libcurl (inet_aton's reading: parts in
    decimal, octal or hex); the built-in client must read them the same way,
    not, say, 0177.0.0.1 as 177.0.0.1."""
    srv = raw_servers(ok_answer)
    t = tickd.post({"callback_url": url_for(kind, host, srv.port), "timeout_ms": 3000,
                    "retry": {"max_attempts": 1}})
    g = tickd.final(t["id"])
    assert g["status"] == "succeeded", (host, g)
    assert len(srv.heads) == 1
    # and the Host header names the address the same way on both paths
    hosthdr = [ln for ln in srv.heads[0].split("\r\n") if ln.lower().startswith("host:")][0]
    assert hosthdr.split(":", 1)[1].strip() == f"127.0.0.1:{srv.port}", hosthdr


def test_host_state_freed_once_unused(redis, tickd_factory):
    """Callbacks to many distinct hosts leave no state behind once those
    hosts are no longer called (keepalive_ms after the last one)."""
    srv = _AnyLoopback(("0.0.0.0", 0), _OkHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    try:
        t = tickd_factory(redis, env={"TICKD_SERVER_KEEPALIVE_MS": "1000"}).start()
        n = 300
        ids = [r["id"] for r in t.batch([
            {"callback_url": f"http://127.0.{i // 200}.{1 + i % 200}:{port}/ok",
             "retry": {"max_attempts": 1}} for i in range(n)])]
        wait_for(lambda: t.request("GET", "/v1/stats")[1]["hosts"] >= 50, 10,
                 what="host state while called")
        for tid in ids:
            g = t.final(tid)
            assert g["status"] == "succeeded", g
        wait_for(lambda: t.request("GET", "/v1/stats")[1]["hosts"] == 0, 10,
                 what="host state freed")
    finally:
        srv.shutdown()
        srv.server_close()


class _AnyLoopback(http.server.ThreadingHTTPServer):
    """Bound to every address: 127.0.x.y are all distinct hosts reaching it."""
    daemon_threads = True
    request_queue_size = 1024


class _OkHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


@pytest.mark.parametrize("kind", PATHS)
def test_out_of_descriptors_is_not_an_attempt(redis, tickd_factory, kind):
    """Under a descriptor limit, a burst of callbacks to a slow receiver runs
    tickd out of descriptors: those that could not even open a socket were
    never made, so they do not count as attempts. Every task (one attempt
    allowed) still succeeds once descriptors come back."""
    def slow(c):
        time.sleep(1.0)
        ok_answer(c)

    srv = Raw(slow)
    try:
        t = tickd_factory(redis, nofile=96, env={"TICKD_SERVER_WORKERS": "1", "TICKD_SERVER_HOST_CONNECTIONS": "1000"}).start()
        due = int(time.time() * 1000) + 1500
        n = 120
        ids = [r["id"] for r in t.batch([
            {"callback_url": url_for(kind, "127.0.0.1", srv.port, f"/t{i}"),
             "execute_at": due, "timeout_ms": 5000, "retry": {"max_attempts": 1}}
            for i in range(n)])]
        done = {}
        def all_final():
            for tid in ids:
                if tid not in done:
                    g = t.get(tid)[1]
                    if g["status"] in ("succeeded", "failed"):
                        done[tid] = g
            return len(done) == n
        wait_for(all_final, 60, interval=0.2, what=f"{n} tasks final")
        failed = [g for g in done.values() if g["status"] != "succeeded"]
        assert not failed, failed[:3]
        assert len(done) == n
        assert all(g["attempts"] == 1 for g in done.values())
        log = t.logtext()
        assert "without counting an attempt" in log, "the limit was never reached: test is void"
    finally:
        srv.close()
