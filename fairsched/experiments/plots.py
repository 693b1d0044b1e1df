"""Figures for the reproduction of Li, Liu and Ji (2021), Section VI (matplotlib, the optional ``plot`` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from fairsched.extras import install_hint
from fairsched.metrics import set_values
from fairsched.problem import Problem
from fairsched.schedule import Schedule

LABELS = {"faircg1": "FairCG1", "faircg2": "FairCG2", "fairdg": "FairDG", "greedy": "DG (greedy, unfair)"}


def pyplot():
    """matplotlib's pyplot on the Agg backend; ``ImportError`` saying how to install it when missing."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError(f"plots need matplotlib, which is not installed: {install_hint('matplotlib')}") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_seed003(out: Path, rows: Sequence, schedules: dict[str, Schedule], problem: Problem,
                 u_opt: float, worker1_rounds: int) -> None:
    """Write Fig. 2(a–c) at β = 0.42 and Fig. 3 (ratios and bound ratios against β) as PNGs."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, schedule in schedules.items():
        values = set_values(problem, schedule.masks())
        running = np.cumsum(values) / np.arange(1, values.size + 1)
        ax.plot(np.arange(1, values.size + 1), running, label=LABELS.get(name, name))
    ax.axhline(u_opt, color="black", linestyle="--", label="U_opt")
    ax.set_xscale("log")
    ax.set_ylim(u_opt - 0.004, u_opt + 0.004)
    ax.set(xlabel="round t", ylabel="time-average utility", title="Fig. 2(a): time-average utility, β = 0.42")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "fig2a_utility.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / len(schedules)
    x = np.arange(problem.n)
    for i, (name, schedule) in enumerate(schedules.items()):
        ax.bar(x + (i - (len(schedules) - 1) / 2) * width, schedule.counts() / schedule.rounds, width,
               label=LABELS.get(name, name))
    ax.scatter(x, problem.r, color="black", marker="_", s=400, zorder=3, label="r_u")
    ax.set_xticks(x, problem.ids)
    ax.set(xlabel="worker", ylabel="selection fraction", title="Fig. 2(b): selection fraction, β = 0.42")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "fig2b_fractions.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, schedule in schedules.items():
        if name == "greedy":
            continue
        selected = schedule.masks(0, worker1_rounds)[:, 0]
        ax.plot(np.arange(1, selected.size + 1), np.cumsum(selected) / np.arange(1, selected.size + 1),
                label=LABELS.get(name, name))
    ax.axhline(problem.r[0], color="black", linestyle="--", label=f"r_1 = {problem.r[0]:.2f}")
    ax.set_ylim(0, 0.5)
    ax.set(xlabel="round t", ylabel="fraction of rounds with worker 1",
           title="Fig. 2(c): worker 1, first 2,000 rounds")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "fig2c_worker1.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    betas = sorted({r.beta for r in rows})
    for name in ("faircg1", "faircg2", "fairdg"):
        ax.plot(betas, [next(r.ratio for r in rows if r.beta == b and r.policy == name) for b in betas],
                marker="o", label=LABELS[name])
    for name, style in (("faircg1", ":"), ("faircg2", "-.")):
        ax.plot(betas, [next(r.lower_bound / r.u_opt for r in rows if r.beta == b and r.policy == name)
                        for b in betas], linestyle=style, marker="x", label=f"{LABELS[name]} bound")
    ax.set(xlabel="β (r = β·r_base)", ylabel="ratio to U_opt", title="Fig. 3: approximation ratio and bounds")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "fig3_ratios.png", dpi=120)
    plt.close(fig)
