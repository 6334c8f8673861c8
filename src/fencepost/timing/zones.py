"""IANA time zones, and where a local wall time falls on the UTC timeline under a DST policy.

A wall time in a zone maps to zero, one or two instants: zero in a *gap* (the
clocks sprang forward over it), two in a *fold* (they fell back over it). The
policies of :mod:`fencepost.domain.policies` decide which instants run.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from fencepost.domain.errors import ValidationError
from fencepost.domain.policies import DstFold, DstGap

#: What a refusal suggests instead.
_EXAMPLES = "an IANA name such as Europe/Paris, America/New_York or UTC"


def zone(name: object) -> ZoneInfo:
    """The IANA zone called ``name``, or ValidationError on ``timezone``.

    Accepted: ``"UTC"`` and the names of the IANA time zone database as
    :func:`zoneinfo.available_timezones` lists them (``Europe/Paris``, ``EST5EDT``,
    ``Etc/GMT+5``, ``US/Eastern``), except ``localtime``. Refused with the rest:
    ``localtime``, ``/etc/localtime`` and any path, ``posixrules``, ``posix/...`` and
    ``right/...``. Each of those is this host's own setting or a variant file of the
    database, so two hosts (a materializer on each) could read the same schedule in
    different zones; a name of the database means the same zone everywhere.
    """
    # Checked before the cache: an unhashable argument must be a ValidationError too.
    if not isinstance(name, str) or not name.strip():
        raise ValidationError("timezone", f"must be an IANA time zone name, got {name!r}")
    return _load(name)


@lru_cache(maxsize=1024)
def _load(name: str) -> ZoneInfo:
    if name != "UTC" and name not in iana_names():
        raise ValidationError("timezone", _refusal(name))
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        # OSError: a name that is a directory of the zone database ("America") or
        # longer than a file name can be; unknown either way.
        raise ValidationError("timezone", _refusal(name)) from None


@lru_cache(maxsize=1)
def iana_names() -> frozenset[str]:
    """The zone names this host's database holds, once per process (it reads every file)."""
    # Debian and others put "localtime" among the zone files, as a link to /etc/localtime.
    return frozenset(available_timezones() - {"localtime"})


def _refusal(name: str) -> str:
    shown = repr(name if len(name) <= 64 else name[:64] + "…")
    if "localtime" in name.lower() or name.lower() == "local":
        return (
            f"{shown} is this host's own zone, which can differ from host to host: "
            f"name the zone itself, {_EXAMPLES}"
        )
    return f"unknown time zone {shown}"


def instants(wall: datetime, tz: ZoneInfo, *, gap: DstGap, fold: DstFold) -> list[datetime]:
    """The UTC instants at which the naive local time ``wall`` in ``tz`` fires, in order.

    * Exists once: that instant.
    * In a gap: with ``shift``, the first instant after the gap (the transition
      itself: 02:30 on a 02:00 -> 03:00 day fires at 03:00 local); with ``skip``, none.
    * In a fold: with ``once``, its first occurrence; with ``twice``, both.
    """
    first = wall.replace(tzinfo=tz, fold=0)
    second = wall.replace(tzinfo=tz, fold=1)
    early, late = first.astimezone(UTC), second.astimezone(UTC)
    if early == late:
        # Round-tripping tells a real time from one in a gap: a gap time comes back changed.
        if early.astimezone(tz).replace(tzinfo=None) == wall:
            return [early]
        return [_gap_end(wall, tz)] if gap is DstGap.SHIFT else []
    if early > late:
        # fold=0 of a gap time lands *after* fold=1 (PEP 495): this is a gap.
        return [_gap_end(wall, tz)] if gap is DstGap.SHIFT else []
    return [early, late] if fold is DstFold.TWICE else [early]


def _gap_end(wall: datetime, tz: ZoneInfo) -> datetime:
    """The first instant after the gap that swallowed ``wall`` (the transition instant)."""
    # fold=0 reads a gap time with the offset from before the transition, which
    # puts it past the transition; fold=1 uses the offset after, putting it before.
    # The transition lies between them; its local time is the gap's end.
    low = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    high = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    low, high = min(low, high), max(low, high)
    # Bisect to the second (transitions fall on whole seconds, in practice on minutes).
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if _is_before_transition(middle, tz, wall):
            low = middle
        else:
            high = middle
    # Transitions fall on whole seconds; the bisection left ``high`` less than one past it.
    return high.replace(microsecond=0)


def _is_before_transition(instant: datetime, tz: ZoneInfo, wall: datetime) -> bool:
    return instant.astimezone(tz).replace(tzinfo=None) < wall
