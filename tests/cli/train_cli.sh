#!/usr/bin/env bash
# The README's tour on a small corpus the test makes: train, --set, eval, --resume, h5dump.
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh
make_synth_data "$TMP/data"
[ -s "$TMP/data/synth/train.bin" ] && ok "data import wrote shards" || fail "no shards from data import"
cat > "$TMP/t.yaml" <<YAML
model: {n_layer: 2, n_head: 2, n_embd: 32, block_size: 32}
residual: {method: identity, n_streams: 4}
train: {batch: 4, steps: 30, warmup: 3, lr: 0.003, min_lr: 0.0003, eval_every: 10, eval_batches: 2, ckpt_every: 10}
data: {dir: $TMP/data, train: synth, ood: [synth_ood]}
run: {name: tour, out: $TMP/runs}
probe: {every: 10, final_samples: 8}
YAML
expect_status 0 "train runs" -- "$S2HC" train "$TMP/t.yaml"
expect_out "step +30/30" "progress shows the step"
expect_out "tok/s" "progress shows tokens/s"
expect_out "ETA" "progress shows an ETA"
expect_out "n_layer: 2" "the resolved config is printed"
# the probes' time in milliseconds below a second (a run this short read "0.0 s, 2.63 %")
expect_out "^probes: (0\.[0-9]{3}|[1-9][0-9]*\.[0-9]) s, [0-9.]+% of the training's wall time" \
  "the probes' time, in milliseconds below a second"
[ -f "$TMP/runs/tour/run.h5" ] && ok "run.h5 written" || fail "run.h5 missing"
[ -f "$TMP/runs/tour/ckpt.h5" ] && ok "ckpt.h5 written" || fail "ckpt.h5 missing"
ls "$TMP/runs/tour/"*.tmp >/dev/null 2>&1 && fail "temporary files left behind" || ok "no temporary files left"
if command -v h5dump >/dev/null; then
  expect_status 0 "h5dump -H reads run.h5" -- h5dump -H "$TMP/runs/tour/run.h5"
  expect_out 'DATASET "loss"' "/train/loss is there"
  expect_out 'ATTRIBUTE "description"' "datasets carry descriptions"
  expect_out 'DATASET "val_loss"' "/eval/val_loss is there"
  expect_status 0 "h5dump reads ckpt.h5" -- h5dump -H "$TMP/runs/tour/ckpt.h5"
  expect_out 'transformer.h.0.attn.c_attn.weight' "checkpoint uses nanoGPT names"
  expect_out 'transformer.h.1.mlp_hc.proj.weight' "checkpoint holds the frame weights"
fi
expect_status 2 "a second train of the same run is refused" -- "$S2HC" train "$TMP/t.yaml"
expect_out "--resume" "the refusal says how to continue"
rows_before=$(h5dump -d /eval/step "$TMP/runs/tour/run.h5" 2>/dev/null | grep -m1 DATASPACE)
expect_status 0 "--resume of a finished run" -- "$S2HC" train "$TMP/t.yaml" --resume
expect_out "already finished at step 30" "a finished run says there is nothing to do"
grep -q "nan" "$TMP/out" && fail "resume of a finished run prints nan" || ok "no nan on resume of a finished run"
rows_after=$(h5dump -d /eval/step "$TMP/runs/tour/run.h5" 2>/dev/null | grep -m1 DATASPACE)
[ "$rows_before" = "$rows_after" ] && ok "resume of a finished run adds no eval row" \
  || fail "eval rows changed on resume of a finished run: $rows_before -> $rows_after"
expect_status 0 "train with --set" -- "$S2HC" train "$TMP/t.yaml" --set model.n_layer=1 --set train.steps=5 --set run.name=small
expect_out "n_layer: 1" "--set changes the resolved config"
expect_status 0 "eval a run" -- "$S2HC" eval "$TMP/runs/tour"
expect_out "synth" "eval prints the out-of-domain corpus"
expect_out "ppl" "eval prints perplexity"
for b in abc -3 0 2x ''; do
  expect_status 2 "eval --batches '$b' is refused" -- "$S2HC" eval "$TMP/runs/tour" --batches "$b"
  expect_out "--batches" "the error names --batches"
done
# without the validation corpus eval fails and leaves the run file alone; --data finds it elsewhere
mv "$TMP/data" "$TMP/data.moved"
rows_before=$(h5dump -d /eval/step "$TMP/runs/tour/run.h5" 2>/dev/null | grep -m1 DATASPACE)
expect_status 1 "eval without the validation corpus fails" -- "$S2HC" eval "$TMP/runs/tour"
expect_out "synth/val.bin" "the error names the corpus file"
expect_out "--data DIR" "the error suggests --data"
rows_after=$(h5dump -d /eval/step "$TMP/runs/tour/run.h5" 2>/dev/null | grep -m1 DATASPACE)
[ "$rows_before" = "$rows_after" ] && ok "a failed eval adds no eval row" || fail "a failed eval changed the run file"
expect_status 0 "eval --data DIR" -- "$S2HC" eval "$TMP/runs/tour" --data "$TMP/data.moved"
expect_out "val +[0-9]+\.[0-9]+" "eval --data evaluates the validation split"
mv "$TMP/data.moved" "$TMP/data"
# an out-of-domain corpus that is gone: refused before anything is evaluated, the run
# file as it was (its earlier numbers would have stood beside this evaluation's)
mv "$TMP/data/synth_ood" "$TMP/synth_ood.moved"
sums=$(md5sum < "$TMP/runs/tour/run.h5")
expect_status 1 "eval without an out-of-domain corpus fails" -- "$S2HC" eval "$TMP/runs/tour"
expect_out "out-of-domain corpus 'synth_ood' \(key 'data.ood'" "the error names the corpus and the key"
[ "$(md5sum < "$TMP/runs/tour/run.h5")" = "$sums" ] && ok "and leaves the run file alone" || fail "the run file changed"
mv "$TMP/synth_ood.moved" "$TMP/data/synth_ood"
# eval --ood: other corpora than the run's data.ood, recorded beside its own
cp -r "$TMP/data/synth_ood" "$TMP/data/synth_other"
expect_status 0 "eval --ood of another corpus" -- "$S2HC" eval "$TMP/runs/tour" --ood synth_other
expect_out "synth_other +[0-9]+\.[0-9]+" "it evaluates the corpus named"
grep -q "synth_ood " "$TMP/out" && fail "eval --ood evaluated the run's data.ood too" || ok "and not the run's data.ood"
if command -v h5dump >/dev/null; then
  h5dump -d /eval/ood/synth_other/loss "$TMP/runs/tour/run.h5" >/dev/null 2>&1 && ok "run.h5 holds its loss" \
    || fail "no /eval/ood/synth_other/loss"
  h5dump -d /eval/ood/synth_ood/loss "$TMP/runs/tour/run.h5" >/dev/null 2>&1 && ok "beside the run's own corpus's" \
    || fail "/eval/ood/synth_ood/loss is gone"
fi
# a corpus named in 63 bytes (data import's longest): eval's corpus column as wide as its
# name, every row's loss and perplexity in the same columns (the long row's had moved right)
LONGC=an_out_of_domain_corpus_named_in_63_bytes_for_the_eval_table__x
cp -r "$TMP/data/synth_ood" "$TMP/data/$LONGC"
expect_status 0 "eval --ood of a 63-byte corpus name" -- "$S2HC" eval "$TMP/runs/tour" --ood "synth_ood,$LONGC"
widths=$(grep -E "^  (corpus|val|synth_ood|$LONGC) " "$TMP/out" | awk '{ print length($0) }' | sort -u | tr '\n' ' ')
[ "$widths" = "85 " ] && ok "eval: the header and every row end at column 85 (2 + 63 + 20)" \
  || fail "eval with a long corpus name: row lengths '$widths': $(grep -E '^  ' "$TMP/out")"
expect_status 0 "eval of short names" -- "$S2HC" eval "$TMP/runs/tour"
expect_out "^  corpus           loss        ppl$" "short names keep the 12-column header"
# eval --csv: a header and a row per run and corpus on stdout, nothing else there (a
# run's "== DIR ==" header and the progress on stderr); a folder with a comma quoted; the
# losses those the run files record (h5dump, in full) and the table shows
cp -r "$TMP/runs/tour" "$TMP/runs/t,our"
"$S2HC" eval "$TMP/runs/tour" "$TMP/runs/t,our/" --ood "synth_ood,$LONGC" --csv >"$TMP/eval.csv" 2>"$TMP/eval.err" \
  && ok "eval --csv of two runs" || fail "eval --csv: exit $?: $(tail -3 "$TMP/eval.err")"
grep -q "^== $TMP/runs/t,our/ (2/2) ==" "$TMP/eval.err" && ok "eval --csv: the runs' headers on stderr" \
  || fail "eval --csv: stderr: $(cat "$TMP/eval.err")"
"$S2HC" eval "$TMP/runs/tour" --ood "synth_ood,$LONGC" >"$TMP/eval.txt" 2>&1
if python3 - "$TMP/eval.csv" "$TMP/eval.txt" "$TMP/runs" "$LONGC" <<'PY'
import csv, math, subprocess, sys
csvf, txt, runs, longc = sys.argv[1:]
rows = list(csv.reader(open(csvf, newline="")))
assert rows[0] == "run,step,corpus,role,loss,ppl,batches,sequences,tokens".split(","), rows[0]
body = rows[1:]
assert len(body) == 6 and all(len(r) == 9 for r in body), rows
def last(path, ds):  # the last value of a dataset, in full
    out = subprocess.run(["h5dump", "--onlyattr=0", "-m", "%.17g", "-d", ds, path], capture_output=True, text=True, check=True).stdout
    data = out[out.index("DATA {"):]
    return float(data.replace("\n", " ").split(":")[-1].split("}")[0].split(",")[-1])
table = {l.split()[0]: float(l.split()[1]) for l in open(txt) if l.startswith("  ") and not l.startswith("  corpus")}
for i, (run, corpus, role) in enumerate([(runs + "/tour", "synth", "val"), (runs + "/tour", "synth_ood", "ood"),
                                         (runs + "/tour", longc, "ood"), (runs + "/t,our", "synth", "val"),
                                         (runs + "/t,our", "synth_ood", "ood"), (runs + "/t,our", longc, "ood")]):
    r = body[i]
    assert r[0] == run and r[1] == "30" and r[2] == corpus and r[3] == role, r
    assert r[6:] == ["2", "8", "256"], r  # 2 batches of 4 sequences of 32 tokens
    loss, ppl = float(r[4]), float(r[5])
    assert abs(ppl - math.exp(loss)) <= 1e-12 * ppl, r
    ds = "/eval/val_loss" if role == "val" else "/eval/ood/%s/loss" % corpus
    assert loss == last(run + "/run.h5", ds), (r, ds, last(run + "/run.h5", ds))
    assert "%.4f" % loss == "%.4f" % table["val" if role == "val" else corpus], (r, table)
PY
then ok "eval --csv: header, rows, the run files' losses in full, the table's"; else fail "eval --csv: $(cat "$TMP/eval.csv")"; fi
# its progress lines, shown from the start here, go to stderr with the headers: stdout
# holds the CSV alone
S2HC_TEST_PROGRESS_AFTER=0 "$S2HC" eval "$TMP/runs/tour" --csv >"$TMP/evp.csv" 2>"$TMP/evp.err"
grep -q '^eval: [0-9]*/[0-9]* batches' "$TMP/evp.err" && ! grep -v "^run,step,\|^$TMP/runs/tour,30," "$TMP/evp.csv" | grep -q . \
  && [ "$(wc -l <"$TMP/evp.csv")" = 3 ] && ok "eval --csv: the progress on stderr, the CSV alone on stdout" \
  || fail "eval --csv with progress: stdout $(cat "$TMP/evp.csv"), stderr $(cat "$TMP/evp.err")"
