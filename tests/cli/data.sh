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
# --csv is list's alone: prepare and import refuse it by name (not a table silently)
expect_rc 2 "data prepare --csv" "$BIN" data prepare --csv --only kjv --dir /dev/null/d
grep -q "data prepare: unexpected argument '--csv'" "$TMP/err" && ok || bad "prepare --csv: $(cat "$TMP/err")"
expect_rc 2 "data import --csv" "$BIN" data import "$TMP/nofile" --name x --csv --dir "$TMP/d"
# --only names one corpus: a second one is refused, not silently taken instead of the first
expect_rc 2 "--only twice" "$BIN" data prepare --only kjv --only=fortunes --dir "$TMP/d"
grep -q "'kjv', then 'fortunes'" "$TMP/err" && ok || bad "--only twice: $(cat "$TMP/err")"
[ ! -e "$TMP/d" ] && ok || bad "--only twice wrote something"

# a --dir that cannot be made (under a plain file): exit 1, naming it and why
touch "$TMP/plain"
awk 'BEGIN{for(i=0;i<3000;i++) printf "the cat sees a dog. "}' > "$TMP/small.txt"
expect_rc 1 "data import into a --dir under a plain file" "$BIN" data import "$TMP/small.txt" --name x --dir "$TMP/plain/d"
grep -q "cannot create $TMP/plain/d: Not a directory" "$TMP/err" && ok || bad "import --dir under a file: $(cat "$TMP/err")"

# a missing package: exit 1, names the package and `make deps`, writes nothing
mkdir -p "$TMP/empty"
expect_rc 1 "missing package" env S2HC_DATA_ROOT="$TMP/empty" "$BIN" data prepare --only kjv --dir "$TMP/d"
grep -q "bible-kjv-text" "$TMP/err" && grep -q "make deps" "$TMP/err" && ok || bad "missing-package message: $(cat "$TMP/err")"
[ ! -e "$TMP/d" ] && ok || bad "something was written for a missing package"

# a dictd package whose index is empty: exit 1, "no text extracted" (in the sanitizer
# build too: no entry to sort)
mkdir -p "$TMP/emptydict/usr/share/dictd" && : > "$TMP/emptydict/usr/share/dictd/gcide.index"
printf '' | gzip > "$TMP/emptydict/usr/share/dictd/gcide.dict.dz"
expect_rc 1 "an empty dictd index" env S2HC_DATA_ROOT="$TMP/emptydict" "$BIN" data prepare --only gcide --dir "$TMP/dg"
grep -q "no text extracted" "$TMP/err" && ! grep -q "runtime error" "$TMP/err" && ok || bad "an empty dictd index: $(cat "$TMP/err")"

# a fake fortunes package
R="$TMP/root"; mkdir -p "$R/usr/share/games/fortunes"
printf 'First fortune.\n%%\nSecond\n  fortune.\n%%\n' > "$R/usr/share/games/fortunes/science"
printf 'junk' > "$R/usr/share/games/fortunes/science.dat"
expect_rc 0 "prepare fortunes" env S2HC_DATA_ROOT="$R" "$BIN" data prepare --only fortunes --dir "$TMP/d"
grep -q '^data: 1 corpus built in ' "$TMP/out" && ok || bad "prepare's summary of one corpus: $(tail -n 2 "$TMP/out")"
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
# a corpus a newer build prepared (a higher cleanup-version): prepare refuses to rebuild it
# (it did, as stale: other text under that build's runs), list says newer, --force rebuilds
cp -r "$TMP/d" "$TMP/dn"
sed -i 's/^cleanup-version: .*/cleanup-version: s2hc-data-99/' "$TMP/dn/fortunes/SOURCE.txt"
cp "$TMP/dn/fortunes/train.bin" "$TMP/newer-train.bin"
expect_rc 1 "prepare over a newer build's corpus" env S2HC_DATA_ROOT="$R" "$BIN" data prepare --only fortunes --dir "$TMP/dn"
grep -q "fortunes was prepared by a newer s2hc (cleanup-version s2hc-data-99; this build's is s2hc-data-" "$TMP/err" \
  && ok || bad "no message for a newer corpus: $(cat "$TMP/err")"
grep -q "s2hc-data-99" "$TMP/dn/fortunes/SOURCE.txt" && cmp -s "$TMP/dn/fortunes/train.bin" "$TMP/newer-train.bin" \
  && ok || bad "the newer corpus was rebuilt"
