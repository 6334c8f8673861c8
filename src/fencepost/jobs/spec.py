"""A job: one version of something a worker can run, and the inputs it accepts.

:class:`JobSpec` is the one shape every job takes, whether it was written as a
Python function (:func:`spec_from_function`) or as a definition file
(:mod:`fencepost.jobs.definitions`). Its ``run`` callable is always called
as ``run(ctx, inputs)``; for coroutine handlers it returns an awaitable.

Inputs are checked against a JSON Schema (draft 2020-12) before anything is
stored; the schema is given, or derived from the handler's type hints. A Python
handler's inputs are bound to its parameters when it runs, converted where its
hints ask for it (:mod:`fencepost.jobs.inputs`): a ``datetime`` parameter receives
a ``datetime``. A job may declare an output schema; its results are checked
against it (:mod:`fencepost.jobs.outputs`).

jsonschema and pydantic are imported only when a schema is checked or derived,
or a rich type converted: a worker process running jobs whose hints are all
JSON-native (:mod:`fencepost.jobs.hints`) and that declare no output never needs them.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_type_hints

from fencepost.domain import payloads
from fencepost.domain.catalogue import (
    InputValidator,
    check_inputs,
    check_schema,
    field_path,
    input_validator,
)
from fencepost.domain.checks import require_int, require_name, require_queue
from fencepost.domain.durations import as_duration
from fencepost.domain.errors import PermanentFailure, ValidationError
from fencepost.domain.limits import Limit, new_limit, scope_of
from fencepost.domain.models import JSON
from fencepost.domain.retry import RetryPolicy
from fencepost.domain.submission import PRIORITY_RANGE
from fencepost.jobs.context import Context
from fencepost.jobs.hints import DerivedSchema
from fencepost.jobs.inputs import Parameters
from fencepost.jobs.outputs import OutputType, as_json

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
    output_schema: Mapping[str, Any] | None = None  #: None: any JSON result
    max_attempts: int | None = None  #: None: the store's default
    retry: RetryPolicy | None = None  #: None: the store's policy
    timeout: timedelta | None = None  #: how long one attempt may run; None: no limit
    lease_ttl: timedelta = DEFAULT_LEASE_TTL
    priority: int | None = None  #: what its executions get when a submit names none (else 0)
    queue: str | None = None  #: where its executions wait when a submit names none
    source: str = ""  #: where it was defined ("module:function" or a file path)
    description: str = ""  #: what the job does, for the catalogue and its readers
    #: A Python handler's keyword inputs, which :meth:`check_inputs` binds as a run
    #: will (None: ``run`` takes the inputs as they are).
    parameters: Parameters | None = None
    #: The limit declared with the job (scope ``job:NAME``; see :func:`declared_limit`),
    #: which a worker publishing it declares to the store; None: none. It is not part
    #: of the catalogue entry: an operator may change a job's limit at run time.
    limit: Limit | None = None

    def __post_init__(self) -> None:
        require_name(self.name, "name")
        require_int(self.version, "version", low=1)
        if self.max_attempts is not None:
            require_int(self.max_attempts, "max_attempts", low=1)
        if self.timeout is not None:
            object.__setattr__(self, "timeout", as_duration(self.timeout, field="timeout"))
        object.__setattr__(self, "lease_ttl", as_duration(self.lease_ttl, field="lease_ttl"))
        if self.priority is not None:
            require_int(self.priority, "priority", low=PRIORITY_RANGE[0], high=PRIORITY_RANGE[1])
        if self.queue is not None:
            require_queue(self.queue)
        if self.limit is not None and (
            not isinstance(self.limit, Limit) or self.limit.scope != scope_of("job", self.name)
        ):
            raise ValidationError(
                "limit", f"must be a Limit of scope 'job:{self.name}', got {self.limit!r}"
            )
        # A schema derived from type hints is valid by construction, and checked
        # (derived) only when first used; a given one is checked here, at once.
        if not isinstance(self.input_schema, HintSchema) and self.input_schema != _ANY_OBJECT:
            check_schema(self.input_schema, "inputs")
        if self.output_schema is not None and not isinstance(self.output_schema, OutputType):
            if not isinstance(self.output_schema, Mapping):
                raise ValidationError(
                    "output", f"must be a JSON Schema mapping or a type, got {self.output_schema!r}"
                )
            payloads.encode(
                dict(self.output_schema), field="output", limit=payloads.DEFAULT_MAX_PAYLOAD_BYTES
            )
            check_schema(self.output_schema, "output")

    @property
    def key(self) -> tuple[str, int]:
        """``(name, version)``: what an execution pins."""
        return (self.name, self.version)

    @cached_property
    def _validator(self) -> InputValidator:
        return input_validator(self.input_schema)

    @cached_property
    def _output_validator(self) -> jsonschema.Draft202012Validator:
        import jsonschema

        return jsonschema.Draft202012Validator(dict(self.output_schema or {}))

    @property
    def binds_its_schema(self) -> bool:
        """Whether :attr:`input_schema` is derived from the handler's hints, so that
        binding the inputs (as every run does) checks everything the schema would."""
        return isinstance(self.input_schema, HintSchema) and self.parameters is not None

    def check_inputs(self, inputs: JSON) -> dict[str, Any]:
        """Return ``inputs`` (None means ``{}``) if they match the schema, else raise.

        The :class:`ValidationError` names the offending field as a path from
        ``inputs`` (``inputs.day``, ``inputs.items[2].sku``) and says why: the same
        check, and the same names, as the store's catalogue applies
        (:func:`fencepost.domain.catalogue.check_inputs`). A Python handler's
        parameters are bound too, as a run will bind them: a value its hint cannot
        convert (``{"at": "not a date"}`` for a ``datetime``), or a missing or unknown
        input, is refused here rather than failing every attempt on a worker. The
        inputs are returned as given (JSON), not converted.
        """
        value = check_inputs(self._validator, inputs)
        if self.parameters is not None:
            self.parameters.bind(value)
        return value

    def check_result(self, result: Any) -> JSON:
        """``result`` as it is to be stored, checked against :attr:`output_schema`.

        A pydantic model or dataclass instance is dumped to JSON first; with an
        output *type*, the result is validated (and converted) by it. Raises
        :class:`ValidationError` naming the field (``result.total``); a worker
        then fails the execution with ``result_invalid``, without a retry.
        """
        if isinstance(self.output_schema, OutputType):
            return self.output_schema.convert(result)
        value = as_json(result)
        if self.output_schema is None:
            return value
        import jsonschema

        try:
            error = jsonschema.exceptions.best_match(self._output_validator.iter_errors(value))
        except Exception as exc:  # a value jsonschema cannot walk is no JSON
            raise ValidationError("result", f"is not JSON: {exc}") from None
        if error is not None:
            raise ValidationError(field_path(error, "result"), error.message)
        return value


def spec_from_function(
    handler: Callable[..., Any],
    *,
    name: str,
    version: int = 1,
    inputs: Mapping[str, Any] | None = None,
    output: Any = None,
    max_attempts: int | None = None,
    retry: RetryPolicy | None = None,
    timeout: float | timedelta | None = None,
    lease_ttl: float | timedelta = DEFAULT_LEASE_TTL,
    priority: int | None = None,
    queue: str | None = None,
    limit: Limit | None = None,
) -> JobSpec:
    """A :class:`JobSpec` for a Python function or coroutine function.

    The handler's parameters after an optional context parameter (the first one,
    named ``ctx`` or ``context`` or annotated :class:`Context`) are its inputs,
    passed as keywords. Their type hints give the input schema unless
    ``inputs`` (a JSON Schema) is given; a handler with ``**kwargs`` accepts
    fields beyond its parameters. Either way the hints convert what the handler
    receives (:mod:`fencepost.jobs.inputs`); inputs that cannot bind (missing,
    unknown, not convertible) fail the run at once, without a retry.

    ``output`` is the result's JSON Schema (a mapping) or a type whose schema is
    derived and through which results are validated and dumped to JSON. The
    handler's return annotation is *not* used unless it is passed as ``output``.
    ``limit`` is the job's declared limit (see :func:`declared_limit`).
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
    parameters = Parameters.of(fields, hints)
    schema = dict(inputs) if inputs is not None else HintSchema(parameters)
    is_async = inspect.iscoroutinefunction(handler)

    def run(ctx: Context, values: dict[str, Any]) -> Any:
        try:
            arguments = parameters.bind(values)
        except ValidationError as exc:  # these inputs can never bind: retrying cannot help
            raise PermanentFailure(str(exc)) from None
        return handler(ctx, **arguments) if takes_context else handler(**arguments)

    return JobSpec(
        name=name,
        version=version,
        run=run,
        is_async=is_async,
        input_schema=schema,
        output_schema=_output_schema(output),
        max_attempts=max_attempts,
        retry=retry,
        timeout=None if timeout is None else as_duration(timeout, field="timeout"),
        lease_ttl=as_duration(lease_ttl, field="lease_ttl"),
        priority=priority,
        queue=queue,
        source=_qualname(handler),
        parameters=parameters,
        limit=limit,
    )


