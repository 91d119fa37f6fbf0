#!/usr/bin/env bash
# `s2hc train` across processes (mpirun, harness/dist.h): W ranks of one thread give the
# bits of one process with W threads (weights, moments, losses, gradient norms), resume
# exactly, also from another number of processes, and stop together on every error.
# A build without MPI (the sanitizer build) must refuse a launch of several processes.
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh
make_synth_data "$TMP/data"
conf() { # conf NAME METHOD ACCUM [EXTRA YAML LINE]
  cat > "$TMP/$1.yaml" <<YAML
model: {n_layer: 2, n_head: 2, n_embd: 32, block_size: 32}
residual: {method: $2, n_streams: $([ $2 = rc ] && echo 1 || echo 4)}
train: {batch: 8, steps: 12, warmup: 2, lr: 0.003, grad_accum: $3, eval_every: 5, eval_batches: 1, ckpt_every: 4}
data: {dir: $TMP/data, train: synth, ood: []}
run: {name: $1, out: $TMP/runs}
probe: {every: 0, final_samples: 0}
$4
YAML
}
# OpenMPI in a container as root: allowed by these; the ranks on any core, no
# cross-memory attach (which containers often forbid)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN=(timeout 120 mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
one() { OMP_NUM_THREADS=$1 timeout 120 "$S2HC" train "${@:2}" --quiet; }   # one NTHREADS CONFIG [ARGS]
ranks() { "${MPIRUN[@]}" -np "$1" "$S2HC" train "${@:2}" --quiet; }         # ranks W CONFIG [ARGS]
# the same weights, moments, step and RNG states (every dataset and attribute of the two
# checkpoints) and the same training series, bit for bit; the evals (rank 0 alone against
# 2 threads) to float rounding
same_run() { # same_run DIR_A DIR_B WHAT
  local a=$TMP/runs/$1 b=$TMP/runs/$2 bad=""
  h5diff -q "$a/ckpt.h5" "$b/ckpt.h5" >/dev/null 2>&1 || bad="ckpt.h5"
  for d in /train/step /train/loss /train/grad_norm /train/lr; do
    h5diff -q "$a/run.h5" "$b/run.h5" "$d" >/dev/null 2>&1 || bad="$bad run.h5:$d"
  done
  h5diff -q -p 1e-5 "$a/run.h5" "$b/run.h5" /eval/val_loss >/dev/null 2>&1 || bad="$bad run.h5:/eval/val_loss"
  [ -z "$bad" ] && ok "$3" || fail "$3: differ in $bad"
}
keep() { rm -rf "$TMP/runs/$2"; mv "$TMP/runs/$1" "$TMP/runs/$2"; } # keep RUN AS

if ! command -v mpirun >/dev/null 2>&1; then
  fail "mpirun not found: make deps installs openmpi-bin"; finish dist_cli; exit
fi
# an srun step of several tasks is a launch (without --mpi each would be a world of one);
# a batch script's environment is not
conf sr s2hc 1
expect_status 2 "srun's 2 tasks, another command" -- env SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=2 "$S2HC" eval "$TMP/runs/x"
expect_out "eval: launched as 2 processes" "says it was launched as 2"
expect_status 0 "a batch script's environment is one process" -- env SLURM_STEP_ID=4294967294 SLURM_STEP_NUM_TASKS=2 \
  "$S2HC" params --n 2
expect_status 2 "srun's 2 tasks that MPI does not join" -- env SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=2 timeout 60 \
  "$S2HC" train "$TMP/sr.yaml" --quiet
expect_out "MPI joined 1 of them|this build has no MPI" "says why"
[ ! -e "$TMP/runs/sr" ] && ok "and writes nothing" || fail "a run directory was written"

if ! "$S2HC" version -v | grep -q "processes *across processes"; then
  # this build has no MPI: a launch of several processes is refused, not run twice
  conf solo s2hc 1
  expect_status 2 "a build without MPI refuses 2 processes" -- "${MPIRUN[@]}" -np 2 "$S2HC" train "$TMP/solo.yaml" --quiet
  expect_out "this build has no MPI" "says the build has no MPI"
  [ ! -e "$TMP/runs/solo" ] && ok "and writes nothing" || fail "a run directory was written"
  finish dist_cli; exit
