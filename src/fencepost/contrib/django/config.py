"""The store that ``settings.FENCEPOST`` names, checked, as a URL and connect options.

::

    FENCEPOST = {
        "URL": "postgresql://app@db:5432/app?schema=jobs",  # default: from DATABASES
        "DATABASE": "default",         # the Django database the URL is built from
        "SCHEMA": "jobs",              # PostgreSQL: the schema of fencepost's tables
        "NUM_BUCKETS": 256,            # the other fencepost.connect options
        "MAX_PAYLOAD_BYTES": 262144,
        "UNKNOWN_JOBS": "allow",       # or "refuse"
        "MIGRATE": False,              # True: create/upgrade the tables on first use
    }

Every key is optional; without ``URL`` the store is the Django database ``DATABASE``
names (``default``) when it is SQLite (its file) or PostgreSQL (its NAME, HOST, PORT,
USER, PASSWORD and the libpq options among its OPTIONS), so a submit can run inside
that database's transactions.

The tables are made by ``manage.py fencepost_migrate``, a deploy step like Django's
``migrate``: the store is opened without migrating unless ``MIGRATE`` is True. (On
SQLite a migration takes the write lock; a store first opened inside a view's
``atomic()`` block, which holds that lock, would wait for itself.)

Anything else — another engine, an in-memory SQLite
database, a key fencepost does not know, a value of the wrong type — is an
:class:`~django.core.exceptions.ImproperlyConfigured` naming the setting.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from fencepost.domain.catalogue import UNKNOWN_JOBS

#: The name of the Django setting.
SETTING = "FENCEPOST"

#: The keys ``FENCEPOST`` may hold, and what each must be.
KEYS = ("URL", "DATABASE", "SCHEMA", "NUM_BUCKETS", "MAX_PAYLOAD_BYTES", "UNKNOWN_JOBS", "MIGRATE")

#: Django engines whose database fencepost can share (and submit in the transactions of).
SQLITE_ENGINES = frozenset(
    {"django.db.backends.sqlite3", "django.contrib.gis.db.backends.spatialite"}
)
POSTGRES_ENGINES = frozenset(
    {"django.db.backends.postgresql", "django.contrib.gis.db.backends.postgis"}
)

#: libpq connection parameters a Django PostgreSQL ``OPTIONS`` may hold that the store
#: passes on. ``options`` is not among them: its ``search_path`` becomes the store's
#: schema, and the store sets its own session options.
LIBPQ_OPTIONS = frozenset(
    {
        "sslmode",
        "sslrootcert",
        "sslcert",
        "sslkey",
        "sslpassword",
        "connect_timeout",
        "application_name",
        "target_session_attrs",
        "service",
        "passfile",
        "keepalives",
        "keepalives_idle",
    }
)

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SEARCH_PATH = re.compile(r"search_path\s*=\s*([^\s]+)")


@dataclass(frozen=True)
class StoreSettings:
    """Where the process's store lives and how to open it."""

    #: The URL for :func:`fencepost.connect`.
    url: str
    #: The Django database alias the URL was built from; None when ``URL`` was given.
    database: str | None
    #: The other keyword arguments of :func:`fencepost.connect`.
    connect_options: dict[str, Any] = field(default_factory=dict)


def store_settings() -> StoreSettings:
    """Read and check ``settings.FENCEPOST`` (absent means ``{}``)."""
    raw = getattr(settings, SETTING, {})
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ImproperlyConfigured(f"{SETTING}: must be a dict, got {type(raw).__name__}")
    unknown = sorted(str(key) for key in raw if key not in KEYS)
    if unknown:
        raise ImproperlyConfigured(
            f"{SETTING}[{unknown[0]!r}]: unknown key (the keys are {', '.join(KEYS)})"
        )
    options: dict[str, Any] = {"migrate": False}
    if "NUM_BUCKETS" in raw:
        options["num_buckets"] = _integer(raw, "NUM_BUCKETS", 1, 65_536)
    if "MAX_PAYLOAD_BYTES" in raw:
        options["max_payload_bytes"] = _integer(raw, "MAX_PAYLOAD_BYTES", 1, 2**31 - 1)
    if "UNKNOWN_JOBS" in raw:
        value = raw["UNKNOWN_JOBS"]
        if value not in UNKNOWN_JOBS and value != "auto":  # auto: deprecated, read as allow
            raise _improper("UNKNOWN_JOBS", f"must be one of {', '.join(UNKNOWN_JOBS)}", value)
        options["unknown_jobs"] = value
    if "MIGRATE" in raw:
        if not isinstance(raw["MIGRATE"], bool):
            raise _improper("MIGRATE", "must be True or False", raw["MIGRATE"])
        options["migrate"] = raw["MIGRATE"]
    schema = raw.get("SCHEMA")
    if schema is not None and not (isinstance(schema, str) and _IDENTIFIER.match(schema)):
        raise _improper("SCHEMA", "must be a plain identifier (letters, digits, _)", schema)
    if raw.get("URL") is not None:
        if "DATABASE" in raw or schema is not None:
            raise ImproperlyConfigured(
                f"{SETTING}: give URL, or DATABASE/SCHEMA to build it from DATABASES, not both"
            )
        return StoreSettings(_text(raw, "URL"), None, options)
    alias = _text(raw, "DATABASE") if "DATABASE" in raw else "default"
    return StoreSettings(database_url(alias, schema), alias, options)


