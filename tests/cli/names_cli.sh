#!/usr/bin/env bash
# names_cli.sh: names the project does not choose, through the outputs they reach. Paths
# (--dir, run.out, a grid's --out, a run folder) may hold any character: the commands that
# messages, logs and scripts show to be pasted give each path as one shell word (checked by
# letting bash split them), and a run folder's name in the tables stays text in markdown
# and LaTeX. Run names and corpus names themselves keep to [A-Za-z0-9_.+-] (config.c).
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh

# a folder with a space, quotes, $, &, |, <, >, a backslash and non-ASCII in its name
W="$TMP/we ird'\"\$HOME&|<σ>\\x"
mkdir -p "$W"
make_synth_data "$W/data"
[ -s "$W/data/synth/train.bin" ] && ok "a corpus in an odd folder" || fail "no corpus in $W/data"

# words_after PREFIX: the shell words of the command from PREFIX to the next ` in $TMP/out, one
# a line, as bash splits them (in a scratch folder: a path the message left unquoted would
# have its > and | read as redirections)
mkdir -p "$TMP/scratch"
words_after() {
  local cmd
  cmd=$(grep -o -- "$1[^\`]*" "$TMP/out" | head -n 1)
  [ -n "$cmd" ] && (cd "$TMP/scratch" && bash -c 'eval "set -- $1" && printf "%s\n" "$@"' _ "$cmd")
}
# expect_word PREFIX N WANT DESCRIPTION: the Nth word of the command after PREFIX is WANT
expect_word() {
  local got
  got=$(words_after "$1" 2>/dev/null | sed -n "${2}p")
  if [ "$got" = "$3" ]; then ok "$4"; else fail "$4: word $2 is '$got', wanted '$3' ($(grep -o -- "$1.*" "$TMP/out" | head -n 1))"; fi
}

expect_status 0 "data list of an odd folder" -- "$S2HC" data list --dir "$W/data"
expect_word "s2hc data prepare --dir" 5 "$W/data" "data list: the prepare command's --dir is one shell word"

cat > "$W/c.yaml" <<YAML
model: {n_layer: 1, n_head: 2, n_embd: 16, block_size: 16}
residual: {method: s2hc, n_streams: 2}
train: {batch: 2, steps: 2, warmup: 1, lr: 0.003, eval_every: 0, eval_batches: 1, ckpt_every: 0}
data: {train: synth, ood: []}
run: {name: _x_, out: runs}
probe: {every: 0, final_samples: 0}
YAML
R="$W/runs/_x_"
expect_status 0 "train into an odd folder" -- "$S2HC" train "$W/c.yaml" --quiet --set data.dir="$W/data" --set run.out="$W/runs"
expect_status 1 "inspect of a run without probes" -- "$S2HC" inspect "$R"
expect_word "s2hc probe" 3 "$R" "inspect: the probe command's run folder is one shell word"

printf 'sweep:\n  train.seed: [1, 2]\n' > "$W/g.yaml"
expect_status 2 "train of a grid file is refused" -- "$S2HC" train "$W/g.yaml"
expect_word "s2hc grid" 3 "$W/g.yaml" "the refusal's grid command: the file is one shell word"

# a grid in an odd folder: --dry-run's commands, train.log's header, --slurm's submit line
G=(experiments/smoke.yaml --set data.dir="$W/data" --set data.train=synth --set train.steps=2 --out "$W/grid")
expect_status 0 "grid --dry-run in an odd folder" -- "$S2HC" grid "${G[@]}" --dry-run
grep -o "s2hc train .* --resume" "$TMP/out" | head -n 1 | sed 's/$/`/' > "$TMP/cmd"; cp "$TMP/cmd" "$TMP/out"
expect_word "s2hc train" 3 "$W/grid/identity-n4-s1337/config.yaml" "grid --dry-run: the config path is one shell word"
expect_status 0 "grid --slurm in an odd folder" -- "$S2HC" grid "${G[@]}" --slurm
grep -o "submit with: sh .*" "$TMP/out" | sed 's/^submit with: //; s/$/`/' > "$TMP/cmd"; cp "$TMP/cmd" "$TMP/out"
expect_word "sh" 2 "$W/grid/slurm/submit.sh" "grid --slurm: the submit script is one shell word"
expect_status 0 "grid -j 1 in an odd folder" -- "$S2HC" grid "${G[@]}" -j 1 --job 2
grep -o "s2hc train .* --resume" "$W/grid/rc-n1-s1337/train.log" | head -n 1 | sed 's/$/`/' > "$TMP/out"
expect_word "s2hc train" 3 "$W/grid/rc-n1-s1337/config.yaml" "train.log's header: the config path is one shell word"

