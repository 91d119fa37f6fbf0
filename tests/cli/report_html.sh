#!/usr/bin/env bash
# report_html.sh: `s2hc report`'s page read as a browser and a reader read it, on four very
# short runs (RC, mHC, s²HC with two seeds), one of them in a folder named a<b&c"d é:
# tests/cli/html_check.py finds the page well formed (one html/head/body, a charset and a
# title, every element closed and nested, attributes quoted, no duplicate ids), every
# href and src a file the report wrote (relative, nothing from the network), every figure
# with alt text, every table with header cells; it catches each of those faults planted in
# a copy. User strings are escaped; the tables on the page are their CSVs cell by cell,
# and agree with the runs' own numbers; a figure gnuplot could not draw, or drew without a
# data file, is said so on the page, also without gnuplot at all.
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh
CHECK=(python3 "$PWD/tests/cli/html_check.py")

make_synth_data "$TMP/data" 2>/dev/null
cat > "$TMP/grid.yaml" <<EOF
base: $PWD/experiments/tiny.yaml
set:
  model.n_layer: 1
  model.n_embd: 16
  model.block_size: 16
  train.batch: 2
  train.steps: 20
  train.warmup: 1
  train.eval_every: 10
  train.eval_batches: 1
  train.ckpt_every: 0
  probe.every: 10
  probe.final_samples: 2
  data.ood: [synth_ood]
sweep:
  residual.method: [mhc, s2hc]
include:
  - {residual.method: rc, residual.n_streams: 1}
  - {residual.method: s2hc, train.seed: 2}
name: "{residual.method}-s{train.seed}"
EOF
expect_status 0 "four tiny runs" -- "$S2HC" grid "$TMP/grid.yaml" --set data.dir="$TMP/data" --set data.train=synth \
  --out "$TMP/runs" -j 2
ODD='a<b&c"d é'
mv "$TMP/runs/mhc-s1337" "$TMP/runs/$ODD"
OUT=$TMP/report
expect_status 0 "s2hc report" -- "$S2HC" report "$TMP/runs" -o "$OUT" -q --title 'Tiny <i>runs</i> & "us"'

# the page as a browser reads it
"${CHECK[@]}" "$OUT" >"$TMP/check" 2>&1 && ok "the page is well formed, its links resolve, its figures have alt text" \
  || { fail "html_check:"; head -n 12 "$TMP/check" >&2; }
n=$(grep -c '<img src="[a-z0-9_]*\.png" alt="[^"]*[a-z] [^"]*">' "$OUT/index.html")
[ "$n" = 15 ] && ok "15 figures, each with alt text in words" || fail "figures with alt text in words: $n, not 15"
grep -q 'alt="Fig 5: gradient norm over training"' "$OUT/index.html" && ok "a figure's alt text is its title" \
  || fail "Fig 5's alt text: $(grep -o '<img src="fig05[^>]*>' "$OUT/index.html")"
# user strings as text, not markup: the folder, the title
"${CHECK[@]}" "$OUT" --text >"$TMP/text"
grep -qF "mHC $ODD" "$TMP/text" && ok "the odd folder's name shows as it is in the page's text" \
  || fail "the page's text lacks 'mHC $ODD'"
grep -qF "<title>Tiny &lt;i&gt;runs&lt;/i&gt; &amp; &quot;us&quot;</title>" "$OUT/index.html" \
  && grep -qF 'Tiny <i>runs</i> & "us"' "$TMP/text" && ok "the title escaped" || fail "title: $(grep -o '<title>.*</title>' "$OUT/index.html")"

