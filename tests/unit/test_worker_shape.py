"""The worker is objects, not mixins, and its parts do not reach into each other.

``Worker`` is composed of parts (the handler pool, the outbox, the held runs, the
node's registration) that are given the state they share and the parts they hand
work to (:mod:`fencepost.worker.state`). These checks hold that shape:

* ``Worker`` and each part inherit from nothing of fencepost's;
* no module of :mod:`fencepost.worker` reads a private attribute (``x._name``) of
  anything but ``self``: a part's private state is its own.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import fencepost.worker
from fencepost.worker.handlers import HandlerPool
from fencepost.worker.held import HeldRuns
from fencepost.worker.node import NodeMembership
from fencepost.worker.outbox import Outbox
from fencepost.worker.runtime import Worker
from fencepost.worker.state import WorkerState

WORKER = Path(fencepost.worker.__file__).parent


@pytest.mark.parametrize(
    "part", [Worker, HandlerPool, Outbox, HeldRuns, NodeMembership, WorkerState]
)
def test_the_worker_and_its_parts_are_plain_classes(part: type) -> None:
    assert part.__mro__ == (part, object)


def _reaching_in(tree: ast.AST) -> list[str]:
    """``x._name`` reads where ``x`` is not ``self``/``cls``, as ``line: expression``."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("module", sorted(p.name for p in WORKER.glob("*.py")))
def test_no_worker_module_reads_another_object_s_private_state(module: str) -> None:
    tree = ast.parse((WORKER / module).read_text(encoding="utf-8"))
    assert _reaching_in(tree) == []


def test_the_check_sees_a_part_reaching_into_another() -> None:
    code = "class A:\n    def f(self):\n        return self.outbox._items, self._own, run.lease\n"
    assert _reaching_in(ast.parse(code)) == ["3: self.outbox._items"]
