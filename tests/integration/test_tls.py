"""https:// callbacks into a private PKI: CAs trusted from callback.ca_file
and ca_path (with or without the system's), client certificates (mTLS), the
lowest TLS version, and errors that say which check failed. Real HTTPS
receivers, certificates made here with the openssl command, the real binary."""
import os
import subprocess

import pytest

from harness import TICKD
from tls_kit import PKI, TLSReceiver, finished


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return PKI(str(tmp_path_factory.mktemp("pki")))


@pytest.fixture
def receivers():
    made = []

    def make(pki, **kw):
        r = TLSReceiver(pki, **kw)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def env_of(**keys):
    return {f"TICKD_CALLBACK_{k.upper()}": str(v) for k, v in keys.items()}



def run_one(tickd_factory, redis, url, attempts=1, **keys):
    t = tickd_factory(redis, env=env_of(**keys)).start()
    tid = t.post({"callback_url": url, "retry": {"max_attempts": attempts}, "timeout_ms": 5000})["id"]
    return t, finished(t, tid)


def test_ca_file_trusted_delivers(pki, receivers, redis, tickd_factory):
    rec = receivers(pki)
    _, task = run_one(tickd_factory, redis, rec.url(), ca_file=pki.path("ca.crt"))
    assert task["status"] == "succeeded", task
    assert rec.count() == 1


def test_ca_file_alone_without_system_store(pki, receivers, redis, tickd_factory):
    rec = receivers(pki)
    _, task = run_one(tickd_factory, redis, rec.url(), ca_file=pki.path("ca.crt"),
                      ca_system="false")
    assert task["status"] == "succeeded", task


def test_ca_path_rehashed_directory(pki, receivers, redis, tickd_factory, tmp_path):
    d = tmp_path / "cas"
    d.mkdir()
    (d / "test-ca.pem").write_bytes(open(pki.path("ca.crt"), "rb").read())
    subprocess.run(["openssl", "rehash", str(d)], check=True, capture_output=True)
    rec = receivers(pki)
    _, task = run_one(tickd_factory, redis, rec.url(), ca_path=str(d), ca_system="false")
    assert task["status"] == "succeeded", task


def test_untrusted_ca_fails_with_unknown_ca(pki, receivers, redis, tickd_factory):
    rec = receivers(pki)
    _, task = run_one(tickd_factory, redis, rec.url())
    assert task["status"] == "failed", task
    assert task["last_error"].startswith("TLS unknown CA"), task["last_error"]
    # libcurl's own words follow, whole
    assert task["last_error"].endswith("SSL certificate problem: unable to get local issuer certificate"), task


def test_other_ca_not_trusted_by_ca_file(pki, receivers, redis, tickd_factory):
    rec = receivers(pki, cert="other-srv.crt", key="other-srv.key")
    _, task = run_one(tickd_factory, redis, rec.url(), ca_file=pki.path("ca.crt"))
    assert task["status"] == "failed", task
    assert "unknown CA" in task["last_error"], task
    assert rec.count() == 0


def test_expired_certificate(pki, receivers, redis, tickd_factory):
    rec = receivers(pki, cert="expired.crt")
    _, task = run_one(tickd_factory, redis, rec.url(), ca_file=pki.path("ca.crt"))
    assert task["status"] == "failed", task
    assert task["last_error"].startswith("TLS expired"), task["last_error"]
    assert "certificate has expired" in task["last_error"]


def test_name_mismatch(pki, receivers, redis, tickd_factory):
    rec = receivers(pki, cert="wrongname.crt", key="wrongname.key")
    _, task = run_one(tickd_factory, redis, rec.url(), ca_file=pki.path("ca.crt"))
    assert task["status"] == "failed", task
    assert task["last_error"].startswith("TLS name mismatch"), task["last_error"]
    assert "127.0.0.1" in task["last_error"]


def test_client_certificate_delivers(pki, receivers, redis, tickd_factory):
    rec = receivers(pki, client_ca="ca.crt")
    _, task = run_one(tickd_factory, redis, rec.url(), ca_file=pki.path("ca.crt"),
                      client_cert=pki.path("client.crt"), client_key=pki.path("client.key"))
    assert task["status"] == "succeeded", task
    subject = dict(x[0] for x in rec.calls[0]["peer"]["subject"])
    assert subject["commonName"] == "tickd-client"


def test_client_certificate_encrypted_key(pki, receivers, redis, tickd_factory):
    rec = receivers(pki, client_ca="ca.crt")
    _, task = run_one(tickd_factory, redis, rec.url(), ca_file=pki.path("ca.crt"),
                      client_cert=pki.path("client.crt"), client_key=pki.path("client-enc.key"),
                      client_key_password="hunter2")
    assert task["status"] == "succeeded", task


