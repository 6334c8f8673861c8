"""What a client verb yields and is sent back: one HTTP request, a pause, an answer.

:mod:`fencepost.client.verbs` and :mod:`fencepost.client.worker_verbs` describe each
verb as a generator of these; :class:`~fencepost.client.http.Client` and
:class:`~fencepost.client.aio.AsyncClient` send them (see :mod:`fencepost.client.verbs`).
"""

from __future__ import annotations

import json
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter

from fencepost import tracing
from fencepost.client.errors import error_of
from fencepost.domain import payloads
from fencepost.domain.errors import StoreUnavailable

if TYPE_CHECKING:
    from httpx._client import UseClientDefault

#: Large enough for any payload the service accepts; the service enforces its own cap.
ENCODE_LIMIT = 64 * 1024 * 1024

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Request:
    """One HTTP request of a verb, as either transport sends it.

    ``body`` is encoded by :meth:`content` (strict JSON); ``body_json`` is a body
    already encoded. Query values that are None are left out. ``hold`` is how long
    the service may hold the answer back (a long-poll): the transport waits that
    much longer for it (:meth:`timeout`).
    """

    method: str
    path: str
    body: Any = None
    body_json: str | None = None
    params: Mapping[str, Any] | None = None
    headers: Mapping[str, str] | None = field(default=None)
    hold: float = 0.0
    #: A response header the verb reads too: it then receives (body, header value).
    header: str | None = None
    #: Whether the client may send it again (see :mod:`fencepost.client.retries`): False
    #: for the worker protocol, whose outages the worker handles itself.
    retry: bool = True

    def content(self) -> str | None:
        """The body's JSON text, or None for a request without one."""
        if self.body is not None:
            # Strict JSON (no NaN), so what the service stores is what was meant.
            return payloads.encode(self.body, field="body", limit=ENCODE_LIMIT)
        return self.body_json

    def query(self) -> dict[str, Any] | None:
        """The query parameters that are set."""
        if self.params is None:
            return None
        return {k: v for k, v in self.params.items() if v is not None}

    def timeout(self, client: httpx.Timeout) -> httpx.Timeout | UseClientDefault:
        """The client's timeouts, the read one lengthened by ``hold``."""
        if not self.hold or client.read is None:
            return httpx.USE_CLIENT_DEFAULT  # (a TestClient warns of any timeout given)
        return httpx.Timeout(
            connect=client.connect,
            read=client.read + self.hold,
            write=client.write,
            pool=client.pool,
        )

    def header_fields(self, content: str | None) -> dict[str, str]:
        """The request's own headers, with the content type when it has a body, and the
        caller's trace context when tracing is on (the service continues it)."""
        fields = {**tracing.outgoing(), **(self.headers or {})}
        if content is not None:
            fields["Content-Type"] = "application/json"
        return fields


@dataclass(frozen=True, slots=True)
class Pause:
    """A verb's wait between two requests; the runner sleeps ``seconds`` its own way."""

    seconds: float


#: A verb: yields its requests (and pauses), is sent each answer's body, returns ``T``.
Verb = Generator[Request | Pause, bytes, T]


def answer_for(request: Request, response: httpx.Response) -> Any:
    """What a verb receives for ``request``: the answer's body (:func:`answer_of`), with
    the value of the header it asked for (None if absent) when it asked for one."""
    body = answer_of(response.status_code, response.content, response.text)
    return body if request.header is None else (body, response.headers.get(request.header))


def answer_of(status: int, content: bytes, text: str) -> bytes:
    """The body of an answer (empty for 204), or the error its problem document names."""
    if status < 400:
        return content
    try:
        problem = json.loads(content)
    except ValueError:
        problem = {"detail": text[:500]}
    if not isinstance(problem, dict):
        problem = {"detail": str(problem)[:500]}
    raise error_of(status, problem)


def unreachable(base_url: str, exc: Exception) -> StoreUnavailable:
    """The outage a transport's failure (no connection, a timeout) is to the caller."""
    return StoreUnavailable(f"{base_url}: {exc.__class__.__name__}: {exc}")


def seconds(value: float | timedelta) -> float:
    """A duration argument in seconds."""
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def quoted(value: str) -> str:
    return quote(value, safe="")


def read(model: type[M], request: Request) -> Verb[M]:
    """One request whose answer is a ``model`` body."""
    return model.model_validate_json((yield request))


def read_list(model: type[M], request: Request) -> Verb[list[M]]:
    """One request whose answer is a list of ``model`` bodies."""
    return list_of(model).validate_json((yield request))


@cache
def list_of(model: type[M]) -> TypeAdapter[list[M]]:
    return TypeAdapter(list[model])  # type: ignore[valid-type]
