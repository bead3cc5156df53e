"""GET /metrics (checked by promtool and scraped by a real Prometheus) and the
logs (text and JSON, the access log, one warning per failed task), against
the real binary, a real redis-server and a real receiver."""
import json
import re
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request

import pytest

from harness import free_port, now_ms, wait_for

DENY_LOOPBACK = {"TICKD_CALLBACK_DENY": "127.0.0.0/8 ::1/128 ::ffff:127.0.0.0/104"}


def scrape(t):
    with urllib.request.urlopen(f"http://127.0.0.1:{t.port}/metrics", timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return r.read().decode()


def samples(text):
    """{'name{labels}': value} of every sample line."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def promtool_check(text):
    p = subprocess.run(["promtool", "check", "metrics"], input=text.encode(),
                       capture_output=True, timeout=30)
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()


def settled(t, n):
    wait_for(lambda: t.request("GET", "/v1/stats")[1]["settled"] >= n, 30, 0.05,
             what=f"{n} outcomes recorded")


def test_metrics_count_every_outcome_and_pass_promtool(redis, receiver, tickd_factory):
    """Each outcome label, the task counters and the histograms move by
    exactly what was done; the text passes promtool's lint."""
    t = tickd_factory(redis).start()
    promtool_check(scrape(t))  # before anything happened: every family present
    later = now_ms() + 3600_000
    tasks = [
        ({"callback_url": receiver.url(), "key": "ok1"}, t),
        ({"callback_url": receiver.url(), "key": "ok2"}, t),
        ({"callback_url": receiver.url("/status/500"), "key": "e",
          "retry": {"max_attempts": 1}}, t),
        ({"callback_url": receiver.url("/slow/1500"), "key": "to", "timeout_ms": 300,
          "retry": {"max_attempts": 1}}, t),
        ({"callback_url": f"http://127.0.0.1:{free_port()}/x", "key": "ce",
          "retry": {"max_attempts": 1}}, t),
        ({"callback_url": receiver.url("/fail/1"), "key": "r",
          "retry": {"max_attempts": 2, "backoff_ms": 100}}, t),
    ]
    for task, node in tasks:
        node.post(task)
    for i in range(3):
        t.post({"callback_url": receiver.url(), "key": f"later{i}", "execute_at": later + i})
    cancel = t.post({"callback_url": receiver.url(), "key": "c", "execute_at": later})
    assert t.delete(cancel["id"])[0] == 204
    settled(t, 7)  # 6 tasks, one of them retried once
    text = scrape(t)
    promtool_check(text)
    s = samples(text)
    assert s["tickd_tasks_created_total"] == 10
    a = {o: s[f'tickd_callback_attempts_total{{outcome="{o}"}}']
         for o in ("2xx", "http_error", "timeout", "connect_error", "denied")}
    assert a == {"2xx": 3, "http_error": 2, "timeout": 1, "connect_error": 1, "denied": 0}, a
    assert s["tickd_tasks_succeeded_total"] == 3
    assert s["tickd_tasks_failed_total"] == 3
    assert s["tickd_tasks_cancelled_total"] == 1
    assert s["tickd_task_retries_total"] == 1
    # every attempt that reached the network has a lateness and a duration
    lat_n = s["tickd_callback_lateness_seconds_count"]
    assert lat_n == 7 and s['tickd_callback_lateness_seconds_bucket{le="+Inf"}'] == lat_n
    assert s["tickd_callback_duration_seconds_count"] == lat_n
    assert 0.3 <= s["tickd_callback_duration_seconds_sum"] < 30  # the timeout took 300 ms
    # buckets are cumulative
    b = [v for k, v in s.items() if k.startswith("tickd_callback_lateness_seconds_bucket")]
    assert b == sorted(b)
    assert s['tickd_build_info{version="1.0.0",store="redis"}'] == 1
    assert s["tickd_api_connections"] >= 1
    assert s["tickd_callbacks_in_flight"] == 0
    # scheduled, cluster-wide: the 3 later ones (the cancelled one excluded)
    wait_for(lambda: samples(scrape(t)).get("tickd_tasks_scheduled") == 3, 15, 0.5,
             what="tickd_tasks_scheduled == 3")
    assert s["tickd_redis_errors_total"] == 0
    # denied: a replica refusing loopback (its own keyspace), given a name
    # that passes the API and resolves to a refused address
    d = tickd_factory(redis, env=dict(DENY_LOOPBACK, TICKD_REDIS_PREFIX="deny")).start()
    d.post({"callback_url": f"http://localhost:{receiver.port}/ok"})
    settled(d, 1)
    s = samples(scrape(d))
    assert s['tickd_callback_attempts_total{outcome="denied"}'] == 1
    assert s["tickd_tasks_failed_total"] == 1 and s["tickd_task_retries_total"] == 0


def test_scheduled_gauge_counts_every_replicas_tasks_and_is_cached(redis, receiver,
                                                                   tickd_factory):
    a = tickd_factory(redis).start()
    b = tickd_factory(redis).start()
    later = now_ms() + 7200_000
    a.batch([{"callback_url": receiver.url(), "execute_at": later + i * 61_000}
             for i in range(40)])
    b.batch([{"callback_url": receiver.url(), "execute_at": later + i} for i in range(25)])
    assert samples(scrape(a))["tickd_tasks_scheduled"] == 65
    # cached: more tasks do not show before the count is taken again
    b.batch([{"callback_url": receiver.url(), "execute_at": later} for _ in range(5)])
    s = samples(scrape(a))
    assert s["tickd_tasks_scheduled"] == 65 and s["tickd_tasks_scheduled_age_seconds"] < 5
    wait_for(lambda: samples(scrape(a))["tickd_tasks_scheduled"] == 70, 15, 0.5,
             what="the next count")


def test_redis_errors_and_reconnects_are_counted(redis, tickd_factory):
    t = tickd_factory(redis, env={"TICKD_REDIS_TIMEOUT_MS": "1000"}).start()
    redis.cli("CLIENT", "KILL", "TYPE", "normal")
    wait_for(lambda: samples(scrape(t))["tickd_redis_reconnects_total"] >= 1, 15, 0.2,
             what="a reconnect counted")
    redis.stop()
    wait_for(lambda: t.request("GET", "/healthz")[0] == 503, 5, what="unhealthy")
    wait_for(lambda: samples(scrape(t))["tickd_redis_errors_total"] >= 1, 5,
             what="an error counted")
    redis.start()


def test_metrics_is_open_and_get_only(redis, tickd_factory):
    t = tickd_factory(redis, env={"TICKD_SERVER_API_TOKEN": "s3cret"}).start()
    promtool_check(scrape(t))  # no token needed
    code, body = t.request("POST", "/metrics", raw=b"")
    assert code == 405 and "method" in body["error"]["message"]
    # /v1/stats too: 405 for another method (not 404)
    code, body = t.request("DELETE", "/v1/stats", headers={"Authorization": "Bearer s3cret"})
    assert code == 405 and body["error"]["code"] == "method_not_allowed"


@pytest.mark.skipif(not shutil.which("prometheus"), reason="prometheus not installed")
def test_a_real_prometheus_scrapes_tickd(tmp_path, redis, receiver, tickd_factory):
    t = tickd_factory(redis).start()
    ids = [t.post({"callback_url": receiver.url(), "key": f"k{i}"})["id"] for i in range(7)]
    settled(t, len(ids))
    port = free_port()
    conf = tmp_path / "prometheus.yml"
    conf.write_text(f"""global:
  scrape_interval: 1s
scrape_configs:
  - job_name: tickd
    static_configs:
      - targets: ['127.0.0.1:{t.port}']
""")
    log = open(tmp_path / "prometheus.log", "wb")
    p = subprocess.Popen(["prometheus", f"--config.file={conf}",
                          f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                          f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=log)
    try:
        def query(q):
            url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    res = json.loads(r.read())["data"]["result"]
            except OSError:
                return None
            return [float(x["value"][1]) for x in res]

        wait_for(lambda: query('tickd_callback_attempts_total{job="tickd",outcome="2xx"}') == [7],
                 60, 0.5, what="Prometheus answering 7 successful attempts")
        assert query("sum(tickd_tasks_succeeded_total)") == [7]
        assert query('up{job="tickd"}') == [1]
    finally:
        p.terminate()
        p.wait(30)
        log.close()


def test_json_logs_access_log_and_one_warning_per_failed_task(redis, receiver, tickd_factory):
    t = tickd_factory(redis, env={"TICKD_SERVER_LOG_FORMAT": "json",
                                  "TICKD_SERVER_ACCESS_LOG": "true"}).start()
    failing = t.post({"callback_url": receiver.url("/status/503"),
                      "retry": {"max_attempts": 3, "backoff_ms": 50}})
    ok = t.post({"callback_url": receiver.url()})
    t.request("GET", "/v1/tasks?status=bogus")
    # an absolute-form target without a path is logged as the handler read it
    with socket.create_connection(("127.0.0.1", t.port), timeout=5) as c:
        c.sendall(b"GET http://127.0.0.1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        while c.recv(4096):
            pass
    settled(t, 4)
    t.stop()
    lines = [json.loads(line) for line in t.logtext().splitlines() if line.strip()]
    for e in lines:  # every line is a JSON object with the fixed fields
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", e["ts"]), e
        assert e["level"] in ("debug", "info", "warn", "error"), e
        assert e["src"] and "msg" in e or e["src"] == "access", e
    warns = [e for e in lines if e["level"] == "warn" and e.get("task_id") == failing["id"]]
    assert len(warns) == 1, warns  # three failed attempts, one warning
    assert "failed after 3 attempts" in warns[0]["msg"] and "503" in warns[0]["msg"]
    assert not [e for e in lines if e.get("task_id") == ok["id"] and e["level"] != "debug"]
    access = [e for e in lines if e["src"] == "access"]
    posts = [e for e in access if e["method"] == "POST" and e["target"] == "/v1/tasks"]
    assert len(posts) == 2 and all(e["status"] == 201 or e["status"] == 200 for e in posts), posts
    bad = [e for e in access if e["target"] == "/v1/tasks?status=bogus"]
    assert len(bad) == 1 and bad[0]["status"] == 400 and bad[0]["bytes"] > 0
    assert re.fullmatch(r"127\.0\.0\.1:\d+", bad[0]["remote"]) and bad[0]["ms"] >= 0
    absolute = [e for e in access if e["method"] == "GET" and e["target"] in ("/", "GET")]
    assert [e["target"] for e in absolute] == ["/"], absolute


def test_text_log_names_the_task_and_access_log_is_off_by_default(redis, receiver,
                                                                  tickd_factory):
    t = tickd_factory(redis).start()
    failing = t.post({"callback_url": receiver.url("/status/500"), "retry": {"max_attempts": 1}})
    settled(t, 1)
    t.stop()
    text = t.logtext()
    warn = [ln for ln in text.splitlines() if f" W " in ln and failing["id"] in ln]
    assert len(warn) == 1 and f"task {failing['id']} failed after 1 attempt: HTTP 500" in warn[0]
    assert " A " not in text  # no access lines


def test_a_bad_log_format_is_refused(redis, tickd_factory):
    t = tickd_factory(redis, env={"TICKD_SERVER_LOG_FORMAT": "xml"})
    t.start(wait=False)
    assert t.proc.wait(10) == 2
    assert "log_format: must be text or json" in t.logtext()
