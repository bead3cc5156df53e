"""What the TLS tests need around tickd: a private PKI made with the openssl
command (a CA, server certificates good, expired and for another name, a
client certificate, and a second CA nobody trusts), and real HTTPS receivers
on Python's ssl (OpenSSL), each able to demand a client certificate."""
import http.server
import os
import ssl
import subprocess
import threading

from harness import Receiver, wait_for

def finished(t, tid, timeout=20):
    """Task tid of tickd t once it succeeded or failed."""
    def done():
        code, body = t.get(tid)
        return body if code == 200 and body["status"] in ("succeeded", "failed") else None
    return wait_for(done, timeout, what=f"task {tid} finished")


CA_CNF = """[ca]
default_ca = d
[d]
database = db/index
serial = db/serial
new_certs_dir = db
default_md = sha256
policy = p
copy_extensions = none
[p]
commonName = supplied
"""


def _ssl(args, cwd):
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"openssl {' '.join(args)}: {r.stderr}"


class PKI:
    """Files under dir: ca.crt/key (the trusted CA), other-ca.crt/key,
    srv.crt/key (127.0.0.1 and localhost), expired.crt, wrongname.crt (for
    other.example), other-srv.crt (127.0.0.1, signed by the other CA),
    client.crt/key, client-enc.key (passphrase "hunter2"), client2-both.pem
    (another client's certificate and key in one file)."""

    KEY = ["-newkey", "rsa:2048"]  # how each key is made

    def __init__(self, d):
        self.dir = d
        os.makedirs(d, exist_ok=True)
        self.ca("ca", "tickd-test-ca")
        self.ca("other-ca", "nobody-trusts-this-ca")
        self.leaf("srv", "ca", "127.0.0.1", "IP:127.0.0.1,DNS:localhost", "serverAuth")
        self.leaf("wrongname", "ca", "other.example", "DNS:other.example", "serverAuth")
        self.leaf("other-srv", "other-ca", "127.0.0.1", "IP:127.0.0.1", "serverAuth")
        self.leaf("client", "ca", "tickd-client", None, "clientAuth")
        self.leaf("client2", "ca", "tickd-client-2", None, "clientAuth")
        with open(self.path("client2-both.pem"), "w") as f:  # certificate and key in one file
            f.write(open(self.path("client2.crt")).read() + open(self.path("client2.key")).read())
        _ssl(["pkey", "-in", "client.key", "-aes256", "-passout", "pass:hunter2",
              "-out", "client-enc.key"], d)
        # expired: openssl ca takes explicit dates, x509 -req does not
        os.makedirs(os.path.join(d, "db"), exist_ok=True)
        open(os.path.join(d, "db", "index"), "w").close()
        with open(os.path.join(d, "db", "serial"), "w") as f:
            f.write("1000\n")
        with open(os.path.join(d, "ca.cnf"), "w") as f:
            f.write(CA_CNF)
        _ssl(["ca", "-batch", "-config", "ca.cnf", "-cert", "ca.crt", "-keyfile", "ca.key",
              "-in", "srv.csr", "-out", "expired.crt", "-notext", "-extfile", "srv.ext",
              "-startdate", "20200101000000Z", "-enddate", "20200102000000Z"], d)

    def path(self, name):
        return os.path.join(self.dir, name)

    def ca(self, name, cn):
        _ssl(["req", "-x509", *self.KEY, "-nodes", "-keyout", f"{name}.key",
              "-out", f"{name}.crt", "-days", "3650", "-subj", f"/CN={cn}",
              "-addext", "basicConstraints=critical,CA:TRUE",
              "-addext", "keyUsage=critical,keyCertSign,cRLSign"], self.dir)

    def leaf(self, name, ca, cn, san, usage):
        _ssl(["req", *self.KEY, "-nodes", "-keyout", f"{name}.key", "-out",
              f"{name}.csr", "-subj", f"/CN={cn}"], self.dir)
        with open(os.path.join(self.dir, f"{name}.ext"), "w") as f:
            f.write((f"subjectAltName={san}\n" if san else "") + f"extendedKeyUsage={usage}\n")
        _ssl(["x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
              "-CAcreateserial", "-out", f"{name}.crt", "-days", "365",
              "-extfile", f"{name}.ext"], self.dir)


class TLSReceiver(Receiver):
    """A real HTTPS/1.1 server answering 200 to everything and recording each
    request. cert/key: its certificate; client_ca: demand a client
    certificate signed by it; max_tls: the highest version it speaks. It
    keeps its calls as harness.Receiver does, and shares its readers."""

    def __init__(self, pki, cert="srv.crt", key="srv.key", client_ca=None, max_tls=None):
        self.calls = []
        self.lock = threading.Lock()
        rec = self
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(pki.path(cert), pki.path(key))
        if client_ca:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(pki.path(client_ca))
        if max_tls:
            ctx.maximum_version = max_tls

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def handle_any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                peer = self.connection.getpeercert() if client_ca else None
                with rec.lock:
                    rec.calls.append({"path": self.path, "body": body, "peer": peer,
                                      "headers": {k.lower(): v for k, v in self.headers.items()}})
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            do_GET = do_POST = do_PUT = handle_any

            def log_message(self, *a):
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def get_request(self):
                sock, addr = self.socket.accept()
                # the handshake runs in the request's thread, on its first read
                return ctx.wrap_socket(sock, server_side=True,
                                       do_handshake_on_connect=False), addr

            def handle_error(self, request, client_address):
                pass  # refused handshakes are what some tests are about

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path="/ok", host="127.0.0.1"):
        return f"https://{host}:{self.port}{path}"

