"""Hostile values for the store's boundary, each with an oracle saying whether it may pass.

The rule (see :mod:`fencepost.domain.payloads` and :mod:`fencepost.domain.checks`):
JSON payloads are valid JSON without U+0000 or lone surrogates, within the size
limit and at most :data:`~fencepost.domain.payloads.MAX_DEPTH` containers deep;
names are non-blank text without U+0000 or lone surrogates, within a length cap;
error texts are text without U+0000 or lone surrogates (cut, never refused, when long).

The oracles here restate that rule independently of the code under test (they
walk values themselves), so a test fails when the store accepts what it must
refuse, not only when it crashes. Strategies draw from both sides of every
boundary: exactly at a cap, one past it, and random values around it.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import re
import sys
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from fencepost.domain.checks import MAX_ERROR_CHARS
from fencepost.domain.payloads import DEFAULT_MAX_PAYLOAD_BYTES

#: The deepest nesting the rule allows, stated here rather than imported: a test that
#: took ``payloads.MAX_DEPTH`` would move with it and never notice a change of the rule.
MAX_DEPTH = 64

#: The longest job name, owner, node id, schedule id or actor (``checks._MAX_NAME``).
MAX_NAME = 200
#: The longest idempotency or bucket key.
MAX_KEY = 255
#: The most decimal digits :func:`str` gives an int (CPython's conversion limit).
MAX_INT_DIGITS = sys.get_int_max_str_digits() or 4300

# -- oracles -----------------------------------------------------------------------------


def storable_text(value: object) -> bool:
    """A ``str`` every backend can hold: no U+0000, no lone surrogate."""
    if not isinstance(value, str) or "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def name_ok(value: object, max_len: int = MAX_NAME) -> bool:
    """What ``require_name`` must accept: non-blank storable text of at most ``max_len``."""
    return (
        isinstance(value, str)
        and bool(value.strip())
        and len(value) <= max_len
        and storable_text(value)
    )


def schedule_id_ok(value: object) -> bool:
    """What a schedule id must be: a name that is one URL path segment (the API's address)."""
    return name_ok(value) and "/" not in value and value not in (".", "..")  # type: ignore[operator]


def text_ok(value: object) -> bool:
    """What ``require_text`` must accept (any length: it is cut, not refused)."""
    return storable_text(value)


def int_ok(value: object, low: int, high: int) -> bool:
    """What ``require_int`` must accept: an int that is not a bool, within ``[low, high]``."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _int_encodable(value: int) -> bool:
    return value == 0 or abs(value) < 10**MAX_INT_DIGITS


def _key_ok(key: object) -> bool:
    # json turns these keys into strings; anything else it cannot encode.
    if key is None or isinstance(key, bool):
        return True
    if isinstance(key, int):
        return _int_encodable(key)
    if isinstance(key, float):
        return math.isfinite(key)
    return storable_text(key)


def json_ok(value: Any, limit: int = DEFAULT_MAX_PAYLOAD_BYTES) -> bool:
    """Whether ``value`` obeys the payload rule (a payload is level 1 of its own nesting).

    Walked iteratively, so a cycle ends as "too deep" instead of looping forever.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, int):
            if not _int_encodable(item):
                return False
        elif isinstance(item, float):
            if not math.isfinite(item):
                return False
        elif isinstance(item, str):
            if not storable_text(item):
                return False
        elif isinstance(item, list | tuple):
            if depth > MAX_DEPTH:
                return False
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, dict):
            if depth > MAX_DEPTH or not all(_key_ok(k) for k in item):
                return False
            stack.extend((child, depth + 1) for child in item.values())
        else:
            return False
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return len(text.encode()) <= limit


def inputs_ok(value: Any, limit: int = DEFAULT_MAX_PAYLOAD_BYTES) -> bool:
    """Whether ``value`` may be an execution's or a schedule's inputs.

    None (which means ``{}``), or a JSON object that obeys the payload rule: a
    handler takes its inputs as keywords, so a list, a string, a number or a
    boolean is refused however valid it is as JSON.
    """
    return value is None or (isinstance(value, dict) and json_ok(value, limit))


def as_json(value: Any) -> Any:
    """What a JSON round trip makes of an accepted ``value``: tuples become lists, keys text."""
    return json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False))


