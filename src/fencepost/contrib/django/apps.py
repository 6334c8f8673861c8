"""The Django app: ``INSTALLED_APPS += ["fencepost.contrib.django"]``."""

from __future__ import annotations

from django.apps import AppConfig


class FencepostConfig(AppConfig):
    """fencepost in a Django project: its settings are checked when Django starts.

    The store itself is opened on first use (:func:`fencepost.contrib.django.get_store`),
    so ``manage.py`` commands that never submit never connect to it.
    """

    name = "fencepost.contrib.django"
    label = "fencepost"
    verbose_name = "fencepost"

    def ready(self) -> None:
        from fencepost.contrib.django.config import store_settings

        store_settings()  # a bad FENCEPOST setting fails at start, not at the first submit
