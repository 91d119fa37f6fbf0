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
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if [ -x "$PROBE" ]; then "$PROBE" 2>&1 | tee "$log"; [ "${PIPESTATUS[0]}" = 0 ] || exit 1; fi

# Each part in a process of its own, unless the caller chose one: a CUDA error ends its
# process (exit 1), and the parts after it still run and report.
parts="ops hc model train bench"
for a in "$@"; do [ "$a" = --only ] && parts=""; done
rc=0
if [ -z "$parts" ]; then
  "$BIN" "$@" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
else
  for p in $parts; do
    "$BIN" "$@" --only "$p" 2>&1 | tee -a "$log"
    r=${PIPESTATUS[0]}
    [ "$r" = 0 ] || { echo "check.sh: part $p FAILED (exit $r)"; rc=1; }
    grep -q "no GPU: compiled only" "$log" && break
  done
fi
if [ "${gpus_listed:-0}" -gt 0 ] && grep -q "no GPU" "$log"; then
  echo "check.sh: nvidia-smi lists $gpus_listed GPU(s), but CUDA could not use them: FAILED"
  exit 1
fi
if [ "$rc" = 0 ]; then echo "check.sh: ok"; else echo "check.sh: FAILED (exit $rc)"; fi
exit "$rc"