def json_equal(got: Any, expected: Any, *, numeric: bool = False) -> bool:
    """``got`` (read back) is ``expected`` (already through :func:`as_json`).

    Strict by default: same structure, same types, same values, and ``-0.0`` keeps
    its sign. ``numeric=True`` is PostgreSQL's ``jsonb``, which stores numbers as
    ``numeric`` and so keeps neither the int/float distinction nor a zero's sign:
    ``1e16`` comes back as ``10**16`` and ``1e308`` as the 309-digit integer
    ``10**308``. JSON itself does not tell ``1e16`` from ``10000000000000000``,
    so there a float and a number are equal when the number, read as a float,
    is that float. Booleans are never numbers, on any backend.
    """
    if isinstance(expected, dict):
        return (
            isinstance(got, dict)
            and got.keys() == expected.keys()
            and all(json_equal(got[k], v, numeric=numeric) for k, v in expected.items())
        )
    if isinstance(expected, list):
        return (
            isinstance(got, list)
            and len(got) == len(expected)
            and all(json_equal(g, e, numeric=numeric) for g, e in zip(got, expected, strict=True))
        )
    if isinstance(expected, bool) or isinstance(got, bool):
        return type(got) is type(expected) and got == expected
    if isinstance(expected, float) and isinstance(got, int | float):
        if numeric:
            return float(got) == expected
        return (
            isinstance(got, float)
            and got == expected
            and math.copysign(1, got) == math.copysign(1, expected)
        )
    return type(got) is type(expected) and got == expected


# -- exact nestings ------------------------------------------------------------------------


