"""Redis's wire protocol, written: what tests and benchmarks pipeline to a
real redis-server with `redis-cli --pipe` or a socket of their own."""


def resp(*args):
    """One command as RESP: an array of bulk strings (bytes as they are,
    anything else as its str())."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def command(port, *args):
    """One command to the redis-server on port, and its reply read back:
    bytes for a bulk string (None for nil), int, str for a status, a list
    for an array; an error reply raises RuntimeError with its text."""
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(resp(*args))
        f = s.makefile("rb")

        def read():
            line = f.readline()
            kind, rest = line[:1], line[1:-2]
            if kind == b"+":
                return rest.decode()
            if kind == b"-":
                raise RuntimeError(rest.decode())
            if kind == b":":
                return int(rest)
            if kind == b"$":
                n = int(rest)
                if n < 0:
                    return None
                data = f.read(n + 2)
                return data[:-2]
            if kind == b"*":
                n = int(rest)
                return None if n < 0 else [read() for _ in range(n)]
            raise RuntimeError(f"not a reply: {line!r}")

        return read()
