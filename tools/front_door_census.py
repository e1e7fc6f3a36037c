"""The front door's census (issue 25's before/after figures), measured on a tree.

    python tools/front_door_census.py [ROOT] [--trace GRAMMAR] [--target T] [--json]

Counts, in ``ROOT/gramopt`` (default: this checkout):
- dialect names compared as strings outside ``gramopt/formats`` (``== "gbnf"``, ``in ("lark", …)``,
  ``.dialect == …``): lines and files;
- loops that rerun passes until nothing changes (``for … in range(N)`` whose body compares the
  grammar with the one the round started from): where, with their caps;
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
    """``for`` loops over ``range(CAP)`` (a literal or a ``…limit…`` / ``…rounds…`` name: a cap
    on rounds, not a length) that end on a ``break`` when a round changed nothing: the body
    rebinds a name from a call and breaks on a test of it against another value (``g == start``,
    ``not names``; not a search's ``x is None``)."""
    out = []
    for p in sorted(pkg.rglob("*.py")):
        if p.relative_to(pkg).parts[0] in ("runtime", "sampling"):  # decoding loops, not passes
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.For) and isinstance(node.iter, ast.Call)
                    and getattr(node.iter.func, "id", "") == "range"):
                continue
            rebound = {t.id for n in ast.walk(node) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                       for tt in n.targets for t in ast.walk(tt) if isinstance(t, ast.Name)}
            stops = [n for n in ast.walk(node) if isinstance(n, ast.If)
                     and any(isinstance(b, (ast.Break, ast.Return)) for b in n.body)
                     and {x.id for x in ast.walk(n.test) if isinstance(x, ast.Name)} & rebound
                     and not _against_a_constant(n.test)]
            cap = ast.unparse(node.iter.args[-1]) if node.iter.args else "?"
            fixed = cap.isdigit() or re.fullmatch(r"\w*(limit|rounds?)\w*", cap)  # a round cap, not a length
            if stops and fixed:
                out.append(f"{p.relative_to(pkg.parent)}:{node.lineno} (cap {cap})")
    return out


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
