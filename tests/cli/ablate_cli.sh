#!/usr/bin/env bash
# `s2hc ablate` from the shell: its table and CSV on trained runs, the unablated loss
# against `s2hc eval`'s, an export read as its run, another corpus, the refusals, and
# nothing written.
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh
make_synth_data "$TMP/data"
conf() { # conf NAME METHOD N
  cat > "$TMP/$1.yaml" <<YAML
model: {n_layer: 2, n_head: 2, n_embd: 16, block_size: 16}
residual: {method: $2, n_streams: $3}
train: {batch: 4, steps: 40, warmup: 2, lr: 0.01, min_lr: 0.001, eval_every: 0, eval_batches: 3, ckpt_every: 0}
data: {dir: $TMP/data, train: synth, ood: []}
run: {name: $1, out: $TMP/runs}
probe: {every: 0, final_samples: 4}
YAML
}
conf am mhc 4
conf ai identity 3
conf ar rc 1
# an s2hc run trained long enough that its H_res moves from token to token (the mean matters)
conf as s2hc 4 && sed -i 's/steps: 40,/steps: 150,/; s/lr: 0.01,/lr: 0.03,/' "$TMP/as.yaml"
for r in am ai ar as; do
  expect_status 0 "train $r" -- "$S2HC" train "$TMP/$r.yaml" --quiet
done
expect_status 0 "ablate --help" -- "$S2HC" ablate --help
expect_out "^example:" "ablate --help shows an example"
expect_status 0 "s2hc --help" -- "$S2HC" --help
expect_out "^  ablate RUN_DIR" "s2hc --help lists ablate"

