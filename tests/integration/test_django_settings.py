"""``settings.FENCEPOST`` and ``DATABASES`` -> the store URL, or ImproperlyConfigured.

Each case configures Django in a process of its own (settings are once per process)
and prints the URL the app derives, or the error; nothing connects to a database.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """
import json, sys
import django
from django.conf import settings
settings.configure(**json.loads(sys.argv[1]))
try:
    django.setup()   # the app checks FENCEPOST when Django starts
    from fencepost.contrib.django.config import store_settings
    chosen = store_settings()
    print(json.dumps({"url": chosen.url, "options": chosen.connect_options}))
except Exception as exc:
    print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
"""


def derive(databases: dict[str, Any], fencepost: Any = None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "INSTALLED_APPS": ["fencepost.contrib.django"],
        "DATABASES": databases,
    }
    if fencepost is not None:
        config["FENCEPOST"] = fencepost
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, json.dumps(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def sqlite(name: str) -> dict[str, Any]:
    return {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": name}}


def test_a_sqlite_database_gives_its_absolute_file(tmp_path: Path) -> None:
    assert derive(sqlite(str(tmp_path / "my site.db")))["url"] == (
        f"sqlite:///{tmp_path}/my%20site.db"
    )


def test_a_postgresql_database_gives_its_server_database_and_search_path_schema() -> None:
    databases = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": "shop",
            "USER": "app",
            "PASSWORD": "p@ss:w/rd",
            "HOST": "db.internal",
            "PORT": 5433,
            "OPTIONS": {"sslmode": "require", "options": "-c search_path=jobs,public"},
        }
    }
    assert derive(databases)["url"] == (
        "postgresql://app:p%40ss%3Aw%2Frd@db.internal:5433/shop?sslmode=require&schema=jobs"
    )
    chosen = derive(databases, {"SCHEMA": "queue", "NUM_BUCKETS": 128})
    assert chosen["url"].endswith("/shop?sslmode=require&schema=queue")
    assert chosen["options"] == {"num_buckets": 128, "migrate": False}


def test_a_url_wins_over_the_databases(tmp_path: Path) -> None:
    other = {"default": {"ENGINE": "django.db.backends.mysql", "NAME": "x"}}
    chosen = derive(other, {"URL": "sqlite:///jobs.db", "UNKNOWN_JOBS": "refuse", "MIGRATE": True})
    assert chosen == {
        "url": "sqlite:///jobs.db",
        "options": {"unknown_jobs": "refuse", "migrate": True},
    }


@pytest.mark.parametrize(
    ("databases", "fencepost", "expected"),
    [
        (
            {"default": {"ENGINE": "django.db.backends.mysql", "NAME": "x"}},
            None,
            "DATABASES['default'] uses 'django.db.backends.mysql'",
        ),
        (sqlite(":memory:"), None, "is not a SQLite file (':memory:')"),
        (sqlite("site.db"), {"DATABSE": "default"}, "FENCEPOST['DATABSE']: unknown key"),
        (sqlite("site.db"), {"DATABASE": "jobs"}, "no database 'jobs' in DATABASES"),
        (sqlite("site.db"), {"NUM_BUCKETS": True}, "FENCEPOST['NUM_BUCKETS']: must be an int"),
        (sqlite("site.db"), {"NUM_BUCKETS": -1}, "FENCEPOST['NUM_BUCKETS']: must be an int"),
        (sqlite("site.db"), {"URL": "sqlite:///a\x00.db"}, "FENCEPOST['URL']: must not contain"),
        (sqlite("site.db"), {"URL": ""}, "FENCEPOST['URL']: must be a non-empty string"),
        (sqlite("site.db"), {"SCHEMA": "a;drop"}, "FENCEPOST['SCHEMA']: must be a plain"),
        (sqlite("site.db"), {"MIGRATE": "yes"}, "FENCEPOST['MIGRATE']: must be True or False"),
        (sqlite("site.db"), {"UNKNOWN_JOBS": "maybe"}, "FENCEPOST['UNKNOWN_JOBS']: must be one"),
        (sqlite("site.db"), ["URL"], "FENCEPOST: must be a dict, got list"),
    ],
)
def test_bad_settings_are_improperly_configured_at_start(
    databases: dict[str, Any], fencepost: Any, expected: str
) -> None:
    chosen = derive(databases, fencepost)
    assert chosen.get("error") == "ImproperlyConfigured", chosen
    assert expected in chosen["message"]
