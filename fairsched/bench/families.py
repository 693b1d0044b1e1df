"""Instance families of growing ``n`` for sweeps: coverage, facility location, accuracy, concave-modular.

``family(kind, n, seed)`` returns an instance table (the dict form of an instance file,
loadable with :func:`fairsched.problem_from_table`), deterministic in ``seed``. Every family
has ``k = round(n/10)`` (at least 1) and the costly floors of :mod:`fairsched.instances.generators`:
the ``k`` strong workers get 0.1, the weak ones share the rest of ``Σ r = 0.8·k``. Plain
greedy serves only the strong workers, so meeting the floors costs utility (at ``n = 20``
``U_opt`` is 52–60% of the greedy value for the three generator families).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from fairsched.errors import FairschedError
from fairsched.instances.generators import (_costly_floors, concave_modular_instance, coverage_instance,
                                  facility_location_instance)

#: Σ r = LOAD·k in every family, as in the bundled costly instances
LOAD = 0.8


def family_k(n: int) -> int:
    """Workers per round of the size-``n`` member: ``round(n/10)``, at least 1."""
    return max(1, round(n / 10))


def _coverage(n: int, k: int, seed: int) -> dict[str, Any]:
    return coverage_instance(n=n, k=k, elements=5 * n, load=LOAD, seed=seed)


def _facility_location(n: int, k: int, seed: int) -> dict[str, Any]:
    return facility_location_instance(n=n, k=k, points=2 * n, load=LOAD, seed=seed)


def _concave_modular(n: int, k: int, seed: int) -> dict[str, Any]:
    return concave_modular_instance(n=n, k=k, features=max(8, n // 5), load=LOAD, seed=seed)


def _accuracy(n: int, k: int, seed: int) -> dict[str, Any]:
    """The learning curve of Li, Liu and Ji (2021), ``(a, b, c) = (0.05, 0.5, −0.2)``: ``k`` large data sets, the rest small."""
    rng = np.random.default_rng(seed)
    sizes = np.where(np.arange(n) < k, rng.uniform(400, 600, n), rng.uniform(50, 150, n)).round()
    return {
        "name": f"accuracy-n{n}-k{k}-s{seed}",
        "k": k,
        "rounds": 20_000,
        "workers": {"r": _costly_floors(n, k, LOAD)},
        "utility": {"kind": "accuracy", "sizes": sizes.tolist(), "a": 0.05, "b": 0.5, "c": -0.2},
    }


FAMILIES: dict[str, Callable[[int, int, int], dict[str, Any]]] = {
    "coverage": _coverage,
    "facility-location": _facility_location,
    "accuracy": _accuracy,
    "concave-modular": _concave_modular,
}

#: the smallest member: k = 1 strong worker and at least one weak one
MIN_SIZE = 2


def check_family(kind: str) -> None:
    """Raise :class:`FairschedError` unless ``kind`` names a family."""
    if kind not in FAMILIES:
        raise FairschedError(f"unknown family {kind!r}; known: {', '.join(FAMILIES)}")


def check_size(n: Any) -> int:
    """``n`` as an int, or :class:`FairschedError` unless it is an integer >= :data:`MIN_SIZE`."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < MIN_SIZE:
        raise FairschedError(f"family size must be an integer >= {MIN_SIZE}, got {n!r}")
    return int(n)


def family(kind: str, n: int, seed: int = 0) -> dict[str, Any]:
    """The size-``n`` member of family ``kind`` (one of :data:`FAMILIES`) as an instance table."""
    check_family(kind)
    n = check_size(n)
    return FAMILIES[kind](n, family_k(n), int(seed))