ls -A "$TMP/runs/am" >"$TMP/files0"
sum0=$(cat "$TMP"/runs/am/* | cksum)
expect_status 0 "ablate of an mhc run" -- "$S2HC" ablate "$TMP/runs/am" --what identity,mean,uniform --batches 4
expect_out "^ablate .*/runs/am at step 40: mhc, n = 4, 4 sublayers; synth val, 4 x 4 sequences of 16 tokens$" \
  "the table's first line: the run, its step, method, sublayers and what was scored"
expect_out "^ +H_res := I +H_res := mean +H_res := 11\^T/n" "a column pair per replacement, in --what's order"
rows=$(grep -cE '^ +[0-9]+ +[01] (attn|mlp) +[-+][0-9]' "$TMP/out")
[ "$rows" = 4 ] && ok "a row per sublayer" || fail "$rows sublayer rows, wanted 4"
expect_out "^ +all( +[-+][0-9.]+ +[0-9.]+){3}$" "the row of every sublayer at once, three pairs"
# the columns line up: every row of the table as wide as its header line (display width)
awk '/sublayer layer kind/ { gsub(/Δ|±/, "x"); w = length($0) } /^ +([0-9]+ +[01] (attn|mlp)|all) / { if (length($0) != w) bad++ }
     END { exit !(w > 0 && !bad) }' "$TMP/out" && ok "the rows as wide as the header" ||
  fail "the table's rows and header differ in width"
# 90 columns at most, but the first line's run name (Δ and ± one column each)
awk 'NR > 1 { gsub(/Δ|±/, "x"); if (length($0) > 90) { print; bad++ } } END { exit !!bad }' "$TMP/out" &&
  ok "the table within 90 columns" || fail "lines past 90 columns: $(awk 'NR > 1 && length($0) > 92' "$TMP/out")"
cp "$TMP/out" "$TMP/out4"
# four kinds: narrower cells (4 decimals), the table still within 90 columns and aligned,
# each pair the CSV's Δ and interval to the table's 4 decimals
expect_status 0 "ablate with all four kinds" -- "$S2HC" ablate "$TMP/runs/am" --what branch,identity,mean,uniform --batches 4
expect_out "^ +f := 0 +H_res := I +H_res := mean +H_res := 11\^T/n$" "four headings, in --what's order"
awk 'NR > 1 { gsub(/Δ|±/, "x"); if (length($0) > 90) bad++ } /sublayer layer kind/ { w = length($0) }
     /^ +([0-9]+ +[01] (attn|mlp)|all) / { rows++; if (length($0) != w) bad++ } END { exit !(w > 0 && rows == 5 && !bad) }' \
  "$TMP/out" && ok "four kinds: the table within 90 columns, its rows as wide as the header" ||
  fail "four kinds' table: $(awk '{ gsub(/Δ|±/, "x"); print length($0) ": " $0 }' "$TMP/out" | sed -n 4,6p)"
cp "$TMP/out" "$TMP/out4k"
"$S2HC" ablate "$TMP/runs/am" --what branch,identity,mean,uniform --batches 4 --csv 2>/dev/null >"$TMP/k4.csv"
awk -F, 'NR == FNR { if (FNR > 1) { k = $5 "," $6; d[k] = $11; c[k] = $12 }; next }
         FNR > 1 && $1 ~ /^([0-9]+|all)$/ { s = $1; o = s == "all" ? 2 : 4
           for (q = 0; q < 4; q++) { k = (q == 0 ? "branch" : q == 1 ? "identity" : q == 2 ? "mean" : "uniform") "," s
             x = $(o + 2 * q) - d[k]; y = $(o + 2 * q + 1) - c[k]
             if (!(k in d) || x > 6e-5 || x < -6e-5 || y > 6e-5 || y < -6e-5) bad++; if (q == 0 && d[k] + 0 == 0) bad++ }
           rows++ }
         END { exit !(rows == 5 && !bad) }' "$TMP/k4.csv" FS=' ' "$TMP/out4k" &&
  ok "four kinds: each pair the CSV's to 4 decimals" ||
  fail "four kinds against the CSV: $(grep -E '^ +([0-9]+|all) ' "$TMP/out4k" | head -2)"
expect_status 0 "ablate --batches 1" -- "$S2HC" ablate "$TMP/runs/am" --what uniform --batches 1
expect_out "^One micro-batch gives no interval" "one batch: why no interval"
awk 'NR > 1 { gsub(/Δ|±/, "x"); if (length($0) > 90) bad++ } END { exit !!bad }' "$TMP/out" &&
  ok "one batch: within 90 columns" || fail "one batch: lines past 90 columns"
[ "$(cat "$TMP"/runs/am/* | cksum)" = "$sum0" ] && ok "nothing of the run written" || fail "the run's files changed"
ls -A "$TMP/runs/am" | cmp -s - "$TMP/files0" && ok "no file left beside the run's" ||
  fail "ablate left files: $(ls -A "$TMP/runs/am")"

# the CSV: a row per replacement and sublayer; the unablated loss is eval's on the same batches
expect_status 0 "ablate --csv" -- sh -c "'$S2HC' ablate '$TMP/runs/am' --csv --batches 4 >'$TMP/a.csv' 2>'$TMP/a.err'"
"$S2HC" eval "$TMP/runs/am" --csv --batches 4 >"$TMP/e.csv" 2>/dev/null
head -1 "$TMP/a.csv" | grep -qx 'run,step,corpus,role,ablation,sublayer,layer,kind,loss,base_loss,delta,ci95,batches,sequences,tokens,mean_from' &&
  ok "the CSV header" || fail "the CSV header: $(head -1 "$TMP/a.csv")"
[ "$(wc -l <"$TMP/a.csv")" = 11 ] && ok "2 replacements x (4 sublayers + all) rows" || fail "$(wc -l <"$TMP/a.csv") lines"
evl=$(awk -F, 'NR == 2 { print $5 }' "$TMP/e.csv")
awk -F, -v e="$evl" 'NR > 1 && $10 != e { bad++ } NR > 1 && NF != 16 { bad++ } END { exit !(NR == 11 && !bad && e != "") }' \
  "$TMP/a.csv" && ok "base_loss is eval's validation loss at full precision ($evl)" ||
  fail "base_loss differs from eval's $evl: $(awk -F, 'NR == 2 { print $10 }' "$TMP/a.csv")"
awk -F, 'NR > 1 { d = $9 - $10 - $11; if (d < 0) d = -d; if (d > 1e-6) bad++;
                  if ($13 != 4 || $14 != 16 || $15 != 256) bad++ }
         NR == 2 && ($5 != "identity" || $6 != 0 || $7 != 0 || $8 != "attn") { bad++ }
         NR == 6 && ($5 != "identity" || $6 != "all" || $7 != "" || $8 != "") { bad++ }
         NR == 11 && ($5 != "mean" || $6 != "all") { bad++ } END { exit !!bad }' "$TMP/a.csv" &&
  ok "each row: delta = loss - base_loss, its batches, sequences and tokens, sublayer all last" ||
  fail "the CSV's rows: $(sed -n 2,3p "$TMP/a.csv")"
# sublayer c is layer c / 2's attention (c even) or MLP (c odd), in the CSV and the table
awk -F, 'NR > 1 && $6 != "all" && ($7 != int($6 / 2) || $8 != ($6 % 2 ? "mlp" : "attn")) { bad++ }
         END { exit !(NR == 11 && !bad) }' "$TMP/a.csv" && ok "the CSV: each sublayer's layer and kind" ||
  fail "the CSV's layers and kinds: $(cut -d, -f5-8 "$TMP/a.csv" | tr '\n' ' ')"
