"""Task JSON at its edges, against the real binary and Redis: a string holding
\\u0000 (or a raw NUL byte) is refused with 400 naming the field, nothing of it
stored; header values refuse control characters; a batch refuses only its bad
task; what is stored and sent is exactly what was sent. And the API token
list: every token works, rotation drops the old one."""
import json
import socket

from harness import stored_keys, wait_for





def nul_refused(tickd, task, field):
    code, body = tickd.request("POST", "/v1/tasks", task)
    assert code == 400, (task, code, body)
    assert body["error"]["code"] == "invalid_argument"
    assert body["error"]["message"] == f"{field}: contains a NUL character (\\u0000)", body


def test_nul_anywhere_in_a_task_is_refused_naming_the_field(tickd, redis, receiver):
    url = receiver.url()
    # json.dumps writes "\u0000" for a NUL: exactly what a client sends
    nul_refused(tickd, {"callback_url": url, "key": "k\0a"}, "key")
    nul_refused(tickd, {"callback_url": url + "\0.evil.test/"}, "callback_url")
    nul_refused(tickd, {"callback_url": url, "method": "GET\0"}, "method")
    nul_refused(tickd, {"callback_url": url, "header": {"X-A": "v\0w"}}, "header.X-A")
    nul_refused(tickd, {"callback_url": url, "header": {"X-A\0B": "v"}}, "header.X-A\\u0000B")
    nul_refused(tickd, {"callback_url": url, "req": "text\0more"}, "req")
    nul_refused(tickd, {"callback_url": url, "req": {"a": [1, {"b": "\0"}]}}, "req.a[1].b")
    nul_refused(tickd, {"callback_url": url, "req": {"\0": 1}}, "req.\\u0000")
    nul_refused(tickd, {"callback_url": url, "execute_at": "2026-11-22T05:00:00Z\0x"},
                "execute_at")
    nul_refused(tickd, {"callback_url": url, "retry": {"max_attempts\0": 1}},
                "retry.max_attempts\\u0000")
    assert stored_keys(redis) == []
    # a raw NUL byte in the body, inside a string or after the JSON
    for raw in (b'{"callback_url":"' + url.encode() + b'","key":"a\0b"}',
                b'{"callback_url":"' + url.encode() + b'"}\0'):
        code, body = tickd.request("POST", "/v1/tasks", raw=raw)
        assert code == 400 and body["error"]["message"].startswith("body: a NUL byte at byte"), body
    assert stored_keys(redis) == []


def test_keys_differing_after_a_nul_never_become_one_task(tickd, redis, receiver):
    a = {"callback_url": receiver.url(), "key": "same\0one", "delay_ms": 60000}
    b = {"callback_url": receiver.url(), "key": "same\0two", "delay_ms": 60000}
    assert tickd.request("POST", "/v1/tasks", a)[0] == 400
    assert tickd.request("POST", "/v1/tasks", b)[0] == 400
    # the key they would have been cut to is still free
    created = tickd.post({"callback_url": receiver.url(), "key": "same", "delay_ms": 60000})
    assert created["status"] == "scheduled" and created["key"] == "same"
    code, again = tickd.request("POST", "/v1/tasks", a)
    assert code == 400
    assert tickd.get(created["id"])[1]["key"] == "same"


def test_escaped_backslash_then_u0000_is_text_and_arrives_exactly(tickd, receiver):
    body = "a \\u0000 b \\\\u0000 \u00e9\t\x01"  # backslashes and text, no NUL
    task = {"callback_url": receiver.url(), "req": body,
            "header": {"X-Text": "tab\there \\u0000"}}
    raw = json.dumps(task)
    assert "\\\\u0000" in raw
    created = tickd.post(task)
    wait_for(lambda: created["id"] in receiver.by_task(), 10, what="callback")
    call = receiver.by_task()[created["id"]][0]
    assert call["body"] == body.encode(), call["body"]
    assert call["headers"]["x-text"] == "tab\there \\u0000"
    # and the stored task reads back the same
    got = tickd.get(created["id"])[1]
    assert got["req"] == body and got["header"] == {"X-Text": "tab\there \\u0000"}


