#!/usr/bin/env bash
# tests/gpu/check.sh: build the CUDA backend and its check program, then, on a GPU,
# compare every device op, every method's per-token math, a small model's gradients and
# ten training steps with the CPU reference, and time the M preset (docs/cuda.md).
#
#   tests/gpu/check.sh                  everything (a few minutes on an H200)
#   tests/gpu/check.sh --no-bench       the comparisons only
#   tests/gpu/check.sh --verbose        one line per compared tensor
#   tests/gpu/check.sh --only PART      one part (ops, hc, model, train, bench); without
#                                       it each part runs in a process of its own
#
# Without a GPU: builds, prints "no GPU: compiled only", exits 0. Exit status 1 on any
# failed comparison or build error, or when nvidia-smi lists a GPU that CUDA cannot use.
#
# On a GPU machine that lacks this project's CPU build dependencies (OpenBLAS and libyaml
# headers), build here first (`make -f mk/cuda.mk cuda-build`) and carry build/cuda/gpu_check,
# build/cuda/cuda_probe and build/cuda/lib there: when the build fails but those binaries
# are present, the script runs them (S2HC_GPU_PREBUILT=1 skips the build outright).
# build/cuda/lib/sources.sha256 (written by the build) names the sources gpu_check was
# built from: binaries built from other sources than the tree's still run, but the check
# then FAILS, naming the files that differ (rebuild here and carry them again).
#
#   S2HC_GPU_LOG=FILE           keep the whole output in FILE as well (on the device tool's
#                               machine: S2HC_GPU_LOG=$OUT/gpu_check.log, since a call returns
#                               only the last 12 000 characters of its output)
#   S2HC_GPU_PART_TIMEOUT=SEC   stop a part that runs longer (default 300; 0: no limit), so
#                               that a hung kernel costs one part, not the whole device call
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BIN=build/cuda/gpu_check
PROBE=build/cuda/cuda_probe
JOBS=$(nproc 2>/dev/null || echo 2)

have_nvcc=0
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then have_nvcc=1; fi

if [ "${S2HC_GPU_PREBUILT:-0}" = 1 ]; then
  echo "check.sh: S2HC_GPU_PREBUILT=1: using the carried $BIN"
elif [ "$have_nvcc" = 1 ]; then
  echo "check.sh: building the CUDA backend and the check (make -f mk/cuda.mk cuda-build)"
  if ! make --no-print-directory -j"$JOBS" -f mk/cuda.mk cuda-build; then
    if [ -x "$BIN" ] && [ -x "$PROBE" ]; then
      echo "check.sh: the build failed here (missing CPU build dependencies?); running the carried $BIN"
    else
      echo "check.sh: build failed"
      exit 1
    fi
  fi
else
  echo "check.sh: nvcc not found: CUDA backend skipped"
  if [ ! -x "$BIN" ]; then
    echo "no GPU: compiled only (nothing to compile without nvcc)"
    exit 0
  fi
fi
[ -x "$BIN" ] || { echo "check.sh: $BIN is missing"; exit 1; }

# The binary against the sources beside it (carried binaries go stale when a file is
# edited after the build and the build is not run again).
STAMP=build/cuda/lib/sources.sha256
stale=""
if [ -f "$STAMP" ]; then
  stale=$(sha256sum -c --quiet "$STAMP" 2>&1 | head -n 20)
  if [ -n "$stale" ]; then
    echo "check.sh: WARNING: $BIN was built from other sources than these (rebuild and carry it again):"
    echo "$stale" | sed 's/^/  /'
  fi
else
  echo "check.sh: note: no $STAMP: cannot tell whether $BIN was built from these sources"
fi

# A part that hangs (a kernel that never ends) is stopped after PART_LIMIT seconds.
PART_LIMIT=${S2HC_GPU_PART_TIMEOUT:-300}
limited() {
  if [ "$PART_LIMIT" != 0 ] && command -v timeout >/dev/null 2>&1; then
    timeout -k 15 "$PART_LIMIT" "$@"
  else
    "$@"
  fi
}

# Shared libraries the binary cannot find (a GPU image with cuBLAS elsewhere): look for them.
missing=$(ldd "$BIN" "$PROBE" 2>/dev/null | awk '/not found/ {print $1}' | sort -u)
for lib in $missing; do
  p=$(find /usr/local /usr/lib /usr/lib64 /opt -name "$lib" 2>/dev/null | head -n 1)
  if [ -n "$p" ]; then
    export LD_LIBRARY_PATH="$(dirname "$p")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "check.sh: $lib from $(dirname "$p")"
  else
    echo "check.sh: $lib not found on this machine"
  fi
done

# OpenBLAS (the CPU reference) must pick its AVX-512 kernels before it loads (docs/performance.md).
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -q avx512f /proc/cpuinfo 2>/dev/null; then
  export OPENBLAS_CORETYPE=SkylakeX
fi

# A GPU the driver lists but CUDA cannot use (a driver older than the runtime, say) must
# fail, not pass as "no GPU: compiled only".
gpus_listed=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ -n "${S2HC_GPU_LOG:-}" ]; then
  log=$S2HC_GPU_LOG
  : > "$log" || exit 1
else
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
fi
[ -z "$stale" ] || { echo "check.sh: stale binary:"; echo "$stale"; } >> "$log"
if [ -x "$PROBE" ]; then limited "$PROBE" 2>&1 | tee -a "$log"; [ "${PIPESTATUS[0]}" = 0 ] || exit 1; fi

# Each part in a process of its own, unless the caller chose one: a CUDA error ends its
# process (exit 1), and the parts after it still run and report.
parts="ops hc model train bench"
for a in "$@"; do [ "$a" = --only ] && parts=""; done
rc=0
if [ -z "$parts" ]; then
  limited "$BIN" "$@" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  case $rc in 124|137) echo "check.sh: TIMED OUT after $PART_LIMIT s (S2HC_GPU_PART_TIMEOUT)" | tee -a "$log";; esac
else
  for p in $parts; do
    limited "$BIN" "$@" --only "$p" 2>&1 | tee -a "$log"
    r=${PIPESTATUS[0]}
    case $r in
      0) ;;
      124|137) echo "check.sh: part $p TIMED OUT after $PART_LIMIT s (S2HC_GPU_PART_TIMEOUT)" | tee -a "$log"; rc=1;;
      *) echo "check.sh: part $p FAILED (exit $r)" | tee -a "$log"; rc=1;;
    esac
    grep -q "no GPU: compiled only" "$log" && break
  done
fi
if [ "${gpus_listed:-0}" -gt 0 ] && grep -q "no GPU" "$log"; then
  echo "check.sh: nvidia-smi lists $gpus_listed GPU(s), but CUDA could not use them: FAILED"
  exit 1
fi
if [ -n "$stale" ]; then
  echo "check.sh: $BIN was built from other sources than these (above): FAILED" | tee -a "$log"
  rc=1
fi
if [ "$rc" = 0 ]; then echo "check.sh: ok" | tee -a "$log"; else echo "check.sh: FAILED (exit $rc)" | tee -a "$log"; fi
exit "$rc"
