"""xgrammar's ``TagDispatch``: free text until a trigger, then the trigger's rule — as plain rules.

    TagDispatch(("<tool>", tool_call), ("<think>", thought), loop_after_dispatch=true,
                excludes=("<|im_end|>",))

denotes (xgrammar 0.2.8, checked against its matcher in tests/test_tag_dispatch.py)::

    loop:      (F t_1 R_1 | … | F t_k R_k)* F        not loop:  F | F t_1 R_1 | … | F t_k R_k

where ``t_i`` is a trigger, ``R_i`` the language of its rule, and the free text ``F`` is every
string in which no trigger and no excluded string occurs, with the proviso that in ``F t_i``
the trigger ends the first occurrence of any pattern. The free text may stop anywhere (also
inside a partial trigger): what follows the dispatch in the grammar takes over.

Free text is a regular language, so it lowers to one rule per state of the Aho–Corasick
automaton of the patterns (triggers and excludes), over code points (UTF-8 is
self-synchronizing: a pattern occurs in the bytes of a text exactly when it occurs in its
code points). The state after a text is the trie node of its longest suffix that is a
pattern prefix; with the patterns substring-free (required here; xgrammar's own behaviour
when one pattern contains another is not a plain first-occurrence rule) a pattern occurs
exactly when that node is the pattern's own trie node. So, for a non-pattern node q::

    F_q ::= ""                                  stop here
          | [chars going to node u] F_u         for every non-pattern node u reached from q
          | "c" R_i F_0   (loop) / "c" R_i      when c completes trigger t_i
                                                (a completed exclude has no edge)

Before/after, for ``TagDispatch(("ab", r))`` named ``d``::

    d ::= TagDispatch(("ab", r))   -->   d ::= "" | [^a] d | "a" d_1
                                         d_1 ::= "" | [^ab] d | "a" d_1 | "b" r d

Every F_q is right-linear, so an Earley parser with Leo's optimization adds O(1) items per
byte of free text.
"""

from __future__ import annotations

from dataclasses import dataclass

from .expr import CharClass, Epsilon, Expr, Literal, Ref, alt, normalize_ranges, seq
from .grammar import Rule


@dataclass(frozen=True)
class TagDispatch:
    """``tags``: (trigger, rule name) pairs in order; ``loop``: xgrammar's
    ``loop_after_dispatch``; ``excludes``: strings the free text must not contain. With no
    tags it is free text alone (xgrammar's ``any_text`` with excludes)."""

    tags: tuple[tuple[str, str], ...]
    loop: bool = True
    excludes: tuple[str, ...] = ()

    def problem(self) -> str | None:
        """Why this dispatch cannot be lowered (None when it can)."""
        pats = [t for t, _ in self.tags] + list(self.excludes)
        for p in pats:
            if not p:
                return "TagDispatch triggers and excludes must be non-empty strings"
        for i, p in enumerate(pats):
            for j, q in enumerate(pats):
                if i != j and p in q:
                    what = "the same string twice" if p == q else f"'{q}' contains '{p}'"
                    return (f"TagDispatch patterns must not contain one another ({what}): "
                            "gramopt lowers only substring-free triggers and excludes")
        return None


def _automaton(patterns: list[str]):
    """Aho–Corasick over code points: (goto dicts, pattern index per node or -1, full delta
    as a per-node dict over the patterns' alphabet)."""
    goto: list[dict[str, int]] = [{}]
    out: list[int] = [-1]
    for k, p in enumerate(patterns):
        q = 0
        for c in p:
            if c not in goto[q]:
                goto.append({})
                out.append(-1)
                goto[q][c] = len(goto) - 1
            q = goto[q][c]
        out[q] = k
    alphabet = sorted({c for p in patterns for c in p})
    fail = [0] * len(goto)
    delta: list[dict[str, int]] = [{} for _ in goto]
    order = [0]
    for q in order:  # breadth first: fail[q] is done before q's children need it
        for c in alphabet:
            if c in goto[q]:
                u = goto[q][c]
                fail[u] = delta[fail[q]][c] if q else 0
                delta[q][c] = u
                order.append(u)
            else:
                delta[q][c] = delta[fail[q]][c] if q else 0
    return out, delta, alphabet


def lower_tag_dispatch(name: str, td: TagDispatch, taken) -> list[Rule]:
    """Rules for ``name ::= TagDispatch(...)``: ``name`` is the start state F_0; the other
    states get fresh names ``name_free_N`` not in ``taken`` (a set of names in use).
    Raises ValueError (``td.problem()``) when the patterns are not substring-free."""
    why = td.problem()
    if why:
        raise ValueError(why)
    triggers = [t for t, _ in td.tags]
    out, delta, alphabet = _automaton(triggers + list(td.excludes))
    free = [q for q in range(len(out)) if out[q] < 0]
    names = {0: name}
    n = 1
    for q in free[1:]:
        while f"{name}_free_{n}" in taken:
            n += 1
        names[q] = f"{name}_free_{n}"
        n += 1
    rules = []
    for q in free:
        by_target: dict[int, list[str]] = {}
        for c in alphabet:
            by_target.setdefault(delta[q][c], []).append(c)
        alts: list[Expr] = [Epsilon()]
        # chars outside the alphabet go back to the root, with the alphabet chars that do
        home = [(ord(c), ord(c)) for c in alphabet if delta[q][c] != 0]
        alts.append(seq(CharClass(tuple(home), negated=True), Ref(name)))
        for u in sorted(by_target):
            if u == 0:
                continue
            chars = by_target[u]
            label = Literal(chars[0]) if len(chars) == 1 else CharClass(
                normalize_ranges((ord(c), ord(c)) for c in chars))
            k = out[u]
            if k < 0:
                alts.append(seq(label, Ref(names[u])))
            elif k < len(triggers):
                alts.append(seq(label, Ref(td.tags[k][1]), Ref(name) if td.loop else Epsilon()))
            # else: an exclude completes: no edge
        rules.append(Rule(names[q], alt(*alts)))
    return rules
