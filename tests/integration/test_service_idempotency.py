"""Concurrent submits with one ``Idempotency-Key`` against a real ``fencepost serve``."""

from __future__ import annotations

import collections
import signal
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.integration.test_service_processes import (
    TOKEN,
    Processes,
    free_port,
    processes,
    wait_ready,
)

pytestmark = pytest.mark.slow

__all__ = ["processes"]  # the fixture, imported for the test below


def test_200_concurrent_same_key_submits_get_one_201(processes: Processes, shared_db: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    service = processes.start(
        "serve", "serve", "--db", shared_db, "--port", str(port), "--workers", "0",
        env={"FENCEPOST_TOKENS": f"{TOKEN}=submit,read"},
    )  # fmt: skip
    wait_ready(url, service)
    headers = {"Authorization": f"Bearer {TOKEN}", "Idempotency-Key": "order-42"}

    def submit(_: int) -> tuple[int, str]:
        with httpx.Client(base_url=url, timeout=30) as http:
            response = http.post("/executions", json={"job": "report"}, headers=headers)
        return response.status_code, response.json()["id"]

    with ThreadPoolExecutor(max_workers=32) as pool:
        answers = list(pool.map(submit, range(200)))
    statuses = collections.Counter(status for status, _ in answers)
    assert statuses == {201: 1, 200: 199}
    assert len({eid for _, eid in answers}) == 1
    page = httpx.get(f"{url}/executions", headers=headers).json()
    assert len(page["items"]) == 1
    service.send_signal(signal.SIGTERM)
    assert service.wait(30) == 0, processes.log("serve")
