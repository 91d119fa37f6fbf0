#!/usr/bin/env bash
# Probes from the shell: train with probes, look at them with `s2hc inspect`, rerun the
# final probe with `s2hc probe`, and check the run file's /probe and /final groups.
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh
make_synth_data "$TMP/data"
conf() { # conf NAME METHOD N
  cat > "$TMP/$1.yaml" <<YAML
model: {n_layer: 1, n_head: 2, n_embd: 16, block_size: 16}
residual: {method: $2, n_streams: $3}
train: {batch: 4, steps: 20, warmup: 2, lr: 0.003, min_lr: 0.0003, eval_every: 0, eval_batches: 1, ckpt_every: 0}
data: {dir: $TMP/data, train: synth, ood: []}
run: {name: $1, out: $TMP/runs}
probe: {every: 10, final_samples: 8}
YAML
}
conf pm mhc 4
conf ps s2hc 4
conf pr rc 1
expect_status 0 "inspect --help" -- "$S2HC" inspect --help
expect_out "example" "inspect --help shows an example"
expect_status 0 "probe --help" -- "$S2HC" probe --help
expect_out "example" "probe --help shows an example"
expect_status 0 "train mhc with probes" -- "$S2HC" "train" "$TMP/pm.yaml"
# the probes' cost it prints is the run file's /probe@time_fraction
pct=$(sed -n 's/^probes: .* s, \([0-9.]*\)% of the training.*/\1/p' "$TMP/out")
if command -v h5dump >/dev/null; then
  frac=$(h5dump -a /probe/time_fraction "$TMP/runs/pm/run.h5" | awk '/\(0\)/ { print $2 }')
  awk -v p="$pct" -v f="$frac" 'BEGIN { exit !(p != "" && f != "" && (p - 100 * f < 0.006) && (100 * f - p < 0.006)) }' &&
    ok "the printed probe cost is /probe@time_fraction" || fail "printed '$pct' %, the file $frac"
fi
# its seconds to the millisecond below one (a short run read "0.0 s, 2.63 %"), to a tenth
# above (a loaded machine's probes may take longer: the format is checked either way)
secs=$(sed -n 's/^probes: \([0-9.]*\) s, .*/\1/p' "$TMP/out")
awk -v s="$secs" 'BEGIN { n = split(s, d, "."); exit !(n == 2 && length(d[2]) == (s + 0 < 0.9995 ? 3 : 1)) }' &&
  ok "the probes' seconds: $secs" || fail "the probes' seconds: '$secs': $(grep '^probes:' "$TMP/out")"
expect_status 0 "train s2hc with probes" -- "$S2HC" train "$TMP/ps.yaml" --quiet
expect_status 0 "train rc with probes" -- "$S2HC" train "$TMP/pr.yaml" --quiet
# the checkpoint given for the run file: said as such (it used to read as a run without probes)
expect_status 1 "inspect of the checkpoint's path" -- "$S2HC" inspect "$TMP/runs/ps/ckpt.h5"
expect_out "ckpt.h5 is not a run file \(its format is 's2hc-ckpt'\); give the run directory or its run.h5" \
  "inspect names the file's format"
grep -q "holds no probes" "$TMP/out" && fail "inspect says the checkpoint holds no probes" || ok "no word of missing probes"
expect_status 0 "inspect of the run file's path" -- "$S2HC" inspect "$TMP/runs/ps/run.h5"
expect_status 1 "inspect --layer of rc" -- "$S2HC" inspect "$TMP/runs/pr" --layer 0
expect_out "method rc has no residual matrices \(n = 1\)" "inspect --layer of rc says why"
if command -v h5dump >/dev/null; then
  expect_status 0 "h5dump -H reads the probes" -- h5dump -H "$TMP/runs/pm/run.h5"
  expect_out 'DATASET "H_res_mean"' "/probe/H_res_mean is there"
  expect_out 'DATASET "composite"' "/final/composite is there"
  expect_out 'DATASET "jacobian_norm_residual"' "/final/jacobian_norm_residual is there"
  expect_status 0 "h5dump -p /final/H_res" -- h5dump -p -H -d /final/H_res "$TMP/runs/pm/run.h5"
  expect_out '\( 8, 2, 4, 4 \) / \( H5S_UNLIMITED, 2, 4, 4 \)' "/final/H_res is extendable on its first axis"
  expect_out 'CHUNKED \( 8, 2, 4, 4 \)' "/final/H_res is chunked"
  expect_status 0 "h5dump /probe/step" -- h5dump -d /probe/step "$TMP/runs/pm/run.h5"
  expect_out '0, 10, 20' "probes at steps 0, 10 and 20"