# the table's numbers are the CSV's (the same batches): Δ and ± 95 % of identity and mean,
# to the table's 5 decimals, sublayer by sublayer, then all
awk -F, 'NR == FNR { if (FNR > 1) { k = $5 "," $6; d[k] = $11; c[k] = $12 }; next }
         FNR > 1 && $1 ~ /^([0-9]+|all)$/ { s = $1; o = s == "all" ? 2 : 4
           if (s != "all" && ($2 != int(s / 2) || $3 != (s % 2 ? "mlp" : "attn"))) bad++
           for (q = 0; q < 2; q++) { k = (q ? "mean" : "identity") "," s; x = $(o + 2 * q) - d[k]; y = $(o + 2 * q + 1) - c[k]
             if (!(k in d) || x > 6e-6 || x < -6e-6 || y > 6e-6 || y < -6e-6) bad++ }
           rows++ }
         END { exit !(rows == 5 && !bad) }' "$TMP/a.csv" FS=' ' "$TMP/out4" &&
  ok "the table: each row's layer and kind, its Δ and interval the CSV's" ||
  fail "the table against the CSV: $(grep -E '^ +([0-9]+|all) ' "$TMP/out4" | head -2)"

# several runs: one header, then each run's rows; a name with a comma and a quote quoted
cp -r "$TMP/runs/am" "$TMP/runs/a,\"m"
expect_status 0 "ablate --csv of two runs" -- sh -c "'$S2HC' ablate '$TMP/runs/am' '$TMP/runs/a,\"m' --csv --batches 2 --what uniform >'$TMP/two.csv' 2>/dev/null"
[ "$(grep -c '^run,' "$TMP/two.csv")" = 1 ] && [ "$(wc -l <"$TMP/two.csv")" = 11 ] && ok "two runs: one header, 5 rows each" ||
  fail "two runs' CSV: $(cat "$TMP/two.csv")"
[ "$(grep -c "^\"$TMP/runs/a,\"\"m\"," "$TMP/two.csv")" = 5 ] && ok "the odd name quoted as CSV quotes it" ||
  fail "the odd name's rows: $(sed -n 7p "$TMP/two.csv")"
diff <(sed -n 2,6p "$TMP/two.csv" | sed 's/^[^,]*,//') <(sed -n 7,11p "$TMP/two.csv" | sed 's/^".*",//') >/dev/null &&
  ok "the copy's numbers are the run's" || fail "the copy's rows differ from the run's"

# identity's H_res is I: replacing it by I changes no bit; by 11^T/n, the middle sublayers' do
expect_status 0 "ablate of an identity run" -- sh -c "'$S2HC' ablate '$TMP/runs/ai' --what identity,uniform --csv 2>/dev/null >'$TMP/i.csv'"
awk -F, 'NR > 1 && $5 == "identity" && ($11 != 0 || $9 != $10) { bad++ }
         NR > 1 && $5 == "uniform" && ($6 == 1 || $6 == 2) && $11 + 0 == 0 { bad++ }
         END { exit !(NR == 11 && !bad) }' "$TMP/i.csv" &&
  ok "identity: H_res := I moves nothing, 11^T/n moves sublayers 1 and 2" || fail "identity's rows: $(cat "$TMP/i.csv")"

# an export is read as its run
expect_status 0 "export" -- "$S2HC" export "$TMP/runs/am" -o "$TMP/am.safetensors"
expect_status 0 "ablate of the export" -- sh -c "'$S2HC' ablate '$TMP/am.safetensors' --csv --batches 4 2>/dev/null >'$TMP/f.csv'"
diff <(cut -d, -f2- "$TMP/a.csv") <(cut -d, -f2- "$TMP/f.csv") >/dev/null && ok "the export's numbers are the run's" ||
  fail "the export's CSV differs: $(diff <(cut -d, -f2- "$TMP/a.csv") <(cut -d, -f2- "$TMP/f.csv") | head -4)"

# --mean-from train: the mean H_res over as many batches of the training split, held out
# from those scored; the unablated loss and identity's rows as before, the mean's moved
# (but at the first sublayer, which reads n copies of one vector, and the last, whose
# streams are summed: s2hc's rows and columns sum to 1, any mean leaves those)
"$S2HC" ablate "$TMP/runs/as" --csv --batches 4 >"$TMP/ms.csv" 2>/dev/null
expect_status 0 "ablate --mean-from train --csv" -- sh -c "'$S2HC' ablate '$TMP/runs/as' --mean-from train --csv --batches 4 >'$TMP/mt.csv' 2>/dev/null"
awk -F, 'NR == FNR { if (FNR > 1) { l[$5 "," $6] = $9; b = $10; if ($16 != ($5 == "mean" ? "scored" : "")) bad++ }; next }
         FNR > 1 { k = $5 "," $6; if ($10 != b || !(k in l)) bad++
                   if ($5 == "identity") { if ($9 != l[k] || $16 != "") bad++ } else { if ($16 != "train") bad++; if ($9 != l[k]) moved++ } }
         END { exit !(FNR == 11 && !bad && moved >= 2) }' "$TMP/ms.csv" "$TMP/mt.csv" &&
  ok "--mean-from train: the mean's rows moved and marked train, the rest as scored's" ||
  fail "--mean-from train's CSV against the default's: $(paste -d'|' "$TMP/ms.csv" "$TMP/mt.csv" | grep mean | cut -d, -f5,6,9,16,25,31)"