fi

# W ranks of one thread against one process of W threads, the same config
for m in s2hc mhc rc; do
  conf $m $m 1
  one 2 "$TMP/$m.yaml"; keep $m $m.one
  ranks 2 "$TMP/$m.yaml"
  same_run $m.one $m "$m: 2 ranks = 1 process of 2 threads"
done
# a fresh run from a file's tensors (train.init_from: rc's export under s2hc): rank 0 reads
# the file and every rank starts from its weights
"$S2HC" export "$TMP/runs/rc.one" -o "$TMP/rc.safetensors" >/dev/null
conf ui s2hc 1
one 2 "$TMP/ui.yaml" --set train.init_from="$TMP/rc.safetensors"; keep ui ui.one
ranks 2 "$TMP/ui.yaml" --set train.init_from="$TMP/rc.safetensors"
same_run ui.one ui "init_from: 2 ranks = 1 process of 2 threads"
# unequal parts (8 sequences in 3: 2, 3, 3), two micro-batches a step
conf a3 s2hc 2
one 3 "$TMP/a3.yaml"; keep a3 a3.one
ranks 3 "$TMP/a3.yaml"
same_run a3.one a3 "s2hc, grad_accum 2: 3 ranks (parts of 2, 3, 3) = 1 process of 3 threads"
# the same with the sums and broadcasts in pieces of 1000 (the parameters in ~70, unequal shares)
keep a3 a3.ranks
S2HC_DIST_PIECE=1000 "${MPIRUN[@]}" -x S2HC_DIST_PIECE -np 3 "$S2HC" train "$TMP/a3.yaml" --quiet
same_run a3.one a3 "3 ranks, buffers moved in pieces of 1000 = 1 process of 3 threads"
[ "$(h5dump -a /processes "$TMP/runs/a3/run.h5" | grep -Eo '\(0\): [0-9]+' | grep -Eo '[0-9]+$')" = 3 ] \
  && ok "the run file says 3 processes" || fail "attribute processes: $(h5dump -a /processes "$TMP/runs/a3/run.h5")"
# and one thread differs from it (the comparison can fail): the slices' sums are in order
rm -rf "$TMP/runs/a3"; one 1 "$TMP/a3.yaml"
h5diff -q "$TMP/runs/a3/ckpt.h5" "$TMP/runs/a3.one/ckpt.h5" >/dev/null 2>&1 \
  && fail "1 and 3 slices gave the same bits: the comparison cannot see a difference" || ok "1 slice is not 3 slices"

# interrupted and resumed across processes; started by one process, resumed by two
rm -rf "$TMP/runs/s2hc"
ranks 2 "$TMP/s2hc.yaml" --stop-after 6 2>"$TMP/err"; st=$?
[ "$st" = 130 ] && ok "--stop-after under mpirun: exit 130" || fail "--stop-after: exit $st: $(tail -3 "$TMP/err")"
expect_status 0 "--resume under mpirun" -- "${MPIRUN[@]}" -np 2 "$S2HC" train "$TMP/s2hc.yaml" --resume --quiet
same_run s2hc.one s2hc "2 ranks stopped at 6 and resumed = 1 process uninterrupted"
rm -rf "$TMP/runs/s2hc"
one 2 "$TMP/s2hc.yaml" --stop-after 6 2>/dev/null
expect_status 0 "a run of one process resumed by 2 ranks" -- "${MPIRUN[@]}" -np 2 "$S2HC" train "$TMP/s2hc.yaml" --resume --quiet
same_run s2hc.one s2hc "1 process to step 6, then 2 ranks = 1 process uninterrupted"
grep -q "warning: the run trained" "$TMP/out" && fail "1 process of 2 threads resumed by 2 ranks of 1 on the cpu was warned of: \
$(grep warning "$TMP/out")" || ok "1 process of 2 threads resumed by 2 ranks of 1 (the same cut, the cpu): no warning"

