"""Selection bias: propensity models, IPW, weight diagnostics, calibration and FLOSS.

The tools of FedIPW (G. Morishita, "Who Trains Matters: Federated Learning under
Enrollment and Participation Selection Biases", 2026) and FLOSS (D. J. Goetze, D. J.
Felten, J. R. Albrecht and R. Bhattacharya, "FLOSS: Federated Learning with Opt-Out and
Straggler Support", arXiv:2507.23115, 2025); the formulas are in ``docs/mathematics.md``
§11 and ``docs/selection_bias.md``. One module per idea:

- :mod:`~fairsched.propensity.logistic`: unpenalised logistic regression with standard
  errors (independent or cluster-robust) and singular-design / separation detection
  (scikit-learn, imported lazily);
- :mod:`~fairsched.propensity.flexible`: spline / quadratic-feature logistic and calibrated
  gradient-boosting propensities, selected by name (``model="spline"``);
- :mod:`~fairsched.propensity.two_stage`: enrollment × participation propensities;
- :mod:`~fairsched.propensity.ipw`: Horvitz–Thompson and Hájek means, IPW stratum shares;
- :mod:`~fairsched.propensity.diagnostics`: Kish ESS, weight ratios, ASMD (also of squares
  and pairwise products), trimming;
- :mod:`~fairsched.propensity.calibration`: raking and linear calibration to margins;
- :mod:`~fairsched.propensity.floss`: shadow-variable response propensities (MNAR opt-out),
  weighted sampling and clipped, noised updates.
"""

from fairsched.propensity.calibration import (CalibrationResult, Margins, build_margins,
                                              calibrate)
from fairsched.propensity.diagnostics import (ASMD_THRESHOLD, BalanceReport, WeightSummary, asmd,
                                              balance_report, kish_ess, nonlinear_balance,
                                              nonlinear_terms, trim_weights, weight_summary,
                                              weighted_mean)
from fairsched.propensity.errors import (CalibrationError, EstimationError,
                                         InvalidPropensityError, PropensityError, ShapeError,
                                         SingularDesignError)
from fairsched.propensity.floss import (ShadowFit, fit_shadow, floss_weights, privatize,
                                        sample_responders)
from fairsched.propensity.flexible import (MODELS, BoostingFit, FeatureLogisticFit,
                                           fit_propensity)
from fairsched.propensity.ipw import hajek_mean, horvitz_thompson_mean, ipw_shares, ipw_weights
from fairsched.propensity.logistic import LogisticFit, fit_logistic
from fairsched.propensity.two_stage import (TwoStagePropensity, fit_enrollment,
                                            fit_participation, fit_two_stage)
from fairsched.propensity.validation import check_propensities

__all__ = [
    "ASMD_THRESHOLD", "MODELS", "BoostingFit", "FeatureLogisticFit", "fit_propensity",
    "nonlinear_balance", "nonlinear_terms",
    "BalanceReport", "CalibrationError", "CalibrationResult", "EstimationError",
    "InvalidPropensityError", "LogisticFit", "Margins", "PropensityError", "ShadowFit",
    "ShapeError", "SingularDesignError", "TwoStagePropensity", "WeightSummary", "asmd",
    "balance_report", "build_margins", "calibrate", "check_propensities", "fit_enrollment",
    "fit_logistic", "fit_participation", "fit_shadow", "fit_two_stage", "floss_weights",
    "hajek_mean", "horvitz_thompson_mean", "ipw_shares", "ipw_weights", "kish_ess",
    "privatize", "sample_responders", "trim_weights", "weight_summary", "weighted_mean",
]
