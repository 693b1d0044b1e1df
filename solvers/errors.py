"""Errors raised by the solvers package."""

from __future__ import annotations


class SolverError(RuntimeError):
    """The solver failed or stopped with a status other than optimal or infeasible."""


class TooManyColumnsError(ValueError):
    """Enumerating the columns would exceed the configured ``max_columns`` limit."""


class InfeasibleLPError(ValueError):
    """The fairness floors cannot be met by any distribution over the given columns."""
