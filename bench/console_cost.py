#!/usr/bin/env python3
"""What the console's history costs Redis: a burst of N tasks (default
20,000) due at one instant, delivered by one tickd to bench/receiver.js,
with Redis's INFO commandstats and CPU read from CONFIG RESETSTAT (before
the tasks are posted) to a fixed time after the burst was delivered, once
per binary given. Run it with a tickd that writes the history and one that
does not (built from the same tree with history_create left out of
cmd/tickd/main.c); the difference per task is the history's cost.

    bench/console_cost.py build/tickd /tmp/tickd-nohistory [--n 20000] [--rounds 3]

Prints, per binary and round, the commands, their calls and microseconds
(Redis's own count, the inner commands of scripts included), and Redis's
CPU; then the medians per task."""
import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *map(str, args)], capture_output=True,
                          text=True, timeout=30, check=True).stdout


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def get(url, timeout=70):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def commandstats(port):
    out = {}
    for m in re.finditer(r"^cmdstat_(\w+):calls=(\d+),usec=(\d+)", cli(port, "INFO",
                                                                         "commandstats"), re.M):
        out[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return out


def cpu(port):
    info = cli(port, "INFO", "cpu")
    return sum(float(re.search(rf"^{k}:(\S+)", info, re.M).group(1))
               for k in ("used_cpu_sys", "used_cpu_user"))


def one_round(binary, n, tmp):
    rport = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no", "--dir", tmp,
                              "--loglevel", "warning"], stdout=subprocess.DEVNULL)
    rec = subprocess.Popen(["node", os.path.join(ROOT, "bench", "receiver.js"), "0"],
                           stdout=subprocess.PIPE, text=True)
    cport = int(rec.stdout.readline().split()[-1])
    log = open(os.path.join(tmp, "tickd.log"), "w+")
    tickd = None
    try:
        wait_for(lambda: subprocess.run(["redis-cli", "-p", str(rport), "PING"],
                                        capture_output=True).returncode == 0, 10, "redis")
        tickd = subprocess.Popen([binary, "--redis", f"127.0.0.1:{rport}", "--listen",
                                  "127.0.0.1:0"], stdout=log, stderr=log)

        def port():
            log.seek(0)
            m = re.search(r"listening on http://[^:]+:(\d+)", log.read())
            return m and int(m.group(1))
        tport = wait_for(port, 15, "tickd")
        url = f"http://127.0.0.1:{tport}"
        wait_for(lambda: get(url + "/healthz", 5), 15, "tickd healthy")
        time.sleep(3)  # tickd at rest: its start-up calls are not counted
        cli(rport, "CONFIG", "RESETSTAT")
        cpu0, t0 = cpu(rport), time.time()
        at = int(time.time() * 1000) + 8000
        subprocess.run(["node", os.path.join(ROOT, "bench", "tickd_load.js"), "insert",
                        "--url", url, "--cb", f"http://127.0.0.1:{cport}/cb", "--n", str(n),
                        "--batch", "1000", "--conc", "4", "--at", str(at)],
                       check=True, capture_output=True, timeout=120)
        got = get(f"http://127.0.0.1:{cport}/wait?n={n}&ms=60000")["count"]
        assert got >= n, got
        # the same window for every run: 20 s after the burst's instant, so
        # that every outcome is recorded and every count written
        time.sleep(max(0, at / 1000 + 20 - time.time()))
        return {"stats": commandstats(rport), "cpu_s": cpu(rport) - cpu0,
                "secs": time.time() - t0}
    finally:
        for p in (tickd, rec, redis):
            if p and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(30)
        log.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    runs = {b: [] for b in a.binaries}
    for r in range(a.rounds):
        for b in a.binaries:
            with tempfile.TemporaryDirectory(prefix="console-cost-") as tmp:
                res = one_round(os.path.abspath(b), a.n, tmp)
            runs[b].append(res)
            calls = sum(c for c, _ in res["stats"].values())
            usec = sum(u for _, u in res["stats"].values())
            print(f"round {r + 1} {b}: {calls} calls, {usec} us in commands, "
                  f"redis cpu {res['cpu_s']:.3f} s")
            print("  " + ", ".join(f"{k} {c}/{u}us" for k, (c, u) in sorted(res["stats"].items())))
    print(f"medians per task ({a.n} tasks):")
    for b, rs in runs.items():
        calls = statistics.median(sum(c for c, _ in x["stats"].values()) for x in rs)
        usec = statistics.median(sum(u for _, u in x["stats"].values()) for x in rs)
        cpu_s = statistics.median(x["cpu_s"] for x in rs)
        print(f"  {b}: {calls / a.n:.4f} commands, {usec / a.n:.3f} us in commands, "
              f"{cpu_s * 1e6 / a.n:.3f} us of Redis CPU")


if __name__ == "__main__":
    main()
