"""Bounded state: what outsiders can make tickd keep has a cap. Busy, the
receiver here, is also the scale test's (scale_bounds.py)."""
import asyncio
import threading

from harness import wait_for


class Busy:
    """An HTTP/1.1 receiver on every loopback address (0.0.0.0) answering
    each call 429 with Retry-After: 3600, the connection closed after."""

    def __init__(self):
        self.calls = 0
        self.hosts = set()
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def handle(reader, writer):
            try:
                head = await reader.readuntil(b"\r\n\r\n")
                n = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        n = int(line.split(b":")[1])
                if n:
                    await reader.readexactly(n)
                self.calls += 1
                self.hosts.add(writer.get_extra_info("sockname")[0])
                writer.write(b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3600\r\n"
                             b"Content-Length: 0\r\nConnection: close\r\n\r\n")
                await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError, ValueError):
                pass
            writer.close()

        async def serve():
            self.server = await asyncio.start_server(handle, "0.0.0.0", 0, backlog=4096)
            self.port = self.server.sockets[0].getsockname()[1]
            ready.set()

        self.thread = threading.Thread(target=self._run, args=(serve,), daemon=True)
        self.thread.start()
        ready.wait(10)

    def _run(self, serve):
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(serve())
        self.loop.run_forever()

    def url(self, i):
        return f"http://127.{1 + i // 250}.{i % 250}.1:{self.port}/h"

    def close(self):
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def test_hosts_max_bounds_a_workers_host_state(redis, tickd_factory):
    """Past hosts_max the least recently called host is forgotten, with a
    warning; callbacks to new hosts go on."""
    busy = Busy()
    try:
        t = tickd_factory(redis, env={"TICKD_SERVER_HOSTS_MAX": "2",
                                      "TICKD_SERVER_WORKERS": "1"}).start()
        t.batch([{"callback_url": busy.url(i), "retry": {"max_attempts": 1}}
                 for i in range(5)])
        wait_for(lambda: busy.calls >= 5, 10, what="5 callbacks")
        wait_for(lambda: "receiving hosts (hosts_max)" in t.logtext(), 5, what="the warning")
    finally:
        busy.close()
