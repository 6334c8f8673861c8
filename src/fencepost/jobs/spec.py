"""A job: one version of something a worker can run, and the inputs it accepts.

:class:`JobSpec` is the one shape every job takes, whether it was written as a
Python function (:func:`spec_from_function`) or as a definition file
(:mod:`fencepost.jobs.definitions`). Its ``run`` callable is always called
as ``run(ctx, inputs)``; for coroutine handlers it returns an awaitable.

Inputs are checked against a JSON Schema (draft 2020-12) before anything is
stored; the schema is given, or derived from the handler's type hints.

jsonschema and pydantic are imported only when a schema is checked or derived:
a worker process, which runs what was checked at submit, never needs them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, get_type_hints

from fencepost.domain.catalogue import check_inputs, check_schema, input_validator
from fencepost.domain.checks import require_int, require_name
from fencepost.domain.durations import as_duration
from fencepost.domain.errors import ValidationError
from fencepost.domain.models import JSON
from fencepost.domain.retry import RetryPolicy
from fencepost.jobs.context import Context

if TYPE_CHECKING:
    import jsonschema

#: How a job is run: ``run(ctx, inputs)``; a coroutine handler's ``run`` returns an awaitable.
Runner = Callable[[Context, dict[str, Any]], Any]

#: The lease a worker takes when a job names none.
DEFAULT_LEASE_TTL = timedelta(seconds=30)

#: The names a handler's first parameter may have to receive the context.
_CONTEXT_NAMES = ("ctx", "context")

#: The schema of a job that names none: any JSON object.
_ANY_OBJECT: Mapping[str, Any] = {"type": "object"}


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """One version of one job: how to run it, what it accepts, how it is retried."""

    name: str
    version: int
    run: Runner
    is_async: bool = False  #: ``run`` returns a coroutine, to be awaited on the worker's loop
    input_schema: Mapping[str, Any] = field(default_factory=lambda: dict(_ANY_OBJECT))
    max_attempts: int | None = None  #: None: the store's default
    retry: RetryPolicy | None = None  #: None: the store's policy
    timeout: timedelta | None = None  #: how long one attempt may run; None: no limit
    lease_ttl: timedelta = DEFAULT_LEASE_TTL
    source: str = ""  #: where it was defined ("module:function" or a file path)
    description: str = ""  #: what the job does, for the catalogue and its readers

    def __post_init__(self) -> None:
        require_name(self.name, "name")
        require_int(self.version, "version", low=1)
        if self.max_attempts is not None:
            require_int(self.max_attempts, "max_attempts", low=1)
        if self.timeout is not None:
            object.__setattr__(self, "timeout", as_duration(self.timeout, field="timeout"))
        object.__setattr__(self, "lease_ttl", as_duration(self.lease_ttl, field="lease_ttl"))
        # A schema derived from type hints is valid by construction, and checked
        # (derived) only when first used; a given one is checked here, at once.
        if not isinstance(self.input_schema, HintSchema) and self.input_schema != _ANY_OBJECT:
            check_schema(self.input_schema, "inputs")

    @property
    def key(self) -> tuple[str, int]:
        """``(name, version)``: what an execution pins."""
        return (self.name, self.version)

    @cached_property
    def _validator(self) -> jsonschema.Draft202012Validator:
        return input_validator(self.input_schema)

    def check_inputs(self, inputs: JSON) -> dict[str, Any]:
        """Return ``inputs`` (None means ``{}``) if they match the schema, else raise.

        The :class:`ValidationError` names the offending field as a path from
        ``inputs`` (``inputs.day``, ``inputs.items[2].sku``) and says why: the same
        check, and the same names, as the store's catalogue applies
        (:func:`fencepost.domain.catalogue.check_inputs`).
        """
        return check_inputs(self._validator, inputs)


def spec_from_function(
    handler: Callable[..., Any],
    *,
    name: str,
    version: int = 1,
    inputs: Mapping[str, Any] | None = None,
    max_attempts: int | None = None,
    retry: RetryPolicy | None = None,
    timeout: float | timedelta | None = None,
    lease_ttl: float | timedelta = DEFAULT_LEASE_TTL,
) -> JobSpec:
    """A :class:`JobSpec` for a Python function or coroutine function.

    The handler's parameters after an optional context parameter (the first one,
    named ``ctx`` or ``context`` or annotated :class:`Context`) are its inputs,
    passed as keywords. Their type hints give the input schema unless
    ``inputs`` (a JSON Schema) is given; a handler with ``**kwargs`` accepts
    fields beyond its parameters.
    """
    signature = inspect.signature(handler)
    params = list(signature.parameters.values())
    hints = get_type_hints(handler)
    takes_context = bool(params) and (
        params[0].name in _CONTEXT_NAMES or hints.get(params[0].name) is Context
    )
    fields = params[1:] if takes_context else params
    for p in fields:
        if p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL):
            raise ValidationError(
                "handler", f"{_qualname(handler)}: parameter {p.name!r} must accept a keyword"
            )
    schema = dict(inputs) if inputs is not None else HintSchema(fields, hints)
    is_async = inspect.iscoroutinefunction(handler)

    def run(ctx: Context, values: dict[str, Any]) -> Any:
        return handler(ctx, **values) if takes_context else handler(**values)

    return JobSpec(
        name=name,
        version=version,
        run=run,
        is_async=is_async,
        input_schema=schema,
        max_attempts=max_attempts,
        retry=retry,
        timeout=None if timeout is None else as_duration(timeout, field="timeout"),
        lease_ttl=as_duration(lease_ttl, field="lease_ttl"),
        source=_qualname(handler),
    )


class HintSchema(Mapping[str, Any]):
    """The JSON Schema of a handler's keyword inputs, derived from its type hints on first use.

    Deriving takes pydantic; a worker, which never checks inputs, never pays for
    it. A hint pydantic cannot describe raises :class:`ValidationError` on
    ``inputs`` when the schema is first needed (the first submit of the job).
    """

    def __init__(self, fields: list[inspect.Parameter], hints: Mapping[str, Any]) -> None:
        self._fields = fields
        self._hints = hints

    @cached_property
    def _schema(self) -> dict[str, Any]:
        return _schema_from_hints(self._fields, self._hints)

    def __getitem__(self, key: str) -> Any:
        return self._schema[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._schema)

    def __len__(self) -> int:
        return len(self._schema)

    def __repr__(self) -> str:
        return f"HintSchema({self._schema!r})"


def _schema_from_hints(fields: list[inspect.Parameter], hints: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON Schema for the keyword inputs of a handler, from its type hints (via pydantic)."""
    import pydantic

    definitions: dict[str, Any] = {}
    open_ended = False
    for p in fields:
        if p.kind is p.VAR_KEYWORD:
            open_ended = True
            continue
        annotation = hints.get(p.name, Any)
        default = ... if p.default is p.empty else p.default
        definitions[p.name] = (annotation, default)
    try:
        model = pydantic.create_model("Inputs", **definitions)
        derived = model.model_json_schema()
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as exc:
        raise ValidationError(
            "inputs", f"cannot derive a JSON Schema from type hints: {exc}"
        ) from exc
    schema: dict[str, Any] = dict(derived)
    schema.pop("title", None)
    schema["additionalProperties"] = open_ended
    return schema


def _qualname(handler: Callable[..., Any]) -> str:
    module = getattr(handler, "__module__", "?")
    return f"{module}:{getattr(handler, '__qualname__', repr(handler))}"


def retry_options(
    retry: RetryPolicy | Mapping[str, float] | None, max_attempts: int | None
) -> tuple[RetryPolicy | None, int | None]:
    """A job's retry policy and attempts from ``@app.job``'s ``retry`` and ``max_attempts``.

    ``retry`` is a :class:`RetryPolicy`, or a mapping with ``base_delay`` and
    ``max_delay`` and optionally ``max_attempts`` (which ``max_attempts`` overrides).
    """
    if retry is None or isinstance(retry, RetryPolicy):
        return retry, max_attempts
    if not isinstance(retry, Mapping):
        raise ValidationError("retry", f"must be a RetryPolicy or a mapping, got {retry!r}")
    fields = dict(retry)
    attempts = fields.pop("max_attempts", None)
    unknown = sorted(set(fields) - {"base_delay", "max_delay"})
    if unknown:
        raise ValidationError(f"retry.{unknown[0]}", "unknown field")
    if max_attempts is None and attempts is not None:
        max_attempts = int(attempts)
    return RetryPolicy(**fields), max_attempts
