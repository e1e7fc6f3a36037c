"""The front door's census (issue 25's before/after figures), measured on a tree.

    python tools/front_door_census.py [ROOT] [--trace GRAMMAR] [--target T] [--json]

Counts, in ``ROOT/gramopt`` (default: this checkout):
- dialect names compared as strings outside ``gramopt/formats`` (``== "gbnf"``, ``in ("lark", …)``,
  ``.dialect == …``): lines and files;
- loops that rerun passes until nothing changes (a ``while`` loop or a ``for … in range(N)`` whose
  body runs a round on what the last round gave and stops when a round changed nothing): where,
  with their caps;
- pass registries (module-level ``PASSES``, ``IR_PASSES``, ``RESHAPINGS``, ``CLEANUPS`` names), and
  apart from them the pipelines (``DEFAULT_PASSES``, ``REQUEST_PASSES``: lists of registry names);
- modules per package;
- with ``--trace``: the files and package crossings on the path of ``gramopt optimize GRAMMAR -o
  /dev/null --target T`` (every gramopt function called, by ``sys.setprofile``): distinct files,
  and distinct caller-package -> callee-package pairs.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import pathlib
import re
import subprocess
import sys

DIALECTS = ("gbnf", "ebnf", "lark", "cfg", "goebnf", "jsonschema")
_DIALECT_RE = re.compile(r"""(==|!=|\bin\b|\bnot in\b)\s*[\(\[{]?\s*["'](%s)["']|["'](%s)["']\s*(==|!=)"""
                         % ("|".join(DIALECTS), "|".join(DIALECTS)))
REGISTRY_NAMES = ("PASSES", "IR_PASSES", "RESHAPINGS", "CLEANUPS")
PIPELINE_NAMES = ("DEFAULT_PASSES", "REQUEST_PASSES")


def dialect_comparisons(pkg: pathlib.Path) -> list[str]:
    out = []
    for p in sorted(pkg.rglob("*.py")):
        rel = p.relative_to(pkg.parent)
        if rel.parts[1] == "formats":
            continue
        for k, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#")[0]
            if _DIALECT_RE.search(code):
                out.append(f"{rel}:{k}")
    return out


def fixpoint_loops(pkg: pathlib.Path) -> list[str]:
    """Loops that rerun a step until a round changes nothing: a ``while`` loop, or a ``for`` loop over
    ``range(CAP)`` (a literal or a ``…limit…`` / ``…rounds…`` name: a cap on rounds, not a length),
    whose body runs a round (``_rounds``: a name rebound from a call that takes what the round
    started from) and stops (``break``/``return``, or the ``while`` test) on a test of a name rebound
    from a call (``g == start``, ``not names``; not a search's ``x is None``)."""
    out = []
    for p in sorted(pkg.rglob("*.py")):
        if p.relative_to(pkg).parts[0] in ("runtime", "sampling"):  # decoding loops, not passes
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.While):
                cap, tests = "none", [node.test]
            elif (isinstance(node, ast.For) and isinstance(node.iter, ast.Call)
                  and getattr(node.iter.func, "id", "") == "range"):
                cap, tests = ast.unparse(node.iter.args[-1]) if node.iter.args else "?", []
                if not (cap.isdigit() or re.fullmatch(r"\w*(limit|rounds?)\w*", cap)):  # a length, not a cap
                    continue
            else:
                continue
            rounds = _rounds(node)
            tests += [n.test for n in ast.walk(node) if isinstance(n, ast.If)
                      and any(isinstance(b, (ast.Break, ast.Return)) for b in n.body)]
            if rounds and any(_unchanged(t, rounds) for t in tests):
                out.append(f"{p.relative_to(pkg.parent)}:{node.lineno} (cap {cap})")
    return out


def _assignments(loop: ast.AST) -> list[ast.Assign | ast.AnnAssign]:
    return [n for n in ast.walk(loop) if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None]


def _targets(a: ast.Assign | ast.AnnAssign) -> set[str]:
    """The names an assignment rebinds (``x = …``, ``x, y = …``; not ``x[i] = …``)."""
    todo, out = list(a.targets if isinstance(a, ast.Assign) else [a.target]), set()
    while todo:
        t = todo.pop()
        if isinstance(t, ast.Name):
            out.add(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            todo.extend(t.elts)
    return out


def _rounds(loop: ast.AST) -> set[str]:
    """The names bound by a round: an assignment from a call that takes back what it gave,
    directly (``g, names = round_(g)``) or through the loop's assignments (``new = step(value)``
    … ``value = new``), binds its every name (``g``, ``names``; ``new``)."""
    flows: dict[str, set[str]] = {}  # name -> names assigned from an expression naming it
    for a in _assignments(loop):
        for x in ast.walk(a.value):
            if isinstance(x, ast.Name):
                flows.setdefault(x.id, set()).update(_targets(a))
    out: set[str] = set()
    for a in _assignments(loop):
        if not isinstance(a.value, ast.Call):
            continue
        args = {x.id for arg in [*a.value.args, *(k.value for k in a.value.keywords)]
                for x in ast.walk(arg) if isinstance(x, ast.Name)}
        seen, todo = set(_targets(a)), list(_targets(a))
        while todo:
            for m in flows.get(todo.pop(), ()):
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        if seen & args:
            out |= _targets(a)
    return out


def _unchanged(test: ast.expr, rounds: set[str]) -> bool:
    """``test`` asks whether a round changed anything: ``names`` / ``not names`` or an (in)equality
    between values, one of them bound by a round (``new == value``); not an ordering (a scanner's
    ``i < n``), a call (``not os.path.exists(folder)``) or a search's ``x is None``."""
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if isinstance(test, ast.Name):
        return test.id in rounds
    return (isinstance(test, ast.Compare) and not _against_a_constant(test)
            and all(isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)) for op in test.ops)
            and any(isinstance(x, ast.Name) and x.id in rounds for x in [test.left, *test.comparators]))


def _against_a_constant(test: ast.expr) -> bool:
    """``x is None``, ``k == 0``: a search ending, not a round compared with the last."""
    return isinstance(test, ast.Compare) and all(isinstance(c, ast.Constant) for c in test.comparators)


def registries(pkg: pathlib.Path, names: tuple[str, ...] = REGISTRY_NAMES) -> list[str]:
    out = []
    for p in sorted(pkg.rglob("*.py")):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            for t in targets:
                if isinstance(t, ast.Name) and t.id in names:
                    out.append(f"{p.relative_to(pkg.parent)}:{node.lineno} {t.id}")
    return out


def modules_per_package(pkg: pathlib.Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in pkg.rglob("*.py"):
        parts = p.relative_to(pkg).parts
        key = parts[0] if len(parts) > 1 else "(top level)"
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


_TRACER = r"""
import sys, json, os
files, pairs = set(), set()
root = os.path.join(sys.argv[1], "gramopt")
def pkg(f):
    rel = os.path.relpath(f, root).split(os.sep)
    return rel[0] if len(rel) > 1 else rel[0].removesuffix(".py")
def prof(frame, event, arg):
    if event != "call":
        return
    f = frame.f_code.co_filename
    if not f.startswith(root):
        return
    files.add(os.path.relpath(f, root))
    back = frame.f_back
    while back is not None and not back.f_code.co_filename.startswith(root):
        back = back.f_back
    if back is not None:
        a, b = pkg(back.f_code.co_filename), pkg(f)
        if a != b:
            pairs.add((a, b))
sys.path.insert(0, sys.argv[1])
from gramopt.cli import main
sys.setprofile(prof)
try:
    main(["optimize", sys.argv[2], "-o", os.devnull, "--target", sys.argv[3]])
except SystemExit:
    pass
sys.setprofile(None)
print(json.dumps({"files": sorted(files), "crossings": sorted(map(list, pairs))}))
"""


def trace(root: pathlib.Path, grammar: str, target: str) -> dict:
    res = subprocess.run([sys.executable, "-c", _TRACER, str(root), grammar, target], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(root)})
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", nargs="?", default=str(pathlib.Path(__file__).resolve().parent.parent))
    ap.add_argument("--trace", default="")
    ap.add_argument("--target", default="xgrammar")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    root = pathlib.Path(a.root).resolve()
    pkg = root / "gramopt"
    dc, fl, rg, mp = dialect_comparisons(pkg), fixpoint_loops(pkg), registries(pkg), modules_per_package(pkg)
    pl = registries(pkg, PIPELINE_NAMES)
    res = {"dialect_comparisons": dc, "dialect_comparison_files": sorted({x.split(":")[0] for x in dc}),
           "fixpoint_loops": fl, "registries": rg, "pipelines": pl, "modules_per_package": mp}
    if a.trace:
        res["trace"] = trace(root, a.trace, a.target)
    if a.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"dialect names compared as strings outside formats: {len(dc)} lines in "
          f"{len(res['dialect_comparison_files'])} files")
    print(f"rerun-until-unchanged loops: {len(fl)}: " + "; ".join(fl))
    print(f"pass registries: {len(rg)}: " + "; ".join(rg))
    print(f"pipelines (names in a registry): {len(pl)}: " + "; ".join(pl))
    print("modules per package: " + ", ".join(f"{k} {v}" for k, v in mp.items()) + f" (total {sum(mp.values())})")
    if a.trace:
        t = res["trace"]
        print(f"optimize --target {a.target} {a.trace}: {len(t['files'])} files called, "
              f"{len(t['crossings'])} package crossings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