# every rank stops on an error, whichever rank meets it (timeout: none may hang)
expect_status 2 "an existing run without --resume" -- "${MPIRUN[@]}" -np 2 "$S2HC" train "$TMP/s2hc.yaml" --quiet
expect_out "already holds a run" "rank 0's refusal stops both"
conf big s2hc 1 "" ; sed -i 's/batch: 8/batch: 2/' "$TMP/big.yaml"
expect_status 2 "fewer sequences than processes" -- "${MPIRUN[@]}" -np 3 "$S2HC" train "$TMP/big.yaml" --quiet
expect_out "key 'train.batch' is 2, fewer sequences than the 3 processes" "names train.batch"
conf cu s2hc 1 "run: {name: cu, out: $TMP/runs, backend: cuda}"; sed -i '/^run: {name: cu, out: [^,]*}$/d' "$TMP/cu.yaml"
if "$S2HC" version -v | grep -Eq "GPUs +0:"; then
  expect_status 2 "run.backend cuda across processes, no GPU here" -- "${MPIRUN[@]}" -np 2 "$S2HC" train "$TMP/cu.yaml" --quiet
  expect_out "key 'run.backend' is cuda, but no (usable )?GPU" "names run.backend and says there is no GPU"
fi
# a bad key: said once, by rank 0, though every rank reads the config
expect_status 2 "a bad key under 2 ranks" -- "${MPIRUN[@]}" -np 2 "$S2HC" train "$TMP/big.yaml" --quiet --set train.lr=fast
[ "$(grep -c "key 'train.lr'" "$TMP/out")" = 1 ] && ok "the bad key is said once" || fail "said $(grep -c "key 'train.lr'" "$TMP/out") times: $(cat "$TMP/out")"
# SIGTERM to rank 1's process alone stops the run as one to every rank does: saved, exit 130
conf sig s2hc 1
sed -i 's/steps: 12,/steps: 100000,/' "$TMP/sig.yaml"
"${MPIRUN[@]}" -np 2 "$S2HC" train "$TMP/sig.yaml" --quiet >"$TMP/sig.out" 2>&1 & mp=$!
r1=""
for _ in $(seq 600); do
  [ -e "$TMP/runs/sig/ckpt.h5" ] && for p in $(pgrep -f "train $TMP/sig.yaml"); do
    tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && r1=$p
  done
  [ -n "$r1" ] && break; sleep 0.1
done
[ -n "$r1" ] && kill -TERM "$r1"
wait $mp; st=$?
[ -n "$r1" ] && [ "$st" = 130 ] && ok "SIGTERM to rank 1 alone: exit 130" || fail "SIGTERM to rank 1 (pid '$r1'): exit $st: $(tail -3 "$TMP/sig.out")"
grep -q "interrupted" "$TMP/sig.out" && [ "$(grep -c "stopping at the next safe point" "$TMP/sig.out")" = 0 ] \
  && ok "rank 0 says the run was interrupted; rank 1 is silent" || fail "messages: $(cat "$TMP/sig.out")"
h5dump -a /status "$TMP/runs/sig/run.h5" 2>/dev/null | grep -q finished && fail "the stopped run says finished" || ok "not finished"
rm -rf "$TMP/runs/sig"
conf d s2hc 1
expect_status 2 "ranks given different --set" -- timeout 120 mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 \
  -np 1 "$S2HC" train "$TMP/d.yaml" --quiet --set train.lr=0.003 : -np 1 "$S2HC" train "$TMP/d.yaml" --quiet --set train.lr=0.002
expect_out "rank 1 resolved another configuration than rank 0" "names the rank whose configuration differs"
conf nan s2hc 1
S2HC_FAULT_NAN_AT_STEP=3 "${MPIRUN[@]}" -x S2HC_FAULT_NAN_AT_STEP -np 2 "$S2HC" train "$TMP/nan.yaml" --quiet >"$TMP/out" 2>&1; st=$?
[ "$st" = 3 ] && ok "a NaN loss: every rank exits 3" || fail "NaN: exit $st: $(tail -3 "$TMP/out")"
h5dump -a /status "$TMP/runs/nan/run.h5" 2>/dev/null | grep -q diverged && ok "the run file says diverged" \
  || fail "status: $(h5dump -a /status "$TMP/runs/nan/run.h5" 2>&1 | tail -2)"
