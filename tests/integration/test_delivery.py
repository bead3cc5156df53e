"""Callbacks: timing to the millisecond, the request as the task says, retries,
final failure, and the states GET shows along the way."""
import json
import os

import pytest

from harness import now_ms, percentile, wait_for
from scenarios import fails_after_max_attempts, request_arrives_exactly, retried_then_succeeds

# Lateness bound asserted for 1000 tasks on a 2-core machine, receiver in the
# same (Python) process as the test: arrival - due.
LATE_P50_MS = 20
LATE_P99_MS = 60


@pytest.mark.timing
def test_1000_tasks_fire_on_their_millisecond(tickd, receiver):
    base = now_ms() + 3000
    tasks = [{"callback_url": receiver.url("/ok"), "key": f"t{i}",
              "execute_at": base + (i * 7) % 4000} for i in range(1000)]
    due = {}
    for i in range(0, 1000, 250):
        for r, t in zip(tickd.batch(tasks[i:i + 250]), tasks[i:i + 250]):
            due[r["id"]] = t["execute_at"]
    wait_for(lambda: receiver.count() >= 1000, 20, what="1000 callbacks")
    tickd.settled()
    calls = receiver.by_task()
    assert set(calls) == set(due)
    assert all(len(c) == 1 for c in calls.values()), "a task fired twice"
    late = [c[0]["t"] - due[tid] for tid, c in calls.items()]
    early = [x for x in late if x < -1.0]
    assert not early, f"{len(early)} tasks fired early, worst {min(early):.1f} ms"
    p50, p99 = percentile(late, 50), percentile(late, 99)
    print(f"\nlateness over 1000 tasks: p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {max(late):.1f} ms")
    assert p50 <= LATE_P50_MS and p99 <= LATE_P99_MS, (p50, p99)


@pytest.mark.timing
def test_tasks_due_soon_pass_tasks_claimed_ahead(redis, receiver, tickd_factory):
    """The room for held tasks (server.max_inflight) goes first to what is
    due soonest: 200 tasks claimed 2.9 s ahead of their time do not keep 60
    tasks due from 0.3 s on from being claimed and called on time."""
    t = tickd_factory(redis, env={"TICKD_SERVER_MAX_INFLIGHT": "64",
                                  "TICKD_SCHEDULER_LOOKAHEAD_MS": "3000"}).start()
    far_at = now_ms() + 2900
    far = t.batch([{"callback_url": receiver.url("/ok"), "key": f"far{i}", "execute_at": far_at}
                   for i in range(200)])
    # each add within the lookahead is claimed at once: the room fills
    wait_for(lambda: t.request("GET", "/v1/stats")[1]["held"] >= 30, 5, what="far tasks held")
    base = now_ms() + 300
    near = t.batch([{"callback_url": receiver.url("/ok"), "key": f"near{i}",
                     "execute_at": base + 10 * i} for i in range(60)])
    due = {r["id"]: base + 10 * i for i, r in enumerate(near)}
    wait_for(lambda: receiver.count() >= 260, 15, what="260 callbacks")
    t.settled()
    calls = receiver.by_task()
    assert set(calls) == set(due) | {r["id"] for r in far}
    assert all(len(c) == 1 for c in calls.values()), "a task fired twice"
    late = sorted(calls[tid][0]["t"] - at for tid, at in due.items())
    print(f"\ndue soon, lateness: p50 {percentile(late, 50):.1f} ms, max {late[-1]:.1f} ms")
    # with the room taken by the far tasks they were 600 ms late or more
    assert late[-1] < 300, late[-10:]



@pytest.mark.timing
def test_a_callback_begins_within_a_millisecond_of_its_due(tickd, receiver):
    """tickd's own timers are exact to the millisecond: 80 tasks due one at a
    time, 23 ms apart, each begin (attempt_history[0].at, written by tickd)
    within a millisecond of their due. An event loop whose clock is the
    kernel's coarse one (4 ms ticks here) began them 2 ms late at the median,
    up to 6 ms."""
    base = now_ms() + 2500
    tasks = [{"callback_url": receiver.url("/ok"), "key": f"m{i}", "execute_at": base + 23 * i}
             for i in range(80)]
    due = {r["id"]: t["execute_at"] for r, t in zip(tickd.batch(tasks), tasks)}
    wait_for(lambda: receiver.count() >= 80, 15, what="80 callbacks")
    tickd.settled()
    late = []
    for tid, at in due.items():
        code, body = tickd.request("GET", f"/v1/tasks/{tid}")
        assert code == 200 and body["status"] == "succeeded", body
        late.append(body["attempt_history"][0]["at"] - at)
    late.sort()
    print(f"\nbegun after due: p50 {percentile(late, 50)} ms, p90 {percentile(late, 90)} ms, "
          f"max {late[-1]} ms")
    assert late[0] >= -1, late[:5]  # (the store's clock is Redis's, read over a round trip)
    assert percentile(late, 50) <= 1 and percentile(late, 90) <= 2, late

