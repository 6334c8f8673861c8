"""Any text as a limit key, owner or error filter, on every backend: the executions an
oracle says, or a refusal naming the filter; never a database error.

The oracle restates the rule independently of the code under test: an error filter
of 1 to 200 characters matches the executions whose latest error contains it, A-Z
and a-z alike and every other character (``%``, ``_``, ``\\`` included) as written;
text no store can hold (U+0000, a lone surrogate) matches nothing; anything else is
a ValidationError on ``error``. Limit keys and owners match exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fencepost.domain.errors import StoreRefused, ValidationError
from fencepost.domain.states import State
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from tests import hostile

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

#: Errors recorded, chosen to hold what LIKE and case folding could get wrong.
ERRORS = [
    "disk 100% full",
    "KeyError: 'user_id'",
    "C:\\temp\\x_1 not found",
    "TimeoutError: Ran Past 30s",
    "Échec: réseau ÉTEINT",
    "ß and ǅ and İ",
    "a%b_c\\d%%",
]

#: Text drawn around what the errors hold: pieces of them, in other cases, and anything.
NEEDLES = st.one_of(
    st.sampled_from(ERRORS).flatmap(
        lambda e: st.tuples(st.integers(0, len(e)), st.integers(0, len(e))).map(
            lambda ij: e[min(ij) : max(ij)]
        )
    ),
    st.sampled_from(ERRORS).map(str.swapcase),
    st.sampled_from(["%", "_", "\\", "%%", "\\%", "_%", "' OR 1=1 --", "x" * 200, "x" * 201]),
    hostile.hostile_text(),
)


def _ascii_lower(text: str) -> str:
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text)


def _expected(needle: str, errors: dict[str, str]) -> list[str] | None:
    """The ids an error filter keeps, or None when it must be refused."""
    if not 1 <= len(needle) <= 200:
        return None
    if not hostile.storable_text(needle):
        return []
    return sorted(i for i, e in errors.items() if _ascii_lower(needle) in _ascii_lower(e))


@pytest.fixture
def scene(store_factory: Callable[..., Store]) -> tuple[Store, dict[str, str]]:
    """A store holding one failed execution per error (with a limit key each), and one
    RUNNING under the owner ``w``."""
    store = store_factory(ManualClock(0))
    errors = {}
    for n, error in enumerate(ERRORS):
        made = store.submit("j", max_attempts=1, limit_key=f"key-{n}")
        store.fail(store.claim("w", ids=[made.id])[0], error)
        errors[made.id] = error
    store.claim("w", ids=[store.submit("j").id], ttl=3600)
    return store, errors


def _call(verb: Callable[..., Any], **filters: Any) -> Any:
    try:
        return verb(**filters)
    except StoreRefused as exc:
        pytest.fail(f"the database refused what the store's checks let through: {exc!r}")
    except ValidationError as exc:
        return exc


def test_an_error_filter_keeps_what_the_oracle_says(
    scene: tuple[Store, dict[str, str]],
) -> None:
    store, errors = scene
    for e in store.query(limit=100, state=State.FAILED).items:
        assert e.error == errors[e.id], "every error is stored as written"

    @SETTINGS
    @given(needle=NEEDLES)
    def check(needle: str) -> None:
        wanted = _expected(needle, errors)
        page = _call(store.query, error=needle, limit=100)
        counts = _call(store.count_by_state, error=needle)
        if wanted is None:
            assert isinstance(page, ValidationError), needle
            assert isinstance(counts, ValidationError), needle
            assert page.field == counts.field == "error"
            return
        assert [e.id for e in page.items] == wanted, needle
        assert counts[State.FAILED] == sum(counts.values()) == len(wanted)

    check()


@pytest.mark.parametrize("field", ["limit_key", "owner"])
def test_a_name_filter_matches_exactly(scene: tuple[Store, dict[str, str]], field: str) -> None:
    store, _ = scene
    held = {"limit_key": [f"key-{n}" for n in range(len(ERRORS))], "owner": ["w"]}[field]

    @SETTINGS
    @given(value=st.one_of(hostile.hostile_text(), st.sampled_from(held)))
    def check(value: str) -> None:
        page = _call(store.query, **{field: value})
        assert not isinstance(page, ValidationError), "any text is a filter"
        assert all(
            getattr(e, "lease_owner" if field == "owner" else field) == value for e in page.items
        )
        assert bool(page.items) == (value in held), value
        assert sum(_call(store.count_by_state, **{field: value}).values()) == len(page.items)

    check()