# inspect --csv quotes the folder with a comma as well (its rows had one field too many)
"$S2HC" inspect "$TMP/runs/t,our" --csv >"$TMP/insp.csv" 2>/dev/null
python3 -c 'import csv, sys; rows = list(csv.reader(open(sys.argv[1], newline="")))
assert len(rows) > 2 and all(len(r) == len(rows[0]) for r in rows) and all(r[0] == sys.argv[2] for r in rows[1:]), rows' \
  "$TMP/insp.csv" "$TMP/runs/t,our" && ok "inspect --csv: a folder with a comma is one field" \
  || fail "inspect --csv of a folder with a comma: $(head -3 "$TMP/insp.csv")"
rm -rf "$TMP/runs/t,our" "$TMP/data/$LONGC"
expect_status 2 "eval --ood of the training corpus is refused" -- "$S2HC" eval "$TMP/runs/tour" --ood synth
expect_out "'synth' is the training corpus" "the refusal says why"
expect_status 1 "eval --ood of a corpus not prepared fails" -- "$S2HC" eval "$TMP/runs/tour" --ood synth_ood,nope
expect_out "out-of-domain corpus 'nope' \(key 'data.ood' of eval --ood\)" "the error names the corpus"
expect_status 2 "resume with a changed model is refused" -- "$S2HC" train "$TMP/t.yaml" --resume --set model.n_embd=64
expect_out "differs" "the refusal names the difference"
expect_status 2 "resume with another train.steps is refused (it changes the lr schedule)" -- "$S2HC" train "$TMP/t.yaml" --resume --set train.steps=60
expect_out "steps: 30" "the refusal names train.steps"
expect_out "the length the cosine schedule decays over" "and says why"
expect_out "\-\-extend instead of \-\-resume" "and points to --extend"
expect_out "s2hc export\$" "and how to go on from its weights alone"
expect_out "train.init_from=$TMP/runs/tour/model.safetensors" "with the file export writes"
# --extend: a run goes on past its train.steps with its optimizer state and data order.
# With warmup = steps the first length's lr is the warm-up alone, which a longer run with
# the same warm-up shares: the extended run is the longer run, loss for loss.
xc=(--set train.steps=12 --set train.warmup=12 --set train.eval_every=6 --quiet)
"$S2HC" train "$TMP/t.yaml" --set run.name=ext "${xc[@]}" >/dev/null 2>&1
expect_status 2 "--extend with another lr is refused as --resume is" -- "$S2HC" train "$TMP/t.yaml" --set run.name=ext \
  "${xc[@]}" --extend --set train.steps=20 --set train.lr=0.002
expect_out "differs" "naming the difference"
expect_status 2 "--extend and --force" -- "$S2HC" train "$TMP/t.yaml" --set run.name=ext "${xc[@]}" --extend --force
expect_status 0 "--extend a finished run from 12 to 20 steps" -- "$S2HC" train "$TMP/t.yaml" --set run.name=ext \
  "${xc[@]}" --extend --set train.steps=20
expect_out "extending $TMP/runs/ext from 12 to 20 steps at step 12: the learning rate follows the schedule of 20 steps" \
  "it says so, with --quiet too"
"$S2HC" train "$TMP/t.yaml" --set run.name=ext20 "${xc[@]}" --set train.steps=20 >/dev/null 2>&1
if command -v h5dump >/dev/null; then
  series() { h5dump -d "$2" "$TMP/runs/$1/run.h5" 2>/dev/null | sed -n '/DATA {/,/}/p'; }
  [ -n "$(series ext /train/loss)" ] && [ "$(series ext /train/loss)" = "$(series ext20 /train/loss)" ] \
    && ok "the extended run's losses are the 20-step run's, bit for bit" || fail "extended: $(series ext /train/loss | head -3)"
  [ "$(series ext /eval/step | tr -s ' \n' ' ')" = "$(series ext20 /eval/step | tr -s ' \n' ' ')" ] \
    && ok "its evals at the same steps" || fail "evals: $(series ext /eval/step | tr -s ' \n' ' ')"
  h5dump -a /extensions "$TMP/runs/ext/run.h5" 2>/dev/null | grep -q '"12->20"' && ok "run.h5 records 12->20" \
    || fail "no extensions attribute"
fi
# train.eval_ood: the out-of-domain losses at every eval, a series beside /eval/val_loss
# whose last row is the final evaluation's /eval/ood/<corpus>/loss; turned on by a resume,
# the rows before it are NaN
"$S2HC" train "$TMP/t.yaml" --set run.name=oodt --set train.steps=20 --set train.warmup=2 --set train.eval_every=5 \
  --stop-after 7 --quiet >/dev/null 2>&1
expect_status 0 "--resume with train.eval_ood turned on" -- "$S2HC" train "$TMP/t.yaml" --set run.name=oodt \
  --set train.steps=20 --set train.warmup=2 --set train.eval_every=5 --set train.eval_ood=true --resume
