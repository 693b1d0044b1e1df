"""A least-recently-used cache of arrays bounded in bytes, keyed by a digest of boolean masks.

FairDG caches its greedy completion per distinct pair of masks ``(A_t, available)``. The
masks themselves are ``2n`` bytes: at ``n = 10^5`` a key would outweigh its value (``k``
indices). The key is therefore the 16-byte BLAKE2b digest of the packed masks (a collision
needs about ``2^64`` distinct keys), and the cache evicts the least recently used entries
once the keys, values and bookkeeping exceed ``max_bytes``.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import numpy as np

#: bytes charged per entry beyond its key and value (dict slot, array header)
ENTRY_OVERHEAD = 128
DIGEST_BYTES = 16


def mask_digest(*masks: np.ndarray) -> bytes:
    """16-byte BLAKE2b digest of boolean masks (packed to bits, lengths included)."""
    h = hashlib.blake2b(digest_size=DIGEST_BYTES)
    for mask in masks:
        h.update(np.int64(mask.size).tobytes())
        h.update(np.packbits(mask).tobytes())
    return h.digest()


class ArrayLRU:
    """``bytes → ndarray`` with least-recently-used eviction once :attr:`nbytes` exceeds ``max_bytes``
    (or the entries exceed ``max_entries``)."""

    def __init__(self, max_bytes: int, max_entries: int | None = None) -> None:
        self.max_bytes = int(max_bytes)
        self.max_entries = max_entries
        self._items: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._items)

    @staticmethod
    def _cost(key: bytes, value: np.ndarray) -> int:
        return len(key) + value.nbytes + ENTRY_OVERHEAD

    def get(self, key: bytes) -> np.ndarray | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: bytes, value: np.ndarray) -> None:
        cost = self._cost(key, value)
        if cost > self.max_bytes:
            return
        old = self._items.pop(key, None)
        if old is not None:
            self.nbytes -= self._cost(key, old)
        self._items[key] = value
        self.nbytes += cost
        while self.nbytes > self.max_bytes or (self.max_entries is not None and len(self._items) > self.max_entries):
            evicted, array = self._items.popitem(last=False)
            self.nbytes -= self._cost(evicted, array)

    def clear(self) -> None:
        self._items.clear()
        self.nbytes = 0
