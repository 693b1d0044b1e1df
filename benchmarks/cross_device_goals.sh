#!/usr/bin/env bash
# Re-measures every row of the table "Where each goal stands" (benchmarks/README.md, and the
# README's "Cross-device goals: where they stand"), one job at a time. The rows that are tests
# are not here: the test run (README, "The two commands") is their measurement.
#
#     bash benchmarks/cross_device_goals.sh > goals.log 2>&1
#
# About 35 minutes on an idle 2-core machine, with the package installed with its test extras
# (pip install -e '.[test,flower]'); it runs from the repository root wherever it is started.
# Each command prints its own figures; /usr/bin/time adds wall time, CPU time and peak memory
# per command where it exists. Nothing here is asserted: the tests check correctness, these
# commands measure.
set -u
cd "$(dirname "$0")/.."
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

run() {
    echo "===== $(date +%H:%M:%S) $*"
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f "[time] %e s wall, %U+%S s CPU, %M KiB peak" "$@" 2>&1
    else
        "$@" 2>&1
    fi
    local status=$?  # before the date below, whose command substitution would reset $?
    echo "===== end $(date +%H:%M:%S), exit $status"
}

git log --oneline -1 2>/dev/null
# accuracy: the project's family at n = 1,000, 10,000 and 100,000, then data nothing was tuned on
run python benchmarks/bench_colgen.py 1000 10000 100000
run python benchmarks/bench_balanced.py --seeds 0 1 2 3 --no-baseline
run python benchmarks/bench_scheduler.py --untuned two-class --workers 10000 --k 100 --seed 7 --save "$scratch/two-class-7.toml"
run bash -c "fairsched optimum '$scratch/two-class-7.toml' --quiet | head -n 1"
run python benchmarks/bench_balanced.py --workers 100000 --k 1000 --seeds 1 --cases pareto-sparse --time-limit 300 --no-baseline
# coverage, facility location, concave of modular and the mixture (120 s each)
run python benchmarks/bench_pricing.py coverage coverage-powerlaw coverage-geometric coverage-uniform
run python benchmarks/bench_pricing.py facility-location
for seed in 1 4 5; do run python benchmarks/bench_pricing.py --seed $seed facility-location; done
run python benchmarks/bench_pricing.py concave-sqrt concave-log1p concave-sqrt-quality concave-log1p-quality
run python benchmarks/bench_pricing.py mixture mixture-untuned
# the scheduler, lp-sequenced, `fairsched run` at n = 200,000, FairCG1's setup, the Flower strategy
run python -m pytest benchmarks/bench_run_scale.py --benchmark-only -s -k test_run_at_scale
run python benchmarks/bench_scheduler.py
run python -m pytest benchmarks/bench_lp_sequenced.py --benchmark-only -s
run python -m pytest benchmarks/bench_continuous_greedy.py --benchmark-only -s -k n10000
run python benchmarks/bench_flower.py