expect_out "step 10: val loss [0-9.]+, out of domain [0-9.]+ \(mean of 1 corpora\)" "its eval lines give the mean"
if command -v h5dump >/dev/null; then
  vals() { h5dump -y -w 0 -d "$1" "$TMP/runs/oodt/run.h5" 2>/dev/null | awk '/DATA \{/ { getline; print; exit }' \
    | tr -d ' ' | tr ',' ' ' | sed 's/$/ /'; }
  steps=$(vals /eval/step) ood=$(vals /eval/ood_loss/synth_ood)
  set -- $ood
  [ "$steps" = "5 10 15 20 " ] && [ $# = 4 ] && [ "$1" = nan ] && [ "$2" != nan ] && ok "one row per eval, NaN before" \
    || fail "eval steps '$steps', ood_loss '$ood'"
  last=$(vals /eval/ood/synth_ood/loss)
  [ "$4 " = "$last" ] && ok "its last row is the final evaluation's loss" || fail "last '$4' vs final '$last'"
fi
expect_status 0 "--extend at the run's own length" -- "$S2HC" train "$TMP/t.yaml" --set run.name=ext "${xc[@]}" \
  --extend --set train.steps=20
expect_out "already finished at step 20" "is a finished run's resume"
expect_status 2 "--extend to fewer steps is refused" -- "$S2HC" train "$TMP/t.yaml" --set run.name=ext "${xc[@]}" \
  --extend --set train.steps=15
expect_out "train.steps = 15 is fewer than the run's 20" "the refusal says so"
# analyze: an extended run trained under another schedule than a run of its length from
# scratch (the same config text, seed and all): a cell of its own, "+ext@N", and no repeat
# of the scratch run (which of them counted was the order they were read in); a run
# extended twice is another cell again
"$S2HC" train "$TMP/t.yaml" --set run.name=ext2 "${xc[@]}" --set train.steps=8 --set train.warmup=4 >/dev/null 2>&1
"$S2HC" train "$TMP/t.yaml" --set run.name=ext2 "${xc[@]}" --set train.warmup=4 --extend >/dev/null 2>&1
"$S2HC" train "$TMP/t.yaml" --set run.name=ext2 "${xc[@]}" --set train.warmup=4 --set train.steps=20 --extend >/dev/null 2>&1
"$S2HC" train "$TMP/t.yaml" --set run.name=ext20w4 "${xc[@]}" --set train.warmup=4 --set train.steps=20 >/dev/null 2>&1
expect_status 0 "analyze of extended runs and runs of their length" -- "$S2HC" analyze "$TMP/runs/ext" "$TMP/runs/ext20" \
  "$TMP/runs/ext2" "$TMP/runs/ext20w4" -o "$TMP/ext-an"
grep -q "repeats" "$TMP/out" && fail "an extended run taken for a repeat: $(grep repeats "$TMP/out")" \
  || ok "no extended run is a repeat of another run"
rc_csv="$TMP/ext-an/tables/runs.csv"
grep -q '^ext,L2-C32-T32+ext@12,' "$rc_csv" && grep -q '^ext2,"L2-C32-T32+ext@8,12",' "$rc_csv" \
  && grep -q '^ext20,L2-C32-T32,' "$rc_csv" && grep -q '^ext20w4,L2-C32-T32,' "$rc_csv" \
  && ok "their scales: +ext@12, +ext@8,12 and the plain runs' own" || fail "runs.csv: $(cut -d, -f1-3 "$rc_csv" | tr '\n' ' ')"
# a finished run whose checkpoint is gone is not extended: --extend trained a new run of
# the longer length from step 0 over its record (a grid's "extend from step 0")
"$S2HC" train "$TMP/t.yaml" --set run.name=extnock "${xc[@]}" >/dev/null 2>&1
rm -f "$TMP/runs/extnock/ckpt.h5"
sum_before=$(md5sum < "$TMP/runs/extnock/run.h5")
expect_status 1 "--extend of a finished run without its checkpoint" -- "$S2HC" train "$TMP/t.yaml" --set run.name=extnock \
  "${xc[@]}" --extend --set train.steps=20
expect_out "cannot extend: .*extnock/ckpt.h5 is missing \(moved or deleted\?\): the run finished its 12 steps" "says why"
expect_out "\-\-force to train 20 steps from scratch" "and what trains the longer run instead"
[ "$(md5sum < "$TMP/runs/extnock/run.h5")" = "$sum_before" ] && ok "the run file is left as it was" \
  || fail "the finished run's file was rewritten"
expect_status 2 "resume with another train.steps and lr is refused" -- "$S2HC" train "$TMP/t.yaml" --resume --set train.steps=60 --set train.lr=0.002
grep -q "init_from" "$TMP/out" && fail "a refusal for more than train.steps points to init_from" || ok "no init_from hint when more than train.steps differs"
# a run file without its checkpoint: --resume starts again from step 0, but only as the
# same run (its config checked against the run file's; the log is not replaced otherwise)
"$S2HC" train "$TMP/t.yaml" --set run.name=nockpt --set train.steps=4 --set train.warmup=1 --stop-after 2 --quiet >/dev/null 2>&1
rm -f "$TMP/runs/nockpt/ckpt.h5"
sum_before=$(md5sum < "$TMP/runs/nockpt/run.h5")
expect_status 2 "--resume without a checkpoint and with a changed config is refused" -- "$S2HC" train "$TMP/t.yaml" \
  --set run.name=nockpt --set train.steps=4 --set train.warmup=1 --resume --set residual.method=mhc
expect_out "method: identity" "the refusal names the difference"
[ "$(md5sum < "$TMP/runs/nockpt/run.h5")" = "$sum_before" ] && ok "the run file is left as it was" \
  || fail "a refused --resume changed the run file"
expect_status 0 "--resume without a checkpoint and the same config starts from step 0" -- "$S2HC" train "$TMP/t.yaml" \
  --set run.name=nockpt --set train.steps=4 --set train.warmup=1 --resume
expect_out "no checkpoint in .*nockpt; starting from step 0" "it says so"
# a file where the run directory should be: an I/O error (exit 1, not a usage error's 2)
echo x > "$TMP/runs/afile"
expect_status 1 "a file in the run directory's place" -- "$S2HC" train "$TMP/t.yaml" --set run.name=afile --quiet
expect_out "cannot open .*runs/afile/.train.lock: Not a directory" "the error names the path and why"
# stdout closed under a training (its reader gone, SIGPIPE ignored): the run's files say
# how it ended, and it exits 0 (a grid would record a finished run as failed)
expect_status 0 "a training whose stdout is closed" -- bash -c 'trap "" PIPE; "$@" | true; exit ${PIPESTATUS[0]}' sh \
  "$S2HC" train "$TMP/t.yaml" --set run.name=pipe --set train.steps=2 --set train.warmup=1
h5dump -a /status "$TMP/runs/pipe/run.h5" 2>/dev/null | grep -q '"finished"' && ok "it finished" || fail "no finished run"
# a run directory renamed by hand resumes under its new name
"$S2HC" train "$TMP/t.yaml" --set run.name=mv-a --set train.steps=4 --set train.warmup=1 --stop-after 2 --quiet >/dev/null 2>&1
mv "$TMP/runs/mv-a" "$TMP/runs/mv-b"
expect_status 0 "--resume of a renamed run directory" -- "$S2HC" train "$TMP/t.yaml" \
  --set run.name=mv-b --set train.steps=4 --set train.warmup=1 --resume
expect_out "resuming .*runs/mv-b from step 2" "it trains on from its checkpoint"
# a run directory moved to another run.out, with another probe cadence: resumed too
"$S2HC" train "$TMP/t.yaml" --set run.name=mv-c --set train.steps=4 --set train.warmup=1 --stop-after 2 --quiet >/dev/null 2>&1
mkdir -p "$TMP/moved" && mv "$TMP/runs/mv-c" "$TMP/moved/mv-c"
expect_status 0 "--resume of a run moved to another run.out, probe.every changed" -- "$S2HC" train "$TMP/t.yaml" \
  --set run.name=mv-c --set run.out="$TMP/moved" --set train.steps=4 --set train.warmup=1 --set probe.every=3 --resume
expect_out "resuming .*moved/mv-c from step 2" "it trains on from its checkpoint"
# a checkpoint without its run file: not a fresh directory (refused without --resume,
# the checkpoint kept); --force starts over
"$S2HC" train "$TMP/t.yaml" --set run.name=ck --set train.steps=4 --set train.warmup=1 --stop-after 2 --quiet >/dev/null 2>&1
rm "$TMP/runs/ck/run.h5"
ck_before=$(md5sum < "$TMP/runs/ck/ckpt.h5")
expect_status 2 "a checkpoint alone, without --resume" -- "$S2HC" train "$TMP/t.yaml" --set run.name=ck --set train.steps=4 \
  --set train.warmup=1 --quiet
expect_out "runs/ck already holds a run; use --resume" "says to --resume or --force"
[ "$(md5sum < "$TMP/runs/ck/ckpt.h5")" = "$ck_before" ] && ok "the checkpoint is kept" || fail "the checkpoint changed"
expect_status 0 "--force over a checkpoint" -- "$S2HC" train "$TMP/t.yaml" --set run.name=ck --set train.steps=4 \
  --set train.warmup=1 --quiet --force
h5dump -a /status "$TMP/runs/ck/run.h5" 2>/dev/null | grep -q '"finished"' && ok "it trained from the start" || fail "no finished run"
# a run stopped under 2 threads and resumed where 1 is the default: it takes the 2 it
# trained with (the batch's cut sets the bits), and ends as the uninterrupted run; with
# train.threads set to another count it says the bits will differ
TS=(--set train.steps=6 --set train.warmup=1 --set model.n_layer=1 --set train.eval_every=0 --set probe.every=0)
OMP_NUM_THREADS=2 "$S2HC" train "$TMP/t.yaml" "${TS[@]}" --set run.name=thr-ref --quiet >/dev/null 2>&1
OMP_NUM_THREADS=2 "$S2HC" train "$TMP/t.yaml" "${TS[@]}" --set run.name=thr --stop-after 3 --quiet >/dev/null 2>&1
expect_status 0 "a resume under another default thread count" -- env OMP_NUM_THREADS=1 "$S2HC" train "$TMP/t.yaml" \
  "${TS[@]}" --set run.name=thr --resume
expect_out "threads: 2, as the run trained" "it says it takes the run's thread count"
if command -v h5diff >/dev/null; then
  h5diff -q "$TMP/runs/thr-ref/ckpt.h5" "$TMP/runs/thr/ckpt.h5" /model /model >/dev/null 2>&1 \
    && ok "it ends with the uninterrupted run's weights" || fail "the resumed run's weights differ from the uninterrupted run's"
fi
[ "$(h5dump -a /threads "$TMP/runs/thr/run.h5" 2>/dev/null | grep -Ec '^ *\(0\): 2$')" = 1 ] \
  && ok "the run file records the threads" || fail "run.h5 has no root attribute threads = 2"
OMP_NUM_THREADS=2 "$S2HC" train "$TMP/t.yaml" "${TS[@]}" --set run.name=thr1 --stop-after 3 --quiet >/dev/null 2>&1
expect_status 0 "a resume with train.threads set to another count" -- "$S2HC" train "$TMP/t.yaml" "${TS[@]}" \
  --set run.name=thr1 --resume --set train.threads=1 --quiet
expect_out "warning: the run trained with 1 process of 2 threads and resumes with 1 of 1" "it warns of the other cut"
# OMP_DYNAMIC=true (libgomp then gives a region fewer threads than asked for, surely so with
# more threads than cores): the run keeps its thread count's bits; it used to train with
# whatever team the load allowed, and a team of one hung in OpenBLAS
TD=(--set train.steps=4 --set train.warmup=1 --set model.n_layer=1 --set train.eval_every=0 --set probe.every=0 --quiet)
nd=$(( $(nproc) + 2 ))
OMP_NUM_THREADS=$nd "$S2HC" train "$TMP/t.yaml" "${TD[@]}" --set run.name=dyn-ref >/dev/null 2>&1
expect_status 0 "a run under OMP_DYNAMIC=true" -- env OMP_DYNAMIC=true OMP_NUM_THREADS=$nd timeout -s KILL 120 \
  "$S2HC" train "$TMP/t.yaml" "${TD[@]}" --set run.name=dyn
if command -v h5diff >/dev/null; then
  h5diff -q "$TMP/runs/dyn-ref/ckpt.h5" "$TMP/runs/dyn/ckpt.h5" /model /model >/dev/null 2>&1 \
    && ok "it ends with the weights of its thread count" || fail "OMP_DYNAMIC=true changed the weights"
fi
# OMP_THREAD_LIMIT below the thread count asked for (OMP_NUM_THREADS, train.threads): the
# limit is the count (a team smaller than the count asked for hung in OpenBLAS)
OMP_NUM_THREADS=1 "$S2HC" train "$TMP/t.yaml" "${TD[@]}" --set run.name=tlim-ref >/dev/null 2>&1
expect_status 0 "a run under OMP_THREAD_LIMIT=1 asking for 2 threads" -- env OMP_THREAD_LIMIT=1 OMP_NUM_THREADS=2 \
  timeout -s KILL 120 "$S2HC" train "$TMP/t.yaml" "${TD[@]}" --set run.name=tlim --set train.threads=2
if command -v h5diff >/dev/null; then
  h5diff -q "$TMP/runs/tlim-ref/ckpt.h5" "$TMP/runs/tlim/ckpt.h5" /model /model >/dev/null 2>&1 \
    && ok "it ends with the weights of one thread" || fail "OMP_THREAD_LIMIT=1 did not train as one thread"
  h5dump -a /threads "$TMP/runs/tlim/run.h5" 2>/dev/null | grep -q '(0): 1$' && ok "its run file records 1 thread" \
    || fail "threads attribute: $(h5dump -a /threads "$TMP/runs/tlim/run.h5" 2>&1 | grep '(0)')"
fi
# a run stopped under 2 threads and resumed under OMP_THREAD_LIMIT=1: warned, not told it
# keeps its 2 threads
OMP_NUM_THREADS=2 "$S2HC" train "$TMP/t.yaml" "${TS[@]}" --set run.name=tlr --stop-after 3 --quiet >/dev/null 2>&1
expect_status 0 "a resume under a lower OMP_THREAD_LIMIT" -- env OMP_THREAD_LIMIT=1 OMP_NUM_THREADS=1 timeout -s KILL 120 \
  "$S2HC" train "$TMP/t.yaml" "${TS[@]}" --set run.name=tlr --resume
expect_out "warning: the run trained with 1 process of 2 threads and resumes with 1 of 1" "it warns of the other cut"
grep -q "as the run trained" "$TMP/out" && fail "it claims the run's 2 threads: $(grep 'as the run trained' "$TMP/out")" \
  || ok "no claim of the run's thread count"
# stopped at a step with an evaluation (the signal cuts the evaluation short): no NaN row;
# --resume evaluates that step first, and the run file's evaluations are the uninterrupted
# run's
TE=(--set train.steps=10 --set train.warmup=1 --set model.n_layer=1 --set train.eval_every=5 --set probe.every=0 --quiet)
"$S2HC" train "$TMP/t.yaml" "${TE[@]}" --set run.name=ev-ref >/dev/null 2>&1
expect_status 130 "a stop at a step with an evaluation" -- "$S2HC" train "$TMP/t.yaml" "${TE[@]}" --set run.name=ev --stop-after 5
h5dump -d /eval/val_loss "$TMP/runs/ev/run.h5" 2>/dev/null | grep -qi nan && fail "a NaN evaluation row was written" \
  || ok "no NaN evaluation row"
w1=$(h5dump -a /wall_seconds "$TMP/runs/ev/run.h5" 2>/dev/null | awk '/\(0\)/ {print $2}')
expect_status 0 "its --resume" -- "$S2HC" train "$TMP/t.yaml" "${TE[@]}" --set run.name=ev --resume
w2=$(h5dump -a /wall_seconds "$TMP/runs/ev/run.h5" 2>/dev/null | awk '/\(0\)/ {print $2}')
awk -v a="$w1" -v b="$w2" 'BEGIN {exit !(a > 0 && b > a)}' && ok "wall_seconds adds the resumed invocation's time" \
  || fail "wall_seconds: $w1 after the stop, $w2 after the resume"
if command -v h5diff >/dev/null; then
  for d in /eval/step /eval/val_loss; do
    h5diff -q "$TMP/runs/ev-ref/run.h5" "$TMP/runs/ev/run.h5" $d $d >/dev/null 2>&1 \
      && ok "$d as the uninterrupted run's" || fail "$d differs from the uninterrupted run's"
  done
fi
# the signals sent below are at their defaults here, however the suite was started
# (lib.sh resets a background job's or nohup's ignored SIGINT or SIGHUP)
ign=$(sed -n 's/^SigIgn:[[:space:]]*//p' /proc/$$/status 2>/dev/null)
{ [ -z "$ign" ] || [ $(( 0x$ign & 0x4003 )) = 0 ]; } && ok "SIGHUP, SIGINT and SIGTERM at their defaults" \
  || fail "a stop signal ignored at the start (SigIgn $ign)"
# a session that trains no step (stopped during the evaluation it owed) leaves the run's
# thread count: the next --resume still takes the 2 it trained with
OMP_NUM_THREADS=2 "$S2HC" train "$TMP/t.yaml" "${TE[@]}" --set run.name=ev2 --stop-after 5 >/dev/null 2>&1
# (a subshell that execs: SIGINT not ignored, as in a terminal's job; a plain `&` here
# starts it with SIGINT ignored, and s2hc keeps it so). The signal once the evaluation's
# first progress line is out (S2HC_TEST_PROGRESS_AFTER=0: at its first batch), with the
# handler in place ("resuming" is printed before the handler is)
fresh "$TMP/ev2.out"
(exec env S2HC_TEST_PROGRESS_AFTER=0 "$S2HC" train "$TMP/t.yaml" "${TE[@]:0:${#TE[@]}-1}" --set run.name=ev2 --resume \
  --set train.threads=1 --set train.eval_batches=1000000) > "$TMP/ev2.out" 2>&1 &
evp=$!
wait_for 300 grep -q "^eval: " "$TMP/ev2.out"
kill -INT $evp; wait $evp; st=$?
[ "$st" = 130 ] && grep -q "interrupted during the evaluation of step 5" "$TMP/ev2.out" \
  && ok "stopped during the evaluation it owed" || fail "exit $st: $(tail -n 2 "$TMP/ev2.out")"
[ "$(h5dump -a /threads "$TMP/runs/ev2/run.h5" 2>/dev/null | grep -Ec '^ *\(0\): 2$')" = 1 ] \
  && ok "a session that trained no step leaves the run's threads" || fail "run.h5's threads: $(h5dump -a /threads "$TMP/runs/ev2/run.h5" 2>&1 | grep '(0)')"
# a checkpoint of another run in a run's directory (same shapes, another GELU): eval,
# probe, sample and export refuse it, naming the key, and write nothing
"$S2HC" train "$TMP/t.yaml" --set run.name=erf --set model.gelu=erf --set model.n_layer=1 --set train.steps=5 --quiet >/dev/null 2>&1
cp -r "$TMP/runs/small" "$TMP/runs/mixed"
cp "$TMP/runs/erf/ckpt.h5" "$TMP/runs/mixed/ckpt.h5"
sum_before=$(md5sum < "$TMP/runs/mixed/run.h5")
for cmd in eval probe sample export; do
  expect_status 1 "$cmd refuses a checkpoint of another run" -- "$S2HC" $cmd "$TMP/runs/mixed"
  expect_out "ckpt.h5 holds a checkpoint of another run" "$cmd says why"
  expect_out "gelu: erf" "$cmd names the differing key"
done
[ "$(md5sum < "$TMP/runs/mixed/run.h5")" = "$sum_before" ] && ok "the run file is left as it was" \
  || fail "a refused command changed the run file"
[ ! -e "$TMP/runs/mixed/model.safetensors" ] && ok "no export written" || fail "export wrote a file"
# --resume too: the run file's config agrees, the checkpoint's (gelu erf) does not
expect_status 2 "--resume refuses a checkpoint of another run" -- "$S2HC" train "$TMP/t.yaml" --set model.n_layer=1 \
  --set train.steps=5 --set run.name=mixed --resume
expect_out "differs from the run being resumed \\(.*mixed/ckpt.h5\\)" "it names the checkpoint"
[ "$(md5sum < "$TMP/runs/mixed/run.h5")" = "$sum_before" ] && ok "and leaves the run file" \
  || fail "a refused --resume changed the run file"
# a corpus needs one window of block_size + 1 tokens in each part: synth's val.bin holds
# 1647 (block_size 1646 trains, 1647 is refused); a train.bin of 1100 tokens, block_size 1100
expect_status 0 "a validation part of block_size + 1 tokens" -- "$S2HC" train "$TMP/t.yaml" --set run.name=vw1 \
  --set model.block_size=1646 --set train.steps=1 --set train.warmup=0 --set train.eval_batches=1 --set 'data.ood=[]' \
  --set probe.every=0 --set probe.final_samples=0 --quiet
expect_status 1 "a validation part of block_size tokens" -- "$S2HC" train "$TMP/t.yaml" --set run.name=vw2 \
  --set model.block_size=1647 --set train.steps=1 --set train.warmup=0 --set 'data.ood=[]' --quiet
expect_out "val.bin: 1647 tokens, fewer than block_size \\+ 1 = 1648: no validation window" "says so"
perl -e 'print pack("v*", map { $_ % 200 } 0 .. 1099)' > "$TMP/tr1100.bin"
perl -e 'print pack("v*", map { $_ % 200 } 0 .. 1199)' > "$TMP/va1200.bin"
"$S2HC" data import "$TMP/tr1100.bin" --val "$TMP/va1200.bin" --tokens uint16 --vocab 256 --name w1100 --dir "$TMP/data" >/dev/null
expect_status 1 "a training part of block_size tokens" -- "$S2HC" train "$TMP/t.yaml" --set run.name=tw --set data.train=w1100 \
  --set model.block_size=1100 --set train.steps=1 --set train.warmup=0 --set 'data.ood=[]' --quiet
expect_out "train.bin: 1100 tokens, fewer than block_size \\+ 1 = 1101: no training window" "says so"
# a missing out-of-domain corpus: refused before the first step (the run would end
# without the number it was run for)
expect_status 1 "a missing out-of-domain corpus is refused" -- "$S2HC" train "$TMP/t.yaml" --set 'data.ood=[nothere]' --set run.name=ood --set train.steps=2 --set train.warmup=1
expect_out "corpus 'nothere' \(key 'data.ood' of .*t.yaml\): .*nothere/val.bin" "the error names the corpus, the key and its file"
[ "$(grep -o 'data prepare' "$TMP/out" | wc -l)" = 1 ] && ok "the error says 'data prepare' once" || fail "the error repeats itself: $(grep nothere "$TMP/out")"
[ ! -e "$TMP/runs/ood" ] && ok "nothing written for it" || fail "a run directory was left behind"
expect_status 2 "--resume with --force is refused" -- "$S2HC" train "$TMP/t.yaml" --resume --force
expect_out "one of the two" "the refusal says why"
expect_status 0 "--quiet" -- "$S2HC" train "$TMP/t.yaml" --set run.name=quiet --set train.steps=20 --set train.warmup=1 --quiet
[ "$(wc -l < "$TMP/out")" = 1 ] && expect_out "^done: 20 steps, final train loss [0-9.]+ \(the mean of the last 2 steps; the last step's [0-9.]+\), .*quiet/run.h5" "--quiet prints the summary line only" ||
  fail "--quiet printed $(wc -l < "$TMP/out") lines: $(head -n 3 "$TMP/out")"
# the final train loss is the mean of the last logged losses (200, or a tenth of a shorter
# run's: 2 of 20), the last step's beside it
if command -v h5dump >/dev/null; then
  want=$(h5dump -m %.17g -y -w 0 -d /train/loss "$TMP/runs/quiet/run.h5" | awk '/DATA \{/ { getline; gsub(/ /, ""); n = split($0, v, ",");
    printf "%.4f (the mean of the last 2 steps; the last step'"'"'s %.4f)", (v[19] + v[20]) / 2, v[20]; exit }')
  grep -qF "final train loss $want" "$TMP/out" && ok "the summary's losses are the run file's" \
    || fail "summary '$(cat "$TMP/out")', the run file's $want"
fi
# the evaluations during training show progress as the final one does (here from the
# first batch; in use after 2 s)
expect_status 0 "a training with evals, progress from the start" -- env S2HC_TEST_PROGRESS_AFTER=0 "$S2HC" train "$TMP/t.yaml" \
  --set run.name=evprog --set train.steps=4 --set train.warmup=1 --set train.eval_every=2 --set train.eval_batches=3 --set probe.final_samples=100000
expect_out "^eval: 1/3 batches .*ETA" "an evaluation during training shows its progress"
expect_out "^eval: 1/6 batches" "the final evaluation (val and one OOD corpus) shows its own"
uses=$(sed -n 's/.*the final probe uses \([0-9]*\) sequences.*/\1/p' "$TMP/out")
[ -n "$uses" ] && grep -q "^final probe over $uses validation sequences" "$TMP/out" \
  && ok "the final probe announces the sequences it uses ($uses)" \
  || fail "the final probe's announcement: $(grep -E 'final probe (uses|over)' "$TMP/out")"
# a method-specific key set for a method that does not use it: accepted, recorded, named
# in a note (docs/config.md); rc's precision keys: a note, and fp32 in the run file
NS=(--set train.steps=2 --set train.warmup=1 --set probe.final_samples=0)
expect_status 0 "keys a method does not use" -- "$S2HC" train "$TMP/t.yaml" "${NS[@]}" --set run.name=unused \
  --set residual.sinkhorn_iters=5 --set residual.core=expm
expect_out "^note: method identity does not use residual.sinkhorn_iters, residual.core \(recorded in the run file, changes nothing\)$" \
  "the note names every unused key"
if command -v h5dump >/dev/null; then
  h5dump -a /config "$TMP/runs/unused/run.h5" 2>/dev/null | grep -q "sinkhorn_iters: 5" && ok "the unused key is recorded" \
    || fail "sinkhorn_iters 5 not in the run file's config"
fi
expect_status 0 "keys the method uses: no note" -- "$S2HC" train "$TMP/t.yaml" "${NS[@]}" --set run.name=used \
  --set residual.method=mhc --set residual.sinkhorn_iters=5
grep -q "does not use" "$TMP/out" && fail "a note for a key mhc uses: $(grep 'does not use' "$TMP/out")" || ok "no note for a used key"
expect_status 0 "rc with bf16 streams" -- "$S2HC" train "$TMP/t.yaml" "${NS[@]}" --set run.name=rcbf \
  --set residual.method=rc --set residual.n_streams=1 --set residual.stream_precision=bf16
expect_out "^note: method rc has no streams and no projection: .* \(the run file records fp32\)$" "rc's precision keys: a note"
if command -v h5dump >/dev/null; then
  h5dump -a /stream_precision "$TMP/runs/rcbf/run.h5" 2>/dev/null | grep -q '"fp32"' && ok "rc's run file records fp32 streams" \
    || fail "rc's stream_precision attribute: $(h5dump -a /stream_precision "$TMP/runs/rcbf/run.h5" 2>&1 | grep '(0)')"
fi
expect_status 1 "training on a missing corpus fails" -- "$S2HC" train "$TMP/t.yaml" --set data.train=nothere --set run.name=x
expect_out "data prepare" "the error says to prepare data"
# an imported text whose validation part (its last 1 %) holds no window of block_size + 1
# tokens: refused, where it used to train with every val loss NaN
head -c 3000 "$TMP/data/synth/text" > "$TMP/short.txt"
"$S2HC" data import "$TMP/short.txt" --name short --dir "$TMP/data" >/dev/null
expect_status 1 "a corpus without one validation window is refused" -- "$S2HC" train "$TMP/t.yaml" --set data.train=short --set run.name=short
expect_out "no validation window" "the error says why"
# the backend: cuda without a usable GPU is a clear error before anything is written;
# auto says which it chose (this test suite runs where no GPU is lent)
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi >/dev/null 2>&1; then
  expect_status 2 "backend cuda without a GPU exits 2" -- "$S2HC" train "$TMP/t.yaml" --set run.backend=cuda --set run.name=gpu
  expect_out "key 'run.backend' is cuda" "the error names the key"
  [ ! -e "$TMP/runs/gpu" ] && ok "nothing written without a GPU" || fail "a run directory was created"
  # (not in the sanitizer build: its shadow memory needs more address space than ulimit -v gives)
  if ! san_build; then
    expect_status 1 "a model too large for memory fails" -- bash -c 'ulimit -v 4000000; exec "$@"' sh "$S2HC" train "$TMP/t.yaml" --set train.batch=65536 --set model.block_size=1024 --set run.name=huge --quiet
    expect_out "out of memory" "the error says out of memory"
    [ ! -e "$TMP/runs/huge" ] && ok "no run directory for a model too large" || fail "a run directory was left behind"
  fi
  expect_status 2 "--force with backend cuda and no GPU exits 2" -- "$S2HC" train "$TMP/t.yaml" --force --set run.backend=cuda
  [ -f "$TMP/runs/tour/run.h5" ] && [ -f "$TMP/runs/tour/ckpt.h5" ] && ok "--force keeps the run on a usage error" \
    || fail "--force deleted the run before a usage error"
  expect_status 0 "backend auto falls back to the CPU" -- "$S2HC" train "$TMP/t.yaml" --set run.name=auto --set train.steps=3 --set train.warmup=1
  expect_out "backend: cpu" "auto says which backend it chose"
  expect_status 0 "bf16 on the CPU trains" -- "$S2HC" train "$TMP/t.yaml" --set run.name=bf --set run.precision=bf16 --set train.steps=2 --set train.warmup=1
  expect_out "precision: fp32 \\(run.precision bf16 is for the cuda backend" "the CPU says it trains in fp32"
  [ "$(h5dump -a /precision "$TMP/runs/bf/run.h5" 2>/dev/null | grep -c '"fp32"')" = 1 ] && ok "the run file records fp32" || fail "the run file's precision is not fp32"
  # residual.proj_precision bf16: a cpu option, refused on cuda before anything is written (a
  # build without AVX512_BF16 refuses it earlier, by the same key)
  expect_status 2 "proj_precision bf16 with backend cuda exits 2" -- "$S2HC" train "$TMP/t.yaml" --set run.backend=cuda \
    --set residual.proj_precision=bf16 --set run.name=pbc
  expect_out "key 'residual.proj_precision' is bf16, a cpu option|residual.proj_precision: bf16 needs AVX512_BF16" \
    "the error names the key"
  [ ! -e "$TMP/runs/pbc" ] && ok "nothing written" || fail "a run directory was created"
fi
# residual.stream_precision bf16: the CPU trains with bf16 streams too, and says so
expect_status 0 "stream_precision bf16 on the CPU trains" -- "$S2HC" train "$TMP/t.yaml" --set run.name=sb --set run.backend=cpu \
  --set residual.method=s2hc --set residual.stream_precision=bf16 --set train.steps=2 --set train.warmup=1
expect_out "streams: stored in bf16 in the training steps \\(residual.stream_precision\\)" "the CPU says its streams are bf16"
[ "$(h5dump -a /stream_precision "$TMP/runs/sb/run.h5" 2>/dev/null | grep -c '"bf16"')" = 1 ] &&
  ok "the run file records stream_precision bf16" || fail "the run file's stream_precision is not bf16"
# residual.proj_precision bf16 on the CPU: trains and says so (or, without AVX512_BF16 in
# the build, is refused by name)
"$S2HC" train "$TMP/t.yaml" --set run.name=pb --set residual.method=s2hc --set residual.proj_precision=bf16 \
  --set train.steps=2 --set train.warmup=1 > "$TMP/pb.out" 2>&1
st=$?
if [ $st = 0 ]; then
  grep -q "projection: bf16 operands" "$TMP/pb.out" && ok "proj_precision bf16 says so" || fail "no projection line"
  [ "$(h5dump -a /proj_precision "$TMP/runs/pb/run.h5" 2>/dev/null | grep -c '"bf16"')" = 1 ] &&
    ok "the run file records proj_precision bf16" || fail "the run file's proj_precision is not bf16"
  # which products ran: AMX tiles where the CPU and kernel allow them, else vdpbf16ps; the
  # run file says the same as the console, and S2HC_AMX=0 turns the tiles off
  if grep -q "by AMX tiles" "$TMP/pb.out"; then kind=amx; else kind=vdpbf16ps; fi
  [ "$(h5dump -a /proj_products "$TMP/runs/pb/run.h5" 2>/dev/null | grep -c "\"$kind\"")" = 1 ] &&
    ok "the run file records proj_products $kind, as the console said" || fail "proj_products is not $kind"
  S2HC_AMX=0 "$S2HC" train "$TMP/t.yaml" --set run.name=pb0 --set residual.method=s2hc \
    --set residual.proj_precision=bf16 --set train.steps=2 --set train.warmup=1 > "$TMP/pb0.out" 2>&1 &&
    grep -q "by AVX512_BF16 dot products" "$TMP/pb0.out" &&
    [ "$(h5dump -a /proj_products "$TMP/runs/pb0/run.h5" 2>/dev/null | grep -c '"vdpbf16ps"')" = 1 ] &&
    ok "S2HC_AMX=0: the products by vdpbf16ps, and the run file says so" || fail "S2HC_AMX=0 not honoured"
elif [ $st = 2 ] && grep -q "needs AVX512_BF16" "$TMP/pb.out"; then
  ok "proj_precision bf16 refused by name (no AVX512_BF16 in this build)"
else
  fail "proj_precision bf16: exit $st"
fi
# the runtime settings the binary makes for itself (re-executing once), and keeps when given;
# the OpenMP runtime's spin is GOMP_SPINCOUNT in a GCC build (libgomp), KMP_BLOCKTIME in a
# clang build (libomp)
spin_var=GOMP_SPINCOUNT spin_def=3000
if "$S2HC" version -v 2>/dev/null | grep -q '^  KMP_BLOCKTIME '; then spin_var=KMP_BLOCKTIME spin_def=1; fi
expect_status 0 "version -v" -- env -u OMP_WAIT_POLICY -u $spin_var -u OPENBLAS_CORETYPE "$S2HC" version -v
expect_out "OMP_WAIT_POLICY +\(unset\)" "OMP_WAIT_POLICY left to the user"
expect_out "$spin_var +$spin_def\$" "$spin_var defaults to a short spin"
# OPENBLAS_CORETYPE: SkylakeX / Haswell on x86 CPUs with AVX-512 / AVX2; otherwise (older
# x86 CPUs, ARM, whose OpenBLAS knows its cores) OpenBLAS's own detection
arch=$(s2hc_arch)
if cpu_flag avx512f; then expect_out "OPENBLAS_CORETYPE +SkylakeX" "OPENBLAS_CORETYPE set on AVX-512"
elif cpu_flag avx2; then expect_out "OPENBLAS_CORETYPE +Haswell" "OPENBLAS_CORETYPE set on AVX2"
else expect_out "OPENBLAS_CORETYPE +\(unset: OpenBLAS's own detection\)" "OPENBLAS_CORETYPE left to OpenBLAS ($arch)"; fi
case $arch in
  x86_64|aarch64) ok "version -v names the build's architecture ($arch)" ;;
  *) fail "version -v: no architecture: $(grep '^  CPU ' "$TMP/out")" ;;
