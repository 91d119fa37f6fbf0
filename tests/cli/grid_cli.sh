#!/usr/bin/env bash
# grid_cli.sh: `s2hc grid` end to end on a small corpus the test makes: --list, --dry-run,
# a bad key, a real 3-point grid with -j 2, resume after the runner is killed mid-grid
# (no point lost, none repeated, finished runs untouched), two runners at once (locks),
# a failing point, points ending while another starts, a diverged point, a changed config
# refused and --force, --job, and the Slurm scripts (submit.sh checked against a stand-in sbatch).
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh

# ---- data: `s2hc data import` when this build has it, else the shard format by hand
make_synth_data "$TMP/data" 2>/dev/null
if [ ! -s "$TMP/data/synth/train.bin" ]; then
  perl -e 'local $/; open F, "<", $ARGV[0] or die; $t = <F>; $k = int(length($t) * 0.9);
    for (["train", substr($t, 0, $k)], ["val", substr($t, $k)]) {
      open O, ">", "$ARGV[1]/$_->[0].bin" or die; binmode O;
      print O pack("a8 V V V V Q<", "S2HCTOK", 1, 256, 1, 0, length($_->[1])), $_->[1]; close O }' \
    "$TMP/data/synth/text" "$TMP/data/synth"
fi
[ -s "$TMP/data/synth/train.bin" ] && ok "synthetic corpus" || fail "no synthetic corpus"

G=experiments/smoke.yaml
D=(--set data.dir="$TMP/data" --set data.train=synth)
OUT=$TMP/runs
count() { grep -c -- "$1" "$2" 2>/dev/null || true; }
mtime() { stat -c %Y.%y "$1" 2>/dev/null; }
# the value of column $2 in the row of index.csv $1 whose name is $3
csv_col() { awk -F, -v c="$2" -v n="$3" 'NR==1{for(i=1;i<=NF;i++) if($i==c) k=i} NR>1 && $2==n {print $k}' "$1"; }

# ---- --list, --dry-run, --help, bad grids: nothing runs, nothing is written
expect_status 0 "--list" -- "$S2HC" grid $G "${D[@]}" --out "$OUT" --list
expect_out "index +name +state" "--list has a header"
expect_out "^ +0 +identity-n4-s1337 +pending +0/20 +identity" "--list shows index, name, state, step and values"
expect_out "^ +2 +rc-n1-s1337 +pending" "--list shows the include entry last"
expect_out "3 points: 3 pending" "--list counts states"
expect_status 0 "--dry-run" -- "$S2HC" grid $G "${D[@]}" --out "$OUT" --dry-run
expect_out "would run 3 \\([0-9]+ at a time, [0-9]+ threads? each\\), skip 0, refuse 0" "--dry-run says what would run"
expect_out "s2hc train .*/identity-n4-s1337/config.yaml --resume" "--dry-run shows the command"
expect_status 0 "--dry-run -j 8" -- "$S2HC" grid $G "${D[@]}" --out "$OUT" --dry-run -j 8
expect_out "would run 3 \\(3 at a time" "--dry-run: no more at a time than points to run"
# with OpenMP's binding on, the runner's first place is not all it has (harness/util.c)
cores=$(sed -n 's/.*(\([0-9]*\) cores).*/\1/p' "$TMP/out" | head -n 1)
expect_status 0 "--dry-run under OMP_PROC_BIND" -- env OMP_PROC_BIND=close OMP_PLACES=cores "$S2HC" grid $G "${D[@]}" --out "$OUT" --dry-run
expect_out "\\($cores cores\\)" "--dry-run counts every core under OMP_PROC_BIND"
expect_status 0 "--dry-run -j 1" -- "$S2HC" grid $G "${D[@]}" --out "$OUT" --dry-run -j 1
expect_out "would run 3 \\(1 at a time, $cores threads? each" "--dry-run -j 1: every core for the one run"
[ ! -e "$OUT" ] && ok "--list and --dry-run write nothing" || fail "--list/--dry-run created $OUT"
expect_status 0 "--help" -- "$S2HC" grid --help
expect_out "example" "--help shows an example"
printf 'base: %s/experiments/tiny.yaml\nsweep:\n  residual.method: [hc]\n  train.sead: [1, 2]\n' "$PWD" > "$TMP/typo.yaml"
expect_status 2 "a typo in a swept key fails the grid" -- "$S2HC" grid "$TMP/typo.yaml" --out "$OUT"
expect_out "typo.yaml:4:3: key 'train.sead': not a config key \(did you mean 'train.seed'\?\)" "the error names file, line, column and key"
expect_status 2 "--job out of range" -- "$S2HC" grid $G "${D[@]}" --out "$OUT" --job 3
expect_out "has 3 points" "--job range error"
[ ! -e "$OUT" ] && ok "a bad grid writes nothing" || fail "a bad grid created $OUT"

# ---- a real grid, -j 2
expect_status 0 "the smoke grid runs with -j 2" -- "$S2HC" grid $G "${D[@]}" --out "$OUT" -j 2
expect_out "2 at a time, 1 thread each" "-j 2 on the cores: 1 thread per run"
expect_out "3/3 finished, 0 failed" "every point finished"
for n in identity-n4-s1337 s2hc-n4-s1337 rc-n1-s1337; do
  [ -f "$OUT/$n/run.h5" ] && [ -f "$OUT/$n/train.log" ] && [ -f "$OUT/$n/config.yaml" ] && ok "$n: run.h5, train.log, config.yaml" || fail "$n: files missing"
  [ "$(csv_col "$OUT/index.csv" state $n)" = finished ] && ok "$n finished in index.csv" || fail "$n not finished in index.csv"
done
grep -q "threads: 1" "$OUT/s2hc-n4-s1337/config.yaml" && ok "the child got train.threads 1" || fail "threads not set"
head -n 1 "$OUT/index.csv" | grep -q "^point,name,run_dir,state,exit_code,step,steps,final_train_loss,val_loss,tokens_per_s,wall_s,residual.method" \
  && ok "index.csv header" || fail "index.csv header: $(head -n 1 "$OUT/index.csv")"
[ -n "$(csv_col "$OUT/index.csv" final_train_loss rc-n1-s1337)" ] && [ -n "$(csv_col "$OUT/index.csv" tokens_per_s rc-n1-s1337)" ] \
  && ok "index.csv has losses and throughput" || fail "index.csv lacks numbers"
ls "$OUT"/*.tmp "$OUT"/*/*.tmp >/dev/null 2>&1 && fail "temporary files left" || ok "no temporary files left"
m0=$(mtime "$OUT/identity-n4-s1337/run.h5")
expect_status 0 "a second run of a finished grid" -- "$S2HC" grid $G "${D[@]}" --out "$OUT"
expect_out "0 to run, 3 finished" "finished points are skipped"
[ "$(mtime "$OUT/identity-n4-s1337/run.h5")" = "$m0" ] && ok "finished run untouched" || fail "finished run rewritten"
[ "$(count "^==== s2hc grid" "$OUT/identity-n4-s1337/train.log")" = 1 ] && ok "ran once" || fail "ran more than once"
# its log on stdout is not its product: one that cannot be written leaves exit 0
if [ -w /dev/full ]; then
  "$S2HC" grid $G "${D[@]}" --out "$OUT" > /dev/full 2>/dev/null; rc=$?
  [ "$rc" = 0 ] && ok "a grid whose stdout is full exits 0" || fail "a grid whose stdout is full exits $rc"
fi
expect_status 0 "--job on a finished point" -- "$S2HC" grid $G "${D[@]}" --out "$OUT" --job 1
expect_out "1/1 finished" "--job reports the one point"
expect_status 0 "--list after the run" -- "$S2HC" grid $G "${D[@]}" --out "$OUT" --list
expect_out "3 points: 3 finished" "--list reads the states"

# ---- the cadences a resumed training may change (evaluations, checkpoints, probes) are
# not a changed config, as for `s2hc train --resume`
expect_status 0 "--list with other cadences" -- "$S2HC" grid $G "${D[@]}" --out "$OUT" --list \
  --set train.ckpt_every=5 --set train.eval_every=5 --set train.eval_batches=3 --set probe.every=5 --set probe.final_samples=4
expect_out "3 points: 3 finished" "other cadences: still finished"
# ---- a changed config is refused; --force reruns it
expect_status 1 "a changed config is refused (exit 1)" -- "$S2HC" grid $G "${D[@]}" --out "$OUT" --set train.lr=0.002
expect_out "REFUSED #0 identity-n4-s1337: .*train.lr: 0.003 \(stored run\) vs 0.002 \(grid\).*--force" "the refusal names the key and --force"
expect_out "0/3 finished, 0 failed, 0 diverged, 3 refused" "the summary counts the refused points"
[ "$(mtime "$OUT/identity-n4-s1337/run.h5")" = "$m0" ] && ok "a refused run is untouched" || fail "refused run rewritten"
expect_status 0 "--force --job 0 reruns one changed point" -- "$S2HC" grid $G "${D[@]}" --out "$OUT" --set train.lr=0.002 --force --job 0
expect_status 0 "--list" -- "$S2HC" grid $G "${D[@]}" --out "$OUT" --set train.lr=0.002 --list
expect_out "3 points: 1 finished, 2 changed" "one rerun, two still changed"
# --dry-run says the same per point, and writes nothing
idx0=$(cat "$OUT/index.csv")
expect_status 0 "--dry-run on finished and changed points" -- "$S2HC" grid $G "${D[@]}" --out "$OUT" --set train.lr=0.002 --dry-run
expect_out "^ +0 +identity-n4-s1337: skip: finished$" "--dry-run skips the finished point"
expect_out "^ +1 +s2hc-n4-s1337: refuse: the config changed \(train.lr: 0.003 \(stored run\) vs 0.002 \(grid\)\); --force reruns it" \
  "--dry-run refuses a changed point, naming the key"
expect_out "would run 0 .*skip 1, refuse 2, fail 0; nothing was written" "--dry-run counts skip and refuse"
expect_status 0 "--dry-run --force" -- "$S2HC" grid $G "${D[@]}" --out "$OUT" --set train.lr=0.002 --dry-run --force
expect_out "^ +1 +s2hc-n4-s1337: run from step 0 \(--force; the config changed: train.lr" "--dry-run --force reruns a changed point"
expect_out "^ +\(after writing the point's config.yaml over the stored run's; this point alone: s2hc grid $G --out $OUT .*--set train.lr=0.002 --job 1 --force\)$" \
  "--dry-run --force: its train command runs after the grid writes config.yaml; the command for the point alone"
