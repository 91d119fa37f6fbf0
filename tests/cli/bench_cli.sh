#!/usr/bin/env bash
# `s2hc bench` from the shell: bad options refused up front, and the smallest real run
# (tiny preset, one round of one step, no sweep, no probes) writes its CSV files with
# every method, rc's own ratio exactly 1, a breakdown per method and the frame floor.
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh
expect_status 0 "bench --help" -- "$S2HC" bench --help
expect_out "example" "bench --help shows an example"
expect_status 2 "an unknown preset is refused" -- "$S2HC" bench --preset huge
expect_out "--preset must be tiny or small" "the message names the option"
for bad in "--rounds 0" "--steps x" "--threads -1" "--probe-steps 2.5"; do
  expect_status 2 "bench $bad is refused" -- "$S2HC" bench $bad
  expect_out "${bad%% *}: expected a whole number >= 1" "bench $bad: the message names the option"
done
expect_status 2 "bench --mem-limit 0 is refused" -- "$S2HC" bench --mem-limit 0
expect_status 0 "the smallest bench runs" -- "$S2HC" bench --quick --preset tiny --no-streams --no-probes \
  --rounds 1 --steps 1 --csv "$TMP/csv"
expect_out "thread: [0-9.]+ ms CPU per step = [0-9.]+% of rc's step" "the frame floor is printed"
for f in gemm bench breakdown; do
  if [ -s "$TMP/csv/$f.csv" ]; then ok "$f.csv written"; else fail "$f.csv missing or empty"; fi
done
methods="rc identity hc mhc mhc_lite kromhc orthogonal s2hc s2hc_rot"
for m in $methods; do
  if grep -q "^tiny,$m,"  "$TMP/csv/bench.csv"; then ok "bench.csv has $m"; else fail "bench.csv lacks $m"; fi
  if grep -q "^tiny,$m,[0-9]*,total," "$TMP/csv/breakdown.csv"; then ok "breakdown.csv has $m's total"
  else fail "breakdown.csv lacks $m's total"; fi
done
# rc's ratio to itself is exactly 1; every other method's is a positive number
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
         $2 == "rc" && $(c["overhead_vs_rc"]) + 0 != 1 { bad = 1 }
         $2 != "rc" && !($(c["overhead_vs_rc"]) + 0 > 0) { bad = 1 }
         END { exit bad }' "$TMP/csv/bench.csv" && ok "overhead_vs_rc: rc 1, the others > 0" || fail "overhead_vs_rc column"
# the floor: one row, a fraction of rc's step strictly between 0 and 1
awk -F, '$2 == "frame_floor" { n++; if (!($7 > 0 && $7 < 1) || !($6 > 0)) bad = 1 }
         END { exit !(n == 1 && !bad) }' "$TMP/csv/breakdown.csv" && ok "one frame_floor row, 0 < fraction < 1" \
  || fail "frame_floor row in breakdown.csv"
finish bench_cli
