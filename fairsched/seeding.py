"""Randomness: every random routine of fairsched takes ``seed``, an int or a numpy Generator.

Same seed, same result, on every machine: an ``int`` seeds ``numpy.random.default_rng``; a
``Generator`` is used as it is (and advanced); ``None`` draws fresh entropy.
"""

from __future__ import annotations

import numpy as np

from fairsched.errors import FairschedError

#: an ``int`` (>= 0), a :class:`numpy.random.Generator`, or ``None`` for fresh entropy
Seed = int | np.random.Generator | None


def as_generator(seed: Seed) -> np.random.Generator:
    """``seed`` as a Generator.

    >>> int(as_generator(3).integers(100)) == int(as_generator(3).integers(100))
    True
    >>> as_generator(-1)
    Traceback (most recent call last):
    ...
    fairsched.errors.FairschedError: seed must be an integer >= 0, a numpy Generator or None, got -1
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        raise FairschedError(f"seed must be an integer >= 0, a numpy Generator or None, got {seed!r}")
    return np.random.default_rng(None if seed is None else int(seed))
