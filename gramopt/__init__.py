"""gramopt — an equality-saturation optimizing compiler for LLM decoding grammars.

Public API (stable):

    gramopt.read(path, dialect=None) -> Grammar
    gramopt.parse(text, dialect) -> Grammar
    gramopt.write(grammar, dialect=None) -> str
    gramopt.analyze(grammar) -> Analysis        (.kappa, .structure, .findings, .format(), .to_json())
    gramopt.optimize(grammar, target=..., passes=..., limits=...) -> Result(grammar, report)

``optimize`` is imported on first use, so ``import gramopt`` does not load egglog.
"""

from .formats import parse, read, write
from .grammar import Grammar, GrammarError, Rule
from .summary import Analysis, analyze

from ._version import __version__

__all__ = ["Analysis", "Grammar", "GrammarError", "Rule", "analyze", "optimize", "parse", "read",
           "write", "__version__"]


def __getattr__(name: str):
    if name == "optimize":
        from .passes import optimize
        return optimize
    raise AttributeError(f"module 'gramopt' has no attribute {name!r}")
