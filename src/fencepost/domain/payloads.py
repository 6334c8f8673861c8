"""JSON payloads: encoding with validation, size limits and request fingerprints.

Inputs and results are JSON, never pickle. Encoding is strict: NaN and
infinities are refused (they are not JSON), and so is anything :mod:`json`
cannot encode.

One rule decides what a payload may be, for every verb and every backend, so
that whatever is stored can be read back, listed, claimed and encoded again by
every layer (:mod:`json`, pydantic, PostgreSQL's jsonb, the HTTP response, the
client): valid JSON, no U+0000, no lone surrogates, at most ``limit`` bytes,
nested at most :data:`MAX_DEPTH` containers deep, and no integer of more than
:data:`MAX_INT_DIGITS` digits.

JSON text from outside (a request body, a command-line value) is decoded with
:func:`loads`, which turns what :mod:`json` cannot decode safely (nesting deep
enough to exhaust the stack, an integer past the digits limit) into a
:class:`ValidationError` naming where it is, never a ``RecursionError`` or a
bare ``ValueError``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
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

#: The most decimal digits an integer in a payload may have (its sign not counted).
#: CPython refuses to convert a longer int to or from text by default
#: (``sys.get_int_max_str_digits``), and pydantic's JSON parser has the same limit
#: whatever Python is set to; PostgreSQL's ``numeric`` holds far more. Fixed here,
#: not read from the interpreter: a process that raised its own limit must not store
#: what every other process would fail to read.
MAX_INT_DIGITS = 4300

#: What is said of an integer past :data:`MAX_INT_DIGITS`.
TOO_MANY_DIGITS = f"is an integer of more than {MAX_INT_DIGITS} digits (the most allowed)"

#: What is said of a payload nested past :data:`MAX_DEPTH`.
TOO_DEEP = f"is nested more than {MAX_DEPTH} levels deep"

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
#: The smallest magnitude with too many digits.
_INT_CEILING = 10**MAX_INT_DIGITS
#: A run of digits long enough to be such an integer (or to sit inside a string).
_LONG_DIGITS = re.compile(f"[0-9]{{{MAX_INT_DIGITS + 1}}}")


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
        # An integer too long for str() (ValueError) is named where it is, as is one a
        # process with a raised limit could write (below): one rule, whatever the process.
        where = _long_int(value) if isinstance(exc, ValueError) else None
        if where is not None:
            raise ValidationError(member(field, where), TOO_MANY_DIGITS) from None
        raise ValidationError(field, f"is not JSON-serializable ({exc})") from None
    if len(text) > MAX_INT_DIGITS and _LONG_DIGITS.search(text):
        where = _long_int(value)  # the digits may be inside a string: then all is well
        if where is not None:
            raise ValidationError(member(field, where), TOO_MANY_DIGITS)
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
        raise ValidationError(field, TOO_DEEP)
    return text


def loads(text: str | bytes, *, field: str | None = None) -> Any:
    """Decode JSON text from outside fencepost: a request body, a command-line value.

    ``field`` names what the text is (``"inputs"``), or None for a document that
    holds named fields (a request body, whose members are named on their own:
    ``inputs``). Raises :class:`json.JSONDecodeError` for text that is not JSON
    (a ``ValueError``, with a position), and :class:`ValidationError` for JSON that
    breaks the payload rule before it can be decoded:

    * an integer of more than :data:`MAX_INT_DIGITS` digits, on the path of that
      integer (``inputs.n``, ``inputs.ids.3``);
    * nesting too deep for the decoder (hundreds of levels; the exact
      :data:`MAX_DEPTH` rule is :func:`encode`'s), on ``field``, or on the body's
      member holding it (``inputs``).

    Nothing else is checked here: the value is then a payload like any other.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise _nested_past_decoding(text, field) from None
    except ValueError as exc:
        # Python's own digits limit (an int() inside the decoder); bad syntax and text
        # that is not UTF-8 are the caller's to report.
        if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError):
            raise
        # Decoded again, with over-long integers left as a marker to be found: a
        # Python call per integer, paid only by text that has such an integer.
        try:
            value = json.loads(text, parse_int=_marking_long)
        except RecursionError:  # deep as well, past the integer
            raise _nested_past_decoding(text, field) from None
        raise ValidationError(
            _named(field, _path_to(value, _LONG) or []), TOO_MANY_DIGITS
        ) from None
    if len(text) > MAX_INT_DIGITS and _LONG_DIGITS.search(_as_text(text)):
        # Decoded by a process whose limit was raised: the rule is the same there.
        found = _long_int(value)
        if found is not None:
            raise ValidationError(_named(field, found), TOO_MANY_DIGITS)
    return value


