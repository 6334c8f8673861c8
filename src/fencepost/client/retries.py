"""When the HTTP clients send a request again, and after how long.

Both :class:`~fencepost.client.http.Client` and
:class:`~fencepost.client.aio.AsyncClient` ask a :class:`Retrying` after each failed
try of one request; it answers with the pause before the next try, or None (give
the failure to the caller). The rules:

- A **replayable** request — a read (``GET``) or a submit carrying an
  ``Idempotency-Key`` (the service answers a second one with the first's execution)
  — is tried again after a lost connection (no connection, or one that broke before
  the answer came), a 503 and a 429.
- Any other request (an unkeyed submit, a cancel, a schedule's change, ...) may
  have been carried out before its answer was lost, so it is tried again only when
  it cannot have been sent: no connection could be made.
- The worker protocol (claims, heartbeats, completions: ``Request.retry`` False) is
  never tried again here: the worker has its own outage rule.
- The pause is the answer's ``Retry-After`` (seconds or an HTTP date) when it gives
  one, else capped exponential backoff with full jitter (:class:`RetryPolicy`:
  uniform in ``[0, min(MAX_DELAY, BASE_DELAY * 2 ** (n - 1))]``).
- Every try of one request ends within ``retry_timeout`` seconds of its first (a
  client option; 0: no retries): a pause that would end past it is not taken.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable

import httpx

from fencepost.domain.errors import ValidationError
from fencepost.domain.retry import RetryPolicy, retry_after  # the job runner reads it too

#: The clients' default ``retry_timeout``, in seconds.
DEFAULT_RETRY_TIMEOUT = 30.0
#: The backoff of the clients' retries: the first pause is at most BASE_DELAY.
BACKOFF = RetryPolicy(base_delay=0.1, max_delay=5.0)
#: The statuses a replayable request is tried again after.
RETRY_STATUSES = frozenset({429, 503})
#: Methods whose request changes nothing: safe to send again.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def retry_timeout_option(value: object) -> float:
    """The clients' ``retry_timeout`` in seconds, or the ValidationError naming it."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError("retry_timeout", f"must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValidationError(
            "retry_timeout",
            f"must be a finite number of seconds >= 0 (0: no retries), got {value!r}",
        )
    return float(value)


def replayable(method: str, headers: dict[str, str]) -> bool:
    """Whether sending the request twice does what sending it once does."""
    return method.upper() in SAFE_METHODS or any(
        name.lower() == "idempotency-key" for name in headers
    )


def not_sent(exc: Exception) -> bool:
    """Whether ``exc`` means the request never left: no connection was made (or none
    was free in the pool)."""
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)


def lost(exc: Exception) -> bool:
    """Whether ``exc`` is a lost connection (before or after sending), not a mistake of
    the request itself (a bad URL, an unsupported scheme)."""
    return isinstance(exc, httpx.TransportError) and not isinstance(
        exc, httpx.UnsupportedProtocol | httpx.LocalProtocolError
    )


class Retrying:
    """The retries of one request: its tries so far, and its deadline.

    ``retry`` False: none at all. ``clock`` and ``rng`` are for tests.
    """

    def __init__(
        self,
        method: str,
        headers: dict[str, str],
        *,
        timeout: float,
        retry: bool = True,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self._replayable = replayable(method, headers)
        self._enabled = retry and timeout > 0
        self._clock = clock
        self._deadline = clock() + timeout
        self._rng = rng
        self.tries = 0

    def after_error(self, exc: Exception) -> float | None:
        """The pause before trying again after the transport raised ``exc``; None: raise it."""
        self.tries += 1
        if not (self._enabled and (not_sent(exc) or (self._replayable and lost(exc)))):
            return None
        return self._pause(None)

    def after_answer(self, status: int, retry_after_header: str | None) -> float | None:
        """The pause before trying again after an answer of ``status``; None: it is the
        answer."""
        self.tries += 1
        if not (self._enabled and self._replayable and status in RETRY_STATUSES):
            return None
        return self._pause(retry_after(retry_after_header))

    def _pause(self, asked: float | None) -> float | None:
        pause = asked if asked is not None else BACKOFF.delay(self.tries, self._rng).total_seconds()
        if self._clock() + pause > self._deadline:
            return None
        return pause
