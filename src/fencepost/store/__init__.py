"""Stores: the contract (:class:`Store`) and :func:`connect`, which picks a backend by URL."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, unquote, urlsplit

from fencepost.domain.buckets import MAX_NUM_BUCKETS
from fencepost.domain.catalogue import unknown_jobs_policy
from fencepost.domain.checks import require_int
from fencepost.domain.errors import ValidationError
from fencepost.domain.payloads import DEFAULT_MAX_PAYLOAD_BYTES
from fencepost.domain.retry import RetryPolicy
from fencepost.store.base import Store
from fencepost.store.observers import Observer
from fencepost.store.values import StoreConfig
from fencepost.timing.clock import Clock, SystemClock

if TYPE_CHECKING:
    from fencepost.store.sqlite.connection import Synchronous

__all__ = ["Store", "StoreConfig", "connect"]


def connect(
    url: str,
    *,
    clock: Clock | None = None,
    retry: RetryPolicy | None = None,
    rng: random.Random | None = None,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    num_buckets: int | None = None,
    migrate: bool = True,
    unknown_jobs: str | None = None,
    observers: Iterable[Observer] = (),
) -> Store:
    """Open the store that ``url`` names.

    * ``memory://`` — in this process only;
    * ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` — one file,
      created and migrated if needed; ``?busy_timeout=SECONDS`` tunes lock waits;
      ``?synchronous=normal`` trades durability for speed: by default (``full``) an
      acknowledged write survives a power loss or OS crash, with ``normal`` the last
      transactions before one may roll back (an application crash loses nothing);
    * ``postgresql://user@host:5432/db`` — a shared server (needs the ``postgres``
      extra), migrated on connect under an advisory lock; ``?schema=NAME`` keeps
      fencepost's tables in one schema, ``?pool_max=N`` sizes the connection pool,
      ``?retry_timeout=SECONDS`` (default 30, 0: none) bounds how long a call is
      retried after a lost connection (see :mod:`fencepost.store.postgres.outages`);

    ``migrate=False`` opens a database only if it already has this fencepost's
    schema, and writes nothing to find out (:class:`~fencepost.NotMigrated`
    otherwise): what the read-only commands use.

    ``clock`` is where the store reads time (a ``ManualClock`` in tests);
    ``retry`` and ``rng`` set the backoff used by ``fail``
    (for jobs whose catalogue entry names no retry delays of its own).

    ``observers`` are told of the leasing work the store does: leases claimed,
    attempts ended, stale calls refused, leases expired, occurrences stored (see
    :mod:`fencepost.store.observers`; ``store.observers.add`` adds one later).

    ``unknown_jobs`` (also ``?unknown_jobs=`` on any URL; the argument wins) decides a
    submit naming a job no worker published to the job catalogue, whatever the
    catalogue holds: ``allow`` (the default) stores it with the store's defaults, and
    the job's published defaults fill in what its submitter left out when a worker
    publishes it; ``refuse`` refuses it naming ``job``. (``auto``, the former
    default, is read as ``allow``, with a :class:`DeprecationWarning`.)

    ``num_buckets`` (also ``?num_buckets=`` on any URL; the argument wins) is how many
    buckets executions are spread over, 1 to 65536. A SQLite or PostgreSQL database
    records the count of the first process that migrates it (64 unless that process
    gave one); a store given another count refuses to open (:class:`ValidationError`
    on ``num_buckets``), one given none adopts the recorded count
    (``store.config.num_buckets``). :meth:`Store.resize_buckets` (``fencepost db
    set-buckets N``) changes the record.
    """
    if not isinstance(url, str):
        raise ValidationError("url", f"must be a string, got {url!r}")
    parts = urlsplit(url)
    options = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    if unknown_jobs is None:
        unknown_jobs = unknown_jobs_policy(options.get("unknown_jobs", "allow"), "url.unknown_jobs")
    else:
        unknown_jobs = unknown_jobs_policy(unknown_jobs)
    if num_buckets is None and "num_buckets" in options:
        num_buckets = _count_option(options, "num_buckets")
    config = StoreConfig(
        clock=clock or SystemClock(),
        retry=retry or RetryPolicy(),
        rng=rng or random.Random(),
        max_payload_bytes=max_payload_bytes,
        # Not given: StoreConfig's default, which adopts the count the database records.
        **({} if num_buckets is None else {"num_buckets": num_buckets}),
        unknown_jobs=unknown_jobs,
        observers=tuple(observers),
    )
    if parts.scheme == "memory":
        from fencepost.store.memory import MemoryStore

        return MemoryStore(config)
    if parts.scheme == "sqlite":
        from fencepost.store.sqlite import SqliteStore

        path = unquote(parts.path)
        if parts.netloc or not path.startswith("/") or path in ("/", "/:memory:"):
            raise ValidationError(
                "url",
                "sqlite URLs look like sqlite:///relative.db or sqlite:////absolute.db "
                f"(use memory:// for an in-process store), got {url!r}",
            )
        busy = _float_option(options, "busy_timeout")
        synchronous = _synchronous_option(options)
        kwargs = {} if busy is None else {"busy_timeout": busy}
        return SqliteStore(path[1:], config, synchronous=synchronous, migrate=migrate, **kwargs)
    if parts.scheme in ("postgresql", "postgres"):
        try:
            from fencepost.store.postgres import PostgresStore
        except ImportError as exc:  # the optional extra is missing
            raise ValidationError(
                "url", f"PostgreSQL needs psycopg: pip install 'fencepost[postgres]' ({exc})"
            ) from None
        return PostgresStore(url, config, migrate=migrate)
    raise ValidationError(
        "url",
        f"unsupported store URL {url!r}: expected memory://, sqlite:///path or postgresql://...",
    )


def _synchronous_option(options: dict[str, str]) -> Synchronous:
    from fencepost.store.sqlite.connection import DEFAULT_SYNCHRONOUS, SYNCHRONOUS_CHOICES

    value = options.get("synchronous", DEFAULT_SYNCHRONOUS).lower()
    for choice in SYNCHRONOUS_CHOICES:
        if value == choice:
            return choice
    raise ValidationError(
        "url.synchronous",
        f"must be {' or '.join(SYNCHRONOUS_CHOICES)}, got {options['synchronous']!r}",
    )


def _count_option(options: dict[str, str], name: str) -> int:
    """A URL option that is a count from 1 to :data:`MAX_NUM_BUCKETS`."""
    text = options[name]
    shown = repr(text) if len(text) <= 40 else f"{text[:37]!r}..."
    digits = text.strip()
    try:
        value = int(digits) if digits.isascii() and digits.isdigit() else None
    except ValueError:  # more digits than int() converts
        value = None
    if value is None:
        raise ValidationError(f"url.{name}", f"must be a whole number, got {shown}")
    return require_int(value, f"url.{name}", low=1, high=MAX_NUM_BUCKETS)


def _float_option(options: dict[str, str], name: str) -> float | None:
    if name not in options:
        return None
    try:
        value = float(options[name])
    except ValueError:
        raise ValidationError(f"url.{name}", f"must be a number, got {options[name]!r}") from None
    if value < 0:
        raise ValidationError(f"url.{name}", f"must be >= 0, got {value}")
    return value
