"""``Store``, ``App`` and ``Client`` take the same names for the same arguments.

``job_version`` is the deprecated name of ``version``: where a verb still takes it,
it counts as ``version`` here.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

import pytest

import fencepost
from fencepost import App
from fencepost.client.http import Client
from fencepost.client.verbs import count_by_state, query
from fencepost.domain.bulk import ActOptions
from fencepost.domain.claims import ClaimOptions
from fencepost.domain.history import HistoryOptions
from fencepost.domain.limits import LimitOptions
from fencepost.domain.schedules import SCHEDULE_FIELDS, ScheduleOptions
from fencepost.domain.slo import SloOptions
from fencepost.domain.states import State
from fencepost.domain.submission import SubmitOptions
from fencepost.store.base import Store
from fencepost.wire.actions import ActionRequest
from fencepost.wire.executions import SubmitItem
from fencepost.wire.flow import LimitRequest
from fencepost.wire.mapping import argument_name
from fencepost.wire.schedules import ScheduleCreate
from fencepost.wire.work import ClaimRequest
from tests.keywords import keywords


def names(verb: Callable[..., Any]) -> set[str]:
    """The named parameters of ``verb`` (``self`` aside; ``**kwargs`` only as the keys of
    the TypedDict it unpacks), old names as new."""
    given = keywords(verb)
    return {"version" if name == "job_version" else name for name in given}


#: The store's submit alone joins a caller's transaction: a connection object cannot
#: travel over HTTP, and App.submit has not taken it up (yet).
IN_PROCESS = {"connection"}
#: Over HTTP the submitter is the token's name, not an argument a client could set.
FROM_THE_TOKEN = {"actor"}


def test_the_three_submits_take_the_same_names() -> None:
    assert names(App.submit) == names(Store.submit) - IN_PROCESS
    assert names(Client.submit) == names(App.submit) - FROM_THE_TOKEN
    assert names(Store.submit) >= IN_PROCESS | FROM_THE_TOKEN


def unpacked(verb: Callable[..., Any]) -> Any:
    """The TypedDict ``verb``'s ``**kwargs`` unpack (None when they are not typed so)."""
    for parameter in inspect.signature(verb).parameters.values():
        if parameter.kind is parameter.VAR_KEYWORD:
            hint = typing.get_type_hints(verb, include_extras=True).get(parameter.name)
            if typing.get_origin(hint) is typing.Unpack:
                return typing.get_args(hint)[0]
    return None


def every_submit() -> list[Callable[..., Any]]:
    from fencepost.client import verbs
    from fencepost.client.aio import AsyncClient
    from fencepost.contrib.django import transactions
    from fencepost.store.asyncstore import AsyncStore

    return [
        Store.submit,
        Store.submit_or_find,
        AsyncStore.submit,
        AsyncStore.submit_or_find,
        App.submit,
        Client.submit,
        AsyncClient.submit,
        verbs.submit,
        transactions.submit,
    ]


@pytest.mark.parametrize("verb", every_submit(), ids=lambda v: v.__qualname__)
def test_every_submit_takes_the_options_declared_once(verb: Callable[..., Any]) -> None:
    assert unpacked(verb) is SubmitOptions
    own = keywords(verb) - set(SubmitOptions.__annotations__)
    assert own <= {"job", "inputs"} | IN_PROCESS | FROM_THE_TOKEN | {"using"}, own


def test_an_option_no_submit_takes_is_refused_by_name() -> None:
    store = fencepost.connect("memory://")
    try:
        for verb in (store.submit, store.submit_or_find):
            with pytest.raises(TypeError, match=r"got an unexpected keyword argument 'colour'"):
                verb("job", colour="red")  # type: ignore[call-arg]
        assert sum(store.count_by_state().values()) == 0
    finally:
        store.close()
    from fencepost.client import verbs

    with pytest.raises(TypeError, match=r"submit\(\) .* 'colour'"):
        next(verbs.submit("job", colour="red"))  # type: ignore[call-arg]


def every_add_schedule() -> list[Callable[..., Any]]:
    from fencepost.client import verbs
    from fencepost.client.aio import AsyncClient
    from fencepost.store.asyncstore import AsyncStore

    return [
        Store.add_schedule,
        AsyncStore.add_schedule,
        App.schedule,
        Client.add_schedule,
        AsyncClient.add_schedule,
        verbs.add_schedule,
    ]


