"""Does FLOSS notice when its shadow-variable assumption fails? A simulation harness.

    python -m fairsched.propensity.floss_validity --sims 200 --n 10000 --seed 0

For each violation it simulates ``sims`` populations of ``n`` users, fits
:func:`~fairsched.propensity.floss_diagnostics.fit_shadow_checked` (policy ``"ignore"``)
and reports the share of runs flagged and, over the runs *not* flagged, the bias of the
FLOSS-weighted (Hájek, weights ``1/π̂``) mean of satisfaction minus the population mean.

The population (one device covariate ``D'``, two candidate shadow variables):

    D' ~ N(0, 1),  Z₁ = 0.3·D' + √0.91·N(0, 1),  Z₂ ~ N(0, 1),
    S = 0.5·Z₁ + 0.4·Z₂ + 0.4·D' + N(0, 1),
    logit π = 0.4 − 0.4·D' + 0.7·S + violation term,

with violations

- ``none``: the model holds;
- ``direct``: ``+ 0.3·Z₁`` (a shadow variable also drives opt-out directly; about a third
  of the satisfaction effect per standard deviation);
- ``irrelevant``: ``S = 0.4·D' + N(0, 1.41)`` (same variance, unrelated to ``Z``);
- ``quadratic``: ``− 0.1·S²`` (diminishing effect of satisfaction; monotone over ±2.5 sd);

and three more that the checks were not designed against (the ``curvature`` check was added
after the ``quadratic`` runs, so these are its test on forms it was not tuned to):

- ``interaction``: ``+ 0.2·S·D'`` (the effect of satisfaction differs by device);
- ``step``: ``− 0.6·1[S > 1]`` (the most satisfied stop answering: a threshold, not a curve);
- ``d-squared``: ``− 0.2·D'²`` (curvature in the covariate, not in ``S``).

``shadows=2`` gives the estimator ``Z = (Z₁, Z₂)``; ``shadows=1`` gives only ``Z₁`` (``Z₂``
is then unobserved noise in ``S``), the just-identified FLOSS setting.

**How much can any diagnostic detect?** With ``informed=True`` each run also fits the
response model *with the violation's own term* (``S²`` for ``quadratic``, ``Z₁`` for
``direct``) by the same efficient GMM and quadratic instruments, and records whether the
two-sided Wald test of that coefficient rejects at ``alpha``: a test told which term is
missing, so a yardstick for the power a general-purpose check can hope for against that
alternative (for a single coefficient, the Wald test is asymptotically the most powerful
test of its size among those that are unbiased).  ``irrelevant`` has no such term (``γ``
is not identified there), so it reports none.
"""

from __future__ import annotations

import argparse
import time
from typing import Sequence

import numpy as np

from fairsched.propensity.errors import ShapeError
from fairsched.propensity.floss_diagnostics import (
    J_ALPHA,
    added_term_test,
    fit_shadow_checked,
)

VIOLATIONS = ("none", "direct", "irrelevant", "quadratic", "interaction", "step", "d-squared")
#: the violations the harness runs by default (the first four)
CORE_VIOLATIONS = VIOLATIONS[:4]
THETA = (0.4, -0.4, 0.7)            # intercept, D', S
DIRECT, QUADRATIC = 0.3, -0.1


