"""make integration: run the integration suite with pytest, in parallel.

The suite mostly waits (on timers, replicas, receivers), not computes, so it
runs in INTEGRATION_WORKERS (default 4) pytest-xdist workers, each with its
own port range (harness.free_port). INTEGRATION_WORKERS=0 runs it serially."""
import os
import sys

import pytest

here = os.path.dirname(os.path.abspath(__file__))
workers = int(os.environ.get("INTEGRATION_WORKERS", "4"))
args = ["-q", "-p", "no:cacheprovider", "-rfE", "--durations=12"]
if workers > 0:
    args += ["-n", str(workers)]
# --durations: the slowest tests, to keep the suite's time in view
sys.exit(pytest.main(args + [here] + sys.argv[1:]))
