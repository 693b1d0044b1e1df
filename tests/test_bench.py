"""The benchmark harness (``fairsched bench``), families, lazy greedy and streaming evaluation."""

from __future__ import annotations

import argparse
import csv
import importlib
import math
import subprocess
import sys

import numpy as np
import pytest

from fairsched.cli import app as cli, bench as cli_bench
from fairsched.bench.families import FAMILIES, family, family_k
from fairsched.bench.harness import DETERMINISTIC_COLUMNS
from fairsched.bench.streams import random_k_subsets, random_schedule_chunks
from fairsched.experiments import seed003
from fairsched.instances.generators import PAPER_BETAS
from fairsched.submodular.greedy import greedy_complete
from fairsched.instances import load_instance, problem_from_table
from fairsched.submodular.lazy_greedy import ValuesGains, lazy_greedy, lazy_greedy_trace
from fairsched.lp.solve import optimum
from fairsched.metrics import CHUNK_CELLS, evaluate, evaluate_stream
from fairsched.policies import make_policy
from fairsched.problem import Problem
from fairsched.schedule import Schedule
from fairsched.runtime.simulation import run
from fairsched.utilities import (AccuracyUtility, CallableUtility, ConcaveModular, Coverage, FacilityLocation,
                                 Mixture, Modular, PropensityWeightedAccuracy)

from conftest import INSTANCES, lyapunov_rounds_equal_greedy

PAPER = str(INSTANCES / "paper.toml")