def test_request_arrives_exactly(tickd, receiver):
    request_arrives_exactly(tickd, receiver)


def test_500_then_200_is_retried_and_succeeds(tickd, receiver):
    retried_then_succeeds(tickd, receiver)


def test_always_500_fails_after_max_attempts(tickd, receiver):
    fails_after_max_attempts(tickd, receiver)


def test_connection_error_and_timeout_are_retried(tickd, receiver):
    t = tickd.post({"callback_url": "http://127.0.0.1:1/nothing-listens",
                    "retry": {"max_attempts": 2, "backoff_ms": 50}})
    s = tickd.post({"callback_url": receiver.url("/slow/1500"), "timeout_ms": 300,
                    "retry": {"max_attempts": 2, "backoff_ms": 50}})
    wait_for(lambda: tickd.get(t["id"])[1]["status"] == "failed", 10, what="refused fails")
    wait_for(lambda: tickd.get(s["id"])[1]["status"] == "failed", 10, what="timeout fails")
    assert "onnect" in tickd.get(t["id"])[1]["last_error"]
    assert "imeout" in tickd.get(s["id"])[1]["last_error"] or \
        "timed out" in tickd.get(s["id"])[1]["last_error"]


def test_get_shows_each_state(tickd, receiver):
    # claimed (running) from lookahead_ms (1500) before it is due
    t = tickd.post({"callback_url": receiver.url("/slow/1500"), "delay_ms": 2500})
    assert tickd.get(t["id"])[1]["status"] == "scheduled"
    wait_for(lambda: tickd.get(t["id"])[1]["status"] == "running", 5, what="running")
    assert tickd.delete(t["id"])[0] == 409  # its callback is being made
    wait_for(lambda: tickd.get(t["id"])[1]["status"] == "succeeded", 5, what="succeeded")
    r = tickd.post({"callback_url": receiver.url("/fail/1"), "retry": {"backoff_ms": 3000}})
    wait_for(lambda: tickd.get(r["id"])[1].get("attempts") == 1, 5, what="first attempt")
    g = tickd.get(r["id"])[1]
    assert g["status"] == "scheduled" and g["last_error"] == "HTTP 500"
    assert g["next_attempt_at"] > now_ms()
    # a task waiting for its retry can be cancelled: it never fires again
    assert tickd.delete(r["id"])[0] == 204
    # the retry it would have made is past
    tickd.past(receiver, g["next_attempt_at"] + 500)
    assert len(receiver.by_task()[r["id"]]) == 1
    assert tickd.get(r["id"])[1]["status"] == "cancelled"


def test_callbacks_queue_per_host_in_order(redis, receiver, tickd_factory):
    """With one connection per host, callbacks beyond it wait their turn and
    all go out, in due order."""
    t = tickd_factory(redis, env={"TICKD_SERVER_WORKERS": "1",
                                  "TICKD_SERVER_HOST_CONNECTIONS": "1"}).start()
    base = now_ms() + 2000
    res = t.batch([{"callback_url": receiver.url("/slow/20"), "key": f"q{i}",
                    "execute_at": base + i} for i in range(60)])
    wait_for(lambda: receiver.count() >= 60, 15, what="60 queued callbacks")
    calls = receiver.by_task()
    order = sorted(calls, key=lambda i: calls[i][0]["t"])
    assert order == [r["id"] for r in res]


def test_a_timeout_never_cuts_a_call_before_it(tickd, receiver):
    """An attempt cut by its timeout_ms ends no sooner than timeout_ms after
    it was handed to the pool (which is no sooner than its due; the timeout
    covers any wait for a connection, which took_ms leaves out). The main
    loop's timers run on the kernel's coarse clock (4 ms ticks here), which
    cut calls up to a tick early; the call checks its own time first."""
    due = now_ms() + 1500
    tasks = [{"callback_url": receiver.url("/slow/600"), "timeout_ms": 20 + i,
              "retry": {"max_attempts": 1}, "key": f"t{i}", "execute_at": due + 3 * i + i % 4}
             for i in range(100)]
    ids = {r["id"]: t for r, t in zip(tickd.batch(tasks), tasks)}
    wait_for(lambda: all(tickd.get(i)[1]["status"] == "failed" for i in ids), 15,
             what="every call timed out")
    short = []
    for tid, t in ids.items():
        h = tickd.get(tid)[1]["attempt_history"][0]
        assert "within" in h["error"], h
        # the end, from the due (1 ms for the clocks' rounding)
        if h["at"] + h["took_ms"] - t["execute_at"] < t["timeout_ms"] - 1:
            short.append((t["timeout_ms"], h["at"] + h["took_ms"] - t["execute_at"]))
    assert not short, f"cut before their timeout (timeout_ms, ms from due): {short}"