@pytest.mark.parametrize("verb", every_add_schedule(), ids=lambda v: v.__qualname__)
def test_every_add_schedule_takes_the_options_declared_once(verb: Callable[..., Any]) -> None:
    assert unpacked(verb) is ScheduleOptions
    assert keywords(verb) - set(ScheduleOptions.__annotations__) == {"job"}


def test_a_schedule_stores_each_option_it_takes() -> None:
    stored = set(SCHEDULE_FIELDS) - {"job"}
    taken = {"job_version" if n == "version" else n for n in ScheduleOptions.__annotations__}
    assert taken - {"id"} == stored


def test_a_schedule_option_no_verb_takes_is_refused_by_name() -> None:
    store = fencepost.connect("memory://")
    try:
        with pytest.raises(TypeError, match=r"add_schedule\(\) .* 'colour'"):
            store.add_schedule("job", every=60, colour="red")  # type: ignore[call-arg]
        assert store.schedules().items == []
    finally:
        store.close()
    from fencepost.client import verbs

    with pytest.raises(TypeError, match=r"add_schedule\(\) .* 'colour'"):
        next(verbs.add_schedule("job", every=60, colour="red"))  # type: ignore[call-arg]


def test_a_submit_body_carries_every_argument() -> None:
    carried = {argument_name(field) for field in SubmitItem.model_fields}
    assert carried == names(Store.submit) - IN_PROCESS - FROM_THE_TOKEN


def test_adding_a_schedule_takes_the_same_names() -> None:
    assert names(App.schedule) == names(Store.add_schedule)
    carried = {argument_name(field) for field in ScheduleCreate.model_fields}
    assert carried == names(Store.add_schedule)  # what Client.add_schedule sends


def test_app_schedule_can_store_a_schedule_paused() -> None:
    app = App("memory://")

    @app.job("tick")
    def tick() -> None: ...

    handle = app.schedule("tick", every=60, paused=True)
    assert handle.schedule.paused


#: A client pages through one filter at a time; several buckets at once is for workers.
WORKER_ONLY = {"buckets"}


def test_the_queries_take_the_same_names() -> None:
    from fencepost.client.aio import AsyncClient
    from fencepost.store.asyncstore import AsyncStore

    assert names(App.query) == names(Store.query) == names(AsyncStore.query)
    assert names(Client.query) == names(AsyncClient.query) == names(Store.query) - WORKER_ONLY


def test_a_filter_no_verb_takes_is_refused_by_name() -> None:
    store = fencepost.connect("memory://")
    try:
        with pytest.raises(TypeError, match=r"query\(\) got an unexpected keyword argument 'jobs'"):
            store.query(jobs=["x"])
        with pytest.raises(TypeError, match=r"count_by_state\(\) .* 'limit'"):
            store.count_by_state(limit=5)
        assert store.query(job="x", buckets=[0]).items == []
    finally:
        store.close()
    with pytest.raises(TypeError, match=r"query\(\) .* 'buckets'"):
        next(query(buckets=[1]))  # a store's filter only
    with pytest.raises(TypeError, match=r"count_by_state\(\) .* 'after'"):
        next(count_by_state(after="x"))


def test_the_listing_s_query_parameters_are_the_filters() -> None:
    from fencepost.api.executions import ExecutionFilterQuery
    from fencepost.domain.filters import ExecutionFilters

    assert set(ExecutionFilterQuery.model_fields) == set(ExecutionFilters.__annotations__)


#: Only the store claims named executions (one occurrence of a schedule): the worker
#: protocol does not carry ids.
BY_ID = {"ids"}


def declared_once() -> list[Any]:
    """Each verb that takes options declared once: the TypedDict it unpacks, and the
    keywords it takes beside them."""
    from fencepost.client import verbs, worker_verbs
    from fencepost.client.aio import AsyncClient
    from fencepost.store.asyncstore import AsyncStore
    from fencepost.worker.source import WorkSource

    table: list[tuple[Any, list[Callable[..., Any]], set[str]]] = [
        (
            ClaimOptions,
            [
                Store.claim,
                AsyncStore.claim,
                Client.claim,
                worker_verbs.claim,
                worker_verbs.claimed,
                WorkSource.claim,
            ],
            {"owner"} | BY_ID,
        ),
        (
            LimitOptions,
            [
                Store.set_limit,
                AsyncStore.set_limit,
                App.set_limit,
                Client.set_limit,
                AsyncClient.set_limit,
                verbs.set_limit,
            ],
            {"scope"} | FROM_THE_TOKEN,  # over HTTP the actor is the token's name
        ),
        (
            ActOptions,
            [Store.act, AsyncStore.act, App.act, Client.act, AsyncClient.act, verbs.act],
            {"action"} | FROM_THE_TOKEN,
        ),
        (
            HistoryOptions,
            [
                Store.history,
                AsyncStore.history,
                App.history,
                Client.history,
                AsyncClient.history,
                verbs.history,
            ],
            set(),
        ),
        (
            SloOptions,
            [Store.slo, AsyncStore.slo, Client.slo, AsyncClient.slo, verbs.slo],
            set(),
        ),
    ]
    return [
        pytest.param(options, verb, others, id=f"{options.__name__}-{verb.__qualname__}")
        for options, verbs_of, others in table
        for verb in verbs_of
    ]


