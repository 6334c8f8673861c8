"""RFC 9457 problem details: one stable ``type`` URI per kind of error.

Every error the service answers with is ``application/problem+json``::

    {"type": "https://fencepost.dev/problems/validation", "title": "Invalid request",
     "status": 422, "detail": "execute_at: must be timezone-aware", "field": "execute_at"}

``field`` is present when one input is to blame. Clients branch on ``type``, never
on ``title`` or ``detail`` (those are for people and may change).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.routing import compile_path

from fencepost.api.auth import CredentialsRefused, CsrfRefused, ScopeRefused
from fencepost.api.buckets import declaring_bucket_range
from fencepost.domain import payloads
from fencepost.domain.checks import suggest
from fencepost.domain.errors import (
    CatalogueConflict,
    FencepostError,
    IdempotencyConflict,
    InvalidTransition,
    NotDue,
    NotFound,
    NotRunning,
    StaleLease,
    StoreUnavailable,
    ValidationError,
)
from fencepost.wire.fields import PATTERN_MEANINGS

MEDIA_TYPE = "application/problem+json"
_BASE = "https://fencepost.dev/problems/"


@dataclass(frozen=True, kw_only=True, slots=True)
class Kind:
    """One kind of problem: its stable ``type`` URI, title and HTTP status."""

    type: str
    title: str
    status: int


VALIDATION = Kind(type=_BASE + "validation", title="Invalid request", status=422)
NOT_FOUND = Kind(type=_BASE + "not-found", title="Not found", status=404)
INVALID_TRANSITION = Kind(
    type=_BASE + "invalid-transition", title="Not allowed in this state", status=409
)
IDEMPOTENCY_CONFLICT = Kind(
    type=_BASE + "idempotency-conflict", title="Idempotency key reused", status=409
)
CATALOGUE_CONFLICT = Kind(
    type=_BASE + "catalogue-conflict",
    title="Job version published with a different definition",
    status=409,
)
STALE_LEASE = Kind(type=_BASE + "stale-lease", title="Lease no longer held", status=409)
NOT_DUE = Kind(type=_BASE + "not-due", title="Occurrence not due", status=409)
NOT_RUNNING = Kind(type=_BASE + "not-running", title="Execution not running", status=409)
#: The store could not answer now (an outage, or a day of history being pruned); retryable.
STORE_UNAVAILABLE = Kind(type=_BASE + "store-unavailable", title="Store unavailable", status=503)
#: ``Retry-After`` (seconds) on a store-unavailable problem: the HTTP clients ask again
#: after it. A lost connection the store has already retried for its ``retry_timeout``;
#: the rest passes in moments (a keyed submit or a replay inside a prune's window).
STORE_RETRY_AFTER = 1
BODY_TOO_LARGE = Kind(type=_BASE + "body-too-large", title="Request body too large", status=413)
UNAUTHORIZED = Kind(type=_BASE + "unauthorized", title="Authentication required", status=401)
FORBIDDEN = Kind(type=_BASE + "forbidden", title="Scope missing", status=403)
CSRF = Kind(type=_BASE + "csrf", title="CSRF check failed", status=403)
METHOD_NOT_ALLOWED = Kind(type=_BASE + "method-not-allowed", title="Method not allowed", status=405)
#: A FencepostError this module has no specific kind for (a bug if ever seen).
INTERNAL = Kind(type=_BASE + "internal", title="Internal error", status=500)

# Refusals of the service's guard (fencepost.api.guard) and HTTP protocol
# (fencepost.api.protocol), answered before any route runs.
#: The ``Host`` header names no loopback address while auth is off (DNS rebinding).
HOST_NOT_ALLOWED = Kind(type=_BASE + "host-not-allowed", title="Host not allowed", status=400)
#: Not HTTP the server can parse.
MALFORMED_REQUEST = Kind(
    type=_BASE + "malformed-request", title="Malformed HTTP request", status=400
)
#: The headers or the body did not arrive within their time limit.
REQUEST_TIMEOUT = Kind(type=_BASE + "request-timeout", title="Request too slow", status=408)
#: The request's headers exceed the server's cap.
HEADERS_TOO_LARGE = Kind(
    type=_BASE + "headers-too-large", title="Request headers too large", status=431
)
#: The client's address failed authentication too often; ``Retry-After`` says when to retry.
TOO_MANY_FAILURES = Kind(
    type=_BASE + "too-many-auth-failures", title="Too many failed authentications", status=429
)
#: The bodies being received already fill the service's budget; ``Retry-After`` applies.
BODY_BUDGET_SPENT = Kind(
    type=_BASE + "body-budget-spent", title="Too many request bodies in flight", status=503
)


#: Most specific first: the first matching class decides the kind.
_KINDS: tuple[tuple[type[FencepostError], Kind], ...] = (
    (ValidationError, VALIDATION),
    (NotFound, NOT_FOUND),
    (InvalidTransition, INVALID_TRANSITION),
    (CatalogueConflict, CATALOGUE_CONFLICT),
    (IdempotencyConflict, IDEMPOTENCY_CONFLICT),
    (StaleLease, STALE_LEASE),
    (NotRunning, NOT_RUNNING),
    (NotDue, NOT_DUE),
    (StoreUnavailable, STORE_UNAVAILABLE),
    (CredentialsRefused, UNAUTHORIZED),
    (ScopeRefused, FORBIDDEN),
    (CsrfRefused, CSRF),
)


class Problem(BaseModel):
    """The body of every error response (RFC 9457)."""

    type: str
    title: str
    status: int
    detail: str
    field: str | None = None


def problem(kind: Kind, detail: str, *, field: str | None = None, **extra: Any) -> JSONResponse:
    """A problem-details response of ``kind``; ``field`` is omitted when None.

    ``extra`` members (RFC 9457 extensions) are added as they are.
    """
    body: dict[str, Any] = {
        "type": kind.type,
        "title": kind.title,
        "status": kind.status,
        "detail": detail,
    }
    if field is not None:
        body["field"] = field
    body.update(extra)
    return JSONResponse(body, status_code=kind.status, media_type=MEDIA_TYPE)


def responses(*kinds: Kind) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries declaring these problems on a route."""
    out: dict[int | str, dict[str, Any]] = {}
    for kind in kinds:
        entry = out.setdefault(
            kind.status, {"model": Problem, "content": {MEDIA_TYPE: {}}, "description": ""}
        )
        entry["description"] = " / ".join(filter(None, [entry["description"], kind.title]))
    return out


