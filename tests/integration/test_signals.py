"""Signals that do not stop tickd: SIGHUP reads the configuration again
(API tokens, log_level, access_log take effect; the rest waits for a
restart), SIGUSR1 logs a status line, SIGUSR2 is ignored with a line. None of
them ends tickd, which goes on serving."""
import signal

from harness import Redis, wait_for


def logged(t, text, start=0):
    """Wait until tickd's log has text after offset start; its offset then."""
    def seen():
        assert t.proc.poll() is None, f"tickd exited {t.proc.returncode}:\n{t.logtext()}"
        found = t.logtext().find(text, start)
        return found + 1 if found >= 0 else None
    return wait_for(seen, 5, what=f"tickd logging {text!r}")


def test_hup_usr1_usr2_leave_tickd_serving(tickd, receiver):
    at = 0
    for sig, line in ((signal.SIGUSR1, " status: up "), (signal.SIGUSR2, " SIGUSR2: ignored"),
                      (signal.SIGHUP, " SIGHUP: configuration reloaded: 0 API tokens")):
        tickd.proc.send_signal(sig)
        at = logged(tickd, line, at)
        assert tickd.proc.poll() is None, tickd.logtext()
    assert "callbacks in flight" in tickd.logtext()
    task = tickd.post({"callback_url": receiver.url()})
    assert tickd.final(task["id"])["status"] == "succeeded"
    assert tickd.proc.poll() is None


def test_hup_reloads_the_api_tokens_and_the_log_level(redis, tickd_factory, tmp_path,
                                                       receiver):
    conf = tmp_path / "tickd.ini"
    conf.write_text("[server]\napi_token = tok-old\n")
    t = tickd_factory(redis, args=["-c", str(conf)]).start()

    def code(token):
        return t.request("GET", "/v1/stats", headers={"Authorization": f"Bearer {token}"})[0]

    def attempt_logged(token):
        """Whether a task's attempt (a debug line) is logged."""
        auth = {"Authorization": f"Bearer {token}"}
        tid = t.request("POST", "/v1/tasks", {"callback_url": receiver.url()}, auth)[1]["id"]
        wait_for(lambda: t.request("GET", f"/v1/tasks/{tid}", headers=auth)[1]["status"]
                 == "succeeded", 5, what="the task done")
        return f"task {tid} attempt 1: ok" in t.logtext()
    assert (code("tok-old"), code("tok-new")) == (200, 401)
    assert not attempt_logged("tok-old")
    conf.write_text("[server]\napi_token = tok-new\nlog_level = debug\n"
                    "[scheduler]\nbatch = 7\n")
    t.proc.send_signal(signal.SIGHUP)
    at = logged(t, "SIGHUP: configuration reloaded: 1 API token, log_level debug, access_log off; "
                   "changed, taking effect at the next start: scheduler.batch")
    assert (code("tok-old"), code("tok-new")) == (401, 200)
    assert attempt_logged("tok-new")
    # a file that does not load, or that would open the guarded API, changes nothing
    for text, why in (("[server]\napi_token =\n", "api_token: empty"),
                      ("[server]\nlog_level = debug\n", "server.api_token is no longer set")):
        conf.write_text(text)
        t.proc.send_signal(signal.SIGHUP)
        at = logged(t, "SIGHUP: configuration not reloaded, nothing changed: ", at)
        assert why in t.logtext()[at:], t.logtext()[at:]
        assert (code("tok-old"), code("tok-new")) == (401, 200)
    assert t.proc.poll() is None


def test_hup_adds_and_removes_read_tokens(redis, tickd_factory, tmp_path):
    conf = tmp_path / "tickd.ini"
    conf.write_text("[server]\napi_token = adm-1\n")
    t = tickd_factory(redis, args=["-c", str(conf)]).start()

    def codes(token):
        """(GET, POST) with token: what it may do."""
        auth = {"Authorization": f"Bearer {token}"}
        return (t.request("GET", "/v1/stats", headers=auth)[0],
                t.request("POST", "/v1/tasks/retry", {"status": "failed"},
                          headers=auth)[0])
    assert codes("ro-1") == (401, 401)
    conf.write_text("[server]\napi_token = adm-1\nread_tokens = ro-1 ro-2\n")
    t.proc.send_signal(signal.SIGHUP)
    at = logged(t, "SIGHUP: configuration reloaded: 1 API token and 2 read-only tokens, "
                   "log_level info, access_log off\n")
    assert codes("ro-1") == codes("ro-2") == (200, 403)
    assert codes("adm-1") == (200, 200)
    # read tokens left without the full one: refused, nothing changed
    conf.write_text("[server]\nread_tokens = ro-1\n")
    t.proc.send_signal(signal.SIGHUP)
    at = logged(t, "SIGHUP: configuration not reloaded, nothing changed: server.read_tokens: "
                   "needs server.api_token", at)
    assert codes("ro-1") == (200, 403) and codes("adm-1") == (200, 200)
    # a read token removed is refused from the next request on; one moved
    # to api_token is a full token
    conf.write_text("[server]\napi_token = adm-1 ro-2\nread_tokens = ro-2\n")
    t.proc.send_signal(signal.SIGHUP)
    at = logged(t, "SIGHUP: configuration reloaded: 2 API tokens, log_level info", at)
    assert codes("ro-1") == (401, 401)
    assert codes("ro-2") == (200, 200)
    assert t.proc.poll() is None


def test_signals_while_waiting_for_the_store(tmp_path, tickd_factory):
    """Started with Redis down, tickd waits for it: the three signals keep it
    waiting (the status says so), and SIGTERM still ends it cleanly."""
    t = tickd_factory(Redis(str(tmp_path)))  # never started: nobody on its port
    t.start(wait=False)
    at = logged(t, "store not reachable yet")
    for sig, line in ((signal.SIGUSR1, " status: up "), (signal.SIGUSR2, " SIGUSR2: ignored"),
                      (signal.SIGHUP, " SIGHUP: configuration reloaded")):
        t.proc.send_signal(sig)
        at = logged(t, line, at)
    assert "waiting for the store" in t.logtext()
    assert t.stop(signal.SIGTERM) == 0
