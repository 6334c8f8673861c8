"""Run a job as one HTTP request (httpx, synchronous, on the worker's thread).

The request carries the attempt's identity in ``X-Fencepost-Execution-Id``,
``X-Fencepost-Attempt``, ``X-Fencepost-Epoch`` and (for scheduled executions)
``X-Fencepost-Slot``, so the receiving service can de-duplicate retries.

Outcomes: a 2xx response is the result (its JSON when the content type says
JSON, else its text, cut to :data:`TEXT_CHARS`); a 429 or 503 with a
``Retry-After`` header (seconds or an HTTP date) raises :class:`Retry`, so the
next attempt is due exactly then instead of after the job's backoff; 5xx, 408,
429, network errors and timeouts raise the retryable :class:`HttpFailed`; any
other status (other 4xx, and 3xx: redirects are not followed, because following
them can silently turn a POST into a GET) raises :class:`PermanentFailure`.
Either retryable kind still counts as an attempt.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from fencepost.domain.durations import MAX_DURATION
from fencepost.domain.errors import (
    Cancelled,
    HttpFailed,
    PermanentFailure,
    Retry,
    ValidationError,
)
from fencepost.domain.models import JSON
from fencepost.domain.payloads import DEFAULT_MAX_PAYLOAD_BYTES
from fencepost.domain.retry import retry_after
from fencepost.jobs.context import Context
from fencepost.jobs.runners import templates

#: The methods an HTTP job may use.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

#: Methods whose request carries the inputs as a JSON body when the definition gives none.
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})

#: Seconds one request may take in all (connect, send, receive) unless the job says otherwise.
DEFAULT_TIMEOUT = 10.0

#: How much of a non-JSON response body becomes the result, in characters.
TEXT_CHARS = 4096

#: Statuses worth another attempt besides 5xx: the server said "later" or timed out on us.
_RETRYABLE_4XX = frozenset({408, 429})

#: Statuses whose ``Retry-After`` says when the next attempt is due (RFC 9110 15.5.4, 15.6.4
#: and RFC 6585 4): "too many requests" and "unavailable".
RETRY_AFTER_STATUSES = frozenset({429, 503})

#: Header names the runner sets itself (lower case).
_OWN_HEADERS = ("x-fencepost-",)

#: An HTTP header name: an RFC 9110 token.
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")

#: A response larger than the store accepts as a result is not read further.
_MAX_BODY = DEFAULT_MAX_PAYLOAD_BYTES

_EXCERPT = 200


class HttpRunner:
    """``run(ctx, inputs)`` for an HTTP job: one request, its response as the result.

    ``url`` and header values are templates; values substituted into the URL are
    percent-encoded (``/`` included), so an input cannot change the URL's
    structure. ``json`` (None: not given) is the body, its strings templates (see
    :func:`~fencepost.jobs.runners.templates.render_json`); without it,
    POST, PUT and PATCH send the inputs as the JSON body. ``timeout`` bounds the
    whole request, in seconds.
    """

    def __init__(
        self,
        *,
        method: str,
        url: str,
        json: JSON = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.method = _check_method(method)
        self.url = _check_url(url)
        self.json = json
        self.headers = dict(_check_headers(headers or {}))
        self.timeout = _check_timeout(timeout)
        self._url = templates.parse(url, field="url")
        self._headers = {
            name: templates.parse(value, field=f"headers.{name}")
            for name, value in self.headers.items()
        }
        if json is not None:
            templates.check_json(json, field="json")

    def __repr__(self) -> str:
        return f"HttpRunner({self.method} {self.url})"

    def __call__(self, ctx: Context, inputs: dict[str, Any]) -> JSON:
        """Send the request for one attempt (blocking; call it on a worker thread)."""
        if ctx.stopping:
            raise Cancelled(ctx.stop_reason or "stop requested")
        values = templates.values_for(ctx, inputs)
        url = templates.render(self._url, values, escape=_quote)
        headers = {name: templates.render(t, values) for name, t in self._headers.items()}
        headers.update(_identity_headers(ctx))
        body: Any = None
        if self.json is not None:
            body = templates.render_json(self.json, values, field="json")
        elif self.method in BODY_METHODS:
            body = inputs
        where = f"{self.method} {url}"
        try:
            status, content_type, data, wait = self._send(ctx, url, headers, body)
        except httpx.InvalidURL as exc:  # only possible through substituted values
            raise PermanentFailure(f"{where}: invalid URL: {exc}") from exc
        except httpx.RequestError as exc:
            raise HttpFailed(f"{where}: {type(exc).__name__}: {exc}") from exc
        return _outcome(where, status, content_type, data, wait)

    def _send(
        self, ctx: Context, url: str, headers: dict[str, str], body: Any
    ) -> tuple[int, str, bytes, str | None]:
        """(status, content type, body up to the size limit, ``Retry-After``) of one request."""
        deadline = time.monotonic() + self.timeout
        kwargs: dict[str, Any] = {} if body is None else {"json": body}
        with (
            httpx.Client(timeout=self.timeout, follow_redirects=False) as client,
            client.stream(self.method, url, headers=headers, **kwargs) as response,
        ):
            data = bytearray()
            # httpx's timeout bounds each read, not the whole response; a server
            # dribbling bytes would otherwise hold the attempt forever.
            for chunk in response.iter_bytes():
                data += chunk
                if ctx.stopping:
                    raise Cancelled(ctx.stop_reason or "stop requested")
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout(f"response took longer than {self.timeout:g} s")
                if len(data) > _MAX_BODY:
                    break
            return (
                response.status_code,
                response.headers.get("content-type", ""),
                bytes(data),
                response.headers.get("retry-after"),
            )


def _identity_headers(ctx: Context) -> dict[str, str]:
    headers = {
        "X-Fencepost-Execution-Id": ctx.execution_id,
        "X-Fencepost-Attempt": str(ctx.attempt),
        "X-Fencepost-Epoch": str(ctx.epoch),
    }
    if ctx.slot is not None:
        headers["X-Fencepost-Slot"] = ctx.slot
    return headers


def _outcome(
    where: str, status: int, content_type: str, data: bytes, wait: str | None = None
) -> JSON:
    if 200 <= status < 300:
        return _result(content_type, data)
    excerpt = _text(data)[:_EXCERPT].strip()
    message = f"{where}: HTTP {status}" + (f": {excerpt}" if excerpt else "")
    if status >= 500 or status in _RETRYABLE_4XX:
        failed = HttpFailed(message, status=status)
        after = retry_after(wait) if status in RETRY_AFTER_STATUSES else None
        # Past the longest delay the store keeps (100 years) it reads as a mistake: backoff.
        if after is not None and after <= MAX_DURATION.total_seconds():
            raise Retry(message, after=after) from failed
        raise failed
    raise PermanentFailure(message)


def _result(content_type: str, data: bytes) -> JSON:
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type == "application/json" or media_type.endswith("+json"):
        if len(data) > _MAX_BODY:
            raise PermanentFailure(
                f"the JSON response is larger than {_MAX_BODY} bytes, the limit for a result"
            )
        try:
            return json.loads(data)
        except ValueError:
            pass  # mislabelled: keep the text, which says more than a parse error would
    return _text(data)[:TEXT_CHARS]


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _quote(value: str) -> str:
    return quote(value, safe="")


def _check_method(method: object) -> str:
    if not isinstance(method, str) or method.upper() not in METHODS:
        allowed = ", ".join(sorted(METHODS))
        raise ValidationError("method", f"must be one of {allowed}, got {method!r}")
    return method.upper()


def _check_url(url: object) -> str:
    if not isinstance(url, str):
        raise ValidationError("url", f"must be a string, got {url!r}")
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # e.g. an unclosed IPv6 bracket
        raise ValidationError("url", f"is not a valid URL ({exc}), got {url!r}") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise ValidationError("url", f"must be an http:// or https:// URL, got {url!r}")
    return url


def _check_headers(headers: object) -> Mapping[str, str]:
    if not isinstance(headers, Mapping):
        raise ValidationError("headers", f"must be a mapping of names to strings, got {headers!r}")
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise ValidationError("headers", f"{name!r} is not a valid header name")
        if name.lower().startswith(_OWN_HEADERS):
            raise ValidationError(f"headers.{name}", "is set by fencepost itself")
        if not isinstance(value, str):
            raise ValidationError(f"headers.{name}", f"must be a string, got {value!r}")
    return headers


def _check_timeout(timeout: object) -> float:
    if (
        not isinstance(timeout, int | float)
        or isinstance(timeout, bool)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise ValidationError("timeout", f"must be > 0 seconds, got {timeout!r}")
    return float(timeout)
