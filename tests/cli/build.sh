#!/usr/bin/env bash
# The build keeps what it built and rebuilds what is missing. Objects reached only through
# pattern rules are kept (.SECONDARY with their list: the double-precision objects;
# make once deleted them after every build, so any change recompiled all of them). And no
# target is kept from being rebuilt: a bare `.SECONDARY:` made every missing file
# "intermediate", so a forced target was never rebuilt and
# `make paper` after `make paper PRESET=tiny` found the small grids' missing index.csv
# "not needed" and reported the tiny runs as small ones.
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh
B=${BUILD:-build}
# the make arguments of the build under test (the sanitizer's, the coverage build's)
SANARG=; san_build && SANARG=SAN=1
case "$B" in build-cov*) SANARG=COVERAGE=1 ;; esac
n=$(ls "$B"/dbl/harness/*.o "$B"/dbl/kernels/cpu/*.o 2>/dev/null | wc -l)
[ "$n" -ge 5 ] && ok "the double-precision objects are kept after the build ($n)" \
  || fail "the double-precision objects were deleted after the build ($n left)"
n=$(ls "$B"/tests/*.o 2>/dev/null | wc -l)
[ "$n" -ge 10 ] && ok "the tests' objects are kept after the build ($n)" \
  || fail "the tests' objects were deleted after the build ($n left)"
# version.o follows the commit: rebuilt when the commit recorded in its stamp differs
# from the tree's, and only then (every binary links it).
S="$B/harness/version.commit"
if [ -f "$S" ] && [ -f "$B/harness/version.o" ]; then
  cp -p "$S" "$TMP/stamp"
  make -n $SANARG "$B/harness/version.o" >"$TMP/vout" 2>&1
  grep -q -- "-DS2HC_GIT=" "$TMP/vout" \
    && fail "version.o is rebuilt although the commit is the one it was built for" \
    || ok "version.o is not rebuilt for the same commit"
  make -n $SANARG "$B/tests/test_frame" 2>&1 | grep -q "tests/test_frame.c" \
    && fail "test_frame is rebuilt with nothing changed" || ok "test_frame is not rebuilt with nothing changed"
  echo 0000000 >"$S"
  make -n $SANARG "$B/harness/version.o" 2>&1 | grep -q -- "-DS2HC_GIT='\"$(git rev-parse --short HEAD)" \
    && ok "version.o is rebuilt, with the tree's commit, when the stamp names another" \
    || fail "version.o not rebuilt after the commit changed (the version string would go stale)"
  # and the tests relink with it, without compiling again
  make -n $SANARG "$B/tests/test_frame" "$B/tests/test_variants" >"$TMP/vout" 2>&1
  grep -q -- "-o $B/tests/test_frame " "$TMP/vout" && grep -q -- "-o $B/tests/test_variants " "$TMP/vout" \
    && ok "after a new commit the tests relink" || fail "the tests do not relink with a new version.o"
  grep -Eq "tests/test_(frame|variants)\.c" "$TMP/vout" \
    && fail "a new commit recompiles the tests: $(grep -E 'tests/test_(frame|variants)\.c' "$TMP/vout" | head -c 200)" \
    || ok "a new commit does not recompile the tests"
  cp -p "$TMP/stamp" "$S"
else
  fail "no $S or version.o: the build did not record its commit"
fi
# other code generation flags (OPT, as for a portable binary after a -march=native build)
# compile the objects again, as another compiler does ($B/cc.id); the same flags do not
if [ -f "$B/cc.id" ]; then
  cp -p "$B/cc.id" "$TMP/ccid"
  make -n $SANARG "$B/harness/util.o" 2>&1 | grep -q "harness/util\.c" \
    && fail "util.o is rebuilt with the same flags" || ok "the same OPT keeps the objects"
  make -n $SANARG OPT="-O2 -DS2HC_BUILD_CHECK" "$B/harness/util.o" 2>&1 | grep -q -- "-O2 -DS2HC_BUILD_CHECK.*harness/util\.c" \
    && ok "another OPT compiles the objects again" || fail "make OPT=... linked the objects of other flags"
  cp -p "$TMP/ccid" "$B/cc.id"
else
  fail "no $B/cc.id: the build did not record its compiler"
fi
# a finished tiny report, then the default preset: the small grids must be planned
P="$TMP/paper" R="$TMP/runs"
mkdir -p "$P/data" "$R"
echo "tiny runs/tiny" > "$P/.preset"
pngs=$(make -pn $SANARG paper PAPER_OUT="$P" PAPER_RUNS="$R" 2>/dev/null | sed -n 's/^PAPER_PNG := //p' | head -n 1)
[ -n "$pngs" ] && ok "make knows the paper's figures" || fail "no PAPER_PNG from make -p"
touch "$P/data/meta.gp"; sleep 1; touch $pngs; sleep 1; touch "$P/index.html"
make -n $SANARG paper PRESET=small PAPER_OUT="$P" PAPER_RUNS="$R" >"$TMP/out" 2>&1
expect_out "grid experiments/paper.yaml \(preset small\)" "after a tiny report, make paper plans the small grids"
expect_out "analyze" "and the analysis"
# an interrupted grid rewrote its index.csv but wrote no stamp: the next make paper runs
# that grid again (and only that one), where the index.csv's time made it look done
P2="$TMP/paper2" R2="$TMP/runs2"
mkdir -p "$P2/data" "$R2/paper" "$R2/ablations" "$R2/streams"
echo "tiny $R2" > "$P2/.preset"
touch "$R2/ablations/.complete" "$R2/streams/.complete"; sleep 1
touch "$R2/paper/index.csv" "$R2/ablations/index.csv" "$R2/streams/index.csv" "$P2/data/meta.gp"; sleep 1
touch $(echo "$pngs" | sed "s|$P|$P2|g"); sleep 1; touch "$P2/index.html"
make -n $SANARG paper PRESET=tiny PAPER_OUT="$P2" PAPER_RUNS="$R2" >"$TMP/out" 2>&1
expect_out "grid experiments/paper.yaml \(preset tiny\)" "an interrupted grid (no stamp) runs again"
grep -Eq "grid experiments/(ablations|streams).yaml" "$TMP/out" && fail "a complete grid was planned again" ||
  ok "the complete grids are not run again"
# make paper's ablations step (ablate --record of the paper grid's runs): planned, before
# the analysis, when the paper grid has run since its ablations, not when it has not; at
# M and L left out unless PAPER_ABLATE=1
P3="$TMP/paper3" R3="$TMP/runs3"
mkdir -p "$P3/data" "$R3/paper" "$R3/ablations" "$R3/streams"
touch "$R3/paper/.ablated"; sleep 1
for g in paper ablations streams; do touch "$R3/$g/.complete" "$R3/$g/index.csv"; done; touch "$P3/data/meta.gp"
# a PAPER_OUT with a space (make's rules would read two paths: paper-clean removing both)
mkdir -p "$TMP/sp" && touch "$TMP/sp/a" "$TMP/sp/b"
MAKEFLAGS= MAKELEVEL= make -s paper-clean PAPER_OUT="$TMP/sp/a $TMP/sp/b" >"$TMP/out" 2>&1 && fail "make paper-clean with a space in PAPER_OUT ran" ||
  { grep -q "PAPER_OUT and PAPER_RUNS must each be one path without spaces" "$TMP/out" && [ -e "$TMP/sp/a" ] && [ -e "$TMP/sp/b" ] &&
    ok "a PAPER_OUT with a space refused, nothing removed" || fail "PAPER_OUT with a space: $(cat "$TMP/out"); $(ls "$TMP/sp")"; }
plan() { # plan PRESET [VAR=VALUE]: make -n paper's lines into $TMP/out
  echo "$1 $R3" >"$P3/.preset"
  make -n $SANARG paper PRESET="$@" PAPER_OUT="$P3" PAPER_RUNS="$R3" >"$TMP/out" 2>&1
}
at() { grep -n -m 1 -- "$1" "$TMP/out" | cut -d: -f1; }
plan tiny
a=$(at "ablate --record --what identity,mean,branch --mean-from train $R3/paper/\*/") z=$(at " analyze $R3/paper")
[ -n "$a" ] && [ -n "$z" ] && [ "$a" -lt "$z" ] && ok "the paper grid run since its ablations: ablate again, then analyze" ||
  fail "make paper after the grid: ablate at line '$a', analyze at '$z'"
# the command it runs (not its echo) records the three ablations the figure's panels draw:
# without branch, beyond_ablation's third panel would say that no run measured it
grep -q -- "ablate --record --what identity,mean,branch --mean-from train $R3/paper/\*/ >" "$TMP/out" &&
  ok "the ablate step records identity, mean and branch" ||
  fail "the ablate step's command: $(grep -- 'ablate --record' "$TMP/out" | grep -v echo)"
plan M
[ -z "$(at "ablate --record")" ] && ok "at M, no ablate step" || fail "at M, make paper ablates: $(grep 'ablate --record' "$TMP/out")"
plan M PAPER_ABLATE=1
[ -n "$(at "ablate --record --what identity,mean,branch --mean-from train $R3/paper/")" ] && ok "at M with PAPER_ABLATE=1, the ablate step" || fail "PAPER_ABLATE=1 at M: no ablate step"
sleep 1; touch "$R3/paper/.ablated" "$P3/data/meta.gp"
plan tiny
[ -z "$(at "ablate --record")" ] && ok "ablations newer than the grid: not planned again" ||
  fail "the ablations were planned again"
# a checkout under a folder whose path holds spaces, a quote and a double quote: the
# paths make hands the shell (make test's S2HC_BIN, the CUDA library's path compiled into
# s2hc) stay one word each, the library's a C string of the very path ('...' around
# them broke at the first quote: make test in /home/o'brien ran nothing)
Q="$TMP/it's a \"q\" dir"
mkdir -p "$Q" && cp Makefile "$Q/" && cp -r mk "$Q/"
for d in harness kernels probes analysis tests tools; do ln -s "$PWD/$d" "$Q/$d"; done
# (the line's end: tests/run.sh, then the names of make test TESTS=... when given)
line=$(make -n -C "$Q" --no-print-directory $SANARG test 2>/dev/null | grep -E 'tests/run.sh( |$)' | head -n 1)
got=$(eval "${line%%tests/run.sh*} printenv S2HC_BIN" 2>&1)
want="$Q/bin/s2hc"; [ "$B" != build ] && want="$Q/$B/s2hc" # the sanitizer or a cross build's binary
[ "$got" = "$want" ] && ok "make test hands the shell S2HC_BIN whole" || fail "make test's S2HC_BIN: '$got' from: $line"
if make -n -C "$Q" --no-print-directory -W kernels/cuda/cuda_dl.c build/kernels/cuda/cuda_dl.o 2>/dev/null | grep -q -- -DS2HC_CUDA_SO; then
  line=$(make -n -C "$Q" --no-print-directory -W kernels/cuda/cuda_dl.c build/kernels/cuda/cuda_dl.o 2>/dev/null | grep -- -DS2HC_CUDA_SO)
  eval "set -- $line" 2>/dev/null
  def=""; for w in "$@"; do case $w in -DS2HC_CUDA_SO=*) def=${w#-DS2HC_CUDA_SO=};; esac; done
  want="\"${Q//\"/\\\"}/build/cuda/libs2hc_cuda.so\""
  [ "$def" = "$want" ] && ok "the CUDA library's path is one C string of the whole path" \
    || fail "-DS2HC_CUDA_SO: '$def', wanted '$want'"
fi
finish build
