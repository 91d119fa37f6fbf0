#!/usr/bin/env bash
# docs_cli.sh: the command lines that README.md, docs/*.md and the usage comments of
# experiments/*.yaml and the makefiles show are ones the program takes
# (tests/cli/doc_commands.py: s2hc's commands and options against their --help, config
# keys against `s2hc config`, a grid file's keys against `s2hc grid`, make's targets,
# variables, options and TESTS against the makefiles, the programs' environment
# variables, make and tests/run.sh, the examples of every --help likewise). Then the
# checker itself, on a page of planted mistakes (one for each of its rules, a line joined
# by a backslash, a span over a line break, a list item's code block, a grid block's
# slurm:, override: and top-level keys and a misspelled section among them), a grid
# file's and a makefile's comments (in a table of names, an s2hc row whose word misspells
# a command or that goes on as a command line), and a --help example planted by a wrapper of s2hc:
# each is named by its file and line, and what only looks like one (the method s2hc in
# prose, a file train.bin or model.pt, an error message's misspelled key, another
# program's options, a comment, a quoted value, a placeholder, a list item's second
# paragraph, an environment variable the programs read, a table of method names) is not.
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh
# s2hc as it is, but for one planted --help example: an option that the command's help
# names only there (its examples are checked against the rest of its help)
cat >"$TMP/s2hc" <<EOF
#!/bin/sh
if [ "\$1" = eval ] && [ "\$2" = --help ]; then
  $(printf %q "$S2HC") eval --help || exit
  echo "  s2hc eval runs/tiny --ood-only gcide"
  echo "  s2hc evl runs/tiny --ood gcide"
  exit 0
fi
exec $(printf %q "$S2HC") "\$@"
EOF
chmod +x "$TMP/s2hc"
CHECK=(python3 tests/cli/doc_commands.py "$TMP/s2hc" "${BUILD:-build}")
PLANTED_HELP="s2hc eval --help:[0-9]*: s2hc eval: no option --ood-only (s2hc eval --help)"
PLANTED_HELP2="s2hc eval --help:[0-9]*: s2hc evl: no such command "

D=$TMP/doc.md
cat >"$D" <<'EOF'
# Planted

    s2hc train experiments/tiny.yaml --extnd --set train.steps=5
    bin/s2hc trian experiments/tiny.yaml
    s2hc data prepar --dir /tmp/d
    s2hc grid g.yaml --set train.lrr=1 --set preset=tiny -j 2
    make tset && make paper PRESTE=tiny
    make bench-frame FRAME_ARGS="--methods s2hc --bf61"
    make bench-frame --bf16
    make test TESTS='test_config nope_cli.sh' SAN=1
Use `residual.methd: s2hc` or `--method-compar`, and `s2hc inspect --layr 1`.
```yaml
model:
  n_layer: 2
  n_hed: 4
train:
  sed: 1
```
Not mistakes: s2hc at n = 4 in a comment, `train.bin`, `runs/x/run.h5`, `--extend`,
`s2hc inspect -- -odd/run`, `s2hc train ... | tee log`, `-j N`, `h5dump -H run.h5`,
`make bench BENCH_ARGS=--quick`, `make -j2 tests-build SAN=1`, `--array=0-N%K`,
`S2HC_BIN=$PWD/bin/s2hc bash tests/cli/train_cli.sh`, `s2hc help config`, `--set KEY=VALUE`,
`make -f mk/cuda.mk cuda-emu-check EMU_ORDERS=random:1`.

    s2hc: error: exp.yaml:4:3: key 'train.lrr': unknown key (did you mean 'train.lr'?)
    make bench-frame                       # identity, hc, mhc, s2hc at n = 4
