#!/usr/bin/env bash
# mk/cuda.mk finds the toolkit's root and libraries through nvcc itself, also when the
# nvcc on PATH is a wrapper script elsewhere (as on some machines: /usr/local/bin/nvcc
# exec'ing the toolkit's), and skips the CUDA link with a message when cuBLAS is missing.
# Nothing to check without nvcc.
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh
real=$(command -v nvcc || true)
if [ -z "$real" ]; then
  echo "cuda_build: nvcc not found, nothing to check" >&2
  finish cuda_build
  exit
fi
mkdir -p "$TMP/bin"
printf '#!/bin/sh\nexec %s "$@"\n' "$real" > "$TMP/bin/nvcc"
chmod +x "$TMP/bin/nvcc"
printf 'include mk/cuda.mk\nshow:\n\t@echo "NVCC=$(NVCC) LIBDIR=$(CUDA_LIBDIR)"\n' > "$TMP/show.mk"

expect_status 0 "mk/cuda.mk with a wrapper nvcc first on PATH" -- \
  env -u CUDA_HOME -u NVCC PATH="$TMP/bin:$PATH" make -s -f "$TMP/show.mk" show
expect_out "NVCC=$TMP/bin/nvcc " "the wrapper is the nvcc used"
libdir=$(sed -n 's/.*LIBDIR=//p' "$TMP/out")
if [ -n "$libdir" ] && [ -e "$libdir/libcublas.so" ]; then ok "libraries found ($libdir)"; else fail "no libcublas.so in '$libdir'"; fi

expect_status 0 "mk/cuda.mk with a CUDA_HOME that lacks cuBLAS" -- \
  env -u NVCC make -s -f "$TMP/show.mk" show CUDA_HOME="$TMP"
expect_out "CUDA backend skipped: .*no libcublas.so under $TMP" "it says why it skips the CUDA backend"
expect_out "^NVCC= " "and links no CUDA"
finish cuda_build
