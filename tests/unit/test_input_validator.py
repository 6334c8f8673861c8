"""The compiled input validator is only ever the stricter: it never accepts what the
reference (python-jsonschema) refuses, so every refusal, and its wording, stays the
reference's (domain/catalogue.py, ``InputValidator``)."""

from __future__ import annotations

import datetime
import decimal
import enum
import uuid
from typing import Any, Literal

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fencepost.domain.catalogue import InputValidator, check_inputs, input_validator
from fencepost.domain.errors import ValidationError


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Line(pydantic.BaseModel):
    sku: str = pydantic.Field(min_length=1, max_length=8)
    qty: int = pydantic.Field(ge=1, le=1000)


class Order(pydantic.BaseModel):
    lines: list[Line]
    note: str | None = None
    colour: Colour = Colour.RED


def _schema(**fields: Any) -> dict[str, Any]:
    """The input schema pydantic derives for keyword inputs of these types (as jobs do)."""
    model = pydantic.create_model("Inputs", **fields)  # type: ignore[call-overload]
    schema: dict[str, Any] = model.model_json_schema()
    schema["additionalProperties"] = False
    return schema


#: Schemas as jobs publish them: derived from hints, and written by hand.
SCHEMAS: list[dict[str, Any]] = [
    _schema(n=(int, ...)),
    _schema(x=(float, 0.0), flag=(bool, False)),
    _schema(day=(str, ...), limit=(int | None, None)),
    _schema(items=(list[int], ...), tags=(dict[str, str], {})),
    _schema(mode=(Literal["a", "b", 3], "a"), colour=(Colour, Colour.RED)),
    _schema(at=(datetime.datetime, ...), day=(datetime.date, ...), ref=(uuid.UUID, ...)),
    _schema(amount=(decimal.Decimal, ...)),
    _schema(order=(Order, ...)),
    {
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
            "word": {"type": "string", "pattern": "^a+$"},
            "n": {"type": "integer", "minimum": -5, "maximum": 5, "multipleOf": 1},
            "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            "set": {"type": "array", "uniqueItems": True, "maxItems": 4},
            "pick": {"enum": [1, "1", True, None, [1], {"a": 1}]},
            "fixed": {"const": 1},
        },
        "required": ["code"],
    },
    {
        "type": "object",
        "properties": {"v": {"anyOf": [{"type": "integer"}, {"type": "string", "minLength": 2}]}},
        "patternProperties": {"^x_": {"type": "boolean"}},
        "propertyNames": {"maxLength": 6},
        "minProperties": 1,
    },
]

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, 1, 1.0, -0.0, 2.5, 10**30, "1", "a", "a\n", "AAA", "AAA\n", "red"]),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=12),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(st.text(max_size=6), inner, max_size=5),
    ),
    max_leaves=20,
)
_NAMES = "n x flag day limit items tags mode colour at ref amount order code word ratio"
_keys = st.sampled_from([*_NAMES.split(), "set", "pick", "fixed", "v", "x_1", "lines"])
_inputs = st.dictionaries(st.one_of(_keys, st.text(max_size=8)), _json, max_size=6)


@pytest.mark.parametrize("schema", SCHEMAS, ids=range(len(SCHEMAS)))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_inputs)
def test_the_compiled_validator_never_accepts_what_the_reference_refuses(
    schema: dict[str, Any], value: dict[str, Any]
) -> None:
    validator = InputValidator(schema)
    assert validator.fast is not None  # every schema here compiles
    if validator.accepts_fast(value):
        assert validator.reference.is_valid(value), (schema, value)


@pytest.mark.parametrize(
    "value",
    [
        {"code": "AAA\n"},  # "$" matches before a trailing newline in Python's re only
        {"code": "AAA", "n": True},  # a bool is no integer
        {"code": "AAA", "n": 1.0},  # 1.0 is an integer to both
        {"code": "AAA", "n": 10**30},
        {"code": "AAA", "set": [1, True]},  # distinct to both: True is not 1 in JSON
        {"code": "AAA", "pick": 1.0},
    ],
)
def test_edge_values_get_the_reference_s_answer(value: dict[str, Any]) -> None:
    validator = input_validator(SCHEMAS[8])
    try:
        check_inputs(validator, value)
        accepted = True
    except ValidationError:
        accepted = False
    assert accepted == validator.reference.is_valid(value)


def test_a_refusal_is_the_reference_s_wording_and_field() -> None:
    validator = input_validator(SCHEMAS[7])
    with pytest.raises(ValidationError) as refused:
        check_inputs(validator, {"order": {"lines": [{"sku": "", "qty": 1}]}})
    assert refused.value.field == "inputs.order.lines[0].sku"
    assert refused.value.message == "'' should be non-empty"


def test_a_schema_the_compiled_validator_cannot_take_falls_back_to_the_reference() -> None:
    # A pattern the compiled validator's regex engine refuses (``\Z``), Python's accepts.
    validator = InputValidator({"type": "object", "properties": {"p": {"pattern": r"^a\Z"}}})
    assert validator.fast is None
    assert check_inputs(validator, {"p": "a"}) == {"p": "a"}
    with pytest.raises(ValidationError) as refused:
        check_inputs(validator, {"p": "a\n"})
    assert refused.value.field == "inputs.p"