expect_rc 0 "data list with a newer corpus" "$BIN" data list --dir "$TMP/dn"
grep -E -q '^fortunes +ood +newer' "$TMP/out" && ok || bad "list does not show fortunes newer: $(cat "$TMP/out")"
expect_rc 0 "prepare --force over a newer build's corpus" env S2HC_DATA_ROOT="$R" "$BIN" data prepare --only fortunes --dir "$TMP/dn" --force
grep -q "s2hc-data-99" "$TMP/dn/fortunes/SOURCE.txt" && bad "--force did not rebuild it" || ok

# a package converted file by file (a fake perl-doc of three pods) shows its progress:
# files done of all, elapsed time and ETA, a line of its own when stdout is not a terminal
if command -v pod2text >/dev/null; then
  P="$TMP/rootpod"; mkdir -p "$P/usr/share/perl/5.36.0/pod"
  for n in perlfunc perlintro perlvar; do printf '=head1 NAME\n\n%s - a test pod\n\n=cut\n' "$n" > "$P/usr/share/perl/5.36.0/pod/$n.pod"; done
  expect_rc 0 "prepare a fake perldoc" env S2HC_DATA_ROOT="$P" S2HC_TEST_PROGRESS_AFTER=0 "$BIN" data prepare --only perldoc --dir "$TMP/dp"
  grep -E -q '^    perl-doc: [123]/3 pods \| [0-9]+s \| ETA [0-9]+s$' "$TMP/out" && ! grep -q $'\r' "$TMP/out" && ok \
    || bad "no progress line for the pods: $(cat "$TMP/out")"
  grep -q "perlintro - a test pod" "$TMP/dp/perldoc/train.bin" && ok || bad "the fake pods' text is not in the shard"
fi

# an interrupted prepare's scratch folder is removed by the next prepare; two prepares in
# one data folder at once: the second is refused
mkdir -p "$TMP/d2/.prepare-fortunes-Ab12Cd" && echo x > "$TMP/d2/.prepare-fortunes-Ab12Cd/worker-0"
expect_rc 0 "prepare after an interrupted one" env S2HC_DATA_ROOT="$R" "$BIN" data prepare --only fortunes --dir "$TMP/d2"
[ ! -e "$TMP/d2/.prepare-fortunes-Ab12Cd" ] && ok || bad "an interrupted prepare's scratch folder was left"
if command -v flock >/dev/null; then
  mkdir -p "$TMP/d3" && : > "$TMP/d3/.prepare.lock"
  expect_rc 1 "prepare while another runs" flock "$TMP/d3/.prepare.lock" env S2HC_DATA_ROOT="$R" "$BIN" data prepare --only fortunes --dir "$TMP/d3"
  grep -q "another .s2hc data prepare. or .data import. is writing" "$TMP/err" && ok || bad "no message for a concurrent prepare: $(cat "$TMP/err")"
fi

