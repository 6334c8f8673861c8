"""Helpers shipped for testing fencepost and code built on it.

* :class:`ManualClock` — pin a store's time.
* :mod:`fencepost.testing.contract` — the store contract suite, one module a section
  (needs pytest and hypothesis: ``pip install fencepost[testing]``); a third-party
  backend subclasses :class:`~fencepost.testing.contract.StoreContract` to prove itself.
"""

from fencepost.testing.clock import MANUAL_EPOCH, ManualClock

__all__ = ["MANUAL_EPOCH", "ManualClock"]
