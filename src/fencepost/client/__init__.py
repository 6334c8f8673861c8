"""The HTTP client SDK: the store's verbs against a ``fencepost serve``.

:class:`Client` serves remote submitters, operator scripts and remote workers
(``fencepost worker --server URL``, or ``Worker(Client(url), registry)``);
:class:`AsyncClient` the same verbs (but the worker protocol's) as coroutines.
Problems the service answers with are raised as the store's own errors
(:mod:`fencepost.client.errors`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fencepost.domain.errors import ApiError, Forbidden, Unauthorized

if TYPE_CHECKING:
    from fencepost.client.aio import AsyncClient
    from fencepost.client.http import Client

#: The environment variable ``fencepost worker --server`` reads its token from.
TOKEN_ENV = "FENCEPOST_TOKEN"

__all__ = ["TOKEN_ENV", "ApiError", "AsyncClient", "Client", "Forbidden", "Unauthorized"]


def __getattr__(name: str) -> Any:
    # The client (and httpx) load on first use: ``fencepost worker --db`` never needs them.
    if name == "Client":
        from fencepost.client.http import Client

        return Client
    if name == "AsyncClient":
        from fencepost.client.aio import AsyncClient

        return AsyncClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
