"""fairsched: fair worker scheduling for federated learning (MMSM-CF, seed 003)."""

__version__ = "0.1.0"
