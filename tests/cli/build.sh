#!/usr/bin/env bash
# The build keeps what it built. The top Makefile's bare `.SECONDARY:` marks every
# target secondary, so make never deletes intermediates (the double-precision test
# objects, the emulator's generated .cpp). A `.SECONDARY: LIST` anywhere turns that
# form off: mk/cuda.mk had one, and after each build make deleted build/dbl/**/*.o, so
# a change to any source of the double build recompiled all of them.
cd "$(dirname "$0")/../.." || exit 1
. tests/cli/lib.sh
grep -qE '^\.SECONDARY:[[:space:]]*$' Makefile && ok "the Makefile keeps every target" \
  || fail "the Makefile has no bare .SECONDARY:"
lists=$(grep -nE '^\.SECONDARY:[[:space:]]*[^[:space:]]' Makefile mk/*.mk)
[ -z "$lists" ] && ok "no .SECONDARY: with a list" || fail ".SECONDARY with a list turns 'every target' off: $lists"
finish build