expect_out "would run 2 .*skip 1, refuse 0" "--dry-run --force counts them to run"
[ "$(cat "$OUT/index.csv")" = "$idx0" ] && ok "--dry-run leaves index.csv as it was" || fail "--dry-run rewrote index.csv"
# a point rerun from step 0 (--force) counts its own wall time, not the discarded run's
# too (its grid.status says 1000 s here; they were added, and the ETA's rate with them)
sed -i 's/^wall_s=.*/wall_s=1000.000/' "$OUT/s2hc-n4-s1337/grid.status"
# the progress counts: a changed point queued to rerun is left, not refused
expect_status 0 "--force -j 1 reruns the two changed points" -- "$S2HC" grid $G "${D[@]}" --out "$OUT" --set train.lr=0.002 --force -j 1
expect_out "done    #1 s2hc-n4-s1337 .*\(2/3 done, 0 running, 0 failed, 1 left," "the point still queued counts as left"
w=$(csv_col "$OUT/index.csv" wall_s s2hc-n4-s1337)
awk -v w="$w" 'BEGIN { exit !(w > 0 && w < 1000) }' && ok "the rerun point's wall time is its own run's ($w s)" \
  || fail "wall_s after --force: '$w' (the discarded run's 1000 s added)"
# a longer train.steps alone: the refusal points to `train --extend` (in a copy of the runs)
cp -r "$OUT" "$TMP/runs_ext"
XO=$TMP/runs_ext
XL=(--set train.lr=0.002 --set train.steps=26)
expect_status 0 "--dry-run with a longer train.steps" -- "$S2HC" grid $G "${D[@]}" --out "$XO" "${XL[@]}" --dry-run
expect_out "^ +2 +rc-n1-s1337: refuse: the config changed \(train.steps: 20 \(stored run\) vs 26 \(grid\)\); --force reruns it; or, only train.steps grown, --extend trains it further \(this point alone: \`s2hc train $XO/rc-n1-s1337/config.yaml --extend --set train.steps=26\`\)" \
  "--dry-run's refusal gives --extend and the command for the point alone"
expect_status 0 "--dry-run with a longer train.steps and another lr" -- "$S2HC" grid $G "${D[@]}" --out "$XO" \
  --set train.lr=0.003 --set train.steps=26 --dry-run
grep -q -- "--extend" "$TMP/out" && fail "a refusal for more than train.steps points to --extend" || ok "no --extend then"
expect_status 0 "--dry-run --extend with a longer train.steps and another lr" -- "$S2HC" grid $G "${D[@]}" --out "$XO" \
  --set train.lr=0.003 --set train.steps=26 --dry-run --extend
expect_out "would run 0 .*refuse 3" "--extend trains no point that differs by more than train.steps"
expect_status 1 "the runner refuses it the same way" -- "$S2HC" grid $G "${D[@]}" --out "$XO" "${XL[@]}" --job 2
expect_out "REFUSED #2 rc-n1-s1337: .*--force \(discards it\); or, only train.steps grown, .*--extend --set train.steps=26" \
  "the runner's refusal gives it too"
# (its config.yaml names the grid's own --out, whose runs the tests below go on with)
expect_status 0 "the command it gives" -- "$S2HC" train "$XO/rc-n1-s1337/config.yaml" --extend --set train.steps=26 \
  --set run.out="$XO" --quiet
expect_status 0 "--list" -- "$S2HC" grid $G "${D[@]}" --out "$XO" "${XL[@]}" --list
expect_out "^ +2 +rc-n1-s1337 +finished +26/26" "the extended point is finished at the grid's length"
# `s2hc grid --extend` trains the others further itself: from their checkpoints, with
# `train --extend`, the same as the command by hand (the Slurm tasks get it too)
expect_status 0 "--dry-run --extend" -- "$S2HC" grid $G "${D[@]}" --out "$XO" "${XL[@]}" --dry-run --extend
expect_out "^ +0 +identity-n4-s1337: extend from step 20 to 26 \(--extend; train.steps: 20 \(stored run\) vs 26 \(grid\)\)$" \
  "--dry-run --extend: from the checkpoint's step to the grid's"
expect_out "s2hc train $XO/s2hc-n4-s1337/config.yaml --extend --set train.steps=26 " \
  "and the command it would run, with the new length (the point's config.yaml still holds the run's)"
grep -q "^ *steps: 20$" "$XO/s2hc-n4-s1337/config.yaml" && ok "which the dry run left as it was" \
  || fail "config.yaml: $(grep steps "$XO/s2hc-n4-s1337/config.yaml")"
expect_out "would run 2 .*skip 1, refuse 0" "--dry-run --extend counts them to run"
# a finished point whose checkpoint is gone cannot be extended (`train --extend` refuses
# it): the dry run says so, not "extend from step 0"
cp -r "$XO" "$TMP/runs_nockpt"
rm "$TMP/runs_nockpt/identity-n4-s1337/ckpt.h5"
expect_status 0 "--dry-run --extend, a checkpoint removed" -- "$S2HC" grid $G "${D[@]}" --out "$TMP/runs_nockpt" "${XL[@]}" \
  --dry-run --extend
expect_out "^ +0 +identity-n4-s1337: refuse: the config changed \(train.steps: 20 \(stored run\) vs 26 \(grid\)\); --force reruns it; --extend cannot train it further: the run finished and $TMP/runs_nockpt/identity-n4-s1337/ckpt.h5, which --extend goes on from, is missing" \
  "the point without its checkpoint is refused, saying why"
expect_out "would run 1 .*skip 1, refuse 1" "the other is extended"
rm -r "$TMP/runs_nockpt"
# --force beside --extend: a point only longer is extended (as the runner does), not rerun
expect_status 0 "--dry-run --force --extend" -- "$S2HC" grid $G "${D[@]}" --out "$XO" "${XL[@]}" --dry-run --force --extend
expect_out "^ +0 +identity-n4-s1337: extend from step 20 to 26 \(--extend; " "--force beside --extend: the point is extended"
# a shorter train.steps is no run to train further: refused, with no word of --extend
expect_status 0 "--dry-run --extend with a shorter train.steps" -- "$S2HC" grid $G "${D[@]}" --out "$XO" \
  --set train.lr=0.002 --set train.steps=15 --dry-run --extend
expect_out "would run 0 .*refuse 3" "--extend trains no point whose train.steps is shorter"
grep -q -- "--extend trains it further" "$TMP/out" && fail "a shorter train.steps points to --extend: $(grep -m1 refuse "$TMP/out")" \
  || ok "no --extend hint for a shorter train.steps"
expect_status 0 "--slurm --extend" -- "$S2HC" grid $G "${D[@]}" --out "$XO" "${XL[@]}" --slurm --extend
grep -q -- ' --extend --job "$SLURM_ARRAY_TASK_ID"$' "$XO/slurm/array.sbatch" && ok "the array tasks extend too" \
  || fail "array.sbatch: $(grep -- '--job' "$XO/slurm/array.sbatch")"
expect_status 0 "--slurm --force" -- "$S2HC" grid $G "${D[@]}" --out "$XO" "${XL[@]}" --slurm --force
grep -q -- ' --force --job "$SLURM_ARRAY_TASK_ID"$' "$XO/slurm/array.sbatch" && ok "the array tasks rerun changed points too" \
  || fail "array.sbatch with --force: $(grep -- '--job' "$XO/slurm/array.sbatch")"
rm -r "$XO/slurm"
# a Slurm task's runner (--job I) counts its point alone: the other changed points are
# no task's refusal (the progress line said "1/3 done, ..., 2 refused" beside "1/1 finished")
cp -r "$XO" "$TMP/runs_extjob"
expect_status 0 "grid --extend --job 1" -- "$S2HC" grid $G "${D[@]}" --out "$TMP/runs_extjob" "${XL[@]}" --extend --job 1
expect_out "done    #1 s2hc-n4-s1337 .*\(1/1 done, 0 running, 0 failed, 0 left," "its progress counts the one point"
grep -q "refused" <(grep "done    #1" "$TMP/out") && fail "the progress counts other points as refused: $(grep "done    #1" "$TMP/out")" \
  || ok "and no other point as refused"
expect_out "grid smoke: 1/1 finished, 0 failed, 0 diverged, 0 refused" "as its summary does"
rm -r "$TMP/runs_extjob"
expect_status 0 "grid --extend" -- "$S2HC" grid $G "${D[@]}" --out "$XO" "${XL[@]}" --extend -j 1
expect_out "extend  #0 identity-n4-s1337 from step 20 to 26 \(--extend\)" "says it extends the point"
grep -q "REFUSED" "$TMP/out" && fail "a point --extend trains is listed as refused: $(grep REFUSED "$TMP/out")" \
  || ok "no point listed as refused"
grep -q "extending .*identity-n4-s1337 from 20 to 26 steps at step 20" "$XO/identity-n4-s1337/train.log" \
  && ok "through train --extend (its log)" || fail "train.log: $(tail -n 5 "$XO/identity-n4-s1337/train.log")"
expect_out "3 finished" "every point finished at the grid's length"
h5dump -a /extensions "$XO/s2hc-n4-s1337/run.h5" 2>/dev/null | grep -q '"20->26"' && ok "the run file records the extension" \
  || fail "extensions: $(h5dump -a /extensions "$XO/s2hc-n4-s1337/run.h5" 2>&1 | tail -3)"
