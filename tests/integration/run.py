"""make integration: run the integration suite with pytest, in parallel.

The suite mostly waits (on timers, replicas, receivers), not computes, so it
runs in INTEGRATION_WORKERS (default 4) pytest-xdist workers, each with its
own port range (harness.free_port). INTEGRATION_WORKERS=0 runs it serially.
The tests marked `timing` (they assert lateness in ms) run after the rest,
one at a time: a lateness measured while three other workers load the two
CPUs measures them, not tickd. Against the ASan build (SANITIZED_BUILD) they
are left out: there a ms of lateness measures the sanitizer."""
import os
import subprocess
import sys

import pytest

here = os.path.dirname(os.path.abspath(__file__))
workers = int(os.environ.get("INTEGRATION_WORKERS", "4"))
# --durations: the slowest tests, to keep the suite's time in view
args = ["-q", "-p", "no:cacheprovider", "-rfE", "--durations=12"]
parallel = args + (["-n", str(workers)] if workers > 0 else [])
rc = pytest.main(parallel + ["-m", "not timing", here] + sys.argv[1:])
if os.environ.get("SANITIZED_BUILD"):
    # under ASan a ms of lateness measures the sanitizer: the release
    # build's run holds tickd to them
    print("timing tests: run against the release build only")
    sys.exit(rc)
# in a process of its own: pytest.main is meant to run once a process
rc_timing = subprocess.call([sys.executable, "-m", "pytest"] + args +
                            ["-m", "timing", here] + sys.argv[1:])
# 5: no test selected (a run narrowed by arguments to no timing test)
sys.exit(rc or (0 if rc_timing == 5 else rc_timing))