# a fall too small for the table's decimals is shown as no rise (+0.00000), never -0.00000
expect_status 0 "ablate of the s2hc run, the table" -- "$S2HC" ablate "$TMP/runs/as" --batches 4
tiny=$(awk -F, 'NR > 1 && $11 < 0 && $11 > -5e-6 { print $5 "," $6; exit }' "$TMP/ms.csv")
! grep -qE -- '-0\.0+( |$)' "$TMP/out" && { [ -z "$tiny" ] || grep -qE "^ +${tiny#*,} .* \+0\.00000 " "$TMP/out"; } &&
  ok "no -0.00000 in the table${tiny:+ (a fall of $tiny rounds to +0.00000)}" ||
  fail "a tiny fall's cell: $(grep -E -- '-0\.0+( |$)' "$TMP/out")"
! grep -q "^mean:" "$TMP/out" && ok "the default's table has no held-out mean line" || fail "$(grep "^mean:" "$TMP/out")"
expect_status 0 "ablate --mean-from train, the table" -- "$S2HC" ablate "$TMP/runs/am" --mean-from train --what mean --batches 4
expect_out "^mean: H_res averaged over 4 x 4 sequences of the training split \(held out\)$" "the table says where the mean came from"
expect_status 2 "--mean-from of no split" -- "$S2HC" ablate "$TMP/runs/am" --mean-from val
expect_out "--mean-from: expected scored or train, got 'val'" "the values --mean-from takes"
expect_status 2 "--mean-from train without the mean" -- "$S2HC" ablate "$TMP/runs/am" --mean-from train --what identity,uniform
expect_out "--what does not name mean" "--mean-from train needs the mean"
mkdir -p "$TMP/valonly/synth" && cp "$TMP/data/synth/val.bin" "$TMP/valonly/synth/"
expect_status 1 "--mean-from train, no training split" -- "$S2HC" ablate "$TMP/runs/am" --mean-from train --data "$TMP/valonly"
expect_out "runs/am: --mean-from train: .*valonly/synth/train.bin" "the missing training split named"
expect_status 0 "--mean-from scored with that data" -- "$S2HC" ablate "$TMP/runs/am" --what uniform --batches 2 --data "$TMP/valonly"
# an rc run (branch alone, as make paper ablates it with --mean-from train) takes no mean:
# no training split read, no mean line
expect_status 0 "--mean-from train of an rc run" -- "$S2HC" ablate "$TMP/runs/ar" --what identity,mean,branch --mean-from train --batches 2 --data "$TMP/valonly"
! grep -q "^mean:" "$TMP/out" && ok "an rc run's table has no mean line" || fail "an rc run's table: $(grep "^mean:" "$TMP/out")"
# a training split of block_size + 1 tokens is one window; of block_size, none
mk_train() { # mk_train DIR COUNT: a training split of synth's first COUNT tokens (bytes), its val.bin
  mkdir -p "$1/synth" && cp "$TMP/data/synth/val.bin" "$1/synth/"
  { head -c 24 "$TMP/data/synth/train.bin"; printf "\\x$(printf %02x "$2")\\0\\0\\0\\0\\0\\0\\0"
    tail -c +33 "$TMP/data/synth/train.bin" | head -c "$2"; } >"$1/synth/train.bin"
}
mk_train "$TMP/w17" 17 && mk_train "$TMP/w16" 16
expect_status 0 "--mean-from train, a training split of one window" -- "$S2HC" ablate "$TMP/runs/am" --what mean --mean-from train --batches 2 --data "$TMP/w17"
expect_status 1 "--mean-from train, a training split of no window" -- "$S2HC" ablate "$TMP/runs/am" --what mean --mean-from train --batches 2 --data "$TMP/w16"
expect_out "w16/synth/train.bin: 16 tokens, fewer than block_size \+ 1 = 17: no window" "the training split too short, named"
# a training split of token ids (2 bytes a token, the same vocabulary) beside text's validation split
mkdir -p "$TMP/wids/synth" && cp "$TMP/data/synth/val.bin" "$TMP/wids/synth/"
{ head -c 16 "$TMP/data/synth/train.bin"; printf '\002\0\0\0\0\0\0\0\100\0\0\0\0\0\0\0'
  tail -c +33 "$TMP/data/synth/train.bin" | head -c 64 | od -An -v -tu1 | tr -s ' ' '\n' | sed '/^$/d' |
    while read -r b; do printf "\\$(printf %03o "$b")\\0"; done; } >"$TMP/wids/synth/train.bin"
expect_status 1 "--mean-from train, a training split of ids" -- "$S2HC" ablate "$TMP/runs/am" --what mean --mean-from train --batches 2 --data "$TMP/wids"
expect_out "wids/synth/train.bin: token ids .*, where the training corpus holds bytes of text" "the training split of another kind, named"

