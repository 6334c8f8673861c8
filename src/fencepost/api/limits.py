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

    Memory is bounded, and a block holds for its whole length whatever other
    addresses do. Addresses that are not blocked (a debt, but guesses left) are at
    most ``max_addresses``: a full table forgets the one that failed least recently,
    so an attacker with that many addresses can make it forget one of those, never
    grow it. Blocked addresses are kept apart, also at most ``max_addresses``: only
    past that many blocks at once (each earned with ``burst`` failures) does one
    end early, the one that would have ended first.
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
        #: A debt past this (seconds) is a block.
        self._blocking = window - self._interval
        self._monotonic = monotonic
        #: Address -> when its debt is paid (monotonic seconds), for addresses not
        #: blocked when they last failed; least recent failure first.
        self._paid_at: OrderedDict[str, float] = OrderedDict()
        #: The same for addresses blocked when they last failed.
        self._blocked: dict[str, float] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """The addresses tracked now."""
        return len(self._paid_at) + len(self._blocked)

    def retry_after(self, address: str) -> float:
        """Seconds until ``address`` may fail again; 0.0 if it is not blocked."""
        now = self._monotonic()
        with self._lock:
            table: dict[str, float] = self._blocked
            paid_at = table.get(address)
            if paid_at is None:
                table = self._paid_at
                paid_at = table.get(address)
            if paid_at is None:
                return 0.0
            if paid_at <= now:  # debt paid: nothing left to remember
                del table[address]
                return 0.0
            return max(0.0, paid_at - now - self._blocking)

    def fail(self, address: str) -> None:
        """Count one failed authentication from ``address``."""
        now = self._monotonic()
        with self._lock:
            owed = self._paid_at.pop(address, None)
            if owed is None:
                owed = self._blocked.pop(address, now)
            paid_at = max(owed, now) + self._interval
            if paid_at - now > self._blocking:
                self._blocked[address] = paid_at
                if len(self._blocked) > self.max_addresses:
                    self._unblock_one(now)
            else:
                self._paid_at[address] = paid_at
                while len(self._paid_at) > self.max_addresses:
                    self._paid_at.popitem(last=False)

    def _unblock_one(self, now: float) -> None:
        """Make room among blocked addresses: first those no longer blocked, else the
        block that ends first (only ever with ``max_addresses`` blocks at once)."""
        for address, paid_at in list(self._blocked.items()):
            if paid_at - now <= self._blocking:  # its debt stays, among the others
                del self._blocked[address]
                if paid_at > now:
                    self._paid_at[address] = paid_at
        while len(self._paid_at) > self.max_addresses:
            self._paid_at.popitem(last=False)
        if len(self._blocked) > self.max_addresses:
            del self._blocked[min(self._blocked, key=self._blocked.__getitem__)]


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