fi
# the documented layout: every dataset the tables of docs/probes.md and docs/runfile.md
# list is in the run file with the listed rank, dtype and units, and the file holds no other
# (with the ablations of `s2hc ablate --record`, docs/runfile.md's /ablate)
if command -v h5dump >/dev/null && command -v python3 >/dev/null; then
  "$S2HC" ablate --record "$TMP/runs/pm" --batches 1 >/dev/null 2>&1 || fail "ablate --record of pm"
  python3 - docs/probes.md docs/runfile.md "$TMP/runs/pm/run.h5" > "$TMP/py" 2>&1 <<'PY'
import re, subprocess, sys
doc = {}
for md in sys.argv[1:3]:
    for line in open(md):
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if not line.startswith("| `/"):
            continue
        if len(c) == 3:  # probes.md: path | shape [dtype] | meaning
            m = re.match(r"`\[([^\]]*)\]`\s*(\w*)", c[1])
            want = (len(m.group(1).split(",")), m.group(2) or "float64", None)
        else:            # runfile.md: dataset | kind | dtype | shape | units | meaning
            want = (0 if c[3] == "scalar" else len(c[3].strip("`[]").split(",")), c[2], c[4].strip("`"))
        for path in re.findall(r"`(/[^`]+)`", c[0]):
            doc[path] = want
types = {"H5T_IEEE_F64LE": "float64", "H5T_IEEE_F32LE": "float32", "H5T_STD_I64LE": "int64"}
ls = subprocess.run(["h5ls", "-r", sys.argv[3]], capture_output=True, text=True).stdout
bad, seen = [], set()
for path in re.findall(r"^(\S+)\s+Dataset", ls, re.M):
    h = subprocess.run(["h5dump", "-A", "-d", path, sys.argv[3]], capture_output=True, text=True).stdout
    dims = re.search(r"DATASPACE\s+(SCALAR|SIMPLE \{ \( ([^)]*) \))", h)
    got = (0 if dims.group(1) == "SCALAR" else len(dims.group(2).split(",")),
           types.get(re.search(r"DATATYPE\s+(\S+)", h).group(1)))
    key = next((k for k in doc if re.fullmatch(re.sub(r"<[^>]*>", "[^/]+", k), path)), None)
    if key is None:
        bad.append("%s is in the file, not in the docs" % path)
        continue
    seen.add(key)
    if got != doc[key][:2]:
        bad.append("%s: rank %d %s in the file, %d %s in the docs" % ((path,) + got + doc[key][:2]))
    units = re.search(r'ATTRIBUTE "units" \{.*?\(0\): "([^"]*)"', h, re.S)
    if doc[key][2] is not None and (units.group(1) if units else "") != doc[key][2]:
        bad.append("%s: units '%s', the docs '%s'" % (path, units.group(1) if units else "", doc[key][2]))
for k in doc:
    if k not in seen and "<" not in k:
        bad.append("%s is in the docs, not in the file" % k)
print("\n".join(bad) if bad else "layout ok")
PY
  grep -qx "layout ok" "$TMP/py" && ok "the run file's layout is the documented one" || fail "layout: $(cat "$TMP/py")"
