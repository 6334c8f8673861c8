"""The submit and schedule arguments the client takes, checked before they are sent.

``Client`` takes the names ``Store`` and ``App`` take (``version``, ``delay``,
``timeout``, ``every``, ``misfire_grace``, ...); the wire models
(:mod:`fencepost.wire`) send them under the API's names. ``job_version``, the old
name of ``version``, is still taken for one release, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from fencepost.domain.errors import ValidationError
from fencepost.domain.submission import SUBMIT_ARGUMENTS
from fencepost.wire.executions import SubmitItem

#: The deprecated name of the ``version`` argument.
OLD_VERSION = "job_version"


def renamed(
    arguments: Mapping[str, Any], *, where: str = "", stacklevel: int = 1
) -> dict[str, Any]:
    """``arguments`` with ``job_version`` (deprecated, warned of) given as ``version``.

    ``where`` prefixes the field an error names (``[3].`` for an item of a batch);
    ``stacklevel`` counts the frames from the caller to the code that used the old name.
    """
    given = dict(arguments)
    if OLD_VERSION not in given:
        return given
    warnings.warn(
        "job_version is deprecated: give version instead",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )
    old = given.pop(OLD_VERSION)
    if given.get("version") is not None:
        raise ValidationError(f"{where}{OLD_VERSION}", "is the old name of version: give one")
    return given | {"version": old}


def submit_item(request: object, index: int, *, stacklevel: int = 1) -> dict[str, Any]:
    """One ``submit_many`` item as the body of ``POST /executions/batch`` holds it.

    Refused as the store refuses it, with a :class:`ValidationError` naming the
    field (``[3].job``): an item that is not a mapping, an unknown argument, no job.
    """
    where = f"[{index}]"
    if not isinstance(request, Mapping):
        raise ValidationError(where, f"must be a mapping of submit arguments, got {request!r}")
    unknown = sorted(set(request) - SUBMIT_ARGUMENTS)
    if unknown:
        raise ValidationError(f"{where}.{unknown[0]}", "is not an argument of submit")
    if "job" not in request:
        raise ValidationError(f"{where}.job", "is required")
    if OLD_VERSION in request:  # else nothing to rename
        request = renamed(request, where=f"{where}.", stacklevel=stacklevel + 1)
    try:
        return SubmitItem.body(request)
    except ValidationError as exc:
        raise ValidationError(f"{where}.{exc.field}", exc.message) from None


def claim_queues(queues: object) -> list[Any] | dict[Any, Any]:
    """A claim's ``queues`` as ``POST /claims`` holds them: a list of names, or an object.

    The service checks the names and limits (a 422 naming ``queues``); a string is
    refused here, as ``Store.claim`` refuses it, rather than sent as one name per letter.
    """
    if isinstance(queues, str) or not isinstance(queues, Iterable):
        raise ValidationError("queues", f"must be a collection of names, got {queues!r}")
    return dict(queues) if isinstance(queues, Mapping) else list(queues)
