"""What every router shares: the store dependency, paging parameters and route guards."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Depends, Query, Request

from fencepost.api import problems as p
from fencepost.api.auth import ANONYMOUS_ADMIN, AUTHENTICATED, Auth, Principal, Scope, require
from fencepost.store.base import Store

#: The largest page a list endpoint returns.
MAX_PAGE = 1000


def get_store(request: Request) -> Store:
    """The store the application was created with."""
    store: Store = request.app.state.store
    return store


#: The audit actor of a request made with auth off (no tokens configured).
API_ACTOR = "api"


def get_actor(request: Request) -> str:
    """The audit actor of ``request``: the name of the token that made it.

    A dashboard request is its signed-in token's. With auth off (no tokens) every
    request is :data:`API_ACTOR`. The caller is the one the guard (or the route's
    :func:`~fencepost.api.auth.require` dependency) has already authenticated.
    """
    checked: tuple[Principal, bool] | None = request.scope.get(AUTHENTICATED)
    if checked is None:
        auth: Auth = request.app.state.auth
        checked = auth.authenticate(request)
    principal = checked[0]
    return API_ACTOR if principal is ANONYMOUS_ADMIN else principal.name


StoreDep = Annotated[Store, Depends(get_store)]
ActorDep = Annotated[str, Depends(get_actor)]
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
