"""A small math-programming layer: numbers in, numbers out.

The distribution LP over columns S (boolean ``members`` rows, values f(S)) with
fairness floors r::

    U_opt = max sum_S p_S f(S)  s.t.  sum_{S ∋ u} p_S >= r_u,  sum_S p_S = 1,  p >= 0
"""

from .columns import count_k_subsets, k_subset_masks
from .cvxpy_model import DistributionModel, build_cvxpy_model, solve_with_cvxpy
from .errors import InfeasibleLPError, SolverError, TooManyColumnsError
from .grouped import GroupedLPResult, solve_grouped_distribution_lp
from .lp import DistributionLPResult, solve_distribution_lp

__all__ = [
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
