"""Static checks of the deployment files: docker-compose.yml and Dockerfile.

No Docker engine is needed: the files are parsed, and what they ask of tickd
is checked against the real binary (build/tickd --help, --print-config, and
a start with each compose service's flags and environment, on the memory
store). Each check is a plain function of the parsed files, so the last
tests can break a copy on purpose and see the check fail.

Point the checks at other files with TICKD_COMPOSE_FILE / TICKD_DOCKERFILE
(and at another binary with TICKD_BIN)."""

import copy
import functools
import os
import re
import shlex
import shutil
import signal
import subprocess
import time

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COMPOSE_FILE = os.environ.get("TICKD_COMPOSE_FILE", os.path.join(ROOT, "docker-compose.yml"))
DOCKERFILE = os.environ.get("TICKD_DOCKERFILE", os.path.join(ROOT, "Dockerfile"))
TICKD = os.environ.get("TICKD_BIN", os.path.join(ROOT, "build", "tickd"))

N_REDIS, N_TICKD = 6, 3
# Build packages of the libraries tickd links (Makefile LDLIBS), by -l name.
LINKED_DEV = {"libhiredis-dev": ["hiredis"], "libcurl4-openssl-dev": ["curl"],
              "libcjson-dev": ["cjson"], "libevent-dev": ["event", "event_pthreads"],
              "libinih-dev": ["inih"], "libssl-dev": ["crypto", "ssl"]}
# what build/tickd needs on Debian 12, when dpkg cannot say (see runtime_packages)
RUNTIME_FALLBACK = {"libhiredis0.14", "libcurl4", "libcjson1", "libevent-2.1-7",
                    "libevent-pthreads-2.1-7", "libinih1", "libssl3"}
# the flags of `tickd --help` that print something and exit: no daemon
EXITING_FLAGS = {"help", "version", "print-config"}


# ---- tickd, as the binary describes itself ---------------------------------

@functools.lru_cache(maxsize=None)
def tickd_flags():
    """{long name: takes an argument} and {short letter: long name}, from --help."""
    if not os.access(TICKD, os.X_OK):
        pytest.skip(f"{TICKD} not built (make build/tickd)")
    out = subprocess.run([TICKD, "--help"], capture_output=True, text=True, timeout=10,
                         check=True).stdout
    longs, shorts = {}, {}
    for line in out.splitlines():
        m = re.match(r"^\s+(?:-(\w),\s+)?--([a-z][\w-]*)(?: (\S+))?", line)
        if m:
            longs[m.group(2)] = m.group(3) is not None
            if m.group(1):
                shorts[m.group(1)] = m.group(2)
    assert {"listen", "redis"} <= set(longs), f"unexpected --help output:\n{out}"
    return longs, shorts


@functools.lru_cache(maxsize=None)
def tickd_env_vars():
    """TICKD_<SECTION>_<KEY> for every key of `tickd --print-config`."""
    if not os.access(TICKD, os.X_OK):
        pytest.skip(f"{TICKD} not built (make build/tickd)")
    out = subprocess.run([TICKD, "--print-config"], capture_output=True, text=True,
                         timeout=10, check=True).stdout
    section, names = None, set()
    for line in out.splitlines():
        m = re.match(r"^\[(\w+)\]\s*$", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r"^(\w+) = |^; (\w+) = $", line)  # "; key = ": a key shown unset
        if m and section:
            names.add(f"TICKD_{section}_{m.group(1) or m.group(2)}".upper())
    assert "TICKD_REDIS_NODES" in names, f"unexpected --print-config output:\n{out}"
    return frozenset(names)


