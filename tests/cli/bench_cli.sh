#!/usr/bin/env bash
# `s2hc bench` from the shell: bad options refused up front, and the smallest real run
# (tiny preset, one round of one step, no sweep, no probes) writes its CSV files with
# every method, rc's own ratio exactly 1, a breakdown per method and the frame floor;
# --methods narrows the table and the sweep to the listed methods, rc kept; --proj-bf16
# puts the projection in bf16 and says so in the CSV (or is refused by name).
# Then tools/frame_bench (make bench-frame): options checked, one row per method with
# every column a positive number, and the cold regions no cheaper than their floor;
# --bf16 likewise.
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh
expect_status 0 "bench --help" -- "$S2HC" bench --help
expect_out "example" "bench --help shows an example"
expect_status 2 "an unknown preset is refused" -- "$S2HC" bench --preset huge
expect_out "--preset must be tiny or small" "the message names the option"
for bad in "--rounds 0" "--steps x" "--threads -1" "--probe-steps 2.5"; do
  expect_status 2 "bench $bad is refused" -- "$S2HC" bench $bad
  expect_out "${bad%% *}: expected a whole number >= 1" "bench $bad: the message names the option"
done
expect_status 2 "bench --mem-limit 0 is refused" -- "$S2HC" bench --mem-limit 0
# an option is not another option's value: --csv --quick wrote a folder named --quick
(cd "$TMP" && "$S2HC" bench --no-methods --no-streams --no-probes --csv --quick) >"$TMP/out" 2>&1; st=$?
[ "$st" = 2 ] && [ ! -e "$TMP/--quick" ] && grep -q "'--csv' (its value is missing or is an option)" "$TMP/out" \
  && ok "--csv --quick is refused" || fail "--csv --quick: exit $st: $(tail -2 "$TMP/out")"
# a --csv folder past 1024 bytes is refused by its length before anything runs: its files'
# paths were cut at 1199 bytes: other files (named by a piece of the folder's name)
LONGC=$TMP/$(printf 'c%.0s' $(seq 1 250))/$(printf 'd%.0s' $(seq 1 250))/$(printf 'e%.0s' $(seq 1 250))/$(printf 'f%.0s' $(seq 1 250))/$(printf 'g%.0s' $(seq 1 250))
"$S2HC" bench --quick --no-methods --no-streams --no-probes --csv "$LONGC" >"$TMP/out" 2>&1; st=$?
[ "$st" = 2 ] && [ ! -e "$TMP/$(printf 'c%.0s' $(seq 1 250))" ] && grep -q "bench: --csv '.*': a path of [0-9]* bytes, longer than 1024" "$TMP/out" \
  && ok "--csv past 1024 bytes is refused" || fail "long --csv: exit $st: $(tail -2 "$TMP/out")"
expect_status 2 "bench --methods '' is refused" -- "$S2HC" bench --methods ""
# --quick leaves out the probes section, unless --probe-steps asks for it
(cd "$TMP" && "$S2HC" bench --quick --preset tiny --no-methods --no-streams --probe-steps 2 --csv none) >"$TMP/out" 2>&1 \
  && grep -q "^== probes: .*probe.every=2 vs 0" "$TMP/out" && ok "--quick --probe-steps runs the probes section" \
  || fail "--quick --probe-steps: $(tail -n 3 "$TMP/out")"
expect_status 0 "the smallest bench runs" -- "$S2HC" bench --quick --preset tiny --no-streams --no-probes \
  --rounds 1 --steps 1 --csv "$TMP/csv"
expect_out "thread: [0-9.]+ ms CPU per step = [0-9.]+% of rc's step" "the frame floor is printed"
expect_out "^  \([0-9]+ MB read and written a step: [0-9.]+ GB/s\)$" "with the bytes its passes move and their rate"
# the header names the CPU and the vectors the kernels were built for: with -march=native
# (the default build) the widest this CPU has, one register each; on aarch64 pairs of
# NEON's 32 registers (cpu_math.h); built for another target (make OPT='-O2
# -march=x86-64'), those `version -v` names
arch=$(s2hc_arch)
"$S2HC" version -v >"$TMP/version" 2>&1
if ! grep -q '^  built with .*-march=native' "$TMP/version"; then
  want=$(sed -n 's/^  kernels  *//p' "$TMP/version" | sed 's/[()]/\\&/g')
  case $want in *-lane*) ok "version -v names the kernels' vectors" ;; *) fail "version -v: no kernels line" ;; esac
