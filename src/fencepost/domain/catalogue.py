"""The job catalogue: what each published job version accepts, and the defaults it brings.

Workers publish a :class:`JobEntry` for every job version they run; every submitter
(the store's verbs, hence the CLI, the HTTP service, the client and schedules) then
checks inputs against the entry's schema and fills in the job's defaults the same way.

An entry is immutable once published. Its :attr:`JobEntry.digest` is the SHA-256 of
the canonical JSON of its definition (everything but ``digest`` and
``published_at``), so the same definition loaded on two hosts has the same digest,
and a different definition under a published name and version is told apart.

Pure: no I/O. jsonschema and jsonschema-rs are imported only inside
:class:`InputValidator` and :func:`check_schema`, when a schema is first used.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from fencepost.domain import payloads
from fencepost.domain.checks import INT32_MAX, require_int, require_name, require_text
from fencepost.domain.durations import as_duration
from fencepost.domain.errors import ValidationError
from fencepost.domain.models import JSON
from fencepost.domain.retry import RetryPolicy

if TYPE_CHECKING:
    import jsonschema

    from fencepost.domain.nodes import Node

#: What a store does with a submit naming a job no one published (its ``unknown_jobs``),
#: whatever the catalogue holds: ``allow`` stores it with the store's defaults, flagged
#: for the job's published defaults to fill in at publication (the default), ``refuse``
#: refuses it naming ``job``.
UNKNOWN_JOBS = ("allow", "refuse")

#: Former values of ``unknown_jobs`` and what they mean now: ``auto`` (allowed while the
#: catalogue was empty, refused once it had entries) made a submit's fate depend on
#: whether a worker had started yet.
_DEPRECATED_UNKNOWN_JOBS = {"auto": "allow"}


def unknown_jobs_policy(value: object, field: str = "unknown_jobs") -> str:
    """``value`` as a policy of :data:`UNKNOWN_JOBS`; a :class:`ValidationError` on ``field``.

    The former ``auto`` is read as ``allow``, with a :class:`DeprecationWarning`.
    """
    if isinstance(value, str) and value in _DEPRECATED_UNKNOWN_JOBS:
        import warnings

        now = _DEPRECATED_UNKNOWN_JOBS[value]
        warnings.warn(
            f"unknown_jobs={value!r} is deprecated and means {now!r}: an unknown job is "
            "accepted with the store's defaults until a worker publishes it",
            DeprecationWarning,
            stacklevel=3,
        )
        return now
    if value not in UNKNOWN_JOBS:
        raise ValidationError(field, f"must be {' or '.join(UNKNOWN_JOBS)}, got {value!r}")
    return str(value)


#: The kinds of place a job is defined in.
SOURCE_KINDS = ("code", "file")

#: The largest encoded definition (schemas, defaults, description) an entry may have.
MAX_DEFINITION_BYTES = 1024 * 1024
#: The longest description, in characters.
MAX_DESCRIPTION = 8_192
#: The longest ``source.where`` (a module path or a file path), in characters.
MAX_WHERE = 4_096

#: The schema of a job that names none: any JSON object.
ANY_OBJECT: Mapping[str, Any] = {"type": "object"}

_DIGEST = "sha256:"
_canonical = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), sort_keys=True
)


@dataclass(frozen=True, kw_only=True, slots=True)
class JobDefaults:
    """What a job's executions get when their submitter leaves it out (each optional)."""

    max_attempts: int | None = None
    retry_base_delay: float | None = None  #: seconds: the backoff's first cap
    retry_max_delay: float | None = None  #: seconds: no retry waits longer
    timeout: timedelta | None = None  #: how long one attempt may run
    lease_ttl: timedelta | None = None  #: the lease a worker takes
    priority: int | None = None
    queue: str | None = None

    def __post_init__(self) -> None:
        if self.max_attempts is not None:
            require_int(self.max_attempts, "defaults.max_attempts", low=1, high=INT32_MAX)
        if self.priority is not None:
            require_int(self.priority, "defaults.priority", low=-INT32_MAX - 1, high=INT32_MAX)
        for name in ("timeout", "lease_ttl"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, as_duration(value, field=f"defaults.{name}"))
        for name in ("retry_base_delay", "retry_max_delay"):
            value = getattr(self, name)
            if value is not None:
                seconds = as_duration(value, field=f"defaults.{name}").total_seconds()
                object.__setattr__(self, name, seconds)
        if self.retry_max_delay is not None and self.retry_base_delay is None:
            raise ValidationError("defaults.retry_base_delay", "is required with retry_max_delay")
        if self.retry_base_delay is not None:
            try:
                self.retry_policy()
            except ValidationError as exc:
                raise ValidationError(f"defaults.retry_{exc.field}", exc.message) from None
        if self.queue is not None:
            require_name(self.queue, "defaults.queue")

    def retry_policy(self) -> RetryPolicy | None:
        """The job's backoff, or None when it names none (the store's applies)."""
        if self.retry_base_delay is None:
            return None
        if self.retry_max_delay is None:
            return RetryPolicy(base_delay=self.retry_base_delay)
        return RetryPolicy(base_delay=self.retry_base_delay, max_delay=self.retry_max_delay)

    def to_json(self) -> dict[str, Any]:
        """The defaults as JSON (durations in seconds), leaving out what is not set."""
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, timedelta):
                value = value.total_seconds()
            if value is not None:
                out[name] = value
        return out

    @classmethod
    def from_json(cls, value: object) -> JobDefaults:
        """Defaults from :meth:`to_json`'s shape; unknown or malformed fields are refused."""
        if value is None:
            return cls()
        if not isinstance(value, Mapping):
            raise ValidationError("defaults", f"must be an object, got {_kind(value)}")
        unknown = sorted(str(k) for k in value if k not in cls.__dataclass_fields__)
        if unknown:
            raise ValidationError(f"defaults.{unknown[0]}", "is not a job default")
        return cls(**{str(k): v for k, v in value.items()})


