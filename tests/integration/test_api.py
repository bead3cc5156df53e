"""The HTTP API: creation, validation errors, GET states, cancel, idempotency,
batch, health."""
import json
import time

import pytest

from harness import lua_constant, lua_source, now_ms, stored_keys, wait_for
from scenarios import batch_with_one_bad_task


def test_create_and_deliver(tickd, receiver):
    t = tickd.post({"callback_url": receiver.url("/ok"), "delay_ms": 500, "key": "k1"})
    assert t["key"] == "k1" and t["status"] == "scheduled"
    assert set(t) == {"id", "key", "execute_at", "status"}
    wait_for(lambda: receiver.count() == 1, 5, what="callback")
    code, g = tickd.get(t["id"])
    wait_for(lambda: tickd.get(t["id"])[1]["status"] == "succeeded", 5, what="succeeded")
    code, g = tickd.get(t["id"])
    assert code == 200 and g["attempts"] == 1 and g["callback_url"] == receiver.url("/ok")
    assert "last_error" not in g


def test_generated_key_is_url_safe(tickd, receiver):
    t = tickd.post({"callback_url": receiver.url(), "delay_ms": 60000})
    assert len(t["key"]) == 22 and t["key"].isalnum()
    assert all(c.isalnum() or c in "._:-" for c in t["id"])
    assert tickd.get(t["id"])[0] == 200


def test_validation_errors_name_the_field(tickd, redis):
    cases = [
        ({}, "callback_url: required"),
        ({"callback_url": "ftp://x/y"}, "callback_url:"),
        ({"callback_url": "http://x/", "method": "TRACE"}, "method:"),
        ({"callback_url": "http://x/", "header": {"bad name": "v"}}, "header.bad name:"),
        ({"callback_url": "http://x/", "header": {"X-A": "a\r\nb"}}, "header.X-A:"),
        ({"callback_url": "http://x/", "execute_at": "tomorrow"}, "execute_at: not an RFC 3339"),
        ({"callback_url": "http://x/", "execute_at": 1, "delay_ms": 1}, "execute_at:"),
        ({"callback_url": "http://x/", "delay_ms": -1}, "delay_ms:"),
        ({"callback_url": "http://x/", "retry": {"max_attempts": 0}}, "retry.max_attempts:"),
        ({"callback_url": "http://x/", "retry": {"backoff_ms": 0}}, "retry.backoff_ms:"),
        ({"callback_url": "http://x/", "timeout_ms": 300001}, "timeout_ms:"),
        ({"callback_url": "http://x/", "key": "a b"}, "key:"),
        ({"callback_url": "http://x/", "colour": 1}, "colour: unknown field"),
    ]
    for body, msg in cases:
        code, r = tickd.request("POST", "/v1/tasks", body)
        assert code == 400, (body, code, r)
        assert r["error"]["code"] == "invalid_argument"
        assert r["error"]["message"].startswith(msg), (body, r)
    # nothing half-written: no slice keys exist
    assert stored_keys(redis) == []


def test_http_errors(tickd):
    code, r = tickd.request("POST", "/v1/tasks", raw=b"{not json")
    assert code == 400 and r["error"]["message"].startswith("body: not valid JSON")
    code, r = tickd.request("POST", "/v1/tasks", raw=b"{}", headers={"Content-Type": "text/plain"})
    assert code == 415 and r["error"]["code"] == "unsupported_media_type"
    code, r = tickd.request("PUT", "/v1/tasks", {"a": 1})
    assert code == 405 and r["error"]["code"] == "method_not_allowed"
    code, r = tickd.request("GET", "/nope")
    assert code == 404 and r["error"]["code"] == "not_found"
    code, r = tickd.get("202611220000.1.123.nokey")
    assert code == 404
    code, r = tickd.get("garbage")
    assert code == 404
    big = b'{"callback_url":"http://x/","req":"' + b"a" * (1 << 20) + b'"}'
    code, r = tickd.request("POST", "/v1/tasks", raw=big)
    # the HTTP layer answers this one itself, before the body is read
    assert code == 413 and r["error"]["code"] == "payload_too_large", (code, r)


def test_idempotent_repost(tickd, receiver, redis):
    body = {"callback_url": receiver.url(), "key": "same", "execute_at": now_ms() + 120000}
    code1, a = tickd.request("POST", "/v1/tasks", body)
    code2, b = tickd.request("POST", "/v1/tasks", body)
    assert (code1, code2) == (201, 200)
    assert a["id"] == b["id"]
    slice_key = "tickd:{%s}:due" % a["id"].rsplit(".", 2)[0]
    assert redis.cli("ZCARD", slice_key) == "1"
    # another execute_at is another task
    body["execute_at"] += 1
    code3, c = tickd.request("POST", "/v1/tasks", body)
    assert code3 == 201 and c["id"] != a["id"]


def test_cancel(tickd, receiver, redis):
    far = tickd.post({"callback_url": receiver.url(), "delay_ms": 10 * 60 * 1000})
    # cancellable until claimed, lookahead_ms (1500) before it is due
    near = tickd.post({"callback_url": receiver.url(), "delay_ms": 3000})
    keep = tickd.post({"callback_url": receiver.url(), "delay_ms": 3000})
    assert tickd.delete(far["id"])[0] == 204
    assert tickd.delete(near["id"])[0] == 204
    assert tickd.delete(near["id"])[0] == 204  # cancelling twice is fine
    assert tickd.get(far["id"])[1]["status"] == "cancelled"
    wait_for(lambda: tickd.get(keep["id"])[1]["status"] == "succeeded", 8, what="keep fired")
    tickd.settled()
    ids = set(receiver.by_task())
    assert keep["id"] in ids and near["id"] not in ids and far["id"] not in ids
    assert tickd.delete(keep["id"])[0] == 409
    assert tickd.delete("202611220000.1.123.unknown")[0] == 404
    # the cancelled far task's tombstone does not expire before its minute
    home = far["id"].rsplit(".", 2)[0]
    assert redis.cli("SISMEMBER", "tickd:{%s}:del" % home, far["id"]) == "1"
    assert int(redis.cli("PTTL", "tickd:{%s}:del" % home)) > 10 * 60 * 1000


