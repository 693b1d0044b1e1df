"""Reproduce Li, Liu and Ji (2021), Section VI (Fig. 2 and Fig. 3) and run the same policies on costly instances.

    python -m fairsched.experiments.seed003 --out docs/seed003

writes ``results.md`` (markdown tables), ``paper_sweep.csv`` and ``costly.csv`` (tidy rows),
and, with matplotlib installed (the ``plot`` extra: ``pip install '.[plot]'`` in a fairsched
checkout), the figures ``fig2a_utility.png``, ``fig2b_fractions.png``, ``fig2c_worker1.png`` and
``fig3_ratios.png``. The instances are the bundled ones (``fairsched.instances``, found by name
wherever fairsched is installed); tables label them by file name (``paper.toml``).

The paper instance is a **[reconstruction]** (the data sizes of the paper's Table I were not
available to us; see the bundled ``paper`` instance and ``docs/mathematics.md`` §10). Every number is measured by this script; nothing is copied.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

import numpy as np

from fairsched.atomic import atomic_write
from fairsched.experiments.common import (Row, bundled_problem, instance_stem, log, measure, output_folder,
                                          write_csv)
from fairsched.instances.generators import PAPER_BETAS
from fairsched.lp.solve import optimum
from fairsched.policies import PAPER_POLICIES
from fairsched.problem import Problem
from fairsched.schedule import Schedule

#: bundled instances by name; the name is also their label in every table
PAPER = "paper.toml"
COSTLY = ("coverage.toml", "facility-location.toml", "concave-modular.toml")
COSTLY_POLICIES = ("faircg1", "faircg2", "fairdg", "greedy", "random", "round-robin")
FIG2_BETA = 0.42
WORKER1_ROUNDS = 2000


def paper_sweep(rounds: int, seed: int, betas: Sequence[float] = PAPER_BETAS,
                log=print) -> tuple[list[Row], dict[str, Schedule], Problem]:
    """Fig. 3's sweep over β; also returns the schedules at β = 0.42 for Fig. 2."""
    rows, fig2 = [], {}
    fig2_problem = None
    for beta in betas:
        problem = bundled_problem(PAPER, beta=beta)
        u_opt = optimum(problem).value
        for name in PAPER_POLICIES:
            row, schedule = measure(problem, name, rounds, seed, u_opt, PAPER, beta)
            rows.append(row)
            log(f"paper β={beta:.2f} {name:8s} ratio {row.ratio:.5f} slack {row.fairness_slack:+.5f} "
                f"({row.seconds:.1f} s)")
            if abs(beta - FIG2_BETA) < 1e-12:
                fig2[name] = schedule
                fig2_problem = problem
    return rows, fig2, fig2_problem


def costly_runs(rounds: int, seed: int, log=print) -> list[Row]:
    """Every policy on each bundled costly instance."""
    rows = []
    for instance in COSTLY:
        problem = bundled_problem(instance)
        u_opt = optimum(problem).value
        for name in COSTLY_POLICIES:
            row, _ = measure(problem, name, rounds, seed, u_opt, instance, None)
            rows.append(row)
            log(f"{instance_stem(instance)} {name:11s} ratio {row.ratio:.5f} slack {row.fairness_slack:+.5f} "
                f"({row.seconds:.1f} s)")
    return rows


