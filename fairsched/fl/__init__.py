"""Synthetic federated logistic regression under selection bias (numpy/scipy only).

- :mod:`~fairsched.fl.model`: client data, the target objective ``F`` and ``F*``, local steps;
- :mod:`~fairsched.fl.population`: a population whose covariates drive data and selection;
- :mod:`~fairsched.fl.training`: the weighted (Hájek) aggregation loop;
- :mod:`~fairsched.fl.experiment`: the six-rule FedIPW experiment, after the synthetic experiment of
  Morishita, "Who Trains Matters: Federated Learning under Enrollment and Participation
  Selection Biases" (2026).
"""

from fairsched.fl.errors import SimulationError
from fairsched.fl.experiment import (RULES, ExperimentConfig, ExperimentResult, SeedRun,
                                     run_experiment, run_seed)
from fairsched.fl.model import ClientData, Objective, client_objective, local_updates
from fairsched.fl.population import (BIAS_LEVELS, Population, PopulationConfig, bias_strength,
                                     make_population)
from fairsched.fl.training import TrainConfig, train

__all__ = [
    "BIAS_LEVELS", "RULES", "ClientData", "ExperimentConfig", "ExperimentResult", "Objective",
    "Population", "PopulationConfig", "SeedRun", "SimulationError", "TrainConfig",
    "bias_strength", "client_objective", "local_updates", "make_population", "run_experiment",
    "run_seed", "train",
]