@dataclass(frozen=True, kw_only=True, slots=True)
class JobSource:
    """Where a job is defined: ``code`` (``module:function``) or ``file`` (a path)."""

    kind: str = "code"
    where: str = ""

    def __post_init__(self) -> None:
        if self.kind not in SOURCE_KINDS:
            raise ValidationError(
                "source.kind", f"must be one of {', '.join(SOURCE_KINDS)}, got {self.kind!r}"
            )
        require_text(self.where, "source.where", max_len=MAX_WHERE)
        if len(self.where) > MAX_WHERE:
            raise ValidationError("source.where", f"must be at most {MAX_WHERE} characters")


@dataclass(frozen=True, kw_only=True)
class JobEntry:
    """One published version of one job, as the store's catalogue holds it.

    Build one with :func:`job_entry` (which computes ``digest``); a store checks
    every entry it is given again (:func:`check_entry`).
    """

    name: str
    version: int
    input_schema: Mapping[str, Any] = field(default_factory=lambda: dict(ANY_OBJECT))
    output_schema: Mapping[str, Any] | None = None
    defaults: JobDefaults = field(default_factory=JobDefaults)
    description: str = ""
    source: JobSource = field(default_factory=JobSource)
    digest: str = ""  #: ``sha256:<hex>`` of :meth:`definition`
    published_at: datetime | None = None  #: when the store first stored it

    @property
    def key(self) -> tuple[str, int]:
        """``(name, version)``: what identifies the entry."""
        return (self.name, self.version)

    def definition(self) -> dict[str, Any]:
        """Everything the digest covers, as JSON."""
        return {
            "name": self.name,
            "version": self.version,
            "input_schema": dict(self.input_schema),
            "output_schema": None if self.output_schema is None else dict(self.output_schema),
            "defaults": self.defaults.to_json(),
            "description": self.description,
            "source": {"kind": self.source.kind, "where": self.source.where},
        }


def job_entry(
    name: str,
    version: int,
    *,
    input_schema: Mapping[str, Any] | None = None,
    output_schema: Mapping[str, Any] | None = None,
    defaults: JobDefaults | None = None,
    description: str = "",
    source: JobSource | None = None,
    check_schemas: bool = True,
) -> JobEntry:
    """A checked entry with its digest computed (``published_at`` is the store's to set).

    ``check_schemas=False`` skips checking the schemas against the JSON Schema
    meta-schema (which imports jsonschema): for schemas already checked, such as a
    :class:`~fencepost.jobs.spec.JobSpec`'s.
    """
    entry = JobEntry(
        name=name,
        version=version,
        input_schema=dict(ANY_OBJECT) if input_schema is None else input_schema,
        output_schema=output_schema,
        defaults=JobDefaults() if defaults is None else defaults,
        description=description,
        source=JobSource() if source is None else source,
    )
    return check_entry(entry, check_schemas=check_schemas, computing=True)


