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
