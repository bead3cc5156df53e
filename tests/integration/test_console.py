"""The web console at /ui/ in a real browser: Debian's chromium, driven by
playwright-core (tests/node/console.mjs), against the real tickd, a real
redis-server and real receivers. Each test seeds what it needs through the
API, runs one scenario of the driver, and checks what it reports against the
API and the receivers. Screenshots are kept in build/console-shots/."""
import gzip
import http.server
import json
import os
import subprocess
import threading
import urllib.request

import pytest

from harness import ROOT, Receiver, Tickd, wait_for

DRIVER = os.path.join(ROOT, "tests", "node", "console.mjs")
SHOTS = os.path.join(ROOT, "build", "console-shots")
ADMIN = "console-admin-token-0123456789"
READER = "console-read-token-0123456789"
TOKENS = {"TICKD_SERVER_API_TOKEN": ADMIN, "TICKD_SERVER_READ_TOKENS": READER}
AUTH = {"Authorization": "Bearer " + ADMIN}

def drive(scenario, tickd, **arg):
    arg.setdefault("token", ADMIN)
    arg["base"] = f"http://127.0.0.1:{tickd.port}"
    arg["shots"] = SHOTS
    p = subprocess.run(["node", DRIVER, scenario, json.dumps(arg)], cwd=ROOT, capture_output=True,
                       text=True, timeout=90)
    assert p.returncode == 0, f"console {scenario}:\n{p.stderr[-4000:]}\n{p.stdout[-2000:]}"
    return json.loads(p.stdout.strip().splitlines()[-1])


def api(tickd, method, path, body=None, token=ADMIN):
    code, out = tickd.request(method, path, body, headers={"Authorization": "Bearer " + token})
    return code, out


@pytest.fixture
def console(redis, tickd_factory):
    return tickd_factory(redis, env=TOKENS).start()


def failed_task(tickd, receiver, key, path="/fail/1", **extra):
    task = {"key": key, "callback_url": receiver.url(path), "retry": {"max_attempts": 1}, **extra}
    code, body = api(tickd, "POST", "/v1/tasks", task)
    assert code == 201, body
    wait_for(lambda: api(tickd, "GET", "/v1/tasks/" + body["id"])[1]["status"] == "failed",
             what=f"{key} failed")
    return body["id"]


def final(tickd, tid, want="succeeded"):
    wait_for(lambda: api(tickd, "GET", f"/v1/tasks/{tid}")[1]["status"] == want, 15,
             what=f"task {tid} {want}")