def _nested_past_decoding(text: str | bytes, field: str | None) -> ValidationError:
    where = [] if field is not None else _deep_member(_as_text(text))
    return ValidationError(_named(field, where), TOO_DEEP)


def member(field: str, path: Sequence[str | int]) -> str:
    """The name of the value at ``path`` inside ``field``: ``inputs.ids.3``.

    A key that is not a plain name (a dot, a space, a control character) is quoted
    as JSON, and a long one cut short: the name goes on one line of an error.
    """
    name = field
    for part in path:
        if isinstance(part, int) or _PLAIN_KEY.fullmatch(part):
            name += f".{part}"
        else:
            quoted = json.dumps(part if len(part) <= 40 else part[:40] + "…")
            name += f"[{quoted}]"
    return name


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")


def _named(field: str | None, path: Sequence[str | int]) -> str:
    if field is not None:
        return member(field, path)
    if not path or isinstance(path[0], int):  # a body that is not an object
        return member("body", path)
    return member(str(path[0]), path[1:])


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


def _as_text(text: str | bytes) -> str:
    # json.loads took it, so it is UTF-8 (or UTF-16/32 with a BOM, which json detects).
    if isinstance(text, str):
        return text
    return text.decode(json.detect_encoding(text), "replace")


#: What :func:`_marking_long` decodes an integer past :data:`MAX_INT_DIGITS` to.
_LONG = object()


def _marking_long(digits: str) -> Any:
    # JSON has no leading zeros or plus sign: the length is the digits, and a minus.
    if len(digits) - digits.startswith("-") > MAX_INT_DIGITS:
        return _LONG
    return int(digits)


_decoder = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


def _skip_space(text: str, at: int) -> int:
    return _SPACE.match(text, at).end()  # type: ignore[union-attr]


def _deep_member(text: str) -> list[str | int]:
    """The member of the JSON object ``text`` whose value is too deep to decode, as a path.

    Each member is decoded on its own (at C speed) until one exhausts the stack.
    Empty when ``text`` is not an object, or ends (is not JSON) before one does.
    """
    at = _skip_space(text, 0)
    if not text.startswith("{", at):
        return []
    at = _skip_space(text, at + 1)
    while True:
        try:
            key, at = _decoder.raw_decode(text, at)
            at = _skip_space(text, at)
            if not (isinstance(key, str) and text.startswith(":", at)):
                return []
            try:
                _, at = _decoder.raw_decode(text, _skip_space(text, at + 1))
            except RecursionError:
                return [key]
        except ValueError:
            return []
        at = _skip_space(text, at)
        if not text.startswith(",", at):
            return []
        at = _skip_space(text, at + 1)


def _too_deep(value: Any, text: str) -> bool:
    """True if ``value`` (encoded as ``text``) nests more than :data:`MAX_DEPTH` deep.

    Every container opens with a bracket, so a text with at most MAX_DEPTH of them
    cannot be too deep: that count (C speed) settles nearly every payload.
    """
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    return _nested_too_deep(value)


def _long_int(value: Any) -> list[str | int] | None:
    """The path to an integer in ``value`` of more than :data:`MAX_INT_DIGITS` digits, or None."""
    return _path_to(value, _LONG_INT)


#: What :func:`_path_to` looks for to find an integer past :data:`MAX_INT_DIGITS`.
_LONG_INT = object()


def _path_to(value: Any, target: object) -> list[str | int] | None:
    """The path to ``target`` in ``value`` (or to an over-long integer: ``_LONG_INT``), or None.

    Iterative and depth first; None as soon as it meets a container nested past
    :data:`MAX_DEPTH` (the value breaks the rule anyway), so that a value that
    contains itself ends after that many steps. Paths are linked ``(parent, key)``
    pairs until one is found: a million-item body is walked without a list per item.
    """
    long_int = target is _LONG_INT
    stack: list[tuple[Any, Any, int]] = [(value, None, 1)]
    while stack:
        item, node, depth = stack.pop()
        if item is target:
            return _unlinked(node)
        if isinstance(item, dict):
            pairs: Any = item.items()
        elif isinstance(item, list | tuple):
            pairs = enumerate(item)
        else:
            if long_int and _is_long_int(item):
                return _unlinked(node)
            continue
        if depth > MAX_DEPTH:
            return None
        for key, child in pairs:
            if child is target or (long_int and _is_long_int(child)):
                return _unlinked((node, key))
            if isinstance(child, dict | list | tuple):
                stack.append((child, (node, key), depth + 1))
    return None


def _is_long_int(item: Any) -> bool:
    return isinstance(item, int) and not isinstance(item, bool) and abs(item) >= _INT_CEILING


def _unlinked(node: Any) -> list[str | int]:
    path: list[str | int] = []
    while node is not None:
        node, key = node
        path.append(key if isinstance(key, int) else str(key))
    return path[::-1]


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
