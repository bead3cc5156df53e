"""The scale test of bounded work (make bounds; apart from make test: it
measures CPU and time, which the suite's parallel workers would disturb):
what others create (queues named by task authors, destination settings,
receivers holding their destination back with Retry-After) makes no Redis
command long, nor tickd busy at rest, nor a normal callback late.

It makes 100,000 queues (a batch of tasks, each naming its own queue, due in
a day), 100,000 destinations with settings (flow.lua's put, the call
PUT /v1/destinations makes, pipelined to Redis: through HTTP it would take
minutes) and 10,000 held destinations (10,000 tasks, each to its own
loopback address 127.a.b.c on one receiver answering every call with 429
Retry-After: 3600: each a hold, as a receiver makes one). Then, SLOWLOG
recording every command over 1 ms, it pages through both listings, lets
tickd rest, and times normal callbacks against the lateness measured
before the load. On a machine shared with other work a process can lose
the CPU for tens of ms in any command, SLOWLOG RESET included: the
measurement is taken up to 3 times and the best window counts (a build
whose commands are long fails all three)."""
import hashlib
import json
import os
import socket
import time
import urllib.request

import pytest

from harness import SANITIZED, Redis, lua_source, now_ms, percentile, wait_for
from redis_proto import resp
from test_bounds import Busy

QUEUES = 100_000
DESTS = 100_000
HOLDS = 10_000
SLOW_US = 10_000       # the longest Redis command allowed
REST_CPU = 0.10        # tickd's CPU at rest, share of one core
LATE_MS = 50           # normal callbacks: p50 lateness at most this over the baseline


def pipeline(port, commands, chunk=5000):
    """Send RESP commands pipelined; each answer read (errors fail)."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        f = s.makefile("rb")
        for i in range(0, len(commands), chunk):
            part = commands[i:i + chunk]
            s.sendall(b"".join(part))
            for _ in part:
                line = f.readline()
                assert not line.startswith(b"-"), line
                if line[:1] == b"$" and int(line[1:]) >= 0:
                    f.read(int(line[1:]) + 2)
                elif line[:1] == b"*":
                    for _ in range(max(0, int(line[1:]))):
                        sub = f.readline()
                        if sub[:1] == b"$" and int(sub[1:]) >= 0:
                            f.read(int(sub[1:]) + 2)


def get_json(tickd, path):
    """GET path's JSON, the time it took printed when over a second."""
    t = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{tickd.port}{path}", timeout=120) as r:
        body = json.loads(r.read())
    if time.monotonic() - t > 1:
        print(f"GET {path}: {time.monotonic() - t:.1f} s")
    return body


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def cpu_share(pid, seconds):
    hz = os.sysconf("SC_CLK_TCK")
    a, t = cpu_ticks(pid), time.monotonic()
    time.sleep(seconds)  # a measurement window, not a wait for an event
    return (cpu_ticks(pid) - a) / hz / (time.monotonic() - t)


def lateness(tickd, receiver, n=20, tag="x"):
    """Lateness (ms) of n normal callbacks, each due 50 ms after the other."""
    start = now_ms() + 500
    before = receiver.count()
    ids = {}
    for i in range(n):
        at = start + i * 50
        res = tickd.post({"callback_url": receiver.url(), "execute_at": at, "key": f"{tag}{i}"})
        ids[res["id"]] = at
    wait_for(lambda: receiver.count() >= before + n, 30, what=f"{n} normal callbacks")
    calls = receiver.by_task()
    return [calls[tid][0]["t"] - at for tid, at in ids.items()]


def read_reply(f):
    """One RESP reply from the file f, nested arrays as lists."""
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind == b"*":
        return [read_reply(f) for _ in range(int(rest))] if int(rest) >= 0 else None
    if kind == b"$":
        return f.read(int(rest) + 2)[:-2] if int(rest) >= 0 else None
    if kind == b":":
        return int(rest)
    assert kind == b"+", line
    return rest


def slowlog(redis):
    """The commands SLOWLOG recorded: (microseconds, the command's first words)."""
    with socket.create_connection(("127.0.0.1", redis.port)) as s:
        s.sendall(resp("SLOWLOG", "GET", "1024"))
        entries = read_reply(s.makefile("rb"))
    # each entry: id, time, duration, arguments, client address, client name;
    # SLOWLOG RESET, the measurement's own, is not the product's
    return [(e[2], " ".join(a.decode(errors="replace") for a in e[3][:5]))
            for e in entries if e[3][0].upper() != b"SLOWLOG"]


@pytest.mark.skipif(SANITIZED, reason="the scale test measures CPU and time; too slow under "
                    "the sanitizers")
