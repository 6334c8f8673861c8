"""A benchmark's figures for two revisions of fencepost, measured in one interleaved run.

Run::

    .venv/bin/python bench/compare_revisions.py --base REV [--rounds 3] \\
        -- bench/store_throughput.py --repeat 1 [its other options]

``REV`` is checked out in a temporary git worktree. Each round runs the benchmark
once on the working tree's ``src/`` and once on ``REV``'s (put first on the child's
``PYTHONPATH``; the benchmark script itself is always the working tree's, so both
sides run the same harness), the order alternating between rounds so that neither
side always runs on a warmer or cooler machine. The benchmark must accept ``--json
PATH`` and write there a mapping of figure name to a rate (higher is better), as
``bench/store_throughput.py`` does. The report gives, per figure, the median of each
side over the rounds and their ratio (head / base).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_once(script: list[str], src: Path, out: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    argv = [sys.executable, *script, "--json", str(out)]
    subprocess.run(argv, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    figures: dict[str, float] = json.loads(out.read_text())
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--base", required=True, help="the git revision to compare against")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side (default 3)")
    parser.add_argument("script", nargs=argparse.REMAINDER, help="-- BENCHMARK [ARGS]")
    args = parser.parse_args()
    script = [a for a in args.script if a != "--"]
    if not script:
        parser.error("name the benchmark after --")
    head = ROOT / "src"
    results: dict[str, dict[str, list[float]]] = {
        "head": defaultdict(list),
        "base": defaultdict(list),
    }
    with tempfile.TemporaryDirectory(prefix="fpbench-compare-") as tmp:
        tree = Path(tmp) / "base"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), args.base],
            check=True,
        )
        try:
            sides = {"head": head, "base": tree / "src"}
            for round_ in range(args.rounds):
                order = ["head", "base"] if round_ % 2 == 0 else ["base", "head"]
                for side in order:
                    print(f"  .. round {round_ + 1}/{args.rounds}: {side}", file=sys.stderr)
                    figures = run_once(script, sides[side], Path(tmp) / f"{side}.json")
                    for key, value in figures.items():
                        results[side][key].append(value)
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False
            )
    rev = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", args.base],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    print(f"# {' '.join(script)}: head (working tree) against {args.base} ({rev})")
    print(f"# median of {args.rounds} interleaved rounds, per second; head / base")
    print()
    print("| figure | base | head | head / base |")
    print("|---|---:|---:|---:|")
    for key in results["head"]:
        if key not in results["base"]:
            continue
        base = statistics.median(results["base"][key])
        ours = statistics.median(results["head"][key])
        print(f"| {key} | {base:,.0f} | {ours:,.0f} | {ours / base:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
