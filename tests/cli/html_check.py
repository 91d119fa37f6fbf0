#!/usr/bin/env python3
"""html_check.py: read `s2hc report`'s page as a browser would, strictly.

  html_check.py OUT            check OUT/index.html; print one line per problem, exit 1 if any
  html_check.py OUT --text     print the page's text (entities decoded), for grep
  html_check.py OUT --tables   check every table <table id="tbl-X"> of the page against
                               OUT/tables/X.csv, cell by cell (header row included)
  html_check.py OUT --missing  print the stem of each figure the page says was not drawn
  html_check.py OUT --pages F...  check each OUT/F instead of OUT/index.html (copies with a
                               fault planted, beside the files they link to): "F: problem"

The page is well formed: one <!DOCTYPE html>, <html>, <head>, <body>; a charset and a
non-empty title; every element closed (no end tag left to the parser's guesses) and
nested right; every attribute quoted; no duplicate ids; each '&' starts a character
reference; only the elements the report writes. Every href and src is a fragment naming
an id of the page or a relative path, inside OUT, to a file there (nothing absolute,
nothing fetched from the network). Every <img> has alt text that says what it shows
(words, not the file's stem). Every table has header cells in a <thead>.
Python's standard library only.
"""
import csv
import html
import html.parser
import os
import re
import sys

VOID = {"meta", "br", "img", "hr", "link", "input", "col", "wbr", "source"}
# what the report writes; a tag outside this list is most likely a user's string unescaped
KNOWN = VOID | {"html", "head", "body", "title", "style", "h1", "h2", "h3", "p", "nav", "a", "b", "i", "code",
                "figure", "figcaption", "table", "thead", "tbody", "tr", "th", "td", "span", "div", "ul", "li"}
ATTR = re.compile(r'\s+([a-zA-Z_:][-a-zA-Z0-9_:.]*)(\s*=\s*("[^"]*"|\'[^\']*\'|[^\s"\'>]+))?')
ENTITY = re.compile(r'&(#[0-9]+;|#[xX][0-9a-fA-F]+;|[A-Za-z][A-Za-z0-9]*;)?')


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.problems, self.stack, self.ids, self.counts = [], [], {}, {}
        self.title, self.charset, self.doctype = "", False, 0
        self.refs = []  # (attribute, value, line)
        self.imgs = []  # (src, alt, line)
        self.text = []
        self.tables = {}  # id -> rows of cells (header row first)
        self.cur_table = None
        self.cell = None
        self.table_has_th = {}
        self.in_thead = False
        self.missing = []  # stems of figures the page says were not drawn
        self.in_missing = None

    def bad(self, what):
        self.problems.append("line %d: %s" % (self.getpos()[0], what))

    def handle_decl(self, decl):
        if decl.lower() == "doctype html":
            self.doctype += 1
        else:
            self.bad("unexpected declaration <!%s>" % decl)

    def start(self, tag, attrs):
        raw = self.get_starttag_text() or ""
        m = re.match(r"<[a-zA-Z0-9]+", raw)
        rest = raw[m.end():].rstrip(">").rstrip("/") if m else ""
        pos = 0
        while pos < len(rest.rstrip()):
            a = ATTR.match(rest, pos)
            if not a:
                self.bad("<%s>: cannot read its attributes: %r" % (tag, raw))
                break
            if a.group(2) and a.group(3)[0] not in "\"'":
                self.bad("<%s>: attribute %s unquoted: %r" % (tag, a.group(1), raw))
            pos = a.end()
        if tag not in KNOWN:
            self.bad("unexpected element <%s> (an unescaped '<' in text?): %r" % (tag, raw))
        names = [k for k, _ in attrs]
        if len(names) != len(set(names)):
            self.bad("<%s>: an attribute twice: %r" % (tag, raw))
        d = dict(attrs)
        self.counts[tag] = self.counts.get(tag, 0) + 1
        if "id" in d:
            if d["id"] in self.ids:
                self.bad("duplicate id %r (first on line %d)" % (d["id"], self.ids[d["id"]]))
            else:
                self.ids[d["id"]] = self.getpos()[0]
        for k in ("href", "src"):
            if k in d:
                self.refs.append((k, d[k] or "", self.getpos()[0]))
        if tag == "meta" and (d.get("charset") or "").lower() == "utf-8":
            self.charset = True
        if tag == "img":
            self.imgs.append((d.get("src") or "", d.get("alt"), self.getpos()[0]))
        if tag == "table":
            if self.cur_table is not None:
                self.bad("a table inside a table")
            self.cur_table = d.get("id") or "(table without id, line %d)" % self.getpos()[0]
            self.tables[self.cur_table] = []
            self.table_has_th[self.cur_table] = False
        if tag == "thead":
            self.in_thead = True
        if tag == "tr" and self.cur_table is not None:
            self.tables[self.cur_table].append([])
        if tag in ("td", "th") and self.cur_table is not None:
            self.cell = []
            if tag == "th" and self.in_thead:
                self.table_has_th[self.cur_table] = True
            if tag == "td" and self.in_thead:
                self.bad("table %s: a data cell <td> among its header cells" % self.cur_table)
        if tag == "p" and "missing" in (d.get("class") or "").split():
            self.in_missing = []

    def handle_starttag(self, tag, attrs):
        self.start(tag, attrs)
        if tag not in VOID:
            self.stack.append((tag, self.getpos()[0]))

    def handle_startendtag(self, tag, attrs):
        self.start(tag, attrs)
        if tag not in VOID:
            self.bad("<%s/>: not a void element, closed by '/>'" % tag)

    def handle_endtag(self, tag):
        if tag in VOID:
            self.bad("end tag </%s> of a void element" % tag)
            return
        if not self.stack:
            self.bad("</%s> with nothing open" % tag)
            return
        top, line = self.stack[-1]
        if top != tag:
            self.bad("</%s> closes <%s> of line %d (misnested or unclosed)" % (tag, top, line))
            if any(t == tag for t, _ in self.stack):  # resynchronise as a browser would
                while self.stack and self.stack[-1][0] != tag:
                    self.stack.pop()
                self.stack.pop()
            return
        self.stack.pop()
        if tag in ("td", "th") and self.cell is not None and self.cur_table is not None:
            self.tables[self.cur_table][-1].append("".join(self.cell))
            self.cell = None
        if tag == "thead":
            self.in_thead = False
        if tag == "table":
            self.cur_table = None
        if tag == "p" and self.in_missing is not None:
            m = re.match(r"\s*([A-Za-z0-9_]+)\.png was not drawn", "".join(self.in_missing))
            if m:
                self.missing.append(m.group(1))
            self.in_missing = None

    def handle_data(self, data):
        if self.stack and self.stack[-1][0] == "title":
            self.title += data
        if self.stack and self.stack[-1][0] in ("style",):
            return
        self.text.append(data)
        if self.cell is not None:
            self.cell.append(data)
        if self.in_missing is not None:
            self.in_missing.append(data)


