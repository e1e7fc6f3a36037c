"""The work limits of one optimization, in one record: ``WorkLimits``.

Every field is a budget in work units (same input, same bytes on any machine) that the user
may set; its metadata says which flag sets it (``--max-nodes`` for ``max_nodes``), its help
text, and where the pipeline reads it (a field of ``egraph.Limits``, or the language
check's ``verify.Bounds.max_work``). The command-line flags (``add_arguments``), the
record built from them (``from_args``) and the batch cache key (``Options.key``) are all
generated from the fields: adding a work limit is one field here (and the code that spends
it). None means "the default of the record that reads it".
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ..grammar import GrammarError


def limit(help: str, *, engine: str | None = None, verify: str | None = None):
    """A work-limit field (None: the default): ``engine`` names the ``egraph.Limits`` field
    it sets, ``verify`` the ``verify.Bounds`` field."""
    return field(default=None, metadata={"help": help, "engine": engine, "verify": verify})


@dataclass(frozen=True)
class WorkLimits:
    """The work limits given (None: the default); negative values are refused (exit 2)."""

    max_nodes: int | None = limit(
        "work limit: e-nodes of one saturation (default: egraph.Limits.nodes); a larger "
        "grammar is not lowered into the e-graph, and saturation stops at it", engine="nodes")
    max_iterations: int | None = limit(
        "work limit: saturation iterations (default: egraph.Limits.iterations)", engine="iterations")
    max_verify_work: int | None = limit(
        "work limit of the language check, in Earley steps (default: verify.Bounds.max_work); "
        "when spent, the input is written unchanged and the stop reason printed", verify="max_work")
    max_cleanup_work: int | None = limit(
        "work limit of the clean-ups, in expression nodes and code points over their runs "
        "(default: egraph.Limits.cleanup_work); when spent they stop, the stop reason printed",
        engine="cleanup_work")
    max_inline_work: int | None = limit(
        "work limit of the inliner, in κ of the bodies it rewrites (default: "
        "egraph.Limits.inline_work); when spent it stops, the stop reason printed", engine="inline_work")
    max_engine_check_steps: int | None = limit(
        "work limit of the engine check, in token-mask comparisons per engine (default: "
        "egraph.Limits.engine_check_steps; 0 turns it off): the output's masks against the "
        "input's in every engine the target promises (gramopt.judge)", engine="engine_check_steps")
    max_engine_check_size: int | None = limit(
        "work limit of the engine check, the largest input it compiles in the engines, in rules × "
        "positions (default: egraph.Limits.engine_check_size; costmodels.engine_shapes.compile_work): a larger "
        "input is written unchanged, the stop reason printed (--max-engine-check-steps 0 optimizes "
        "it with the language check alone)", engine="engine_check_size")
    max_judge_repairs: int | None = limit(
        "work limit of the judge's repairs of an output whose masks differ, in expanded symbols of "
        "the grammars they replay, compare in an engine and check (default: "
        "egraph.Limits.judge_repair_work); when spent, the judge keeps a fallback and says so",
        engine="judge_repair_work")

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and value < 0:
                raise GrammarError(f"{flag(f.name)} must not be negative (got {value})")

    def engine_limits(self):
        """The ``egraph.Limits`` the passes and the judge read (defaults where not given)."""
        from ..egraph import Limits
        return Limits(**{f.metadata["engine"]: getattr(self, f.name) for f in fields(self)
                         if f.metadata["engine"] and getattr(self, f.name) is not None})

    def bounds(self):
        """The language check's ``verify.Bounds``, or None when no verify limit is given."""
        given = {f.metadata["verify"]: getattr(self, f.name) for f in fields(self)
                 if f.metadata["verify"] and getattr(self, f.name) is not None}
        if not given:
            return None
        from ..verify import Bounds
        return Bounds(**given)

    def key(self) -> dict:
        """Every limit by its name, None where not given (the cache key's part)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


NAMES = tuple(f.name for f in fields(WorkLimits))


def flag(name: str) -> str:
    """The command-line flag of limit ``name``: ``max_nodes`` → ``--max-nodes``."""
    return "--" + name.replace("_", "-")


def add_arguments(parser) -> None:
    """One ``--max-…`` flag per ``WorkLimits`` field."""
    for f in fields(WorkLimits):
        parser.add_argument(flag(f.name), type=int, metavar="N", help=f.metadata["help"])


def from_args(args) -> WorkLimits:
    """The limits an argparse namespace (or any object with the fields as attributes) gives."""
    return WorkLimits(**{name: getattr(args, name, None) for name in NAMES})


__all__ = ["NAMES", "WorkLimits", "add_arguments", "flag", "from_args"]
