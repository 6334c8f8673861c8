"""Write ``reference/http.md`` from the service's own OpenAPI document.

The document is the one ``GET /openapi.json`` serves, made by the application that
``fencepost serve`` runs (:func:`fencepost.api.create_app`, here over a memory store:
the document does not depend on the data). Each operation's scope comes from the
route's own dependency (:func:`fencepost.api.auth.required_scope`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import mkdocs_gen_files
from fastapi.routing import APIRoute

sys.path.insert(0, str(Path(__file__).parent))

from _markdown import GENERATED, cell, code, escape, prose, slug

import fencepost
from fencepost.api import auth, create_app
from fencepost.wire.fields import PATTERN_MEANINGS

METHODS = ("get", "post", "put", "patch", "delete")

#: The section of an untagged operation, by its path's first segment (else that segment).
GROUPS = {
    "dead-letters": "executions",
    "healthz": "health",
    "readyz": "health",
    "nodes": "nodes and reports",
    "buckets": "nodes and reports",
    "stats": "nodes and reports",
    "slo": "nodes and reports",
    "session": "dashboard session",
}


def api_routes(routes: Any) -> Any:
    """Every ``APIRoute``, also inside included routers (which newer FastAPI keeps apart)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from api_routes(inner.routes)


def scopes_of(app: Any) -> dict[tuple[str, str], str]:
    """(method, path) -> the scope the route requires, for every guarded route."""
    found = {}
    for route in api_routes(app.routes):
        for dependency in route.dependant.dependencies:
            scope = auth.required_scope(dependency.call)
            if scope is not None:
                for method in route.methods:
                    found[(method.lower(), route.path_format)] = scope.value
    return found


def schema_link(name: str) -> str:
    return f"[`{name}`](#schema-{slug(name)})"


