from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"


@pytest.fixture
def paper_path() -> Path:
    return INSTANCES / "paper.toml"


def bundled_instances() -> list[Path]:
    return sorted(INSTANCES.glob("*.toml"))


def lyapunov_rounds_equal_greedy(utility, r, k: int, rounds: int, weight: float, rng) -> list:
    """Rounds of Lyapunov's score (queues grown by ``r``, served by the picks, a random 95 %
    available): lazy greedy's set equals ``greedy_complete``'s in every round; the traces."""
    import numpy as np

    from fairsched.policies.lyapunov import _Penalised
    from fairsched.submodular.greedy import greedy_complete
    from fairsched.submodular.lazy_greedy import lazy_greedy_trace

    queues = np.zeros(utility.n)
    traces = []
    for _ in range(rounds):
        score = _Penalised(utility, weight, queues)
        available = rng.random(utility.n) < 0.95
        trace = lazy_greedy_trace(score, k, candidates=available)
        assert np.array_equal(trace.selected, greedy_complete(score, k, candidates=available))
        traces.append(trace)
        queues += r
        queues[trace.selected] -= 1.0
        np.maximum(queues, 0.0, out=queues)
    return traces
