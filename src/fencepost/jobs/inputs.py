"""A handler's keyword inputs: their JSON Schema, and the arguments a run's inputs bind to.

A Python handler's type hints say what it receives. :class:`Parameters` turns a
run's inputs (decoded JSON) into its keyword arguments, and derives the input
schema from the same hints, so what a job publishes is what its handler gets:

- a parameter with a JSON-native hint (:mod:`fencepost.jobs.hints`) receives its
  value as decoded, checked at submit against the schema;
- any other hint (``datetime``, ``UUID``, ``Decimal``, enums, pydantic models,
  TypedDicts, dataclasses, containers of these) is validated *and converted* by a
  pydantic ``TypeAdapter`` of its own before the call.

One adapter per parameter rather than one model for the whole argument set: the
JSON-native parameters of a handler then never touch pydantic (a worker running
only JSON-native jobs does not load it), a parameter's name cannot collide with a
pydantic model's attributes (``json``, ``copy``, ``model_config``, names with a
leading underscore), and missing and unknown inputs are refused by one check written
here for both kinds. The schemas of several adapters share their ``$defs`` through
``TypeAdapter.json_schemas``.

A missing required input, an unknown one (for a handler without ``**kwargs``) and a
value that does not convert are a :class:`ValidationError` naming the input
(``inputs.at``, ``inputs.report.lines[2].sku``): at submit a refusal, on a worker a
permanent failure (retrying cannot mend the inputs).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from fencepost.domain.errors import ValidationError
from fencepost.jobs.hints import json_default, native_schema, object_schema, strip_titles

if TYPE_CHECKING:
    import pydantic


@dataclass(frozen=True, eq=False)
class Parameter:
    """One keyword input of a handler: its name, type hint and default (if any)."""

    name: str
    hint: Any = Any
    default: Any = inspect.Parameter.empty  #: ``inspect.Parameter.empty``: required

    @property
    def required(self) -> bool:
        """Whether a run must give this input (it has no default)."""
        return self.default is inspect.Parameter.empty

    @cached_property
    def native(self) -> dict[str, Any] | None:
        """The schema of a JSON-native hint, derived without pydantic; None for any other."""
        return native_schema(self.hint)

    @cached_property
    def adapter(self) -> pydantic.TypeAdapter[Any]:
        """pydantic's adapter of the hint (built, and pydantic imported, on first use).

        Raises :class:`ValidationError` naming the input when pydantic cannot
        handle the hint.
        """
        import pydantic

        try:
            return pydantic.TypeAdapter(self.hint)
        except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError) as exc:
            raise ValidationError(
                f"inputs.{self.name}", f"cannot use its type hint {self.hint!r}: {exc}"
            ) from exc

    def default_json(self) -> tuple[bool, Any]:
        """``(True, the default as JSON)`` for the schema, or ``(False, None)`` to leave it out."""
        if self.required:
            return False, None
        if self.native is not None:
            return json_default(self.default)
        try:
            return True, self.adapter.dump_python(self.default, mode="json")
        except Exception:  # a default pydantic cannot write is not published, never fatal
            return False, None

    def convert(self, value: Any) -> Any:
        """``value`` (decoded JSON) as the hint's type; :class:`ValidationError` if it is not."""
        if self.native is not None:
            return value
        import pydantic

        try:
            return self.adapter.validate_python(value)
        except pydantic.ValidationError as exc:
            raise pydantic_error(exc, f"inputs.{self.name}") from None