elif cpu_flag avx512f; then want="16-lane float vectors \(AVX-512, 32 registers\)"
elif cpu_flag avx2; then want="8-lane float vectors \(AVX2, 16 registers\)"
elif [ "$arch" = aarch64 ]; then want="8-lane float vectors \(NEON, 16 pairs of 128-bit registers\)"
else want="8-lane float vectors"; fi
expect_out "^cpu: .+; kernels built for $want" "the header names the CPU and the kernels' vectors"
# every thread flushes subnormal results to zero (on x86-64): a high learning rate's
# subnormal attention probabilities and gradients made a step up to 7 times as long
if [ "$arch" = x86_64 ]; then
  grep -q '^  denormals         flushed to zero in every thread' "$TMP/version" \
    && ok "version -v: denormals flushed to zero in every thread" || fail "version -v: $(grep denormals "$TMP/version")"
fi
# version --help names the lines -v adds (the flush and the bf16 products too)
"$S2HC" version --help > "$TMP/vhelp" 2>&1
grep -q "subnormal results are flushed" "$TMP/vhelp" && grep -q "the bf16 products" "$TMP/vhelp" \
  && ok "version --help: the flush and the bf16 products" || fail "version --help: $(cat "$TMP/vhelp")"
# with identity among the methods: every other method (not rc, not identity) over identity
got=$(grep -A1 '^  x identity wall' "$TMP/out" | tail -n 1 | awk '{ for (i = 1; i < NF; i += 2) if ($(i + 1) + 0 > 0) printf "%s ", $i }')
[ "$got" = "hc mhc mhc_lite kromhc orthogonal s2hc s2hc_rot " ] && ok "x identity: the other methods, each > 0" \
  || fail "x identity line: '$got'"
for f in machine gemm bench breakdown; do
  if [ -s "$TMP/csv/$f.csv" ]; then ok "$f.csv written"; else fail "$f.csv missing or empty"; fi
done
# machine.csv: the FMA and read rates on one thread and on all, each a positive number, the
# read's buffer at least 256 MB; the same lines printed
awk -F, -v nt="$(nproc)" 'NR == 1 { if ($0 != "what,threads,rate,unit,buffer_mb,load1") bad = 1; next }
         { key[$1 "," $2] = 1; if (!($3 > 0)) bad = 1
           if ($1 == "fma" && $4 != "GFLOP/s") bad = 1
           if ($1 == "read" && ($4 != "GB/s" || $5 < 256)) bad = 1 }
         END { exit bad || !key["fma,1"] || !key["read,1"] || (nt > 1 && (!key["fma," nt] || !key["read," nt])) }' \
  "$TMP/csv/machine.csv" && ok "machine.csv: fma and read, 1 thread and all, positive" \
  || fail "machine.csv: $(cat "$TMP/csv/machine.csv" | tr '\n' ' ')"
expect_out "^  FMA, the kernels' vectors, in registers +1 thread +[0-9.]+ .*GFLOP/s$" "the FMA rate is printed"
expect_out "^  reading [0-9]+ MB.* +1 thread +[0-9.]+ .*GB/s$" "the read rate is printed"
methods="rc identity hc mhc mhc_lite kromhc orthogonal s2hc s2hc_rot"
for m in $methods; do
  if grep -q "^tiny,$m,"  "$TMP/csv/bench.csv"; then ok "bench.csv has $m"; else fail "bench.csv lacks $m"; fi
  if grep -q "^tiny,$m,[0-9]*,total," "$TMP/csv/breakdown.csv"; then ok "breakdown.csv has $m's total"
  else fail "breakdown.csv lacks $m's total"; fi
done
# rc's ratio to itself is exactly 1; every other method's is a positive number
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
         $2 == "rc" && $(c["overhead_vs_rc"]) + 0 != 1 { bad = 1 }
         $2 != "rc" && !($(c["overhead_vs_rc"]) + 0 > 0) { bad = 1 }
         END { exit bad }' "$TMP/csv/bench.csv" && ok "overhead_vs_rc: rc 1, the others > 0" || fail "overhead_vs_rc column"
