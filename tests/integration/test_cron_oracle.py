"""tickd's cron runs and zone offsets against implementations nobody here wrote.

- Zones: tz.c's UTC offsets against CPython's zoneinfo, for every zone on the
  machine, around every transition and far past the tables (POSIX TZ footers).
- Cron: the npm package croner (tests/node) against tickd's cron_next, through
  build/tools/cron_next, for 300+ expressions in six zones, from ordinary start
  points and from just before and after every DST transition of 2026 and 2027.

Two oracles for the cron runs, because croner's DST rule is not tickd's:
1. RULE: croner as a pure wall-clock matcher (its UTC mode), mapped onto the zone
   by zoneinfo with tickd's stated rule: a wall time in a gap runs once at the
   gap's end, one in a fold once at its first occurrence. tickd must equal
   this everywhere.
2. CRONER in its own time-zone mode. tickd must equal it whenever no matching
   wall time of the window falls in a gap or fold; where one does, the two may
   differ, and every difference seen is checked to be one of croner's
   documented-here rules (test_croner_dst_rule_differs shows both).

Day fields follow Vixie cron (either day matches when neither field starts
with `*`); croner's default treats `*/2` as restricted, so the queries pass
croner's domAndDow option as Vixie's rule decides (test_croner_day_rule_differs).
"""

import datetime as dt
import json
import os
import random
import subprocess
from zoneinfo import ZoneInfo, available_timezones

import pytest

from harness import SANITIZED

# cron_next is built from the release objects, and nothing here runs tickd:
# tested once, by make integration
pytestmark = pytest.mark.skipif(SANITIZED, reason="cron_next is the release build")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOOL = os.path.join(ROOT, "build", "tools", "cron_next")
NODE_DIR = os.path.join(ROOT, "tests", "node")
ZONES = ["UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe",
         "Asia/Kathmandu", "America/Sao_Paulo"]
N = 5
UTC = dt.timezone.utc


# ---- processes ---------------------------------------------------------------

class Lines:
    """A child answering one line per query line."""

    def __init__(self, args, cwd=None):
        self.p = subprocess.Popen(args, cwd=cwd, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, bufsize=1)

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        out = self.p.stdout.readline()
        assert out, f"{self.p.args[0]} died answering {line!r}"
        return out.rstrip("\n")

    def close(self):
        self.p.stdin.close()
        self.p.wait(10)


@pytest.fixture(scope="module")
def tool():
    assert os.access(TOOL, os.X_OK), f"{TOOL} missing: make build/tools/cron_next"
    t = Lines([TOOL])
    yield t
    t.close()


@pytest.fixture(scope="module")
def croner():
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "croner")):
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True)
    c = Lines(["node", "cron_oracle.mjs"], cwd=NODE_DIR)
    yield c
    c.close()


def tickd_next(tool, expr, zone, after_ms, n=N):
    out = tool.ask(f"next {zone} {after_ms} {n} {expr}")
    assert out.startswith("ok"), f"tickd refused {expr!r}: {out}"
    return [int(x) for x in out.split()[1:] if x != "never"]


def vixie_and(expr):
    """croner's domAndDow for Vixie's day rule: AND unless both day fields are
    restricted (neither starts with `*`). Macros are left to croner."""
    if expr.startswith("@"):
        return None
    f = expr.split()
    return f[-3].startswith("*") or f[-1].startswith("*")


def croner_next(croner, expr, zone, after_ms, n=N):
    q = {"expr": expr, "tz": zone, "after_ms": after_ms, "n": n}
    if vixie_and(expr) is not None:
        q["domAndDow"] = vixie_and(expr)
    a = json.loads(croner.ask(json.dumps(q)))
    if a.get("err") == "Maximum call stack size exceeded":
        return None  # croner recurses month by month on days that never come
    assert "err" not in a, f"croner refused {expr!r}: {a['err']}"
    return a["runs"]


# ---- the stated DST rule over zoneinfo -----------------------------------------

def wall_of(zi, t):
    """Wall-clock time of instant t (s) as local seconds."""
    d = dt.datetime.fromtimestamp(t, zi)
    return t + int(d.utcoffset().total_seconds())


