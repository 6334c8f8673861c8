"""The HTTP protocol's own limits on a request's headers (:mod:`fencepost.api.protocol`).

A real uvicorn protocol on a loopback socket in this process, in front of a small
ASGI app, and clients writing raw bytes: the limits under test act before any app
sees a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from uvicorn.server import ServerState

from fencepost.api.protocol import guarded_protocol
from tests.api.support import PROBLEMS

TIMEOUT = 0.4
CAP = 8192


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Reads the whole body, waits ``?sleep=`` seconds, answers 200 with the body's size."""
    if scope["type"] != "http":
        return
    size, more = 0, True
    while more:
        message = await receive()
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    query = scope["query_string"].decode()
    if query.startswith("sleep="):
        await asyncio.sleep(float(query.partition("=")[2]))
    body = str(size).encode()
    headers = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


Client = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def serving(test: Callable[[Callable[[], Awaitable[Client]]], Awaitable[None]]) -> None:
    """Run ``test`` with a way to connect to a guarded server on a free loopback port."""

    async def main() -> None:
        protocol = guarded_protocol(header_timeout=TIMEOUT, max_header_bytes=CAP)
        config = uvicorn.Config(app, http=protocol, lifespan="off", log_level="critical")
        state = ServerState()
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: protocol(config=config, server_state=state, app_state={}), "127.0.0.1", 0
        )
        port = server.sockets[0].getsockname()[1]
        writers: list[asyncio.StreamWriter] = []

        async def connect() -> Client:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writers.append(writer)
            return reader, writer

        try:
            await test(connect)
        finally:
            for writer in writers:
                writer.close()
                with contextlib.suppress(OSError):  # reset by the server: closed all the same
                    await writer.wait_closed()
            server.close()
            for connection in list(state.connections):
                connection.shutdown()
            await server.wait_closed()

    asyncio.run(main())