def parse_tickd_args(args, longs, shorts):
    """[(long name, value or None)] of a tickd argv, as getopt_long reads it;
    AssertionError for anything tickd would refuse."""
    out, i = [], 0
    while i < len(args):
        a = str(args[i])
        if a.startswith("--"):
            name, eq, val = a[2:].partition("=")
            assert name in longs, f"tickd has no flag --{name} (tickd --help: {sorted(longs)})"
            if longs[name]:
                if not eq:
                    i += 1
                    assert i < len(args), f"--{name} needs a value"
                    val = str(args[i])
            else:
                assert not eq, f"--{name} takes no value"
                val = None
        elif a.startswith("-") and len(a) > 1:
            assert a[1] in shorts, f"tickd has no flag -{a[1]} (short flags: {sorted(shorts)})"
            name = shorts[a[1]]
            if longs[name]:
                val = a[2:]
                if not val:
                    i += 1
                    assert i < len(args), f"-{a[1]} needs a value"
                    val = str(args[i])
            else:
                assert len(a) == 2, f"bundled short flags not expected: {a}"
                val = None
        else:
            raise AssertionError(f"tickd takes no positional argument: {a!r}")
        out.append((name, val))
        i += 1
    return out


# ---- compose helpers --------------------------------------------------------

def load_compose(path=None):
    with open(path or COMPOSE_FILE) as f:
        text = f.read()
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict) and isinstance(doc.get("services"), dict), \
        "no services: mapping"
    return doc, text


def argv(cmd):
    if cmd is None:
        return []
    return shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]


def server_opts(cmd):
    """{option: value} of a `redis-server --opt value ...` command."""
    args = argv(cmd)
    assert args and args[0] == "redis-server", f"not a redis-server command: {args}"
    opts, key = {}, None
    for a in args[1:]:
        if a.startswith("--"):
            key = a[2:]
            opts[key] = ""
        elif key is not None:
            opts[key] = (opts[key] + " " + a).strip()
    return opts


def depends(svc):
    d = svc.get("depends_on") or {}
    return {k: {} for k in d} if isinstance(d, list) else d


def environ(svc):
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) if "=" in e else (e, None) for e in env)
    return {k: (None if v is None else str(v)) for k, v in env.items()}


def published(svc):
    """[(host port, container port)] of a service's ports."""
    out = []
    for p in svc.get("ports") or []:
        if isinstance(p, dict):
            out.append((str(p.get("published")), str(p.get("target"))))
            continue
        parts = str(p).split("/")[0].split(":")
        if len(parts) == 1:
            out.append((None, parts[0]))  # ephemeral host port
        else:
            out.append((parts[-2], parts[-1]))
    return out


def classify(doc):
    """Services by role: redis nodes, cluster init, tickd, the rest."""
    redis, init, tickd, other = [], [], [], []
    for name, svc in doc["services"].items():
        args = argv(svc.get("command"))
        if "build" in svc:
            tickd.append(name)
        elif args[:1] == ["redis-server"]:
            redis.append(name)
        elif "--cluster" in " ".join(args) and "create" in " ".join(args):
            init.append(name)
        else:
            other.append(name)
    return sorted(redis), init, sorted(tickd), other


# ---- compose checks ---------------------------------------------------------

def check_layout(doc):
    assert "version" not in doc, "Compose spec format: no top-level version:"
    redis, init, tickd, other = classify(doc)
    assert redis == [f"redis-{i}" for i in range(1, N_REDIS + 1)], f"redis nodes: {redis}"
    assert init == ["redis-cluster-init"], f"cluster init services: {init}"
    assert tickd == [f"tickd-{i}" for i in range(1, N_TICKD + 1)], f"tickd services: {tickd}"
    assert other == ["echo"], f"other services: {other}"


def check_redis_nodes(doc):
    redis, _, _, _ = classify(doc)
    for name in redis:
        svc = doc["services"][name]
        assert str(svc.get("image", "")).startswith("redis:7"), f"{name}: image {svc.get('image')}"
        o = server_opts(svc["command"])
        assert o.get("cluster-enabled") == "yes", f"{name}: cluster-enabled is {o.get('cluster-enabled')!r}"
        assert o.get("port", "").isdigit(), f"{name}: no --port"
        assert o.get("cluster-config-file"), f"{name}: no --cluster-config-file"
        assert o.get("appendonly") == "yes", f"{name}: appendonly is {o.get('appendonly')!r}"