esac
expect_out "^  kernels  +[0-9]+-lane (float|double) vectors \(" "version -v names the kernels' vectors"
expect_status 0 "version -v with the user's settings" -- env -u $spin_var OMP_WAIT_POLICY=active OPENBLAS_CORETYPE=Haswell "$S2HC" version -v
expect_out "OMP_WAIT_POLICY +active" "the user's OMP_WAIT_POLICY is kept"
expect_out "$spin_var +\(unset\)" "no spin added to the user's OMP_WAIT_POLICY"
expect_out "OPENBLAS_CORETYPE +Haswell" "the user's OPENBLAS_CORETYPE is kept"
expect_status 0 "version -v with the user's spin" -- env -u OMP_WAIT_POLICY $spin_var=123 "$S2HC" version -v
expect_out "$spin_var +123" "the user's $spin_var is kept"
# OMP_PROC_BIND and OMP_PLACES make libgomp bind the initial thread to one place as it
# loads: the binary, re-executing itself from that thread, must still count every CPU
threads_of() { env -u OMP_NUM_THREADS -u $spin_var -u OMP_WAIT_POLICY "$@" "$S2HC" version -v 2>&1 |
  awk '/CPU threads/ { print $3 }'; }
t_free=$(threads_of -u OMP_PROC_BIND -u OMP_PLACES)
if [ "${t_free:-0}" -ge 2 ]; then
  for b in "OMP_PROC_BIND=close OMP_PLACES=cores" "OMP_PROC_BIND=true" "OMP_PLACES=threads"; do
    t=$(threads_of $b)
    [ "$t" = "$t_free" ] && ok "$b: $t threads, as unbound" || fail "$b: $t threads where unbound has $t_free"
  done