def instants_of(zi, w):
    """(kind, instants) for wall time w (local seconds): ("one", [u]),
    ("fold", [u0, u1]) or ("gap", [end of the gap])."""
    naive = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=w)
    cands = sorted({int(naive.replace(tzinfo=zi, fold=f).timestamp()) for f in (0, 1)})
    real = [u for u in cands if wall_of(zi, u) == w]
    if len(real) == 2:
        return "fold", real
    if real:
        return "one", real
    # a gap: zoneinfo's two readings straddle the change; find it
    lo, hi = cands[0], cands[-1]
    off_hi = wall_of(zi, hi) - hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if wall_of(zi, mid) - mid == off_hi:
            hi = mid
        else:
            lo = mid
    return "gap", [hi]


def rule_next(croner, expr, zone, after_ms, n=N):
    """tickd's stated rule, computed from croner's wall-clock matches and
    zoneinfo: (runs in ms, whether a gap or fold touched the window)."""
    zi = ZoneInfo(zone)
    after_s = after_ms // 1000
    offs = [wall_of(zi, after_s + k * 3600) - (after_s + k * 3600) for k in range(-27, 28)]
    w = after_s + min(offs) - 1  # no wall time before this can run after after_ms
    out, touched, batch = [], False, n + 3
    while len(out) < n:
        walls = croner_next(croner, expr, "UTC", w * 1000, batch)
        if walls is None:
            return None, False
        for wm in walls:
            kind, us = instants_of(zi, wm // 1000)
            u = us[0]
            if u * 1000 > after_ms and (not out or u > out[-1]):
                touched |= kind != "one"
                out.append(u)
                if len(out) == n:
                    break
            elif kind != "one" and u * 1000 > after_ms - 3 * 3600 * 1000:
                touched = True
        if len(walls) < batch:
            break
        w = walls[-1] // 1000
        batch = min(batch * 2, 4096)
    return [u * 1000 for u in out], touched


# ---- the expressions ---------------------------------------------------------------

HAND = [
    "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly",
    "* * * * *", "*/5 * * * *", "*/15 * * * *", "0 * * * *", "30 * * * *", "0 */2 * * *",
    "0 0 * * *", "30 2 * * *", "0 2 * * *", "15 1 * * *", "45 1 * * *", "0,30 1-3 * * *",
    "*/10 2 * * *", "0 3 * * *", "59 1 * * *", "0 1 * * *", "30 0 * * *", "0 9 * * MON-FRI",
    "0 9 * * 1-5", "0 18 * * fri", "0 0 1 * *", "0 0 15 * *", "0 0 1,15 * *", "0 12 1 1 *",
    "0 0 1 JAN,APR,JUL,OCT *", "0 0 * mar-nov *", "0 0 1 1 *",
    "0 0 29 2 *", "0 0 31 * *", "0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 13 * 5",
    "0 0 1 * MON", "0 20 1 * mon", "0 0 */2 * 1", "0 0 1-7 * 0", "0 0 8-14 * sun",
    "0 0 * * 7", "0 0 * * 0,7", "0 0 * * 5-7", "0 0 * * */2", "0 0 * * 1-7/2", "0 0 * * SAT,SUN",
    "0 0 1-31/2 * 1", "0 0 10-20 * wed", "0 0 */10 * *", "0 0 5-25/5 2 *", "5-55/10 * * * *",
    "0-59/7 * * * *", "*/7 */3 * * *", "0 22-23,0-2 * * *", "0 12 * */3 *", "0 0 1 */2 *",
    "0 6 * APR-SEP/2 *", "1,2,3 4,5 6,7 8,9 1,2", "59 23 31 12 *", "0 0 * * TUE,THU",
    "* 2 * * *", "*/30 1-2 * * *", "0,15,30,45 0-3 * * *", "0 2 8-14 3 0", "0 1 1-7 11 0",
    "30 1 * 3,10 0", "0 2 * 4,10 0", "*/20 1-3 * 10,4 0",
    # with seconds
    "* * * * * *", "*/15 * * * * *", "0 * * * * *", "30 30 2 * * *", "0 0 2 * * *",
    "*/30 */30 1-3 * * *", "10,20 */5 * * * *", "0 0 0 1 * *", "45 59 1 * * *",
    "0-10/5 0 2 * * SUN", "0 30 1 * * *", "59 59 23 * * *", "0 0 12 * * mon-fri",
    "30 */15 1-2 * * *", "0 0 */6 * * *", "5 4 3 2 1 *",
]

POOLS = {
    "sec": ["0", "*/15", "30", "0,30", "*/20", "10-50/20", "5", "0-10", "45", "59"],
    "min": ["*", "0", "30", "*/5", "*/15", "0,30", "15-45/10", "0-59/7", "*/7", "5,10,20",
            "59", "1-3", "*/20", "45", "0-29", "20-40"],
    "hour": ["*", "0", "2", "1-3", "*/2", "0-23/5", "1,2,3", "2-4", "*/3", "9-17",
             "22-23,0-2", "12", "1", "3", "0-6/2", "1", "2", "0-3"],
    "dom": ["*", "*", "*", "1", "15", "*/2", "1-7", "10-20", "31", "29", "1,15", "*/10",
            "5-25/5", "30", "8-14"],
    "mon": ["*", "*", "*", "1", "*/3", "JAN-MAR", "mar,nov", "10-12", "feb", "*/2",
            "APR-SEP/2", "3", "11", "oct-dec", "1,4,7,10", "3,4,9,10,11"],
    "dow": ["*", "*", "*", "0", "1-5", "MON-FRI", "sun", "6,0", "7", "*/2", "1-7/2", "sat",
            "TUE,THU", "5-7", "MON", "0-6", "Sun"],
}


def expressions():
    rng = random.Random(13)
    seen, out = set(), []
    for e in HAND:
        if e not in seen:
            seen.add(e)
            out.append(e)
    while len(out) < 320:
        f = [rng.choice(POOLS[k]) for k in ("min", "hour", "dom", "mon", "dow")]
        if rng.random() < 0.3:
            f.insert(0, rng.choice(POOLS["sec"]))
        e = " ".join(f)
        if e not in seen:
            seen.add(e)
            out.append(e)
    return out


EXPRS = expressions()


def transitions(zone, years=(2026, 2027)):
    """Instants (s) where zone's UTC offset changes from the first year to the
    end of the last, by zoneinfo."""
    zi = ZoneInfo(zone)
    t0 = int(dt.datetime(years[0], 1, 1, tzinfo=UTC).timestamp())
    t1 = int(dt.datetime(years[-1] + 1, 1, 1, tzinfo=UTC).timestamp())
    off = lambda t: wall_of(zi, t) - t  # noqa: E731
    out = []
    for t in range(t0, t1, 3600):
        if off(t) != off(t + 3600):
            lo, hi = t, t + 3600
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if off(mid) == off(t):
                    lo = mid
                else:
                    hi = mid
            out.append(hi)
    return out


def starts(zone):
    base = [1767225600000,  # 2026-01-01T00:00:00Z, exactly on a second
            1781526896789]  # 2026-06-15T12:34:56.789Z
    for t in transitions(zone):
        base += [t * 1000 - 2 * 3600 * 1000, t * 1000 - 1, t * 1000 + 1000]
    return base


# ---- tests ----------------------------------------------------------------------

def test_expression_set_is_broad():
    assert len(EXPRS) >= 300
    six = [e for e in EXPRS if not e.startswith("@") and len(e.split()) == 6]
    assert len(six) >= 50
    assert sum(e.startswith("@") for e in EXPRS) == 7
    # both day fields restricted (Vixie's OR) and names in both name fields
    assert sum(not vixie_and(e) for e in EXPRS if not e.startswith("@")) >= 40
    assert any(c.isalpha() for e in EXPRS for c in e.split()[-1] if not e.startswith("@"))


def test_transitions_found():
    # New York, London, Lord Howe change twice a year; Kathmandu and Sao Paulo
    # (no DST since 2019) do not
    for z in ("America/New_York", "Europe/London", "Australia/Lord_Howe"):
        assert len(transitions(z)) == 4, z
    for z in ("UTC", "Asia/Kathmandu", "America/Sao_Paulo"):
        assert transitions(z) == [], z


@pytest.mark.long
@pytest.mark.parametrize("zone", ZONES)
def test_cron_matches_oracles(tool, croner, zone):
    checked = differ = touched_n = 0
    mismatches, unanswered = [], set()
    changes = transitions(zone, (2026, 2045))  # five runs may reach years ahead
    for after in starts(zone):
        for e in EXPRS:
            ours = tickd_next(tool, e, zone, after)
            rule, touched = rule_next(croner, e, zone, after)
            theirs = croner_next(croner, e, zone, after)
            if rule is None or theirs is None:
                # croner cannot compute it (impossible days); tickd says never
                assert ours == [], (e, after, ours)
                unanswered.add(e)
                continue
            checked += 1
            touched_n += touched
            if ours != rule:
                mismatches.append((e, after, ours, rule))
            if ours != theirs:
                differ += 1
                # only where a matching wall time fell in a gap or fold, and
                # only in runs within 3 h of a change (later runs then agree)
                assert touched, (f"{zone} {e!r} after {after}: tickd {ours} != croner "
                                 f"{theirs} with no DST change involved")
                upto = min(ours[-1], theirs[-1]) if ours and theirs else 0
                for m in set(ours) ^ set(theirs):
                    if m <= upto:
                        assert any(abs(m - c * 1000) <= 3 * 3600 * 1000 for c in changes), \
                            (zone, e, after, ours, theirs, m)
    assert not mismatches, f"{len(mismatches)} of {checked} differ from the rule, e.g. {mismatches[:5]}"
    if zone in ("America/New_York", "Europe/London", "Australia/Lord_Howe"):
        assert touched_n > 100  # the DST start points did reach gaps and folds
    else:
        assert differ == 0 and touched_n == 0
    assert len(unanswered) <= 3, unanswered
    print(f"{zone}: {checked} queries, {touched_n} touching DST, {differ} differ from croner; "
          f"croner cannot answer {sorted(unanswered)}")


def iso(ms, zone):
    return dt.datetime.fromtimestamp(ms / 1000, ZoneInfo(zone)).isoformat()


def test_croner_dst_rule_differs(tool, croner):
    """The documented differences, shown on examples.

    Gap (New York, 2026-03-08, 02:00 EST -> 03:00 EDT): "30 2 * * *" runs at
    03:00 EDT in tickd (the first instant after the gap); croner runs it at
    03:30 EDT (shifted by the gap's length)."""
    after = 1772949600000  # 2026-03-08T01:00:00-05:00
    ours = [iso(m, "America/New_York") for m in tickd_next(tool, "30 2 * * *", "America/New_York", after, 2)]
    theirs = [iso(m, "America/New_York") for m in croner_next(croner, "30 2 * * *", "America/New_York", after, 2)]
    assert ours == ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"]
    assert theirs == ["2026-03-08T03:30:00-04:00", "2026-03-09T02:30:00-04:00"]

    # several matches in one gap make one run in tickd
    ours = [iso(m, "America/New_York") for m in tickd_next(tool, "*/20 2 * * *", "America/New_York", after, 2)]
    assert ours == ["2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00"]

    # Lord Howe, 2026-10-04, 02:00 +10:30 -> 02:30 +11 (a 30-minute gap)
    after = 1791036000000  # 2026-10-04T01:30:00+10:30
    ours = [iso(m, "Australia/Lord_Howe") for m in tickd_next(tool, "15 2 * * *", "Australia/Lord_Howe", after, 1)]
    assert ours == ["2026-10-04T02:30:00+11:00"]

    # Fold (Lord Howe, 2026-04-05, 02:00 +11 -> 01:30 +10:30): "*/15 1-3 * * *"
    # runs 01:30 and 01:45 at their first occurrence (+11) in tickd, and at
    # their second (+10:30) in croner. (In New York's one-hour fold croner
    # also takes the first.)
    after = 1775300000000
    ours = [iso(m, "Australia/Lord_Howe") for m in tickd_next(tool, "*/15 1-3 * * *", "Australia/Lord_Howe", after)]
    theirs = [iso(m, "Australia/Lord_Howe") for m in croner_next(croner, "*/15 1-3 * * *", "Australia/Lord_Howe", after)]
    assert ours == ["2026-04-05T01:00:00+11:00", "2026-04-05T01:15:00+11:00",
                    "2026-04-05T01:30:00+11:00", "2026-04-05T01:45:00+11:00",
                    "2026-04-05T02:00:00+10:30"]
    assert theirs == ["2026-04-05T01:00:00+11:00", "2026-04-05T01:15:00+11:00",
                      "2026-04-05T01:30:00+10:30", "2026-04-05T01:45:00+10:30",
                      "2026-04-05T02:00:00+10:30"]

    # New York fold (2026-11-01, 02:00 EDT -> 01:00 EST): the repeated hour runs once
    after = 1793505600000  # 2026-11-01T00:00:00-04:00
    ours = [iso(m, "America/New_York") for m in tickd_next(tool, "0 * * * *", "America/New_York", after, 3)]
    assert ours == ["2026-11-01T01:00:00-04:00", "2026-11-01T02:00:00-05:00",
                    "2026-11-01T03:00:00-05:00"]


def test_croner_day_rule_differs(tool, croner):
    """Vixie's rule: "*/2" in day-of-month counts as unrestricted, so with a
    weekday the two must both match (odd days that are Mondays). croner's
    default reads it as restricted and runs on either."""
    after = 1767225600000  # 2026-01-01
    ours = tickd_next(tool, "0 0 */2 * 1", "UTC", after, 3)
    assert [iso(m, "UTC")[:10] for m in ours] == ["2026-01-05", "2026-01-19", "2026-02-09"]
    q = {"expr": "0 0 */2 * 1", "tz": "UTC", "after_ms": after, "n": 3}
    theirs = json.loads(croner.ask(json.dumps(q)))["runs"]
    assert [iso(m, "UTC")[:10] for m in theirs] == ["2026-01-03", "2026-01-05", "2026-01-07"]


# ---- zones ------------------------------------------------------------------------

def zone_names():
    zdir = "/usr/share/zoneinfo"
    names = []
    for z in sorted(available_timezones()):
        p = os.path.join(zdir, z)
        if (z.startswith(("posix/", "right/")) or z in ("localtime", "Factory")
                or not os.path.isfile(p)):
            continue
        if all(c.isalnum() or c in "_+-/" for c in z):
            names.append(z)
    return names


def offset_changes(zi, t, end, step=6 * 3600, coarse=8):
    """Each t of t, t + step, ... before end where zi's offset (zoneinfo's
    view) at t + step is not the one at t. Read coarse steps at a time, and
    step by step only where the offset changed: tzdata's closest changes in
    2024-2045 are 7 days apart (Asia/Gaza), so no change and its undoing fall
    between two reads 2 days apart; a scan step by step costs the test most
    of its time (a million zoneinfo reads)."""
    off = lambda u: wall_of(zi, u) - u  # noqa: E731
    out = []
    while t < end:
        wide = t + coarse * step
        if off(wide) != off(t):
            out += [u for u in range(t, min(wide, end), step) if off(u + step) != off(u)]
        t = wide
    return out


@pytest.mark.long
def test_tz_offsets_match_zoneinfo(tool):
    names = zone_names()
    assert len(names) > 300
    rng = random.Random(7)
    t_lo = int(dt.datetime(1900, 1, 1, tzinfo=UTC).timestamp())
    t_hi = int(dt.datetime(2100, 1, 1, tzinfo=UTC).timestamp())
    bad = []
    for z in names:
        zi = ZoneInfo(z)
        ts = [rng.randrange(t_lo, t_hi) for _ in range(60)]
        ts += [rng.randrange(2200000000, 4102444800) for _ in range(20)]  # past the tables (2039+)
        # around each transition of 2024-2045 (zoneinfo's own view of them)
        for t in offset_changes(zi, int(dt.datetime(2024, 1, 1, tzinfo=UTC).timestamp()),
                                int(dt.datetime(2046, 1, 1, tzinfo=UTC).timestamp())):
            ts += [t + k * 900 for k in range(25)]
        out = tool.ask(f"offset {z} " + " ".join(map(str, ts)))
        assert out.startswith("ok"), f"{z}: {out}"
        got = [int(x) for x in out.split()[1:]]
        want = [wall_of(zi, x) - x for x in ts]
        bad += [(z, x, g, w) for x, g, w in zip(ts, got, want) if g != w]
    assert not bad, f"{len(bad)} offsets differ from zoneinfo, e.g. {bad[:10]}"


def test_tz_resolve_matches_zoneinfo(tool):
    """Every wall time around each 2026-2027 transition: gap, fold or one, the
    same instants as zoneinfo reads them."""
    for z in ("America/New_York", "Europe/London", "Australia/Lord_Howe", "America/Sao_Paulo"):
        zi = ZoneInfo(z)
        for t in transitions(z) or [1767225600]:
            w0 = wall_of(zi, t) - 3 * 3600
            for w in range(w0, w0 + 6 * 3600, 300):
                kind, us = instants_of(zi, w)
                n, *got = map(int, tool.ask(f"resolve {z} {w}").split()[1:])
                assert (n, got) == ({"one": 1, "fold": 2, "gap": 0}[kind], us), (z, w)


def test_tz_names_refused(tool):
    for name, why in [("../etc/passwd", "'.'"), ("/etc/localtime", "absolute"),
                      ("Europe//London", "empty"), ("Europe/Lon$don", "outside"),
                      ("Mars/Olympus_Mons", "unknown time zone"), ("a" * 65, "too long"),
                      ("Europe/..", "'.'")]:
        out = tool.ask(f"offset {name} 0")
        assert out.startswith("err ") and why in out, (name, out)
