"""Lazy greedy's outside: the first step decided on every head at once, the outside partitioned
once for several extensions of the prefix; the sets are greedy's either way."""

from __future__ import annotations

import importlib

import numpy as np

from conftest import lyapunov_rounds_equal_greedy
from fairsched.utilities import AccuracyUtility


def test_lyapunov_score_with_many_extensions_equals_greedy(monkeypatch):
    """Uniform sizes and gamma floors (many candidates of similar score, so the prefix grows
    several times and uses the reserve of one partition of the outside): over 20 rounds of
    queue updates lazy greedy's set is greedy's, the first pick of most rounds is decided at
    once, and extensions outnumber the partitions of the outside."""
    module = importlib.import_module("fairsched.submodular.lazy_greedy")
    calls = {"extend": 0, "split": 0, "single": 0}

    def counting(name):
        original = getattr(module._Prefix, name)

        def counted(self, *args):
            result = original(self, *args)
            calls[name.strip("_").split("_")[0]] += 1 if name != "_single_step" else int(result)
            return result

        return counted

    for name in ("_extend", "_split", "_single_step"):
        monkeypatch.setattr(module._Prefix, name, counting(name))
    rng = np.random.default_rng(21)
    n, k, rounds = 6000, 60, 20
    utility = AccuracyUtility(rng.uniform(10, 1000, n))
    r = rng.gamma(0.5, 1.0, n)
    r *= 0.95 * k / r.sum()
    lyapunov_rounds_equal_greedy(utility, r, k, rounds, 10.0, rng)
    assert calls["single"] >= rounds // 2
    assert calls["extend"] > calls["split"] > 0