def test_header_values_refuse_control_characters(tickd, redis, receiver):
    for ch in ("\x01", "\x1b", "\x7f", "\x0b", "\r", "\n"):
        code, body = tickd.request("POST", "/v1/tasks", {
            "callback_url": receiver.url(), "header": {"X-A": "a" + ch + "b"}})
        assert code == 400 and body["error"]["message"].startswith("header.X-A: value contains"), (
            repr(ch), body)
    assert stored_keys(redis) == []
    assert tickd.request("POST", "/v1/tasks", {
        "callback_url": receiver.url(), "header": {"X-A": "a\tb"}})[0] == 201


def test_a_field_given_twice_is_refused(tickd, redis, receiver):
    url = receiver.url()
    for raw, field in ((f'{{"callback_url":"{url}","key":"a","key":"b"}}', "key"),
                       (f'{{"callback_url":"{url}","header":{{"X-A":"1","X-A":"2"}}}}',
                        "header.X-A"),
                       (f'{{"callback_url":"http://evil.test/","callback_url":"{url}"}}',
                        "callback_url")):
        code, body = tickd.request("POST", "/v1/tasks", raw=raw.encode())
        assert code == 400 and body["error"]["message"] == f"{field}: given more than once", body
    assert stored_keys(redis) == []


def test_req_numbers_are_stored_exactly_or_refused(tickd, receiver):
    url = receiver.url()
    for num, path in (("9007199254740993", "req.id"), ("1e400", "req.id"),
                      ("0.30000000000000004", "req.id")):
        raw = f'{{"callback_url":"{url}","req":{{"id":{num}}}}}'.encode()
        code, body = tickd.request("POST", "/v1/tasks", raw=raw)
        assert code == 400 and body["error"]["message"].startswith(f"{path}: a number"), body
    created = tickd.post({"callback_url": url, "req": {"id": 900719925474099, "x": 0.1}})
    wait_for(lambda: created["id"] in receiver.by_task(), 10, what="callback")
    sent = json.loads(receiver.by_task()[created["id"]][0]["body"])
    assert sent == {"id": 900719925474099, "x": 0.1}


def test_batch_refuses_only_the_task_holding_a_nul(tickd, redis, receiver):
    url = receiver.url()
    tasks = [{"callback_url": url, "key": "good-1"},
             {"callback_url": url, "key": "bad\0", "header": {"X-A": "\0"}},
             {"callback_url": url, "key": "good-2"},
             {"callback_url": url, "req": {"deep": ["\0"]}}]
    results = tickd.batch(tasks)
    assert results[0]["status"] == "scheduled" and results[2]["status"] == "scheduled"
    assert results[1]["error"]["message"] == "tasks[1].key: contains a NUL character (\\u0000)"
    assert results[3]["error"]["message"] == \
        "tasks[3].req.deep[0]: contains a NUL character (\\u0000)"
    wait_for(lambda: len(receiver.by_task()) == 2, 10, what="the two good callbacks")
    assert sorted(c[0]["headers"]["tickd-task-id"].rsplit(".", 1)[1]
                  for c in receiver.by_task().values()) == ["good-1", "good-2"]
    # a NUL outside the tasks refuses the whole batch (the keys compared
    # once both outcomes are written and counted off their queue: a callback
    # arrives before its outcome, and the count changes go a few ms after)
    for r in (results[0], results[2]):
        tickd.final(r["id"])
    wait_for(lambda: tickd.request("GET", "/v1/queues/default")[1].get("scheduled") == 0, 5,
             what="the default queue's count back at 0")
    before = stored_keys(redis)
    code, body = tickd.request("POST", "/v1/tasks/batch", {"tasks\0": [], "tasks": [
        {"callback_url": url, "key": "good-3"}]})
    assert code == 400 and body["error"]["message"] == \
        "tasks\\u0000: contains a NUL character (\\u0000)", body
    assert stored_keys(redis) == before
    # "tasks" twice: which one was meant is unknowable
    raw = (f'{{"tasks":[{{"callback_url":"{url}","key":"good-4"}}],'
           f'"tasks":[{{"callback_url":"{url}","key":"good-5"}}]}}').encode()
    code, body = tickd.request("POST", "/v1/tasks/batch", raw=raw)
    assert code == 400 and body["error"]["message"] == "tasks: given more than once", body
    assert stored_keys(redis) == before


