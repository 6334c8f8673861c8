"""uvicorn's HTTP protocol with the limits it lacks on a request's headers.

uvicorn bounds the wait *between* requests on a kept-alive connection
(``timeout_keep_alive``, 5 s) but not the time a client takes to send a request's
headers, nor, with httptools, their size: a client that sends one header line every
few seconds (slow loris), or one endless line, keeps its connection and a growing
buffer for as long as it likes, and a connection that never sends a byte is never
closed at all. :func:`guarded_protocol` makes a subclass of uvicorn's httptools
protocol that:

* wants a request's headers complete within ``header_timeout`` seconds of the
  connection opening or of the previous response ending; past that, a client that
  has sent part of a request gets a ``408 request-timeout`` problem, an idle one is
  simply disconnected (as a kept-alive connection is);
* refuses a request whose headers (its request line included) exceed
  ``max_header_bytes`` with a ``431 headers-too-large`` problem, whether they arrive
  in one read or many, complete or not;
* answers a request it cannot parse with a ``400 malformed-request`` problem instead
  of uvicorn's plain text.

Each closes the connection. The body's own deadline is the application's
(:class:`~fencepost.api.guard.Guard`), which sees it arrive.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from fencepost.api import problems
from fencepost.api.defaults import DEFAULT_HEADER_TIMEOUT

#: Default cap on a request's headers (request line included): nginx allows 32 KiB.
DEFAULT_MAX_HEADER_BYTES = 65_536


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` with a header deadline and size cap (module docstring).

    Configured by :func:`guarded_protocol`, since uvicorn makes each connection's
    protocol itself, from its config alone.
    """

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start waiting for the first request's headers."""
        #: Fires ``header_timeout`` after the connection opened or a response ended.
        self._header_timer: asyncio.TimerHandle | None = None
        #: From the end of a request's body (or the connection's start) to the next
        #: request's headers: whatever arrives then belongs to that next request's headers.
        self._between_requests = True
        self._header_bytes = 0
        #: The bytes of the current request's head the parser has handed over: its URL
        #: and each header line. Reads that complete a request's headers are measured so.
        self._head_bytes = 0
        #: Set when the parser is stopped for a head past the cap (a 431, not a 400).
        self._head_too_large = False
        #: Requests whose headers are complete, to tell which reads completed some.
        self._headers_completed = 0
        super().connection_made(transport)
        self._start_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop waiting for anything."""
        self._stop_header_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Parse ``data``; count it against the cap if it is all part of pending headers."""
        between, completed = self._between_requests, self._headers_completed
        super().data_received(data)
        # Headers still incomplete are counted here, read by read (an endless line never
        # reaches the parser's callbacks); a read that began after the previous body
        # ended and completed no headers holds only headers. Headers that complete are
        # measured exactly by on_url and on_header, whatever the reads that carried them.
        if not between or self._headers_completed != completed or self.transport.is_closing():
            return
        self._header_bytes += len(data)
        if self._header_bytes > self.max_header_bytes:
            self._refuse(problems.HEADERS_TOO_LARGE, self._too_large())

    def on_url(self, url: bytes) -> None:
        """Part of the request line: counted against the cap."""
        self._count_head(len(url) + 16)  # the method, the version and the spaces: roughly
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        """One header line: counted against the cap (``name: value`` and its line end)."""
        self._count_head(len(name) + len(value) + 4)
        super().on_header(name, value)

    def _count_head(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self.max_header_bytes:
            # Raised inside the parser, which stops before the headers complete (no
            # request reaches the application) and reports it to data_received as a
            # parse error; send_400_response then answers 431 instead.
            self._head_too_large = True
            raise ValueError("request headers too large")

    def on_headers_complete(self) -> None:
        """The headers are in: from here on the body's deadline is the application's."""
        self._between_requests = False
        self._headers_completed += 1
        self._stop_header_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        """The body is in: what comes next is the next request (pipelined)."""
        super().on_message_complete()
        self._between_requests = True
        self._header_bytes = 0
        self._head_bytes = 0

    def on_response_complete(self) -> None:
        """Wait for the next request's headers, unless one is queued already (pipelined)."""
        idle = not self.pipeline
        super().on_response_complete()
        if idle and not self.transport.is_closing():
            self._start_header_timer()

    def send_400_response(self, msg: str) -> None:
        """A request httptools cannot parse: a problem, like every other refusal."""
        if self._head_too_large:
            self._refuse(problems.HEADERS_TOO_LARGE, self._too_large())
            return
        self._refuse(problems.MALFORMED_REQUEST, msg)

    def _too_large(self) -> str:
        return f"request headers exceed {self.max_header_bytes} bytes"

    def _start_header_timer(self) -> None:
        self._stop_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_late)

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        if self._header_bytes == 0:  # nothing of a request yet: an idle connection
            self.transport.close()
            return
        self._refuse(
            problems.REQUEST_TIMEOUT,
            f"request headers not received within {self.header_timeout:g} s",
        )

    def _refuse(self, kind: problems.Kind, detail: str) -> None:
        """Write a problem response and close: the request cannot go on."""
        self._stop_header_timer()
        if self.access_log:  # as uvicorn logs an answered request; there is no request line
            client = f"{self.client[0]}:{self.client[1]}" if self.client else "-"
            self.access_logger.info('%s - "-" %d', client, kind.status)
        body = bytes(problems.problem(kind, detail).body)
        head = [STATUS_LINE[kind.status]]
        head += [
            name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers
        ]
        head += [
            b"content-type: " + problems.MEDIA_TYPE.encode() + b"\r\n",
            b"content-length: " + str(len(body)).encode() + b"\r\n",
            b"x-content-type-options: nosniff\r\n",
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join([*head, body]))
        self.transport.close()


def guarded_protocol(
    *,
    header_timeout: float = DEFAULT_HEADER_TIMEOUT,
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
) -> type[GuardedHttpToolsProtocol]:
    """A protocol class for ``uvicorn.Config(http=...)`` with these header limits."""
    if header_timeout <= 0 or max_header_bytes < 1:
        raise ValueError("header_timeout and max_header_bytes must be positive")
    return type(
        "GuardedHttpToolsProtocol",
        (GuardedHttpToolsProtocol,),
        {"header_timeout": header_timeout, "max_header_bytes": max_header_bytes},
    )
