"""The ``gramopt`` command line: one module per command, each thin over the Python API.

    gramopt analyze | convert | optimize | verify | bench | calibrate | sample

Each command module has ``HELP``, ``add_arguments(parser)`` and ``run(args) -> exit status``
and imports its heavy dependencies (egglog, numba, torch) inside ``run``. Exit status:
``exits.py``. Never a traceback unless GRAMOPT_DEBUG=1.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys

from ..grammar import GrammarError
from . import analyze, bench, calibrate, convert, optimize, sample, verify
from .guard import LimitReached, guarded
from .exits import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED, EXIT_USAGE

COMMANDS = {"analyze": analyze, "convert": convert, "optimize": optimize, "verify": verify, "bench": bench,
            "calibrate": calibrate, "sample": sample}


def _parser() -> argparse.ArgumentParser:
    from .._version import __version__
    p = argparse.ArgumentParser(prog="gramopt", description="Optimize grammars for constrained decoding.")
    p.add_argument("--version", action="version", version=f"gramopt {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module in COMMANDS.items():
        sp = sub.add_parser(name, help=module.HELP, description=module.__doc__,
                            formatter_class=getattr(module, "FORMATTER", argparse.HelpFormatter))
        module.add_arguments(sp)
        sp.set_defaults(run=module.run)
    return p


def _written(e: BaseException) -> str:
    """What a stopped command wrote: a batch counts its outputs (``written`` on the exception)."""
    n = getattr(e, "written", 0)
    return "no output was written" if not n else f"{n} output(s) were written before it stopped"


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, so that it stops as on Ctrl-C: a batch ends its
    workers (none goes on computing once the client is gone) and counts what it wrote, an
    output being written leaves no temporary file."""


def _on_sigterm(signum, frame):
    raise Terminated()


def _handle_sigterm():
    """Install ``_on_sigterm``; the previous handler, or None off the main thread (where
    Python cannot install one)."""
    try:
        return signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:
        return None


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    previous = _handle_sigterm()
    try:
        return _run(args)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace) -> int:
    # A grammar's IR and the verifier's states are many small long-lived objects: with the
    # default threshold (700 allocations) the collector rescans them all the time (a
    # 50,000-word enum: 30% of its time). Reference cycles are rare here; they are still freed.
    gc.set_threshold(50_000, 20, 20)
    debug = bool(os.environ.get("GRAMOPT_DEBUG"))
    try:
        with guarded(getattr(args, "max_seconds", None), getattr(args, "max_memory", None)):
            return args.run(args)
    except LimitReached as e:  # a safety limit (guard.py): one line, the stage it stopped in
        where = getattr(args, "input", None) or getattr(args, "original", None) or getattr(args, "file", None)
        print(f"{where or 'gramopt'}: error: {e}; {_written(e)}", file=sys.stderr)
        return EXIT_USAGE
    except GrammarError as e:
        if e.path is None:  # raised past the reader (e.g. repetitions too large to expand)
            e = e.located(getattr(args, "file", None) or getattr(args, "input", None)
                          or getattr(args, "original", None))
        print(e.format(), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as e:
        how = "terminated" if isinstance(e, Terminated) else "interrupted"
        print(f"gramopt: {how}; {_written(e)}", file=sys.stderr)
        return EXIT_TERMINATED if isinstance(e, Terminated) else EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # a bug in gramopt: one line, the traceback only on request
        if debug:
            raise
        print(f"gramopt: internal error: {type(e).__name__}: {e} (set GRAMOPT_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return EXIT_INTERNAL


__all__ = ["COMMANDS", "main"]
