import pytest

from harness import Receiver, Redis, Tickd


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


@pytest.fixture
def tickd(redis, tickd_factory):
    return tickd_factory(redis).start()
