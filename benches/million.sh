#!/usr/bin/env bash
# Throughput and peak memory of the `svi` engine at 100,000 and 1,000,000
# points (benches/million.tempest): the same 2,000 minibatch steps at both
# sizes, so the seconds per step show whether a step's cost depends on N
# (an epoch is N / 256 steps), then one whole-data pass for the ELBO and
# its error estimate. Needs a release build and GNU time.
#   bash benches/million.sh [folder for the generated data]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/million}
mkdir -p "$dir"
bin=target/release/tempest
[ -x "$bin" ] || cargo build --release
for n in 100000 1000000; do
  f="$dir/synthetic_$n.csv"
  if [ ! -s "$f" ]; then
    awk -v n="$n" 'BEGIN { srand(1); print "x1,x2,y";
      for (i = 0; i < n; i++) {
        x1 = rand() * 6 - 3; x2 = rand() * 6 - 3;
        u1 = rand(); u2 = rand(); if (u1 < 1e-300) u1 = 1e-300;
        e = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
        printf "%.6f,%.6f,%.6f\n", x1, x2, sin(2 * x1) + 0.5 * cos(3 * x2) + 0.3 * e } }' > "$f"
  fi
  echo "== $n points"
  /usr/bin/time -f "whole process %e s, peak memory %M KB" \
    "$bin" run benches/million.tempest --data "$f" -q 2>&1 | grep -E "ELBO|sigma|whole process"
done