# weights that drift apart on one rank (the hook flips the lowest bit of rank 1's first weight
# before the check at the first checkpoint): the check sees it, names the rank, both stop
conf drift s2hc 1
S2HC_FAULT_RANK_BIT=1 "${MPIRUN[@]}" -x S2HC_FAULT_RANK_BIT -np 2 "$S2HC" train "$TMP/drift.yaml" --quiet >"$TMP/out" 2>&1; st=$?
[ "$st" = 1 ] && ok "one rank's weights differ by one bit: exit 1" || fail "drift: exit $st: $(tail -3 "$TMP/out")"
grep -q "the weights of 1 rank(s) differ from rank 0's (the first: rank 1)" "$TMP/out" \
  && ok "names the rank whose weights differ" || fail "drift: $(tail -3 "$TMP/out")"
expect_status 2 "another command under mpirun" -- "${MPIRUN[@]}" -np 2 "$S2HC" eval "$TMP/runs/s2hc"
expect_out "only .s2hc train. runs across processes" "says only train runs across processes"

# a grid whose points train across processes (launch:), and a launcher that is not there
conf gb s2hc 1
sed -i '/^run: /d' "$TMP/gb.yaml"
cat > "$TMP/g.yaml" <<YAML
base: $TMP/gb.yaml
sweep: {residual.method: [s2hc, mhc]}
name: "{residual.method}"
out: $TMP/grid
launch: "mpirun --oversubscribe --bind-to none -np 2"
YAML
expect_status 0 "--dry-run of a grid with launch:" -- "$S2HC" grid "$TMP/g.yaml" --dry-run
expect_out "^ +mpirun --oversubscribe --bind-to none -np 2 s2hc train .*/s2hc/config.yaml --resume" \
  "--dry-run shows the launcher"
expect_status 0 "a grid under launch: mpirun -np 2" -- timeout 300 "$S2HC" grid "$TMP/g.yaml" -j 1
expect_out "2/2 finished" "both points finished"
for m in s2hc mhc; do
  [ "$(h5dump -a /processes "$TMP/grid/$m/run.h5" 2>/dev/null | grep -Eo '\(0\): [0-9]+' | grep -Eo '[0-9]+$')" = 2 ] \
    && ok "point $m trained by 2 processes" || fail "point $m: processes $(h5dump -a /processes "$TMP/grid/$m/run.h5" 2>&1 | tail -1)"
done
grep -q "mpirun --oversubscribe --bind-to none -np 2 s2hc train" "$TMP/grid/s2hc/train.log" 2>/dev/null \
  && ok "the point's log names the launcher" || fail "train.log: $(head -2 "$TMP/grid/s2hc/train.log" 2>&1)"
sed -i 's|^launch: .*|launch: "no-such-launcher -n 2"|; s|^out: .*|out: '"$TMP"'/grid2|' "$TMP/g.yaml"
expect_status 1 "a launcher that is not installed: both points fail" -- timeout 120 "$S2HC" grid "$TMP/g.yaml" -j 1
expect_out "0/2 finished, 2 failed" "the summary counts both"
expect_out "FAILED  #0 s2hc \(exit 127\)" "the failure is reported"
grep -q "cannot run no-such-launcher" "$TMP/grid2/s2hc/train.log" 2>/dev/null && ok "its log says it cannot run it" \
  || fail "train.log: $(tail -2 "$TMP/grid2/s2hc/train.log" 2>&1)"
sed -i 's|^launch: .*|launch: "mpirun -np 2; rm -rf /"|' "$TMP/g.yaml"
expect_status 2 "shell syntax in launch:" -- "$S2HC" grid "$TMP/g.yaml" --dry-run
expect_out "g.yaml:5:[0-9]+: .*launch.*without quotes or shell syntax" "names the file, line and key"
finish dist_cli