# data import: an empty --name is refused (it wrote the shards into DATA itself)
head -c 2000 /dev/zero | tr '\0' 'a' > "$TMP/text"
expect_rc 2 "import with an empty --name" "$BIN" data import "$TMP/text" --name "" --dir "$TMP/imp"
[ ! -e "$TMP/imp/train.bin" ] && ok || bad "an empty --name wrote $TMP/imp/train.bin"
# a NAME the config would refuse as data.train is refused here, with the config's rule
expect_rc 2 "import with --name .bad" "$BIN" data import "$TMP/text" --name .bad --dir "$TMP/imp"
grep -q "not starting with . or -" "$TMP/err" && ok || bad "--name .bad: $(cat "$TMP/err")"
expect_rc 2 "import with a 64-byte --name" "$BIN" data import "$TMP/text" --name "$(printf 'a%.0s' $(seq 64))" --dir "$TMP/imp"
grep -q "too long: 64 bytes, at most 63" "$TMP/err" && ok || bad "a 64-byte --name: $(cat "$TMP/err")"
[ ! -e "$TMP/imp/.bad" ] && [ -z "$(ls "$TMP/imp" 2>/dev/null)" ] && ok || bad "a refused --name wrote: $(ls -a "$TMP/imp")"
expect_rc 1 "import of a folder" "$BIN" data import "$TMP" --name dir --dir "$TMP/imp"
grep -q "cannot read: Is a directory" "$TMP/err" && ok || bad "import of a folder: $(cat "$TMP/err")"
expect_rc 0 "import" "$BIN" data import "$TMP/text" --name mine --dir "$TMP/imp"
[ -f "$TMP/imp/mine/train.bin" ] && [ -f "$TMP/imp/mine/val.bin" ] && ok || bad "import wrote no shards"
# 2000 bytes: a validation part of 20, which only the smallest block_size fits: said so
grep -q "validation part fits model.block_size up to 19 only" "$TMP/out" && ok || bad "no note of the small validation part: $(cat "$TMP/out")"
# an import over a corpus that fails to write its second part leaves the old corpus whole
# (a directory in the way of val.bin's temporary file stands for a full disk)
sums=$(cat "$TMP/imp/mine/train.bin" "$TMP/imp/mine/val.bin" | md5sum)
head -c 5000 /dev/urandom | base64 > "$TMP/text2"
mkdir "$TMP/imp/mine/val.bin.tmp"
expect_rc 1 "an import whose val.bin cannot be written" "$BIN" data import "$TMP/text2" --name mine --dir "$TMP/imp"
grep -q "val.bin" "$TMP/err" && ok || bad "the error does not name val.bin: $(cat "$TMP/err")"
rmdir "$TMP/imp/mine/val.bin.tmp"
[ "$(cat "$TMP/imp/mine/train.bin" "$TMP/imp/mine/val.bin" | md5sum)" = "$sums" ] && ok || bad "a failed import changed the old corpus"
[ ! -e "$TMP/imp/mine/train.bin.tmp" ] && ok || bad "a failed import left train.bin.tmp"
# a failure to write says so once, and leaves no half corpus
: > "$TMP/afile"
expect_rc 1 "import into a --dir that is a file" "$BIN" data import "$TMP/text" --name x --dir "$TMP/afile"
[ "$(grep -c "error" "$TMP/err")" = 1 ] && ok || bad "the error is not said once: $(cat "$TMP/err")"

# a pipe is read whole (no mmap)
expect_rc 0 "import from a pipe" sh -c 'cat "$0" | "$1" data import /dev/stdin --name piped --dir "$2"' "$TMP/text" "$BIN" "$TMP/imp"
grep -q "1980 train and 20 val bytes (vocab 256)" "$TMP/out" && ok || bad "import from a pipe: $(cat "$TMP/out")"

# token ids: little-endian uint16 (nanoGPT's train.bin / val.bin), a separate validation file
hdr() { od -An -t u4 -j "$2" -N 4 "$1" | tr -d ' '; } # hdr FILE OFFSET: a uint32 of the header
perl -e 'print pack("v*", map { ($_ * 7) % 1000 } 0 .. 3000)' > "$TMP/ids.bin"
perl -e 'print pack("v*", map { ($_ * 3) % 1000 } 0 .. 1499)' > "$TMP/ids_val.bin"
expect_rc 0 "import uint16 ids with --val" "$BIN" data import "$TMP/ids.bin" --val "$TMP/ids_val.bin" --tokens uint16 \
  --vocab 1000 --name ids --dir "$TMP/imp"
grep -q "3001 train and 1500 val tokens (vocab 1000)" "$TMP/out" && ok || bad "uint16 import: $(cat "$TMP/out")"
grep -q "model.vocab=1000 or more" "$TMP/out" && ok || bad "no note of model.vocab: $(cat "$TMP/out")"
[ "$(hdr "$TMP/imp/ids/train.bin" 12)" = 1000 ] && [ "$(hdr "$TMP/imp/ids/train.bin" 16)" = 2 ] && ok ||
  bad "train.bin header: vocab $(hdr "$TMP/imp/ids/train.bin" 12), bytes per token $(hdr "$TMP/imp/ids/train.bin" 16)"
