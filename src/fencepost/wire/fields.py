"""The field types of the API's bodies: names, text, integers, payloads, instants, durations.

Each type states its rule once, for the server (pydantic refuses what breaks it, with
a 422 naming the field) and for the spec (the same rule as JSON Schema), so the spec
and the server refuse the same values. Times are ISO 8601 with an offset (UTC on output).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BeforeValidator,
    Field,
    GetJsonSchemaHandler,
    SkipValidation,
    StrictInt,
    WithJsonSchema,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema
from typing_extensions import TypeAliasType

from fencepost.domain import payloads
from fencepost.domain.checks import INT32_MAX, MAX_QUEUE
from fencepost.domain.durations import MAX_DURATION
from fencepost.domain.limits import MAX_LIMIT_KEY
from fencepost.domain.states import AttemptOutcome

#: The longest duration the store keeps (100 years), in seconds: the most a delay,
#: an interval, a misfire grace or a retry may be.
MAX_DURATION_SECONDS = MAX_DURATION.total_seconds()
#: The shortest non-zero duration: the store keeps durations to the microsecond, and
#: refuses one that would round to zero where zero is not allowed.
MIN_SECONDS = 1e-6

# -- names and text ---------------------------------------------------------------------

#: The longest name a store keeps (a job, an owner, a node): ``require_name``'s default.
MAX_NAME = 200


def _spaces() -> str:
    """The characters ``str.strip()`` removes, as a regex class body of ``\\uXXXX`` ranges.

    Spelled out because ``\\s`` means different things to different engines: to the
    spec's (ECMA-262) it leaves out U+001C..U+001F, which Python strips. (Every one
    of them is in the Basic Multilingual Plane.)
    """
    ranges: list[list[int]] = []
    for code in (c for c in range(0x10000) if chr(c).isspace()):
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    return "".join(
        f"\\u{low:04x}" if low == high else f"\\u{low:04x}-\\u{high:04x}" for low, high in ranges
    )


def name_pattern(refused: str = "") -> str:
    """:data:`NAME_PATTERN`, refusing the characters of ``refused`` too (a regex class body)."""
    anything = rf"[^\u0000{refused}]*"
    return rf"^{anything}[^\u0000{refused}{_spaces()}]{anything}$"


#: What ``require_name`` accepts, as the spec says it: at least one character that is
#: not white space (as Python's ``str.strip`` sees it), and no U+0000. (Lone surrogates
#: are refused too; JSON Schema has no way to name them, and UTF-8 cannot carry them.)
NAME_PATTERN = name_pattern()
#: Free text a store keeps (an error message): anything but U+0000.
TEXT_PATTERN = r"^[^\u0000]*$"
#: What ``require_limit_key`` accepts: a name without control characters.
LIMIT_KEY_PATTERN = name_pattern(r"\u0001-\u001f\u007f")


def _any_case(word: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in word)


#: What ``attempt_outcome`` accepts: an attempt outcome's name in any case
#: (``timed_out``, ``TIMED_OUT``), spelled out letter by letter: a spec's pattern
#: has no flag for case.
OUTCOME_PATTERN = "^(" + "|".join(_any_case(o.value) for o in AttemptOutcome) + ")$"


#: What a problem's detail says of a value a pattern refused (the regex is for machines).
PATTERN_MEANINGS = {
    NAME_PATTERN: "must be a name: not blank, without U+0000",
    name_pattern("/"): "must be a name: not blank, without U+0000 or '/'",
    TEXT_PATTERN: "must not contain U+0000",
    LIMIT_KEY_PATTERN: "must be a name: not blank, without control characters or U+0000",
    OUTCOME_PATTERN: "must be an attempt outcome, in any case: "
    + ", ".join(o.value.lower() for o in AttemptOutcome),
}


def name(max_length: int = MAX_NAME, **extra: Any) -> Any:
    """A ``Field`` for a name of at most ``max_length`` characters (see :data:`NAME_PATTERN`)."""
    return Field(min_length=1, max_length=max_length, pattern=NAME_PATTERN, **extra)


#: A job name, an owner, a node id: what the store's ``require_name`` accepts.
Name = Annotated[str, name()]
#: A queue's name: a name of at most ``MAX_QUEUE`` characters.
QueueName = Annotated[str, name(MAX_QUEUE)]
#: A limit key: a name of at most ``MAX_LIMIT_KEY`` characters, without control characters.
LimitKey = Annotated[
    str, Field(min_length=1, max_length=MAX_LIMIT_KEY, pattern=LIMIT_KEY_PATTERN, strict=True)
]

# -- integers ---------------------------------------------------------------------------


def _whole(value: object) -> object:
    # To JSON Schema, 6.0 is an integer (a number without a fraction); it is read as 6.
    # Strings ("6") and booleans are still refused.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: Reads a number without a fraction (6.0) as an integer. Put it after any bounds in an
#: ``Annotated``: bounds given after it are enforced but vanish from the spec.
WHOLE = BeforeValidator(_whole)
#: An integer in a JSON body: a JSON integer, or a number without a fraction (6.0).
Integer = Annotated[StrictInt, WHOLE]
#: A count or version the store keeps (PostgreSQL ``integer``), at least 1.
Count = Annotated[StrictInt, Field(ge=1, le=INT32_MAX), WHOLE]

#: Marks a bucket number in the spec. How many buckets there are is the store's
#: setting, so each app's spec states its own maximum (see :mod:`fencepost.api.buckets`);
#: the store refuses the rest. ``INT32_MAX`` only keeps a huge number from the store.
BUCKET_EXTENSION = "x-fencepost-bucket"
Bucket = Annotated[
    StrictInt, Field(ge=0, le=INT32_MAX, json_schema_extra={BUCKET_EXTENSION: True}), WHOLE
]

# -- payloads ---------------------------------------------------------------------------


class KeysMatch:
    """Marks a ``dict`` whose keys are a constrained string, so the spec refuses the keys
    the model refuses.

    pydantic states ``dict[K, V]`` as ``patternProperties`` (the values of keys that
    match K's pattern) and ``propertyNames`` (K's lengths only), which lets a key that
    does not match through with any value: a document schema-valid but refused. This
    moves the pattern into ``propertyNames`` and states V for every key.
    """

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        [(pattern, values)] = schema.pop("patternProperties").items()
        names = {**schema.get("propertyNames", {}), "pattern": pattern}
        return {**schema, "propertyNames": names, "additionalProperties": values}


def _no_nul(value: Any) -> Any:
    # What the spec says of a payload, checked before anything else: a refusal of one
    # item must not wait for the store, which reads a stale item of a batch no further
    # than its lease. (The store checks the rest, and this again.)
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise ValueError("must not contain U+0000 in any string or key")
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return value


#: The JSON name of each type a JSON body's value has, for a refusal's text.
_JSON_TYPES = {bool: "boolean", int: "number", float: "number", str: "string", list: "array"}


def _an_object(value: Any) -> Any:
    # A handler takes its inputs as keywords: the store refuses any other shape
    # (``payloads.as_inputs``); refused here too, so that the spec says it.
    if value is not None and not isinstance(value, dict):
        raise ValueError(f"{payloads.NOT_AN_OBJECT}, got {_JSON_TYPES.get(type(value), 'a value')}")
    return value


_Text = Annotated[str, Field(pattern=TEXT_PATTERN)]
#: Inputs, a result or progress: any JSON without U+0000 in a string or key, as the spec
#: says it. pydantic does not validate it as the recursive type (only the U+0000 rule is
#: checked here): the store checks it whole, including the rules no schema states (at
#: most 64 levels deep, at most the store's ``max_payload_bytes`` encoded).
#:
#: ``Inputs`` is a payload that is a JSON object (or null, which means ``{}``): the
#: inputs of a submit or a schedule, which a handler takes as keywords.
if TYPE_CHECKING:  # mypy cannot follow a recursive TypeAliasType
    Payload = Any
    Inputs = Any
else:
    JsonPayload = TypeAliasType(
        "JsonPayload",
        bool
        | int
        | float
        | _Text
        | list["JsonPayload"]
        | Annotated[dict[_Text, "JsonPayload"], KeysMatch()]
        | None,
    )
    Payload = Annotated[JsonPayload, SkipValidation, AfterValidator(_no_nul)]
    Inputs = Annotated[
        Annotated[dict[_Text, JsonPayload], KeysMatch()] | None,
        SkipValidation,
        AfterValidator(_an_object),
        AfterValidator(_no_nul),
    ]

# -- instants ---------------------------------------------------------------------------


def _iso_text(value: object) -> object:
    # Pydantic would read a number, or a string of digits, as Unix seconds; the API
    # promises ISO 8601 only.
    if not isinstance(value, str):
        raise ValueError("must be an ISO 8601 string with a UTC offset")
    try:
        float(value)
    except ValueError:
        return value
    raise ValueError("must be an ISO 8601 string with a UTC offset, not a number")


#: The years an instant may be written in. Any offset moves a time in 0002..9998 to
#: another that Python (and so every store) can hold in UTC; 0001-01-01T00:00:00+05:00
#: is before ``datetime.min`` once converted. A rule on the written year is one the
#: spec can state (as a pattern), so the spec and the server refuse the same times.
YEARS = range(2, 9999)
#: :data:`YEARS` as a pattern on the text of a ``date-time``.
YEAR_PATTERN = (
    r"^(000[2-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])-"
)


def _in_utc(value: datetime) -> datetime:
    if value.year not in YEARS:
        raise ValueError(f"must be in the years {YEARS[0]:04} to {YEARS[-1]}")
    return value.astimezone(UTC)


#: An aware instant given as ISO 8601 text; naive times and numbers are refused.
Instant = Annotated[
    AwareDatetime,
    BeforeValidator(_iso_text),
    AfterValidator(_in_utc),
    WithJsonSchema({"type": "string", "format": "date-time", "pattern": YEAR_PATTERN}),
]
