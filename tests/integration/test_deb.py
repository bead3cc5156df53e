"""The Debian package (debian/, make deb): what it holds and says of itself,
lintian's verdict, and the tickd and tickctl it holds, extracted with
dpkg-deb -x into a temporary root, scheduling and delivering a callback
through a real redis-server to a real receiver.

make test builds the package before the suites run (make deb); here make deb
is then a no-op. Run alone, the first test builds it (about a minute)."""
import fcntl
import glob
import os
import re
import signal
import subprocess

import pytest

from harness import ROOT, SANITIZED, log_port, wait_for

# the package holds the release build: tested once, by make integration
pytestmark = pytest.mark.skipif(SANITIZED, reason="the package holds the release build")

DEB_DIR = os.path.join(ROOT, "build", "deb")


@pytest.fixture(scope="module")
def deb():
    """build/deb/tickd_<version>_<arch>.deb, built by make deb when out of
    date. pytest-xdist may run this module's tests in several workers at
    once: one builds, the others wait on the lock, then find it built."""
    os.makedirs(os.path.join(ROOT, "build"), exist_ok=True)
    with open(os.path.join(ROOT, "build", "deb.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        p = subprocess.run(["make", "--no-print-directory", "-C", ROOT, "deb"],
                           capture_output=True, timeout=900)
    assert p.returncode == 0, p.stdout.decode()[-3000:] + p.stderr.decode()[-3000:]
    debs = glob.glob(os.path.join(DEB_DIR, "*.deb"))
    assert len(debs) == 1, debs
    return debs[0]


def changelog_version():
    with open(os.path.join(ROOT, "debian", "changelog")) as f:
        return re.match(r"tickd \(([^)]+)\)", f.readline()).group(1)


def field(deb, name):
    return subprocess.run(["dpkg-deb", "-f", deb, name], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_contents_and_metadata(deb):
    version = changelog_version()
    assert os.path.basename(deb).startswith(f"tickd_{version}_")
    assert field(deb, "Package") == "tickd"
    assert field(deb, "Version") == version
    # dh_shlibdeps: the libraries tickd and tickctl link, by package
    depends = [d.strip().split()[0] for d in field(deb, "Depends").split(",")]
    for lib in ("libhiredis", "libcurl", "libevent", "libcjson", "libinih", "libssl", "libc6"):
        assert any(d.startswith(lib) for d in depends), (lib, depends)
    assert "redis-server" in field(deb, "Recommends")

    listing = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True,
                             check=True).stdout
    files = {line.split()[5].lstrip(".") for line in listing.splitlines()
             if not line.startswith("d")}
    for f in ("/usr/bin/tickd", "/usr/bin/tickctl", "/etc/tickd/tickd.ini",
              "/lib/systemd/system/tickd.service", "/usr/share/man/man8/tickd.8.gz",
              "/usr/share/man/man1/tickctl.1.gz", "/usr/share/doc/tickd/copyright",
              "/usr/share/doc/tickd/changelog.Debian.gz"):
        assert f in files, (f, sorted(files))
    lua = sorted(f for f in os.listdir(os.path.join(ROOT, "lua")) if f.endswith(".lua"))
    assert sorted(f for f in files if f.startswith("/usr/share/tickd/")) == \
        [f"/usr/share/tickd/lua/{f}" for f in lua]
    assert not [f for f in files if f.startswith("/usr/local/") or "/build/" in f]
    # every file root's, binaries executable, the rest not
    for line in listing.splitlines():
        mode, owner, name = line.split()[0], line.split()[1], line.split()[5]
        assert owner == "root/root", line
        if not mode.startswith("d"):
            want = "-rwxr-xr-x" if name.startswith("./usr/bin/") else "-rw-r--r--"
            assert mode == want, line

    # the config is a conffile (dpkg keeps the admin's edits on upgrade)
    conffiles = subprocess.run(["dpkg-deb", "-I", deb, "conffiles"], capture_output=True,
                               text=True, check=True).stdout.split()
    assert conffiles == ["/etc/tickd/tickd.ini"]
    # dh_installsystemd: enabled and started on install, restarted on upgrade,
    # stopped on removal
    postinst = subprocess.run(["dpkg-deb", "-I", deb, "postinst"], capture_output=True,
                              text=True, check=True).stdout
    assert "deb-systemd-helper enable 'tickd.service'" in postinst
    assert "deb-systemd-invoke $_dh_action 'tickd.service'" in postinst
    prerm = subprocess.run(["dpkg-deb", "-I", deb, "prerm"], capture_output=True,
                           text=True, check=True).stdout
    assert "deb-systemd-invoke stop 'tickd.service'" in prerm


def test_lintian_reports_no_error_nor_warning(deb):
    # the .changes: the package and its .buildinfo; the remaining tags and
    # the overrides are explained in debian/tickd.lintian-overrides
    changes = glob.glob(os.path.join(DEB_DIR, "*.changes"))
    assert len(changes) == 1, changes
    p = subprocess.run(["lintian", "--display-info", changes[0]], capture_output=True, text=True,
                       timeout=600)
    bad = [line for line in p.stdout.splitlines() if line.startswith(("E:", "W:"))]
    assert not bad, p.stdout
    assert p.returncode == 0, p.stdout + p.stderr


def test_extracted_package_delivers_a_callback(deb, tmp_path, redis, receiver):
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
    tickd, tickctl = root / "usr/bin/tickd", root / "usr/bin/tickctl"
    conf = root / "etc/tickd/tickd.ini"

    v = subprocess.run([tickd, "--version"], capture_output=True, text=True)
    assert v.stdout.strip() == "tickd " + changelog_version().rsplit("-", 1)[0]
    # built with SYSCONFDIR=/etc: reads /etc/tickd/tickd.ini without -c
    h = subprocess.run([tickd, "--help"], capture_output=True, text=True)
    assert "without -c: /etc/tickd/tickd.ini when it exists" in h.stdout
    # built with dpkg-buildflags' hardening: PIE, full RELRO, fortified calls
    for b in (tickd, tickctl):
        elf = subprocess.run(["readelf", "-hldW", "--dyn-syms", b], capture_output=True,
                             text=True, check=True).stdout
        assert "DYN (Position-Independent Executable" in elf, b
        assert "GNU_RELRO" in elf and re.search(r"\(FLAGS\)\s+BIND_NOW", elf), b
        assert re.search(r"__\w+_chk@", elf), b
    unit = (root / "lib/systemd/system/tickd.service").read_text()
    assert "ExecStart=/usr/bin/tickd -c /etc/tickd/tickd.ini" in unit
    assert "EnvironmentFile=-/etc/tickd/env" in unit
    assert "DynamicUser=yes" in unit and "Type=notify" in unit

    # the packaged config as it is, but for the address and the Redis; the
    # scripts come from the extracted root's /usr/share/tickd/lua (found
    # beside the binary), run from elsewhere so nothing of the tree is used
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKD_")}
    log = open(tmp_path / "tickd.log", "wb")
    p = subprocess.Popen([tickd, "-c", conf, "--listen", "127.0.0.1:0", "--redis", redis.addr],
                         cwd=tmp_path, env=env, stdout=log, stderr=log)
    try:
        port = wait_for(lambda: p.poll() is None and log_port(tmp_path / "tickd.log"), 20,
                        what="the packaged tickd listening")
        ctl_env = dict(env, TICKD_URL=f"http://127.0.0.1:{port}")
        add = subprocess.run([tickctl, "add", receiver.url("/ok"), "--in", "1s"],
                             capture_output=True, text=True, env=ctl_env, cwd=tmp_path,
                             timeout=20)
        assert add.returncode == 0, add.stdout + add.stderr
        tid = add.stdout.strip()
        wait_for(lambda: receiver.count() == 1, 20, what="the callback")
        assert receiver.calls[0]["headers"]["tickd-task-id"] == tid
        wait_for(lambda: "succeeded" in subprocess.run(
            [tickctl, "get", tid], capture_output=True, text=True, env=ctl_env).stdout, 10,
            what="the task succeeded")
        # the task is in this Redis
        assert int(redis.cli("DBSIZE")) > 0
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == 0
    finally:
        if p.poll() is None:
            p.kill()
        log.close()