def test_100k_queues_100k_destinations_10k_holds(tmp_path, tickd_factory, receiver):
    t0 = time.monotonic()
    redis = Redis(str(tmp_path), extra=["--appendonly", "no", "--slowlog-log-slower-than",
                                        "1000", "--slowlog-max-len", "1024"]).start()
    busy, tickd, phases = Busy(), None, {}
    try:
        tickd = tickd_factory(redis).start()
        pid = tickd.proc.pid
        base = lateness(tickd, receiver, tag="base")

        # 100,000 destinations with settings, by the store's own put
        src = lua_source("flow")
        phases["start"] = time.monotonic() - t0
        sha = redis.cli("SCRIPT", "LOAD", src)
        assert sha == hashlib.sha1(src.encode()).hexdigest()
        pipeline(redis.port, [resp("EVALSHA", sha, 1, "tickd:{flow}:cfg", "put",
                                   f"d:d{i}.example", '{"rate":1000,"burst":1}', "")
                              for i in range(DESTS)])
        phases["destinations"] = time.monotonic() - t0
        # 100,000 queues, each named by one task due in a day
        later = now_ms() + 86_400_000
        for b in range(0, QUEUES, 1000):
            tickd.batch([{"callback_url": receiver.url(), "execute_at": later,
                          "queue": f"q{i}", "key": f"q{i}"} for i in range(b, b + 1000)])
        phases["queues"] = time.monotonic() - t0
        # 10,000 destinations held back for an hour by their receivers
        for b in range(0, HOLDS, 1000):
            tickd.batch([{"callback_url": busy.url(i), "key": f"h{i}",
                          "retry": {"max_attempts": 1}} for i in range(b, b + 1000)])
        wait_for(lambda: busy.calls >= HOLDS, 60, what=f"{HOLDS} callbacks answered 429")
        phases["callbacks"] = time.monotonic() - t0
        assert len(busy.hosts) == HOLDS

        def holds():
            # the store's holds: a ZSET now (an older keyspace: a hash)
            return int(redis.cli("ZCARD", "tickd:{flow}:hold") or 0) if \
                redis.cli("TYPE", "tickd:{flow}:hold") == "zset" else \
                int(redis.cli("HLEN", "tickd:{flow}:until") or 0)
        wait_for(lambda: holds() >= HOLDS, 30, what=f"{HOLDS} holds in the store")
        # the settings reached the replica: a task to a limited destination asks
        wait_for(lambda: tickd.request("GET", "/v1/stats")[0] == 200, 10, what="stats")
        made = time.monotonic() - t0

        # for the record: the longest commands while it was all made (the
        # batch adds of 1000 tasks among them: bounded by the batch)
        print(f"\nwhile making: {sorted(slowlog(redis), reverse=True)[:3]}")
        windows = []
        for attempt in range(3):
            redis.cli("SLOWLOG", "RESET")
            # both listings, a few pages each, and one queue and destination
            for path, field in (("/v1/queues", "queues"), ("/v1/destinations", "destinations")):
                cursor = ""
                for _ in range(5):
                    res = get_json(tickd, f"{path}?limit=100" +
                                   (f"&cursor={cursor}" if cursor else ""))
                    assert len(res[field]) > 0, res
                    cursor = res.get("next_cursor")
                    if not cursor:
                        break  # a build that answers every one at once
            code, res = tickd.request("GET", "/v1/queues/q77777")
            assert code == 200 and res["scheduled"] == 1
            code, res = tickd.request("GET", f"/v1/destinations/127.9.9.1:{busy.port}")
            assert code == 200 and res["held_until"], res
            rest = cpu_share(pid, 3.0)
            late = lateness(tickd, receiver, tag=f"after{attempt}.")
            slow = slowlog(redis)
            longest = max(slow, default=(0, ""))
            windows.append((longest[0], rest, percentile(late, 50), max(late)))
            print(f"\n{ {k: round(v, 1) for k, v in phases.items()} } made in {made:.1f} s; "
                  f"Redis's longest command {longest[0]} us ({longest[1]}); {len(slow)} over "
                  f"1 ms; tickd at rest {rest * 100:.1f} % of a core; lateness p50 "
                  f"{percentile(base, 50):.0f} -> {percentile(late, 50):.0f} ms, max "
                  f"{max(base):.0f} -> {max(late):.0f} ms; the longest: "
                  f"{sorted(slow, reverse=True)[:3]}")
            if longest[0] < SLOW_US and rest < REST_CPU and \
                    percentile(late, 50) <= percentile(base, 50) + LATE_MS:
                break
        # one window meets every bound
        ok = [w for w in windows if w[0] < SLOW_US and w[1] < REST_CPU and
              w[2] <= percentile(base, 50) + LATE_MS]
        assert ok, f"(longest us, CPU share at rest, lateness p50, max ms) {windows}; " \
            f"baseline lateness {base}"
    except Exception:
        # what a failing build was doing: its CPU and Redis's longest commands
        if tickd and tickd.proc and tickd.proc.poll() is None:
            print(f"\nat the failure, after {phases}: tickd {cpu_share(pid, 3.0) * 100:.0f} % of "
                  f"a core; Redis's longest: {sorted(slowlog(redis), reverse=True)[:3]}")
        raise
    finally:
        busy.close()
        redis.stop()
