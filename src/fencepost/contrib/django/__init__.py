"""fencepost in a Django project.

::

    INSTALLED_APPS = [..., "fencepost.contrib.django"]
    FENCEPOST = {}          # optional: the store defaults to DATABASES["default"]

    from fencepost.contrib.django import submit

    with transaction.atomic():
        order = Order.objects.create(total=42)
        submit("ship-order", {"order_id": order.pk})   # committed with the order, or not at all

``manage.py fencepost_migrate`` creates fencepost's tables; ``manage.py fencepost_worker
shop.jobs:app`` runs a worker on the same store (with ``fencepost worker``'s flags).
The settings are described in :mod:`fencepost.contrib.django.config`, the
transactions in :mod:`fencepost.contrib.django.transactions`.
"""

from __future__ import annotations

from fencepost.contrib.django.runtime import close_store, get_store
from fencepost.contrib.django.transactions import submit, submit_many

__all__ = ["close_store", "get_store", "store_url", "submit", "submit_many"]


def store_url() -> str:
    """The store URL of ``settings.FENCEPOST``, without connecting.

    For a job module's ``fencepost.App(store_url())``: its store is then the
    project's, whoever imports it.
    """
    from fencepost.contrib.django.runtime import current_settings

    return current_settings().url
