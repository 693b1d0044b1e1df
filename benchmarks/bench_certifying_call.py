"""Benchmark: the call that certifies facility location's gap, replayed with variations.

    python benchmarks/bench_certifying_call.py [--seed S] [--seconds T] [--budget B] [--rounds]
                                               [--save FILE | --load FILE] VARIANT ...

Column generation on ``facility-location`` of ``bench_pricing.py`` (the generator's seed
``S``, default 1) runs for ``T`` seconds (default 600) with the defaults and records its
last exact pricing call (on this case the call that certifies the gap: the proof that no
set is worth more than the bound asked for), with the pricing model's cut pool, the
heuristic's remembered sets and the longest MILP solve's seconds just before it.  The call
is then replayed once per ``VARIANT`` on a fresh pricing model (as ``fairsched.optimum``
builds it) holding that pool and those sets, each with ``B`` seconds (default 200):

- ``recorded``: as recorded;
- ``margin=X``: with ``enough`` and ``target`` raised by ``X`` (a bound that certifies
  with that much more room);
- ``levels=N``: with :data:`fairsched.lp.pricing.facility_location.START_LEVELS` ``= N``;
- ``rows-at=P,Q,...``: with each point's threshold rows at the similarity positions ``P``,
  ``Q``, ... (0: the most similar worker) added to the model before the call, beyond the
  rows from the start;
- ``neighbours=N``: before the MILP, the rows tight at the ``N`` best one-swap neighbours of
  each of the call's six best sets so far (by ``f + λ``) are added wherever the model
  over-estimates them;
- ``highs:OPTION=VALUE``: with a HiGHS option set on the model;
- ``scip``: the model at the call's ``λ`` (its pool included) written as MPS and solved by
  SCIP (the ``scip`` extra) with ``enough`` as its objective limit and its heuristics off:
  the branch and bound alone, without the local search or the cut loop (its CPU seconds are
  printed too: in the runs recorded SCIP used well under one core);
- ``scip-lazy`` or ``scip-lazy=N``: the same model (with each point's rows from the start
  down to position ``N − 1``: ``N = 1`` none, default the package's ``START_LEVELS``) solved
  by SCIP in **one** branch and bound, the Benders cuts separated at the LP optimum of every
  node and enforced at every integer point by a constraint handler (what HiGHS's missing
  lazy constraints would allow): ``benchmarks/README.md``, "Facility location: the Benders
  cuts inside SCIP's branch and bound".

``--save FILE`` keeps the recorded call (a pickle) and ``--load FILE`` replays one kept so,
without the run.  HiGHS fixes its thread count at the first solve of a process, so
``highs:threads=N`` takes effect only as the first variant of a ``--load`` process, and then
for every variant of it.  (In this case's calls HiGHS's branch and bound keeps two threads
busy on a two-core machine; with one, the certifying calls of seeds 0 and 1 took 1.5–1.7
times as long: ``benchmarks/README.md``, "The certifying call's cut loop, threads and
branching".)

Printed per variant: seconds, cut-loop rounds, branch-and-bound nodes, the best set's value,
the certified bound and whether it certified (bound at or below ``enough``).  With
``--rounds``, also each MILP solve of the cut loop: its seconds, nodes and status, and the
points at which the model over-estimates the solve's incumbent, with the position of the
point's best member in the incumbent among the point's workers by decreasing similarity (0:
its most similar; the rows from the start reach position ``START_LEVELS − 1``).  A solve
whose incumbent is over-estimated cannot certify: it ends at a set the model values at the
target or above, its rows are added, and the next solve starts again from the root.
"""

from __future__ import annotations

import argparse
import contextlib
import pickle
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pricing  # noqa: E402
import bench_start_cuts  # noqa: E402

import fairsched.lp.pricing.facility_location as facility_location  # noqa: E402
import fairsched.lp.pricing.milp as milp  # noqa: E402
from fairsched.lp.solve import pricing_oracle  # noqa: E402
from fairsched.solvers.lp import set_option  # noqa: E402

CASE = "facility-location"


def record(seed: int, seconds: float) -> dict:
    """The last exact call of a run, with the oracle's state just before it."""

    def state(oracle) -> dict:
        keys, last_used, epoch, noted = oracle.model.cut_pool()
        return {"keys": [(key[1], key[2]) for key in keys], "last_used": last_used, "epoch": epoch,
                "noted": noted, "archive": oracle.heuristic.remembered(),
                "milp_seconds": oracle._milp_seconds}

    return bench_pricing.last_exact_call(CASE, seconds, snapshot=state, seed=seed)