def check_entry(entry: object, *, check_schemas: bool = False, computing: bool = False) -> JobEntry:
    """``entry`` validated, its schemas as plain JSON; a :class:`ValidationError` otherwise.

    Refuses what no backend could hold or read back (U+0000, lone surrogates, nesting
    past :data:`~fencepost.domain.payloads.MAX_DEPTH`, a definition past
    :data:`MAX_DEFINITION_BYTES`) and a ``digest`` that is not the definition's
    (unless ``computing`` it). With ``check_schemas``, each schema must be a valid
    JSON Schema (draft 2020-12).
    """
    if not isinstance(entry, JobEntry):
        raise ValidationError("entry", f"must be a JobEntry, got {_kind(entry)}")
    require_name(entry.name, "name")
    require_int(entry.version, "version", low=1, high=INT32_MAX)
    if not isinstance(entry.defaults, JobDefaults):
        raise ValidationError("defaults", f"must be JobDefaults, got {_kind(entry.defaults)}")
    if not isinstance(entry.source, JobSource):
        raise ValidationError("source", f"must be a JobSource, got {_kind(entry.source)}")
    description = require_text(entry.description, "description", max_len=MAX_DESCRIPTION + 1)
    if len(description) > MAX_DESCRIPTION:
        raise ValidationError("description", f"must be at most {MAX_DESCRIPTION} characters")
    schemas = {
        "input_schema": _schema(entry.input_schema, "input_schema"),
        "output_schema": None
        if entry.output_schema is None
        else _schema(entry.output_schema, "output_schema"),
    }
    if check_schemas:
        for name, schema in schemas.items():
            if schema is not None:
                check_schema(schema, name)
    checked = JobEntry(
        name=entry.name,
        version=entry.version,
        input_schema=schemas["input_schema"] or {},
        output_schema=schemas["output_schema"],
        defaults=entry.defaults,
        description=description,
        source=entry.source,
        published_at=entry.published_at,
    )
    payloads.encode(checked.definition(), field="definition", limit=MAX_DEFINITION_BYTES)
    digest = _DIGEST + hashlib.sha256(definition_json(checked).encode()).hexdigest()
    if not computing and entry.digest != digest:
        raise ValidationError(
            "digest", f"is not the digest of the definition (got {entry.digest!r}, is {digest})"
        )
    object.__setattr__(checked, "digest", digest)
    return checked


def definition_json(entry: JobEntry) -> str:
    """The canonical JSON text of ``entry``'s definition: sorted keys, no spaces.

    What a digest hashes and a store keeps.
    """
    return _canonical.encode(entry.definition())


def entry_from_definition(
    definition: object, *, digest: str | None = None, published_at: datetime | None = None
) -> JobEntry:
    """An entry from the JSON of :meth:`JobEntry.definition` (a store's row, a request body).

    With ``digest`` it must match (a row read back); without, it is computed.
    """
    if isinstance(definition, str):
        definition = json.loads(definition)
    if not isinstance(definition, Mapping):
        raise ValidationError("definition", f"must be an object, got {_kind(definition)}")
    known = {
        "name",
        "version",
        "input_schema",
        "output_schema",
        "defaults",
        "description",
        "source",
    }
    unknown = sorted(str(k) for k in definition if k not in known)
    if unknown:
        raise ValidationError(unknown[0], "is not a field of a job definition")
    source = definition.get("source") or {}
    if not isinstance(source, Mapping):
        raise ValidationError("source", f"must be an object, got {_kind(source)}")
    extra = sorted(str(k) for k in source if k not in ("kind", "where"))
    if extra:
        raise ValidationError(f"source.{extra[0]}", "is not a field of a source")
    entry = JobEntry(
        name=definition.get("name"),  # type: ignore[arg-type]  # checked below
        version=definition.get("version"),  # type: ignore[arg-type]
        input_schema=definition.get("input_schema", dict(ANY_OBJECT)),
        output_schema=definition.get("output_schema"),
        defaults=JobDefaults.from_json(definition.get("defaults")),
        description=definition.get("description", ""),
        source=JobSource(kind=source.get("kind", "code"), where=source.get("where", "")),
        digest=digest or "",
        published_at=published_at,
    )
    return check_entry(entry, computing=digest is None)