# the command line's own mistakes: exit 2, nothing run
# an --out longer than the grid's runs directory can be: refused by its length (it was cut
# to 511 bytes: the runs went to another folder)
LONGO=$TMP/$(printf 'o%.0s' $(seq 1 300))/$(printf 'p%.0s' $(seq 1 300))
expect_status 2 "an --out of over 511 bytes" -- "$S2HC" grid $G "${D[@]}" --out "$LONGO" --list
expect_out "--out '.*': a path of [0-9]+ bytes, longer than 511" "names the limit"
expect_status 2 "two grid files" -- "$S2HC" grid $G $G --out "$OUT"
expect_out "grid: one grid file only" "says one grid file only"
expect_status 2 "--submit without --slurm" -- "$S2HC" grid $G --out "$OUT" --submit
expect_out "--submit goes with --slurm" "says --submit goes with --slurm"
expect_status 2 "an unknown option" -- "$S2HC" grid $G --out "$OUT" --frobnicate
expect_out "unknown option or missing value: '--frobnicate'" "names the option"
# s2hc analyze of the grid's out dir: its runs, index.csv skipped; a mistyped path or an
# -o that is a file stops it before anything is written
expect_status 0 "analyze the grid's out dir and its index.csv" -- "$S2HC" analyze "$OUT" "$OUT/index.csv" -o "$TMP/an"
expect_out "index.csv: a grid's index, not a run: skipped" "index.csv is skipped with a word"
[ -s "$TMP/an/data/summary.txt" ] && grep -q "^runs=3$" "$TMP/an/data/summary.txt" && ok "analyze read the grid's 3 runs" \
  || fail "summary: $(cat "$TMP/an/data/summary.txt" 2>/dev/null)"
