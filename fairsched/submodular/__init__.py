"""Set-function algorithms: greedy (plain and lazy), the multilinear extension, pipage rounding."""

from fairsched.submodular.greedy import greedy_complete
from fairsched.submodular.lazy_greedy import lazy_greedy
from fairsched.submodular.multilinear import MultilinearOracle, supported_methods
from fairsched.submodular.rounding import pipage_round, pipage_round_batch

__all__ = ["MultilinearOracle", "greedy_complete", "lazy_greedy", "pipage_round", "pipage_round_batch",
           "supported_methods"]