# another corpus: its whole text, out of domain
expect_status 0 "ablate --corpus synth_ood" -- "$S2HC" ablate "$TMP/runs/am" --corpus synth_ood --what uniform --batches 2
expect_out "; synth_ood ood, 2 x 4 sequences of 16 tokens$" "the corpus scored and its role"

# --record: /ablate in the run file, the CSV's numbers; rows of replacements not measured NaN
if command -v h5dump >/dev/null; then
  expect_status 0 "ablate --record" -- sh -c "'$S2HC' ablate --record '$TMP/runs/am' --what uniform,identity --batches 4 --csv 2>'$TMP/r.err' >'$TMP/r.csv'"
  grep -q "/ablate written to .*runs/am/run.h5" "$TMP/r.err" && ok "--record says where" || fail "--record: $(cat "$TMP/r.err")"
  h5dump -d /ablate/delta -w 0 -m %.17g "$TMP/runs/am/run.h5" >"$TMP/d.txt" 2>&1
  # the dataset's rows identity, mean, uniform, branch; columns sublayers 0..3, then all
  vals=$(sed -n 's/^ *([0-9],[0-9]): //p' "$TMP/d.txt" | tr -d ' ' | tr ',' '\n' | grep -v '^$')
  want=$( { awk -F, '$5 == "identity" { print $11 }' "$TMP/r.csv"; for i in 1 2 3 4 5; do echo nan; done
            awk -F, '$5 == "uniform" { print $11 }' "$TMP/r.csv"; for i in 1 2 3 4 5; do echo nan; done; } )
  awk 'NR == FNR { a[FNR] = $1; n = FNR; next } { b[FNR] = $1; m = FNR }
       END { for (i = 1; i <= n; i++) { if (a[i] == "nan" || b[i] == "nan") { if (tolower(a[i]) != tolower(b[i])) bad++ }
             else { d = a[i] - b[i]; if (d < 0) d = -d; if (d > 1e-15 + 1e-12 * (b[i] < 0 ? -b[i] : b[i])) bad++ } }
             exit !(n == 20 && m == 20 && !bad) }' <(echo "$vals") <(echo "$want") &&
    ok "/ablate/delta holds the CSV's deltas, NaN for mean and branch" || fail "/ablate/delta: $(echo $vals) vs $(echo $want)"
  # /ablate/loss and /ablate/ci95 likewise the CSV's loss and ci95 columns, each (4, 5)
  for ds in loss:9 ci95:12; do
    name=${ds%:*} col=${ds#*:}
    h5dump -d "/ablate/$name" -w 0 -m %.17g "$TMP/runs/am/run.h5" >"$TMP/d.txt" 2>&1
    vals=$(sed -n 's/^ *([0-9],[0-9]): //p' "$TMP/d.txt" | tr -d ' ' | tr ',' '\n' | grep -v '^$')
    want=$( { awk -F, -v c="$col" '$5 == "identity" { print $c }' "$TMP/r.csv"; for i in 1 2 3 4 5; do echo nan; done
              awk -F, -v c="$col" '$5 == "uniform" { print $c }' "$TMP/r.csv"; for i in 1 2 3 4 5; do echo nan; done; } )
    grep -q 'DATASPACE  SIMPLE { ( 4, 5 ) /' "$TMP/d.txt" &&
    awk 'NR == FNR { a[FNR] = $1; n = FNR; next } { b[FNR] = $1; m = FNR }
         END { for (i = 1; i <= n; i++) { if (a[i] == "nan" || b[i] == "nan") { if (tolower(a[i]) != tolower(b[i])) bad++ }
               else { d = a[i] - b[i]; if (d < 0) d = -d; if (d > 1e-15 + 1e-12 * (b[i] < 0 ? -b[i] : b[i])) bad++ } }
               exit !(n == 20 && m == 20 && !bad) }' <(echo "$vals") <(echo "$want") &&
      ok "/ablate/$name: (4, 5), the CSV's $name, NaN for mean and branch" || fail "/ablate/$name: $(echo $vals) vs $(echo $want)"
  done
  grep -q 'DATASPACE  SIMPLE { ( 4, 5 ) /' <(h5dump -H -d /ablate/delta "$TMP/runs/am/run.h5") &&
    ok "/ablate/delta: rows the replacements, columns the sublayers and all" || fail "/ablate/delta's shape"
  h5dump -a /ablate/replacements -a /ablate/batches -a /ablate/step "$TMP/runs/am/run.h5" >"$TMP/a.txt" 2>&1
  grep -q '"uniform,identity"' "$TMP/a.txt" && grep -q '(0): 4$' "$TMP/a.txt" && grep -q '(0): 40$' "$TMP/a.txt" &&
    ok "/ablate's attributes: replacements, batches, step" || fail "/ablate's attributes: $(grep '(0)' "$TMP/a.txt")"
  h5dump -a /ablate/base_loss -a /ablate/sequences -a /ablate/tokens -m %.17g "$TMP/runs/am/run.h5" >"$TMP/a.txt" 2>&1
  got=$(sed -n 's/^ *(0): //p' "$TMP/a.txt" | tr '\n' ' ')
  awk -F, -v g="$got" 'NR == 2 { split(g, a, " "); d = a[1] - $10; if (d < 0) d = -d
                                 exit !(d <= 1e-15 + 1e-12 * $10 && a[2] == 16 && a[3] == 256) }' "$TMP/r.csv" &&
    ok "/ablate's base_loss (the CSV's), sequences 16 and tokens 256" || fail "/ablate's base_loss, sequences, tokens: $got"
  expect_status 0 "inspect still reads the run" -- "$S2HC" inspect "$TMP/runs/am"
  # inspect --layer shows that sublayer's recorded ablations (those measured), the CSV's numbers
  expect_status 0 "inspect --layer 1 of the ablated run" -- "$S2HC" inspect "$TMP/runs/am" --layer 1
  for k in identity:'H_res := I' uniform:'H_res := 11^T/n'; do
    want=$(awk -F, -v k="${k%%:*}" '$5 == k && $6 == "1" { printf "%+.5f ± %.5f", $11, $12 }' "$TMP/r.csv")
    grep -qF -- "  $(printf '%-24s' "${k#*:}") $want" "$TMP/out" && ok "inspect: sublayer 1's ${k%%:*} rise, the CSV's ($want)" ||
      fail "inspect's ${k%%:*} line: $(grep -A4 'rise when ablated' "$TMP/out" | tr '\n' '|') vs $want"
  done
  grep -q "rise when ablated (s2hc ablate --record, step 40, 4 batches)" "$TMP/out" && ! grep -q "token mean\|f := 0" "$TMP/out" &&
    ok "inspect: the record's step and batches, no line for what it did not measure" || fail "inspect's ablation lines: $(grep -A4 'rise when ablated' "$TMP/out")"
  "$S2HC" inspect "$TMP/runs/am" --layer 1 --csv >"$TMP/ic.csv" 2>/dev/null
  awk -F, 'NR == FNR { if ($6 == "1") { v["ablate_" $5] = $11; c["ablate_" $5 "_ci95"] = $12 }; next }
           $5 ~ /^ablate_/ { k++; w = ($5 in v) ? v[$5] : c[$5]; d = $8 - w; if (d < 0) d = -d
                             if (!($5 in v) && !($5 in c) || d > 1e-8 * (1 + (w < 0 ? -w : w))) bad++ }
           END { exit !(k == 4 && !bad) }' "$TMP/r.csv" "$TMP/ic.csv" &&
    ok "inspect --csv: ablate_identity, ablate_uniform and their ci95 rows, the CSV's" ||
    fail "inspect --csv's ablate rows: $(grep ablate_ "$TMP/ic.csv" | tr '\n' ' ')"
  # a second record replaces the first whole
  "$S2HC" ablate --record "$TMP/runs/am" --what mean --batches 2 >/dev/null 2>&1
  h5dump -d /ablate/delta -w 0 "$TMP/runs/am/run.h5" | grep -q '(0,0): nan, nan' && ok "a second --record replaces the first" ||
    fail "the first record's identity row is still there"
  h5dump -a /ablate/mean_from "$TMP/runs/am/run.h5" 2>&1 | grep -q '"scored"' && ok "/ablate's mean_from: scored" ||
    fail "/ablate's mean_from: $(h5dump -a /ablate/mean_from "$TMP/runs/am/run.h5" 2>&1 | tail -3)"
  expect_status 0 "inspect --layer 1 after a record of the scored mean" -- "$S2HC" inspect "$TMP/runs/am" --layer 1
  expect_out "^validation loss's rise when ablated \(s2hc ablate --record, step 40, 2 batches\):$" \
    "inspect: a mean over the scored sequences is not said to be the training split's"
  "$S2HC" ablate --record "$TMP/runs/am" --what mean --mean-from train --batches 2 >/dev/null 2>&1
  h5dump -a /ablate/mean_from "$TMP/runs/am/run.h5" 2>&1 | grep -q '"train"' && ok "/ablate's mean_from: train" ||
    fail "/ablate's mean_from after --mean-from train: $(h5dump -a /ablate/mean_from "$TMP/runs/am/run.h5" 2>&1 | tail -3)"
  expect_status 0 "inspect --layer 1 after --mean-from train" -- "$S2HC" inspect "$TMP/runs/am" --layer 1
  expect_out "^validation loss's rise when ablated \(s2hc ablate --record, step 40, 2 batches, the mean over the training split's\):$" \
    "inspect says the recorded mean is the training split's"
  expect_out "^  H_res := its token mean +[-+][0-9]" "inspect: the mean's line"
  ! grep -qE -- '-0\.0+( |$)' "$TMP/out" && ok "inspect: no -0.00000" || fail "inspect: $(grep -E -- '-0\.0+( |$)' "$TMP/out")"
  "$S2HC" ablate --record "$TMP/runs/am" --what identity --batches 2 >/dev/null 2>&1
  h5dump -A "$TMP/runs/am/run.h5" | grep -q '"replacements"' && ! h5dump -A "$TMP/runs/am/run.h5" | grep -q '"mean_from"' &&
    ok "a record without the mean drops the earlier record's mean_from" || fail "/ablate's mean_from outlived its mean"
fi
# --record takes the run's lock: refused while another command holds it (a POSIX lock
# here, which the run's open-file-description lock conflicts with), the run file untouched
if command -v python3 >/dev/null; then
  fresh "$TMP/held"
  python3 -c 'import fcntl, sys, time
f = open(sys.argv[1], "a"); fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB); print("held", flush=True); time.sleep(30)' \
    "$TMP/runs/am/.train.lock" >"$TMP/held" 2>&1 &
  hp=$!
  if wait_for 20 grep -q held "$TMP/held"; then
    before=$(cksum <"$TMP/runs/am/run.h5")
    expect_status 1 "--record while the run's lock is held" -- "$S2HC" ablate --record "$TMP/runs/am" --batches 1
    [ "$(cksum <"$TMP/runs/am/run.h5")" = "$before" ] && ok "the run file untouched" || fail "the run file changed"
    expect_status 0 "without --record it reads the run" -- "$S2HC" ablate "$TMP/runs/am" --batches 1 --what uniform
  else fail "the test's lock holder did not start: $(cat "$TMP/held")"; fi
  kill $hp 2>/dev/null; wait $hp 2>/dev/null
