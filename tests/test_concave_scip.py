"""SCIP as the exact solver of concave-of-modular pricing (fairsched.lp.pricing.concave_scip).

Correctness against enumeration and against HiGHS's tangent-cut loop, the early stops
(``target``, ``enough``, the deadline), and how the backend is chosen."""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest

from fairsched.errors import MissingDependencyError
from fairsched.lp.pricing import ConcavePricing
from fairsched.lp.pricing import concave
from fairsched.lp.pricing.concave_scip import solve_concave
from fairsched.solvers import k_subset_masks
from fairsched.utilities import ConcaveModular, PropensityWeightedAccuracy

pytest.importorskip("pyscipopt")  # the test extra installs it; without it the backend is HiGHS


def random_case(seed: int, curve: str) -> tuple[ConcaveModular, int, np.ndarray, np.ndarray]:
    """A concave-of-modular utility with sparse, uneven features, ``k``, prices ``λ`` and the
    values ``f(S) + λ(S)`` of every ``k``-set."""
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(8, 15)), int(rng.integers(2, 6))
    features = rng.lognormal(0.0, 1.0, (int(rng.integers(3, 9)), n)) * (rng.uniform(size=(1, n)) < 0.8)
    features[rng.uniform(size=features.shape) < 0.4] = 0.0
    utility = ConcaveModular(features, curve)
    lam = rng.exponential(0.5, n) * (rng.uniform(size=n) < 0.6)
    masks = k_subset_masks(n, k)
    return utility, k, lam, utility.values(masks) + masks @ lam


@pytest.mark.parametrize("curve", ["sqrt", "log1p"])
@pytest.mark.parametrize("seed", range(8))
def test_scip_pricing_finds_the_enumerated_maximum(curve: str, seed: int) -> None:
    """SCIP alone, started from the worst ``k``-set, returns the maximum over all ``k``-sets
    as its first set with its bound at it; the oracle on either backend (whose heuristic
    runs first) returns it too, exact."""
    utility, k, lam, every = random_case(seed, curve)
    best_true = float(every.max())
    tol = 1e-7 * max(1.0, abs(best_true))
    worst = k_subset_masks(utility.n, k)[int(every.argmin())]
    answer = solve_concave(utility.features, np.ones(utility.features.shape[0]), curve, lam, k,
                           start=worst, rel_gap=1e-9)
    first = float(utility.values(answer.masks[:1])[0] + answer.masks[0] @ lam)
    assert first == pytest.approx(best_true, abs=tol)
    assert best_true - tol <= answer.upper_bound <= best_true + tol
    for backend in ("scip", "highs"):
        oracle = ConcavePricing(utility, k, backend=backend, perturbations=0)
        result = oracle(lam)
        best = float(result.values[0] + result.columns[0] @ lam)
        assert result.exact, backend
        assert best == pytest.approx(best_true, abs=tol), backend
        assert result.upper_bound >= best_true - tol, backend
        np.testing.assert_allclose(result.values, utility.values(result.columns), rtol=1e-12)


@pytest.mark.parametrize("curve", ["sqrt", "log1p"])
def test_the_submodular_cuts_given_to_scip_keep_the_maximum_and_are_used(curve: str) -> None:
    """SCIP with the concave terms' submodular cuts as its separator, started from the worst
    ``k``-set, still returns the enumerated maximum with its bound at it, on instances with a
    feature nobody has (which has no ``t_j`` in SCIP's model and no term in the cuts, so the
    two indexings must still line up); and some of the cuts are violated and given to SCIP."""
    given = 0
    for seed in range(8):
        utility, k, lam, every = random_case(seed, curve)
        features = np.insert(utility.features, 1, 0.0, axis=0)
        term = concave.ConcaveTerm(concave.concave_form(ConcaveModular(features, curve)), k)
        best_true = float(every.max())
        tol = 1e-7 * max(1.0, abs(best_true))
        worst = k_subset_masks(utility.n, k)[int(every.argmin())]
        answer = solve_concave(features, np.ones(features.shape[0]), curve, lam, k, start=worst, rel_gap=1e-9,
                               cuts=term.submodular_cuts)
        first = float(utility.values(answer.masks[:1])[0] + answer.masks[0] @ lam)
        assert first == pytest.approx(best_true, abs=tol), seed
        assert best_true - tol <= answer.upper_bound <= best_true + tol, seed
        given += answer.cuts
    assert given > 0