async def answer(
    reader: asyncio.StreamReader, within: float = 5.0
) -> tuple[int, dict[str, str], bytes]:
    """One response: status, headers, body (read by Content-Length)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), within)
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines if line)
    body = await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), within)
    return int(status_line.split()[1]), headers, body


async def closed(reader: asyncio.StreamReader, within: float = 5.0) -> bool:
    """True once the server has closed the connection (EOF or reset)."""
    try:
        return await asyncio.wait_for(reader.read(), within) == b""
    except ConnectionResetError:
        return True


def assert_problem(status: int, headers: dict[str, str], body: bytes, want: int, kind: str) -> None:
    assert status == want, body
    assert headers["content-type"] == "application/problem+json"
    assert headers["connection"] == "close"
    problem = json.loads(body)
    assert problem["type"] == PROBLEMS + kind
    assert problem["status"] == want
    assert problem["detail"]


def test_headers_that_never_finish_get_408_and_the_connection_closes() -> None:
    async def test(connect: Callable[[], Awaitable[Client]]) -> None:
        started = time.monotonic()  # before connecting: the deadline starts as it opens
        reader, writer = await connect()
        writer.write(b"POST /x HTTP/1.1\r\nHost: localhost\r\n")
        # Still sending, slowly, for most of the deadline: it bounds the whole headers,
        # not the pauses between their bytes.
        for i in range(8):
            writer.write(b"X-Slow-%d: 1\r\n" % i)
            await asyncio.sleep(TIMEOUT / 10)
        assert_problem(*await answer(reader), 408, "request-timeout")
        assert TIMEOUT <= time.monotonic() - started < TIMEOUT + 2
        assert await closed(reader)

    serving(test)


def test_a_connection_that_sends_nothing_is_closed_without_an_answer() -> None:
    async def test(connect: Callable[[], Awaitable[Client]]) -> None:
        started = time.monotonic()
        reader, _ = await connect()
        assert await reader.read() == b""
        assert TIMEOUT <= time.monotonic() - started < TIMEOUT + 2

    serving(test)


def test_headers_beyond_the_cap_get_431() -> None:
    async def test(connect: Callable[[], Awaitable[Client]]) -> None:
        reader, writer = await connect()
        writer.write(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Long: ")
        for _ in range(2):  # one endless header line, in pieces: past the cap with the 2nd
            writer.write(b"a" * (CAP // 2))
            await writer.drain()
            await asyncio.sleep(0.05)
        assert_problem(*await answer(reader), 431, "headers-too-large")
        assert await closed(reader)

    serving(test)


def test_a_request_that_cannot_be_parsed_is_a_problem_too() -> None:
    async def test(connect: Callable[[], Awaitable[Client]]) -> None:
        reader, writer = await connect()
        writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        assert_problem(*await answer(reader), 400, "malformed-request")

    serving(test)


def test_a_slow_answer_and_a_large_body_are_not_the_headers_business() -> None:
    async def test(connect: Callable[[], Awaitable[Client]]) -> None:
        reader, writer = await connect()
        # The app takes longer than the header deadline to answer: nothing times out.
        writer.write(b"GET /?sleep=%g HTTP/1.1\r\nHost: localhost\r\n\r\n" % (TIMEOUT * 2))
        status, _, body = await answer(reader)
        assert (status, body) == (200, b"0")
        # A body far larger than the header cap, in one write with its headers, and then
        # a second request on the same connection: the cap counts headers only.
        data = b"x" * (CAP * 20)
        writer.write(
            b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n" % len(data)
        )
        writer.write(data)
        status, _, body = await answer(reader)
        assert (status, body) == (200, str(len(data)).encode())
        writer.write(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert (await answer(reader))[0] == 200
        # Then idle: uvicorn's keep-alive (5 s) or the header deadline ends it, silently.
        assert await closed(reader, within=10)

    serving(test)


@pytest.mark.parametrize("header_timeout", [0, -1.0])
def test_limits_must_be_positive(header_timeout: float) -> None:
    with pytest.raises(ValueError, match="positive"):
        guarded_protocol(header_timeout=header_timeout)


# -- the documented cap, on a real `fencepost serve` ---------------------------------------------

#: The cap ``fencepost serve`` documents (stated, not imported, so a change is noticed).
SERVED_CAP = 65_536


def _raw_request(port: int, head: bytes, within: float = 10.0) -> tuple[int, bytes]:
    """Send ``head`` (a whole request, no body) in one write; the status and the response."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=within) as sock:
        sock.sendall(head)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65_536)
            if not chunk:
                break
            received += chunk
    return int(received.split(b" ", 2)[1]), received


def _head(total: int) -> bytes:
    """A GET /healthz whose headers (request line included) come to ``total`` bytes."""
    start = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    end = b"\r\n"
    lines: list[bytes] = []
    left = total - len(start) - len(end)
    index = 0
    while left > 0:
        name = b"X-Filler-%d: " % index
        size = min(left, 8192)
        value = b"a" * max(1, size - len(name) - 2)
        lines.append(name + value + b"\r\n")
        left -= len(lines[-1])
        index += 1
    return start + b"".join(lines) + end


def test_serve_refuses_headers_past_its_documented_cap_in_one_write(tmp_path: Path) -> None:
    """Headers that arrive complete in one read are measured too (they were served up
    to about twice the cap: only reads that completed no headers were counted)."""
    from tests.integration.test_service_processes import Processes, free_port, wait_ready

    procs = Processes(tmp_path)
    try:
        port = free_port()
        service = procs.start(
            "serve", "serve", "--db", f"sqlite:///{tmp_path / 'h.db'}", "--port", str(port),
            "--workers", "0",
        )  # fmt: skip
        wait_ready(f"http://127.0.0.1:{port}", service)
        status, _ = _raw_request(port, _head(SERVED_CAP - 1024))
        assert status == 200
        for total in (SERVED_CAP + 1024, 2 * SERVED_CAP - 4096, 128_000):
            status, response = _raw_request(port, _head(total))
            assert status == 431, (total, response[:200])
            assert b"content-type: application/problem+json" in response.lower()
        assert _raw_request(port, _head(1024))[0] == 200  # the service carries on
    finally:
        procs.close()
