#!/usr/bin/env bash
# The CUDA emulator (tests/gpu/emu) finds missing barriers: its self-test kernels that
# order every exchange give the right values in each of its orders, each racy one gives
# wrong values in the orders that can show its race, and a kernel that breaks a rule of
# the warp barriers (a shuffle naming a returned lane, lanes split between __syncwarp and
# __syncthreads, lanes with different masks) stops with an error that says which; and a
# launch past its dynamic shared-memory limit is refused as on the GPU, and a product with
# a leading dimension below cuBLAS's minimum is refused as cuBLAS refuses it.
# Needs a C++ compiler and python3 (cu2cpp.py), no nvcc and no GPU.
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh
if ! command -v "${CXX:-g++}" >/dev/null 2>&1 || ! command -v python3 >/dev/null 2>&1; then
  echo "emu_check: no C++ compiler or python3, nothing to check" >&2
  finish emu_check
  exit
fi
bin=build/cuda/emu/emu_selftest
rm -f "$bin"  # a failed build must not leave an old one to run
expect_status 0 "the emulator's self-test builds" -- make -s -f mk/cuda.mk "$bin"
[ -x "$bin" ] || { finish emu_check; exit; }

# order -> the racy kernels that must come out wrong in it (the others must be right)
check_order() {
  local order=$1 wrong=" $2 "
  expect_status 0 "self-test in order $order" -- env S2HC_EMU_ORDER="$order" "$bin"
  cp "$TMP/out" "$TMP/out.$order"
  for k in warp_swap_ok warp_swap_racy block_swap_ok block_swap_warp_only static_swap_ok \
           static_swap_warp_only reuse_ok reuse_racy stage_ok stage_racy shuffle_sum_ok smem_limit cublas_args; do
    local want=right
    case "$wrong" in *" $k "*) want=wrong ;; esac
    if grep -qx "$k $want" "$TMP/out.$order"; then ok "$order: $k $want"
    else fail "$order: $k should be $want: $(grep "^$k " "$TMP/out.$order")"; fi
  done
}
check_order asc "warp_swap_racy block_swap_warp_only static_swap_warp_only reuse_racy"
check_order desc "warp_swap_racy block_swap_warp_only static_swap_warp_only reuse_racy"
check_order random:3 "warp_swap_racy block_swap_warp_only static_swap_warp_only reuse_racy stage_racy"

expect_status 2 "a bad order is refused" -- env S2HC_EMU_ORDER=sideways "$bin"
expect_out "S2HC_EMU_ORDER is 'sideways'; expected asc, desc, random or random:SEED" "and named"

bad() {
  local mode=$1 order=$2 msg=$3
  local rc  # the subshell waits on the emulator, so the shell's "Aborted" goes to /dev/null
  rc=$( (ulimit -c 0; env S2HC_EMU_ORDER="$order" "$bin" --bad "$mode" >"$TMP/out" 2>&1; echo $?) 2>/dev/null)
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 2 ]; then ok "--bad $mode ($order) stops (exit $rc)"
  else fail "--bad $mode ($order) ran on (exit $rc)"; fi
  expect_out "emu: kernel bad_[a-z_]+, block \(0 0 0\), thread \([0-9]+ 0 0\): $msg" "--bad $mode ($order) says why"
}
bad returned-lane asc "a __syncwarp / shuffle names a lane that has returned"
bad returned-lane desc "a __syncwarp / shuffle names a lane that has returned"
bad divergent asc "waits at a __syncwarp / shuffle that its warp's other lanes never reach"
bad divergent random "waits at a __syncwarp / shuffle that its warp's other lanes never reach"
bad mask desc "lanes of one warp wait at __syncwarp / shuffles with different masks"
finish emu_check
