"""A remote worker (``fencepost worker --server``) loads the sync client and nothing of
the async one: no ``fencepost.client.aio``, no other event loop library, and of the
client's modules only those the sync ``Client`` runs on. Measured from inside a job
that the remote worker runs, on real ``serve`` and ``worker`` processes.
"""

from __future__ import annotations

import pytest

import fencepost
from fencepost import State
from tests.integration.test_service_processes import (
    TOKEN,
    Processes,
    free_port,
    processes,
    wait_ready,
)
from tests.integration.test_worker_processes import wait_until

pytestmark = pytest.mark.slow

__all__ = ["processes"]  # fixture

PROBE_APP = "tests.integration._client_probe_app:app"

#: The client's modules the sync ``Client`` (so a remote worker) runs on.
SYNC_CLIENT = {
    "fencepost.client",
    "fencepost.client.arguments",
    "fencepost.client.errors",
    "fencepost.client.exchange",
    "fencepost.client.http",
    "fencepost.client.retries",
    "fencepost.client.verbs",
    "fencepost.client.worker_verbs",
}


def test_a_remote_worker_loads_nothing_of_the_async_client(
    shared_db: str, processes: Processes
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    service = processes.start(
        "serve", "serve", PROBE_APP, "--db", shared_db, "--port", str(port), "--workers", "0",
        env={"FENCEPOST_TOKENS": f"{TOKEN}=work,submit,read"},
    )  # fmt: skip
    wait_ready(url, service)
    with fencepost.connect(shared_db) as store:
        probe = store.submit("loaded-module-names").id
        processes.start(
            "remote", "worker", PROBE_APP, "--server", url, "--owner", "remote",
            env={"FENCEPOST_TOKEN": TOKEN},
        )  # fmt: skip
        done = wait_until(
            lambda: (e := store.get(probe)).state is State.SUCCEEDED and e, 30, "the probe job"
        )
    modules = set(done.result)
    assert "fencepost.client.http" in modules  # the probe did run in a remote worker
    assert {m for m in modules if m.startswith("fencepost.client")} == SYNC_CLIENT
    assert not {"trio", "sniffio"} & {m.partition(".")[0] for m in modules}
