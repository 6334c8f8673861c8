"""``version`` in ``Store.submit`` and the schedule verbs; ``job_version=``, its old name."""

from __future__ import annotations

import pytest

import fencepost
from fencepost.domain.errors import ValidationError


@pytest.fixture
def store() -> fencepost.Store:
    return fencepost.connect("memory://")


def test_inputs_are_positional_and_version_pins(store: fencepost.Store) -> None:
    execution = store.submit("job", {"n": 1}, version=2)
    assert (execution.inputs, execution.job_version) == ({"n": 1}, 2)


def test_job_version_still_works_and_warns(store: fencepost.Store) -> None:
    with pytest.warns(DeprecationWarning, match="version="):
        execution = store.submit("job", job_version=3)
    assert execution.job_version == 3
    with pytest.warns(DeprecationWarning, match="version="):
        found, created = store.submit_or_find("job", job_version=4)
    assert (found.job_version, created) == (4, True)
    with pytest.warns(DeprecationWarning, match="version="):
        [many] = store.submit_many([{"job": "job", "job_version": 5}])
    assert many.job_version == 5


def test_the_warning_points_at_the_caller(store: fencepost.Store) -> None:
    with pytest.warns(DeprecationWarning, match="version=") as caught:
        store.submit("job", job_version=1)
    assert caught[0].filename == __file__


def test_both_names_at_once_are_refused(store: fencepost.Store) -> None:
    warned = pytest.warns(DeprecationWarning, match="version=")
    with warned, pytest.raises(ValidationError) as refused:
        store.submit_or_find("job", version=1, job_version=1)
    assert refused.value.field == "version"
    assert store.query().items == []


def test_a_bad_version_names_the_stored_field(store: fencepost.Store) -> None:
    with pytest.raises(ValidationError) as refused:
        store.submit("job", version=0)
    assert refused.value.field == "job_version"


def test_other_unknown_keywords_are_a_type_error(store: fencepost.Store) -> None:
    with pytest.raises(TypeError, match="versoin"):
        store.submit("job", versoin=1)


def test_schedules_take_version_and_job_version_still_works(store: fencepost.Store) -> None:
    schedule = store.add_schedule("job", every=60, id="s", version=2)
    assert schedule.job_version == 2
    with pytest.warns(DeprecationWarning, match="version=") as caught:
        old = store.add_schedule("job", every=60, id="t", job_version=3)
    assert (old.job_version, caught[0].filename) == (3, __file__)
    assert store.update_schedule("s", version=4).job_version == 4
    with pytest.warns(DeprecationWarning, match="version="):
        assert store.update_schedule("s", job_version=5).job_version == 5


def test_schedules_refuse_both_names_and_unknown_keywords(store: fencepost.Store) -> None:
    warned = pytest.warns(DeprecationWarning, match="version=")
    with warned, pytest.raises(ValidationError) as refused:
        store.add_schedule("job", every=60, version=1, job_version=1)
    assert refused.value.field == "version"
    with pytest.raises(TypeError, match="versoin"):
        store.add_schedule("job", every=60, versoin=1)
    assert store.schedules().items == []
