"""Benchmark sweeps: instance families, the parallel harness behind ``fairsched bench``, reports.

- :mod:`~fairsched.bench.families`: ``family(kind, n, seed)``, instance tables of growing ``n``;
- :mod:`~fairsched.bench.cases`: :class:`Case`, an instance at one floor setting, and ``build_cases``;
- :mod:`~fairsched.bench.harness`: ``sweep``, ``U_opt`` once per case then policies × seeds;
- :mod:`~fairsched.bench.parallel`: in-process, joblib (loky) or Dask execution, results in order;
- :mod:`~fairsched.bench.report` and :mod:`~fairsched.bench.plots`: CSV, markdown, figures;
- :mod:`~fairsched.bench.streams`: random schedules in chunks, for streaming evaluation.

See ``docs/benchmarks.md``.
"""

from fairsched.bench.cases import Case, build_cases
from fairsched.bench.families import FAMILIES, family
from fairsched.bench.harness import (COLUMNS, DETERMINISTIC_COLUMNS, TIMING_COLUMNS, BenchRow, PolicySpec,
                                     parse_policy, sweep)

__all__ = ["BenchRow", "COLUMNS", "Case", "DETERMINISTIC_COLUMNS", "FAMILIES", "PolicySpec", "TIMING_COLUMNS",
           "build_cases", "family", "parse_policy", "sweep"]
