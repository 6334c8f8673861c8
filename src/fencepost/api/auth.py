"""Who may call what: bearer tokens with scopes, dashboard sessions, and CSRF.

Scopes:

* ``read``   — every ``GET`` (executions, schedules, dead letters, nodes, metrics);
* ``submit`` — ``POST /executions`` (and the client's batch submit);
* ``work``   — the worker protocol (claims, heartbeats, completions, commands, nodes);
* ``admin``  — everything, including cancel, pause, resume, replay and schedules.

Tokens come from a file (``--tokens FILE``) and/or the ``FENCEPOST_TOKENS``
environment variable; see :func:`load_tokens` for the format. With no token
configured, auth is off: every request is allowed. That is only safe on a
loopback address, so ``fencepost serve`` refuses any other bind without tokens.

A browser cannot attach a bearer token to a page load, so the dashboard signs in
once (``POST /session`` with a token), which sets an HttpOnly, SameSite=Strict
session cookie. Any state-changing request that does not carry a bearer token
(the dashboard's, or any browser's) must prove it comes from our own page: the
double-submit CSRF check below. This holds with auth off too, where a page on
another site could otherwise make the user's browser POST to localhost.
"""

from __future__ import annotations

import hmac
import os
import secrets
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from fastapi import Request

from fencepost.api.defaults import TOKENS_ENV
from fencepost.domain.errors import FencepostError

SESSION_COOKIE = "fencepost_session"
CSRF_COOKIE = "fencepost_csrf"
CSRF_HEADER = "x-csrf-token"
#: How long a dashboard session lasts without use.
SESSION_TTL = 12 * 3600.0
_UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class Scope(StrEnum):
    """What a token allows; ``admin`` allows everything."""

    ADMIN = "admin"
    SUBMIT = "submit"
    WORK = "work"
    READ = "read"


class CredentialsRefused(FencepostError):
    """No credentials, or credentials that match no token (HTTP 401)."""


class ScopeRefused(FencepostError):
    """Valid credentials without the scope this request needs (HTTP 403)."""


class CsrfRefused(FencepostError):
    """A state-changing browser request without a matching CSRF token (HTTP 403)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Principal:
    """The caller of one request: a token's name and scopes."""

    name: str
    scopes: frozenset[Scope]

    def allows(self, scope: Scope) -> bool:
        """True if this caller holds ``scope`` or ``admin``."""
        return scope in self.scopes or Scope.ADMIN in self.scopes


#: The caller when auth is off (no tokens configured).
ANONYMOUS_ADMIN = Principal(name="anonymous", scopes=frozenset({Scope.ADMIN}))


def _scopes(raw: Iterable[object], where: str) -> frozenset[Scope]:
    scopes: set[Scope] = set()
    for item in raw:
        try:
            scopes.add(Scope(str(item).strip()))
        except ValueError:
            known = ", ".join(s.value for s in Scope)
            raise ValueError(f"{where}: unknown scope {item!r} (one of {known})") from None
    if not scopes:
        raise ValueError(f"{where}: a token needs at least one scope")
    return frozenset(scopes)


def _check_token(token: str, where: str) -> str:
    if len(token) < 16:
        raise ValueError(f"{where}: a token must be at least 16 characters")
    return token


def parse_env_tokens(text: str) -> dict[str, Principal]:
    """Tokens from ``token=scope,scope;token=scope`` (whitespace ignored)."""
    tokens: dict[str, Principal] = {}
    for index, entry in enumerate(filter(None, (e.strip() for e in text.split(";")))):
        where = f"{TOKENS_ENV} entry {index + 1}"
        # The last '=': a base64 token may end in '=' padding; scope names never hold one.
        token, sep, scopes = entry.rpartition("=")
        if not sep:
            raise ValueError(f"{where}: expected token=scope[,scope...]")
        token = _check_token(token.strip(), where)
        tokens[token] = Principal(name=f"env-{index + 1}", scopes=_scopes(scopes.split(","), where))
    return tokens


def parse_token_file(path: Path) -> dict[str, Principal]:
    """Tokens from a JSON or YAML file::

    tokens:
      - name: ci-submitter
        token: 3f9c...      # at least 16 characters
        scopes: [submit, read]
    """
    import yaml  # YAML is a superset of JSON: one reader for both

    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: cannot read tokens: {exc}") from None
    entries = data.get("tokens") if isinstance(data, Mapping) else None
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a 'tokens' list")
    tokens: dict[str, Principal] = {}
    for index, entry in enumerate(entries):
        where = f"{path}: tokens[{index}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("token"), str):
            raise ValueError(f"{where}: expected a mapping with a 'token' string")
        scopes = entry.get("scopes")
        if not isinstance(scopes, list):
            raise ValueError(f"{where}.scopes: expected a list")
        name = entry.get("name", f"token-{index + 1}")
        tokens[_check_token(entry["token"], where)] = Principal(
            name=str(name), scopes=_scopes(scopes, f"{where}.scopes")
        )
    return tokens


def load_tokens(
    path: Path | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, Principal]:
    """Tokens from ``path`` (if given) and ``FENCEPOST_TOKENS`` (if set); ValueError if bad."""
    env = os.environ if environ is None else environ
    tokens = parse_token_file(path) if path is not None else {}
    if env.get(TOKENS_ENV, "").strip():
        tokens.update(parse_env_tokens(env[TOKENS_ENV]))
    return tokens