fi
expect_status 0 "inspect: one line per sublayer" -- "$S2HC" inspect "$TMP/runs/pm"
expect_out "probe at step 20" "the last probe by default"
expect_out "^ +1 +0 +mlp" "a line for sublayer 1"
expect_status 0 "inspect --layer" -- "$S2HC" inspect "$TMP/runs/pm" --layer 1 --step 10
expect_out "row sum" "row sums"
expect_out "col sum" "column sums"
expect_out "singular values" "singular values"
expect_out "deviation H_res - J" "deviation singular values"
expect_out "cosine similarity" "stream cosine similarity"
expect_out "heat map" "a heat map (plain, not a terminal)"
grep -q $'\033\[' "$TMP/out" && fail "ANSI colours in a pipe" || ok "no ANSI colours in a pipe"
expect_status 0 "inspect --color" -- "$S2HC" inspect "$TMP/runs/pm" --layer 0 --color
grep -q $'\033\[48;5;' "$TMP/out" && ok "--color paints the cells" || fail "--color without ANSI backgrounds"
expect_status 0 "inspect --csv" -- "$S2HC" inspect "$TMP/runs/pm" --csv
expect_out "^run,method,step,layer,block,kind," "CSV header"
[ "$(grep -c ",mhc,20,[0-9]*,[0-9]*,\(attn\|mlp\)," "$TMP/out")" = 2 ] && grep -q ",mhc,20,2,,end,,,,,,,,,,,,[0-9]" "$TMP/out" && ok "one CSV row per sublayer, and the streams at the end" || fail "CSV rows: $(cat "$TMP/out")"
expect_status 0 "inspect --layer --csv" -- "$S2HC" inspect "$TMP/runs/pm" --layer 0 --csv
expect_out "^run,method,step,layer,quantity,i,j,value$" "long CSV header"
[ "$(grep -c ',H_res,' "$TMP/out")" = 16 ] && ok "16 H_res entries" || fail "H_res entries in CSV"
# a folder with a comma and a quote is one CSV field, quoted, in every row of each view
# (a hyper-connected run's summary and its --layer, rc's summary of stream norms)
for view in "pm mhc" "pm mhc --layer 0" "pr rc"; do
  set -- $view
  odd="$TMP/runs/$1,\"x"; method=$2; shift 2
  rm -rf "$odd"; cp -r "$TMP/runs/${view%% *}" "$odd"
  "$S2HC" inspect "$odd" "$@" --csv >"$TMP/odd.csv" 2>/dev/null
  python3 -c 'import csv, sys; rows = list(csv.reader(open(sys.argv[1], newline="")))
assert len(rows) > 2 and all(len(r) == len(rows[0]) for r in rows) and all(r[0] == sys.argv[2] and r[1] == sys.argv[3] for r in rows[1:]), rows' \
    "$TMP/odd.csv" "$odd" "$method" && ok "inspect $view --csv: an odd folder is one field" \
    || fail "inspect $view --csv of a folder with a comma and a quote: $(head -3 "$TMP/odd.csv")"
  rm -rf "$odd"
done
# --history: a quantity over training, each value the summary's at that step (--step N, final)
expect_status 0 "inspect --history dist" -- "$S2HC" inspect "$TMP/runs/pm" --history dist
expect_out "\|H-I\|: \|\|H_res - I\|\|_2, the distance from the identity, per sublayer, 3 probe steps and the final probe" \
  "names the quantity and the rows"
[ "$(grep -cE '^ +(0|10|20|final)( +[0-9]+\.[0-9]{4}){2}$' "$TMP/out")" = 4 ] && ok "a row per probe step and the final probe, a column per sublayer" \
  || fail "history rows: $(cat "$TMP/out")"
expect_status 0 "inspect --history rms --layer 2" -- "$S2HC" inspect "$TMP/runs/pm" --history rms --layer 2
expect_out "^ +step +2 end$" "--layer: that column alone (rms: the streams at the end too)"
expect_status 2 "--history rms past the end column" -- "$S2HC" inspect "$TMP/runs/pm" --history rms --layer 3
expect_out "--layer 3: .*pm/run.h5 has sublayers 0..1; --history rms: 2 too, the streams leaving the last" \
  "names the end column as one to ask for"
expect_status 2 "--history dist past the last sublayer" -- "$S2HC" inspect "$TMP/runs/pm" --history dist --layer 2
expect_out "--layer 2: .*pm/run.h5 has sublayers 0..1$" "names the sublayers"
python3 - "$S2HC" "$TMP/runs/pm" > "$TMP/py" 2>&1 <<'PY'
import csv, io, subprocess, sys
s2hc, run = sys.argv[1:3]
def rows(*a):
    return list(csv.DictReader(io.StringIO(subprocess.run([s2hc, "inspect", run, *a], capture_output=True, text=True, check=True).stdout)))
col = {"dist": "dist_identity", "prod": "composite_norm", "diag": "diag_mean", "offmax": "offdiag_max",
       "svmax": "sv_max", "svmin": "sv_min", "devmax": "dev_sv_max", "coldev": "colsum_dev_max",
       "rowdev": "rowsum_dev_max", "cosx": "cos_before", "coshx": "cos_after", "diagpct": "diag_frac",
       "rms": "stream_rms"}
