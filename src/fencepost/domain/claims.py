"""A claim's options, declared once for every way a claim is made."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import TypedDict


class ClaimOptions(TypedDict, total=False):
    """``claim``'s options beside ``owner``, declared once.

    :meth:`Store.claim <fencepost.store.base.Store.claim>`, the HTTP client's
    ``claim``, the worker protocol's verb and the worker's
    :class:`~fencepost.worker.source.WorkSource` take them as keywords typed by this
    (``**options: Unpack[ClaimOptions]``). Each may be left out: ``limit`` is then 1
    and ``ttl`` :data:`~fencepost.domain.defaults.DEFAULT_TTL`, the others None (no
    restriction). What each means and how it is checked is ``Store.claim``'s.
    """

    limit: int
    ttl: float | timedelta
    jobs: Iterable[str] | None
    buckets: Iterable[int] | None
    max_per_bucket: int | None
    versions: Iterable[tuple[str, int]] | None
    queues: Iterable[str] | Mapping[str, int] | None
