"""A TCP proxy in front of each Redis node of the chaos cluster, with faults.

    python3 faultproxy.py PORT [PORT...]

listens on one free port per target port and prints them, space-separated, as
its first line; from then on it reads commands from stdin, one JSON object a
line, each naming the target indexes it applies to ("nodes"):

    {"op": "latency", "nodes": [0, 3], "ms": 300}   each chunk held this long (0: off)
    {"op": "stall", "nodes": [1], "on": true}       nothing forwarded until off again
    {"op": "drop", "nodes": [2], "on": true}        bytes swallowed both ways; when it is
                                                    turned off, the connections it ate
                                                    from are reset (their streams are torn)
    {"op": "reset", "nodes": [0, 1, 2]}             every connection reset (RST) now
    {"op": "clear"}                                 every fault off

Why this proxy is on tickd's path: tickd follows the addresses the cluster
announces (CLUSTER SLOTS, MOVED, ASK), not the seeds it was given. Each node is
started with cluster-announce-port set to its proxy's port (and
cluster-announce-bus-port to its own bus port, so the gossip between nodes stays
direct), so every address tickd ever learns is a proxy's. Replicas also learn
their master's address from the cluster and so connect through the proxy; a
connection is told apart by its first command: one that starts replication
(REPLCONF, PSYNC, SYNC) is carried untouched, so the faults fall on tickd's
connections only and a failover is decided by the nodes as it would be without
the proxy. Connections made with redis-cli by the runner go to the nodes'
own ports.
"""
import asyncio
import json
import socket
import struct
import sys
import time

REPLICATION = (b"REPLCONF", b"PSYNC", b"SYNC")
NEUTRAL = (b"PING", b"AUTH")  # sent by both kinds before they differ


class Node:
    def __init__(self, target):
        self.target = target
        self.latency = 0.0
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.drop = False
        self.conns = set()


class Conn:
    def __init__(self, node, cr, cw):
        self.node = node
        self.cr, self.cw = cr, cw
        self.ur = self.uw = None
        self.kind = None     # "client" (faults apply), "replication" (untouched)
        self.torn = False    # bytes were swallowed: the stream is no longer whole

    def faulty(self):
        return self.kind == "client"

    def classify(self, data):
        if self.kind:
            return
        # the command's name: RESP array of bulk strings, or an inline command
        name = b""
        if data.startswith(b"*"):
            parts = data.split(b"\r\n")
            if len(parts) > 2:
                name = parts[2]
        else:
            name = data.split(b" ", 1)[0].strip()
        name = name.upper()
        if name in REPLICATION:
            self.kind = "replication"
        elif name and name not in NEUTRAL:
            self.kind = "client"

    def reset(self):
        for w in (self.cw, self.uw):
            if w is None:
                continue
            sock = w.get_extra_info("socket")
            try:
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
            w.transport.abort()


async def pump(conn, src, dst, upward):
    node = conn.node
    try:
        while True:
            data = await src.read(65536)
            if not data:
                break
            if upward:
                conn.classify(data)
            if conn.faulty():
                if node.drop:
                    conn.torn = True
                    continue
                if conn.torn:
                    continue
                await node.flowing.wait()
                if node.latency:
                    await asyncio.sleep(node.latency)
                    await node.flowing.wait()
                if node.drop:
                    conn.torn = True
                    continue
            dst.write(data)
            await dst.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        for w in (conn.cw, conn.uw):
            try:
                w.close()
            except Exception:
                pass


async def serve(node, cr, cw):
    conn = Conn(node, cr, cw)
    try:
        conn.ur, conn.uw = await asyncio.open_connection("127.0.0.1", node.target)
    except OSError:
        conn.uw = None
        conn.reset()  # the node is down: the client sees a reset, as from the node
        return
    node.conns.add(conn)
    try:
        await asyncio.gather(pump(conn, cr, conn.uw, True), pump(conn, conn.ur, cw, False))
    finally:
        node.conns.discard(conn)


def command(nodes, line):
    try:
        c = json.loads(line)
    except ValueError:
        return
    targets = [nodes[i] for i in c.get("nodes", range(len(nodes)))]
    op = c.get("op")
    if op == "latency":
        for n in targets:
            n.latency = c.get("ms", 0) / 1000
    elif op == "stall":
        for n in targets:
            n.flowing.clear() if c.get("on") else n.flowing.set()
    elif op == "drop":
        for n in targets:
            n.drop = bool(c.get("on"))
            if not n.drop:
                for conn in list(n.conns):
                    if conn.torn:
                        conn.reset()
    elif op == "reset":
        for n in targets:
            for conn in list(n.conns):
                if conn.faulty():
                    conn.reset()
    elif op == "clear":
        for n in nodes:
            n.latency = 0
            n.flowing.set()
            if n.drop:
                n.drop = False
                for conn in list(n.conns):
                    if conn.torn:
                        conn.reset()
    print(f"{time.time():.3f} {line.strip()}", file=sys.stderr, flush=True)


async def main():
    nodes = [Node(int(p)) for p in sys.argv[1:]]
    ports = []
    for n in nodes:
        srv = await asyncio.start_server(lambda r, w, n=n: serve(n, r, w), "127.0.0.1", 0,
                                         backlog=512)
        ports.append(srv.sockets[0].getsockname()[1])
    print(" ".join(map(str, ports)), flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        line = await reader.readline()
        if not line:
            return  # the runner is gone
        command(nodes, line.decode())


if __name__ == "__main__":
    asyncio.run(main())
