"""Scheduling policies behind one interface, and the registry the command line uses."""

from fairsched.policies.base import Policy
from fairsched.policies.baselines import GreedyPolicy, RandomPolicy, RoundRobinPolicy
from fairsched.policies.continuous_greedy import FairCG1, FairCG2
from fairsched.policies.fairdg import FairDG
from fairsched.policies.lp import LPRandom, LPSequenced
from fairsched.policies.lyapunov import Lyapunov
from fairsched.policies.registry import PAPER_POLICIES, POLICIES, make_policy, parse_params

__all__ = ["FairCG1", "FairCG2", "FairDG", "GreedyPolicy", "LPRandom", "LPSequenced", "Lyapunov", "PAPER_POLICIES",
           "POLICIES", "Policy", "RandomPolicy", "RoundRobinPolicy", "make_policy", "parse_params"]
