"""How many examples a hypothesis test draws: ``examples(n)``.

The default run (``-m "not slow"``, the README's and CI's command) draws a third of ``n``
(at least 20): every property still runs on fresh random inputs each run, on fewer of them.
``n`` itself under ``GRAMOPT_EXAMPLES=full`` or any other ``-m`` selection (set by conftest's
``pytest_configure`` before the test modules are imported).
"""

from __future__ import annotations

import os

FULL = "full"


def examples(n: int) -> int:
    """``n`` in a full run, else ``max(20, n // 3)`` (never more than ``n``)."""
    if os.environ.get("GRAMOPT_EXAMPLES") == FULL:
        return n
    return min(n, max(20, n // 3))