# a glob over the points (OUT/*/) also names the folder of Slurm scripts: passed over with a
# word by analyze and inspect, as is the rc point in a per-layer comparison
"$S2HC" grid $G "${D[@]}" --out "$OUT" --slurm >/dev/null 2>&1
expect_status 0 "analyze OUT/*/ beside the grid's slurm folder" -- "$S2HC" analyze "$OUT"/*/ -o "$TMP/an3"
expect_out "slurm/: a grid's folder of Slurm scripts, not a run: skipped" "the slurm folder is skipped with a word"
grep -q "^runs=3$" "$TMP/an3/data/summary.txt" && ok "analyze read the 3 runs" || fail "summary: $(cat "$TMP/an3/data/summary.txt")"
expect_status 0 "inspect --method-compare OUT/*/ --layer 1" -- "$S2HC" inspect --method-compare "$OUT"/*/ --layer 1
expect_out "note: $OUT/slurm/: passed over: a grid's folder of Slurm scripts" "inspect passes over the slurm folder"
expect_out "note: .*rc-n1-s1337.*: passed over: method rc has no residual matrices" "and over the rc point"
expect_out "method s2hc  n = 4" "the s2hc point's layer is shown"
# the same glob without its slash (OUT/*) names index.csv too: eval and probe pass over it
# and the slurm folder with a note (index.csv was taken for a run: exit 1), and number
# the runs alone
expect_status 0 "eval OUT/* beside the grid's index.csv and slurm folder" -- "$S2HC" eval "$OUT"/*
expect_out "note: $OUT/index.csv: passed over: a grid's index, not a run" "eval passes over index.csv"
expect_out "note: $OUT/slurm: passed over: a grid's folder of Slurm scripts" "and the slurm folder"
expect_out "^== $OUT/s2hc-n4-s1337 \(3/3\) ==$" "the runs are numbered among themselves"
expect_status 0 "probe OUT/*" -- "$S2HC" probe "$OUT"/* --samples 2
expect_out "note: $OUT/index.csv: passed over: a grid's index, not a run" "probe passes over index.csv"
expect_status 1 "inspect of the rc point alone at a layer" -- "$S2HC" inspect "$OUT/rc-n1-s1337" --layer 1
expect_out "error: .*method rc has no residual matrices" "alone it is an error"
expect_status 1 "inspect of the slurm folder alone" -- "$S2HC" inspect "$OUT/slurm"
grep -q "passed over" "$TMP/out" && fail "the slurm folder alone is passed over: $(cat "$TMP/out")" || ok "alone it is no run"
rm -r "$OUT/slurm"
expect_status 1 "analyze with a mistyped run directory" -- "$S2HC" analyze "$OUT" "$OUT/no-such-run" -o "$TMP/an2"
expect_out "1 of the given paths or their run files cannot be read \(above\); nothing written" "names the count, writes nothing"
[ ! -e "$TMP/an2" ] && ok "nothing written for a mistyped path" || fail "analyze wrote $TMP/an2"
expect_status 1 "analyze -o a file" -- "$S2HC" analyze "$OUT" -o "$OUT/index.csv"
expect_out "cannot write into .*index.csv: not a directory" "says -o is not a directory"
expect_status 1 "analyze of a folder without runs" -- "$S2HC" analyze "$TMP/data" -o "$TMP/an3"
expect_out "no run.h5 found in it or its subdirectories" "says no run.h5 was found"

# ---- kill the runner mid-grid, then resume: no point lost, none repeated
K=$TMP/kill
# long enough that the kills land mid-run (fewer steps in the sanitizer build, 2-3x slower)
KSTEPS=1000
san_build && KSTEPS=400
KS=(--set train.steps=$KSTEPS --set train.ckpt_every=50 --set train.eval_every=200 --set probe.every=200 --set train.threads=1)
"$S2HC" grid $G "${D[@]}" "${KS[@]}" --out "$K" -j 1 > "$TMP/kill1.out" 2>&1 &
pid=$!
# until point 0 finished and point 1 printed its first step (its trainer then handles
# SIGTERM; before, it may still be starting up)
point1_training() {
  grep -q "state=finished" "$K/identity-n4-s1337/grid.status" 2>/dev/null &&
    grep -Eq "^step +[0-9]+/$KSTEPS" "$K/s2hc-n4-s1337/train.log" 2>/dev/null
}
wait_for 600 point1_training
kill -TERM $pid; wait $pid; rc=$?
[ "$rc" = 130 ] && ok "a runner stopped by SIGTERM exits 130" || fail "runner exit $rc after SIGTERM"
grep -q "stopped #1 s2hc-n4-s1337 at step" "$TMP/kill1.out" && ok "the running point saved and stopped" || fail "no stop line: $(tail -n 3 "$TMP/kill1.out")"
# the stopped point is left (resumable), beside the pending one, as the summary counts it
grep -q "stopped #1 s2hc-n4-s1337 at step .*(1/3 done, 0 running, 0 failed, 2 left" "$TMP/kill1.out" \
  && ok "the stop line counts the stopped point as left" || fail "stop line: $(grep "stopped #1" "$TMP/kill1.out")"
grep -q "1/3 finished, 0 failed, 0 diverged, 0 refused, 2 left, 0 running elsewhere" "$TMP/kill1.out" \
  && ok "the summary counts the stopped point as left" || fail "summary: $(grep "finished, " "$TMP/kill1.out")"
[ "$(csv_col "$K/index.csv" state s2hc-n4-s1337)" = interrupted ] && ok "index.csv: interrupted" || fail "state $(csv_col "$K/index.csv" state s2hc-n4-s1337)"
[ "$(csv_col "$K/index.csv" exit_code s2hc-n4-s1337)" = 130 ] && ok "index.csv: exit code 130" || fail "exit code not 130"
[ "$(csv_col "$K/index.csv" state rc-n1-s1337)" = pending ] && ok "the last point never started" || fail "rc state $(csv_col "$K/index.csv" state rc-n1-s1337)"
stop_step=$(csv_col "$K/index.csv" step s2hc-n4-s1337)
m0=$(mtime "$K/identity-n4-s1337/run.h5")
expect_status 0 "the grid resumes" -- "$S2HC" grid $G "${D[@]}" "${KS[@]}" --out "$K" -j 1
expect_out "resume  #1 s2hc-n4-s1337 at step $stop_step/$KSTEPS" "the interrupted point resumes from its checkpoint"
expect_out "3/3 finished" "no point lost"
grep -q "SIGINT (Ctrl-C) is ignored" "$TMP/out" && fail "a runner that handles SIGINT says it is ignored" \
  || ok "a runner that handles SIGINT says nothing of it"
[ "$(mtime "$K/identity-n4-s1337/run.h5")" = "$m0" ] && ok "the finished point untouched" || fail "finished point rewritten"
[ "$(count "^==== s2hc grid" "$K/identity-n4-s1337/train.log")" = 1 ] && ok "point 0 ran once" || fail "point 0 repeated"
[ "$(count "^==== s2hc grid" "$K/s2hc-n4-s1337/train.log")" = 2 ] && ok "point 1: one run, one resume" || fail "point 1 headers"
[ "$(count "^==== s2hc grid" "$K/rc-n1-s1337/train.log")" = 1 ] && ok "point 2 ran once" || fail "point 2 headers"
grep -q "resuming .* from step $stop_step" "$K/s2hc-n4-s1337/train.log" && ok "train resumed at the saved step" || fail "train did not resume"
if command -v h5dump >/dev/null; then
  h5dump -d /train/step -y -w 0 "$K/s2hc-n4-s1337/run.h5" | awk '/DATA \{/{f=1;next} f&&/}/{exit} f' | tr -s ', ' '\n\n' | grep '[0-9]' > "$TMP/steps"
  [ "$(wc -l < "$TMP/steps")" = $KSTEPS ] && [ "$(sort -un "$TMP/steps" | wc -l)" = $KSTEPS ] && ok "the resumed run logged each of its $KSTEPS steps once" || fail "steps logged $(wc -l < "$TMP/steps") ($(sort -un "$TMP/steps" | wc -l) distinct)"
fi
w=$(csv_col "$K/index.csv" wall_s s2hc-n4-s1337)
awk -v w="$w" 'BEGIN{exit !(w > 0)}' && ok "wall time adds up the runs" || fail "wall_s '$w'"

# ---- a killed (SIGKILL) runner: its child saves and stops, the next runner resumes
K2=$TMP/kill9
"$S2HC" grid $G "${D[@]}" "${KS[@]}" --out "$K2" -j 1 --job 0 > /dev/null 2>&1 &
pid=$!
# killed once the child has trained half the run, so that the time of its first part shows
half_trained() {
  awk -v h=$((KSTEPS / 2)) '/^step +[0-9]+\//{split($2, a, "/"); if (a[1] + 0 >= h) f = 1} END{exit !f}' \
    "$K2/identity-n4-s1337/train.log" 2>/dev/null
}
wait_for 600 half_trained
kill -KILL $pid; wait $pid 2>/dev/null
for _ in $(seq 1 600); do  # the orphan saves and exits; its lock goes with it
  "$S2HC" grid $G "${D[@]}" "${KS[@]}" --out "$K2" --list 2>/dev/null | grep -Eq "identity-n4-s1337 +running" || break
  sleep 0.1
done
# (under --extend too: a point stopped at its own length is resumed, `train --resume`)
expect_status 0 "after SIGKILL of the runner, the point resumes" -- "$S2HC" grid $G "${D[@]}" "${KS[@]}" --out "$K2" --job 0 --extend
expect_out "resume  #0 identity-n4-s1337 at step [0-9]+/$KSTEPS" "the killed runner's point resumes, --extend or not"
grep -q -- "s2hc train .* --resume ====" "$K2/identity-n4-s1337/train.log" && ok "with train --resume" \
  || fail "train.log: $(grep '^==== s2hc grid' "$K2/identity-n4-s1337/train.log")"
expect_out "1/1 finished" "the killed runner's point finished"
# index.csv's wall time counts the killed runner's run too: at least the run's own
# wall_seconds (its training time over both runs, up to its last save)
if command -v h5dump >/dev/null; then
  ws=$(h5dump -a /wall_seconds "$K2/identity-n4-s1337/run.h5" | awk '/\(0\)/{print $2}')
  w=$(csv_col "$K2/index.csv" wall_s identity-n4-s1337)
  awk -v w="$w" -v ws="$ws" 'BEGIN{exit !(w != "" && ws != "" && w + 0 >= ws + 0)}' &&
    ok "wall_s counts the run of a killed runner" || fail "wall_s '$w' below the run's wall_seconds '$ws'"
fi

# ---- a runner killed while its child is between fork and exec (S2HC_TEST_EXEC_DELAY_MS
# holds the child there, with the runner's signal handlers): the child ends before its
# training starts, so no orphan trains the point to its end, locked, while the next
# runner waits (the runner's death signal must not reach the runner's handler there).
# The hook holds the child until the runner is gone (60 s at most); the runner is killed
# once the child is there, still the runner's program (its `grid` command line). A kill
# half a second after the point's log (written before the fork), in a hold of 1.5 s,
# could come after the exec on a loaded machine
K3=$TMP/kill9exec
env S2HC_TEST_EXEC_DELAY_MS=60000 "$S2HC" grid $G "${D[@]}" "${KS[@]}" --out "$K3" -j 1 --job 0 > /dev/null 2>&1 &
pid=$!
child_forked() { local c; for c in $(pgrep -P $pid); do tr '\0' ' ' < /proc/$c/cmdline 2>/dev/null | grep -q " grid " && return 0; done; return 1; }
wait_for 300 child_forked || fail "the runner's child did not start"
kill -KILL $pid; wait $pid 2>/dev/null
for _ in $(seq 1 600); do
  "$S2HC" grid $G "${D[@]}" "${KS[@]}" --out "$K3" --list 2>/dev/null | grep -Eq "identity-n4-s1337 +running" || break
  sleep 0.1
done
grep -Eq "^step +[0-9]" "$K3/identity-n4-s1337/train.log" && fail "the killed runner's child trained: $(grep -E '^step' "$K3/identity-n4-s1337/train.log" | tail -n 1)" \
  || ok "a runner killed between its child's fork and exec leaves no training behind"
expect_status 0 "the next runner runs that point" -- "$S2HC" grid $G "${D[@]}" "${KS[@]}" --out "$K3" --job 0
expect_out "start   #0 identity-n4-s1337" "from its start"
expect_out "1/1 finished" "to its end"

# ---- two runners at once never run the same point (one lock per run directory)
L=$TMP/locks
LS=(--set train.steps=300 --set train.ckpt_every=150 --set train.threads=1)
"$S2HC" grid $G "${D[@]}" "${LS[@]}" --out "$L" -j 1 > "$TMP/lockA.out" 2>&1 &
pa=$!
"$S2HC" grid $G "${D[@]}" "${LS[@]}" --out "$L" -j 1 > "$TMP/lockB.out" 2>&1 &
pb=$!
wait $pa; ra=$?
wait $pb; rb=$?
[ "$ra" = 0 ] && [ "$rb" = 0 ] && ok "both runners exit 0" || fail "runner exits $ra $rb"
for n in identity-n4-s1337 s2hc-n4-s1337 rc-n1-s1337; do
  [ "$(count "^==== s2hc grid" "$L/$n/train.log")" = 1 ] && ok "$n ran exactly once" || fail "$n ran $(count "^==== s2hc grid" "$L/$n/train.log") times"
  [ "$(cat "$TMP/lockA.out" "$TMP/lockB.out" | grep -cE "(start|resume) +#[0-9] $n")" = 1 ] && ok "$n started by one runner" || fail "$n started twice"
done
cat "$TMP/lockA.out" "$TMP/lockB.out" | grep -q "running elsewhere" && ok "a runner skipped a locked point" || fail "no point was locked by the other runner"
expect_status 0 "after both runners" -- "$S2HC" grid $G "${D[@]}" "${LS[@]}" --out "$L" --list
expect_out "3 points: 3 finished" "every point finished once"

# ---- a failing point is recorded; the others finish; the exit code counts it
F=$TMP/fail
printf 'base: %s/experiments/tiny.yaml\nset: {model.n_embd: 32, model.block_size: 32, train.batch: 4, train.steps: 10, train.warmup: 1, probe.final_samples: 4, data.ood: [], data.dir: "%s"}\nsweep:\n  data.train: [synth, nothere, synth2]\n  residual.method: [identity]\nname: "{data.train}"\n' \
  "$PWD" "$TMP/data" > "$TMP/failing.yaml"
cp -r "$TMP/data/synth" "$TMP/data/synth2"
expect_status 1 "one failing point: exit code 1" -- "$S2HC" grid "$TMP/failing.yaml" --out "$F" -j 2
expect_out "FAILED  #1 nothere \(exit 1\)" "the failure is reported"
expect_out "data prepare" "the run's own error is shown"
expect_out "2/3 finished, 1 failed" "the other points finished"
[ "$(csv_col "$F/index.csv" state nothere)" = failed ] && [ "$(csv_col "$F/index.csv" exit_code nothere)" = 1 ] \
  && ok "index.csv records the failure and its exit code" || fail "failure not in index.csv"
[ "$(csv_col "$F/index.csv" state synth2)" = finished ] && ok "a point after the failure finished" || fail "synth2 not finished"
expect_status 1 "a rerun retries the failed point only" -- "$S2HC" grid "$TMP/failing.yaml" --out "$F"
expect_out "1 to run, 2 finished" "only the failed point reruns"

# ---- a point that failed at its first checkpoint (run.h5 saved, ckpt.h5 not): its rerun
# starts from step 0, and --dry-run and the event say so, not "resume at step 10"
P=$TMP/nockpt
printf 'base: %s/experiments/tiny.yaml\nset: {model.n_embd: 32, model.block_size: 32, train.batch: 4, train.steps: 20, train.ckpt_every: 10, train.warmup: 1, probe.final_samples: 4, data.ood: [], data.dir: "%s", data.train: synth}\nsweep:\n  residual.method: [identity]\nname: "p"\n' \
  "$PWD" "$TMP/data" > "$TMP/nockpt.yaml"
mkdir -p "$P/p/ckpt.h5.tmp" # a folder where the checkpoint's .tmp goes: its save fails
expect_status 1 "a point whose first checkpoint cannot be saved fails" -- "$S2HC" grid "$TMP/nockpt.yaml" --out "$P"
[ -f "$P/p/run.h5" ] && [ ! -e "$P/p/ckpt.h5" ] && ok "its run.h5 is there, no checkpoint" || fail "run.h5/ckpt.h5: $(ls "$P/p")"
# a checkpoint that cannot be read: the step is run.h5's (the training then says why)
echo "not a checkpoint" > "$P/p/ckpt.h5"
expect_status 0 "--dry-run of a point whose checkpoint cannot be read" -- "$S2HC" grid "$TMP/nockpt.yaml" --out "$P" --dry-run
expect_out "p: resume at step 10 of 20 \\(failed\\)" "--dry-run takes run.h5's step"
rm "$P/p/ckpt.h5"
rmdir "$P/p/ckpt.h5.tmp"
expect_status 0 "--dry-run of a point failed before its first checkpoint" -- "$S2HC" grid "$TMP/nockpt.yaml" --out "$P" --dry-run
expect_out "p: run 20 steps \(failed before\)" "--dry-run says it runs from step 0"
expect_status 0 "its rerun" -- "$S2HC" grid "$TMP/nockpt.yaml" --out "$P"
expect_out "start +#0 p\$" "the rerun says start, not resume"

# ---- a point that `train --resume` would refuse at once: --dry-run says it fails, not
# "resume at step 10" (it said so for a corpus rebuilt since and a run.h5 it cannot read)
# the point's run stopped at its first checkpoint (its own config.yaml, as the grid runs it)
expect_status 130 "the point's run, stopped at step 10" -- "$S2HC" train "$P/p/config.yaml" --force --quiet --stop-after 10
expect_status 0 "--dry-run of the stopped point" -- "$S2HC" grid "$TMP/nockpt.yaml" --out "$P" --dry-run
expect_out "p: resume at step 10 of 20" "--dry-run resumes it"
mkdir -p "$TMP/data2/synth"
head -c 40000 "$TMP/data/synth/text" > "$TMP/data2/synth/text"
"$S2HC" data import "$TMP/data2/synth/text" --dir "$TMP/data2" --name synth >/dev/null
expect_status 0 "--dry-run on a corpus rebuilt since" -- "$S2HC" grid "$TMP/nockpt.yaml" --out "$P" --set data.dir="$TMP/data2" --dry-run
expect_out "p: fail: \`s2hc train --resume\` refuses it: its run trained on a corpus 'synth' of [0-9]+ training and [0-9]+ validation tokens; .*data2/synth/train.bin and val.bin hold [0-9]+ and [0-9]+ now \(rebuilt since\)" \
  "--dry-run says the resume refuses the rebuilt corpus"
expect_out "would run 0 .*skip 0, refuse 0, fail 1; nothing was written" "--dry-run counts it as failing"
expect_status 1 "the grid on the rebuilt corpus" -- "$S2HC" grid "$TMP/nockpt.yaml" --out "$P" --set data.dir="$TMP/data2"
expect_out "cannot resume: .*rebuilt since" "it fails as the dry run said"
cp "$P/p/run.h5" "$TMP/p-run.h5"
echo "not a run file" > "$P/p/run.h5"
expect_status 0 "--dry-run of a point whose run.h5 cannot be read" -- "$S2HC" grid "$TMP/nockpt.yaml" --out "$P" --dry-run
expect_out "p: fail: \`s2hc train --resume\` refuses it: .*/p/run.h5: .*HDF5" "--dry-run says the resume refuses its run.h5"
cp "$TMP/p-run.h5" "$P/p/run.h5"
# the cores go to the points that will train: beside that refused point two fresh ones
# share 4 cores, 2 threads each, as --dry-run says (it had run 3 at a time, 1 thread)
P2=$TMP/share
sed 's/residual.method: \[identity\]/residual.method: [identity, hc, mhc]/; s/name: "p"/name: "{residual.method}"/' \
  "$TMP/nockpt.yaml" > "$TMP/share.yaml"
