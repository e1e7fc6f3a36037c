"""Which definitions of a Lark grammar come from its ``%import`` directives.

The reader keeps imported definitions in the IR (so every terminal's language is there)
and records each import as ``Directive("import", (path, name[, alias]))``; the writer
prints the directive instead of the definitions. This module says which those are.
"""

from __future__ import annotations

from ..grammar import Grammar, Ref, Terminal
from ..grammar.expr import walk


def imported_names(grammar: Grammar) -> set[str]:
    """Names of the definitions that ``grammar``'s %import directives bring in: the
    imported names (or aliases) and what they reach through imported definitions. An
    overridden import is the file's own definition and stops the walk."""
    aliases = [d.args[-1] for d in grammar.directives if d.name == "import" and len(d.args) >= 2]
    overridden = {d.args[0] for d in grammar.directives if d.name == "override" and d.args}
    defs = {r.name: r for r in (*grammar.rules, *grammar.terminals)}
    seen: set[str] = set()
    stack = [a for a in aliases if a not in overridden]
    while stack:
        name = stack.pop()
        if name in seen or name in overridden:
            continue
        seen.add(name)
        if name in defs:
            for node in walk(defs[name].body):
                if isinstance(node, (Ref, Terminal)) and node.name not in seen:
                    stack.append(node.name)
    return seen
