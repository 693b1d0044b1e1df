"""Tests of the utility oracles against naive per-set computations."""

from __future__ import annotations

import math
import tomllib

import numpy as np
import pytest
import tomli_w

from fairsched.errors import InstanceError
from fairsched.utilities import (
    UTILITY_KINDS,
    AccuracyUtility,
    CallableUtility,
    ConcaveModular,
    Coverage,
    FacilityLocation,
    Mixture,
    SetFunction,
    check_submodular,
    utility_from_config,
    validation,
)

N = 6
ALL_MASKS = ((np.arange(2**N)[:, None] >> np.arange(N)) & 1).astype(bool)  # row b <-> bits of b


def members(mask: np.ndarray) -> list[int]:
    return [int(u) for u in np.flatnonzero(mask)]


# Each factory returns (utility, naive f taking a list of worker indices).

def make_accuracy(rng):
    sizes = rng.uniform(50, 500, N)
    a, b, c = 0.1, 0.6, -0.3

    def naive(S):
        return 0.0 if not S else (1 - a) - b * sum(sizes[u] for u in S) ** c
    return AccuracyUtility(sizes, a, b, c), naive


def make_facility(rng):
    sim = rng.uniform(0, 1, (5, N))
    sim[rng.random(sim.shape) < 0.3] = 0.0

    def naive(S):
        return sum(max((sim[i, u] for u in S), default=0.0) for i in range(sim.shape[0]))
    return FacilityLocation(sim), naive


def make_coverage(rng):
    weights = rng.uniform(0, 2, 8)
    covers = [sorted(rng.choice(8, size=rng.integers(0, 4), replace=False).tolist())
              for _ in range(N)]

    def naive(S):
        return sum(weights[e] for e in set().union(*(covers[u] for u in S)))
    return Coverage(covers, weights), naive


def make_concave(concave):
    def factory(rng):
        feats = rng.uniform(0, 3, (4, N))
        phi = math.sqrt if concave == "sqrt" else math.log1p

        def naive(S):
            return sum(phi(sum(feats[j, u] for u in S)) for j in range(feats.shape[0]))
        return ConcaveModular(feats, concave), naive
    return factory


def make_mixture(rng):
    f1, n1 = make_facility(rng)
    f2, n2 = make_coverage(rng)
    f3, n3 = make_accuracy(rng)
    w = [0.5, 2.0, 0.0]
    return Mixture([f1, f2, f3], w), lambda S: w[0] * n1(S) + w[1] * n2(S) + w[2] * n3(S)


def make_callable(rng):
    feats = rng.uniform(0, 1, N)

    def naive(S):
        return math.sqrt(sum(feats[u] for u in S))
    return CallableUtility(lambda S: naive(list(S)), N), naive


FAMILIES = {
    "accuracy": make_accuracy,
    "facility-location": make_facility,
    "coverage": make_coverage,
    "concave-sqrt": make_concave("sqrt"),
    "concave-log1p": make_concave("log1p"),
    "mixture": make_mixture,
    "python": make_callable,
}
SERIALISABLE = [k for k in FAMILIES if k != "python"]


@pytest.fixture(params=list(FAMILIES))
def family(request):
    return FAMILIES[request.param](np.random.default_rng(hash(request.param) % 2**32))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("name", list(FAMILIES))
def test_values_match_naive(name, seed):
    f, naive = FAMILIES[name](np.random.default_rng(seed))
    got = f.values(ALL_MASKS)
    assert got.shape == (2**N,) and got.dtype == np.float64
    want = np.array([naive(members(m)) for m in ALL_MASKS])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert got[0] == 0.0
    assert f.value([]) == 0.0