def _schema(value: object, name: str) -> dict[str, Any]:
    """A schema as stored: a JSON object, round-tripped through JSON."""
    if not isinstance(value, Mapping):
        raise ValidationError(name, f"must be a JSON Schema object, got {_kind(value)}")
    text = payloads.encode(dict(value), field=name, limit=MAX_DEFINITION_BYTES)
    decoded: dict[str, Any] = json.loads(text)
    return decoded


def check_schema(schema: Mapping[str, Any], name: str) -> None:
    """Refuse ``schema`` unless it is a valid JSON Schema (draft 2020-12), naming ``name``."""
    import jsonschema

    try:
        jsonschema.Draft202012Validator.check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        raise ValidationError(name, f"is not a valid JSON Schema: {exc.message}") from None
    except RecursionError:
        raise ValidationError(name, "is nested too deeply to check") from None


# -- checking inputs ---------------------------------------------------------------------


class InputValidator:
    """One input schema, compiled for checking many submits against it.

    python-jsonschema is the reference: what it accepts is accepted, what it refuses is
    refused with its message and the field it names. It costs about 7 µs for a small
    object, which a ``submit_many`` of small items pays per item (a third of the batch's
    time), so a compiled validator (jsonschema-rs, about 0.1 µs) answers first, and
    only for "valid": whatever it refuses, or cannot take (an integer past 64 bits, a
    schema it cannot compile), goes to the reference, which decides. The two may differ
    at the edges (``$`` before a trailing newline in a ``pattern``, ``format``); the
    compiled one is trusted only where it is the stricter
    (``tests/unit/test_input_validator.py`` checks it never accepts what the reference
    refuses).
    """

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = dict(schema)
        self.fast: Any = None
        try:
            import jsonschema_rs

            # The checked formats by the reference's own checks; any other format it
            # knows is stricter than the reference (which leaves it unchecked).
            self.fast = jsonschema_rs.validator_for(
                self.schema, validate_formats=True, formats=format_checks()
            )
        except Exception:  # a schema it cannot take: the reference alone
            self.fast = None

    @cached_property
    def reference(self) -> jsonschema.Draft202012Validator:
        """python-jsonschema's validator: the reference, and the one that explains.

        It checks the formats a handler's hints derive (:data:`CHECKED_FORMATS`): a
        ``datetime`` parameter's ``"not a date"`` is refused at submit, on every path,
        rather than at the run; other formats are annotations, as JSON Schema says.
        """
        import jsonschema

        return jsonschema.Draft202012Validator(self.schema, format_checker=_format_checker())

    def accepts_fast(self, value: JSON) -> bool:
        """Whether the compiled validator accepts ``value`` (False: ask the reference)."""
        if self.fast is None:
            return False
        try:
            return bool(self.fast.is_valid(value))
        except Exception:  # a value it cannot take: the reference decides
            return False


#: The ``format`` values an input schema's check enforces: those a handler's type hints
#: derive (``datetime``, ``date``, ``time``, ``UUID``), each as Python reads its values.
CHECKED_FORMATS = ("date-time", "date", "time", "uuid")


def format_checks() -> dict[str, Any]:
    """``{format: check}`` for :data:`CHECKED_FORMATS`: ``check(value)`` is False for a
    string that is not of the format (anything else passes: ``type`` decides it)."""
    import datetime as dt
    import uuid

    readers: dict[str, Any] = {
        "date-time": lambda v: dt.datetime.fromisoformat(v.replace("Z", "+00:00")),
        "date": dt.date.fromisoformat,
        "time": lambda v: dt.time.fromisoformat(v.replace("Z", "+00:00")),
        "uuid": uuid.UUID,
    }

    def checking(read: Any) -> Any:
        def check(value: object) -> bool:
            if not isinstance(value, str):
                return True
            try:
                read(value)
            except ValueError:
                return False
            return True

        return check

    return {name: checking(readers[name]) for name in CHECKED_FORMATS}


def _format_checker() -> jsonschema.FormatChecker:
    """A jsonschema checker of :data:`CHECKED_FORMATS` and of nothing else."""
    import jsonschema

    checker = jsonschema.FormatChecker(formats=())
    for name, check in format_checks().items():
        checker.checks(name)(check)
    return checker


