#!/usr/bin/env bash
# s2hc runs: every run under a folder, a line each, its status, step and losses as the run
# files hold them; --csv at full precision; --sort; repeats listed; bad paths named; nothing
# written.
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh
make_synth_data "$TMP/data"
R=$TMP/runs
conf() { # conf NAME METHOD SEED STEPS [N]
  cat > "$TMP/$1.yaml" <<YAML
model: {n_layer: 1, n_head: 2, n_embd: 32, block_size: 32}
residual: {method: $2, n_streams: ${5:-4}}
train: {batch: 4, steps: $4, warmup: 2, lr: 0.003, min_lr: 0.0003, eval_every: 5, eval_batches: 2, ckpt_every: 5, seed: $3}
data: {dir: $TMP/data, train: synth, ood: [synth_ood]}
run: {name: $1, out: $R}
probe: {every: 0, final_samples: 0}
YAML
}
conf a identity 1 10; "$S2HC" train "$TMP/a.yaml" --quiet >/dev/null 2>&1
conf b s2hc 2 10; "$S2HC" train "$TMP/b.yaml" --quiet >/dev/null 2>&1
conf c rc 3 10 1; "$S2HC" train "$TMP/c.yaml" --quiet >/dev/null 2>&1
conf stop hc 4 10; "$S2HC" train "$TMP/stop.yaml" --quiet --stop-after 6 >/dev/null 2>&1
conf nan s2hc 5 10; S2HC_FAULT_NAN_AT_STEP=7 "$S2HC" train "$TMP/nan.yaml" --quiet >/dev/null 2>&1
cp -r "$R/a" "$R/a,copy"   # a repeat of a's config, in a folder whose name holds a comma
mkdir -p "$R/é"; cp -r "$R/b/." "$R/é/"   # a wide name: the columns still line up
st() { h5dump -a /status "$R/$1/run.h5" 2>/dev/null | sed -n 's/.*(0): "\(.*\)".*/\1/p'; }
[ "$(st a)/$(st stop)/$(st nan)" = "finished/running/diverged" ] && ok "the runs' statuses to list" \
  || fail "fixture: statuses $(st a)/$(st stop)/$(st nan)"
sums=$(find "$R" -type f -exec md5sum {} + | sort)

expect_status 0 "runs lists a folder of runs" -- "$S2HC" runs "$R"
for r in a b c stop nan 'a,copy' 'é'; do
  grep -q "^$R/$r " "$TMP/out" && ok "a line for $r" || fail "no line for $r"
done
line() { grep "^$R/$1 " "$TMP/out"; }
line a | grep -Eq " identity +4 .* 1 +10/10 +finished " && ok "a: method, n, seed, step, status" || fail "a: $(line a)"
line c | grep -Eq " rc +1 .* 3 +10/10 +finished " && ok "rc: one stream" || fail "c: $(line c)"
line stop | grep -Eq " 6/10 +stopped " && ok "a run stopped by --stop-after: its step, stopped" || fail "stop: $(line stop)"
line nan | grep -Eq " 7/10 +diverged " && ok "a diverged run: its step, diverged" || fail "nan: $(line nan)"
line a | grep -Eq " [0-9]\.[0-9]{4} @10 " && ok "the validation loss with its step" || fail "a's val: $(line a)"
grep -Eq "^7 runs: 5 finished, 1 diverged, 1 stopped$" "$TMP/out" && ok "counts per status" \
  || fail "counts: $(tail -1 "$TMP/out")"
# every line's status in the header's column (the é counted as one column)
python3 - "$TMP/out" <<'PY' && ok "columns line up, a wide name included" || fail "columns do not line up: $(cat "$TMP/out")"
import sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
col = lines[0].index("status")
for l in lines[1:-1]:
    word = l[col:].split()[0] if len(l) > col else ""
    if word not in ("finished", "stopped", "diverged") or l[col - 1] != " ":
        sys.exit(1)
PY