fi
# several runs: rc passed over with a note, the others measured
expect_status 0 "ablate of several runs, rc among them" -- "$S2HC" ablate "$TMP/runs/ar" "$TMP/runs/ai" --what identity --batches 1
expect_out "note: ablate: .*runs/ar passed over: method rc has one stream and no H_res" "rc passed over with a note"
expect_out "^ablate .*runs/ai at step 40: identity" "the other run measured"

# branch: the sublayer's output left out, for rc too (its only ablation): rc among
# replacements of H_res measured with branch alone, a note saying so; the CSV's rows
expect_status 0 "ablate --what identity,branch of rc and an mhc run" -- sh -c "'$S2HC' ablate '$TMP/runs/ar' \
  '$TMP/runs/am' --what identity,branch --batches 2 --csv 2>'$TMP/b.err' >'$TMP/b.csv'"
grep -q "note: ablate: .*runs/ar: method rc has no H_res: branch alone measured" "$TMP/b.err" &&
  ok "rc: branch alone, a note" || fail "rc's note: $(cat "$TMP/b.err")"
awk -F, 'NR > 1 { n[$1 SUBSEP $5]++; if ($5 == "branch" && $6 != "all" && $11 + 0 == 0) zero++ }
         END { ar = am = ""; for (k in n) { split(k, p, SUBSEP); if (p[1] ~ /ar$/) ar = ar p[2] n[k]; else am = am p[2] n[k] }
               exit !(ar == "branch5" && (am == "identity5branch5" || am == "branch5identity5") && NR == 16 && !zero) }' \
  "$TMP/b.csv" && ok "rc: 5 branch rows; mhc: 5 identity and 5 branch rows; every branch row moved the loss" ||
  fail "the branch CSV: $(cut -d, -f1,5,6,11 "$TMP/b.csv" | tr '\n' ' ')"
