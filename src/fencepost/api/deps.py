"""What every router shares: the store dependency, paging parameters and route guards."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Depends, Query, Request

from fencepost.api import problems as p
from fencepost.api.auth import Scope, require
from fencepost.jobs.registry import JobRegistry
from fencepost.store.base import Store

#: The largest page a list endpoint returns.
MAX_PAGE = 1000


def get_store(request: Request) -> Store:
    """The store the application was created with."""
    store: Store = request.app.state.store
    return store


def get_registry(request: Request) -> JobRegistry | None:
    """The registered jobs submits are checked against; None: any job name is accepted."""
    registry: JobRegistry | None = request.app.state.registry
    return registry


StoreDep = Annotated[Store, Depends(get_store)]
RegistryDep = Annotated[JobRegistry | None, Depends(get_registry)]
Cursor = Annotated[str | None, Query(description="next_cursor of the previous page")]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE)]
Order = Annotated[
    Literal["asc", "desc"],
    Query(description="by id, which is by creation: asc (oldest first) or desc (newest first)"),
]


def guarded(scope: Scope, *kinds: p.Kind, **extra: dict[str, Any]) -> dict[str, Any]:
    """Route keyword arguments: require ``scope`` and declare its problems and ``kinds``.

    ``extra`` adds non-problem responses (``**guarded(Scope.READ, p.NOT_FOUND,
    **{"304": {...}})``). Reads need no CSRF check, so they do not declare it.
    """
    auth = (p.UNAUTHORIZED, p.FORBIDDEN) if scope is Scope.READ else (p.UNAUTHORIZED, p.CSRF)
    responses = p.responses(*kinds, *auth)
    responses.update(extra)
    return {"dependencies": [Depends(require(scope))], "responses": responses}