def test_without_client_certificate_refused(pki, receivers, redis, tickd_factory):
    rec = receivers(pki, client_ca="ca.crt")
    _, task = run_one(tickd_factory, redis, rec.url(), ca_file=pki.path("ca.crt"))
    assert task["status"] == "failed", task
    # the receiver's alert, or (TLS 1.3) the connection it closes after the handshake
    err = task["last_error"]
    assert err.startswith("TLS client certificate refused") or \
        err.startswith("TLS connection closed by the receiver right after the handshake"), err
    assert "callback.client_cert" in err
    assert rec.count() == 0


def test_tls_min_version_13_against_a_12_receiver(pki, receivers, redis, tickd_factory):
    import ssl
    rec = receivers(pki, max_tls=ssl.TLSVersion.TLSv1_2)
    _, task = run_one(tickd_factory, redis, rec.url(), ca_file=pki.path("ca.crt"),
                      tls_min_version="1.3")
    assert task["status"] == "failed", task
    assert task["last_error"].startswith("TLS handshake failed"), task["last_error"]
    # the same receiver with the default minimum (1.2)
    _, task = run_one(tickd_factory, redis, rec.url(), ca_file=pki.path("ca.crt"))
    assert task["status"] == "succeeded", task


def test_no_task_field_turns_verification_off(pki, receivers, redis, tickd_factory):
    """Verification is on whatever the task says: no field turns it off."""
    rec = receivers(pki)
    t = tickd_factory(redis).start()
    code, body = t.post({"callback_url": rec.url(), "insecure_skip_verify": True}, expect=None)
    assert code == 400 and "insecure_skip_verify: unknown field" in body["error"]["message"]


def start_fails(env, tmp_path):
    r = subprocess.run([TICKD, "--store", "memory", "--listen", "127.0.0.1:0"],
                       env={**os.environ, **env}, capture_output=True, text=True, timeout=20)
    return r.returncode, r.stderr


@pytest.mark.parametrize("keys,expect", [
    ({"ca_file": "/nonexistent/ca.pem"}, "callback.ca_file: /nonexistent/ca.pem: No such file"),
    ({"ca_file": "/etc/hostname"}, "callback.ca_file: /etc/hostname: "),
    ({"ca_path": "/etc/hostname"}, "callback.ca_path: /etc/hostname: not a directory"),
    ({"ca_system": "no-way"}, "ca_system: must be true or false"),
    ({"ca_system": "false"}, "callback.ca_system: false needs callback.ca_file"),
    ({"tls_min_version": "1.0"}, "tls_min_version: must be 1.2 or 1.3"),
    ({"client_key": "/x.key"}, "callback.client_key: needs callback.client_cert"),
    ({"proxy": "ftp://p:1"}, "callback.proxy: must be http://"),
])
def test_bad_settings_stop_tickd_naming_the_key(keys, expect, tmp_path):
    rc, err = start_fails(env_of(**keys), tmp_path)
    assert rc == 2 and expect in err, (rc, err)


def test_bad_client_identity_named(pki, tmp_path):
    rc, err = start_fails(env_of(client_cert=pki.path("client.crt"),
                                 client_key=pki.path("client-enc.key")), tmp_path)
    assert rc == 2 and "callback.client_key: " in err and "encrypted" in err \
        and "TICKD_CALLBACK_CLIENT_KEY_PASSWORD" in err, err
    rc, err = start_fails(env_of(client_cert=pki.path("client.crt"),
                                 client_key=pki.path("client-enc.key"),
                                 client_key_password="wrong"), tmp_path)
    assert rc == 2 and "callback.client_key_password: does not decrypt" in err, err
    rc, err = start_fails(env_of(client_cert=pki.path("client.crt"),
                                 client_key=pki.path("srv.key")), tmp_path)
    assert rc == 2 and "not the key of the certificate" in err, err
    rc, err = start_fails(env_of(client_cert=pki.path("client.key")), tmp_path)
    assert rc == 2 and "callback.client_cert: " in err and "no PEM certificate" in err, err


# ---- [host:NAME]: settings for one receiving host ----------------------------

def ini(tmp_path, text):
    p = tmp_path / "tickd.ini"
    p.write_text(text)
    return str(p)


