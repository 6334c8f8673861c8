"""What a real ``fencepost serve`` records and hands out, on SQLite and PostgreSQL.

* the audit actor of an HTTP action is the name of the token that made it;
* one takeover rule: ``POST /claims`` takes over a 1 s lease 1.3 s after it was claimed,
  although the service's reaper has already timed that attempt out.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import fencepost
from fencepost import State
from fencepost.domain.states import AttemptOutcome
from tests.integration.test_service_processes import Processes, free_port, wait_ready
from tests.integration.test_worker_processes import wait_until

pytestmark = pytest.mark.slow

ALICE = "alice-admin-token-0123456789"
WORKER = "worker-work-token-0123456789"
TOKENS = f"""
tokens:
  - name: alice
    token: {ALICE}
    scopes: [admin]
  - name: workers
    token: {WORKER}
    scopes: [work]
"""


@pytest.fixture
def service(tmp_path: Path, shared_db: str) -> Iterator[str]:
    """A ``fencepost serve`` with two named tokens and its own reaper (no embedded
    workers): its URL."""
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(TOKENS, encoding="utf-8")
    processes = Processes(tmp_path)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(
            url,
            processes.start(
                "serve", "serve", "--db", shared_db, "--port", str(port), "--workers", "0",
                "--tokens", str(tokens),
            ),
        )  # fmt: skip
        yield url
    finally:
        processes.close()


def test_a_cancel_through_http_with_token_alice_is_audited_as_alice(
    service: str, shared_db: str
) -> None:
    with fencepost.connect(shared_db) as store:
        execution_id = store.submit("work").id
        response = httpx.delete(
            f"{service}/executions/{execution_id}",
            headers={"Authorization": f"Bearer {ALICE}"},
            timeout=10,
        )
        assert response.status_code == 200, response.text
        last = store.transitions(execution_id)[-1]
    assert (last.to_state, last.actor) == (State.CANCELLED, "alice")


def test_post_claims_takes_over_a_1s_lease_13s_after_it_was_claimed(
    service: str, shared_db: str
) -> None:
    """With the service's reaper running, the reaper times the attempt out first (waited
    for below, so this is the path tested); the claim then still gets the execution."""
    headers = {"Authorization": f"Bearer {WORKER}"}
    with fencepost.connect(shared_db) as store, httpx.Client(headers=headers) as http:
        execution_id = store.submit("work", max_attempts=3).id
        first = http.post(f"{service}/claims", json={"owner": "a", "ttl_seconds": 1}, timeout=10)
        claimed_at = time.monotonic()
        assert [lease["epoch"] for lease in first.json()["leases"]] == [1], first.text
        wait_until(lambda: store.get(execution_id).state is State.RETRY_WAIT, 20, "the reaper")
        time.sleep(max(0.0, claimed_at + 1.3 - time.monotonic()))  # the scenario's instant
        second = http.post(f"{service}/claims", json={"owner": "b", "ttl_seconds": 30}, timeout=10)
        assert second.status_code == 200, second.text
        leases = second.json()["leases"]
        assert [(lease["execution_id"], lease["epoch"]) for lease in leases] == [(execution_id, 2)]
        outcomes = [a.outcome for a in store.attempts(execution_id)]
    assert outcomes == [AttemptOutcome.TIMED_OUT, None], "the lost attempt still counts"
