#!/usr/bin/env bash
# CLI test of `s2hc data`: usage and exit codes, a missing package, and a tiny prepare
# on a fake package tree (S2HC_DATA_ROOT), cached on the second run. No Debian corpus
# is needed. Prints "data.sh: N passed, N failed".
set -u
BIN=${S2HC_BIN:-$PWD/bin/s2hc}
TMP=$(mktemp -d "${S2HC_TEST_TMP:-/tmp}/cli-data.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
pass=0; fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "  FAIL data.sh: $*" >&2; }
expect_rc() { # expect_rc WANT DESCRIPTION CMD...
  local want=$1 what=$2; shift 2
  "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
  if [ "$rc" = "$want" ]; then ok; else bad "$what: exit $rc, want $want"; cat "$TMP/err" >&2; fi
}

if [ ! -x "$BIN" ] || ! "$BIN" data --help >/dev/null 2>&1; then
  echo "data.sh: skipped ($BIN has no working 'data' command yet)" >&2
  echo "data.sh: 0 passed, 0 failed"
  exit 0
fi

expect_rc 0 "data --help" "$BIN" data --help
grep -q "example" "$TMP/out" && ok || bad "--help shows no example"
expect_rc 2 "data without a command" "$BIN" data
expect_rc 2 "unknown data command" "$BIN" data frobnicate
expect_rc 2 "unknown corpus" "$BIN" data prepare --only nope --dir "$TMP/d"
expect_rc 2 "unknown option" "$BIN" data prepare --bogus

# a missing package: exit 1, names the package and `make deps`, writes nothing
mkdir -p "$TMP/empty"
expect_rc 1 "missing package" env S2HC_DATA_ROOT="$TMP/empty" "$BIN" data prepare --only kjv --dir "$TMP/d"
grep -q "bible-kjv-text" "$TMP/err" && grep -q "make deps" "$TMP/err" && ok || bad "missing-package message: $(cat "$TMP/err")"
[ ! -e "$TMP/d" ] && ok || bad "something was written for a missing package"

# a fake fortunes package
R="$TMP/root"; mkdir -p "$R/usr/share/games/fortunes"
printf 'First fortune.\n%%\nSecond\n  fortune.\n%%\n' > "$R/usr/share/games/fortunes/science"
printf 'junk' > "$R/usr/share/games/fortunes/science.dat"
expect_rc 0 "prepare fortunes" env S2HC_DATA_ROOT="$R" "$BIN" data prepare --only fortunes --dir "$TMP/d"
[ -f "$TMP/d/fortunes/train.bin" ] && [ -f "$TMP/d/fortunes/val.bin" ] && [ -f "$TMP/d/fortunes/SOURCE.txt" ] \
  && ok || bad "shards or SOURCE.txt missing"
text=$( { tail -c +33 "$TMP/d/fortunes/train.bin"; tail -c +33 "$TMP/d/fortunes/val.bin"; } | od -An -c | tr -d ' \n')
want=$(printf 'First fortune.\n\nSecond\n  fortune.\n\n' | od -An -c | tr -d ' \n')
[ "$text" = "$want" ] && ok || bad "fortunes text differs"
expect_rc 0 "cached prepare" env S2HC_DATA_ROOT="$R" "$BIN" data prepare --only fortunes --dir "$TMP/d"
grep -q "cached" "$TMP/out" && ok || bad "second prepare did not say cached: $(cat "$TMP/out")"
expect_rc 0 "data list" "$BIN" data list --dir "$TMP/d"
grep -E -q '^fortunes +ood +prepared' "$TMP/out" && ok || bad "list does not show fortunes prepared: $(cat "$TMP/out")"
grep -E -q '^kjv +ood +missing' "$TMP/out" && ok || bad "list does not show kjv missing"

# an interrupted prepare's scratch folder is removed by the next prepare; two prepares in
# one data folder at once: the second is refused
mkdir -p "$TMP/d2/.prepare-fortunes-Ab12Cd" && echo x > "$TMP/d2/.prepare-fortunes-Ab12Cd/worker-0"
expect_rc 0 "prepare after an interrupted one" env S2HC_DATA_ROOT="$R" "$BIN" data prepare --only fortunes --dir "$TMP/d2"
[ ! -e "$TMP/d2/.prepare-fortunes-Ab12Cd" ] && ok || bad "an interrupted prepare's scratch folder was left"
if command -v flock >/dev/null; then
  mkdir -p "$TMP/d3" && : > "$TMP/d3/.prepare.lock"
  expect_rc 1 "prepare while another runs" flock "$TMP/d3/.prepare.lock" env S2HC_DATA_ROOT="$R" "$BIN" data prepare --only fortunes --dir "$TMP/d3"
  grep -q "another .s2hc data prepare. is running" "$TMP/err" && ok || bad "no message for a concurrent prepare: $(cat "$TMP/err")"
fi

# data import: an empty --name is refused (it wrote the shards into DATA itself)
head -c 2000 /dev/zero | tr '\0' 'a' > "$TMP/text"
expect_rc 2 "import with an empty --name" "$BIN" data import "$TMP/text" --name "" --dir "$TMP/imp"
[ ! -e "$TMP/imp/train.bin" ] && ok || bad "an empty --name wrote $TMP/imp/train.bin"
expect_rc 1 "import of a folder" "$BIN" data import "$TMP" --name dir --dir "$TMP/imp"
grep -q "cannot read: Is a directory" "$TMP/err" && ok || bad "import of a folder: $(cat "$TMP/err")"
expect_rc 0 "import" "$BIN" data import "$TMP/text" --name mine --dir "$TMP/imp"
[ -f "$TMP/imp/mine/train.bin" ] && [ -f "$TMP/imp/mine/val.bin" ] && ok || bad "import wrote no shards"
# 2000 bytes: a validation part of 20, which only the smallest block_size fits: said so
grep -q "validation part fits model.block_size up to 19 only" "$TMP/out" && ok || bad "no note of the small validation part: $(cat "$TMP/out")"
# a failure to write says so once, and leaves no half corpus
: > "$TMP/afile"
expect_rc 1 "import into a --dir that is a file" "$BIN" data import "$TMP/text" --name x --dir "$TMP/afile"
[ "$(grep -c "error" "$TMP/err")" = 1 ] && ok || bad "the error is not said once: $(cat "$TMP/err")"

echo "data.sh: $pass passed, $fail failed"
[ "$fail" = 0 ]
