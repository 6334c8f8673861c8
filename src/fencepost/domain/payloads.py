"""JSON payloads: encoding with validation, size limits and request fingerprints.

Inputs and results are JSON, never pickle. Encoding is strict: NaN and
infinities are refused (they are not JSON), and so is anything :mod:`json`
cannot encode.

One rule decides what a payload may be, for every verb and every backend, so
that whatever is stored can be read back, listed, claimed and encoded again by
every layer (:mod:`json`, pydantic, PostgreSQL's jsonb, the HTTP response, the
client): valid JSON, no U+0000, no lone surrogates, at most ``limit`` bytes,
and nested at most :data:`MAX_DEPTH` containers deep.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

from fencepost.domain.errors import ValidationError

#: Default cap on the encoded size of ``inputs`` and ``result``: 256 KiB.
DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024

#: The deepest nesting a payload may have: objects and arrays within one another,
#: the payload itself counting as the first level (``{"a": [1]}`` is 2 deep).
#: pydantic refuses to serialize past about 255 levels and an API response wraps a
#: payload in a few levels of its own, so the limit sits well below that; 64 is far
#: more than any real job's inputs or results need.
MAX_DEPTH = 64

#: What is said of inputs that are not a JSON object (see :func:`as_inputs`).
NOT_AN_OBJECT = "must be a JSON object (a mapping of input names to values)"

#: The key of the marker :func:`readable` shows in place of a payload that breaks the rule.
PAYLOAD_UNREADABLE = "payload_unreadable"

#: The error text recorded when a completion's result is not acceptable JSON (the
#: execution is FAILED without a retry: see :class:`~fencepost.domain.errors.ResultInvalid`).
RESULT_INVALID = "result_invalid"

_encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
# A JSON escape of U+0000: "\u0000" not itself preceded by an escaped backslash.
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
_canonical = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), sort_keys=True
)


def _refuse(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _c_encoder() -> Callable[[Any], str] | None:
    """CPython's C encoder with ``_encoder``'s settings, built once, or None.

    ``JSONEncoder.encode`` builds a new C encoder on every call, which costs more
    than encoding a small payload (and every submit and completion encodes one).
    ``c_make_encoder`` is not public API, hence the fallback. It is built without
    a circular-reference memo (that memo would outlive a failed call): a circular
    value ends in RecursionError instead, which :func:`encode` refuses the same way.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    try:
        chunks = make(
            None, _refuse, json.encoder.encode_basestring, None, ":", ",", False, False, False
        )
    except TypeError:  # a CPython whose internal signature differs
        return None

    def dumps(value: Any) -> str:
        return "".join(chunks(value, 0))

    return dumps if dumps({"a": [1, "é", None]}) == '{"a":[1,"é",null]}' else None


_dumps = _c_encoder() or _encoder.encode


def encode(value: Any, *, field: str, limit: int) -> str:
    """Encode ``value`` as compact JSON text, or raise :class:`ValidationError` on ``field``."""
    try:
        text = _dumps(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValidationError(field, f"is not JSON-serializable ({exc})") from None
    if "\\u0000" in text and _NUL_ESCAPE.search(text):
        # JSON allows it, but PostgreSQL's JSONB cannot store it: refuse it everywhere,
        # so that a payload valid on one backend is valid on all of them.
        raise ValidationError(field, "contains the character U+0000, which cannot be stored")
    # Most payloads are ASCII, where characters are bytes; others are encoded once,
    # which both measures them and refuses a lone surrogate (UTF-8 cannot hold one).
    size = len(text)
    if not text.isascii():
        try:
            size = len(text.encode())
        except UnicodeEncodeError:
            raise ValidationError(
                field, "contains a lone surrogate, which is not valid Unicode text"
            ) from None
    if size > limit:
        raise ValidationError(field, f"is {size} bytes encoded; the limit is {limit}")
    if _too_deep(value, text):
        raise ValidationError(field, f"is nested more than {MAX_DEPTH} levels deep")
    return text


def as_inputs(value: object, *, field: str = "inputs") -> dict[str, Any]:
    """``value`` as a job's inputs: a JSON object, with None meaning ``{}``.

    A handler takes its inputs as keywords, so inputs that are a list, a string, a
    number or a boolean could only fail at run time; they are a
    :class:`ValidationError` on ``field`` instead, before anything is stored. Only
    the shape is checked here: :func:`encode` checks the contents.
    """
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationError(field, f"{NOT_AN_OBJECT}, got {type(value).__name__}")
    return value


def check_stored(value: Any, text: str) -> str | None:
    """Why a payload already stored (``text``, decoded to ``value``) breaks the rule, or None.

    For rows written before the rule (or by other tools): a claim sets such an
    execution aside instead of leasing what it could not deliver.
    """
    if "\\u0000" in text and _NUL_ESCAPE.search(text):
        return "contains the character U+0000"
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            return "contains a lone surrogate"
    if _too_deep(value, text):
        return f"is nested more than {MAX_DEPTH} levels deep"
    return None


def decode(text: str | None) -> Any:
    """Decode stored JSON text (``None`` stays ``None``)."""
    return None if text is None else json.loads(text)


def decode_all(texts: list[str]) -> list[Any]:
    """Decode many stored JSON texts (none of them ``None``) with one parser call.

    Each text is a complete JSON value, so their comma-joined list is a JSON array;
    parsing that once is much cheaper than a ``json.loads`` per text.
    """
    return list(json.loads(f"[{','.join(texts)}]"))


def fingerprint(request: dict[str, Any]) -> str:
    """A stable digest of a request, to tell a retried submit from a different one."""
    return hashlib.blake2b(_canonical.encode(request).encode(), digest_size=16).hexdigest()


def readable(value: Any) -> Any:
    """``value`` as read from a store, or a marker where it breaks the nesting rule.

    For payloads stored before the rule: every layer must still be able to encode
    an execution that holds one (pydantic refuses past about 255 levels), so such
    a value is shown as ``{"payload_unreadable": ...}`` instead of failing the
    whole response. The stored value itself is left as it is.
    """
    if isinstance(value, dict | list) and _nested_too_deep(value):
        return {PAYLOAD_UNREADABLE: f"nested more than {MAX_DEPTH} levels deep"}
    return value


def _too_deep(value: Any, text: str) -> bool:
    """True if ``value`` (encoded as ``text``) nests more than :data:`MAX_DEPTH` deep.

    Every container opens with a bracket, so a text with at most MAX_DEPTH of them
    cannot be too deep: that count (C speed) settles nearly every payload.
    """
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    return _nested_too_deep(value)


def _nested_too_deep(value: Any) -> bool:
    """The walk behind :func:`_too_deep`: iterative, so no depth can exhaust the stack."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > MAX_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
