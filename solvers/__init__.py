"""A small math-programming layer: numbers in, numbers out (installed as ``fairsched.solvers``).

The distribution LP over columns S (boolean ``members`` rows, values f(S)) with
fairness floors r::

    U_opt = max sum_S p_S f(S)  s.t.  sum_{S ∋ u} p_S >= r_u,  sum_S p_S = 1,  p >= 0

solved over all columns (``solve_distribution_lp``) or by column generation with a
pricing callback (``column_generation``). It imports nothing else of fairsched. Names are
loaded on first use, so importing the package does not load HiGHS or SciPy's optimiser.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "ColumnGenerationResult": "colgen",
    "Columns": "columns",
    "DEFAULT_GAP": "colgen",
    "PricingResult": "colgen",
    "column_generation": "colgen",
    "reduced_costs": "colgen",
    "relative_gap": "colgen",
    "count_k_subsets": "columns",
    "k_subset_masks": "columns",
    "DistributionModel": "cvxpy_model",
    "build_cvxpy_model": "cvxpy_model",
    "solve_with_cvxpy": "cvxpy_model",
    "InfeasibleLPError": "errors",
    "SolverError": "errors",
    "TooManyColumnsError": "errors",
    "GroupedLPResult": "grouped",
    "solve_grouped_distribution_lp": "grouped",
    "DistributionLPResult": "lp",
    "LPTimeLimitError": "lp",
    "lagrangian_bound": "lp",
    "kth_smallest": "selection",
    "largest": "selection",
    "new_highs": "lp",
    "set_option": "lp",
    "solve_distribution_lp": "lp",
    "Result": "result",
}

__all__ = sorted(_EXPORTS)  # noqa: PLE0605 (the lazily loaded names)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
