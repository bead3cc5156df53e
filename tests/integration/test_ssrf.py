"""The SSRF guard: callback.deny and callback.allow, checked on the address
actually connected to by both client paths (the built-in client for http://,
libcurl for https://), a literal address refused at POST, and tickd's own API
never a callback's destination."""
import socket
import subprocess

import pytest

from harness import TICKD

DENY_LOOPBACK = {"TICKD_CALLBACK_DENY": "127.0.0.0/8 ::1/128 ::ffff:127.0.0.0/104"}


def refused_at_post(tickd, url):
    code, body = tickd.post({"callback_url": url}, expect=None)
    assert code == 400, (url, code, body)
    msg = body["error"]["message"]
    assert msg.startswith("callback_url: destination denied by policy"), msg
    return msg


@pytest.mark.parametrize("url,why", [
    ("http://169.254.169.254/latest/meta-data/", "callback.deny 169.254.0.0/16"),
    ("https://169.254.169.254/", "callback.deny 169.254.0.0/16"),
    ("http://[::ffff:169.254.169.254]/", "callback.deny"),
    ("http://[fe80::1]:8080/", "callback.deny fe80::/10"),
    ("http://0.0.0.0:9/", "callback.deny 0.0.0.0/8"),
    # numeric forms are read as libcurl reads them: 169.254.0.1
    ("http://0xa9fe0001/", "callback.deny 169.254.0.0/16"),
    ("http://0251.0376.0.1/", "callback.deny 169.254.0.0/16"),
])
def test_a_literal_denied_address_is_refused_at_post(tickd, url, why):
    assert why in refused_at_post(tickd, url)


def test_a_batch_refuses_only_the_denied_task(tickd, receiver):
    r = tickd.batch([{"callback_url": "http://169.254.169.254/"},
                     {"callback_url": receiver.url()}])
    assert r[0]["error"]["code"] == "invalid_argument"
    assert "tasks[0].callback_url: destination denied by policy" in r[0]["error"]["message"]
    assert "id" in r[1]


@pytest.mark.parametrize("scheme", ["http", "https"])  # built-in client, libcurl
def test_a_name_resolving_to_a_denied_address_fails_without_retry(
        tickd_factory, redis, receiver, scheme):
    t = tickd_factory(redis, env=DENY_LOOPBACK).start()
    # 127.0.0.1 literal is refused at POST; the name passes, its address does not
    refused_at_post(t, f"{scheme}://127.0.0.1:{receiver.port}/ok")
    a = t.post({"callback_url": f"{scheme}://localhost:{receiver.port}/ok",
                "retry": {"max_attempts": 5, "backoff_ms": 50}})
    g = t.final(a["id"])
    assert g["status"] == "failed" and g["attempts"] == 1, g
    assert g["last_error"].startswith("destination denied by policy: "), g
    assert "callback.deny 127.0.0.0/8" in g["last_error"] or "::1/128" in g["last_error"], g
    assert receiver.count() == 0


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_the_memory_store_ends_a_denied_task_too(tickd_factory, receiver, scheme):
    t = tickd_factory(store="memory", env=DENY_LOOPBACK).start()
    a = t.post({"callback_url": f"{scheme}://localhost:{receiver.port}/ok",
                "retry": {"max_attempts": 5, "backoff_ms": 50}})
    g = t.final(a["id"])
    assert g["status"] == "failed" and g["attempts"] == 1, g
    assert g["last_error"].startswith("destination denied by policy"), g


def test_the_default_policy_lets_loopback_through(tickd, receiver):
    a = tickd.post({"callback_url": f"http://localhost:{receiver.port}/ok"})
    assert tickd.final(a["id"])["status"] == "succeeded"


