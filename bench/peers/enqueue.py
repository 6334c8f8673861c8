"""``PYTHON bench/peers/enqueue.py SYSTEM FIRST COUNT [--lead SECONDS]``: one bulk enqueue.

``SYSTEM`` is ``fencepost``, ``pgqueuer`` or ``huey``; PYTHON is that system's
interpreter (the project's ``.venv`` for fencepost, ``bench/peers/.venvs/NAME``
otherwise). The app module ``SYSTEM_app`` is imported by its name, never run as
``__main__``: Huey names a task after its module, and a consumer knows it only as
``huey_app.noop``.

Stores jobs with ids ``FIRST .. FIRST+COUNT-1``, due now, or all due at one instant T
``--lead`` seconds after the enqueue starts (it picks T itself), then prints one JSON
line: ``{"seconds": time spent enqueueing, "at": T or null}``.
"""

from __future__ import annotations

import argparse
import importlib
import json


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("system", choices=["fencepost", "pgqueuer", "huey"])
    parser.add_argument("first", type=int)
    parser.add_argument("count", type=int)
    parser.add_argument("--lead", type=float)
    args = parser.parse_args()
    app = importlib.import_module(f"{args.system}_app")
    print(json.dumps(app.enqueue(args.first, args.count, args.lead)), flush=True)


if __name__ == "__main__":
    main()