def restored(seed: int, call: dict, levels: int | None = None):
    """A fresh pricing oracle holding the call's cut pool and remembered sets."""
    with contextlib.nullcontext() if levels is None else bench_start_cuts.start_levels(levels):
        oracle = pricing_oracle(bench_pricing.problem(CASE, seed), bench_pricing.GAP)
    model, term = oracle.model, oracle.terms[0][1]
    if call["keys"]:
        points, taus = (np.array(column) for column in zip(*call["keys"]))
        term.add_cuts(model, points.astype(int), taus.astype(float))
        if model.num_cuts == len(call["last_used"]):  # with other start rows some cuts are rows already
            model.restore_usage(call["last_used"], call["epoch"], call["noted"])
    oracle.heuristic.remember(*call["archive"])
    oracle._milp_seconds = call["milp_seconds"]
    oracle.heuristic.restart_seconds = milp.RESTARTS_VS_MILP * oracle._milp_seconds
    return oracle


class RoundLog:
    """Stands in for a pricing oracle's HiGHS object and records each MILP solve of its cut
    loop (the LP relaxation's solves report no nodes and are not recorded)."""

    def __init__(self, oracle):
        self._h, self._term, self._n = oracle.h, oracle.terms[0][1], oracle.n
        self.rounds: list[dict] = []

    def __getattr__(self, name: str):
        return getattr(self._h, name)

    def run(self):
        began = time.perf_counter()
        status = self._h.run()
        info = self._h.getInfo()
        if info.mip_node_count > 0:
            self.rounds.append({"seconds": time.perf_counter() - began, "nodes": int(info.mip_node_count),
                                "status": self._h.modelStatusToString(self._h.getModelStatus()),
                                **self._over_estimated(np.asarray(self._h.getSolution().col_value))})
        return status

    def _over_estimated(self, solution: np.ndarray) -> dict:
        """Where the model's point values exceed the incumbent's true ones: the best member's
        position in each such point's order, and the weighted excess."""
        term = self._term
        x = solution[: self._n] > 0.5
        if solution.size < self._n or not x.any() or term.residual.shape[0] == 0:
            return {"positions": [], "excess": 0.0}
        true = term.start(x)
        excess = solution[term.columns] - true
        over = np.flatnonzero(excess > facility_location.CUT_TOLERANCE * np.maximum(1.0, true))
        positions = np.argmax(x[term.order[over]], axis=1) if over.size else np.zeros(0, dtype=int)
        return {"positions": sorted(positions.tolist()),
                "excess": float(term.multiplicity[over] @ excess[over]) if over.size else 0.0}


def add_rows_at(oracle, positions: list[int]) -> int:
    """Each point's threshold rows at these positions of its similarity order (where the
    threshold is positive and below the one before it), position by position; how many rows
    were added."""
    term = oracle.terms[0][1]
    return sum(term.add_threshold_rows(oracle.model, np.array([position])) for position in positions)


@contextlib.contextmanager
def neighbours_separated(count: int) -> Iterator[None]:
    """Inside the block, the exact part of a call first adds the rows tight at the ``count``
    best one-swap neighbours (by ``f + λ``) of each of its six best sets so far."""
    exact = milp.MilpPricing._solve_exactly

    def separated(self, lam, target, enough, stop, warm, columns, best, best_mask, *rest):
        sets = [best_mask] + list(columns[:5])
        neighbours = []
        for mask in sets:
            inside, outside = np.flatnonzero(mask), np.flatnonzero(~mask)
            gains = self.heuristic.priced_swap_gains(mask, lam)
            top = np.argsort(-gains, axis=None)[:count]
            out, into = np.unravel_index(top, gains.shape)
            swapped = np.repeat(mask[None, :], top.size, axis=0)
            swapped[np.arange(top.size), inside[out]] = False
            swapped[np.arange(top.size), outside[into]] = True
            neighbours.append(swapped)
        self._separate_at_sets(np.concatenate(neighbours))
        return exact(self, lam, target, enough, stop, warm, columns, best, best_mask, *rest)

    milp.MilpPricing._solve_exactly = separated
    try:
        yield
    finally:
        milp.MilpPricing._solve_exactly = exact


def replay(seed: int, call: dict, variant: str, budget: float) -> dict:
    options = dict(call["options"])
    levels, highs, rows_at, neighbours = None, {}, [], 0
    if variant.startswith("rows-at="):
        rows_at = [int(position) for position in variant.split("=")[1].split(",")]
    elif variant.startswith("neighbours="):
        neighbours = int(variant.split("=")[1])
    elif variant.startswith("margin="):
        options = {name: value + float(variant.split("=")[1]) for name, value in options.items()}
    elif variant.startswith("levels="):
        levels = int(variant.split("=")[1])
    elif variant.startswith("highs:"):
        name, value = variant[len("highs:"):].split("=")
        highs[name] = bench_pricing.option_value(value)
    elif variant != "recorded":
        raise SystemExit(f"unknown variant {variant!r}")
    oracle = restored(seed, call, levels)
    for name, value in highs.items():
        set_option(oracle.h, name, value)
    added = add_rows_at(oracle, rows_at)
    log = oracle.h = RoundLog(oracle)
    oracle.deadline = time.perf_counter() + budget
    started = time.perf_counter()
    with neighbours_separated(neighbours) if neighbours else contextlib.nullcontext():
        result = oracle(call["lam"], **options)
    best = float(result.values[0] + result.columns[0] @ call["lam"])
    return {"seconds": time.perf_counter() - started, "rounds": oracle.stats["rounds"],
            "nodes": oracle.stats["nodes"], "best": best, "upper": float(result.upper_bound),
            "certified": options.get("enough") is not None and result.upper_bound <= options["enough"],
            "solves": log.rounds, "rows": oracle.model.num_row, "rows_added": added}


