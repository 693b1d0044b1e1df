"""Benchmark cases: one instance (a file or a family member) at one setting of the floors.

A :class:`Case` is small and picklable, so it travels to joblib or Dask workers instead of
the problem: a file's parsed table goes with it (the worker need not see the file) and a
family member is regenerated from ``(kind, n, seed)``. Each process builds a case's
:class:`~fairsched.problem.Problem` once (:func:`case_problem`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from fairsched.bench.families import check_family, check_size, family
from fairsched.errors import FairschedError
from fairsched.instances import problem_from_table, read_table
from fairsched.problem import Problem

_CACHE_SIZE = 16
_problems: dict[str, Problem] = {}


@dataclass(frozen=True, eq=False)
class Case:
    """An instance at ``r = scale · r(β)``: ``r(β) = β·r_base`` when ``beta`` is set, the file's ``r`` otherwise.

    ``instance`` is the label in every table (a file's name, ``KIND-nN-sSEED`` for a family
    member); ``table`` is the parsed file (``None`` for families).
    """

    instance: str
    beta: float | None
    scale: float
    table: dict[str, Any] | None = field(default=None, repr=False)
    family: str | None = None
    size: int | None = None
    family_seed: int = 0

    @cached_property
    def key(self) -> str:
        """A string that identifies the problem this case builds (content, not path)."""
        spec = {"instance": self.instance, "beta": self.beta, "scale": self.scale, "family": self.family,
                "size": self.size, "family_seed": self.family_seed, "table": self.table}
        return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()

    def build(self) -> Problem:
        """The problem (not cached; see :func:`case_problem`)."""
        if self.family is not None:
            problem = problem_from_table(family(self.family, self.size, self.family_seed), source=self.instance)
        else:
            problem = problem_from_table(self.table, source=self.instance, beta=self.beta)
        if self.scale != 1.0:
            problem = problem.with_floors(np.asarray(problem.r) * self.scale)
        return problem


def case_problem(case: Case) -> Problem:
    """``case.build()``, once per process and case."""
    key = case.key
    problem = _problems.get(key)
    if problem is None:
        if len(_problems) >= _CACHE_SIZE:
            _problems.clear()
        problem = _problems[key] = case.build()
    return problem


def has_r_base(table: dict[str, Any]) -> bool:
    """Whether an instance table gives ``workers.r_base`` (so ``β`` sweeps apply)."""
    workers = table.get("workers")
    return isinstance(workers, dict) and "r_base" in workers


def build_cases(paths: Sequence[str | Path], families: Sequence[str], sizes: Sequence[int],
                betas: Sequence[float] | None, scales: Sequence[float], family_seed: int = 0) -> list[Case]:
    """Instances × floor settings, in a fixed order: files (as given), then families by kind and size.

    ``betas`` apply to the files with ``r_base`` (their own ``beta`` when ``None``); ``scales``
    multiply ``r`` of every instance. Errors (unreadable file, unknown family, bad size, no
    ``r_base`` anywhere for ``betas``) raise :class:`FairschedError`.
    """
    cases: list[Case] = []
    with_base = 0
    for path in paths:
        table = read_table(path)
        name = Path(path).name
        beta_list: list[float | None] = [None]
        if betas is not None and has_r_base(table):
            beta_list = list(betas)
            with_base += 1
        cases += [Case(name, beta, scale, table=table) for beta in beta_list for scale in scales]
    if betas is not None and with_base == 0:
        raise FairschedError("--betas needs an instance file with workers.r_base (families and files "
                             "with r take --scales)")
    for kind in families:
        check_family(kind)
        for n in sizes:
            n = check_size(n)
            cases += [Case(f"{kind}-n{n}-s{family_seed}", None, scale, family=kind, size=n,
                           family_seed=family_seed) for scale in scales]
    labels = [(c.instance, c.beta, c.scale) for c in cases]
    if len(set(labels)) != len(labels):
        raise FairschedError("the same instance is listed twice (instances are labelled by file name)")
    return cases
