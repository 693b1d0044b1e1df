"""A small math-programming layer: numbers in, numbers out.

The distribution LP over columns S (boolean ``members`` rows, values f(S)) with
fairness floors r::

    U_opt = max sum_S p_S f(S)  s.t.  sum_{S ∋ u} p_S >= r_u,  sum_S p_S = 1,  p >= 0

solved over all columns (``solve_distribution_lp``) or by column generation with a
pricing callback (``column_generation``).
"""

from .colgen import ColumnGenerationResult, PricingResult, column_generation
from .columns import count_k_subsets, k_subset_masks
from .cvxpy_model import DistributionModel, build_cvxpy_model, solve_with_cvxpy
from .errors import InfeasibleLPError, SolverError, TooManyColumnsError
from .grouped import GroupedLPResult, solve_grouped_distribution_lp
from .lp import DistributionLPResult, solve_distribution_lp

__all__ = [
    "ColumnGenerationResult",
    "PricingResult",
    "column_generation",
    "DistributionLPResult",
    "DistributionModel",
    "GroupedLPResult",
    "InfeasibleLPError",
    "SolverError",
    "TooManyColumnsError",
    "build_cvxpy_model",
    "count_k_subsets",
    "k_subset_masks",
    "solve_distribution_lp",
    "solve_grouped_distribution_lp",
    "solve_with_cvxpy",
]