def simulate(violation: str, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One population: ``D`` (n,), ``Z`` (n, 2), full ``S``, ``R``."""
    if violation not in VIOLATIONS:
        raise ShapeError(f"violation: expected one of {', '.join(VIOLATIONS)}, got {violation!r}")
    D = rng.normal(size=n)
    Z = np.column_stack([0.3 * D + np.sqrt(0.91) * rng.normal(size=n), rng.normal(size=n)])
    if violation == "irrelevant":
        S = 0.4 * D + np.sqrt(1.41) * rng.normal(size=n)
    else:
        S = 0.5 * Z[:, 0] + 0.4 * Z[:, 1] + 0.4 * D + rng.normal(size=n)
    eta = THETA[0] + THETA[1] * D + THETA[2] * S
    if violation == "direct":
        eta = eta + DIRECT * Z[:, 0]
    elif violation == "quadratic":
        eta = eta + QUADRATIC * S ** 2
    elif violation == "interaction":
        eta = eta + 0.2 * S * D
    elif violation == "step":
        eta = eta - 0.6 * (S > 1.0)
    elif violation == "d-squared":
        eta = eta - 0.2 * D ** 2
    R = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
    return {"D": D, "Z": Z, "S": S, "R": R}


#: the column the informed test adds to the response model, per violation
INFORMED_TERMS = {"quadratic": "S²", "direct": "Z₁"}


def informed_rejects(violation: str, data: dict[str, np.ndarray], shadows: int, alpha: float = 0.05) -> bool:
    """Whether the Wald test of ``violation``'s own coefficient rejects at ``alpha`` (module
    docstring) on ``data`` (from :func:`simulate`, under any violation: on ``none`` data the
    rejection rate is the test's size)."""
    from fairsched.propensity.floss_gmm import instrument_matrix

    if violation not in INFORMED_TERMS:
        raise ShapeError(f"informed test: no term for violation {violation!r}; "
                         f"expected one of {', '.join(INFORMED_TERMS)}")
    R, D, Z = data["R"], data["D"], data["Z"][:, :shadows]
    S = np.where(R == 1, data["S"], 0.0)  # π is evaluated for responders only
    term = S ** 2 if violation == "quadratic" else data["Z"][:, 0]
    X = np.column_stack([np.ones(R.size), D, S])
    _, p = added_term_test(R, X, instrument_matrix(D[:, None], Z, "quadratic"), S, term, alpha=alpha)
    return bool(p < alpha)  # nan (not identified or not solved) does not reject


def _mean_se(x: list[float]) -> dict[str, float | None]:
    if not x:
        return {"mean": None, "se": None}
    a = np.asarray(x)
    return {"mean": float(a.mean()), "se": float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else None}


def run(violation: str, sims: int, n: int = 10_000, seed: int = 0, *, shadows: int = 2,
        informed: bool = False, j_alpha: float = J_ALPHA) -> dict:
    """Flag rate and bias over unflagged runs; also per-flag counts and the bias over all runs.

    With ``informed`` (``quadratic`` and ``direct`` only), ``"informed_power"`` is the share
    of runs in which :func:`informed_rejects` rejects (module docstring); otherwise it is
    ``None``. ``j_alpha``: level of the fit's J test
    (:func:`~fairsched.propensity.floss_diagnostics.fit_shadow_checked`).
    """
    if sims < 1 or n < 50:
        raise ShapeError(f"need sims >= 1 and n >= 50, got sims={sims}, n={n}")
    if violation not in VIOLATIONS:
        raise ShapeError(f"violation: expected one of {', '.join(VIOLATIONS)}, got {violation!r}")
    if shadows not in (1, 2):
        raise ShapeError(f"shadows: expected 1 or 2, got {shadows}")
    start = time.perf_counter()
    if informed and violation not in INFORMED_TERMS:
        raise ShapeError(f"the informed test needs a violation with a term ({', '.join(INFORMED_TERMS)}), "
                         f"got {violation!r}")
    kept, everything, counts = [], [], {}
    flagged = rejected = 0
    for child in np.random.SeedSequence([seed, VIOLATIONS.index(violation)]).spawn(sims):
        data = simulate(violation, n, np.random.default_rng(child))
        R, S = data["R"], data["S"]
        fit = fit_shadow_checked(R, data["D"], np.where(R == 1, S, np.nan), data["Z"][:, :shadows],
                                 on_unreliable="ignore", j_alpha=j_alpha)
        r = R == 1
        with np.errstate(over="ignore"):
            w = 1 + np.exp(-np.clip(fit.coef[0] + fit.coef[1] * data["D"][r] + fit.gamma * S[r], -700, 700))
        bias = float(np.sum(w * S[r]) / np.sum(w) - S.mean()) if np.isfinite(w).all() else float("nan")
        everything.append(bias)
        for f in fit.flags:
            counts[f] = counts.get(f, 0) + 1
        if fit.flags or not np.isfinite(bias):
            flagged += 1
        else:
            kept.append(bias)
        if informed:
            rejected += informed_rejects(violation, data, shadows)
    return {"violation": violation, "flag_rate": flagged / sims, "bias": _mean_se(kept), "sims": sims,
            "n": n, "shadows": shadows, "j_alpha": j_alpha, "flags": counts,
            "bias_all": _mean_se([b for b in everything if np.isfinite(b)]),
            "informed_power": rejected / sims if informed else None,
            "seconds": time.perf_counter() - start}


def table(results: Sequence[dict]) -> str:
    """Markdown: one row per violation."""
    fmt = lambda d: "n/a" if d["mean"] is None else f"{d['mean']:+.4f} ± {d['se'] or float('nan'):.4f}"
    lines = ["| violation | flag rate | informed test | bias (unflagged) | bias (all runs) | flags | seconds |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        flags = ", ".join(f"{k} {v}" for k, v in sorted(r["flags"].items())) or "-"
        informed = "-" if r.get("informed_power") is None else f"{r['informed_power']:.3f}"
        lines.append(f"| {r['violation']} | {r['flag_rate']:.3f} | {informed} | {fmt(r['bias'])} | {fmt(r['bias_all'])} "
                     f"| {flags} | {r['seconds']:.1f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--violation", choices=VIOLATIONS, action="append",
                        help="violation to run (repeatable; default the first four)")
    parser.add_argument("--sims", type=int, default=200)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shadows", type=int, default=2, choices=(1, 2))
    parser.add_argument("--informed", action="store_true", help="also the Wald test told the missing term")
    parser.add_argument("--j-alpha", type=float, default=J_ALPHA, help=f"level of the J test (default {J_ALPHA})")
    args = parser.parse_args(argv)
    results = [run(v, args.sims, args.n, args.seed, shadows=args.shadows, j_alpha=args.j_alpha,
                   informed=args.informed and v in INFORMED_TERMS) for v in args.violation or CORE_VIOLATIONS]
    print(f"FLOSS validity: {args.sims} simulations of {args.n:,} users, {args.shadows} shadow variable(s), "
          f"seed {args.seed}")
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
