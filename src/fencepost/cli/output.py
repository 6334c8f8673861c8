"""What the operator commands print: rich tables for people, one JSON document for scripts.

* **Tables** go to stdout through a rich :class:`~rich.console.Console`. On a
  terminal they have boxes and colour; piped, they are plain columns without
  colour or box lines, never wrapped to 80 characters (a script that greps a
  row finds all of it on one line).
* **JSON** (``--json``): exactly one document on stdout — an object, or a list
  for listings — with stable keys (the same keys, in the same order, whether a
  value is set or ``null``), times as ISO 8601 UTC (``2026-05-01T10:00:00Z``)
  and durations as seconds (float).
* **Progress** bars are drawn on stderr, only when it is a terminal, and disappear
  when the work is done; stdout stays exactly the table or the document.
* **Errors** are one line on stderr, ``fencepost <command>: <field>: <reason>``.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import TYPE_CHECKING, Any

# rich is imported where a table or a bar is drawn: a worker and ``--help`` never need it.
if TYPE_CHECKING:
    from rich.console import Console, JustifyMethod

#: How wide a table may grow before rich squeezes a cell: wide enough for any row.
_PIPED_WIDTH = 1_000


def iso(instant: datetime | None) -> str | None:
    """An aware instant as ISO 8601 UTC with ``Z`` (microseconds only when present)."""
    if instant is None:
        return None
    utc = instant.astimezone(UTC).replace(tzinfo=None)
    return utc.isoformat(timespec="microseconds" if utc.microsecond else "seconds") + "Z"


def seconds(duration: timedelta | float | None) -> float | None:
    """A duration as seconds, rounded to the microsecond (None stays None)."""
    if duration is None:
        return None
    value = duration.total_seconds() if isinstance(duration, timedelta) else float(duration)
    return round(value, 6)


def jsonable(value: Any) -> Any:
    """``value`` with datetimes, timedeltas, enums, tuples and sets made JSON-ready."""
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, timedelta):
        return seconds(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value) if isinstance(value, set | frozenset) else value
        return [jsonable(v) for v in items]
    return value


# -- human formatting ------------------------------------------------------------------


def when(instant: datetime | None) -> str:
    """An instant for a table cell: ``2026-05-01 10:00:00Z``, to the second."""
    if instant is None:
        return "-"
    utc = instant.astimezone(UTC)
    return utc.strftime("%Y-%m-%d %H:%M:%S") + "Z"


def span(duration: timedelta | float | None) -> str:
    """A duration for a table cell: ``850ms``, ``12.3s``, ``4m02s``, ``3h10m``, ``14d``.

    Two units at most, the second left out when it is zero (``10m``, ``2d``).
    Negative durations keep their sign (a lease that expired 5 s ago: ``-5s``).
    """
    if duration is None:
        return "-"
    total = duration.total_seconds() if isinstance(duration, timedelta) else float(duration)
    sign = "-" if total < 0 else ""
    total = abs(total)
    if total < 1:
        return f"{sign}{total * 1000:.0f}ms"
    if total < 60:
        return f"{sign}{total:.1f}".removesuffix(".0") + "s"
    whole = int(total)
    for unit, size, small, small_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60)):
        if whole >= size:
            rest = whole % size // small_size
            return f"{sign}{whole // size}{unit}" + (f"{rest:02d}{small}" if rest else "")
    rest = whole % 60
    return f"{sign}{whole // 60}m" + (f"{rest:02d}s" if rest else "")


def share(value: float | None) -> str:
    """A proportion as a percentage cell: ``99.95%`` (``-`` when there is nothing to measure)."""
    if value is None:
        return "-"
    return f"{value * 100:.2f}%"


# -- the output of one command ----------------------------------------------------------


class Output:
    """Where one command writes: tables (and notes) on stdout, or one JSON document."""

    def __init__(self, *, as_json: bool, console: Console | None = None) -> None:
        self.as_json = as_json
        if console is None:
            from rich.console import Console

            terminal = sys.stdout.isatty()
            console = Console(
                file=sys.stdout,
                highlight=False,
                soft_wrap=False,
                width=None if terminal else _PIPED_WIDTH,
                no_color=not terminal,
            )
        self.console = console

    @property
    def terminal(self) -> bool:
        """Whether stdout is a terminal (progress bars, boxes and colour are for terminals)."""
        return self.console.is_terminal

    def document(self, value: Any) -> None:
        """Print ``value`` as the command's one JSON document."""
        text = json.dumps(jsonable(value), indent=2, ensure_ascii=False, allow_nan=False)
        self.console.file.write(text + "\n")
        self.console.file.flush()

    def table(
        self,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        *,
        title: str | None = None,
        caption: str | None = None,
        right: Sequence[str] = (),
        header: bool = True,
    ) -> None:
        """A table of ``rows``; cells are shown as given (``None`` as ``-``), never as markup.

        The title and caption are lines of their own, above and below; an empty
        table shows only them. ``right`` names the columns to align right (numbers).
        """
        from rich import box
        from rich.table import Table
        from rich.text import Text

        style = "bold" if self.terminal else ""
        if title:
            # On a line of its own: a table title wraps at the table's width.
            self.console.print(Text(title, style=style))
        if rows:
            table = Table(
                box=box.SIMPLE_HEAD if self.terminal else None,
                show_edge=False,
                show_header=header,
                pad_edge=False,
                header_style=style,
            )
            for name in columns:
                justify: JustifyMethod = "right" if name in right else "left"
                table.add_column(name, justify=justify, no_wrap=True)
            for row in rows:
                table.add_row(*(Text("-" if cell is None else str(cell)) for cell in row))
            # Rows are never squeezed to the terminal (an id cut short cannot be copied,
            # a wrapped time cannot be read): a table wider than the terminal has long lines.
            unbounded = self.console.options.update_width(_PIPED_WIDTH)
            natural = self.console.measure(table, options=unbounded).maximum
            width = self.console.width
            self.console.width = max(width, natural)
            try:
                self.console.print(table)
            finally:
                self.console.width = width
        if caption:
            self.console.print(Text(caption))
        if not self.terminal:
            self.console.print()

    def fields(self, pairs: Sequence[tuple[str, Any]], *, title: str | None = None) -> None:
        """A two-column table of ``name: value`` lines (one record shown in full)."""
        rows = [(name, value) for name, value in pairs]
        self.table(("field", "value"), rows, title=title, header=False)

    def line(self, text: str = "") -> None:
        """One line of plain text (never interpreted as markup)."""
        from rich.text import Text

        self.console.print(Text(text))

    @contextmanager
    def progress(
        self, description: str, total: int | None = None
    ) -> Iterator[Callable[[int], None]]:
        """A progress bar while the block runs; yields ``update(completed)``.

        Drawn on stderr, only when stderr is a terminal, and cleared afterwards:
        stdout holds the answer alone (``--json`` stays one document). Otherwise
        ``update`` does nothing and nothing is printed.
        """
        if not sys.stderr.isatty():
            yield lambda completed: None
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        columns = [
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn() if total is not None else TextColumn(""),
            MofNCompleteColumn() if total is not None else TextColumn("{task.completed}"),
            TimeElapsedColumn(),
        ]
        with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task(description, total=total)

            def update(completed: int) -> None:
                bar.update(task, completed=completed)

            yield update
