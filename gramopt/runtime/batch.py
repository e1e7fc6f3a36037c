"""Masks of many decoding rows at once: a thread pool over matchers whose kernels drop the GIL.

    bm = BatchMatcher(max_threads=2)
    bm.batch_fill_next_token_bitmask(matchers, bitmask)          # rows 0..len(matchers)-1
    bm.batch_fill_next_token_bitmask(matchers, bitmask, indices=[3, 5])
    BatchMatcher.batch_accept_token(matchers, tokens)             # -> list[bool]
    BatchMatcher.batch_rollback(matchers, 1)

Why threads work: a mask is almost all trie walk inside numba kernels compiled with
``nogil=True`` (earley.py; measured on the C grammar: 98% of a fill is ``walk_entries``), so
rows filled on different threads run on different cores while the Python glue between
kernels takes turns on the GIL. The pool is private to the BatchMatcher and lives until
``close()`` (or ``with BatchMatcher() as bm:``). Matchers that share a token table are safe
to fill together: a state's token classes are built once, under the table's lock
(tokens.py). Each row writes only its own row of the bitmask.

Small batches of cheap rows (a JSON grammar's ~20 μs masks) lose more to thread hand-offs
than they gain, so the pool is used only when the last fills' measured cost per row times
the number of rows reaches ``min_parallel_s`` (default 200 μs); otherwise the rows are
filled on the calling thread. This picks a schedule only: a row's mask is the same either way.

Rows are handed out one at a time from a shared counter, and the calling thread takes rows
too: a worker that wakes late (a busy machine) finds fewer rows left, and one that never
started by the end is cancelled, so a batch is never slower than the calling thread alone
by more than a submit and a cancel.

Backend-agnostic: any matcher with ``fill_next_token_bitmask(out, row)``,
``accept_token``, ``accept_string`` and ``rollback`` (the Matcher API) can be batched; the
speedup is what its kernels leave outside the GIL. Which thread fills which row varies
from call to call; the result does not (each row's mask depends only on its matcher).
"""

from __future__ import annotations

import itertools
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np


def _rows_view(bitmask):
    """A numpy (batch, words) int32 view sharing ``bitmask``'s memory (numpy, or a CPU torch
    tensor); None for tensors on other devices."""
    if isinstance(bitmask, np.ndarray):
        return bitmask
    if getattr(bitmask, "device", None) is not None and bitmask.device.type == "cpu":
        return bitmask.numpy()
    return None


class BatchMatcher:
    """Fill the next-token bitmasks of many matchers in parallel (xgrammar's
    ``BatchGrammarMatcher`` API). ``max_threads="auto"`` uses the cores this process may
    run on; 1 fills sequentially on the calling thread."""

    def __init__(self, max_threads: int | str = "auto", min_parallel_s: float = 200e-6):
        if max_threads == "auto":
            max_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        if not isinstance(max_threads, int) or max_threads < 1:
            raise ValueError(f"max_threads must be a positive int or 'auto', got {max_threads!r}")
        self.max_threads = max_threads
        self.min_parallel_s = float(min_parallel_s)
        self._row_cost: float | None = None  # running estimate of one row's fill, seconds
        self._pool = ThreadPoolExecutor(max_threads, thread_name_prefix="gramopt-mask") if max_threads > 1 else None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> "BatchMatcher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def batch_fill_next_token_bitmask(self, matchers, bitmask, indices=None) -> list:
        """Fill row ``indices[i]`` (default ``i``) of ``bitmask`` (int32 (batch, words): numpy,
        or a torch tensor on any device) with the mask of ``matchers[i]``; returns each row's
        counters. A device tensor is filled through a host buffer and copied once."""
        matchers = list(matchers)
        rows = list(range(len(matchers))) if indices is None else [int(i) for i in indices]
        if len(rows) != len(matchers):
            raise ValueError(f"{len(matchers)} matchers but {len(rows)} indices")
        host = _rows_view(bitmask)
        staged = host is None
        if staged:  # e.g. CUDA: fill a host copy, then one transfer
            host = np.zeros(tuple(bitmask.shape), np.int32)
        if host.ndim != 2 or host.dtype != np.int32:
            raise ValueError(f"bitmask must be int32 (batch, words), got {host.dtype} {host.shape}")
        if rows and (min(rows) < 0 or max(rows) >= host.shape[0]):
            raise ValueError(f"row index out of range for a bitmask of {host.shape[0]} rows")
        if len(set(rows)) != len(rows):
            raise ValueError("duplicate row indices")
        counters: list = [None] * len(matchers)

        def fill(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                counters[i] = matchers[i].fill_next_token_bitmask(host, rows[i])

        n = len(matchers)
        cheap = self._row_cost is None or self._row_cost * n < self.min_parallel_s
        if self._pool is None or n <= 1 or cheap:
            self._timed(fill, 0, n)
        else:
            taken = itertools.count()  # rows are handed out one at a time (next() is atomic)

            def drain() -> int:
                done = 0
                for i in taken:
                    if i >= n:
                        break
                    fill(i, i + 1)
                    done += 1
                return done

            futures = [self._pool.submit(drain) for _ in range(min(self.max_threads, n) - 1)]
            t = time.perf_counter()
            mine = drain()  # the calling thread works too, so a late worker costs nothing
            self._note((time.perf_counter() - t) / max(1, mine))
            for f in futures:
                if not f.cancel():  # a worker that never started is not waited for
                    f.result()
        if staged:
            import torch
            src = torch.from_numpy(host)
            idx = torch.as_tensor(rows, dtype=torch.long)
            bitmask[idx.to(bitmask.device)] = src[idx].to(bitmask.device)
        return counters

    def _timed(self, fill, lo: int, hi: int) -> None:
        t = time.perf_counter()
        fill(lo, hi)
        if hi > lo:
            self._note((time.perf_counter() - t) / (hi - lo))

    def _note(self, cost: float) -> None:
        self._row_cost = cost if self._row_cost is None else 0.5 * (self._row_cost + cost)

    @staticmethod
    def batch_accept_token(matchers, tokens) -> list[bool]:
        matchers, tokens = list(matchers), list(tokens)
        if len(matchers) != len(tokens):
            raise ValueError(f"{len(matchers)} matchers but {len(tokens)} tokens")
        return [bool(m.accept_token(int(t))) for m, t in zip(matchers, tokens)]

    @staticmethod
    def batch_accept_string(matchers, strings) -> list[bool]:
        matchers, strings = list(matchers), list(strings)
        if len(matchers) != len(strings):
            raise ValueError(f"{len(matchers)} matchers but {len(strings)} strings")
        return [bool(m.accept_string(s)) for m, s in zip(matchers, strings)]

    @staticmethod
    def batch_rollback(matchers, num_tokens=1) -> None:
        matchers = list(matchers)
        ks = [num_tokens] * len(matchers) if isinstance(num_tokens, int) else list(num_tokens)
        if len(ks) != len(matchers):
            raise ValueError(f"{len(matchers)} matchers but {len(ks)} rollback counts")
        for m, k in zip(matchers, ks):
            m.rollback(k)
