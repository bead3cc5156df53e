"""make chaos: tickd under many faults at once, then a checker.

A local Redis Cluster (3 masters, CHAOS_REPLICAS replicas each, default 1),
each node behind its own fault proxy (faultproxy.py), three tickd replicas
with redis.wait_replicas = 1, a receiver that logs every callback
(receiver.py). For CHAOS_SECONDS (default 300) a load of about CHAOS_RATE
(100) adds a second, some cancelled before they are due, goes to the three
replicas while four schedules run; a nemesis works through a fault plan drawn
from CHAOS_SEED (random when unset; printed): kill -9 and restart of a tickd,
SIGSTOP of a tickd for 1-10 s, kill -9 of a Redis master (its replica takes
over; it is restarted later and rejoins as a replica), latency, stalls,
dropped bytes and resets on the proxies, and a clock stepped tens of seconds
away on one replica (libfaketime). Faults overlap. Then every fault is
healed, the load stops, and the run drains until every acknowledged task has
arrived (or CHAOS_DRAIN_S passed). check.py then judges the run.

Everything goes to CHAOS_DIR (default build/chaos/<time>): history.jsonl (the
plan, faults and outcomes with their times), arrivals.log (receiver), the
tickd logs and the Redis nodes' directories. python3 tests/chaos/check.py DIR
judges a kept run again.

Roles: t0 is never killed (its RSS spans the run: the memory check), t1 and
t2 may be; t2 runs under libfaketime and its clock is the one stepped.
"""
import heapq
import http.client
import json
import os
import queue
import random
import re
import resource
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import ROOT, Cluster, Tickd, log_port, rss_kib  # noqa: E402

import check  # noqa: E402