def paper_table(rows: Sequence[Row]) -> str:
    """Markdown: for each β, U_opt, each policy's ratio and the bound ratios (Fig. 3 as a table)."""
    by = {(r.beta, r.policy): r for r in rows}
    betas = sorted({r.beta for r in rows})
    head = ("| β | U_opt | FairCG1 | FairCG2 | FairDG | greedy (unfair) | FairCG1 bound | FairCG2 bound "
            "| min slack FairCG1 / FairCG2 / FairDG | max debt FairDG |")
    lines = [head, "|" + "---|" * 10]
    for beta in betas:
        cg1, cg2, dg, gr = (by[(beta, p)] for p in PAPER_POLICIES)
        lines.append(
            f"| {beta:.2f} | {cg1.u_opt:.6f} | {cg1.ratio:.5f} | {cg2.ratio:.5f} | {dg.ratio:.5f} | "
            f"{gr.ratio:.5f} | {cg1.lower_bound / cg1.u_opt:.4f} | {cg2.lower_bound / cg2.u_opt:.4f} | "
            f"{cg1.fairness_slack:+.4f} / {cg2.fairness_slack:+.4f} / {dg.fairness_slack:+.4f} | "
            f"{dg.max_debt:.2f} |")
    return "\n".join(lines)


def costly_table(rows: Sequence[Row]) -> str:
    """Markdown: per costly instance and policy, ratio, fairness slack, max debt, seconds."""
    lines = ["| instance | U_opt | policy | ratio | fairness slack | max debt | seconds |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.instance} | {r.u_opt:.4f} | {r.policy} | {r.ratio:.4f} | "
                     f"{r.fairness_slack:+.4f} | {r.max_debt:.2f} | {r.seconds:.2f} |")
    return "\n".join(lines)


def fig2_summary(problem: Problem, schedules: dict[str, Schedule], u_opt: float) -> str:
    """Markdown: Fig. 2(b) as a table, selection fraction per worker and policy against r."""
    names = list(schedules)
    lines = ["| worker | r | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    fractions = {n: s.counts() / s.rounds for n, s in schedules.items()}
    for u, w in enumerate(problem.ids):
        cells = " | ".join(f"{fractions[n][u]:.4f}" for n in names)
        lines.append(f"| {w} | {problem.r[u]:.2f} | {cells} |")
    return "\n".join(lines)


def worker_running_fraction(schedule: Schedule, worker: int, rounds: int) -> np.ndarray:
    """``N_u(t)/t`` for ``t = 1..rounds`` (Fig. 2(c))."""
    selected = schedule.masks(0, rounds)[:, worker]
    return np.cumsum(selected) / np.arange(1, selected.size + 1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="docs/seed003", help="output folder")
    parser.add_argument("--rounds", type=int, default=100_000)
    parser.add_argument("--costly-rounds", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args(argv)
    out = output_folder(args.out)

    rows, fig2, fig2_problem = paper_sweep(args.rounds, args.seed, log=log)
    costly = costly_runs(args.costly_rounds, args.seed, log=log)
    write_csv(rows, out / "paper_sweep.csv")
    write_csv(costly, out / "costly.csv")
    u_opt = next(r.u_opt for r in rows if r.beta == FIG2_BETA)
    command = (f"python -m fairsched.experiments.seed003 --out {args.out} --rounds {args.rounds} "
               f"--costly-rounds {args.costly_rounds} --seed {args.seed}")
    text = "\n\n".join([
        "# Li, Liu and Ji (2021), Section VI: reproduction on the reconstructed instance",
        f"Produced by `{command}`.",
        f"## Fig. 3 as a table: ratio to U_opt against β (T = {args.rounds:,}, seed {args.seed})",
        paper_table(rows),
        f"## Fig. 2(b) as a table: selection fraction per worker at β = {FIG2_BETA} (U_opt = {u_opt:.6f})",
        fig2_summary(fig2_problem, fig2, u_opt),
        f"## The same policies where fairness is costly (T = {args.costly_rounds:,}, seed {args.seed})",
        costly_table(costly),
    ]) + "\n"
    with atomic_write(out / "results.md") as handle:
        handle.write(text)
    if not args.no_plots:
        from fairsched.experiments.plots import plot_seed003

        plot_seed003(out, rows, fig2, fig2_problem, u_opt, WORKER1_ROUNDS)
    log(f"wrote {out}/results.md, paper_sweep.csv, costly.csv" + ("" if args.no_plots else " and figures"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
