"""``fencepost buckets``: who owns which bucket, and the work nobody will pick up; and
``fencepost db set-buckets``: change the bucket count a store records."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from fencepost.cli import common, records
from fencepost.cli.output import Output, span, when
from fencepost.domain.buckets import MAX_NUM_BUCKETS
from fencepost.domain.errors import ValidationError
from fencepost.domain.nodes import WORKER, Node

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable


def add_parsers(commands: Any) -> None:
    """Register ``buckets``."""
    p = common.command(commands, "buckets", buckets)
    common.add_num_buckets(p)
    p.add_argument("--owned-buckets", metavar="SPEC", help="this node's buckets, e.g. 0-15,20")
    p.add_argument(
        "--orphaned-after",
        default="5m",
        metavar="DURATION",
        help="unchanged this long in an unowned bucket is an orphan (default 5m)",
    )
    p.add_argument("--limit", type=int, default=100, metavar="N", help="orphans shown (100)")


def add_db_parsers(db_commands: Any) -> None:
    """Register ``db set-buckets`` on ``fencepost db``'s subcommands."""
    p = common.command(db_commands, "set-buckets", set_buckets)
    p.add_argument("count", metavar="NUM_BUCKETS", help="the new bucket count, 1 to 65536")
    p.add_argument(
        "--force",
        action="store_true",
        help="even while workers or services are registered (restart them afterwards)",
    )


def spec_text(values: Iterable[int]) -> str:
    """Buckets as the spec that names them: ``[0, 1, 2, 3, 7]`` -> ``0-3,7``."""
    ordered = sorted(set(values))
    parts: list[str] = []
    index = 0
    while index < len(ordered):
        end = index
        while end + 1 < len(ordered) and ordered[end + 1] == ordered[end] + 1:
            end += 1
        low, high = ordered[index], ordered[end]
        parts.append(str(low) if low == high else f"{low}-{high}")
        index = end + 1
    return ",".join(parts)


def buckets(args: argparse.Namespace, out: Output) -> int:
    """executions per bucket, live owners, buckets owned twice or by no one, orphans

    Unfinished executions per bucket and the live nodes that claim from each; buckets
    declared by two live nodes, buckets no live node covers, and orphans (unfinished
    work in an unowned bucket that has not changed for --orphaned-after). With
    --owned-buckets, this node's buckets are marked *.
    """
    # Checked as written before the store is opened (against --num-buckets when given),
    # then against the count the store records.
    bound = MAX_NUM_BUCKETS if args.num_buckets is None else common.num_buckets(args)
    common.bucket_spec(args.owned_buckets, "--owned-buckets", bound)
    orphaned_after = common.duration(args.orphaned_after, "--orphaned-after", allow_zero=True)
    orphan_limit = common.limit(args.limit)
    common.require_db(args)
    with common.open_store(args, read_only=True) as store:
        executions = store.bucket_counts()
        report = store.bucket_report(orphaned_after=orphaned_after, limit=orphan_limit)
        nodes = store.nodes(live_only=True)
        now = store.clock.now()
    count = report.num_buckets
    owned = common.bucket_spec(args.owned_buckets, "--owned-buckets", count)
    mine = None if owned is None else set(owned)
    unowned = set(report.unowned)
    # Nodes that declared no buckets claim from any: they cover every bucket.
    anyone = [f"(any) {node_id}" for node_id in report.floating]
    rows: list[list[Any]] = []
    entries: list[dict[str, Any]] = []
    for b in range(count):
        owners = report.owners.get(b, [])
        status = "owned twice" if b in report.duplicated else ("unowned" if b in unowned else "")
        entries.append(
            {
                "bucket": b,
                "executions": executions.get(b, 0),
                "owners": owners,
                "duplicated": b in report.duplicated,
                "unowned": b in unowned,
                "mine": None if mine is None else b in mine,
            }
        )
        row: list[Any] = [b, executions.get(b, 0), ", ".join(owners + anyone) or "-", status]
        if mine is not None:
            row.append("*" if b in mine else "")
        rows.append(row)
    if out.as_json:
        out.document(
            {
                "num_buckets": count,
                "owned": None if owned is None else list(owned),
                "buckets": entries,
                "nodes": [records.node(n) for n in nodes],
                "floating": report.floating,
                "duplicated": [
                    {"bucket": b, "owners": ids} for b, ids in report.duplicated.items()
                ],
                "unowned": report.unowned,
                "orphans": [records.execution(e, now) for e in report.orphans],
            }
        )
        return 0
    columns = ["bucket", "executions", "owners", "status"] + ([] if mine is None else ["mine"])
    total = sum(executions.values())
    out.table(
        columns,
        rows,
        title=f"{count} buckets, {total} unfinished execution{'' if total == 1 else 's'}",
        right=("bucket", "executions"),
    )
    out.table(
        ("node", "kind", "buckets", "heartbeat", "expires in"),
        [
            (
                n.id,
                n.kind,
                _claims_from(n),
                when(n.heartbeat_at),
                span(n.expires_at - now),
            )
            for n in nodes
        ],
        title="live nodes",
        caption=None if nodes else "no live nodes",
    )
    out.fields(
        [
            (
                "owned twice",
                "; ".join(f"{b}: {', '.join(ids)}" for b, ids in report.duplicated.items())
                or "none",
            ),
            ("unowned", spec_text(report.unowned) or "none"),
            ("mine", "-" if owned is None else spec_text(owned)),
        ],
        title="ownership",
    )
    out.table(
        ("id", "job", "state", "bucket", "unchanged since"),
        [(e.id, e.job, e.state.value, e.bucket, when(e.updated_at)) for e in report.orphans],
        title=f"orphans (unfinished, in an unowned bucket, unchanged for {span(orphaned_after)})",
        caption=None if report.orphans else "none",
    )
    return 0