def test_solve_concave_stops_at_the_target_and_at_enough() -> None:
    """From the worst set as start: with a target, SCIP returns a set worth at least it; with
    ``enough`` above the maximum, its bound is at most ``enough`` and still at or above the
    maximum."""
    utility, k, lam, every = random_case(3, "sqrt")
    masks = k_subset_masks(utility.n, k)
    worst, best_true = masks[int(every.argmin())], float(every.max())
    W, coef = utility.features, np.ones(utility.features.shape[0])

    target = best_true - 0.1 * (best_true - float(every.min()))
    reached = solve_concave(W, coef, "sqrt", lam, k, start=worst, rel_gap=1e-9, target=target)
    values = utility.values(reached.masks) + reached.masks @ lam
    assert values.max() >= target - 1e-9
    assert (reached.masks.sum(axis=1) == k).all()

    enough = best_true + 0.05
    bounded = solve_concave(W, coef, "sqrt", lam, k, start=worst, rel_gap=1e-9, enough=enough)
    assert best_true - 1e-9 <= bounded.upper_bound <= enough


@pytest.mark.parametrize("seed", range(6))
def test_solve_concave_with_a_target_below_enough_still_searches(seed: int) -> None:
    """``enough`` is SCIP's objective limit, which SCIP also takes as its first primal bound;
    a target at or below it once ended the solve before its first node with nothing found
    and no bound.  Now: with ``enough`` below the maximum the solve finds a set worth more;
    with it above, the bound is ``enough`` or less and never below the maximum."""
    utility, k, lam, every = random_case(seed, "log1p")
    worst = k_subset_masks(utility.n, k)[int(every.argmin())]
    best_true, low = float(every.max()), float(every.min())
    W, coef = utility.features, np.ones(utility.features.shape[0])
    below, target = best_true - 0.05 * (best_true - low), best_true - 0.5 * (best_true - low)
    found = solve_concave(W, coef, "log1p", lam, k, start=worst, rel_gap=1e-9, target=target, enough=below)
    values = utility.values(found.masks) + found.masks @ lam
    assert found.masks.shape[0] >= 1 and values.max() > below
    assert found.upper_bound >= best_true - 1e-9
    above = best_true + 0.05 * (best_true - low)
    proved = solve_concave(W, coef, "log1p", lam, k, start=worst, rel_gap=1e-9, target=target, enough=above)
    assert best_true - 1e-9 <= proved.upper_bound <= above


def test_a_call_with_no_time_left_returns_a_valid_answer() -> None:
    """A deadline already passed: SCIP stops at once; whatever it returns is a ``k``-set and a
    bound no lower than the maximum (possibly ``inf``)."""
    utility, k, lam, every = random_case(5, "log1p")
    start = k_subset_masks(utility.n, k)[0]
    answer = solve_concave(utility.features, np.ones(utility.features.shape[0]), "log1p", lam, k,
                           start=start, rel_gap=1e-9, stop=time.perf_counter() - 1.0)
    assert (answer.masks.sum(axis=1) == k).all()
    assert answer.upper_bound >= float(every.max()) - 1e-9


def test_the_backend_is_scip_where_it_applies_and_is_installed(monkeypatch) -> None:
    utility, k, _, _ = random_case(0, "sqrt")
    assert ConcavePricing(utility, k).backend == "scip"
    assert ConcavePricing(utility, k).name == "concave-scip"
    assert ConcavePricing(utility, k, backend="highs").name == "concave-milp"
    with pytest.raises(ValueError, match="backend must be one of auto, highs, scip, not 'cplex'"):
        ConcavePricing(utility, k, backend="cplex")

    monkeypatch.setattr(concave, "scip_installed", lambda: False)
    assert ConcavePricing(utility, k).backend == "highs"


def test_scip_refuses_curves_it_is_not_given() -> None:
    """The propensity-weighted accuracy's power curves stay on HiGHS; asking SCIP for them is an error."""
    rng = np.random.default_rng(0)
    utility = PropensityWeightedAccuracy(rng.integers(1, 50, (6, 2)).astype(float), [0.5, 0.5])
    assert ConcavePricing(utility, 2).backend == "highs"
    with pytest.raises(ValueError, match="handles concave of modular with the curves"):
        ConcavePricing(utility, 2, backend="scip")
    sqrt = ConcaveModular(np.ones((2, 5)), "sqrt")
    terms = [(1.0, concave.ConcaveTerm(concave.concave_form(sqrt), 2))]
    with pytest.raises(ValueError, match="and no custom terms, not custom terms"):
        ConcavePricing(sqrt, 2, backend="scip", terms=terms)


def test_asking_for_scip_without_it_says_how_to_install_it(monkeypatch) -> None:
    utility, k, _, _ = random_case(0, "sqrt")
    monkeypatch.setitem(sys.modules, "pyscipopt", None)  # import fails as if not installed
    assert ConcavePricing(utility, k).backend == "highs"
    with pytest.raises(MissingDependencyError, match=r"pip install '\.\[scip\]'"):
        ConcavePricing(utility, k, backend="scip")
