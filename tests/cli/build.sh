#!/usr/bin/env bash
# The build keeps what it built and rebuilds what is missing. Objects reached only through
# pattern rules are kept (.SECONDARY with their list: the double-precision test objects;
# make once deleted them after every build, so any change recompiled all of them). And no
# target is kept from being rebuilt: a bare `.SECONDARY:` made every missing file
# "intermediate", so FORCE never forced (the binary's version string went stale) and
# `make paper` after `make paper PRESET=tiny` found the small grids' missing index.csv
# "not needed" and reported the tiny runs as small ones.
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh
B=${BUILD:-build}
SANARG=; [ "$B" = build-san ] && SANARG=SAN=1
n=$(ls "$B"/dbl/harness/*.o "$B"/dbl/kernels/cpu/*.o 2>/dev/null | wc -l)
[ "$n" -ge 5 ] && ok "the double-precision objects are kept after the build ($n)" \
  || fail "the double-precision objects were deleted after the build ($n left)"
make -n $SANARG "$B/harness/version.o" 2>&1 | grep -q -- "-DS2HC_GIT=" \
  && ok "version.o is rebuilt every time (FORCE forces)" || fail "FORCE does not force: version.o not rebuilt"
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
finish build
