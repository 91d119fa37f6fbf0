#!/usr/bin/env bash
# Run every test binary and shell test; end with the plain "N passed, N failed" line.
set -u
cd "$(dirname "$0")/.."
export BUILD=${BUILD:-build}
export S2HC_BIN=${S2HC_BIN:-$PWD/bin/s2hc}
export S2HC_TEST_TMP=$(mktemp -d /tmp/s2hc-test.XXXXXX)
trap 'rm -rf "$S2HC_TEST_TMP"' EXIT
# OpenBLAS must pick its AVX-512 kernels before it loads (see docs/performance.md).
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -q avx512f /proc/cpuinfo 2>/dev/null; then
  export OPENBLAS_CORETYPE=SkylakeX
fi
# OpenMP's waiting as the s2hc binary sets it (harness/util.c): a short spin, then sleep
# (its default long spin costs 10x on a loaded machine); results do not depend on it.
# GOMP_SPINCOUNT for libgomp (a GCC build), KMP_BLOCKTIME for libomp (a clang build).
if [ -z "${OMP_WAIT_POLICY:-}" ]; then
  [ -n "${GOMP_SPINCOUNT:-}" ] || export GOMP_SPINCOUNT=3000
  [ -n "${KMP_BLOCKTIME:-}" ] || export KMP_BLOCKTIME=1
fi
passed=0; failed=0
for t in "$BUILD"/tests/test_* "$BUILD"/tests/dbl_* tests/cli/*.sh; do
  [ -e "$t" ] || continue
  case "$t" in *.d|*.o|*/lib.sh) continue;; esac
  start=$(date +%s.%N)
  log="$S2HC_TEST_TMP/$(basename "$t").log"
  out=$("$t" 2>"$log.err"); rc=$?
  line=$(printf '%s\n' "$out" | grep -E '^[A-Za-z0-9_./-]+: [0-9]+ passed, [0-9]+ failed' | tail -n 1)
  p=$(printf '%s' "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed.*/\1/')
  f=$(printf '%s' "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed.*/\2/')
  if [ -z "$line" ]; then p=0; f=1; fi
  if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" "BEGIN{print b-a}")
  printf '%-40s %4d passed, %d failed  (%.1fs)\n' "$(basename "$t")" "$p" "$f" "$secs"
  if [ "$f" != 0 ] || [ "$rc" != 0 ]; then
    echo "---- $t (exit $rc):"
    printf '%s\n' "$out" | grep -E 'FAIL' | head -n 20
    tail -n 40 "$log.err"; echo "----"
  fi
  passed=$((passed + p)); failed=$((failed + f))
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
