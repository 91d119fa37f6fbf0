#!/usr/bin/env bash
# Config errors through the command: file, line, column and key named; exit 2; nothing written.
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh
cfg=$TMP/bad.yaml
printf 'model:\n  n_layer: 2\n  n_hed: 4\n' > "$cfg"
expect_status 2 "unknown key exits 2" -- "$S2HC" train "$cfg" --set run.out="$TMP/runs"
expect_out "bad.yaml:3:[0-9]+: key 'model.n_hed'" "unknown key: file, line, column, key"
expect_out "n_head" "unknown key suggests the nearest key"
printf 'train:\n  lr: fast\n' > "$cfg"
expect_status 2 "wrong type exits 2" -- "$S2HC" train "$cfg" --set run.out="$TMP/runs"
expect_out "bad.yaml:2:[0-9]+: key 'train.lr'" "wrong type names the key"
printf 'residual:\n  method: magic\n' > "$cfg"
expect_status 2 "bad enum exits 2" -- "$S2HC" train "$cfg" --set run.out="$TMP/runs"
expect_out "s2hc" "bad enum lists the allowed methods"
# `s2hc methods` lists exactly the methods residual.method accepts, one line each
allowed=$(sed -n "s/.*'magic' is not one of: //p" "$TMP/out" | tr -d ' ' | tr ',' '\n' | sort)
expect_status 0 "methods" -- "$S2HC" methods
listed=$(awk '{print $1}' "$TMP/out" | sort)
[ -n "$allowed" ] && [ "$listed" = "$allowed" ] && ok "methods lists every residual.method value" \
  || fail "methods lists '$(echo $listed)', residual.method allows '$(echo $allowed)'"
expect_status 2 "methods with an argument exits 2" -- "$S2HC" methods s2hc
expect_out "methods: takes no arguments \('s2hc'\)" "methods says it takes no arguments"
printf 'model: [1, 2\n' > "$cfg"
expect_status 2 "malformed YAML exits 2" -- "$S2HC" train "$cfg" --set run.out="$TMP/runs"
expect_out "bad.yaml:[0-9]+:[0-9]+" "malformed YAML names line and column"
expect_status 2 "missing file exits 2" -- "$S2HC" train "$TMP/nope.yaml"
expect_out "nope.yaml" "missing file is named"
# an OpenMP variable the runtime refuses: its warning once, not again from the process
# the command re-executes itself as (runtime_env_fixup), and the command's own error after
for v in OMP_NUM_THREADS OMP_PROC_BIND; do
  expect_status 2 "$v=garbage: the missing file still exits 2" -- env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u KMP_BLOCKTIME \
    -u OPENBLAS_CORETYPE -u S2HC_NO_REEXEC $v=garbage "$S2HC" train "$TMP/nope.yaml"
  n=$(grep -c "$v" "$TMP/out")
  [ "$n" -le 1 ] && grep -q "nope.yaml" "$TMP/out" && ok "$v=garbage: the runtime's warning at most once ($n), the error said" \
    || fail "$v=garbage: the warning $n times: $(tr '\n' ' ' < "$TMP/out")"
done
printf 'train:\n  steps: 10\n' > "$cfg"
expect_status 2 "bad --set exits 2" -- "$S2HC" train "$cfg" --set train.steps=abc --set run.out="$TMP/runs"
expect_out "train.steps" "bad --set names the key"
expect_status 2 "out-of-range --set exits 2" -- "$S2HC" train "$cfg" --set model.n_layer=0 --set run.out="$TMP/runs"
expect_out "model.n_layer" "out-of-range names the key"
expect_status 2 "a --set value of two YAML documents exits 2" -- "$S2HC" train "$cfg" --set "train.steps=1
---
2" --set run.out="$TMP/runs"
expect_out "train.steps.*more than one YAML document" "the error names the key (the second document was ignored)"
many=(); for i in $(seq 256); do many+=(--set train.steps=10); done
expect_status 2 "a 257th --set is refused, not dropped" -- "$S2HC" train "$cfg" "${many[@]}" --set model.n_layer=0 --set run.out="$TMP/runs"
expect_out "256 --set" "the error says how many --set are allowed"
for v in abc 0 -2 3x; do
  expect_status 2 "--stop-after $v is refused" -- "$S2HC" train "$cfg" --stop-after $v --set run.out="$TMP/runs"
  expect_out "--stop-after: expected a whole number" "--stop-after $v: the error names the option"
