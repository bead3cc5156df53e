import os

import pytest

from harness import SANITIZER_REPORT, Cluster, Receiver, Redis, Tickd
from receivers import Raw, Scripted

def pytest_configure(config):
    config.addinivalue_line(
        "markers", "timing: asserts lateness in ms; make integration runs these after the "
        "rest, one at a time, with the machine to themselves (run.py)")
    config.addinivalue_line(
        "markers", "long: takes 10 s or more; pytest-xdist workers are handed these first, "
        "so that none ends the run alone in one")


@pytest.hookimpl(trylast=True)  # after -m has deselected
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, the tests marked long go first: its load
    scheduling hands each worker a first batch of len(items) // workers // 4
    consecutive items, then more as it runs out, so the long tests are put
    at the heads of the first batches, a file's long tests in one batch (one
    after another: the cron oracles would take both CPUs side by side), the
    files dealt to the batch with the fewest. Left in file order, one could
    start last and run on alone. Every worker collects the same order, as
    xdist requires."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers < 2:
        return
    files = {}
    for i in items:
        if i.get_closest_marker("long"):
            files.setdefault(i.path, []).append(i)
    if not files:
        return
    heads = [[] for _ in range(workers)]
    for group in sorted(files.values(), key=len, reverse=True):
        min(heads, key=len).extend(group)
    rest = [i for i in items if not i.get_closest_marker("long")]
    batch = max(len(items) // workers // 4, 2)
    order = []
    for head in heads:
        take = max(batch - len(head), 0)
        order += head + rest[:take]
        rest = rest[take:]
    items[:] = order + rest


# quicker failure detection for the cluster tests
FAST = {"TICKD_SCHEDULER_LEASE_MARGIN_MS": "500", "TICKD_REDIS_TIMEOUT_MS": "1000"}


@pytest.fixture
def redis(tmp_path):
    r = Redis(str(tmp_path)).start()
    yield r
    r.stop()


@pytest.fixture
def receiver():
    rec = Receiver()
    yield rec
    rec.close()


@pytest.fixture
def scripted():
    """A raw receiver answering by path (receivers.SCRIPTS)."""
    s = Scripted()
    yield s
    s.close()


@pytest.fixture
def raw_servers():
    """Makes raw receivers, each reading a head and running answer(conn)."""
    made = []

    def make(answer, **kw):
        s = Raw(answer, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


@pytest.fixture
def tickd_factory(tmp_path):
    started = []

    def make(redis=None, **kw):
        t = Tickd(str(tmp_path), redis=redis, **kw)
        started.append(t)
        return t

    yield make
    for t in started:
        if t.proc and t.proc.poll() is None:
            t.kill9()
    # a sanitizer's report fails the test, even when tickd went on
    for t in started:
        if os.path.exists(t.log):
            text = t.logtext()
            found = [r for r in SANITIZER_REPORT if r in text]
            assert not found, f"tickd :{t.port}: sanitizer report:\n{text[-4000:]}"


@pytest.fixture
def tickd(redis, tickd_factory):
    return tickd_factory(redis).start()


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(str(tmp_path)).start()
    yield c
    c.stop()


def replicas(factory, cluster, n=3, env=None):
    """n tickd replicas on the cluster, started."""
    return [factory(cluster.seeds(), env=dict(FAST, **(env or {}))).start() for _ in range(n)]
