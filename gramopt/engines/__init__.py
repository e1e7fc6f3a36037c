"""The one home of adapters to external engines (and gramopt's own runtime as one of them).

    from gramopt.engines import ENGINES, Env
    eng = ENGINES["xgrammar"](Env.create(vocab))
    eng.missing, eng.compile(g), eng.matcher(h), eng.run(h, tokens)

The interface a new engine implements is ``base.Engine`` (see its module docstring).
Importing this package imports no engine: each adapter imports its engine on first use.
``runtime``, ``grammar`` and ``formats`` never import this package.
"""

from .base import Engine, EngineError, EngineMatcher, Env
from .gramopt import GramoptRuntime, GramoptValiant
from .llamacpp import LlamaCpp
from .llguidance import Llguidance
from .xgrammar import Xgrammar

ENGINES: dict[str, type[Engine]] = {e.name: e for e in (GramoptRuntime, Xgrammar, Llguidance, LlamaCpp,
                                                         GramoptValiant)}
"""Every adapter by name, in report order (``Engine.default``: measured unless named)."""


def oracle_engines(names=("xgrammar",)) -> list:
    """The installed engines among ``names`` as lockstep oracles (``gramopt.decoding.lockstep``):
    objects with ``name``, ``compile(grammar, vocab)`` and ``matcher(compiled)``; an oracle
    with ``own_reference`` (llama.cpp) is compared with itself on the original grammar."""
    from . import llamacpp, xgrammar
    known = {"xgrammar": xgrammar.ORACLE, "llama.cpp": llamacpp.ORACLE}
    return [known[n] for n in names if n in known and ENGINES[n].installed()]


__all__ = ["ENGINES", "Engine", "EngineError", "EngineMatcher", "Env", "oracle_engines"]