bad, n = [], 0
for q, c in col.items():
    for h in rows("--history", q, "--csv"):
        summ = {r["layer"]: r for r in rows("--step", h["step"], "--csv")}
        want = summ[h["layer"]][c]
        got = h["value"] if q != "diagpct" else "%.9g" % (float(h["value"]) / 100)
        n += 1
        if h["quantity"] != q or (got != want and abs(float(got) - float(want)) > 1e-12 * abs(float(want))):
            bad.append("%s step %s layer %s: %s, the summary %s" % (q, h["step"], h["layer"], got, want))
print("\n".join(bad) if bad else "history ok %d" % n)
PY
grep -q "^history ok 108$" "$TMP/py" && ok "--history --csv: every value of each quantity the summary's at its step" || fail "history: $(head -5 "$TMP/py")"
expect_status 1 "rc: --history of a matrix quantity" -- "$S2HC" inspect "$TMP/runs/pr" --history dist
expect_out "method rc has no residual matrices \(n = 1\): --history rms is the one quantity it has" "says what rc has"
"$S2HC" inspect "$TMP/runs/pr" --history dist --csv > "$TMP/csv.out" 2>/dev/null
[ ! -s "$TMP/csv.out" ] && ok "and prints no CSV header" || fail "rc --history dist --csv printed: $(cat "$TMP/csv.out")"
expect_status 0 "rc: --history rms" -- "$S2HC" inspect "$TMP/runs/pr" --history rms
expect_status 0 "--method-compare --history passes rc over" -- "$S2HC" inspect --method-compare "$TMP/runs/pm" "$TMP/runs/pr" --history prod
expect_out "pr/run.h5: passed over: method rc" "says so"
# an rc run first: passed over without a blank line for it (none before the first run shown)
"$S2HC" inspect --method-compare "$TMP/runs/pr" "$TMP/runs/pm" "$TMP/runs/pm" --history prod 2>/dev/null > "$TMP/cmp.out"
[ -n "$(head -1 "$TMP/cmp.out")" ] && [ "$(grep -c '^$' "$TMP/cmp.out")" = 1 ] \
  && ok "--method-compare: one blank line between the runs shown, none for the one passed over" \
  || fail "--method-compare layout: $(cat -A "$TMP/cmp.out" | head -20)"
expect_status 2 "--history with --step" -- "$S2HC" inspect "$TMP/runs/pm" --history dist --step 10
expect_out "--history reads every probe step; --step does not go with it" "says why"
expect_status 2 "--history of an unknown quantity" -- "$S2HC" inspect "$TMP/runs/pm" --history trace
expect_out "--history 'trace': one of dist, prod, diag" "lists the quantities"
(ulimit -f 1; "$S2HC" inspect "$TMP/runs/pm" --layer 0 --csv > "$TMP/csv.out" 2>"$TMP/err"); rc=$?
[ $rc = 1 ] && grep -q "writing the standard output failed" "$TMP/err" && ok "inspect --csv cut short by ulimit -f exits 1" \
  || fail "inspect --csv past ulimit -f: exit $rc, $(cat "$TMP/err")"
