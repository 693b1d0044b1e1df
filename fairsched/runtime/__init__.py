"""Running policies: the simulation loop, the embeddable :class:`Scheduler`, checkpoints."""

from fairsched.runtime.scheduler import Scheduler
from fairsched.runtime.simulation import Simulation, run

__all__ = ["Scheduler", "Simulation", "run"]