else
  ok "one CPU here: thread binding not checked"
fi
expect_status 2 "version with a bad flag" -- "$S2HC" version --bogus
# kromhc says in its run file how n factorises; a prime n is one factor (= mhc_lite)
for nk in 8:2x2x2 5:5; do
  n=${nk%%:*}; f=${nk#*:}
  expect_status 0 "kromhc n=$n trains" -- "$S2HC" train "$TMP/t.yaml" --set residual.method=kromhc \
    --set residual.n_streams=$n --set train.steps=2 --set train.warmup=1 --set run.name=krom$n
  expect_out "kromhc: factors $f" "kromhc n=$n prints its factors"
  [ "$n" = 5 ] && expect_out "n is prime: a single factor" "a prime n is said to be a single factor"
  if command -v h5dump >/dev/null; then
    expect_status 0 "h5dump reads kromhc_factors (n=$n)" -- h5dump -a /kromhc_factors "$TMP/runs/krom$n/run.h5"
    expect_out "\"$f\"" "run file records kromhc factors $f"
  fi
done
if command -v h5dump >/dev/null; then
  expect_status 0 "h5dump reads kromhc_note (n=5)" -- h5dump -a /kromhc_note "$TMP/runs/krom5/run.h5"
  expect_out "exactly mhc_lite" "the run file says prime-n kromhc is mhc_lite"
  expect_status 1 "no kromhc_note for n=8" -- h5dump -a /kromhc_note "$TMP/runs/krom8/run.h5"
fi
# a diverged run (a NaN injected at step 15) resumed, diverged again (at step 17) and
# resumed to its end: finished, no longer marked diverged, and both steps kept
expect_status 3 "a NaN loss: exit 3" -- env S2HC_FAULT_NAN_AT_STEP=15 "$S2HC" train "$TMP/t.yaml" --set run.name=dv --quiet
expect_status 0 "the diverged run carries diverged_at_step" -- h5dump -a /diverged_at_step "$TMP/runs/dv/run.h5"
expect_status 3 "resumed, it diverges again" -- env S2HC_FAULT_NAN_AT_STEP=17 "$S2HC" train "$TMP/t.yaml" --set run.name=dv --resume --quiet
expect_out "note: .*/dv diverged at step 15; it goes on from its checkpoint at step 10" "the resume says it goes on from a diverged run's checkpoint"
expect_status 0 "a diverged run resumed to its end" -- "$S2HC" train "$TMP/t.yaml" --set run.name=dv --resume --quiet
expect_out "note: .*/dv diverged at step 17; it goes on from its checkpoint at step 10" "the second resume names the second divergence"
h5dump -a /status "$TMP/runs/dv/run.h5" 2>/dev/null | grep -q '"finished"' && ok "the resumed run is finished" \
  || fail "status after resume: $(h5dump -a /status "$TMP/runs/dv/run.h5" 2>&1 | tail -3)"
expect_status 1 "the finished run has no diverged_at_step" -- h5dump -a /diverged_at_step "$TMP/runs/dv/run.h5"
expect_status 0 "the resumed run's divergences" -- h5dump -a /divergences "$TMP/runs/dv/run.h5"
expect_out '"15 17"' "keep each step it had diverged at, in order"
# diverged before its first checkpoint (ckpt_every 10, NaN at step 5): nothing to sample
# from, and the messages say why rather than ask whether it is a run
expect_status 3 "a NaN before the first checkpoint: exit 3" -- env S2HC_FAULT_NAN_AT_STEP=5 "$S2HC" train "$TMP/t.yaml" --set run.name=dv0 --quiet
expect_out "diverged; it had saved no checkpoint yet" "train says no checkpoint was kept"
expect_status 1 "sample of it" -- "$S2HC" sample "$TMP/runs/dv0"
expect_out "no checkpoint: the run \(status diverged, last step 5\) stopped before its first save" "sample says why there is none"
# a full disk (here a file size limit, EFBIG where a full disk gives ENOSPC): the save fails
# with a message and exit 1; HDF5 used to crash at exit on the file it failed to close
expect_status 1 "a save that runs out of space fails with exit 1" -- bash -c "trap '' XFSZ; ulimit -f 16; exec \"\$0\" \"\$@\"" \
  "$S2HC" train "$TMP/t.yaml" --set run.name=full --set train.steps=12 --set train.warmup=1 --quiet
expect_out "cannot save (run file|checkpoint)" "the failed save is named"
ls "$TMP/runs/full/"*.tmp >/dev/null 2>&1 && fail "temporary files left after a failed save" || ok "no temporary files left after a failed save"
# the status column of an analysis's runs.csv (its only row)
csv_status() { awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="status") c=i; next} {print $c; exit}' "$1"; }
# a training that has saved nothing yet: eval, probe, inspect, sample and export say it
# is in use, not that the directory holds no run
"$S2HC" train "$TMP/t.yaml" --set run.name=young --set train.steps=100000 --set train.ckpt_every=100000 \
  --set train.eval_every=0 --set probe.every=0 --quiet >/dev/null 2>&1 &
