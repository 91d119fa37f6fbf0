#!/usr/bin/env bash
# `s2hc sample` and `s2hc eval` of a safetensors file without s2hc metadata (another
# program's nanoGPT state_dict), its model given by --config: a run's export with its
# __metadata__ stripped gives the run's own losses and text; a nanoGPT-like file (no
# transformer.wte.weight beside lm_head.weight, causal-mask buffers attn.bias) loads into
# an rc model; a missing, reshaped or unexpected tensor and a config of another method are
# refused naming the file and the tensor, and --config where a model says its own is refused;
# a note names the keys the file cannot confirm.
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh
make_synth_data "$TMP/data"
conf() { # conf NAME METHOD N [MODEL_EXTRA]
  cat > "$TMP/$1.yaml" <<YAML
model: {n_layer: 2, n_head: 2, n_embd: 32, block_size: 32$4}
residual: {method: $2, n_streams: $3}
train: {batch: 4, steps: 20, warmup: 2, lr: 0.01, eval_every: 0, eval_batches: 2, ckpt_every: 0}
data: {dir: $TMP/data, train: synth, ood: [synth_ood]}
run: {name: $1, out: $TMP/runs}
probe: {every: 0, final_samples: 0}
YAML
}
conf s s2hc 4
conf r rc 1 ", bias: false"
conf rb rc 1 # rc with biases: s's model but its hyper-connections
# and a model of a corpus of 200 token ids (vocabulary 200: the kind is not the vocabulary's)
perl -e 'srand(5); print pack("v*", map { int(rand(200)) } 1..6000)' > "$TMP/ids.bin"
"$S2HC" data import "$TMP/ids.bin" --tokens uint16 --vocab 200 --name ids --dir "$TMP/data" >/dev/null 2>&1 \
  || fail "data import of ids"
sed 's/block_size: 32/block_size: 32, vocab: 200/; s/train: synth, ood: \[synth_ood\]/train: ids, ood: []/; s/name: r,/name: ids,/' \
  "$TMP/r.yaml" > "$TMP/ids.yaml"
for r in s r ids; do
  "$S2HC" train "$TMP/$r.yaml" --quiet >/dev/null 2>&1 && "$S2HC" export "$TMP/runs/$r" >/dev/null 2>&1 \
    || fail "$r: train and export"