@pytest.mark.parametrize(("options", "verb", "others"), declared_once())
def test_every_verb_takes_its_options_declared_once(
    options: Any, verb: Callable[..., Any], others: set[str]
) -> None:
    assert unpacked(verb) is options
    assert keywords(verb) - set(options.__annotations__) <= others


def test_a_claim_body_carries_every_option() -> None:
    carried = {argument_name(field) for field in ClaimRequest.model_fields}
    assert carried == {"owner", *ClaimOptions.__annotations__}


def test_a_claim_option_no_verb_takes_is_refused_by_name() -> None:
    store = fencepost.connect("memory://")
    try:
        store.submit("job")
        with pytest.raises(TypeError, match=r"claim\(\) .* 'colour'"):
            store.claim("w", colour="red")  # type: ignore[call-arg]
        assert store.count_by_state()[State.SCHEDULED] == 1  # nothing claimed
        assert [lease.job for lease in store.claim("w", limit=5, ttl=10)] == ["job"]
    finally:
        store.close()
    from fencepost.client import worker_verbs

    with pytest.raises(TypeError, match=r"claim\(\) .* 'colour'"):
        next(worker_verbs.claim("w", colour="red"))  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"claim\(\) .* 'ids'"):
        next(worker_verbs.claim("w", ids=["x"]))  # type: ignore[call-arg]


def test_a_limit_body_carries_every_option() -> None:
    assert set(LimitRequest.model_fields) == set(LimitOptions.__annotations__)


def test_a_limit_option_no_verb_takes_is_refused_by_name() -> None:
    store = fencepost.connect("memory://")
    try:
        with pytest.raises(TypeError, match=r"set_limit\(\) .* 'colour'"):
            store.set_limit("job:a", rate="1/s", colour="red")  # type: ignore[call-arg]
        assert store.limits() == []
        assert store.set_limit("job:a", rate="2/s", actor="ops").updated_by == "ops"
    finally:
        store.close()
    from fencepost.client import verbs

    with pytest.raises(TypeError, match=r"set_limit\(\) .* 'colour'"):
        next(verbs.set_limit("job:a", rate="1/s", colour="red"))  # type: ignore[call-arg]


def test_an_action_body_carries_every_option() -> None:
    # The body names the batch's start "cursor" (the previous batch's next_cursor).
    sent = {"after" if name == "cursor" else name for name in ActionRequest.model_fields}
    assert sent == {"action", *ActOptions.__annotations__}


def test_an_act_option_no_verb_takes_is_refused_by_name() -> None:
    store = fencepost.connect("memory://")
    try:
        execution = store.submit("job")
        with pytest.raises(TypeError, match=r"act\(\) .* 'colour'"):
            store.act("cancel", ids=[execution.id], actor="ops", colour="red")  # type: ignore[call-arg]
        assert store.get(execution.id).state is State.SCHEDULED
        assert store.act("cancel", ids=[execution.id], actor="ops").done == 1
    finally:
        store.close()
    from fencepost.client import verbs

    with pytest.raises(TypeError, match=r"act\(\) .* 'colour'"):
        next(verbs.act("cancel", ids=["x"], colour="red"))  # type: ignore[call-arg]


def test_get_history_takes_the_same_options() -> None:
    from fencepost.api.history import history as route

    query = set(inspect.signature(route).parameters) - {"store"}
    assert query == set(HistoryOptions.__annotations__)


def test_a_history_option_no_verb_takes_is_refused_by_name() -> None:
    store = fencepost.connect("memory://")
    try:
        with pytest.raises(TypeError, match=r"history\(\) .* 'colour'"):
            store.history(window="day", colour="red")  # type: ignore[call-arg]
        assert len(store.history(window="day").points) == 96
    finally:
        store.close()
    from fencepost.client import verbs

    with pytest.raises(TypeError, match=r"history\(\) .* 'colour'"):
        next(verbs.history(colour="red"))  # type: ignore[call-arg]
