"""Settings of the test project: ``DJANGO_TEST_SQLITE=/path.db`` or ``DJANGO_TEST_PG_SCHEMA=s``.

With a schema, the database is the test PostgreSQL (``FENCEPOST_TEST_POSTGRES_DSN``)
and every connection's ``search_path`` is that schema, so Django's tables and
fencepost's (whose schema the app reads from the same option) live in it.
"""

from __future__ import annotations

import os

import django
import psycopg.conninfo

SECRET_KEY = "fencepost-tests-only"
DEBUG = False
USE_TZ = True
INSTALLED_APPS = ["fencepost.contrib.django", "tests.django_project.shop"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

if os.environ.get("DJANGO_TEST_PG_SCHEMA"):
    _dsn = psycopg.conninfo.conninfo_to_dict(
        os.environ.get("FENCEPOST_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
    )
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": _dsn.get("dbname", "test"),
            "USER": _dsn.get("user", ""),
            "PASSWORD": _dsn.get("password", ""),
            "HOST": _dsn.get("host", ""),
            "PORT": _dsn.get("port", ""),
            "OPTIONS": {"options": f"-c search_path={os.environ['DJANGO_TEST_PG_SCHEMA']}"},
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ["DJANGO_TEST_SQLITE"],
            # A transaction that will write takes the write lock at BEGIN: a deferred one
            # could fail at once (not wait) when a worker wrote since it first read.
            "OPTIONS": {"transaction_mode": "IMMEDIATE"} if django.VERSION >= (5, 1) else {},
        }
    }

FENCEPOST: dict[str, object] = {}