def raw_get(tickd, path, headers=None, method="GET"):
    req = urllib.request.Request(f"http://127.0.0.1:{tickd.port}{path}", headers=headers or {},
                                 method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_served_from_the_binary_with_its_headers(console):
    code, h, index = raw_get(console, "/ui/tasks/any/deep/view?status=failed")
    assert code == 200 and h["Content-Type"].startswith("text/html")
    assert h["Cache-Control"] == "no-cache"
    assert "default-src 'self'" in h["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in h["Content-Security-Policy"]
    assert h["X-Content-Type-Options"] == "nosniff" and h["Referrer-Policy"] == "no-referrer"
    assert b"<script>" not in index  # no inline script: the CSP would refuse it
    assets = [a.split('"')[0] for a in index.decode().split("/ui/assets/")[1:]]
    assert assets, index
    total = 0
    for a in assets:
        code, h, body = raw_get(console, "/ui/assets/" + a, {"Accept-Encoding": "gzip"})
        assert code == 200 and h["Content-Encoding"] == "gzip", a
        assert h["Cache-Control"] == "public, max-age=31536000, immutable"
        assert "default-src 'self'" in h["Content-Security-Policy"]
        total += len(body)
        for refused in ({}, {"Accept-Encoding": "gzip;q=0, identity"}, {"Accept-Encoding": "br"}):
            code, h, plain = raw_get(console, "/ui/assets/" + a, refused)
            assert code == 200 and "Content-Encoding" not in h and len(plain) >= len(body), refused
    # what a first visit loads (index.html announces every module): well under 150 KB
    assert total + len(gzip.compress(index)) < 150 * 1024, total
    assert raw_get(console, "/ui/assets/app.0000000000.js")[0] == 404
    assert raw_get(console, "/ui")[0] in (200, 308)  # followed to /ui/
    for method in ("POST", "DELETE", "PUT"):
        code, h, _ = raw_get(console, "/ui/", method=method)
        assert code == 405 and h["Allow"] == "GET, HEAD", (method, code)
    code, h, body = raw_get(console, "/ui/queues", method="HEAD")
    assert code == 200 and body == b"" and "default-src 'self'" in h["Content-Security-Policy"]
    # the files are open; the data is not
    assert raw_get(console, "/v1/whoami")[0] == 401
    assert api(console, "GET", "/v1/whoami")[1] == {"scope": "admin"}
    assert api(console, "GET", "/v1/whoami", token=READER)[1] == {"scope": "read"}


def test_secrets_never_reach_a_browser(console, receiver):
    tid = failed_task(console, receiver, "with-secret",
                      header={"Authorization": "Bearer s3cret-value", "X-Api-Key": "k3y-value",
                              "X-Plain": "shown"})
    browser = dict(AUTH, **{"Sec-Fetch-Mode": "cors", "Sec-Fetch-Site": "same-origin"})
    for path in (f"/v1/tasks/{tid}", "/v1/tasks?status=failed"):
        code, _, body = raw_get(console, path, browser)
        assert code == 200 and b"s3cret-value" not in body and b"k3y-value" not in body, body
        assert b"shown" in body
    # other clients (tickctl, curl) get the task as stored
    assert api(console, "GET", f"/v1/tasks/{tid}")[1]["header"]["Authorization"] == "Bearer s3cret-value"


@pytest.mark.long
def test_every_view_loads_accessible_and_live(console, receiver):
    tid = failed_task(console, receiver, "view-task", req={"invoice": 42, "lines": [1, 2]},
                      header={"Content-Type": "application/json", "Authorization": "Bearer hidden"})
    api(console, "PUT", "/v1/queues/mail", {"rate": 5, "max_concurrency": 2})
    code, sc = api(console, "POST", "/v1/schedules", {"key": "daily-report", "cron": "0 9 * * MON-FRI",
                                                      "tz": "Europe/Berlin",
                                                      "task": {"callback_url": receiver.url()}})
    assert code == 201, sc
    # some callbacks, so that the overview's charts and rates have something
    done = [api(console, "POST", "/v1/tasks", {"callback_url": receiver.url(), "queue": "mail"})[1]["id"]
            for _ in range(5)]
    for d in done:
        final(console, d)
    out = drive("views", console, task_id=tid, schedule_id=sc["id"])
    assert set(out["axe"]) == {"overview", "tasks", "task", "dead-letters", "schedules", "schedule",
                               "schedule-new", "queues", "cluster"}


@pytest.mark.long
def test_failed_task_found_and_retried(console, receiver):
    tid = failed_task(console, receiver, "invoice-7-reminder")
    failed_task(console, receiver, "other-1")
    bulk = [failed_task(console, receiver, f"bulk-{i}") for i in range(3)]
    out = drive("retry", console, task_id=tid, key_prefix="invoice-", bulk_prefix="bulk-")
    final(console, tid)
    assert out["bulk"] == 3
    assert int(out["retention"]) == 7 * 24 * 3600 * 1000
    for b in bulk:
        final(console, b)


def test_schedule_form_preview_equals_the_api(console, receiver):
    out = drive("schedule", console, key="weekday-9", cron="0 9 * * MON-FRI", tz="America/New_York",
                url=receiver.url())
    code, sc = api(console, "GET", "/v1/schedules/sch.weekday-9")
    assert code == 200
    assert out["preview"] == [r["at"] for r in sc["next_runs"]]
    assert out["preview_times"] == [r["time"] for r in sc["next_runs"]]
    assert out["shown"] == out["preview"]


def test_queue_paused_and_resumed_from_the_console(console, receiver):
    assert api(console, "PUT", "/v1/queues/mail", {})[0] == 200
    out = drive("queue", console, queue="mail", n=3, url=receiver.url())
    assert out["waited"] >= 3
    wait_for(lambda: receiver.count() >= 3, timeout=15, what="the held tasks delivered")
    calls = receiver.by_task()
    for tid in out["ids"]:
        assert tid in calls, tid
        # held while paused: none went before the console resumed the queue
        assert calls[tid][0]["t"] >= out["resumed_at"] - 50, (tid, calls[tid][0]["t"], out)


@pytest.mark.long
def test_read_only_token_sees_no_action(console, receiver):
    tid = failed_task(console, receiver, "ro-task")
    api(console, "POST", "/v1/schedules", {"key": "ro", "every_ms": 60000, "task": {"callback_url": receiver.url()}})
    out = drive("readonly", console, token=READER, task_id=tid, schedule_id="sch.ro")
    status, text = out["status"]
    assert status == 403 and "read" in text, out
    assert api(console, "GET", f"/v1/tasks/{tid}")[1]["status"] == "failed"


class Hostile:
    """A receiver whose failing answers carry HTML and script in the status
    line's reason and the body, and that records any call to /pwned (which
    a payload that ran would make: the payload names it)."""

    def __init__(self):
        self.pwned = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def handle_any(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                if self.path.startswith("/pwned"):
                    outer.pwned.append(self.path)
                body = (outer.payload + "</script><script>window.__pwned=2</script>").encode()
                self.send_response(500, "<script>window.__pwned=3</script>")
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = handle_any

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        self.payload = f"<img src=x onerror=\"window.__pwned=1;fetch('http://127.0.0.1:{self.port}/pwned')\">"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_hostile_task_fields_show_as_text(console):
    h = Hostile()
    try:
        task = {"key": "javascript:void-0", "callback_url": f"http://127.0.0.1:{h.port}/cb",
                "retry": {"max_attempts": 1},
                "header": {"X-Note": h.payload, "Authorization": "Bearer top-s3cret-xyz"},
                "req": {"html": "</script><script>window.__pwned=4</script>",
                        "link": "javascript:window.__pwned=5", "img": h.payload}}
        code, body = api(console, "POST", "/v1/tasks", task)
        assert code == 201, body
        tid = body["id"]
        wait_for(lambda: api(console, "GET", f"/v1/tasks/{tid}")[1]["status"] == "failed")
        stored = api(console, "GET", f"/v1/tasks/{tid}")[1]
        assert "<img" in stored["attempt_history"][0]["body"]
        out = drive("hostile", console, task_id=tid, key_prefix="javascript:", secret="top-s3cret-xyz",
                    expect_text=["javascript:void-0", h.payload, "window.__pwned=4",
                                 "javascript:window.__pwned=5", "</script><script>window.__pwned=2</script>"])
        assert out["pwned"] is None and out["imgs"] == 0
        assert h.pwned == []
    finally:
        h.close()


def test_tickctl_ui_prints_and_opens_only_at_a_terminal(tmp_path):
    """tickctl ui prints the console's URL; xdg-open runs only when stdout is
    a terminal of a graphical session (a stand-in records what it was given)."""
    import pty  # noqa: PLC0415 (only this test needs a terminal)
    opened = tmp_path / "opened"
    fake = tmp_path / "xdg-open"
    fake.write_text(f'#!/bin/sh\necho "$@" > {opened}\n')
    fake.chmod(0o755)
    tickctl = os.path.join(ROOT, "build", "tickctl")
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}", DISPLAY=":0",
               TICKD_URL="http://127.0.0.1:8088/")
    p = subprocess.run([tickctl, "ui"], env=env, capture_output=True, text=True, timeout=10)
    assert p.returncode == 0 and p.stdout == "http://127.0.0.1:8088/ui/\n"
    assert not opened.exists()  # stdout is a pipe: a script, not a person
    main, sub = pty.openpty()
    p = subprocess.run([tickctl, "--url", "http://127.0.0.1:8089", "ui"], env=env, stdout=sub,
                       stderr=subprocess.PIPE, timeout=10)
    os.close(sub)
    assert p.returncode == 0
    assert os.read(main, 200).decode().strip() == "http://127.0.0.1:8089/ui/"
    os.close(main)
    assert opened.read_text().strip() == "http://127.0.0.1:8089/ui/"
    opened.unlink()
    main, sub = pty.openpty()
    env.pop("DISPLAY")
    env.pop("WAYLAND_DISPLAY", None)
    subprocess.run([tickctl, "ui"], env=env, stdout=sub, timeout=10, check=True)
    os.close(sub)
    os.close(main)
    assert not opened.exists()  # no graphical session
