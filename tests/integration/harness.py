"""Test harness: real redis-server processes, the real tickd binary and a real
HTTP receiver, each on a free loopback port, each test in its own temp dir.

Nothing here fakes tickd's collaborators; tests observe what a user would:
the HTTP API, the callbacks arriving, and the keys in Redis."""

import email.utils
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import openapi_check

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TICKD = os.environ.get("TICKD_BIN", os.path.join(ROOT, "build", "tickd"))
# make integration-san: TICKD is the ASan+UBSan build
SANITIZED = os.environ.get("SANITIZED_BUILD") == "1"
SANITIZER_REPORT = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


# Servers the tests start bind port 0 and report the port the kernel gave
# them (tickd: its "listening on" line; the receivers: their socket), so no
# two take the same one. Where that cannot be -- redis-server (port 0 turns
# TCP off), a cluster's bus ports, prometheus, a port that must have nobody
# listening -- free_port picks one: make test runs the suite in several
# pytest-xdist workers, and each picks from its own range, below the
# kernel's ephemeral ports (32768 on), so that no two workers, and no
# outgoing connection, take the same one.
WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0)
PORT_SPAN = 2500


def _bindable(p):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            return False
    return True


def free_port():
    """A free port of this worker's range [10000 + k * 2500, +2500)."""
    import random
    base = 10000 + (WORKER % 4) * PORT_SPAN
    while True:
        p = random.randrange(base, base + PORT_SPAN)
        if _bindable(p):
            return p


def log_port(path, start=0):
    """The port a tickd reported in its log at path ("listening on
    http://H:P"; with --listen H:0 the kernel picked it), read from offset
    start on; None before it says so."""
    with open(path, "rb") as f:
        f.seek(start)
        for line in f.read().decode(errors="replace").splitlines():
            if " listening on http://" in line:
                return int(line.split(" listening on http://")[1].split()[0].rsplit(":", 1)[1])
    return None


# written by tickd itself at start (flow control's change list and its
# upgrade mark, the replica registry of GET /v1/cluster), not by a request
AT_START = {"tickd:{flow}:wn", "tickd:{flow}:mig", "tickd:{console}:replicas",
            "tickd:{console}:replica"}


def stored_keys(redis):
    """tickd's keys holding what requests stored (slices, schedules, flow
    state), the ones tickd writes at start and the console's history (the
    outcomes counted per minute, GET /v1/history) left out."""
    return [k for k in redis.cli("--scan", "--pattern", "tickd:{*").split()
            if k and k not in AT_START and not k.startswith("tickd:{hist.")]


def fnv1a(s):
    """FNV-1a 32 of s: a key's bucket is this modulo scheduler.buckets."""
    h = 0x811c9dc5
    for b in s.encode():
        h = ((h ^ b) * 0x01000193) & 0xffffffff
    return h


def now_ms():
    return int(time.time() * 1000)


def wait_for(pred, timeout=10.0, interval=0.02, what="condition"):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def settings_in_force(*ts):
    """Wait until each replica has read the flow settings since now: its
    flow_loads has grown by two (the first may have begun before)."""
    for t in ts:
        n = t.request("GET", "/v1/stats")[1]["flow_loads"]
        wait_for(lambda: t.request("GET", "/v1/stats")[1]["flow_loads"] >= n + 2, 5,
                 what=f"tickd :{t.port} reading the settings")


