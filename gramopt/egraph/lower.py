"""Lowering grammar IR ⇄ egglog terms, and a frozen, Python-side view of the e-graph.

The term language (one egglog datatype ``Node``)::

    (Tok i)                 atom i of the atom table: a Literal, CharClass, Terminal or Regex
    (Eps)                   the empty string
    (Seq (vec-of a b …))    concatenation, n-ary (≥ 2 items), order matters
    (Alt (vec-of a b …))    union, n-ary (≥ 2 items), *set-like*: the alternation rewrites
                            propose the sorted, deduplicated, flattened vector as equal
    (Rep x min max)         x{min,max}; max = -1 means unbounded (x* = Rep x 0 -1)
    (R "name")              the rule ``name``

A rule ``A ::= body`` becomes ``(union (R "A") body)``: the reference and the definition
are one e-class, so a pass-through rule ``X ::= Y`` puts X and Y in one class and equal
rules merge by congruence (G2's A and S collapse to G1).

A pinned rule P (``Rule.pinned``: a lookahead assertion, an engine macro; kept as written,
never merged) is lowered as an atom of its own instead of its body: ``(union (R "P") (Tok
k))`` with atom k = ``Opaque("P")``, or, when P is nullable, ``(Alt (vec-of (Tok k) (Eps)))``
with k standing for L(P) without ε (atoms are non-empty strings to every rewrite, so the
e-graph stays exact). No other rule or sub-expression can share P's class by congruence or
bisimulation (its atom is its own), and no rewrite sees P's structure; the extractor writes
P back as it was (``extract.py``).

Why ``Vec`` and not egglog's ``Set`` for Alt: both work, but ``Set`` containers made
lowering ~10× slower (1 s for 500 rules, measured on egglog 13.2); the set semantics is
restored by a Python rewrite (``alternation.alt-normalize``). A binary AC ``Alt`` is not
used at all (3^k blow-up, DESIGN.md).

Lowering is batched, in chunks: the rules' ``union`` commands are sent as programs of about
``CHUNK_CHARS`` characters each. One program per rule costs ~0.1 ms of call overhead, but
egglog 13.2's parse + run of one program grows superlinearly with its length (660 rules of
maskbench Github_ultra-o16062, 107 KB: 6 s as one program, 0.07 s in ~1 KB chunks; 0.06 s
one rule per call), so chunks of a few rules are both few calls and linear time.
"""

from __future__ import annotations

from dataclasses import dataclass

from egglog import bindings

from ..grammar import (Alt, CharClass, Epsilon, Expr, Grammar, Literal, Ref, Regex, Repeat, Rule, Seq,
                       Terminal)
from ..grammar.analysis import nullable_rules

HEADER = """
(datatype Node
  (Tok i64)
  (Eps)
  (Rep Node i64 i64)
  (R String))
(sort NodeVec (Vec Node))
(constructor Seq (NodeVec) Node)
(constructor Alt (NodeVec) Node)
(function W (i64) Node :merge new)
"""
"""``(W k)``: handle k, a class bound by ``(set (W k) term)`` so that a later command names it in
one e-node's text (``MAX_TERM_NODES``); never read back (``snapshot`` reads the six constructors)."""

@dataclass(frozen=True, slots=True)
class Opaque:
    """The atom standing for pinned rule ``name``'s body in the e-graph (module docstring):
    its language without ε; no rewrite looks inside."""

    name: str


Atom = Literal | CharClass | Terminal | Regex | Opaque
CHUNK_CHARS = 1000
MAX_TERM_NODES = 64
"""The most e-nodes one command's term spells out; larger terms are sent in pieces, each bound
to a handle ``(W k)`` first. egglog 13.2's memory for one command grows superlinearly with its
term: WashingtonPost wp_26's 2,110-node rule after a round of passes took +380 MB and 0.26 s as
one ``union`` (+5 MB and 0.02 s in pieces, ``GrammarEGraph._pieces``); under ``--target
llguidance`` the rewrites' unions named classes by 4,249-node witness terms, 5.5 GB and 32 s
(``GrammarEGraph.witness``). A handle costs ~1 KB of egglog memory (a ``let`` global ~15 KB)."""


def quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True, slots=True)
class ENode:
    """One e-node of a snapshot: ``kind`` in Tok/Eps/Seq/Alt/Rep/R, ``data`` the atom id,
    rule name or (min, max), ``children`` e-class ids (ints)."""

    kind: str
    data: object
    children: tuple[int, ...] = ()