# CSV: each field against the run file, losses to the last bit
expect_status 0 "runs --csv" -- "$S2HC" runs "$R" --csv
cp "$TMP/out" "$TMP/runs.csv"
for r in a b nan stop; do
  h5dump --onlyattr=0 -m %.17g -d /eval/val_loss "$R/$r/run.h5" 2>/dev/null | sed -n 's/^ *([0-9]*): *//p' | tr ',' '\n' \
    | grep -v '^ *$' | tail -1 | tr -d ' ' > "$TMP/val_$r"
done
python3 - "$TMP/runs.csv" "$R" "$TMP" <<'PY' && ok "--csv: steps, statuses and validation losses as the run files hold them" \
  || fail "--csv disagrees with the run files"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], encoding="utf-8")))
R, T = sys.argv[2], sys.argv[3]
by = {r["run"][len(R) + 1:]: r for r in rows}
assert set(by) == {"a", "b", "c", "stop", "nan", "a,copy", "é"}, by.keys()
assert [by[k]["status"] for k in ("a", "stop", "nan")] == ["finished", "stopped", "diverged"]
assert (by["stop"]["step"], by["stop"]["steps"], by["c"]["n"], by["c"]["method"]) == ("6", "10", "1", "rc")
for r in ("a", "b", "nan", "stop"):
    want = float(open(f"{T}/val_{r}").read())
    assert float(by[r]["val_loss"]) == want, (r, by[r]["val_loss"], want)
assert by["a"]["val_loss"] == by["a,copy"]["val_loss"] and float(by["a"]["tokens_per_s"]) > 0
assert float(by["a"]["wall_s"]) > 0 and by["stop"]["val_step"] == "5"
assert all(r["eta_s"] == "" for r in rows), "a time left for a run not in training"
PY
# --sort val: lowest first, then train
expect_status 0 "runs --sort val" -- "$S2HC" runs "$R" --sort val --csv
python3 - "$TMP/out" <<'PY' && ok "--sort val: ascending" || fail "--sort val: $(cut -d, -f1,12 "$TMP/out")"
import csv, sys
v = [float(r["val_loss"]) for r in csv.DictReader(open(sys.argv[1], encoding="utf-8")) if r["val_loss"]]
assert len(v) == 7 and v == sorted(v), v
PY
for k in train:train_loss:1 tokens:tokens_per_s:-1; do
  IFS=: read -r key col sign <<<"$k"
  "$S2HC" runs "$R" --sort "$key" --csv >"$TMP/out" 2>&1
  python3 - "$TMP/out" "$col" "$sign" <<'PY' && ok "--sort $key" || fail "--sort $key: $(cat "$TMP/out")"
import csv, sys
f = [r[sys.argv[2]] for r in csv.DictReader(open(sys.argv[1], encoding="utf-8"))]
v = [float(sys.argv[3]) * float(x) for x in f if x]
# a run without the value (the diverged run's training loss) comes last
assert len(f) == 7 and v == sorted(v) and len(set(v)) > 2 and "" not in f[:len(v)], f
PY
done
expect_status 0 "runs --sort step" -- "$S2HC" runs "$R/nan" "$R/a" "$R/stop" --sort step
[ "$(sed -n '2,4p' "$TMP/out" | awk '{print $1}' | xargs -n1 basename | tr '\n' ' ')" = "a nan stop " ] \
  && ok "--sort step: furthest first" || fail "--sort step: $(cat "$TMP/out")"
expect_status 0 "runs of paths in the order given" -- "$S2HC" runs "$R/stop" "$R/a/run.h5"
[ "$(sed -n '2,3p' "$TMP/out" | awk '{print $1}' | tr '\n' ' ')" = "$R/stop $R/a " ] \
  && ok "the order given" || fail "order: $(cat "$TMP/out")"
# a long read shows its progress on stderr (here at once), the CSV on stdout alone
S2HC_TEST_PROGRESS_AFTER=0.001 "$S2HC" runs "$R" --csv >"$TMP/p.csv" 2>"$TMP/p.err"
grep -Eq "^reading runs: [1-7]/7 run files \| [0-9]+s \| ETA" "$TMP/p.err" && ok "progress of the reading on stderr" \
  || fail "progress: $(cat "$TMP/p.err")"