def scip_model(seed: int, call: dict, levels: int | None = None):
    """The call's model (pool included) at its λ, written as MPS by HiGHS and read by SCIP with
    its heuristics off (the best set is known, the bound is asked for); with the restored oracle
    (its rows from the start down to ``levels``, default the package's) and the call's ``enough``."""
    import pyscipopt

    enough = call["options"].get("enough")
    if enough is None:
        raise SystemExit("the recorded call asked for no bound (no enough): nothing for SCIP to certify; "
                         "give the run more --seconds")
    oracle = restored(seed, call, levels)
    oracle.h.changeColsCost(oracle.n, oracle._x_index, oracle.model.x_cost + call["lam"])
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "call.mps")
        oracle.h.writeModel(path)
        model = pyscipopt.Model()
        model.hideOutput(True)
        model.readProblem(path)
    model.setHeuristics(pyscipopt.SCIP_PARAMSETTING.OFF)
    return model, oracle, float(enough)


def certified_by(model, enough: float, budget: float) -> dict:
    """SCIP's branch and bound on ``model`` with ``enough`` as its objective limit, for at most
    ``budget`` seconds: the row ``run`` prints."""
    model.setObjlimit(enough)
    model.setParam("limits/time", budget)
    started, cpu = time.perf_counter(), time.process_time()
    model.optimize()
    infeasible = model.getStatus() == "infeasible"  # nothing above the objective limit
    return {"seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu, "rounds": 1,
            "nodes": int(model.getNNodes()), "best": float("nan"),
            "upper": enough if infeasible else float(model.getDualbound()), "certified": infeasible}


def scip(seed: int, call: dict, budget: float) -> dict:
    """SCIP's branch and bound on the call's model (pool included) at its λ."""
    model, _, enough = scip_model(seed, call)
    model.setParam("numerics/feastol", 1e-9)
    return certified_by(model, enough, budget)


def scip_lazy(seed: int, call: dict, budget: float, levels: int | None) -> dict:
    """One SCIP branch and bound on the call's model at its λ, the Benders cuts of
    :class:`~fairsched.lp.pricing.facility_location.FacilityTerm` separated at every node's LP
    optimum and enforced at every integer point (``scip-lazy`` in the module docstring)."""
    import pyscipopt

    model, oracle, enough = scip_model(seed, call, levels)
    # SCIP reads the columns in another order (a first version took it for HiGHS's and "certified"
    # this call in 9.5 s with the cuts on the wrong θ): by HiGHS's names, c<index>
    named = {variable.name: variable for variable in model.getVars()}
    columns = [named[f"c{j}"] for j in range(oracle.num_col)]
    term, n = oracle.terms[0][1], oracle.n
    handler = _benders_handler(pyscipopt)(columns[:n], [columns[j] for j in term.columns], term)
    model.includeConshdlr(handler, "fairsched-facility", "Benders cuts of facility location", sepapriority=1000,
                          enfopriority=-1, chckpriority=-1, sepafreq=1, propfreq=-1, eagerfreq=-1, maxprerounds=0)
    # one constraint of the handler, so that SCIP asks it for the variables' locks: without them its
    # dual fixing puts every θ at its upper bound and the proof is wrong (a first version "certified"
    # this call in 5.6 s; its optimum without the objective limit was 226.98 against a set worth 227.60)
    model.addPyCons(model.createCons(handler, "facility", initial=False, propagate=False))
    return {**certified_by(model, enough, budget), "rows": oracle.model.num_row, "cuts": handler.added}


