"""The names of a schedule's policies, at their older address.

They are values of a :class:`~fencepost.domain.models.Schedule`, so they live in
:mod:`fencepost.domain.policies` (the domain imports nothing outside itself); the
decisions they steer (:mod:`~fencepost.timing.zones`, :mod:`~fencepost.timing.planning`)
are here in ``timing``. Import them from ``fencepost`` or ``fencepost.domain.policies``.
"""

from fencepost.domain.policies import DstFold, DstGap, Misfire, Overlap, parse_policy

__all__ = ["DstFold", "DstGap", "Misfire", "Overlap", "parse_policy"]
