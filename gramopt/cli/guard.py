"""The outer safety limits of one command: ``--max-seconds`` (wall clock) and ``--max-memory``
(resident memory), over every stage — reading, clean-ups, saturation, inlining,
verification, writing.

    with guarded(max_seconds=5, max_memory="1G"): run the command
    # past a limit: LimitReached("stopped at --max-seconds 5 during pass saturate")

They are safety limits, not budgets: time and memory depend on the machine, so reaching one
never yields a different output — the command stops, writes nothing (outputs are written
atomically), and ``gramopt.cli`` prints one line naming the limit and the stage
(``gramopt.stage``) and exits 2. What shapes an output is counted in work units (the e-graph's
``Limits``, the verifier's ``Bounds.max_work``), whose fallbacks are deterministic.

How. Time: ``SIGALRM`` at the deadline raises ``LimitReached`` in the main thread. Memory: a
daemon thread samples the resident set size (``/proc/self/statm``) every 20 ms and, past
the limit, interrupts the main thread the same way (``SIGUSR1``). Both take effect when
the main thread next runs Python code; when it has not stopped within a grace period (a
long call into native code), the sampling thread ends the process itself (exit 2, the same
line). That thread needs the interpreter lock: native code that holds it for long delays
both until it returns (egglog's calls are short: saturation is bounded by its work limits).
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from contextlib import contextmanager

from ..grammar import GrammarError
from ..stage import current
from .exits import EXIT_USAGE

GRACE_SECONDS = 2.0  # after a limit, the main thread's time to stop before the process is ended
SAMPLE_SECONDS = 0.02
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class LimitReached(BaseException):
    """A safety limit was reached (a BaseException, so that no ``except Exception`` of the
    stages swallows it)."""


def parse_memory(text: str) -> int:
    """Bytes of ``512M``, ``2G``, ``1.5G``, ``100000000`` (K/M/G/T are powers of 1024)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not m or float(m.group(1)) <= 0:
        raise GrammarError(f"--max-memory: expected a positive size such as 512M or 2G, got '{text}'")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def check_seconds(seconds: float | None) -> None:
    if seconds is not None and not seconds > 0:
        raise GrammarError(f"--max-seconds must be positive (got {seconds:g})")


def resident_bytes() -> int:
    """The resident set size of this process (0 where /proc is absent)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _size(n: int) -> str:
    return f"{n / (1 << 30):.1f} GB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MB"


@contextmanager
def guarded(max_seconds: float | None = None, max_memory: str | None = None):
    """Run the body under the limits given (None: that limit is off); see the module docstring."""
    check_seconds(max_seconds)
    limit_bytes = parse_memory(max_memory) if max_memory is not None else None
    if (max_seconds is None and limit_bytes is None) or threading.current_thread() is not threading.main_thread():
        yield
        return
    if limit_bytes is not None and resident_bytes() > limit_bytes:  # already past it: no sampling race
        raise LimitReached(f"stopped at --max-memory {max_memory} ({_size(resident_bytes())} resident) "
                           f"during {current()}")
    reached: list[str] = []
    stop = threading.Event()

    def interrupt(_signum, _frame):
        if reached and not stop.is_set():
            stop.set()  # raise once: the cleanups that follow must run undisturbed
            raise LimitReached(reached[0])

    def on_alarm(_signum, _frame):
        if not reached:
            reached.append(f"stopped at --max-seconds {max_seconds:g} during {current()}")
        interrupt(_signum, _frame)

    deadline = time.monotonic() + max_seconds if max_seconds is not None else None

    def watch() -> None:
        while not stop.wait(SAMPLE_SECONDS):
            if limit_bytes is not None and not reached and resident_bytes() > limit_bytes:
                reached.append(f"stopped at --max-memory {max_memory} ({_size(resident_bytes())} resident) "
                               f"during {current(threading.main_thread())}")
                os.kill(os.getpid(), signal.SIGUSR1)
            late = deadline is not None and time.monotonic() > deadline
            if (reached or late) and not stop.wait(GRACE_SECONDS):  # the main thread did not stop
                why = reached[0] if reached else (f"stopped at --max-seconds {max_seconds:g} during "
                                                  f"{current(threading.main_thread())}")
                os.write(2, f"gramopt: error: {why}; nothing written\n".encode())
                os._exit(EXIT_USAGE)

    old = {s: signal.getsignal(s) for s in (signal.SIGALRM, signal.SIGUSR1)}
    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGUSR1, interrupt)
    if max_seconds is not None:
        signal.setitimer(signal.ITIMER_REAL, max_seconds)
    watcher = threading.Thread(target=watch, name="gramopt-limits", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        stop.set()
        for s, h in old.items():
            signal.signal(s, h)


def add_arguments(p) -> None:
    p.add_argument("--max-seconds", type=float, metavar="S",
                   help="safety limit on wall-clock time: past it the command stops, writes nothing, "
                        "names the stage and exits 2 (default: none)")
    p.add_argument("--max-memory", metavar="SIZE",
                   help="safety limit on resident memory, e.g. 512M or 2G: past it the command stops "
                        "the same way (default: none)")


__all__ = ["LimitReached", "add_arguments", "guarded", "parse_memory", "resident_bytes"]
