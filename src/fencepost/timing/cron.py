"""Cron expressions: validated here, iterated over naive local wall times by cronsim.

5 fields (minute hour day-of-month month day-of-week) or 6 with a leading
seconds field; names (JAN, MON), ranges, steps, lists, ``L``, ``W`` and ``#``
as cronsim supports them; and the aliases ``@yearly`` (``@annually``),
``@monthly``, ``@weekly``, ``@daily`` (``@midnight``) and ``@hourly``, stored as
the 5-field expressions they stand for. Matching and iteration are cronsim's; time zones and
DST are not — iteration runs on naive wall times, and
:func:`fencepost.timing.zones.instants` places each on the UTC timeline.

Where cron dialects differ, cronsim's (Debian cron's) reading applies; croniter,
for one, reads these three differently:

* day-of-month and day-of-week both restricted are ORed, unless either field
  starts with ``*`` (``*/2 * MON``): then they are ANDed;
* an open-ended step in day-of-week runs to 7, which is Sunday again
  (``1/2`` is Monday, Wednesday, Friday and Sunday; write ``1-5/2`` for the first three);
* a range with equal ends (``5-5``) is that one value, not the whole field.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from cronsim import CronSim, CronSimError

from fencepost.domain.errors import ValidationError

#: The aliases of Vixie cron, and the expressions they stand for (at minute 0, hour 0).
ALIASES = {
    "@YEARLY": "0 0 1 1 *",
    "@ANNUALLY": "0 0 1 1 *",
    "@MONTHLY": "0 0 1 * *",
    "@WEEKLY": "0 0 * * 0",
    "@DAILY": "0 0 * * *",
    "@MIDNIGHT": "0 0 * * *",
    "@HOURLY": "0 * * * *",
}

#: A fixed start for checking that an expression can fire at all.
_PROBE = datetime(2000, 1, 1)


def parse_cron(expr: object, field: str = "cron") -> str:
    """``expr`` normalized (single spaces, upper case), or ValidationError on ``field``.

    Refuses what cronsim refuses, wrong field counts, and expressions that never
    fire (``0 0 30 2 *``: February 30th).
    """
    if not isinstance(expr, str) or not expr.strip():
        raise ValidationError(field, f"must be a cron expression, got {expr!r}")
    normalized = " ".join(expr.upper().split())
    if normalized.startswith("@"):
        if normalized == "@REBOOT":
            raise ValidationError(
                field, "'@reboot' is not a time: run the job from your process's start-up instead"
            )
        if normalized not in ALIASES:
            known = ", ".join(a.lower() for a in ALIASES)
            raise ValidationError(field, f"{expr!r} is not a cron alias (one of {known})")
        return ALIASES[normalized]
    if len(normalized.split()) not in (5, 6):
        raise ValidationError(
            field, f"{expr!r} has {len(normalized.split())} fields; cron has 5, or 6 with seconds"
        )
    try:
        next(CronSim(normalized, _PROBE))
    except CronSimError as exc:
        raise ValidationError(field, f"{expr!r}: {exc}") from None
    except StopIteration:
        raise ValidationError(field, f"{expr!r} never fires") from None
    return normalized


def wall_times(expr: str, after: datetime) -> Iterator[datetime]:
    """The naive wall times matching ``expr`` strictly after the naive ``after``, in order."""
    if after.tzinfo is not None:
        raise ValueError("wall_times iterates naive local times")
    return iter(CronSim(expr, after))