def kind_of(exc: FencepostError) -> Kind:
    """The problem kind a fencepost error maps to."""
    for cls, kind in _KINDS:
        if isinstance(exc, cls):
            return kind
    return INTERNAL


def _fencepost_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, FencepostError)
    return for_error(exc)


def _request_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    first = _reported(exc.errors(), exc.body)
    field = field_of(first, exc.body)
    message = str(first.get("msg", "invalid request"))
    if first.get("type") == "string_pattern_mismatch":
        message = PATTERN_MEANINGS.get(first.get("ctx", {}).get("pattern"), message)
    elif first.get("type") == "extra_forbidden":
        known = _body_fields(request, list(first.get("loc", ()))[1:-1])
        hint = f" ({suggest(str(first['loc'][-1]), known)})" if known else ""
        message = f"is not a field of this request{hint}"
    return problem(VALIDATION, f"{field}: {message}", field=field)


def _body_fields(request: Request, path: list[Any]) -> list[str]:
    """The fields the request body's schema allows at ``path`` (from the OpenAPI spec).

    For the hint on an unknown field (``delay`` -> ``delay_seconds``): the spec holds
    each operation's body schema, so nothing here repeats the models' field lists.
    """
    spec = request.app.openapi()
    path_template = next(
        (t for t in spec.get("paths", {}) if _path_regex(t).match(request.scope["path"])), None
    )
    operation = spec["paths"].get(path_template, {}).get(request.method.lower(), {})
    content = operation.get("requestBody", {}).get("content", {})
    schema: Any = content.get("application/json", {}).get("schema", {})
    for part in [*path, None]:
        schema = _resolved(spec, schema)
        if part is None:
            break
        schema = (
            schema.get("items", {})
            if isinstance(part, int)
            else schema.get("properties", {}).get(part, {})
        )
    return list(schema.get("properties", {}))


def _resolved(spec: dict[str, Any], schema: Any) -> dict[str, Any]:
    """``schema`` with ``$ref`` followed, and the first object of an ``anyOf``/``oneOf``."""
    while isinstance(schema, dict):
        if "$ref" in schema:
            schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
            continue
        options = schema.get("anyOf") or schema.get("oneOf")
        if options and "properties" not in schema:
            schema = next(
                (o for o in options if isinstance(o, dict) and o.get("type") != "null"), {}
            )
            continue
        return schema
    return {}


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    if exc.status_code == HTTPStatus.BAD_REQUEST:
        # FastAPI's one 400: a body it cannot decode at all (not UTF-8, a broken form).
        # Malformed JSON is already a 422 naming ``body``; this is the same mistake.
        response = await _undecodable(request, exc)
    else:
        response = problem(_http_kind(exc.status_code), str(exc.detail))
    response.headers.update(exc.headers or {})
    if exc.status_code == HTTPStatus.METHOD_NOT_ALLOWED:
        response.headers["Allow"] = _allowed_methods(request, response.headers.get("Allow", ""))
    return response


