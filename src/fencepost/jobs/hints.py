"""JSON Schemas of JSON-native type hints, derived without pydantic.

A hint is *JSON-native* when a JSON value already is what it describes: ``str``,
``int``, ``float``, ``bool``, ``None``, ``Any`` (or no hint), ``list[X]`` and
``dict[str, X]`` of such hints (bare ``list`` and ``dict`` too), unions of them
(``X | None``), and ``Literal`` of strings, integers, booleans and None. A handler
whose hints are all JSON-native receives its inputs as decoded: nothing to convert,
so a worker running it never loads pydantic.

:func:`native_schema` is exact for that subset: it gives what pydantic's
``TypeAdapter(hint).json_schema()`` gives (tests/unit/test_hint_schemas.py holds
the two side by side over a table of hints), so a job's published input schema is
the same whether the process that derived it had pydantic loaded or not.
:func:`strip_titles` takes pydantic's ``title`` keys out of a schema: they repeat
names the schema already has and would make a schema's digest change with a class
or parameter renamed for style.
"""

from __future__ import annotations

import math
import types
from abc import abstractmethod
from collections.abc import Iterator, Mapping
from functools import cached_property
from typing import Any, Literal, Union, get_args, get_origin

#: The schema of each JSON scalar hint.
_SCALARS: Mapping[Any, Mapping[str, str]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
}

#: The JSON type of a ``Literal`` value, by its Python type (pydantic's rule: a
#: ``type`` is given only when every value has the same one).
_LITERAL_TYPES: Mapping[type, str] = {
    str: "string",
    int: "integer",
    bool: "boolean",
    type(None): "null",
}

#: Keywords whose value is a mapping of names (not schema keywords) to subschemas.
_NAMED_SUBSCHEMAS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
#: Keywords whose value is data, never a schema: left as they are.
_DATA_KEYWORDS = ("default", "examples", "const", "enum")


def native_schema(hint: Any) -> dict[str, Any] | None:
    """The JSON Schema of a JSON-native ``hint``; None when the hint is not JSON-native.

    Equal to pydantic's ``TypeAdapter(hint).json_schema()`` wherever it is not None.
    """
    if hint is Any:
        return {}
    if hint is None or _is_scalar(hint):
        return dict(_SCALARS[type(None) if hint is None else hint])
    origin, args = get_origin(hint), get_args(hint)
    if hint is list or origin is list:
        items = native_schema(args[0] if args else Any)
        return None if items is None else {"items": items, "type": "array"}
    if hint is dict or origin is dict:
        if not args or args == (str, Any):
            return {"additionalProperties": True, "type": "object"}
        if args[0] is not str:
            return None  # pydantic converts keys to other types: not native
        values = native_schema(args[1])
        return None if values is None else {"additionalProperties": values, "type": "object"}
    if origin is Literal:
        return _literal_schema(args)
    if origin is Union or origin is types.UnionType:
        return _union_schema(args)
    return None


def is_json_native(hint: Any) -> bool:
    """Whether a JSON value already is what ``hint`` describes (see the module's doc)."""
    return native_schema(hint) is not None


def _is_scalar(hint: Any) -> bool:
    try:
        return hint in _SCALARS
    except TypeError:  # an unhashable hint is no scalar
        return False


def _literal_schema(values: tuple[Any, ...]) -> dict[str, Any] | None:
    if not values or any(type(v) not in _LITERAL_TYPES for v in values):
        return None  # enum members, bytes...: pydantic converts them
    schema: dict[str, Any] = {"const": values[0]} if len(values) == 1 else {"enum": list(values)}
    kinds = {type(v) for v in values}
    if len(kinds) == 1:
        schema["type"] = _LITERAL_TYPES[kinds.pop()]
    return schema


def _union_schema(members: tuple[Any, ...]) -> dict[str, Any] | None:
    # pydantic makes a union with None "nullable": its null comes last, wherever it was.
    others = [m for m in members if m is not None and m is not type(None)]
    schemas = [native_schema(m) for m in others]
    if any(s is None for s in schemas):
        return None
    alternatives: list[dict[str, Any]] = [s for s in schemas if s is not None]
    if len(others) < len(members):
        alternatives.append({"type": "null"})
    return {"anyOf": alternatives}


def json_default(value: Any) -> tuple[bool, Any]:
    """``(True, value as JSON)`` for a default made of JSON values, else ``(False, None)``.

    Tuples become arrays (as :mod:`json` and pydantic write them); a default that
    is not JSON (an object, a non-finite float, a non-string key) is left out of
    the schema rather than guessed.
    """
    if value is None or isinstance(value, (str, bool, int)):
        return True, value
    if isinstance(value, float):
        return (True, value) if math.isfinite(value) else (False, None)
    if isinstance(value, (list, tuple)):
        items = [json_default(item) for item in value]
        return (True, [v for _, v in items]) if all(ok for ok, _ in items) else (False, None)
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        entries = {k: json_default(v) for k, v in value.items()}
        if all(ok for ok, _ in entries.values()):
            return True, {k: v for k, (_, v) in entries.items()}
    return False, None


def object_schema(
    properties: Mapping[str, Mapping[str, Any]],
    required: list[str],
    *,
    open_ended: bool,
    definitions: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The schema of a handler's keyword inputs: one object, its fields' schemas inside.

    One shape for the schemas derived with pydantic and without, so that the two
    differ only where their fields' schemas would.
    """
    schema: dict[str, Any] = {"type": "object", "properties": dict(properties)}
    if required:
        schema["required"] = list(required)
    schema["additionalProperties"] = open_ended
    if definitions:
        schema["$defs"] = dict(definitions)
    return schema


def strip_titles(schema: Any) -> Any:
    """``schema`` without pydantic's ``title`` keys (a copy; names of properties stay).

    Only ``title`` as a keyword goes: a property *called* ``title`` and data
    (``default``, ``examples``, ``const``, ``enum``) are kept as they are.
    """
    if isinstance(schema, list):
        return [strip_titles(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    stripped: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _DATA_KEYWORDS:
            stripped[key] = value
        elif key in _NAMED_SUBSCHEMAS and isinstance(value, dict):
            stripped[key] = {name: strip_titles(sub) for name, sub in value.items()}
        else:
            stripped[key] = strip_titles(value)
    return stripped


class DerivedSchema(Mapping[str, Any]):
    """A JSON Schema derived from type hints on first use, read like the mapping it is.

    Deriving may take pydantic; a process that never reads the schema never pays for it.
    """

    @abstractmethod
    def _derive(self) -> dict[str, Any]:
        """The schema (called once, on first use)."""

    @cached_property
    def _schema(self) -> dict[str, Any]:
        return self._derive()

    def __getitem__(self, key: str) -> Any:
        return self._schema[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._schema)

    def __len__(self) -> int:
        return len(self._schema)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._schema!r})"