tail -c +33 "$TMP/imp/ids/train.bin" | cmp -s - "$TMP/ids.bin" && ok || bad "train.bin does not hold the ids as given"
tail -c +33 "$TMP/imp/ids/val.bin" | cmp -s - "$TMP/ids_val.bin" && ok || bad "val.bin is not the --val file"
# without --val the last 1 % of the tokens: 3001 - 30
expect_rc 0 "import uint16 ids, split" "$BIN" data import "$TMP/ids.bin" --tokens uint16 --vocab 1000 --name ids2 --dir "$TMP/imp"
grep -q "2971 train and 30 val tokens" "$TMP/out" && ok || bad "uint16 split: $(cat "$TMP/out")"
# refused, nothing written: an id past --vocab, half a token, a missing --val
expect_rc 1 "an id past --vocab" "$BIN" data import "$TMP/ids.bin" --tokens uint16 --vocab 500 --name bad1 --dir "$TMP/imp"
grep -q "ids.bin: token 72 is 504, not below --vocab 500" "$TMP/err" && ok || bad "id past --vocab: $(cat "$TMP/err")"
# an id equal to --vocab is past it too (ids run 0..V-1): 999 first at token 857
expect_rc 1 "an id equal to --vocab" "$BIN" data import "$TMP/ids.bin" --tokens uint16 --vocab 999 --name bad4 --dir "$TMP/imp"
grep -q "ids.bin: token 857 is 999, not below --vocab 999" "$TMP/err" && ok || bad "id == --vocab: $(cat "$TMP/err")"
perl -e 'print pack("v*", (5) x 1500, 1000, 7)' > "$TMP/val_eq.bin"
expect_rc 1 "a --val id equal to --vocab" "$BIN" data import "$TMP/ids.bin" --val "$TMP/val_eq.bin" --tokens uint16 \
  --vocab 1000 --name bad5 --dir "$TMP/imp"
grep -q "val_eq.bin: token 1500 is 1000, not below --vocab 1000" "$TMP/err" && ok || bad "--val id == --vocab: $(cat "$TMP/err")"
[ ! -e "$TMP/imp/bad4" ] && [ ! -e "$TMP/imp/bad5" ] && ok || bad "an import refused for id == --vocab wrote files"
head -c 3001 "$TMP/ids.bin" > "$TMP/odd.bin"
expect_rc 1 "half a token" "$BIN" data import "$TMP/odd.bin" --tokens uint16 --vocab 1000 --name bad2 --dir "$TMP/imp"
grep -q "3001 bytes is not a whole number of uint16 tokens" "$TMP/err" && ok || bad "half a token: $(cat "$TMP/err")"
expect_rc 1 "a missing --val" "$BIN" data import "$TMP/ids.bin" --val "$TMP/nope" --tokens uint16 --vocab 1000 --name bad3 --dir "$TMP/imp"
[ ! -e "$TMP/imp/bad1" ] && [ ! -e "$TMP/imp/bad2" ] && [ ! -e "$TMP/imp/bad3" ] && ok || bad "a refused import wrote files"
expect_rc 0 "data list with imported corpora" "$BIN" data list --dir "$TMP/imp"
grep -E -q '^ids +own +imported +3001 +1500 +1000$' "$TMP/out" && ok || bad "list does not show the ids corpus: $(cat "$TMP/out")"
grep -E -q '^mine +own +imported +1980 +20 +256$' "$TMP/out" && ok || bad "list does not show the text import: $(cat "$TMP/out")"
grep -E -q '^kjv +ood +missing' "$TMP/out" && ok || bad "list does not show kjv missing: $(cat "$TMP/out")"
# a corpus named in 63 bytes (--name's longest): the corpus column as wide as its name, so
# that every row's role starts at the same column, the header's too (the long row's had
# moved right); short names keep the 12 columns
LONGN=a_corpus_named_in_sixty_three_bytes_to_test_the_data_list_table
expect_rc 0 "import under a 63-byte name" "$BIN" data import "$TMP/text" --name "$LONGN" --dir "$TMP/imp"
expect_rc 0 "data list with a 63-byte name" "$BIN" data list --dir "$TMP/imp"
cols=$(grep -v '^(in ' "$TMP/out" | awk '{ print index($0, " " $2 " ") }' | sort -u | tr '\n' ' ')
[ "$cols" = "64 " ] && ok || bad "data list: the role column starts at byte offsets '$cols', not 64 alone: $(cat "$TMP/out")"
grep -q "^$LONGN own    imported " "$TMP/out" && ok || bad "data list: the long name's row: $(cat "$TMP/out")"
expect_rc 0 "data list of short names" "$BIN" data list --dir "$TMP/d"
grep -q '^corpus       role   state      train tokens    val tokens  vocab$' "$TMP/out" && ok \
  || bad "data list: short names moved the header: $(head -1 "$TMP/out")"