def check_cluster_init(doc):
    redis, init, _, _ = classify(doc)
    assert len(init) == 1
    svc = doc["services"][init[0]]
    text = " ".join(argv(svc.get("command")))
    assert re.search(r"redis-cli\b.*--cluster\s+create\b", text, re.S), "no redis-cli --cluster create"
    assert re.search(r"--cluster-replicas\s+1\b", text), "no --cluster-replicas 1"
    assert "--cluster-yes" in text, "no --cluster-yes: redis-cli would wait for a typed yes"
    for name in redis:
        port = server_opts(doc["services"][name]["command"])["port"]
        assert re.search(rf"(?<![\w-]){re.escape(name)}:{port}(?!\d)", text), \
            f"init does not name {name}:{port}"
    assert set(redis) <= set(depends(svc)), f"init depends_on {sorted(depends(svc))}, not all nodes"
    assert str(svc.get("restart", "no")) == "no", "a one-shot service must not restart"


def check_tickd_commands(doc):
    longs, shorts = tickd_flags()
    redis, _, tickd, _ = classify(doc)
    ports = {n: server_opts(doc["services"][n]["command"])["port"] for n in redis}
    for name in tickd:
        svc = doc["services"][name]
        cmd = svc.get("command")
        assert cmd, f"{name}: no command"
        assert not isinstance(cmd, str), f"{name}: command as a list, not a shell string"
        opts = parse_tickd_args(cmd, longs, shorts)
        names = [n for n, _ in opts]
        for n in names:
            assert n not in EXITING_FLAGS, f"{name}: --{n} makes tickd exit at once"
            assert names.count(n) == 1, f"{name}: --{n} given twice"
        o = dict(opts)
        assert "listen" in o, f"{name}: no --listen (the default 127.0.0.1 is unreachable)"
        host, _, lport = o["listen"].rpartition(":")
        assert host in ("0.0.0.0", "::", "[::]", ""), f"{name}: listens on {host}, not all interfaces"
        targets = {t for _, t in published(svc)}
        assert lport in targets, f"{name}: listens on {lport}, publishes {sorted(targets)}"
        assert o.get("store", "redis") == "redis", f"{name}: --store {o['store']} is not durable"
        seeds = o.get("redis") or environ(svc).get("TICKD_REDIS_NODES")
        assert seeds, f"{name}: no --redis"
        for seed in seeds.split(","):
            h, _, p = seed.strip().rpartition(":")
            assert h in ports, f"{name}: --redis names {h!r}, not a redis service ({sorted(ports)})"
            assert p == ports[h], f"{name}: --redis {h}:{p}, but {h} runs on --port {ports[h]}"


def check_tickd_env(doc):
    valid = tickd_env_vars()
    _, _, tickd, _ = classify(doc)
    for name in tickd:
        for k in environ(doc["services"][name]):
            if k.startswith("TICKD_"):
                assert k in valid, f"{name}: {k} is no tickd key ({sorted(valid)})"


def check_tickd_services(doc, compose_dir=None):
    compose_dir = compose_dir or os.path.dirname(os.path.abspath(COMPOSE_FILE))
    _, init, tickd, _ = classify(doc)
    for name in tickd:
        svc = doc["services"][name]
        b = svc["build"]
        ctx, dockerfile = (b, "Dockerfile") if isinstance(b, str) else \
            (b.get("context", "."), b.get("dockerfile", "Dockerfile"))
        ctx = os.path.normpath(os.path.join(compose_dir, ctx))
        want = os.path.abspath(DOCKERFILE)
        assert ctx == os.path.dirname(want), f"{name}: build context {ctx}, not {os.path.dirname(want)}"
        assert os.path.normpath(os.path.join(ctx, dockerfile)) == want, \
            f"{name}: builds from {dockerfile}, not {want}"
        cond = depends(svc).get(init[0]) if init else None
        assert cond is not None, f"{name}: does not depend on {init}"
        assert (cond or {}).get("condition") == "service_completed_successfully", \
            f"{name}: should wait for the cluster init to complete, not {cond}"