def _entry_points():
    """``python -m fairsched.cli.bench``, and ``fairsched bench`` once it is wired into the main parser."""
    points = [cli_bench.main]
    subparsers = [a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    if subparsers and "bench" in subparsers[0].choices:
        points.append(lambda argv: cli.main(["bench", *argv]))
    return points


def _bench(tmp_path, name: str, *argv: str) -> list[dict[str, str]]:
    out = tmp_path / name
    assert cli_bench.main([*argv, "--out", str(out), "--quiet", "--no-plots"]) == 0
    return _read(out / "results.csv")


def _read(path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


# --- the harness against the reproduction of Li, Liu and Ji (2021) --------------------------

def test_harness_matches_seed003_table(tmp_path):
    betas = ",".join(f"{b:g}" for b in PAPER_BETAS)
    rows = _bench(tmp_path, "paper", PAPER, "--betas", betas, "--policies", ",".join(seed003.PAPER_POLICIES),
                  "--seeds", "1", "--rounds", "2000")
    reference, _, _ = seed003.paper_sweep(2000, 0, log=lambda message: None)
    assert len(rows) == len(reference) == len(PAPER_BETAS) * len(seed003.PAPER_POLICIES)
    mine = {(float(r["beta"]), r["policy"]): r for r in rows}
    for ref in reference:
        row = mine[(ref.beta, ref.policy)]
        assert row["instance"] == ref.instance == "paper.toml"
        for key in ("u_opt", "time_average_utility", "ratio", "fairness_slack", "max_debt"):
            assert float(row[key]) == getattr(ref, key), (ref.beta, ref.policy, key)
        for key in ("multilinear_value", "lower_bound"):
            assert (row[key] == "") == (getattr(ref, key) is None)
            if row[key]:
                assert float(row[key]) == getattr(ref, key)


def test_writes_summary_timings_and_figures(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli_bench.main([PAPER, "--betas", "0.3,0.42", "--policies", "fairdg,greedy", "--seeds", "3",
                           "--rounds", "500", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "U_opt paper.toml β=0.3:" in err and "[12/12] paper.toml β=0.42 greedy seed 2: ratio" in err
    assert {p.name for p in out.iterdir()} >= {"results.csv", "timings.csv", "results.md", "ratio.png",
                                               "fairness_slack.png", "max_debt.png", "seconds.png"}
    timings = _read(out / "timings.csv")
    assert list(timings[0]) == ["instance", "beta", "scale", "policy", "seed", "seconds", "optimum_seconds"]
    assert all(float(t["seconds"]) >= 0 for t in timings)
    text = (out / "results.md").read_text()
    assert "fairsched bench" in text and "| paper.toml | 10 | 6 | 0.42 | 1 | 0.845512 | fairdg | 3 |" in text
    assert list(_read(out / "results.csv")[0]) == list(DETERMINISTIC_COLUMNS)


# --- determinism: jobs and backends ---------------------------------------------------------

SMALL = (PAPER, "--betas", "0.06,0.42", "--family", "coverage", "--family", "accuracy", "--sizes", "10,12",
         "--policies", "fairdg,faircg1,random,lp-random", "--seeds", "2", "--rounds", "400")


def test_two_jobs_equal_one_job(tmp_path):
    one = _bench(tmp_path, "one", *SMALL, "--jobs", "1")
    _bench(tmp_path, "two", *SMALL, "--jobs", "2")
    assert len(one) == 2 * 4 * 2 + 4 * 4 * 2
    assert (tmp_path / "one" / "results.csv").read_bytes() == (tmp_path / "two" / "results.csv").read_bytes()
    assert len({r["seed"] for r in one if r["policy"] == "random"}) == 2


def test_dask_equals_joblib(tmp_path):
    distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")
    _bench(tmp_path, "loky", *SMALL, "--jobs", "1")
    expected = (tmp_path / "loky" / "results.csv").read_bytes()
    # an existing cluster, by address (threads in this process: quick to start on a 2-core box)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        _bench(tmp_path, "address", *SMALL, "--scheduler-address", cluster.scheduler_address)
    assert (tmp_path / "address" / "results.csv").read_bytes() == expected
    # the LocalCluster of worker processes that --backend dask starts itself
    _bench(tmp_path, "processes", *SMALL, "--backend", "dask", "--jobs", "2")
    assert (tmp_path / "processes" / "results.csv").read_bytes() == expected


# --- families ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", list(FAMILIES))
def test_families_are_valid_feasible_and_costly(kind):
    for n in (2, 10, 37):
        problem = problem_from_table(family(kind, n, seed=1))
        assert problem.n == n and problem.k == family_k(n) == max(1, round(n / 10))
        assert (problem.r <= 1).all() and problem.r.sum() <= problem.k + 1e-9
        check = getattr(problem.utility, "submodularity_problem", None)
        assert check is None or check() is None
    assert family(kind, 12, seed=3) == family(kind, 12, seed=3) != family(kind, 12, seed=4)
    problem = problem_from_table(family(kind, 10, seed=0))
    greedy_value = problem.utility.value(greedy_complete(problem.utility, problem.k))
    assert optimum(problem).value < greedy_value * 0.99  # the floors cost utility


# --- lazy greedy -----------------------------------------------------------------------------

def _utilities(rng: np.random.Generator, n: int) -> list:
    similarity = rng.uniform(size=(12, n)) ** 3
    similarity[:, n // 2] = similarity[:, 0]  # two identical workers: exact ties
    coverage = Coverage([sorted(rng.choice(25, size=int(rng.integers(1, 6)), replace=False).tolist())
                         for _ in range(n)], rng.integers(1, 4, size=25).astype(float))
    weights = rng.uniform(size=n)
    strata = rng.uniform(50, 400, size=(n, 3))
    return [
        FacilityLocation(similarity.round(2)),
        coverage,
        AccuracyUtility(rng.integers(100, 500, size=n)),
        ConcaveModular(rng.exponential(size=(5, n)), "sqrt"),
        ConcaveModular(rng.exponential(size=(5, n)), "log1p"),
        Modular(rng.integers(0, 3, size=n).astype(float)),
        Mixture([FacilityLocation(similarity), coverage], [0.5, 2.0]),
        CallableUtility(lambda S: float(np.sqrt(weights[list(S)].sum())), n),
        PropensityWeightedAccuracy(strata, [0.5, 0.3, 0.2]),
    ]


def test_lazy_greedy_equals_greedy_on_every_utility_kind():
    rng = np.random.default_rng(7)
    kinds = set()
    for trial in range(12):
        n = int(rng.integers(3, 30))
        k = int(rng.integers(1, n + 1))
        base = np.sort(rng.choice(n, size=min(2, n), replace=False)) if trial % 3 == 0 else None
        candidates = rng.uniform(size=n) < 0.8 if trial % 4 == 1 else None
        for utility in _utilities(rng, n):
            kinds.add(utility.kind)
            expected = greedy_complete(utility, k, base=base, candidates=candidates)
            assert np.array_equal(lazy_greedy(utility, k, base, candidates), expected), utility
            forced = lazy_greedy(utility, k, base, candidates, incremental=ValuesGains)  # the lazy path, any kind
            assert np.array_equal(forced, expected), utility
    assert kinds == {"facility-location", "coverage", "accuracy", "concave-modular", "modular", "mixture",
                     "python", "propensity-accuracy"}


def _kernel(n: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, 16))
    sq = (x * x).sum(axis=1)
    return np.exp(-np.maximum(sq[:, None] + sq[None, :] - 2 * x @ x.T, 0.0) / 32)


def test_lazy_greedy_settles_exact_ties_like_greedy():
    """A symmetric similarity makes mathematically equal gains; the oracle's rounding decides them."""
    ties = 0
    for seed in range(3):
        utility = FacilityLocation(_kernel(200, seed))
        trace = lazy_greedy_trace(utility, 50)
        assert np.array_equal(trace.selected, greedy_complete(utility, 50))
        assert trace.order[0] == int(np.argmax(utility.gains([])))
        assert trace.evaluations < 200 * 50 / 2  # lazy: far fewer than one gain per worker per step
        ties += trace.ties
    assert ties > 0
    # a Fortran-ordered similarity: gains(S) sums its columns pairwise, so ties go to gains(S) itself
    utility = FacilityLocation(np.asfortranarray(_kernel(200, 0)))
    trace = lazy_greedy_trace(utility, 50)
    assert np.array_equal(trace.selected, greedy_complete(utility, 50))
    assert trace.ties == 0 and trace.oracle_calls > 0


def test_facility_location_reference_gains_are_the_oracles_bits():
    rng = np.random.default_rng(3)
    utility = FacilityLocation(rng.uniform(size=(3000, 40)) ** 2)
    for size in (0, 1, 5, 20):
        S = np.sort(rng.choice(40, size=size, replace=False))
        state = utility.incremental(S)
        outside = np.setdiff1d(np.arange(40), S)
        for count in (1, 2, 7):
            picked = np.sort(rng.choice(outside, size=count, replace=False))
            assert np.array_equal(state.reference_gains(picked), utility.gains(S)[picked])
            assert np.allclose(state.gains(picked), utility.gains(S)[picked], rtol=1e-12, atol=0)


# --- streaming evaluation --------------------------------------------------------------------

def _assert_same(a, b, exact_utility: bool = True) -> None:
    assert a.rounds == b.rounds and a.optimum == b.optimum
    if exact_utility:
        assert a.time_average_utility == b.time_average_utility and a.ratio == b.ratio
    else:
        assert a.time_average_utility == pytest.approx(b.time_average_utility, rel=1e-12)
    assert np.array_equal(a.selection_fraction, b.selection_fraction)
    assert np.array_equal(a.worker_max_debt, b.worker_max_debt)
    assert a.fairness_slack == b.fairness_slack and a.max_debt == b.max_debt


def test_evaluate_stream_equals_evaluate():
    problem = load_instance(PAPER)
    schedule = run(problem, make_policy("faircg1"), 5000, seed=3)
    whole = evaluate(schedule, problem, 0.85)
    _assert_same(evaluate_stream(iter([schedule]), problem, 0.85), whole)
    masks = schedule.masks()
    cuts = [0, 1, 700, 701, 3000, 5000]
    pieces = []
    for i, (a, b) in enumerate(zip(cuts, cuts[1:])):  # alternate CSR and mask chunks of odd sizes
        pieces.append(Schedule.from_sets([schedule.selected(t) for t in range(a, b)], problem.n) if i % 2
                      else masks[a:b])
    _assert_same(evaluate_stream(iter(pieces), problem, 0.85), whole, exact_utility=False)


def test_evaluate_stream_of_generated_chunks_equals_materialised_schedule():
    n, k, rounds = 3000, 30, 4000
    problem = Problem(Modular(np.random.default_rng(0).uniform(size=n)), k, np.full(n, 0.5 * k / n))
    block = CHUNK_CELLS // n
    chunks = list(random_schedule_chunks(n, k, rounds, 3 * block, seed=5))
    assert [c.rounds for c in chunks[:-1]] == [3 * block] * (len(chunks) - 1) and sum(c.rounds for c in chunks) == rounds
    whole = Schedule(n, np.arange(0, rounds * k + 1, k), np.concatenate([c.indices for c in chunks]))
    _assert_same(evaluate_stream(iter(chunks), problem), evaluate(whole, problem))


def test_evaluate_debts_match_the_definition():
    """Debts from selections only (CSR) equal max_t (r_u·t − N_u(t)) round by round, r = 1 and r near 1 included."""
    rng = np.random.default_rng(11)
    for _ in range(40):
        n = int(rng.integers(1, 8))
        T = int(rng.integers(1, 60))
        sets = [np.sort(rng.choice(n, size=int(rng.integers(0, n + 1)), replace=False)) for _ in range(T)]
        r = np.minimum(rng.choice([0.0, 1.0, 1 - 1e-12, 0.3, 1 / 3], size=n), 1.0)
        problem = Problem(Modular(np.ones(n)), n, r)
        report = evaluate(Schedule.from_sets(sets, n), problem)
        counts = np.zeros(n, dtype=np.int64)
        expected = np.full(n, -np.inf)
        for t, S in enumerate(sets, start=1):
            counts[S] += 1
            expected = np.maximum(expected, np.float64(t) * r - counts)
        assert np.array_equal(report.worker_max_debt, expected)


def test_evaluate_stream_rejects_bad_chunks():
    problem = load_instance(PAPER)
    with pytest.raises(ValueError, match="empty"):
        evaluate_stream(iter([]), problem)
    with pytest.raises(ValueError, match="shape"):
        evaluate_stream(iter([np.zeros((3, problem.n + 1), dtype=bool)]), problem)
    with pytest.raises(ValueError, match="workers"):
        evaluate_stream(iter([Schedule.from_sets([[0]], problem.n + 1)]), problem)


def test_random_k_subsets_are_distinct_and_seeded():
    rng = np.random.default_rng(0)
    sets = random_k_subsets(rng, 2000, 50, 10)
    assert sets.shape == (2000, 10) and (np.diff(sets, axis=1) > 0).all()
    counts = np.bincount(sets.ravel(), minlength=50)
    assert counts.min() > 300 and counts.max() < 500  # about 400 each
    again = random_k_subsets(np.random.default_rng(0), 2000, 50, 10)
    assert np.array_equal(sets, again)
    assert (np.diff(random_k_subsets(rng, 10, 8, 6), axis=1) > 0).all()  # the k > n/4 branch


# --- bad input -------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    ([PAPER, "--policies", "fairdg,nosuch"], "unknown policy 'nosuch'"),
    (["--family", "nosuch"], "unknown family 'nosuch'"),
    (["--family", "coverage", "--sizes", "0"], "family size must be an integer >= 2"),
    (["--family", "coverage", "--sizes", "20,-5"], "family size must be an integer >= 2"),
    (["--family", "coverage", "--sizes", "x"], "--sizes"),
    ([PAPER, "--seeds", "0"], "--seeds must be positive"),
    ([PAPER, "--seeds", "-2"], "--seeds must be positive"),
    ([PAPER, "--rounds", "0"], "--rounds must be positive"),
    ([PAPER, "--scales", "0"], "--scales must be positive"),
    ([PAPER, "--jobs", "0"], "--jobs must be a positive integer"),
    ([PAPER, "--policies", "lyapunov[W=1]"], "unknown parameter"),
    ([], "needs instance files and/or --family"),
    ([str(INSTANCES / "coverage.toml"), "--betas", "0.1"], "--betas needs an instance file with workers.r_base"),
    ([str(INSTANCES / "nosuch.toml")], "no such file"),
    ([PAPER, "--backend", "spark"], "invalid choice"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, argv, message):
    for main in _entry_points():
        assert _code(main, [*argv, "--out", str(tmp_path / "out"), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("fairsched: error:") and message in err, err
    assert not (tmp_path / "out").exists()


def _code(main, argv) -> int:
    """The exit code, returned or raised (argparse exits on a bad option)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_infeasible_scale_exits_3(tmp_path, capsys):
    assert cli_bench.main([PAPER, "--scales", "3", "--out", str(tmp_path / "out"), "--quiet"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "infeasible" in err


def test_lp_policy_on_an_instance_too_large_to_enumerate_is_a_row_not_a_crash(monkeypatch, tmp_path):
    from fairsched.errors import TooLargeError
    from fairsched.bench import harness

    def refuse(problem, *args, **kwargs):
        raise TooLargeError("too many columns")

    monkeypatch.setattr(harness, "optimum", refuse)
    monkeypatch.setattr("fairsched.policies.lp.optimum", refuse)
    rows = _bench(tmp_path, "big", PAPER, "--policies", "fairdg,lp-random", "--seeds", "1", "--rounds", "100")
    fairdg, lp = rows
    assert fairdg["status"] == "ok" and fairdg["u_opt_method"] == "too-large" and fairdg["ratio"] == ""
    assert lp["status"] == "error: too many columns" and math.isnan(float(lp["time_average_utility"]))


# --- the shared measurement and the optional dependencies ------------------------------------

def test_harness_task_is_the_shared_measurement():
    """Bench rows come from :func:`fairsched.runtime.measure.measure`, as the experiments' rows do."""
    from fairsched.bench.cases import Case
    from fairsched.bench.harness import parse_policy, run_task, solve_case
    from fairsched.instances import read_table
    from fairsched.runtime.measure import measure

    case = Case("paper.toml", 0.3, 1.0, table=read_table(PAPER))
    opt = solve_case(case)
    for text in ("faircg1", "lyapunov[V=10]"):
        spec = parse_policy(text)
        row = run_task((case, spec, 2, 600, opt))
        run = measure(load_instance(PAPER, beta=0.3), spec.name, 600, 2, opt.value, **dict(spec.params))
        assert row.status == "ok" and row.policy == text
        assert (row.time_average_utility, row.ratio, row.fairness_slack, row.max_debt) == (
            run.report.time_average_utility, run.report.ratio, run.report.fairness_slack, run.report.max_debt)
        assert row.multilinear_value == run.diagnostics.get("multilinear_value")
        assert row.lower_bound == run.diagnostics.get("lower_bound")
    assert row.multilinear_value is None and run.schedule.rounds == 600


def test_bench_does_not_import_the_experiments():
    code = ("import sys, fairsched.bench, fairsched.bench.plots, fairsched.bench.report, fairsched.bench.streams; "
            "print([m for m in sys.modules if m.startswith('fairsched.experiments')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_missing_dask_says_how_to_install_it(monkeypatch):
    from fairsched.bench.parallel import check_backend
    from fairsched.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(MissingDependencyError) as info:
        check_backend("dask", 2, None)
    message = str(info.value)
    assert "distributed" in message and "'.[dask]'" in message and "fairsched[" not in message


def test_missing_matplotlib_skips_the_figures_but_writes_the_tables(monkeypatch, tmp_path, capsys):
    from fairsched.bench.plots import pyplot

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"\[plot\]") as info:
        pyplot()
    assert "fairsched[" not in str(info.value)
    out = tmp_path / "out"
    assert cli_bench.main([PAPER, "--policies", "fairdg", "--seeds", "1", "--rounds", "100", "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir()} == {"results.csv", "timings.csv", "results.md"}
    assert "no figures: figures need matplotlib" in capsys.readouterr().err


@pytest.mark.parametrize("levels, weight", [(None, 10.0), (None, 1e4), (40, 10.0)])
def test_lazy_greedy_in_blocks_on_lyapunovs_score_equals_greedy(levels, weight, monkeypatch):
    """Queue-penalised accuracy with floors all distinct (every queue a chain of its own, too
    many to evaluate every head each step) or in a few levels: the steps taken in blocks of
    certain picks (the state's gains_after) give greedy's set, and most steps are taken so
    where the queues outweigh the utility."""
    module = importlib.import_module("fairsched.submodular.lazy_greedy")  # the package exports the function
    taken = []
    block = module._Prefix._block

    def counted(self, size):
        taken.append(block(self, size))
        return taken[-1]

    monkeypatch.setattr(module._Prefix, "_block", counted)
    rng = np.random.default_rng(12)
    n, k, rounds = 3000, 100, 25
    utility = AccuracyUtility(np.ceil(np.exp(rng.normal(4.0, 1.2, n))))
    r = rng.uniform(0.0, 1.0, n)
    r *= 0.9 * k / r.sum()
    if levels is not None:
        r = np.round(r * levels) / levels
    lyapunov_rounds_equal_greedy(utility, r, k, rounds, weight, rng)
    if levels is None and weight == 10.0:
        assert sum(taken) > rounds * k / 2


@pytest.mark.parametrize("levels", [None, 5])
def test_lyapunov_chains_hold_equal_queues_by_decreasing_size(levels):
    """Every candidate in exactly one chain; a chain's queues are equal and its sizes do not
    increase (ties by index), whether the queues are all distinct but the empty ones (chains of
    one without a sort) or in a few levels."""
    from fairsched.policies.lyapunov import _Penalised

    rng = np.random.default_rng(8)
    n = 5000
    utility = AccuracyUtility(rng.integers(10, 60, n).astype(float))
    queues = rng.uniform(0.1, 3.0, n) if levels is None else rng.integers(1, levels + 1, n) * 0.5
    queues[rng.random(n) < 0.3] = 0.0
    state = _Penalised(utility, 10.0, queues).incremental(np.array([0]))
    candidates = np.flatnonzero(rng.random(n) < 0.9)
    candidates = candidates[candidates != 0]
    members, start = state.chains(candidates)
    assert np.array_equal(np.sort(members), candidates) and start[0] == 0 and start[-1] == members.size
    sizes = utility.sizes
    for lo, hi in zip(start[:-1], start[1:]):
        chain = members[lo:hi]
        assert hi > lo and (queues[chain] == queues[chain[0]]).all()
        assert all((sizes[a], -a) >= (sizes[b], -b) for a, b in zip(chain[:-1], chain[1:]))
    longest = int(np.diff(start).max())
    assert longest == (queues[candidates] == 0).sum() if levels is None else longest > 100


def test_accuracy_gains_after_are_the_gains_after_each_add():
    """gains_after(c)[j] is the gain of c[j] once c[:j] are added, from ∅ and from a base set."""
    from fairsched.submodular.incremental import AccuracyGains

    rng = np.random.default_rng(5)
    utility = AccuracyUtility(rng.uniform(10, 500, 40).round())
    for base in (np.array([], dtype=np.int64), np.array([3, 17])):
        order = rng.permutation(np.setdiff1d(np.arange(40), base))[:12]
        batch = AccuracyGains(utility, base).gains_after(order)
        state = AccuracyGains(utility, base)
        for j, u in enumerate(order):
            assert batch[j] == pytest.approx(state.gains(np.array([u]))[0], rel=1e-12, abs=1e-15)
            state.add(int(u))


def test_lazy_greedy_on_lyapunovs_score_equals_greedy():
    """Queue-penalised accuracy (chains of equal queues, every head evaluated each step): greedy's set."""
    rng = np.random.default_rng(11)
    n, k = 3000, 60
    sizes = np.where(np.arange(n) < k, rng.uniform(400, 600, n), rng.uniform(50, 150, n)).round()
    utility = AccuracyUtility(sizes)
    r = np.where(np.arange(n) < k, 0.1, 0.7 * k / (n - k))
    traces = lyapunov_rounds_equal_greedy(utility, r, k, 40, 10.0, rng)
    assert all(trace.evaluations < n for trace in traces)  # chains: far fewer evaluations than workers
