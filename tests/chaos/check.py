"""The chaos run's checker: python3 tests/chaos/check.py DIR

Reads DIR/history.jsonl (the plan, the faults, every add and cancel with its
answer, the tickd processes, RSS samples, what the API said at the end) and
DIR/arrivals.log (every callback with its arrival time and the tickd process
that sent it), prints the figures, writes DIR/summary.json, and exits 1 on any
violation:

- lost: a task acknowledged (201, or 200 for the same key) and not cancelled
  never arrived, though the run drained with every fault healed;
- early: a callback arrived before its execute_at (1 ms for rounding). Early
  callbacks sent by the replica whose clock was stepped, while it was, are
  counted apart ("early, clock stepped"), and are violations as well: tickd
  takes its time from Redis, so a stepped clock must not make it fire early;
- cancelled but fired: a DELETE answered 204 before the task was due, and
  the task arrived all the same;
- schedule run made twice: two task ids for the same schedule and run time;
- duplicate without a fault: a callback repeated (an attempt number seen
  again, or any call after a 2xx) with no fault active within
  CHAOS_ATTRIB_S (default 30) seconds before it. Duplicates a fault explains
  are counted by the kind of that fault, and are not violations (at least
  once);
- a crash: a tickd that exited without the nemesis' hand, a sanitizer report,
  PANIC, or a start that failed (a tickd started during an incident must wait
  for Redis, not exit);
- a stop that was not clean: SIGTERM at the end not answered by exit 0;
- memory: a tickd process alive long enough whose RSS in its last minute
  passed its first minute's (after 20 s of warm-up) by over
  CHAOS_RSS_BOUND_MIB (default 32).
"""
import collections
import json
import os
import re
import statistics
import sys

ATTRIB_S = float(os.environ.get("CHAOS_ATTRIB_S", "30"))
RSS_BOUND_MIB = float(os.environ.get("CHAOS_RSS_BOUND_MIB", "32"))
EARLY_GRACE_MS = 1.0
SANITIZER_REPORT = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")
RUN_ID = re.compile(r"\.(\d{13})\.s:([A-Za-z0-9._:-]+):(\d+)$")


def load(d):
    hist = []
    with open(os.path.join(d, "history.jsonl")) as f:
        for ln in f:
            ln = ln.strip()
            if ln:
                try:
                    hist.append(json.loads(ln))
                except ValueError:
                    pass  # a line cut by a run that was stopped
    arrivals = []
    with open(os.path.join(d, "arrivals.log")) as f:
        for ln in f:
            p = ln.split()
            if len(p) >= 7:
                arrivals.append({"t": float(p[0]), "who": p[1], "id": p[2], "attempt": int(p[3]),
                                 "sched": int(p[4]), "path": p[5], "code": int(p[6])})
    return hist, arrivals


def fault_windows(hist):
    """[(start ms, end ms, kind, event)] of every fault made."""
    starts, out = {}, []
    end_of_run = max(e["t"] for e in hist)
    for e in hist:
        if e["ev"] == "fault_start":
            starts[(e["kind"], e["at"])] = e
        elif e["ev"] == "fault_end":
            s = starts.pop((e["kind"], e["at"]), None)
            if s:
                out.append((s["t"], e["t"], e["kind"], s))
    for s in starts.values():  # a fault still on when the run ended
        out.append((s["t"], end_of_run, s["kind"], s))
    return sorted(out, key=lambda w: w[0])


def explain(t, windows):
    """The kind of the latest fault active within ATTRIB_S before t, or None."""
    best = None
    for s, e, kind, _ in windows:
        if s - 1000 <= t <= e + ATTRIB_S * 1000:
            if best is None or s > best[0]:
                best = (s, kind, (t - e) / 1000)
    return best