done
# UTF-16 is not read as text (libyaml would decode it, and its tags with it)
{ printf '\xff\xfe'; printf 'train:\n  lr: !!str 2e-3\n' | iconv -t UTF-16LE; } > "$TMP/u16.yaml"
expect_status 2 "a UTF-16 config" -- "$S2HC" train "$TMP/u16.yaml" --set run.out="$TMP/runs"
expect_out "u16.yaml:1:1: .*UTF-8" "names the file and says UTF-8"
expect_status 2 "the training corpus out of domain too" -- "$S2HC" train "$cfg" --set data.train=kjv --set train.warmup=1 --set run.out="$TMP/runs"
expect_out "key 'data.ood': 'kjv' is the training corpus" "names data.ood and the corpus"
# the file's shape: a section name no section is near, a section or key name that is not
# text (a YAML complex key), a list key past its most items (in the file and in --set)
printf 'model:\n  n_layer: 2\nzzqqxx:\n  a: 1\n' > "$cfg"
expect_status 2 "a section no section is near exits 2" -- "$S2HC" train "$cfg" --set run.out="$TMP/runs"
expect_out "bad.yaml:3:1: key 'zzqqxx': unknown section; the sections are model, residual, train" "names it and lists the sections"
printf 'model:\n  n_layer: 2\n? [a, b]\n: 1\n' > "$cfg"
expect_status 2 "a list as a section name exits 2" -- "$S2HC" train "$cfg" --set run.out="$TMP/runs"
expect_out "bad.yaml:3:3: expected a section name, got a list" "names line and column and what it got"
printf 'model:\n  n_layer: 2\n  ? {a: 1}\n  : 1\n' > "$cfg"
expect_status 2 "a mapping as a key name exits 2" -- "$S2HC" train "$cfg" --set run.out="$TMP/runs"
expect_out "bad.yaml:3:5: key 'model': expected a key name, got a mapping" "names the section and what it got"
printf 'data:\n  ood: [a, b, c, d, e, f, g, h, i]\n' > "$cfg"
expect_status 2 "data.ood of 9 corpora exits 2" -- "$S2HC" train "$cfg" --set run.out="$TMP/runs"
expect_out "bad.yaml:2:[0-9]+: key 'data.ood': too many items: at most 8 allowed" "names the key and its most items"
printf 'train:\n  steps: 10\n' > "$cfg"
expect_status 2 "--set data.ood of 9 corpora exits 2" -- "$S2HC" train "$cfg" --set "data.ood=[a,b,c,d,e,f,g,h,i]" --set run.out="$TMP/runs"
expect_out "^s2hc: error: --set data.ood=.*key 'data.ood': too many items: at most 8 allowed" "--set: names the key and its most items"
# text values: a character a YAML file cannot hold literally (U+2028, the byte order mark
# U+FEFF: three-byte UTF-8) is refused naming the key; other three- and four-byte UTF-8
# is a path's like any (the config's resolved text then holds it: config_to_yaml writes it back)
for c in '\xe2\x80\xa8' '\xef\xbb\xbf'; do
  expect_status 2 "run.out holding $c exits 2" -- "$S2HC" train "$cfg" --set "run.out=$TMP/runs$(printf "$c")x"
  expect_out "key 'run.out': '.*' contains a control character" "$c: names the key and says why"
