"""The service's front door: who may send a body, how large, and how fast.

Every HTTP request passes here before any route runs, in this order:

1. :class:`LoopbackOnly` (auth off only): the ``Host`` must name a loopback address,
   else ``400 host-not-allowed``. Without tokens anyone who reaches the port is admin,
   and a page that rebinds its own name to 127.0.0.1 (DNS rebinding) would otherwise
   count as same-origin, set its own CSRF cookie and drive the API from a browser.
2. :class:`Guard`:

   a. an address blocked for failed authentications gets ``429
      too-many-auth-failures`` with ``Retry-After``, whatever it sends, unless it
      carries a live dashboard session (the rate: :class:`~.limits.FailureLimiter`);
   b. a route that requires a scope has its caller's credentials, CSRF token and
      scope checked from the headers alone: ``401``/``403`` before a byte of the body
      is read;
   c. the body, if any: at most ``max_bytes`` (with auth on, 16 KiB for a request
      without valid credentials: only a sign-in has a use for one) or ``413``;
      reserved in the app's byte budget, or ``503 body-budget-spent`` with
      ``Retry-After``; received in full within ``body_timeout`` seconds of the
      headers, or ``408 request-timeout``.

A refusal sent before the body has been read in full closes the connection: the
client would otherwise go on sending a body that nobody reads.

A *failed authentication* is an ``Authorization`` header that is not ``Bearer`` and a
configured token, or a 401 that a route answers (a sign-in with an unknown token). A
request without credentials is not one: it guesses nothing, and the dashboard sends a
few before it signs in. A blocked address is refused without its credentials being
looked at, valid ones included: were a valid token still served, the difference
between 200 and 429 would let it go on guessing at full speed.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass

import anyio
from fastapi.dependencies.models import Dependant
from fastapi.routing import iter_route_contexts
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Send
from starlette.types import Scope as ASGIScope

from fencepost.api import problems
from fencepost.api.auth import (
    AUTHENTICATED,
    SESSION_COOKIE,
    Auth,
    CredentialsRefused,
    Principal,
    Scope,
    admit,
    required_scope,
)
from fencepost.api.defaults import DEFAULT_BODY_BUDGET, DEFAULT_BODY_TIMEOUT
from fencepost.api.limits import ByteBudget, FailureLimiter, client_key
from fencepost.domain.errors import FencepostError

#: Default cap on a request body: 1 MiB, the store's default payload cap.
DEFAULT_MAX_BODY_BYTES = 1_048_576
#: Cap on one body from a caller without valid credentials (with auth on): a sign-in's
#: token is at most 4,096 characters.
ANONYMOUS_MAX_BODY_BYTES = 16_384
#: Bytes of such bodies held at once: a budget of their own, so that they can never
#: crowd out the bodies of callers who proved who they are.
ANONYMOUS_BODY_BUDGET = 1_048_576
#: ``Retry-After`` on a spent budget: bodies finish (or time out) within seconds.
BUDGET_RETRY_AFTER = 1


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(value: str) -> str:
    """The name in a ``Host`` header, without its port: ``[::1]:8080`` -> ``::1``."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    if value.count(":") == 1:  # name:port; more colons is a bare IPv6 address
        return value.partition(":")[0]
    return value


def has_body(scope: ASGIScope) -> bool:
    """Whether the request announces a body (a non-zero ``Content-Length``, or chunks)."""
    for name, value in scope["headers"]:
        if name == b"content-length" and value.strip() not in (b"", b"0"):
            return True
        if name == b"transfer-encoding":
            return True
    return False


def content_length(scope: ASGIScope) -> int | None:
    """The declared ``Content-Length``; None if absent or not a number (a chunked body)."""
    for name, value in scope["headers"]:
        if name == b"content-length" and value.strip().isdigit():
            return int(value)
    return None