# an error leaves stdout empty: no CSV header with no rows for a script to take as data
"$S2HC" inspect "$TMP/runs/none" --csv > "$TMP/csv.out" 2>/dev/null
[ $? != 0 ] && [ ! -s "$TMP/csv.out" ] && ok "inspect --csv of a missing run prints nothing" || fail "inspect --csv of a missing run: $(cat "$TMP/csv.out")"
"$S2HC" inspect "$TMP/runs/pm" --layer 9 --csv > "$TMP/csv.out" 2>/dev/null
[ $? = 2 ] && [ ! -s "$TMP/csv.out" ] && ok "inspect --csv of a sublayer out of range prints nothing" || fail "inspect --csv --layer 9: $(cat "$TMP/csv.out")"
expect_status 0 "inspect --step final" -- "$S2HC" inspect "$TMP/runs/ps" --step final
expect_out "final probe" "the final probe"
expect_out "residual path only mean 1\.0000" "s2hc: the residual path does not amplify"
expect_status 0 "inspect --step final --layer" -- "$S2HC" inspect "$TMP/runs/ps" --step final --layer 1
expect_out "the final probe was taken at step 20" "says the step /final was taken at"
expect_status 1 "inspect --step of a step never probed" -- "$S2HC" inspect "$TMP/runs/pm" --step 7
expect_out "probed steps: 0 10 20" "lists the probed steps"
expect_status 2 "inspect --step -1 is refused" -- "$S2HC" inspect "$TMP/runs/pm" --step -1
expect_out "a step number \(0 or more\)" "says what --step takes"
expect_status 2 "inspect --layer out of range" -- "$S2HC" inspect "$TMP/runs/pm" --layer 9
expect_out "sublayers 0\.\.1" "names the valid range"
expect_status 1 "inspect a missing run" -- "$S2HC" inspect "$TMP/runs/nope"
expect_status 2 "two runs need --method-compare" -- "$S2HC" inspect "$TMP/runs/pm" "$TMP/runs/ps"
expect_status 0 "--method-compare" -- "$S2HC" inspect --method-compare "$TMP/runs/pm" "$TMP/runs/ps" --layer 1
expect_out "method mhc" "the first run"
expect_out "method s2hc" "the second run"
# rc: no residual matrices; s2hc probe still records the streams and the Jacobian norms
expect_status 0 "s2hc probe on rc (its folder with a trailing slash)" -- "$S2HC" probe "$TMP/runs/pr/" --samples 4
expect_out "/final written to $TMP/runs/pr/run.h5$" "names the run file without a double slash"
expect_status 0 "inspect rc" -- "$S2HC" inspect "$TMP/runs/pr" --step final
# several runs in turn, each under a header with its own summary; one that fails does not
# stop the others, and the exit is the worst
expect_status 1 "s2hc probe of two runs and a directory that is none" -- "$S2HC" probe "$TMP/runs/pr" \
  "$TMP/runs/none" "$TMP/runs/ps" --samples 4
expect_out "^== $TMP/runs/pr \(1/3\) ==$" "a header per run"
expect_out "^== $TMP/runs/ps \(3/3\) ==$" "the third run after the second failed"
[ "$(grep -c '^done in ' "$TMP/out")" = 2 ] && ok "both runs probed" || fail "probed: $(grep -c '^done in ' "$TMP/out")"
expect_out "no hyper-connection frame" "rc: says why there are no matrices"
expect_out "residual path only mean 1\.0000" "rc: without the branches the map is the identity"
# a run trained with the final probe off (final_samples 0): s2hc probe takes the key's
# default rather than a single sequence while saying 0
conf p0 mhc 4
sed -i 's/final_samples: 8/final_samples: 0/' "$TMP/p0.yaml"
expect_status 0 "train with probe.final_samples 0" -- "$S2HC" train "$TMP/p0.yaml" --quiet
# while another `s2hc probe` holds the run (its lock taken here by python3: a POSIX lock
# on .train.lock, which the OFD lock s2hc looks for sees), inspect says that probe writes
# /final, not to run `s2hc probe` once it has ended
hold_as_probe() { # hold_as_probe DIR: a background holder, its pid in $holder
  fresh "$TMP/held.out"
  python3 -c 'import fcntl, os, sys, time
fd = os.open(sys.argv[1] + "/.train.lock", os.O_RDWR | os.O_CREAT)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
os.ftruncate(fd, 0)
os.write(fd, b"s2hc probe pid %d on host since now\n" % os.getpid())
print("held", flush=True)
time.sleep(600)' "$1" >"$TMP/held.out" &
  holder=$!
  wait_for 300 grep -q held "$TMP/held.out"
}
if command -v python3 >/dev/null; then
  hold_as_probe "$TMP/runs/p0"
  expect_status 1 "inspect --step final of a run a probe holds" -- "$S2HC" inspect "$TMP/runs/p0" --step final
  expect_out "has no /final group yet; the run is in use \(s2hc probe pid $holder .*\): that probe writes /final as it ends" \
    "it says the probe holding the run writes /final"
  kill $holder; wait $holder 2>/dev/null
