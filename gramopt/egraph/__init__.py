"""The e-graph engine: lowering IR ⇄ egglog terms, saturation with limits, extraction.

    eg = GrammarEGraph(grammar)                      lower (one batched egglog program)
    report = Runner(rewrites, Limits()).run(eg)      saturate; report.stop_reason
    Extractor(eg, recursion_penalty=…).extract().grammar   choose one form per needed class

Holds no rewrite rules of its own (they are data, in ``gramopt.rewrites``).
"""

from .extract import Extraction, ExtractionError, Extractor, NodeCost
from .lower import ENode, GrammarEGraph, Snapshot
from .rewrite import Context, Rewrite
from .runner import Limits, Runner, RunReport, StopReason

__all__ = ["Extraction", "ExtractionError", "Extractor", "NodeCost", "ENode",
           "GrammarEGraph", "Snapshot", "Context", "Rewrite", "Limits", "Runner", "RunReport",
           "StopReason"]
