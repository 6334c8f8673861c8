"""The HTTP client SDK: the store's verbs against a ``fencepost serve``.

:class:`Client` serves remote submitters, operator scripts and remote workers
(``fencepost worker --server URL``, or ``Worker(Client(url), registry)``).
Problems the service answers with are raised as the store's own errors
(:mod:`fencepost.client.errors`).
"""

from __future__ import annotations

from fencepost.client.errors import ApiError, Forbidden, Unauthorized
from fencepost.client.http import TOKEN_ENV, Client

__all__ = ["TOKEN_ENV", "ApiError", "Client", "Forbidden", "Unauthorized"]
