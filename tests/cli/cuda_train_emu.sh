#!/usr/bin/env bash
# `s2hc train` on the cuda backend, end to end, with the CUDA kernels on the CPU emulator
# (bin/s2hc with S2HC_CUDA_LIB naming build/cuda/emu/libs2hc_cuda_emu.so, tests/gpu/emu's
# build of kernels/cuda, which it loads as it loads the real one on a GPU machine):
# the run file says cuda; its losses are the cpu backend's to float rounding; a run
# stopped and resumed ends with the uninterrupted one's bits; evals and probes read the
# device's weights; and 2 processes (mpirun), each its part on its GPU, train the model
# one process does. Slow by nature (an emulator): one tiny model, 6 steps.
# Without the emulated library, or with an s2hc built without the CUDA backend (no nvcc;
# the sanitizer build), there is nothing to run.
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh
EMU_SO=$PWD/build/cuda/emu/libs2hc_cuda_emu.so
if [ ! -e "$EMU_SO" ] || "$S2HC" version -v | grep -q 'this build has no CUDA backend'; then
  echo "cuda_train_emu: no $EMU_SO, or $S2HC has no CUDA backend (it needs nvcc's build; not the sanitizer build)"
  finish cuda_train_emu; exit
fi
# the library's thread-locals (initial-exec, mk/cuda.mk) need room in the static TLS block
export S2HC_CUDA_LIB=$EMU_SO GLIBC_TUNABLES=glibc.rtld.optional_static_tls=4194304
make_synth_data "$TMP/data"
conf() { # conf NAME BACKEND
  cat > "$TMP/$1.yaml" <<YAML
model: {n_layer: 1, n_head: 2, n_embd: 32, block_size: 16}
residual: {method: s2hc, n_streams: 4}
train: {batch: 4, steps: 6, warmup: 1, lr: 0.003, eval_every: 3, eval_batches: 1, ckpt_every: 3, threads: 1}
data: {dir: $TMP/data, train: synth, ood: []}
run: {name: $1, out: $TMP/runs, backend: $2}
probe: {every: 3, final_samples: 8}
YAML
}
attr() { h5dump -a "/$2" "$TMP/runs/$1/run.h5" 2>/dev/null | grep -Eo '\(0\): .*' | sed -E 's/^\(0\): //; s/"//g'; }
close() { # close RUN_A RUN_B DATASET REL WHAT
  if h5diff -q -p "$4" "$TMP/runs/$1/run.h5" "$TMP/runs/$2/run.h5" "$3" >/dev/null 2>&1; then ok "$5"
  else fail "$5: $(h5diff -p "$4" "$TMP/runs/$1/run.h5" "$TMP/runs/$2/run.h5" "$3" 2>&1 | head -5 | tr '\n' ' ')"; fi
}

conf g cuda; conf c cpu
expect_status 0 "train on the emulated GPU" -- "$S2HC" train "$TMP/g.yaml" --quiet
[ "$(attr g backend)" = cuda ] && ok "the run file says cuda" || fail "backend: $(attr g backend)"
attr g device | grep -q "emulator" && ok "and names the device" || fail "device: $(attr g device)"
expect_status 0 "the same on the cpu backend" -- "$S2HC" train "$TMP/c.yaml" --quiet
close g c /train/loss 1e-5 "cuda's losses = cpu's to 1e-5"
close g c /train/grad_norm 1e-4 "cuda's gradient norms = cpu's to 1e-4"
close g c /eval/val_loss 1e-5 "evals of the device's weights = cpu's to 1e-5"
close g c /probe/stream_rms 1e-5 "probes of the device's weights = cpu's to 1e-5 (stream RMS)"
close g c /final/jacobian_norm 1e-5 "the final probe's Jacobian norms = cpu's to 1e-5"
# H_res probed at step 0 (the same weights on both): to 1e-6. (Later rows drift apart by
# ~5e-5 in the ~1e-4 off-diagonal entries: AdamW's steps of near-zero gradients, whose
# sign is rounding's.)
row0() { h5dump -d /probe/H_res_mean -s 0,0,0,0 -c 1,2,4,4 -m %.9g "$TMP/runs/$1/run.h5" 2>/dev/null |
         grep -Eo '\): -?[0-9][^,]*' | sed 's/^): //'; }
paste <(row0 g) <(row0 c) > "$TMP/h0"
d0=$(awk '{d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; n++} END {printf "%d %.3g", n, m}' "$TMP/h0")
[ "${d0%% *}" = 32 ] && awk -v m="${d0#* }" 'BEGIN {exit !(m <= 1e-6)}' && ok "H_res probed at step 0 = cpu's to 1e-6" \
  || fail "H_res probed at step 0: $d0 (values, largest difference)"
h5dump -d /final/H_res_mean "$TMP/runs/g/run.h5" >/dev/null 2>&1 && ok "the final probe ran" || fail "no /final"