done
[ ! -e "$TMP/runs" ] && ok "nothing written on config errors" || fail "a run directory was created"
make_synth_data "$TMP/data"
u=$(printf '\xe2\x82\xac\xf0\x9f\x90\x88')
cat > "$TMP/utf8.yaml" <<YAML
model: {n_layer: 1, n_head: 1, n_embd: 8, block_size: 8}
train: {batch: 2, steps: 1, warmup: 1, eval_every: 1, eval_batches: 1, threads: 1}
data: {dir: $TMP/data, train: synth, ood: []}
run: {name: u, out: "$TMP/runs-$u"}
probe: {every: 0, final_samples: 0}
YAML
expect_status 0 "a run.out of three- and four-byte UTF-8 is taken" -- "$S2HC" train "$TMP/utf8.yaml" --quiet
[ -s "$TMP/runs-$u/u/run.h5" ] && ok "the run is written under it" || fail "no run under $TMP/runs-$u: $(ls -A "$TMP")"
rm -rf "$TMP/runs-$u"
expect_status 2 "unknown command exits 2" -- "$S2HC" frobnicate
expect_status 0 "help exits 0" -- "$S2HC" --help
expect_out "example" "help shows an example"
cp "$TMP/out" "$TMP/top"
# the command list names each command's arguments as its own usage line does (RUN_DIR...: several)
for sub in train grid eval probe inspect export; do
  arg=$("$S2HC" $sub --help 2>&1 | sed -n "s/^usage: s2hc $sub \([^ ]*\).*/\1/p")
  grep -Fq "  $sub $arg " "$TMP/top" && ok "s2hc --help: $sub $arg" || fail "s2hc --help does not list '$sub $arg' as $sub's usage has it"
done
for sub in train eval data params inspect probe sample export bench report analyze grid version methods config; do
  expect_status 0 "$sub --help" -- "$S2HC" $sub --help
  expect_out "example" "$sub --help shows an example"
  "$S2HC" $sub --help > "$TMP/direct" 2>&1
  expect_status 0 "help $sub" -- "$S2HC" help $sub
  [ "$sub" = config ] || { cmp -s "$TMP/out" "$TMP/direct" && ok "help $sub is $sub --help" || fail "help $sub differs from $sub --help"; }
done
"$S2HC" config > "$TMP/schema" 2>&1
expect_status 0 "help config" -- "$S2HC" help config
cmp -s "$TMP/out" "$TMP/schema" && ok "help config is the schema, as s2hc config" || fail "help config differs from s2hc config"
expect_status 2 "help of two commands" -- "$S2HC" help train eval
expect_out "help: one command at a time \('train', then 'eval'\)" "says so"
expect_status 2 "help of a command that does not exist" -- "$S2HC" help frobnicate
expect_out "no command 'frobnicate'" "says so"
for sub in methods config version; do
  expect_status 2 "$sub with a stray argument exits 2" -- "$S2HC" $sub --bogus
  expect_out "usage: s2hc $sub" "$sub with a stray argument shows its usage"
done
for args in "eval $TMP --batches" "inspect $TMP --layer" "probe $TMP --samples" "train $cfg --stop-after" "sample $TMP --tokens" "export $TMP -o"; do
  expect_status 2 "$args (no value) exits 2" -- "$S2HC" $args
  expect_out "its value is missing" "$args: the error says the value may be missing"
done
for v in "" abc -1 2x 4294967296 2147483648 99999999999999999999; do
  expect_status 2 "inspect --layer '$v' exits 2" -- "$S2HC" inspect "$TMP/no-run" --layer "$v"
  expect_out "--layer: expected a sublayer index" "inspect --layer '$v': the error names --layer"
done
for args in "--C 16385" "--C 0" "--C 1000000" "--layers 129" "--layers 1000000" "--layers x"; do
  expect_status 2 "params $args (outside the config's range) exits 2" -- timeout 20 "$S2HC" params $args --n 2
  expect_out "wants" "params $args: the error gives the range"
done
expect_status 0 "params at the config's limits" -- "$S2HC" params --C 16384 --layers 128 --n 2 --method hc
for args in "-j 2x" "-j abc" "-j 0" "-j2x" "--jobs 1.5"; do
  expect_status 2 "grid $args exits 2" -- "$S2HC" grid experiments/ablations.yaml $args --list
  expect_out "needs a number \(got '(2x|abc|0|1.5)'\)" "grid $args: the error shows the value"
done
expect_status 2 "params --method rc exits 2" -- "$S2HC" params --method rc
expect_out "no auxiliary parameters" "params --method rc says why (s2hc methods lists rc)"
for args in "--tokens 0x10" "--temperature 0x1p-1" "--top-k 0x8" "--tokens ' 5'"; do
  eval "expect_status 2 \"sample \$args exits 2\" -- \"\$S2HC\" sample \"\$TMP/no-run\" $args"
  expect_out "expected a" "sample $args: the error says what is expected"
