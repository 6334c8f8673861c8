"""``{...}`` template fields in command arguments, URLs, header values and HTTP bodies.

A template is text with fields in braces. The fields are ``{inputs.<name>}``
(one input of the execution; ``<name>`` is letters, digits, ``_`` and ``-``),
``{execution_id}``, ``{slot}``, ``{attempt}`` and ``{epoch}``; ``{{`` and ``}}``
stand for literal braces. Fields are looked up by exact name in a mapping: no
attribute access or indexing, no format specs, no conversions, so a template can
reach nothing but the values offered to it.

Values are rendered as text the same way everywhere: strings verbatim, ``None``
as the empty string (``{slot}`` of an unscheduled execution), anything else as
compact JSON (``5``, ``true``, ``[1,2]``). A substituted value is never parsed
again, so braces inside it stay literal.

The same :func:`parse` checks templates when a definition is loaded and splits
them when a job runs, so what loads is exactly what renders.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from string import Formatter
from typing import Any

from fencepost.domain.errors import ValidationError
from fencepost.jobs.context import Context
from fencepost.worker.errors import PermanentFailure

#: The fields every template may use besides ``inputs.<name>``.
CONTEXT_FIELDS = ("execution_id", "slot", "attempt", "epoch")

_INPUT_FIELD = re.compile(r"inputs\.([A-Za-z0-9_-]+)")


@dataclass(frozen=True, slots=True)
class Placeholder:
    """One ``{name}`` field of a parsed template."""

    name: str


#: A parsed template: literal text and placeholders, in order.
Template = tuple[str | Placeholder, ...]


def parse(template: str, *, field: str, input_names: Collection[str] | None = None) -> Template:
    """Split ``template`` into literal text and field names, or raise on ``field``.

    Refuses malformed braces, positional fields (``{}``, ``{0}``), format specs,
    conversions, and any field other than the documented ones. When
    ``input_names`` is given (the inputs schema lists its properties), an
    ``{inputs.x}`` whose ``x`` is not among them is refused too.
    """
    try:
        pieces = list(Formatter().parse(template))
    except ValueError as exc:  # a lone "{" or "}"
        raise ValidationError(field, f"malformed template {template!r}: {exc}") from None
    parts: list[str | Placeholder] = []
    for literal, name, spec, conversion in pieces:
        if literal:
            parts.append(literal)
        if name is None:
            continue
        if spec or conversion:
            raise ValidationError(
                field, f"template field {{{name}}} may not have a format spec or conversion"
            )
        _check_field(name, field=field, input_names=input_names)
        parts.append(Placeholder(name))
    return tuple(parts)


def _check_field(name: str, *, field: str, input_names: Collection[str] | None) -> None:
    if name in CONTEXT_FIELDS:
        return
    match = _INPUT_FIELD.fullmatch(name)
    if match is None:
        allowed = ", ".join(f"{{{f}}}" for f in ("inputs.<name>", *CONTEXT_FIELDS))
        raise ValidationError(field, f"unknown template field {{{name}}} (allowed: {allowed})")
    if input_names is not None and match.group(1) not in input_names:
        known = ", ".join(sorted(input_names)) or "none"
        raise ValidationError(
            field,
            f"template field {{{name}}} names no property of the inputs schema (known: {known})",
        )


def values_for(ctx: Context, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The values a template may use for one attempt: its identity and its inputs."""
    values: dict[str, Any] = {
        "execution_id": ctx.execution_id,
        "slot": ctx.slot,
        "attempt": ctx.attempt,
        "epoch": ctx.epoch,
    }
    values.update((f"inputs.{key}", value) for key, value in inputs.items())
    return values


def lookup(name: str, values: Mapping[str, Any]) -> Any:
    """The value of field ``name``; a missing input is a :class:`PermanentFailure`.

    Permanent, because retrying the same execution presents the same inputs.
    """
    try:
        return values[name]
    except KeyError:
        raise PermanentFailure(
            f"template field {{{name}}} needs input {name.removeprefix('inputs.')!r}, "
            "which the execution's inputs do not have"
        ) from None


def as_text(value: Any) -> str:
    """A value as template text: strings verbatim, None empty, anything else compact JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def render(
    template: Template, values: Mapping[str, Any], *, escape: Callable[[str], str] = str
) -> str:
    """Substitute ``values`` into a parsed template; ``escape`` applies to values only."""
    return "".join(
        part if isinstance(part, str) else escape(as_text(lookup(part.name, values)))
        for part in template
    )


def render_json(value: Any, values: Mapping[str, Any], *, field: str) -> Any:
    """Substitute ``values`` into every string of a JSON value (dict keys stay literal).

    A string that is exactly one field (``"{inputs.count}"``) becomes the value
    itself, keeping its JSON type, so a body can carry numbers, booleans and
    objects from the inputs; any other string is rendered as text.
    """
    if isinstance(value, str):
        template = parse(value, field=field)
        if len(template) == 1 and isinstance(template[0], Placeholder):
            return lookup(template[0].name, values)
        return render(template, values)
    if isinstance(value, dict):
        return {k: render_json(v, values, field=f"{field}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [render_json(v, values, field=f"{field}[{i}]") for i, v in enumerate(value)]
    return value


def check_json(value: Any, *, field: str, input_names: Collection[str] | None = None) -> None:
    """Check every template string inside a JSON value (see :func:`render_json`)."""
    if isinstance(value, str):
        parse(value, field=field, input_names=input_names)
    elif isinstance(value, dict):
        for k, v in value.items():
            check_json(v, field=f"{field}.{k}", input_names=input_names)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            check_json(v, field=f"{field}[{i}]", input_names=input_names)
