"""Input schemas of JSON-native hints: derived without pydantic, exactly as pydantic derives them.

A worker publishes its jobs' input schemas without loading pydantic when their
hints are JSON-native; a submitter with pydantic loaded derives them too. These
tables hold the two derivations side by side, hint by hint and signature by
signature, so they cannot disagree (a pydantic upgrade that changes a schema
fails here first).
"""

from __future__ import annotations

import enum
import inspect
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Dict, List, Literal, Optional, Union  # noqa: UP035
from uuid import UUID

import pydantic
import pytest

from fencepost.jobs.hints import is_json_native, native_schema, strip_titles
from fencepost.jobs.inputs import Parameters
from fencepost.jobs.spec import spec_from_function

ROOT = Path(__file__).resolve().parents[2]


class Colour(enum.Enum):
    """An enum: pydantic converts its values, so it is not JSON-native."""

    RED = "red"


class Point(pydantic.BaseModel):  # a model: not JSON-native (no docstring: no description)
    x: int


# A model with a field called ``title``, which title-stripping must keep (no
# docstring: it would be the schema's description).
class Line(pydantic.BaseModel):
    title: str
    qty: int = 1


NATIVE_HINTS: list[Any] = [
    str,
    int,
    float,
    bool,
    None,
    type(None),
    Any,
    list,
    dict,
    list[int],
    List[str],  # noqa: UP006
    list[Any],
    dict[str, int],
    dict[str, Any],
    Dict[str, Any],  # noqa: UP006
    dict[str, list[int]],
    dict[str, None],
    list[dict],  # type: ignore[type-arg]
    dict[str, dict[str, Any]],
    int | None,
    Optional[str],  # noqa: UP045
    Union[int, str],  # noqa: UP007
    Union[None, int, str],  # noqa: UP007
    Union[int, None, str],  # noqa: UP007
    Optional[Any],  # noqa: UP045
    Union[int, Any],  # noqa: UP007
    list[int | None],
    Union[list[int], dict[str, str]],  # noqa: UP007
    bool | int,
    int | bool,
    Optional[list[Any]],  # noqa: UP045
    Literal["a"],
    Literal["a", "b"],
    Literal[1, 2],
    Literal[-1, 0],
    Literal["a", 1],
    Literal[True],
    Literal[True, False],
    Literal[1, True],
    Literal[None],
    Literal["a", None],
    Literal[""],
    Literal[2**70],
    Optional[Literal["a", "b"]],  # noqa: UP045
    Union[int, Literal["x"]],  # noqa: UP007
    Union[Literal["a"], Literal["b"], None],  # noqa: UP007
]


@pytest.mark.parametrize("hint", NATIVE_HINTS, ids=repr)
def test_a_native_hint_s_schema_is_pydantic_s(hint: Any) -> None:
    expected = strip_titles(pydantic.TypeAdapter(hint).json_schema())
    assert native_schema(hint) == expected


RICH_HINTS: list[Any] = [
    datetime,
    date,
    UUID,
    Decimal,
    Colour,
    Point,
    bytes,
    tuple[int, int],
    set[str],
    list[datetime],
    dict[int, str],
    dict[str, Point],
    datetime | None,
    Literal[Colour.RED],
    Annotated[int, pydantic.Field(ge=0)],
    Sequence[int],
    object,
]


@pytest.mark.parametrize("hint", RICH_HINTS, ids=repr)
def test_a_hint_pydantic_converts_is_not_native(hint: Any) -> None:
    assert native_schema(hint) is None
    assert not is_json_native(hint)


NOT_JSON = object()


def _plain(day: str, limit: int = 10, tags: list[str] | None = None) -> None: ...
def _no_hints(a, b=3, *, c="x"):  # type: ignore[no-untyped-def]
    ...
def _loose(day: str, **rest: Any) -> None: ...
def _defaults(
    a: Literal["x", "y"] = "y",
    b: dict[str, Any] | None = None,
    c: list[int] = (1, 2),  # type: ignore[assignment]
    d: float = 0.5,
    e: Any = NOT_JSON,  # left out of the schema by both derivations
    f: bool | None = False,
) -> None: ...
def _title(title: str, properties: dict[str, str], default: int = 0) -> None: ...
def _none() -> None: ...


