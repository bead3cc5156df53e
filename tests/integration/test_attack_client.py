"""The callback client against destinations that look like tickd's own
trouble, in a network namespace of its own."""
import json
import os
import subprocess

import pytest

from harness import TICKD


NETNS = r"""
ip link set lo up
sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 \
    net.ipv6.conf.lo.disable_ipv6=1
"$TICKD" --listen 127.0.0.1:18080 --store memory >"$LOG" 2>&1 &
T=$!
for i in $(seq 50); do curl -s -o /dev/null localhost:18080/healthz && break; sleep 0.1; done
ID=$(curl -s -XPOST localhost:18080/v1/tasks -H 'Content-Type: application/json' \
    -d '{"callback_url":"http://[2001:db8::1]/","retry":{"max_attempts":1}}' |
    sed 's/.*"id":"\([^"]*\)".*/\1/')
sleep 3
curl -s localhost:18080/v1/tasks/$ID
kill $T
"""


def test_no_address_to_connect_from_is_the_destinations_failure(tmp_path):
    # where IPv6 is off (many containers), connect() to an IPv6 address says
    # EADDRNOTAVAIL, as it does when the local ports run out; the first is
    # the destination's trouble: the attempt counts and the task ends
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        pytest.skip("no network namespaces here (needs root)")
    env = dict(os.environ, TICKD=TICKD, LOG=str(tmp_path / "tickd.log"))
    out = subprocess.run(["unshare", "-n", "sh", "-c", NETNS], capture_output=True, env=env,
                         timeout=30).stdout
    task = json.loads(out)
    assert task["status"] == "failed" and task["attempts"] == 1, task
    assert "2001:db8::1" in task["last_error"], task