def main(argv):
    d = argv[0]
    hist, arrivals = load(d)
    cfg = next(e for e in hist if e["ev"] == "config")
    t_start = next((e["t"] for e in hist if e["ev"] == "run_start"), hist[0]["t"])
    t_healed = next((e["t"] for e in hist if e["ev"] == "faults_stopped"), None)
    windows = fault_windows(hist)
    viol, notes = [], []
    fig = collections.OrderedDict()
    fig["seed"] = cfg["seed"]
    fig["seconds"] = cfg["seconds"]

    # faults
    made = collections.Counter(w[2] for w in windows)
    skipped = collections.Counter(e["kind"] for e in hist if e["ev"] == "fault_skipped")
    fig["faults"] = dict(sorted(made.items()))
    fig["faults_skipped"] = dict(sorted(skipped.items()))
    nem_err = [e for e in hist if e["ev"] == "nemesis_error"]
    if nem_err:
        notes.append(f"{len(nem_err)} faults could not be made: {nem_err[0]['what']}")

    # adds and cancels
    adds = [e for e in hist if e["ev"] == "add"]
    acked = {}
    for e in adds:
        if e["code"] in (200, 201):
            acked.setdefault(e["id"], e)
    codes = collections.Counter(str(e["code"]) for e in adds)
    cancels = [e for e in hist if e["ev"] == "cancel"]
    cancel_ok = {}
    for e in cancels:
        if e["code"] == 204:
            cancel_ok.setdefault(e["id"], e)
    fig["adds_sent"] = len(adds)
    fig["add_answers"] = dict(sorted(codes.items()))
    fig["acknowledged"] = len(acked)
    fig["cancels_sent"] = len(cancels)
    fig["cancel_answers"] = dict(sorted(collections.Counter(str(e["code"]) for e in cancels).items()))
    fig["cancelled_204"] = len(cancel_ok)

    by_id = collections.defaultdict(list)
    for a in arrivals:
        by_id[a["id"]].append(a)
    fig["arrivals"] = len(arrivals)

    # a DELETE with no answer, or 503, may have cancelled the task or not
    unsure = {e["id"] for e in cancels if e["code"] not in (204, 404, 409)
              and e.get("err") != "ConnectionRefusedError"} - set(cancel_ok)
    fig["cancel_outcome_unknown"] = len(unsure)
    fig["cancel_unknown_but_cancelled"] = sum(1 for i in unsure if i not in by_id)

    # lost
    want = {i for i in acked if i not in cancel_ok and i not in unsure}
    lost = sorted(i for i in want if i not in by_id)
    fig["expected"] = len(want)
    fig["delivered"] = len(want) - len(lost)
    fig["lost"] = len(lost)
    if lost:
        probes = {e["id"]: e for e in hist if e["ev"] == "probe"}
        states = collections.Counter((probes.get(i) or {}).get("status") or
                                     str((probes.get(i) or {}).get("code")) for i in lost)
        ex = []
        for i in lost[:5]:
            a = acked[i]
            ex.append(f"{i} (acked {a['code']} by {a['tickd']} at +{(a['t1'] - t_start) / 1000:.1f} s, "
                      f"due +{(a['execute_at'] - t_start) / 1000:.1f} s; API now: "
                      f"{(probes.get(i) or {}).get('code')} {(probes.get(i) or {}).get('status')})")
        viol.append(f"lost: {len(lost)} acknowledged tasks never called back (API says: "
                    f"{dict(states)}); e.g. " + "; ".join(ex))
    unacked = [i for i in by_id if i not in acked and ".s:" not in i]
    fig["arrived_not_acknowledged"] = len(unacked)
    # a 503 says nothing was stored, unless it says "stored on the master but
    # not confirmed" (wait_replicas); a task that arrives after another 503
    # was stored all the same
    said = collections.defaultdict(list)
    for e in adds:
        if e.get("key"):
            said[e["key"]].append(e.get("err") or "" if e["code"] == 503 else None)
    key_of = {i: i.rsplit(".", 1)[1] for i in unacked}
    # every add of the key answered 503, none of them "not confirmed"
    stored_503 = [i for i in unacked if said.get(key_of[i]) and all(
        m is not None and "not confirmed" not in m for m in said[key_of[i]])]
    fig["arrived_after_503_not_stored"] = len(stored_503)
    if stored_503:
        notes.append(f"{len(stored_503)} tasks answered 503 (not stored) were stored and called "
                     f"back; e.g. {stored_503[0]}: {said[key_of[stored_503[0]]][0]}")
    fail1 = [i for i in want if acked[i]["path"] == "/f1" and i in by_id]
    fig["retried_once_then_ok"] = sum(1 for i in fail1 if any(a["code"] == 200 for a in by_id[i]))

    # early, with the stepped clock apart
    skew = [(s, e, w) for s, e, k, w in windows if k == "clock_step"]
    early, early_skew = [], []
    for a in arrivals:
        if a["sched"] and a["t"] < a["sched"] - EARLY_GRACE_MS:
            by_skewed = a["who"].startswith(cfg["skewed"] + ":") and any(
                s - 2000 <= a["t"] <= e + 2000 for s, e, _ in skew)
            (early_skew if by_skewed else early).append(a)
    fig["early"] = len(early)
    fig["early_clock_stepped"] = len(early_skew)
    for name, lst in (("early", early), ("early, clock stepped", early_skew)):
        if lst:
            worst = max(a["sched"] - a["t"] for a in lst)
            ex = "; ".join(f"{a['id']} by {a['who']} {a['sched'] - a['t']:.0f} ms early"
                           for a in lst[:3])
            viol.append(f"{name}: {len(lst)} callbacks before their time (worst "
                        f"{worst:.0f} ms); e.g. {ex}")
    lateness = sorted(a["t"] - a["sched"] for a in arrivals if a["sched"] and a["attempt"] == 1)
    if lateness:
        fig["lateness_ms_p50_p99_max"] = [round(lateness[len(lateness) // 2]),
                                          round(lateness[int(len(lateness) * 0.99)]),
                                          round(lateness[-1])]

    # cancelled but fired
    fired_cancelled, late_cancel = [], 0
    for i, c in cancel_ok.items():
        if c["t1"] >= c["execute_at"]:
            late_cancel += 1
            continue
        if i in by_id:
            fired_cancelled.append((i, c, by_id[i][0]))
    fig["cancelled_204_after_due"] = late_cancel
    fig["cancelled_but_fired"] = len(fired_cancelled)
    if fired_cancelled:
        ex = "; ".join(f"{i}: DELETE 204 at +{(c['t1'] - t_start) / 1000:.1f} s, arrived "
                       f"+{(a['t'] - t_start) / 1000:.1f} s from {a['who']}"
                       for i, c, a in fired_cancelled[:3])
        viol.append(f"cancelled but fired: {len(fired_cancelled)}; e.g. {ex}")

    # schedules: each run made once
    runs = collections.defaultdict(set)
    run_calls = 0
    for a in arrivals:
        m = RUN_ID.search(a["id"])
        if m:
            run_calls += 1
            runs[(m.group(2), int(m.group(1)))].add(a["id"])
    twice = {k: v for k, v in runs.items() if len(v) > 1}
    per_sched = collections.Counter(k[0] for k in runs)
    fig["schedule_runs"] = dict(sorted(per_sched.items()))
    fig["schedule_runs_made_twice"] = len(twice)
    if twice:
        k, v = next(iter(twice.items()))
        viol.append(f"schedule runs made twice: {len(twice)}; e.g. {k[0]} at {k[1]}: {sorted(v)}")
    gaps, periods = [], {"every1s": 1000, "every3s": 3000, "cron1s": 1000, "cron5s": 5000}
    for key, period in periods.items():
        times = sorted(t for (k, t) in runs if k == key)
        for a, b in zip(times, times[1:]):
            if b - a > period:
                gaps.append((key, a, b, (b - a) // period - 1, explain(a + period, windows)))
    fig["schedule_runs_missed"] = sum(g[3] for g in gaps)
    unexplained_gaps = [g for g in gaps if g[4] is None]
    if gaps:
        notes.append(f"schedule runs missed: {fig['schedule_runs_missed']} in {len(gaps)} gaps, "
                     f"{len(unexplained_gaps)} with no fault near (catch_up=latest drops runs "
                     f"missed while no replica could make them)")

    # duplicates
    dups = []
    for i, lst in by_id.items():
        lst.sort(key=lambda a: a["t"])
        seen, ok_at = set(), None
        for a in lst:
            if ok_at is not None or a["attempt"] in seen:
                dups.append(a)
            seen.add(a["attempt"])
            if ok_at is None and 200 <= a["code"] < 300:
                ok_at = a["t"]
    dup_kind = collections.Counter()
    unexplained, after_end = [], []
    for a in dups:
        x = explain(a["t"], windows)
        if x:
            dup_kind[x[1]] += 1
            after_end.append(x[2])
        else:
            unexplained.append(a)
    # how long after the end of the fault that explains it a duplicate came
    fig["duplicate_after_fault_end_s_max"] = round(max(after_end), 1) if after_end else None
    fig["duplicates"] = len(dups)
    fig["duplicates_by_fault"] = dict(sorted(dup_kind.items()))
    fig["duplicates_unexplained"] = len(unexplained)
    if unexplained:
        ex = "; ".join(f"{a['id']} attempt {a['attempt']} again at +{(a['t'] - t_start) / 1000:.1f} s "
                       f"from {a['who']}" for a in unexplained[:3])
        viol.append(f"duplicates with no fault within {ATTRIB_S:.0f} s before: "
                    f"{len(unexplained)}; e.g. {ex}")

    # crashes, failed starts, sanitizer reports, stops
    died = [e for e in hist if e["ev"] == "tickd_died"]
    failed = [e for e in hist if e["ev"] == "tickd_start_failed"]
    slow = [e for e in hist if e["ev"] == "tickd_start_slow"]
    fig["tickd_starts"] = sum(1 for e in hist if e["ev"] == "tickd_start")
    fig["tickd_crashed"] = len(died)
    fig["tickd_start_failed"] = len(failed)
    for e in died:
        viol.append(f"crash: {e['name']} (pid {e['pid']}) exited {e['rc']} by itself; log ends: "
                    + e["tail"][-400:].replace("\n", " | "))
    if failed:
        why = collections.Counter(last_error(e["tail"]) for e in failed)
        viol.append(f"failed starts: {len(failed)} tickd starts exited instead of waiting for "
                    f"Redis: " + "; ".join(f"{n}x {w}" for w, n in why.most_common(4)))
    if slow:
        viol.append(f"slow starts: {len(slow)} tickd starts not healthy within their deadline")
    logs = sorted({e["log"] for e in hist if e["ev"] == "tickd_start"})
    for path in logs:
        try:
            with open(path, errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        for pat in SANITIZER_REPORT + ("PANIC",):
            if pat in text:
                at = text.index(pat)
                viol.append(f"{os.path.basename(path)}: {pat}: " +
                            text[at:at + 300].replace("\n", " | "))
    for e in hist:
        if e["ev"] == "tickd_stop" and e["rc"] != 0:
            viol.append(f"unclean stop: {e['name']} answered SIGTERM with {e['rc']}")

    # memory
    rss = collections.defaultdict(list)
    for e in hist:
        if e["ev"] == "rss":
            rss[(e["name"], e["pid"])].append((e["t"], e["kib"]))
    mem = {}
    for (name, pid), s in rss.items():
        span = (s[-1][0] - s[0][0]) / 1000
        if span < 100:
            continue
        w = min(60.0, (span - 20) / 3) * 1000
        first = [k for t, k in s if s[0][0] + 20000 <= t <= s[0][0] + 20000 + w]
        last = [k for t, k in s if t >= s[-1][0] - w]
        if not first or not last:
            continue
        a, b = statistics.median(first) / 1024, statistics.median(last) / 1024
        mem[f"{name}:{pid}"] = {"span_s": round(span), "first_mib": round(a, 1),
                                "last_mib": round(b, 1), "max_mib": round(max(k for _, k in s) / 1024, 1)}
        if b - a > RSS_BOUND_MIB:
            viol.append(f"memory: {name} (pid {pid}) RSS {a:.1f} MiB in its first minute, "
                        f"{b:.1f} MiB in its last (bound +{RSS_BOUND_MIB:.0f} MiB)")
    fig["rss"] = mem
    if not mem:
        notes.append("memory: no tickd process lived long enough to compare its first and last minute")

    drained = next((e for e in hist if e["ev"] == "drained"), None)
    if drained is None:
        viol.append("the run did not drain (stopped early?)")
    if t_healed:
        fig["drain_s"] = round((drained["t"] - t_healed) / 1000, 1) if drained else None

    fig["violations"] = viol
    fig["notes"] = notes
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump(fig, f, indent=1)
    report(fig)
    return 1 if viol else 0


def last_error(tail):
    lines = [ln for ln in tail.splitlines() if " E " in ln or "error" in ln.lower()]
    ln = (lines or tail.splitlines() or ["?"])[-1]
    return re.sub(r"^\S+ [A-Z] ", "", ln)[:160]


def report(fig):
    print(f"chaos: seed {fig['seed']}, {fig['seconds']:.0f} s")
    print("  faults made:    " + ", ".join(f"{k} {v}" for k, v in fig["faults"].items()))
    if fig["faults_skipped"]:
        print("  faults skipped: " + ", ".join(f"{k} {v}" for k, v in fig["faults_skipped"].items()))
    print(f"  adds sent {fig['adds_sent']} (answers {fig['add_answers']}), acknowledged "
          f"{fig['acknowledged']}; cancels {fig['cancels_sent']} ({fig['cancel_answers']})")
    print(f"  expected {fig['expected']} (acknowledged, not cancelled): delivered "
          f"{fig['delivered']}, lost {fig['lost']}; arrived though not acknowledged "
          f"{fig['arrived_not_acknowledged']} (after a 503 that said not stored: "
          f"{fig['arrived_after_503_not_stored']})")
    print(f"  early {fig['early']}, early with the clock stepped {fig['early_clock_stepped']}; "
          f"lateness p50/p99/max {fig.get('lateness_ms_p50_p99_max')} ms")
    print(f"  cancelled (204) but fired {fig['cancelled_but_fired']} (204 after due: "
          f"{fig['cancelled_204_after_due']}); DELETE without an answer or 503: "
          f"{fig['cancel_outcome_unknown']}, of which never fired {fig['cancel_unknown_but_cancelled']}")
    print(f"  schedule runs {fig['schedule_runs']}, made twice {fig['schedule_runs_made_twice']}, "
          f"missed {fig['schedule_runs_missed']}")
    print(f"  duplicates {fig['duplicates']} by fault {fig['duplicates_by_fault']} (at most "
          f"{fig['duplicate_after_fault_end_s_max']} s after the fault's end), unexplained "
          f"{fig['duplicates_unexplained']}")
    print(f"  tickd starts {fig['tickd_starts']}, crashed {fig['tickd_crashed']}, "
          f"failed starts {fig['tickd_start_failed']}")
    for k, v in fig["rss"].items():
        print(f"  rss {k}: {v['first_mib']} -> {v['last_mib']} MiB (max {v['max_mib']}) "
              f"over {v['span_s']} s")
    for n in fig["notes"]:
        print("  note: " + n)
    for v in fig["violations"]:
        print("  VIOLATION: " + v)
    print("chaos: " + ("FAILED" if fig["violations"] else "passed") +
          f" (reproduce the faults with CHAOS_SEED={fig['seed']} CHAOS_SECONDS={fig['seconds']:.0f})")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
