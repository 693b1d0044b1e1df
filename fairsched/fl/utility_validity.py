"""Does a utility predict the target-population loss of the set it scores?

    python -m fairsched.fl.utility_validity --dgp bundled --seeds 8 --sets 50

Per seed: draw the DGP's population (:mod:`fairsched.fl.validity_dgps`), fit what
the utilities need on that seed's data only, draw ``sets`` random ``k``-sets of workers,
train federated logistic regression on each set for ``R`` rounds (every member every round)
with the aggregation each utility is meant for, and measure the realised target excess loss
``F(θ_R) − F*`` (true shares ``π``). Per utility: the Spearman correlation of its value with
the *negative* realised loss (higher is better), mean and standard error over seeds.

Utilities (``π̂``: IPW shares; ``L_{u,j}``: worker ``u``'s stratum-``j`` examples):

- ``accuracy``: :class:`~fairsched.utilities.AccuracyUtility` of total sizes (Li, Liu and Ji,
  "Federated Learning with Fair Worker Selection: A Multi-Round Submodular Maximization
  Approach", 2021, Section VI); FedAvg (data-size) aggregation;
- ``propensity``: :class:`~fairsched.utilities.PropensityWeightedAccuracy` with ``π̂`` and transfer
  ``τ = 0.05`` (FedIPW shares, Morishita, "Who Trains Matters: Federated Learning under
  Enrollment and Participation Selection Biases", 2026); FedAvg;
- ``mismatch``: ``−Σ_j |share_j(S) − π̂_j|``, ``share_j(S) = Σ_{u∈S} L_{u,j} / Σ_{u∈S} Σ_l L_{u,l}``; FedAvg;
- ``poststratified``: :class:`~fairsched.utilities.poststratified_accuracy.PoststratifiedAccuracy`
  with curves fitted (:func:`fairsched.fl.curves.fit_stratum_curves`) on ``pilots`` pilot runs of
  random sets of ``k/2..2k`` workers plus ``missing_pilots`` runs per stratum with that stratum
  left out, scored on the held-out validation objective ``Σ_j π̂_j V_j``; post-stratified
  aggregation (:mod:`fairsched.fl.aggregation`) with ``π̂``;
- ``one_step``: :class:`~fairsched.utilities.OneStepValidation` from one pilot round of every
  worker (gradients and Hessians at the post-stratified fit of all workers,
  :func:`fairsched.fl.one_step.one_step_utility`), the set's model predicted by one Newton step
  and the harness's training schedule, scored on the quadratic model of the validation
  objective; post-stratified aggregation. Not submodular.

Reference, not a utility (it trains the set first): ``trained_validation``, the validation
objective of the set's trained post-stratified model. What any predictor that scores a set by
the validation objective can reach at best; where it is low, the validation objective itself
(``π̂``) does not stand for the target.

Cost per seed with the defaults (k = 10, R = 100, K = 5, 40 + 3·4 pilots): 2·sets + 52 federated
trainings, batched (:func:`fairsched.fl.aggregation.train_sets`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fairsched.fl.aggregation import fedavg_weights, poststratified_batch, train_sets
from fairsched.fl.curves import fit_stratum_curves, plugin_curves
from fairsched.fl.errors import SimulationError
from fairsched.fl.one_step import one_step_utility
from fairsched.fl.training import TrainConfig
from fairsched.fl.validity_dgps import (
    DGPS,
    ENROLLMENT_MODEL,
    HOMOGENEOUS,
    ValidityPopulation,
    make_validity_population,
)
from fairsched.utilities import AccuracyUtility, PropensityWeightedAccuracy
from fairsched.utilities.poststratified_accuracy import PoststratifiedAccuracy

UTILITIES = ("accuracy", "propensity", "mismatch", "poststratified", "poststratified_c1",
             "poststratified_plugin", "one_step")
AGGREGATION = {"accuracy": "fedavg", "propensity": "fedavg", "mismatch": "fedavg",
               "poststratified": "poststratified", "poststratified_c1": "poststratified",
               "poststratified_plugin": "poststratified", "one_step": "poststratified"}
#: not utilities: predictors that train the set first, for what no utility can beat
REFERENCES = ("trained_validation",)
CURVE = (0.05, 0.5, -0.5)
TRANSFER = 0.05
#: R = 100 rounds, K = 5 local steps (the fair_population schedule)
DEFAULT_TRAIN = TrainConfig(rounds=100)


def _spearman(u: np.ndarray, loss: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if np.ptp(u) == 0 or np.ptp(loss) == 0:
        return float("nan")
    return float(spearmanr(u, -loss).statistic)


def _random_sets(rng: np.random.Generator, n: int, sizes: Sequence[int], width: int) -> np.ndarray:
    out = np.full((len(sizes), width), -1, dtype=np.int64)
    for b, s in enumerate(sizes):
        out[b, :s] = np.sort(rng.choice(n, size=s, replace=False))
    return out


def seed_result(pop: ValidityPopulation, seed: int, sets: int, k: int = 10, pilots: int = 40,
                missing_pilots: int = 4, train: TrainConfig = DEFAULT_TRAIN) -> dict[str, Any]:
    """One seed: utility values and realised losses of ``sets`` random ``k``-sets, and the fit."""
    W = pop.workers
    n = W.size
    if n < 2 * k:
        raise SimulationError(f"only {n} workers; need at least 2k = {2 * k}")
    L = pop.sizes[W]
    pi_hat = pop.shares_hat
    rng = np.random.default_rng([seed, 99])

    # pilot runs (post-stratified, scored on the held-out validation objective)
    sizes = list(rng.integers(max(2, k // 2), 2 * k + 1, size=pilots))
    drops = [-1] * pilots
    for j in np.flatnonzero(pi_hat > 0):
        sizes += [k] * missing_pilots
        drops += [int(j)] * missing_pilots
    local = _random_sets(rng, n, sizes, 2 * k)
    clients = np.where(local >= 0, W[np.maximum(local, 0)], -1)
    omega, w = poststratified_batch(pop.data, pop.strata, clients, pi_hat, np.asarray(drops))
    theta = train_sets(pop.data, np.maximum(clients, 0), omega, w, train)
    pilot_loss = pop.validation.values(theta)
    m = np.array([L[row[row >= 0]].sum(axis=0) for row in local])
    m[np.arange(len(drops)), np.maximum(drops, 0)] *= (np.asarray(drops) < 0)
    curves = fit_stratum_curves(m, pilot_loss, pi_hat)
    curves_c1 = fit_stratum_curves(m, pilot_loss, pi_hat, fixed_c=-1.0)
    v = pop.validation
    b_plugin = plugin_curves(v.X, v.y, pop.validation_strata, v.solve()[0], pi_hat, v.ridge)

    # evaluation sets
    local = _random_sets(rng, n, [k] * sets, k)
    clients = W[local]
    masks = np.zeros((sets, n), dtype=bool)
    masks[np.arange(sets)[:, None], local] = True
    loss = {"fedavg": pop.objective.values(train_sets(pop.data, clients, *fedavg_weights(pop.data, clients), train))
            - pop.f_star}
    omega, w = poststratified_batch(pop.data, pop.strata, clients, pi_hat)
    theta_post = train_sets(pop.data, clients, omega, w, train)
    loss["poststratified"] = pop.objective.values(theta_post) - pop.f_star
    one_step = one_step_utility(pop.data, pop.strata, W, pi_hat, train.ridge, pop.validation, training=train)
    a, b, c = CURVE
    mset = masks.astype(np.float64) @ L
    values = {
        "accuracy": AccuracyUtility(L.sum(axis=1), a, b, c).values(masks),
        "propensity": PropensityWeightedAccuracy(L, pi_hat, TRANSFER, a, b, c).values(masks),
        "mismatch": -np.abs(mset / mset.sum(axis=1, keepdims=True) - pi_hat).sum(axis=1),
        "poststratified": curves.utility(L, pi_hat).values(masks),
        "poststratified_c1": curves_c1.utility(L, pi_hat).values(masks),
        "poststratified_plugin": PoststratifiedAccuracy(L, pi_hat, a=curves_c1.a, b=b_plugin, c=-1.0,
                                                        missing=curves_c1.missing).values(masks),
        "one_step": one_step.values(masks),
    }
    rho = {u: _spearman(values[u], loss[AGGREGATION[u]]) for u in UTILITIES}
    reference = {"trained_validation": _spearman(-pop.validation.values(theta_post), loss["poststratified"])}
    cross = {u: {g: _spearman(values[u], loss[g]) for g in loss} for u in UTILITIES}
    return {"spearman": rho, "reference": reference, "cross": cross, "mean_loss": {g: float(v.mean()) for g, v in loss.items()},
            "curves": {"a": curves.a, "b": curves.b.tolist(), "c": curves.c.tolist(),
                       "missing": curves.missing.tolist(), "rmse": curves.rmse,
                       "pilot_loss_sd": float(pilot_loss.std()), "b_c1": curves_c1.b.tolist(),
                       "b_plugin": b_plugin.tolist()},
            "shares_hat": pi_hat.tolist(), "shares_true": pop.shares_true.tolist(), "workers": int(n)}


def _mean_se(x: Sequence[float]) -> tuple[float, float | None]:
    a = np.asarray([v for v in x if np.isfinite(v)], dtype=np.float64)
    if a.size == 0:
        return float("nan"), None
    return float(a.mean()), (float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else None)


def run(dgp: str, seeds: int, sets: int, *, k: int = 10, pilots: int = 40, missing_pilots: int = 4,
        train: TrainConfig = DEFAULT_TRAIN, details: bool = False, enrollment_model: str = ENROLLMENT_MODEL,
        progress: Callable[[int, int, float], None] | None = None) -> dict[str, Any]:
    """``{"dgp": name, "utilities": {name: {"spearman": mean, "se": se over seeds}}}``.

    Seeds ``0..seeds−1``; ``se`` is ``None`` for one seed. ``enrollment_model`` is the model
    behind ``π̂`` (:func:`~fairsched.fl.validity_dgps.make_validity_population`). ``details`` adds ``"seeds"`` (the
    per-seed results of :func:`seed_result`), ``"cross"`` (every utility against both
    aggregations' losses, mean ± se) and ``"seconds"``.
    """
    if dgp not in DGPS:
        raise SimulationError(f"unknown DGP {dgp!r}; known: {', '.join(DGPS)}")
    for key, value, low in (("seeds", seeds, 1), ("sets", sets, 3), ("k", k, 1), ("missing_pilots", missing_pilots, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise SimulationError(f"{key}: is {value!r}, expected an integer >= {low}")
    if isinstance(pilots, bool) or not isinstance(pilots, (int, np.integer)) or pilots < 8:
        raise SimulationError(f"pilots: is {pilots!r}, expected an integer >= 8 (the curves have up to 10 parameters)")
    start = time.perf_counter()
    per_seed = []
    for s in range(seeds):
        pop = make_validity_population(dgp, s, enrollment_model=enrollment_model)
        per_seed.append(seed_result(pop, s, sets, k, pilots, missing_pilots, train))
        if progress is not None:
            progress(s + 1, seeds, time.perf_counter() - start)
    out: dict[str, Any] = {"dgp": dgp, "enrollment_model": enrollment_model, "utilities": {}}
    for u in UTILITIES:
        mean, se = _mean_se([r["spearman"][u] for r in per_seed])
        out["utilities"][u] = {"spearman": mean, "se": se}
    out["reference"] = {}
    for name in REFERENCES:
        mean, se = _mean_se([r["reference"][name] for r in per_seed])
        out["reference"][name] = {"spearman": mean, "se": se}
    if details:
        out["cross"] = {u: {g: dict(zip(("spearman", "se"), _mean_se([r["cross"][u][g] for r in per_seed])))
                            for g in ("fedavg", "poststratified")} for u in UTILITIES}
        out["mean_loss"] = {g: dict(zip(("mean", "se"), _mean_se([r["mean_loss"][g] for r in per_seed])))
                            for g in ("fedavg", "poststratified")}
        out["seeds"] = per_seed
        out["seconds"] = time.perf_counter() - start
    return out


def table(results: Sequence[dict[str, Any]]) -> str:
    """Markdown table: Spearman(utility, −realised loss), mean ± se, one row per DGP."""
    lines = ["| DGP | " + " | ".join(f"{u} ({AGGREGATION[u]})" for u in UTILITIES) + " |",
             "|---|" + "---|" * len(UTILITIES)]
    for r in results:
        cells = []
        for u in UTILITIES:
            v = r["utilities"][u]
            se = "n/a" if v["se"] is None else f"{v['se']:.3f}"
            cells.append(f"{v['spearman']:+.3f} ± {se}")
        lines.append(f"| {r['dgp']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dgp", action="append", choices=DGPS, help="DGP (repeatable; default all)")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--sets", type=int, default=50)
    parser.add_argument("--json", metavar="FILE", help="also write the detailed results as JSON")
    parser.add_argument("--enrollment-model", default=ENROLLMENT_MODEL,
                        help=f"model behind π̂ on misspecified, proxy and cps (default {ENROLLMENT_MODEL})")
    parser.add_argument("--ceiling", type=int, metavar="R", default=0,
                        help="instead: the count-based ceiling (count_ceiling, R fresh replicates) per DGP")
    args = parser.parse_args(argv)
    if args.ceiling:
        for dgp in args.dgp or HOMOGENEOUS:
            c = count_ceiling(dgp, args.seeds, args.sets, args.ceiling)
            print(f"{dgp}: explainable variance {c['explainable']:.3f} ± {c['explainable_se'] or float('nan'):.3f}, "
                  f"ceiling correlation {c['ceiling']:.3f} ± {c['ceiling_se'] or float('nan'):.3f}")
        return 0
    results = []
    for dgp in args.dgp or DGPS:
        r = run(dgp, args.seeds, args.sets, details=True, enrollment_model=args.enrollment_model,
                progress=lambda d, t, s, dgp=dgp: print(f"{dgp}: seed {d}/{t} ({s:.0f} s)", file=sys.stderr))
        results.append(r)
        cross = " ".join(f"{u}:{g[:4]}={r['cross'][u][g]['spearman']:+.3f}" for u in UTILITIES for g in r["cross"][u])
        print(f"{dgp}: {r['seconds']:.0f} s; mean loss fedavg {r['mean_loss']['fedavg']['mean']:.5f}, "
              f"poststratified {r['mean_loss']['poststratified']['mean']:.5f}; cross {cross}", file=sys.stderr)
    print(f"Spearman(utility, −realised target excess loss), {args.seeds} seeds × {args.sets} sets, mean ± se over seeds")
    print(table(results))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1, default=float)
    return 0



def count_ceiling(dgp: str, seeds: int, sets: int, replicates: int = 4, *, k: int = 10,
                  train: TrainConfig = DEFAULT_TRAIN) -> dict[str, Any]:
    """How much of the realised post-stratified loss *any* function of the per-stratum counts can predict.

    For DGPs with homogeneous strata (:data:`HOMOGENEOUS`) every random ``k``-set is
    retrained on ``replicates`` fresh draws of its examples with the same per-client stratum
    counts (so the same post-stratified weights). With ``R = replicates + 1`` draws per set
    (the realised one included), the between-set variance of the expected loss
    ``E[loss | counts]`` is estimated without bias as ``var(mean_r) − mean(within-set var)/R``;
    ``explainable`` is its ratio to the variance across sets of a single draw, and
    ``ceiling = √explainable`` bounds the (Pearson) correlation of any count-based utility
    with the realised loss. Mean ± se over seeds.
    """
    from fairsched.fl.stratified import (
        FairPopulationConfig,
        stratum_examples,
        stratum_models,
    )

    if dgp not in HOMOGENEOUS:
        raise SimulationError(f"count_ceiling needs homogeneous strata: DGP {', '.join(HOMOGENEOUS)}")
    if replicates < 1 or sets < 3 or seeds < 1:
        raise SimulationError("count_ceiling: need seeds >= 1, sets >= 3, replicates >= 1")
    cfg = FairPopulationConfig()
    theta_j, mu_j = stratum_models(len(cfg.shares), cfg.dim)
    explainable, ceiling = [], []
    for s in range(seeds):
        pop = make_validity_population(dgp, s)
        W, pi = pop.workers, pop.shares_hat
        rng = np.random.default_rng([s, 123])
        clients = W[_random_sets(rng, W.size, [k] * sets, k)]
        omega, w = poststratified_batch(pop.data, pop.strata, clients, pi)
        draws = [pop.objective.values(train_sets(pop.data, clients, omega, w, train)) - pop.f_star]
        X, y = pop.data.X.copy(), pop.data.y.copy()
        for _ in range(replicates):
            for i in np.unique(clients):
                for j in range(pi.size):
                    sel = pop.strata[i] == j
                    X[i, sel], y[i, sel] = stratum_examples(rng, theta_j[j], mu_j[j], int(sel.sum()))
            fresh = type(pop.data)(X, y, pop.data.mask)
            draws.append(pop.objective.values(train_sets(fresh, clients, omega, w, train)) - pop.f_star)
        D = np.asarray(draws)                       # (R, sets)
        R = D.shape[0]
        within = float(D.var(axis=0, ddof=1).mean())
        single = float(D.var(axis=1, ddof=1).mean())
        between = float(D.mean(axis=0).var(ddof=1)) - within / R
        explainable.append(max(0.0, between) / single)
        ceiling.append(float(np.sqrt(max(0.0, between) / single)))
    m, se = _mean_se(explainable)
    c, cse = _mean_se(ceiling)
    return {"dgp": dgp, "explainable": m, "explainable_se": se, "ceiling": c, "ceiling_se": cse}


if __name__ == "__main__":
    sys.exit(main())
