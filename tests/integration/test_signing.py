"""Signed callbacks (Standard Webhooks): every callback is verified with the
official `standardwebhooks` npm package (tests/node, installed by `make
node-deps`), on both client paths: the built-in client (http://) and
libcurl (here through a proxy, which sends everything through libcurl)."""
import base64
import json
import os
import re
import subprocess
import time

import pytest

from harness import ROOT, TICKD, wait_for

NODE_DIR = os.path.join(ROOT, "tests", "node")


def gen_secret():
    r = subprocess.run([TICKD, "--gen-secret"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def verify(secrets, calls):
    """One list per call: for each secret, (ok, error) from the npm library."""
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "standardwebhooks")):
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True,
                       capture_output=True, timeout=300)
    req = {"secrets": secrets,
           "calls": [{"headers": {k: v for k, v in c["headers"].items()
                                  if k.startswith("webhook-")},
                      "body_b64": base64.b64encode(c["body"]).decode()} for c in calls]}
    r = subprocess.run(["node", "verify.js"], cwd=NODE_DIR, input=json.dumps(req),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [[(e["ok"], e.get("error")) for e in per] for per in json.loads(r.stdout)]


def all_ok(secrets, calls):
    res = verify(secrets, calls)
    assert all(ok for per in res for ok, _ in per), res


def calls_of(receiver, tid, n=1, timeout=15):
    wait_for(lambda: len(receiver.by_task().get(tid, [])) >= n, timeout, what=f"{n} calls of {tid}")
    return receiver.by_task()[tid]


@pytest.fixture(params=["h1", "libcurl"])
def path(request, receiver):
    """How a callback reaches the receiver: (extra env, callback URL for a path)."""
    if request.param == "h1":
        return {}, receiver.url
    env = {"http_proxy": f"http://127.0.0.1:{receiver.port}"}
    return env, lambda p="/ok": f"http://127.0.0.1:9{p}"


@pytest.fixture(scope="module")
def secret():
    return gen_secret()


def start(tickd_factory, redis, secrets, env=None):
    e = {"TICKD_CALLBACK_SIGNING_SECRETS": " ".join(secrets)}
    e.update(env or {})
    return tickd_factory(redis, env=e).start()


def test_gen_secret_prints_a_fresh_32_byte_secret():
    a, b = gen_secret(), gen_secret()
    assert a != b
    for s in (a, b):
        assert re.fullmatch(r"whsec_[A-Za-z0-9+/]{43}=", s), s
        assert len(base64.b64decode(s[6:], validate=True)) == 32


def test_a_json_body_is_signed(tickd_factory, redis, receiver, path, secret):
    env, url = path
    t = start(tickd_factory, redis, [secret], env)
    before = int(time.time())
    a = t.post({"callback_url": url("/ok?q=1"), "req": {"n": 1, "s": "caf\u00e9 \u2603"},
                "header": {"X-A": "1"}})
    c = calls_of(receiver, a["id"])[0]
    h = c["headers"]
    assert h["webhook-id"] == a["id"]
    assert before - 1 <= int(h["webhook-timestamp"]) <= int(time.time()) + 1
    assert re.fullmatch(r"v1,[A-Za-z0-9+/]{43}=", h["webhook-signature"]), h
    assert json.loads(c["body"]) == {"n": 1, "s": "caf\u00e9 \u2603"}
    all_ok([secret], [c])


def test_a_string_body_is_signed_as_sent(tickd_factory, redis, receiver, path, secret):
    env, url = path
    t = start(tickd_factory, redis, [secret], env)
    a = t.post({"callback_url": url(), "req": "not JSON {, sent as is \u00e9",
                "header": {"Content-Type": "text/plain"}})
    c = calls_of(receiver, a["id"])[0]
    assert c["body"] == "not JSON {, sent as is \u00e9".encode()
    all_ok([secret], [c])


def test_a_get_without_body_is_signed(tickd_factory, redis, receiver, path, secret):
    env, url = path
    t = start(tickd_factory, redis, [secret], env)
    a = t.post({"callback_url": url(), "method": "GET"})
    c = calls_of(receiver, a["id"])[0]
    assert c["method"] == "GET" and c["body"] == b""
    all_ok([secret], [c])


def test_a_retried_attempt_keeps_its_id_with_a_new_timestamp(tickd_factory, redis, receiver,
                                                             path, secret):
    env, url = path
    t = start(tickd_factory, redis, [secret], env)
    # backoff 1500 ms less at most 20 % jitter: the attempts are > 1 s apart
    a = t.post({"callback_url": url("/fail/1"), "req": {"k": "v"},
                "retry": {"max_attempts": 2, "backoff_ms": 1500}})
    c1, c2 = calls_of(receiver, a["id"], 2)[:2]
    assert c1["headers"]["webhook-id"] == c2["headers"]["webhook-id"] == a["id"]
    assert int(c2["headers"]["webhook-timestamp"]) > int(c1["headers"]["webhook-timestamp"])
    assert c1["headers"]["webhook-signature"] != c2["headers"]["webhook-signature"]
    assert c1["headers"]["tickd-attempt"] == "1" and c2["headers"]["tickd-attempt"] == "2"
    all_ok([secret], [c1, c2])


def test_an_attempt_waiting_for_a_connection_is_signed_when_sent(tickd_factory, redis, receiver,
                                                                  path, secret):
    """One connection to the host (one worker) and two tasks due at one instant on a
    receiver that answers after 2.5 s: the second waits for the first's
    answer, and its timestamp is the time it was sent, not the time it
    began to wait (the request is built when a connection takes it)."""
    env, url = path
    env = dict(env, TICKD_SERVER_WORKERS="1", TICKD_SERVER_HOST_CONNECTIONS="1")
    t = start(tickd_factory, redis, [secret], env)
    due = int(time.time() * 1000) + 1500
    ids = [t.post({"callback_url": url("/slow/2500"), "req": {"n": i}, "execute_at": due})["id"]
           for i in range(2)]
    first, second = sorted((calls_of(receiver, i, 1, timeout=20)[0] for i in ids),
                           key=lambda c: c["t"])
    assert second["t"] - first["t"] >= 2400, "the second did not wait for the connection"
    ts1, ts2 = (int(c["headers"]["webhook-timestamp"]) for c in (first, second))
    assert ts2 - ts1 >= 2, (ts1, ts2)
    assert abs(ts2 - second["t"] / 1000) <= 1, (ts2, second["t"])
    all_ok([secret], [first, second])


def test_rotation(tickd_factory, redis, receiver):
    old, new = gen_secret(), gen_secret()
    stages = [[old], [old, new], [new]]
    got = []
    for secrets in stages:
        t = start(tickd_factory, redis, secrets)
        a = t.post({"callback_url": receiver.url(), "req": {"stage": len(got)}})
        c = calls_of(receiver, a["id"])[0]
        assert len(c["headers"]["webhook-signature"].split(" ")) == len(secrets)
        got.append(c)
        assert t.stop() == 0
    res = verify([old, new], got)
    assert [ok for ok, _ in res[0]] == [True, False]   # old only
    assert [ok for ok, _ in res[1]] == [True, True]    # both, while both are configured
    assert [ok for ok, _ in res[2]] == [False, True]   # the old one removed
    assert "No matching signature" in res[2][0][1]


def test_a_tampered_callback_fails(tickd_factory, redis, receiver, secret):
    t = start(tickd_factory, redis, [secret])
    a = t.post({"callback_url": receiver.url(), "req": {"amount": 10}})
    c = calls_of(receiver, a["id"])[0]
    all_ok([secret], [c])
    body = {**c, "body": c["body"].replace(b"10", b"99")}
    other_id = {**c, "headers": {**c["headers"], "webhook-id": c["headers"]["webhook-id"] + "x"}}
    later = {**c, "headers": {**c["headers"],
                              "webhook-timestamp": str(int(c["headers"]["webhook-timestamp"]) + 1)}}
    res = verify([secret, gen_secret()], [body, other_id, later])
    for per in res:
        assert [ok for ok, _ in per] == [False, False], res
        assert "No matching signature" in per[0][1]


def test_unsigned_without_secrets(tickd, receiver):
    a = tickd.post({"callback_url": receiver.url(), "req": {}})
    c = calls_of(receiver, a["id"])[0]
    assert not any(k.startswith("webhook-") for k in c["headers"]), c["headers"]


def test_webhook_headers_are_reserved(tickd):
    for name in ("webhook-id", "Webhook-Signature", "WEBHOOK-TIMESTAMP"):
        code, body = tickd.post({"callback_url": "http://127.0.0.1:9/", "header": {name: "x"}},
                                expect=None)
        assert code == 400 and body["error"]["message"].startswith(f"header.{name}:"), body


def test_secrets_never_show(tickd_factory, redis, receiver, secret):
    t = start(tickd_factory, redis, [secret], {"TICKD_SERVER_LOG_LEVEL": "debug"})
    a = t.post({"callback_url": receiver.url("/status/500"), "req": {}})
    wait_for(lambda: t.get(a["id"])[1]["attempts"] >= 1, 10, what="an attempt")
    shown = json.dumps([t.get(a["id"]), t.request("GET", "/v1/stats")])
    t.stop()
    for text in (shown, t.logtext()):
        assert secret not in text and secret[6:20] not in text


@pytest.mark.parametrize("value,why", [
    ("c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0", "secret 1 does not start with whsec_"),
    ("whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2Vj!!!!", "secret 1 is not valid base64"),
    ("whsec_c2hvcnQ=", "secret 1 decodes to 5 bytes"),
    ("whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY= whsec_", "secret 2 decodes to 0 bytes"),
])
def test_a_bad_secret_stops_tickd_without_showing_it(value, why):
    for how in ("env", "file"):
        env = {"TICKD_CALLBACK_SIGNING_SECRETS": value} if how == "env" else {}
        args = [TICKD, "--store", "memory", "--listen", "127.0.0.1:0"]
        if how == "file":
            import tempfile
            f = tempfile.NamedTemporaryFile("w", suffix=".ini", delete=False)
            f.write(f"[callback]\nsigning_secrets = {value}\n")
            f.close()
            args += ["--config", f.name]
        r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=10)
        if how == "file":
            os.unlink(f.name)
        assert r.returncode == 2, (how, r.returncode, r.stderr)
        assert "callback.signing_secrets: " + why in r.stderr, r.stderr
        for part in value.split():
            if len(part) > 6:
                assert part[6:] not in r.stderr, r.stderr
