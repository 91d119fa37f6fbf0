#!/usr/bin/env python3
"""doc_commands.py: the command lines the docs show, checked against the program.

    python3 tests/cli/doc_commands.py S2HC_BIN BUILD_DIR FILE.md...

Run from the repository root (docs_cli.sh does, for README.md and docs/*.md). It reads
the code of each file (fenced and indented blocks, and `inline` spans, which may run
over a line break) and checks:

  - every `s2hc COMMAND ...` / `bin/s2hc COMMAND ...`: COMMAND (and data's SUBCOMMAND)
    is one `s2hc --help` lists, and every -o/--option it uses appears in
    `s2hc COMMAND --help` or `s2hc --help`; a --set KEY is a key `s2hc config` lists
    (or a pseudo-key the command's help names: grid's `preset`);
  - every config key written as `section.key` (in backticks, a code block or a YAML
    block's nested or dotted keys) where `section` is one `s2hc config` lists;
  - every `make TARGET VAR=...`: TARGET is a target of the Makefile (make -qp's
    database, which runs no recipe), VAR a variable the makefiles set or read, and the
    options in BENCH_ARGS / FRAME_ARGS / LAYOUT_ARGS appear in the --help of the
    program that variable goes to, and TESTS names tests of tests/run.sh;
  - an option alone in backticks (`--extend`, `--ood LIST`) is some s2hc command's;
  - the examples of `s2hc --help`, of every command's and of the tools', likewise.

Each mismatch is printed as FILE:LINE: what is wrong; the exit is 1 if there is any.
Only --help, config and make -qp are run: no corpus, no run."""
import concurrent.futures
import os
import re
import shlex
import subprocess
import sys

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
             "safetensors", "lock", "tmp"}
# A fenced block's languages whose lines are command lines (``` or ~~~ alone: the docs'
# habit); a block in another (python, c, text) is not checked.
SHELL_LANGS = {"", "sh", "bash", "shell", "console", "shell-session", "zsh"}
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

    def help_name(self, cmd, sub):
        return cmd if sub is None else f"{cmd} {sub}"

    def make_targets(self, args):
        """The targets of make ARGS (-f FILE, VAR=VALUE), its database read once."""
        key = tuple(args)
        if key not in self.make_dbs:
            self.make_dbs[key] = make_database(args)[0]
        return self.make_dbs[key]


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


def segments(path):
    """The code of a markdown file: (line, text, kind), kind 'inline', 'code', 'yaml'
    or 'other' (a fenced block, ``` or ~~~, in another language: python)."""
    out = []
    lines = open(path, encoding="utf-8").read().split("\n")
    fence = marker = None
    in_indent = False
    prev_blank = True
    para = []

    def flush():
        if not para:
            return
        text = "\n".join(l for _, l in para)
        starts = []
        off = 0
        for n, l in para:
            starts.append((off, n))
            off += len(l) + 1
        for m in re.finditer(r"(`+)(.+?)\1", text, re.S):
            n = [s for s in starts if s[0] <= m.start(2)][-1][1]
            out.append((n, m.group(2).replace("\n", " "), "inline"))
        para.clear()

    pending = None  # a code line ending in \ with its successors
    for i, line in enumerate(lines, 1):
        m = re.match(r"^\s*(```|~~~)\s*([\w-]*)", line)
        if m and (fence is None or m.group(1) == marker):
            flush()
            if fence is None:
                marker, lang = m.group(1), m.group(2)
                fence = "yaml" if lang == "yaml" else "code" if lang in SHELL_LANGS else "other"
            else:
                fence = None
            continue
        code_kind = None
        if fence is not None:
            code_kind = fence
        elif line.strip() == "":
            flush()
            prev_blank = True
            continue
        elif line.startswith("    ") and (prev_blank or in_indent):
            flush()
            in_indent = True
            code_kind = "code"
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


COMMAND_POS = re.compile(r"(?:^|&&|\|\||[;|(`]|\$\()\s*$")


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

    def dotted_keys(self, where, text):
        for m in KEY_RE.finditer(text):
            sec, name = m.group(1), m.group(2)
            if sec in self.p.sections and name not in FILE_EXTS:
                self.key(where, f"{sec}.{name}", "key")

    # --- s2hc invocations -----------------------------------------------------------
    def s2hc_calls(self, where, text):
        for m in re.finditer(r"(?:(?<=[\s;|&(`$=\"'])|^)(\.?[\w./-]*/)?s2hc(?=\s)", text):
            if re.search(r"(?:^|\s)[A-Za-z_]\w*=\S*$", text[:m.start() + len(m.group(1) or "")]):
                continue  # S2HC_BIN=$PWD/bin/s2hc bash ...: a value, not a command
            rest = text[m.end():]
            words = shell_words(rest)
            if not words:
                continue
            cmd, quoted = words[0]
            at_command = bool(m.group(1)) or COMMAND_POS.search(text[:m.start()]) is not None
            if quoted or not re.fullmatch(r"[a-z][a-z0-9-]*", cmd):
                continue  # s2hc COMMAND --help, s2hc --help, a placeholder
            if cmd not in self.p.commands:
                if at_command:
                    self.err(where, f"s2hc {cmd}: no such command (s2hc --help)")
                continue  # prose that names the method: "s2hc at n = 4"
            self.invocation(where, cmd, words[1:])

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
                    if var not in self.p.make_vars:
                        self.err(where, f"make {var}=: no such variable in the makefiles")
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
        section = None
        indent = None
        for n, line in lines:
            body = re.sub(r"\s+#.*$", "", line)
            if re.match(r"^\s*#", line) or body.strip() == "":
                continue
            m = re.match(r"^([a-z][a-z0-9_]*):\s*(.*)$", body)
            if m:
                section = m.group(1) if m.group(1) in self.p.sections else None
                indent = None
                if section and m.group(2).startswith("{"):
                    for k in re.findall(r"[{,]\s*([a-z][a-z0-9_]*)\s*:", m.group(2)):
                        self.key(where_of(n), f"{section}.{k}", "key")
                self.dotted_keys(where_of(n), body)
                continue
            m = re.match(r"^(\s+)([a-z][a-z0-9_]*):", body)
            if section and m:
                if indent is None:
                    indent = len(m.group(1))
                if len(m.group(1)) == indent:
                    self.key(where_of(n), f"{section}.{m.group(2)}", "key")
            self.dotted_keys(where_of(n), body)

    def doc(self, path):
        yaml_block = []
        segs = segments(path)
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
            line = text.replace("`", " ") if kind == "code" else text
            self.s2hc_calls(where, line)
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