expect_status 0 "the identity point alone (--job 0)" -- "$S2HC" grid "$TMP/share.yaml" --out "$P2" --job 0
echo "not a run file" > "$P2/identity/run.h5" # `train --resume` refuses it at once
expect_status 0 "--dry-run of a refused point and two fresh ones" -- env SLURM_CPUS_PER_TASK=4 "$S2HC" grid \
  "$TMP/share.yaml" --out "$P2" --dry-run
expect_out "identity: fail: \`s2hc train --resume\` refuses it" "the identity point is refused"
expect_out "would run 2 \(2 at a time, 2 threads each\)" "the fresh points, 2 threads each"
expect_status 1 "the grid of a refused point and two fresh ones" -- env SLURM_CPUS_PER_TASK=4 "$S2HC" grid \
  "$TMP/share.yaml" --out "$P2"
expect_out "2 at a time, 2 threads each \(4 cores\)" "the runner shares the cores as the dry run said"

# ---- points that end while the next one starts: a child between fork and exec holds
# no other point's lock, so the runner, index.csv and other runners see that point ended
# (S2HC_TEST_EXEC_DELAY_MS: the runner's hook, holds each child 300 ms before exec; the
# first two points fail at once, together; the third starts between their two reaps)
R=$TMP/race
printf 'base: %s/experiments/tiny.yaml\nset: {data.ood: [], data.dir: "%s"}\nsweep:\n  data.train: [gone1, gone2, gone3]\nname: "{data.train}"\n' \
  "$PWD" "$TMP/data" > "$TMP/race.yaml"
expect_status 1 "three failing points with -j 2, each exec held 300 ms" -- env S2HC_TEST_EXEC_DELAY_MS=300 "$S2HC" grid "$TMP/race.yaml" --out "$R" -j 2
expect_out "0/3 finished, 3 failed, 0 diverged" "the summary counts the failed points"
last=$(grep "FAILED  #" "$TMP/out" | tail -n 1)
case "$last" in *"(0/3 done, 0 running, 3 failed, 0 left"*) ok "the progress after the last point counts every failure";;
  *) fail "a point that ended read as running: $last";; esac
[ "$(grep -c ',failed,' "$R/index.csv")" = 3 ] && ok "index.csv: three failed" || fail "index.csv: $(cat "$R/index.csv")"
# their rerun, one at a time: a point an earlier run left failed counts as left until it
# runs again, not as failed too
expect_status 1 "a rerun of the three failed points with -j 1" -- "$S2HC" grid "$TMP/race.yaml" --out "$R" -j 1
expect_out "FAILED  #0 gone1 .*\(0/3 done, 0 running, 1 failed, 2 left" "the progress counts each point once"

# ---- a diverged point: recorded, counted, its own message shown (not the config that
# train prints first), skipped by the next runner (S2HC_FAULT_NAN_AT_STEP: train's hook)
V=$TMP/diverge
expect_status 1 "a diverged point: exit code 1" -- env S2HC_FAULT_NAN_AT_STEP=5 "$S2HC" grid $G "${D[@]}" --out "$V" --job 1
expect_out "DIVERGED #1 s2hc-n4-s1337 at step 5" "the divergence is reported"
expect_out "DIVERGED #1 s2hc-n4-s1337 at step 5 .*\(0/1 done, 0 running, 0 failed, 1 diverged, 0 refused," "the progress counts it apart (of --job's one point)"
expect_out "\| s2hc: step 5: the loss is NaN: the run diverged" "the run's own message is shown"
grep -Eq "^ +\|   [a-z_0-9]+: [^ ]+$" "$TMP/out" && fail "config lines shown as the error: $(grep -E '^ +\|' "$TMP/out" | head -n 3)" \
  || ok "no config lines shown as the error"
[ "$(csv_col "$V/index.csv" state s2hc-n4-s1337)" = diverged ] && [ "$(csv_col "$V/index.csv" exit_code s2hc-n4-s1337)" = 3 ] \
  && ok "index.csv: diverged, exit code 3" || fail "index.csv: $(grep s2hc-n4 "$V/index.csv")"
expect_status 1 "the next runner skips the diverged point and counts it" -- "$S2HC" grid $G "${D[@]}" --out "$V" -j 2
expect_out "2/3 finished, 0 failed, 1 diverged" "the others finish, the diverged one stays"
expect_status 0 "--dry-run after it" -- "$S2HC" grid $G "${D[@]}" --out "$V" --dry-run
expect_out "^ +1 +s2hc-n4-s1337: skip: diverged at step 5 \(remove its directory to retry\)$" "--dry-run: the diverged point skipped, its step and how to retry"
expect_out "would run 0 .*skip 3, refuse 0, fail 0" "and counted with the finished ones as skipped"
# a longer train.steps does not make a diverged point one to extend: --extend would go on
# from its last checkpoint under the longer schedule and record it finished, its
# divergence gone (it did so, from step 0 here: the run had saved no checkpoint)
expect_status 0 "--extend --dry-run of a diverged point whose train.steps grew" -- "$S2HC" grid $G "${D[@]}" --out "$V" \
  --set train.steps=26 --extend --dry-run
expect_out "^ +1 +s2hc-n4-s1337: refuse: the config changed \(train.steps: 20 \(stored run\) vs 26 \(grid\); the run diverged at step 5, which --extend does not train further\); --force reruns it$" \
  "it is refused, saying why it is not extended"
expect_out "would run 2 .*refuse 1" "the others are extended"
expect_status 1 "grid --extend --job of the diverged point" -- "$S2HC" grid $G "${D[@]}" --out "$V" --set train.steps=26 --extend --job 1
h5dump -a /status "$V/s2hc-n4-s1337/run.h5" 2>/dev/null | grep -q '"diverged"' && ok "its run stays diverged" \
  || fail "status: $(h5dump -a /status "$V/s2hc-n4-s1337/run.h5" 2>&1 | grep '(0)')"

# ---- Slurm scripts, and submit.sh against a stand-in sbatch
S=$TMP/slurm
expect_status 0 "--slurm writes the scripts" -- "$S2HC" grid $G "${D[@]}" --out "$S" --slurm
A=$S/slurm/array.sbatch; R=$S/slurm/report.sbatch; U=$S/slurm/submit.sh
grep -q '^#SBATCH --array=0-2%2$' "$A" && ok "array: --array=0-2%2" || fail "array line: $(grep array "$A")"
grep -q '^#SBATCH --time=00:05:00$' "$A" && ok "array: --time from the slurm block" || fail "no --time"
grep -q '^#SBATCH --cpus-per-task=1$' "$A" && ok "array: --cpus-per-task" || fail "no --cpus-per-task"
grep -q "^#SBATCH --output=$S/slurm/%A_%a.out$" "$A" && ok "array: output per task" || fail "no --output"
# (a word with a character the shell takes otherwise single-quoted, as the script has it:
# a checkout under /home/o'brien too)
shq() { case $1 in '' | *[!A-Za-z0-9_./=:,+@%-]*) local q="'\\''"; printf "'%s'" "${1//\'/$q}" ;; *) printf %s "$1" ;; esac; }
grep -qF "grid $(shq "$PWD/experiments/smoke.yaml") --out $(shq "$S") --set $(shq "data.dir=$TMP/data") --set data.train=synth --job \"\$SLURM_ARRAY_TASK_ID\"" "$A" \
  && ok "array: each task runs its point with the same --set" || fail "array command: $(tail -n 1 "$A")"
grep -q -- '--kill-on-invalid-dep=yes' "$R" && grep -q -- "--list" "$R" && ok "report: --list, kill on invalid dependency" || fail "report script"
grep -q -- '--dependency=afterok:"$array"' "$U" && grep -q -- '--parsable' "$U" && ok "submit.sh chains afterok" || fail "submit.sh"
cat > "$TMP/fake-sbatch" <<'SH'
#!/bin/sh
n=$(( $(cat "$0.n" 2>/dev/null || echo 100) + 1 )); echo $n > "$0.n"
echo "$*" >> "$0.log"; echo "$n;cluster"
SH
chmod +x "$TMP/fake-sbatch"
expect_status 0 "submit.sh with a stand-in sbatch" -- env SBATCH="$TMP/fake-sbatch" sh "$U"
expect_out "array job 101 \(3 tasks\), report job 102 \(afterok:101\)" "submit.sh reports both jobs"
grep -q -- "--dependency=afterok:101 --kill-on-invalid-dep=yes .*report.sbatch" "$TMP/fake-sbatch.log" && ok "the report depends on the array's job id" || fail "$(cat "$TMP/fake-sbatch.log")"
if [ -x "$A" ] && [ -x "$U" ]; then ok "scripts are executable"; else fail "scripts not executable"; fi
# a grid file, folder and out with spaces, quotes, # and %: sbatch reads each #SBATCH line
# as words (whitespace splits, quotes and backslashes as in the shell, an unquoted # ends
# it); each option must stay one word with the path's value (% as %% in a file name)
sbatch_args() { # the words sbatch reads from the #SBATCH lines of $1, one a line
  perl -ne 'next unless s/^#SBATCH\s+//; chomp; my ($w, $q, $any) = ("", "", 0);
    for (my $i = 0; $i < length; $i++) { my $c = substr($_, $i, 1);
      if ($c eq "\\") { $w .= substr($_, ++$i, 1); $any = 1 }
      elsif ($q ne "") { if ($c eq $q) { $q = "" } else { $w .= $c } }
      elsif ($c eq "\"" || $c eq "\x27") { $q = $c; $any = 1 }
      elsif ($c eq "#") { last }
      elsif ($c =~ /\s/) { print "$w\n" if $any; ($w, $any) = ("", 0) }
      else { $w .= $c; $any = 1 } }
    print "$w\n" if $any' "$1"
}
O="$TMP/odd dir #1/it's \"q\""
mkdir -p "$O" && sed "s|^base: .*|base: $PWD/experiments/tiny.yaml|" $G > "$O/my grid.yaml"
(cd "$O" && "$S2HC" grid "my grid.yaml" "${D[@]}" --out "out 100%" --slurm >"$TMP/out" 2>&1) \
  && ok "--slurm in a folder with spaces, quotes and #" || fail "--slurm, odd paths: $(tail -n 3 "$TMP/out")"