def check_ports_unique(doc):
    seen = {}
    for name, svc in doc["services"].items():
        for host, _ in published(svc):
            if host is None:
                continue
            assert host not in seen, f"host port {host} published by {seen[host]} and {name}"
            seen[host] = name
    _, _, tickd, _ = classify(doc)
    assert sorted(h for n in tickd for h, _ in published(doc["services"][n])) == \
        [str(8080 + i) for i in range(1, N_TICKD + 1)], "tickd replicas publish 8081.."


def check_depends_exist(doc):
    for name, svc in doc["services"].items():
        for dep, cond in depends(svc).items():
            assert dep in doc["services"], f"{name}: depends on undefined service {dep}"
            assert dep != name, f"{name}: depends on itself"
            c = (cond or {}).get("condition", "service_started")
            assert c in ("service_started", "service_healthy", "service_completed_successfully"), \
                f"{name}: unknown condition {c}"


def check_echo(doc, text):
    svc = doc["services"]["echo"]
    assert "mendhak/http-https-echo" in str(svc.get("image")), "echo: not the http-https-echo image"
    port = environ(svc).get("HTTP_PORT", "8080")
    # the example in the comments must work: its callback host:port is the
    # echo service, and it posts to a port a tickd replica publishes
    m = re.search(r'"callback_url"\s*:\s*"http://([\w-]+):(\d+)/', text)
    assert m, "no callback example in the comments"
    assert m.group(1) in doc["services"] and m.group(2) == port, \
        f"example calls back {m.group(1)}:{m.group(2)}; echo listens on {port}"
    m = re.search(r"curl -X POST localhost:(\d+)/v1/tasks", text)
    _, _, tickd, _ = classify(doc)
    assert m and any(m.group(1) == h for n in tickd for h, _ in published(doc["services"][n])), \
        "the curl example does not name a published tickd port"


