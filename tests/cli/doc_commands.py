#!/usr/bin/env python3
"""doc_commands.py: the command lines the docs show, checked against the program.

    python3 tests/cli/doc_commands.py S2HC_BIN BUILD_DIR FILE...

Run from the repository root (docs_cli.sh does, for README.md, docs/*.md, the
experiments' grid and config files and the makefiles). It reads the code of each file:
of a markdown file its fenced and indented blocks (indented as CommonMark reads them: in
a list item, four spaces past the item's content column) and its `inline` spans, which
may run over a line break; of a YAML file or a makefile its comments' command lines (a
comment's text indented two spaces: `#   s2hc grid experiments/depth.yaml -j 2`) and the
`inline` spans of the rest. It checks:

  - every `s2hc COMMAND ...` / `bin/s2hc COMMAND ...`: COMMAND (and data's SUBCOMMAND)
    is one `s2hc --help` lists, and every -o/--option it uses appears in
    `s2hc COMMAND --help` or `s2hc --help`; a --set KEY is a key `s2hc config` lists
    (or a pseudo-key the command's help names: grid's `preset`);
  - every config key written as `section.key` (in backticks, a code block or a YAML
    block's nested or dotted keys) where `section` is one `s2hc config` lists, or a
    misspelling of one (`trian.steps`: one edit from a section of up to five letters,
    two from a longer one); a `name.ext` with a file's extension (`model.pt`) is no key;
  - a YAML block's top-level keys: a grid file's (a block with sweep:, set:, slurm:, ...)
    are those `s2hc grid` takes, as are the keys of its slurm: and its override entries
    (asked of the program: it names them refusing a file with a key it does not know);
    a config file's are config sections;
  - every `make TARGET VAR=...`: TARGET is a target of the Makefile (make -qp's
    database, which runs no recipe), VAR a variable the makefiles set or read or an
    environment variable the programs read (make passes it on: OMP_NUM_THREADS,
    S2HC_*; env_vars), and the options in BENCH_ARGS / FRAME_ARGS / LAYOUT_ARGS appear
    in the --help of the program that variable goes to, and TESTS names tests of
    tests/run.sh;
  - an option alone in backticks (`--extend`, `--ood LIST`) is some s2hc command's;
  - the examples of `s2hc --help`, of every command's and of the tools', likewise.

Only code is read, never prose: "s2hc" in a sentence names the method as often as the
program ("s2hc at n = 4", "s2hc is a harness"), so a command misspelled in prose outside
backticks goes unnoticed; write command lines in code. In code, a word after s2hc that
is no command is a mistake only where a command starts (a line's or a span's start, after
;, &&, |, a shell keyword or a launcher: `nohup s2hc ...`, `mpirun -np 4 s2hc ...`);
elsewhere (`the s2hc method`) it is the method's name, and s2hc's own commands are
checked wherever they appear. In a comment's table of names (`#   s2hc expm    the core
...`, comment_segments) a row's `s2hc WORD` is a name unless WORD misspells a command or
the row goes on as a command line (an option, a path, a file): then it is a mistake too.

Each mismatch is printed as FILE:LINE: what is wrong; the exit is 1 if there is any.
Only --help, config, `s2hc grid --list` of three one-line files, make -qp and ldd are
run: no corpus, no run."""
import concurrent.futures
import os
import re
import shlex
import subprocess
import sys
import tempfile

# Options of other programs that the docs show alone in backticks, in prose about that
# program (an option inside a command line of another program is never checked).
# (A span with a one-dash word of several letters, -fPIC or -Xcompiler, is a compiler's
# command line and is not checked: no s2hc option is written so.)
OTHER_TOOL_OPTIONS = {
    "--no-install-recommends",  # apt-get's (scripts/deps.sh), README's make deps
    "--oversubscribe",          # mpirun's (docs/distributed.md)
    "--bind-to",                # mpirun's (docs/distributed.md)
    "--array", "--chdir",       # sbatch's, in array.sbatch (docs/grids.md)
}
# The make variables that carry a program's options, and that program (mk/bench.mk).
# (The values are keys of Program.helps: an s2hc command, or a program under BUILD/tools.)
ARGS_VARS = {"BENCH_ARGS": "bench", "FRAME_ARGS": "frame_bench", "LAYOUT_ARGS": "layout_bench"}
# A `section.ext` in backticks that is a file's name (train.bin, run.h5), not a key.
FILE_EXTS = {"bin", "h5", "log", "c", "h", "o", "d", "yaml", "md", "sh", "gp", "csv", "dat",
             "tex", "html", "txt", "py", "cu", "mk", "json", "png", "svg", "sbatch", "tsv",
             "safetensors", "lock", "tmp", "pt", "pth", "ckpt", "npy", "npz", "pkl", "onnx",
             "gguf", "yml", "toml", "ini", "cfg", "gz", "tar", "zip", "xz", "zst", "jsonl",
             "parquet", "pdf", "jpg", "jpeg", "gif", "so", "a", "cpp", "cuh", "out", "err", "old"}
