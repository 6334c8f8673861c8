"""The bucket numbers an app's spec allows: 0 to its store's ``num_buckets - 1``.

A bucket field is declared once, statically, as :data:`fencepost.wire.fields.Bucket`
(or with its :data:`~fencepost.wire.fields.BUCKET_EXTENSION`), but how many buckets
there are is a setting of the store the app serves: the spec of each app gets its own
``maximum``, so that it allows exactly the buckets the store accepts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from fencepost.wire.fields import BUCKET_EXTENSION


def declaring_bucket_range(
    app: FastAPI, generate: Callable[[], dict[str, Any]]
) -> Callable[[], dict[str, Any]]:
    """``app.openapi`` wrapped so that every bucket field's maximum is the store's last bucket."""

    def openapi() -> dict[str, Any]:
        schema = generate()  # FastAPI caches it: the edit below must be idempotent
        last = app.state.store.config.num_buckets - 1
        stack: list[Any] = [schema]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                if node.get(BUCKET_EXTENSION) is True:
                    # An optional bucket is ``anyOf: [integer, null]``: bound the integer.
                    for number in [node, *node.get("anyOf", [])]:
                        if number.get("type") == "integer":
                            number["maximum"] = last
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
        return schema

    return openapi
