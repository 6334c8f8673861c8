"""The job module: ``manage.py fencepost_worker tests.django_project.shop.jobs:app``."""

from __future__ import annotations

import fencepost
from fencepost.contrib.django import store_url

app = fencepost.App(store_url())


@app.job("ship-order")
def ship_order(order_id: int) -> dict[str, int]:
    from tests.django_project.shop.models import Order

    updated = Order.objects.filter(pk=order_id).update(shipped=True)
    return {"shipped": updated}
