"""runtime/README.md's table of layers, held against the code: every file of
runtime/ sits in its layer's folder, includes only its layer's headers and
those of the layers it may use (and the public ones under runtime/include),
and so does every header, but for the breaks the README lists (issue 78).
Needs no build."""

import re
from pathlib import Path

from conftest import ROOT

RUNTIME = ROOT / "runtime"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def table():
    """[(layer, [headers], [files], may use: {layer})] in the README's
    order; may use is closed under itself ("the above": every layer above,
    "everything": all of them)."""
    rows = []
    for line in (RUNTIME / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("layer", "---"):
            continue
        headers = re.findall(r"`([\w/]+\.h)`", cells[1])
        files = [f for f in re.findall(r"`([\w/]+\.c)`", cells[2]) if (RUNTIME / f).exists()]
        rows.append([cells[0], headers, files, cells[3]])
    names = [r[0] for r in rows]
    for i, row in enumerate(rows):
        said = row[3]
        uses = set(names[:i]) if "the above" in said or "everything" in said else \
            {n for n in names[:i] if re.search(rf"\b{re.escape(n)}\b", said)}
        row[3] = uses
    for row in rows:   # closed: what a layer may use, it may use through
        grown = True
        while grown:
            more = set().union(*(r[3] for r in rows if r[0] in row[3])) if row[3] else set()
            grown = not more <= row[3]
            row[3] |= more
    return [tuple(r) for r in rows]


def allowed_headers(row, rows):
    """The headers a file of this layer may include: its own layer's and
    those of every layer it may use."""
    return set(row[1]).union(*(r[1] for r in rows if r[0] in row[3]))


def breaks():
    """{(file, header)} the README lists as breaks of the table."""
    text = (RUNTIME / "README.md").read_text()
    return set(re.findall(r"`([\w/]+\.c)` \(\w[\w ]*\) includes `([\w/]+\.h)`", text))


def sources(suffix):
    """Every file of the runtime's own with this suffix, as a path under
    runtime/ (the public headers under runtime/include left out)."""
    return sorted(str(p.relative_to(RUNTIME)) for p in RUNTIME.rglob(f"*{suffix}")
                  if p.relative_to(RUNTIME).parts[0] != "include")


def quoted_includes(path):
    """The runtime's own headers a file includes, as paths under runtime/
    (each layer's folder is on the include path; the public headers under
    runtime/include are left out)."""
    where = {Path(h).name: h for h in sources(".h")}
    return [where[h] for h in INCLUDE.findall(path.read_text()) if h in where]


def test_every_file_and_header_has_one_layer():
    rows = table()
    assert rows and rows[0][0] == "system"
    files = [f for r in rows for f in r[2]]
    assert sorted(files) == sources(".c"), "each .c in exactly one row"
    named = [h for r in rows for h in r[1]]
    assert sorted(set(named)) == sources(".h"), "each header in the table"
    assert len({Path(h).name for h in named}) == len(set(named)), "header names are unique"
    for r in rows:   # a layer's files and headers share its folder
        assert len({Path(f).parent for f in r[1] + r[2]}) == 1, r[0]


def test_files_include_their_own_layers_headers_and_those_it_may_use():
    rows, allowed = table(), breaks()
    wrong = []
    for row in rows:
        ok = allowed_headers(row, rows)
        for f in row[2]:
            wrong += [f"{f} ({row[0]}) includes {h}" for h in quoted_includes(RUNTIME / f)
                      if h not in ok and (f, h) not in allowed]
    assert not wrong, wrong


def test_headers_include_only_what_their_layer_may_use():
    rows = table()
    wrong = []
    for row in rows:
        ok = allowed_headers(row, rows)
        for h in row[1]:
            wrong += [f"{h} ({row[0]}) includes {inc}" for inc in quoted_includes(RUNTIME / h)
                      if inc not in ok or inc == h]
    assert not wrong, wrong


def test_the_layers_may_use_only_layers_above_them():
    rows = table()
    for i, row in enumerate(rows):
        assert row[3] <= {r[0] for r in rows[:i]}, row[0]


def test_the_listed_breaks_are_real():
    """A break the README lists that the code no longer has is struck from
    the list, so that the list stays the truth."""
    for f, h in breaks():
        assert h in quoted_includes(RUNTIME / f), f"README lists {f} including {h}, which it does not"


def without_comments(text):
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))


def definitions():
    """{name: file} of every function and variable of the runtime's own
    (`ch_` names) defined outside any header, where it is defined."""
    where = {}
    for f in sources(".c"):
        text = without_comments((RUNTIME / f).read_text())
        for m in re.finditer(r"^(?!static)[a-zA-Z_][\w \*]*?\b(ch_\w+)\s*\([^;]*?\)\s*\{", text, re.M):
            where[m.group(1)] = f
        for m in re.finditer(r"^(?!static|extern)[a-zA-Z_][\w \*]*?\b(ch_\w+)\s*(\[[^\]]*\])?\s*(=[^;]*)?;",
                             text, re.M):
            where.setdefault(m.group(1), f)
    return where


def same_layer_breaks():
    """{(file, file)} the README lists as files of one layer that call each
    other (`a/x.c` and `a/y.c`), both ways."""
    text = (RUNTIME / "README.md").read_text()
    pairs = set(re.findall(r"`(\w+/[\w/]+\.c)`\s+and\s+`(\w+/[\w/]+\.c)`", text))
    return pairs | {(b, a) for a, b in pairs}


def test_files_keep_their_layers_order():
    """A layer's files share its header, so no compiler holds them to an
    order: this does. A file uses (calls or reads) only what the files
    listed before it in its row define, so no two call each other, but for
    the pairs the README lists."""
    where, allowed = definitions(), same_layer_breaks()
    wrong = []
    for _, _, order, _ in table():
        for i, f in enumerate(order):
            text = without_comments((RUNTIME / f).read_text())
            for name in sorted(set(re.findall(r"\bch_\w+", text))):
                d = where.get(name)
                if d in order and d != f and order.index(d) > i and (f, d) not in allowed:
                    wrong.append(f"{f} uses {name} of {d}, listed after it")
    assert not wrong, wrong


def test_the_listed_same_layer_breaks_are_real():
    where = definitions()
    for f, d in same_layer_breaks():
        text = without_comments((RUNTIME / f).read_text())
        assert any(where.get(n) == d for n in re.findall(r"\bch_\w+", text)), f"README lists {f} using {d}"


def test_the_order_check_sees_a_call_up():
    """The check above finds names the way the compiler would see them used:
    a call from the first file to one the last defines is caught."""
    where = definitions()
    assert where["ch_identify"] == "identify/identify.c"
    assert where["ch_plan"] == "plan/plan.c"
    assert where["ch_count_flush_due"] == "select/counts.c"