# --csv: a header and a row per corpus, as the table has them (a '-' an empty field), the
# note on stderr, nothing else on stdout; parsed by Python's csv module
expect_rc 0 "data list --csv" "$BIN" data list --dir "$TMP/imp" --csv
cp "$TMP/out" "$TMP/list.csv"
grep -q '^(in ' "$TMP/err" && ok || bad "data list --csv: the note is not on stderr: $(cat "$TMP/err")"
"$BIN" data list --dir "$TMP/imp" > "$TMP/list.txt" 2>/dev/null
if python3 - "$TMP/list.csv" "$TMP/list.txt" "$LONGN" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
assert rows[0] == ["corpus", "role", "state", "train_tokens", "val_tokens", "vocab"], rows[0]
table = [l.split() for l in open(sys.argv[2]) if not l.startswith("(in ")][1:]
assert len(rows) - 1 == len(table), (len(rows), len(table))
for r, t in zip(rows[1:], table):
    assert r == [x if x != "-" else "" for x in t], (r, t)
by = {r[0]: r for r in rows[1:]}
assert by["ids"] == ["ids", "own", "imported", "3001", "1500", "1000"], by["ids"]
assert by[sys.argv[3]][1:3] == ["own", "imported"], by[sys.argv[3]]
assert by["kjv"] == ["kjv", "ood", "missing", "", "", ""], by["kjv"]
PY
then ok; else bad "data list --csv: $(cat "$TMP/list.csv")"; fi
# a folder name with a comma and a quote (a corpus data import refuses, in the folder all
# the same): one field, quoted as CSV quotes it
mkdir -p "$TMP/imp/a,b\"c" && cp "$TMP/imp/mine/"*.bin "$TMP/imp/a,b\"c/"
expect_rc 0 "data list --csv of an odd folder" "$BIN" data list --dir "$TMP/imp" --csv
grep -q '^"a,b""c",own,imported,1980,20,256$' "$TMP/out" && ok || bad "data list --csv: the odd folder's row: $(cat "$TMP/out")"
rm -rf "$TMP/imp/a,b\"c" "$TMP/imp/$LONGN"
# the short-validation note: a window needs block_size + 1 tokens, so a --val of 1024 ids
# fits block_size 1023 (said), one of 1025 fits the presets' 1024 (nothing said)
perl -e 'print pack("v*", map { $_ % 1000 } 0 .. 1023)' > "$TMP/val1024.bin"
perl -e 'print pack("v*", map { $_ % 1000 } 0 .. 1024)' > "$TMP/val1025.bin"
expect_rc 0 "a --val of 1024 ids" "$BIN" data import "$TMP/ids.bin" --val "$TMP/val1024.bin" --tokens uint16 \
  --vocab 1000 --name v1024 --dir "$TMP/imp"
grep -q "3001 train and 1024 val tokens" "$TMP/out" && ok || bad "--val of 1024: $(cat "$TMP/out")"
grep -q "^note: its validation part fits model.block_size up to 1023 only (the M and L presets use 1024): more tokens for longer sequences$" "$TMP/out" \
  && ok || bad "no note for a validation part of 1024: $(cat "$TMP/out")"
expect_rc 0 "a --val of 1025 ids" "$BIN" data import "$TMP/ids.bin" --val "$TMP/val1025.bin" --tokens uint16 \
  --vocab 1000 --name v1025 --dir "$TMP/imp"
grep -q "3001 train and 1025 val tokens" "$TMP/out" && ok || bad "--val of 1025: $(cat "$TMP/out")"
grep -q "validation part fits" "$TMP/out" && bad "a note for a validation part of 1025: $(cat "$TMP/out")" || ok
expect_rc 2 "--tokens uint16 without --vocab" "$BIN" data import "$TMP/ids.bin" --tokens uint16 --name x --dir "$TMP/imp"
expect_rc 2 "--vocab 70000" "$BIN" data import "$TMP/ids.bin" --tokens uint16 --vocab 70000 --name x --dir "$TMP/imp"
expect_rc 2 "--vocab without --tokens" "$BIN" data import "$TMP/ids.bin" --vocab 1000 --name x --dir "$TMP/imp"
expect_rc 2 "--tokens int32" "$BIN" data import "$TMP/ids.bin" --tokens int32 --vocab 1000 --name x --dir "$TMP/imp"