# a vocabulary that is not a multiple of 8 on the GPU: a warning with the padded size
"$S2HC" train "$TMP/g.yaml" --set train.steps=1 --set model.vocab=300 --set run.name=v300 > "$TMP/out" 2>&1
expect_out "warning: model.vocab 300 is not a multiple of 8.*pad it to 320" "an unaligned vocabulary on the GPU is warned of"
# run.backend auto: the GPU when there is one, and says so; the cpu when the emulator plays
# a machine without a driver (S2HC_EMU_NO_GPU), where cuda is a clear error
conf a auto
"$S2HC" train "$TMP/a.yaml" --set train.steps=1 > "$TMP/out" 2>&1 && grep -q "^backend: cuda on CPU emulator" "$TMP/out" \
  && [ "$(attr a backend)" = cuda ] && ok "auto picks the GPU and says so" || fail "auto: $(grep backend "$TMP/out")"
rm -rf "$TMP/runs/a"
S2HC_EMU_NO_GPU=1 "$S2HC" train "$TMP/a.yaml" --set train.steps=1 > "$TMP/out" 2>&1 \
  && grep -q "^backend: cpu (auto: no GPU" "$TMP/out" && [ "$(attr a backend)" = cpu ] \
  && ok "without a driver auto picks the cpu and says why" || fail "auto, no GPU: $(grep backend "$TMP/out")"
expect_status 2 "run.backend cuda without a driver" -- env S2HC_EMU_NO_GPU=1 "$S2HC" train "$TMP/g.yaml" --set run.name=nog
expect_out "key 'run.backend' is cuda, but no GPU" "says there is no GPU"

# mixed precision (bf16 products, fp32 master weights): the cpu's fp32 losses to 2e-2;
# bf16 streams: the cpu's bf16 streams (the same rounding of the same values) to 1e-4
conf b cuda; sed -i 's/backend: cuda}/backend: cuda, precision: bf16}/' "$TMP/b.yaml"
expect_status 0 "train in bf16 on the emulated GPU" -- "$S2HC" train "$TMP/b.yaml" --quiet
[ "$(attr b precision)" = bf16 ] && ok "the run file says bf16" || fail "precision: $(attr b precision)"
close b c /train/loss 2e-2 "bf16's losses = cpu's fp32 ones to 2e-2"
conf gs cuda; conf cs cpu
sed -i 's/n_streams: 4}/n_streams: 4, stream_precision: bf16}/' "$TMP/gs.yaml" "$TMP/cs.yaml"
expect_status 0 "bf16 streams on the emulated GPU" -- "$S2HC" train "$TMP/gs.yaml" --quiet
expect_status 0 "bf16 streams on the cpu" -- "$S2HC" train "$TMP/cs.yaml" --quiet
[ "$(attr gs stream_precision)" = bf16 ] && ok "the run file says bf16 streams" || fail "$(attr gs stream_precision)"
close gs cs /train/loss 1e-4 "bf16 streams: cuda's losses = cpu's to 1e-4"
h5diff -q "$TMP/runs/gs/run.h5" "$TMP/runs/g/run.h5" /train/loss >/dev/null 2>&1 \
  && fail "bf16 streams left the losses' bits as fp32's: the option did nothing" || ok "bf16 streams change the losses"

# nanoGPT's base model (no biases, the exact GELU) on both backends; the run file keeps it
conf gn cuda; conf cn cpu
sed -i 's/block_size: 16}/block_size: 16, bias: false, gelu: erf}/' "$TMP/gn.yaml" "$TMP/cn.yaml"
expect_status 0 "nanoGPT's base model on the emulated GPU" -- "$S2HC" train "$TMP/gn.yaml" --quiet
expect_status 0 "and on the cpu" -- "$S2HC" train "$TMP/cn.yaml" --quiet
close gn cn /train/loss 1e-5 "no biases, erf GELU: cuda's losses = cpu's to 1e-5"
h5dump -d /model/transformer.h.0.mlp.c_fc.bias "$TMP/runs/gn/ckpt.h5" >/dev/null 2>&1 \
  && fail "model.bias false: the checkpoint has biases" || ok "model.bias false: the checkpoint has no biases"
h5diff -q "$TMP/runs/gn/run.h5" "$TMP/runs/g/run.h5" /train/loss >/dev/null 2>&1 \
  && fail "no biases and erf left the losses' bits as the default model's" || ok "and its losses are another model's"

# stopped at step 3 (a signal's path: the step ends, the device state is saved), resumed
conf r cuda
"$S2HC" train "$TMP/r.yaml" --quiet --stop-after 3 2>/dev/null; st=$?
[ "$st" = 130 ] && ok "--stop-after 3: exit 130" || fail "--stop-after: exit $st"
expect_status 0 "--resume on the emulated GPU" -- "$S2HC" train "$TMP/r.yaml" --resume --quiet
for d in /train/loss /train/grad_norm; do
  h5diff -q "$TMP/runs/g/run.h5" "$TMP/runs/r/run.h5" $d >/dev/null 2>&1 && ok "resumed = uninterrupted: $d" \
    || fail "resumed differs from uninterrupted in $d"
