"""A job in, text and report out: the one front door of optimization.

    from gramopt.optimizer import Job, Options, WorkLimits, run_job
    outcome = run_job(Job("in.gbnf", Options(target="xgrammar"), output="out.ebnf"))
    outcome.text, outcome.result.report

``Options`` (options.py) is what shapes the output and the cache key; ``WorkLimits``
(limits.py) every work budget, from which the ``--max-…`` flags are generated; ``run_job``
(job.py) reads, optimizes (``gramopt.passes``), chooses the output dialect and warns; the
cache of outputs is cache.py. The command line (``gramopt.cli``: one file, or a batch on
worker processes or Dask) and serving's request cache stand on it.
"""

from .job import Job, Outcome, run_job
from .limits import WorkLimits
from .options import Options

__all__ = ["Job", "Options", "Outcome", "WorkLimits", "run_job"]