expect_status 0 "the table of rc's branch ablation" -- "$S2HC" ablate "$TMP/runs/ar" --what branch --batches 2
expect_out "^ +f := 0 \(no branch\)$" "rc's table: the branch heading alone"
if command -v h5dump >/dev/null; then
  expect_status 0 "--record of rc's branch ablation" -- sh -c "'$S2HC' ablate --record '$TMP/runs/ar' --what branch \
    --batches 2 --csv 2>/dev/null >'$TMP/rb.csv'"
  vals=$(h5dump -d /ablate/delta -w 0 -m %.17g "$TMP/runs/ar/run.h5" | sed -n 's/^ *([0-9],[0-9]): //p' | tr -d ' ' |
         tr ',' '\n' | grep -v '^$' | tr '\n' ' ')
  want="nan nan nan nan nan nan nan nan nan nan nan nan nan nan nan $(awk -F, 'NR > 1 { printf "%s ", $11 }' "$TMP/rb.csv")"
  awk -v a="$(echo $vals | tr A-Z a-z)" -v b="$(echo $want)" 'BEGIN { n = split(a, x, " "); m = split(b, y, " ")
      for (i = 1; i <= n; i++) if (x[i] == "nan" || y[i] == "nan") bad += x[i] != y[i]; else bad += x[i] - y[i] != 0
      exit !(n == 20 && m == 20 && !bad) }' && ok "rc's /ablate/delta: row branch the CSV's, the others NaN" ||
    fail "rc's /ablate/delta: $vals vs $want"
  h5dump -d /ablate/H_mean -w 0 "$TMP/runs/ar/run.h5" | grep -q 'DATASPACE  SIMPLE { ( 4, 1, 1 ) /' &&
    [ "$(h5dump -d /ablate/H_mean -w 0 "$TMP/runs/ar/run.h5" | sed -n 's/^ *([0-9],[0-9],[0-9]): //p' | tr -d ' \n')" = "1,1,1,1" ] &&
    ok "rc's /ablate/H_mean: (4, 1, 1) of 1" || fail "rc's H_mean: $(h5dump -d /ablate/H_mean "$TMP/runs/ar/run.h5" | tail -n 4)"
