"""The import graph of the gramopt package, module imports inside functions counted too.

    python tools/import_graph.py [PKGDIR] [--json]

Prints modules, edges, function-level imports, cycles, imports against the floors
(``LAYERS``, the README's layout section), the depth of the package graph (its longest
chain of packages) and the biggest module; exit 1 on a cycle or an upward import.

Rules: a package imports only packages on its own floor or below, and a package in ``ONLY``
imports only the packages listed there: ``runtime`` (the mask engine) ``grammar`` and
itself, ``verify`` ``grammar`` (and the standard-library ``collector``), ``decoding`` (the
model, the generation loop, the lockstep check) ``grammar``, ``runtime`` and ``verify``,
``sampling`` ``grammar``, ``runtime`` and ``decoding``. A module not under a package
(``gramopt/passes.py``) is a package of its own. ``from . import x`` where x is a module is
an edge to x. Imports inside functions are edges like any other (and counted apart).
"""

from __future__ import annotations

import ast
import json
import pathlib
import sys

LAYERS = [  # floor 0 is the ground
    {"grammar", "_version", "stage", "collector", "cores"},
    {"formats", "costmodels", "verify", "runtime"},
    {"rewrites", "egraph", "transforms", "decoding"},
    {"targets", "engines", "sampling"},
    {"passes", "report", "judge", "bench", "inputs"},
    {"optimizer"},  # one input in, text and report out (run_job), the options, limits and cache
    {"cli", "summary", "__init__", "__main__"},
    {"integrations"},  # serving stacks' adapters: over the pass API, formats and the optimizer's cache
]
FLOOR = {p: i for i, floor in enumerate(LAYERS) for p in floor}
ONLY = {"runtime": {"grammar", "runtime"}, "verify": {"grammar", "collector", "verify"},
        "decoding": {"grammar", "runtime", "verify", "decoding"},
        "sampling": {"grammar", "runtime", "decoding", "sampling"}}


def module_name(root: pathlib.Path, path: pathlib.Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_of(module: str) -> str:
    """The top-level part of ``gramopt.x.y`` (``__init__`` for the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports_of(module: str, path: pathlib.Path, modules: set[str]):
    """(imported module, inside a function?) for every import statement of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_pkg = path.name == "__init__.py"
    in_function: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            in_function.update(id(n) for n in ast.walk(node) if n is not node)
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: None if is_pkg else -1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            subs = [f"{mod}.{a.name}" for a in node.names]
            names = [s for s in subs if s in modules]
            if len(names) < len(subs):
                names.append(mod)
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                yield name, id(node) in in_function


def graph(pkgdir: str) -> dict:
    root = pathlib.Path(pkgdir).resolve()
    paths = {module_name(root, p): p for p in sorted(root.rglob("*.py"))}
    modules = set(paths)
    edges: dict[tuple[str, str], bool] = {}  # (a, b) -> only inside functions
    for m, p in paths.items():
        for target, lazy in imports_of(m, p, modules):
            edges[m, target] = edges.get((m, target), True) and lazy
    cycles = strongly_connected(modules, edges)
    upward = []
    for a, b in sorted(edges):
        pa, pb = package_of(a), package_of(b)
        if pa == pb:
            continue
        if pa in ONLY and pb not in ONLY[pa]:
            upward.append((a, b))
        elif FLOOR.get(pb, -1) > FLOOR.get(pa, 99):
            upward.append((a, b))
    unknown = sorted({package_of(m) for m in modules} - set(FLOOR))
    lines = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in paths.items()}
    biggest = max(lines, key=lines.get)
    return {"modules": len(modules), "edges": len(edges), "function_level_edges": sum(edges.values()),
            "cycles": cycles, "upward": upward, "unplaced": unknown, "depth": package_depth(edges),
            "biggest": biggest, "biggest_lines": lines[biggest], "lines": sum(lines.values())}


def strongly_connected(nodes: set[str], edges) -> list[list[str]]:
    """The cycles: strongly connected components of more than one module (Tarjan, iterative)."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in edges:
        succ[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(succ[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def package_depth(edges) -> int:
    """Floors the real graph needs: the longest chain of packages (1 for a package importing
    nothing of gramopt; a package cycle counts once)."""
    succ: dict[str, set[str]] = {}
    for a, b in edges:
        pa, pb = package_of(a), package_of(b)
        succ.setdefault(pa, set())
        succ.setdefault(pb, set())
        if pa != pb:
            succ[pa].add(pb)
    memo: dict[str, int] = {}

    def depth(p: str, seen: frozenset) -> int:
        if p in memo:
            return memo[p]
        d = 1 + max((depth(q, seen | {p}) for q in succ[p] if q not in seen), default=0)
        memo[p] = d
        return d

    return max((depth(p, frozenset()) for p in succ), default=0)


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    pkgdir = args[0] if args else str(pathlib.Path(__file__).resolve().parent.parent / "gramopt")
    g = graph(pkgdir)
    if "--json" in argv:
        print(json.dumps(g, indent=1))
    else:
        for c in g["cycles"]:
            print("CYCLE:", " -> ".join(c))
        for a, b in g["upward"]:
            print("UPWARD:", a, "->", b)
        for p in g["unplaced"]:
            print("NO FLOOR:", p)
        print(f"{g['modules']} modules, {g['edges']} edges ({g['function_level_edges']} only inside functions), "
              f"{len(g['cycles'])} cycles, {len(g['upward'])} upward, depth {g['depth']} packages; biggest "
              f"{g['biggest']} ({g['biggest_lines']} of {g['lines']} lines)")
    return 1 if g["cycles"] or g["upward"] or g["unplaced"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