young=$!
wait_for 300 test -s "$TMP/runs/young/.train.lock"
for cmd in eval probe inspect sample export; do
  expect_status 1 "$cmd of a training that has saved nothing yet" -- "$S2HC" $cmd "$TMP/runs/young"
  expect_out "young is in use \(s2hc train pid $young .* has saved nothing yet" "$cmd says it is in use"
done
kill -TERM $young; wait $young
# two trainings into one run directory: the second is refused while the first runs (they
# used to overwrite each other's run.h5.tmp and ckpt.h5.tmp)
"$S2HC" train "$TMP/t.yaml" --set run.name=busy --set train.steps=100000 --quiet >/dev/null 2>&1 &
busy=$!
wait_for 300 test -s "$TMP/runs/busy/.train.lock"
expect_status 2 "a second training into a running run's directory is refused" -- "$S2HC" train "$TMP/t.yaml" --set run.name=busy --resume
expect_out "in use \(s2hc train pid $busy " "the refusal names the running training"
expect_status 2 "--force is refused too, and removes nothing" -- "$S2HC" train "$TMP/t.yaml" --set run.name=busy --force
# eval and probe write run.h5 back: while the training runs, that copy would undo its saves
wait_for 300 test -e "$TMP/runs/busy/ckpt.h5"
expect_status 1 "s2hc eval of a run in training is refused" -- "$S2HC" eval "$TMP/runs/busy" --batches 1
expect_out "in use \(s2hc train pid $busy " "its refusal names the training"
expect_status 1 "s2hc probe of a run in training is refused" -- "$S2HC" probe "$TMP/runs/busy" --samples 2
expect_out "in use \(s2hc train pid $busy " "its refusal names the training"
expect_status 0 "s2hc inspect reads it meanwhile" -- "$S2HC" inspect "$TMP/runs/busy"
# the readers say what they saw: a run in use, and the step of the save they read
expect_out "note: .*busy is in use \(s2hc train pid $busy on .*\): this is its run file of step [0-9]+, its last save" \
  "inspect says the run is in use and which step it read"
# its /final comes at the end: inspect --step final says so, not to run a probe that the
# training's lock refuses now
expect_status 1 "s2hc inspect --step final of a run in training" -- "$S2HC" inspect "$TMP/runs/busy" --step final
expect_out "has no /final group yet; the run is in use \(s2hc train pid $busy .*\): run .s2hc probe .*busy. once that has ended" \
  "it says the probe must wait for the training"
"$S2HC" train "$TMP/t.yaml" --set run.name=busy0 --set train.steps=100000 --set train.ckpt_every=5 \
  --set probe.every=0 --quiet >/dev/null 2>&1 &
busy0=$!
wait_for 300 test -e "$TMP/runs/busy0/run.h5"
expect_status 1 "s2hc inspect of a run in training without probes" -- "$S2HC" inspect "$TMP/runs/busy0"
expect_out "holds no probes \(/probe or /final\) yet; the run is in use \(s2hc train pid $busy0 .*\): run .s2hc probe .*busy0. once" \
  "it says the probe must wait for the training"
kill -TERM $busy0; wait $busy0
expect_status 0 "s2hc sample reads it meanwhile" -- "$S2HC" sample "$TMP/runs/busy" --tokens 4
expect_out "note: .*busy is in use \(s2hc train pid $busy on .*\): this is its checkpoint of step [0-9]+" "sample says so"
expect_status 0 "s2hc export reads it meanwhile" -- "$S2HC" export "$TMP/runs/busy" -o "$TMP/busy.safetensors"
expect_out "note: .*busy is in use \(s2hc train pid $busy on .*\): this is its checkpoint of step [0-9]+" "export says so"
expect_status 0 "s2hc analyze reads it meanwhile" -- "$S2HC" analyze "$TMP/runs/busy" -o "$TMP/busy-an"
[ "$(csv_status "$TMP/busy-an/tables/runs.csv")" = running ] && ok "analyze: running" \
  || fail "analyze of a live run: status $(csv_status "$TMP/busy-an/tables/runs.csv")"
kill -TERM $busy; wait $busy
# stopped, its run file still says "running": the analysis says stopped, the readers
# nothing of a run in use
expect_status 0 "s2hc analyze of the stopped run" -- "$S2HC" analyze "$TMP/runs/busy" -o "$TMP/busy-an"
[ "$(csv_status "$TMP/busy-an/tables/runs.csv")" = stopped ] && ok "analyze: stopped" \
  || fail "analyze of a stopped run: status $(csv_status "$TMP/busy-an/tables/runs.csv")"
expect_status 0 "s2hc inspect of the stopped run" -- "$S2HC" inspect "$TMP/runs/busy"
grep -q "in use" "$TMP/out" && fail "inspect calls a stopped run in use" || ok "inspect says nothing of a run in use"
expect_status 130 "once it has stopped, --resume continues it (for one step)" -- "$S2HC" train "$TMP/t.yaml" --set run.name=busy --set train.steps=100000 --resume --stop-after 1 --quiet
# a run file another program has open for writing (h5py's "r+" or "a"; here flock(1) takes
# the same lock HDF5 takes): the commands say so, not that the file is truncated or
# corrupt, and --resume does not advise moving it away or --force; with
# HDF5_USE_FILE_LOCKING=FALSE they read it meanwhile
if command -v flock >/dev/null; then
  for f in run.h5 ckpt.h5; do
    fresh "$TMP/held.out"
    (exec 9<"$TMP/runs/busy/$f"; flock -x 9; echo held; exec sleep 600) >"$TMP/held.out" &
    holder=$!
    wait_for 300 grep -q held "$TMP/held.out"
    cmd=inspect; [ $f = ckpt.h5 ] && cmd=export
    expect_status 1 "$cmd while another program holds $f" -- "$S2HC" $cmd "$TMP/runs/busy"
    expect_out "busy/$f: another program has it open for writing \(HDF5: .*unable to lock file" "it says so"
    expect_status 1 "--resume while another program holds $f" -- "$S2HC" train "$TMP/t.yaml" --set run.name=busy \
      --set train.steps=100000 --resume --quiet
    expect_out "cannot resume: .*busy/$f: another program has it open for writing" "it says so"
    grep -Eq "corrupt|move the file away|--force" "$TMP/out" && fail "it calls the file broken: $(cat "$TMP/out")" \
      || ok "nor calls the file broken"
    expect_status 0 "$cmd with HDF5_USE_FILE_LOCKING=FALSE reads it meanwhile" -- env HDF5_USE_FILE_LOCKING=FALSE \
      "$S2HC" $cmd "$TMP/runs/busy"
    kill $holder; wait $holder 2>/dev/null
  done
fi
# SIGHUP (the terminal closed) stops a training as Ctrl-C does: the step finished and
# saved, exit 130, no .tmp; under nohup (SIGHUP ignored when it started) it trains on
"$S2HC" train "$TMP/t.yaml" --set run.name=hup --set train.steps=100000 --quiet >"$TMP/hup.out" 2>&1 &
hup=$!
wait_for 300 test -e "$TMP/runs/hup/ckpt.h5"
kill -HUP $hup; wait $hup; st=$?
[ "$st" = 130 ] && grep -q "interrupted at step" "$TMP/hup.out" && ! ls "$TMP/runs/hup/"*.tmp >/dev/null 2>&1 \
  && ok "SIGHUP: the training saves and stops, exit 130" || fail "SIGHUP: exit $st: $(tail -n 2 "$TMP/hup.out")"
# a terminal that closes sends its foreground job SIGHUP twice (the shell passes its own
# on, and the kernel's reaches the foreground group): the second is not "again"
fresh "$TMP/hup.out"
"$S2HC" train "$TMP/t.yaml" --set run.name=hup2 --set train.steps=100000 --set model.n_embd=256 \
  --set model.block_size=256 --set train.batch=16 --set train.ckpt_every=1 --quiet >"$TMP/hup.out" 2>&1 &
hup=$! # steps of a few tenths of a second: the second signal comes before the safe point
wait_for 300 test -e "$TMP/runs/hup2/ckpt.h5"
kill -HUP $hup
for i in $(seq 300); do grep -q "next safe point" "$TMP/hup.out" && break; sleep 0.01; done
kill -HUP $hup 2>/dev/null; wait $hup; st=$?
[ "$st" = 130 ] && grep -q "interrupted at step" "$TMP/hup.out" \
  && ok "two SIGHUPs: the training still saves and stops, exit 130" || fail "two SIGHUPs: exit $st: $(tail -n 2 "$TMP/hup.out")"
(trap '' HUP; exec "$S2HC" train "$TMP/t.yaml" --set run.name=nohup --set train.steps=100000 --quiet) >"$TMP/hup.out" 2>&1 &
hup=$!
wait_for 300 test -e "$TMP/runs/nohup/ckpt.h5"
kill -HUP $hup; sleep 1
kill -0 $hup 2>/dev/null && ok "under nohup a SIGHUP leaves the training running" || fail "under nohup a SIGHUP stopped it: $(tail -n 2 "$TMP/hup.out")"
kill -TERM $hup; wait $hup
# `s2hc train ... | tee log` whose tee dies (the terminal closed): train's next progress
# line goes to a pipe without a reader; it goes on, the lines lost, and finishes the run
"$S2HC" train "$TMP/t.yaml" --set run.name=pipegone --set train.steps=100 --set train.log_every=1 2>&1 | head -n 1 >/dev/null
st=${PIPESTATUS[0]}
[ "$st" = 0 ] && "$S2HC" inspect "$TMP/runs/pipegone" >/dev/null 2>&1 && ok "a reader of its output gone: the training finishes (exit 0)" \
  || fail "a reader of its output gone: exit $st"