def input_validator(schema: Mapping[str, Any]) -> InputValidator:
    """A validator for ``schema`` (draft 2020-12); build it once per schema and keep it."""
    return InputValidator(schema)


def check_inputs(validator: InputValidator, inputs: JSON) -> dict[str, Any]:
    """Return ``inputs`` (None means ``{}``) if ``validator`` accepts them, else raise.

    The :class:`ValidationError` names the offending field as a path from ``inputs``
    (``inputs.day``, ``inputs.items[2].sku``) and says why. Inputs must be a JSON
    object even where a schema allows more: handlers take them as keywords.
    """
    value = payloads.as_inputs(inputs)  # whatever the schema allows: the store's own rule
    if validator.accepts_fast(value):
        return value
    import jsonschema

    try:
        error = jsonschema.exceptions.best_match(validator.reference.iter_errors(value))
    except RecursionError:
        raise ValidationError("inputs", "is nested too deeply to check") from None
    except jsonschema.exceptions.SchemaError as exc:  # an entry built without check_schemas
        raise ValidationError("inputs", f"the job's schema is invalid: {exc.message}") from None
    if error is not None:
        raise ValidationError(field_path(error), error.message)
    return value


def field_path(error: jsonschema.ValidationError, root: str = "inputs") -> str:
    """The path of the value a schema error is about: ``inputs.a.b[2]`` (or ``result...``).

    A missing required field is named itself (``inputs.day``), and so is the first
    field an ``additionalProperties: false`` refuses, rather than their parent.
    """
    path = root
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    if error.validator == "required" and isinstance(error.instance, dict):
        required: list[str] = list(error.validator_value)  # type: ignore[arg-type]
        missing = [f for f in required if f not in error.instance]
        if missing:
            path += f".{missing[0]}"
    elif (
        error.validator == "additionalProperties"
        and isinstance(error.instance, dict)
        and isinstance(error.schema, dict)
    ):
        allowed = set(error.schema.get("properties", {}))
        extra = sorted(str(k) for k in error.instance if k not in allowed)
        if extra:
            path += f".{extra[0]}"
    return path


# -- the catalogue as a submitter sees it ------------------------------------------------


class Catalogue:
    """The entries of a store's catalogue at one moment, indexed for submits.

    Immutable; a store replaces its whole :class:`Catalogue` when it reads the
    catalogue again.
    """

    def __init__(self, entries: Iterable[JobEntry] = ()) -> None:
        self.entries: dict[tuple[str, int], JobEntry] = {e.key: e for e in entries}
        self.latest: dict[str, JobEntry] = {}
        for entry in sorted(self.entries.values(), key=lambda e: e.key):
            self.latest[entry.name] = entry

    def __bool__(self) -> bool:
        return bool(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def lookup(self, job: str, version: int | None, unknown_jobs: str) -> JobEntry | None:
        """The entry a submit of ``job`` at ``version`` (None: the latest) runs, or None.

        None when ``job`` was never published and ``unknown_jobs`` is ``allow``. Raises
        :class:`ValidationError` on ``job`` (refused, listing the known jobs) or on
        ``version`` (unknown, listing the job's versions).
        """
        latest = self.latest.get(job)
        if latest is None:
            if unknown_jobs == "allow":
                return None
            known = ", ".join(sorted(self.latest)) or "none"
            raise ValidationError(
                "job", f"unknown job {job!r}: no worker published it (known: {known})"
            )
        if version is None:
            return latest
        entry = self.entries.get((job, version))
        if entry is None:
            versions = ", ".join(str(v) for (n, v) in sorted(self.entries) if n == job)
            raise ValidationError(
                "version", f"job {job!r} has no version {version} (known: {versions})"
            )
        return entry


def served_by(nodes: Iterable[Node]) -> dict[tuple[str, int], list[str]]:
    """Which nodes serve each ``(job, version)``, from their registrations (ids sorted)."""
    out: dict[tuple[str, int], list[str]] = {}
    for node in sorted(nodes, key=lambda n: n.id):
        for key in node.jobs:
            out.setdefault(key, []).append(node.id)
    return out


def _kind(value: object) -> str:
    return type(value).__name__
