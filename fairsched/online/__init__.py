"""Fair scheduling when the utility is unknown: learners of ``f`` and the policies that plan with them.

- :mod:`fairsched.online.learner`: the interface (estimate and optimistic utility from each
  round's :class:`~fairsched.feedback.Feedback`);
- :mod:`fairsched.online.accuracy_curve`: the accuracy curve's ``(a, b, c)`` by nonlinear least squares;
- :mod:`fairsched.online.stratum_curves`: the same per stratum, for the propensity-weighted accuracy;
- :mod:`fairsched.online.linear_features`: weights of coverage / facility-location /
  concave-of-modular / modular utilities by ridge regression with optimistic weights;
- :mod:`fairsched.online.oort`: Oort's per-worker statistical utility, and Oort-like selection;
- :mod:`fairsched.online.policy`: FairDG or lp-sequenced planning with a learner, re-planned on
  a doubling schedule, the floors' bookkeeping untouched;
- :mod:`fairsched.online.simulate`: the harness of ``fairsched simulate online``.
"""

from fairsched.online.accuracy_curve import AccuracyCurveLearner
from fairsched.online.learner import Learner
from fairsched.online.linear_features import LinearFeaturesLearner
from fairsched.online.oort import OortLearner, OortPolicy
from fairsched.online.policy import OnlinePolicy
from fairsched.online.stratum_curves import StratumCurvesLearner

__all__ = ["AccuracyCurveLearner", "Learner", "LinearFeaturesLearner", "OnlinePolicy", "OortLearner", "OortPolicy",
           "StratumCurvesLearner"]