async def _undecodable(request: Request, exc: HTTPException) -> JSONResponse:
    """The 422 for a body FastAPI's decoder gave up on, saying why where the rule can.

    Valid JSON can still defeat :func:`json.loads`: nesting deep enough to exhaust
    its stack, or an integer past Python's digits limit. Decoded again by the payload
    rule's own :func:`~fencepost.domain.payloads.loads`, such a body is refused naming
    its field (``inputs``: nested too deep; ``inputs.n``: too many digits). Only a
    body FastAPI has already read in full gets here (``request.body()`` returns it
    again), and only when its decoder failed on something other than bad syntax.
    """
    if isinstance(exc.__cause__, RecursionError | ValueError) and not isinstance(
        exc.__cause__, UnicodeDecodeError
    ):
        try:
            payloads.loads(await request.body())
        except ValidationError as refusal:
            return problem(VALIDATION, str(refusal), field=refusal.field)
        except ValueError:  # not UTF-8 after all, or not JSON: said below
            pass
    return problem(VALIDATION, "body: cannot be decoded (send UTF-8 JSON)", field="body")


def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    return problem(INTERNAL, "the service failed to answer this request; see its log")


def _allowed_methods(request: Request, fallback: str) -> str:
    """Every method of the resource the request's path names, for a 405's ``Allow``.

    Starlette lists only the methods of the first route whose path matched, but FastAPI
    registers one route per method: ``PUT /schedules/x`` would be told ``Allow: GET``
    though PATCH and DELETE are served there too. The spec holds each path template
    with all its methods, in the order the routes were added, so the first template
    matching the path is the resource the router picked (``/executions/batch`` is its
    own, not an ``/executions/{execution_id}``). A path the spec leaves out (the
    dashboard's) keeps what the router said.
    """
    path, root = request.scope["path"], request.scope.get("root_path", "")
    if root and path.startswith(root + "/"):  # mounted under a prefix: routes omit it
        path = path[len(root) :]
    for template, operations in request.app.openapi().get("paths", {}).items():
        if _path_regex(template).match(path):
            methods = {method.upper() for method in operations} & _METHODS
            if "GET" in methods:
                methods.add("HEAD")  # served for every GET route, as Starlette does
            return ", ".join(sorted(methods))
    return fallback


_METHODS = frozenset({"GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE"})


@functools.cache
def _path_regex(template: str) -> re.Pattern[str]:
    regex, _, _ = compile_path(template)
    return regex


def _http_kind(status: int) -> Kind:
    """The kind of a framework error (an unknown path, a method the path lacks)."""
    known = {NOT_FOUND.status: NOT_FOUND, METHOD_NOT_ALLOWED.status: METHOD_NOT_ALLOWED}
    if status in known:
        return known[status]
    phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
    return Kind(type=_BASE + phrase.lower().replace(" ", "-"), title=phrase, status=status)


#: How pydantic names one branch of a union in an error's ``loc``: ``list[constrained-str]``,
#: ``dict[constrained-str,constrained-int]``. A branch is not a field a caller wrote.
_UNION_BRANCH = re.compile(r"^[a-z][a-z-]*\[.*\]$")
#: Where an error's ``loc`` leaves the request's body (a query parameter, a header).
_UNSEEN = object()


def _parts(loc: Sequence[Any], body: Any) -> list[tuple[Any, bool]]:
    """Each part of ``loc`` and whether it is a union branch's tag rather than a name the
    caller wrote: the body is walked along ``loc``, and only a part that names no key
    or index where it stands can be a tag (a caller's key ``list[x]`` stays a key)."""
    if not loc:
        return []
    value: Any = body if loc[0] == "body" else _UNSEEN
    parts: list[tuple[Any, bool]] = [(loc[0], False)]
    for part in loc[1:]:
        keyed = isinstance(value, Mapping) and isinstance(part, str) and part in value
        indexed = isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value)
        if keyed or indexed:
            value = value[part]
        elif isinstance(part, str) and _UNION_BRANCH.match(part):
            parts.append((part, True))  # the input stays where it was
            continue
        else:
            value = _UNSEEN
        parts.append((part, False))
    return parts