def test_batch_with_one_bad_task(tickd, receiver):
    batch_with_one_bad_task(tickd, receiver)


def test_healthz(tickd, redis):
    assert tickd.request("GET", "/healthz") == (200, {"redis": "ok", "store": {"data_lost": 0}})


def test_repost_of_a_finished_task_shows_its_status(tickd, redis):
    """A re-POST answers 200 with the stored task's status, however long the
    state Redis holds (here a last error of 500 bytes)."""
    body = {"callback_url": "http://127.0.0.1:1/", "key": "done-once",
            "execute_at": now_ms(), "retry": {"max_attempts": 1}}
    first = tickd.post(body)
    wait_for(lambda: tickd.get(first["id"])[1]["status"] == "failed", 10, what="failed")
    key = "tickd:{%s}:task" % first["id"].rsplit(".", 2)[0]
    state = json.loads(redis.cli("HGET", key, "s:" + first["id"]))
    state["err"] = "e" * 500
    redis.cli("HSET", key, "s:" + first["id"], json.dumps(state))
    code, again = tickd.request("POST", "/v1/tasks", body)
    assert code == 200 and again["id"] == first["id"] and again["status"] == "failed", again


def test_api_token_guards_v1_and_leaves_healthz_open(redis, receiver, tickd_factory):
    t = tickd_factory(redis, env={"TICKD_SERVER_API_TOKEN": "tok-9f2c"}).start()
    task = {"callback_url": receiver.url(), "delay_ms": 300, "key": "guarded"}
    code, body = t.request("POST", "/v1/tasks", task)
    assert code == 401 and body["error"]["code"] == "unauthorized"
    assert body["error"]["message"].startswith("Authorization: missing")
    for wrong in ("Bearer tok-9f2", "Bearer tok-9f2cx", "Basic tok-9f2c", "tok-9f2c"):
        code, body = t.request("POST", "/v1/tasks", task, headers={"Authorization": wrong})
        assert code == 401 and "wrong token" in body["error"]["message"], (wrong, body)
    for method, path, b in (("POST", "/v1/tasks/batch", {"tasks": [task]}),
                            ("GET", "/v1/tasks/x", None), ("DELETE", "/v1/tasks/x", None),
                            ("GET", "/v1/stats", None)):
        assert t.request(method, path, b)[0] == 401, path
    assert stored_keys(redis) == []  # nothing stored
    assert t.request("GET", "/healthz")[0] == 200
    ok = {"Authorization": "Bearer tok-9f2c"}
    code, created = t.request("POST", "/v1/tasks", task, headers=ok)
    assert code == 201
    wait_for(lambda: created["id"] in receiver.by_task(), 10, what="callback")
    assert t.request("GET", "/v1/tasks/" + created["id"], headers=ok)[1]["status"] in (
        "running", "succeeded")
    assert t.request("GET", "/v1/stats", headers={"authorization": "bearer tok-9f2c"})[0] == 200
    assert t.request("GET", "/v1/stats", headers={"Authorization": "Bearer   tok-9f2c"})[0] == 200
    # the field twice, right and wrong in either order: refused as ambiguous
    import socket
    for pair in (("Bearer tok-9f2c", "Bearer bad"), ("Bearer bad", "Bearer tok-9f2c")):
        with socket.create_connection(("127.0.0.1", t.port), timeout=5) as s:
            s.sendall(("GET /v1/stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                       f"Authorization: {pair[0]}\r\nAuthorization: {pair[1]}\r\n\r\n").encode())
            head = s.recv(4096).decode()
        assert head.startswith("HTTP/1.1 400") and "given more than once" in head, head


def test_api_token_is_checked_before_the_body_is_read(redis, tickd_factory):
    """A request without the token is refused on its head: no 100 Continue,
    and no waiting for (or buffering of) a body it announced."""
    import socket
    t = tickd_factory(redis, env={"TICKD_SERVER_API_TOKEN": "tok-9f2c"}).start()
    for expect in ("Expect: 100-continue\r\n", ""):
        with socket.create_connection(("127.0.0.1", t.port), timeout=5) as s:
            s.sendall(("POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       f"Content-Length: 1000000\r\n{expect}\r\n").encode())
            head = s.recv(4096).decode()  # the body is never sent
        assert head.startswith("HTTP/1.1 401"), head
        assert "100 Continue" not in head and "WWW-Authenticate: Bearer" in head, head
    # with the token the same head gets its 100 Continue
    with socket.create_connection(("127.0.0.1", t.port), timeout=5) as s:
        s.sendall(b"POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Authorization: Bearer tok-9f2c\r\nContent-Length: 2\r\n"
                  b"Expect: 100-continue\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 100 Continue")
        s.sendall(b"{}")
        assert s.recv(4096).startswith(b"HTTP/1.1 400")  # callback_url missing


def test_api_token_with_a_tab_is_refused_at_start(redis, tickd_factory):
    # spaces separate tokens; a tab or line end is a copy-paste slip
    bad = tickd_factory(redis, env={"TICKD_SERVER_API_TOKEN": "tok-9f2c\t"}).start(wait=False)
    assert bad.proc.wait(10) == 2
    assert "server.api_token" in bad.logtext()


def test_routes_answer_405_with_their_methods_and_404_naming_what_is_missing(tickd):
    """The route table's answers to a path under another method (405, Allow
    from the table) and to a path it has not (404), each with its message;
    what a path's segment cannot name is answered before the method."""
    import http.client
    long_id = "x" * 400

    def ask(method, path):
        conn = http.client.HTTPConnection("127.0.0.1", tickd.port, timeout=10)
        conn.request(method, path)
        res = conn.getresponse()
        body = json.loads(res.read())
        conn.close()
        return res.status, res.getheader("Allow"), body["error"]["code"], body["error"]["message"]
    for method, path, allow, msg in (
            ("PATCH", "/v1/tasks", "GET, POST", "method: use POST to create a task, GET to list"),
            ("GET", "/v1/tasks/batch", "POST", "method: use POST for a batch"),
            ("GET", "/v1/tasks/retry", "POST", "method: use POST to retry tasks"),
            ("POST", "/v1/tasks/abc", "GET, DELETE", "method: use GET or DELETE on a task"),
            ("POST", "/v1/tasks/", "GET, DELETE", "method: use GET or DELETE on a task"),
            ("GET", "/v1/tasks/abc/run", "POST", "method: use POST"),
            ("PUT", "/v1/tasks/abc/retry", "POST", "method: use POST"),
            ("PATCH", "/v1/schedules", "GET, POST",
             "method: use POST to create a schedule, GET to list"),
            ("POST", "/v1/schedules/sch.x", "GET, PUT, DELETE",
             "method: use GET, PUT or DELETE on a schedule"),
            ("GET", "/v1/schedules/sch.x/resume", "POST", "method: use POST"),
            ("POST", "/v1/queues", "GET", "method: use GET"),
            ("POST", "/v1/queues/q", "GET, PUT, DELETE", "method: use GET, PUT, DELETE"),
            ("DELETE", "/v1/queues/q/pause", "POST", "method: use POST"),
            ("POST", "/v1/destinations", "GET", "method: use GET"),
            ("POST", "/v1/destinations/example.com", "GET, PUT, DELETE",
             "method: use GET, PUT, DELETE"),
            ("POST", "/v1/stats", "GET", "method: use GET"),
            ("DELETE", "/healthz", "GET", "method: use GET"),
            ("PUT", "/metrics", "GET", "method: use GET"),
            ("POST", "/v1/openapi.json", "GET", "method: use GET")):
        assert ask(method, path) == (405, allow, "method_not_allowed", msg), (method, path)
    for method, path, status, code, msg in (
            ("GET", "/v1/tasks/abc/foo", 404, "not_found",
             "path: no such resource: /v1/tasks/abc/foo"),
            ("GET", f"/v1/tasks/{long_id}/run", 404, "not_found",
             f"path: no such resource: /v1/tasks/{long_id[:190]}"),
            ("GET", f"/v1/tasks/{long_id}", 404, "not_found", "id: no such task"),
            ("GET", "/v1/tasks/", 404, "not_found", "id: no such task"),
            ("GET", "/v1/schedules/sch.x/foo", 404, "not_found", "path: no such resource"),
            ("PATCH", "/v1/schedules/bad/pause", 404, "not_found", "id: no such schedule"),
            ("GET", "/v1/schedules/", 404, "not_found", "id: no such schedule"),
            ("PATCH", "/v1/queues/bad%20name", 400, "invalid_argument",
             "queue: must be 1-64 characters of A-Z a-z 0-9 . _ -"),
            ("GET", "/v1/queues/q/foo", 404, "not_found", "path: no such resource: /v1/queues/q/foo"),
            ("GET", "/v1/destinations/a/b", 400, "invalid_argument",
             "destination: must be host or host:port (lower case, no scheme, path or user; an "
             "IPv6 address in brackets)"),
            ("GET", "/v1/queuesX", 404, "not_found", "path: no such resource: /v1/queuesX"),
            ("GET", "/healthz/", 404, "not_found", "path: no such resource: /healthz/"),
            ("GET", "/" + "y" * 600, 404, "not_found", "path: no such resource")):
        assert ask(method, path) == (status, None, code, msg), (method, path, ask(method, path))


def test_read_tokens_read_everything_and_write_nothing(redis, receiver, tickd_factory):
    """A read-only token GETs (and HEADs) every /v1/ route; any other method
    is 403 on its head, naming the scope, and changes nothing. A token in
    both lists is a full one."""
    import http.client
    import socket
    t = tickd_factory(redis, env={"TICKD_SERVER_API_TOKEN": "adm-1 both-3",
                                  "TICKD_SERVER_READ_TOKENS": "ro-1 ro-2 both-3"}).start()
    admin, ro = {"Authorization": "Bearer adm-1"}, {"Authorization": "Bearer ro-2"}
    task = {"callback_url": receiver.url(), "delay_ms": 600000, "key": "kept"}
    code, created = t.request("POST", "/v1/tasks", task, headers=admin)
    assert code == 201, created
    tid = created["id"]
    sched = {"key": "nightly", "every_ms": 600000, "task": {"callback_url": receiver.url()}}
    assert t.request("POST", "/v1/schedules", sched, headers=admin)[0] == 201
    assert t.request("PUT", "/v1/queues/mail", {"rate": 2}, headers=admin)[0] == 200
    assert t.request("PUT", "/v1/destinations/example.com", {"max_concurrency": 3},
                     headers=admin)[0] == 200

    for path, check in (("/v1/tasks?status=scheduled", lambda b: [x["id"] for x in b["tasks"]] == [tid]),
                        ("/v1/tasks/" + tid, lambda b: b["status"] == "scheduled"),
                        ("/v1/schedules", lambda b: len(b["schedules"]) == 1),
                        ("/v1/schedules/sch.nightly", lambda b: b["id"] == "sch.nightly"),
                        ("/v1/queues", lambda b: "mail" in [q["name"] for q in b["queues"]]),
                        ("/v1/queues/mail", lambda b: b["rate"] == 2),
                        ("/v1/destinations", lambda b: len(b["destinations"]) == 1),
                        ("/v1/destinations/example.com", lambda b: b["max_concurrency"] == 3),
                        ("/v1/stats", lambda b: "store" in b)):
        code, body = t.request("GET", path, headers=ro)
        assert code == 200 and check(body), (path, code, body)
        conn = http.client.HTTPConnection("127.0.0.1", t.port, timeout=10)
        conn.request("HEAD", path, headers=ro)
        res = conn.getresponse()
        assert res.status == 200 and res.read() == b"", (path, res.status)
        conn.close()

    def scope_msg(method, path):
        return (f"Authorization: a read-only token (server.read_tokens); {method} {path} "
                "needs a token of server.api_token")
    for method, path, body in (("POST", "/v1/tasks", task),
                               ("POST", "/v1/tasks/batch", {"tasks": [task]}),
                               ("POST", "/v1/tasks/retry", {}),
                               ("DELETE", "/v1/tasks/" + tid, None),
                               ("POST", f"/v1/tasks/{tid}/run", None),
                               ("POST", "/v1/schedules", sched),
                               ("PUT", "/v1/schedules/sch.nightly", sched),
                               ("DELETE", "/v1/schedules/sch.nightly", None),
                               ("POST", "/v1/schedules/sch.nightly/pause", None),
                               ("PUT", "/v1/queues/mail", {"rate": 9}),
                               ("PATCH", "/v1/queues/mail", {"rate": 9}),
                               ("DELETE", "/v1/destinations/example.com", None),
                               ("POST", "/v1/queues/mail/pause?x=1", None)):
        for token in ("ro-1", "ro-2"):
            code, res = t.request(method, path, body,
                                  headers={"Authorization": f"Bearer {token}"})
            assert code == 403 and res["error"]["code"] == "forbidden", (method, path, res)
            assert res["error"]["message"] == scope_msg(method, path.split("?")[0]), res
    # nothing changed
    assert t.request("GET", "/v1/tasks/" + tid, headers=ro)[1]["status"] == "scheduled"
    got = t.request("GET", "/v1/schedules/sch.nightly", headers=ro)[1]
    assert got["every_ms"] == 600000 and got["state"] == "active", got
    assert t.request("GET", "/v1/queues/mail", headers=ro)[1]["rate"] == 2
    # refused on its head: no 100 Continue, the announced body never read
    with socket.create_connection(("127.0.0.1", t.port), timeout=5) as s:
        s.sendall(b"POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Authorization: Bearer ro-1\r\nContent-Length: 1000000\r\n"
                  b"Expect: 100-continue\r\n\r\n")
        head = s.recv(4096).decode()
    assert head.startswith("HTTP/1.1 403 Forbidden") and "100 Continue" not in head, head
    # a wrong token is still 401, a read token is no full token's prefix
    for wrong in ("ro-", "ro-1x", "adm-"):
        code, res = t.request("GET", "/v1/stats", headers={"Authorization": f"Bearer {wrong}"})
        assert code == 401 and "wrong token" in res["error"]["message"], (wrong, res)
    # a full token, and one given in both lists, does everything
    for token in ("adm-1", "both-3"):
        auth = {"Authorization": f"Bearer {token}"}
        code, res = t.request("POST", "/v1/schedules/sch.nightly/pause", headers=auth)
        assert code == 200 and res["state"] == "paused", res
        assert t.request("POST", "/v1/schedules/sch.nightly/resume", headers=auth)[0] == 200
        assert t.request("GET", "/v1/tasks/" + tid, headers=auth)[0] == 200
    assert t.request("DELETE", "/v1/tasks/" + tid, headers={"Authorization": "Bearer both-3"})[0] \
        in (200, 204)
    assert t.request("GET", "/v1/tasks/" + tid, headers=ro)[1]["status"] == "cancelled"
    # the open routes stay open
    assert t.request("GET", "/healthz")[0] == 200
    assert t.request("GET", "/v1/openapi.json")[0] == 200


def test_read_tokens_need_an_api_token_and_are_checked_as_it(redis, tickd_factory, tmp_path):
    for env, why in (({"TICKD_SERVER_READ_TOKENS": "ro-1"},
                      "server.read_tokens: needs server.api_token (without it the API is open "
                      "to everyone, writes included)"),
                     ({"TICKD_SERVER_API_TOKEN": "adm", "TICKD_SERVER_READ_TOKENS": "ro\t1"},
                      "server.read_tokens: token 1: only letters, digits"),
                     ({"TICKD_SERVER_API_TOKEN": "adm", "TICKD_SERVER_READ_TOKENS": "  "},
                      "server.read_tokens: spaces and no token"),
                     ({"TICKD_SERVER_API_TOKEN": "adm", "TICKD_SERVER_READ_TOKENS": ""},
                      "environment TICKD_SERVER_READ_TOKENS: read_tokens: empty")):
        bad = tickd_factory(redis, env=env).start(wait=False)
        assert bad.proc.wait(10) == 2, env
        assert why in bad.logtext(), (env, bad.logtext())


def test_pending_task_memory_in_redis(tickd, redis, receiver):
    """A task with no key of its own, due later, with a 200-byte body costs
    Redis at most 450 bytes (one :due member: src/model/task.h records); it reads,
    lists, runs now and cancels as any other."""
    def used():
        info = redis.cli("INFO", "memory")
        return int(next(l.split(":")[1] for l in info.splitlines() if l.startswith("used_memory:")))
    n, at = 5000, now_ms() + 3600 * 1000
    base = used()
    for i in range(0, n, 1000):
        code, r = tickd.request("POST", "/v1/tasks/batch", {"tasks": [
            {"callback_url": receiver.url(), "execute_at": at, "req": "x" * 200}
            for _ in range(1000)]})
        assert code == 200 and all(t["status"] == "scheduled" for t in r["results"]), r
    per = (used() - base) / n
    assert per <= 450, f"{per:.0f} bytes a task"
    one = r["results"][-1]["id"]
    code, got = tickd.get(one)
    assert code == 200 and got["status"] == "scheduled" and got["req"] == "x" * 200, got
    assert got["execute_at"] == at and got["retry"] == {"max_attempts": 5, "backoff_ms": 1000}
    code, page = tickd.request("GET", "/v1/tasks?status=scheduled&limit=5")
    assert code == 200 and len(page["tasks"]) == 5
    assert tickd.request("POST", f"/v1/tasks/{one}/run")[0] == 200
    wait_for(lambda: tickd.get(one)[1]["status"] == "succeeded", 10, what="run now")
    two = r["results"][-2]["id"]
    assert tickd.delete(two)[0] == 204 and tickd.get(two)[1]["status"] == "cancelled"


def fresh_add(add, k, end, again, tasks, pairs=True):
    """An add.lua call of fresh tasks, (id, record, due) each, as tickd sends
    it (pairs: 'f', then due and :due member a task) or as groups of 6 (the
    timeout and queue the record's: src/model/task.h)."""
    call = ["EVAL", add, 3, *k[:3], end, 30000, again]
    if pairs:
        call.append("f")
    for tid, rec, at in tasks:
        to, queue = rec.split("\n")[2:4]
        call += [at, f"{tid}\n{rec}"] if pairs else [tid, rec, at, to, queue, "f"]
    return call


@pytest.mark.parametrize("pairs", [True, False], ids=["pairs", "groups"])
def test_a_fresh_add_sent_again_after_the_task_changed_stores_nothing(redis, pairs):
    """A command is sent again when its connection drops before the answer
    (rcluster.c), its "again" argument set. An add of a fresh task
    (lua/lib.lua) that comes again, while fresh or after the task became
    full (here: cancelled), finds it: its own, told stored (its first answer
    was lost), nothing is stored again, and the slice's count of open tasks
    stays right. In both of add.lua's layouts: tickd sends fresh tasks alone
    as pairs, and beside others as groups."""
    add, cancel = lua_source("add"), lua_source("cancel")
    at = now_ms() + 20000
    sl = time.strftime("%Y%m%d%H%M", time.gmtime(at // 1000)) + ".3"
    tid = f"{sl}.{at}.Ab3dEf7hIj9lMn1pQr5tUv"
    rec = '"http://127.0.0.1:1/"\n\n10000\n\n\n{}'
    k = [f"tickd:{{{sl}}}:{n}" for n in ("due", "task", "del", "ok", "failed", "cancelled")]
    end = (at // 60000 + 1) * 60000
    first = fresh_add(add, k, end, "0", [(tid, rec, at)], pairs)
    call = fresh_add(add, k, end, "1", [(tid, rec, at)], pairs)  # as rcluster sends it again
    assert redis.cli(*first).splitlines() == ["1"]
    # still fresh: its member found, this call's own (2: stored by its first run)
    assert redis.cli(*call).splitlines() == ["2"]
    assert redis.cli("HGET", k[1], "#open") == "1"
    assert redis.cli("EVAL", cancel, 6, *k, tid, 60000, 60000).splitlines()[0] == "ok"
    assert redis.cli("HGET", k[1], "#open") == "0"
    assert redis.cli(*call).splitlines() == ["2"]  # its state found: stored before
    assert redis.cli("HGET", k[1], "#open") == "0"
    assert redis.cli("ZRANGE", k[0], 0, -1).splitlines() == [tid]  # no fresh member again
    # sent again once the slice's end has passed: answered when its first run
    # stored every task, refused whole (nothing written) when one is new
    late = now_ms() - 60000
    assert redis.cli(*fresh_add(add, k, late, "1", [(tid, rec, at)], pairs)).splitlines() == ["2"]
    assert "STALE" in redis.cli(*fresh_add(add, k, late, "0", [(tid, rec, at)], pairs))
    other = f"{sl}.{at}.Zz3dEf7hIj9lMn1pQr5tUv"
    assert "STALE" in redis.cli(*fresh_add(add, k, late, "1", [(tid, rec, at), (other, rec, at)],
                                           pairs))
    assert redis.cli("ZRANGE", k[0], 0, -1).splitlines() == [tid]
    assert redis.cli("HGET", k[1], "#open") == "0"
    # the first run run by Redis after its resend (connections dropped while
    # Redis was stalled): the resend stored the task, the first run (again
    # = 0, nothing looked for) adds the same member, which opens nothing
    two = f"{sl}.{at}.Yy3dEf7hIj9lMn1pQr5tUv"
    assert redis.cli(*fresh_add(add, k, end, "1", [(two, rec, at)], pairs)).splitlines() == ["1"]
    assert redis.cli(*fresh_add(add, k, end, "0", [(two, rec, at)], pairs)).splitlines() == ["1"]
    assert redis.cli("HGET", k[1], "#open") == "1"
    assert redis.cli("ZCARD", k[0]) == "2"
    # sent again with one task its first run stored and one it did not
    # reach (a record with newlines of its own: only the first one ends the id)
    three, odd = f"{sl}.{at}.Xx3dEf7hIj9lMn1pQr5tUv", rec + "\nx\ny"
    assert redis.cli(*fresh_add(add, k, end, "1", [(two, rec, at), (three, odd, at)],
                                pairs)).splitlines() == ["2", "1"]
    assert redis.cli("ZSCORE", k[0], f"{three}\n{odd}") == str(at)
    assert redis.cli("HGET", k[1], "#open") == "2"
    # an id twice in a call sent again: the first stored, the second
    # answered with the state it starts in, its record's timeout and queue
    four, queued = f"{sl}.{at}.Ww3dEf7hIj9lMn1pQr5tUv", '"http://127.0.0.1:1/"\n\n2500\nq.a\n\n{}'
    got = redis.cli(*fresh_add(add, k, end, "1", [(four, queued, at), (four, queued, at)],
                                pairs)).splitlines()
    assert got[0] == "1" and json.loads(got[1]) == \
        {"s": "scheduled", "a": 0, "due": at, "to": 2500, "q": "q.a"}, got


def test_an_add_of_fresh_tasks_only_stores_them_in_one_pass(redis):
    """add.lua, on a real Redis: a call of fresh tasks only, sent once, stores
    each as its :due member, counts them open, pins the task hash it makes
    and opens a slice that had closed (its keys' expiry taken off), in the
    layout tickd sends (pairs: due and member) and in groups of 6; a call
    with a task of a client's key beside a fresh one goes the general way,
    each stored in its own form."""
    add = lua_source("add")
    at = now_ms() + 20000
    sl = time.strftime("%Y%m%d%H%M", time.gmtime(at // 1000)) + ".5"
    k = [f"tickd:{{{sl}}}:{n}" for n in ("due", "task", "del")]
    rec = '"http://127.0.0.1:1/"\n\n10000\n\n\n{}'
    end = (at // 60000 + 1) * 60000
    # a slice whose tasks all ended: its keys expiring, its count at 0
    redis.cli("HSET", k[1], "#open", 0)
    redis.cli("SADD", k[2], "gone")
    for key in k[1:]:
        redis.cli("PEXPIRE", key, 600000)
    ids = [f"{sl}.{at}.F{i}3dEf7hIj9lMn1pQr5tUv" for i in range(3)]
    # as tickd sends them: their number answered, each stored
    assert redis.cli(*fresh_add(add, k, end, "0", [(t, rec, at) for t in ids])) == "3"
    assert redis.cli("ZCARD", k[0]) == "3"
    assert [redis.cli("ZSCORE", k[0], f"{tid}\n{rec}") for tid in ids] == [str(at)] * 3
    assert redis.cli("HGET", k[1], "#open") == "3"
    assert redis.cli("HGET", k[1], "#pin") == lua_constant("TASK_PIN")
    assert [redis.cli("PTTL", key) for key in k[1:]] == ["-1", "-1"]
    # in groups of 6, as tickd sent them before: the same
    more = [f"{sl}.{at}.H{i}3dEf7hIj9lMn1pQr5tUv" for i in range(2)]
    assert redis.cli(*fresh_add(add, k, end, "0", [(t, rec, at) for t in more],
                                pairs=False)).splitlines() == ["1", "1"]
    assert redis.cli("HGET", k[1], "#open") == "5"
    # closed again (the count at 0, its keys expiring): the next add of a
    # slice with tasks open leaves nothing to take off, the one after a close
    # takes the expiry off
    redis.cli("HSET", k[1], "#open", 0)
    for key in k[1:]:
        redis.cli("PEXPIRE", key, 600000)
    one = [(f"{sl}.{at}.J{i}3dEf7hIj9lMn1pQr5tUv", rec, at) for i in range(2)]
    assert redis.cli(*fresh_add(add, k, end, "0", one[:1])) == "1"
    assert [redis.cli("PTTL", key) for key in k[1:]] == ["-1", "-1"]
    assert redis.cli(*fresh_add(add, k, end, "0", one[1:])) == "1"
    assert redis.cli("HGET", k[1], "#open") == "2"
    assert [redis.cli("PTTL", key) for key in k[1:]] == ["-1", "-1"]
    # a task of a client's key beside a fresh one: its record and state in
    # the task hash, its id alone in :due
    keyed, fresh = f"{sl}.{at}.order-7", f"{sl}.{at}.G03dEf7hIj9lMn1pQr5tUv"
    mixed = ["EVAL", add, 3, *k, end, 30000, "0", fresh, rec, at, 10000, "", "f",
             keyed, rec, at, 10000, "", "k"]
    assert redis.cli(*mixed).splitlines() == ["1", "1"]
    assert redis.cli("HGET", k[1], keyed) == rec
    assert '"s":"scheduled"' in redis.cli("HGET", k[1], f"s:{keyed}")
    assert redis.cli("ZSCORE", k[0], keyed) == str(at)
    assert redis.cli("ZSCORE", k[0], f"{fresh}\n{rec}") == str(at)
    assert redis.cli("HGET", k[1], "#open") == "4"


def test_a_claim_drops_a_fresh_member_an_add_put_back_after_it_claimed_the_task(redis):
    """The claim writes each fresh task's record first and takes the task
    when the record was new (lua/claim.lua). An add's first run that Redis
    runs after the run sent again for it can put back the member of a task
    claimed since: that record is not new, the claim reads the states, drops
    that member (its task keeps the state and record it has, and the slice's
    count of open tasks stays right) and takes the other tasks."""
    add, claim = lua_source("add"), lua_source("claim")
    at = now_ms() + 500
    sl = time.strftime("%Y%m%d%H%M", time.gmtime(at // 1000)) + ".5"
    one = f"{sl}.{at}.Cl1dEf7hIj9lMn1pQr5tUv"
    two = f"{sl}.{at}.Cl2dEf7hIj9lMn1pQr5tUv"
    rec = '"http://127.0.0.1:1/"\n\n10000\n\n\n{}'
    k = [f"tickd:{{{sl}}}:{n}" for n in ("due", "task", "del", "run", "ptr")]
    end = (at // 60000 + 1) * 60000
    first = ["EVAL", add, 3, *k[:3], end, 30000, "0", one, rec, at, 10000, "", "f"]
    take = ["EVAL", claim, 5, *k, 5000, 256, 5000, 5000, 256, "1"]
    assert redis.cli(*first).splitlines() == ["1"]
    assert redis.cli("HGET", k[1], "#pin")  # the add that made the hash pinned it
    got = redis.cli(*take).splitlines()
    assert got[2:] == ["1", one] + rec.split("\n")
    running = redis.cli("HGET", k[1], f"s:{one}")
    assert '"s":"running"' in running
    # the add's first run, run late, puts the member back (it is new again:
    # the claim took it) and opens the task again; another task is added
    assert redis.cli(*first).splitlines() == ["1"]
    assert redis.cli("HGET", k[1], "#open") == "2"
    assert redis.cli(*(first[:9] + [two] + first[10:])).splitlines() == ["1"]
    assert redis.cli("HGET", k[1], "#open") == "3"
    got = redis.cli(*take).splitlines()
    assert got[2] == "2"  # both taken, the one put back dropped
    assert got[3:] == [two] + rec.split("\n")
    assert redis.cli("HGET", k[1], f"s:{one}") == running
    assert redis.cli("HGET", k[1], one) == rec
    assert redis.cli("HGET", k[1], "#open") == "2"
    assert redis.cli("ZCARD", k[0]) == "0"
    assert sorted(redis.cli("ZRANGE", k[3], 0, -1).splitlines())[-2:] == [one, two]
    # the same after a cancel: the task's plain entry and the member put back
    # come in one claim; the member is dropped and counted off
    three = f"{sl}.{at}.Cl3dEf7hIj9lMn1pQr5tUv"
    add3 = first[:9] + [three] + first[10:]
    assert redis.cli(*add3).splitlines() == ["1"]
    fin = [f"tickd:{{{sl}}}:{n}" for n in ("ok", "failed", "cancelled", "expired")]
    assert redis.cli("EVAL", lua_source("cancel"), 7, *k[:3], *fin, three, 60000,
                     60000).splitlines()[0] == "ok"
    assert redis.cli("HGET", k[1], "#open") == "2"
    assert redis.cli(*add3).splitlines() == ["1"]
    assert redis.cli("HGET", k[1], "#open") == "3"
    got = redis.cli(*take).splitlines()
    assert got[2:] == ["2"]  # the entry and the member, neither leased
    assert redis.cli("HGET", k[1], "#open") == "2"
    assert redis.cli("ZCARD", k[0]) == "0"
    assert '"s":"cancelled"' in redis.cli("HGET", k[1], f"s:{three}")
    # and with the task's lease expired: the claim takes the task again by
    # its lease, and drops the member put back (counted off, not skipped as
    # the same id taken twice)
    four = f"{sl}.{at}.Cl4dEf7hIj9lMn1pQr5tUv"
    add4 = first[:9] + [four] + first[10:]
    assert redis.cli(*add4).splitlines() == ["1"]
    assert redis.cli(*take).splitlines()[2] == "1"
    assert redis.cli("ZADD", k[3], "XX", "CH", now_ms() - 1, four) == "1"
    assert redis.cli(*add4).splitlines() == ["1"]
    assert redis.cli("HGET", k[1], "#open") == "4"
    got = redis.cli(*take).splitlines()
    assert got[2] == "2" and got[4] == four and got[5] == "1"  # taken again, attempt 1
    assert redis.cli("HGET", k[1], "#open") == "3"
    assert redis.cli("ZCARD", k[0]) == "0"


def test_a_claim_takes_the_first_entries_of_due_and_leaves_the_rest(redis):
    """claim.lua, on a real Redis: expired leases first, then the tasks due
    soon, then at most far_limit of those due later within the reach, oldest
    first, limit in all; what it took leaves :due (as one range of its first
    entries) and the rest stays, each entry as it was. The counts of what is
    left come only when asked for (-1 otherwise)."""
    claim = lua_source("claim")
    sl = "202611270100.9"
    k = [f"tickd:{{{sl}}}:{n}" for n in ("due", "task", "del", "run", "ptr")]
    rec = '"http://127.0.0.1:1/"\n\n10000\n\n\n{}'
    now = now_ms()
    # an expired lease of a task claimed before (record and running state)
    old = f"{sl}.{now - 60000}.oldxxxxxxxxxxxxxxxxxxxx"
    redis.cli("HSET", k[1], old, rec, f"s:{old}",
              f'{{"s":"running","a":0,"due":{now - 60000},"to":10000,"q":1}}')
    redis.cli("ZADD", k[3], now - 1, old)
    entries = {}
    for name, at in (("a1", now - 1000), ("a2", now - 1000), ("a3", now - 900),
                     ("f1", now + 3000), ("f2", now + 3000), ("f3", now + 3100),
                     ("b1", now + 9000), ("b2", now + 9000)):
        entries[name] = (at, f"{sl}.{at}.{name}xxxxxxxxxxxxxxxxxxxx\n{rec}")
        redis.cli("ZADD", k[0], at, entries[name][1])
    redis.cli("HINCRBY", k[1], "#open", len(entries) + 1)
    got = redis.cli("EVAL", claim, 5, *k, 5000, 7, 5000, 1000, 2, "1").splitlines()
    assert got[:3] == ["3", "6", "6"], got[:3]  # due_left, run_left, taken
    leased = [ln.split(".")[3][:2] for ln in got[3:] if ln.startswith(sl + ".")]
    assert leased == ["ol", "a1", "a2", "a3", "f1", "f2"]
    left = sorted(e for e in redis.cli("ZRANGE", k[0], 0, -1).splitlines()
                  if e.startswith(sl + "."))
    assert [e.split(".")[3][:2] for e in left] == ["f3", "b1", "b2"]
    assert redis.cli("ZSCORE", k[0], entries["f3"][1]) == str(entries["f3"][0])
    assert redis.cli("ZCARD", k[3]) == "7"  # six leases and the pin
    # the counts not asked for: -1 each; nothing due within the reach is left
    got = redis.cli("EVAL", claim, 5, *k, 5000, 7, 5000, 1000, 2, "0").splitlines()
    assert got[:3] == ["-1", "-1", "1"], got[:3]
    assert [e.split(".")[3][:2] for e in redis.cli("ZRANGE", k[0], 0, -1).splitlines()
            if e.startswith(sl + ".")] == ["b1", "b2"]


def test_batch_answer_text(tickd, receiver):
    """The whole text of a batch's answer: each result in index order, a new
    task's id, key, execute_at and status, a reused key's task with its
    state as stored (scheduled, running, succeeded, failed, cancelled), and
    each invalid task's error naming its index and field, quoted as sent
    (escaped, and cleaned to UTF-8), in JSON as compact as cJSON prints it."""
    import urllib.error
    import urllib.request
    at = now_ms() + 3600 * 1000

    def keyed(key, url, when, **more):
        return dict({"callback_url": url, "key": key, "execute_at": when}, **more)
    ids, whens, soon = {}, {}, now_ms()
    for name, path, when, more in (("sched", "/ok", at, {}), ("cancel", "/ok", at, {}),
                                   ("ok", "/ok", soon, {}),
                                   ("fail", "/status/500", soon, {"retry": {"max_attempts": 1}}),
                                   ("run", "/slow/20000", soon, {"timeout_ms": 30000})):
        ids[name] = tickd.post(keyed(f"bt-{name}", receiver.url(path), when, **more))["id"]
        whens[name] = when
    assert tickd.delete(ids["cancel"])[0] == 204
    tickd.final(ids["ok"])
    tickd.final(ids["fail"])
    wait_for(lambda: tickd.get(ids["run"])[1]["status"] == "running", 10, what="running")
    states = {"sched": "scheduled", "cancel": "cancelled", "ok": "succeeded",
              "fail": "failed", "run": "running"}
    url = "http://127.0.0.1:9/cb"
    parts, want = [], []
    for i in range(12):
        parts.append(json.dumps({"callback_url": url, "execute_at": at + i}))
        want.append(("new", None, at + i))
    for name in ("sched", "cancel", "ok", "fail", "run"):
        parts.append(json.dumps({"callback_url": url, "key": f"bt-{name}",
                                 "execute_at": whens[name]}))
        want.append(("old", name, None))
    parts.append(json.dumps({"callback_url": url, "key": "bt-new", "execute_at": at + 7}))
    want.append(("new", "bt-new", at + 7))
    bad = [
        '{"callback_url": "%s", "execute_at": %d, "bogus": 1}' % (url, at),
        '{"callback_url": "%s", "execute_at": "soon"}' % url,
        '{"callback_url": "%s", "execute_at": 1e400}' % url,
        '{"callback_url": "%s", "execute_at": %d, "method": "PO\\u0000ST"}' % (url, at),
        '{"callback_url": "%s", "execute_at": %d, "a\\"b\\n\\u0001\\u00e9\\u007f": 1}'
        % (url, at),
        '{"callback_url": 5}',
        '[]',
    ]
    parts += bad
    want += [("bad", None, None)] * len(bad)
    # a key given twice in the batch, and one stored before given again
    parts.append(json.dumps({"callback_url": url, "key": "bt-new", "execute_at": at + 7}))
    want.append(("again", "bt-new", at + 7))
    parts.append(json.dumps({"callback_url": url, "key": "bt-sched", "execute_at": at}))
    want.append(("old", "sched", None))
    parts.append(json.dumps({"callback_url": url, "execute_at": at + 99}))
    want.append(("new", None, at + 99))
    body = ('{"tasks": [' + ", ".join(parts) + "]}").encode()
    req = urllib.request.Request(f"http://127.0.0.1:{tickd.port}/v1/tasks/batch", data=body,
                                 method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            code, text = r.status, r.read()
    except urllib.error.HTTPError as e:
        code, text = e.code, e.read()
    assert code == 200, text
    got = json.loads(text)["results"]
    assert len(got) == len(want)
    messages = []
    for i, ((kind, name, when), res) in enumerate(zip(want, got)):
        if kind == "new":
            assert list(res) == ["id", "key", "execute_at", "status"], (i, res)
            assert res["execute_at"] == when and res["status"] == "scheduled", (i, res)
            assert res["key"] == (name or res["key"]) and res["id"].endswith(res["key"]), res
        elif kind == "again":
            assert res == got[17], (i, res)
        elif kind == "old":
            assert res == {"id": ids[name], "key": f"bt-{name}", "execute_at": whens[name],
                           "status": states[name]}, (i, res)
            assert list(res) == ["id", "key", "execute_at", "status"]
        else:
            assert list(res) == ["error"] and list(res["error"]) == ["code", "message"], (i, res)
            assert res["error"]["code"] == "invalid_argument", (i, res)
            messages.append(res["error"]["message"])
    assert messages == [
        "tasks[18].bogus: unknown field",
        "tasks[19].execute_at: not an RFC 3339 timestamp (want 2006-01-02T15:04:05Z)",
        "tasks[20].execute_at: a number that would not be stored exactly (too large for a "
        "double, or so small it would read as 0)",
        "tasks[21].method: contains a NUL character (\\u0000)",
        "tasks[22].a\"b\n?\u00e9?: unknown field",
        "tasks[23].callback_url: must be a string",
        "tasks[24].task: must be a JSON object",
    ], messages
    # the text, as cJSON prints it: compact, members in order, non-ASCII
    # as is, control characters escaped (\u00XX in lower case)
    assert text == json.dumps({"results": got}, separators=(",", ":"),
                              ensure_ascii=False).encode() + b"\n", text
