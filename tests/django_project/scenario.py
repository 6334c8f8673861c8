"""One scenario in a fresh Django process; prints one JSON line with what it saw.

``python -m tests.django_project.scenario NAME``: ``commit`` (an order and its
execution in one ``atomic()``), ``rollback`` (the same, then an exception),
``autocommit`` (a submit outside any ``atomic()``), ``savepoint`` (a refused submit
caught inside ``atomic()``, then the order committed), ``many`` (``submit_many`` of
two, committed).
"""

from __future__ import annotations

import json
import os
import sys

import django


def main(name: str) -> dict[str, object]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.django_project.settings")
    django.setup()
    from django.db import transaction

    from fencepost import ValidationError
    from fencepost.contrib.django import submit, submit_many
    from tests.django_project.shop.models import Order

    seen: dict[str, object] = {}
    if name == "commit":
        with transaction.atomic():
            order = Order.objects.create(item="book")
            seen["execution"] = submit("ship-order", {"order_id": order.pk}).id
        seen["order"] = order.pk
    elif name == "rollback":
        try:
            with transaction.atomic():
                order = Order.objects.create(item="book")
                seen["order"] = order.pk
                seen["execution"] = submit("ship-order", {"order_id": order.pk}).id
                raise RuntimeError("payment declined")
        except RuntimeError as exc:
            seen["error"] = str(exc)
    elif name == "autocommit":
        seen["execution"] = submit("ship-order", {"order_id": 7}, idempotency_key="k7").id
    elif name == "savepoint":
        with transaction.atomic():
            order = Order.objects.create(item="lamp")
            try:
                submit("ship-order", {"order_id": order.pk}, priority="high")
            except ValidationError as exc:
                seen["refused"] = exc.field
            seen["execution"] = submit("ship-order", {"order_id": order.pk}).id
        seen["order"] = order.pk
    elif name == "many":
        with transaction.atomic():
            done = submit_many([{"job": "ship-order", "inputs": {"order_id": n}} for n in (1, 2)])
        seen["executions"] = [execution.id for execution in done]
    else:
        raise SystemExit(f"unknown scenario {name!r}")
    return seen


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