# proj_precision: fp32 for every method by default
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; if (!c["proj_precision"]) bad = 1; next }
         $(c["proj_precision"]) != "fp32" { bad = 1 }
         END { exit bad }' "$TMP/csv/bench.csv" && ok "proj_precision: fp32 by default" || fail "proj_precision column"
# the floor: one row, a fraction of rc's step strictly between 0 and 1
awk -F, '$2 == "frame_floor" { n++; if (!($7 > 0 && $7 < 1) || !($6 > 0) || $8 != "rc_step_cpu" || !($11 > 0) || !($12 > 0)) bad = 1 }
         $4 == "total" && ($9 != "ops" || $10 != "fp32") { bad = 1 }
         END { exit !(n == 1 && !bad) }' "$TMP/csv/breakdown.csv" && ok "one frame_floor row, 0 < fraction < 1" \
  || fail "frame_floor row in breakdown.csv"
# --no-methods (the GEMM limit alone here) leaves the methods' files of an earlier run in
# the same folder as they are, and does not claim to have written them
before=$(cat "$TMP/csv/bench.csv" "$TMP/csv/breakdown.csv" | md5sum)
expect_status 0 "bench --no-methods --no-streams runs" -- "$S2HC" bench --quick --preset tiny --no-methods --no-streams \
  --csv "$TMP/csv"
[ "$(cat "$TMP/csv/bench.csv" "$TMP/csv/breakdown.csv" | md5sum)" = "$before" ] \
  && ok "--no-methods keeps bench.csv and breakdown.csv" || fail "--no-methods rewrote bench.csv/breakdown.csv: $(wc -l < "$TMP/csv/bench.csv") lines"
expect_out "^CSV written to .*/ \(machine, gemm\)$" "--no-methods: the CSV line names machine and gemm alone"
# a CSV write that fails (past `ulimit -f`): said, exit 1, the earlier file whole
before=$(md5sum < "$TMP/csv/gemm.csv")
expect_status 1 "bench --csv past the file-size limit" -- bash -c 'ulimit -f 1; exec "$0" bench --quick --preset tiny --no-methods --no-streams --no-probes --threads 1 --csv "$1" >/dev/null' \
  "$S2HC" "$TMP/csv"
expect_out "cannot write .*gemm.csv: File too large" "names the file and says why"
[ "$(md5sum < "$TMP/csv/gemm.csv")" = "$before" ] && ! ls "$TMP/csv" | grep -q '\.tmp$' \
  && ok "gemm.csv as it was, no .tmp left" || fail "gemm.csv changed or a .tmp was left: $(ls "$TMP/csv")"
# Ctrl-C while the probes section trains (on a small corpus standing in for docs): the
# bench stops, exit 130, the earlier probes.csv whole, no .tmp left, the section's folder
# removed. The signal once its first training run has made its folder (under TMPDIR): the
# section's handler is in place then ("== probes:" comes before it, and a signal a fixed
# time after that line could still end the bench as in any other section)
make_synth_data "$TMP/data"
mkdir -p "$TMP/bp/data/docs" "$TMP/bp/csv" "$TMP/bp/tmp" && cp "$TMP/data/synth/"*.bin "$TMP/bp/data/docs/"
echo "an earlier run's" > "$TMP/bp/csv/probes.csv"
set -m # the bench in a process group of its own, signalled as a terminal's Ctrl-C signals one
fresh "$TMP/out"
(cd "$TMP/bp" && exec env TMPDIR="$TMP/bp/tmp" "$S2HC" bench --quick --preset tiny --no-methods --no-streams \
  --probe-steps 100 --csv csv) >"$TMP/out" 2>&1 &
pid=$!
set +m
probes_training() { compgen -G "$TMP/bp/tmp/s2hc-bench.*/runs/*" >/dev/null; }
wait_for 300 probes_training || fail "the probes section's first run did not start: $(tail -n 3 "$TMP/out")"
kill -INT -- -"$pid" 2>/dev/null; wait "$pid"; st=$?
[ "$st" = 130 ] && grep -q "interrupted in the probes section" "$TMP/out" && ok "Ctrl-C in the probes section: exit 130" \
  || fail "Ctrl-C in the probes section: exit $st: $(tail -n 3 "$TMP/out")"
[ -z "$(ls -A "$TMP/bp/tmp")" ] && ok "Ctrl-C in the probes section: its folder removed" \
  || fail "Ctrl-C in the probes section left: $(ls -A "$TMP/bp/tmp")"