def test_host_section_client_certificate_for_that_host_alone(pki, receivers, redis,
                                                              tickd_factory, tmp_path):
    rec = receivers(pki, client_ca="ca.crt")
    conf = ini(tmp_path, f"""[callback]
ca_file = {pki.path("ca.crt")}
[host:localhost]
client_cert = {pki.path("client.crt")}
client_key = {pki.path("client-enc.key")}
client_key_password_env = LOCALHOST_KEY_PW
""")
    t = tickd_factory(redis, args=["-c", conf], env={"LOCALHOST_KEY_PW": "hunter2"}).start()
    named = t.post({"callback_url": rec.url(host="localhost"), "retry": {"max_attempts": 1}})["id"]
    other = t.post({"callback_url": rec.url(), "retry": {"max_attempts": 1}})["id"]
    assert finished(t, named)["status"] == "succeeded"
    task = finished(t, other)
    assert task["status"] == "failed" and "callback.client_cert" in task["last_error"], task


def test_host_section_own_certificate_beside_the_global_one(pki, receivers, redis,
                                                            tickd_factory, tmp_path):
    rec = receivers(pki, client_ca="ca.crt")
    conf = ini(tmp_path, f"""[callback]
ca_file = {pki.path("ca.crt")}
client_cert = {pki.path("client.crt")}
client_key = {pki.path("client.key")}
[host:localhost]
client_cert = {pki.path("client2-both.pem")}
""")
    t = tickd_factory(redis, args=["-c", conf]).start()
    own = t.post({"callback_url": rec.url("/own", host="localhost")})["id"]
    glob = t.post({"callback_url": rec.url("/global")})["id"]
    assert finished(t, own)["status"] == "succeeded"
    assert finished(t, glob)["status"] == "succeeded"
    cn = {c["path"]: dict(x[0] for x in c["peer"]["subject"])["commonName"] for c in rec.calls}
    assert cn == {"/own": "tickd-client-2", "/global": "tickd-client"}


def test_host_section_insecure_skip_verify(pki, receivers, redis, tickd_factory, tmp_path):
    rec = receivers(pki, cert="other-srv.crt", key="other-srv.key")
    conf = ini(tmp_path, "[host:127.0.0.1]\ninsecure_skip_verify = true\n")
    t = tickd_factory(redis, args=["-c", conf]).start()
    assert "[host:127.0.0.1] insecure_skip_verify: the certificates of https:// callbacks to " \
        "127.0.0.1 are NOT verified" in t.logtext()
    skipped = t.post({"callback_url": rec.url(), "retry": {"max_attempts": 1}})["id"]
    assert finished(t, skipped)["status"] == "succeeded"
    # the same receiver by another name is checked
    checked = t.post({"callback_url": rec.url(host="localhost"),
                      "retry": {"max_attempts": 1}})["id"]
    task = finished(t, checked)
    assert task["status"] == "failed" and "unknown CA" in task["last_error"], task


def test_host_section_own_trust_anchors(pki, receivers, redis, tickd_factory, tmp_path):
    rec = receivers(pki)
    conf = ini(tmp_path, f"[host:localhost]\nca_file = {pki.path('ca.crt')}\nca_system = false\n")
    t = tickd_factory(redis, args=["-c", conf]).start()
    ok = t.post({"callback_url": rec.url(host="localhost"), "retry": {"max_attempts": 1}})["id"]
    bad = t.post({"callback_url": rec.url(), "retry": {"max_attempts": 1}})["id"]
    assert finished(t, ok)["status"] == "succeeded"
    assert "unknown CA" in finished(t, bad)["last_error"]


@pytest.mark.parametrize("text,expect", [
    ("[host:a.example]\nclient_crt = /x\n",
     ":2: client_crt: unknown key in section [host:a.example] (did you mean client_cert?)"),
    ("[host:a.example]\ninsecure_skip_verify = maybe\n",
     ":2: insecure_skip_verify: must be true or false"),
    ("[host:a.example]\nca_file = /nonexistent.pem\n",
     "[host:a.example] ca_file: /nonexistent.pem: No such file or directory"),
    ("[host:a.example]\nca_system = false\n",
     "[host:a.example] ca_system: false needs ca_file or ca_path"),
    ("[host:" + "a" * 60 + "]\nca_system = true\n", ":1: section name longer than 50 bytes"),
])
def test_bad_host_section_stops_tickd(text, expect, tmp_path):
    r = subprocess.run([TICKD, "-c", ini(tmp_path, text), "--store", "memory", "--listen",
                        "127.0.0.1:0"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 2 and expect in r.stderr, r.stderr


def test_host_section_password_variable_missing(pki, tmp_path):
    conf = ini(tmp_path, f"""[host:a.example]
client_cert = {pki.path("client.crt")}
client_key = {pki.path("client-enc.key")}
client_key_password_env = NOT_SET_ANYWHERE
""")
    r = subprocess.run([TICKD, "-c", conf, "--store", "memory", "--listen", "127.0.0.1:0"],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 2 and "[host:a.example] client_key_password_env: NOT_SET_ANYWHERE " \
        "is not set in the environment" in r.stderr, r.stderr