for s in array report; do
  sbatch_args "$O/out 100%/slurm/$s.sbatch" > "$TMP/args"
  grep -Fxq -- "--chdir=$O" "$TMP/args" && grep -Fxq -- "--job-name=s2hc-my grid$([ $s = report ] && echo -report)" "$TMP/args" \
    && grep -Fxq -- "--output=$O/out 100%%/slurm/$([ $s = report ] && echo 'report-%j' || echo '%A_%a').out" "$TMP/args" \
    && ok "$s.sbatch: --chdir, --job-name and --output are one word each for sbatch" \
    || fail "$s.sbatch: sbatch reads: $(tr '\n' ' ' < "$TMP/args")"
  grep -vq -- '^--' "$TMP/args" && fail "$s.sbatch: stray words: $(grep -v -- '^--' "$TMP/args" | tr '\n' ' ')" \
    || ok "$s.sbatch: no stray word"
  bash -n "$O/out 100%/slurm/$s.sbatch" && ok "$s.sbatch: valid bash" || fail "$s.sbatch: bash -n"
done
# the task's command, as bash splits it: the odd paths each one word, quoted where needed
grep '^exec ' "$O/out 100%/slurm/array.sbatch" | sed 's/^exec [^ ]*/printf "%s\\n"/' > "$TMP/words.sh"
SLURM_ARRAY_TASK_ID=0 bash "$TMP/words.sh" > "$TMP/words"
grep -Fxq -- "$O/my grid.yaml" "$TMP/words" && grep -Fxq -- "$O/out 100%" "$TMP/words" && grep -Fxq -- "data.train=synth" "$TMP/words" \
  && ok "array.sbatch's command: the grid file and --out one word each" || fail "words: $(tr '\n' '|' < "$TMP/words")"
# a # alone in the folder (no space or quote beside it to call for quotes: sbatch's value
# would end at it), a grid file whose path's only odd character is a $ and an --out whose
# is a space (bash would expand the one and split at the other)
O2="$TMP/hash#dir"; O2grid="$TMP/d\$HOME/g.yaml"; O2out="$TMP/o ut"
mkdir -p "$O2" "${O2grid%/*}" && sed "s|^base: .*|base: $PWD/experiments/tiny.yaml|" $G > "$O2grid"
(cd "$O2" && "$S2HC" grid "$O2grid" "${D[@]}" --out "$O2out" --slurm >"$TMP/out" 2>&1) \
  && ok "--slurm in a folder with a #, a grid file with a \$, an --out with a space" || fail "--slurm, #, \$ and space: $(tail -n 3 "$TMP/out")"
sbatch_args "$O2out/slurm/array.sbatch" > "$TMP/args"
grep -Fxq -- "--chdir=$O2" "$TMP/args" && ok "--chdir keeps the folder's # for sbatch" || fail "sbatch reads: $(tr '\n' ' ' < "$TMP/args")"
grep '^exec ' "$O2out/slurm/array.sbatch" | sed 's/^exec [^ ]*/printf "%s\\n"/' > "$TMP/words.sh"
SLURM_ARRAY_TASK_ID=0 bash "$TMP/words.sh" > "$TMP/words"
grep -Fxq -- "$O2out" "$TMP/words" && grep -Fxq -- "$O2grid" "$TMP/words" \
  && ok "array.sbatch's command: a path with a \$ and one with a space, one word each, as they are" \
  || fail "words: $(tr '\n' '|' < "$TMP/words")"
# from a folder deeper than PATH_MAX (getcwd cannot give it) the scripts cannot hold
# absolute paths: refused, nothing written (they said --chdir=. and cd '.', which run
# from wherever sbatch or submit.sh is started)
seg=$(printf '%0250d' 0); mkdir -p "$TMP/deep"
sed "s|^base: .*|base: $PWD/experiments/tiny.yaml|" $G > "$TMP/g-deep.yaml"
(cd "$TMP/deep" && for _ in $(seq 17); do mkdir "$seg" && cd "$seg" || exit 9; done && cp "$TMP/g-deep.yaml" g.yaml \
  && "$S2HC" grid g.yaml "${D[@]}" --out out --slurm) >"$TMP/out" 2>&1; st=$?
[ "$st" = 1 ] && grep -q "the current directory's is longer than PATH_MAX" "$TMP/out" \
  && [ -z "$(find "$TMP/deep" -name slurm)" ] && ok "--slurm from a folder deeper than PATH_MAX is refused" \
  || fail "--slurm deeper than PATH_MAX: exit $st, $(tail -n 2 "$TMP/out" | cut -c1-200)"
rm -rf "$TMP/deep"
# a slurm value that is not one word would be split by sbatch: refused where it is written
sed "s|^base: .*|base: $PWD/experiments/tiny.yaml|; s|^  time: .*|  time: \"00:05:00 #\"|" $G > "$TMP/badslurm.yaml"
grep -q '00:05:00 #' "$TMP/badslurm.yaml" || fail "badslurm.yaml: the smoke grid has no slurm time to replace"
expect_status 2 "slurm.time with a space and a #" -- "$S2HC" grid "$TMP/badslurm.yaml" "${D[@]}" --out "$TMP/bs" --slurm
expect_out "badslurm.yaml:[0-9]+:[0-9]+: .*slurm.time: '00:05:00 #': one word" "names the file, line and key"
[ ! -e "$TMP/bs" ] && ok "nothing written" || fail "a refused slurm block wrote $TMP/bs"
# a point that cannot be started (a file where its directory should be): failed, and the
# grid exits 1 (it exited 0, counting the point as left: nothing on disk said it failed)
printf 'base: %s/experiments/tiny.yaml\nset: {train.steps: 2, train.warmup: 1, model.n_layer: 1, model.n_embd: 32, model.block_size: 32, train.batch: 2, train.eval_every: 0, train.eval_batches: 1, probe.every: 0, probe.final_samples: 0, data.ood: []}\nsweep:\n  train.seed: [1, 2]\nname: "p{train.seed}"\n' "$PWD" > "$TMP/blocked.yaml"
mkdir -p "$TMP/blocked" && echo x > "$TMP/blocked/p2"
expect_status 1 "a point that cannot start fails the grid" -- "$S2HC" grid "$TMP/blocked.yaml" "${D[@]}" --out "$TMP/blocked" -j 1
expect_out "FAILED +#1 p2: cannot open .*p2/.lock" "the event names the point and the file"
expect_out "1/2 finished, 1 failed" "the summary counts it failed"
grep -q '^1,p2,.*,failed,' "$TMP/blocked/index.csv" && ok "index.csv says failed too" \
  || fail "index.csv: $(grep '^1,' "$TMP/blocked/index.csv")"
# a point whose config.yaml cannot be written (a directory there): failed in index.csv too
# (it read pending: only the summary knew)
rm -rf "$TMP/blocked" && mkdir -p "$TMP/blocked/p2/config.yaml"
expect_status 1 "a point whose config.yaml cannot be written" -- "$S2HC" grid "$TMP/blocked.yaml" "${D[@]}" --out "$TMP/blocked" -j 1
grep -q '^1,p2,.*,failed,' "$TMP/blocked/index.csv" && ok "index.csv says failed" \
  || fail "index.csv: $(grep '^1,' "$TMP/blocked/index.csv")"
# an index.csv that cannot be written: said, and the grid exits 1
rm -rf "$TMP/blocked" && mkdir -p "$TMP/blocked/p1/grid.status"
expect_status 1 "a grid.status that cannot be written fails the grid" -- "$S2HC" grid "$TMP/blocked.yaml" "${D[@]}" --out "$TMP/blocked" -j 1
expect_out "grid.status could not be written" "says so"
# a point stopped under 2 threads keeps them when a later runner resumes it, whatever
# that runner's share per point (a step's bits depend on the batch's cut): it ends with
# the bits of the uninterrupted point
O=$TMP/thr; P=identity-n4-s1337
SLURM_CPUS_PER_TASK=2 "$S2HC" grid $G "${D[@]}" --out "$O" --job 0 >/dev/null 2>&1
cp "$O/$P/ckpt.h5" "$TMP/thr-ref.h5"
grep -q '^  threads: 2$' "$O/$P/config.yaml" && ok "--job 0 on 2 cores: 2 threads" || fail "config.yaml: $(grep threads "$O/$P/config.yaml")"
rm -f "$O/$P/ckpt.h5" "$O/$P/run.h5" "$O/$P/grid.status"
"$S2HC" train "$O/$P/config.yaml" --stop-after 10 --quiet >/dev/null 2>&1
expect_status 0 "the grid resumes it beside two fresh points" -- env SLURM_CPUS_PER_TASK=2 "$S2HC" grid $G "${D[@]}" --out "$O" -j 2
expect_out "resume  #0 $P at step 10/20 \(2 threads, as it trained\)" "it says it keeps the point's 2 threads"
expect_out "2 at a time, 1 thread each" "the fresh points get the runner's share"
if command -v h5diff >/dev/null; then
  h5diff -q "$TMP/thr-ref.h5" "$O/$P/ckpt.h5" /model /model >/dev/null 2>&1 \
    && ok "the resumed point ends with the uninterrupted point's weights" || fail "the resumed point's weights differ"