# A fenced block's languages whose lines are command lines (``` or ~~~ alone: the docs'
# habit); a block in another (python, c, text) is not checked.
SHELL_LANGS = {"", "sh", "bash", "shell", "console", "shell-session", "zsh"}
# A grid file with a key no grid takes, at the top, in slurm: and in an override entry,
# and how `s2hc grid` names the keys it takes there when it refuses the file.
GRID_PROBES = {"top": "doc_commands_probe: 1\n", "slurm": "slurm: {doc_commands_probe: 1}\n",
               "override": "override:\n  - {doc_commands_probe: 1}\n"}
GRID_ANSWERS = {"top": r"unknown grid key 'doc_commands_probe' \(the keys are ([a-z_, ]+);",
                "slurm": r"unknown slurm key 'doc_commands_probe' \(the keys are ([a-z_, ]+)\)",
                "override": r"override: 'doc_commands_probe': expected ([a-z_]+: and [a-z_]+):"}
OPT_RE = re.compile(r"^--?[A-Za-z][A-Za-z0-9_-]*")
KEY_RE = re.compile(r"(?<![\w./$-])([a-z][a-z0-9_]*)\.([a-z_][a-z0-9_]*)(?![\w/(-]|\.[\w])")


def run(argv):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


class Program:
    """What the built program and the makefiles say they accept."""

    def __init__(self, s2hc, build):
        rc, top = run([s2hc, "--help"])
        if rc != 0:
            sys.exit(f"doc_commands: {s2hc} --help exited {rc}")
        self.top = top
        self.commands = {}      # name -> set of subcommands (empty: none)
        sect = False
        for line in top.splitlines():
            if line.startswith("commands:"):
                sect = True
                continue
            if sect:
                m = re.match(r"^  ([a-z][a-z-]*)(?: ([a-z][a-z-]*)\b)?", line)
                if not m:
                    if line.strip() == "":
                        break
                    continue
                subs = self.commands.setdefault(m.group(1), set())
                if m.group(2):
                    subs.add(m.group(2))
        if re.search(r"\bs2hc help COMMAND\b", top):
            self.commands.setdefault("help", set())
        self.global_opts = set(options_in(without_examples(top))) | {"--help"}
        # every --help, `s2hc config`, the tools' --help and make's database, at once
        names = [cmd if sub is None else f"{cmd} {sub}"
                 for cmd, subs in self.commands.items() if cmd != "help" for sub in sorted(subs) or [None]]
        calls = {name: [s2hc] + name.split() + ["--help"] for name in names}
        calls[" config"] = [s2hc, "config"]
        # a grid file's own keys, as `s2hc grid` names them refusing one it does not know
        # (it reads the file whole before anything runs: --list runs nothing either way)
        self.tmp = tempfile.TemporaryDirectory(prefix="doc_commands.")
        for what, text in GRID_PROBES.items():
            path = os.path.join(self.tmp.name, what + ".yaml")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            calls[" grid " + what] = [s2hc, "grid", path, "--list"]
        calls[" make"] = ["make", "--help"]
        exec_prefix = shlex.split(os.environ.get("S2HC_EXEC", ""))  # tests/run.sh's emulator
        for tool in ("frame_bench", "layout_bench"):
            path = os.path.join(build, "tools", tool)
            if os.access(path, os.X_OK):
                calls[tool] = exec_prefix + [path, "--help"]
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            db = pool.submit(make_database)
            done = dict(zip(calls, pool.map(run, calls.values())))
            self.targets, self.make_vars = db.result()
        self.helps = {}         # "train", "data prepare", "frame_bench" -> help text
        for name, (rc, text) in done.items():
            if rc != 0 and name in names:
                sys.exit(f"doc_commands: s2hc {name} --help exited {rc}")
            if rc == 0 and not name.startswith(" "):
                self.helps[name] = text
        # a command's options as its help describes them, not as its examples use them: an
        # example's misspelled option would otherwise be one its own help names
        self.opts = {k: set(options_in(without_examples(v))) for k, v in self.helps.items()}
        self.make_opts = set(options_in(done[" make"][1]))
        self.make_dbs = {}
        # tests/run.sh's names (make test TESTS=...): the test programs and the shell tests
        tdir = os.path.join(build, "tests")
        self.tests = {f for f in os.listdir(tdir) if re.fullmatch(r"(test|dbl)_\w+", f)} if os.path.isdir(tdir) else set()
        self.tests |= {f for f in os.listdir("tests/cli") if f.endswith(".sh") and f != "lib.sh"}
        rc, cfg = done[" config"]
        self.keys = set(re.findall(r"^  ([a-z][a-z0-9_]*\.[a-z_][a-z0-9_]*) ", cfg, re.M))
        self.sections = {k.split(".")[0] for k in self.keys}
        if rc != 0 or not self.keys:
            sys.exit("doc_commands: s2hc config listed no keys")
        self.grid_keys = {}     # "top", "slurm", "override" -> the keys a grid file takes there
        for what, pattern in GRID_ANSWERS.items():
            rc, text = done[" grid " + what]
            m = re.search(pattern, text)
            if rc == 0 or not m:
                sys.exit(f"doc_commands: s2hc grid named no {what} keys refusing an unknown one "
                         f"(exit {rc}): {text.strip()}")
            self.grid_keys[what] = set(re.findall(r"[a-z_]+(?=:|,|$)", m.group(1)))
        self.tmp.cleanup()
        self.env = env_vars(s2hc)

    def help_name(self, cmd, sub):
        return cmd if sub is None else f"{cmd} {sub}"

    def make_targets(self, args):
        """The targets of make ARGS (-f FILE, VAR=VALUE), its database read once."""
        key = tuple(args)
        if key not in self.make_dbs:
            self.make_dbs[key] = make_database(args)[0]
        return self.make_dbs[key]


