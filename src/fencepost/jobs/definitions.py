"""Job definition files: a job described in YAML or JSON instead of Python.

One file defines one version of one job::

    name: nightly-report            # required
    version: 3                      # optional, an integer >= 1 (default 1, as @app.job)
    description: Build the report   # optional
    inputs:                         # optional JSON Schema (draft 2020-12); default {type: object}
      {type: object, properties: {day: {type: string}}, required: [day]}
    output:                         # optional JSON Schema of the result (default: any JSON)
      {type: object, properties: {rows: {type: integer}}, required: [rows]}
    retry: {max_attempts: 5, base_delay: 1, max_delay: 300}   # optional, each key optional
    timeout: 10m                    # optional: how long one attempt may run
    lease_ttl: 30                   # optional: the lease a worker takes (default 30 s)
    priority: 5                     # optional: its executions' priority when a submit names none
    queue: reports                  # optional: the queue its executions wait in (else default)
    rate_limit: 50/s                # optional: the job's limit (as @app.job): starts per period,
    rate_burst: 5                   #   its bucket,
    concurrency: 10                 #   the most leased at once,
    limit_per_key: false            #   each limit_key its own allowance
    run:                            # required: exactly one of
      command: ["python", "-m", "reports", "--day", "{inputs.day}"]
      # python: "reports.jobs:nightly"
      # http: {method: POST, url: "https://…", json: {…}, headers: {…}, timeout: 10}

Durations (``timeout``, ``lease_ttl``, ``retry.base_delay``, ``retry.max_delay``,
``run.http.timeout``) are seconds, or strings of number-unit pairs: ``"500ms"``,
``"30s"``, ``"10m"``, ``"1h"``, ``"1d"``, ``"1h30m"``. ``retry.max_delay``
defaults to the larger of 300 s and ``base_delay``.

Command arguments, the URL, header values and strings in the JSON body are
templates (:mod:`fencepost.jobs.runners.templates`): ``{inputs.<name>}``,
``{execution_id}``, ``{slot}``, ``{attempt}``, ``{epoch}``; ``{{`` and ``}}``
are literal braces (so code passed with ``python -c`` must double its braces,
or better, read its values from ``sys.argv``).

``python: "module.path:attribute"`` is imported when the file is loaded: first
from the normal import path, and only when that module is not found there,
from the directory that holds the definition file (put on ``sys.path`` for
that one import, so sibling modules it imports at top level resolve too; loading
is meant for start-up, not for threads racing on ``sys.path``). The module then
stays in ``sys.modules`` under its plain name, so two directories must not both
hold a ``jobs.py``. The callable becomes a job as with
:func:`~fencepost.jobs.spec.spec_from_function`; its inputs schema is the
file's ``inputs`` if given, else derived from its type hints, and its hints
convert what it receives either way. A result that does not match ``output``
fails the execution with ``result_invalid`` (not retried).

Every refusal is a :class:`DefinitionError` naming the file, the field (a dotted
path: ``retry.max_delay``, ``run.command[3]``) and the reason. Keys outside the
fixed structure are refused (a ``timout`` is a typo, not an extension), and so
are keys that appear twice in one mapping.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import yaml

from fencepost.domain import payloads
from fencepost.domain.checks import require_int, require_name, require_queue, suggest
from fencepost.domain.durations import parse_duration
from fencepost.domain.errors import DefinitionError, ValidationError
from fencepost.domain.retry import RetryPolicy
from fencepost.domain.submission import PRIORITY_RANGE
from fencepost.jobs.runners import templates
from fencepost.jobs.runners.command import CommandRunner
from fencepost.jobs.runners.http import DEFAULT_TIMEOUT, HttpRunner
from fencepost.jobs.spec import (
    DEFAULT_LEASE_TTL,
    JobSpec,
    Runner,
    declared_limit,
    spec_from_function,
)

#: The file name suffixes :func:`load_definitions` picks up (compared case-insensitively).
SUFFIXES = (".yaml", ".yml", ".json")

_TOP_KEYS = (
    "name",
    "version",
    "description",
    "inputs",
    "output",
    "retry",
    "timeout",
    "lease_ttl",
    "priority",
    "queue",
    "rate_limit",
    "rate_burst",
    "concurrency",
    "limit_per_key",
    "run",
)
_RETRY_KEYS = ("max_attempts", "base_delay", "max_delay")
_RUN_KINDS = ("command", "python", "http")
_HTTP_KEYS = ("method", "url", "json", "headers", "timeout")

_DEFAULT_MAX_DELAY = RetryPolicy().max_delay

_IDENTIFIER = r"[^\W\d]\w*"
_PYTHON_TARGET = re.compile(
    rf"({_IDENTIFIER}(?:\.{_IDENTIFIER})*):({_IDENTIFIER}(?:\.{_IDENTIFIER})*)"
)


def load_definitions(directory: str | os.PathLike[str]) -> list[JobSpec]:
    """Every job defined by the ``*.yaml``, ``*.yml`` and ``*.json`` files directly in
    ``directory``, in file name order (names starting with ``.`` are skipped).

    Raises :class:`DefinitionError` for a missing directory, one without
    definition files, any refused file, and two files defining the same name
    and version.
    """
    folder = Path(directory)
    if not folder.is_dir():
        reason = "is not a directory" if folder.exists() else "does not exist"
        raise DefinitionError(folder, "directory", reason)
    files = sorted((p for p in folder.iterdir() if _is_definition_file(p)), key=lambda p: p.name)
    if not files:
        patterns = ", ".join(f"*{suffix}" for suffix in SUFFIXES)
        raise DefinitionError(folder, "directory", f"holds no definition files ({patterns})")
    specs: list[JobSpec] = []
    first_file: dict[tuple[str, int], Path] = {}
    for file in files:
        spec = load_definition(file)
        first = first_file.setdefault(spec.key, file)
        if first != file:
            raise DefinitionError(
                file,
                "version",
                f"job {spec.name!r} version {spec.version} is already defined in {first}",
            )
        specs.append(spec)
    return specs


def load_definition(path: str | os.PathLike[str]) -> JobSpec:
    """The job defined by one YAML (``.yaml``, ``.yml``) or JSON (``.json``) file.

    Raises :class:`DefinitionError` naming the file, the field and the reason.
    """
    file = Path(path)
    try:
        return _build(file, _read(file))
    except DefinitionError:
        raise
    except ValidationError as exc:
        raise DefinitionError(file, exc.field, exc.message) from exc


# -- reading -------------------------------------------------------------------------


def _is_definition_file(path: Path) -> bool:
    return path.suffix.lower() in SUFFIXES and not path.name.startswith(".") and path.is_file()


def _read(file: Path) -> Any:
    suffix = file.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValidationError("file", f"must end in {', '.join(SUFFIXES)}")
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValidationError("file", "is not UTF-8 text") from None
    except OSError as exc:
        raise ValidationError("file", f"cannot be read: {exc.strerror or exc}") from None
    return _parse_json(text) if suffix == ".json" else _parse_yaml(text)


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_json_object)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise ValidationError("document", f"is not valid JSON: {exc.msg} ({where})") from None


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    mapping: dict[str, Any] = {}
    for key, value in pairs:
        if key in mapping:
            raise ValidationError("document", f"key {key!r} appears twice in one object")
        mapping[key] = value
    return mapping


def _parse_yaml(text: str) -> Any:
    try:
        # safe_load keeps the last of two equal keys without a word; walk the node
        # tree first (composing builds no Python objects) to refuse them instead.
        _refuse_duplicate_keys(yaml.compose(text, Loader=yaml.SafeLoader), "", set())
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        reason = exc.problem or exc.context or "syntax error"
        raise ValidationError("document", f"is not valid YAML: {reason}{where}") from None
    except yaml.YAMLError as exc:
        raise ValidationError("document", f"is not valid YAML: {exc}") from None


def _refuse_duplicate_keys(node: yaml.Node | None, path: str, seen: set[int]) -> None:
    if node is None or id(node) in seen:  # aliases may share (or even contain) a node
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        lines: dict[str, int] = {}  # key -> the line it first appeared on
        for key, value in node.value:
            name = str(key.value) if isinstance(key, yaml.ScalarNode) else "?"
            field = f"{path}.{name}" if path else name
            if isinstance(key, yaml.ScalarNode):
                line = key.start_mark.line + 1
                if name in lines:
                    raise ValidationError(field, f"appears twice (lines {lines[name]} and {line})")
                lines[name] = line
            _refuse_duplicate_keys(value, field, seen)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _refuse_duplicate_keys(item, f"{path}[{index}]", seen)


# -- building the spec ---------------------------------------------------------------


def _build(file: Path, document: Any) -> JobSpec:
    doc = _mapping(document, "document")
    _refuse_unknown_keys(doc, _TOP_KEYS, "")
    name = require_name(_required(doc, "name", ""), "name")
    # Optional, as for @app.job: a file without one defines version 1.
    version = require_int(doc.get("version", 1), "version", low=1)
    if "description" in doc and not isinstance(doc["description"], str):
        raise ValidationError("description", f"must be a string, got {doc['description']!r}")
    schema = _json_schema(doc["inputs"], "inputs") if "inputs" in doc else None
    output = _json_schema(doc["output"], "output") if "output" in doc else None
    max_attempts, retry = _retry(doc["retry"]) if "retry" in doc else (None, None)
    timeout = parse_duration(doc["timeout"], field="timeout") if "timeout" in doc else None
    lease_ttl = (
        parse_duration(doc["lease_ttl"], field="lease_ttl")
        if "lease_ttl" in doc
        else DEFAULT_LEASE_TTL
    )
    priority = doc.get("priority")
    if priority is not None:
        require_int(priority, "priority", low=PRIORITY_RANGE[0], high=PRIORITY_RANGE[1])
    queue = None if doc.get("queue") is None else require_queue(doc["queue"])
    limit = declared_limit(
        name,
        rate_limit=doc.get("rate_limit"),
        rate_burst=doc.get("rate_burst"),
        concurrency=doc.get("concurrency"),
        limit_per_key=doc.get("limit_per_key", False),
    )
    kind, value = _run_kind(_required(doc, "run", ""))
    common: dict[str, Any] = {
        "name": name,
        "version": version,
        "max_attempts": max_attempts,
        "retry": retry,
        "timeout": timeout,
        "lease_ttl": lease_ttl,
        "priority": priority,
        "queue": queue,
        "limit": limit,
    }
    description = str(doc.get("description", ""))
    if kind == "python":
        common["output"] = output
        return replace(_python_spec(value, file, schema, common), description=description)
    input_names = _property_names(schema)
    runner: Runner = (
        _command_runner(value, input_names)
        if kind == "command"
        else _http_runner(value, input_names)
    )
    return JobSpec(
        run=runner,
        input_schema=schema if schema is not None else {"type": "object"},
        output_schema=output,
        source=str(file),
        description=description,
        **common,
    )


def _mapping(value: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        got = "nothing (the file is empty)" if value is None else type(value).__name__
        raise ValidationError(field, f"must be a mapping, got {got}")
    return value


def _required(mapping: Mapping[str, Any], key: str, prefix: str) -> Any:
    if key not in mapping:
        raise ValidationError(f"{prefix}{key}", "is required")
    return mapping[key]


def _refuse_unknown_keys(mapping: Mapping[Any, Any], allowed: Collection[str], prefix: str) -> None:
    for key in mapping:
        if key in allowed:
            continue
        hint = suggest(str(key), allowed)
        raise ValidationError(f"{prefix}{key}", f"is not a known key ({hint})")


def _json_schema(value: Any, key: str) -> dict[str, Any]:
    """The JSON Schema under ``key`` (``inputs`` or ``output``), checked."""
    schema = dict(_mapping(value, key))
    payloads.encode(schema, field=key, limit=payloads.DEFAULT_MAX_PAYLOAD_BYTES)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.absolute_path)
        raise ValidationError(
            f"{key}{field}", f"is not a valid JSON Schema: {exc.message}"
        ) from None
    return schema


def _property_names(schema: Mapping[str, Any] | None) -> Collection[str] | None:
    """The inputs a template may name, when the schema lists them (None: any)."""
    properties = None if schema is None else schema.get("properties")
    return set(properties) if isinstance(properties, Mapping) else None


def _retry(value: Any) -> tuple[int | None, RetryPolicy | None]:
    retry = _mapping(value, "retry")
    _refuse_unknown_keys(retry, _RETRY_KEYS, "retry.")
    max_attempts = None
    if "max_attempts" in retry:
        max_attempts = require_int(retry["max_attempts"], "retry.max_attempts", low=1)
    if "base_delay" not in retry and "max_delay" not in retry:
        return max_attempts, None  # the store's policy
    base = _seconds(retry.get("base_delay", RetryPolicy().base_delay), "retry.base_delay")
    cap = _seconds(retry.get("max_delay", max(_DEFAULT_MAX_DELAY, base)), "retry.max_delay")
    if cap < base:
        raise ValidationError("retry.max_delay", f"must be >= base_delay ({base:g} s), got {cap:g}")
    return max_attempts, RetryPolicy(base_delay=base, max_delay=cap)


def _seconds(value: Any, field: str) -> float:
    return parse_duration(value, field=field).total_seconds()


def _run_kind(value: Any) -> tuple[str, Any]:
    run = _mapping(value, "run")
    _refuse_unknown_keys(run, _RUN_KINDS, "run.")
    kinds = [kind for kind in _RUN_KINDS if kind in run]
    if len(kinds) != 1:
        got = ", ".join(kinds) or "none"
        raise ValidationError("run", f"must have exactly one of command, python, http; got {got}")
    return kinds[0], run[kinds[0]]


# -- the three kinds -----------------------------------------------------------------


def _command_runner(value: Any, input_names: Collection[str] | None) -> CommandRunner:
    if not isinstance(value, list) or not value:
        raise ValidationError("run.command", f"must be a non-empty list of strings, got {value!r}")
    for index, arg in enumerate(value):
        field = f"run.command[{index}]"
        if not isinstance(arg, str):
            raise ValidationError(field, f"must be a string, got {arg!r}")
        templates.parse(arg, field=field, input_names=input_names)
    if not value[0].strip():
        raise ValidationError("run.command[0]", "must name a program")
    return CommandRunner(value)


def _http_runner(value: Any, input_names: Collection[str] | None) -> HttpRunner:
    http = _mapping(value, "run.http")
    _refuse_unknown_keys(http, _HTTP_KEYS, "run.http.")
    method = _required(http, "method", "run.http.")
    url = _required(http, "url", "run.http.")
    timeout = _seconds(http["timeout"], "run.http.timeout") if "timeout" in http else None
    body = http.get("json")
    if body is not None:
        payloads.encode(body, field="run.http.json", limit=payloads.DEFAULT_MAX_PAYLOAD_BYTES)
        templates.check_json(body, field="run.http.json", input_names=input_names)
    headers = http.get("headers", {})
    try:
        runner = HttpRunner(
            method=method,
            url=url,
            json=body,
            headers=headers,
            timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
        )
    except ValidationError as exc:  # the runner names its own fields; place them in the file
        raise ValidationError(f"run.http.{exc.field}", exc.message) from None
    # The runner has checked the syntax; the inputs schema is the definition's to check.
    templates.parse(url, field="run.http.url", input_names=input_names)
    for name, header in runner.headers.items():
        templates.parse(header, field=f"run.http.headers.{name}", input_names=input_names)
    return runner


def _python_spec(
    value: Any, file: Path, schema: Mapping[str, Any] | None, common: dict[str, Any]
) -> JobSpec:
    handler = _python_target(value, file.resolve().parent)
    try:
        spec = spec_from_function(handler, inputs=schema, **common)
    except ValidationError as exc:
        raise ValidationError("run.python", exc.message) from None
    return replace(spec, source=str(file))


def _python_target(value: Any, directory: Path) -> Callable[..., Any]:
    match = _PYTHON_TARGET.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValidationError("run.python", f"must be 'module.path:attribute', got {value!r}")
    module_name, attribute = match.groups()
    target: Any = _import(module_name, directory)
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ValidationError(
                "run.python", f"module {module_name!r} has no attribute {attribute!r}"
            ) from None
    if not callable(target):
        raise ValidationError("run.python", f"{value!r} is not callable")
    return target  # type: ignore[no-any-return]


def _import(module_name: str, directory: Path) -> ModuleType:
    """Import from the normal path, else from the definition's directory (see module doc)."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if not _is_the_module(exc, module_name):
            raise _import_error(module_name, exc) from None
    except Exception as exc:  # user code runs on import; anything can come out of it
        raise _import_error(module_name, exc) from None
    importlib.invalidate_caches()  # the directory's files may be newer than the finders' cache
    try:
        with _on_sys_path(directory):
            return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if _is_the_module(exc, module_name):
            raise ValidationError(
                "run.python",
                f"cannot import module {module_name!r}: not found on sys.path or in {directory}",
            ) from None
        raise _import_error(module_name, exc) from None
    except Exception as exc:
        raise _import_error(module_name, exc) from None


def _is_the_module(exc: ModuleNotFoundError, module_name: str) -> bool:
    """Whether it is ``module_name`` (or a package on its path) that is missing,
    rather than something that module imports."""
    missing = exc.name or ""
    return module_name == missing or module_name.startswith(f"{missing}.")


def _import_error(module_name: str, exc: Exception) -> ValidationError:
    return ValidationError(
        "run.python", f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}"
    )


@contextmanager
def _on_sys_path(directory: Path) -> Iterator[None]:
    entry = str(directory)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        with suppress(ValueError):
            sys.path.remove(entry)
