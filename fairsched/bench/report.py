"""Outputs of a sweep: ``results.csv`` (deterministic), ``timings.csv`` and ``results.md``.

``results.csv`` holds :data:`~fairsched.bench.harness.DETERMINISTIC_COLUMNS` only, with
floats written in full (``repr``), so the same arguments give a byte-identical file for any
``--jobs`` and backend; ``timings.csv`` repeats the key columns with the wall times.
``results.md`` summarises each ``(instance, β, scale, policy)`` over the seeds: the mean
ratio to ``U_opt`` with a 95% Student-t confidence interval, the fairness slack (mean and
worst), the worst max debt and the mean run time.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from fairsched.atomic import atomic_write
from fairsched.bench.harness import DETERMINISTIC_COLUMNS, TIMING_COLUMNS, BenchRow, row_dict

KEY_COLUMNS = ("instance", "beta", "scale", "policy", "seed")
RESULTS, TIMINGS, SUMMARY = "results.csv", "timings.csv", "results.md"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def write_rows(rows: Sequence[BenchRow], path: Path, columns: Sequence[str]) -> None:
    """Tidy CSV with ``columns``, one line per row, atomically."""
    with atomic_write(path) as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_cell(v) for v in row_dict(row, columns).values()])


def read_rows(path: Path) -> list[dict[str, str]]:
    """A CSV written by :func:`write_rows`, as dicts of strings."""
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@dataclass(frozen=True)
class Interval:
    """Mean over seeds and the half-width of its 95% t-interval (NaN with one seed)."""

    mean: float
    half_width: float
    count: int

    def __str__(self) -> str:
        if math.isnan(self.mean):
            return "n/a"
        if math.isnan(self.half_width):
            return f"{self.mean:.5f}"
        return f"{self.mean:.5f} ± {self.half_width:.5f}"


def interval(values: Sequence[float], level: float = 0.95) -> Interval:
    """Mean of the finite ``values`` with a Student-t ``level`` confidence half-width."""
    from scipy import stats  # here: importing scipy.stats costs the whole command line 0.4 s

    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if x.size == 0:
        return Interval(math.nan, math.nan, 0)
    if x.size == 1:
        return Interval(float(x[0]), math.nan, 1)
    half = stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return Interval(float(x.mean()), float(half), int(x.size))


def groups(rows: Sequence[BenchRow]) -> dict[tuple, list[BenchRow]]:
    """Rows by ``(instance, n, β, scale, policy)``, in first-seen order."""
    out: dict[tuple, list[BenchRow]] = {}
    for row in rows:
        out.setdefault((row.instance, row.n, row.beta, row.scale, row.policy), []).append(row)
    return out


def summary_table(rows: Sequence[BenchRow]) -> str:
    """Markdown, one line per group of seeds."""
    lines = ["| instance | n | k | β | scale | U_opt | policy | seeds | ratio (95% CI) | fairness slack mean / worst "
             "| max debt worst | seconds mean |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (instance, n, beta, scale, policy), mine in groups(rows).items():
        ok = [r for r in mine if r.status == "ok"]
        first = mine[0]
        u_opt = "n/a" if first.u_opt is None else f"{first.u_opt:.6g}"
        beta_text = "–" if beta is None else f"{beta:g}"
        if not ok:
            lines.append(f"| {instance} | {n} | {first.k} | {beta_text} | {scale:g} | {u_opt} | {policy} | "
                         f"{len(mine)} | {first.status} | | | |")
            continue
        ratio = interval([r.ratio for r in ok])
        slack = interval([r.fairness_slack for r in ok])
        lines.append(
            f"| {instance} | {n} | {first.k} | {beta_text} | {scale:g} | {u_opt} | {policy} | {len(ok)} | {ratio} | "
            f"{slack.mean:+.4f} / {min(r.fairness_slack for r in ok):+.4f} | {max(r.max_debt for r in ok):.2f} | "
            f"{np.mean([r.seconds for r in ok]):.3f} |")
    return "\n".join(lines)


def write_report(rows: Sequence[BenchRow], out: Path, command: str, notes: Sequence[str] = ()) -> list[Path]:
    """Write the two CSV files and ``results.md`` into ``out``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    write_rows(rows, out / RESULTS, DETERMINISTIC_COLUMNS)
    write_rows(rows, out / TIMINGS, KEY_COLUMNS + TIMING_COLUMNS)
    methods = sorted({r.u_opt_method for r in rows})
    text = "\n\n".join([
        "# Benchmark sweep: ratio to U_opt, fairness slack, max debt, run time",
        f"Produced by `{command}`.",
        f"{len(rows)} runs; U_opt by {', '.join(methods)}. `results.csv` is deterministic (byte-identical "
        f"for any `--jobs` and backend); wall times are in `timings.csv`. Ratio: mean over seeds "
        f"± the half-width of the 95% Student-t interval; fairness slack `min_u (N_u(T)/T − r_u)`; max debt "
        f"`max_(u,t) (r_u·t − N_u(t))`, short-term fair iff below 1.",
        *notes,
        summary_table(rows),
    ]) + "\n"
    with atomic_write(out / SUMMARY) as handle:
        handle.write(text)
    return [out / RESULTS, out / TIMINGS, out / SUMMARY]