[ "$(cat "$TMP/bp/csv/probes.csv")" = "an earlier run's" ] && ! ls "$TMP/bp/csv" | grep -q '\.tmp$' \
  && ok "Ctrl-C in the probes section: probes.csv as it was, no .tmp left" \
  || fail "Ctrl-C in the probes section rewrote probes.csv: $(head -c 200 "$TMP/bp/csv/probes.csv")"
# two benches into one --csv folder: while one runs (held by the test hook at its probes
# section's first training run), a second exits 1 naming it, before it measures or
# writes anything (they replaced each other's .tmp files, and timed each other's load)
set -m
fresh "$TMP/first.out"
(cd "$TMP/bp" && exec env S2HC_TEST_BENCH_PAUSE_RUN=1 "$S2HC" bench --quick --preset tiny --no-methods --no-streams \
  --probe-steps 1 --csv csv) >"$TMP/first.out" 2>&1 &
pid=$!
set +m
wait_for 300 grep -q "training run 1 waits for a signal" "$TMP/first.out"
expect_status 1 "a second bench into the folder is refused" -- bash -c "cd '$TMP/bp' && exec '$S2HC' bench --quick --preset tiny --csv csv"
expect_out "csv is in use \(s2hc bench pid $pid on .* since " "its refusal names the first bench"
grep -q "== sgemm" "$TMP/out" && fail "the refused bench measured" || ok "the refused bench measured nothing"
kill -INT -- -"$pid" 2>/dev/null; wait "$pid"
# a signal at the moment a training run of the probes section starts (the test hook
# S2HC_TEST_BENCH_PAUSE_RUN=K holds run K there): before the first, whose handler is not
# yet installed (the bench ended at once and left the section's folder), and between two,
# which then started by clearing the signal and ran on (the whole section ran, exit 0).
# Each: exit 130, the section's folder in $TMPDIR removed, probes.csv as it was, no .tmp;
# a Ctrl-C, a SIGHUP (the terminal closed), and a second Ctrl-C (stop at once: it ended
# the bench by the signal, its folder and probes.csv.tmp left), once the first one's
# message is out (the hook then holds the run for it: S2HC_TEST_BENCH_PAUSE_AGAIN; 1 s
# was too short for a loaded machine's poll, whose second Ctrl-C then met the run's own
# handler as a first)
for case in "1 INT" "2 INT" "3 HUP" "2 INT INT"; do
  run=${case%% *} sig=${case#* } sig=${sig%% *} again=${case#* * }; [ "$again" = "$case" ] && again=
  mkdir -p "$TMP/bq$run$again/tmp"
  set -m
  fresh "$TMP/out"
  (cd "$TMP/bp" && exec env TMPDIR="$TMP/bq$run$again/tmp" S2HC_TEST_BENCH_PAUSE_RUN=$run \
    S2HC_TEST_BENCH_PAUSE_AGAIN=$again "$S2HC" bench --quick --preset tiny --no-methods --no-streams --probe-steps 1 \
    --csv csv) >"$TMP/out" 2>&1 &
  pid=$!
  set +m
  wait_for 300 grep -q "training run $run waits for a signal" "$TMP/out"
  kill -"$sig" -- -"$pid" 2>/dev/null
  if [ -n "$again" ]; then
    wait_for 60 grep -q "again to stop at once" "$TMP/out"
    kill -"$again" -- -"$pid" 2>/dev/null
    what="a second SIG$again"; want="bench: interrupted"
  else what="SIG$sig"; want="interrupted in the probes section"; fi
  wait "$pid"; st=$?
  [ "$st" = 130 ] && grep -q "$want" "$TMP/out" && ok "$what as the probes section's run $run starts: exit 130" \
    || fail "$what as the probes section's run $run starts: exit $st: $(tail -n 3 "$TMP/out")"
  [ -z "$(ls -A "$TMP/bq$run$again/tmp")" ] && [ "$(cat "$TMP/bp/csv/probes.csv")" = "an earlier run's" ] \
    && ! ls "$TMP/bp/csv" | grep -q '\.tmp$' && ok "$what as run $run starts: the section's folder removed, probes.csv as it was" \
    || fail "$what as run $run starts left: $(ls "$TMP/bq$run$again/tmp" "$TMP/bp/csv" | tr '\n' ' ')"
  rm -f "$TMP/bp/csv/"*.tmp; echo "an earlier run's" > "$TMP/bp/csv/probes.csv"
done
# the probes section's runs go under TMPDIR (they went to /tmp whatever it said): one that
# does not exist is named with the reason; under one with a quote, a ' #' and a ': ' the
# runs train there and nothing is left (a shell's rm -rf '...' broke on the quote)
(cd "$TMP/bp" && TMPDIR="$TMP/no such" "$S2HC" bench --quick --preset tiny --no-methods --no-streams --probe-steps 2 \
  --csv none) >"$TMP/out" 2>&1
grep -q "skipped: cannot make a temporary folder $TMP/no such/s2hc-bench\..*: No such file or directory" "$TMP/out" \
  && ok "bench: a TMPDIR that does not exist is named" || fail "bench under a missing TMPDIR: $(grep -A2 '^== probes' "$TMP/out")"
mkdir -p "$TMP/it's #t: mp"
(cd "$TMP/bp" && TMPDIR="$TMP/it's #t: mp" "$S2HC" bench --quick --preset tiny --no-methods --no-streams --probe-steps 2 \
  --csv none) >"$TMP/out" 2>&1
grep -q "^  probes on " "$TMP/out" && [ -z "$(ls -A "$TMP/it's #t: mp")" ] \
  && ok "bench: the probes' runs under a TMPDIR with a quote, removed after" \
  || fail "bench under TMPDIR=\"it's #t: mp\": $(grep -A2 '^== probes' "$TMP/out"), left: $(ls -A "$TMP/it's #t: mp")"
# SIGTERM (or a Ctrl-C) in another section: exit 130 at once, the earlier CSV files whole,
# no .tmp left (the methods section's bench.csv and breakdown.csv were being written)
mkdir -p "$TMP/bt/csv"; echo "an earlier run's" > "$TMP/bt/csv/bench.csv"
fresh "$TMP/out"
"$S2HC" bench --quick --preset tiny --no-streams --no-probes --rounds 50 --threads 1 --csv "$TMP/bt/csv" >"$TMP/out" 2>&1 &
pid=$!
wait_for 300 grep -q "^== sgemm" "$TMP/out"
kill -TERM "$pid" 2>/dev/null; wait "$pid"; st=$?
[ "$st" = 130 ] && grep -q "bench: interrupted" "$TMP/out" && ok "SIGTERM: exit 130" \
  || fail "SIGTERM in the bench: exit $st: $(tail -n 2 "$TMP/out")"
[ "$(cat "$TMP/bt/csv/bench.csv")" = "an earlier run's" ] && ! ls "$TMP/bt/csv" | grep -q '\.tmp$' \
  && ok "SIGTERM: bench.csv as it was, no .tmp left" || fail "SIGTERM left: $(ls "$TMP/bt/csv")"
# into a pipe each line goes out as it is printed: the header well before the end (the
# machine and GEMM sections take seconds), not all of it at exit
gap=$("$S2HC" bench --quick --preset tiny --no-methods --no-streams --no-probes --threads 1 --csv none 2>/dev/null | {
  IFS= read -r first; t1=$(date +%s.%N); cat >/dev/null; awk -v a="$t1" -v b="$(date +%s.%N)" 'BEGIN { print b - a }'; })
awk -v g="$gap" 'BEGIN { exit !(g > 0.3) }' && ok "bench into a pipe: the header comes at once" \
  || fail "bench into a pipe: the header came only $gap s before the end"
# the methods table comes after its last round: meanwhile a progress line, one unit per
# method and round (rc and s2hc, 2 rounds: 4), a line of its own into a log
expect_status 0 "bench with a progress line" -- env S2HC_TEST_PROGRESS_AFTER=0 "$S2HC" bench --quick --preset tiny \
  --no-streams --no-probes --methods s2hc --rounds 2 --steps 1 --csv none
expect_out "^  tiny preset: [1-4]/4 method rounds \| [0-9]+s \| ETA [0-9]+s$" "the methods section shows its progress"
# --threads N: the GEMM section's header gives the count OpenBLAS runs with, N
expect_status 0 "bench --threads 1" -- "$S2HC" bench --quick --preset tiny --no-methods --no-streams --threads 1 --csv none
expect_out "^== sgemm through OpenBLAS \(core [^,]*, 1 thread\) ==$" "--threads 1: the GEMM header says 1 thread"
expect_out "^  FMA, the kernels' vectors, in registers +1 thread +[0-9.]+ GFLOP/s$" "--threads 1: the FMA rate on 1 thread alone"
# --methods: a subset, rc always first, a repeated name once; the sweep takes the listed
expect_status 2 "bench --methods with an unknown name is refused" -- "$S2HC" bench --methods s2hc,foo
expect_out "--methods: unknown method 'foo' \(methods: rc, identity" "the message names it and the methods there are"
expect_status 0 "bench --methods s2hc,mhc,s2hc runs" -- "$S2HC" bench --quick --preset tiny --no-probes \
  --rounds 1 --steps 1 --methods s2hc,mhc,s2hc --csv "$TMP/csv2"
grep -q 'x identity' "$TMP/out" && fail "x identity printed without identity" || ok "no x identity line without identity"
got=$(awk -F, 'NR > 1 { printf "%s ", $2 }' "$TMP/csv2/bench.csv")
[ "$got" = "rc s2hc mhc " ] && ok "bench.csv: rc, s2hc, mhc, once each" || fail "bench.csv methods: '$got'"
got=$(awk -F, 'NR > 1 { printf "%s%s ", $2, $3 }' "$TMP/csv2/streams.csv")
[ "$got" = "s2hc2 s2hc3 s2hc4 s2hc5 s2hc6 s2hc7 s2hc8 mhc2 mhc3 mhc4 mhc5 mhc6 mhc7 mhc8 " ] &&
  ok "streams.csv: the listed methods at n = 2..8" || fail "streams.csv rows: '$got'"
# a method name past the sweep's 9 columns (orthogonal's 10 letters): the method column as
# wide as it, so that every row's n ends where the header's does (orthogonal's rows had
# moved one column right); the GEMM table's labels likewise (small's "(N=2048)" had moved
# its numbers two columns right)
expect_status 0 "bench --methods orthogonal,mhc, the sweep alone" -- "$S2HC" bench --quick --preset tiny --no-methods \
  --no-probes --methods orthogonal,mhc --csv none
got=$(sed -n '/^== streams/,/^  peak MB/p' "$TMP/out" | grep -E '^  (method|orthogonal|mhc) ' \
  | awk '{ print index($0, " " $2 " ") + length($2) }' | sort -u | tr '\n' ' ')
[ "$got" = "15 " ] && ok "streams: every row's n ends at column 15" || fail "streams: n ends at '$got': $(grep -A3 '^== streams' "$TMP/out")"
got=$(sed -n '/^== sgemm/,/^$/p' "$TMP/out" | awk '/^  shape / { h = length($0); next }
  /GFLOP\/s$/ { print (index($0, " GFLOP/s") - 1 == h) ? "same" : "moved" }' | sort -u | tr '\n' ' ')
[ "$got" = "same " ] && ok "sgemm: every row's numbers end under the header's" || fail "sgemm table: '$got': $(grep -A4 '^== sgemm' "$TMP/out")"
# peak memory per configuration: mhc at n = 2, after s2hc at n = 8, peaks below it (a
# process-wide high-water mark would only grow down the table). Not in the sanitizer
# build, whose allocator holds freed memory in quarantine.
if ! san_build; then
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
           $2 == "s2hc" && $3 == 8 { big = $(c["peak_rss_mb"]) }
           $2 == "mhc" && $3 == 2 { small = $(c["peak_rss_mb"]) }
           END { exit !(big > 0 && small > 0 && small < big) }' "$TMP/csv2/streams.csv" &&
    ok "streams.csv: each configuration's own peak memory" ||
    fail "streams.csv peak_rss_mb does not fall back after s2hc n=8"
fi
# --proj-bf16: the bf16 projection where the build has it (the column says so, rc has no
# projection), else a refusal that names what is missing
"$S2HC" bench --quick --preset tiny --no-probes --no-streams --rounds 1 --steps 1 --methods s2hc --proj-bf16 \
  --csv "$TMP/csv3" > "$TMP/out" 2>&1
st=$?
if [ $st = 0 ]; then
  got=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } { printf "%s:%s ", $2, $(c["proj_precision"]) }' \
        "$TMP/csv3/bench.csv")
  [ "$got" = "rc:fp32 s2hc:bf16 " ] && ok "bench --proj-bf16: s2hc's projection in bf16" || fail "--proj-bf16 rows: '$got'"
  grep -q "projection products: bf16" "$TMP/out" && ok "bench --proj-bf16 says so" || fail "no bf16 line"
  # which instructions: the line and the proj_products column agree (amx where usable)
  if grep -q "by AMX tiles" "$TMP/out"; then kind=amx; else kind=vdpbf16ps; fi
  got=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } { printf "%s:%s ", $2, $(c["proj_products"]) }' \
        "$TMP/csv3/bench.csv")
  [ "$got" = "rc:fp32 s2hc:$kind " ] && ok "bench.csv's proj_products: $kind, as the console said" ||
    fail "proj_products rows: '$got' (console: $kind)"
  # version -v names the same instructions; S2HC_AMX=0 turns the tiles off
  if [ $kind = amx ]; then want="AMX tiles"; else want="vdpbf16ps"; fi
  grep -q "^  bf16 products     $want" "$TMP/version" && ok "version -v: bf16 products by $want, as the bench took them" \
    || fail "version -v: '$(grep 'bf16 products' "$TMP/version")', the bench took $kind"
  if [ $kind = amx ]; then
    S2HC_AMX=0 "$S2HC" version -v 2>&1 | grep -q '^  bf16 products     vdpbf16ps (S2HC_AMX=0' \
      && ok "version -v: S2HC_AMX=0 says vdpbf16ps" || fail "version -v with S2HC_AMX=0: $(S2HC_AMX=0 "$S2HC" version -v 2>&1 | grep 'bf16 products')"
    # a projection of more than 96 outputs a norm row (mhc_lite from n = 5) takes vdpbf16ps
    grep -q "^  bf16 products     AMX tiles .*vdpbf16ps where a norm row has more than 96 outputs, mhc_lite from n = 5" \
      "$TMP/version" && ok "version -v: AMX tiles, and where not" || fail "version -v: $(grep 'bf16 products' "$TMP/version")"
  elif ! cpu_flag amx_tile; then
    # no AMX on this CPU: S2HC_AMX=0 turns nothing off, and the line does not say it does
    S2HC_AMX=0 "$S2HC" version -v 2>&1 | grep -q '^  bf16 products     vdpbf16ps (no AMX tiles' \
      && ok "version -v with S2HC_AMX=0 and no AMX: no tiles to turn off" \
      || fail "version -v with S2HC_AMX=0: $(S2HC_AMX=0 "$S2HC" version -v 2>&1 | grep 'bf16 products')"
  fi
elif [ $st = 2 ] && grep -q "needs AVX512_BF16" "$TMP/out"; then
  ok "bench --proj-bf16 refused by name (no AVX512_BF16 in this build)"
  grep -q "^  bf16 products     none: this build has no AVX512_BF16" "$TMP/version" && ok "version -v says there are none" \
    || fail "version -v: '$(grep 'bf16 products' "$TMP/version")'"
else
  fail "bench --proj-bf16: exit $st"
fi
# --csv naming a file: refused before anything runs, not "CSV written"
: > "$TMP/afile"
expect_status 1 "bench --csv naming a file" -- "$S2HC" bench --quick --preset tiny --no-probes --no-streams \
  --rounds 1 --steps 1 --methods s2hc --csv "$TMP/afile"
expect_out "--csv .*afile is not a directory" "says --csv is not a directory"
grep -q "CSV written" "$TMP/out" && fail "it still says the CSV was written" || ok "and does not say it wrote any"
# --stream-bf16: every frame method's streams in bf16 (the column says so; rc has none),
# fp32 by default
expect_status 0 "bench --stream-bf16 runs" -- "$S2HC" bench --quick --preset tiny --no-probes --no-streams \
  --rounds 1 --steps 1 --methods s2hc --stream-bf16 --csv "$TMP/csv4"
expect_out "streams: stored in bf16" "bench --stream-bf16 says so"
expect_out "frame floor: its passes over the n = 4 streams \\(bf16\\) alone" "its floor is the bf16 streams' passes"
got=$(awk -F, 'FNR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } { printf "%s:%s ", $2, $(c["stream_precision"]) }' \
      "$TMP/csv4/bench.csv" "$TMP/csv2/bench.csv")
[ "$got" = "rc:fp32 s2hc:bf16 rc:fp32 s2hc:fp32 mhc:fp32 " ] && ok "stream_precision: bf16 with --stream-bf16, else fp32" ||
  fail "stream_precision rows: '$got'"
FB=${BUILD:-build}/tools/frame_bench
expect_status 0 "frame_bench --help" -- "$FB" --help
expect_out "ns per token" "frame_bench --help says its unit"
for bad in "--n 9" "--n 0" "--reps x" "--bogus"; do
  expect_status 2 "frame_bench $bad is refused" -- "$FB" $bad
done
# a bad preset or method name is refused before anything is timed (no header, no row)
for bad in "--preset huge" "--methods s2hc,bogus" "--methods ,"; do
  expect_status 2 "frame_bench $bad is refused up front" -- timeout 20 "$FB" $bad --reps 1
  grep -Eq "^(method|s2hc) " "$TMP/out" && fail "frame_bench $bad: timed something first" || ok "frame_bench $bad: nothing timed"
done
expect_status 1 "frame_bench refuses rc (no frame)" -- "$FB" --preset tiny --methods rc --reps 1
expect_out "rc has no hyper-connection frame" "the message names the method"
# best of 3: one timing of a tiny preset's pass can take a preemption on a busy host
# (a CI run with load 4 once read a floor over twice its region)
expect_status 0 "frame_bench runs on the tiny preset" -- "$FB" --preset tiny --methods identity,mhc,s2hc --reps 3
for m in identity mhc s2hc; do
  # 19 numbers after the name (the "|" separators are fields too): all > 0 except the two
  # "over floor" columns, which may be anything; the cold regions at least the floor's
  # pass minus 50 % (timer noise on a tiny preset)
  awk -v m="$m" '$1 == m { n = 0; for (i = 2; i <= NF; i++) if ($i != "|") { v[++n] = $i + 0 }
                  if (n != 19) exit 1
                  for (i = 1; i <= 19; i++) if (i != 9 && i != 10 && !(v[i] > 0)) exit 1
                  if (v[4] < 0.5 * v[2] || v[5] < 0.5 * v[3]) exit 1; found = 1 }
                END { exit !found }' "$TMP/out" && ok "frame_bench row for $m" ||
    fail "frame_bench row for $m: $(grep -E "^$m " "$TMP/out")"