if command -v h5dump >/dev/null; then
  h5dump -a /status "$TMP/runs/pipegone/run.h5" 2>/dev/null | grep -q '"finished"' && ok "its run.h5 says finished" \
    || fail "run.h5's status: $(h5dump -a /status "$TMP/runs/pipegone/run.h5" 2>&1 | grep '(0)')"
fi
# a background job of a script (`s2hc train ... &` without job control) starts with
# SIGINT ignored: a Ctrl-C meant for the script's foreground command leaves it training
"$S2HC" train "$TMP/t.yaml" --set run.name=bgint --set train.steps=100000 --quiet >"$TMP/hup.out" 2>&1 &
hup=$!
wait_for 300 test -e "$TMP/runs/bgint/ckpt.h5"
kill -INT $hup; sleep 1
kill -0 $hup 2>/dev/null && ok "SIGINT ignored at start: a SIGINT leaves the training running" \
  || fail "SIGINT ignored at start: a SIGINT stopped it: $(tail -n 2 "$TMP/hup.out")"
kill -TERM $hup; wait $hup; st=$?
[ "$st" = 130 ] && ok "SIGINT ignored at start: SIGTERM still saves and stops it" || fail "then SIGTERM: exit $st"
# a run file older than the checkpoint (copied back by hand): the resume says which
# steps its log lacks
G=$TMP/runs/gap
"$S2HC" train "$TMP/t.yaml" --set run.name=gap --stop-after 10 --quiet >/dev/null 2>&1
cp "$G/run.h5" "$TMP/gap-old.h5"
"$S2HC" train "$TMP/t.yaml" --set run.name=gap --resume --stop-after 10 --quiet >/dev/null 2>&1
cp "$TMP/gap-old.h5" "$G/run.h5"
expect_status 0 "--resume over a run file older than the checkpoint" -- "$S2HC" train "$TMP/t.yaml" --set run.name=gap --resume --quiet
expect_out "run.h5: /train ends at step 10 but the checkpoint is at step 20: steps 11..20 are missing" "it names the missing steps"

# a stop during the final evaluation (here thousands of batches, seconds long): it ends
# with exit 130, keeps the checkpoint of the last step and no row of the final phase;
# --resume then runs only the final evaluation and probe
F=$TMP/runs/fin
fresh "$TMP/fin.out"
(exec "$S2HC" train "$TMP/t.yaml" --set run.name=fin --set train.steps=12 --set train.eval_every=0 \
  --set train.eval_batches=20000) >"$TMP/fin.out" 2>&1 & # SIGINT not ignored (a subshell that execs)
fin=$!
wait_for 300 grep -Eq "^step +12/12" "$TMP/fin.out"
sleep 0.3
kill -INT $fin; wait $fin; rc=$?
[ "$rc" = 130 ] && ok "Ctrl-C in the final evaluation: exit 130" || fail "exit $rc: $(tail -n 3 "$TMP/fin.out")"
grep -Eq "interrupted (during the final evaluation|at step 12)" "$TMP/fin.out" && ok "it says where it stopped" ||
  fail "no stop message: $(tail -n 3 "$TMP/fin.out")"
if command -v h5dump >/dev/null; then
  h5dump -a /status "$F/run.h5" 2>/dev/null | grep -q '"running"' && ok "the run is not marked finished" || fail "status: $(h5dump -a /status "$F/run.h5" | grep '(0)')"
  h5dump -d /eval/step -y -w 0 "$F/run.h5" 2>/dev/null | grep -Eq '(^|[ ,])12([ ,]|$)' && fail "a final eval row was kept" || ok "no row of the final evaluation"
fi
expect_status 0 "--resume runs the final phase" -- "$S2HC" train "$TMP/t.yaml" --set run.name=fin --set train.steps=12 --set train.eval_batches=2 --resume
expect_out "resuming .*fin from step 12" "from the last step's checkpoint"
expect_out "final probe done" "the final probe ran"
expect_out "^done: 12 steps, final train loss [0-9]" "the summary has the last step's loss"
if command -v h5dump >/dev/null; then
  h5dump -a /status "$F/run.h5" 2>/dev/null | grep -q '"finished"' && ok "then finished" || fail "status after resume"
  [ "$(h5dump -d /train/step -y -w 0 "$F/run.h5" | awk '/DATA \{/ { getline; print; exit }' | tr -d ' ')" = "1,2,3,4,5,6,7,8,9,10,11,12" ] &&
    ok "/train/step is 1..12, every step once" || fail "/train/step: $(h5dump -d /train/step -y -w 0 "$F/run.h5" | awk '/DATA \{/ { getline; print; exit }')"
fi
# ---- damaged or mismatched inputs: refused with the file named; nothing written or replaced
# a corpus whose tokens do not fit model.vocab (it aborted in the cross-entropy, after
# making the run directory)
expect_status 2 "model.vocab below the corpus's vocab is refused" -- "$S2HC" train "$TMP/t.yaml" --set model.vocab=50 --set run.name=v50
expect_out "synth/train.bin: token [0-9]+ is [0-9]+, .*key 'model.vocab'" "the error names the shard, the token and the key"
[ ! -e "$TMP/runs/v50" ] && ok "nothing written for it" || fail "a run directory was left behind"
# a byte shard whose header says vocab 100 but holding bytes up to 255: refused when
# opened (shard_fits trusts a header that fits the model, 100 <= 128, and the
# cross-entropy aborted)
mkdir -p "$TMP/v100/synth"
for f in train val; do
  perl -e 'print pack("a8 V V V V Q<", "S2HCTOK", 1, 100, 1, 0, 4000), pack("C*", map { $_ % 256 } 0 .. 3999)' > "$TMP/v100/synth/$f.bin"
done
expect_status 1 "a byte shard with tokens past its header's vocab is refused" -- "$S2HC" train "$TMP/t.yaml" \
  --set data.dir="$TMP/v100" --set model.vocab=128 --set run.name=v100
expect_out "v100/synth/train.bin: token 100 is 100, outside the vocab of 100" "the error names the shard and the token"
[ ! -e "$TMP/runs/v100" ] && ok "nothing written for it" || fail "a run directory was left behind"
# a FIFO in place of a shard is refused at once (training waited in open(2) forever)
mkdir -p "$TMP/fifo/synth" && cp "$TMP/data/synth/val.bin" "$TMP/fifo/synth/" && mkfifo "$TMP/fifo/synth/train.bin"
expect_status 1 "a FIFO as train.bin is refused" -- timeout 60 "$S2HC" train "$TMP/t.yaml" --set data.dir="$TMP/fifo" --set run.name=fifo
expect_out "synth/train.bin: not a regular file" "the error names the file"
# eval with a validation shard of no window: refused (it added a NaN row and exited 0)
mkdir -p "$TMP/noval/synth" && cp "$TMP/data/synth/train.bin" "$TMP/noval/synth/"
perl -e 'print pack("a8 V V V V Q<", "S2HCTOK", 1, 256, 1, 0, 0)' > "$TMP/noval/synth/val.bin"
sum=$(md5sum < "$TMP/runs/tour/run.h5")
expect_status 1 "eval with an empty validation shard fails" -- "$S2HC" eval "$TMP/runs/tour" --data "$TMP/noval"
expect_out "noval/synth/val.bin: 0 tokens" "the error names the shard"
[ "$(md5sum < "$TMP/runs/tour/run.h5")" = "$sum" ] && ok "the run file is untouched" || fail "a failed eval changed run.h5"
# --resume of a run whose run.h5 cannot be read: refused, the file left as it is (the
# resume started a new log and saved it over the old one, losing every logged row)
expect_status 130 "a run stopped at step 10" -- "$S2HC" train "$TMP/t.yaml" --set run.name=dmg --stop-after 10 --quiet
truncate -s 4000 "$TMP/runs/dmg/run.h5"
sum=$(md5sum < "$TMP/runs/dmg/run.h5"); csum=$(md5sum < "$TMP/runs/dmg/ckpt.h5")
expect_status 1 "--resume with an unreadable run.h5 is refused" -- "$S2HC" train "$TMP/t.yaml" --set run.name=dmg --resume --quiet
expect_out "cannot resume: .*dmg/run.h5" "the error names the run file"
[ "$(md5sum < "$TMP/runs/dmg/run.h5")" = "$sum" ] && [ "$(md5sum < "$TMP/runs/dmg/ckpt.h5")" = "$csum" ] &&
  ok "run.h5 and ckpt.h5 are left as they were" || fail "the refused resume changed the run's files"
# a save past `ulimit -f` says why (the flush's "File too large", not the close's), exits
# 1, and leaves the last checkpoint whole; a link at a .tmp name is replaced, never followed
echo precious > "$TMP/victim"
mkdir -p "$TMP/runs/lim" && ln -s "$TMP/victim" "$TMP/runs/lim/ckpt.h5.tmp"
expect_status 1 "a checkpoint past the file-size limit" -- bash -c 'ulimit -f 400; exec "$0" train "$1" --set run.name=lim --quiet' \
  "$S2HC" "$TMP/t.yaml"
expect_out "lim/ckpt.h5: cannot save checkpoint .*File too large" "the error says File too large"
[ "$(cat "$TMP/victim")" = precious ] && ok "the link's target is untouched" || fail "a link at ckpt.h5.tmp was followed"
ls "$TMP/runs/lim" | grep -q '\.tmp$' && fail "a .tmp was left: $(ls "$TMP/runs/lim")" || ok "no .tmp left"
# stdout and stderr closed (`>&- 2>&-`, as a batch script may start it): the run trains,
# and its log lands nowhere, not in the first file opened (the run's .train.lock took
# stdout's number and got every progress line); a product on a closed stdout still fails
"$S2HC" train "$TMP/t.yaml" --set run.name=closed --set train.steps=5 >&- 2>&-; st=$?
[ "$st" = 0 ] && [ "$(wc -l < "$TMP/runs/closed/.train.lock")" = 1 ] && grep -q "^s2hc train pid" "$TMP/runs/closed/.train.lock" \
  && ok "train with stdout and stderr closed: its lock file holds the holder's line only" \
  || fail "train >&- 2>&-: exit $st, .train.lock: $(head -c 300 "$TMP/runs/closed/.train.lock")"
"$S2HC" inspect "$TMP/runs/closed" --csv >&- 2>"$TMP/err"; st=$?
[ "$st" = 1 ] && grep -q "writing the standard output failed" "$TMP/err" && ok "inspect --csv >&-: exit 1, says so" \
  || fail "inspect --csv >&-: exit $st, $(cat "$TMP/err")"
# files take their mode from the umask as run.h5 does: under umask 002 (a group sharing
# runs/) the lock a --resume by another member opens for writing is group-writable (it
# was 0644: "cannot open .../.train.lock: Permission denied"), as are analyze's files
(umask 002; "$S2HC" train "$TMP/t.yaml" --set run.name=grp --set train.steps=5 --quiet \
  && "$S2HC" analyze "$TMP/runs/grp" -o "$TMP/grp-an" -q) >"$TMP/out" 2>&1
modes=$(stat -c %a "$TMP/runs/grp/.train.lock" "$TMP/runs/grp/run.h5" "$TMP/grp-an/data/meta.gp" "$TMP/grp-an/.analyze-files" | tr '\n' ' ')
[ "$modes" = "664 664 664 664 " ] && ok "umask 002: lock, run file and analysis files are group-writable" \
  || fail "umask 002: modes of .train.lock, run.h5, meta.gp, .analyze-files: $modes"
