"""gramopt — an equality-saturation optimizing compiler for LLM decoding grammars.

Public API (stable):

    gramopt.read(path, dialect=None) -> Grammar       a .json JSON Schema too (its converter's grammar)
    gramopt.parse(text, dialect) -> Grammar           dialect "jsonschema" for a schema's text
    gramopt.write(grammar, dialect=None) -> str
    gramopt.analyze(grammar) -> Analysis        (.kappa, .structure, .findings, .format(), .to_json())
    gramopt.optimize(grammar, target=..., passes=..., limits=..., keep=...) -> Result(grammar, report)
    gramopt.TARGETS                              the targets by name (``gramopt.targets``)

A lazy facade: each name is imported on first use, so ``import gramopt`` loads nothing
heavy (``optimize`` loads egglog when first called for).
"""

from ._version import __version__

_HOMES = {
    "read": "inputs", "parse": "inputs", "write": "formats",
    "Grammar": "grammar", "GrammarError": "grammar", "Rule": "grammar",
    "Analysis": "summary", "analyze": "summary",
    "optimize": "passes", "OptimizationError": "passes", "Limits": "passes",
    "TARGETS": "targets", "Target": "targets",
}

__all__ = sorted(_HOMES) + ["__version__"]


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'gramopt' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
