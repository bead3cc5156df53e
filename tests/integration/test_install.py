"""make install / uninstall, the installed tickd run as a service would run
it (its default config, its installed scripts, sd_notify readiness), the
systemd unit checked by systemd-analyze, the man pages by groff."""
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from harness import ROOT, SANITIZED, log_port, now_ms, wait_for

# make install builds and installs the release build: tested once, by make
# integration
pytestmark = pytest.mark.skipif(SANITIZED, reason="make install installs the release build")


def make(*args):
    p = subprocess.run(["make", "--no-print-directory", "-C", ROOT, *args],
                       capture_output=True, timeout=120)
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()
    return p.stdout.decode()


def files_under(d):
    return sorted(os.path.relpath(os.path.join(r, f), d)
                  for r, _, fs in os.walk(d) for f in fs)


def test_installed_tickd_reads_its_config_uses_its_scripts_and_notifies(tmp_path, redis,
                                                                         receiver):
    prefix, etc = tmp_path / "usr", tmp_path / "etc"
    make("install", f"PREFIX={prefix}", f"SYSCONFDIR={etc}")
    tickd = prefix / "bin" / "tickd"
    unit = prefix / "lib" / "systemd" / "system" / "tickd.service"
    text = unit.read_text()
    assert f"ExecStart={tickd} -c {etc}/tickd/tickd.ini" in text
    assert f"EnvironmentFile=-{etc}/tickd/env" in text
    assert "@BINDIR@" not in text and "@SYSCONFDIR@" not in text
    assert (prefix / "share" / "tickd" / "lua" / "claim.lua").exists()
    assert (prefix / "share" / "man" / "man8" / "tickd.8").exists()
    help_text = subprocess.run([tickd, "--help"], capture_output=True).stdout.decode()
    assert f"without -c: {etc}/tickd/tickd.ini when it exists" in help_text

    # the default config, edited as an admin would: it is read without -c
    conf = etc / "tickd" / "tickd.ini"
    text = conf.read_text()
    text = text.replace("listen = 127.0.0.1:8080", "listen = 127.0.0.1:0")
    text = text.replace("nodes = 127.0.0.1:6379", f"nodes = {redis.addr}")
    conf.write_text(text)

    sock_path = str(tmp_path / "notify.sock")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(sock_path)
    notify.settimeout(15)
    # run from elsewhere: the scripts must come from the install, not the tree
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKD_")}
    env["NOTIFY_SOCKET"] = sock_path
    log = open(tmp_path / "tickd.log", "wb")
    p = subprocess.Popen([tickd], cwd=tmp_path, env=env, stdout=log, stderr=log)
    try:
        # with Redis up: ready when serving
        assert notify.recv(256) == b"READY=1\nSTATUS=serving"
        port = log_port(tmp_path / "tickd.log")  # reported before READY=1
        # ready means serving: the API answers at once
        with socket.create_connection(("127.0.0.1", port), timeout=2) as c:
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert c.recv(64).startswith(b"HTTP/1.1 200")
        import json
        import urllib.request
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/tasks", method="POST",
            headers={"Content-Type": "application/json"},
            data=json.dumps({"callback_url": receiver.url(), "execute_at": now_ms() + 300}).encode())
        with urllib.request.urlopen(req, timeout=5) as r:
            assert r.status == 201
        wait_for(lambda: receiver.count() == 1, 10, what="the callback")
        p.send_signal(signal.SIGTERM)
        assert notify.recv(256) == b"STOPPING=1"
        assert p.wait(30) == 0
    finally:
        if p.poll() is None:
            p.kill()
        log.close()
        notify.close()
    # a second install keeps the admin's config
    make("install", f"PREFIX={prefix}", f"SYSCONFDIR={etc}")
    assert "listen = 127.0.0.1:0" in conf.read_text()


def test_destdir_install_and_uninstall(tmp_path):
    dest = tmp_path / "root"
    make("install", f"DESTDIR={dest}")
    got = files_under(dest)
    want = ["etc/tickd/tickd.ini", "usr/local/bin/tickd",
            "usr/local/lib/systemd/system/tickd.service", "usr/local/share/man/man8/tickd.8"]
    for f in want:
        assert f in got, (f, got)
    lua = sorted(f for f in os.listdir(os.path.join(ROOT, "lua")) if f.endswith(".lua"))
    assert [f for f in got if f.startswith("usr/local/share/tickd/lua/")] == \
        [f"usr/local/share/tickd/lua/{f}" for f in lua]
    if os.path.exists(os.path.join(ROOT, "build", "tickctl")):
        assert "usr/local/bin/tickctl" in got
    unit = (dest / "usr/local/lib/systemd/system/tickd.service").read_text()
    assert "ExecStart=/usr/local/bin/tickd -c /etc/tickd/tickd.ini" in unit
    v = subprocess.run([dest / "usr/local/bin/tickd", "--version"], capture_output=True)
    assert v.returncode == 0 and v.stdout.startswith(b"tickd ")
    out = make("uninstall", f"DESTDIR={dest}")
    assert "kept:" in out
    assert files_under(dest) == ["etc/tickd/tickd.ini"]


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed")
def test_the_unit_passes_systemd_analyze(tmp_path):
    prefix = tmp_path / "usr"
    make("install", f"PREFIX={prefix}", f"SYSCONFDIR={tmp_path / 'etc'}")
    unit = str(prefix / "lib/systemd/system/tickd.service")
    v = subprocess.run(["systemd-analyze", "verify", "--man=no", unit], capture_output=True)
    assert v.returncode == 0 and not v.stderr, v.stderr.decode()
    # the hardening, scored by systemd itself: "OK" is 2.0 or lower
    s = subprocess.run(["systemd-analyze", "security", "--offline=true", "--threshold=20", unit],
                       capture_output=True)
    assert s.returncode == 0, s.stdout.decode()[-600:]
    assert "Type=notify" in open(unit).read()


@pytest.mark.parametrize("page", ["doc/tickd.8", "doc/tickctl.1"])
def test_man_pages_render_without_warnings(page):
    path = os.path.join(ROOT, page)
    if not os.path.exists(path):
        pytest.skip(f"{page} not written")
    g = subprocess.run(["groff", "-man", "-ww", "-z", path], capture_output=True)
    assert g.returncode == 0 and not g.stderr, g.stderr.decode()
    m = subprocess.run(["man", "-l", path], capture_output=True, env=dict(os.environ, MANWIDTH="80"))
    assert m.returncode == 0 and b"SYNOPSIS" in m.stdout