def env_vars(s2hc):
    """The environment variables the programs read: those that the sources of harness/,
    kernels/, probes/, analysis/, tools/ and tests/ name to getenv, setenv or unsetenv
    (the harness sets OMP_NUM_THREADS for a grid's points), that the shell tests and
    scripts read with a default (${S2HC_EXEC:-}), and those of the libraries the program
    loads (libgomp's OMP_* and GOMP_*, OpenBLAS's OPENBLAS_* and GOTO_*): every such name a
    library holds as a string of its own (not any upper-case word in it: ~120 of those),
    which `ldd` finds for the binary (S2HC_BIN may be a wrapper script: its `exec` line
    names the binary)."""
    names = set()
    for top in ("harness", "kernels", "probes", "analysis", "tools", "tests", "scripts"):
        for root, _, files in os.walk(top):
            for f in files:
                path = os.path.join(root, f)
                if f.endswith((".c", ".h", ".cu", ".cuh", ".cpp")):
                    pat = r'\b(?:getenv|setenv|unsetenv)\("([A-Z][A-Z0-9_]*)"'
                elif f.endswith((".sh", ".sbatch")):
                    pat = r"\$\{([A-Z][A-Z0-9_]*):?[-=+?]"
                elif f.endswith(".py"):
                    pat = r"environ(?:\.get\(|\[)\s*[\"']([A-Z][A-Z0-9_]*)"
                else:
                    continue
                with open(path, encoding="utf-8", errors="replace") as fh:
                    names.update(re.findall(pat, fh.read()))
    binary = s2hc
    with open(s2hc, "rb") as fh:
        head = fh.read(4096)
    if head.startswith(b"#!"):
        m = re.search(rb"^exec +'?([^'\s]+)'?", head, re.M)
        binary = m.group(1).decode() if m else binary
    rc, out = run(["ldd", binary]) if os.path.exists(binary) else (1, "")
    for lib in re.findall(r"=> (/\S+)", out) if rc == 0 else []:
        if re.search(r"lib(gomp|omp|openblas|blas|cblas)", os.path.basename(lib)):
            with open(lib, "rb") as fh:
                names.update(n.decode() for n in re.findall(rb"\0((?:OMP|GOMP|OPENBLAS|GOTO|KMP)_[A-Z0-9_]+)\0", fh.read()))
    return names


def flow_keys(text, depth):
    """The keys of the flow mappings in TEXT (a line of YAML, inside DEPTH open brackets
    when it starts): [(key, depth)], the depth counting the { and [ around the key; and the
    depth where the line ends. Quoted text is skipped."""
    keys = []
    i = 0
    at_key = False
    while i < len(text):
        c = text[i]
        if c in "'\"":
            j = text.find(c, i + 1)
            i = len(text) if j < 0 else j + 1
            at_key = False
            continue
        if c in "{[":
            depth += 1
            at_key = c == "{"
        elif c in "}]":
            depth = max(depth - 1, 0)
            at_key = False
        elif c == ",":
            at_key = True
        elif not c.isspace():
            m = re.match(r"([a-z][a-z0-9_.]*)\s*:", text[i:]) if at_key else None
            at_key = False
            if m:
                keys.append((m.group(1), depth))
                i += m.end()
                continue
        i += 1
    return keys, depth


def edits(a, b):
    """The edit distance of A and B: insertions, deletions, substitutions and swaps of
    two neighbouring letters (trian for train is one)."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


def without_examples(text):
    """A --help's text without its examples (the "example(s):" line and the indented
    lines after it), which help_examples checks against the rest."""
    out, in_ex = [], False
    for line in text.split("\n"):
        if re.match(r"^examples?:", line):
            in_ex = True
            continue
        if in_ex and line.startswith("  "):
            continue
        in_ex = False
        out.append(line)
    return "\n".join(out)


def options_in(text):
    return [m.group(1) for m in re.finditer(r"(?<![\w-])(--?[A-Za-z][A-Za-z0-9_-]*)", text)]


def make_database(args=("-f", "Makefile")):
    """The targets and variables of make ARGS (-f FILE, VAR=VALUE), from make -qp's
    database. Its goal is one no rule makes: -q still runs the recipe lines that call
    $(MAKE) of the goal it is given (make test's, the default goal's). The make a reader
    types in a shell: not the one of `make test SAN=1` that runs this (its MAKEFLAGS, and
    the variables of its command line, which make exports, would name build-san's
    targets, not build's)."""
    env = dict(os.environ)
    flags = env.get("MAKEFLAGS", "")
    if " -- " in f" {flags} ":  # MAKEFLAGS ends in " -- VAR=VALUE ...", a space in a value after a backslash
        for name in re.findall(r"(?:^|(?<!\\)\s)([A-Za-z_][A-Za-z0-9_]*)=", f" {flags} ".split(" -- ", 1)[1]):
            env.pop(name, None)
    for name in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"):
        env.pop(name, None)
    p = subprocess.run(["make", "-qp"] + list(args) + [".doc-commands-no-goal"], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True, env=env)
    targets, variables = set(), set()
    not_target = False
    lines = p.stdout.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("# Not a target:"):
            not_target = True
            continue
        if line.startswith("#") or line.startswith("\t") or line == "":
            if line == "":
                not_target = False
            continue
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*) *(?::=|\?=|=|\+=|!=)", line)
        if m and i > 0 and lines[i - 1].startswith("# makefile"):
            variables.add(m.group(1))
            continue
        m = re.match(r"^([^:=#\s][^:=#]*?):(?![=:])", line)
        if m:
            if not not_target:
                targets.update(m.group(1).split())
            not_target = False
    # a variable the makefiles only read ($(TESTS), ifeq ($(SAN),1)) is one too
    for path in ["Makefile"] + sorted(os.path.join("mk", f) for f in os.listdir("mk")):
        if path.endswith(".mk") or path == "Makefile":
            for line in open(path, encoding="utf-8"):
                if not line.lstrip().startswith("#"):
                    variables.update(re.findall(r"\$[({]([A-Za-z_][A-Za-z0-9_]*)[)}]", line))
    return targets, variables