class Auth:
    """The service's credentials: configured tokens and live dashboard sessions."""

    def __init__(
        self,
        tokens: Mapping[str, Principal] | None = None,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._tokens = dict(tokens or {})
        self._sessions: dict[str, tuple[Principal, float]] = {}
        self._lock = threading.Lock()
        self._monotonic = monotonic

    @property
    def enabled(self) -> bool:
        """False when no token is configured: every request is allowed."""
        return bool(self._tokens)

    def token(self, presented: str) -> Principal | None:
        """The principal of a presented token, compared in constant time; None if unknown."""
        found = None
        for token, principal in self._tokens.items():
            if hmac.compare_digest(token.encode(), presented.encode()):
                found = principal
        return found

    def open_session(self, principal: Principal) -> str:
        """A new dashboard session id for ``principal``."""
        session = secrets.token_urlsafe(32)
        now = self._monotonic()
        with self._lock:
            # Forget abandoned sessions here, so that memory stays bounded by live ones.
            for stale in [k for k, (_, until) in self._sessions.items() if until <= now]:
                del self._sessions[stale]
            self._sessions[session] = (principal, now + SESSION_TTL)
        return session

    def session(self, session: str) -> Principal | None:
        """The principal of a live session (its expiry slides with use); None if unknown."""
        now = self._monotonic()
        with self._lock:
            found = self._sessions.get(session)
            if found is None or found[1] <= now:
                self._sessions.pop(session, None)
                return None
            self._sessions[session] = (found[0], now + SESSION_TTL)
            return found[0]

    def close_session(self, session: str) -> None:
        """Forget a session (sign out)."""
        with self._lock:
            self._sessions.pop(session, None)

    def authenticate(self, request: Request) -> tuple[Principal, bool]:
        """The caller of ``request`` and whether it came with a bearer token.

        Raises :class:`CredentialsRefused` when auth is on and neither a valid bearer
        token nor a live session cookie is presented.
        """
        header = request.headers.get("authorization")
        if header is not None:
            scheme, _, presented = header.partition(" ")
            if scheme.lower() != "bearer" or not presented.strip():
                raise CredentialsRefused("Authorization: expected 'Bearer <token>'")
            if not self.enabled:
                return ANONYMOUS_ADMIN, True
            principal = self.token(presented.strip())
            if principal is None:
                raise CredentialsRefused("Authorization: unknown token")
            return principal, True
        if not self.enabled:
            return ANONYMOUS_ADMIN, False
        session = request.cookies.get(SESSION_COOKIE)
        principal = None if session is None else self.session(session)
        if principal is None:
            raise CredentialsRefused("missing credentials: send 'Authorization: Bearer <token>'")
        return principal, False


def check_csrf(request: Request) -> None:
    """Refuse a state-changing browser request whose CSRF header does not match its cookie.

    Only requests without a bearer token are checked (a browser never adds one on
    its own). A request that carries neither cookies nor an ``Origin`` header is
    not from a browser (curl, the Python client) and passes; browsers always send
    ``Origin`` on a cross-site POST. The header is custom, so a cross-site page
    cannot set it without a CORS preflight, which this service never grants.
    """
    if request.method not in _UNSAFE:
        return
    from_browser = bool(request.cookies) or "origin" in request.headers
    if not from_browser:
        return
    cookie = request.cookies.get(CSRF_COOKIE)
    header = request.headers.get(CSRF_HEADER)
    if not cookie or not header or not hmac.compare_digest(cookie.encode(), header.encode()):
        raise CsrfRefused(f"{CSRF_HEADER}: missing or does not match the {CSRF_COOKIE} cookie")


#: The ASGI scope key where :class:`~fencepost.api.guard.Guard` leaves ``(principal,
#: bearer)`` once it has checked a request's credentials, before reading its body. A key of
#: the scope, not of ``scope["state"]``: the scope is made afresh for each request, so
#: nothing left there can ever answer for another one.
AUTHENTICATED = "fencepost.authenticated"

#: The scope each :func:`require` dependency demands, so that the guard can find a route's
#: scopes among its dependencies without calling them (weak: a dropped route drops its own).
_REQUIRED: weakref.WeakKeyDictionary[Callable[..., Any], Scope] = weakref.WeakKeyDictionary()


def admit(principal: Principal, bearer: bool, request: Request, scopes: Iterable[Scope]) -> None:
    """Refuse ``principal``'s ``request`` unless it may do what needs ``scopes``.

    A request without a bearer token must pass :func:`check_csrf` first
    (:class:`CsrfRefused`); then each scope must be held (:class:`ScopeRefused`).
    """
    if not bearer:
        check_csrf(request)
    for scope in scopes:
        if not principal.allows(scope):
            raise ScopeRefused(f"this token lacks the '{scope.value}' scope")


def require(scope: Scope) -> Callable[[Request], Principal]:
    """A FastAPI dependency: the caller, if it holds ``scope`` (else 401/403).

    In the service the guard has already authenticated the caller from the headers
    (so that no body is read for a refused request); the dependency then reuses that
    caller and checks again, which costs nothing and keeps an app built without the
    guard just as strict.
    """

    def dependency(request: Request) -> Principal:
        checked = request.scope.get(AUTHENTICATED)
        if checked is None:
            auth: Auth = request.app.state.auth
            checked = auth.authenticate(request)
        principal, bearer = checked
        admit(principal, bearer, request, [scope])
        return principal

    dependency.__name__ = f"require_{scope.value}"
    _REQUIRED[dependency] = scope
    return dependency


def required_scope(dependency: Callable[..., Any] | None) -> Scope | None:
    """The scope ``dependency`` demands if :func:`require` made it, else None."""
    if dependency is None:
        return None
    try:
        return _REQUIRED.get(dependency)
    except TypeError:  # not weak-referenceable (a builtin, say): not one of ours
        return None


def csrf_token() -> str:
    """A fresh CSRF token for the dashboard's cookie."""
    return secrets.token_urlsafe(24)