fi

# refusals
expect_status 2 "--record of a model file" -- "$S2HC" ablate --record "$TMP/am.safetensors"
expect_out "--record writes into a run's run.h5; .*am.safetensors is a model file" "--record of a file: why"
expect_status 2 "--record with --corpus" -- "$S2HC" ablate --record "$TMP/runs/am" --corpus synth_ood
expect_out "--record keeps the run's validation split's ablations; --corpus synth_ood is not recorded" "--record --corpus: why"
expect_status 1 "ablate of rc" -- "$S2HC" ablate "$TMP/runs/ar"
expect_out "runs/ar: method rc has one stream and no H_res to replace \(--what branch measures its sublayers\)" "rc: why, and what it has"
expect_status 2 "an unknown replacement" -- "$S2HC" ablate "$TMP/runs/am" --what identity,shuffle
expect_out "--what: 'shuffle' is not an ablation \(identity, mean, uniform, branch\)" "the ablation named"
expect_status 2 "a replacement twice" -- "$S2HC" ablate "$TMP/runs/am" --what mean,mean
expect_out "--what: 'mean' named twice" "the repeat named"
expect_status 2 "--corpus given twice" -- "$S2HC" ablate "$TMP/runs/am" --corpus synth_ood --corpus=synth
expect_out "ablate: --corpus given twice \('synth_ood', then 'synth'\): give it once" "the option and both values named"
expect_status 2 "--batches 0" -- "$S2HC" ablate "$TMP/runs/am" --batches 0
expect_out "--batches: expected a whole number in 1..1000000, got '0'" "--batches: the range"
expect_status 1 "a corpus not prepared" -- "$S2HC" ablate "$TMP/runs/am" --corpus nosuch
expect_out "--corpus nosuch: .*nosuch" "the corpus's file named"
for bad in '' ../x 'a,b'; do # a usage error, said once, before any run is read
  expect_status 2 "--corpus '$bad'" -- "$S2HC" ablate "$TMP/runs/am" --corpus "$bad"
  expect_out "^s2hc: error: ablate: --corpus: " "--corpus '$bad': why"
  [ "$(grep -c error "$TMP/out")" = 1 ] && ok "--corpus '$bad': one error" || fail "--corpus '$bad': $(cat "$TMP/out")"
done
expect_status 1 "no validation split here" -- "$S2HC" ablate "$TMP/runs/am" --data "$TMP/nodata"
expect_out "the validation split of its training corpus; --data DIR" "what to do"
# what `s2hc eval` refuses to score: a validation split rebuilt since the run trained (its
# loss not the run's validation loss), and a model of bytes of text on a tokenizer's ids
mkdir -p "$TMP/short/synth" && head -c 20000 "$TMP/data/synth/text" >"$TMP/short/synth/text"
"$S2HC" data import "$TMP/short/synth/text" --dir "$TMP/short" --name synth >/dev/null 2>&1 || fail "import short"
perl -e 'srand(5); print pack("v*", map { int(rand(200)) } 1..6000)' >"$TMP/ids.bin"
"$S2HC" data import "$TMP/ids.bin" --tokens uint16 --vocab 200 --name synth --dir "$TMP/ids" >/dev/null 2>&1 ||
  fail "import ids"
expect_status 1 "a validation split rebuilt since" -- "$S2HC" ablate "$TMP/runs/am" --data "$TMP/short" --batches 1
expect_out "short/synth/val.bin: [0-9]+ tokens, but .*runs/am trained with a validation set of [0-9]+" "the sizes named"
expect_status 1 "a run's model of bytes on ids" -- "$S2HC" ablate "$TMP/runs/am" --data "$TMP/ids" --batches 1
expect_out "ids/synth/val.bin: a tokenizer's ids .*runs/am's model was trained on bytes of text" "the kinds named"
expect_status 1 "a file's model of bytes on ids" -- "$S2HC" ablate "$TMP/am.safetensors" --data "$TMP/ids" --batches 1
expect_out "ids/synth/val.bin: a tokenizer's ids .*am.safetensors's model was trained on bytes of text" "the file's"
expect_status 2 "--config with a run" -- "$S2HC" ablate "$TMP/runs/am" --config "$TMP/am.yaml"
expect_status 1 "not a run" -- "$S2HC" ablate "$TMP/nosuch"
finish ablate_cli
