"""Figures of a sweep (matplotlib, the ``plot`` extra): ratio, fairness slack, max debt, run time.

One figure per metric, one panel per instance group (a family, or an instance file), one
line per policy: against ``n`` when the group's sizes vary, else against ``β`` or the floor
scale, else one point per policy. Error bars are the 95% t-intervals over seeds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from fairsched.bench.harness import BenchRow
from fairsched.bench.report import interval
from fairsched.extras import install_hint

#: (file stem, y label, value of a row, log scale)
METRICS: tuple[tuple[str, str, Callable[[BenchRow], float | None], bool], ...] = (
    ("ratio", "ratio to U_opt", lambda r: r.ratio, False),
    ("fairness_slack", "fairness slack min_u (N_u/T − r_u)", lambda r: r.fairness_slack, False),
    ("max_debt", "max debt max_(u,t) (r_u·t − N_u(t))", lambda r: r.max_debt, True),
    ("seconds", "run time (s)", lambda r: r.seconds, True),
)


def _group(row: BenchRow) -> str:
    return row.instance.rsplit("-n", 1)[0] if "-n" in row.instance and not row.instance.endswith(".toml") else row.instance


def _axis(rows: Sequence[BenchRow]) -> tuple[str, Callable[[BenchRow], float]]:
    for name, get in (("n", lambda r: r.n), ("β", lambda r: r.beta), ("r scale", lambda r: r.scale)):
        if len({get(r) for r in rows}) > 1:
            return name, get
    return "", lambda r: 0.0


def pyplot():
    """matplotlib's pyplot on the Agg backend; ``ImportError`` saying how to install it when missing."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError(f"figures need matplotlib, which is not installed: {install_hint('matplotlib')}") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_sweep(rows: Sequence[BenchRow], out: Path) -> list[Path]:
    """Write ``ratio.png``, ``fairness_slack.png``, ``max_debt.png`` and ``seconds.png`` into ``out``."""
    plt = pyplot()
    ok = [r for r in rows if r.status == "ok"]
    by_group: dict[str, list[BenchRow]] = {}
    for row in ok:
        by_group.setdefault(_group(row), []).append(row)
    policies = list(dict.fromkeys(r.policy for r in ok))
    written = []
    for stem, label, value, log in METRICS:
        if not by_group:
            break
        fig, axes = plt.subplots(1, len(by_group), figsize=(4.2 * len(by_group) + 1, 3.6), squeeze=False)
        for ax, (group, mine) in zip(axes[0], by_group.items()):
            xname, xget = _axis(mine)
            for j, policy in enumerate(policies):
                series = [r for r in mine if r.policy == policy]
                xs = sorted({xget(r) for r in series})
                stats = [interval([value(r) for r in series if xget(r) == x]) for x in xs]
                keep = [i for i, s in enumerate(stats) if np.isfinite(s.mean) and (not log or s.mean > 0)]
                if not keep:
                    continue
                x = np.array([xs[i] for i in keep], dtype=float) + (0 if xname else j)
                y = np.array([stats[i].mean for i in keep])
                err = np.nan_to_num(np.array([stats[i].half_width for i in keep]))
                ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=policy)
            if stem == "ratio":
                ax.axhline(1.0, color="black", linestyle="--", linewidth=0.8)
            if stem == "max_debt":
                ax.axhline(1.0, color="black", linestyle=":", linewidth=0.8)
            if log:
                ax.set_yscale("log")
            if xname == "n":
                sizes = sorted({r.n for r in mine})
                ax.set_xscale("log")
                ax.set_xticks(sizes, [str(n) for n in sizes])
                ax.minorticks_off()
            ax.set(xlabel=xname or "policy", ylabel=label, title=group)
            if not xname:
                ax.set_xticks(range(len(policies)), policies, rotation=45, ha="right", fontsize=7)
        axes[0][-1].legend(fontsize=7)
        fig.tight_layout()
        path = out / f"{stem}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