def run_tickd(flags, env):
    """Start tickd with a service's flags and environment on the memory store
    and a free loopback port: everything tickd checks at start-up is checked.
    Returns None when it started, else its error output."""
    args = []
    longs, shorts = tickd_flags()
    for n, v in parse_tickd_args(flags, longs, shorts):
        if n == "listen" or (n == "store" and v == "redis"):
            continue
        args += [f"--{n}"] + ([v] if v is not None else [])
    args += ["--listen", "127.0.0.1:0"] + ([] if "--store" in args else ["--store", "memory"])
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TICKD_")}
    clean.update({k: v for k, v in env.items() if v is not None})
    if clean.get("TICKD_SERVER_STORE") == "redis":
        del clean["TICKD_SERVER_STORE"]  # the memory store instead, as for --store redis
    p = subprocess.Popen([TICKD] + args, env=clean, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    out = ""
    try:
        end = time.time() + 10
        while time.time() < end and p.poll() is None:
            line = p.stderr.readline()
            out += line
            if " listening on " in line:
                return None
        return out + (p.stderr.read() if p.poll() is not None else "")
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def check_tickd_starts(doc):
    _, _, tickd, _ = classify(doc)
    for name in tickd:
        svc = doc["services"][name]
        err = run_tickd(svc.get("command") or [], environ(svc))
        assert err is None, f"{name}: tickd refuses its command/environment:\n{err}"


# ---- Dockerfile -------------------------------------------------------------

def dockerfile_stages(text):
    """[(FROM line, [(INSTRUCTION, args)])] with continuations joined."""
    text = re.sub(r"\\\n", " ", "\n".join(
        l for l in text.splitlines() if not l.lstrip().startswith("#")))
    stages = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        instr, _, args = line.partition(" ")
        instr, args = instr.upper(), " ".join(args.split())
        if instr == "FROM":
            stages.append((args, []))
        else:
            assert stages, f"{instr} before FROM"
            stages[-1][1].append((instr, args))
    return stages


def apt_installed(instrs):
    pkgs = set()
    for instr, args in instrs:
        if instr != "RUN":
            continue
        for cmd in re.split(r"&&|;|\|\|", args):
            words = cmd.split()
            if "apt-get" in words and "install" in words:
                pkgs |= {w for w in words[words.index("install") + 1:]
                         if not w.startswith("-") and "=" not in w}
    return pkgs


def deps_sh_packages():
    with open(os.path.join(ROOT, "scripts", "deps.sh")) as f:
        m = re.search(r"pkgs=\((.*?)\)", f.read(), re.S)
    return set(m.group(1).split())


def check_dockerfile(text):
    stages = dockerfile_stages(text)
    assert len(stages) >= 2, "not a multi-stage build"
    for frm, _ in stages:
        image = frm.split()[0]
        assert re.match(r"debian:(12|bookworm)(-slim)?(@|$)", image), f"FROM {image}: not Debian 12"
    build_from, build = stages[0]
    build_name = build_from.split()[-1] if " as " in build_from.lower() else "0"
    run = " ; ".join(a for i, a in build if i == "RUN")
    pkgs = apt_installed(build)
    for p in LINKED_DEV:
        assert p in deps_sh_packages(), f"{p} is not in scripts/deps.sh"
        assert p in pkgs, f"build stage does not install {p}"
    assert {"gcc", "make"} <= pkgs, "build stage lacks gcc or make"
    assert re.search(r"\bmake\b[^;&]*\binstall\b", run), "build stage does not run make install"
    copied = [a.split() for i, a in build if i in ("COPY", "ADD")]
    sources = {s.rstrip("/") for c in copied for s in c[:-1] if not s.startswith("--")}
    if "." not in sources:
        for need in ("Makefile", "cmd", "src", "lua", "conf"):
            assert need in sources, f"build stage does not copy {need}"
    else:  # the whole context: a host build/ must be kept out
        with open(os.path.join(ROOT, ".dockerignore")) as f:
            assert re.search(r"^/?build/?$", f.read(), re.M), ".dockerignore lacks build/"

    _, final = stages[-1]
    final_pkgs = apt_installed(final)
    dev = sorted(p for p in final_pkgs if p.endswith("-dev") or p in ("gcc", "make"))
    assert not dev, f"runtime stage installs build packages: {dev}"
    for p in ("ca-certificates", "curl"):
        assert p in final_pkgs, f"runtime stage does not install {p}"
    for p in runtime_packages() or RUNTIME_FALLBACK:
        assert p in final_pkgs, f"runtime stage does not install {p} (tickd links it)"
    for f, dst in [("/usr/local/bin/tickd", "/usr/local/bin/tickd"),
                   ("/usr/local/share/tickd", "/usr/local/share/tickd")]:
        hit = [a for i, a in final if i == "COPY" and f"--from={build_name}" in a
               and f in a.split()[:-1]]
        assert hit, f"runtime stage does not COPY --from={build_name} {f}"
        assert hit[0].split()[-1].rstrip("/") in (dst, os.path.dirname(dst)), \
            f"{f} copied to {hit[0].split()[-1]}"
    user = [a for i, a in final if i == "USER"]
    assert user and user[-1].split(":")[0] not in ("root", "0"), "runtime runs as root"
    assert any(i == "EXPOSE" and "8080" in a.split() for i, a in final), "no EXPOSE 8080"
    hc = [a for i, a in final if i == "HEALTHCHECK"]
    assert hc and "curl" in hc[-1] and "/healthz" in hc[-1], "no curl /healthz HEALTHCHECK"
    ep = [a for i, a in final if i == "ENTRYPOINT"]
    assert ep and ep[-1] == '["tickd"]', f"ENTRYPOINT {ep}"
    cmd = [a for i, a in final if i == "CMD"]
    assert cmd and re.sub(r"\s", "", cmd[-1]) == '["--listen","0.0.0.0:8080"]', f"CMD {cmd}"


def check_makefile_links():
    """The libraries of LINKED_DEV are exactly what the Makefile links."""
    with open(os.path.join(ROOT, "Makefile")) as f:
        m = re.search(r"^LDLIBS\s*[:+]?=(.*)$", f.read(), re.M)
    libs = set(re.findall(r"-l(\w+)", m.group(1))) - {"pthread", "m"}
    assert libs == {l for ls in LINKED_DEV.values() for l in ls}, \
        f"Makefile links {sorted(libs)}; update LINKED_DEV and the Dockerfile"


@functools.lru_cache(maxsize=None)
def runtime_packages():
    """Debian packages of the shared libraries build/tickd needs (but libc):
    the image's binary, whichever binary the suite runs (TICKD_BIN may be a
    sanitizer build, which links the sanitizers' runtimes besides)."""
    tickd = os.path.join(ROOT, "build", "tickd")
    if not (shutil.which("readelf") and shutil.which("dpkg") and os.access(tickd, os.X_OK)):
        return frozenset()
    needed = re.findall(r"\(NEEDED\).*\[(.+)\]",
                        subprocess.run(["readelf", "-d", tickd], capture_output=True,
                                       text=True).stdout)
    where = dict(re.findall(r"^\s*(\S+) => (/\S+)", subprocess.run(
        ["ldd", tickd], capture_output=True, text=True).stdout, re.M))
    pkgs = set()
    for so in needed:
        if so.startswith(("libc.so", "ld-linux")) or so not in where:
            continue
        for path in (where[so], "/usr" + where[so], os.path.realpath(where[so])):
            r = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True)
            if r.returncode == 0:
                pkgs.add(r.stdout.split(":")[0])
                break
    return frozenset(pkgs)