SECONDS = float(os.environ.get("CHAOS_SECONDS", "300"))
SEED = int(os.environ.get("CHAOS_SEED") or random.SystemRandom().randrange(1, 2**31))
RATE = float(os.environ.get("CHAOS_RATE", "100"))
REPLICAS = int(os.environ.get("CHAOS_REPLICAS", "1"))
DRAIN_S = float(os.environ.get("CHAOS_DRAIN_S", "90"))
MEAN_GAP_S = float(os.environ.get("CHAOS_FAULT_GAP_S", "5"))  # mean time between fault starts
FAKETIME_LIB = os.environ.get("CHAOS_FAKETIME_LIB",
                              "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
OUT = os.environ.get("CHAOS_DIR") or os.path.join(
    ROOT, "build", "chaos", time.strftime("%Y%m%d-%H%M%S", time.gmtime()))
NAMES = ["t0", "t1", "t2"]
KILLABLE = ["t1", "t2"]
SKEWED = "t2"
CANCEL_SHARE = 0.1
FAIL1_SHARE = 0.03     # tasks whose first attempt the receiver answers 500
CLIENT_TIMEOUT_S = 5.0
SCHEDULES = [{"key": "every1s", "every_ms": 1000},
             {"key": "every3s", "every_ms": 3000},
             {"key": "cron1s", "cron": "* * * * * *"},
             {"key": "cron5s", "cron": "*/5 * * * * *"}]

stop_faults = threading.Event()
stop_load = threading.Event()
hist_lock = threading.Lock()
hist_f = None


def now_ms():
    return time.time() * 1000


def hist(ev, **kw):
    rec = {"t": round(now_ms(), 1), "ev": ev, **kw}
    line = json.dumps(rec, separators=(",", ":"))
    with hist_lock:
        hist_f.write(line + "\n")


# ---- the fault plan ------------------------------------------------------

KINDS = [("tickd_kill9", 2.0), ("tickd_stop", 2.0), ("redis_kill9", 1.2),
         ("proxy_latency", 1.0), ("proxy_stall", 0.8), ("proxy_drop", 0.7),
         ("proxy_reset", 0.6), ("clock_step", 1.0)]


def make_plan(seed, seconds):
    """The faults, their start offsets and parameters: a function of the seed
    and the length alone. Whom a fault strikes among the Redis masters is a
    number in [0, 1) mapped onto the masters of the moment."""
    rng = random.Random(seed)
    plan, t = [], 8.0
    total = sum(w for _, w in KINDS)
    while t < seconds - 5:
        x, kind = rng.uniform(0, total), KINDS[-1][0]
        for k, w in KINDS:
            if x < w:
                kind = k
                break
            x -= w
        f = {"at": round(t, 2), "kind": kind}
        if kind == "tickd_kill9":
            f.update(target=rng.choice(KILLABLE), secs=round(rng.uniform(1, 15), 1))
        elif kind == "tickd_stop":
            f.update(target=rng.choice(NAMES), secs=round(rng.uniform(1, 10), 1))
        elif kind == "redis_kill9":
            f.update(pick=round(rng.random(), 4), secs=round(rng.uniform(5, 30), 1))
        elif kind.startswith("proxy_"):
            f.update(all=rng.random() < 0.3, pick=round(rng.random(), 4))
            if kind == "proxy_latency":
                f.update(ms=rng.choice([20, 50, 200, 500, 1000, 2500]),
                         secs=round(rng.uniform(3, 20), 1))
            elif kind in ("proxy_stall", "proxy_drop"):
                f.update(secs=round(rng.uniform(1, 8), 1))
            else:
                f.update(secs=0)
        elif kind == "clock_step":
            f.update(target=SKEWED, offset_s=rng.choice([-1, 1]) * rng.randint(10, 60),
                     secs=round(rng.uniform(10, 40), 1))
        plan.append(f)
        t += rng.expovariate(1 / MEAN_GAP_S)
    return plan


# ---- the processes -------------------------------------------------------

class Replica:
    """One tickd replica: its process across restarts, and what the nemesis
    is doing to it."""

    def __init__(self, name, tmp, seeds, env):
        self.name = name
        self.t = Tickd(tmp, redis=seeds, env=env, name=name)
        self.lock = threading.Lock()
        self.busy = False        # a kill or a stop of the nemesis holds it
        self.expect_exit = False  # its process is going down by the nemesis' hand
        self.pid = None

    def start(self, deadline_s=120):
        """Start it and wait until it answers /healthz 200. A process that
        exits meanwhile is a failed start (logged in the history with the end
        of its log); it is started again a second later."""
        tries = 0
        while True:
            with open(self.t.log, "ab") as f:
                off = f.tell()
            self.t.start(wait=False)
            self.pid = self.t.proc.pid
            write_pids()
            hist("tickd_start", name=self.name, pid=self.pid, log=self.t.log)
            end = time.time() + deadline_s
            while time.time() < end:
                rc = self.t.proc.poll()
                if rc is not None:
                    tail = read_from(self.t.log, off)[-1500:]
                    hist("tickd_start_failed", name=self.name, pid=self.pid, rc=rc, tail=tail)
                    self.t.logf.close()
                    self.t.proc = None
                    break
                if not self.t.port:
                    self.t.port = log_port(self.t.log, off)
                if self.t.port and health(self.t.port) == 200:
                    hist("tickd_up", name=self.name, pid=self.pid,
                         secs=round(deadline_s - (end - time.time()), 2))
                    return True
                time.sleep(0.1)
            else:
                hist("tickd_start_slow", name=self.name, pid=self.pid, secs=deadline_s)
                return False
            tries += 1
            if tries > 120:
                return False
            time.sleep(1)

    def alive(self):
        return self.t.proc is not None and self.t.proc.poll() is None


replicas = {}
nodes = []        # the Redis nodes (harness Redis), index = proxy index
proxy = None
proxy_lock = threading.Lock()
cluster = None
skew_file = None
pidfile = None


pids_lock = threading.Lock()


def write_pids():
    with pids_lock:
        lines = [f"{n} {r.t.proc.pid}\n" for n, r in list(replicas.items())
                 if r.t.proc is not None]
        tmp = pidfile + ".new"
        with open(tmp, "w") as f:
            f.writelines(lines)
        os.replace(tmp, pidfile)


def read_from(path, off):
    with open(path, "rb") as f:
        f.seek(off)
        return f.read().decode(errors="replace")


def health(port):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        c.request("GET", "/healthz")
        code = c.getresponse().status
        c.close()
        return code
    except (OSError, http.client.HTTPException):
        return 0


def proxy_cmd(**c):
    with proxy_lock:
        proxy.stdin.write((json.dumps(c) + "\n").encode())
        proxy.stdin.flush()


def node_role(r):
    """(role, online replica count) of a node, or (None, 0) when down."""
    if r.proc is None:
        return None, 0
    try:
        info = r.cli("INFO", "replication")
    except Exception:
        return None, 0
    if "role:master" in info:
        return "master", len(re.findall(r"slave\d+:.*state=online", info))
    return "replica", 0


def masters():
    return [i for i, r in enumerate(nodes) if node_role(r)[0] == "master"]


# ---- the nemesis ---------------------------------------------------------

def run_fault(f):
    kind = f["kind"]
    secs = f.get("secs", 0)
    if kind in ("tickd_kill9", "tickd_stop"):
        rep = replicas[f["target"]]
        with rep.lock:
            if rep.busy or not rep.alive():
                hist("fault_skipped", **f, why="replica busy or down")
                return
            rep.busy = True
        try:
            if kind == "tickd_kill9":
                rep.expect_exit = True
                pid = rep.t.proc.pid
                rep.t.proc.send_signal(signal.SIGKILL)
                rc = rep.t.proc.wait(10)
                rep.t.logf.close()
                rep.t.proc = None
                write_pids()
                hist("fault_start", **f, pid=pid, rc=rc)
                stop_faults.wait(secs)
                rep.expect_exit = False
                hist("fault_end", **f, pid=pid)
                rep.start()
            else:
                pid = rep.t.proc.pid
                os.kill(pid, signal.SIGSTOP)
                hist("fault_start", **f, pid=pid)
                stop_faults.wait(secs)
                os.kill(pid, signal.SIGCONT)
                hist("fault_end", **f, pid=pid)
        finally:
            rep.busy = False
    elif kind == "redis_kill9":
        # a master whose shard has a replica in sync: its kill is a failover,
        # not the loss of the shard
        ok = []
        for i in masters():
            if node_role(nodes[i])[1] >= 1:
                ok.append(i)
        if not ok:
            hist("fault_skipped", **f, why="no master with a replica online")
            return
        i = ok[int(f["pick"] * len(ok))]
        r = nodes[i]
        r.stop(signal.SIGKILL)
        hist("fault_start", **f, node=i, port=r.port)
        stop_faults.wait(secs)
        r.start()
        hist("fault_end", **f, node=i, port=r.port)
    elif kind.startswith("proxy_"):
        ms = masters()
        if f["all"] or not ms:
            targets = list(range(len(nodes)))
        else:
            targets = [ms[int(f["pick"] * len(ms))]]
        op = kind[len("proxy_"):]
        if op == "latency":
            proxy_cmd(op="latency", nodes=targets, ms=f["ms"])
        elif op in ("stall", "drop"):
            proxy_cmd(op=op, nodes=targets, on=True)
        else:
            proxy_cmd(op="reset", nodes=targets)
        hist("fault_start", **f, nodes=targets)
        if secs:
            stop_faults.wait(secs)
        if op == "latency":
            proxy_cmd(op="latency", nodes=targets, ms=0)
        elif op in ("stall", "drop"):
            proxy_cmd(op=op, nodes=targets, on=False)
        hist("fault_end", **f, nodes=targets)
    elif kind == "clock_step":
        if getattr(run_fault, "skewed", False):
            hist("fault_skipped", **f, why="clock already stepped")
            return
        run_fault.skewed = True
        set_skew(f["offset_s"])
        hist("fault_start", **f)
        stop_faults.wait(secs)
        set_skew(0)
        hist("fault_end", **f)
        run_fault.skewed = False


def set_skew(seconds):
    tmp = skew_file + ".new"
    with open(tmp, "w") as f:
        f.write(f"{seconds:+d}\n")
    os.replace(tmp, skew_file)


def nemesis(plan, t0):
    threads = []
    for f in plan:
        wait = t0 + f["at"] - time.time()
        if wait > 0 and stop_faults.wait(wait):
            break
        th = threading.Thread(target=guarded, args=(run_fault, f), daemon=True)
        th.start()
        threads.append(th)
    return threads


def guarded(fn, *a):
    try:
        fn(*a)
    except Exception as e:  # a fault that could not be made is logged, not fatal
        hist("nemesis_error", what=repr(e), args=repr(a)[:300])


def monitor():
    """A tickd that exits without the nemesis' hand is a crash: logged, then
    started again. RSS sampled every 5 s."""
    last_rss = 0
    while not stop_load.is_set():
        for name, rep in replicas.items():
            p = rep.t.proc
            if p is None or rep.expect_exit:
                continue
            rc = p.poll()
            if rc is not None and not rep.expect_exit and rep.t.proc is p:
                with rep.lock:
                    if rep.busy:
                        continue
                    rep.busy = True
                try:
                    hist("tickd_died", name=name, pid=p.pid, rc=rc,
                         tail=read_from(rep.t.log, 0)[-2000:])
                    rep.t.logf.close()
                    rep.t.proc = None
                    rep.start()
                finally:
                    rep.busy = False
        if time.time() - last_rss >= 5:
            last_rss = time.time()
            for name, rep in replicas.items():
                p = rep.t.proc
                if p is not None and p.poll() is None:
                    try:
                        hist("rss", name=name, pid=p.pid, kib=rss_kib(p.pid))
                    except (OSError, AssertionError):
                        pass
        time.sleep(0.5)


# ---- the load ------------------------------------------------------------

local = threading.local()


def api(name, method, path, body=None, timeout=CLIENT_TIMEOUT_S, again=True):
    """(status, parsed body); status 0 when no answer came (with the reason)."""
    rep = replicas[name]
    port = rep.t.port
    conns = getattr(local, "conns", None)
    if conns is None:
        conns = local.conns = {}
    c = conns.get(name)
    if c is None or c.port != port:
        c = conns[name] = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, body=data,
                  headers={"Content-Type": "application/json"} if data else {})
        r = c.getresponse()
        raw = r.read()
        try:
            return r.status, json.loads(raw) if raw else None
        except ValueError:
            return r.status, None
    except (OSError, http.client.HTTPException) as e:
        c.close()
        conns.pop(name, None)
        if method == "GET" and again:
            # a kept connection closed by the server meanwhile (its idle
            # timeout): a GET is sent again on a new one
            return api(name, method, path, body, timeout, again=False)
        return 0, type(e).__name__