fi
expect_status 0 "s2hc probe of a run whose final probe was off" -- "$S2HC" probe "$TMP/runs/p0"
def=$("$S2HC" config | awk '$1 == "probe.final_samples" { print $3 }')
expect_out "probe.final_samples is 0 \(off\); probing $def sequences" "says it takes the default, $def"
got=$(h5dump -a /final/samples_requested "$TMP/runs/p0/run.h5" 2>/dev/null | grep -Eo '\(0\): [0-9]+' | grep -Eo '[0-9]+$')
[ "$got" = "$def" ] && ok "/final@samples_requested is $def" || fail "/final@samples_requested: '$got'"
# --step N of a run trained with probe.every 0 (its /final only): says there are none
sed -i 's/every: 10,/every: 0,/' "$TMP/p0.yaml"
expect_status 0 "train with probe.every 0" -- "$S2HC" train "$TMP/p0.yaml" --quiet --force
if command -v python3 >/dev/null; then
  hold_as_probe "$TMP/runs/p0"
  expect_status 1 "inspect of a run without probes a probe holds" -- "$S2HC" inspect "$TMP/runs/p0"
  expect_out "holds no probes \(/probe or /final\) yet; the run is in use \(s2hc probe pid $holder .*\): that probe writes /final as it ends" \
    "it says the probe holding the run writes /final"
  kill $holder; wait $holder 2>/dev/null
fi
expect_status 0 "s2hc probe of it" -- "$S2HC" probe "$TMP/runs/p0" --samples 4
expect_status 0 "inspect of a run with /final only" -- "$S2HC" inspect "$TMP/runs/p0"
expect_out "final probe" "without /probe rows it shows the final probe"
expect_status 1 "inspect --step 10 without /probe rows" -- "$S2HC" inspect "$TMP/runs/p0" --step 10
expect_out "probed steps: none \(the run was trained with probe.every 0\); --step final" "says none, and --step final"
expect_status 0 "s2hc probe --samples" -- "$S2HC" probe "$TMP/runs/pm" --samples 4
expect_out "/final written" "probe reports the file"
# the summary it prints after saving reads the run file while the probe still held the
# run's lock: it must not call the run in use by the probe itself
grep -q "is in use" "$TMP/out" && fail "probe calls the run in use by itself: $(grep "is in use" "$TMP/out")" \
  || ok "probe's summary does not call the run in use"
# the summary is of the log it saved (from memory, not read back: another command may hold
# the file by then): the table `inspect --step final` prints of the file
sed '1,/^done in/d' "$TMP/out" > "$TMP/psum"
"$S2HC" inspect "$TMP/runs/pm" --step final --no-color > "$TMP/isum" 2>&1
[ -s "$TMP/psum" ] && cmp -s "$TMP/psum" "$TMP/isum" && ok "probe's summary = inspect --step final of the file" \
  || fail "probe's summary and inspect --step final differ: $(diff "$TMP/psum" "$TMP/isum" | head -4 | tr '\n' ' ')"
# /final's per-sequence columns (S = 4 rows) read as their means over the sequences
if command -v h5dump >/dev/null; then
  h5col_mean() { # h5col_mean DATASET COLUMN (0-based) of runs/pm's run file
    h5dump -d "$1" "$TMP/runs/pm/run.h5" 2>/dev/null | sed -n 's/^ *([0-9]*,[0-9]*): *//p' \
      | awk -F', *' -v c="$2" '{ s += $(c + 1); n++ } END { if (n == 4) printf "%.9g", s / n }'
  }
  "$S2HC" inspect "$TMP/runs/pm" --step final --csv > "$TMP/fcsv" 2>&1
  bad=""
  for l in 0 1 2; do
    for q in "stream_rms 18" "cos_sim_before 15" "cos_sim 16"; do
      set -- $q
      [ "$l" = 2 ] && [ "$1" != stream_rms ] && continue
      want=$(h5col_mean "/final/$1" "$l"); got=$(awk -F, -v r=$((l + 2)) -v c="$2" 'NR == r { print $c }' "$TMP/fcsv")
      awk -v a="$got" -v b="$want" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a ~ /^-?[0-9]/ && b ~ /^-?[0-9]/ && d <= 1e-5 * (b < 0 ? -b : b) + 1e-9) }' \
        || bad="$bad $1[$l]: $got, mean $want;"
    done
  done
  [ -z "$bad" ] && ok "inspect --step final: stream_rms and cos_sim are /final's means over the sequences" \
    || fail "inspect --step final vs /final's means:$bad"
