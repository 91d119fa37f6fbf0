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

# ---- bin/s2hc loads the backend (build/cuda/libs2hc_cuda.so, with cuBLAS) only when a
# command asks for a GPU, and only where the CUDA driver is (kernels/cuda/cuda_dl.c)
# (not in a build without the backend: the sanitizer build's s2hc)
SO=build/cuda/libs2hc_cuda.so
# gpus PATTERN WHAT [VAR=VALUE...] PROGRAM: `PROGRAM version -v` with those variables set
# (its output in $TMP/out) has the GPUs line "0: PATTERN"
gpus() {
  local pat=$1 what=$2; shift 2
  env "$@" version -v >"$TMP/out" 2>&1
  grep -q "GPUs *0: $pat" "$TMP/out" && ok "$what" || fail "$what: $(grep GPUs "$TMP/out")"
}
if [ -e "$SO" ] && ! "$S2HC" version -v | grep -q 'this build has no CUDA backend'; then
  ldd "$S2HC" | grep -Eq 'libcublas|libcudart' && fail "bin/s2hc links cuBLAS or the CUDA runtime itself" ||
    ok "bin/s2hc links no CUDA library"
  ldd "$SO" | grep -q 'libcublas\.' && ok "the backend library carries cuBLAS" || fail "libs2hc_cuda.so does not link cuBLAS"
  if ! ldconfig -p | grep -q 'libcuda\.so\.1'; then
    gpus 'no GPU (no CUDA driver: libcuda.so.1 is not installed)' "without a driver: no GPU, and why" LD_DEBUG=files "$S2HC"
    grep -q 'libcublas\|libs2hc_cuda' "$TMP/out" && fail "a command without a driver loaded the CUDA libraries" ||
      ok "a command without a driver loads no CUDA library"
  fi
  # the toolkit's stub driver: every call fails "CUDA driver is a stub library", which only
  # the CUDA runtime inside the backend library can say
  # (in the toolkit's library folder that mk/cuda.mk found above, nvcc may be a wrapper)
  stub=$(ls "$libdir"/stubs/libcuda.so 2>/dev/null | head -n 1)
  if [ -n "$stub" ]; then
    mkdir -p "$TMP/drv" "$TMP/moved"
    ln -sf "$stub" "$TMP/drv/libcuda.so.1"
    gpus 'no GPU (CUDA driver is a stub library)' "with a driver the library is loaded and asked" \
      LD_DEBUG=files LD_LIBRARY_PATH="$TMP/drv" "$S2HC"
    grep -q 'libcublas' "$TMP/out" && ok "cuBLAS loaded then" || fail "cuBLAS not loaded with the stub driver"
    cp "$S2HC" "$TMP/moved/s2hc"
    gpus 'no GPU (CUDA driver is a stub library)' "a copy of s2hc elsewhere finds the build's library" \
      LD_LIBRARY_PATH="$TMP/drv" "$TMP/moved/s2hc"
    cp "$SO" "$TMP/moved/libs2hc_cuda.so"
    gpus 'no GPU (CUDA driver is a stub' "S2HC_CUDA_LIB names the library" \
      S2HC_CUDA_LIB="$TMP/moved/libs2hc_cuda.so" LD_DEBUG=files LD_LIBRARY_PATH="$TMP/drv" "$S2HC"
    grep -q "file=$TMP/moved/libs2hc_cuda.so" "$TMP/out" || fail "S2HC_CUDA_LIB: $TMP/moved/libs2hc_cuda.so not loaded"
    gpus "S2HC_CUDA_LIB is $TMP/none.so, which does not exist" "an S2HC_CUDA_LIB that does not exist is named" \
      S2HC_CUDA_LIB="$TMP/none.so" LD_LIBRARY_PATH="$TMP/drv" "$S2HC"
    gpus "the CUDA backend lacks cuda_" "a library that is not the backend is refused" \
      S2HC_CUDA_LIB="$(ldd "$S2HC" | awk '/libyaml/ {print $3}')" LD_LIBRARY_PATH="$TMP/drv" "$S2HC"
    # a library with every function, but from other sources: its layout key differs
    { nm -D --defined-only "$SO" | awk '$3 ~ /^cuda_/ && $3 != "cuda_backend_abi" {print "void " $3 "(void) {}"}'
      echo 'unsigned long long cuda_backend_abi(void) { return 42; }'; } > "$TMP/other.c"
    if cc -shared -fPIC -o "$TMP/other.so" "$TMP/other.c" 2>"$TMP/out"; then
      gpus "the CUDA backend was built from other sources than this program" \
        "a backend built from other sources is refused" S2HC_CUDA_LIB="$TMP/other.so" "$S2HC"
    else fail "cannot build a stand-in library: $(head -n 3 "$TMP/out")"; fi
    make_synth_data "$TMP/data"
    printf 'model: {n_layer: 1, n_head: 2, n_embd: 16, block_size: 8}\ndata: {dir: %s, train: synth, ood: []}\nrun: {backend: cuda, out: %s}\n' \
      "$TMP/data" "$TMP/runs" > "$TMP/cu.yaml"
    expect_status 2 "train with run.backend cuda and the stub driver exits 2" -- \
      env LD_LIBRARY_PATH="$TMP/drv" "$S2HC" train "$TMP/cu.yaml" --quiet
    expect_out "key 'run.backend' is cuda, but no GPU \(CUDA driver is a stub library\)" "and says why"
  else
    echo "cuda_build: no stub driver (stubs/libcuda.so) in '$libdir': the loading itself is not checked" >&2
  fi
fi
finish cuda_build