@pytest.mark.parametrize("name", list(FAMILIES))
def test_values_of_equal_size_sets_match_naive(name):
    """Batches of one set size, as pricing and local search evaluate them (facility location
    gathers the members there), and a batch of one."""
    f, naive = FAMILIES[name](np.random.default_rng(7))
    sizes = ALL_MASKS.sum(axis=1)
    for size in range(1, N + 1):
        batch = ALL_MASKS[sizes == size]
        want = np.array([naive(members(m)) for m in batch])
        np.testing.assert_allclose(f.values(batch), want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(f.values(batch[-1:]), want[-1:], rtol=1e-12, atol=1e-12)


def test_gains_are_value_differences(family):
    f, _ = family
    vals = f.values(ALL_MASKS)
    for b in range(2**N):
        S = members(ALL_MASKS[b])
        gains = f.gains(S)
        assert gains.shape == (N,)
        want = np.array([0.0 if (b >> u) & 1 else vals[b | (1 << u)] - vals[b] for u in range(N)])
        np.testing.assert_allclose(gains, want, rtol=1e-10, atol=1e-12)


def test_exhaustively_monotone_submodular(family):
    f, _ = family
    vals = f.values(ALL_MASKS)
    idx = np.arange(2**N)
    A, B = np.meshgrid(idx, idx, indexing="ij")
    subset = (A & B) == A
    assert (vals[B][subset] >= vals[A][subset] - 1e-12).all()
    for x in range(N):
        bit = 1 << x
        pairs = subset & ((B & bit) == 0)
        gain_a = vals[A | bit] - vals[A]
        gain_b = vals[B | bit] - vals[B]
        assert (gain_a[pairs] >= gain_b[pairs] - 1e-12).all()


def test_check_submodular_accepts_every_family(family):
    f, _ = family
    report = check_submodular(f, trials=300, seed=1)
    assert report and report.ok and report.violation is None


def test_check_submodular_accepts_plain_callable():
    assert check_submodular(lambda S: math.sqrt(len(S)), n=7)


def test_check_submodular_finds_supermodular():
    f = lambda S: float(len(S)) ** 2
    report = check_submodular(f, trials=100, seed=3, n=8)
    assert not report
    assert report.violation.startswith("not submodular")
    A, B, x = set(report.A), set(report.B), report.x
    assert A <= B and x not in B
    gain_a = f(tuple(sorted(A | {x}))) - f(tuple(sorted(A)))
    gain_b = f(tuple(sorted(B | {x}))) - f(tuple(sorted(B)))
    assert gain_a < gain_b


def test_check_submodular_finds_non_monotone():
    f = CallableUtility(lambda S: float(len(S) * (5 - len(S))), 8)
    report = check_submodular(f, trials=200, seed=0)
    assert not report
    assert report.violation.startswith("not monotone")
    assert set(report.A) < set(report.B)
    assert f.value(report.B) < f.value(report.A)


def test_check_submodular_finds_unnormalised():
    report = check_submodular(lambda S: 1.0 + len(S), n=4)
    assert not report and "not normalised" in report.violation and report.A == ()


def test_check_submodular_needs_n_for_callables():
    with pytest.raises(TypeError):
        check_submodular(lambda S: 0.0)


@pytest.mark.parametrize("name", SERIALISABLE)
def test_config_round_trip(name):
    f, _ = FAMILIES[name](np.random.default_rng(7))
    cfg = f.to_config()
    cfg = tomllib.loads(tomli_w.dumps({"utility": cfg}))["utility"]  # must survive TOML
    g = utility_from_config(cfg, n=N)
    assert type(g) is type(f) and g.n == f.n
    np.testing.assert_array_equal(g.values(ALL_MASKS), f.values(ALL_MASKS))
    assert type(f).from_config(cfg, **({"build": utility_from_config} if name == "mixture" else {}))


def test_python_round_trip_and_inferred_path():
    f = utility_from_config({"kind": "python", "callable": "builtins:len"}, n=5)
    assert f.to_config() == {"kind": "python", "callable": "builtins:len"}
    assert f.value([0, 3, 4]) == 3.0
    assert CallableUtility(math.fsum, 3).to_config()["callable"] == "math:fsum"
    with pytest.raises(TypeError):
        CallableUtility(lambda S: 0.0, 3).to_config()


def test_callable_memoises():
    calls = []

    def f(S):
        calls.append(S)
        return float(len(S))

    u = CallableUtility(f, N)
    first = u.values(ALL_MASKS)
    u.values(ALL_MASKS)
    u.gains([0, 1])
    assert len(calls) == 2**N == u.calls
    assert all(isinstance(S, tuple) and list(S) == sorted(S) for S in calls)
    np.testing.assert_array_equal(first, ALL_MASKS.sum(axis=1))

    calls.clear()
    v = CallableUtility(f, N, memoize=False)
    v.values(ALL_MASKS[:5])
    v.values(ALL_MASKS[:5])
    assert len(calls) == 10


@pytest.mark.parametrize("result", [float("nan"), float("inf"), "x", None, True])
def test_callable_rejects_bad_results(result):
    with pytest.raises(InstanceError, match="callable"):
        CallableUtility(lambda S: result, 3).values(ALL_MASKS[:1, :3])


def test_chunked_values_agree(monkeypatch):
    rng = np.random.default_rng(5)
    fams = [FAMILIES[k](rng)[0] for k in ("facility-location", "coverage", "concave-sqrt")]
    full = [f.values(ALL_MASKS) for f in fams]
    monkeypatch.setattr(validation, "CHUNK_ELEMENTS", 7)
    for f, want in zip(fams, full):
        np.testing.assert_allclose(f.values(ALL_MASKS), want, rtol=1e-13)  # BLAS may reorder sums


def test_sparse_coverage_agrees(monkeypatch):
    dense, _ = make_coverage(np.random.default_rng(11))
    monkeypatch.setattr(Coverage, "DENSE_LIMIT", 0)
    sparse = Coverage(dense.covers, dense.weights)
    assert not isinstance(sparse.incidence, np.ndarray)
    np.testing.assert_allclose(sparse.values(ALL_MASKS), dense.values(ALL_MASKS), atol=1e-12)
    for S in ([], [0], [1, 3, 5]):
        np.testing.assert_allclose(sparse.gains(S), dense.gains(S), atol=1e-12)


def test_values_reject_wrong_mask_shape():
    f = AccuracyUtility([1.0, 2.0, 3.0])
    with pytest.raises(ValueError):
        f.values(np.ones((2, 4), dtype=bool))
    with pytest.raises(ValueError):
        f.values(np.ones(3, dtype=bool))


def test_accuracy_submodularity_problem():
    assert AccuracyUtility([100, 200, 300]).submodularity_problem() is None
    assert check_submodular(AccuracyUtility([100, 200, 300]))
    tiny = AccuracyUtility([0.001, 0.001, 5])
    problem = tiny.submodularity_problem()
    assert problem and "not monotone" in problem
    assert not check_submodular(tiny)
    # f({u}) >= 0 here, but the jump from the empty set breaks diminishing returns.
    jumpy = AccuracyUtility([0.053, 0.053, 5])
    assert jumpy.value([0]) > 0
    problem = jumpy.submodularity_problem()
    assert problem and "not submodular" in problem
    assert not check_submodular(jumpy, trials=500)


@pytest.mark.parametrize("a, b, c", [(0.05, 0.5, -0.2), (0.0, 2.0, -0.7), (0.1, 0.01, -1.5)])
def test_accuracy_level_at_slope_inverts_the_slope_and_maximises_g_minus_eta_s(a, b, c):
    f = AccuracyUtility([1.0, 2.0], a, b, c)
    levels = np.array([1e-3, 0.7, 20.0, 1e4, 3e6])
    np.testing.assert_allclose(f.level_at_slope(f.slope(levels)), levels, rtol=1e-12)
    for eta in f.slope(levels[:4]):  # beyond, g − η·s is flat to round-off
        s = f.level_at_slope(eta)
        around = s * np.array([0.9, 0.99, 1.01, 1.1])
        assert (f.curve(around) - eta * around < f.curve(s) - eta * s).all()


def test_mixture_rejects_mismatched_n():
    with pytest.raises(InstanceError, match=r"components\[1\]"):
        Mixture([AccuracyUtility([1, 2]), AccuracyUtility([1, 2, 3])], [1, 1])
    with pytest.raises(InstanceError, match=r"components\[0\]\.weight"):
        Mixture([AccuracyUtility([1, 2])], [-1])


ACC = {"kind": "accuracy", "sizes": [1.0, 2.0, 3.0]}


@pytest.mark.parametrize("table, n, key", [
    ({**ACC, "sizes": [1.0, float("nan"), 3.0]}, None, "sizes"),
    ({**ACC, "sizes": [1.0, -2.0, 3.0]}, None, "sizes"),
    ({**ACC, "sizes": [1.0, 0.0, 3.0]}, None, "sizes"),
    ({**ACC, "sizes": "abc"}, None, "sizes"),
    (ACC, 4, "sizes"),
    ({**ACC, "c": 0.5}, None, "c"),
    ({**ACC, "b": -1}, None, "b"),
    ({**ACC, "a": float("inf")}, None, "a"),
    ({**ACC, "a": "x"}, None, "a"),
    ({"kind": "accuracy"}, None, "sizes"),
    ({**ACC, "sizez": 1}, None, "sizez"),
    ({"kind": "facility-location", "similarity": [[1.0, -0.5]]}, None, "similarity"),
    ({"kind": "facility-location", "similarity": [[1.0, 0.5]]}, 3, "similarity"),
    ({"kind": "facility-location", "similarity": [[1.0], [1.0, 2.0]]}, None, "similarity"),
    ({"kind": "concave-modular", "features": [[1.0, 2.0]], "concave": "cube"}, None, "concave"),
    ({"kind": "concave-modular", "features": [[1.0, -2.0]]}, None, "features"),
    ({"kind": "coverage", "covers": [[0], [5]], "weights": [1.0, 1.0]}, None, "covers"),
    ({"kind": "coverage", "covers": [[0], [1.5]], "weights": [1.0, 1.0]}, None, "covers"),
    ({"kind": "coverage", "covers": [[0], [1]], "weights": [1.0, -1.0]}, None, "weights"),
    ({"kind": "coverage", "covers": [[0], [1]], "weights": [1.0, 1.0]}, 3, "covers"),
    ({"kind": "coverage", "weights": [1.0]}, None, "covers"),
    ({"kind": "nope"}, None, "kind"),
    ({"sizes": [1.0]}, None, "kind"),
    ({"kind": "python", "callable": "builtins:len"}, None, "callable"),
    ({"kind": "python", "callable": "no-colon"}, 3, "callable"),
    ({"kind": "python", "callable": "no_such_module_xyz:f"}, 3, "callable"),
    ({"kind": "python", "callable": "math:no_such_function"}, 3, "callable"),
    ({"kind": "python", "callable": "math:pi"}, 3, "callable"),
    ({"kind": "python"}, 3, "callable"),
    ({"kind": "mixture", "components": [{**ACC, "weight": 1.0},
                                        {**ACC, "sizes": [1.0, -1.0, 1.0], "weight": 1.0}]},
     None, "components[1].sizes"),
    ({"kind": "mixture", "components": [ACC]}, None, "components[0].weight"),
    ({"kind": "mixture", "components": [{**ACC, "weight": 1.0}]}, 4, "components[0].sizes"),
    ({"kind": "mixture", "components": [{**ACC, "weight": 1.0}, {"weight": 1.0}]},
     None, "components[1].kind"),
    ({"kind": "mixture", "components": [{**ACC, "weight": -2.0}]}, None, "components[0].weight"),
    ({"kind": "mixture"}, None, "components"),
])
def test_validation_errors_name_the_key(table, n, key):
    with pytest.raises(InstanceError) as info:
        utility_from_config(table, n)
    assert info.value.key == key or key in str(info.value)
    assert key in str(info.value)


def test_error_messages():
    with pytest.raises(InstanceError,
                       match=r"^sizes: has 3 entries, expected 4 \(one per worker\)$"):
        utility_from_config(ACC, n=4)
    with pytest.raises(InstanceError, match="unknown utility kind 'x'; known: accuracy, "
                                            "concave-modular, coverage, facility-location, "
                                            "mixture, modular, one-step-validation, poststratified-accuracy, "
                                            "propensity-accuracy, python"):
        utility_from_config({"kind": "x"})
    with pytest.raises(InstanceError, match=r"^sizes: entry 1 is nan"):
        AccuracyUtility([1.0, float("nan")])


def test_registry_is_complete():
    assert set(UTILITY_KINDS) == {"accuracy", "facility-location", "coverage",
                                  "concave-modular", "mixture", "modular", "python",
                                  "one-step-validation", "poststratified-accuracy", "propensity-accuracy"}
    for kind, cls in UTILITY_KINDS.items():
        assert issubclass(cls, SetFunction) and cls.kind == kind
