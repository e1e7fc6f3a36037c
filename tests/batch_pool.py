"""One batch worker for many batches: conftest's ``one_batch_worker`` fixture.

The batch driver (``gramopt.cli.batch._schedule``) builds a ``ProcessPoolExecutor`` per
batch: every batch spawns fresh worker processes, and each pays the imports and the engine
loads (~1 CPU s, ~5 with the default target's three engines) before its first item. A test
whose point is what a batch writes, not the pool's life (the front door's cases: a batch of
one file each), can run its batches on one pool instead. ``SharedPool`` stands in for the
executor class while such a test runs: the driver's first call builds the real executor with
the driver's own arguments (spawn context, ``_worker_init``, its worker count), later calls
with the same arguments get that executor back, and the driver's normal ``shutdown(wait=True)``
leaves it running; a stop (``shutdown(cancel_futures=True)``, which ``_stop_workers`` sends
before it ends the processes), a broken pool or other arguments retire it, so a later batch
gets a new one. Every item still goes through ``optimize_item`` in a spawned worker, as in
production, where one worker also serves many items in turn.
"""

from __future__ import annotations

from concurrent.futures.process import ProcessPoolExecutor  # the class itself, never a stand-in


class SharedPool:
    """Called as ``ProcessPoolExecutor(*args, **kwargs)``: a lease on one shared executor
    (module docstring); ``close()`` ends it. ``built`` counts the executors made."""

    def __init__(self):
        self._pool: ProcessPoolExecutor | None = None
        self._args: tuple | None = None
        self.built = 0

    def __call__(self, *args, **kwargs) -> "_Lease":
        same = (args, sorted(kwargs.items(), key=lambda kv: kv[0]))
        if self._pool is None or self._args != same or getattr(self._pool, "_broken", False):
            self.close()
            self._pool, self._args = ProcessPoolExecutor(*args, **kwargs), same
            self.built += 1
        return _Lease(self, self._pool)

    def retire(self, pool: ProcessPoolExecutor) -> None:
        """A lease's executor was stopped: the next batch builds a new one."""
        if self._pool is pool:
            self._pool, self._args = None, None

    def close(self) -> None:
        """Shut the shared executor down and wait for its worker processes to end."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool, self._args = None, None


class _Lease:
    """One batch's view of the shared executor: ``submit`` as the executor's; ``shutdown``
    after a batch that completed keeps it; a stop is passed on and retires it."""

    def __init__(self, owner: SharedPool, pool: ProcessPoolExecutor):
        self._owner, self._pool = owner, pool

    def submit(self, *args, **kwargs):
        return self._pool.submit(*args, **kwargs)

    @property
    def _processes(self):  # what the driver's _stop_workers ends
        return self._pool._processes

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if wait and not cancel_futures:
            return  # a batch that completed: the executor serves the next one
        self._owner.retire(self._pool)
        self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)
