"""``fencepost buckets``: who owns which bucket, and the work nobody will pick up."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fencepost.cli import common, records
from fencepost.cli.output import Output, span, when

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
    count = common.num_buckets(args)
    owned = common.bucket_spec(args.owned_buckets, "--owned-buckets", count)
    orphaned_after = common.duration(args.orphaned_after, "--orphaned-after", allow_zero=True)
    orphan_limit = common.limit(args.limit)
    common.require_db(args)
    with common.open_store(args, read_only=True) as store:
        executions = store.bucket_counts()
        report = store.bucket_report(orphaned_after=orphaned_after, limit=orphan_limit)
        nodes = store.nodes(live_only=True)
        now = store.clock.now()
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
                "any" if n.buckets is None else spec_text(n.buckets),
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