def test_an_allow_list_admits_only_its_ranges(tickd_factory, redis, receiver):
    t = tickd_factory(redis, env={"TICKD_CALLBACK_ALLOW": "10.0.0.0/8"}).start()
    msg = refused_at_post(t, receiver.url())
    assert "127.0.0.1 is in no range of callback.allow" in msg
    for scheme in ("http", "https"):
        a = t.post({"callback_url": f"{scheme}://localhost:{receiver.port}/ok",
                    "retry": {"max_attempts": 3, "backoff_ms": 50}})
        g = t.final(a["id"])
        assert g["status"] == "failed" and g["attempts"] == 1, g
        assert "no range of callback.allow" in g["last_error"], g
    assert receiver.count() == 0
    t.stop()

    t = tickd_factory(redis, env={"TICKD_CALLBACK_ALLOW": "127.0.0.0/8 ::1/128"}).start()
    a = t.post({"callback_url": receiver.url()})
    b = t.post({"callback_url": f"http://localhost:{receiver.port}/ok"})
    assert t.final(a["id"])["status"] == "succeeded"
    assert t.final(b["id"])["status"] == "succeeded"
    # deny still applies inside the allow list
    refused_at_post(t, "http://0.0.0.0:9/")


def test_a_callback_to_tickds_own_api_is_refused_at_post(tickd):
    p = tickd.port
    for url in (f"http://127.0.0.1:{p}/v1/tasks", f"http://localhost:{p}/v1/tasks",
                f"http://LOCALHOST.:{p}/healthz", f"http://127.1:{p}/v1/tasks",
                f"http://[::ffff:127.0.0.1]:{p}/", f"https://127.0.0.1:{p}/"):
        assert "is tickd's own API" in refused_at_post(tickd, url), url
    # another port of the same host is someone else's
    code, _ = tickd.post({"callback_url": f"http://127.0.0.1:{p + 1 if p < 65535 else 1}/"},
                         expect=None)
    assert code == 201


def test_a_wildcard_listener_counts_every_local_address_as_its_own(tickd_factory, redis):
    t = tickd_factory(redis)
    t.host = "0.0.0.0"
    t.start()
    for url in (f"http://127.0.0.2:{t.port}/", f"http://[::1]:{t.port}/",
                f"http://localhost:{t.port}/"):
        assert "tickd's own API" in refused_at_post(t, url), url


def local_name():
    """A name other than localhost that resolves to a loopback address."""
    name = socket.gethostname()
    try:
        addr = socket.gethostbyname(name)
    except OSError:
        return None
    return name if addr.startswith("127.") and "localhost" not in name.lower() else None


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_name_resolving_to_tickds_own_api_fails_at_connect(tickd, scheme):
    name = local_name()
    if not name:
        pytest.skip("the host name does not resolve to a loopback address here")
    a = tickd.post({"callback_url": f"{scheme}://{name}:{tickd.port}/v1/tasks",
                    "retry": {"max_attempts": 4, "backoff_ms": 50}})
    g = tickd.final(a["id"])
    assert g["status"] == "failed" and g["attempts"] == 1, g
    assert "destination denied by policy" in g["last_error"], g
    assert "is tickd's own API" in g["last_error"], g


@pytest.mark.parametrize("key,value,shown", [
    ("TICKD_CALLBACK_DENY", "10.0.0.0/8 10.0.0.0/33", "callback.deny: \"10.0.0.0/33\""),
    ("TICKD_CALLBACK_DENY", "10.0.0.1/8", "callback.deny: \"10.0.0.1/8\""),
    ("TICKD_CALLBACK_DENY", "example.com", "callback.deny: \"example.com\""),
    ("TICKD_CALLBACK_ALLOW", "fe80::/129", "callback.allow: \"fe80::/129\""),
    ("TICKD_CALLBACK_ALLOW", "1.2.3.4/", "callback.allow: \"1.2.3.4/\""),
])
def test_a_bad_cidr_stops_tickd_at_start(key, value, shown):
    r = subprocess.run([TICKD, "--store", "memory", "--listen", "127.0.0.1:0"],
                       env={key: value}, capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert shown in r.stderr, r.stderr
