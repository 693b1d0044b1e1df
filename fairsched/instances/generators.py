"""Instance generators: the reconstructed paper instance and families where fairness is costly.

The paper instance is the simulation of Li, Liu and Ji, "Federated Learning with Fair
Worker Selection: A Multi-Round Submodular Maximization Approach" (2021), Section VI, with
reconstructed data sizes (``docs/mathematics.md`` §10). Every generator is deterministic
in its ``seed`` and returns an instance table (the dict form of an instance file), so the
same call writes the same file on every machine; ``python -m fairsched.experiments.bundled_instances``
writes the bundled instances with them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Li, Liu and Ji (2021), Section VI: r = beta * r_base; the paper reports r at beta = 0.42.
PAPER_R_BASE = [0.5, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.5, 1.5]
#: [reconstruction] The data sizes of the paper's Table I were not available to us. These are
#: chosen so that plain greedy (largest total size) picks workers 2, 3, 4, 6, 7, 8 (1-based),
#: as the paper reports; U_opt then runs from 0.8481 (beta = 0) to 0.8436 (beta = 0.6).
PAPER_SIZES = [260, 520, 480, 450, 300, 500, 460, 440, 280, 250]
PAPER_BETAS = [round(0.06 * i, 2) for i in range(11)]


def paper_instance(beta: float = 0.42) -> dict[str, Any]:
    """Li, Liu and Ji (2021), Section VI: n = 10, k = 6, T = 10^5, accuracy utility (a, b, c) = (0.05, 0.5, −0.2)."""
    return {
        "name": "seed003-section6",
        "k": 6,
        "rounds": 100_000,
        "workers": {
            "ids": [f"u{i + 1}" for i in range(10)],
            "r_base": PAPER_R_BASE,
            "beta": beta,
        },
        "utility": {"kind": "accuracy", "sizes": PAPER_SIZES, "a": 0.05, "b": 0.5, "c": -0.2},
    }


#: floor of each of the ``k`` strong workers in the costly families; they are wanted anyway
STRONG_FLOOR = 0.1


def _costly_floors(n: int, k: int, load: float) -> list[float]:
    """Floors with ``Σ r = load·k``: 0.1 for the ``k`` strong workers, the rest shared by the weak.

    The weak workers' floor exceeds ``k/n`` whenever ``load·k − 0.1·k > (n − k)·k/n``, so
    uniform sampling and round-robin fail it and only a fairness-aware policy meets it.
    """
    weak = (load * k - STRONG_FLOOR * k) / (n - k)
    return [STRONG_FLOOR] * k + [round(min(1.0, weak), 6)] * (n - k)


def coverage_instance(n: int = 12, k: int = 4, elements: int = 60, load: float = 0.8,
                      seed: int = 0) -> dict[str, Any]:
    """Weighted coverage where a few workers see most of the data and the rest see a little.

    Workers ``0..k-1`` each cover a large random share of the elements; the others cover
    small, overlapping subsets, so forcing them in (``Σ r = load·k``) costs utility.
    """
    rng = np.random.default_rng(seed)
    weights = rng.uniform(0.5, 1.5, size=elements).round(4)
    covers = []
    for u in range(n):
        share = 0.35 if u < k else 0.06
        size = max(1, int(share * elements))
        covers.append(sorted(int(e) for e in rng.choice(elements, size=size, replace=False)))
    return {
        "name": f"coverage-n{n}-k{k}-s{seed}",
        "k": k,
        "rounds": 20_000,
        "workers": {"r": _costly_floors(n, k, load)},
        "utility": {"kind": "coverage", "covers": covers, "weights": weights.tolist()},
    }


def facility_location_instance(n: int = 12, k: int = 4, points: int = 40, load: float = 0.8,
                               seed: int = 0) -> dict[str, Any]:
    """Facility location on clustered points: strong workers represent many points, weak ones few."""
    rng = np.random.default_rng(seed)
    strength = np.where(np.arange(n) < k, 1.0, 0.25)
    similarity = rng.uniform(0.0, 1.0, size=(points, n)) ** 2 * strength
    return {
        "name": f"facility-location-n{n}-k{k}-s{seed}",
        "k": k,
        "rounds": 20_000,
        "workers": {"r": _costly_floors(n, k, load)},
        "utility": {"kind": "facility-location", "similarity": similarity.round(4).tolist()},
    }


def concave_modular_instance(n: int = 12, k: int = 4, features: int = 8, load: float = 0.8,
                             concave: str = "sqrt", seed: int = 0) -> dict[str, Any]:
    """Concave of modular sums: each feature's value saturates; weak workers carry little mass."""
    rng = np.random.default_rng(seed)
    strength = np.where(np.arange(n) < k, 1.0, 0.05)
    feats = rng.exponential(1.0, size=(features, n)) * strength
    return {
        "name": f"concave-modular-n{n}-k{k}-s{seed}",
        "k": k,
        "rounds": 20_000,
        "workers": {"r": _costly_floors(n, k, load)},
        "utility": {"kind": "concave-modular", "features": feats.round(4).tolist(), "concave": concave},
    }
