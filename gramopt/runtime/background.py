"""The background compile of a new environment's kernels: one child process per cache and sources.

jit.py starts it on a process's first kernel call when the kernel cache has no ready
stamp, and serves the kernels' Python twins until ``state()`` says it is done. The child
is ``python -m gramopt.runtime.warm --background`` on this very package (its folder first
on the path) and cache; it runs in its own session, so it finishes filling the cache
even when the process that started it ends first, and every later process loads the
kernels. A lock file beside the stamp it will write (``lock_for``: ``warming-<key>``, the
child's pid) makes other processes of the same cache and sources wait for that child
instead of starting their own (another install sharing the cache has another key, its
own compile); a lock whose process is gone, or older than STALE_S, is taken over.
Standard library only (jit.py imports it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

STALE_S = 1800.0  # a lock this old is a compile that hung or died with its machine


class Background:
    """The background compile of the kernel cache ``root``: a child process started here
    (``proc``), or one another process started (its pid in ``lock_for(stamp)``).
    ``state()``: running, ready (the stamp is there) or failed (it ended without one; its
    stderr is in ``log``)."""

    def __init__(self, root: str, stamp: str, proc: subprocess.Popen | None):
        self.root = root
        self.proc = proc
        self.owner = os.getpid()  # a forked process cannot wait for its parent's child
        self.stamp = stamp
        self.lock = lock_for(stamp)
        self.log = os.path.join(root, "warm.log")

    @classmethod
    def start(cls, root: str, stamp: str) -> "Background | None":
        """Start the compile unless another process runs one (then wait for that one);
        ``stamp``: the ready stamp it writes (jit.ready_stamp). None when no child can be
        started (no interpreter path, no lock file)."""
        lock = lock_for(stamp)
        for _ in range(2):
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if _lock_alive(lock):
                    return cls(root, stamp, None)
                remove(lock)
                continue
            except OSError:
                return None
            try:
                proc = _spawn(root)
            except OSError:
                os.close(fd)
                remove(lock)
                return None
            os.write(fd, str(proc.pid).encode())
            os.close(fd)
            return cls(root, stamp, proc)
        return None

    def state(self) -> str:
        if os.path.exists(self.stamp):
            return "ready"
        if self.proc is not None and os.getpid() == self.owner:
            if self.proc.poll() is None:
                return "running"
        elif _lock_alive(self.lock):
            return "running"
        return "ready" if os.path.exists(self.stamp) else "failed"


def lock_for(stamp: str) -> str:
    """The lock file of the compile that writes ready stamp ``stamp`` (``ready-<key>``)."""
    folder, name = os.path.split(stamp)
    return os.path.join(folder, "warming-" + name.removeprefix("ready-"))


def _spawn(root: str) -> subprocess.Popen:
    """``python -m gramopt.runtime.warm --background`` on this very package (its folder
    first on the path) and cache, in its own session: it finishes filling the cache even
    when this process ends first."""
    if not sys.executable:
        raise OSError("no interpreter path")
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.environ.get("PYTHONPATH")
    env = dict(os.environ, GRAMOPT_CACHE=os.path.dirname(root), GRAMOPT_KERNELS="compiled",
               PYTHONPATH=here + (os.pathsep + path if path else ""))
    with open(os.path.join(root, "warm.log"), "wb") as log:
        return subprocess.Popen([sys.executable, "-m", "gramopt.runtime.warm", "--background"],
                                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=log, start_new_session=True)


def _lock_alive(lock: str) -> bool:
    """Whether the lock file names a live process (an empty one: one being written)."""
    try:
        age = time.time() - os.stat(lock).st_mtime
        with open(lock) as f:
            text = f.read().strip()
    except OSError:
        return False
    if age > STALE_S:
        return False
    if not text:
        return age < 60
    try:
        os.kill(int(text), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError):
        return True
    return True


def remove(path: str) -> None:
    """Remove a file if it is there."""
    try:
        os.remove(path)
    except OSError:
        pass