class RouteScopes:
    """The scopes the route that will serve a request requires (none: a public route).

    The route is found as the router finds it, the first full match of path and
    method, over the same route contexts (included routers expanded); a path whose
    method does not match is answered 405 without running any route. The table is
    built once and again whenever the app's own route list changes. Were it ever
    stale (a route added to an included router after the first request), a new
    guarded route would still be refused by its dependency, only after its body.
    """

    def __init__(self) -> None:
        self._key: tuple[object, ...] | None = None
        self._table: list[_Entry] = []

    def __call__(self, app: Starlette, scope: ASGIScope) -> tuple[Scope, ...]:
        """The scopes required for ``scope``'s path and method on ``app``."""
        key = tuple(
            (id(route), len(getattr(getattr(route, "original_router", None), "routes", ())))
            for route in app.routes
        )
        if key != self._key:
            self._table = [
                _Entry(
                    methods=getattr(context, "methods", None) or None,
                    matches=context.matches,
                    scopes=tuple(_scopes_of(getattr(context, "dependant", None))),
                )
                for context in iter_route_contexts(app.routes)
            ]
            self._key = key
        method = scope.get("method")
        probe = dict(scope)  # matching must leave nothing in the request's own scope
        for entry in self._table:
            # Another method's route can at best match partially (a 405): skip its regex.
            if entry.methods is not None and method not in entry.methods:
                continue
            if entry.matches(probe)[0] is Match.FULL:
                return entry.scopes
        return ()


@dataclass(frozen=True, slots=True)
class _Entry:
    methods: Collection[str] | None
    matches: Callable[[ASGIScope], tuple[Match, ASGIScope]]
    scopes: tuple[Scope, ...]


def _scopes_of(dependant: Dependant | None) -> Iterator[Scope]:
    if dependant is None:
        return
    for dependency in dependant.dependencies:
        found = required_scope(dependency.call)
        if found is not None:
            yield found
        yield from _scopes_of(dependency)


async def _answer(
    response: Response, scope: ASGIScope, receive: Receive, send: Send, *, close: bool
) -> None:
    if close:
        # Part of the body may still be on its way: end the connection rather than drain it.
        response.headers["Connection"] = "close"
    await response(scope, receive, send)


