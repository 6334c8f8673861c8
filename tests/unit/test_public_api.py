"""The public surface: what `import fencepost` offers, and `connect`'s URLs."""

from __future__ import annotations

import pytest

import fencepost
from fencepost import ValidationError, connect
from fencepost.store.memory import MemoryStore
from fencepost.store.sqlite import SqliteStore
from fencepost.testing import ManualClock


def test_all_is_sorted_and_importable() -> None:
    assert fencepost.__all__ == sorted(fencepost.__all__)
    for name in fencepost.__all__:
        assert hasattr(fencepost, name), name


def test_error_tree_has_one_root() -> None:
    for name in (
        "StaleLease",
        "NotFound",
        "InvalidTransition",
        "NotRunning",
        "IdempotencyConflict",
        "ValidationError",
        "ResultInvalid",
        "StoreUnavailable",
    ):
        assert issubclass(getattr(fencepost, name), fencepost.FencepostError), name
    assert issubclass(fencepost.ResultInvalid, fencepost.ValidationError)


def test_command_names_are_exported() -> None:
    assert {"Command", "CommandKind", "CommandState", "NotRunning"} <= set(fencepost.__all__)
    assert [k.value for k in fencepost.CommandKind] == ["cancel", "pause", "resume"]
    assert [s.value for s in fencepost.CommandState] == [s.name for s in fencepost.CommandState]


def test_connect_memory_and_sqlite(tmp_path: object) -> None:
    with connect("memory://") as store:
        assert isinstance(store, MemoryStore)
    with connect(f"sqlite:///{tmp_path}/a.db?busy_timeout=2", clock=ManualClock(0)) as store:
        assert isinstance(store, SqliteStore)
        assert store.path.endswith("/a.db")


_PG = "postgresql://nobody@127.0.0.1:1/test"
_IDLE = "url.idle_in_transaction_timeout"


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("postgres-ish://x", "url"),
        ("sqlite://relative.db", "url"),
        ("sqlite:///:memory:", "url"),
        ("sqlite:///x.db?busy_timeout=soon", "url.busy_timeout"),
        # Refused before any connection is tried (nothing listens on port 1).
        (f"{_PG}?idle_in_transaction_timeout=2147484", _IDLE),
        (
            f"{_PG}?idle_in_transaction_timeout=99999999999999999999",
            "url.idle_in_transaction_timeout",
        ),
        (f"{_PG}?idle_in_transaction_timeout=-1", _IDLE),
        (f"{_PG}?idle_in_transaction_timeout=", _IDLE),
        (f"{_PG}?idle_in_transaction_timeout=%00", _IDLE),
        (f"{_PG}?idle_in_transaction_timeout=%ED%A0%80", _IDLE),
        (f"{_PG}?idle_in_transaction_timeout=" + "9" * 5000, _IDLE),
        ("", "url"),
    ],
)
def test_bad_urls_name_the_problem(url: str, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        connect(url)
    assert caught.value.field == field


def test_store_settings_are_validated() -> None:
    with pytest.raises(ValidationError) as caught:
        connect("memory://", num_buckets=0)
    assert caught.value.field == "num_buckets"
    with pytest.raises(ValidationError) as caught:
        connect("memory://", max_payload_bytes=0)
    assert caught.value.field == "max_payload_bytes"


def test_one_default_concurrency_for_workers_and_the_service(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from fencepost.api.service import ServiceOptions
    from fencepost.cli.main import main

    assert fencepost.WorkerOptions().concurrency == ServiceOptions().concurrency == 8
    for command in ("worker", "serve"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "(default 8" in " ".join(capsys.readouterr().out.split())


def test_a_second_replay_says_the_execution_is_no_dead_letter() -> None:
    store = connect("memory://")
    e = store.submit("x", max_attempts=1)
    (lease,) = store.claim("w", limit=1, ttl=30)
    store.fail(lease, "boom")
    store.replay(e.id)
    with pytest.raises(fencepost.InvalidTransition) as refused:
        store.replay(e.id)
    assert str(refused.value) == (
        f"execution {e.id} is SCHEDULED: only a FAILED execution (a dead letter) can be "
        "replayed; one replayed already is waiting to run or has run"
    )