done
# every command's options alike: `--` ends them (a file or run folder that starts with
# '-' after it), and an option's value comes as --opt VALUE or --opt=VALUE
printf 'the cat sees the dog. %.0s' $(seq 300) > "$TMP/-corpus.txt"
(cd "$TMP" && "$S2HC" data import --dir odd-data --name odd -- -corpus.txt) >"$TMP/out" 2>&1 && [ -s "$TMP/odd-data/odd/train.bin" ] \
  && ok "data import -- -corpus.txt: a file that starts with '-'" || fail "data import -- -corpus.txt: $(tail -n 2 "$TMP/out")"
for cmd in inspect eval probe sample export; do
  expect_status 1 "$cmd -- -odd-run: a run folder" -- "$S2HC" $cmd -- -odd-run
  expect_out "^s2hc: error: -odd-run/" "$cmd -- -odd-run: names the folder, not an unknown option"
done
expect_status 1 "analyze -- -odd-run: a run folder" -- "$S2HC" analyze -o "$TMP/an" -- -odd-run
expect_out "^s2hc: error: -odd-run: " "analyze names it"
expect_status 1 "runs -- -odd-run: a run folder" -- "$S2HC" runs -- -odd-run
expect_out "^s2hc: error: -odd-run: " "runs names it"
expect_status 1 "report -- -odd-run: passed on to analyze as a run" -- "$S2HC" report --no-plots -o "$TMP/rep" -- -odd-run
expect_out "^s2hc: error: -odd-run: " "report names it"
expect_status 2 "report of no runs" -- "$S2HC" report --no-plots -o "$TMP/rep-none"
expect_out "^s2hc: error: no runs given$" "report says it has no runs"
expect_out "^usage: s2hc report" "and shows its usage"
[ ! -e "$TMP/rep-none" ] && ok "report of no runs writes nothing" || fail "report of no runs wrote $TMP/rep-none"
expect_status 2 "train -- --help: a config file named --help" -- "$S2HC" train -- --help
expect_out "^s2hc: error: --help: cannot read" "train names the file"
expect_status 2 "grid -- -odd.yaml" -- "$S2HC" grid --list -- -odd.yaml
expect_out "-odd.yaml" "grid names the file"
expect_out_not() { if grep -Eq -- "$1" "$TMP/out"; then fail "$2: output has /$1/"; else ok "$2"; fi; }
expect_out_not "unknown option" "grid: not an unknown option"
expect_status 0 "methods --" -- "$S2HC" methods --
expect_status 0 "version --" -- "$S2HC" version --
expect_status 0 "version -v --" -- "$S2HC" version -v --
expect_out "^  CPU  " "version -v -- is verbose"
expect_status 2 "version -- -v: an operand, which version takes none" -- "$S2HC" version -- -v
expect_status 2 "params -- x: params takes no operand" -- "$S2HC" params -- x
"$S2HC" params --method s2hc --n 4 --preset tiny --csv > "$TMP/p1" 2>&1
expect_status 0 "params --method=s2hc --n=4 --preset=tiny --csv" -- "$S2HC" params --method=s2hc --n=4 --preset=tiny --csv
cmp -s "$TMP/out" "$TMP/p1" && ok "--opt=VALUE as --opt VALUE" || fail "params --opt=VALUE differs: $(head -n 2 "$TMP/out")"
for args in "eval --batches=0" "probe --samples=0" "inspect --layer=x" "sample --tokens=0" "train --stop-after=0" \
            "grid --jobs=0" "bench --rounds=0" "export --dtype=f64"; do
  set -- $args
  expect_status 2 "$args: the value read and refused" -- "$S2HC" "$@" "$TMP/no-run"
  expect_out_not "unknown (or incomplete )?option" "$args: not an unknown option"
done
# a failed write of what a command prints (a full disk): exit 1 with the error, not 0
"$S2HC" config > /dev/full 2>"$TMP/err"; rc=$?
[ $rc = 1 ] && grep -q "writing the standard output failed: No space left" "$TMP/err" && ok "config > /dev/full exits 1" \
  || fail "config > /dev/full: exit $rc, $(cat "$TMP/err")"
