"""fairsched: fair worker scheduling for federated learning (MMSM-CF, seed 003).

Typical use::

    import fairsched as fs
    problem = fs.load_instance("instances/paper.toml")
    opt = fs.optimum(problem)                       # U_opt, the LP yardstick
    schedule = fs.run(problem, fs.make_policy("fairdg"), rounds=100_000, seed=0)
    report = fs.evaluate(schedule, problem, opt.value)
"""

from fairsched.errors import FairschedError, InfeasibleError, InstanceError, PolicyError, TooLargeError
from fairsched.metrics import Report, evaluate
from fairsched.instances import load_instance, problem_from_table, save_instance
from fairsched.lp.solve import Optimum, optimum
from fairsched.policies import POLICIES, FairDG, Policy, make_policy
from fairsched.problem import Problem
from fairsched.runtime.simulation import run
from fairsched.schedule import Schedule

__version__ = "0.1.0"

__all__ = [
    "FairDG", "FairschedError", "InfeasibleError", "InstanceError", "Optimum", "POLICIES",
    "Policy", "PolicyError", "Problem", "Report", "Schedule", "TooLargeError", "evaluate",
    "load_instance", "make_policy", "optimum", "problem_from_table", "run", "save_instance",
]