@dataclass
class Snapshot:
    """The e-graph read back into Python: ``classes[c]`` lists the e-nodes of class c in a
    deterministic order; ``names[c]`` the rule names (R nodes) of c; ``of_name[n]`` the class
    of rule n."""

    classes: dict[int, list[ENode]]
    names: dict[int, list[str]]
    of_name: dict[str, int]
    n_nodes: int

    def parents(self) -> dict[int, list[tuple[int, ENode]]]:
        out: dict[int, list[tuple[int, ENode]]] = {c: [] for c in self.classes}
        for c, nodes in self.classes.items():
            for n in nodes:
                for ch in dict.fromkeys(n.children):
                    out.setdefault(ch, []).append((c, n))
        return out


_KIND_ORDER = {"Tok": 0, "Eps": 1, "R": 2, "Rep": 3, "Seq": 4, "Alt": 5}


class GrammarEGraph:
    """An egglog e-graph holding one grammar. ``atoms`` is the atom table (index = Tok id);
    ``run(text)`` runs egglog commands; ``snapshot()`` freezes and reads the e-graph."""

    def __init__(self, grammar: Grammar):
        self.grammar = grammar
        self.egraph = bindings.EGraph()
        self.atoms: list[Atom] = []
        self._atom_id: dict[Atom, int] = {}
        self.programs = 0  # egglog programs run (lowering batches them: see the docstring)
        self.run(HEADER)
        self.pinned = {r.name: r for r in grammar.rules if r.pinned}
        nullable = nullable_rules(grammar) if self.pinned else set()
        self._handles = 0  # handles (W k) bound so far, by lowering's pieces and by witnesses
        self.run_commands([c for r in grammar.rules for c in self._rule_commands(r, nullable)])
        self._witness: dict[int, str] = {}  # class -> its witness spelled out (this snapshot)
        self._best: dict[int, tuple[int, ENode]] | None = None  # class -> (witness size, top node)
        self._key: dict[int, int] = {}  # class -> its witness's structure id (this snapshot)
        self._structures: dict[tuple, int] = {}  # (kind, data, child structure ids) -> id
        self._bound: dict[int, str] = {}  # structure id -> its handle, bound once for the e-graph
        self._pending: list[str] = []  # binding commands ``witness`` made, not yet taken
        self._snap: Snapshot | None = None

    # ------------------------------------------------------------ IR → terms
    def _rule_commands(self, r: Rule, nullable: set[str]) -> list[str]:
        """The commands that union rule ``r``'s reference with its definition: one ``union``,
        or, for a body over ``MAX_TERM_NODES`` e-nodes, its pieces first (``_pieces``)."""
        if r.name in self.pinned:
            return [f"(union (R {quote(r.name)}) {self._definition(r, nullable)})"]
        binds, text, nodes = self._pieces(r.body)
        if not binds and nodes < MAX_TERM_NODES:  # (and the reference's own e-node)
            return [f"(union (R {quote(r.name)}) {text})"]
        head = self._handle()
        return [f"(set {head} (R {quote(r.name)}))", *binds, f"(union {head} {text})"]

    def _handle(self) -> str:
        """A new handle's text, ``(W k)``."""
        self._handles += 1
        return f"(W {self._handles - 1})"

    def _pieces(self, e: Expr) -> tuple[list[str], str, int]:
        """(binding commands, term text, its e-nodes spelled out) for expression ``e``, so
        that no command builds more than ``MAX_TERM_NODES`` e-nodes. A node whose term would be
        larger, or with a split child, binds every child to a handle, in order, each child's own
        pieces first. The e-nodes are created in the order one nested term creates them
        (children left to right, each before its parent, ``union``'s left side first), so
        e-class ids, hence snapshots and outputs, are the same as lowering ``e`` whole."""
        if not isinstance(e, (Seq, Alt, Repeat)):
            return [], self.term(e), 1
        parts = [self._pieces(k) for k in _children(e)]
        nodes = 1 + sum(p[2] for p in parts)
        if nodes > MAX_TERM_NODES or any(p[0] for p in parts):
            binds: list[str] = []
            texts = []
            for k_binds, k_text, _ in parts:
                binds += k_binds
                name = self._handle()
                binds.append(f"(set {name} {k_text})")
                texts.append(name)
            return binds, _composite_text(e, texts), 1
        return [], _composite_text(e, [p[1] for p in parts]), nodes

    def _definition(self, r: Rule, nullable: set[str]) -> str:
        """The term a rule's reference is unioned with: its body, or for a pinned rule its
        opaque atom (with ε when the rule is nullable)."""
        if r.name not in self.pinned:
            return self.term(r.body)
        tok = f"(Tok {self.atom(Opaque(r.name))})"
        return f"(Alt (vec-of {tok} (Eps)))" if r.name in nullable else tok

    def atom(self, a: Atom) -> int:
        i = self._atom_id.get(a)
        if i is None:
            i = self._atom_id[a] = len(self.atoms)
            self.atoms.append(a)
        return i

    def term(self, e: Expr) -> str:
        """The egglog term text of expression ``e``."""
        if isinstance(e, (Literal, CharClass, Terminal, Regex)):
            return node_text("Tok", self.atom(e), ())
        if isinstance(e, Ref):
            return node_text("R", e.name, ())
        if isinstance(e, Epsilon):
            return node_text("Eps", None, ())
        if isinstance(e, (Seq, Alt, Repeat)):
            return _composite_text(e, [self.term(k) for k in _children(e)])
        raise TypeError(f"cannot lower {e!r}")

    # ------------------------------------------------------------ commands
    def run(self, program: str):
        if not program.strip():
            return []
        self._snap = None
        self.programs += 1
        return self.egraph.run_program(*self.egraph.parse_program(program))

    def run_commands(self, commands: list[str]) -> list:
        """Run complete top-level commands in order, as programs of about ``CHUNK_CHARS``
        characters (see the module docstring for why not one program)."""
        out: list = []
        buf: list[str] = []
        size = 0
        for c in commands:
            buf.append(c)
            size += len(c)
            if size >= CHUNK_CHARS:
                out += self.run("\n".join(buf))
                buf, size = [], 0
        if buf:
            out += self.run("\n".join(buf))
        return out

    # ------------------------------------------------------------ e-graph → Python
    def snapshot(self) -> Snapshot:
        if self._snap is not None:
            return self._snap
        eg = self.egraph
        frozen = eg.freeze()
        # Class ids in egglog's own id order: ids are allocated as terms are created, and
        # lowering creates them in source order, so sorting by id keeps alternatives close
        # to the order they were written in.
        values = set()
        for fname in ("R", "Tok", "Eps", "Rep", "Seq", "Alt"):
            fn = frozen.functions.get(fname)
            for row in (fn.rows if fn is not None else ()):
                values.add(row.output)
                if fname == "Rep":
                    values.add(row.inputs[0])
                elif fname in ("Seq", "Alt"):
                    values.update(eg.value_to_vec(row.inputs[0]))
        ids = {v: i for i, v in enumerate(sorted(values))}
        cid = ids.__getitem__

        classes: dict[int, dict[ENode, None]] = {}
        names: dict[int, list[str]] = {}
        of_name: dict[str, int] = {}
        for fname in ("R", "Tok", "Eps", "Rep", "Seq", "Alt"):
            fn = frozen.functions.get(fname)
            if fn is None:
                continue
            for row in fn.rows:
                if row.subsumed:
                    continue
                out = cid(row.output)
                if fname == "Tok":
                    node = ENode("Tok", eg.value_to_i64(row.inputs[0]))
                elif fname == "Eps":
                    node = ENode("Eps", None)
                elif fname == "R":
                    name = eg.value_to_string(row.inputs[0])
                    node = ENode("R", name)
                    names.setdefault(out, []).append(name)
                    of_name[name] = out
                elif fname == "Rep":
                    node = ENode("Rep", (eg.value_to_i64(row.inputs[1]), eg.value_to_i64(row.inputs[2])),
                                 (cid(row.inputs[0]),))
                else:
                    node = ENode(fname, None, tuple(cid(v) for v in eg.value_to_vec(row.inputs[0])))
                classes.setdefault(out, {})[node] = None
        order = {r.name: i for i, r in enumerate(self.grammar.rules)}
        for c in names:
            names[c].sort(key=lambda n: (order.get(n, len(order)), n))
        self._snap = Snapshot(
            {c: sorted(ns, key=lambda n: (_KIND_ORDER[n.kind], str(n.data), n.children))
             for c, ns in classes.items()},
            names, of_name, sum(len(v) for v in classes.values()))
        self._witness, self._best, self._key = {}, None, {}
        return self._snap

    def size(self) -> int:
        frozen = self.egraph.freeze()
        return sum(len(f.rows) for f in frozen.functions.values())

    # ------------------------------------------------------------ class handles
    def witness(self, c: int) -> str:
        """A finite term (text) denoting e-class ``c`` of the current snapshot, so Python
        rewrites can name an existing class in a union: the smallest term by node count, with
        rule names (R) as leaves (Knuth's fixed point over the snapshot), spelled out up to
        ``MAX_TERM_NODES`` e-nodes and past that as handles bound first (``take_bindings``).
        A handle stands for one term structure (the same text every time that term is the
        witness, as the term spelled out was), bound once: its class is that term's."""
        return self._spelled(c) if self._witness_table()[c][0] <= MAX_TERM_NODES else self._named(c)

    def take_bindings(self) -> list[str]:
        """The binding commands of the handles ``witness`` named since the last call; they
        run before the commands that name them."""
        out, self._pending = self._pending, []
        return out

    def _spelled(self, c: int) -> str:
        """The text of ``c``'s witness term, spelled out (at most ``MAX_TERM_NODES`` e-nodes)."""
        text = self._witness.get(c)
        if text is None:
            node = self._best[c][1]
            text = self._witness[c] = node_text(node.kind, node.data, [self._spelled(ch) for ch in node.children])
        return text

    def _named(self, c: int) -> str:
        """The handle of ``c``'s witness term, bound (once per term structure) to its top e-node
        over its children: spelled out, in order, while the binding stays within
        ``MAX_TERM_NODES`` e-nodes, else their own handles."""
        key = self._structure(c)
        handle = self._bound.get(key)
        if handle is None:
            node = self._best[c][1]
            kids, spelled = [], 1
            for ch in node.children:
                size = self._best[ch][0]
                if size == 1 or spelled + size <= MAX_TERM_NODES:
                    kids.append(self._spelled(ch))
                    spelled += size
                else:
                    kids.append(self._named(ch))
                    spelled += 1
            handle = self._bound[key] = self._handle()
            self._pending.append(f"(set {handle} {node_text(node.kind, node.data, kids)})")
        return handle

    def structure(self, kind: str, data, kids: tuple[int, ...]) -> int:
        """The id of the term with top e-node (``kind``, ``data``) over the terms with ids
        ``kids``: equal ids, equal term texts once every witness is spelled out."""
        return self._structures.setdefault((kind, data, kids), len(self._structures))

    def class_structure(self, c: int) -> int:
        """The id (``structure``) of ``c``'s witness term in the current snapshot."""
        self._witness_table()
        return self._structure(c)

    def _witness_table(self) -> dict[int, tuple[int, ENode]]:
        """Class -> (size, top e-node) of its witness term, made once per snapshot."""
        if self._best is None:
            self._best = _witness_nodes(self.snapshot())
        return self._best

    def _structure(self, c: int) -> int:
        key = self._key.get(c)
        if key is None:
            node = self._best[c][1]
            key = self._key[c] = self.structure(node.kind, node.data,
                                                tuple(self._structure(ch) for ch in node.children))
        return key


