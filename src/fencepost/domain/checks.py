"""Argument checks shared by every edge (store verbs, submissions, later the API and CLI)."""

from __future__ import annotations

from fencepost.domain.errors import ValidationError

_MAX_NAME = 200


#: The largest count or version a store keeps (PostgreSQL ``integer``).
INT32_MAX = 2**31 - 1


def require_int(value: object, field: str, *, low: int, high: int | None = None) -> int:
    """An ``int`` (not a ``bool``) within ``[low, high]``, or a ValidationError on ``field``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValidationError(field, f"must be an integer, got {value!r}")
    if value < low:
        raise ValidationError(field, f"must be >= {low}, got {value}")
    if high is not None and value > high:
        raise ValidationError(field, f"must be <= {high}, got {value}")
    return value


def require_name(value: object, field: str, *, max_len: int = _MAX_NAME) -> str:
    """A non-blank string of at most ``max_len`` characters."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(field, f"must be a non-empty string, got {value!r}")
    if len(value) > max_len:
        raise ValidationError(field, f"must be at most {max_len} characters, got {len(value)}")
    if "\x00" in value or (not value.isascii() and not _is_text(value)):
        raise ValidationError(field, "must be text without U+0000 or lone surrogates")
    return value


def _is_text(value: str) -> bool:
    """True if ``value`` can be stored as UTF-8 (no lone surrogates)."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True