def check(out, page="index.html"):
    path = os.path.join(out, page)
    with open(path, encoding="utf-8") as f:  # not UTF-8: UnicodeDecodeError, a failure
        src = f.read()
    p = Page()
    p.feed(src)
    p.close()
    probs = p.problems
    for tag, line in p.stack:
        probs.append("line %d: <%s> never closed" % (line, tag))
    if p.doctype != 1:
        probs.append("%d <!DOCTYPE html> declarations, not 1" % p.doctype)
    for tag in ("html", "head", "body", "title"):
        if p.counts.get(tag, 0) != 1:
            probs.append("%d <%s> elements, not 1" % (p.counts.get(tag, 0), tag))
    if not p.charset:
        probs.append("no <meta charset=\"utf-8\">")
    if not p.title.strip():
        probs.append("an empty <title>")
    # a bare '&' outside a character reference (checked on the source, outside <style>)
    body = re.sub(r"<style>.*?</style>", "", src, flags=re.S)
    for m in ENTITY.finditer(body):
        ref = m.group(1)
        if not ref or (not ref.startswith("#") and html.unescape("&" + ref) == "&" + ref):
            line = body.count("\n", 0, m.start()) + 1
            probs.append("line %d: a bare '&' (not a character reference): %r" % (line, body[m.start():m.start() + 12]))
    root = os.path.realpath(out)
    for k, v, line in p.refs:
        if v.startswith("#"):
            if v[1:] not in p.ids:
                probs.append("line %d: %s=%r names no id of the page" % (line, k, v))
            continue
        if not v or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", v) or v.startswith("/") or v.startswith("\\"):
            probs.append("line %d: %s=%r is not a relative path (absolute, a URL, or empty)" % (line, k, v))
            continue
        target = os.path.realpath(os.path.join(out, html.unescape(v).split("#")[0]))
        if not (target + os.sep).startswith(root + os.sep):
            probs.append("line %d: %s=%r points outside the report's folder" % (line, k, v))
        elif not os.path.isfile(target) or os.path.getsize(target) == 0:
            probs.append("line %d: %s=%r: no such file (or empty) in %s" % (line, k, v, out))
    for s, alt, line in p.imgs:
        stem = os.path.splitext(os.path.basename(s))[0]
        if alt is None or len(alt.split()) < 3 or stem in alt:
            probs.append("line %d: <img src=%r>: alt %r does not say what it shows" % (line, s, alt))
    for t, has in p.table_has_th.items():
        if not has:
            probs.append("table %s has no header cells (<th> in <thead>)" % t)
    return p, probs


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 else ""
    if mode == "--pages":
        n = 0
        for page in sys.argv[3:]:
            for q in check(out, page)[1]:
                print("%s: %s" % (page, q))
                n += 1
        return 1 if n else 0
    p, probs = check(out)
    if mode == "--text":
        print(re.sub(r"\s+", " ", "".join(p.text)))
        return 0
    if mode == "--missing":
        print("\n".join(p.missing))
        return 0
    if mode == "--tables":
        n = 0
        for tid, rows in p.tables.items():
            if not tid.startswith("tbl-"):
                continue
            name = tid[4:]
            with open(os.path.join(out, "tables", name + ".csv"), newline="", encoding="utf-8") as f:
                want = list(csv.reader(f))
            if len(rows) != len(want):
                print("%s: %d rows on the page, %d in tables/%s.csv" % (name, len(rows), len(want), name))
                n += 1
                continue
            for r, (got_row, want_row) in enumerate(zip(rows, want)):
                if got_row != want_row:
                    print("%s row %d: page %r, csv %r" % (name, r, got_row, want_row))
                    n += 1
            print("table %s: %d rows x %d cells" % (name, len(rows), len(rows[0]) if rows else 0))
        return 1 if n else 0
    for q in probs:
        print(q)
    return 1 if probs else 0


if __name__ == "__main__":
    sys.exit(main())
