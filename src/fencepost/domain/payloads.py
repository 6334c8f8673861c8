"""JSON payloads: encoding with validation, size limits and request fingerprints.

Inputs and results are JSON, never pickle. Encoding is strict: NaN and
infinities are refused (they are not JSON), and so is anything :mod:`json`
cannot encode.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from fencepost.domain.errors import ValidationError

#: Default cap on the encoded size of ``inputs`` and ``result``: 256 KiB.
DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024

_encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_canonical = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), sort_keys=True
)


def encode(value: Any, *, field: str, limit: int) -> str:
    """Encode ``value`` as compact JSON text, or raise :class:`ValidationError` on ``field``."""
    try:
        text = _encoder.encode(value)
    except (TypeError, ValueError) as exc:
        raise ValidationError(field, f"is not JSON-serializable ({exc})") from None
    # Most payloads are ASCII, where characters are bytes; only measure bytes when needed.
    if len(text) > limit // 4 and len(text.encode()) > limit:
        raise ValidationError(field, f"is {len(text.encode())} bytes encoded; the limit is {limit}")
    return text


def decode(text: str | None) -> Any:
    """Decode stored JSON text (``None`` stays ``None``)."""
    return None if text is None else json.loads(text)


def fingerprint(request: dict[str, Any]) -> str:
    """A stable digest of a request, to tell a retried submit from a different one."""
    return hashlib.blake2b(_canonical.encode(request).encode(), digest_size=16).hexdigest()