done
# st.py IN OUT OP... [-- IN OUT OP...]...: IN's tensors rewritten as another program might
# hold them, no __metadata__ (safetensors' layout: the header's length in 8 little-endian
# bytes, the JSON header padded to 8, the data). OPs: drop:NAME, shape:NAME:A,B (the same
# bytes, another shape), add:NAME:A,B (zeros), mask:L:T (nanoGPT's causal-mask buffers of
# blocks 0..L-1). One python3 for several files: its start is the slow part here.
cat > "$TMP/st.py" <<'PY'
import json, struct, sys
def rewrite(src, dst, ops):
    b = open(src, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    t = {k: (v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()}
    for op in ops:
        kind, name, *rest = op.split(":")
        if kind == "drop": del t[name]
        elif kind == "shape": t[name] = (t[name][0], [int(x) for x in rest[0].split(",")], t[name][2])
        elif kind == "add":
            shape = [int(x) for x in rest[0].split(",")]
            t[name] = ("F32", shape, bytes(4 * shape[0] * shape[1]))
        elif kind == "mask":
            T = int(rest[0])
            for l in range(int(name)):
                t["transformer.h.%d.attn.bias" % l] = ("F32", [1, 1, T, T], struct.pack("<%df" % (T * T),
                    *[1.0 if j <= i else 0.0 for i in range(T) for j in range(T)]))
    head, data = {}, b""
    for k, (dt, shape, raw) in t.items():
        head[k] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    j = json.dumps(head).encode()
    j += b" " * (-(8 + len(j)) % 8)
    open(dst, "wb").write(struct.pack("<Q", len(j)) + j + data)
args = sys.argv[1:]
while args:
    job = args[:args.index("--")] if "--" in args else args
    args = args[len(job) + 1:]
    rewrite(job[0], job[1], job[2:])
PY
mkdir -p "$TMP/f" "$TMP/bad"
F=$TMP/f/s.safetensors G=$TMP/f/nanogpt.safetensors B=$TMP/bad
# F: s's export, stripped; G: a nanoGPT-like rc file: lm_head.weight alone for the tied pair
# (safetensors' save_model keeps one name of shared tensors), older nanoGPT's causal-mask
# buffers attn.bias; and in $B, F with a tensor dropped, reshaped, added, G with a mask of rank 3
I=$TMP/ids.safetensors
python3 "$TMP/st.py" "$TMP/runs/s/model.safetensors" "$F" -- "$TMP/runs/ids/model.safetensors" "$I" -- \
  "$TMP/runs/r/model.safetensors" "$G" drop:transformer.wte.weight mask:2:32 -- \
  "$TMP/runs/s/model.safetensors" "$B/missing.safetensors" drop:transformer.h.1.mlp.c_fc.weight -- \
  "$TMP/runs/s/model.safetensors" "$B/shape.safetensors" shape:transformer.h.1.mlp.c_fc.weight:32,128 -- \
  "$TMP/runs/s/model.safetensors" "$B/extra.safetensors" add:transformer.h.0.attn.rotary.weight:4,8 -- \
  "$TMP/runs/r/model.safetensors" "$B/mask3.safetensors" drop:transformer.wte.weight mask:2:32 \
  shape:transformer.h.0.attn.bias:1,32,32 || fail "st.py: the files"

# eval: the run's own losses, in full precision, the step not given
"$S2HC" eval "$TMP/runs/s" --csv > "$TMP/run.csv" 2>/dev/null
expect_status 0 "eval --config of the stripped s2hc export" -- "$S2HC" eval "$F" --config "$TMP/s.yaml"
expect_out "^eval of $F, step not given \(" "its header says the step is not given"
"$S2HC" eval "$F" --config "$TMP/s.yaml" --csv > "$TMP/f.csv" 2>/dev/null
[ "$(wc -l < "$TMP/f.csv")" = 3 ] && [ "$(cut -d, -f3- "$TMP/run.csv")" = "$(cut -d, -f3- "$TMP/f.csv")" ] \
  && grep -q "^$F,,synth,val," "$TMP/f.csv" \
  && ok "--csv: the run's losses to the last digit: $(sed -n 2p "$TMP/f.csv" | cut -d, -f5)" \
  || fail "--csv of the stripped file '$(cat "$TMP/f.csv")', the run's '$(cat "$TMP/run.csv")'"
# sample: the export's text with the same seed, greedy and drawn
"$S2HC" sample "$TMP/runs/s/model.safetensors" --prompt "the cat " --tokens 60 --count 2 --seed 7 > "$TMP/x.txt" 2>/dev/null
"$S2HC" sample "$F" --config "$TMP/s.yaml" --prompt "the cat " --tokens 60 --count 2 --seed 7 > "$TMP/f.txt" 2>"$TMP/err"
[ "$(wc -c < "$TMP/x.txt")" -gt 130 ] && cmp -s "$TMP/x.txt" "$TMP/f.txt" && ok "sample --config: the export's drawn texts" \
  || fail "sample --config: '$(cat "$TMP/f.txt" "$TMP/err")', the export's '$(cat "$TMP/x.txt")'"
grep -q "method s2hc, n = 4, step not given" "$TMP/err" && ok "its settings: the config's method, no step" \
  || fail "stderr: $(cat "$TMP/err")"
# --set over --config: the config without its out-of-domain corpus, the validation row alone
"$S2HC" eval "$F" --config "$TMP/s.yaml" --set 'data.ood=[]' --csv > "$TMP/v.csv" 2>/dev/null
[ "$(sed 1d "$TMP/v.csv" | cut -d, -f3-)" = "$(sed -n 2p "$TMP/run.csv" | cut -d, -f3-)" ] \
  && ok "--set data.ood=[] over --config: the val row alone" || fail "--set data.ood=[]: '$(cat "$TMP/v.csv")'"

# G, the nanoGPT-like rc file
"$S2HC" eval "$TMP/runs/r" --csv > "$TMP/rrun.csv" 2>/dev/null
"$S2HC" eval "$G" --config "$TMP/r.yaml" --csv > "$TMP/g.csv" 2>"$TMP/err"
[ "$(wc -l < "$TMP/g.csv")" = 3 ] && [ "$(cut -d, -f3- "$TMP/rrun.csv")" = "$(cut -d, -f3- "$TMP/g.csv")" ] \
  && ok "rc: a nanoGPT-like file gives the run's losses" || fail "rc --csv '$(cat "$TMP/g.csv" "$TMP/err")', the run's '$(cat "$TMP/rrun.csv")'"
"$S2HC" sample "$TMP/runs/r" --prompt "the " --tokens 50 --seed 3 > "$TMP/rx.txt" 2>/dev/null
"$S2HC" sample "$G" --config "$TMP/r.yaml" --prompt "the " --tokens 50 --seed 3 > "$TMP/rg.txt" 2>"$TMP/rerr"
[ "$(wc -c < "$TMP/rx.txt")" = 55 ] && cmp -s "$TMP/rx.txt" "$TMP/rg.txt" && ok "rc: and the run's text" \
  || fail "rc sample '$(cat "$TMP/rg.txt" "$TMP/rerr")', the run's '$(cat "$TMP/rx.txt")'"
cmp -s "$TMP/x.txt" "$TMP/rx.txt" && fail "the two models wrote the same text: the check cannot tell them apart"
# the keys the file cannot confirm, in one note on stderr with the values taken: model.n_head
# and model.gelu always, the method's own that change what it computes (s2hc: core and init,
# no Sinkhorn keys; rc: none), the values --set gave; none for an export, which says its own
note="has no s2hc metadata; --config's keys that shape no tensor are taken at its word, unchecked against the file:"
"$S2HC" eval "$F" --config "$TMP/s.yaml" --set residual.core=expm --batches 1 --csv >/dev/null 2>"$TMP/err"
[ "$(grep -c "^s2hc: note: " "$TMP/err")" = 1 ] \
  && grep -qxF "s2hc: note: eval: $F $note model.n_head=2, model.gelu=tanh, residual.core=expm, residual.init=tanh4" "$TMP/err" \
  && ok "s2hc: one note, n_head, gelu, core (as --set gave it) and init" || fail "s2hc's note: $(cat "$TMP/err")"
grep -qxF "s2hc: note: sample: $G $note model.n_head=2, model.gelu=tanh" "$TMP/rerr" \
  && ok "rc: n_head and gelu alone" || fail "rc's note: $(cat "$TMP/rerr")"
"$S2HC" sample "$TMP/runs/s/model.safetensors" --tokens 2 >/dev/null 2>"$TMP/err"
grep -q "note: " "$TMP/err" && fail "a note for an export: $(cat "$TMP/err")" || ok "no note for an export"

# bytes or ids: a stripped file has no token_kind; the config's training corpus says it (a
# corpus of 200 ids, a model of vocabulary 200: a text prompt refused); where that corpus is
# not prepared, a vocabulary of at most 256 reads bytes
expect_status 2 "sample --config of a model of ids, a text prompt" -- "$S2HC" sample "$I" --config "$TMP/ids.yaml" --prompt "the "
expect_out "model was trained on token ids" "says it reads ids (from the config's corpus)"
"$S2HC" sample "$TMP/runs/ids/model.safetensors" --ids --prompt "3 14 15" --tokens 20 --seed 2 > "$TMP/ix.txt" 2>/dev/null
"$S2HC" sample "$I" --config "$TMP/ids.yaml" --ids --prompt "3 14 15" --tokens 20 --seed 2 > "$TMP/ig.txt" 2>"$TMP/err"
[ "$(wc -w < "$TMP/ix.txt")" = 23 ] && cmp -s "$TMP/ix.txt" "$TMP/ig.txt" && ok "with --ids: the export's ids" \
  || fail "--ids: '$(cat "$TMP/ig.txt" "$TMP/err")', the export's '$(cat "$TMP/ix.txt")'"
expect_status 0 "the corpus not prepared: a vocabulary of 200 reads bytes" -- \
  "$S2HC" sample "$I" --config "$TMP/ids.yaml" --set data.dir="$TMP/nodata" --prompt "the " --tokens 4

# bad files and configs: exit 1 naming the file and the tensor, nothing on stdout, nothing written
cp "$F" "$G" "$B/"
before=$(ls -lA "$B" | md5sum)
for c in "missing.safetensors:s.yaml:tensor 'transformer.h.1.mlp.c_fc.weight' \[128, 32\] of the model \(method s2hc, n = 4\) is not in the file$" \
         "shape.safetensors:s.yaml:tensor 'transformer.h.1.mlp.c_fc.weight' has shape \[32, 128\], the model's transformer.h.1.mlp.c_fc.weight is \[128, 32\]" \
         "extra.safetensors:s.yaml:tensor 'transformer.h.0.attn.rotary.weight' is not a parameter of this model \(method s2hc, n = 4\)" \
         "s.safetensors:rb.yaml:tensor 'transformer.h.0.attn_hc.[a-z_.]+' is not a parameter of this model \(method rc, n = 1\)" \
         "nanogpt.safetensors:s.yaml:tensor '[a-z0-9_.]+' \[[0-9, ]+\] of the model \(method s2hc, n = 4\) is not in the file, nor [0-9]+ more" \
         "s.safetensors::no s2hc config in its __metadata__ .*give the model with --config YAML"; do
  IFS=: read -r file yaml want <<< "$c"
  args=(); [ -n "$yaml" ] && args=(--config "$TMP/$yaml")
  for cmd in eval sample; do
    "$S2HC" $cmd "$B/$file" "${args[@]}" > "$TMP/so" 2> "$TMP/out"; st=$?
    [ "$st" = 1 ] && [ ! -s "$TMP/so" ] && ok "$cmd $file ${yaml:-(no --config)}: exit 1, no output" \
      || fail "$cmd $file ${yaml:-(no --config)}: exit $st, stdout '$(head -c 200 "$TMP/so")'"
    expect_out "^s2hc: error: $cmd: $B/$file: $want" "$cmd $file ${yaml:-(no --config)}: names the file and the tensor"
  done
done
# the mask is skipped by its name and rank (nanoGPT's (1, 1, T, T)), nothing else so named
expect_status 1 "a mask buffer of another rank is no mask" -- "$S2HC" eval "$B/mask3.safetensors" --config "$TMP/r.yaml"
expect_out "tensor 'transformer.h.0.attn.bias' is not a parameter of this model" "names it"
[ "$(ls -lA "$B" | md5sum)" = "$before" ] && ok "nothing written beside the files" || fail "left: $(ls -A "$B")"

# --config where the model says its own, and --set without --config: usage errors (exit 2)
expect_status 2 "eval --config of an export (its own config)" -- "$S2HC" eval "$TMP/runs/s/model.safetensors" --config "$TMP/s.yaml"
expect_out "eval: $TMP/runs/s/model.safetensors: its __metadata__ holds its own s2hc config .*drop --config" "says why"
expect_status 2 "sample --config of an export" -- "$S2HC" sample "$TMP/runs/s/model.safetensors" --config "$TMP/s.yaml"
expect_out "sample: $TMP/runs/s/model.safetensors: its __metadata__ holds its own s2hc config" "says why"
expect_status 2 "eval --config of a run" -- "$S2HC" eval "$TMP/runs/s" --config "$TMP/s.yaml"
expect_out "eval: $TMP/runs/s is a run directory" "says it is a run"
expect_status 2 "sample --config of a run" -- "$S2HC" sample "$TMP/runs/s" --config "$TMP/s.yaml"
expect_out "sample: $TMP/runs/s is a run directory" "says it is a run"
expect_status 2 "eval --set without --config" -- "$S2HC" eval "$F" --set model.n_layer=2
expect_out "eval: --set changes the keys of --config YAML" "says --config is needed"
expect_status 2 "sample --set without --config" -- "$S2HC" sample "$F" --set model.n_layer=2
expect_status 2 "a --config that does not load" -- "$S2HC" eval "$F" --config "$TMP/none.yaml"
expect_out "$TMP/none.yaml" "names the config file"
expect_status 2 "a --set the schema refuses" -- "$S2HC" sample "$F" --config "$TMP/s.yaml" --set model.n_lyer=3
expect_out "model.n_lyer" "names the key"
# files with and without metadata on one eval command line: the worst exit, each file tried
expect_status 2 "eval --config of a stripped file and an export" -- \
  "$S2HC" eval "$F" "$TMP/runs/s/model.safetensors" --config "$TMP/s.yaml" --batches 1
expect_out "^eval of $F, step not given" "the stripped file is evaluated"
finish foreign_cli