cmp -s "$TMP/p.csv" "$TMP/runs.csv" && ok "and the CSV the same" || fail "the CSV changed with progress shown"
# analyze reads with the same loader: its progress line too, none with -q (no progress lines)
S2HC_TEST_PROGRESS_AFTER=0.001 "$S2HC" analyze "$R/a" "$R/b" -o "$TMP/an" >/dev/null 2>"$TMP/an.err"
grep -q "^reading runs: " "$TMP/an.err" && ok "analyze: the reading's progress" || fail "analyze: $(cat "$TMP/an.err")"
S2HC_TEST_PROGRESS_AFTER=0.001 "$S2HC" analyze "$R/a" "$R/b" -o "$TMP/an" -q >/dev/null 2>"$TMP/an.err"
! grep -q "^reading runs" "$TMP/an.err" && ok "analyze -q: no progress line" || fail "analyze -q: $(cat "$TMP/an.err")"
# --diff: a column for each config key that differs (here train.lr alone; the method, n and
# seed are columns already), --key: the keys asked for
conf lr identity 1 10; "$S2HC" train "$TMP/lr.yaml" --quiet --set train.lr=0.001 --set run.out="$TMP/runs2" >/dev/null 2>&1
expect_status 0 "runs --diff" -- "$S2HC" runs "$R/a" "$TMP/runs2/lr" "$R/b" --diff --csv
[ "$(head -1 "$TMP/out")" = "run,variant,method,n,scale,corpus,seed,step,steps,status,train_loss,val_loss,val_step,tokens_per_s,wall_s,eta_s,train.lr" ] \
  && ok "--diff: train.lr, the one key that differs beyond the columns shown" || fail "--diff header: $(head -1 "$TMP/out")"
[ "$(cut -d, -f17 "$TMP/out" | tail -n +2 | tr '\n' ' ')" = "0.003 0.001 0.003 " ] && ok "--diff: each run's value" \
  || fail "--diff values: $(cat "$TMP/out")"
expect_status 0 "runs --diff, the table" -- "$S2HC" runs "$R/a" "$TMP/runs2/lr" --diff
grep -Eq "^$TMP/runs2/lr .* 0\.001$" "$TMP/out" && head -1 "$TMP/out" | grep -Eq " train\.lr$" && ok "--diff's column in the table" \
  || fail "--diff table: $(cat "$TMP/out")"
expect_status 0 "runs --key" -- "$S2HC" runs "$R/a" "$R/c" --key model.n_embd,residual.method,data.ood --csv
python3 - "$TMP/out" <<'PY' && ok "--key: the keys asked for, a list whole" || fail "--key: $(cat "$TMP/out")"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], encoding="utf-8")))
assert [(r["model.n_embd"], r["residual.method"], r["data.ood"]) for r in rows] == [("32", "identity", "[synth_ood]"), ("32", "rc", "[synth_ood]")], rows
PY
# --key repeats, its lists joined (the one option of runs that does: --sort twice is refused)
"$S2HC" runs "$R/a" "$R/c" --key model.n_embd --key=residual.method,data.ood --csv > "$TMP/k2.csv" 2>&1 \
  && cmp -s "$TMP/out" "$TMP/k2.csv" && ok "--key twice: the columns of the one list" || fail "--key twice: $(cat "$TMP/k2.csv")"
# 32 columns at most: --key's 32 (every key but train.lr) leave --diff's train.lr out, said
K=$("$S2HC" config | sed -n 's/^  \([a-z_]*\.[a-z_]*\) .*/\1/p' | grep -vx train.lr | head -32 | paste -sd, -)
expect_status 0 "runs --diff past 32 columns" -- "$S2HC" runs "$R/a" "$TMP/runs2/lr" --diff --key "$K" --csv
"$S2HC" runs "$R/a" "$TMP/runs2/lr" --diff --key "$K" --csv 2>/dev/null >"$TMP/k.csv"
[ "$(head -1 "$TMP/k.csv" | tr ',' '\n' | wc -l)" = 48 ] && ! head -1 "$TMP/k.csv" | grep -q train.lr \
  && ok "--key's 32 columns, --diff's left out" || fail "32 columns: $(head -1 "$TMP/k.csv")"
