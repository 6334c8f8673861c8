"""The arguments of ``query`` and ``count_by_state``, declared once.

Every way in (``Store``, ``AsyncStore``, ``App``, ``Client``, ``AsyncClient``) takes them
as keywords typed by these (``**filters: Unpack[StoreFilters]``), so a filter is added
in one place. Each is optional; what each means and how it is checked is
:meth:`Store.query <fencepost.store.base.Store.query>`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, TypedDict

from fencepost.domain.states import AttemptOutcome, State


class ExecutionFilters(TypedDict, total=False):
    """The filters every way in takes (over HTTP too)."""

    state: State | str | Iterable[State | str] | None
    job: str | None
    schedule: str | None
    bucket: int | None
    queue: str | None
    due_after: datetime | None
    due_before: datetime | None
    outcome: AttemptOutcome | str | None
    limit_key: str | None
    owner: str | None
    created_after: datetime | None
    created_before: datetime | None
    finished_after: datetime | None
    finished_before: datetime | None
    error: str | None


class ExecutionQuery(ExecutionFilters, total=False):
    """The filters and a page: ``limit`` (default 100), ``after`` (a cursor),
    ``newest_first`` (default False)."""

    limit: int
    after: str | None
    newest_first: bool


class StoreFilters(ExecutionFilters, total=False):
    """The filters, and ``buckets`` (several at once), which only a store takes."""

    buckets: Iterable[int] | None


class StoreQuery(StoreFilters, ExecutionQuery, total=False):
    """A store's filters and a page."""


def checked(given: Mapping[str, Any], allowed: type[Any], verb: str) -> Mapping[str, Any]:
    """``given``, if every name in it is one of ``allowed`` (a TypedDict above); else
    the TypeError Python gives a call with an unexpected keyword argument."""
    for name in given:
        if name not in allowed.__annotations__:
            raise TypeError(f"{verb}() got an unexpected keyword argument {name!r}")
    return given