# ---- the tests --------------------------------------------------------------

@pytest.fixture(scope="module")
def compose():
    return load_compose()


@pytest.fixture(scope="module")
def dockerfile_text():
    with open(DOCKERFILE) as f:
        return f.read()


def test_compose_parses(compose):
    doc, _ = compose
    assert doc["services"]


def test_services(compose):
    check_layout(compose[0])


def test_redis_nodes_clustered(compose):
    check_redis_nodes(compose[0])


def test_cluster_init(compose):
    check_cluster_init(compose[0])


def test_tickd_commands_use_real_flags(compose):
    check_tickd_commands(compose[0])


def test_tickd_env_vars_are_real_keys(compose):
    check_tickd_env(compose[0])


def test_tickd_starts_with_its_command_and_env(compose):
    check_tickd_starts(compose[0])


def test_tickd_build_and_order(compose):
    check_tickd_services(compose[0])


def test_published_ports_unique(compose):
    check_ports_unique(compose[0])


def test_depends_on_exist(compose):
    check_depends_exist(compose[0])


def test_echo_and_example(compose):
    check_echo(*compose)


def test_dockerfile(dockerfile_text):
    check_dockerfile(dockerfile_text)


def test_makefile_links_what_the_dockerfile_installs():
    check_makefile_links()


def test_runtime_packages_known():
    if not shutil.which("dpkg"):
        pytest.skip("no dpkg")
    assert runtime_packages() >= {"libhiredis0.14", "libinih1"}


# ---- the checks can fail ----------------------------------------------------

def _svc(doc, name):
    return doc["services"][name]


def _set_cmd(name, fn):
    def mutate(doc):
        _svc(doc, name)["command"] = fn(list(_svc(doc, name)["command"]))
    return mutate


