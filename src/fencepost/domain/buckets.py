"""Stable bucket assignment: the same key lands in the same bucket on every machine."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from fencepost.domain.checks import require_int
from fencepost.domain.errors import ValidationError

#: How many buckets keys are spread over unless a store is configured otherwise.
DEFAULT_NUM_BUCKETS = 64
#: The most buckets a store may have (the CLI's ``--num-buckets`` and Django's
#: ``NUM_BUCKETS`` allow as many): a claim or a bucket report lists them all.
MAX_NUM_BUCKETS = 65_536


def bucket_for(key: str, num_buckets: int = DEFAULT_NUM_BUCKETS) -> int:
    """``blake2b(key) mod num_buckets``.

    Never Python's ``hash()``: it is salted per process, so two workers would
    disagree about which bucket a key is in.
    """
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % num_buckets


def buckets_of(buckets: Iterable[int], num_buckets: int) -> tuple[int, ...]:
    """``buckets`` as a tuple, each a bucket of ``0 .. num_buckets - 1``; else
    :class:`ValidationError` naming ``buckets``."""
    if not isinstance(buckets, Iterable):
        raise ValidationError("buckets", f"must be a collection of buckets, got {buckets!r}")
    values = tuple(buckets)
    for b in values:
        require_int(b, "buckets", low=0, high=num_buckets - 1)
    return values


def parse_buckets(spec: str, num_buckets: int = DEFAULT_NUM_BUCKETS) -> tuple[int, ...]:
    """``"0-15,20"`` -> the sorted buckets it names; a bad spec names what is wrong.

    Ranges are inclusive. Every bucket must be in ``0 .. num_buckets - 1``: an
    out-of-range number is an error, never an empty or partial selection.
    """
    chosen: set[int] = set()
    for part in (p.strip() for p in spec.split(",")):
        low_text, dash, high_text = part.partition("-")
        try:
            low = int(low_text)
            high = int(high_text) if dash else low
        except ValueError:
            raise ValidationError(
                "buckets", f"{part!r} is not a bucket or a range like 0-15"
            ) from None
        if low > high:
            raise ValidationError("buckets", f"range {part!r} runs backwards")
        if low < 0 or high >= num_buckets:
            raise ValidationError(
                "buckets", f"{part!r} is outside 0-{num_buckets - 1} ({num_buckets} buckets)"
            )
        chosen.update(range(low, high + 1))
    return tuple(sorted(chosen))
