#!/usr/bin/env bash
# `s2hc sample` from the shell: text from a model trained on a small synthetic corpus,
# reproducible by its seed, and clear errors for bad options and prompts.
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh
make_synth_data "$TMP/data"
conf() { # conf NAME METHOD N STEPS WARMUP VOCAB
  cat > "$TMP/$1.yaml" <<YAML
model: {n_layer: 2, n_head: 2, n_embd: 32, block_size: 32, vocab: $6}
residual: {method: $2, n_streams: $3}
train: {batch: 8, steps: $4, warmup: $5, lr: 0.003, min_lr: 0.0003, eval_every: 0, eval_batches: 1, ckpt_every: 0}
data: {dir: $TMP/data, train: synth, ood: []}
run: {name: $1, out: $TMP/runs}
probe: {every: 0, final_samples: 0}
YAML
}
conf s s2hc 4 600 10 256
conf v rc 1 5 1 128
expect_status 0 "sample --help" -- "$S2HC" sample --help
expect_out "example" "sample --help shows an example"
expect_status 0 "train s2hc on the synthetic corpus" -- "$S2HC" train "$TMP/s.yaml" --quiet
R=$TMP/runs/s
S() { "$S2HC" sample "$R" "$@" 2>"$TMP/err"; }

S --prompt "the cat " --tokens 120 --temperature 0 > "$TMP/g1" && ok "greedy" || fail "greedy: $(cat "$TMP/err")"
S --prompt "the cat " --tokens 120 --temperature 0 > "$TMP/g2"
cmp -s "$TMP/g1" "$TMP/g2" && ok "greedy twice: the same text" || fail "greedy differs between runs"
head -c 8 "$TMP/g1" | grep -qx "the cat " && ok "the prompt comes first" || fail "prompt not echoed: $(head -c 20 "$TMP/g1")"
[ "$(wc -c < "$TMP/g1")" = 129 ] && ok "prompt + 120 bytes + newline" || fail "length $(wc -c < "$TMP/g1")"
# the corpus is lower-case words, spaces and full stops: a trained model's greedy text is too
tr -d 'a-z .\n' < "$TMP/g1" | grep -q . && fail "greedy text has bytes the corpus never has: $(cat "$TMP/g1")" \
  || ok "greedy text in the corpus's alphabet"
grep -Eq "(sees|likes|follows|finds|crosses)" "$TMP/g1" && ok "greedy text has the corpus's verbs" \
  || fail "no verb of the corpus in: $(cat "$TMP/g1")"
grep -q "method s2hc, n = 4, step 600" "$TMP/err" && ok "settings on stderr" || fail "stderr: $(cat "$TMP/err")"
grep -Eq "^120 tokens in [0-9.]+ m?s \([0-9]+ tokens/s\)$" "$TMP/err" && ! grep -q " in 0.00 s " "$TMP/err" \
  && ok "speed on stderr (in ms below a tenth of a second, never 0.00 s)" || fail "stderr: $(cat "$TMP/err")"
# from an exported file: the same model, so the same text as from the run (greedy and drawn)
"$S2HC" export "$R" >/dev/null 2>&1
"$S2HC" sample "$R/model.safetensors" --prompt "the cat " --tokens 120 --temperature 0 > "$TMP/x1" 2>"$TMP/err" \
  && cmp -s "$TMP/g1" "$TMP/x1" && ok "sample of the exported file: the run's greedy text" \
  || fail "sample of model.safetensors: $(cat "$TMP/err") $(head -c 60 "$TMP/x1")"
grep -q "method s2hc, n = 4, step 600" "$TMP/err" && ok "its settings name the export's method and step" || fail "stderr: $(cat "$TMP/err")"
S --prompt "the " --tokens 40 --count 3 > "$TMP/d1"
"$S2HC" sample "$R/model.safetensors" --prompt "the " --tokens 40 --count 3 > "$TMP/x2" 2>/dev/null
cmp -s "$TMP/d1" "$TMP/x2" && ok "and its drawn texts" || fail "drawn texts differ from the run's"
"$S2HC" export "$R" -o "$TMP/half.safetensors" --dtype bf16 >/dev/null 2>&1
expect_status 0 "sample of a bf16 export" -- "$S2HC" sample "$TMP/half.safetensors" --tokens 20
perl -e 'my $h = q({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}); $h .= " " x ((8 - length($h) % 8) % 8);
  print pack("Q<", length $h), $h, pack("f<", 1)' > "$TMP/bare.safetensors"