# a name template's own text is a folder name too: refused at name:'s line, nothing written
printf 'base: %s/experiments/tiny.yaml\nsweep:\n  train.seed: [1, 2]\nname: "run {train.seed}"\n' "$PWD" > "$TMP/sp.yaml"
expect_status 2 "a name template with a space" -- "$S2HC" grid "$TMP/sp.yaml" --out "$TMP/sp" --list
expect_out "sp.yaml:4:7: name: point 0 gets the name 'run 1': use letters, digits" "the refusal names the file, name:'s line and the name"
[ ! -e "$TMP/sp" ] && ok "the refused grid wrote nothing" || fail "the refused grid made $TMP/sp"

# a run folder's own name, with markup of markdown and LaTeX, in the runs table
mkdir -p "$TMP/a"
D='_y_ b{\z}<w>|v*&lt;[l](u)'
cp -r "$R" "$TMP/a/$D"
expect_status 0 "analyze a run folder with markup in its name" -- "$S2HC" analyze "$TMP/a" -o "$TMP/an" -q
grep -qF '| \_y\_ b{\\z}\<w\>\|v\*\&lt;[l]\(u) |' "$TMP/an/tables/runs.md" && ok "runs.md: the folder's name escaped for markdown" \
  || fail "runs.md: $(tail -n 1 "$TMP/an/tables/runs.md")"
grep -qF '\_y\_ b\{\textbackslash{}z\}\textless{}w\textgreater{}$|$v*\&lt;[l](u) &' "$TMP/an/tables/runs.tex" \
  && ok "runs.tex: the folder's name escaped for LaTeX" || fail "runs.tex: $(grep -F '_y' "$TMP/an/tables/runs.tex")"
# the report's table captions come from the markdown's first lines: shown as written, not
# as their markdown escapes ("max \|sum − 1\|")
expect_status 0 "report of the analysis" -- "$S2HC" report "$TMP/a" -o "$TMP/an" --no-analyze --no-plots
grep -qF 'per-token |row or column sum − 1|' "$TMP/an/index.html" && ! grep -q '<p>[^<]*\\[|`*<>_]' "$TMP/an/index.html" \
  && ok "report: the tables' captions without markdown escapes" \
  || fail "report: $(grep -o '<p>[^<]*\\[|`*<>_][^<]*' "$TMP/an/index.html" | head -n 1)"

# a run folder with a newline in its name would split the analysis's line-based files: refused
# by name (the newline shown as ?), the exit not 0 and nothing written, as for any unreadable run
mkdir -p "$TMP/nl"
cp -r "$R" "$TMP/nl/two
lines"
expect_status 1 "analyze with a run folder holding a newline" -- "$S2HC" analyze "$TMP/nl" -o "$TMP/nlan" -q
expect_out "nl/two[?]lines: a run directory with a control character in its name" "the refusal names the folder, ? for the newline"
[ ! -e "$TMP/nlan" ] && ok "nothing written" || fail "the refused analysis wrote $(ls "$TMP/nlan")"
expect_status 0 "rename the folder" -- mv "$TMP/nl/two
lines" "$TMP/nl/two"
expect_status 0 "analyze once the folder is renamed" -- "$S2HC" analyze "$TMP/nl" -o "$TMP/nlan" -q
grep -q '| two ' "$TMP/nlan/tables/runs.md" && ok "the renamed run in runs.md" || fail "runs.md: $(tail -n 2 "$TMP/nlan/tables/runs.md")"

finish names_cli
