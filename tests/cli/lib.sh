# lib.sh: helpers for the shell tests of the s2hc command. Source it; call ok/expect_*;
# end with `finish NAME`, which prints "NAME: N passed, N failed".
# SIGHUP, SIGINT and SIGTERM at their defaults: a suite started as a script's background
# job (`make test &`) or under nohup inherits SIGINT or SIGHUP ignored, which bash cannot
# undo, and every job a test signals kept it so (s2hc keeps an ignored stop signal ignored:
# a Ctrl-C test's training evaluated on for minutes). The script then runs again with them
# reset (env --default-signal, coreutils 8.31 or later).
if [ -z "${S2HC_TEST_SIGNALS_RESET:-}" ] && [ -r /proc/$$/status ]; then
  _ign=$(sed -n 's/^SigIgn:[[:space:]]*//p' /proc/$$/status)
  if [ -n "$_ign" ] && [ $(( 0x$_ign & 0x4003 )) != 0 ] && env --default-signal=HUP true 2>/dev/null; then
    S2HC_TEST_SIGNALS_RESET=1 exec env --default-signal=HUP,INT,TERM bash "$PWD/tests/cli/$(basename "$0")" "$@"
  fi
fi
S2HC=${S2HC_BIN:-$PWD/bin/s2hc}
T_PASS=0; T_FAIL=0
# a folder of its own when run alone (make test gives S2HC_TEST_TMP and removes it), gone
# at the end unless S2HC_TEST_KEEP is set (to look at what a failing test left)
if [ -z "${S2HC_TEST_TMP:-}" ]; then
  _own_tmp=$(mktemp -d)
  [ -z "${S2HC_TEST_KEEP:-}" ] && trap 'rm -rf "$_own_tmp"' EXIT
fi
TMP=${S2HC_TEST_TMP:-$_own_tmp}/$(basename "$0" .sh)
rm -rf "$TMP"; mkdir -p "$TMP"
ok()   { T_PASS=$((T_PASS + 1)); [ -n "${T_VERBOSE:-}" ] && echo "ok $*" >&2; return 0; }
fail() { T_FAIL=$((T_FAIL + 1)); echo "  FAIL: $*" >&2; return 0; }
# expect_status WANT DESCRIPTION -- COMMAND...   (stdout+stderr saved in $TMP/out)
expect_status() {
  local want=$1 what=$2; shift 3
  "$@" >"$TMP/out" 2>&1; local got=$?
  if [ "$got" = "$want" ]; then ok "$what"; else fail "$what: exit $got, wanted $want"; sed 's/^/    /' "$TMP/out" | tail -n 8 >&2; fi
}
# expect_out PATTERN DESCRIPTION: the last command's output matches the extended regex
expect_out() {
  if grep -Eq -- "$1" "$TMP/out"; then ok "$2"; else fail "$2: output lacks /$1/"; sed 's/^/    /' "$TMP/out" | tail -n 8 >&2; fi
}
# fresh FILE...: empty each file now, before a background job whose output goes there starts:
# `cmd >FILE &` truncates FILE only once the job's shell runs, and a wait for a line in FILE
# meanwhile reads the previous command's lines (a signal then came before s2hc had its handler)
fresh() { local f; for f in "$@"; do : >"$f"; done; }
# wait_for SECONDS COMMAND...: run COMMAND every 0.1 s until it succeeds, for SECONDS at
# most; its status. A wait that succeeds ends at once, so the limit is a loaded machine's
# time (ten times a quiet one's and more), never a quiet one's.
wait_for() {
  local end=$((SECONDS + $1)); shift
  until "$@"; do [ "$SECONDS" -ge "$end" ] && return 1; sleep 0.1; done
}
finish() { echo "$1: $T_PASS passed, $T_FAIL failed"; [ "$T_FAIL" = 0 ]; }
# s2hc_arch: the architecture the s2hc binary was built for (x86_64, aarch64; `version -v`),
# which under an emulator (tests/run.sh's S2HC_EXEC) is not this machine's
s2hc_arch() { "$S2HC" version -v 2>/dev/null | sed -n 's/^  CPU  *\([^:]*\):.*/\1/p'; }
# cpu_flag FLAG: the CPU the binary runs on has this x86 feature (/proc/cpuinfo's flags:
# avx512f, avx2); never for another architecture's build
cpu_flag() { [ "$(s2hc_arch)" = x86_64 ] && grep -qw "$1" /proc/cpuinfo; }
# san_build: true in the sanitizer build (make test SAN=1), whose training steps run 2-3x
# slower and whose allocator keeps freed memory in quarantine
san_build() { case "${BUILD:-build}" in *-san) return 0;; esac; return 1; }
# A small corpus of English-like text as token shards, made by the test itself.
make_synth_data() {
  local dir=$1
  mkdir -p "$dir/synth"
  awk 'BEGIN{srand(7); split("the cat,a dog,my friend,the old man,every child",s,",");
        split("sees,likes,follows,finds,crosses",v,","); split("the house.,a red ball.,the road.,her garden.",o,",");
        for(i=0;i<6000;i++) printf "%s %s %s ", s[int(rand()*5)+1], v[int(rand()*5)+1], o[int(rand()*4)+1]}' > "$dir/synth/text"
  "$S2HC" data import "$dir/synth/text" --dir "$dir" --name synth >/dev/null
  # and another text, out of its domain (data.ood may not name the training corpus)
  mkdir -p "$dir/synth_ood"
  awk 'BEGIN{srand(11); split("one bird,two fish,some rain,this ship",s,","); split("flies over,swims under,falls on",v,",");
        split("the sea.,a hill.,the town.",o,","); for(i=0;i<2000;i++) printf "%s %s %s ", s[int(rand()*4)+1], v[int(rand()*3)+1], o[int(rand()*3)+1]}' > "$dir/synth_ood/text"
  "$S2HC" data import "$dir/synth_ood/text" --dir "$dir" --name synth_ood >/dev/null
}
