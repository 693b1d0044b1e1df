"""Benchmark: the call that certifies facility location's gap, replayed with variations.

    python benchmarks/bench_certifying_call.py [--seed S] [--seconds T] [--budget B] VARIANT ...

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
- ``highs:OPTION=VALUE``: with a HiGHS option set on the model;
- ``scip``: the model at the call's ``λ`` (its pool included) written as MPS and solved by
  SCIP (the ``scip`` extra) with ``enough`` as its objective limit and its heuristics off:
  the branch and bound alone, without the local search or the cut loop (its CPU seconds are
  printed too: in the runs recorded SCIP used well under one core).

Printed per variant: seconds, cut-loop rounds, branch-and-bound nodes, the best set's value,
the certified bound and whether it certified (bound at or below ``enough``).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pricing  # noqa: E402
import bench_start_cuts  # noqa: E402

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


def replay(seed: int, call: dict, variant: str, budget: float) -> dict:
    options = dict(call["options"])
    levels, highs = None, {}
    if variant.startswith("margin="):
        options = {name: value + float(variant.split("=")[1]) for name, value in options.items()}
    elif variant.startswith("levels="):
        levels = int(variant.split("=")[1])
    elif variant.startswith("highs:"):
        name, value = variant[len("highs:"):].split("=")
        highs[name] = _option_value(value)
    elif variant != "recorded":
        raise SystemExit(f"unknown variant {variant!r}")
    oracle = restored(seed, call, levels)
    for name, value in highs.items():
        set_option(oracle.h, name, value)
    oracle.deadline = time.perf_counter() + budget
    started = time.perf_counter()
    result = oracle(call["lam"], **options)
    best = float(result.values[0] + result.columns[0] @ call["lam"])
    return {"seconds": time.perf_counter() - started, "rounds": oracle.stats["rounds"],
            "nodes": oracle.stats["nodes"], "best": best, "upper": float(result.upper_bound),
            "certified": options.get("enough") is not None and result.upper_bound <= options["enough"]}


def _option_value(text: str) -> object:
    for cast in (int, float):
        with contextlib.suppress(ValueError):
            return cast(text)
    return {"true": True, "false": False}.get(text.lower(), text)


def scip(seed: int, call: dict, budget: float) -> dict:
    """SCIP's branch and bound on the call's model (pool included) at its λ."""
    from pyscipopt import Model

    enough = call["options"].get("enough")
    if enough is None:
        raise SystemExit("the recorded call asked for no bound (no enough): nothing for SCIP to certify; "
                         "give the run more --seconds")
    oracle = restored(seed, call)
    oracle.h.changeColsCost(oracle.n, oracle._x_index, oracle.model.x_cost + call["lam"])
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "call.mps")
        oracle.h.writeModel(path)
        model = Model()
        model.hideOutput(True)
        model.readProblem(path)
    model.setObjlimit(enough)
    model.setParam("limits/time", budget)
    model.setParam("numerics/feastol", 1e-9)
    model.setHeuristics(3)  # SCIP_PARAMSETTING_OFF: the best set is known, the bound is asked for
    started, cpu = time.perf_counter(), time.process_time()
    model.optimize()
    infeasible = model.getStatus() == "infeasible"  # nothing above the objective limit
    return {"seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu, "rounds": 1,
            "nodes": int(model.getNNodes()), "best": float("nan"),
            "upper": enough if infeasible else float(model.getDualbound()), "certified": infeasible}


def run(seed: int = 1, seconds: float = 600.0, budget: float = 200.0,
        variants: tuple[str, ...] = ("recorded",)) -> list[dict]:
    call = record(seed, seconds)
    print(f"seed {seed}: " + bench_pricing.call_header(CASE, call, seconds), flush=True)
    rows = []
    for variant in variants:
        row = {"variant": variant, **(scip(seed, call, budget) if variant == "scip" else
                                      replay(seed, call, variant, budget))}
        print(f"  {variant:32s} {row['seconds']:6.1f} s  {row['rounds']:2d} rounds  {row['nodes']:6d} nodes  "
              f"best set {row['best']:.6f}  bound {row['upper']:.6f}  "
              f"{'certified' if row['certified'] else 'not certified'}"
              + (f"  ({row['cpu']:.1f} s of CPU)" if "cpu" in row else ""), flush=True)
        rows.append(row)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--budget", type=float, default=200.0)
    parser.add_argument("variants", nargs="*", default=["recorded"])
    args = parser.parse_args()
    run(args.seed, args.seconds, args.budget, tuple(args.variants))
