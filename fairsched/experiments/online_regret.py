"""Regret of learning the utility inside the floors, on the bundled instances.

    python -m fairsched.experiments.online_regret [--rounds 100000] [--seeds 3] [--noise 0.05]
        [--instances paper coverage facility-location concave-modular] [--out DIR]

For every instance and policy (:mod:`fairsched.online.simulate`: the learning pairs, the
known-utility ceilings, random-k, and Oort-like selection with and without floors) and
every seed, plays ``--rounds`` rounds with reward noise ``--noise·U_opt`` and prints a
markdown row: regret per round as a fraction of ``U_opt`` at ``T = 10,000`` and at the
horizon (mean ± standard error over the seeds), the slope of log regret against log ``T``
from ``T = 1,000`` (mean ± se; ``n/a`` when a regret is not positive), the largest max debt
and the smallest fairness slack over the seeds. With ``--out`` it also writes
``regret_<instance>.png`` (regret against ``T``, log-log), ``parameter_error_<instance>.png``
(the learners' parameter error against ``T``) and ``results.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

import fairsched as fs
from fairsched.online.simulate import simulate_online


#: (policy, learner) per instance kind: the learning pairs first, then the baselines
def pairs_for(kind: str) -> list[tuple[str, str | None]]:
    learner = "accuracy-curve" if kind == "accuracy" else "linear-features"
    return [("lp-sequenced", learner), ("fairdg", learner), ("lp-sequenced-known", None), ("fairdg-known", None),
            ("fairdg", "oort"), ("oort", "oort"), ("random", None)]


def _mean_se(values: list[float]) -> str:
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return "n/a"
    mean = float(np.mean(values))
    se = float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) > 1 else float("nan")
    return f"{mean:.3g} ± {se:.2g}" if math.isfinite(se) else f"{mean:.3g}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fairsched.experiments.online_regret")
    parser.add_argument("--rounds", type=int, default=100_000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--noise", type=float, default=0.05)
    parser.add_argument("--instances", nargs="+", default=["paper", "coverage", "facility-location", "concave-modular"])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    results = []
    print("| instance | policy | learner | regret/round ÷ U_opt at T = 10⁴ | at T = "
          f"{args.rounds:,} | slope of log R (T ≥ 10³) | max debt | min slack |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.instances:
        problem = fs.load_instance(name)
        for policy, learner in pairs_for(problem.utility.kind):
            runs = [simulate_online(problem, policy, learner, args.rounds, args.noise, seed) for seed in range(args.seeds)]
            results.extend(runs)
            at = [next((r for t, r in run["regret_curve"] if t == 10_000), None) for run in runs]
            early = [None if r is None else r / 10_000 / run["U_opt"] for r, run in zip(at, runs)]
            late = [run["regret_per_round"] / run["U_opt"] for run in runs]
            print(f"| {name} | {policy} | {learner or '-'} | {_mean_se(early)} | {_mean_se(late)} | "
                  f"{_mean_se([run['slope'] for run in runs])} | {max(run['max_debt'] for run in runs):.3g} | "
                  f"{min(run['fairness_slack'] for run in runs):+.3g} |", flush=True)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(results, indent=1))
        _plots(results, args.out)
    return 0


def _plots(results: list[dict], out: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plots", file=sys.stderr)
        return
    for name in sorted({r["instance"] for r in results}):
        mine = [r for r in results if r["instance"] == name]
        _loglog(plt, mine, "regret_curve", "regret T·U_opt − Σ f(S_t)", name, out / f"regret_{name}.png")
        learning = [r for r in mine if r["parameter_error"] is not None]
        if learning:
            _loglog(plt, learning, "parameter_error_curve", "parameter error", name,
                    out / f"parameter_error_{name}.png")


def _loglog(plt, runs: list[dict], curve: str, ylabel: str, title: str, path: Path) -> None:  # type: ignore[no-untyped-def]
    """One log–log line per (policy, learner): the mean of ``curve`` over its runs (positive points only)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for key in sorted({(r["policy"], r["learner"]) for r in runs}, key=str):
        group = [r for r in runs if (r["policy"], r["learner"]) == key]
        T = np.array([t for t, _ in group[0][curve]])
        Y = np.mean([[y for _, y in run[curve]] for run in group], axis=0)
        keep = Y > 0
        ax.loglog(T[keep], Y[keep], marker=".", label=key[0] + (f" + {key[1]}" if key[1] else ""))
    ax.set_xlabel("rounds T")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