jobs = queue.Queue()
cancels = []       # heap of (when, seq, id, execute_at)
cancel_lock = threading.Lock()
rng_load = None
rcv_url = None


def add_job(i):
    r = rng_load
    key = f"k{i}" if r.random() < 0.5 else None
    path = "/f1" if r.random() < FAIL1_SHARE else "/cb"
    execute_at = int(now_ms() + r.uniform(1000, 25000))
    task = {"callback_url": rcv_url + path, "execute_at": execute_at}
    if key:
        task["key"] = key
    tries = 2 if key else 1  # a keyed add whose answer was lost or 503 is sent again
    for attempt in range(tries):
        name = r.choice(NAMES)
        t0 = now_ms()
        code, body = api(name, "POST", "/v1/tasks", task)
        t1 = now_ms()
        tid = body.get("id") if isinstance(body, dict) else None
        if code not in (200, 201) and isinstance(body, dict) and "error" in body:
            err = body["error"].get("message", "")[:120]
        else:
            err = body if code == 0 else None
        hist("add", i=i, try_=attempt, tickd=name, t0=round(t0, 1), t1=round(t1, 1), code=code,
             id=tid, key=key, execute_at=execute_at, path=path, err=err)
        if code in (200, 201):
            if r.random() < CANCEL_SHARE and execute_at - now_ms() > 3000:
                when = r.uniform(now_ms() + 500, execute_at - 2000)
                with cancel_lock:
                    heapq.heappush(cancels, (when, i, tid, execute_at))
            return
        if code not in (0, 503):
            return
        time.sleep(0.2)