def _benders_handler(pyscipopt) -> type:
    """The constraint handler of :func:`scip_lazy` (made when pyscipopt is imported)."""
    result = pyscipopt.SCIP_RESULT

    class Benders(pyscipopt.Conshdlr):
        def __init__(self, x: list, theta: list, term):
            self.x, self.theta, self.term = x, theta, term
            self.added = 0

        def _violated(self, solution) -> tuple[np.ndarray, np.ndarray]:
            x = np.array([self.model.getSolVal(solution, v) for v in self.x])
            theta = np.array([self.model.getSolVal(solution, v) for v in self.theta])
            return self.term.violated(x, theta, 1e-7)

        def _cut(self) -> dict:
            points, taus = self._violated(None)
            for i, tau in zip(points, taus):
                row = self.model.createEmptyRowUnspec(name="benders", lhs=None, rhs=float(tau), local=False)
                self.model.cacheRowExtensions(row)
                self.model.addVarToRow(row, self.theta[i], 1.0)
                excess = self.term.residual[i] - tau
                for u in np.flatnonzero(excess > 0):
                    self.model.addVarToRow(row, self.x[u], -float(excess[u]))
                self.model.flushRowExtensions(row)
                self.model.addCut(row, forcecut=True)
                self.model.releaseRow(row)
            self.added += points.size
            return {"result": result.SEPARATED} if points.size else {}

        def conssepalp(self, constraints, nusefulconss):
            return self._cut() or {"result": result.DIDNOTFIND}

        def consenfolp(self, constraints, nusefulconss, solinfeasible):
            return self._cut() or {"result": result.FEASIBLE}

        def consenfops(self, constraints, nusefulconss, solinfeasible, objinfeasible):
            return {"result": result.INFEASIBLE if self._violated(None)[0].size else result.FEASIBLE}

        def conscheck(self, constraints, solution, checkintegrality, checklprows, printreason, completely):
            return {"result": result.INFEASIBLE if self._violated(solution)[0].size else result.FEASIBLE}

        def conslock(self, constraint, locktype, nlockspos, nlocksneg):
            # θ_i <= g_i(x), g_i increasing: raising θ or lowering x may violate it
            for v in self.theta:
                self.model.addVarLocksType(v, locktype, nlocksneg, nlockspos)
            for v in self.x:
                self.model.addVarLocksType(v, locktype, nlockspos, nlocksneg)

    return Benders


def run(seed: int = 1, seconds: float = 600.0, budget: float = 200.0,
        variants: tuple[str, ...] = ("recorded",), rounds: bool = False,
        save: str | None = None, load: str | None = None) -> list[dict]:
    if load is not None:
        with open(load, "rb") as file:
            kept = pickle.load(file)
        seed, seconds, call = kept["seed"], kept["seconds"], kept["call"]
    else:
        call = record(seed, seconds)
    if save is not None:
        with open(save, "wb") as file:
            pickle.dump({"seed": seed, "seconds": seconds, "call": call}, file)
    print(f"seed {seed}: " + bench_pricing.call_header(CASE, call, seconds), flush=True)
    rows = []
    for variant in variants:
        if variant == "scip":
            measured = scip(seed, call, budget)
        elif variant.split("=")[0] == "scip-lazy":
            measured = scip_lazy(seed, call, budget, int(variant.split("=")[1]) if "=" in variant else None)
        else:
            measured = replay(seed, call, variant, budget)
        row = {"variant": variant, **measured}
        print(f"  {variant:32s} {row['seconds']:6.1f} s  {row['rounds']:2d} rounds  {row['nodes']:6d} nodes  "
              f"best set {row['best']:.6f}  bound {row['upper']:.6f}  "
              f"{'certified' if row['certified'] else 'not certified'}"
              + (f"  ({row['cpu']:.1f} s of CPU)" if "cpu" in row else "")
              + (f"  ({row['rows_added']} rows added, {row['rows']} rows at the end)" if row.get("rows_added") else "")
              + (f"  ({row['rows']} rows, {row['cuts']} cuts separated)" if "cuts" in row else ""),
              flush=True)
        for i, solve in enumerate(row.get("solves", []) if rounds else []):
            where = (f"over-estimated at {len(solve['positions'])} point(s), best member at position(s) "
                     f"{solve['positions']}, excess {solve['excess']:.4f}" if solve["positions"] else
                     "incumbent valued exactly")
            print(f"    solve {i + 1}: {solve['seconds']:6.1f} s  {solve['nodes']:6d} nodes  {solve['status']};  {where}",
                  flush=True)
        rows.append(row)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--budget", type=float, default=200.0)
    parser.add_argument("--rounds", action="store_true",
                        help="print each MILP solve of the cut loop and where its incumbent is over-estimated")
    kept = parser.add_mutually_exclusive_group()
    kept.add_argument("--save", metavar="FILE", help="keep the recorded call in FILE")
    kept.add_argument("--load", metavar="FILE", help="replay the call kept in FILE instead of recording one "
                                                     "(--seed and --seconds are then the file's)")
    parser.add_argument("variants", nargs="*", default=["recorded"])
    args = parser.parse_args()
    run(args.seed, args.seconds, args.budget, tuple(args.variants), args.rounds, args.save, args.load)
