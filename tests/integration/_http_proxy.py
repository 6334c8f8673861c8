"""A small HTTP/1.1 proxy a test controls, in front of a real ``fencepost serve``.

Each request a client sends is matched against the test's :class:`Rule` list (the
first rule whose method and path prefix match, and which has uses left, applies):

- ``drop``: the request is passed on and the service's whole answer read, then the
  client's connection is reset without a byte of it (the service did the work; the
  client lost the answer);
- ``answer``: the proxy answers itself with ``status`` and ``headers`` (the service
  never sees the request);
- no rule: the request and the answer pass through.

Every request is recorded (method, path, the monotonic time it arrived) in
:attr:`Proxy.seen`. The proxy runs an asyncio loop on a thread of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Rule:
    """What to do with the next ``uses`` requests of ``method`` to a path starting ``path``."""

    method: str
    path: str
    action: str  # "drop" or "answer"
    uses: int = 1
    status: int = 503
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Seen:
    method: str
    path: str
    at: float


class Proxy:
    """Listens on 127.0.0.1:``port`` (chosen by the system) and forwards to ``upstream``."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.rules: list[Rule] = []
        self.seen: list[Seen] = []
        self.port = 0
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="test-http-proxy", daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self, method: str, path: str) -> list[Seen]:
        """The requests seen of ``method`` to paths starting with ``path``."""
        with self._lock:
            return [s for s in self.seen if s.method == method and s.path.startswith(path)]

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the proxy did not start")

    def close(self) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def listen() -> None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]
            self._ready.set()

        self._loop.run_until_complete(listen())
        self._loop.run_forever()
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.close()

    def _rule_for(self, method: str, path: str) -> Rule | None:
        with self._lock:
            self.seen.append(Seen(method, path, time.monotonic()))
            for rule in self.rules:
                if rule.uses > 0 and rule.method == method and path.startswith(rule.path):
                    rule.uses -= 1
                    return rule
        return None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                request = await _read_message(reader)
                if request is None:
                    return
                method, path = request.split(b" ", 2)[:2]
                rule = self._rule_for(method.decode(), path.decode())
                if rule is not None and rule.action == "answer":
                    writer.write(_answer(rule.status, rule.headers))
                    await writer.drain()
                    continue
                answer = await self._forward(request)
                if rule is not None and rule.action == "drop":
                    writer.transport.abort()  # a reset: nothing of the answer arrives
                    return
                writer.write(answer)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    async def _forward(self, request: bytes) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        try:
            writer.write(request)
            await writer.drain()
            answer = await _read_message(reader)
            assert answer is not None, "the service closed without answering"
            return answer
        finally:
            writer.close()


async def _read_message(reader: asyncio.StreamReader) -> bytes | None:
    """One HTTP/1.1 message (head and a Content-Length body); None at a clean end."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as end:
        if not end.partial:
            return None
        raise
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    body = await reader.readexactly(length) if length else b""
    return head + body


def _answer(status: int, headers: dict[str, str]) -> bytes:
    body = b'{"title": "held back by the test\'s proxy"}'
    lines = [f"HTTP/1.1 {status} Proxy", "Content-Type: application/problem+json"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@contextlib.contextmanager
def proxy(upstream_port: int) -> Iterator[Proxy]:
    """A started :class:`Proxy` in front of ``upstream_port``, closed afterwards."""
    running = Proxy(upstream_port)
    running.start()
    try:
        yield running
    finally:
        running.close()
