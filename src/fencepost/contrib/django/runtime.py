"""The process's one store: opened on first use from ``settings.FENCEPOST``, closed at exit."""

from __future__ import annotations

import atexit
import threading
from typing import TYPE_CHECKING

from django.core.exceptions import ImproperlyConfigured

from fencepost.contrib.django.config import SETTING, StoreSettings, store_settings
from fencepost.domain.errors import NotMigrated, ValidationError

if TYPE_CHECKING:
    from fencepost.store import Store

_lock = threading.Lock()
_store: Store | None = None
_settings: StoreSettings | None = None


def get_store() -> Store:
    """The store of ``settings.FENCEPOST``, connected on the first call.

    Its tables must exist (``manage.py fencepost_migrate``; :class:`~fencepost.NotMigrated`
    otherwise) unless ``FENCEPOST["MIGRATE"]`` is True.

    Every thread of the process shares it: a Django view that submits borrows only its
    validation and job catalogue, the statements run on Django's own connection.
    """
    global _store, _settings
    if _store is not None:
        return _store
    with _lock:
        if _store is None:
            from fencepost.store import connect  # the store loads only when first used

            chosen = store_settings()
            try:
                store = connect(chosen.url, **chosen.connect_options)
            except ValidationError as exc:  # the URL (given or built) is refused
                raise ImproperlyConfigured(f"{SETTING}: {exc}") from None
            except NotMigrated as exc:
                raise NotMigrated(
                    f"{exc} — in this Django project: python manage.py fencepost_migrate"
                ) from None
            _settings, _store = chosen, store
            atexit.register(close_store)
    return _store


def current_settings() -> StoreSettings:
    """The settings the process's store was (or will be) opened with."""
    return _settings if _settings is not None else store_settings()


def close_store() -> None:
    """Close the process's store (at exit; tests call it to start again from settings)."""
    global _store, _settings
    with _lock:
        store, _store, _settings = _store, None, None
    if store is not None:
        atexit.unregister(close_store)
        store.close()
