"""The SSRF guard against a listen address written in an unusual way
(a callback to tickd's own API is refused)."""
import pytest


@pytest.mark.parametrize("host", ["0", "[::0]"])
def test_a_wildcard_listener_however_written_is_tickds_own(tickd_factory, host):
    # "0" binds 0.0.0.0 like "0.0.0.0" does; "[::0]" is "[::]": every local
    # address reaches the API, so every one is tickd's own
    t = tickd_factory(store="memory")
    t.host = host
    t.start()
    for url in [f"http://127.0.0.1:{t.port}/v1/tasks", f"http://localhost:{t.port}/v1/tasks",
                f"http://[::1]:{t.port}/v1/tasks"]:
        code, body = t.post({"callback_url": url, "delay_ms": 600000}, expect=None)
        assert code == 400, (url, code, body)
        assert "is tickd's own API" in body["error"]["message"], body

