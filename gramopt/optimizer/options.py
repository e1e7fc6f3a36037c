"""What shapes an optimization's output, in one frozen record: ``Options``.

The single-file command, the batch workers and the request cache all build one; every field
shapes the bytes written, so the record is also the cache key (``key``): nothing is copied
by hand into a list of "shaping" option names. What shapes nothing (the report, a safety
limit such as ``--max-memory``, the number of workers) is not here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Mapping

from .. import targets
from .limits import NAMES as LIMIT_NAMES, WorkLimits


@dataclass(frozen=True)
class Options:
    """``target`` (a name in ``gramopt.targets``), ``passes`` (None: the pipeline), ``verify``,
    ``to`` (the output dialect asked for), ``dialect`` (the input's; None: from the
    extension), ``start``, ``strict`` (a warning is an error), ``cost_model`` (a path; None:
    the shipped one), ``keep`` (entry points kept, sorted), ``converter`` (a schema's), ``fast``
    (the per-request mode) and the work ``limits``."""

    target: str = targets.DEFAULT
    passes: tuple[str, ...] | None = None
    verify: bool = True
    to: str | None = None
    dialect: str | None = None
    start: str | None = None
    strict: bool = False
    cost_model: str | None = None
    keep: tuple[str, ...] = ()
    converter: str | None = None
    fast: bool = False
    limits: WorkLimits = field(default_factory=WorkLimits)

    def __post_init__(self) -> None:
        if self.passes is not None:
            object.__setattr__(self, "passes", tuple(self.passes))
        object.__setattr__(self, "keep", tuple(sorted(set(self.keep or ()))))

    @classmethod
    def of(cls, given: "Options | Mapping") -> "Options":
        """``given`` itself, or the record of a flat mapping (``{"target": ..., "max_nodes": ...}``,
        as the Python callers and tests write options); keys that shape nothing are ignored."""
        if isinstance(given, Options):
            return given
        names = {f.name for f in fields(cls)} - {"limits"}
        return cls(**{k: v for k, v in given.items() if k in names and v is not None},
                   limits=WorkLimits(**{k: given.get(k) for k in LIMIT_NAMES}))

    def key(self) -> dict:
        """The options as the cache key holds them: every field by name, each work limit by
        its own name, ``keep`` None when empty and ``fast`` only when set (a default run's key
        stays what it was before these were options)."""
        key = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("limits", "fast")}
        key["passes"] = list(self.passes) if self.passes is not None else None
        key["keep"] = list(self.keep) or None
        key.update(self.limits.key())
        if self.fast:
            key["fast"] = True
        return key


__all__ = ["Options"]
