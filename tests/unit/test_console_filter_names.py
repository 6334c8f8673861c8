"""``count_by_state`` takes ``query``'s filters everywhere (Store, App, AsyncStore and both
clients), and ``fencepost ps``'s filter flags (:mod:`fencepost.cli.filters`) give
``query`` keyword arguments it takes, each flag one of them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from fencepost import App
from fencepost.cli import filters
from fencepost.client.aio import AsyncClient
from fencepost.client.http import Client
from fencepost.store.asyncstore import AsyncStore
from fencepost.store.base import Store
from tests.keywords import keywords

#: What a listing takes that a count does not: its page.
PAGING = {"limit", "after", "newest_first"}


def names(verb: Callable[..., Any]) -> set[str]:
    return keywords(verb)


def test_the_counts_take_the_query_s_filters() -> None:
    assert names(Store.count_by_state) == names(Store.query) - PAGING
    assert names(App.count_by_state) == names(Store.count_by_state)
    assert names(AsyncStore.count_by_state) == names(Store.count_by_state)
    assert names(Client.count_by_state) == names(Client.query) - PAGING
    assert names(AsyncClient.count_by_state) == names(Client.count_by_state)


def _parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    filters.add_filter_arguments(parser, all_states=True)
    return parser.parse_args(argv)


def test_every_filter_flag_gives_a_query_argument() -> None:
    now = datetime(2026, 5, 1, 12, tzinfo=UTC)
    given = _parsed(
        *("--state", "failed,running", "--outcome", "timed_out", "--job", "j", "--queue", "q"),
        *("--schedule", "s", "--bucket", "3", "--key", "k", "--owner", "w", "--error", "50%"),
        *("--since", "1h", "--due-after", "2026-05-01T10:00:00+02:00", "--due-before", "30m"),
        *("--created-before", "7d", "--finished-after", "15m", "--finished-before", "30s"),
    )
    found = filters.filters_from(given, now=now)
    assert set(found) <= names(Store.query) - PAGING
    assert set(found) == names(Store.count_by_state) - {"buckets"}
    assert found["created_after"] == now - timedelta(hours=1)
    assert found["created_before"] == now - timedelta(days=7)
    assert found["due_after"] == datetime(2026, 5, 1, 8, tzinfo=UTC)
    assert found["due_before"] == now - timedelta(minutes=30)
    assert (found["limit_key"], found["owner"], found["error"], found["bucket"]) == (
        "k",
        "w",
        "50%",
        3,
    )
    missing = [flag for flag, was_given in filters.given(given) if not was_given]
    assert missing == ["--overdue", "--created-after"]
    assert filters.filters_from(_parsed(), now=now) == {}, "no flag: no filter, no state"
    assert filters.filters_from(_parsed("--all"), now=now) == {}
    overdue = filters.filters_from(_parsed("--overdue"), now=now)
    assert overdue["due_before"] == now - timedelta(seconds=10)
