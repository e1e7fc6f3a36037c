"""What a check is given (``Bounds``) and what it returns (``VerifyResult``, ``Counterexample``).

A counterexample is always a real difference: its verdicts were computed by the
reference recognizer of each grammar. ``ok=True`` means no difference was found within
what ``stats`` says was covered; only a method that reports ``exact: True`` proves
equality.
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field

from .symbols import atom_text


class WorkBudgetSpent(Exception):
    """A check's work budget (``Bounds.max_work``) ran out; ``spent`` is what was used."""

    def __init__(self, spent: int):
        super().__init__(f"work budget spent ({spent:,} Earley agenda steps)")
        self.spent = spent


class WorkBudget:
    """The work of the reference recognizers of one check, in agenda steps (one unit: an
    Earley item taken off a set's agenda while the set is built, duplicates included), shared by both recognizers and every
    method; ``spend`` raises ``WorkBudgetSpent`` once past ``limit`` (None: no limit). The
    count depends only on the grammars and the bounds, so a check stops at the same place
    on every machine."""

    __slots__ = ("limit", "spent")

    def __init__(self, limit: int | None):
        self.limit, self.spent = limit, 0

    def spend(self, n: int) -> None:
        self.spent += n
        if self.limit is not None and self.spent > self.limit:
            raise WorkBudgetSpent(self.spent)


@dataclass(frozen=True)
class Bounds:
    """Bounds of the checks, all in work units, so a verdict never depends on the machine's
    load; time is only the outer ``safety_seconds``.

    max_len       every string up to this length over the alphabet's classes is compared
    min_prefixes  ... and the search goes on, level by level, until at least this many
                  prefixes were compared too, unless
    max_prefixes  this many prefixes were compared (the enumeration's budget; reported: the
                  bound counts as met when either of the two above was reached)
    max_prefix_len  no prefix longer than this is enumerated
    coverage      production coverage: one sentence per production and side (finite)
    derivations   random sentences derived from each grammar, checked in the other
    max_depth     derivation depth after which derivations take shortest completions
    max_dfa_states  subset-construction cap of the exact (regular) check (pairs of states)
    seed          random derivations are reproducible
    max_work      Earley agenda steps of the reference recognizers over the whole check
                  (``WorkBudget``); when spent the check stops, deterministically, and says
                  so (``stats["work_spent"]``): no difference found, bounds not met
    safety_seconds  outer safety limit of the whole check: when hit the check stops and says
                  so (``VerifyResult.stats["safety_limit"]``); ``gramopt.passes`` then refuses
                  to emit rather than emit something less checked
    """

    max_len: int = 6
    min_prefixes: int = 20_000
    max_prefixes: int = 5_000
    max_prefix_len: int = 256
    derivations: int = 200
    max_depth: int = 24
    max_dfa_states: int = 20_000
    seed: int = 0
    max_work: int | None = 10_000_000  # 2x the corpus maximum (SMILES_acrylates: 4.8M)
    safety_seconds: float = math.inf  # off unless asked for: max_work bounds the check

    def deadline(self, t0: float) -> float:
        return t0 + self.safety_seconds


@dataclass(frozen=True)
class Counterexample:
    """An input on which the two grammars differ.

    kind "string": ``data`` is a sentence of one grammar and not of the other;
    kind "prefix": ``data`` is a viable prefix of one and not of the other.
    ``in_original`` / ``in_candidate`` say which. ``data`` is bytes, or a tuple of atom
    ids for Lark grammars (``atoms`` then names them).
    """

    data: bytes | tuple
    kind: str
    in_original: bool
    in_candidate: bool
    method: str
    atoms: tuple | None = field(default=None, compare=False)

    def text(self) -> str:
        if isinstance(self.data, bytes):
            return _bytes_text(self.data)
        names = [atom_text(self.atoms[x]) if self.atoms else str(x) for x in self.data]
        return "⟨" + " ".join(names) + "⟩"

    def __str__(self) -> str:
        what = "sentence" if self.kind == "string" else "viable prefix"
        has = "original" if self.in_original else "candidate"
        lacks = "candidate" if self.in_original else "original"
        return (f"{self.text()} is a {what} of the {has} grammar but not of the {lacks} "
                f"(found by {self.method}, length {len(self.data)})")


def _bytes_text(data: bytes) -> str:
    """Python-style quoted text, with bytes that are not printable UTF-8 as \\xNN."""
    out = []
    i = 0
    while i < len(data):
        for n in (1, 2, 3, 4):
            try:
                ch = data[i:i + n].decode("utf-8")
            except UnicodeDecodeError:
                continue
            out.append(ch if ch.isprintable() and ch not in '"\\' else
                       ch.encode("unicode_escape").decode("ascii") if ch != '"' else '\\"')
            i += n
            break
        else:
            out.append(f"\\x{data[i]:02x}")
            i += 1
    return '"' + "".join(out) + '"'


@dataclass(frozen=True)
class VerifyResult:
    """``ok``: no difference found. ``stats[method]`` says what each method covered."""

    ok: bool
    counterexample: Counterexample | None
    stats: dict

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        head = "equivalent" if self.ok else f"DIFFERENT: {self.counterexample}"
        if self.ok and self.stats.get("work_spent"):
            head = (f"no difference found before the work budget ran out (in {self.stats['work_spent']}, "
                    f"{self.stats.get('work', 0):,} steps): the bounds were not met")
        elif self.ok and any(isinstance(s, dict) and s.get("exact") for s in self.stats.values()):
            head = "equivalent (proved exactly)"
        elif self.ok:
            head = "no difference found within the bounds"
        return head