def deep_list(depth: int, leaf: Any = 0) -> Any:
    """``[[...[leaf]...]]``: ``depth`` arrays, one in the other."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def deep_dict(depth: int, leaf: Any = 0) -> Any:
    """``{"k": {"k": ... leaf}}``: ``depth`` objects."""
    value = leaf
    for _ in range(depth):
        value = {"k": value}
    return value


def deep_mixed(depth: int, leaf: Any = 0) -> Any:
    """Objects and arrays alternating, ``depth`` in all, with siblings at every level."""
    value = leaf
    for level in range(depth):
        value = {"k": value, "n": level} if level % 2 else [value, level, "s"]
    return value


#: The exact nestings of the boundary tests, by name.
NESTINGS: dict[str, Callable[[int], Any]] = {
    "list": deep_list,
    "dict": deep_dict,
    "mixed": deep_mixed,
}

# -- strategies: text ----------------------------------------------------------------------

#: Characters that must be refused anywhere in stored text.
UNSTORABLE_CHARS = ["\x00", "\ud800", "\udbff", "\udc00", "\udfff"]
#: Characters that must pass: astral (a surrogate pair in UTF-16 and JSON), BOM,
#: a noncharacter, RTL override, zero-width joiner, an escaped-looking NUL.
ODD_BUT_STORABLE = ["\U0001f600", "\U0010ffff", "\ufeff", "\uffff", "\u202e", "\u200d", "é"]

_LENGTHS = [
    1,
    MAX_NAME - 1,
    MAX_NAME,
    MAX_NAME + 1,
    MAX_KEY,
    MAX_KEY + 1,
    1024,
    1025,
    MAX_ERROR_CHARS,
    MAX_ERROR_CHARS + 1,
]

#: Strings chosen by hand: blank, look-alike escapes, unstorable, astral, SQL-ish.
FIXED_STRINGS = [
    "",
    " ",
    "\t\n\r ",
    "\u3000",  # ideographic space: blank too
    "\u200b",  # zero-width space: not whitespace to Python, so a name
    "x",
    "\\u0000",  # a backslash and "u0000": text that merely looks like an escaped NUL
    "\\\x00",  # a backslash, then a real NUL
    "\ud83d\ude00",  # a surrogate *pair* as two code points: two lone surrogates in Python
    "a\x00b",
    "\x00",
    "\ud800",
    "tail\udfff",
    "\U0001f600",
    "null",
    "'; DROP TABLE executions; --",
    "%s %(now)s {0} $1 ?",
    "../../etc/passwd",
    "é" * 3,
]


@st.composite
def _long_strings(draw: st.DrawFn) -> str:
    # Built by repetition: long strings near the caps without drawing thousands of bytes.
    length = draw(st.sampled_from(_LENGTHS))
    char = draw(st.sampled_from(["x", "é", "\U0001f600", " "]))
    text = char * length
    if draw(st.booleans()):  # spoil one position
        bad = draw(st.sampled_from(UNSTORABLE_CHARS))
        at = draw(st.integers(0, length - 1))
        text = text[:at] + bad + text[at + 1 :]
    return text


@st.composite
def _spoiled(draw: st.DrawFn) -> str:
    base = draw(st.text(max_size=8))
    bad = draw(st.sampled_from(UNSTORABLE_CHARS + ODD_BUT_STORABLE))
    at = draw(st.integers(0, len(base)))
    return base[:at] + bad + base[at:]


def hostile_text() -> st.SearchStrategy[str]:
    """Strings: blank, unstorable, astral, long (at and past every cap), random."""
    return st.one_of(
        st.sampled_from(FIXED_STRINGS),
        _long_strings(),
        _spoiled(),
        st.text(max_size=10),
        st.text(st.characters(codec="utf-8"), min_size=1, max_size=10),
    )


_PERCENT_ESCAPE = re.compile("%[0-9A-Fa-f]{2}")

#: Values of the wrong type where a string belongs.
NOT_STRINGS: list[Any] = [None, 0, 7, -1, 1.5, True, b"bytes", ["a"], {"a": 1}, ("a",)]


def addressable(name: str) -> bool:
    """Whether ``name`` can be a path segment of the HTTP API (``/schedules/{id}``).

    Not with a "/" (routing splits on it), nor "." or ".." (clients resolve dot
    segments): schedule ids are refused so (see schedule_id_ok). Nor with a "%XX"
    sequence, but only because Starlette's TestClient decodes paths twice (a real
    server decodes once, and such ids work there).
    """
    return "/" not in name and name not in (".", "..") and not _PERCENT_ESCAPE.search(name)


def hostile_names(*, allow_none: bool = False) -> st.SearchStrategy[Any]:
    """What may be passed as a name: hostile strings and values of the wrong type."""
    wrong = [v for v in NOT_STRINGS if allow_none or v is not None]
    return st.one_of(hostile_text(), st.sampled_from(wrong))


def good_names() -> st.SearchStrategy[str]:
    """Names that must pass (for fields a test does not aim at)."""
    return st.one_of(
        st.sampled_from(["job", "\U0001f600", "x" * MAX_NAME, "\u200b", "a b"]),
        st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12).filter(
            lambda s: bool(s.strip())
        ),
    )


# -- strategies: numbers ---------------------------------------------------------------------

INT32_MAX = 2**31 - 1
#: Integers at every interesting edge: PostgreSQL integer, bigint, doubles, str() limit.
EDGE_INTS = [
    0,
    -1,
    1,
    INT32_MAX,
    INT32_MAX + 1,
    -INT32_MAX - 1,
    -INT32_MAX - 2,
    2**53 + 1,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64,
    10**100,
    10**MAX_INT_DIGITS - 1,  # the most digits str() allows
    -(10**MAX_INT_DIGITS - 1),
]
#: Integers str() (so json) refuses: past the 4300-digit conversion limit.
UNENCODABLE_INTS = [10**MAX_INT_DIGITS, -(10**MAX_INT_DIGITS), 10**5000]

EDGE_FLOATS = [
    -0.0,
    0.0,
    1e308,
    -1e308,
    sys.float_info.max,
    sys.float_info.min,
    5e-324,
    -5e-324,
    1e16,
    2.0**53,
    1e-7,
    0.1,
    1.5,
]
NON_FINITE = [math.nan, math.inf, -math.inf]


def json_ints() -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from(EDGE_INTS), st.integers(), st.integers(-(2**70), 2**70))


def json_floats() -> st.SearchStrategy[float]:
    return st.one_of(st.sampled_from(EDGE_FLOATS), st.floats(allow_nan=False, allow_infinity=False))


def good_ints(low: int, high: int) -> st.SearchStrategy[int]:
    """Integers that must pass a ``[low, high]`` check: its edges and values inside."""
    return st.one_of(st.sampled_from([low, high, max(low, 0), max(low, 1)]), st.integers(low, high))


def hostile_ints() -> st.SearchStrategy[Any]:
    """For integer arguments: edges, random, and values of the wrong type.

    Past 4300 digits as well (refused like any other integer out of range).
    """
    return st.one_of(
        st.sampled_from(EDGE_INTS[:14]),
        st.integers(-(2**40), 2**40),
        st.sampled_from([True, False, 1.0, "1", None, math.nan, *UNENCODABLE_INTS]),
    )


# -- strategies: JSON --------------------------------------------------------------------------


def _storable_strings() -> st.SearchStrategy[str]:
    return st.one_of(
        st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=8),
        st.sampled_from([*ODD_BUT_STORABLE, "\\u0000", "", " "]),
    )


def json_scalars() -> st.SearchStrategy[Any]:
    """Scalars that are JSON (every one must be accepted)."""
    return st.one_of(st.none(), st.booleans(), json_ints(), json_floats(), _storable_strings())


def _number_keys() -> st.SearchStrategy[Any]:
    # One kind of key per object. json sorts keys for a request's fingerprint, and a
    # str next to an int cannot be sorted: that case is test_mixed_key_types_... below.
    return st.one_of(st.integers(), st.booleans(), json_floats())


def json_values(max_leaves: int = 8) -> st.SearchStrategy[Any]:
    """JSON as Python gives it: lists or tuples, objects with text or number keys."""
    return st.recursive(
        json_scalars(),
        lambda kids: st.one_of(
            st.lists(kids, max_size=3),
            st.lists(kids, max_size=3).map(tuple),
            st.dictionaries(_storable_strings(), kids, max_size=3),
            st.dictionaries(_number_keys(), kids, max_size=2),
            st.builds(lambda v: {None: v}, kids),
        ),
        max_leaves=max_leaves,
    )


@st.composite
def nested(draw: st.DrawFn, max_depth: int = MAX_DEPTH + 8, *, object_at_top: bool = False) -> Any:
    """A value nested up to ``max_depth`` containers deep, often exactly at the limit.

    Random container kinds, with scalar siblings on the way down; an object at the
    top when ``object_at_top`` (as inputs must be).
    """
    edges = [d for d in (MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1) if d <= max_depth]
    depth = draw(st.one_of(st.sampled_from(edges), st.integers(1, max_depth)))
    value = draw(json_scalars())
    for level in range(depth):
        siblings = draw(st.lists(json_scalars(), max_size=1))
        top = level == depth - 1
        if not (top and object_at_top) and draw(st.booleans()):
            value = [*siblings, value] if draw(st.booleans()) else [value, *siblings]
        else:
            value = {"v": value, **{f"s{i}": s for i, s in enumerate(siblings)}}
    return value


def in_object(value: Any) -> dict[Any, Any]:
    """``value`` as inputs: itself if it is an object, else the value of the key ``"v"``.

    So that any payload can be tried as inputs, which must be an object; the
    wrapping object adds one level of nesting.
    """
    return value if isinstance(value, dict) else {"v": value}


class _Opaque:
    """An object json knows nothing about."""


def _cycle() -> list[Any]:
    loop: list[Any] = [1]
    loop.append(loop)
    return loop


#: Leaves that are not JSON (or not storable JSON): each must be refused.
BAD_LEAVES: list[Any] = [
    *NON_FINITE,
    *UNENCODABLE_INTS[:2],
    "a\x00b",
    "\ud800",
    "x\udfff",
    "\ud83d\ude00",
    b"bytes",
    bytearray(b"x"),
    {1, 2},
    frozenset(),
    dt.datetime(2030, 1, 1, tzinfo=dt.UTC),
    dt.timedelta(seconds=1),
    decimal.Decimal("1.5"),
    1j,
    _Opaque(),
    {(1, 2): "tuple key"},
    {"\x00": "nul key"},
    {"\ud800": "surrogate key"},
    {math.nan: "nan key"},
    {b"k": "bytes key"},
]


@st.composite
def spoiled_json(draw: st.DrawFn) -> Any:
    """A JSON value with one bad leaf somewhere inside it (or a cycle)."""
    if draw(st.integers(0, 9)) == 0:
        return _cycle()
    bad = draw(st.sampled_from(BAD_LEAVES))
    value: Any = bad
    for _ in range(draw(st.integers(0, 3))):
        if draw(st.booleans()):
            value = [draw(json_scalars()), value]
        else:
            value = {draw(_storable_strings()): value}
    return value


def hostile_json() -> st.SearchStrategy[Any]:
    """Payloads from both sides of the rule: fine, odd-but-fine, too deep, spoiled, huge."""
    return st.one_of(
        json_values(),
        nested(),
        spoiled_json(),
        st.sampled_from([None, {}, [], "", 0, -0.0, 10**4299, "x" * 1000]),
    )


def accepted_json() -> st.SearchStrategy[Any]:
    """Payloads the rule accepts, odd ones included (for results that must round-trip)."""
    return st.one_of(json_values(), nested(max_depth=MAX_DEPTH))


#: JSON values that are not an object: refused as inputs, however valid as JSON.
NOT_OBJECTS: list[Any] = [[], [1, 2], ["a", {"b": 1}], (), ("a",), "", "x", "{}", 0, -1, 1.5]
NOT_OBJECTS += [10**100, -0.0, True, False]


def hostile_inputs() -> st.SearchStrategy[Any]:
    """Inputs from both sides of the rule: every hostile payload inside an object, and bare."""
    return st.one_of(
        hostile_json().map(in_object),
        nested(object_at_top=True),
        st.sampled_from(NOT_OBJECTS),
        hostile_json(),
    )


def accepted_inputs() -> st.SearchStrategy[Any]:
    """Inputs the rule accepts: None, and odd objects (for inputs that must round-trip)."""
    return st.one_of(
        st.none(), accepted_json().map(in_object), nested(MAX_DEPTH, object_at_top=True)
    )


# -- strategies: durations -------------------------------------------------------------------

#: The longest duration accepted anywhere: 100 years (``domain.durations.MAX_DURATION``).
MAX_SECONDS = 36_525 * 86_400.0

#: Integers too large for a float: every duration argument refuses them (they once
#: raised OverflowError; test_durations_too_large_for_a_float).
OVERFLOWING_SECONDS = [10**400, 10**5000]


def duration_ok(value: object, *, allow_zero: bool) -> bool:
    """What ``as_duration`` must accept: finite seconds or a timedelta, 0 (or more) to 100 years."""
    if isinstance(value, dt.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, int) and value > MAX_SECONDS:
            return False  # past 100 years, and perhaps past the largest float
        seconds = float(value)
    else:
        return False
    if not math.isfinite(seconds) or seconds < 0 or seconds > MAX_SECONDS:
        return False
    as_delta = value if isinstance(value, dt.timedelta) else dt.timedelta(seconds=seconds)
    return allow_zero or as_delta > dt.timedelta(0)


#: Durations from both sides of every edge (zero, a microsecond, 100 years, finite).
EDGE_DURATIONS: list[Any] = [
    0,
    0.0,
    -0.0,
    1,
    0.5,
    1e-6,
    1e-9,  # under a microsecond: zero as a timedelta
    dt.timedelta(0),
    dt.timedelta(microseconds=1),
    dt.timedelta(minutes=5),
    dt.timedelta(seconds=-1),
    -1,
    -1e-9,
    MAX_SECONDS,
    MAX_SECONDS + 1,
    dt.timedelta(days=36_525),
    dt.timedelta(days=36_526),
    1e10,
    10**20,
    math.nan,
    math.inf,
    -math.inf,
    True,
    False,
    None,
    "60",
    "1m",
    b"1",
    [1],
    decimal.Decimal(1),
]


def good_durations(*, allow_zero: bool) -> st.SearchStrategy[Any]:
    """Durations that must pass, at most five minutes (so that a test can wait them out)."""
    return st.one_of(
        st.sampled_from([0, 0.0] if allow_zero else [1e-6, dt.timedelta(microseconds=1)]),
        st.sampled_from([1, 0.5, 30, dt.timedelta(minutes=5), 300.0]),
        st.floats(1e-3, 300.0),
    )


def hostile_durations() -> st.SearchStrategy[Any]:
    """Durations from every side of the edges, and values of the wrong type."""
    return st.one_of(
        st.sampled_from([*EDGE_DURATIONS, *OVERFLOWING_SECONDS]),
        st.floats(-1e12, 1e12),
        st.integers(-(10**12), 10**12),
        st.timedeltas(),
    )
