"""The binary's start-up: flags, the ini file, TICKD_* environment overrides,
their precedence, the errors a bad configuration gets, and a clean SIGTERM."""
import json
import os
import signal
import socket
import subprocess
import textwrap
import time

import pytest

from harness import ROOT, TICKD, free_port, log_port, now_ms, wait_for

CONF = os.path.join(ROOT, "conf", "tickd.ini")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKD_")}
    env["TICKD_SERVER_WORKERS"] = "2"
    env.update(extra)
    return env


def run(*args, env=None, timeout=10):
    return subprocess.run([TICKD, *args], capture_output=True, text=True, timeout=timeout,
                          env=env if env is not None else clean_env())


def write(tmp_path, text, name="t.ini"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def answers(port):
    """Whether an HTTP server answers GET /healthz with 200 on port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def assert_config_error(r, *fragments):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.startswith("tickd: config: "), r.stderr
    for f in fragments:
        assert f in r.stderr, (f, r.stderr)


# ---- flags that print and exit ----------------------------------------------

def test_version():
    r = run("--version")
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.startswith("tickd ") and r.stdout.split()[1][0].isdigit(), r.stdout
    assert run("-v").stdout == r.stdout


def test_help():
    r = run("--help")
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.startswith("usage: tickd")
    for opt in ("--config", "--listen", "--redis", "--store", "--print-config", "--version",
                "--help", "TICKD_<SECTION>_<KEY>"):
        assert opt in r.stdout, opt
    assert run("-h").stdout == r.stdout


def test_print_config_is_the_committed_file():
    r = run("--print-config")
    assert r.returncode == 0 and r.stderr == ""
    with open(CONF, "rb") as f:
        committed = f.read()
    assert r.stdout.encode() == committed, \
        "conf/tickd.ini is out of date: run `make config-reference`"


def test_printed_config_loads(tmp_path):
    """The default file, as printed, is accepted by the parser (every key,
    including the empty scripts_dir) and gives a working tickd."""
    text = run("--print-config").stdout
    text = text.replace("listen = 127.0.0.1:8080", "listen = 127.0.0.1:0")
    text = text.replace("store = redis", "store = memory")
    log = tmp_path / "printed.log"
    p = subprocess.Popen([TICKD, "-c", write(tmp_path, text)], env=clean_env(),
                         stdout=subprocess.DEVNULL, stderr=open(log, "wb"))
    try:
        port = wait_for(lambda: p.poll() is not None or log_port(log), 10, what="tickd's port")
        assert p.poll() is None, log.read_text()
        assert answers(port)
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(5) == 0


# ---- the ini file ---------------------------------------------------------------

def test_unknown_key_names_file_line_and_key(tmp_path):
    path = write(tmp_path, "; comment\n[server]\nlisten = 127.0.0.1:0\n\ncolour = red\n")
    assert_config_error(run("-c", path), f"{path}:5:", "colour", "unknown key")
    # --config is the same as -c
    assert_config_error(run("--config", path), f"{path}:5:", "colour")


@pytest.mark.parametrize("text,line,key,why", [
    ("[scheduler]\n\ntick_ms = 5\n", 3, "tick_ms", "out of range 10..60000"),
    ("[server]\nmax_body = abc\n", 2, "max_body", "not an integer"),
    ("[server]\nmax_body = 12x\n", 2, "max_body", "not an integer"),
    ("[server]\nworkers = 257\n", 2, "workers", "out of range"),
    ("[server]\nworkers =\n", 2, "workers", "not an integer"),
    ("[server]\nstore = disk\n", 2, "store", "redis or memory"),
    ("[server]\nlog_level = loud\n", 2, "log_level", "debug, info, warn or error"),
    ("[redis]\nprefix = a b\n", 2, "prefix", "only letters"),
    ("[scheduler]\nbuckets = 0\n", 2, "buckets", "out of range 1..1024"),
    ("[redis]\nprefix = " + "x" * 70 + "\n", 2, "prefix", "longer than 63 bytes"),
])
def test_bad_value_names_file_line_and_key(tmp_path, text, line, key, why):
    path = write(tmp_path, text)
    assert_config_error(run("-c", path), f"{path}:{line}: {key}:", why)


def test_first_error_is_reported(tmp_path):
    path = write(tmp_path, "[server]\nworkers = 1\nmax_body = x\nworkers = y\n")
    r = run("-c", path)
    assert_config_error(r, f"{path}:3: max_body:")
    assert "workers" not in r.stderr


def test_unknown_section(tmp_path):
    path = write(tmp_path, "[server]\nworkers = 1\n[schedular]\ntick_ms = 100\n")
    assert_config_error(run("-c", path), f"{path}:3:", "[schedular]", "unknown section")


def test_empty_unknown_section(tmp_path):
    path = write(tmp_path, "[schedular]\n[server]\nlisten = 127.0.0.1:0\n")
    try:
        r = run("-c", path, "--store", "memory", timeout=2)
    except subprocess.TimeoutExpired:
        raise AssertionError("tickd started with an unknown section in its file")
    assert_config_error(r, f"{path}:1:", "schedular")


def test_keys_before_any_section(tmp_path):
    path = write(tmp_path, "listen = 127.0.0.1:0\n")
    assert_config_error(run("-c", path), f"{path}:1:", "listen")


def test_syntax_error_and_missing_file(tmp_path):
    path = write(tmp_path, "[server]\nworkers = 1\nthis is not ini\n")
    assert_config_error(run("-c", path), f"{path}:3:", "syntax error")
    missing = str(tmp_path / "nope.ini")
    assert_config_error(run("-c", missing), missing, "No such file")


def test_relation_between_keys_is_checked(tmp_path, tickd_factory):
    path = write(tmp_path, "[scheduler]\ntick_ms = 2000\n")  # lookahead 1500 < 2500
    assert_config_error(run("-c", path), "scheduler.lookahead_ms", ">= 1.25 x tick_ms")
    path = write(tmp_path, "[scheduler]\ntick_ms = 2000\nlookahead_ms = 2500\n", "ok.ini")
    tickd_factory(None, store="memory", args=["-c", path]).start()


def test_error_line_matches_its_message(tmp_path):
    path = write(tmp_path, "[server]\nthis is not ini\nworkers = 1\ncolour = red\n")
    r = run("-c", path)
    assert r.returncode == 2
    assert (f"{path}:2: syntax error" in r.stderr) or (f"{path}:4: colour:" in r.stderr), r.stderr


def test_long_line_in_file_is_refused_clearly(tmp_path, redis, tickd_factory):
    """inih (as Debian builds it) cuts lines at 199 bytes: tickd refuses a
    longer line with its number instead of misreading it; the environment
    takes long values."""
    lua = os.path.join(ROOT, "lua")
    long_dir = os.path.join(ROOT, *(["."] * 120), "lua")  # same directory, 260+ bytes
    assert len(long_dir) > 250 and os.path.samefile(long_dir, lua)
    t = tickd_factory(redis, env={"TICKD_REDIS_SCRIPTS_DIR": long_dir}).start()
    assert t.stop() == 0
    path = write(tmp_path, f"[redis]\nscripts_dir = {long_dir}\n")
    assert_config_error(run("-c", path), f"{path}:2:", "line longer than 199 bytes")


def test_a_lib_lua_of_another_form_stops_the_start_naming_its_line(tmp_path, redis,
                                                                  tickd_factory):
    """Each script is loaded after the definitions of lib.lua it names
    (src/store/script.h): a lib.lua that leaves that form (here a global
    function at column 0) is refused at start with its line, not linked by a
    guess; the same directory as it was starts."""
    import shutil
    lua = tmp_path / "lua"
    shutil.copytree(os.path.join(ROOT, "lua"), lua)
    t = tickd_factory(redis, env={"TICKD_REDIS_SCRIPTS_DIR": str(lua)}).start()
    assert t.stop() == 0
    lib = (lua / "lib.lua").read_text()
    lines = lib.count("\n")
    (lua / "lib.lua").write_text(lib + "function helper() return 1 end\n")
    t = tickd_factory(redis, env={"TICKD_REDIS_SCRIPTS_DIR": str(lua)}).start(wait=False)
    rc = t.proc.wait(15)
    log = t.logtext()
    assert rc != 0, log
    assert f"lib.lua line {lines + 1}: not a definition" in log, log


# ---- the environment and precedence -------------------------------------------

def test_bad_env_value_names_the_variable():
    r = run(env=clean_env(TICKD_SCHEDULER_TICK_MS="5"))
    assert_config_error(r, "TICKD_SCHEDULER_TICK_MS", "tick_ms", "out of range")
    r = run(env=clean_env(TICKD_SERVER_MAX_BODY="abc"))
    assert_config_error(r, "TICKD_SERVER_MAX_BODY", "not an integer")
    r = run(env=clean_env(TICKD_SERVER_STORE="disk"))
    assert_config_error(r, "TICKD_SERVER_STORE")


def test_unknown_env_variable_stops_the_start_naming_the_nearest(tmp_path):
    # a misspelt token must not leave the API running open
    r = run("--store", "memory", "--listen", "127.0.0.1:0",
            env=clean_env(TICKD_SERVER_API_TOKN="s3cret"))
    assert_config_error(r, "environment TICKD_SERVER_API_TOKN: unknown setting "
                           "(did you mean TICKD_SERVER_API_TOKEN?)")
    r = run(env=clean_env(TICKD_REDIS_NODE="10.0.0.5:6379"))
    assert_config_error(r, "TICKD_REDIS_NODE: unknown setting (did you mean TICKD_REDIS_NODES?)")
    r = run(env=clean_env(TICKD_SOMETHING_ELSE="1"))
    assert_config_error(r, "TICKD_SOMETHING_ELSE: unknown setting (settings are "
                           "TICKD_<SECTION>_<KEY>")
    # the file's unknown key gets the same help
    path = write(tmp_path, "[server]\napi_tokn = s3cret\n")
    assert_config_error(run("-c", path), f"{path}:2: api_tokn: unknown key in section [server] "
                                         "(did you mean server.api_token?)")


def test_tickd_bin_of_the_test_harness_is_no_setting(tmp_path):
    p = start_raw(tmp_path, "--store", "memory", "--listen", "127.0.0.1:0",
                  env=clean_env(TICKD_BIN=TICKD))
    try:
        port = wait_for(lambda: p.poll() is None and log_port(p.log), 10, what="tickd's port")
        assert answers(port), "tickd with TICKD_BIN set"
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(15) == 0


def test_env_beats_file_and_is_checked_after_it(tmp_path):
    path = write(tmp_path, "[scheduler]\ntick_ms = 5\n")
    # the file is read first: its error is the one reported
    assert_config_error(run("-c", path, env=clean_env(TICKD_SCHEDULER_TICK_MS="100")),
                        f"{path}:2: tick_ms:")
    path = write(tmp_path, "[server]\nmax_body = 2048\n", "ok.ini")
    assert_config_error(run("-c", path, env=clean_env(TICKD_SERVER_MAX_BODY="1")),
                        "TICKD_SERVER_MAX_BODY")


def start_raw(tmp_path, *args, env):
    path = tmp_path / f"raw-{time.monotonic_ns()}.log"
    log = open(path, "wb")
    p = subprocess.Popen([TICKD, *args], env=env, stdout=log, stderr=log)
    p.log = path
    return p


def stop_raw(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        return p.wait(5)
    return p.returncode


def test_listen_precedence_flag_over_env_over_file(tmp_path):
    a, b, c = free_port(), free_port(), free_port()
    assert len({a, b, c}) == 3
    path = write(tmp_path, f"[server]\nlisten = 127.0.0.1:{a}\nstore = memory\n")
    cases = [
        ((), clean_env(), a),
        ((), clean_env(TICKD_SERVER_LISTEN=f"127.0.0.1:{b}"), b),
        (("--listen", f"127.0.0.1:{c}"), clean_env(TICKD_SERVER_LISTEN=f"127.0.0.1:{b}"), c),
    ]
    for flags, env, want in cases:
        p = start_raw(tmp_path, "-c", path, *flags, env=env)
        try:
            wait_for(lambda: p.poll() is not None or answers(want), 10, what=f"tickd on :{want}")
            assert p.poll() is None, f"tickd exited {p.returncode}"
            for other in {a, b, c} - {want}:
                assert not answers(other), (flags, want, other)
        finally:
            assert stop_raw(p) == 0
    # TICKD_SERVER_STORE alone selects the memory store too
    p = start_raw(tmp_path, "--listen", f"127.0.0.1:{a}",
                  env=clean_env(TICKD_SERVER_STORE="memory"))
    try:
        wait_for(lambda: p.poll() is not None or answers(a), 10, what="tickd on env store")
        assert p.poll() is None
    finally:
        assert stop_raw(p) == 0


def test_redis_flag_beats_env(redis, tickd_factory):
    t = tickd_factory(redis, env={"TICKD_REDIS_NODES": "127.0.0.1:1"}).start()
    assert t.request("GET", "/healthz") == (200, {"redis": "ok", "store": {"data_lost": 0}})


def test_unexpected_arguments():
    r = run("extra")
    assert r.returncode == 2 and "unexpected argument: extra" in r.stderr
    assert "usage: tickd" in r.stderr and r.stdout == ""
    r = run("--store", "memory", "--listen", "127.0.0.1:0", "extra")
    assert r.returncode == 2 and "unexpected argument: extra" in r.stderr
    r = run("--bogus")
    assert r.returncode == 2 and "usage: tickd" in r.stderr
    r = run("--listen")  # missing its value
    assert r.returncode == 2 and "usage: tickd" in r.stderr
    r = run("--store", "disk")
    assert_config_error(r, "store", "redis or memory")


# ---- the keyspace's bucket count ------------------------------------------------

def test_buckets_mismatch_is_refused(redis, tickd_factory):
    first = tickd_factory(redis).start()
    assert first.stop() == 0
    assert redis.cli("HGET", "tickd:meta", "buckets") == "16"
    bad = tickd_factory(redis, env={"TICKD_SCHEDULER_BUCKETS": "8"}).start(wait=False)
    rc = bad.proc.wait(15)
    assert rc != 0
    log = bad.logtext()
    assert "scheduler.buckets" in log and "16" in log, log
    assert redis.cli("HGET", "tickd:meta", "buckets") == "16"  # keyspace untouched
    # the matching count still starts; another prefix is another keyspace
    again = tickd_factory(redis).start()
    assert again.stop() == 0
    other = tickd_factory(redis, env={"TICKD_SCHEDULER_BUCKETS": "8",
                                      "TICKD_REDIS_PREFIX": "other"}).start()
    assert other.stop() == 0
    assert redis.cli("HGET", "other:meta", "buckets") == "8"


# ---- signals -----------------------------------------------------------------------

@pytest.mark.parametrize("store,sig", [("memory", signal.SIGTERM), ("redis", signal.SIGTERM),
                                       ("memory", signal.SIGINT)])
def test_idle_tickd_exits_0_on_signal(request, tickd_factory, store, sig):
    if store == "redis":
        t = tickd_factory(request.getfixturevalue("redis")).start()
    else:
        t = tickd_factory(None, store="memory").start()
    t0 = time.monotonic()
    t.proc.send_signal(sig)
    rc = t.proc.wait(5)
    took = time.monotonic() - t0
    assert rc == 0, (rc, t.logtext())
    assert took < 1.5, took
    assert "shutting down" in t.logtext() and "stopped" in t.logtext()
    assert not answers(t.port)


# ---- a Redis that wants a password -------------------------------------------------

def test_redis_auth_as_default_and_acl_user(redis, receiver, tickd_factory):
    """tickd sends AUTH on every connection, as the default user or as an ACL
    user limited to tickd's keys. No password, a wrong one, or a user with no
    password stop it at start with the reason, and write nothing."""
    redis.cli("ACL", "SETUSER", "sched", "on", ">userpw", "~tickd:*", "+@all")
    redis.cli("CONFIG", "SET", "requirepass", "defpw")
    redis.auth = ["-a", "defpw", "--no-auth-warning"]

    def refused(env, *fragments):
        t = tickd_factory(redis, env=env).start(wait=False)
        rc = t.proc.wait(15)
        log = t.logtext()
        assert rc != 0, log
        for f in fragments:
            assert f in log, (f, log)

    refused({}, "wants a password", "redis.password")
    refused({"TICKD_REDIS_PASSWORD": "wrong"}, "AUTH refused", "redis.password", "WRONGPASS")
    refused({"TICKD_REDIS_USERNAME": "sched", "TICKD_REDIS_PASSWORD": "defpw"}, "WRONGPASS")
    r = run("--redis", redis.addr, env=clean_env(TICKD_REDIS_USERNAME="sched"))
    assert_config_error(r, "redis.username: needs redis.password")
    assert redis.cli("--scan", "--pattern", "tickd:*") == ""

    ids, logs = [], []
    for env in ({"TICKD_REDIS_PASSWORD": "defpw"},
                {"TICKD_REDIS_USERNAME": "sched", "TICKD_REDIS_PASSWORD": "userpw"}):
        t = tickd_factory(redis, env=env).start()
        ids.append(t.post({"callback_url": receiver.url(), "delay_ms": 300})["id"])
        wait_for(lambda: ids[-1] in receiver.by_task(), 10, what="callback")
        # connections made again (the watchdog, a failover) AUTH again
        redis.cli("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        ids.append(t.post({"callback_url": receiver.url(), "delay_ms": 300})["id"])
        wait_for(lambda: ids[-1] in receiver.by_task(), 10, what="callback after reconnect")
        assert t.stop() == 0
        logs.append(t.logtext())
    assert not [log for log in logs if "NOAUTH" in log or "AUTH refused" in log], logs


@pytest.mark.parametrize("denied", ["hsetnx", "hmget"])
def test_redis_error_reply_at_start_is_named(redis, tickd_factory, denied):
    """An error reply to a start-up call on P:meta is named as Redis gave it,
    with the key, not as "unexpected reply" (a cluster master
    just restarted answers CLUSTERDOWN for its first 2 s; here an ACL's
    NOPERM stands in for any error reply)."""
    redis.cli("ACL", "SETUSER", "tk", "on", ">pw", "~*", "+@all", f"-{denied}")
    t = tickd_factory(redis, env={"TICKD_REDIS_USERNAME": "tk",
                                  "TICKD_REDIS_PASSWORD": "pw"}).start(wait=False)
    wait_for(lambda: "NOPERM" in t.logtext(), 15, what="the error reply in the log")
    log = t.logtext()
    assert "tickd:meta: NOPERM" in log, log
    assert "unexpected reply" not in log, log


def test_redis_password_changed_under_a_running_tickd(redis, receiver, tickd_factory):
    """The password changes while tickd runs: it says so once, reports
    unhealthy, tries again with a growing backoff (not a reconnect storm), and
    carries on as soon as the server takes its password again."""
    redis.cli("CONFIG", "SET", "requirepass", "pw1")
    redis.auth = ["-a", "pw1", "--no-auth-warning"]
    t = tickd_factory(redis, env={"TICKD_REDIS_PASSWORD": "pw1"}).start()
    redis.cli("CONFIG", "SET", "requirepass", "pw2")
    redis.auth = ["-a", "pw2", "--no-auth-warning"]

    def conns():
        stats = redis.cli("INFO", "stats")
        return int(stats.split("total_connections_received:")[1].split()[0])

    redis.cli("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
    wait_for(lambda: t.request("GET", "/healthz")[0] == 503, 5, what="unhealthy")
    before = conns()
    time.sleep(3)
    made = conns() - before - 2  # less the two INFO calls' own connections
    assert made <= 12, f"{made} connections in 3 s"
    assert t.logtext().count("AUTH refused") == 1, t.logtext()
    # every bucket's scan fails every tick meanwhile: its warnings come at
    # most once per 5 s, not 16 a tick
    assert t.logtext().count(" W scheduler.c") <= 2, t.logtext()
    redis.cli("CONFIG", "SET", "requirepass", "pw1")
    redis.auth = ["-a", "pw1", "--no-auth-warning"]
    wait_for(lambda: t.request("GET", "/healthz")[0] == 200, 10, what="healthy again")
    assert "AUTH taken" in t.logtext()
    tid = t.post({"callback_url": receiver.url(), "delay_ms": 200})["id"]
    wait_for(lambda: tid in receiver.by_task(), 10, what="callback")


# ---- the keyspace's schema -------------------------------------------------------

def _slice(ms, bucket):
    return time.strftime("%Y%m%d%H%M", time.gmtime(ms // 1000)) + ".%d" % bucket


def test_schema1_keyspace_is_read_and_upgraded(redis, receiver, tickd_factory):
    """Tasks stored by schema 1 (a spec and a state per task, plain ids in
    :due) run, read and cancel under schema 2, which marks the keyspace as
    its own; a schema it does not know is refused, untouched."""
    redis.cli("HSET", "tickd:meta", "buckets", "16", "schema", "1")
    soon, far = now_ms() + 4000, now_ms() + 10 * 60 * 1000
    tasks = {}
    for name, at, bucket in (("old-soon", soon, 5), ("old-far", far, 6)):
        sl = _slice(at, bucket)
        tid = f"{sl}.{at}.{name}"
        spec = {"key": name, "callback_url": receiver.url(), "method": "POST",
                "req": {"n": name}, "execute_at": at,
                "retry": {"max_attempts": 5, "backoff_ms": 1000}, "timeout_ms": 10000}
        state = {"s": "scheduled", "a": 0, "due": at, "to": 10000}
        redis.cli("ZADD", f"tickd:{{{sl}}}:due", str(at), tid)
        redis.cli("HSET", f"tickd:{{{sl}}}:task", tid, json.dumps(spec, separators=(",", ":")),
                  "s:" + tid, json.dumps(state), "#open", "1")
        redis.cli("ZADD", "tickd:slices", "0", sl)
        tasks[name] = tid
    t = tickd_factory(redis).start()
    assert redis.cli("HGET", "tickd:meta", "schema") == "2"
    code, got = t.get(tasks["old-far"])
    assert code == 200 and got["status"] == "scheduled" and got["key"] == "old-far", got
    assert got["execute_at"] == far and got["req"] == {"n": "old-far"}
    wait_for(lambda: t.get(tasks["old-soon"])[1]["status"] == "succeeded", 15, what="old task ran")
    assert [json.loads(c["body"]) for c in receiver.calls] == [{"n": "old-soon"}]
    assert t.delete(tasks["old-far"])[0] == 204
    assert t.get(tasks["old-far"])[1]["status"] == "cancelled"
    code, page = t.request("GET", "/v1/tasks?status=cancelled")
    assert code == 200 and [x["id"] for x in page["tasks"]] == [tasks["old-far"]], page
    assert t.stop() == 0

    redis.cli("HSET", "tickd:meta", "schema", "3")
    bad = tickd_factory(redis).start(wait=False)
    assert bad.proc.wait(15) != 0
    assert "has schema 3, this tickd speaks 2" in bad.logtext()
    assert redis.cli("HGET", "tickd:meta", "schema") == "3"


# ---- make run's first suggestion works as printed -------------------------------

def test_make_runs_first_task_works_as_printed(redis, tmp_path):
    """scripts/run.sh (make run after the build) prints a receiver and a
    task to try, then the same task with tickctl: each, run in a shell
    exactly as printed, delivers its callback to that receiver."""
    port = free_port()
    env = clean_env(TICKD_REDIS_NODES=redis.addr, TICKD_SERVER_LISTEN=f"127.0.0.1:{port}")
    out, heard = tmp_path / "run.log", tmp_path / "listen.log"
    p = subprocess.Popen(["bash", "scripts/run.sh"], cwd=ROOT, env=env,
                         stdout=open(out, "wb"), stderr=subprocess.STDOUT)
    shell = None
    try:
        wait_for(lambda: answers(port), 15, what="make run's tickd")
        text = out.read_text()
        first = text.split("a task calling it in 2 s:\n", 1)[1].split("\nThe same with tickctl:")[0]
        ctl = text.split("The same with tickctl:\n\n", 1)[1].split("\n\n")[0]
        first, ctl = textwrap.dedent(first).strip(), ctl.strip()
        assert first.startswith("build/tickctl listen --port 9000 &\ncurl "), first
        assert ctl.startswith("TICKD_URL=") and " build/tickctl add " in ctl, ctl
        # the receiver in the background and the curl, as printed, in one
        # shell that then waits on its receiver
        shell = subprocess.Popen(["bash", "-c", first + "\nwait"], cwd=ROOT, env=clean_env(),
                                 stdout=open(heard, "wb"), stderr=subprocess.STDOUT,
                                 start_new_session=True)
        wait_for(lambda: '"status":"scheduled"' in heard.read_text(), 10, what="the task added")
        calls = lambda: heard.read_text().split("--- POST /hook ")[1:]
        wait_for(lambda: [c for c in calls() if "answered: 200" in c], 15, what="the callback heard")
        assert '{"hi":1}' in calls()[0]
        r = subprocess.run(["bash", "-c", ctl], cwd=ROOT, env=clean_env(), capture_output=True,
                           text=True, timeout=10)
        assert r.returncode == 0 and r.stdout.strip(), (r.stdout, r.stderr)
        tid = r.stdout.split()[0]
        wait_for(lambda: len([c for c in calls() if "answered: 200" in c]) == 2, 15,
                 what="tickctl's callback heard")
        assert tid in calls()[1] and '{"hi":1}' in calls()[1], calls()[1]
    finally:
        if shell and shell.poll() is None:
            os.killpg(shell.pid, signal.SIGTERM)
            shell.wait(10)
        p.terminate()
        p.wait(10)