fi
if command -v h5dump >/dev/null; then
  expect_status 0 "h5dump /final/H_res" -- h5dump -H -d /final/H_res "$TMP/runs/pm/run.h5"
  expect_out "\( 4, 2, 4, 4 \)" "/final/H_res is [S, Lh, n, n] with S = 4"
fi
ls "$TMP/runs/pm/"*.tmp >/dev/null 2>&1 && fail "temporary files left behind" || ok "no temporary files left"
expect_status 1 "probe without a checkpoint" -- "$S2HC" probe "$TMP/runs/nope"
# a network that blows up and stays finite (hc at lr 10: streams' rms ~1e28 at the top):
# the Jacobian's norm (~1e29) is read out finite (J^T J v had overflowed float: NaN), and
# the last sublayer's RMSNorm still scales its row (its float sum of squares had
# overflowed: rstd 0, every token the same coefficients)
conf big hc 4
"$S2HC" train "$TMP/big.yaml" --quiet --set model.n_layer=6 --set model.n_embd=32 --set model.block_size=32 \
  --set train.lr=10 --set train.min_lr=1 --set train.steps=60 --set train.warmup=5 --set probe.every=0 \
  --set probe.final_samples=4 >/dev/null 2>&1
jac=$(h5dump -y -d /final/jacobian_norm "$TMP/runs/big/run.h5" 2>/dev/null | sed -n '/DATA {/,/}/p' | sed -n 2p | tr -d ',')
top=$(h5dump -d /final/stream_rms -s "0,12" -c "1,1" "$TMP/runs/big/run.h5" 2>/dev/null | sed -n '/DATA {/,/}/p' | grep -oE '[0-9.e+]+$')
awk -v j="$jac" -v t="$top" 'BEGIN { n = split(j, a, " "); ok = n == 4 && t + 0 > 1e20;
  for (i = 1; i <= n; i++) if (!(a[i] + 0 > 1e20) || a[i] ~ /nan|inf/) ok = 0; exit !ok }' \
  && ok "a blown-up network's Jacobian norm is finite (> 1e20)" || fail "jacobian_norm: '$jac', top rms '$top'"
# (rstd 0 gave every token of every such sublayer the static H_res; one sublayer alone may
# also read one H_res for every token when its tanh saturates, on another build's
# trajectory: so any sublayer whose streams' float sum of squares overflows, rms > 1e19)
rms=$(h5dump -d /final/stream_rms -c "1,12" "$TMP/runs/big/run.h5" 2>/dev/null | sed -n '/DATA {/,/}/p' \
  | sed -n 's/^ *([0-9,]*): *//p' | tr ',' '\n' | tr -d ' ' | grep -v '^$')
over=0; differ=""
for l in $(seq 0 11); do
  r=$(printf '%s\n' "$rms" | sed -n "$((l + 1))p")
  awk -v r="$r" 'BEGIN { exit !(r + 0 > 1e19) }' || continue
  over=$((over + 1))
  distinct=$(h5dump -d /final/H_res_tokens -s "0,$l,0,0" -c "16,1,1,1" "$TMP/runs/big/run.h5" 2>/dev/null \
    | sed -n '/DATA {/,/}/p' | grep -oE '[-0-9.e+]+$' | sort -u | wc -l)
  [ "$distinct" -gt 1 ] && differ="$differ $l"
done
[ "$over" -gt 0 ] && [ -n "$differ" ] && ok "coefficients past a float sum's overflow still differ by token (sublayers$differ)" \
  || fail "one H_res for every token in each of the $over sublayers whose streams' rms is past 1e19"
# --data: where the corpora are, for a run whose data.dir moved; a wrong one names the file
cp -r "$TMP/runs/pm" "$TMP/runs/pmdata"
mv "$TMP/data" "$TMP/data-moved"
expect_status 1 "probe without its corpora" -- "$S2HC" probe "$TMP/runs/pmdata" --samples 4
expect_out "data/synth/val.bin: cannot open" "probe names the validation file"
expect_out "--data DIR if it lives elsewhere" "probe says --data"
expect_status 0 "probe --data" -- "$S2HC" probe "$TMP/runs/pmdata" --samples 4 --data "$TMP/data-moved"
expect_out "over 4 validation sequences" "probe --data reads the corpus there"
mv "$TMP/data-moved" "$TMP/data"
finish probe_cli