done
# s2hc, identity and hc: with AMX, dX's term by tiles, by the fp32 loop on rounded
# operands over one norm row, and over a row per stream
"$FB" --preset tiny --methods s2hc,identity,hc --reps 1 --bf16 > "$TMP/out" 2>&1
st=$?
if [ $st = 0 ] && grep -q "products in bf16" "$TMP/out" && grep -q "^s2hc " "$TMP/out" &&
   grep -q "^identity " "$TMP/out" && grep -q "^hc " "$TMP/out"; then
  ok "frame_bench --bf16 times the bf16 products"
elif [ $st = 1 ] && grep -q "AVX512_BF16" "$TMP/out"; then
  ok "frame_bench --bf16 refused by name (no AVX512_BF16 in this build)"
else
  fail "frame_bench --bf16: exit $st"
fi
expect_status 0 "frame_bench --stream-bf16 runs" -- "$FB" --preset tiny --methods identity,s2hc --reps 1 --stream-bf16
expect_out "cold regions with bf16 streams" "frame_bench --stream-bf16 says so"
grep -q "^s2hc " "$TMP/out" && ok "frame_bench --stream-bf16 times s2hc" || fail "frame_bench --stream-bf16: no s2hc row"
LB=${BUILD:-build}/tools/layout_bench
expect_status 0 "layout_bench --help" -- "$LB" --help
expect_out "ns per token and sublayer" "layout_bench --help says its unit"
for bad in "--C 12" "--n 0" "--reps x" "--tokens" "--bogus"; do
  expect_status 2 "layout_bench $bad is refused" -- "$LB" $bad
done
expect_status 0 "layout_bench runs" -- "$LB" --tokens 64 --sublayers 2 --reps 1
# four rows (two layouts, prefetch or not), three positive times each
[ "$(awk '/^  (rows|blocked)/ && $(NF-2) > 0 && $(NF-1) > 0 && $NF > 0' "$TMP/out" | wc -l)" = 4 ] &&
  ok "layout_bench: four rows of three times" || fail "layout_bench rows: $(cat "$TMP/out")"
finish bench_cli