def set_buckets(args: argparse.Namespace, out: Output) -> int:
    """record a new bucket count and move every unfinished execution to its bucket

    In one transaction, every SCHEDULED, RETRY_WAIT and RUNNING execution moves to the
    bucket a submit under the new count gives it (blake2b of its bucket key, else its
    id, mod NUM_BUCKETS), and the store records the count: every process that opens it
    afterwards runs with it, and one given another --num-buckets is refused. Refused
    while workers or services are registered, since they keep the count they opened
    with until restarted: stop them first, or pass --force and restart them. The count
    already recorded moves only executions that are in the wrong bucket for it.
    """
    count = _bucket_count(args.count)
    common.require_db(args)
    with common.open_store(args) as store:
        resized = store.resize_buckets(count, force=args.force)
    if resized.live_nodes:
        shown = ", ".join(resized.live_nodes)
        print(
            f"fencepost {args.command_name}: warning: {len(resized.live_nodes)} live node(s) "
            f"still run with {resized.previous} buckets until restarted: {shown}",
            file=sys.stderr,
        )
    if out.as_json:
        out.document(
            {
                "previous": resized.previous,
                "num_buckets": resized.num_buckets,
                "unfinished": resized.unfinished,
                "moved": resized.moved,
                "live_nodes": list(resized.live_nodes),
            }
        )
        return 0
    out.fields(
        [
            ("num_buckets", f"{resized.previous} -> {resized.num_buckets}"),
            ("unfinished executions", resized.unfinished),
            ("moved to another bucket", resized.moved),
        ],
        title="bucket count recorded",
    )
    return 0


def _bucket_count(text: str) -> int:
    """NUM_BUCKETS as typed: a whole number from 1 to :data:`MAX_NUM_BUCKETS`."""
    digits = text.strip()
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 6:
        shown = repr(text) if len(text) <= 40 else f"{text[:37]!r}..."
        raise ValidationError(
            "NUM_BUCKETS", f"must be a whole number from 1 to {MAX_NUM_BUCKETS}, got {shown}"
        )
    value = int(digits)
    if not 1 <= value <= MAX_NUM_BUCKETS:
        raise ValidationError(
            "NUM_BUCKETS", f"must be a whole number from 1 to {MAX_NUM_BUCKETS}, got {value}"
        )
    return value


def _claims_from(node: Node) -> str:
    """The buckets a live node claims from, for its row: none for a scheduler."""
    if node.kind != WORKER:
        return "-"  # a materializer claims nothing: it neither owns nor covers a bucket
    return "any" if node.buckets is None else spec_text(node.buckets)
