"""The chaos run's callback receiver: a small HTTP/1.1 server (keep-alive,
Content-Length bodies, as tickd sends them) that logs every arrival.

    python3 receiver.py LOG PIDFILE

prints its port as its first line. Each callback is one line of LOG, written
as it arrives:

    <arrival ms> <replica> <task id> <attempt> <scheduled-at ms> <path> <status answered>

<replica> names the tickd process that sent it: on each new connection the
receiver finds, in /proc, which of the processes listed in PIDFILE ("name pid"
lines, kept up to date by the runner) owns the other end ("?" if none does).
The path says how to answer: /f1 answers 500 to attempt 1 (the retry then
succeeds), anything else 200.
"""
import asyncio
import os
import sys
import time


def peer_owner(pidfile, peer_port, my_port):
    """The name of the listed process holding the socket 127.0.0.1:peer_port
    connected to my_port, or '?'."""
    want = f"0100007F:{peer_port:04X}"
    inode = None
    try:
        with open("/proc/net/tcp") as f:
            for line in f:
                p = line.split()
                if len(p) > 9 and p[1] == want and p[2].endswith(f":{my_port:04X}"):
                    inode = p[9]
                    break
    except OSError:
        return "?"
    if not inode:
        return "?"
    target = f"socket:[{inode}]"
    try:
        with open(pidfile) as f:
            procs = [ln.split() for ln in f if ln.strip()]
    except OSError:
        return "?"
    for name, pid in procs:
        d = f"/proc/{pid}/fd"
        try:
            for fd in os.listdir(d):
                try:
                    if os.readlink(f"{d}/{fd}") == target:
                        return f"{name}:{pid}"
                except OSError:
                    pass
        except OSError:
            pass
    return "?"


async def main():
    log = open(sys.argv[1], "a", buffering=1)
    pidfile = sys.argv[2]
    port = None

    async def handle(r, w):
        peer = w.get_extra_info("peername")
        who = peer_owner(pidfile, peer[1], port)
        try:
            while True:
                head = await r.readuntil(b"\r\n\r\n")
                t = time.time() * 1000
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1] if len(lines[0].split(" ")) > 1 else "?"
                h = {}
                for ln in lines[1:]:
                    if ":" in ln:
                        k, v = ln.split(":", 1)
                        h[k.strip().lower()] = v.strip()
                n = int(h.get("content-length") or 0)
                if n:
                    await r.readexactly(n)
                attempt = h.get("tickd-attempt", "0")
                code = 500 if path.startswith("/f1") and attempt == "1" else 200
                log.write(f"{t:.1f} {who} {h.get('tickd-task-id', '-')} {attempt} "
                          f"{h.get('tickd-scheduled-at', '0')} {path} {code}\n")
                w.write(f"HTTP/1.1 {code} X\r\nContent-Length: 2\r\n\r\nok".encode())
                await w.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError, ValueError):
            pass
        finally:
            w.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    port = srv.sockets[0].getsockname()[1]
    print(port, flush=True)
    async with srv:
        await srv.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
