"""lp-sequenced keeps every debt below 1 in every round (``fairsched.policies.lp``), property-tested.

Random instances with ``n <= 14``, ``T <= 2,000``: floors summing to ``k`` exactly with periodic
values (``m/D`` for ``D`` in 3, 6, 7, 12, 14: 1/3, 2/7, 5/12, ...), the same floors written as
decimals, and random floors with ``Σ r < k``; the utility facility location, or accuracy on
heavy-tailed sizes, where the guard keeps the machines of the workers the plan plays in
every round wherever the other floors fit on the rest. The debt after round ``t`` is
``d_u(t) = r_u·t − N_u(t)`` in float64, exactly as the problem states ``r``, and the test
asserts ``d_u(t) < 1`` strictly.

Decimals at the boundary. lp-sequenced's feasibility guard counts the selections worker
``u`` owes by round ``t`` as ``⌊r_u·t + 10^-9⌋`` (``DeadlineGuard._due``, tolerance
``DEBT_TOLERANCE``): a product within ``10^-9`` below an integer ``m`` owes ``m``. So a
floor written as a decimal just below a periodic value (1/3 as 0.333333333333, which at
``t = 3`` gives ``r·t = 0.999999999999``) is served as if it were the fraction, and one just
above (2/3 as 0.666666666667) owes ``m`` once ``r·t >= m``. Both keep ``r_u·t − N_u(t) < 1``
strictly, with no tolerance in the assertion; decimals of 2, 3 or 6 digits are rounded down
so that ``Σ r <= k``, 12-digit ones to the nearest (``Σ r`` may then exceed ``k`` by less
than the problem's feasibility tolerance ``10^-9``).
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fairsched as fs
from fairsched.problem import Problem
from fairsched.utilities import AccuracyUtility, FacilityLocation

DENOMINATORS = (3, 6, 7, 12, 14)


def periodic_floors(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """Numerators ``m_u <= D`` summing to ``k·D``, spread at random: floors ``m_u/D`` with ``Σ = k``."""
    D = int(rng.choice(DENOMINATORS))
    m = np.zeros(n, dtype=np.int64)
    for _ in range(k * D):
        room = np.flatnonzero(m < D)
        m[rng.choice(room)] += 1
    return m / D, D


def as_decimals(r: np.ndarray, digits: int) -> np.ndarray:
    if digits >= 12:
        return np.round(r, digits)
    return np.floor(r * 10**digits) / 10**digits


@st.composite
def instances(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n = draw(st.integers(2, 14))
    k = draw(st.integers(1, min(n - 1, 5)))
    kind = draw(st.sampled_from(["fraction", "decimal", "below"]))
    if kind == "below":
        r = np.minimum(rng.dirichlet(np.ones(n)) * k * rng.uniform(0.5, 1.0), 1.0)
    else:
        r, _ = periodic_floors(rng, n, k)
        if kind == "decimal":
            r = as_decimals(r, draw(st.sampled_from([2, 3, 6, 12])))
    long = draw(st.integers(0, 24)) == 0  # one example in 25 plays up to 2,000 rounds
    rounds = draw(st.integers(1500, 2000) if long else st.integers(1, 120))
    if draw(st.booleans()):
        utility = AccuracyUtility(np.round((rng.pareto(1.2, n) + 1) * 20))
    else:
        utility = FacilityLocation(rng.uniform(size=(int(rng.integers(2, 7)), n)) ** 2)
    return Problem(utility, k=k, r=r), rounds


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_lp_sequenced_keeps_every_debt_below_one(case):
    problem, rounds = case
    schedule = fs.run(problem, "lp-sequenced", rounds)
    counts = np.cumsum(schedule.masks(), axis=0)
    t = np.arange(1, rounds + 1, dtype=float)[:, None]
    debt = problem.r[None, :] * t - counts
    worst = float(debt.max())
    assert worst < 1, (problem.r.tolist(), problem.k, rounds, worst)
    assert (schedule.masks().sum(axis=1) <= problem.k).all()