LIST_ITEM = re.compile(r"^( *)([-*+]|\d{1,9}[.)])( +|$)")


def list_item(line):
    """The column where a list item's content starts, for a line that opens one
    (CommonMark: the marker's indentation, the marker and the 1-4 spaces after it; one
    space when more follow, which begin an indented code block inside the item), or None.
    A thematic break (- - -, ***) opens none."""
    m = LIST_ITEM.match(line)
    if not m or re.fullmatch(r" *([-*_])( *\1){2,} *", line):
        return None
    spaces = len(m.group(3))
    return len(m.group(1)) + len(m.group(2)) + (spaces if 1 <= spaces <= 4 else 1)


def spans(para):
    """The `inline` code spans of a paragraph, [(line, text)] -> [(line, span, 'inline')]:
    a span may run over a line break, and is then one line, at the line it starts on."""
    if not para:
        return []
    text = "\n".join(l for _, l in para)
    starts = []
    off = 0
    for n, l in para:
        starts.append((off, n))
        off += len(l) + 1
    out = []
    for m in re.finditer(r"(`+)(.+?)\1", text, re.S):
        n = [s for s in starts if s[0] <= m.start(2)][-1][1]
        out.append((n, m.group(2).replace("\n", " "), "inline"))
    return out


# The first word of a command line (beside s2hc and make): a shell keyword, a launcher.
COMMAND_WORDS = {"for", "do", "if", "then", "while", "cd", "env", "time", "nohup", "sudo", "exec",
                 "mpirun", "mpiexec", "srun", "sbatch", "bash", "sh", "python3", "gnuplot", "h5dump"}


def comment_segments(path):
    """The code in the comments of a YAML file or a makefile (experiments/*.yaml's usage
    lines, mk/*.mk's headers), as segments gives a markdown file's: after a comment's `#`
    and its space, a line indented two spaces or more is a command line, up to a run of
    two spaces or more (its description, aligned in a column, and a line indented deeper
    than the command lines above it, which continues one, are prose); the rest is prose,
    whose `inline` spans are code. A block of such lines whose first words are not all
    commands (s2hc, make, a path, a shell word: `#   identity     fixed H_res = I` then
    `#   s2hc expm    the core ...`) is a table of names, kind 'table': an s2hc at a row's
    start is a name there (the method, `s2hc expm`) unless a command of s2hc's follows, or
    the word after it is a command misspelled (`s2hc trian`), or the row goes on as a
    command line (an option, a path, a file: `s2hc fold runs/x --step 5`): then it is
    checked as a command (Checker.s2hc_calls); a make line in it is checked as any."""
    out, para, rows = [], [], []
    block = None    # the indentation of the current block's command lines

    def flush_rows():
        table = any(not re.match(r"(\S*/)?s2hc$|make$|\S*/|[A-Za-z_]\w*=", w) and w not in COMMAND_WORDS
                    for _, cmd in rows for w in cmd.split()[:1])
        out.extend((n, cmd, "table" if table else "code") for n, cmd in rows)
        rows.clear()

    for i, line in enumerate(open(path, encoding="utf-8").read().split("\n"), 1):
        m = re.match(r"^\s*#(?![!#])( ?)(.*)$", line)
        text = m.group(2).rstrip() if m else ""
        if not text.strip():
            out.extend(spans(para))
            para.clear()
            flush_rows()
            block = None
            continue
        indent = len(text) - len(text.lstrip(" "))
        if indent < 2 or (block is not None and indent > block):
            if indent < 2:
                flush_rows()
                block = None
            para.append((i, text.strip()))
            continue
        if block is not None and indent < block:
            flush_rows()
        block = indent
        # the command: up to two spaces or more outside quotes
        cmd, q = text.strip(), None
        for k, c in enumerate(cmd):
            if q:
                q = None if c == q else q
            elif c in "'\"":
                q = c
            elif cmd.startswith("  ", k):
                cmd, desc = cmd[:k], cmd[k:].strip()
                para.append((i, desc))
                break
        rows.append((i, cmd))
    out.extend(spans(para))
    flush_rows()
    return out