def _wrong_branch(error: dict[str, Any], body: Any) -> bool:
    # The input is not of this branch's type at all ("should be a valid list").
    parts = _parts(error.get("loc", ()), body)
    return str(error.get("type", "")).endswith("_type") and bool(parts) and parts[-1][1]


def _reported(errors: Sequence[Any], body: Any = _UNSEEN) -> dict[str, Any]:
    """The error a refusal reports: the first, except that of a union's branches the one
    the input's shape chose (``{"q": -1}`` for ``list | dict`` is a bad value of the
    object, not "should be a valid list"). ``body``: the request's, as parsed."""
    chosen = [error for error in errors if not _wrong_branch(error, body)]
    return dict((chosen or list(errors) or [{}])[0])


def field_of(error: dict[str, Any], body: Any = _UNSEEN) -> str:
    """Name the offending input of one pydantic error from its ``loc``.

    ``("body", "execute_at")`` names ``execute_at``, ``("query", "limit")`` names
    ``limit`` and ``("query", "state", 1)`` names ``state``; a body that is not JSON at
    all (``("body", 12)``) names ``body``. A union branch's tag is left out, unless
    ``body`` (the request's, as parsed) shows it is a key the caller wrote.
    """
    loc = [str(part) for part, tag in _parts(error.get("loc", ()), body) if not tag]
    if loc[-1:] == ["[key]"]:
        loc = loc[:-2]  # a bad key of an object names the object: the key may be anything
    if error.get("type") == "json_invalid" or loc[1:] == []:
        return loc[0] if loc else "body"
    if loc[0] == "query" and len(loc) == 3 and isinstance(error["loc"][2], int):
        return loc[1]  # one of a repeated parameter (?state=A&state=B) names the parameter
    return ".".join(loc[1:])


def install(app: FastAPI) -> None:
    """Register the exception handlers that turn errors into problem details.

    Also make the OpenAPI spec say so: FastAPI documents a 422 ``HTTPValidationError``
    body on every route with parameters, but the handler above answers a
    :class:`Problem` as ``application/problem+json``.
    """
    app.add_exception_handler(FencepostError, _fencepost_error)
    app.add_exception_handler(RequestValidationError, _request_validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    # Anything unexpected: a problem document too, with no detail of the bug (the
    # traceback goes to the server's log, where Starlette still sends it).
    app.add_exception_handler(Exception, _unexpected_error)
    app.openapi = _declaring_problems(app.openapi)  # type: ignore[method-assign]
    # Not a problem, but this is where the spec is made to say what the app answers.
    app.openapi = declaring_bucket_range(app, app.openapi)  # type: ignore[method-assign]


_FASTAPI_422 = "#/components/schemas/HTTPValidationError"
_PROBLEM_REF = "#/components/schemas/Problem"


def _declaring_problems(generate: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    def openapi() -> dict[str, Any]:
        schema = generate()  # FastAPI caches it: the edit below must be idempotent
        replaced = False
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                response = operation.get("responses", {}).get("422")
                if response is not None and _FASTAPI_422 in json.dumps(response):
                    response["content"] = {MEDIA_TYPE: {"schema": {"$ref": _PROBLEM_REF}}}
                    replaced = True
        if replaced:
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components.setdefault("Problem", Problem.model_json_schema())
            # FastAPI's model, now unused, and its item type unless a route uses it.
            components.pop("HTTPValidationError", None)
            if '"#/components/schemas/ValidationError"' not in json.dumps(schema):
                components.pop("ValidationError", None)
        return schema

    return openapi


def for_error(exc: FencepostError) -> JSONResponse:
    """The problem response for ``exc``: what the exception handler answers inside a
    route, and the guard outside one (its 401s and 403s), ``WWW-Authenticate`` included."""
    field = exc.field if isinstance(exc, ValidationError) else None
    extra: dict[str, Any] = {}
    if isinstance(exc, CatalogueConflict):  # what a remote worker needs to say which
        extra = {
            "job": exc.job,
            "version": exc.version,
            "stored_digest": exc.stored_digest,
            "digest": exc.digest,
        }
    response = problem(kind_of(exc), str(exc), field=field, **extra)
    if isinstance(exc, CredentialsRefused):
        response.headers["WWW-Authenticate"] = 'Bearer realm="fencepost"'
    if isinstance(exc, StoreUnavailable):
        response.headers["Retry-After"] = str(STORE_RETRY_AFTER)
    return response
