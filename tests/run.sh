#!/usr/bin/env bash
# Run every test binary and shell test; end with the plain "N passed, N failed" line.
#   tests/run.sh [NAME...]   only the tests of these names (test_config, dbl_model,
#                            train_cli.sh, ...), in the order given
# S2HC_EXEC: a command that runs the build's programs, for a build for another CPU under
# an emulator (S2HC_EXEC=qemu-aarch64 with QEMU_LD_PREFIX naming its libraries; README,
# "Other CPUs"): the test binaries run through it, and the shell tests' S2HC_BIN is a
# script that runs s2hc so.
set -u
cd "$(dirname "$0")/.."
export BUILD=${BUILD:-build}
export S2HC_BIN=${S2HC_BIN:-$PWD/bin/s2hc}
export S2HC_TEST_TMP=$(mktemp -d /tmp/s2hc-test.XXXXXX)
trap 'rm -rf "$S2HC_TEST_TMP"' EXIT
exec_prefix=()
if [ -n "${S2HC_EXEC:-}" ]; then
  read -r -a exec_prefix <<<"$S2HC_EXEC"
  printf '#!/bin/sh\nexec %s %q "$@"\n' "$S2HC_EXEC" "$S2HC_BIN" >"$S2HC_TEST_TMP/s2hc"
  chmod +x "$S2HC_TEST_TMP/s2hc"
  export S2HC_BIN=$S2HC_TEST_TMP/s2hc
fi
# OpenBLAS must pick its AVX-512 kernels before it loads (see docs/performance.md): on an
# x86-64 CPU with AVX-512 (not for another CPU's build run by an emulator here).
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -z "${S2HC_EXEC:-}" ] && grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
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
all=("$BUILD"/tests/test_* "$BUILD"/tests/dbl_* tests/cli/*.sh)
tests=()
if [ $# = 0 ]; then tests=("${all[@]}"); fi
for name in "$@"; do
  found=
  for t in "${all[@]}"; do [ "$(basename "$t")" = "$name" ] && tests+=("$t") && found=1; done
  [ -n "$found" ] || { echo "run.sh: no test $name" >&2; exit 2; }
done
for t in "${tests[@]}"; do
  [ -e "$t" ] || continue
  case "$t" in *.d|*.o|*.gcno|*.gcda|*/lib.sh) continue;; esac  # .gcno, .gcda: the coverage build's counters
  start=$(date +%s.%N)
  log="$S2HC_TEST_TMP/$(basename "$t").log"
  case "$t" in
    *.sh) out=$("$t" 2>"$log.err"); rc=$? ;;
    *) out=$(${exec_prefix[@]+"${exec_prefix[@]}"} "$t" 2>"$log.err"); rc=$? ;;
  esac
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