def _witness_nodes(snap: Snapshot) -> dict[int, tuple[int, ENode]]:
    """Class -> (size, top e-node) of its smallest term by node count with rule names (R) as
    leaves: Knuth's fixed point over the snapshot (the first smallest found, in class order)."""
    best: dict[int, tuple[int, ENode]] = {}
    changed = True
    while changed:
        changed = False
        for c, nodes in snap.classes.items():
            for n in nodes:
                if any(ch not in best for ch in n.children):
                    continue
                size = 1 + sum(best[ch][0] for ch in n.children)
                if c in best and best[c][0] <= size:
                    continue
                best[c] = (size, n)
                changed = True
    return best


def node_text(kind: str, data, kids) -> str:
    """The egglog text of one e-node of ``kind`` (Tok, Eps, R, Rep, Seq, Alt) with ``data``
    (atom id, rule name, (min, max) with -1 unbounded) over its children's texts: the term
    language's one spelling, for lowering, witnesses and the rewrites' terms."""
    if kind == "Tok":
        return f"(Tok {data})"
    if kind == "Eps":
        return "(Eps)"
    if kind == "R":
        return f"(R {quote(data)})"
    if kind == "Rep":
        return f"(Rep {kids[0]} {data[0]} {data[1]})"
    return f"({kind} (vec-of {' '.join(kids)}))"


def _children(e: Seq | Alt | Repeat) -> tuple[Expr, ...]:
    return (e.item,) if isinstance(e, Repeat) else e.items


def _composite_text(e: Seq | Alt | Repeat, kids: list[str]) -> str:
    """The text of composite expression ``e`` over its children's texts."""
    if isinstance(e, Repeat):
        return node_text("Rep", (e.min, -1 if e.max is None else e.max), kids)
    return node_text("Seq" if isinstance(e, Seq) else "Alt", None, kids)