def test_timeout_covers_the_wait_for_a_connection(redis, receiver, tickd_factory):
    """timeout_ms bounds the whole attempt, queueing for a connection to the
    host included, so an attempt always ends within its lease."""
    t = tickd_factory(redis, env={"TICKD_SERVER_WORKERS": "1",
                                  "TICKD_SERVER_HOST_CONNECTIONS": "1"}).start()
    due = now_ms() + 2000
    res = t.batch([{"callback_url": receiver.url("/slow/1500"), "timeout_ms": 1000,
                    "retry": {"max_attempts": 1}, "key": f"w{i}", "execute_at": due}
                   for i in range(3)])
    ids = [r["id"] for r in res]
    wait_for(lambda: all(t.get(i)[1]["status"] == "failed" for i in ids), 10, what="all failed")
    done = now_ms()
    assert done - due < 2500, done - due  # not 3 x 1000 ms one after the other
    errors = [t.get(i)[1]["last_error"] for i in ids]
    assert any("no connection to the host was free" in e for e in errors), errors


FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


@pytest.mark.long
@pytest.mark.skipif(not os.path.exists(FAKETIME), reason="libfaketime (Debian: faketime) missing")
def test_a_wall_clock_step_fires_nothing_early(redis, tickd_factory, receiver, tmp_path):
    """tickd's "now" is Redis TIME carried forward by the monotonic clock:
    the wall clock stepped 30 s ahead (libfaketime, as NTP or an operator
    would) while tasks wait on the wheel fires none of them early (carried by
    the wall clock, "now" jumped until the next TIME reading and tasks fired
    up to lookahead_ms early)."""
    ft = tmp_path / "faketime"
    ft.write_text("+0\n")
    env = {"LD_PRELOAD": FAKETIME, "FAKETIME_TIMESTAMP_FILE": str(ft),
           "FAKETIME_CACHE_DURATION": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    if os.environ.get("SANITIZED_BUILD"):
        # libfaketime preloaded ahead of the ASan runtime: allowed, told so
        env["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
    t = tickd_factory(redis, env=env).start()
    ids = []
    for step in ("+30", "-30"):
        base = now_ms() + 2500
        ids += [t.post({"callback_url": receiver.url(), "execute_at": base + i * 5})["id"]
                for i in range(200)]
        wait_for(lambda: t.metric("tickd_tasks_held") > 0, 5, what="tasks claimed, on the wheel")
        (tmp_path / "next").write_text(step + "\n")
        os.replace(tmp_path / "next", ft)
        wait_for(lambda: set(ids) <= set(receiver.by_task()), 20, what="all delivered")
        ft.write_text("+0\n")
        wait_for(lambda: abs(t.clock_offset_s()) < 5, 5, what="tickd's clock back")
    early = [c for c in receiver.calls if c["t"] < int(c["headers"]["tickd-scheduled-at"]) - 1]
    assert not early, f"{len(early)} callbacks early, e.g. {early[0]['headers']}"


def test_what_a_burst_used_is_kept_and_let_go(redis, receiver, tickd_factory):
    """The jobs and transfers of a burst are kept for the next callbacks (a
    burst makes them once), and let go once no claim or callback took them
    for a while: past 512 jobs, those unused for 10 full scans (tick_ms
    100 here: about a second); past 256 transfers, those unused between two
    sweeps of idle hosts (server.keepalive_ms / 2: half a second here)."""
    t = tickd_factory(redis, env={"TICKD_SERVER_KEEPALIVE_MS": "1000",
                                  "TICKD_SCHEDULER_TICK_MS": "100"}).start()
    at = now_ms() + 4000
    for i in range(0, 1500, 500):
        t.batch([{"callback_url": receiver.url("/ok"), "key": f"b{i + k}", "execute_at": at}
                 for k in range(500)])
    wait_for(lambda: receiver.count() >= 1500, 30, what="1500 callbacks")
    # each task was claimed ahead, and handed to the client at its instant
    # while the connections were busy: 1,500 of each were made, kept once
    # they ended, and some scans and sweeps later let go
    seen, last = [0, 0], [None]

    def let_go():
        stats = t.request("GET", "/v1/stats")[1]
        last[0] = (stats["jobs_kept"], stats["transfers_kept"])
        seen[0], seen[1] = max(seen[0], last[0][0]), max(seen[1], last[0][1])
        return seen[0] > 512 and seen[1] > 256 and last[0][0] <= 512 and last[0][1] <= 256
    try:
        wait_for(let_go, 15, what="what the burst used kept, then let go")
    except AssertionError:
        raise AssertionError(f"kept at most {seen}, now {last[0]}") from None
    t.settled()
    assert receiver.count() == 1500