class LoopbackOnly:
    """Answer only requests whose ``Host`` names a loopback address; others get a 400 problem.

    For a service without tokens (see the module docstring). Any loopback address
    is accepted, and ``localhost``; the port is ignored.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: ASGIScope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = Request(scope).headers.get("host", "")
            if not is_loopback(host_name(host)):
                detail = (
                    f"Host {host!r} is not a loopback name; without tokens the service "
                    "answers only localhost and loopback addresses"
                )
                response = problems.problem(problems.HOST_NOT_ALLOWED, detail, field="host")
                await _answer(response, scope, receive, send, close=has_body(scope))
                return
        await self.app(scope, receive, send)


class _Held:
    """Bytes one request holds in a budget, returned in one go when it is done."""

    def __init__(self, budget: ByteBudget) -> None:
        self.budget = budget
        self.size = 0

    def take(self, size: int) -> bool:
        if not self.budget.take(size):
            return False
        self.size += size
        return True

    def release(self) -> None:
        self.budget.give(self.size)
        self.size = 0


class Guard:
    """Authentication before the body, then a bounded body: steps 2a-2c of the module docstring.

    ``budget`` is shared by every request of the app; ``failures`` counts failed
    authentications per client address (only while auth is on: with it off there is
    nothing to guess). The credentials are the app's ``state.auth``, read at each
    request like the routes' own dependencies read them.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_bytes: int = DEFAULT_MAX_BODY_BYTES,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        budget: ByteBudget | None = None,
        failures: FailureLimiter | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.body_timeout = body_timeout
        self.budget = budget if budget is not None else ByteBudget(DEFAULT_BODY_BUDGET)
        self.anonymous_budget = ByteBudget(ANONYMOUS_BODY_BUDGET)
        self.failures = failures if failures is not None else FailureLimiter()
        self.route_scopes = RouteScopes()

    async def __call__(self, scope: ASGIScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        auth: Auth = scope["app"].state.auth
        request = Request(scope)
        address = client_key(scope.get("client"))
        body = has_body(scope)
        if auth.enabled:
            wait = self.failures.retry_after(address)
            if wait > 0 and not _live_session(auth, request):
                await _answer(_too_many(wait), scope, receive, send, close=body)
                return
        try:
            principal, counted = self._authenticate(auth, request, address)
        except FencepostError as exc:
            await _answer(problems.for_error(exc), scope, receive, send, close=body)
            return

        async def counting(message: Message) -> None:
            # A route's own 401 is a failed authentication too (a sign-in's unknown token).
            if (
                message["type"] == "http.response.start"
                and message["status"] == 401
                and auth.enabled
                and not counted
            ):
                self.failures.fail(address)
            await send(message)

        if not body:
            await self.app(scope, receive, counting)
            return
        anonymous = auth.enabled and principal is None
        held = _Held(self.anonymous_budget if anonymous else self.budget)
        try:
            received = await self._receive(scope, receive, held, anonymous=anonymous)
            if received is None:  # the client left
                return
            if isinstance(received, Response):
                await _answer(received, scope, receive, send, close=True)
                return
            replayed = False

            async def replay() -> Message:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": received, "more_body": False}
                return await receive()  # then the disconnect, when it comes

            await self.app(scope, replay, counting)
        finally:
            held.release()

    def _authenticate(
        self, auth: Auth, request: Request, address: str
    ) -> tuple[Principal | None, bool]:
        """The caller (None: no valid credentials, on a public route) and whether it failed.

        Raises the 401/403 of a route that requires a scope, as its dependency would.
        """
        scopes = self.route_scopes(request.scope["app"], request.scope)
        try:
            principal, bearer = auth.authenticate(request)
        except CredentialsRefused:
            failed = auth.enabled and "authorization" in request.headers
            if failed:
                self.failures.fail(address)
            if scopes:
                raise
            return None, failed  # a public route decides for itself (GET /session)
        if scopes:
            admit(principal, bearer, request, scopes)
            request.scope[AUTHENTICATED] = (principal, bearer)
        return principal, False

    async def _receive(
        self, scope: ASGIScope, receive: Receive, held: _Held, *, anonymous: bool
    ) -> bytes | Response | None:
        """The whole body; a refusal to send instead; None if the client went away."""
        max_bytes = min(self.max_bytes, ANONYMOUS_MAX_BODY_BYTES) if anonymous else self.max_bytes
        declared = content_length(scope)
        if declared is not None and declared > max_bytes:
            return _too_large(max_bytes, anonymous)
        if declared is not None and not held.take(declared):
            return _budget_spent()
        chunks: list[bytes] = []
        size = 0
        with anyio.move_on_after(self.body_timeout) as deadline:
            more = True
            while more:
                message = await receive()
                if message["type"] != "http.request":
                    return None
                chunk: bytes = message.get("body", b"")
                size += len(chunk)
                if size > max_bytes:  # a chunked body, or one longer than it said
                    return _too_large(max_bytes, anonymous)
                if size > held.size and not held.take(size - held.size):
                    return _budget_spent()
                chunks.append(chunk)
                more = message.get("more_body", False)
        if deadline.cancelled_caught:
            return problems.problem(
                problems.REQUEST_TIMEOUT,
                f"request body not received within {self.body_timeout:g} s ({size} bytes arrived)",
                field="body",
            )
        return b"".join(chunks)


def _live_session(auth: Auth, request: Request) -> bool:
    session = request.cookies.get(SESSION_COOKIE)
    return session is not None and auth.session(session) is not None


def _too_many(wait: float) -> Response:
    seconds = max(1, math.ceil(wait))
    response = problems.problem(
        problems.TOO_MANY_FAILURES,
        f"too many failed authentications from this address; retry in {seconds} s",
    )
    response.headers["Retry-After"] = str(seconds)
    return response


def _too_large(max_bytes: int, anonymous: bool) -> Response:
    detail = f"request body exceeds {max_bytes} bytes"
    if anonymous:
        detail += " (the cap without valid credentials)"
    return problems.problem(problems.BODY_TOO_LARGE, detail, field="body")


def _budget_spent() -> Response:
    response = problems.problem(
        problems.BODY_BUDGET_SPENT,
        "the service is receiving as many request bodies as it buffers at once; retry soon",
    )
    response.headers["Retry-After"] = str(BUDGET_RETRY_AFTER)
    return response
