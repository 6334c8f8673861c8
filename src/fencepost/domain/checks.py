"""Argument checks shared by every edge (store verbs, submissions, later the API and CLI)."""

from __future__ import annotations

from collections.abc import Collection

from fencepost.domain.errors import ValidationError
from fencepost.domain.states import AttemptOutcome

_MAX_NAME = 200


#: The longest error text a store keeps, in characters; longer ones are cut.
MAX_ERROR_CHARS = 8_192

#: The largest count or version a store keeps (PostgreSQL ``integer``).
INT32_MAX = 2**31 - 1

#: The queue of an execution or schedule whose submitter named none.
DEFAULT_QUEUE = "default"
#: The longest queue name.
MAX_QUEUE = 100


def require_int(value: object, field: str, *, low: int, high: int | None = None) -> int:
    """An ``int`` (not a ``bool``) within ``[low, high]``, or a ValidationError on ``field``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValidationError(field, f"must be an integer, got {_short(value)}")
    if value < low:
        raise ValidationError(field, f"must be >= {low}, got {_short(value)}")
    if high is not None and value > high:
        raise ValidationError(field, f"must be <= {high}, got {_short(value)}")
    return value


def _short(value: object) -> str:
    """``repr(value)`` for a message, bounded: a huge int cannot even be converted to text."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def require_name(value: object, field: str, *, max_len: int = _MAX_NAME) -> str:
    """A non-blank string of at most ``max_len`` characters."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(field, f"must be a non-empty string, got {value!r}")
    if len(value) > max_len:
        raise ValidationError(field, f"must be at most {max_len} characters, got {len(value)}")
    if "\x00" in value or (not value.isascii() and not _is_text(value)):
        raise ValidationError(field, "must be text without U+0000 or lone surrogates")
    return value


def require_queue(value: object, field: str = "queue") -> str:
    """A queue name (checked like a job's, at most :data:`MAX_QUEUE` characters).

    None means "not given": :data:`DEFAULT_QUEUE`.
    """
    return DEFAULT_QUEUE if value is None else require_name(value, field, max_len=MAX_QUEUE)


def require_text(value: object, field: str, *, max_len: int) -> str:
    """A string (empty allowed) without U+0000 or lone surrogates, cut to ``max_len``.

    For free text a caller writes (an error message): too long is cut, not refused;
    what no backend can store is refused, naming ``field``.
    """
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, got {value!r}")
    if "\x00" in value or (not value.isascii() and not _is_text(value)):
        raise ValidationError(field, "must be text without U+0000 or lone surrogates")
    return value[:max_len]


def attempt_outcome(value: object, field: str = "outcome") -> AttemptOutcome:
    """An :class:`AttemptOutcome` from itself or its name in any case (``timed_out``,
    ``TIMED_OUT``); anything else is a ValidationError on ``field`` listing the outcomes."""
    if isinstance(value, AttemptOutcome):
        return value
    known = ", ".join(o.value.lower() for o in AttemptOutcome)
    if not isinstance(value, str):
        raise ValidationError(field, f"must be an attempt outcome ({known}), got {_short(value)}")
    # Only ASCII can name an outcome: upper() of other text could turn it into one.
    name = value.upper() if value.isascii() else ""
    if name not in AttemptOutcome.__members__:
        raise ValidationError(
            field, f"unknown attempt outcome {_short(value)} (one of {known}, in any case)"
        )
    return AttemptOutcome[name]


#: The longest text a query's ``error`` filter looks for, in characters.
MAX_ERROR_FILTER = 200


def error_filter(value: object, field: str = "error") -> str | None:
    """The ``error`` filter of a query: 1 to :data:`MAX_ERROR_FILTER` characters of text
    looked for, case-insensitively, in an execution's latest recorded error.

    Not a string, empty, or too long is a ValidationError on ``field``. Text no store
    can hold (U+0000, a lone surrogate) is None: no recorded error holds it, so the
    query matches nothing (as a ``job`` or ``queue`` filter holding such text does).
    """
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, got {type(value).__name__}")
    if not value:
        raise ValidationError(field, "must not be empty")
    if len(value) > MAX_ERROR_FILTER:
        raise ValidationError(
            field, f"must be at most {MAX_ERROR_FILTER} characters, got {len(value)}"
        )
    return value if storable(value) else None


def sanitize_text(value: str, *, max_len: int) -> str:
    """``value`` made storable: U+0000 and lone surrogates become U+FFFD, cut to ``max_len``.

    For text produced at run time (a handler's exception, a command's stderr): it
    may hold anything, and the real error is worth more than a refusal.
    """
    text = value[:max_len]
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    if not text.isascii() and not _is_text(text):
        # UTF-16 with surrogatepass keeps a pair split across two code points whole
        # and leaves each lone one unpaired, which the decoder then replaces.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def storable(value: str) -> bool:
    """True if every backend can hold ``value``: no U+0000 and no lone surrogate.

    A lookup by an id or filter that is not storable names nothing: no row can hold it.
    """
    return "\x00" not in value and (value.isascii() or _is_text(value))


def _is_text(value: str) -> bool:
    """True if ``value`` can be stored as UTF-8 (no lone surrogates)."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def suggest(name: str, known: Collection[str]) -> str:
    """A hint for an unknown key: ``did you mean 'x'?``, or ``expected one of ...``.

    A known name that starts with ``name_`` counts as close (``delay`` for
    ``delay_seconds``), besides what :func:`difflib.get_close_matches` finds.
    """
    import difflib

    close = [k for k in known if k.startswith(f"{name}_")] or difflib.get_close_matches(
        name, known, n=1
    )
    return f"did you mean {close[0]!r}?" if close else f"expected one of {', '.join(known)}"
