#!/usr/bin/env bash
# kill_cli.sh: a training killed with SIGKILL at any moment leaves run.h5 and ckpt.h5
# readable (docs/runfile.md, "Atomic save"), and --resume then finishes the run with every
# step logged exactly once. The run saves at every step and probes 8 streams at every
# step, so run.h5 grows to about a megabyte and the kills land inside its saves often
# (a save in place, without the temporary file and rename, fails this test).
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh
make_synth_data "$TMP/data"
# enough steps that the kills below (8 s of runs in all) land before the run ends, with a
# margin of about two either way; the sanitizer build steps 2-3x slower, and the final
# resume would spend most of the test's minute there on steps no kill reaches
STEPS=1000
san_build && STEPS=400
cat > "$TMP/k.yaml" <<YAML
model: {n_layer: 2, n_head: 2, n_embd: 16, block_size: 16}
residual: {method: mhc, n_streams: 8}
train: {batch: 4, steps: $STEPS, warmup: 2, lr: 0.003, min_lr: 0.0003, eval_every: 5, eval_batches: 1, ckpt_every: 1}
data: {dir: $TMP/data, train: synth, ood: []}
run: {name: k, out: $TMP/runs}
probe: {every: 1, final_samples: 4}
YAML
R=$TMP/runs/k
# the rows of a 1-D dataset of run.h5, one per line; `s2hc inspect` below reads the file
# through the project's own reader (h5log_load), h5dump through HDF5's
rows() { h5dump -y -w 0 -d "$1" "$R/run.h5" 2>/dev/null | awk '/DATA \{/ && !seen { getline; print; seen = 1 }' | tr -d ' ' | tr ',' '\n'; }
have_h5dump=0; command -v h5dump >/dev/null && have_h5dump=1
kills=0; bad=0; flag=""
for delay in 0.15 0.3 0.45 0.6 0.75 0.9 1.05 1.2 0.35 0.55 0.8 1.0; do
  "$S2HC" train "$TMP/k.yaml" --quiet $flag >/dev/null 2>&1 &
  pid=$!
  sleep "$delay"
  kill -KILL "$pid" 2>/dev/null && kills=$((kills + 1))
  wait "$pid" 2>/dev/null
  flag=--resume
  [ -e "$R/run.h5" ] || continue            # killed before the first save
  # the first save already holds the step-0 probe, so inspect always has a row to show
  if ! "$S2HC" inspect "$R" >"$TMP/out" 2>&1; then
    bad=$((bad + 1)); fail "after kill $kills: s2hc inspect: $(tail -n 2 "$TMP/out")"
  fi
  if [ $have_h5dump = 1 ] && ! h5dump -H "$R/run.h5" >/dev/null 2>&1; then
    bad=$((bad + 1)); fail "after kill $kills: h5dump cannot read run.h5"
  fi
  if [ -e "$R/ckpt.h5" ] && [ $have_h5dump = 1 ] && ! h5dump -H "$R/ckpt.h5" >/dev/null 2>&1; then
    bad=$((bad + 1)); fail "after kill $kills: h5dump cannot read ckpt.h5"
  fi
done
[ "$kills" -ge 6 ] && ok "$kills trainings killed mid-run" || fail "only $kills kills landed (the run finished too soon?)"
[ "$bad" = 0 ] && ok "run.h5 and ckpt.h5 stayed readable after every kill"
expect_status 0 "--resume after the kills finishes the run" -- "$S2HC" train "$TMP/k.yaml" --resume --quiet
ls "$R/"*.tmp >/dev/null 2>&1 && fail "temporary files left behind after the final save" || ok "no temporary files left"
if [ $have_h5dump = 1 ]; then
  rows /train/step > "$TMP/steps"
  seq 1 $STEPS | cmp -s - "$TMP/steps" && ok "/train/step is 1..$STEPS, every step once" ||
    fail "/train/step is not 1..$STEPS: $(seq 1 $STEPS | diff - "$TMP/steps" | grep '^[<>]' | head -n 5 | tr '\n' ' ')"
  rows /probe/step > "$TMP/psteps"
  seq 0 $STEPS | cmp -s - "$TMP/psteps" && ok "/probe/step is 0..$STEPS, every probe once" ||
    fail "/probe/step is not 0..$STEPS: $(seq 0 $STEPS | diff - "$TMP/psteps" | grep '^[<>]' | head -n 5 | tr '\n' ' ')"
fi
finish kill_cli
