"""Errors of the selection-bias toolkit; every one is a :class:`~fairsched.errors.FairschedError`.

The command line maps them to exit code 2 (bad input) like any other ``FairschedError``.
"""

from __future__ import annotations

from fairsched.errors import FairschedError


class PropensityError(FairschedError):
    """Base class: the data cannot support the requested propensity computation."""


class ShapeError(PropensityError):
    """Arrays that must describe the same units (or the same covariates) disagree in shape."""


class InvalidPropensityError(PropensityError):
    """A propensity is 0, negative, above 1 or not finite (positivity fails)."""


class SingularDesignError(PropensityError):
    """The logistic design has no unique maximum-likelihood estimate.

    Raised for perfect collinearity (a rank-deficient design), for complete or
    quasi-complete separation (a linear combination of covariates predicts the outcome
    perfectly, so the coefficients diverge) and for an outcome that never varies.
    """


class CalibrationError(PropensityError):
    """Calibration margins that no positive reweighting of the enrolled units can reach."""


class EstimationError(PropensityError):
    """A numerical estimator (a root finder, a Newton iteration) did not converge."""
