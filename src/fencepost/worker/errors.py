"""The errors a handler raises (or receives), at their older address.

They live with every other error in :mod:`fencepost.domain.errors`; import them
from ``fencepost`` (``fencepost.Cancelled``, ``fencepost.PermanentFailure``).
"""

from fencepost.domain.errors import Cancelled, PermanentFailure

__all__ = ["Cancelled", "PermanentFailure"]