#: The declaration's names for :func:`~fencepost.domain.limits.new_limit`'s fields.
_LIMIT_FIELDS = {"rate": "rate_limit", "burst": "rate_burst", "per_key": "limit_per_key"}


def declared_limit(
    name: str,
    *,
    rate_limit: object = None,
    rate_burst: object = None,
    concurrency: object = None,
    limit_per_key: object = False,
) -> Limit | None:
    """The limit a job declares (``@app.job(rate_limit=..., concurrency=...)`` or the
    same keys in a definition file), or None when it declares neither.

    ``rate_limit`` is a rate (``"50/s"``, ``"3000/min"``, ``"100/h"``) of starts of the
    job's executions, ``rate_burst`` its bucket (default: a tenth of a second's worth,
    at least 1), ``concurrency`` the most leased at once; ``limit_per_key`` gives each
    ``limit_key`` its own allowance. Checked here, at declaration: a bad value raises
    :class:`ValidationError` naming the declaration's field (``rate_limit``,
    ``rate_burst``, ``concurrency``, ``limit_per_key``).
    """
    if not isinstance(limit_per_key, bool):
        raise ValidationError("limit_per_key", f"must be True or False, got {limit_per_key!r}")
    if rate_limit is None and concurrency is None:
        if rate_burst is not None:
            raise ValidationError("rate_burst", "needs a rate_limit: a burst is the rate's bucket")
        if limit_per_key:
            raise ValidationError("limit_per_key", "needs a rate_limit or a concurrency")
        return None
    try:
        return new_limit(
            scope_of("job", require_name(name, "name")),
            rate=rate_limit,
            burst=rate_burst,
            concurrency=concurrency,
            per_key=limit_per_key,
            source="code",
        )
    except ValidationError as exc:
        raise ValidationError(_LIMIT_FIELDS.get(exc.field, exc.field), exc.message) from None