@pytest.mark.parametrize(
    "handler", [_plain, _no_hints, _loose, _defaults, _title, _none], ids=lambda h: h.__name__
)
def test_a_native_signature_s_schema_is_the_one_pydantic_s_adapters_give(
    handler: Callable[..., Any],
) -> None:
    parameters = _parameters(handler)
    assert parameters.native
    assert parameters.native_schema() == parameters.pydantic_schema()
    assert parameters.schema() == parameters.native_schema()


def test_the_derived_schema_has_no_titles_and_keeps_a_field_called_title() -> None:
    def handler(title: str, lines: list[Line], at: datetime | None = None) -> None: ...

    schema = _parameters(handler).schema()
    assert schema == {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}},
            "at": {
                "anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}],
                "default": None,
            },
        },
        "required": ["title", "lines"],
        "additionalProperties": False,
        "$defs": {
            "Line": {
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "qty": {"type": "integer", "default": 1},
                },
                "required": ["title"],
            }
        },
    }


def test_schema_defaults_are_json_as_pydantic_writes_them() -> None:
    def handler(
        at: datetime = datetime(2026, 1, 2, 3, 4, 5), amount: Decimal = Decimal("1.50")
    ) -> None: ...

    properties = _parameters(handler).schema()["properties"]
    assert properties["at"]["default"] == "2026-01-02T03:04:05"
    assert properties["amount"]["default"] == "1.50"


def test_native_schemas_are_derived_in_a_process_without_pydantic_or_jsonschema() -> None:
    code = (
        "import sys, json\n"
        "from typing import Literal\n"
        "from datetime import datetime\n"
        "from fencepost.jobs.spec import spec_from_function\n"
        "def report(ctx, day: str, limit: int = 10, tags: list[str] | None = None,\n"
        "           mode: Literal['a', 'b'] = 'a', **rest): ...\n"
        "def typed(at: datetime): ...\n"
        "spec = spec_from_function(report, name='report')\n"
        "schema = dict(spec.input_schema)\n"
        "spec.run(None, {'day': 'd'})\n"
        "spec_from_function(typed, name='typed')  # registering a rich job loads nothing either\n"
        "heavy = ('pydantic', 'pydantic_core', 'jsonschema')\n"
        "heavy = sorted(m for m in heavy if m in sys.modules)\n"
        "print(json.dumps({'schema': schema, 'heavy': heavy}))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        timeout=60,
    )
    import json

    out = json.loads(run.stdout)
    assert out["heavy"] == []

    def report(  # the same signature, derived here by pydantic
        ctx: Any,
        day: str,
        limit: int = 10,
        tags: list[str] | None = None,
        mode: Literal["a", "b"] = "a",
        **rest: Any,
    ) -> None: ...

    assert out["schema"] == _parameters(report).pydantic_schema()
    assert out["schema"]["additionalProperties"] is True


def test_strip_titles_leaves_data_and_names_alone() -> None:
    schema = {
        "title": "Inputs",
        "properties": {"title": {"title": "Title", "type": "string", "default": {"title": "kept"}}},
        "$defs": {"title": {"title": "T", "enum": [{"title": 1}]}},
        "anyOf": [{"title": "A"}],
    }
    assert strip_titles(schema) == {
        "properties": {"title": {"type": "string", "default": {"title": "kept"}}},
        "$defs": {"title": {"enum": [{"title": 1}]}},
        "anyOf": [{}],
    }


def test_a_handler_s_output_type_schema_is_derived_titles_stripped() -> None:
    spec = spec_from_function(lambda: None, name="out", output=Point)
    assert dict(spec.output_schema or {}) == {
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "required": ["x"],
    }
    native = spec_from_function(lambda: None, name="native-out", output=dict[str, int])
    assert dict(native.output_schema or {}) == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
    }


def _parameters(handler: Callable[..., Any]) -> Parameters:
    from typing import get_type_hints

    params = [p for p in inspect.signature(handler).parameters.values() if p.name != "ctx"]
    return Parameters.of(params, get_type_hints(handler))
