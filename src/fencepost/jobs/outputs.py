"""What a job's result is stored as: dumped to JSON where typed, checked against its output schema.

A job may declare an output: a JSON Schema, or a type (``@app.job(output=Report)``)
whose schema is derived as an input's is. A result that does not match fails the
execution with ``result_invalid`` naming the field (``result.total: ...``), without
a retry, like a result that is not JSON at all.

A result that is a pydantic model or a dataclass instance is written as JSON with
pydantic (``TypeAdapter.dump_python(mode="json")``) whether or not the job declares
an output; everything else is stored as the handler returned it.
"""

from __future__ import annotations

import dataclasses
import sys
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any

from fencepost.domain.errors import ValidationError
from fencepost.jobs.hints import DerivedSchema, native_schema, strip_titles
from fencepost.jobs.inputs import pydantic_error

if TYPE_CHECKING:
    import pydantic


class OutputType(DerivedSchema):
    """The JSON Schema of an output type, derived on first use; results convert through it.

    A JSON-native type's schema is derived without pydantic; checking a result
    takes pydantic's adapter of the type (it also dumps models to JSON).
    """

    def __init__(self, hint: Any) -> None:
        self.hint = hint

    @cached_property
    def adapter(self) -> pydantic.TypeAdapter[Any]:
        """pydantic's adapter of the output type (pydantic imported on first use)."""
        import pydantic

        try:
            return pydantic.TypeAdapter(self.hint)
        except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError) as exc:
            raise ValidationError("output", f"cannot use type {self.hint!r}: {exc}") from exc

    def _derive(self) -> dict[str, Any]:
        native = native_schema(self.hint)
        if native is not None:
            return native
        schema: dict[str, Any] = strip_titles(self.adapter.json_schema())
        return schema

    def convert(self, result: Any) -> Any:
        """``result`` validated by the type and written as JSON (else :class:`ValidationError`)."""
        import pydantic

        try:
            value = self.adapter.validate_python(result)
        except pydantic.ValidationError as exc:
            raise pydantic_error(exc, "result") from None
        return _dump(self.adapter, value)

    def __repr__(self) -> str:
        return f"OutputType({self.hint!r})"


def as_json(result: Any) -> Any:
    """``result`` with a pydantic model or dataclass instance dumped to JSON (else as is)."""
    if _is_model(result) or (dataclasses.is_dataclass(result) and not isinstance(result, type)):
        try:
            adapter = _adapter_of(type(result))  # type: ignore[arg-type]
        except Exception as exc:  # a dataclass whose fields pydantic cannot describe
            raise ValidationError("result", f"cannot be written as JSON: {exc}") from None
        return _dump(adapter, result)
    return result


def _is_model(value: Any) -> bool:
    # A value can only be a pydantic model where pydantic is loaded already: never load it here.
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(value, pydantic.BaseModel)


@lru_cache(maxsize=128)
def _adapter_of(kind: type) -> pydantic.TypeAdapter[Any]:
    import pydantic

    return pydantic.TypeAdapter(kind)


def _dump(adapter: pydantic.TypeAdapter[Any], value: Any) -> Any:
    try:
        return adapter.dump_python(value, mode="json")
    except Exception as exc:  # pydantic's serialization errors, and what user code raises
        raise ValidationError("result", f"cannot be written as JSON: {exc}") from None