def type_of(schema: dict[str, Any]) -> str:
    """A schema's type in a few words, with links to the named schemas."""
    if "$ref" in schema:
        return schema_link(schema["$ref"].rsplit("/", 1)[-1])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [o for o in schema[key] if o.get("type") != "null"]
            text = " or ".join(type_of(o) for o in options)
            if len(options) < len(schema[key]):
                text += " or null"
            return text
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return type_of(schema["allOf"][0])
    if "const" in schema:
        return code(json.dumps(schema["const"]))
    if "enum" in schema:
        return "one of " + ", ".join(code(v) for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        return "array of " + type_of(schema.get("items", {}))
    if kind == "object" or (kind is None and "additionalProperties" in schema):
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            return "object of " + type_of(extra)
        return "object"
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind is None:
        return "any JSON"
    if "format" in schema:
        return f"{kind} ({schema['format']})"
    return kind


def constraints(schema: dict[str, Any]) -> list[str]:
    """What a value must be beyond its type: lengths, bounds, patterns."""
    variants = [schema] + [
        o for key in ("anyOf", "oneOf") for o in schema.get(key, []) if o.get("type") != "null"
    ]
    notes = []
    for part in variants:
        if "pattern" in part:
            notes.append(PATTERN_MEANINGS.get(part["pattern"], f"matches {code(part['pattern'])}"))
        for key, word in (
            ("minLength", "at least {} characters"),
            ("maxLength", "at most {} characters"),
            ("minimum", ">= {}"),
            ("maximum", "<= {}"),
            ("exclusiveMinimum", "> {}"),
            ("exclusiveMaximum", "< {}"),
            ("minItems", "at least {} items"),
            ("maxItems", "at most {} items"),
        ):
            if key in part:
                value = part[key]
                if isinstance(value, float) and value.is_integer():
                    value = int(value)
                text = word.format(value)
                notes.append(text.removesuffix("s") if value == 1 and "character" in text else text)
    return notes


def described(schema: dict[str, Any], required: bool | None = None) -> str:
    parts = []
    if schema.get("description"):
        parts.append(prose(schema["description"]))
    notes = constraints(schema)
    if notes:
        text = "; ".join(escape(n) for n in notes)
        parts.append(text[0].upper() + text[1:] + ".")
    if "default" in schema and schema["default"] is not None:
        parts.append(f"Default: {code(json.dumps(schema['default']))}.")
    return cell(" ".join(parts))


def body_of(content: dict[str, Any]) -> str:
    """A request or response body: each media type and its schema."""
    if not content:
        return ""
    out = []
    for media, entry in content.items():
        schema = entry.get("schema")
        out.append(f"{code(media)}: {type_of(schema)}" if schema else code(media))
    return "; ".join(out)


def operation(method: str, path: str, op: dict[str, Any], scope: str | None) -> list[str]:
    title = op.get("summary") or f"{method.upper()} {path}"
    lines = [
        f"### {escape(title)} {{#{slug(method + ' ' + path)}}}",
        "",
        f"`{method.upper()} {path}`",
        "",
    ]
    if op.get("description"):
        lines += [prose(op["description"]), ""]
    if scope is not None:
        lines += [f"Scope: `{scope}` (or `admin`).", ""]
    else:
        lines += ["No scope required.", ""]
    parameters = op.get("parameters", [])
    if parameters:
        lines += [
            "| Parameter | In | Type | Required | Description |",
            "| --- | --- | --- | --- | --- |",
        ]
        for p in parameters:
            schema = p.get("schema", {})
            text = cell(prose(p.get("description", ""))) or described(schema)
            if p.get("description") and described(schema):
                text += " " + described(schema)
            lines.append(
                f"| {code(p['name'])} | {p['in']} | {type_of(schema)} | "
                f"{'yes' if p.get('required') else 'no'} | {text} |"
            )
        lines.append("")
    body = op.get("requestBody")
    if body:
        required = " (required)" if body.get("required") else ""
        lines += [f"Request body{required}: {body_of(body.get('content', {}))}", ""]
    lines += ["| Status | Meaning | Body |", "| --- | --- | --- |"]
    for status in sorted(op.get("responses", {})):
        response = op["responses"][status]
        lines.append(
            f"| {status} | {cell(escape(response.get('description', '')))} | "
            f"{body_of(response.get('content', {}))} |"
        )
    lines.append("")
    return lines


def schema_section(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### `{name}` {{#schema-{slug(name)}}}", ""]
    if schema.get("description"):
        lines += [prose(schema["description"]), ""]
    properties = schema.get("properties")
    if properties:
        required = set(schema.get("required", []))
        lines += [
            "| Field | Type | Required | Description |",
            "| --- | --- | --- | --- |",
        ]
        for field, sub in properties.items():
            lines.append(
                f"| {code(field)} | {type_of(sub)} | {'yes' if field in required else 'no'} | "
                f"{described(sub)} |"
            )
        lines.append("")
        extra = schema.get("additionalProperties")
        if extra is False:
            lines += ["Other fields are refused.", ""]
    else:
        lines += [f"Type: {type_of(schema)}. {described(schema)}".rstrip(), ""]
    return lines


def page() -> str:
    with fencepost.connect("memory://") as store:
        app = create_app(store)
        spec = app.openapi()
        scopes = scopes_of(app)
    if not scopes:  # the routes could not be walked: say so rather than print no scopes
        raise RuntimeError("no route's scope was found in the application")
    groups: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, operations in spec["paths"].items():
        for method in METHODS:
            if method not in operations:
                continue
            op = operations[method]
            first = path.strip("/").split("/", 1)[0]
            group = (op.get("tags") or [GROUPS.get(first, first)])[0]
            groups.setdefault(group[0].upper() + group[1:], []).append((method, path, op))
    lines = [
        GENERATED.format(script="http_reference.py"),
        "# HTTP API",
        "",
        f"The service `fencepost serve` runs ({spec['info']['title']} "
        f"{spec['info']['version']}, OpenAPI {spec['openapi']}). This page is generated "
        "from the OpenAPI document the service itself serves at `GET /openapi.json`; the "
        "service also serves it browsable at `/docs`. The "
        "[Python client](python.md#the-http-client) speaks this API, and "
        "[`fencepost serve`](cli.md#fencepost-serve) lists the service's settings.",
        "",
        "## Authentication",
        "",
        "Send `Authorization: Bearer TOKEN`. Each operation below names the scope its "
        "token needs; `admin` allows everything.",
        "",
        prose(auth.__doc__).split("\n\n", 1)[1],  # its first line titles the module
        "",
        "## Errors",
        "",
        "Every error is a problem document (`application/problem+json`, RFC 9457) with a "
        "stable `type`; the [problem types](errors.md#problem-types) lists them all, with "
        "the exception the Python client raises for each. A `422` names the offending "
        "input in `field`.",
        "",
        "## Operations",
        "",
    ]
    lines += ["| Operation | Summary |", "| --- | --- |"]
    for group, operations in groups.items():
        lines.append(f"| **[{escape(group)}](#{slug(group)})** | |")
        for method, path, op in operations:
            lines.append(
                f"| [`{method.upper()} {path}`](#{slug(method + ' ' + path)}) | "
                f"{cell(escape(op.get('summary', '')))} |"
            )
    lines.append("")
    for group, operations in groups.items():
        lines += [f"## {escape(group)}", ""]
        for method, path, op in operations:
            lines += operation(method, path, op, scopes.get((method, path)))
    lines += [
        "## Schemas",
        "",
        "The bodies the operations take and answer with.",
        "",
    ]
    for name, schema in spec.get("components", {}).get("schemas", {}).items():
        lines += schema_section(name, schema)
    return "\n".join(lines).rstrip() + "\n"


with mkdocs_gen_files.open("reference/http.md", "w") as out:
    out.write(page())
