#!/usr/bin/env python3
"""Which lines of the library a run of the coverage build executed (gcov's counters).

    tests/coverage.py [--build DIR] [--functions]   per file and per folder: lines and
                                                     functions run, of those gcov counts
    tests/coverage.py [--build DIR] FILE...          each FILE's lines never run, by function

`make coverage` builds with COVERAGE=1 (gcc --coverage, -O0, in build-cov), zeroes the
counters, runs the suite and then this summary. A file compiled into several objects
(harness/model.c in the library, in the double-precision build and in tools/frame_bench)
counts a line as run when any of them ran it, and the headers' inline functions (kernels/
cpu/cpu_math.h, ...) the same over every object that includes them. Only the files of
harness/, analysis/, probes/ and kernels/cpu/ are reported (not the tests, not kernels/
cuda, whose code runs on a GPU or the emulator, not counted here).

What a process ran reaches the counters when it exits through exit(): a forked child
that execs or _exits (grid's point launcher before it runs `s2hc train`, data prepare's
converters, the re-exec of runtime_env_fixup) or a process killed by a signal (the
kill tests) leaves its lines counted as never run although they ran.

Plain gcov (GCC's, `gcov --json-format`), no lcov. Exit status 2 when the build folder
holds no counters (no `make COVERAGE=1` build yet).
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
from collections import defaultdict

DIRS = ("harness/", "analysis/", "probes/", "kernels/cpu/")


def reported(path):
    return path.startswith(DIRS)


def collect(build):
    """(lines, funcs): lines[file][line] = count; funcs[file][(name, start, end)] = count."""
    notes = []
    for root, _, names in os.walk(build):
        notes += [os.path.join(root, n) for n in names if n.endswith(".gcno")]
    if not notes:
        sys.exit(f"coverage.py: no .gcno files under {build}: build it first (make tests-build COVERAGE=1)")
    lines = defaultdict(lambda: defaultdict(int))
    funcs = defaultdict(lambda: defaultdict(int))
    for note in sorted(notes):
        # gcov reads NAME.gcno and NAME.gcda (absent: nothing of it ran, every count 0)
        out = subprocess.run(["gcov", "--json-format", "--stdout", note], capture_output=True)
        if out.returncode != 0:
            sys.exit(f"coverage.py: gcov failed on {note}: {out.stderr.decode(errors='replace').strip()}")
        text = out.stdout
        if text[:2] == b"\x1f\x8b":
            text = gzip.decompress(text)
        for doc in text.decode().splitlines():
            if not doc.strip():
                continue
            for f in json.loads(doc)["files"]:
                path = os.path.normpath(f["file"])
                if not reported(path):
                    continue
                for ln in f["lines"]:
                    lines[path][ln["line_number"]] += ln["count"]
                for fn in f["functions"]:
                    key = (fn.get("demangled_name", fn["name"]), fn["start_line"], fn["end_line"])
                    funcs[path][key] += fn["execution_count"]
    return lines, funcs


def pct(a, b):
    return 100.0 * a / b if b else 100.0


def summary(lines, funcs, show_funcs):
    by_dir = defaultdict(lambda: [0, 0, 0, 0])
    width = max(len(p) for p in lines)
    print(f"{'file':<{width}}  {'lines run':>14} {'%':>6}  {'functions run':>13} {'%':>6}")
    for path in sorted(lines):
        lrun = sum(1 for c in lines[path].values() if c > 0)
        ltot = len(lines[path])
        frun = sum(1 for c in funcs[path].values() if c > 0)
        ftot = len(funcs[path])
        d = path.split("/")[0] if not path.startswith("kernels/cpu/") else "kernels/cpu"
        if path.startswith("harness/residual/"):
            d = "harness"
        for i, v in enumerate((lrun, ltot, frun, ftot)):
            by_dir[d][i] += v
        print(f"{path:<{width}}  {lrun:>6} / {ltot:<5} {pct(lrun, ltot):5.1f}%  {frun:>5} / {ftot:<5} {pct(frun, ftot):5.1f}%")
        if show_funcs:
            for (name, start, _), c in sorted(funcs[path].items(), key=lambda kv: kv[0][1]):
                if c == 0:
                    print(f"    never run: {name} (line {start})")
    print()
    tot = [0, 0, 0, 0]
    for d in sorted(by_dir):
        v = by_dir[d]
        tot = [a + b for a, b in zip(tot, v)]
        print(f"{d + '/':<{width}}  {v[0]:>6} / {v[1]:<5} {pct(v[0], v[1]):5.1f}%  {v[2]:>5} / {v[3]:<5} {pct(v[2], v[3]):5.1f}%")
    print(f"{'all':<{width}}  {tot[0]:>6} / {tot[1]:<5} {pct(tot[0], tot[1]):5.1f}%  {tot[2]:>5} / {tot[3]:<5} {pct(tot[2], tot[3]):5.1f}%")


def never_run(path, lines, funcs):
    """The lines of PATH gcov counts that nothing ran, in runs of consecutive lines, each
    under the function that holds it."""
    path = os.path.normpath(path)
    if path not in lines:
        sys.exit(f"coverage.py: {path}: no counters for it (not a file of {', '.join(DIRS)} in this build)")
    with open(path, errors="replace") as fh:
        src = fh.read().split("\n")
    spans = sorted(funcs[path])
    def owner(n):
        best = None
        for name, start, end in spans:
            if start <= n <= end:
                best = name
        return best or "?"
    zero = sorted(n for n, c in lines[path].items() if c == 0)
    print(f"{path}: {len(zero)} of {len(lines[path])} lines never run")
    last_fn = None
    prev = None
    for n in zero:
        fn = owner(n)
        if fn != last_fn:
            print(f"  in {fn}:")
            last_fn = fn
        elif prev is not None and n != prev + 1:
            print("    ...")
        print(f"    {n:5d}  {src[n - 1] if n - 1 < len(src) else ''}")
        prev = n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build-cov", help="the coverage build's folder (build-cov)")
    ap.add_argument("--functions", action="store_true", help="also name each file's functions never run")
    ap.add_argument("files", nargs="*", help="source files whose never-run lines to list")
    a = ap.parse_args()
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    if not os.path.isdir(a.build):
        print(f"coverage.py: no folder {a.build}: build it first (make tests-build COVERAGE=1)", file=sys.stderr)
        return 2
    lines, funcs = collect(a.build)
    if a.files:
        for f in a.files:
            never_run(f, lines, funcs)
    else:
        summary(lines, funcs, a.functions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
