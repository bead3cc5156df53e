"""doc/openapi.yaml: linted by @redocly/cli, served by the real binary at
/v1/openapi.json, and the check every answer goes through (openapi_check)
shown to refuse answers that do not match."""
import json
import os
import subprocess
import urllib.request

import pytest
import yaml

import openapi_check
from harness import ROOT

REDOCLY = os.path.join(ROOT, "tests", "node", "node_modules", ".bin", "redocly")


def test_redocly_lint_is_clean():
    p = subprocess.run([REDOCLY, "lint", "--format=stylish", "doc/openapi.yaml"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    problems = [ln for ln in out.splitlines() if " error " in ln or " warning " in ln]
    assert not problems, "\n".join(problems)


def test_served_document_is_the_yaml_and_open(redis, tickd_factory):
    t = tickd_factory(redis, env={"TICKD_SERVER_API_TOKEN": "s3cret"}).start()
    with open(os.path.join(ROOT, "doc", "openapi.yaml")) as f:
        want = yaml.safe_load(f)
    # no token needed, as for /healthz and /metrics
    with urllib.request.urlopen(f"http://127.0.0.1:{t.port}/v1/openapi.json", timeout=10) as r:
        assert r.status == 200 and r.headers["Content-Type"] == "application/json"
        got = json.loads(r.read())
    assert got == want
    assert got["openapi"].startswith("3.1")
    # the rest of /v1/ still wants it
    assert t.request("GET", "/v1/stats")[0] == 401
    code, body = t.request("DELETE", "/v1/openapi.json")
    assert code == 405 and body["error"]["code"] == "method_not_allowed"


@pytest.mark.parametrize("method,path,status,body,why", [
    ("GET", "/v1/tasks/x", 200, {"id": "x"}, "'status' is a required property"),
    ("POST", "/v1/tasks", 201, {"id": "a", "key": "b", "execute_at": 1, "status": "done"},
     "'done' is not one of"),
    ("GET", "/v1/tasks", 200, {"tasks": [], "next_cursor": None, "more": 1},
     "Additional properties"),
    ("POST", "/v1/tasks/batch", 200, {"results": [{"id": "a"}]}, "not valid under any"),
    ("DELETE", "/v1/tasks/x", 204, {"a": 1}, "says no body"),
    ("GET", "/v1/nothing-here", 200, {}, "not in doc/openapi.yaml"),
    ("GET", "/v1/tasks/x", 404, {"error": {"code": "nope", "message": "m"}}, "'nope' is not one"),
    ("GET", "/v1/stats", 200, b"not json", "says JSON"),
])
def test_the_answer_check_refuses_what_the_document_does_not_say(method, path, status, body,
                                                                 why):
    with pytest.raises(AssertionError, match=why.replace("(", r"\(")):
        openapi_check.check(method, path, status, body)