def cancel_job(tid, execute_at):
    """DELETE on a replica; with no answer or a 503, once more on another."""
    names = rng_load.sample(NAMES, 2)
    for name in names:
        t0 = now_ms()
        code, body = api(name, "DELETE", f"/v1/tasks/{tid}")
        err = body if code == 0 else (body.get("error", {}).get("message", "")[:120]
                                      if isinstance(body, dict) else None)
        hist("cancel", id=tid, tickd=name, t0=round(t0, 1), t1=round(now_ms(), 1), code=code,
             execute_at=execute_at, err=err)
        if code not in (0, 503):
            return


def worker():
    while True:
        job = jobs.get()
        if job is None:
            return
        try:
            job[0](*job[1:])
        except Exception as e:
            hist("load_error", what=repr(e))


def load(t0):
    i = 0
    skipped = 0
    while not stop_load.is_set():
        due = t0 + i / RATE
        wait = due - time.time()
        if wait > 0:
            time.sleep(wait)
        with cancel_lock:
            while cancels and cancels[0][0] <= now_ms():
                _, _, tid, ex = heapq.heappop(cancels)
                jobs.put((cancel_job, tid, ex))
        if jobs.qsize() > 50:  # the workers wait on a frozen replica: the client sheds
            skipped += 1
        else:
            jobs.put((add_job, i))
        i += 1
    hist("load_end", adds_planned=i, shed=skipped)