# an empty --dir is refused (it wrote NAME/ at the file system's root)
expect_rc 2 "import with an empty --dir" "$BIN" data import "$TMP/text" --name e --dir ""
grep -q -- "--dir is empty" "$TMP/err" && ok || bad "empty --dir: $(cat "$TMP/err")"
expect_rc 2 "prepare with an empty --dir" "$BIN" data prepare --dir ""
# a --dir longer than data.dir can be is refused by its length (it was cut where a
# path was built from it: files went to another folder, or one not found)
LONGD=$TMP/$(printf 'd%.0s' $(seq 1 200))/$(printf 'e%.0s' $(seq 1 200))/$(printf 'f%.0s' $(seq 1 200))
expect_rc 2 "import with a --dir of over 511 bytes" "$BIN" data import "$TMP/text" --name e --dir "$LONGD"
grep -q -- "data import --dir: .*: a path of [0-9]* bytes, longer than 511" "$TMP/err" && ok || bad "long --dir: $(cat "$TMP/err")"
[ ! -e "$TMP/$(printf 'd%.0s' $(seq 1 200))" ] && ok || bad "a long --dir wrote $(ls "$TMP")"
expect_rc 2 "list with a --dir of over 511 bytes" "$BIN" data list --dir "$LONGD"
# one writer at a time in a data folder: an import while the lock is held is refused, and
# writes nothing
# (an import writes its name, pid, host and time into the lock file, which the refusal
# names: here the last import's)
grep -Eq "^s2hc data import pid [0-9]+ on .* since " "$TMP/imp/.prepare.lock" && ok \
  || bad "the lock file does not name its holder: $(cat "$TMP/imp/.prepare.lock")"
if command -v flock >/dev/null; then
  holder=$(cat "$TMP/imp/.prepare.lock")
  flock "$TMP/imp/.prepare.lock" -c "\"$BIN\" data import \"$TMP/text\" --name locked --dir \"$TMP/imp\"" >"$TMP/out" 2>"$TMP/err"
  [ $? = 1 ] && grep -qF "is writing in $TMP/imp ($holder)" "$TMP/err" && [ ! -e "$TMP/imp/locked" ] && ok || bad "an import beside a held lock: $(cat "$TMP/err")"
fi
# a late line start (a long last line) would leave a validation part of one byte: the
# cut goes to the 99 % byte instead
awk 'BEGIN{for(i=0;i<2000;i++) printf "word "; printf "\n\n"; for(i=0;i<3000;i++) printf "long paragraph "; printf "\n\n"}' > "$TMP/para"
expect_rc 0 "import of a text with a long last line" "$BIN" data import "$TMP/para" --name para --dir "$TMP/imp"
grep -q "54454 train and 550 val bytes" "$TMP/out" && ok || bad "long last line: $(cat "$TMP/out")"
# a line start after the 99 % point that leaves more than half of the 1 % is the cut (a
# line of 600 bytes over the 99 % point: 700 val bytes, not 1000 from mid-line); a file
# of 1023 bytes is too little, one of 1024 is a corpus
awk 'BEGIN{for(i=0;i<987;i++) printf "%099d\n", i; printf "%0599d\n", 1; for(i=0;i<7;i++) printf "%099d\n", i}' > "$TMP/late"
expect_rc 0 "import of a text with a line start after the 99 % point" "$BIN" data import "$TMP/late" --name late --dir "$TMP/imp"
grep -q "99300 train and 700 val bytes" "$TMP/out" && ok || bad "late line start: $(cat "$TMP/out")"
head -c 1023 "$TMP/late" > "$TMP/b1023"; head -c 1024 "$TMP/late" > "$TMP/b1024"
expect_rc 1 "import of 1023 bytes" "$BIN" data import "$TMP/b1023" --name b1023 --dir "$TMP/imp"
grep -q "1023 bytes is too little for a corpus (at least 1024)" "$TMP/err" && ok || bad "1023 bytes: $(cat "$TMP/err")"
expect_rc 0 "import of 1024 bytes" "$BIN" data import "$TMP/b1024" --name b1024 --dir "$TMP/imp"
# past `ulimit -f` the write fails with a message and leaves no .tmp
expect_rc 1 "import past the file-size limit" bash -c 'ulimit -f 8; exec "$0" data import "$1" --name big --dir "$2"' \
  "$BIN" "$TMP/para" "$TMP/imp"
grep -q "File too large" "$TMP/err" && [ ! -e "$TMP/imp/big/train.bin.tmp" ] && [ ! -e "$TMP/imp/big/train.bin" ] && ok ||
  bad "import past the file-size limit: $(cat "$TMP/err"; ls "$TMP/imp/big" 2>&1)"

echo "data.sh: $pass passed, $fail failed"
[ "$fail" = 0 ]
