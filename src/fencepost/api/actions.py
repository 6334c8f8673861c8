"""Routes for acting on many executions at once, and the record deletions leave.

``POST /executions/actions`` replays, cancels, retries now or deletes one batch of
the executions named by ``ids`` or matching a ``filter`` (``Store.act``); a caller
(the console, ``fencepost replay --job X``) repeats it with ``next_cursor`` until it
is null, and shows the progress between batches. Each batch is many short
transactions in the store, so the claims of workers go on meanwhile. Audited as the
caller's token. ``GET /deletions`` lists what deleted executions left behind.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from fencepost.api import problems as p
from fencepost.api.auth import Scope
from fencepost.api.deps import ActorDep, Limit, StoreDep, guarded
from fencepost.domain.errors import ValidationError
from fencepost.wire import actions as schemas

router = APIRouter()

#: The store's names of a request's fields that the API names otherwise.
_API_NAMES = {"after": "cursor"}


@router.post(
    "/executions/actions",
    response_model=schemas.BulkResult,
    **guarded(Scope.ADMIN, p.VALIDATION, p.BODY_TOO_LARGE, p.STORE_UNAVAILABLE),
)
def act(body: schemas.ActionRequest, store: StoreDep, actor: ActorDep) -> schemas.BulkResult:
    """Apply ``action`` to one batch of the executions named by ``ids`` or matching ``filter``.

    Exactly one of ``ids`` (1 to 10,000) and ``filter`` (``GET /executions``'s
    filters; ``{}``: every execution). The actions apply to: ``replay`` FAILED;
    ``cancel`` SCHEDULED and RETRY_WAIT (cancelled now) and RUNNING (a cancel command
    is requested); ``retry_now`` SCHEDULED and RETRY_WAIT due in the future (due now);
    ``delete`` SUCCEEDED, FAILED, CANCELLED and SKIPPED. A batch handles at most
    ``limit`` executions in id order after ``cursor``; repeat with ``next_cursor``
    until it is null. Others are ``skipped``, never an error. With ``dry_run`` nothing
    is written: ``matched`` counts the whole selection the action applies to and
    ``preview`` shows its first 20.
    """
    try:
        result = store.act(**body.act_arguments(), actor=actor)
    except ValidationError as exc:
        raise _named(exc) from None
    return schemas.BulkResult.from_domain(result)


def _named(exc: ValidationError) -> ValidationError:
    """A store's refusal with the API's name of the field: ``ids[3]`` is ``ids.3``, as
    the API names an item, and ``after`` is ``cursor``."""
    head, dot, rest = exc.field.replace("[", ".").replace("]", "").partition(".")
    return ValidationError(f"{_API_NAMES.get(head, head)}{dot}{rest}", exc.message)


@router.get(
    "/deletions",
    response_model=schemas.DeletionPage,
    **guarded(Scope.READ, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def deletions(
    store: StoreDep,
    cursor: Annotated[
        str | None,
        Query(
            pattern=schemas.DELETION_CURSOR_PATTERN,
            description="next_cursor of the previous page",
        ),
    ] = None,
    limit: Limit = 100,
) -> schemas.DeletionPage:
    """Records of deleted executions (which, its job and queue, its finished state, who
    deleted it and when), oldest first. Kept until ``prune`` passes their time."""
    try:
        page = store.deletions(limit=limit, after=cursor)
    except ValidationError as exc:
        raise _named(exc) from None
    return schemas.DeletionPage.from_domain(page)
