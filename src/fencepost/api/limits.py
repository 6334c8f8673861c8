"""The service's bookkeeping for hostile clients: failed authentications and buffered bytes.

Pure state with an injectable clock, no I/O: :mod:`fencepost.api.guard` decides when
to consult them and what to answer.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

#: Failed authentications an address may make in a burst before it is refused.
DEFAULT_FAILURE_BURST = 20
#: The window the burst refills over: 20 in a burst, then one more every 3 s.
DEFAULT_FAILURE_WINDOW = 60.0
#: Addresses tracked at once; past this, the one that failed least recently is forgotten.
DEFAULT_TRACKED_ADDRESSES = 10_000


def client_key(client: Sequence[object] | None) -> str:
    """The address an ASGI ``client`` (host, port)'s failures are counted against.

    An IPv6 address counts as its /64: one host usually holds a whole /64 and could
    otherwise pick a fresh address for every attempt. A unix socket has no address:
    all its clients share one.
    """
    if not client:
        return "unknown"
    host = str(client[0])
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host  # a name, such as the test client's "testclient"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class FailureLimiter:
    """Failed authentications per address: ``burst`` at once, then ``burst`` per ``window``.

    A generic cell rate algorithm: each address has a debt, in seconds, that each
    failure raises by ``window / burst`` and that time pays back. An address whose
    debt exceeds ``window`` minus one interval is blocked until it no longer does;
    :meth:`retry_after` says how long that is. With the defaults: 20 failures in a
    row, then one every 3 s.

    Memory is bounded: one float per address with a debt, at most ``max_addresses``
    of them; a full table forgets the address that failed least recently (so an
    attacker with that many addresses can make it forget one, never grow it).
    """

    def __init__(
        self,
        *,
        burst: int = DEFAULT_FAILURE_BURST,
        window: float = DEFAULT_FAILURE_WINDOW,
        max_addresses: int = DEFAULT_TRACKED_ADDRESSES,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if burst < 1 or window <= 0 or max_addresses < 1:
            raise ValueError("burst, window and max_addresses must be positive")
        self.burst = burst
        self.window = window
        self.max_addresses = max_addresses
        self._interval = window / burst
        self._monotonic = monotonic
        #: address -> when its debt is paid (monotonic seconds); least recent failure first.
        self._paid_at: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """The addresses tracked now."""
        return len(self._paid_at)

    def retry_after(self, address: str) -> float:
        """Seconds until ``address`` may fail again; 0.0 if it is not blocked."""
        now = self._monotonic()
        with self._lock:
            paid_at = self._paid_at.get(address)
            if paid_at is None:
                return 0.0
            if paid_at <= now:  # debt paid: nothing left to remember
                del self._paid_at[address]
                return 0.0
            return max(0.0, paid_at - now - (self.window - self._interval))

    def fail(self, address: str) -> None:
        """Count one failed authentication from ``address``."""
        now = self._monotonic()
        with self._lock:
            paid_at = max(self._paid_at.pop(address, now), now) + self._interval
            self._paid_at[address] = paid_at
            while len(self._paid_at) > self.max_addresses:
                self._paid_at.popitem(last=False)


class ByteBudget:
    """Bytes of request bodies held at once, across every request of one app.

    :meth:`take` reserves bytes, or refuses without waiting; :meth:`give` returns them.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("a budget needs at least one byte")
        self.capacity = capacity
        self._used = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        """Bytes reserved now."""
        return self._used

    def take(self, size: int) -> bool:
        """Reserve ``size`` bytes; False (and nothing reserved) if they do not fit."""
        with self._lock:
            if self._used + size > self.capacity:
                return False
            self._used += size
            return True

    def give(self, size: int) -> None:
        """Return ``size`` bytes reserved by :meth:`take`."""
        with self._lock:
            self._used -= size