# a checker that finds nothing wrong with anything proves nothing: each fault planted in a
# copy of the page beside it (planted_K.html), all checked by one run of the checker
FAULTS=(); PLANTED=()
plant() {
  local k=${#FAULTS[@]}
  FAULTS+=("$1|$2"); shift 2
  sed "$@" "$OUT/index.html" > "$OUT/planted_$k.html"
  PLANTED+=("planted_$k.html")
}
plant "an unclosed cell" "misnested or unclosed" -e '0,/<\/td>/s///'
plant "an unescaped name" "unexpected element <b" -e 's/a&lt;b&amp;c/a<b\&amp;c/'
plant "a bare &" "a bare '&'" -e 's/a&lt;b&amp;c/a\&lt;b\&c/'
plant "an unquoted attribute" "unquoted" -e 's/class="t"/class=t/'
plant "a duplicate id" "duplicate id 'tbl-runs'" -e 's/id="tbl-table1"/id="tbl-runs"/'
plant "an absolute src" "not a relative path" -e "s|src=\"fig05_gradnorm.png\"|src=\"$OUT/fig05_gradnorm.png\"|"
plant "a file from the network" "not a relative path" -e 's|src="fig05_gradnorm.png"|src="https://example.org/f.png"|'
plant "a link to no file" "no such file" -e 's|href="tables/runs.csv"|href="tables/nothing.csv"|'
plant "a link to no id" "names no id" -e 's|href="#runs"|href="#nothing"|'
plant "an image named by its stem" "does not say what it shows" -e 's|alt="Fig 5: gradient norm over training"|alt="fig05_gradnorm"|'
plant "a table with a data cell for a header" "among its header cells" -e 's|<th>run</th>|<td>run</td>|'
plant "no charset" "no <meta charset" -e 's|<meta charset="utf-8">||'
plant "two bodies" "2 <body> elements" -e 's|</body>|</body><body></body>|'
"${CHECK[@]}" "$OUT" --pages "${PLANTED[@]}" >"$TMP/check" 2>&1
for k in "${!FAULTS[@]}"; do
  what=${FAULTS[$k]%%|*}; want=${FAULTS[$k]#*|}
  if ! grep -q "^planted_$k.html: " "$TMP/check"; then fail "html_check passed a page with $what"
  elif grep "^planted_$k.html: " "$TMP/check" | grep -qF -- "$want"; then ok "html_check catches $what"
  else fail "html_check on $what: $(grep -m 2 "^planted_$k.html: " "$TMP/check")"; fi
done
rm -f "$OUT"/planted_*.html

# the numbers: every table on the page is its CSV, cell by cell
"${CHECK[@]}" "$OUT" --tables >"$TMP/tables" 2>&1 && grep -q "table table1: 4 rows x 11 cells" "$TMP/tables" \
  && grep -q "table runs: 5 rows x 14 cells" "$TMP/tables" && ok "every table on the page is its CSV, cell by cell" \
  || { fail "the page's tables and their CSVs:"; head -n 5 "$TMP/tables" >&2; }
# ... and agree with the runs: Table 1's val loss per method is the mean ± std (runs) of the
# runs table's val losses; Fig 5's caption's median and max are those of data/fig5_<m>.csv
python3 - "$OUT" >"$TMP/nums" 2>&1 <<'PY' && ok "Table 1 and Fig 5's caption agree with the runs table and data/" || { fail "numbers:"; cat "$TMP/nums" >&2; }
import csv, re, statistics, sys
out = sys.argv[1]
runs = list(csv.DictReader(open(out + "/tables/runs.csv", encoding="utf-8")))
pretty = {"rc": "RC", "mhc": "mHC", "s2hc": "s²HC"}
bad = 0
t1 = {r["method"]: r["val loss"] for r in csv.DictReader(open(out + "/tables/table1.csv", encoding="utf-8"))}
for v, m in pretty.items():
    xs = [float(r["val loss"]) for r in runs if r["variant"] == v]
    want = "%.4f (%d)" % (xs[0], 1) if len(xs) == 1 else "%.4f ± %.4f (%d)" % (statistics.mean(xs), statistics.stdev(xs), len(xs))
    if t1.get(m) != want:
        print("table1 %s val loss %r, from the runs table %r" % (m, t1.get(m), want)); bad += 1
page = open(out + "/index.html", encoding="utf-8").read()
cap = re.search(r'id="fig05_gradnorm".*?</figcaption>', page, re.S).group(0)
for v, m in pretty.items():
    g = [float(r["grad_norm"]) for r in csv.DictReader(open(out + "/data/fig5_%s.csv" % v))]
    want = "%s: median %.3g, max %.3g." % (m, statistics.median(g), max(g))
    if want not in cap:
        print("Fig 5's caption lacks %r" % want); bad += 1
sys.exit(1 if bad else 0)
PY

# the summary's words escaped too (--no-analyze reads OUT/data/summary.txt as it is)
cp -r "$OUT" "$TMP/sum"
sed -i 's/^corpus=.*/corpus=syn<i>th \& "x"/' "$TMP/sum/data/summary.txt"
expect_status 0 "report --no-analyze --no-plots" -- "$S2HC" report -o "$TMP/sum" --no-analyze --no-plots
"${CHECK[@]}" "$TMP/sum" >"$TMP/check" 2>&1 && "${CHECK[@]}" "$TMP/sum" --text | grep -qF 'trained on syn<i>th & "x"' \
  && ok "summary.txt's corpus escaped" || { fail "summary.txt's corpus on the page:"; head -n 3 "$TMP/check" >&2; }

# figures gnuplot could not draw: a data file gone (a warning), a script with an error, a
# script missing (the others: a plots folder with these three alone)
cp -r "$OUT" "$TMP/fail"
rm "$TMP/fail/data/fig5_rc.dat"
mkdir -p "$TMP/plots"
cp plots/style.gp plots/fig05_gradnorm.gp plots/fig08_entries.gp "$TMP/plots/"
echo 'plot sin(x) using 1:no_such_column' >> "$TMP/plots/fig08_entries.gp"
expect_status 1 "report with figures not drawn exits 1" -- "$S2HC" report -o "$TMP/fail" --no-analyze --plots "$TMP/plots"
expect_out "14 figures were not drawn" "it counts them (13 without a script, one failed)"
"${CHECK[@]}" "$TMP/fail" >"$TMP/check" 2>&1 && ok "the page with figures not drawn is well formed" \
  || { fail "html_check:"; head -n 3 "$TMP/check" >&2; }
h=$TMP/fail/index.html
grep -q '<img src="fig05_gradnorm.png"' "$h" \
  && sed -n '/id="fig05_gradnorm"/,/<\/figure>/p' "$h" | grep -q 'gnuplot warned while drawing this figure, which may lack some of its data: .*Cannot find or open file &quot;data/fig5_rc.dat&quot;' \
  && ok "a figure drawn without a data file: shown, with gnuplot's warning" || fail "Fig 5 without fig5_rc.dat: $(sed -n '/id="fig05_gradnorm"/,/<\/figure>/p' "$h" | grep -v figcaption)"
[ ! -e "$TMP/fail/fig08_entries.png" ] && ! grep -q 'src="fig08_entries.png"' "$h" \
  && grep -q 'fig08_entries.png was not drawn: gnuplot stopped with an error: .*no_such_column\|fig08_entries.png was not drawn: gnuplot stopped with an error: .*unexpected' "$h" \
  && ok "a script's error: no image, gnuplot's error on the page" || fail "Fig 8 with an error: $(grep 'fig08_entries.png' "$h")"
grep -q 'fig00_loss.png was not drawn: there is no script fig00_loss.gp' "$h" && ! grep -q 'src="fig00_loss.png"' "$h" \
  && ok "a script missing: no image (not the earlier one), said so" || fail "fig00 without a script: $(grep 'fig00_loss' "$h" | head -n 2)"
# make paper's figure step (gnuplot run by make, then report --no-plots): what gnuplot said
# while make drew a figure without a data file is shown, kept in OUT/F.gnuplot.log and put
# on the page under that figure alone, linked; drawn again whole, the log and the note go;
# a report that draws the figures itself removes make's logs
if command -v make >/dev/null; then
  W=$TMP/mkw
  cp -r "$OUT" "$W"
  rm -f "$W/gnuplot.log"
  mv "$W/data/fig5_rc.dat" "$TMP/fig5_rc.dat"
  mkfig() { MAKEFLAGS= MAKELEVEL= make -s -o "$W/data/meta.gp" -W plots/fig05_gradnorm.gp "$W/fig05_gradnorm.png" \
              PAPER_OUT="$W" >"$TMP/out" 2>&1; }
  mkfig && grep -qs 'Cannot find or open file "data/fig5_rc.dat"\|Cannot find or open file ".*/data/fig5_rc.dat"' \
      "$W/fig05_gradnorm.gnuplot.log" && grep -q 'Cannot find or open file' "$TMP/out" \
    && [ -z "$(ls "$W" | grep '\.tmp$')" ] && [ -z "$(ls "$W" | grep -v '^fig05' | grep 'gnuplot\.log$')" ] \
    && ok "make's figure step: gnuplot's warning shown and kept in fig05_gradnorm.gnuplot.log" \
    || fail "make's figure step without a data file: $(tail -n 2 "$TMP/out"), log: $(head -n 2 "$W/fig05_gradnorm.gnuplot.log" 2>&1)"
  expect_status 0 "report --no-plots after make's figure step" -- "$S2HC" report -o "$W" --no-analyze --no-plots
  expect_out "gnuplot had warned while drawing 1 figure" "the report says a kept figure was drawn with a warning"
  h=$W/index.html
  sed -n '/id="fig05_gradnorm"/,/<\/figure>/p' "$h" | grep -q 'gnuplot warned while drawing this figure, which may lack some of its data: .*Cannot find or open file &quot;.*fig5_rc.dat&quot;.*<a href="fig05_gradnorm.gnuplot.log">' \
    && [ "$(grep -c 'gnuplot warned while drawing this figure' "$h")" = 1 ] \
    && "${CHECK[@]}" "$W" >"$TMP/check" 2>&1 \
    && ok "the --no-plots page: make's warning under Fig 5 alone, its log linked" \
    || { fail "make's warning on the page: $(sed -n '/id="fig05_gradnorm"/,/<\/figure>/p' "$h" | grep -v figcaption | head -n 4)"; head -n 3 "$TMP/check" >&2; }
  cp "$W/fig05_gradnorm.gnuplot.log" "$TMP/kept.log"
  mv "$TMP/fig5_rc.dat" "$W/data/fig5_rc.dat"
  mkfig && [ ! -e "$W/fig05_gradnorm.gnuplot.log" ] && "$S2HC" report -o "$W" --no-analyze --no-plots >"$TMP/out" 2>&1 \
    && ! grep -q 'gnuplot warned\|gnuplot had warned' "$h" "$TMP/out" \
    && ok "drawn again with its data: no log, no note" || fail "drawn again: $(ls "$W" | grep fig05), $(grep -c 'gnuplot warned' "$h") notes"
  # a log beside no PNG (the figure removed since) is of no drawing on the page: not counted
  cp "$TMP/kept.log" "$W/fig05_gradnorm.gnuplot.log"
  mv "$W/fig05_gradnorm.png" "$TMP/fig05.png"
  "$S2HC" report -o "$W" --no-analyze --no-plots >"$TMP/out" 2>&1 && ! grep -q 'gnuplot had warned' "$TMP/out" \
    && grep -q 'fig05_gradnorm.png was not drawn: the report ran with --no-plots' "$h" && ! grep -q 'gnuplot warned' "$h" \
    && ok "a kept log beside no PNG: no warning counted or shown" \
    || fail "a kept log without its PNG: $(cat "$TMP/out"), $(grep -c 'gnuplot warned' "$h") notes"
  mv "$TMP/fig05.png" "$W/fig05_gradnorm.png"
  "$S2HC" report -o "$W" --no-analyze >"$TMP/out" 2>&1 && [ ! -e "$W/fig05_gradnorm.gnuplot.log" ] \
    && ! grep -q 'gnuplot warned' "$h" && ok "a report that draws removes make's older log" \
    || fail "a drawing report: $(ls "$W" | grep fig05 | tr '\n' ' ')"
  # two data files missing: the page shows gnuplot's first warning, as the log has it
  mv "$W/data/fig5_rc.dat" "$W/data/fig5_s2hc.dat" "$TMP/"
  mkfig && grep -q 'fig5_rc.dat' "$W/fig05_gradnorm.gnuplot.log" && grep -q 'fig5_s2hc.dat' "$W/fig05_gradnorm.gnuplot.log" \
    && first=$(grep -m1 'Cannot find or open file' "$W/fig05_gradnorm.gnuplot.log" | sed "s|\"$W/|\"|; s/\"/\&quot;/g") \
    && "$S2HC" report -o "$W" --no-analyze --no-plots >"$TMP/out" 2>&1 && grep -qF "$first" "$h" \
    && [ "$(grep -c 'Cannot find or open file' "$h")" = 1 ] && ok "two warnings kept: the first under the figure" \
    || fail "two warnings kept: the page says $(grep -o 'Cannot find or open file[^<]*' "$h"), the log's first: $first"
  # a script's error (not a warning): no figure, no log (an older one removed), no .tmp, exit 1
  mv "$TMP/fig5_rc.dat" "$TMP/fig5_s2hc.dat" "$W/data/"
  cp "$W/data/meta.gp" "$TMP/meta.gp"
  echo 'x = no_such_function(1)' >>"$W/data/meta.gp"
  ! mkfig && grep -q 'no_such_function' "$TMP/out" && grep -q 'its partial figure removed' "$TMP/out" \
    && [ -z "$(ls "$W" | grep '^fig05_gradnorm\.\|\.tmp$')" ] \
    && ok "make's figure step, a script's error: shown, no figure and no log left (the older one removed)" \
    || fail "make's figure step with an error: left $(ls "$W" | grep 'fig05\|tmp' | tr '\n' ' '), $(tail -n 2 "$TMP/out")"
  cp "$TMP/meta.gp" "$W/data/meta.gp"
fi

# no gnuplot at all: the earlier report's figures are not shown beside the new analysis,
# nor make paper's log of one
mkdir -p "$TMP/nobin"
echo 'warning: make paper drew this one' >"$OUT/fig01_overview.gnuplot.log"
expect_status 1 "report without gnuplot exits 1" -- env PATH="$TMP/nobin" "$S2HC" report -o "$OUT" --no-analyze
expect_out "15 figures were not drawn" "every figure counted"
m=$("${CHECK[@]}" "$OUT" --missing | wc -l)
[ "$m" = 15 ] && ! grep -q '<img' "$OUT/index.html" && [ -z "$(ls "$OUT"/*.png 2>/dev/null)" ] \
  && [ ! -e "$OUT/fig01_overview.gnuplot.log" ] \
  && grep -q 'fig01_overview.png was not drawn: gnuplot was not found' "$OUT/index.html" \
  && ok "without gnuplot, no figure shown and each said not drawn" || fail "without gnuplot: $m said not drawn, $(grep -c '<img' "$OUT/index.html") images"

finish report_html
