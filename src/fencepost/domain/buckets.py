"""Stable bucket assignment: the same key lands in the same bucket on every machine."""

from __future__ import annotations

import hashlib

#: How many buckets keys are spread over unless a store is configured otherwise.
DEFAULT_NUM_BUCKETS = 64


def bucket_for(key: str, num_buckets: int = DEFAULT_NUM_BUCKETS) -> int:
    """``blake2b(key) mod num_buckets``.

    Never Python's ``hash()``: it is salted per process, so two workers would
    disagree about which bucket a key is in.
    """
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % num_buckets
