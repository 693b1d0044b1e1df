"""Adapters that put a :class:`fairsched.runtime.scheduler.Scheduler` inside federated-learning frameworks.

Each adapter lives in its own module and imports its framework only there, so
``import fairsched`` (and ``import fairsched.integrations``) never needs one:

- :mod:`fairsched.integrations.flower`: a Flower Message-API strategy
  (``pip install 'flwr>=1.42,<1.43'``, or from a fairsched checkout ``pip install '.[flower]'``).
"""

__all__: list[str] = []