def _output_schema(output: Any) -> Mapping[str, Any] | None:
    """``output=`` as a schema: a mapping is a JSON Schema, anything else a type."""
    if output is None:
        return None
    if isinstance(output, Mapping):
        return dict(output)
    return OutputType(output)


class HintSchema(DerivedSchema):
    """The JSON Schema of a handler's keyword inputs, derived from its type hints on first use.

    JSON-native hints are derived without pydantic (a worker publishing its jobs
    does not load it for them); richer ones take pydantic's adapters. A hint
    pydantic cannot describe raises :class:`ValidationError` on ``inputs`` when
    the schema is first needed (the first submit of the job).
    """

    def __init__(self, parameters: Parameters) -> None:
        self._parameters = parameters

    def _derive(self) -> dict[str, Any]:
        return self._parameters.schema()


def _qualname(handler: Callable[..., Any]) -> str:
    module = getattr(handler, "__module__", "?")
    if module == "__main__":
        module = _main_module_name()
    return f"{module}:{getattr(handler, '__qualname__', repr(handler))}"


def _main_module_name() -> str:
    """The name a script run as ``__main__`` has when imported: ``tasks`` for ``python tasks.py``.

    A job defined in a script is the same job whether the script runs it
    (``python tasks.py``) or a command imports it (``fencepost worker tasks:app``), so
    both must record the same source in the catalogue, or the second process would
    find the job published from elsewhere and refuse to start.
    """
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and spec.name != "__main__":
        return str(spec.name)  # python -m package.module
    file = getattr(main, "__file__", None)
    return Path(file).stem if file else "__main__"


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