class Parameters:
    """A handler's keyword inputs, in order; ``open_ended`` when it takes ``**kwargs``."""

    def __init__(self, fields: Iterable[Parameter], *, open_ended: bool = False) -> None:
        self.fields: tuple[Parameter, ...] = tuple(fields)
        self.open_ended = open_ended
        self._names = {p.name for p in self.fields}
        self._converted = tuple(p for p in self.fields if p.native is None)

    @classmethod
    def of(cls, params: Sequence[inspect.Parameter], hints: Mapping[str, Any]) -> Parameters:
        """The inputs of a handler from its signature's parameters (the context left out)."""
        fields = [
            Parameter(name=p.name, hint=hints.get(p.name, Any), default=p.default)
            for p in params
            if p.kind is not p.VAR_KEYWORD
        ]
        return cls(fields, open_ended=any(p.kind is p.VAR_KEYWORD for p in params))

    @property
    def native(self) -> bool:
        """Whether every hint is JSON-native: binding converts nothing and needs no pydantic."""
        return not self._converted

    def schema(self) -> dict[str, Any]:
        """The JSON Schema of the inputs: without pydantic when every hint is JSON-native."""
        return self.native_schema() if self.native else self.pydantic_schema()

    def native_schema(self) -> dict[str, Any]:
        """The schema derived without pydantic (every hint must be JSON-native)."""
        properties: dict[str, dict[str, Any]] = {}
        for p in self.fields:
            if p.native is None:
                raise ValueError(f"the hint of {p.name!r} is not JSON-native: {p.hint!r}")
            properties[p.name] = _with_default(p.native, p)
        return object_schema(properties, self._required(), open_ended=self.open_ended)

    def pydantic_schema(self) -> dict[str, Any]:
        """The schema derived by pydantic's adapters, titles stripped (any hints)."""
        import pydantic

        try:
            keyed = [(p.name, "validation", p.adapter) for p in self.fields]
            by_key, top = pydantic.TypeAdapter.json_schemas(keyed)  # type: ignore[arg-type]
        except (
            ValidationError,  # a parameter's adapter: its hint is no type pydantic knows
            pydantic.PydanticSchemaGenerationError,
            pydantic.PydanticUserError,
        ) as exc:
            raise ValidationError(
                "inputs", f"cannot derive a JSON Schema from type hints: {exc}"
            ) from exc
        properties = {
            p.name: _with_default(strip_titles(by_key[(p.name, "validation")]), p)
            for p in self.fields
        }
        return object_schema(
            properties,
            self._required(),
            open_ended=self.open_ended,
            definitions=strip_titles(top.get("$defs", {})),
        )

    def _required(self) -> list[str]:
        return [p.name for p in self.fields if p.required]

    def bind(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments for ``values``: converted where a hint asks for it.

        Inputs a handler has a default for and that ``values`` leaves out stay
        out (the handler's own default applies). Raises :class:`ValidationError`
        naming the first missing, unknown or unconvertible input.
        """
        if not self.open_ended:
            for name in values:
                if name not in self._names:
                    takes = ", ".join(sorted(self._names)) or "no inputs"
                    raise ValidationError(
                        f"inputs.{name}", f"is not an input of this job (it takes: {takes})"
                    )
        for p in self.fields:
            if p.required and p.name not in values:
                raise ValidationError(f"inputs.{p.name}", "is required")
        arguments = dict(values)
        for p in self._converted:
            if p.name in arguments:
                arguments[p.name] = p.convert(arguments[p.name])
        return arguments

    def __iter__(self) -> Iterator[Parameter]:
        return iter(self.fields)


def _with_default(schema: Mapping[str, Any], parameter: Parameter) -> dict[str, Any]:
    published = dict(schema)
    ok, default = parameter.default_json()
    if ok:
        published["default"] = default
    return published


def pydantic_error(exc: pydantic.ValidationError, root: str) -> ValidationError:
    """pydantic's first error as a :class:`ValidationError` naming the field under ``root``.

    A location inside a union names the union's member after the field (pydantic's
    own tag, e.g. ``inputs.when.datetime``): pydantic tells a member from a field
    by nothing else.
    """
    errors = exc.errors(include_url=False, include_input=False)
    if not errors:  # pragma: no cover - pydantic raises with at least one error
        return ValidationError(root, str(exc))
    first = errors[0]
    field = root + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
    more = len(errors) - 1
    message = first["msg"] + (f" (and {more} more error{'s' * (more > 1)})" if more else "")
    return ValidationError(field, message)