fi
# the ETA counts a resumed point's earlier runs (grid.status's wall_s): a point resumed a
# step before its end is not a run of a second (it read "ETA 2s" for 2 points to go)
O=$TMP/eta
"$S2HC" grid $G "${D[@]}" --out "$O" --job 0 >/dev/null 2>&1
rm -f "$O/$P/ckpt.h5" "$O/$P/run.h5"
"$S2HC" train "$O/$P/config.yaml" --stop-after 19 --quiet >/dev/null 2>&1
printf 'state=interrupted\nexit_code=130\nwall_s=600.000\n' > "$O/$P/grid.status"
expect_status 0 "a grid resuming a point stopped a step before its end" -- "$S2HC" grid $G "${D[@]}" --out "$O" -j 1
expect_out "done    #0 $P in [0-9]+s: .*2 left, .*ETA 2[0-9]m[0-9]+s" "the ETA takes the point's 600 s of earlier runs"
# ... and weighs each point left by its work: the rc point of twice the steps counts twice
sed "s|^base: tiny.yaml|base: $PWD/experiments/tiny.yaml|" $G > "$TMP/eta.yaml"
printf 'override:\n  - when: {residual.method: rc}\n    set: {train.steps: 40}\n' >> "$TMP/eta.yaml"
O=$TMP/eta2
"$S2HC" grid "$TMP/eta.yaml" "${D[@]}" --out "$O" --job 0 >/dev/null 2>&1
rm -f "$O/$P/ckpt.h5" "$O/$P/run.h5"
"$S2HC" train "$O/$P/config.yaml" --stop-after 19 --quiet >/dev/null 2>&1
printf 'state=interrupted\nexit_code=130\nwall_s=600.000\n' > "$O/$P/grid.status"
expect_status 0 "a grid whose points left differ in length" -- "$S2HC" grid "$TMP/eta.yaml" "${D[@]}" --out "$O" -j 1
expect_out "done    #0 $P in [0-9]+s: .*2 left, .*ETA 3[0-9]m[0-9]+s" "the ETA counts 20 + 40 steps left at 600 s per 20"
# ... at the rate of the point's own kind (method and n) once one of that kind finished: an
# s2hc point of 600 s and two fast identity points done, the s2hc point left takes ~600 s
# (at the rate of all three, ~200 s)
sed -e "s|^base: tiny.yaml|base: $PWD/experiments/tiny.yaml|" -e '/^sweep:/,$d' $G > "$TMP/eta3.yaml"
cat >> "$TMP/eta3.yaml" <<'YAML'
include:
  - {residual.method: s2hc, residual.n_streams: 4, train.seed: 1}
  - {residual.method: identity, residual.n_streams: 4, train.seed: 1}
  - {residual.method: identity, residual.n_streams: 4, train.seed: 2}
  - {residual.method: s2hc, residual.n_streams: 4, train.seed: 2}
name: "{residual.method}-s{train.seed}"
YAML
O3=$TMP/eta3 # (O stays the grid of the tests below)
"$S2HC" grid "$TMP/eta3.yaml" "${D[@]}" --out "$O3" --job 0 >/dev/null 2>&1
rm -f "$O3/s2hc-s1/ckpt.h5" "$O3/s2hc-s1/run.h5"
"$S2HC" train "$O3/s2hc-s1/config.yaml" --stop-after 19 --quiet >/dev/null 2>&1
printf 'state=interrupted\nexit_code=130\nwall_s=600.000\n' > "$O3/s2hc-s1/grid.status"
expect_status 0 "a grid of two kinds of point" -- "$S2HC" grid "$TMP/eta3.yaml" "${D[@]}" --out "$O3" -j 1
expect_out "done    #2 identity-s2 in [0-9]+s: .*1 left, .*ETA (9m[3-5][0-9]s|10m[0-2][0-9]s)" \
  "the ETA takes the s2hc point's rate for the s2hc point left"
# a point trained by hand (`s2hc train` on its config, outside any runner) is running
# elsewhere for the grid, not a point that failed
"$S2HC" train "$O/$P/config.yaml" --set run.out="$TMP/hand" --set train.steps=100000 --force --quiet >/dev/null 2>&1 &
HP=$!
wait_for 300 test -f "$TMP/hand/$P/.train.lock"
expect_status 0 "a grid beside a training started by hand" -- "$S2HC" grid $G "${D[@]}" --out "$TMP/hand" --job 0 \
  --set train.steps=100000
expect_out "0 failed, 0 diverged, 0 refused, 0 left, 1 running elsewhere" "it counts the point as running elsewhere"
expect_status 0 "--dry-run beside it" -- "$S2HC" grid $G "${D[@]}" --out "$TMP/hand" --set train.steps=100000 --dry-run
expect_out "$P: skip: running elsewhere \(locked\)" "--dry-run skips the point"
expect_out "skip 1, refuse 0, fail 0; nothing was written" "--dry-run counts it as skipped"
[ "$(csv_col "$TMP/hand/index.csv" state "$P")" = running ] && ok "index.csv: running" \
  || fail "index.csv: $(csv_col "$TMP/hand/index.csv" state "$P")"
kill -TERM $HP; wait $HP 2>/dev/null
# the temporary files of a runner killed between write and rename (index.csv.PID.tmp,
# config.yaml.PID.tmp) go at the next run; a live process's stay
sleep 600 & LIVE=$! # killed below; alive for however long the grid run takes
touch "$TMP/hand/index.csv.999999999.tmp" "$TMP/hand/index.csv.$LIVE.tmp" "$TMP/hand/$P/config.yaml.999999999.tmp" \
  "$TMP/hand/index.csv.x999999999.tmp"
"$S2HC" grid $G "${D[@]}" --out "$TMP/hand" --job 0 --set train.steps=2 --set train.warmup=1 --force >/dev/null 2>&1
[ ! -e "$TMP/hand/index.csv.999999999.tmp" ] && [ ! -e "$TMP/hand/$P/config.yaml.999999999.tmp" ] \
  && ok "a dead runner's temporary files are removed" || fail "stale temporary files left: $(ls "$TMP/hand" "$TMP/hand/$P" | grep tmp)"
[ -e "$TMP/hand/index.csv.$LIVE.tmp" ] && ok "a live process's is kept" || fail "a live process's temporary file was removed"
[ -e "$TMP/hand/index.csv.x999999999.tmp" ] && ok "a file not named as the runner's is kept" \
  || fail "index.csv.x999999999.tmp, not the runner's, was removed"
kill $LIVE 2>/dev/null; wait $LIVE 2>/dev/null
# expansion: a pinned swept key reaches the include entries that leave it out; a pin that
# drops every include entry of a sweepless grid leaves no point (it made one of the
# defaults); the same run twice, names of the grid's own files, empty exclude and when
# entries, keys twice in an override entry or in slurm:, a line break in slurm.extra,
# {run.name} in name:, and a launch: too long for the child's argv are refused by name
TB=$PWD/experiments/tiny.yaml
g() { printf "base: $TB\n$2" > "$TMP/$1.yaml"; }
g pin 'sweep: {preset: [tiny, small], train.seed: [1, 2]}\ninclude: [{residual.method: hc}]\nname: "{preset}-{residual.method}-s{train.seed}"\n'
expect_status 0 "--set on a swept key" -- "$S2HC" grid "$TMP/pin.yaml" --list --set preset=small --set train.seed=1
expect_out "small-hc-s1 " "the include entry takes the pinned values too"
grep -q "none-hc\|s1337" "$TMP/out" && fail "an include point kept the base's values: $(grep hc "$TMP/out")" || ok "no point keeps the base's"
g inc 'include: [{residual.method: hc, train.seed: 1}, {residual.method: mhc, train.seed: 2}]\n'
expect_status 2 "a pin that drops every include entry" -- "$S2HC" grid "$TMP/inc.yaml" --list --set train.seed=99
expect_out "no points \(--set gave a key another value than every include entry\)" "says why"
# refused NAME GRID-BODY WHAT PATTERN: the grid file NAME.yaml; its --list exits 2
# and the message matches)
refused() { g "$1" "$2"; expect_status 2 "$3" -- "$S2HC" grid "$TMP/$1.yaml" --list; expect_out "$4" "$3: says why"; }
refused dup 'sweep: {train.seed: [1, 1]}\n' \
  "a value twice in a sweep" "points 0 and 1 are the same run"
refused ix 'sweep: {train.seed: [1]}\nname: "index.csv"\n' \
  "a point named index.csv" "ix.yaml:3:7: point 0 is named 'index.csv', which is the grid's own index"
refused ex 'sweep: {train.seed: [1]}\nexclude: [{}]\n' \
  "an empty exclude entry" "ex.yaml:3:11: an empty exclude entry would exclude every point"
refused ow 'sweep: {train.seed: [1]}\noverride: [{when: {}, set: {train.lr: 0.005}}]\n' \
  "an empty when:" "an empty when: would match every point"
refused ov 'sweep: {train.seed: [1, 2]}\noverride: [{when: {train.seed: 1}, set: {train.lr: 0.005}, when: {train.seed: 2}}]\n' \
  "when: twice in an override entry" "ov.yaml:3:60: override: duplicate key 'when' in one entry \(first at 3:19\)"
refused sl 'sweep: {train.seed: [1]}\nslurm: {time: "01:00:00", time: "02:00:00"}\n' \
  "a slurm key twice" "slurm: duplicate key 'time' \(first at 3:9\)"
refused sx 'sweep: {train.seed: [1]}\nslurm: {extra: ["--account=lab\\ntouch /tmp/x"]}\n' \
  "a line break in slurm.extra" "slurm.extra: one line per item"
refused rn 'sweep: {train.seed: [1]}\nname: "{run.name}-{train.seed}"\n' \
  "{run.name} in name:" "key 'run.name': in name: set by the grid itself"
refused ln "sweep: {train.seed: [1]}\nlaunch: \"$(printf 'w%s ' $(seq 60))\"\n" \
  "a launch: of 60 words" "launch.*60 words; at most 58"