expect_out "note: --diff: 1 more config key differs between the runs than the 32 columns shown" "the key left out is said"
expect_status 2 "--key of an unknown key" -- "$S2HC" runs "$R" --key train.lr,trian.steps
expect_out "--key 'trian.steps': not a config key" "names it"
# a corpus name of 60 bytes (an_run keeps 63): whole in the table, its column sized to it
LONG=corpus_named_at_length_sixty_bytes_to_pass_a_cell_of_48_wxyz
cp -r "$TMP/data/synth" "$TMP/data/$LONG"
conf long identity 1 4; "$S2HC" train "$TMP/long.yaml" --quiet --set data.train=$LONG --set run.out="$TMP/runs3" >/dev/null 2>&1
expect_status 0 "runs of a run on a long corpus name" -- "$S2HC" runs "$TMP/runs3/long" "$R/a"
grep -Eq "^$TMP/runs3/long +identity +4 +L1-C32-T32 +$LONG +1 " "$TMP/out" && ok "a long corpus name whole in the table" \
  || fail "long corpus: $(cat "$TMP/out")"
# a value of --key past 40 bytes is cut between characters: data.dir through folders of é
# (two bytes each) whose names differ by one byte, so that one of them puts a character's
# middle at the cut; a key named twice is one column
for pre in "" a; do
  d="$TMP/${pre}éééééééééééééééééééééééééééééééééééééééé"; ln -sfn "$TMP/data" "$d"
  conf "u$pre" identity 1 2; "$S2HC" train "$TMP/u$pre.yaml" --quiet --set data.dir="$d" --set run.out="$TMP/runs4" >/dev/null 2>&1
done
"$S2HC" runs "$TMP/runs4" --key data.dir,data.dir >"$TMP/u.out" 2>&1
python3 -c 'import sys; t = open(sys.argv[1], "rb").read().decode("utf-8"); l = t.splitlines()
assert len(l) == 4 and l[0].endswith("data.dir") and l[0].count("data.dir") == 1 and all(x.endswith("...") for x in l[1:3]), t' "$TMP/u.out" \
  && ok "--key's long values cut between characters, one column for a key named twice" || fail "cut: $(cat "$TMP/u.out")"
"$S2HC" runs "$TMP/nope" --csv >"$TMP/none.csv" 2>/dev/null
[ $? = 1 ] && [ ! -s "$TMP/none.csv" ] && ok "--csv with no readable run prints no header" || fail "--csv of nothing: $(cat "$TMP/none.csv")"
# bad input
expect_status 2 "--sort with an unknown key" -- "$S2HC" runs "$R" --sort loss
expect_out "--sort 'loss': one of val, train, tokens, step" "names the keys"
expect_status 1 "a missing path among runs" -- "$S2HC" runs "$R/a" "$R/nope"
expect_out "$R/nope: No such file or directory" "names the missing path"
grep -q "^$R/a " "$TMP/out" && ok "the readable run is still listed" || fail "the readable run is not listed"
mkdir -p "$TMP/empty"
expect_status 1 "a folder without runs" -- "$S2HC" runs "$TMP/empty"
expect_out "empty: no run.h5 found" "says so"
(cd "$TMP/empty" && "$S2HC" runs >"$TMP/out" 2>&1); [ $? = 1 ] && grep -q "no folder runs/ here" "$TMP/out" \
  && ok "no runs/ folder here: says what to give" || fail "runs without runs/: $(cat "$TMP/out")"
(cd "$TMP" && "$S2HC" runs >"$TMP/out" 2>&1) && grep -q "^runs/b " "$TMP/out" && ok "runs/ by default" \
  || fail "default folder: $(cat "$TMP/out")"
# make paper's layout: runs/<preset>/<grid>/<point>/run.h5, three levels below runs/
mkdir -p "$TMP/deep/runs/tiny/grid" && cp -r "$R/c" "$TMP/deep/runs/tiny/grid/c"
(cd "$TMP/deep" && "$S2HC" runs >"$TMP/out" 2>&1) && grep -q "^runs/tiny/grid/c " "$TMP/out" \
  && ok "a run three levels below runs/" || fail "deep: $(cat "$TMP/out")"
