"""``PYTHON bench/peers/enqueue.py SYSTEM FIRST COUNT [--lead SECONDS]``: one bulk enqueue.

``SYSTEM`` is ``fencepost``, ``pgqueuer`` or ``huey``; PYTHON is that system's
interpreter (the project's ``.venv`` for fencepost, ``bench/peers/.venvs/NAME``
otherwise). The app module ``SYSTEM_app`` is imported by its name, never run as
``__main__``: Huey names a task after its module, and a consumer knows it only as
``huey_app.noop``.

Stores jobs with ids ``FIRST .. FIRST+COUNT-1``, due now, or all due at one instant T
``--lead`` seconds after the enqueue starts (it picks T itself), then prints one JSON
line: ``{"seconds": time spent enqueueing, "at": T or null, "enqueued": jobs
acknowledged, "error": null or what the system raised}``. A system that raises stops the
enqueue there; the jobs acknowledged before it are ids ``FIRST .. FIRST+enqueued-1``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import time

from peers_common import progress


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("system", choices=["fencepost", "pgqueuer", "huey"])
    parser.add_argument("first", type=int)
    parser.add_argument("count", type=int)
    parser.add_argument("--lead", type=float)
    args = parser.parse_args()
    app = importlib.import_module(f"{args.system}_app")
    error = None
    try:
        app.enqueue(args.first, args.count, args.lead)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    seconds = None if progress.started is None else time.perf_counter() - progress.started
    answer = {"seconds": seconds, "at": progress.at, "enqueued": progress.enqueued, "error": error}
    print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