(ulimit -f 1; "$S2HC" config > "$TMP/config.txt" 2>"$TMP/err"); rc=$?
[ $rc = 1 ] && grep -q "File too large" "$TMP/err" && ok "config past ulimit -f exits 1" \
  || fail "config past ulimit -f: exit $rc, $(cat "$TMP/err")"
# an option of one value given twice, in any command and either form (--opt V, --opt=V):
# refused, exit 2, naming the option and both values, before anything is read or written
# (the second silently replaced the first); --set still repeats (runs --key: runs_cli.sh)
twice() { # twice 'CMD' OPT FIRST SECOND ARGS...: `s2hc CMD ARGS...` refuses OPT given FIRST, then SECOND
  local cmd=$1 opt=$2 a=$3 b=$4; shift 4
  expect_status 2 "$cmd $opt twice is refused" -- "$S2HC" $cmd "$@"
  expect_out "^s2hc: error: $cmd: $opt given twice \('$a', then '$b'\): give it once$" "$cmd: names $opt and both values"
}
X=$TMP/twice
twice eval --config a.yaml b.yaml "$X/m.safetensors" --config a.yaml --config=b.yaml
twice eval --batches 2 3 "$X/run" --batches=2 --batches 3
twice sample --prompt "the " "a cat" "$X/run" --prompt "the " --prompt "a cat"
twice sample --seed 1 2 "$X/run" --seed 1 --tokens 4 --seed=2
twice sample --config a.yaml b.yaml "$X/m.safetensors" --config a.yaml --config b.yaml
twice ablate --batches 2 3 "$X/run" --batches 2 --batches=3
twice ablate --what identity mean "$X/run" --what=identity --what mean
twice ablate --data "$X/a" "$X/b" "$X/run" --data "$X/a" --data "$X/b"
twice ablate --config a.yaml b.yaml "$X/m.safetensors" --config a.yaml --config b.yaml
twice probe --samples 4 8 "$X/run" --samples 4 --samples 8
twice inspect --layer 0 all "$X/run" --layer 0 --layer all
twice export -o "$X/a.safetensors" "$X/b.safetensors" "$X/run" -o "$X/a.safetensors" -o "$X/b.safetensors"
twice train --stop-after 1 2 "$cfg" --stop-after 1 --stop-after 2
twice grid -j/--jobs 2 3 experiments/smoke.yaml -j 2 --jobs=3
twice grid --out "$X/a" "$X/b" experiments/smoke.yaml --out "$X/a" --list --out "$X/b"
twice analyze -o "$X/a" "$X/b" "$X/run" -o "$X/a" -o "$X/b"
twice report --title A B "$X/run" --title A --title B --no-plots
twice runs --sort val step "$X" --sort val --sort step
twice params --n 2 4 --n 2 --n=4
twice bench --rounds 1 2 --rounds 1 --rounds 2
twice "data import" --name a b "$X/t.txt" --name a --name b --dir "$X/d"
twice "data list" --dir "$X/a" "$X/b" --dir "$X/a" --dir "$X/b"
[ ! -e "$X" ] && ok "nothing written by the refused commands" || fail "left: $(ls -A "$X")"
# --set repeats, each over the one before (the second's 0 is refused by the schema)
printf 'model: {n_layer: 2}\n' > "$TMP/one.yaml"
expect_status 2 "eval --set twice: both taken" -- "$S2HC" eval "$X/m.safetensors" --config "$TMP/one.yaml" \
  --set model.n_layer=3 --set model.n_layer=0
expect_out "key 'model.n_layer'.*0" "the second --set is the one checked"
grep -q "given twice" "$TMP/out" && fail "--set refused as given twice: $(cat "$TMP/out")" || ok "--set is not refused for repeating"
expect_status 0 "grid --set twice" -- "$S2HC" grid experiments/smoke.yaml --out "$TMP/g" --list --set train.steps=7 --set train.lr=0.002
grep -q "given twice" "$TMP/out" && fail "grid --set refused: $(cat "$TMP/out")" || ok "grid --set repeats"
finish config_errors