def test_api_token_rotation(redis, receiver, tickd_factory):
    old, new = "tok-old-1", "tok-new-2"
    task = {"callback_url": receiver.url(), "delay_ms": 60000}
    t = tickd_factory(redis, env={"TICKD_SERVER_API_TOKEN": f"{old} {new}"}).start()
    for tok in (old, new):
        code, _ = t.request("POST", "/v1/tasks", task, headers={"Authorization": f"Bearer {tok}"})
        assert code == 201, tok
    for wrong in (f"{old} {new}", old + new, "tok-old-", "tok-new-2x", ""):
        code, body = t.request("GET", "/v1/stats", headers={"Authorization": f"Bearer {wrong}"})
        assert code == 401, (wrong, body)
    t.stop()
    # the old one removed: only the new one is accepted
    t2 = tickd_factory(redis, env={"TICKD_SERVER_API_TOKEN": new}).start()
    assert t2.request("GET", "/v1/stats", headers={"Authorization": f"Bearer {old}"})[0] == 401
    assert t2.request("GET", "/v1/stats", headers={"Authorization": f"Bearer {new}"})[0] == 200


def test_api_token_of_spaces_only_is_refused_at_start(redis, tickd_factory):
    bad = tickd_factory(redis, env={"TICKD_SERVER_API_TOKEN": "   "}).start(wait=False)
    assert bad.proc.wait(10) == 2
    assert "server.api_token: spaces and no token" in bad.logtext()


def test_api_token_given_empty_is_refused_at_start(redis, tickd_factory, tmp_path):
    """An empty token given, by the environment or by a second line of the
    file, would leave the API open: tickd refuses to start (exit 2) and says
    which key and why."""
    bad = tickd_factory(redis, env={"TICKD_SERVER_API_TOKEN": ""}).start(wait=False)
    assert bad.proc.wait(10) == 2
    assert ("environment TICKD_SERVER_API_TOKEN: api_token: empty, which would leave the API "
            "open") in bad.logtext()
    conf = tmp_path / "empty-token.ini"
    conf.write_text("[server]\napi_token = tok-9f2c\napi_token =\n")
    bad = tickd_factory(redis, args=["-c", str(conf)]).start(wait=False)
    assert bad.proc.wait(10) == 2
    assert f"{conf}:3: api_token: empty, which would leave the API open" in bad.logtext()


def test_an_error_quoting_invalid_utf8_is_still_utf8_json(tickd, redis, receiver):
    """A field name with a byte that is not UTF-8 is refused, named in the
    400 with '?' in its place: the answer stays JSON (the harness's OpenAPI
    check parses it), for a task, a batch and a schedule alike; a batch is
    refused whole, its body not being UTF-8 (test_utf8.py has the rest)."""
    url = receiver.url().encode()
    code, body = tickd.request("POST", "/v1/tasks",
                               raw=b'{"callback_url":"' + url + b'","cro\x9c":1}')
    assert code == 400 and body["error"]["message"].startswith("cro?: not valid UTF-8"), body
    code, body = tickd.request("POST", "/v1/tasks/batch",
                               raw=b'{"tasks":[{"callback_url":"' + url + b'","k\xffy":1}]}')
    assert code == 400 and body["error"]["message"].startswith("tasks[0].k?y: not valid"), body
    code, body = tickd.request("POST", "/v1/schedules",
                               raw=b'{"every_ms":1000,"cro\x9c":1,"task":{"callback_url":"' + url
                               + b'"}}')
    assert code == 400 and "cro?" in body["error"]["message"], body
    # nothing stored: no task, no schedule
    assert redis.cli("KEYS", "*:task").strip() == "" and redis.cli("KEYS", "*:sdef").strip() == ""
