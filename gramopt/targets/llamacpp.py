"""The llama.cpp fix-up: alternatives in the order llama.cpp's stacks pay least for.

Why (measured, ``benchmarks/llamacpp_profile.py``; llama-cpp-python 0.3.36). llama.cpp's
grammar sampler keeps one parse *stack* per way the grammar may go on and, to fill a mask,
tries them one after another, each on the candidate tokens the stacks before it rejected
(``llama_grammar_reject_candidates``). A stack whose top is ``"\\""`` scans ~all 150k
candidates and rejects nearly all of them, so every stack tried before the one that takes
most candidates costs a pass over the vocabulary. The order of the stacks is the order of
llama.cpp's depth-first expansion (``llama_grammar_advance_stack``), which pushes a rule's
alternatives in written order on a LIFO work list: **the alternative written last is
expanded, and tried, first**. llama.cpp's own expansion of ``x*`` is ``x' ::= x x' | ε``
(and ``x?`` is ``x' ::= x | ε``), so the empty alternative — the caller's continuation,
typically a closing quote — is tried before ``x``. Inside a JSON string
(``"\\"" char* "\\""``, ``char ::= [^"\\\\] | "\\\\" esc``) the stacks are tried as
``"\\""``, ``"\\\\"``, ``[^"\\\\]``: two full scans before the class that takes the tokens.
Written as ``s ::= "" | char s`` with ``char ::= "\\\\" esc | [^"\\\\]``, the class is tried
first: 133 → 92 ms per in-string mask on the Qwen vocabulary in one run (same stacks, same
mask).

``order_for_llamacpp`` (every step language-preserving):

* ``x*`` becomes a reference to a rule ``R ::= "" | x R`` (one per distinct ``x``; a rule
  ``A ::= x*`` becomes ``A ::= "" | x A`` itself), ``x+`` becomes ``x R``, and ``x?`` becomes
  ``("" | x)``: the same language (R derives exactly
  the strings of x*: ε, and x followed by a string of x*, by induction on the length of a
  derivation; ``x x*`` = x+; ε ∪ x = x?), and the same stacks llama.cpp builds from the
  operators itself, only with the empty alternative written first. Skipped where x is
  nullable (R would be left-recursive, which llama.cpp refuses).
* In every alternation the alternatives are stably sorted by how many code points can begin
  them (their FIRST set's width), nullable alternatives first: the widest is written last
  and so tried first. Union is commutative, so the language is unchanged; llama.cpp has no
  ordered choice (it keeps every stack), so its masks are unchanged too.

The pass is idempotent (no ``*``, ``+`` or ``?`` is left on a non-nullable item, and sorting
a sorted alternation keeps it). Lark grammars (terminal atoms) are left alone: llama.cpp
reads GBNF.
"""

from __future__ import annotations

from ..grammar import Grammar
from ..transforms.registry import has_token_atoms, reshaping


def order_for_llamacpp(g: Grammar, notes: list | None = None, fired: dict | None = None) -> Grammar:
    """``g`` with its repetitions written as empty-first rules and its alternatives ordered
    widest-last (module docstring); ``notes`` / ``fired`` say what changed."""
    notes = [] if notes is None else notes
    fired = {} if fired is None else fired
    if has_token_atoms(g):
        return g
    out, lifted = reshaping("empty-first")(g)
    out, sorted_alts = reshaping("widest-last")(out)
    if lifted:
        fired["llama.cpp-star-rules"] = fired.get("llama.cpp-star-rules", 0) + lifted
    if sorted_alts:
        fired["llama.cpp-order"] = fired.get("llama.cpp-order", 0) + sorted_alts
    if lifted or sorted_alts:
        notes.append(f"llama.cpp: {lifted} repetition(s) written empty-first, {sorted_alts} alternation(s) "
                     f"ordered widest-last (tried first)")
    return out


def fixup(g: Grammar, notes: list, fired: dict) -> Grammar:
    """The llama.cpp target's fix-up (``Target.fixups``)."""
    return order_for_llamacpp(g, notes, fired)


__all__ = ["fixup", "order_for_llamacpp"]