expect_status 1 "sample of a safetensors file without s2hc's metadata" -- "$S2HC" sample "$TMP/bare.safetensors"
expect_out "no s2hc config in its __metadata__" "the error says the file does not describe its model"
expect_status 1 "sample of a run's ckpt.h5 (not a safetensors file)" -- "$S2HC" sample "$R/ckpt.h5"
expect_out "not a safetensors file" "the error says so"
# a temperature in range that underflows a double (subnormal, or past it to 0) is taken,
# not refused as out of its range, and so near 0 it draws the most likely byte
for t in 1e-310 1e-400; do
  S --prompt "the cat " --tokens 120 --temperature $t > "$TMP/g3" && cmp -s "$TMP/g1" "$TMP/g3" \
    && ok "--temperature $t: the greedy text" || fail "--temperature $t: $(cat "$TMP/err")"
done
expect_status 2 "a negative temperature that underflows is refused" -- "$S2HC" sample "$R" --temperature -1e-400

S --tokens 200 --seed 5 --top-k 10 > "$TMP/a1"; S --tokens 200 --seed 5 --top-k 10 > "$TMP/a2"
S --tokens 200 --seed 6 --top-k 10 > "$TMP/a3"
cmp -s "$TMP/a1" "$TMP/a2" && ok "a seed repeats its sample" || fail "seed 5 twice gave two texts"
cmp -s "$TMP/a1" "$TMP/a3" && fail "seeds 5 and 6 gave the same text" || ok "another seed, another text"
S --tokens 200 --seed 5 --top-k 10 --count 3 > "$TMP/c3"
[ "$(grep -c '^--- sample [123] of 3 ---$' "$TMP/c3")" = 3 ] && ok "--count 3: three headers" || fail "headers: $(head -3 "$TMP/c3")"
awk '/^--- sample 2 of 3 ---$/{exit} NR>1' "$TMP/c3" > "$TMP/c3first"
# several continuations with stderr in a log: progress lines (tokens done, rate, ETA),
# whole lines without carriage returns, and the text on stdout is unchanged
S2HC_TEST_PROGRESS_AFTER=0 S --tokens 200 --seed 5 --top-k 10 --count 3 > "$TMP/c3log"
grep -Eq '^  [0-9]+/200 tokens x 3, [0-9]+ tokens/s, ETA [0-9]+s$' "$TMP/err" && ! grep -q $'\r' "$TMP/err" \
  && ok "--count 3 into a log: progress lines" || fail "--count 3 into a log: no progress line: $(cat "$TMP/err")"