COMPOSE_BREAKAGES = {
    "typo'd flag": (_set_cmd("tickd-2", lambda c: [x.replace("--redis", "--rediss") for x in c]),
                    check_tickd_commands),
    "positional argument": (_set_cmd("tickd-1", lambda c: c + ["extra"]), check_tickd_commands),
    "unknown redis host": (_set_cmd("tickd-3", lambda c: [x.replace("redis-2:", "redis-9:")
                                                          for x in c]), check_tickd_commands),
    "wrong redis port": (_set_cmd("tickd-1", lambda c: [x.replace("redis-1:6379", "redis-1:6380")
                                                        for x in c]), check_tickd_commands),
    "bad flag value": (_set_cmd("tickd-1", lambda c: c + ["--store", "memroy"]),
                       check_tickd_starts),
    "missing redis node": (lambda d: d["services"].pop("redis-6"), check_layout),
    "missing tickd": (lambda d: d["services"].pop("tickd-3"), check_layout),
    "missing echo": (lambda d: d["services"].pop("echo"), check_layout),
    "cluster disabled": (_set_cmd("redis-4", lambda c: [x.replace("yes", "no") for x in c]),
                         check_redis_nodes),
    "init misses a node": (_set_cmd("redis-cluster-init",
                                    lambda c: [x.replace("redis-5:6379", "") for x in c]),
                           check_cluster_init),
    "init without replicas": (_set_cmd("redis-cluster-init",
                                       lambda c: [x.replace("--cluster-replicas 1",
                                                            "--cluster-replicas 0") for x in c]),
                              check_cluster_init),
    "unknown env var": (lambda d: _svc(d, "tickd-2").setdefault("environment", {}).update(
        {"TICKD_REDIS_NODE": "x:1"}), check_tickd_env),
    "bad env value": (lambda d: _svc(d, "tickd-2").setdefault("environment", {}).update(
        {"TICKD_SERVER_WORKERS": "many"}), check_tickd_starts),
    "duplicate port": (lambda d: _svc(d, "tickd-3").update(ports=["8081:8080"]),
                       check_ports_unique),
    "dangling depends_on": (lambda d: _svc(d, "tickd-1").update(
        depends_on={"redis-cluster-inti": {"condition": "service_completed_successfully"}}),
        check_depends_exist),
    "tickd does not wait for init": (lambda d: _svc(d, "tickd-1").update(
        depends_on=["redis-cluster-init"]), check_tickd_services),
    "tickd builds elsewhere": (lambda d: _svc(d, "tickd-2").update(build={"context": "bench"}),
                               check_tickd_services),
}


@pytest.mark.parametrize("what", sorted(COMPOSE_BREAKAGES))
def test_compose_checks_catch(compose, what):
    mutate, check = COMPOSE_BREAKAGES[what]
    doc = copy.deepcopy(compose[0])
    mutate(doc)
    with pytest.raises(AssertionError):
        check(doc)


DOCKERFILE_BREAKAGES = {
    "older Debian": lambda t: t.replace("debian:12-slim", "debian:11-slim", 1),
    "no libinih-dev": lambda t: t.replace(" libinih-dev", "", 1),
    "no libhiredis-dev": lambda t: t.replace("libhiredis-dev ", "", 1),
    "no make install": lambda t: t.replace("make install", "true", 1),
    "runtime lib missing": lambda t: t.replace(" libinih1", "", 1),
    "runs as root": lambda t: re.sub(r"^USER .*$", "USER root", t, flags=re.M),
    "no healthcheck": lambda t: t.replace("\nHEALTHCHECK ", "\n# HEALTHCHECK ", 1),
    "healthcheck off /healthz": lambda t: t.replace("8080/healthz", "8080/", 1),
    "other entrypoint": lambda t: t.replace('ENTRYPOINT ["tickd"]', 'ENTRYPOINT ["sh"]', 1),
    "lua not copied": lambda t: t.replace("COPY --from=build /usr/local/share/tickd", "# ", 1),
}


@pytest.mark.parametrize("what", sorted(DOCKERFILE_BREAKAGES))
def test_dockerfile_check_catches(dockerfile_text, what):
    broken = DOCKERFILE_BREAKAGES[what](dockerfile_text)
    assert broken != dockerfile_text, "the breakage no longer applies; update it"
    with pytest.raises(AssertionError):
        check_dockerfile(broken)
