"""Every answer the integration tests receive through Tickd.request() is
checked against doc/openapi.yaml: its path and method must be described
(or it is a 404/405 error), its status must be one the operation lists (or
its `default`), and its body must validate against that answer's schema
(JSON Schema 2020-12, as OpenAPI 3.1 uses). A mismatch fails the test that
received the answer, naming the endpoint, the status and the schema error."""
import os
import re

import jsonschema
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SPEC_PATH = os.path.join(ROOT, "doc", "openapi.yaml")

with open(SPEC_PATH) as f:
    SPEC = yaml.safe_load(f)

_resolver = jsonschema.RefResolver(base_uri="", referrer=SPEC)
_validators = {}


def _routes():
    """(regex, template) for each path, literal segments before {params}, so
    that /v1/tasks/batch is not taken for /v1/tasks/{id}."""
    out = []
    for tpl in SPEC["paths"]:
        rx = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(tpl)) + "$"
        out.append((tpl.count("{"), tpl, re.compile(rx)))
    return [(rx, tpl) for _, tpl, rx in sorted(out, key=lambda x: x[0])]


ROUTES = _routes()


def _deref(obj):
    while isinstance(obj, dict) and "$ref" in obj:
        obj = _resolver.resolve(obj["$ref"])[1]
    return obj


def _validator(key, schema):
    v = _validators.get(key)
    if v is None:
        v = jsonschema.Draft202012Validator(schema, resolver=_resolver)
        _validators[key] = v
    return v


ERROR_SCHEMA = {"$ref": "#/components/schemas/Error"}


def check(method, target, status, body):
    """Raise AssertionError when the answer is not as the document says.
    body: the parsed JSON, None for no body, bytes when not JSON."""
    path = target.split("?", 1)[0]
    where = f"{method} {path} -> {status}"
    tpl = next((t for rx, t in ROUTES if rx.match(path)), None)
    op = SPEC["paths"][tpl].get(method.lower()) if tpl else None
    if op is None:
        # not described: only an error may come back
        assert status in (400, 401, 403, 404, 405, 413, 414, 415, 431), \
            f"{where}: not in doc/openapi.yaml"
        schema, key = ERROR_SCHEMA, "error"
    else:
        responses = op["responses"]
        resp = responses.get(str(status)) or responses.get("default")
        assert resp is not None, f"{where}: status not in doc/openapi.yaml"
        resp = _deref(resp)
        content = resp.get("content")
        if not content:
            assert body is None, f"{where}: doc/openapi.yaml says no body, got {body!r:.200}"
            return
        if "application/json" not in content:
            return  # text (the metrics)
        schema = content["application/json"].get("schema", {})
        key = (tpl, method, str(status) if str(status) in responses else "default")
    assert body is not None and not isinstance(body, (bytes, str)), \
        f"{where}: doc/openapi.yaml says JSON, got {body!r:.200}"
    errors = sorted(_validator(key, schema).iter_errors(body), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        at = "/".join(str(p) for p in e.absolute_path) or "(the body)"
        raise AssertionError(f"{where}: answer does not match doc/openapi.yaml at {at}: "
                             f"{e.message:.300}")