[ "$(find "$R" -type f -exec md5sum {} + | sort)" = "$sums" ] && ok "nothing written" || fail "runs changed a file"
[ "$(find "$R" -type f | wc -l)" = "$(printf '%s\n' "$sums" | wc -l)" ] && ok "no file added" || fail "a file was added"
# a training in progress: running while it holds the run, stopped once it is interrupted
conf live s2hc 6 100000
"$S2HC" train "$TMP/live.yaml" --quiet >/dev/null 2>&1 &
live=$!
live_saved() { "$S2HC" runs "$R/live" --csv 2>/dev/null | python3 -c 'import csv, sys
r = list(csv.DictReader(sys.stdin)); sys.exit(not (r and r[0]["step"] not in ("", "0") and r[0]["eta_s"]))'; }
wait_for 300 live_saved
expect_status 0 "runs while a training writes one of them" -- "$S2HC" runs "$R/live" "$R/a"
grep -Eq "^$R/live .* [0-9]+/100000 +running .*, ~[0-9hms]+ left$" "$TMP/out" && ok "a training in progress: running, the time left" \
  || fail "live: $(cat "$TMP/out")"
"$S2HC" runs "$R/live" --csv | python3 -c 'import csv, sys
r = list(csv.DictReader(sys.stdin))[0]; s, w, e = float(r["step"]), float(r["wall_s"]), float(r["eta_s"])
assert r["status"] == "running" and abs(e - (100000 - s) * w / s) <= 1e-9 * e, r' \
  && ok "--csv: eta_s, the steps left at the pace so far" || fail "eta_s: $("$S2HC" runs "$R/live" --csv)"
kill -TERM $live; wait $live
expect_status 0 "runs of the interrupted training" -- "$S2HC" runs "$R/live"
grep -Eq "^$R/live .* stopped " "$TMP/out" && ok "interrupted: stopped" || fail "live after TERM: $(cat "$TMP/out")"
# the scale column: a preset's name where the model is that preset's (tiny: 2 layers, 2
# heads, 64 channels, 64 tokens), else L<layers>-C<channels>-T<tokens>
cat > "$TMP/p.yaml" <<YAML
model: {n_layer: 2, n_head: 2, n_embd: 64, block_size: 64}
residual: {method: identity, n_streams: 2}
train: {batch: 2, steps: 1, warmup: 1, eval_every: 1, eval_batches: 1, threads: 1}
data: {dir: $TMP/data, train: synth, ood: []}
run: {name: p, out: $TMP/runs3}
probe: {every: 0, final_samples: 0}
YAML
"$S2HC" train "$TMP/p.yaml" --quiet >/dev/null 2>&1
"$S2HC" train "$TMP/p.yaml" --quiet --set model.n_head=4 --set run.name=h4 >/dev/null 2>&1
expect_status 0 "runs of a tiny-preset model and one that differs in heads" -- "$S2HC" runs "$TMP/runs3/p" "$TMP/runs3/h4" "$R/a" --csv
[ "$(cut -d, -f5 "$TMP/out" | tail -n +2 | tr '\n' ' ')" = "tiny L2-C64-T64 L1-C32-T32 " ] \
  && ok "scale: the preset's name only where every dimension is the preset's" || fail "scale column: $(cat "$TMP/out")"
# --key: 32 keys at most (the 33rd refused, naming the limit); an unknown option refused
all=$("$S2HC" config | awk '/^  [a-z]+\.[a-z_0-9]+ /{print $1}')
k32=$(echo "$all" | head -n 32 | paste -sd,); k33=$(echo "$all" | head -n 33 | paste -sd,)
expect_status 0 "runs --key of 32 keys" -- "$S2HC" runs "$R/a" --key "$k32" --csv
[ "$(head -1 "$TMP/out" | tr ',' '\n' | wc -l)" = 48 ] && ok "--key: 32 columns after the 16" || fail "--key 32: $(head -1 "$TMP/out")"
expect_status 2 "runs --key of 33 keys" -- "$S2HC" runs "$R/a" --key "$k33"
expect_out "^s2hc: error: --key: at most 32 keys$" "says the limit"
expect_status 2 "runs --bogus" -- "$S2HC" runs "$R/a" --bogus
expect_out "unknown option '--bogus'" "names the option"
expect_out "^usage: s2hc runs" "and shows the usage"
finish runs_cli