```python
model.load_state_dict(sd)   # the s2hc model class
```
```shell
s2hc eval runs/tiny --bathces 2
```
~~~
s2hc sample runs/tiny --tokns 5
```
~~~

    s2hc train x.yaml \
      --set train.steps=5 --bogus-opt
    s2hc train x.yaml --set steps=5
    s2hc help trian
    s2hc eval runs/tiny   # no --resume here: eval only reads the run
    s2hc eval -- -weird/run
    s2hc sample runs/tiny --prompt '-x y'

A span over a line break, `s2hc inspect runs/tiny
--layrs 2`, and not mistakes: `model.transformer.wte.weight`, `make TARGET VAR=value`.
```yaml
train: {lr: 1e-3, stpes: 5}
```
- A list item, and a code block in it (six spaces in):

      s2hc train x.yaml --extnd2

    s2hc trian x.yaml --nope, in its second paragraph (four spaces in), is prose.
1.  An ordered item with four spaces after its marker: eight make code,

        s2hc sample runs/tiny --tokns2
- Then run `s2hc trian x.yaml`, or `nohup s2hc evl runs/x &`; prose that says
  run s2hc trian x.yaml is not read, nor is `the s2hc method at n = 4`.

`make test OMP_NUM_THREADS=2 S2HC_DATA_ROOT=/tmp/d` and `make test OMP_NUM_THRADS=2`.
Files, not keys: `model.pt`, `runs/x.h5`, `ckpt.h5`, `model.safetensors`, `rain.log`,
`np.zeros`, `re.sub`, `mode.x`, `runs.csv`, `date.now`; a misspelled section: `trian.steps`, and `residaul.n_streams`.
```yaml
base: tiny.yaml
slurm: {partition: gpu, tmie: "04:00:00",
        extra: ["--account=lab"], setpu: ["module load cuda"]}
sweep:
  train.seed: [1, 2]
override:
  - when: {residual.method: rc}
    sett: {residual.n_streams: 1}
  - {when: {train.seed: 2}, set: {train.lr: 1e-3}}
lanuch: "mpirun -np 4"
```
```yaml
sweep: {train.seed: [1, 2]}
slurm:
  partition: gpu
  gpu: 1
```
```yaml
trian:
  steps: 5