# the base is checked key by key; its cross-field rules hold for each point, which the
# grid may complete (a base of rc at n = 4 with set: n_streams 1)
printf 'residual: {method: rc, n_streams: 4}\n' > "$TMP/rcbase.yaml"
printf 'base: rcbase.yaml\nset: {residual.n_streams: 1}\nsweep: {train.seed: [1]}\n' > "$TMP/rcb.yaml"
expect_status 0 "a base the grid's set: makes whole" -- "$S2HC" grid "$TMP/rcb.yaml" --list
expect_out "rc-n1-s1" "its point"
printf 'base: rcbase.yaml\nsweep: {train.seed: [1]}\n' > "$TMP/rcb2.yaml"
expect_status 2 "a point the base leaves invalid" -- "$S2HC" grid "$TMP/rcb2.yaml" --list
expect_out "point 0 \(rc-n4-s1\): key 'residual.n_streams'" "names the point and the key"
expect_status 2 "--list with --slurm" -- "$S2HC" grid $G "${D[@]}" --out "$TMP/x" --list --slurm
expect_out "grid: --list --slurm: one at a time" "says so"
expect_status 2 "--dry-run with --job" -- "$S2HC" grid $G "${D[@]}" --out "$TMP/x" --dry-run --job 1
mkdir -p "$TMP/adir"
printf 'base: adir\nsweep: {train.seed: [1]}\n' > "$TMP/bdir.yaml"
expect_status 2 "a base that is a directory" -- "$S2HC" grid "$TMP/bdir.yaml" --list
expect_out "bdir.yaml:1:7: base: 'adir' is a directory" "names the grid file, line and key"
# a second YAML document in a grid file is refused, not ignored
{ cat "$TMP/blocked.yaml"; printf -- '---\nsweep: {train.seed: [3]}\n'; } > "$TMP/twodocs.yaml"
expect_status 2 "a grid file with two documents exits 2" -- "$S2HC" grid "$TMP/twodocs.yaml" "${D[@]}" --out "$TMP/twodocs" --list
expect_out "twodocs.yaml:[0-9]+:1: a grid file holds one YAML document" "the error names file and line"
# a point's own train.threads is the most it gets, whatever point 0 sets: swept 1 and 2,
# the second point trains with 2 threads (it got point 0's 1 before, while index.csv and
# --dry-run said 2); nothing is oversubscribed (one run at a time)
printf 'base: %s/experiments/tiny.yaml\nset: {model.n_embd: 32, model.block_size: 32, train.batch: 4, train.steps: 2, train.warmup: 1, train.eval_every: 0, probe.every: 0, probe.final_samples: 0, data.ood: []}\nsweep:\n  train.threads: [1, 2]\n' \
  "$PWD" > "$TMP/thr.yaml"
expect_status 0 "a grid sweeping train.threads" -- "$S2HC" grid "$TMP/thr.yaml" "${D[@]}" --out "$TMP/thr"
if [ "${cores:-1}" -ge 2 ]; then
  expect_out "1 at a time, 2 threads each" "room for the point that asks for 2 threads"
  for t in 1 2; do
    grep -q "^  threads: $t$" "$TMP/thr/identity-n4-s1337-$t/config.yaml" && ok "the train.threads=$t point trains with $t" \
      || fail "the train.threads=$t point: $(grep threads: "$TMP/thr/identity-n4-s1337-$t/config.yaml")"
  done
fi
# the exit status of a point's command: 0 without a finished run.h5 is a failure (here
# launch: true, which trains nothing); a command that the runner's stop ends with another
# status than a training's (1, from a shell's trap) is interrupted, not failed
printf 'base: %s/experiments/tiny.yaml\nset: {data.ood: [], data.dir: "%s", data.train: synth}\nsweep: {train.seed: [1]}\nname: "l"\nlaunch: "true"\n' \
  "$PWD" "$TMP/data" > "$TMP/ltrue.yaml"
expect_status 1 "a command that exits 0 but trains nothing" -- "$S2HC" grid "$TMP/ltrue.yaml" --out "$TMP/ltrue"
expect_out "FAILED  #0 l \\(exit 0\\) after .*: exited 0 but run.h5 does not say finished" "says so"
[ "$(csv_col "$TMP/ltrue/index.csv" state l)" = failed ] && ok "index.csv: failed" \
  || fail "index.csv: $(csv_col "$TMP/ltrue/index.csv" state l)"
# a file where a point's run directory goes: no run can start there, --list says failed
mkdir -p "$TMP/lfile" && touch "$TMP/lfile/l"
expect_status 0 "--list with a file in place of a run directory" -- "$S2HC" grid "$TMP/ltrue.yaml" --out "$TMP/lfile" --list
expect_out "^ +0 +l +failed " "that point is failed"
printf '#!/bin/sh\nsleep 30 &\ns=$!\ntrap "kill $s; exit 1" TERM\necho "(test) trap set"\nwait $s\nexit 1\n' > "$TMP/trapterm"
chmod +x "$TMP/trapterm"
sed "s|launch: \"true\"|launch: \"$TMP/trapterm\"|" "$TMP/ltrue.yaml" > "$TMP/ltrap.yaml"
# grid_started YAML OUT: the grid of $TMP/YAML.yaml into $TMP/OUT in the background ($pid,
# its output in $TMP/OUT.out), once its point l's command has its trap (the line it
# writes into its train.log then; a signal 0.3 s after the runner's start line could reach
# a shell on a loaded machine before its trap, and end it by the signal)
grid_started() {
  fresh "$TMP/$2.out"
  "$S2HC" grid "$TMP/$1.yaml" --out "$TMP/$2" > "$TMP/$2.out" 2>&1 &
  pid=$!
  wait_for 300 grep -qs "(test) trap set" "$TMP/$2/l/train.log" || fail "$2: the point's trap is not set"
}
grid_started ltrap ltrap
kill -TERM $pid; wait $pid; rc=$?
[ "$rc" = 130 ] && ok "the stopped runner exits 130" || fail "the stopped runner exits $rc"
[ "$(csv_col "$TMP/ltrap/index.csv" state l)" = interrupted ] && ok "a point its stop ended with exit 1 is interrupted" \
  || fail "index.csv: $(csv_col "$TMP/ltrap/index.csv" state l)"
# SIGHUP (the terminal closed) as SIGTERM: the runner died of it, its point left running
grid_started ltrap lhup
kill -HUP $pid; wait $pid; rc=$?
[ "$rc" = 130 ] && [ "$(csv_col "$TMP/lhup/index.csv" state l)" = interrupted ] && ok "SIGHUP: the runner stops its point, exit 130" \
  || fail "SIGHUP: runner exit $rc, state $(csv_col "$TMP/lhup/index.csv" state l)"
# a terminal that closes sends the runner SIGHUP twice (the shell's and the kernel's): the
# second is not "again to kill", and the point finishes its save (here half a second)
printf '#!/bin/sh\nsleep 30 &\ns=$!\ntrap "kill $s; sleep 0.5; touch %s/hup2.saved; exit 1" TERM\necho "(test) trap set"\nwait $s\nexit 1\n' "$TMP" \
  > "$TMP/trapslow"
chmod +x "$TMP/trapslow"
sed "s|launch: \"true\"|launch: \"$TMP/trapslow\"|" "$TMP/ltrue.yaml" > "$TMP/lslow.yaml"
grid_started lslow lhup2
kill -HUP $pid
for _ in $(seq 100); do grep -q "to save and stop" "$TMP/lhup2.out" && break; sleep 0.01; done
kill -HUP $pid 2>/dev/null; wait $pid; rc=$?
[ "$rc" = 130 ] && [ -e "$TMP/hup2.saved" ] && ok "two SIGHUPs: the runner lets its point save, exit 130" \
  || fail "two SIGHUPs: runner exit $rc, the point's save $( [ -e "$TMP/hup2.saved" ] && echo done || echo killed)"
# a runner started with SIGINT ignored (a script's background job, as grid_started's
# plain `&`) keeps it so, and so do its points: a SIGINT stops neither
printf '#!/bin/sh\ngrep SigIgn /proc/$$/status > %s/lint.sigign\nsleep 30 &\ns=$!\ntrap "kill $s; exit 1" TERM\necho "(test) trap set"\nwait $s\nexit 1\n' \
  "$TMP" > "$TMP/trapign"
chmod +x "$TMP/trapign"
sed "s|launch: \"true\"|launch: \"$TMP/trapign\"|" "$TMP/ltrue.yaml" > "$TMP/lint.yaml"
grid_started lint lint
kill -INT $pid; sleep 0.5
kill -0 $pid 2>/dev/null && ! grep -q "to save and stop" "$TMP/lint.out" && ok "SIGINT ignored at start: the runner goes on" \
  || fail "SIGINT ignored at start: the runner stopped: $(tail -n 2 "$TMP/lint.out")"
grep -q "SIGINT (Ctrl-C) is ignored: .*stop it with SIGTERM (kill $pid)" "$TMP/lint.out" \
  && ok "the runner says SIGINT is ignored and how to stop it" || fail "no word of SIGINT ignored: $(head -n 3 "$TMP/lint.out")"
for _ in $(seq 100); do [ -s "$TMP/lint.sigign" ] && break; sleep 0.1; done # the point's shell, however loaded
ign=$(awk '{print $2}' "$TMP/lint.sigign" 2>/dev/null)
[ -n "$ign" ] && [ $(( 0x$ign & 2 )) != 0 ] && ok "its point starts with SIGINT ignored too" || fail "the point's SigIgn: '$ign'"
kill -TERM $pid; wait $pid; rc=$?
[ "$rc" = 130 ] && ok "SIGINT ignored at start: SIGTERM still stops the runner, exit 130" || fail "then SIGTERM: exit $rc"
# a point's own train.threads caps the share -j leaves it (one point to run, -j 4)
printf 'base: %s/experiments/tiny.yaml\nset: {train.threads: 1, data.ood: []}\nsweep: {train.seed: [1]}\n' "$PWD" > "$TMP/thr1.yaml"
expect_status 0 "--dry-run -j 4 of one point of train.threads 1" -- "$S2HC" grid "$TMP/thr1.yaml" "${D[@]}" --out "$TMP/thr1" --dry-run -j 4
expect_out "would run 1 \\(1 at a time, 1 thread each\\)" "its train.threads caps the share"
finish grid_cli