done
for g in /model /optim; do
  h5diff -q "$TMP/runs/g/ckpt.h5" "$TMP/runs/r/ckpt.h5" $g >/dev/null 2>&1 \
    && ok "resumed = uninterrupted: the checkpoint's $g" || fail "resumed and uninterrupted differ in $g"
done
# the stop came at an evaluation's step: that evaluation is run by the resume, of the
# same weights. And a stop at an evaluation's step that is no checkpoint's (ckpt_every 5):
# the device's AdamW moments come down for the checkpoint the stop saves
for d in /eval/step /eval/val_loss; do
  h5diff -q "$TMP/runs/g/run.h5" "$TMP/runs/r/run.h5" $d >/dev/null 2>&1 && ok "resumed = uninterrupted: $d" \
    || fail "resumed differs from uninterrupted in $d"
done
conf r5 cuda
"$S2HC" train "$TMP/r5.yaml" --set train.ckpt_every=5 --quiet --stop-after 3 2>/dev/null
expect_status 0 "--resume of a stop at an evaluation between checkpoints" -- "$S2HC" train "$TMP/r5.yaml" \
  --set train.ckpt_every=5 --resume --quiet
for g in /model /optim; do
  h5diff -q "$TMP/runs/g/ckpt.h5" "$TMP/runs/r5/ckpt.h5" $g >/dev/null 2>&1 \
    && ok "stopped between checkpoints, resumed = uninterrupted: $g" || fail "stopped between checkpoints: $g differs"
done
# resumed on the other backend (auto: stopped on the emulated GPU, resumed where the
# emulator plays a machine without a driver): the same model, not the same bits, said
conf ra auto
"$S2HC" train "$TMP/ra.yaml" --quiet --stop-after 3 2>/dev/null
S2HC_EMU_NO_GPU=1 "$S2HC" train "$TMP/ra.yaml" --resume --quiet > "$TMP/out" 2>&1; st=$?
[ "$st" = 0 ] && [ "$(attr ra backend)" = cpu ] && ok "a cuda run resumed on the cpu" || fail "cuda -> cpu resume: exit $st"
expect_out "warning: the run trained on the cuda backend and resumes on the cpu: .*not bit for bit" \
  "a cuda run resumed on the cpu is warned of"
# the other way (stopped where the emulator plays no driver, resumed on the emulated GPU)
conf rc auto
S2HC_EMU_NO_GPU=1 "$S2HC" train "$TMP/rc.yaml" --quiet --stop-after 3 2>/dev/null
expect_status 0 "a cpu run resumed on the cuda backend" -- "$S2HC" train "$TMP/rc.yaml" --resume --quiet
[ "$(attr rc backend)" = cuda ] && ok "it resumed on the cuda backend" || fail "cpu -> cuda resume: $(attr rc backend)"
expect_out "warning: the run trained on the cpu backend and resumes on the cuda: .*not bit for bit" \
  "a cpu run resumed on the cuda backend is warned of"
# and a cuda run stopped and resumed on the cuda backend, one process both times: nothing said
conf rs cuda
"$S2HC" train "$TMP/rs.yaml" --quiet --stop-after 3 2>/dev/null
expect_status 0 "a cuda run resumed on the cuda backend" -- "$S2HC" train "$TMP/rs.yaml" --resume --quiet
grep -q "warning: the run trained" "$TMP/out" && fail "a cuda run resumed on the cuda backend was warned of: $(cat "$TMP/out")" \
  || ok "resumed on the same backend and process count: no warning"

# two processes, one emulated GPU each
if command -v mpirun >/dev/null 2>&1 && "$S2HC" version -v | grep -q "processes *across processes"; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
  conf m cuda
  expect_status 0 "2 processes on the cuda backend" -- timeout 300 mpirun --oversubscribe --bind-to none \
    -x OMP_NUM_THREADS=1 -x S2HC_CUDA_LIB -x GLIBC_TUNABLES -np 2 "$S2HC" train "$TMP/m.yaml" --quiet
  [ "$(attr m processes)" = 2 ] && [ "$(attr m backend)" = cuda ] && ok "the run file says 2 processes, cuda" \
    || fail "processes $(attr m processes), backend $(attr m backend)"
  close g m /train/loss 1e-5 "2 processes' losses = 1 process's to 1e-5"
  close g m /train/grad_norm 1e-4 "2 processes' gradient norms = 1 process's to 1e-4"
  # a one-process cuda run resumed by 2: each rank's part on its GPU, sums in another order
  conf mr cuda
  "$S2HC" train "$TMP/mr.yaml" --quiet --stop-after 3 2>/dev/null
  timeout 300 mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x S2HC_CUDA_LIB -x GLIBC_TUNABLES -np 2 \
    "$S2HC" train "$TMP/mr.yaml" --resume --quiet > "$TMP/out" 2>&1
  expect_out "warning: the run trained on the cuda backend with 1 process and resumes with 2: .*not bit for bit" \
    "a one-process cuda run resumed by 2 processes is warned of"
else
  fail "mpirun or the build's MPI missing: make deps installs OpenMPI"
fi
finish cuda_train_emu
