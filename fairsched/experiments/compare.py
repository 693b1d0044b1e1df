"""Every policy on the paper instance (all β) and the costly instances, plus a Lyapunov V sweep.

    python -m fairsched.experiments.compare --out docs/compare

writes ``results.md`` (the comparison table: ratio to U_opt, fairness slack, max debt,
seconds), ``compare.csv`` (tidy rows), ``lyapunov_sweep.csv`` and, with matplotlib,
``lyapunov_sweep.png`` (utility gap and largest queue against V). The instances are the
bundled ones, found by name wherever fairsched is installed.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from fairsched.atomic import atomic_write
from fairsched.experiments.common import (Row, bundled_problem, instance_stem, log, measure, output_folder,
                                          write_csv)
from fairsched.experiments.seed003 import COSTLY, PAPER
from fairsched.instances.generators import PAPER_BETAS
from fairsched.lp.solve import optimum
from fairsched.metrics import evaluate
from fairsched.policies import Lyapunov
from fairsched.runtime.simulation import run

#: (policy name, parameters) in table order
POLICIES: list[tuple[str, dict[str, Any]]] = [
    ("lp-sequenced", {}), ("lp-random", {}), ("fairdg", {}), ("faircg1", {}), ("faircg2", {}),
    ("lyapunov", {"V": 1.0}), ("lyapunov", {"V": 10.0}), ("lyapunov", {"V": 100.0}),
    ("greedy", {}), ("random", {}), ("round-robin", {}),
]
SWEEP_VS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)


def cases(betas: Sequence[float] = PAPER_BETAS) -> list[tuple[str, float | None]]:
    """The paper instance at every β, then each costly instance (bundled instances, by name)."""
    return [(PAPER, beta) for beta in betas] + [(instance, None) for instance in COSTLY]


def compare(rounds: int, seed: int, log: Callable[[str], None] = print) -> list[Row]:
    """Run every policy on every case."""
    rows = []
    for instance, beta in cases():
        problem = bundled_problem(instance, beta=beta)
        u_opt = optimum(problem).value
        for name, params in POLICIES:
            row, _ = measure(problem, name, rounds, seed, u_opt, instance, beta, **params)
            rows.append(row)
            log(f"{instance_stem(instance)} β={beta} {row.policy:18s} ratio {row.ratio:.5f} "
                f"slack {row.fairness_slack:+.4f} debt {row.max_debt:.2f} ({row.seconds:.1f} s)")
    return rows


def lyapunov_sweep(instance: str, rounds: int, seed: int) -> list[dict[str, float]]:
    """Utility gap ``1 − ratio`` and largest virtual queue for each ``V`` on a bundled instance."""
    problem = bundled_problem(instance)
    u_opt = optimum(problem).value
    out = []
    for V in SWEEP_VS:
        policy = Lyapunov(V=V)
        report = evaluate(run(problem, policy, rounds, seed), problem, u_opt)
        out.append({"V": V, "utility_gap": 1 - report.ratio, "max_queue": policy.max_queue,
                    "max_debt": report.max_debt, "fairness_slack": report.fairness_slack})
    return out


def table(rows: Sequence[Row]) -> str:
    """Markdown, one line per (case, policy)."""
    lines = ["| instance | β | U_opt | policy | ratio | fairness slack | max debt | seconds |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        beta = "–" if r.beta is None else f"{r.beta:.2f}"
        lines.append(f"| {r.instance} | {beta} | {r.u_opt:.6g} | {r.policy} | {r.ratio:.5f} | "
                     f"{r.fairness_slack:+.4f} | {r.max_debt:.2f} | {r.seconds:.2f} |")
    return "\n".join(lines)


def summary(rows: Sequence[Row]) -> str:
    """Markdown: per policy, the worst ratio, worst slack and worst debt over all cases."""
    lines = ["| policy | worst ratio | worst fairness slack | worst max debt | total seconds |",
             "|---|---|---|---|---|"]
    for name in dict.fromkeys(r.policy for r in rows):
        mine = [r for r in rows if r.policy == name]
        lines.append(f"| {name} | {min(r.ratio for r in mine):.5f} | "
                     f"{min(r.fairness_slack for r in mine):+.4f} | {max(r.max_debt for r in mine):.2f} | "
                     f"{sum(r.seconds for r in mine):.1f} |")
    return "\n".join(lines)


def plot_sweep(sweep: Sequence[dict[str, float]], path: Path, instance: str) -> None:
    """Utility gap (log) and largest queue against V."""
    from fairsched.experiments.plots import pyplot

    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    Vs = [s["V"] for s in sweep]
    left.loglog(Vs, [max(s["utility_gap"], 1e-6) for s in sweep], marker="o")
    left.set(xlabel="V", ylabel="1 − ratio to U_opt", title=f"utility gap ({instance})")
    right.semilogx(Vs, [s["max_queue"] for s in sweep], marker="o", color="tab:red")
    right.set(xlabel="V", ylabel="largest virtual queue", title="backlog")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="docs/compare")
    parser.add_argument("--rounds", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args(argv)
    out = output_folder(args.out)

    rows = compare(args.rounds, args.seed, log=log)
    write_csv(rows, out / "compare.csv")
    sweep_instance = COSTLY[0]
    sweep = lyapunov_sweep(sweep_instance, args.rounds, args.seed)
    with atomic_write(out / "lyapunov_sweep.csv") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(sweep[0]))
        writer.writeheader()
        writer.writerows(sweep)
    command = f"python -m fairsched.experiments.compare --out {args.out} --rounds {args.rounds} --seed {args.seed}"
    sweep_lines = ["| V | utility gap | largest queue | max debt |", "|---|---|---|---|"] + [
        f"| {s['V']:g} | {s['utility_gap']:.5f} | {s['max_queue']:.2f} | {s['max_debt']:.2f} |" for s in sweep]
    text = "\n\n".join([
        "# Every policy against U_opt",
        f"Produced by `{command}` (T = {args.rounds:,} rounds, seed {args.seed}).",
        "## Summary over all cases (paper instance at every β, three costly instances)",
        summary(rows),
        f"## Lyapunov V sweep on {sweep_instance}",
        "\n".join(sweep_lines),
        "## Every case",
        table(rows),
    ]) + "\n"
    with atomic_write(out / "results.md") as handle:
        handle.write(text)
    if not args.no_plots:
        plot_sweep(sweep, out / "lyapunov_sweep.png", sweep_instance)
    log(f"wrote {out}/results.md, compare.csv, lyapunov_sweep.csv" + ("" if args.no_plots else ", lyapunov_sweep.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