def segments(path):
    """The code of a markdown file: (line, text, kind), kind 'inline', 'code', 'yaml'
    or 'other' (a fenced block, ``` or ~~~, in another language: python).
    An indented code block is one as CommonMark reads it: four spaces past the content
    column of the list item the line is in (`- item` then a paragraph indented four spaces
    is the item's second paragraph; six spaces make code), and never a line that continues
    a paragraph."""
    out = []
    lines = open(path, encoding="utf-8").read().split("\n")
    fence = marker = None
    in_indent = False
    prev_blank = True
    in_para = False   # the previous line was a paragraph's: the next may continue it lazily
    items = []        # the content columns of the list items open at this line, innermost last
    para = []

    def flush():
        out.extend(spans(para))
        para.clear()

    pending = None  # a code line ending in \ with its successors
    for i, line in enumerate(lines, 1):
        line = line.expandtabs(4)
        m = re.match(r"^\s*(```|~~~)\s*([\w-]*)", line)
        if m and (fence is None or m.group(1) == marker):
            flush()
            if fence is None:
                marker, lang = m.group(1), m.group(2)
                fence = "yaml" if lang == "yaml" else "code" if lang in SHELL_LANGS else "other"
            else:
                fence = None
            in_para = False
            continue
        code_kind = None
        if fence is not None:
            code_kind = fence
        elif line.strip() == "":
            flush()
            prev_blank = True
            in_para = False
            continue
        else:
            indent = len(line) - len(line.lstrip(" "))
            opens = list_item(line.lstrip(" ")) is not None
            # a line less indented than an item's content leaves it, unless it continues
            # the item's paragraph (a lazy continuation line)
            if not in_para or opens or re.match(r" *(#|>|\||```|~~~)", line):
                while items and indent < items[-1]:
                    items.pop()
            base = items[-1] if items else 0
            if indent - base >= 4 and (prev_blank or in_indent) and not in_para:
                flush()
                in_indent = True
                code_kind = "code"
            elif 0 <= indent - base < 4:
                w = list_item(line[base:])
                if w is not None:
                    flush()
                    items.append(base + w)
        if code_kind is not None:
            if code_kind == "code" and pending is not None:
                pending[1] += " " + line.strip()
            elif code_kind == "code":
                pending = [i, line]
            else:
                out.append((i, line, code_kind))
            if code_kind == "code" and not line.rstrip().endswith("\\"):
                out.append((pending[0], pending[1].replace("\\ ", " "), "code"))
                pending = None
            prev_blank = False
            continue
        in_indent = False
        prev_blank = False
        in_para = True
        para.append((i, line))
    flush()
    return out


def shell_words(text):
    """(word, quoted) pairs of a command line up to where the command ends (a pipe, a
    redirection, ;, &&, a comment, a closing parenthesis it did not open).
    Inside [...] (a usage line's optional parts) | separates alternatives, not commands."""
    words, cur, quoted, started = [], "", False, False
    depth = paren = 0
    i = 0
    while i < len(text):
        c = text[i]
        if c in "'\"":
            j = text.find(c, i + 1)
            if j < 0:
                j = len(text)
            cur += text[i + 1:j]
            quoted = started = True
            i = j + 1
            continue
        if c == "\\" and i + 1 < len(text):
            cur += text[i + 1]
            started = True
            i += 2
            continue
        if c.isspace():
            if started:
                words.append((cur, quoted))
            cur, quoted, started = "", False, False
            i += 1
            continue
        if not started and depth == 0 and (text.startswith(("&&", "||", ";", "&", ">", "<", "#", "`"), i)
                                           or (c == "|" and (i + 1 == len(text) or text[i + 1].isspace()))
                                           or re.match(r"\d>", text[i:])):
            return words
        if c == ")" and paren == 0 and depth == 0:
            if started:
                words.append((cur, quoted))
            return words
        if c == ">" and depth == 0:
            if started:
                words.append((cur, quoted))
            return words
        depth += (c == "[") - (c == "]")
        depth = max(depth, 0)
        paren += (c == "(") - (c == ")")
        cur += c
        started = True
        i += 1
    if started:
        words.append((cur, quoted))
    return words


def command_row(args):
    """Whether the shell words ARGS after `s2hc WORD` in a table of names are a command's
    arguments: an option (-j, --step), a path (runs/x) or a file's name (g.yaml); a name's
    words are plain ones (`s2hc expm`, `s2hc exact init`)."""
    for word, quoted in args:
        if quoted:
            continue
        if OPT_RE.match(word) or "/" in word or re.fullmatch(r"[A-Za-z_]\w*=.*", word, re.S):
            return True
        ext = re.fullmatch(r"[\w.+-]+\.([A-Za-z0-9]+)", word)
        if ext and ext.group(1) in FILE_EXTS:
            return True
    return False


# Where a command starts: a line's or a span's start, after a shell operator, a shell
# keyword or a launcher (nohup, env VAR=..., mpirun -np 4), and any VAR=... before it.
COMMAND_POS = re.compile(r"(?:^|&&|\|\||[;|(`]|\$\(|(?<![\w-])(?:do|then|else|time|nohup|exec|sudo|xargs|env"
                         r"|(?:mpirun|mpiexec|srun)(?:\s+(?:-\S+|\d+))*))(?:\s*[A-Za-z_]\w*=\S*)*\s*$")


