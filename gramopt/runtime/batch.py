"""Masks of many decoding rows at once: one nogil numba call per thread over the rows.

    bm = BatchMatcher(max_threads=2)
    bm.batch_fill_next_token_bitmask(matchers, bitmask)          # rows 0..len(matchers)-1
    bm.batch_fill_next_token_bitmask(matchers, bitmask, indices=[3, 5])
    BatchMatcher.batch_accept_token(matchers, tokens)             # -> list[bool]
    BatchMatcher.batch_rollback(matchers, 1)

How the rows are filled: each thread (the calling one and ``max_threads - 1`` pool workers)
makes ONE call of ``fill_rows``, a numba kernel compiled with ``nogil=True`` that takes
rows from a shared counter (an atomic fetch-and-add) and runs ``earley.fill_mask_packed``
on each, until none is left. No Python runs between two rows, so the threads never wait
for the GIL inside a batch: each crosses it once to start and once to return. (The first
version called ``Matcher.fill_next_token_bitmask`` per row from Python threads: each row
meant a GIL hand-off, and on a loaded machine a hand-off waits for the other thread to be
scheduled, so the batch ran at 0.2–0.6x of the sequential loop.) Rows are handed out
heaviest first (by their estimated work, below), so the last row taken is a cheap one.

A row the kernel cannot finish alone — its chart overflowed, or its set has roots whose
token classes are not built yet (the JIT, tokens.py) — stops early with a status; those
rows are finished afterwards on the calling thread by the matcher's own slow path
(``Matcher._kernel_finish``), exactly as a sequential fill finishes them. During the
kernels nothing is written but each row's own chart, buffers and bitmask row: the token
tables are only read (a table's pools change only in the slow path, after the kernels).

When to use threads is decided by work units, not time: the rows' estimated work for
this mask (trie nodes + Earley items, the units of the counters every mask reports), read
from each row's chart before the batch: 0 when its mask cache holds the mask (a lookup,
``earley.mask_cached``: in lockstep most rows are inside a string or a number), else the
work of its last mask (0 for a fresh matcher), summed over the batch; below
``min_parallel_work`` (default 16,384: about 200 µs of walking) the rows are filled
sequentially on the calling thread, since a thread hand-off would cost more than it saves. The estimate is the same for the same rows
(deterministic) and never changes a mask: each row's mask depends only on its matcher,
whichever thread fills it, and the tests compare the two bit for bit.

A worker that wakes late (a busy machine) finds fewer rows left, and one that never
started by the time the calling thread ran out of rows is cancelled, so a batch is never
slower than the calling thread alone by more than a submit and a cancel.

Backend-agnostic: a matcher other than this package's Earley ``Matcher`` (the matrix
backend, a wrapper) is filled by its own ``fill_next_token_bitmask(out, row)``, after the
kernel rows, on the calling thread; ``accept_token``, ``accept_string`` and ``rollback``
are all the batch helpers need.
"""

from __future__ import annotations

import os

import numpy as np

from .earley import PACKED_WIDTH, fill_rows, plan_rows
from .matcher import Matcher

MIN_PARALLEL_WORK = 16_384  # work units (trie nodes + Earley items): about 200 µs of walking


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
    run on; 1 fills sequentially on the calling thread. ``min_parallel_work``: the work
    units (see the module docstring) a batch must reach to be spread over threads."""

    def __init__(self, max_threads: int | str = "auto", min_parallel_work: int = MIN_PARALLEL_WORK):
        if max_threads == "auto":
            max_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        if not isinstance(max_threads, int) or max_threads < 1:
            raise ValueError(f"max_threads must be a positive int or 'auto', got {max_threads!r}")
        self.max_threads = max_threads
        self.min_parallel_work = int(min_parallel_work)
        self.last_parallel = False  # whether the last batch used the pool
        self._pool = None
        if max_threads > 1:
            from concurrent.futures import ThreadPoolExecutor
            self._pool = ThreadPoolExecutor(max_threads - 1, thread_name_prefix="gramopt-mask")

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
        counters = self._fill(matchers, host, rows)
        if staged:
            import torch
            src = torch.from_numpy(host)
            idx = torch.as_tensor(rows, dtype=torch.long)
            bitmask[idx.to(bitmask.device)] = src[idx].to(bitmask.device)
        return counters

    def _fill(self, matchers: list, host: np.ndarray, rows: list[int]) -> list:
        """The rows' masks into ``host``: kernel rows through ``fill_rows`` (threads when the
        batch's work reaches ``min_parallel_work``), then the rest on the calling thread."""
        n = len(matchers)
        counters: list = [None] * n
        kernel, addrs = [], []
        if host.flags.c_contiguous and len({id(m) for m in matchers}) == n:
            for i, m in enumerate(matchers):
                if type(m) is Matcher and m._kernel_vector() is not None:
                    if host.shape[1] < m.vocab.n_words:
                        raise ValueError(f"bitmask has {host.shape[1]} words, need {m.vocab.n_words}")
                    kernel.append(i)
                    addrs.append(m._A_addr)
        self.last_parallel = False
        if kernel:
            addrs = np.array(addrs, np.int64)
            krows = np.array([rows[i] for i in kernel], np.int64)
            order = np.arange(len(kernel), dtype=np.int64)
            work = plan_rows(addrs, order, np.empty(len(kernel), np.int64))  # heaviest first
            out = host.view(np.uint32)
            counter = np.zeros(1, np.int64)
            status = np.zeros(len(kernel), np.int64)
            args = (addrs, PACKED_WIDTH, out, krows, order, counter, status)
            threads = min(self.max_threads, len(kernel))
            if self._pool is None or threads < 2 or work < self.min_parallel_work:
                fill_rows(*args)
            else:
                self.last_parallel = True
                futures = [self._pool.submit(fill_rows, *args) for _ in range(threads - 1)]
                mine = fill_rows(*args)  # the calling thread works too
                for f in futures:
                    # a worker that never started is cancelled; one that started but found
                    # no row left touches nothing of this batch again: not waited for
                    if not f.cancel() and mine < len(kernel):
                        f.result()
            for j, i in enumerate(kernel):
                counters[i] = matchers[i]._kernel_finish(out[rows[i]], int(status[j]))
        if len(kernel) < n:
            done = set(kernel)
            for i, m in enumerate(matchers):
                if i not in done:
                    counters[i] = m.fill_next_token_bitmask(host, rows[i])
        return counters

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
