"""Submits that commit or roll back with the caller's Django transaction.

::

    with transaction.atomic():
        order = Order.objects.create(total=42)
        fencepost.contrib.django.submit("ship-order", {"order_id": order.pk})
    # committed: the order and its execution exist together; an exception: neither does

The statements run on Django's own connection (``connections[using].connection``: a
psycopg 3 ``Connection`` or a ``sqlite3.Connection``), handed to the store as
``store.submit(..., connection=raw)``. The store does the validation and the job
catalogue's checks as for any submit and never commits nor rolls back that connection;
a worker can claim the execution only once Django commits, and on PostgreSQL the
NOTIFY that wakes idle workers is sent only then.

**Every submit runs in ``transaction.atomic(using=using)``.** Inside the caller's
``atomic()`` block that is a savepoint: a submit that raises (a refused input, an
:class:`~fencepost.IdempotencyConflict`) undoes only itself, and the caller may catch
the error and go on with its transaction. Outside any ``atomic()`` block (Django's
autocommit) it is a transaction of its own that commits before ``submit`` returns, so
the execution exists at once, as with ``store.submit``.

The store must live in the database of ``using`` (the default setting builds its URL
from it); a store elsewhere is refused by the store with a
:class:`~fencepost.ValidationError` on ``connection``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Unpack

from django.db import connections, transaction

from fencepost.contrib.django.runtime import get_store
from fencepost.domain.models import JSON, Execution
from fencepost.domain.submission import SubmitOptions


def submit(
    job: str,
    inputs: JSON = None,
    *,
    using: str = "default",
    actor: str | None = None,
    **options: Unpack[SubmitOptions],
) -> Execution:
    """``store.submit(job, inputs, actor=actor, **options)`` inside Django's transaction
    on ``using``.

    ``options`` are :meth:`fencepost.Store.submit`'s (``execute_at``, ``delay``,
    ``idempotency_key``, ``max_attempts``, ``priority``, ``queue``, ...); errors are
    the store's (:class:`~fencepost.ValidationError` naming the field). See the module
    docstring for what happens inside and outside ``transaction.atomic()``.
    """
    store = get_store()
    with transaction.atomic(using=using):
        connection = _driver_connection(using)
        return store.submit(job, inputs, connection=connection, actor=actor, **options)


def submit_many(
    requests: Iterable[Mapping[str, Any]], *, using: str = "default"
) -> list[Execution]:
    """``store.submit_many(requests)`` inside Django's transaction on ``using``.

    All of the batch is stored or none is (a bad item raises
    :class:`~fencepost.ValidationError` on ``[index].field`` and undoes the batch
    only, as :func:`submit` does).
    """
    store = get_store()
    with transaction.atomic(using=using):
        return store.submit_many(requests, connection=_driver_connection(using))


def _driver_connection(using: str) -> Any:
    """The DB-API connection under Django's connection ``using`` (opened if need be)."""
    wrapper = connections[using]
    wrapper.ensure_connection()
    return wrapper.connection