def database_url(alias: str, schema: str | None = None) -> str:
    """The fencepost store URL of the Django database ``alias`` (SQLite or PostgreSQL).

    Read from ``connections.settings`` — the dicts Django's connections use, so a test
    run's test database is the one named — without loading the engine's driver.
    """
    from django.db import connections

    if alias not in settings.DATABASES:
        raise ImproperlyConfigured(
            f"{SETTING}['DATABASE']: no database {alias!r} in DATABASES "
            f"(there are {', '.join(map(repr, settings.DATABASES)) or 'none'})"
        )
    db = connections.settings[alias]
    engine = db.get("ENGINE", "")
    if engine in SQLITE_ENGINES:
        return _sqlite_url(alias, db)
    if engine in POSTGRES_ENGINES:
        return _postgres_url(db, schema)
    raise ImproperlyConfigured(
        f"{SETTING}: DATABASES[{alias!r}] uses {engine!r}; fencepost shares only a SQLite "
        f"or PostgreSQL database: set {SETTING}['URL'] to a store of its own"
    )


def _sqlite_url(alias: str, db: dict[str, Any]) -> str:
    name = str(db.get("NAME") or "")
    if not name or name == ":memory:" or name.startswith("file:") or "mode=memory" in name:
        raise ImproperlyConfigured(
            f"{SETTING}: DATABASES[{alias!r}] is not a SQLite file ({name!r}); fencepost "
            f"needs one that other processes (its workers) can open"
        )
    # An absolute path: sqlite:////abs/path.db. Workers started elsewhere find it too.
    return "sqlite:///" + quote(os.path.abspath(name))


def _postgres_url(db: dict[str, Any], schema: str | None) -> str:
    user = str(db.get("USER") or "")
    password = str(db.get("PASSWORD") or "")
    host = str(db.get("HOST") or "")
    port = str(db.get("PORT") or "")
    name = str(db.get("NAME") or "")
    options = db.get("OPTIONS") or {}
    query: dict[str, str] = {
        key: str(value) for key, value in options.items() if key in LIBPQ_OPTIONS
    }
    netloc = ""
    if user:
        netloc = quote(user, safe="") + (":" + quote(password, safe="") if password else "")
        netloc += "@"
    if host.startswith("/"):  # a Unix socket directory
        query["host"] = host
        if port:
            query["port"] = port
    else:
        netloc += quote(host, safe="") + (f":{port}" if port and host else "")
        if port and not host:
            query["port"] = port
    if schema is None:  # fencepost's tables beside the app's: the first of its search_path
        found = _SEARCH_PATH.search(str(options.get("options") or ""))
        first = found.group(1).split(",")[0].strip().strip('"') if found else ""
        schema = first if _IDENTIFIER.match(first) else None
    if schema is not None:
        query["schema"] = schema
    url = f"postgresql://{netloc}/{quote(name, safe='')}"
    return f"{url}?{urlencode(query)}" if query else url


def _improper(key: str, why: str, value: object) -> ImproperlyConfigured:
    return ImproperlyConfigured(f"{SETTING}[{key!r}]: {why}, got {value!r:.200}")


def _integer(raw: dict[str, Any], key: str, low: int, high: int) -> int:
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _improper(key, f"must be an integer from {low} to {high}", value)
    return value


def _text(raw: dict[str, Any], key: str) -> str:
    value = raw[key]
    if not isinstance(value, str) or not value.strip():
        raise _improper(key, "must be a non-empty string", value)
    if "\x00" in value:
        raise _improper(key, "must not contain NUL", value)
    try:
        value.encode()
    except UnicodeEncodeError:
        raise _improper(key, "must be valid Unicode (a lone surrogate?)", value) from None
    return value