# on a terminal whose TERM is dumb (Emacs's M-x shell) progress goes a line at a time and
# inspect draws no colour: such a terminal shows ESC[K and colour codes as text; on
# another terminal the line is drawn in place (script(1) gives the run a terminal)
if command -v script >/dev/null; then
  TERM=dumb script -qec "$(printf '%q ' "$S2HC" train "$TMP/t.yaml" --set run.name=dumb --set train.steps=5)" "$TMP/tty" >/dev/null 2>&1
  TERM=dumb script -qec "$(printf '%q ' "$S2HC" inspect "$TMP/runs/dumb" --layer 1)" "$TMP/tty2" >/dev/null 2>&1
  TERM=xterm script -qec "$(printf '%q ' "$S2HC" train "$TMP/t.yaml" --set run.name=xterm --set train.steps=5)" "$TMP/tty3" >/dev/null 2>&1
  # NO_COLOR turns colour off when set and not empty (no-color.org); empty, it is unset
  TERM=xterm NO_COLOR= script -qec "$(printf '%q ' "$S2HC" inspect "$TMP/runs/dumb" --layer 1)" "$TMP/tty4" >/dev/null 2>&1
  TERM=xterm NO_COLOR=1 script -qec "$(printf '%q ' "$S2HC" inspect "$TMP/runs/dumb" --layer 1)" "$TMP/tty5" >/dev/null 2>&1
  grep -q $'\033\\[48;5;' "$TMP/tty4" && ! grep -q $'\033' "$TMP/tty5" && ok "NO_COLOR: empty keeps colour, 1 drops it" \
    || fail "NO_COLOR= / NO_COLOR=1: $(grep -c $'\033' "$TMP/tty4" "$TMP/tty5" | tr '\n' ' ')"
  grep -q "step  *5/5" "$TMP/tty" && ! grep -q $'\033' "$TMP/tty" "$TMP/tty2" && grep -q $'\033\\[K' "$TMP/tty3" \
    && ok "TERM=dumb: no escape codes; TERM=xterm: the line in place" \
    || fail "TERM=dumb on a terminal: $(grep -c $'\033' "$TMP/tty" "$TMP/tty2" "$TMP/tty3" | tr '\n' ' ')"
  # on a terminal narrower than the line (an 80-column pane; the step line is ~85), the
  # line is cut to the width less one: one that wraps leaves a row behind at every redraw
  TERM=xterm S2HC_TEST_PROGRESS_AFTER=0 script -qec "stty cols 40; $(printf '%q ' "$S2HC" train "$TMP/t.yaml" \
    --set run.name=narrow --set train.steps=5)" "$TMP/tty6" >/dev/null 2>&1
  widest=$(awk 'BEGIN { RS = "\r" } /\033\[K/ { sub(/\033\[K.*/, ""); if (length($0) > w) w = length($0) } END { print w + 0 }' "$TMP/tty6")
  # (its ETA, the line's last field, kept whole: a cut one, "ETA 1" for "ETA 12m30s", misleads)
  [ "$widest" -gt 30 ] && [ "$widest" -le 39 ] && grep -q "step  *[0-9]/5 | loss" "$TMP/tty6" \
    && grep -aq "| ETA [0-9][0-9hms]*"$'\033' "$TMP/tty6" \
    && ok "a 40-column terminal: the live line cut to 39 columns, its ETA whole" \
    || fail "a 40-column terminal: the live line's widest $widest: $(tr '\r' '\n' < "$TMP/tty6" | grep -a step | tail -n 1 | cat -v)"
fi
# an option is not another option's value: `eval RUN --data --batches 1` read the data
# from a folder named --batches; `export RUN -o --dtype` wrote a file named --dtype
expect_status 2 "eval --data followed by an option is refused" -- "$S2HC" eval "$TMP/runs/tour" --data --batches 1
expect_out "'--data' \(or its value is missing or is an option\)" "eval says --data's value is an option"
# a --data longer than data.dir can be is refused by its length: it was cut to 511 bytes,
# another folder
LONGD=$TMP/$(printf 'd%.0s' $(seq 1 300))/$(printf 'e%.0s' $(seq 1 300))
expect_status 2 "eval --data of over 511 bytes is refused" -- "$S2HC" eval "$TMP/runs/tour" --data "$LONGD"
expect_out "eval --data: .*: a path of [0-9]+ bytes, longer than 511 \(the longest data.dir\)" "eval names the limit"
expect_status 2 "probe --data of over 511 bytes is refused" -- "$S2HC" probe "$TMP/runs/tour" --data "$LONGD"
expect_out "probe --data: .*: a path of [0-9]+ bytes, longer than 511" "probe names the limit"
(cd "$TMP" && "$S2HC" export "$TMP/runs/tour" -o --dtype) >"$TMP/out" 2>&1; st=$?
[ "$st" = 2 ] && [ ! -e "$TMP/--dtype" ] && ok "export -o followed by an option is refused" \
  || fail "export -o --dtype: exit $st, $(ls -d "$TMP"/--* 2>/dev/null)"
(cd "$TMP" && "$S2HC" data prepare --dir --force --only kjv) >"$TMP/out" 2>&1; st=$?
[ "$st" = 2 ] && [ ! -e "$TMP/--force" ] && ok "data prepare --dir followed by an option is refused" \
  || fail "data prepare --dir --force: exit $st, $(ls -d "$TMP"/--* 2>/dev/null)"
# a run directory given by a long path (760 bytes, as an absolute path can be): eval locks
# its .train.lock (the lock's path was cut at 607 bytes: a stray file beside the run was
# locked, and a training of the run not kept out); past RUN_DIR_MAX (1024) refused by name
seg=$(printf '%0200d' 0); lp="$TMP/lp/$seg/$seg/$seg"; lp="$lp/${seg:0:$((760 - ${#lp} - 1))}"
mkdir -p "$lp" && cp "$TMP/runs/tour/"*.h5 "$lp/"
expect_status 0 "eval of a run at a 760-byte path" -- "$S2HC" eval "$lp" --batches 1
[ -f "$lp/.train.lock" ] && [ "$(ls -A "$(dirname "$lp")" | wc -l)" = 1 ] && ok "it locks the run's own .train.lock" \
  || fail "eval at a 760-byte path locked elsewhere: beside the run: $(ls -A "$(dirname "$lp")" | cut -c1-20 | tr '\n' ' ')"
lp2="$lp/$seg/$seg"; mkdir -p "$lp2" && cp "$TMP/runs/tour/"*.h5 "$lp2/"
for c in eval probe inspect sample export; do
  expect_status 1 "$c of a run at a ${#lp2}-byte path is refused" -- "$S2HC" $c "$lp2"
  expect_out "a run directory path of ${#lp2} bytes, longer than 1024" "$c says the path's length and the limit"
done
rm -rf "$TMP/lp"
# the command line: one config file; a --set without '='; a run folder that cannot be made
# (run.out under a plain file): each refused with its reason, nothing written
expect_status 2 "train of two config files is refused" -- "$S2HC" train "$TMP/t.yaml" "$TMP/t.yaml" --set run.name=two
expect_out "train: one config file only \('$TMP/t.yaml'\)" "names the second file"
expect_status 2 "--set without '=' is refused" -- "$S2HC" train "$TMP/t.yaml" --set train.steps --set run.name=noeq
expect_out "--set train.steps: expected KEY=VALUE" "names the --set"
touch "$TMP/plain"
expect_status 1 "a run.out under a plain file fails" -- "$S2HC" train "$TMP/t.yaml" --set run.out="$TMP/plain/runs" --quiet
expect_out "cannot create $TMP/plain/runs/tour: Not a directory" "names the folder and why"
[ ! -e "$TMP/runs/two" ] && [ ! -e "$TMP/runs/noeq" ] && ok "nothing written by the refused trainings" \
  || fail "refused trainings left: $(ls "$TMP/runs")"
# a run folder whose run.h5 is some other HDF5 file (no 'config' attribute) beside a real
# checkpoint: the commands that open a run say so, exit 1, and write nothing there
if command -v h5mkgrp >/dev/null; then
  mkdir -p "$TMP/alien"
  cp "$TMP/runs/tour/ckpt.h5" "$TMP/alien/"
  h5mkgrp "$TMP/alien/run.h5" /train
  sums=$(md5sum "$TMP/alien/"* | sort)
  for c in eval probe export sample; do
    expect_status 1 "$c of a run.h5 without its config" -- "$S2HC" $c "$TMP/alien"
    expect_out "$TMP/alien/run.h5: no root attribute 'config' \(not a run file of s2hc train\?\)" "$c: names the file and what it lacks"
  done
  # (the run lock, .train.lock, as every command that opens a run leaves it)
  [ "$(md5sum "$TMP/alien/"* | sort)" = "$sums" ] && [ "$(ls "$TMP/alien" | tr '\n' ' ')" = "ckpt.h5 run.h5 " ] \
    && ok "nothing written in that folder" || fail "the folder changed: $(ls -A "$TMP/alien")"
  rm -rf "$TMP/alien"
fi
# a checkpoint that cannot be written (past the file-size limit, ulimit -f: a full disk's
# error as the write sees it): exit 1 naming ckpt.h5 and why, the previous checkpoint kept
# byte for byte, no temporary file left; --resume then goes on from that checkpoint and
# ends with each step logged once
cat > "$TMP/fsz.yaml" <<YAML
model: {n_layer: 2, n_head: 2, n_embd: 64, block_size: 32}
residual: {method: s2hc, n_streams: 4}
train: {batch: 2, steps: 4, warmup: 1, eval_every: 2, eval_batches: 1, ckpt_every: 2, threads: 1}
data: {dir: $TMP/data, train: synth, ood: []}
run: {name: fsz, out: $TMP/runs}
probe: {every: 0, final_samples: 0}
YAML
expect_status 130 "a run stopped at its step-2 checkpoint (as interrupted)" -- "$S2HC" train "$TMP/fsz.yaml" --quiet --stop-after 2
cp "$TMP/runs/fsz/ckpt.h5" "$TMP/fsz.ckpt"
ck=$(stat -c %s "$TMP/fsz.ckpt")
expect_status 1 "--resume whose checkpoint write fails" -- bash -c "ulimit -f $(( ck / 2048 )); exec \"\$0\" train \"\$1\" --resume --quiet" "$S2HC" "$TMP/fsz.yaml"
expect_out "s2hc: error: $TMP/runs/fsz/ckpt.h5: cannot save checkpoint \(writing $TMP/runs/fsz/ckpt.h5.tmp\): .*File too large" \
  "names the checkpoint and the reason"
cmp -s "$TMP/runs/fsz/ckpt.h5" "$TMP/fsz.ckpt" && ok "the step-2 checkpoint is kept as it was" || fail "ckpt.h5 changed by the failed save"
ls "$TMP/runs/fsz/"*.tmp >/dev/null 2>&1 && fail "a temporary file left: $(ls "$TMP/runs/fsz")" || ok "no temporary file left"
expect_status 0 "--resume after the failed save" -- "$S2HC" train "$TMP/fsz.yaml" --resume --quiet
[ "$(h5dump -d /train/step "$TMP/runs/fsz/run.h5" 2>/dev/null | sed -n 's/^ *(0): \([0-9, ]*\)$/\1/p')" = "1, 2, 3, 4" ] \
  && h5dump -a /status "$TMP/runs/fsz/run.h5" 2>/dev/null | grep -q '"finished"' \
  && ok "it finishes with steps 1..4 logged once" || fail "after the failed save: $(h5dump -d /train/step -a /status "$TMP/runs/fsz/run.h5" 2>&1 | grep '(0)')"
finish train_cli