# ---- the run -------------------------------------------------------------

def arrived_ids(path, state):
    """Task ids seen in the arrivals log so far (read on from the last offset)."""
    with open(path) as f:
        f.seek(state.get("off", 0))
        data = f.read()
    cut = data.rfind("\n") + 1
    state["off"] = state.get("off", 0) + len(data[:cut].encode())
    for ln in data[:cut].splitlines():
        p = ln.split()
        if len(p) >= 3:
            state.setdefault("ids", set()).add(p[2])
    return state.setdefault("ids", set())


def wait_cluster(timeout):
    end = time.time() + timeout
    while time.time() < end:
        try:
            if cluster.healthy() and cluster.replicas_synced():
                return True
        except Exception:
            pass
        time.sleep(0.5)
    return False


def main():
    global hist_f, proxy, cluster, nodes, skew_file, pidfile, rng_load, rcv_url
    os.makedirs(OUT, exist_ok=True)
    # a tickd that crashes leaves its core in OUT (core_pattern permitting)
    os.chdir(OUT)
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    hist_f = open(os.path.join(OUT, "history.jsonl"), "a", buffering=1)
    plan = make_plan(SEED, SECONDS)
    print(f"chaos: seed {SEED} ({len(plan)} faults planned over {SECONDS:.0f} s); "
          f"reproduce with CHAOS_SEED={SEED} CHAOS_SECONDS={SECONDS:.0f}; output in {OUT}",
          flush=True)
    hist("config", seed=SEED, seconds=SECONDS, rate=RATE, replicas=REPLICAS, names=NAMES,
         skewed=SKEWED, drain_s=DRAIN_S, plan=plan)
    pidfile = os.path.join(OUT, "tickd.pids")
    open(pidfile, "w").close()
    rcv = subprocess.Popen([sys.executable, os.path.join(HERE, "receiver.py"),
                            os.path.join(OUT, "arrivals.log"), pidfile],
                           stdout=subprocess.PIPE, stderr=open(os.path.join(OUT, "receiver.err"), "w"))
    rcv_url = f"http://127.0.0.1:{int(rcv.stdout.readline())}"

    cluster = Cluster(OUT, masters=3, replicas=REPLICAS)
    nodes = cluster.nodes
    proxy = subprocess.Popen([sys.executable, os.path.join(HERE, "faultproxy.py"),
                              *[str(r.port) for r in nodes]],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=open(os.path.join(OUT, "proxy.log"), "w"))
    pports = [int(p) for p in proxy.stdout.readline().split()]
    for r, pp in zip(nodes, pports):
        # every address the cluster announces is the node's proxy (faultproxy.py)
        r.extra += ["--cluster-announce-ip", "127.0.0.1", "--cluster-announce-port", str(pp),
                    "--cluster-announce-bus-port", str(r.port + 10000)]
    hist("setup", nodes=[r.port for r in nodes], proxies=pports, receiver=rcv_url)
    cluster.start()
    seeds = ",".join(f"127.0.0.1:{p}" for p in pports[:3])

    skew_file = os.path.join(OUT, "t2.faketime")
    set_skew(0)
    base_env = {"TICKD_REDIS_WAIT_REPLICAS": "1", "TICKD_SERVER_WORKERS": "2"}
    skew_env = dict(base_env, LD_PRELOAD=FAKETIME_LIB, FAKETIME_TIMESTAMP_FILE=skew_file,
                    FAKETIME_CACHE_DURATION="1", FAKETIME_DONT_FAKE_MONOTONIC="1",
                    # an ASan build (TICKD_BIN=build/tickd-san) behind LD_PRELOAD
                    ASAN_OPTIONS=":".join(filter(None, [os.environ.get("ASAN_OPTIONS"),
                                                        "verify_asan_link_order=0"])))
    for n in NAMES:
        replicas[n] = Replica(n, OUT, seeds, skew_env if n == SKEWED else base_env)
    for n in NAMES:
        if not replicas[n].start(60):
            raise SystemExit(f"chaos: {n} did not start; see {replicas[n].t.log}")

    rng_load = random.Random(SEED + 1)
    for s in SCHEDULES:
        body = dict(s, task={"callback_url": rcv_url + "/s/" + s["key"]})
        code, res = api("t0", "POST", "/v1/schedules", body)
        hist("schedule", key=s["key"], code=code, res=res)

    workers = [threading.Thread(target=worker, daemon=True) for _ in range(8)]
    for w in workers:
        w.start()
    mon = threading.Thread(target=monitor, daemon=True)
    mon.start()
    t0 = time.time()
    hist("run_start")
    lt = threading.Thread(target=load, args=(t0,), daemon=True)
    lt.start()
    fault_threads = nemesis(plan, t0)
    rest = t0 + SECONDS - time.time()
    if rest > 0:
        time.sleep(rest)

    # heal: every fault ends now, the load stops
    stop_faults.set()
    for th in fault_threads:
        th.join(180)
    proxy_cmd(op="clear")
    set_skew(0)
    for r in nodes:
        if r.proc is None:
            r.start()
    for rep in replicas.values():
        if rep.alive():
            os.kill(rep.t.proc.pid, signal.SIGCONT)
    hist("faults_stopped")
    stop_load.set()
    lt.join()
    for _ in workers:
        jobs.put(None)
    for w in workers:
        w.join(60)
    mon.join(30)
    for n, rep in replicas.items():
        if not rep.alive():
            rep.start()
    hist("load_stopped")
    print("chaos: faults healed, load stopped; draining", flush=True)

    ok = wait_cluster(60)
    hist("cluster_settled", ok=ok)
    acked, cancelled, last_due = {}, set(), 0
    with open(os.path.join(OUT, "history.jsonl")) as f:
        for ln in f:
            e = json.loads(ln)
            if e["ev"] == "add" and e["code"] in (200, 201):
                acked[e["id"]] = e["execute_at"]
                last_due = max(last_due, e["execute_at"])
            elif e["ev"] == "cancel" and e["code"] == 204:
                cancelled.add(e["id"])
    want = set(acked) - cancelled
    st = {}
    end = max(time.time(), last_due / 1000) + DRAIN_S
    while time.time() < end:
        if want <= arrived_ids(os.path.join(OUT, "arrivals.log"), st):
            break
        time.sleep(1)
    time.sleep(10)  # late duplicates, if any, arrive in the log
    missing = sorted(want - arrived_ids(os.path.join(OUT, "arrivals.log"), st))
    hist("drained", acked=len(acked), want=len(want), missing=len(missing))

    # the API afterwards: what each missing task says, the schedules, the counters
    for tid in missing[:200]:
        code, body = api("t0", "GET", f"/v1/tasks/{tid}")
        hist("probe", id=tid, code=code,
             status=body.get("status") if isinstance(body, dict) else None,
             body=body if isinstance(body, dict) else None)
    for s in SCHEDULES:
        code, body = api("t0", "GET", f"/v1/schedules/sch.{s['key']}")
        hist("schedule_final", key=s["key"], code=code, res=body)
    for n in NAMES:
        code, body = api(n, "GET", "/v1/stats")
        hist("stats", name=n, code=code, res=body)

    # a clean stop: SIGTERM, exit 0
    for n, rep in replicas.items():
        rep.expect_exit = True
        pid = rep.t.proc.pid if rep.t.proc else None
        try:
            rc = rep.t.stop(signal.SIGTERM, timeout=60) if rep.t.proc else None
        except subprocess.TimeoutExpired:
            rc = "no exit 60 s after SIGTERM"
            rep.t.kill9()
        hist("tickd_stop", name=n, pid=pid, rc=rc)
    cluster.stop()
    proxy.kill()
    rcv.kill()
    hist("run_end")
    hist_f.close()
    sys.exit(check.main([OUT]))


if __name__ == "__main__":
    main()