class Redis:
    """One redis-server on a free port; restartable on the same port and dir."""

    def __init__(self, tmp, name="redis", port=None, extra=()):
        self.port = port or free_port()
        self.dir = os.path.join(tmp, f"{name}-{self.port}")
        os.makedirs(self.dir, exist_ok=True)
        self.extra = list(extra)
        self.auth = []  # redis-cli's arguments to AUTH with, once the server wants them
        self.proc = None

    def start(self):
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", self.dir, "--save", "", "--appendonly", "yes",
                "--appendfsync", "always", "--logfile", os.path.join(self.dir, "log")]
        self.proc = subprocess.Popen(args + self.extra, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_for(lambda: self.ping(), 10, what=f"redis :{self.port}")
        return self

    def ping(self):
        try:
            return self.cli("PING") == "PONG"
        except Exception:
            return False

    def cli(self, *args):
        out = subprocess.run(["redis-cli", "-p", str(self.port), *self.auth, *map(str, args)],
                             capture_output=True, text=True, timeout=10)
        if out.returncode != 0:
            raise RuntimeError(out.stderr)
        return out.stdout.strip()

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(10)
        self.proc = None

    @property
    def addr(self):
        return f"127.0.0.1:{self.port}"


class TcpServer:
    """A raw TCP server on a port the kernel picks (or `port`): every connection it
    accepts is handed to handle(conn) on a thread of its own and closed when
    handle returns (an OSError there, the peer gone, ends it quietly). For
    peers no HTTP library would play: receivers that answer byte by byte,
    hold, cut off or misbehave, and proxies."""

    def __init__(self, handle, host="127.0.0.1", family=socket.AF_INET, backlog=256, port=0):
        self.handle = handle
        self.sock = socket.socket(family)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((host, port))
        except OSError:
            self.sock.close()
            raise
        self.sock.listen(backlog)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        try:
            self.handle(c)
        except OSError:
            pass
        finally:
            c.close()

    def close(self):
        self.sock.close()


def pipe(a, b):
    """Copy what a sends to b until a ends or either fails, then shut both
    down: one direction of a TCP proxy."""
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def read_head(c, buf=b"", limit=None, idle_s=None):
    """Read from c until buf holds a whole request or answer head: (head,
    the bytes after it), or (None, buf) if the peer closed first or limit
    bytes came without one. idle_s: how long to wait for a first byte when
    buf is empty (socket.timeout past it), as a server's keep-alive timeout."""
    while b"\r\n\r\n" not in buf:
        if limit is not None and len(buf) >= limit:
            return None, buf
        if idle_s is not None and not buf:
            c.settimeout(idle_s)
        d = c.recv(65536)
        if idle_s is not None:
            c.settimeout(None)
        if not d:
            return None, buf
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    return head, rest


def read_to_end(c, until_error=False):
    """Everything c receives until the peer closes it; until_error: or until
    a timeout or a reset ends the reading (what came by then)."""
    data = b""
    try:
        while True:
            d = c.recv(65536)
            if not d:
                return data
            data += d
    except OSError:
        if until_error:
            return data
        raise


def read_request(c, buf=b"", idle_s=None):
    """One request (with a Content-Length body) from c, buf holding what was
    read past the previous one: (request line, {header: value} with lowercase
    names, body, the bytes after it), or None if the peer closed first."""
    head, buf = read_head(c, buf, idle_s=idle_s)
    if head is None:
        return None
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for ln in lines[1:]:
        k, v = ln.split(":", 1)
        headers[k.strip().lower()] = v.strip()
    size = int(headers.get("content-length", "0"))
    while len(buf) < size:
        d = c.recv(65536)
        if not d:
            return None
        buf += d
    return lines[0], headers, buf[:size], buf[size:]


class Receiver:
    """A real HTTP/1.1 server recording every callback with its arrival time.

    Behaviour by path: /ok -> 200; /status/<code> -> that code;
    /fail/<n> -> 500 for the first n attempts of each task, then 200;
    /slow/<ms> -> 200 after sleeping ms; /busy/<s>/<n> -> the first n calls
    to any /busy/ path get 429 with Retry-After: s, then 200.
    max_inflight: the most callbacks it was answering at once."""

    def __init__(self):
        self.calls = []
        self.inflight = self.max_inflight = self.busy_sent = 0
        self.lock = threading.Lock()
        self.counts = {}
        rec = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def handle_any(self):
                t = time.time() * 1000
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                call = {"t": t, "method": self.command, "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body, "peer": self.client_address[1]}
                path = self.path
                if path.startswith("http://"):  # a proxy's absolute form
                    path = "/" + path.split("/", 3)[3] if path.count("/") >= 3 else "/"
                parts = path.strip("/").split("/")
                code = 200
                tid = call["headers"].get("tickd-task-id", "")
                extra = {}
                with rec.lock:
                    rec.counts[tid] = rec.counts.get(tid, 0) + 1
                    seen = rec.counts[tid]
                    rec.calls.append(call)
                    rec.inflight += 1
                    rec.max_inflight = max(rec.max_inflight, rec.inflight)
                    if parts[0] == "busy" and rec.busy_sent < int(parts[2]):
                        rec.busy_sent += 1
                        code = 429
                        extra["Retry-After"] = parts[1]
                        call["busy"] = True
                if code != 200:
                    pass
                elif parts[0] == "status":
                    code = int(parts[1])
                elif parts[0] == "fail" and seen <= int(parts[1]):
                    code = 500
                elif parts[0] == "slow":
                    time.sleep(int(parts[1]) / 1000)
                with rec.lock:
                    rec.inflight -= 1
                try:
                    self.send_response(code)
                    for k, v in extra.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the caller gave up (timeout tests)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

            def log_message(self, *a):
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 1024

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path="/ok"):
        return f"http://127.0.0.1:{self.port}{path}"

    def by_task(self):
        out = {}
        with self.lock:
            for c in self.calls:
                out.setdefault(c["headers"].get("tickd-task-id"), []).append(c)
        return out

    def count(self):
        with self.lock:
            return len(self.calls)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Tickd:
    """The real tickd binary."""

    made = 0

    def __init__(self, tmp, redis=None, args=(), env=None, name="tickd", store=None, nofile=None):
        # --listen 127.0.0.1:0 on the first start: the kernel picks the port
        # and tickd reports it ("listening on ..."); a restart takes it again
        self.port = None
        self.host = "127.0.0.1"  # the address --listen binds
        self.tmp = tmp
        Tickd.made += 1
        self.log = os.path.join(tmp, f"{name}-{os.getpid()}-{Tickd.made}.log")
        self.args = []
        if redis is not None:
            self.args += ["--redis", redis if isinstance(redis, str) else redis.addr]
        if store:
            self.args += ["--store", store]
        self.args += list(args)
        self.env = dict(os.environ)
        self.env.setdefault("TICKD_SERVER_WORKERS", "2")
        self.env.update(env or {})
        self.nofile = nofile  # RLIMIT_NOFILE for the process, if set
        self.proc = None

    def start(self, wait=True):
        self.logf = open(self.log, "ab")
        limit = None
        if self.nofile:
            import resource
            n = self.nofile
            limit = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))  # noqa: E731
        start = self.logf.tell()
        listen = ["--listen", f"{self.host}:{self.port or 0}"]
        self.proc = subprocess.Popen([TICKD, *listen, *self.args], stdout=self.logf,
                                     stderr=self.logf, env=self.env, preexec_fn=limit)
        if wait:
            if not self.port:
                self.port = wait_for(lambda: self._reported_port(start), 15,
                                     what="tickd reporting its port")
            wait_for(self.healthy, 15, what=f"tickd :{self.port} healthy")
        return self

    def _reported_port(self, start):
        if self.proc.poll() is not None:
            raise AssertionError(f"tickd exited {self.proc.returncode}:\n{self.logtext()}")
        return log_port(self.log, start)

    def healthy(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"tickd exited {self.proc.returncode}:\n{self.logtext()}")
        try:
            return self.request("GET", "/healthz")[0] == 200
        except OSError:
            return False

    def logtext(self):
        with open(self.log, "rb") as f:
            return f.read().decode(errors="replace")

    def request(self, method, path, body=None, headers=None, raw=None):
        """(status, parsed JSON or None or raw bytes), the answer checked
        against doc/openapi.yaml (openapi_check)."""
        url = f"http://127.0.0.1:{self.port}{path}"
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        h = {"Content-Type": "application/json"} if data is not None else {}
        h.update(headers or {})
        req = urllib.request.Request(url, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                code, text = r.status, r.read()
        except urllib.error.HTTPError as e:
            code, text = e.code, e.read()
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = text
        openapi_check.check(method, path, code, parsed)
        return code, parsed

    def post(self, task, expect=(200, 201)):
        code, body = self.request("POST", "/v1/tasks", task)
        if expect and code not in expect:
            raise AssertionError(f"POST {task} -> {code} {body}")
        return body if expect else (code, body)

    def batch(self, tasks):
        code, body = self.request("POST", "/v1/tasks/batch", {"tasks": tasks})
        assert code == 200, (code, body)
        return body["results"]

    def get(self, tid):
        return self.request("GET", f"/v1/tasks/{tid}")

    def final(self, tid, timeout=15):
        """The task once its last outcome is recorded: a callback's arrival
        comes before tickd has read its answer and written the outcome."""
        wait_for(lambda: self.get(tid)[1]["status"] in ("succeeded", "failed"), timeout,
                 what=f"task {tid} final")
        return self.get(tid)[1]

    def delete(self, tid):
        return self.request("DELETE", f"/v1/tasks/{tid}")

    def metric(self, name):
        """The value of an unlabelled line of /metrics, or None without one."""
        code, text = self.request("GET", "/metrics")
        assert code == 200, code
        text = text.decode() if isinstance(text, bytes) else str(text)
        m = re.search(rf"^{name} (\S+)$", text, re.M)
        return float(m.group(1)) if m else None

    def clock_offset_s(self):
        """How far this tickd's wall clock is from ours, in whole seconds (its
        Date header, as a faked clock gives it)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=10) as r:
            date = email.utils.parsedate_to_datetime(r.headers["Date"]).timestamp()
        return date - int(time.time())

    def past(self, receiver, at_ms, timeout=10, key=None):
        """Wait until this tickd has called back a task due at at_ms (made
        here, to receiver's /marker; key, when given, picks its bucket):
        whatever was due before it and still to fire has fired. A check that
        nothing more happens waits for this marker, not for a time."""
        task = {"callback_url": receiver.url("/marker"), "execute_at": at_ms}
        if key is not None:
            task["key"] = key
        t = self.post(task)
        wait_for(lambda: t["id"] in receiver.by_task(), max(0, at_ms - now_ms()) / 1000 + timeout,
                 what=f"tickd :{self.port} past {at_ms}")

    def settled(self, timeout=10):
        """Wait until no task is scheduled or running (on a cluster, on every
        master): every callback that will ever be made has been made and its
        outcome recorded, so counting deliveries (or duplicates) is exact."""
        def idle():
            for s in ("scheduled", "running"):
                code, res = self.request("GET", f"/v1/tasks?status={s}&limit=1")
                if code != 200 or res["tasks"]:
                    return False
            return True
        wait_for(idle, timeout, what=f"tickd :{self.port} with no task scheduled or running")

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout)
        rc = self.proc.returncode if self.proc else None
        if self.proc:
            self.logf.close()
        self.proc = None
        return rc

    def kill9(self):
        return self.stop(signal.SIGKILL)


def lua_source(script):
    """lua/<script>.lua after the definitions of lua/lib.lua it uses, as
    tickd loads a script (src/store/script.h, build/tools/script_link): for
    EVAL of the scripts themselves on a real Redis."""
    return subprocess.run([os.path.join(ROOT, "build", "tools", "script_link"),
                           os.path.join(ROOT, "lua"), script],
                          check=True, capture_output=True, text=True).stdout


def lua_constant(name):
    """The text of lib.lua's string constant `name`."""
    return [ln for ln in open(os.path.join(ROOT, "lua", "lib.lua"))
            if ln.startswith(f"local {name} = ")][0].split("'")[1]


def tcp_ports(pid):
    """The local ports of the TCP sockets process pid holds (stopped first,
    so that it opens none meanwhile)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as f:
            next(f)
            for line in f:
                cols = line.split()
                if cols[9] in inodes:
                    ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def percentile(values, p):
    v = sorted(values)
    if not v:
        return None
    k = min(len(v) - 1, max(0, int(round(p / 100 * (len(v) - 1)))))
    return v[k]


CLUSTER_SPAN = 690


def free_cluster_ports(n):
    """n ports p such that p and its cluster bus port p + 10000 are free, p
    in this worker's range [20000 + k * 690, +690): bus ports stay below the
    ephemeral ports (32768), where no outgoing connection can take one."""
    import random
    lo = 20000 + (WORKER % 4) * CLUSTER_SPAN
    while True:
        base = random.randrange(lo, lo + CLUSTER_SPAN - n)
        ports = list(range(base, base + n))
        if all(_bindable(p) for p in ports + [p + 10000 for p in ports]):
            return ports


class Cluster:
    """A local Redis Cluster of plain redis-server processes: `masters`
    masters with `replicas` replicas each, made with redis-cli --cluster create."""

    def __init__(self, tmp, masters=3, replicas=1, node_timeout_ms=2000, password=None):
        n = masters * (replicas + 1)
        auth = ["--requirepass", password, "--masterauth", password] if password else []
        # the replicas' first full sync starts at once: Redis's default waits
        # 5 s (repl-diskless-sync-delay) for more replicas to share the
        # transfer; start() sets the default back once they are synced
        self.nodes = [Redis(tmp, name="cluster", port=p, extra=[
            "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", str(node_timeout_ms),
            "--cluster-replica-validity-factor", "0", "--repl-diskless-sync-delay", "0",
            *auth]) for p in free_cluster_ports(n)]
        self.auth = ["-a", password, "--no-auth-warning"] if password else []
        for r in self.nodes:
            r.auth = self.auth
        self.replicas = replicas

    def start(self):
        for r in self.nodes:
            r.start()
        out = subprocess.run(["redis-cli", *self.auth, "--cluster", "create",
                              *[r.addr for r in self.nodes],
                              "--cluster-replicas", str(self.replicas), "--cluster-yes"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
        wait_for(self.healthy, 30, 0.2, what="cluster_state:ok on every node")
        wait_for(self.replicas_synced, 30, 0.2, what="every replica synced")
        # a node that syncs again during a test (a master back as a replica)
        # does it as Redis's default has it, the pace the tests' WAITs expect
        for r in self.nodes:
            r.cli("CONFIG", "SET", "repl-diskless-sync-delay", "5")
        return self

    def replicas_synced(self):
        for r in self.nodes:
            info = r.cli("INFO", "replication")
            if "role:slave" in info and "master_link_status:up" not in info:
                return False
        return len(self.masters()) == len(self.nodes) // (self.replicas + 1)

    def failed_over(self, victim):
        """A live node no longer lists `victim` as serving slots."""
        for r in self.nodes:
            if r.proc is None:
                continue
            try:
                out = r.cli("CLUSTER", "SLOTS")
            except Exception:
                return False
            return str(victim.port) not in out.split() and self.healthy()
        return False

    def healthy(self):
        for r in self.nodes:
            if r.proc is None:
                continue
            try:
                if "cluster_state:ok" not in r.cli("CLUSTER", "INFO"):
                    return False
            except Exception:
                return False
        return True

    def masters(self):
        out = []
        for r in self.nodes:
            if r.proc is not None and "role:master" in r.cli("INFO", "replication"):
                out.append(r)
        return out

    def node(self, port):
        return next(r for r in self.nodes if r.port == port)

    def seeds(self, k=3):
        return ",".join(r.addr for r in self.nodes[:k])

    def keys(self, pattern):
        """Keys matching pattern on each live master: {port: [keys]}."""
        return {r.port: [k for k in r.cli("--scan", "--pattern", pattern).split("\n") if k]
                for r in self.masters()}

    def stop(self):
        for r in self.nodes:
            r.stop(signal.SIGKILL)