class Checker:
    def __init__(self, prog):
        self.p = prog
        self.errors = []
        self.said = set()

    def err(self, where, what):
        self.errors.append(f"{where}: {what}")

    # --- config keys -------------------------------------------------------------
    def key(self, where, key, how):
        if key not in self.p.keys and (where, key) not in self.said:
            self.said.add((where, key))  # once a line: --set train.lrr=1 is a dotted key too
            near = [k for k in sorted(self.p.keys) if k.split(".")[0] == key.split(".")[0]
                    and (k.split(".")[1].startswith(key.split(".")[1][:3]))]
            hint = f" (nearest: {', '.join(near[:3])})" if near else ""
            self.err(where, f"{how} '{key}' is no config key (s2hc config){hint}")

    def near_section(self, word):
        """The config section WORD misspells (one edit from a section of up to five letters,
        two from a longer one; a swap of two neighbours is one), or None."""
        if word in self.p.sections:
            return None
        for sec in sorted(self.p.sections):
            if edits(word, sec) <= (1 if len(sec) <= 5 else 2):
                return sec
        return None

    def near_leaf(self, sec, name):
        """Whether NAME is, or is one or two edits from, a key of section SEC: a misspelled
        section before a real key (`trian.steps`), not any word one letter from a section
        before a dot (`mode.x`, `runs.csv`, `date.now`)."""
        return any(edits(name, k.split(".", 1)[1]) <= (1 if len(name) <= 5 else 2)
                   for k in self.p.keys if k.split(".", 1)[0] == sec)

    def dotted_keys(self, where, text):
        for m in KEY_RE.finditer(text):
            sec, name = m.group(1), m.group(2)
            if name in FILE_EXTS:
                continue
            if sec in self.p.sections:
                self.key(where, f"{sec}.{name}", "key")
            elif self.near_section(sec) and self.near_leaf(self.near_section(sec), name) \
                    and (where, sec) not in self.said:
                self.said.add((where, sec))
                self.err(where, f"key '{sec}.{name}': no config section '{sec}' "
                         f"(did you mean '{self.near_section(sec)}.{name}'? s2hc config)")

    # --- s2hc invocations -----------------------------------------------------------
    def s2hc_calls(self, where, text, commands=True, table=False):
        """Check each s2hc command line of TEXT. commands=False: prose or a table of
        names, where an s2hc at a command's position followed by no command of s2hc's is
        the method's name (`s2hc expm`); in a table (table=True) it is a command all the
        same, and an error, where its word is one of s2hc's commands misspelled or its row
        goes on as a command line (command_row)."""
        for m in re.finditer(r"(?:(?<=[\s;|&(`$=\"'])|^)(\.?[\w./-]*/)?s2hc(?=\s)", text):
            if re.search(r"(?:^|\s)[A-Za-z_]\w*=\S*$", text[:m.start() + len(m.group(1) or "")]):
                continue  # S2HC_BIN=$PWD/bin/s2hc bash ...: a value, not a command
            rest = text[m.end():]
            words = shell_words(rest)
            if not words:
                continue
            cmd, quoted = words[0]
            at_command = commands and (bool(m.group(1)) or COMMAND_POS.search(text[:m.start()]) is not None)
            if quoted or not re.fullmatch(r"[a-z][a-z0-9-]*", cmd):
                continue  # s2hc COMMAND --help, s2hc --help, a placeholder
            if cmd not in self.p.commands:
                if at_command or (table and (bool(m.group(1)) or COMMAND_POS.search(text[:m.start()]))
                                  and (self.near_command(cmd) or command_row(words[1:]))):
                    self.err(where, f"s2hc {cmd}: no such command (s2hc --help)")
                continue  # prose that names the method: "s2hc at n = 4"
            self.invocation(where, cmd, words[1:])

    def near_command(self, word):
        """Whether WORD misspells one of s2hc's commands: one edit from a command of up to
        five letters (`evl`, `trian`), two from a longer one (`reprot`, `inpsect`)."""
        return any(edits(word, c) <= (1 if len(c) <= 5 else 2) for c in self.p.commands)

    def invocation(self, where, cmd, args):
        sub = None
        subs = self.p.commands[cmd]
        if cmd == "help":
            if args and re.fullmatch(r"[a-z][a-z0-9-]*", args[0][0]) and args[0][0] not in self.p.commands:
                self.err(where, f"s2hc help {args[0][0]}: no such command")
            return
        if subs:
            if not args or not re.fullmatch(r"[a-z][a-z0-9-]*", args[0][0]):
                return  # s2hc data ... in prose: the group itself
            sub = args[0][0]
            if sub not in subs:
                self.err(where, f"s2hc {cmd} {sub}: no such command (s2hc {cmd} takes {', '.join(sorted(subs))})")
                return
            args = args[1:]
        name = self.p.help_name(cmd, sub)
        self.options(where, f"s2hc {name}", self.p.opts[name] | self.p.global_opts, args,
                     self.p.helps[name])

    def options(self, where, prog, known, args, help_text, help_cmd=None):
        """Check the options among ARGS (shell words) against KNOWN, --set's keys too."""
        pseudo = set(re.findall(r"KEY may be `(\w+)`", help_text))
        i = 0
        while i < len(args):
            word = args[i][0]
            if word == "--":
                return
            stripped = word.lstrip("[(")
            m = OPT_RE.match(stripped)
            if m and not args[i][1]:  # a quoted word is a value: --prompt '-x'?
                opt = m.group(0)
                if opt not in known:
                    self.err(where, f"{prog}: no option {opt} ({help_cmd or prog} --help)")
                elif opt == "--set":
                    value = stripped[len(opt) + 1:] if stripped.startswith(opt + "=") else \
                        (args[i + 1][0] if i + 1 < len(args) else "")
                    key = value.split("=", 1)[0]
                    if re.fullmatch(r"[a-z][a-z0-9_]*\.[a-z_][a-z0-9_]*", key):
                        self.key(where, key, "--set")
                    elif re.fullmatch(r"[a-z][a-z0-9_]*", key) and key not in pseudo:
                        self.err(where, f"{prog}: --set {key}: no config key (s2hc config)")
            i += 1

    # --- make -------------------------------------------------------------------
    def make_calls(self, where, text):
        for m in re.finditer(r"(?:(?<=[\s;|&(`])|^)make(?=\s)", text):
            if not COMMAND_POS.search(text[:m.start()]) and not re.search(r"(sudo|env|time)\s+$", text[:m.start()]):
                continue
            words = shell_words(text[m.end():])
            # -f FILE and VAR=VALUE make other targets (a build folder's files): a target
            # not in the Makefile's is looked up in the database of make with these
            own = [w for k, (w, _) in enumerate(words) if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w, re.S)
                   or w == "-f" or (k > 0 and words[k - 1][0] == "-f")]
            if "-f" not in own:
                own = ["-f", "Makefile"] + own
            skip = False
            for word, quoted in words:
                if skip or (skip is None and word.isdigit()):
                    skip = False
                    continue  # the value of -C DIR, -f FILE, -j N (N optional)
                skip = {"-C": True, "-f": True, "-o": True, "-W": True, "-j": None}.get(word, False)
                if skip is not False:
                    continue
                if word.startswith("-"):
                    # make's one-letter options take their value attached too: -j2
                    opt = word.split("=")[0] if word.startswith("--") else word[:2]
                    if re.fullmatch(r"--?[A-Za-z][\w-]*", opt) and opt not in self.p.make_opts:
                        self.err(where, f"make {word}: no option {opt} of make (make --help); "
                                 "a program's options go in its variable (FRAME_ARGS=..., mk/bench.mk)")
                    continue
                v = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", word, re.S)
                if v:
                    var, value = v.group(1), v.group(2)
                    if var not in self.p.make_vars and var not in self.p.env:
                        self.err(where, f"make {var}=: no such variable in the makefiles, nor one "
                                 "the programs read from the environment")
                    elif var == "TESTS":
                        for t, _ in shell_words(value):
                            if t not in self.p.tests:
                                self.err(where, f"make TESTS=: no test {t} (tests/run.sh's names)")
                    elif var in ARGS_VARS:
                        prog = ARGS_VARS[var]
                        if prog not in self.p.helps:
                            self.err(where, f"make {var}=: no {prog} built to check it against")
                        else:
                            self.options(where, f"make {var}=", self.p.opts[prog], shell_words(value),
                                         self.p.helps[prog], "s2hc bench" if prog == "bench" else prog)
                    continue
                if re.fullmatch(r"[A-Z_]+|\.\.\.|…", word) or not re.fullmatch(r"[\w./%+-]+", word):
                    break   # a placeholder (make TARGET), or no longer make's words
                if word not in self.p.targets and word not in self.p.make_targets(own):
                    self.err(where, f"make {word}: no such target (Makefile, mk/*.mk)")

    # --- an option alone ---------------------------------------------------------
    def lone_option(self, where, text):
        words = shell_words(text)
        if not words or words[0][1]:
            return
        m = OPT_RE.match(words[0][0])
        if not m:
            return
        opt = m.group(0)
        if any(re.match(r"-[A-Za-z][A-Za-z0-9]", w) for w, _ in words):
            return
        if opt in OTHER_TOOL_OPTIONS or opt in self.p.global_opts:
            return
        if not any(opt in o for o in self.p.opts.values()):
            self.err(where, f"`{text}`: {opt} is no s2hc command's option (nor frame_bench's, layout_bench's)")

    # --- YAML blocks --------------------------------------------------------------
    def yaml(self, where_of, lines):
        """A YAML block: a grid file when a top-level key is one of a grid's that no config
        section is (sweep:, set:, slurm:, ...), whose keys are then checked against those
        `s2hc grid` takes (at the top, in slurm: and in override: entries), else a config
        file when a top-level key is a config section or a misspelling of one, whose
        top-level keys are then sections. Either way, the keys nested in a section (and
        flow-style `{key: v}`) and the dotted `section.key`s are config keys."""
        tops = {m.group(1) for _, line in lines for m in [re.match(r"^([a-z][a-z0-9_]*):", line)] if m}
        grid = bool(tops & (self.p.grid_keys["top"] - self.p.sections))
        config = not grid and any(t in self.p.sections or self.near_section(t) for t in tops)
        section = block = None
        indent = entry = None
        want = 1    # the depth of a slurm: or override entry's keys in a flow mapping
        depth = 0   # of a flow mapping or list over lines ({ and [) in the current top-level value
        for n, line in lines:
            body = re.sub(r"\s+#.*$", "", line)
            if re.match(r"^\s*#", line) or body.strip() == "":
                continue
            where = where_of(n)
            m = re.match(r"^([a-z][a-z0-9_]*):\s*(.*)$", body)
            if m and depth == 0:
                top, value = m.group(1), m.group(2)
                if grid and top not in self.p.grid_keys["top"]:
                    self.err(where, f"'{top}:' is no grid file's key (s2hc grid takes "
                             f"{', '.join(sorted(self.p.grid_keys['top']))}; config keys go under set: or sweep:)")
                elif config and top not in self.p.sections:
                    near = self.near_section(top)
                    hint = f"did you mean '{near}'? s2hc config" if near else "s2hc config lists them"
                    self.err(where, f"'{top}:' is no config section ({hint})")
                section = top if top in self.p.sections else None
                block, indent, entry = top, None, None
                if section and value.startswith("{"):
                    for k, _ in flow_keys(value, 0)[0]:
                        self.key(where, f"{section}.{k}", "key")
                if grid and block in ("slurm", "override"):
                    want = 1 if block == "slurm" else 2  # {partition: ...}, [{when: ..., set: ...}]
                    keys, depth = flow_keys(value, 0)
                    self.grid_entry_keys(where, block, [k for k, d in keys if d == want])
                self.dotted_keys(where, body)
                continue
            if grid and block in ("slurm", "override"):
                if depth > 0:
                    keys, depth = flow_keys(body, depth)
                    self.grid_entry_keys(where, block, [k for k, d in keys if d == want])
                else:
                    m = re.match(r"^(\s*)(- +)?([a-z][a-z0-9_]*):(?:\s+(.*)|$)", body)
                    if m and block == "slurm" and not m.group(2):
                        if indent is None:
                            indent = len(m.group(1))
                        if len(m.group(1)) == indent:
                            self.grid_entry_keys(where, block, [m.group(3)])
                    elif m and block == "override":
                        if m.group(2):
                            entry = len(m.group(1)) + len(m.group(2))
                        if len(m.group(1)) + len(m.group(2) or "") == entry:
                            self.grid_entry_keys(where, block, [m.group(3)])
                    elif block == "override":
                        m = re.match(r"^(\s*)- +(\{.*)$", body)
                        if m:
                            want = 1
                            keys, depth = flow_keys(m.group(2), 0)
                            self.grid_entry_keys(where, block, [k for k, d in keys if d == want])
            m = re.match(r"^(\s+)([a-z][a-z0-9_]*):", body)
            if section and m:
                if indent is None:
                    indent = len(m.group(1))
                if len(m.group(1)) == indent:
                    self.key(where, f"{section}.{m.group(2)}", "key")
            self.dotted_keys(where, body)

    def grid_entry_keys(self, where, block, keys):
        for k in keys:
            if k not in self.p.grid_keys[block]:
                self.err(where, f"{block}: '{k}' is no key of a grid's {block}: "
                         f"(s2hc grid takes {', '.join(sorted(self.p.grid_keys[block]))})")

    def doc(self, path):
        yaml_block = []
        segs = segments(path) if path.endswith(".md") else comment_segments(path)
        for k, (n, text, kind) in enumerate(segs):
            where = f"{path}:{n}"
            if kind == "yaml":
                yaml_block.append((n, text))
                last = k + 1 == len(segs) or segs[k + 1][2] != "yaml" or segs[k + 1][0] != n + 1
                if last:
                    self.yaml(lambda ln: f"{path}:{ln}", yaml_block)
                    yaml_block = []
                continue
            if kind == "other":
                continue
            line = text.replace("`", " ") if kind in ("code", "table") else text
            self.s2hc_calls(where, line, kind != "table", kind == "table")
            # a table of names has no `make` name: its make lines are commands, checked
            self.make_calls(where, line)
            # program output quotes the user's keys, misspelled ones too: 'train.lrr'
            if not re.match(r"\s*s2hc: (error|warning):", text):
                self.dotted_keys(where, line)
            if kind == "inline":
                self.lone_option(where, text)

    def help_examples(self):
        done = set()
        helps = [("s2hc --help", self.p.top)] + [
            (f"{name} --help" if name in ("frame_bench", "layout_bench") else f"s2hc {name.split()[0]} --help", text)
            for name, text in sorted(self.p.helps.items())]
        for label, text in helps:
            if text in done:
                continue  # data's subcommands share one help
            done.add(text)
            lines = text.split("\n")
            in_ex = False
            for n, line in enumerate(lines, 1):
                if re.match(r"^examples?:", line):
                    in_ex = True
                    continue
                if in_ex and line.startswith("  "):
                    where = f"{label}:{n}"
                    self.s2hc_calls(where, line.strip())
                    self.make_calls(where, line.strip())
                elif in_ex:
                    in_ex = False


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__.split("\n\n")[1])
    prog = Program(sys.argv[1], sys.argv[2])
    c = Checker(prog)
    for path in sys.argv[3:]:
        c.doc(path)
    c.help_examples()
    for e in c.errors:
        print(e)
    print(f"doc_commands: {len(c.errors)} mismatches in {len(sys.argv) - 3} files and the commands' --help")
    return 1 if c.errors else 0


if __name__ == "__main__":
    sys.exit(main())