```
EOF
# a grid file's and a makefile's usage comments, checked as code
Y=$TMP/g.yaml M=$TMP/p.mk
cat >"$Y" <<'EOF'
# g.yaml: a planted grid
#   identity     fixed H_res = I
#   s2hc expm    the core through the matrix exponential
#
#   s2hc grid g.yaml -j 2
#   s2hc trian g.yaml
#   s2hc report runs/g -o out/g --bogus       # a row per method
# A span over a comment's line break, `s2hc train
# x.yaml --extnd`, is one span; s2hc trian in prose is not read.
sweep: {train.seed: [1, 2]}   # s2hc trian
# a table of names: an s2hc row is a command where its word misspells one or the row
# goes on as a command line
#   rc                              the plain residual
#   s2hc exact                      s2hc initialised at H_res = I exactly
#   s2hc fold runs/g --step final   a command s2hc does not have
#   s2hc evl                        a command misspelled
EOF
cat >"$M" <<'EOF'
# p.mk: planted
#   make tset                         the description
#   make bench BENCH_ARGS=--quick     the short version
#   make test OMP_NUM_THREADS=2       fewer threads
#   make bench-frame FRAME_ARGS="--methods s2hc --bf61"   one method
#
#   CUDA_SO     build/cuda/libs2hc_cuda.so
#                                     (a continuation: make tset)
#
#   NAME_X      a table of names
#   make tsett                        a make line in it is a command all the same
EOF
# one run for both (the --help calls are most of its time)
"${CHECK[@]}" README.md docs/*.md experiments/*.yaml mk/*.mk Makefile "$D" "$Y" "$M" >"$TMP/out" 2>&1; st=$?
if grep -q '^doc_commands: [0-9]* mismatches' "$TMP/out" && ! grep -Ev "^($D|$Y|$M):|^doc_commands: " "$TMP/out" | grep -v "^$PLANTED_HELP\$" | grep -v "^$PLANTED_HELP2" | grep -q .; then
  ok "the docs' command lines match the program"
else
  fail "the docs' command lines (exit $st):"; grep -Ev "^($D|$Y|$M):" "$TMP/out" | grep -v "^$PLANTED_HELP\$" | grep -v "^$PLANTED_HELP2" | sed 's/^/    /' >&2
fi
[ "$st" = 1 ] && ok "planted mistakes: exit 1" || fail "planted mistakes: exit $st"
for want in "doc.md:3: s2hc train: no option --extnd" \
            "doc.md:4: s2hc trian: no such command" \
            "doc.md:5: s2hc data prepar: no such command" \
            "doc.md:6: --set 'train.lrr' is no config key" \
            "doc.md:7: make tset: no such target" \
            "doc.md:7: make PRESTE=: no such variable" \
            "doc.md:8: make FRAME_ARGS=: no option --bf61 (frame_bench --help)" \
            "doc.md:9: make --bf16: no option --bf16 of make" \
            "doc.md:10: make TESTS=: no test nope_cli.sh" \
            "doc.md:11: key 'residual.methd' is no config key" \
            "doc.md:11: \`--method-compar\`: --method-compar is no s2hc command's option" \
            "doc.md:11: s2hc inspect: no option --layr" \
            "doc.md:15: key 'model.n_hed' is no config key" \
            "doc.md:17: key 'train.sed' is no config key" \
            "doc.md:31: s2hc eval: no option --bathces" \
            "doc.md:34: s2hc sample: no option --tokns" \
            "doc.md:38: s2hc train: no option --bogus-opt" \
            "doc.md:40: s2hc train: --set steps: no config key" \
            "doc.md:41: s2hc help trian: no such command" \
            "doc.md:46: s2hc inspect: no option --layrs" \
            "doc.md:49: key 'train.stpes' is no config key" \
            "doc.md:53: s2hc train: no option --extnd2" \
            "doc.md:58: s2hc sample: no option --tokns2" \
            "doc.md:59: s2hc trian: no such command" \
            "doc.md:59: s2hc evl: no such command" \
            "doc.md:62: make OMP_NUM_THRADS=: no such variable" \
            "doc.md:64: key 'trian.steps': no config section 'trian' (did you mean 'train.steps'?" \
            "doc.md:64: key 'residaul.n_streams': no config section 'residaul'" \
            "doc.md:67: slurm: 'tmie' is no key of a grid's slurm:" \
            "doc.md:68: slurm: 'setpu' is no key of a grid's slurm:" \
            "doc.md:73: override: 'sett' is no key of a grid's override:" \
            "doc.md:75: 'lanuch:' is no grid file's key" \
            "doc.md:81: slurm: 'gpu' is no key of a grid's slurm:" \
            "doc.md:84: 'trian:' is no config section (did you mean 'train'?" \
            "g.yaml:6: s2hc trian: no such command" \
            "g.yaml:7: s2hc report: no option --bogus" \
            "g.yaml:8: s2hc train: no option --extnd" \
            "g.yaml:15: s2hc fold: no such command" \
            "g.yaml:16: s2hc evl: no such command" \
            "p.mk:2: make tset: no such target" \
            "p.mk:5: make FRAME_ARGS=: no option --bf61 (frame_bench --help)" \
            "p.mk:11: make tsett: no such target"; do
  grep -qF -- "$want" "$TMP/out" && ok "planted: $want" || fail "planted: no '$want' in: $(cat "$TMP/out")"
done
grep -q "^$PLANTED_HELP\$" "$TMP/out" && ok "planted: a --help example's option that only the example names" \
  || fail "planted: no '$PLANTED_HELP' in: $(cat "$TMP/out")"
grep -q "^$PLANTED_HELP2" "$TMP/out" && ok "planted: a --help example's misspelled command" \
  || fail "planted: no '$PLANTED_HELP2' in: $(cat "$TMP/out")"
n=$(grep -Ec "^($D|$Y|$M):[0-9]*: " "$TMP/out")
[ "$n" = 42 ] && ok "nothing else is taken for a mistake" || fail "$n mismatches, wanted 42: $(cat "$TMP/out")"
finish docs_cli