cmp -s "$TMP/c3" "$TMP/c3log" && ok "--count 3: the same text with progress shown" || fail "progress changed the text"
cmp -s "$TMP/a1" "$TMP/c3first" && ok "continuation 1 of 3 is the single one's" || fail "continuation 1 of 3 differs"
# a prompt longer than block_size (32): the model reads its last 32 bytes, so its greedy
# continuation is that of those 32 bytes alone (and not that of its first 32)
long="the dog sees the cat. the cat likes the bird. the bird follows"
S --prompt "$long" --tokens 40 --temperature 0 > "$TMP/long" || fail "long prompt: $(cat "$TMP/err")"
S --prompt "${long: -32}" --tokens 40 --temperature 0 > "$TMP/last32"
S --prompt "${long:0:32}" --tokens 40 --temperature 0 > "$TMP/first32"
cmp -s <(tail -c +$((${#long} + 1)) "$TMP/long") <(tail -c +33 "$TMP/last32") \
  && ok "a prompt past block_size: the continuation of its last 32 bytes" \
  || fail "long prompt: '$(tail -c +$((${#long} + 1)) "$TMP/long")', its last 32 bytes: '$(tail -c +33 "$TMP/last32")'"
cmp -s <(tail -c +33 "$TMP/first32") <(tail -c +33 "$TMP/last32") \
  && fail "the first and last 32 bytes of the long prompt continue alike: a weak check" \
  || ok "the long prompt's first and last 32 bytes continue differently"
printf 'the dog ' > "$TMP/prompt"
S --prompt-file "$TMP/prompt" --tokens 10 --temperature 0 > "$TMP/pf"
head -c 8 "$TMP/pf" | grep -qx "the dog " && ok "--prompt-file" || fail "--prompt-file: $(cat "$TMP/pf")"

# the text is the product: a write that fails (a full disk) fails the command, one
# continuation (written as it is made) or several (written at the end)
if [ -w /dev/full ]; then
  for c in 1 3; do
    "$S2HC" sample "$R" --tokens 20 --count $c >/dev/full 2>"$TMP/err"
    st=$?
    [ "$st" = 1 ] && grep -q "cannot write the text to stdout: No space left on device" "$TMP/err" \
      && ok "--count $c to a full disk: exit 1, says so" || fail "--count $c to /dev/full: exit $st, $(tail -1 "$TMP/err")"
    [ "$(grep -c 'error' "$TMP/err")" = 1 ] && ok "--count $c to a full disk: one error line" \
      || fail "--count $c to /dev/full: $(grep error "$TMP/err")"
  done
fi
expect_status 1 "no checkpoint" -- "$S2HC" sample "$TMP/runs/none"
expect_out "runs/none/ckpt.h5: no checkpoint" "names the missing checkpoint"
# an export not made yet is named as the file it is, and what writes it
expect_status 1 "no export" -- "$S2HC" sample "$TMP/runs/none/model.safetensors"
expect_out "sample: .*runs/none/model.safetensors: no such file \(\`s2hc export RUN_DIR\` writes" "names the missing file and export"
mkdir -p "$TMP/d.safetensors"
expect_status 1 "a folder named *.safetensors" -- "$S2HC" sample "$TMP/d.safetensors"
expect_out "d.safetensors: not a file" "says it is not a file"
# a run folder whose name ends in .safetensors (run.name may) is still a run folder
cp -r "$R" "$TMP/runs/r.safetensors"
"$S2HC" sample "$TMP/runs/r.safetensors" --prompt "the cat " --tokens 120 --temperature 0 >"$TMP/g3" 2>"$TMP/err" \
  && cmp -s "$TMP/g1" "$TMP/g3" && ok "a run folder named *.safetensors samples as its run" \
  || fail "a run folder named r.safetensors: $(cat "$TMP/err")"
expect_status 2 "negative temperature" -- "$S2HC" sample "$R" --temperature -1
expect_out "--temperature: expected a number in \[0, " "names --temperature and its range"
expect_status 2 "--tokens 0" -- "$S2HC" sample "$R" --tokens 0
expect_out "--tokens: expected a whole number" "names --tokens"
expect_status 2 "--seed 2^53 + 1 (a double would round it)" -- "$S2HC" sample "$R" --seed 9007199254740993
expect_out "expected a whole number in \[0, 9007199254740992\], got '9007199254740993'" "the error gives the range"
expect_status 0 "--seed 2^53" -- "$S2HC" sample "$R" --seed 9007199254740992 --tokens 2
expect_status 2 "--top-k 2.5" -- "$S2HC" sample "$R" --top-k 2.5
expect_out "--top-k: expected a whole number" "names --top-k"
expect_status 2 "too many tokens in all" -- "$S2HC" sample "$R" --tokens 1000000 --count 1000
expect_out "more than 10\^8 tokens" "says how many is too many"
expect_status 2 "empty prompt" -- "$S2HC" sample "$R" --prompt ""
expect_out "--prompt is empty" "says the prompt is empty"
expect_status 1 "missing prompt file" -- "$S2HC" sample "$R" --prompt-file "$TMP/nope"
expect_out "nope: No such file" "names the prompt file"
expect_status 1 "a prompt file with no end (/dev/zero)" -- "$S2HC" sample "$R" --prompt-file /dev/zero
expect_out "/dev/zero: over 64 MiB" "stops at 64 MiB and says so"
head -c $((64 << 20)) /dev/zero | tr '\0' 'a' > "$TMP/prompt64"
expect_status 0 "a prompt file of exactly 64 MiB is read" -- "$S2HC" sample "$R" --prompt-file "$TMP/prompt64" --tokens 2 --temperature 0
rm -f "$TMP/prompt64"
expect_status 2 "both prompts" -- "$S2HC" sample "$R" --prompt x --prompt-file "$TMP/prompt"
expect_status 2 "unknown option" -- "$S2HC" sample "$R" --temp 1
expect_out "unknown option '--temp'" "names the option"
expect_status 0 "train a 128-token vocabulary" -- "$S2HC" train "$TMP/v.yaml" --quiet
expect_status 2 "a prompt byte past the vocabulary" -- "$S2HC" sample "$TMP/runs/v" --prompt $'ab\xc3\xa9'
expect_out "byte 0xc3 at offset 2 is outside the model's vocabulary \(128 tokens\)" "names the byte and offset"

# a corpus of token ids (data import --tokens uint16): the model's vocabulary must hold its
# ids and the out-of-domain corpora must hold the same kind; sample reads and writes ids
perl -e 'print pack("v*", map { ($_ * 7) % 1000 } 0 .. 20000)' > "$TMP/ids.bin"
"$S2HC" data import "$TMP/ids.bin" --tokens uint16 --vocab 1000 --name ids --dir "$TMP/data" >/dev/null
cat > "$TMP/i.yaml" <<YAML
model: {n_layer: 1, n_head: 2, n_embd: 32, block_size: 32, vocab: 1024}
residual: {method: rc, n_streams: 1}
train: {batch: 4, steps: 5, warmup: 1, eval_every: 0, eval_batches: 1, ckpt_every: 0}
data: {dir: $TMP/data, train: ids, ood: []}
run: {name: i, out: $TMP/runs}
probe: {every: 0, final_samples: 0}
YAML
expect_status 2 "ids past model.vocab" -- "$S2HC" train "$TMP/i.yaml" --set model.vocab=256
expect_out "ids/train.bin: token 37 is 259, outside the model's vocabulary of 256 \(key 'model.vocab'" "names the token and the key"
[ ! -e "$TMP/runs/i" ] && ok "nothing written" || fail "a refused training wrote $TMP/runs/i"
expect_status 1 "a byte corpus out of domain of an ids corpus" -- "$S2HC" train "$TMP/i.yaml" --set data.ood=synth
expect_out "synth/train.bin: a vocabulary of 256 tokens where the training corpus has 1000" "says the corpora differ"
expect_status 0 "train on token ids" -- "$S2HC" train "$TMP/i.yaml" --quiet
expect_status 0 "eval of the ids run" -- "$S2HC" eval "$TMP/runs/i"
expect_status 2 "sample of an ids model without --ids" -- "$S2HC" sample "$TMP/runs/i"
expect_out "vocabulary of 1024 tokens, more than the 256 bytes of text: .*--ids" "points to --ids"
expect_status 0 "sample --ids" -- "$S2HC" sample "$TMP/runs/i" --ids --prompt "7 14,21" --tokens 5 --temperature 0
grep -Eq '^7 14 21( [0-9]+){5} $' "$TMP/out" && ok "the prompt's ids and 5 more" || fail "sample --ids: $(cat "$TMP/out")"
expect_status 2 "--ids with a word" -- "$S2HC" sample "$TMP/runs/i" --ids --prompt "7 x"
expect_out "--prompt: not a token id at offset 2" "names the offset"
expect_status 2 "--ids past the vocabulary" -- "$S2HC" sample "$TMP/runs/i" --ids --prompt "1024"
expect_out "an id outside the model's vocabulary at offset 0 \(--ids wants token ids 0..1023" "names the range"
expect_status 2 "--ids without a prompt" -- "$S2HC" sample "$TMP/runs/i" --ids
# ids of a 256-token vocabulary: the vocabularies of text and ids agree, the kinds do not
# (the run file's token_kind): no text prompt for that model, no text corpus beside it
perl -e 'print pack("v*", map { ($_ * 7) % 256 } 0 .. 20000)' > "$TMP/ids256.bin"
"$S2HC" data import "$TMP/ids256.bin" --tokens uint16 --vocab 256 --name ids256 --dir "$TMP/data" >/dev/null
expect_status 1 "a text corpus out of domain of ids of the same vocabulary" -- "$S2HC" train "$TMP/i.yaml" \
  --set data.train=ids256 --set model.vocab=256 --set run.name=i256 --set data.ood=synth
expect_out "synth/train.bin: bytes of text, where the training corpus holds a tokenizer's ids .*, of the same vocabulary \(256\)" \
  "says the kinds differ"
# nor a validation split of text beside training ids (a corpus directory put together by hand)
mkdir -p "$TMP/mix/mix" && cp "$TMP/data/ids256/train.bin" "$TMP/data/synth/val.bin" "$TMP/mix/mix/"
expect_status 1 "a text validation split beside ids of the same vocabulary" -- "$S2HC" train "$TMP/i.yaml" \
  --set data.dir="$TMP/mix" --set data.train=mix --set model.vocab=256 --set run.name=mix
expect_out "mix/val.bin: bytes of text, where the training corpus holds a tokenizer's ids" "says the split's kind differs"
# the run's out-of-domain corpus (ids) read as text where `eval --data` points: refused too
"$S2HC" data import "$TMP/ids256.bin" --tokens uint16 --vocab 256 --name ids256o --dir "$TMP/data" >/dev/null
expect_status 0 "train on ids of 256" -- "$S2HC" train "$TMP/i.yaml" --set data.train=ids256 --set model.vocab=256 \
  --set run.name=i256 --set data.ood=ids256o --quiet
mkdir -p "$TMP/data2" && cp -r "$TMP/data/ids256" "$TMP/data2/" && cp -r "$TMP/data/synth" "$TMP/data2/ids256o"
expect_status 1 "eval of an ids run with a text corpus for its out-of-domain one" -- "$S2HC" eval "$TMP/runs/i256" \
  --data "$TMP/data2"
expect_out "ids256o/train.bin: bytes of text, where the training corpus holds a tokenizer's ids" "says the kinds differ"
kind() { h5dump -a /token_kind "$1/run.h5" 2>/dev/null | grep -Eo '"[a-z]+"' | tr -d '"'; }
[ "$(kind "$TMP/runs/i256")" = ids ] && [ "$(kind "$R")" = bytes ] && ok "token_kind: ids and bytes" \
  || fail "token_kind: '$(kind "$TMP/runs/i256")', '$(kind "$R")'"
expect_status 2 "a text prompt for a model of ids of 256" -- "$S2HC" sample "$TMP/runs/i256" --prompt "ab"
expect_out "trained on token ids .*give the prompt as ids with --ids" "points to --ids"
expect_status 0 "and --ids" -- "$S2HC" sample "$TMP/runs/i256" --ids --prompt "7 14" --tokens 3 --temperature 0
grep -Eq '^7 14( [0-9]+){3} $' "$TMP/out" && ok "ids out" || fail "sample --ids of ids256: $(cat "$TMP/out")"
# its export says so too (__metadata__'s token_kind): a text prompt refused from the file
"$S2HC" export "$TMP/runs/i256" -o "$TMP/i256.safetensors" >/dev/null
expect_status 2 "a text prompt for the export of a model of ids of 256" -- "$S2HC" sample "$TMP/i256.safetensors" \
  --prompt "ab"
expect_out "trained on token ids .*give the prompt as ids with --ids" "points to --ids"
expect_status 0 "and --ids from the export" -- "$S2HC" sample "$TMP/i256.safetensors" --ids --prompt "7 14" \
  --tokens 3 --temperature 0
grep -Eq '^7 14( [0-9]+){3} $' "$TMP/out" && ok "ids out of the export" || fail "sample --ids of i256.safetensors: $(cat "$TMP/out")"
# --ids: a prompt without a token id (blanks only), given or from a file, is refused naming it
expect_status 2 "--ids of a blank --prompt" -- "$S2HC" sample "$R" --ids --prompt ' ' --tokens 2
expect_out "^s2hc: error: sample: --prompt holds no token id$" "names --prompt"
printf '  \n' > "$TMP/blank.ids"
expect_status 2 "--ids of a blank --prompt-file" -- "$S2HC" sample "$R" --ids --prompt-file "$TMP/blank.ids" --tokens 2
expect_out "^s2hc: error: sample: $TMP/blank.ids holds no token id$" "names the file"
# inspect --history of this run, trained without probes (probe.every 0, no final probe):
# says so and how to get them, exit 1
expect_status 1 "inspect --history of a run without probes" -- "$S2HC" inspect "$R" --history dist
expect_out "$R/run.h5 holds no probes \(/probe or /final\); train with probe.every > 0 or run .s2hc probe $R." \
  "says it has no probes and how to get them"
finish sample_cli
