"""Batches: a folder of grammars and schemas, or a JSONL file of schemas, optimized on local
worker processes (the default) or on a Dask cluster, with a content-addressed cache.

    items = batch_items(input, outdir, to=None, target="portable")   one Item per grammar / schema
    run_batch(items, options, workers=0, scheduler=None, cache_dir=None, progress=True)
        -> exit code (the worst of the items'; 0 when all succeeded)

Each item is one ``optimizer.run_job``, the function ``gramopt optimize FILE`` calls: the
same reading, limits, refusals (``--strict`` included), output dialect and warnings.
An item carries its input *text* (read here, by the client), so a worker needs no access to
the inputs and returns the output text; the client writes every output file (atomically).
Workers are spawned processes (``ProcessPoolExecutor``), or with ``scheduler="tcp://host:port"``
the workers of an existing Dask cluster (``distributed.Client``; ``pip install distributed``).

The cache (``optimizer.cache``) is content-addressed: an item's key is the SHA-256 of its
input text, its kind, its ``Options`` (work limits included), the cost model's own hash and
gramopt's version. The client looks it up before submitting (a hit is written out and counted as
*cached*) and workers look it up again and store what they compute, so a cache folder on a
shared file system serves every worker, machine and rerun — a rerun with nothing changed
optimizes nothing. Default: ``OUTDIR/.gramopt-cache``.

Outputs are the bytes ``gramopt optimize`` writes for each input alone: the same under the
process pool, a Dask cluster or the cache. An item never takes another down: whatever ends
it — bad input, a difference found, a limit, its process dying, an unexpected exception in
gramopt (exit 70 for that item, its one-line message), an output file that cannot be
written — fails that item alone, every other item is written, and the batch's exit status
is the worst item's. Where the outputs go is checked before any work (``check_outdir``). A progress bar on stderr counts done / failed /
cached items (one line per item when stderr is not a terminal).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Iterator, Mapping

from .. import targets
from ..formats import EXTENSIONS, SCHEMA, write_file
from ..grammar import GrammarError
from ..grammar.memo import forget_all
from ..optimizer import Job, Options, run_job
from ..optimizer.cache import cache_get, cache_key, cache_put
from .exits import EXIT_INTERNAL, EXIT_OK, EXIT_UNSOUND, EXIT_USAGE

GRAMMAR_EXTENSIONS = tuple(EXTENSIONS)
SCHEMA_EXTENSIONS = (".json", ".jsonl")
CACHE_FOLDER = ".gramopt-cache"


@dataclass(frozen=True)
class Item:
    """One grammar or schema to optimize: ``name`` (its path relative to the input, with
    ``:LINE`` for a JSONL line), ``kind`` (a grammar dialect, or ``jsonschema``), the input
    text, where it came from (``source``, ``line``) and the output path."""

    name: str
    kind: str
    text: str
    source: str
    line: int
    dst: str


# ---------------------------------------------------------------- what to optimize


def batch_items(path: str, outdir: str, to: str | None = None, target: str = targets.DEFAULT,
                dialect: str | None = None) -> list[Item]:
    """The items of a folder (grammar files by extension, ``.json`` schemas, ``.jsonl`` files
    line by line; hidden folders skipped) or of one JSONL file, with their output paths
    under ``outdir`` (same relative path; a JSONL line ``k`` of ``f.jsonl`` → ``f.k.EXT``)."""
    from ..engines.jsonschema import WRITES
    t = targets.get(target)
    schema_ext = to or t.output_dialect or WRITES[t.schema_converter]
    files = _files(path) if os.path.isdir(path) else [os.path.basename(path)]
    base = path if os.path.isdir(path) else os.path.dirname(path)
    items: list[Item] = []
    for rel in files:
        src = os.path.join(base, rel)
        stem, ext = os.path.splitext(rel)
        kind = dialect or _kind(ext)
        text = _read(src)
        if kind == SCHEMA and ext == ".jsonl":
            for k, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    items.append(Item(f"{rel}:{k}", kind, line, src, k,
                                      os.path.join(outdir, f"{stem}.{k}.{schema_ext}")))
        elif kind == SCHEMA:
            items.append(Item(rel, kind, text, src, 0, os.path.join(outdir, f"{stem}.{schema_ext}")))
        else:
            # --to, else the target's dialect for the EBNF family (xgrammar: .ebnf), else the input's
            if to:
                out_ext = "." + to
            elif t.output_dialect and ext in (".gbnf", ".ebnf", ".goebnf"):
                out_ext = "." + t.output_dialect
            else:
                out_ext = ".ebnf" if ext == ".goebnf" else ext
            items.append(Item(rel, kind, text, src, 0, os.path.join(outdir, stem + out_ext)))
    if not items:
        raise GrammarError("nothing to optimize: no grammar (.gbnf .ebnf .lark .goebnf .cfg) or schema "
                           "(.json .jsonl) files", path=path)
    return items


def _files(folder: str) -> list[str]:
    out = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.endswith(GRAMMAR_EXTENSIONS + SCHEMA_EXTENSIONS) and not name.startswith("."):
                out.append(os.path.relpath(os.path.join(root, name), folder))
    return out


def _kind(ext: str) -> str:
    return SCHEMA if ext in SCHEMA_EXTENSIONS else EXTENSIONS.get(ext, ext[1:])


def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8")
    except OSError as e:
        raise GrammarError(f"cannot read: {e.strerror}", path=path) from None
    except UnicodeDecodeError:
        return ""  # the worker reads it again through formats.read, which locates the error


# ---------------------------------------------------------------- one item (in a worker)


def item_key(item: Item, options: "Options | Mapping") -> str:
    """The cache key of ``item`` optimized with ``options`` (``optimizer.cache.cache_key``)."""
    return cache_key(item.kind, item.text, os.path.splitext(item.dst)[1], options)


def optimize_item(item: dict, options: "Options | Mapping", cache_dir: str | None,
                  max_memory: str | None = None) -> dict:
    """Run in a worker: the item's output text (from the cache, or optimized and stored).
    Returns {name, code, message, seconds, text, cached}; never raises for bad input.
    ``max_memory`` (``--max-memory``) holds in each worker; a mapping of options may carry it."""
    from ..passes import OptimizationError
    if isinstance(options, Mapping):
        max_memory = max_memory or options.get("max_memory")
    options = Options.of(options)
    it = Item(**item)
    t0 = time.perf_counter()
    key = item_key(it, options)
    cached = cache_get(cache_dir, key)
    if cached is not None:
        return {"name": it.name, "code": EXIT_OK, "message": "from the cache", "seconds": 0.0,
                "text": cached, "cached": True}
    from .guard import LimitReached, guarded
    try:
        with guarded(max_memory=max_memory):  # --max-memory holds in each worker too
            try:
                text, result = _optimize(it, options)
            finally:
                forget_all()  # (keyed by this item's objects: never hit again)
                return_freed_memory()
    except LimitReached as e:
        return {"name": it.name, "code": EXIT_USAGE, "message": f"{it.name}: error: {e}",
                "seconds": time.perf_counter() - t0, "text": None, "cached": False}
    except GrammarError as e:
        return {"name": it.name, "code": EXIT_USAGE, "message": e.format().splitlines()[0],
                "seconds": time.perf_counter() - t0, "text": None, "cached": False}
    except OptimizationError as e:
        return {"name": it.name, "code": EXIT_UNSOUND, "message": e.user_message(it.name).replace("\n", "; "),
                "seconds": time.perf_counter() - t0, "text": None, "cached": False}
    except Exception as e:  # a bug in gramopt: this item fails alone, as the command line would
        return internal_error(it.name, e, time.perf_counter() - t0)
    cache_put(cache_dir, key, text)
    before, after = result.report.kappa_before, result.report.kappa_after
    warned = "".join(f"; warning: {w}" for w in result.report.warnings) + \
        "".join(f"; stopped: {w}" for w in result.report.stops)
    return {"name": it.name, "code": EXIT_OK, "message": f"κ {before} → {after}{warned}",
            "seconds": time.perf_counter() - t0, "text": text, "cached": False}


def return_freed_memory() -> None:
    """Give the pages freed by an item back to the system before the next item (glibc's
    ``malloc_trim``: its arenas, one per thread that allocated, keep freed pages otherwise, and
    a worker's resident memory grows with the largest items it has seen: 1,143 MB after
    o31057 and four more JSONSchemaBench items, 909 MB with this; 2-9 ms). Elsewhere: nothing."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none."""
    import ctypes
    import ctypes.util
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def internal_error(name: str, e: BaseException, seconds: float = 0.0) -> dict:
    """The result of an item that raised an unexpected exception: exit 70, one line."""
    return {"name": name, "code": EXIT_INTERNAL,
            "message": f"{name}: internal error: {type(e).__name__}: {e}".replace("\n", "; "),
            "seconds": seconds, "text": None, "cached": False}


def _optimize(it: Item, options: "Options | Mapping"):
    """(output text, result) of one item: ``run_job`` on the text the client read."""
    outcome = run_job(Job(it.source, Options.of(options), it.dst, it.text, it.kind, it.line))
    return outcome.text, outcome.result


# ---------------------------------------------------------------- the batch



class Progress:
    """``[####....] 12/23  done 10  failed 1  cached 1  12.3 s  name`` on stderr, redrawn in
    place on a terminal, one line per item otherwise; disabled (``-q``), only the failures,
    one line each."""

    def __init__(self, total: int, enabled: bool = True, stream=None):
        self.total, self.enabled = total, enabled
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.done = self.failed = self.cached = 0
        self.t0 = time.perf_counter()

    def update(self, name: str, code: int, cached: bool, message: str) -> None:
        self.done += 1
        self.failed += code != EXIT_OK
        self.cached += cached
        if not self.enabled:  # quiet: no bar, but a failure is always said
            if code != EXIT_OK:
                self.stream.write(f"{name}: FAILED {message}\n")
                self.stream.flush()
            return
        width = 24
        fill = width * self.done // max(1, self.total)
        bar = (f"[{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total}  done {self.done - self.failed}"
               f"  failed {self.failed}  cached {self.cached}  {time.perf_counter() - self.t0:.1f} s")
        if self.tty:
            if code != EXIT_OK:
                self.stream.write(f"\r\033[K{name}: FAILED {message}\n")
            self.stream.write("\r\033[K" + bar + f"  {name}" + ("\n" if self.done == self.total else ""))
        else:
            status = "FAILED " + message if code != EXIT_OK else ("cached" if cached else f"ok {message}")
            self.stream.write(f"{bar}  {name}: {status}\n")
        self.stream.flush()


def run_batch(items: list[Item], options: Options, *, workers: int = 0, scheduler: str | None = None,
              cache_dir: str | None = None, progress: bool = True, max_memory: str | None = None) -> int:
    """Optimize every item; write each output; return the worst exit code. ``max_memory``
    (``--max-memory``) holds in each worker (it shapes nothing: not in the cache key)."""
    keys = {it.name: item_key(it, options) for it in items}
    todo, results = [], []
    for it in items:
        hit = cache_get(cache_dir, keys[it.name])
        if hit is None:
            todo.append(it)
        else:
            results.append((it, {"name": it.name, "code": EXIT_OK, "message": "from the cache",
                                 "seconds": 0.0, "text": hit, "cached": True}))
    where = f"the Dask cluster at {scheduler}" if scheduler else \
        f"{max(1, min(workers or os.cpu_count() or 1, len(todo)))} local worker(s)"
    print(f"gramopt: {len(items)} items, {len(items) - len(todo)} served from the cache, "
          f"{len(todo)} to optimize" + (f" on {where}" if todo else ""), file=sys.stderr)
    bar = Progress(len(items), enabled=progress)
    worst = EXIT_OK
    written = [0]
    by_name = {it.name: it for it in todo}
    running = _schedule(todo, options, workers, scheduler, cache_dir, max_memory)
    try:
        for it, r in results:
            worst = max(worst, _finish(it, r, bar, written))
        for r in running:
            worst = max(worst, _finish(by_name[r["name"]], r, bar, written))
    except BaseException as e:  # Ctrl-C, a safety limit: every worker is stopped first
        running.close()
        e.written = written[0]  # what the client wrote: only it writes outputs (gramopt.cli reports it)
        raise
    return worst


def _finish(it: Item, r: dict, bar: Progress, written: list) -> int:
    """Write one item's output (a write that fails fails the item: exit 2, its reason)."""
    if r["code"] == EXIT_OK:
        try:
            os.makedirs(os.path.dirname(os.path.abspath(it.dst)), exist_ok=True)
            if not (os.path.exists(it.dst) and _same(it.dst, r["text"])):
                write_file(it.dst, r["text"])
                written[0] += 1
        except OSError as e:
            r = dict(r, code=EXIT_USAGE, message=f"{it.dst}: error: cannot write: {e.strerror or e}")
        except GrammarError as e:
            r = dict(r, code=EXIT_USAGE, message=e.format().splitlines()[0])
    bar.update(it.name, r["code"], r["cached"], f"{r['message']} ({r['seconds']:.2f} s)")
    return r["code"]


def check_outdir(outdir: str) -> None:
    """GrammarError (exit 2) now, before any work, when the batch cannot write into
    ``outdir``: it is a file, or it (or the folder it would be made in) is not a writable
    folder."""
    if os.path.exists(outdir) and not os.path.isdir(outdir):
        raise GrammarError("a batch writes into a folder, and this is a file: give a folder (new or "
                           "existing)", path=outdir)
    folder = os.path.abspath(outdir)
    while not os.path.exists(folder):  # the nearest existing folder is where it is made
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        raise GrammarError(f"cannot make the output folder: '{folder}' is a file", path=outdir)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise GrammarError(f"cannot write into '{folder}': permission denied", path=outdir)


def _same(path: str, text: str) -> bool:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read() == text
    except (OSError, UnicodeDecodeError):
        return False


def _schedule(todo: list[Item], options: Options, workers: int, scheduler: str | None, cache_dir,
              max_memory: str | None = None):
    """Results as they complete, from local processes or a Dask cluster."""
    if not todo:
        return
    if scheduler:
        yield from _on_dask(todo, options, scheduler, cache_dir, max_memory)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool
    n = max(1, min(workers or os.cpu_count() or 1, len(todo)))
    # spawn, not fork: egglog and numba start threads, and a forked child can deadlock on their locks
    pool = ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_worker_init, initargs=(os.getpid(), n))
    done: set[str] = set()
    try:
        futures = {pool.submit(optimize_item, asdict(it), options, cache_dir, max_memory): it for it in todo}
        for fut in as_completed(futures):
            error = fut.exception()
            if isinstance(error, BrokenProcessPool):
                break  # a worker died (killed: out of memory, a signal); the pool is gone
            done.add(futures[fut].name)
            # optimize_item returns every failure; what is raised here came from around it
            # (the item or its result could not be passed between processes)
            yield fut.result() if error is None else internal_error(futures[fut].name, error)
    except BaseException:
        _stop_workers(pool)  # Ctrl-C or a safety limit: no worker goes on after the client stops
        raise
    pool.shutdown(wait=True)
    rest = [it for it in todo if it.name not in done]
    if rest:
        print(f"gramopt: a worker process died; the {len(rest)} item(s) it may have held are run again, "
              "one process each", file=sys.stderr)
        yield from _one_process_each(rest, options, n, cache_dir, max_memory)


def _one_process_each(todo: list[Item], options: Options, n: int, cache_dir,
                      max_memory: str | None = None) -> Iterator[dict]:
    """Results of ``todo``, each item in a process of its own (at most ``n`` at a time), after
    a worker died: an item whose process dies again fails alone, with the signal that ended
    it, and the others complete (a pool loses every item it holds when one worker dies)."""
    import multiprocessing
    from multiprocessing.connection import wait
    ctx = multiprocessing.get_context("spawn")
    queue, running = list(reversed(todo)), {}  # our end of its pipe → (process, item)
    try:
        while queue or running:
            while queue and len(running) < n:
                it = queue.pop()
                conn, theirs = ctx.Pipe()
                proc = ctx.Process(target=_run_one, args=(theirs, os.getpid(), n), daemon=True)
                proc.start()
                theirs.close()  # the child holds the only other end: EOF or EPIPE once it ends
                try:  # the item goes down the pipe, not in start()'s arguments: a child that dies
                    conn.send((asdict(it), options, cache_dir, max_memory))  # before reading those hangs start()
                except OSError:
                    pass  # it died already: its EOF is read below
                running[conn] = (proc, it)
            for conn in wait(list(running)):
                proc, it = running.pop(conn)
                try:
                    result = conn.recv()
                except EOFError:  # it ended without an answer
                    result = None
                except Exception as e:  # an answer that could not be read back
                    result = internal_error(it.name, e)
                conn.close()
                proc.join()
                yield result if result is not None else _died(it, proc.exitcode)
    except BaseException:
        for proc, _ in running.values():
            proc.terminate()
        for proc, _ in running.values():
            proc.join(timeout=5)
        raise


def _run_one(conn, client: int, workers: int = 1) -> None:
    """A process of its own for one item (``_one_process_each``, ``workers`` at a time): the
    item up ``conn``, its result down it."""
    _worker_init(client, workers)
    item, options, cache_dir, max_memory = conn.recv()
    conn.send(optimize_item(item, options, cache_dir, max_memory))
    conn.close()


def _died(it: Item, exitcode: int | None) -> dict:
    """An item whose process ended without a result: a failure naming the signal."""
    import signal
    how = f"was killed by {signal.Signals(-exitcode).name}" if exitcode and exitcode < 0 else \
        f"ended with status {exitcode}"
    hint = " (out of memory? --max-memory bounds each worker)" if exitcode == -signal.SIGKILL else ""
    return {"name": it.name, "code": EXIT_USAGE, "message": f"{it.name}: error: its worker process {how}{hint}",
            "seconds": 0.0, "text": None, "cached": False}


def _worker_init(client: int, workers: int = 1) -> None:
    """A worker leaves Ctrl-C to the client (process ``client``), which stops every worker
    (``_stop_workers``): one message, no traceback per worker; it ends with its client however
    the client ends (``_end_with_client``). Its collector runs as the command line's. It is one
    of ``workers`` at once (``cores.share``: the judge's side-by-side threads need a spare core)."""
    import gc
    import signal
    from ..cores import share
    share(workers)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _end_with_client(client)
    gc.set_threshold(50_000, 20, 20)  # as the command line's (gramopt.cli.main)


def _end_with_client(client: int) -> None:
    """End this worker when process ``client`` ends, even by a signal no handler sees
    (SIGKILL, an OOM kill, SIGTERM to a build step): a worker mid-item (an xgrammar compile
    runs for a minute) would otherwise go on for nobody. Linux: the kernel sends SIGKILL when
    the client dies (``PR_SET_PDEATHSIG``); elsewhere a daemon thread looks every second
    whether the worker's parent is still ``client``."""
    import signal
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            if ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0) == 0:  # PR_SET_PDEATHSIG
                if os.getppid() != client:  # it died before the call (the worker was re-parented)
                    os._exit(1)
                return
        except (OSError, AttributeError):
            pass
    import threading
    import time

    def watch() -> None:
        while os.getppid() == client:
            time.sleep(1.0)
        os._exit(1)
    threading.Thread(target=watch, name="gramopt-client-watch", daemon=True).start()


def _stop_workers(pool) -> None:
    """End every worker process of ``pool`` now (queued items are cancelled). Workers write
    only cache entries, atomically, so an ended one leaves no partial file."""
    processes = list(getattr(pool, "_processes", {}).values())  # the executor has no public terminate
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        p.terminate()
    for p in processes:
        p.join(timeout=5)


def _on_dask(todo: list[Item], options: Options, scheduler: str, cache_dir, max_memory: str | None = None):
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise GrammarError("--scheduler needs Dask's distributed package: pip install distributed") from None
    try:
        client = Client(scheduler, timeout="20s")
    except OSError as e:
        raise GrammarError(f"cannot reach the Dask scheduler at {scheduler}: {e}") from None
    try:
        futures = [client.submit(optimize_item, asdict(it), options, cache_dir, max_memory, pure=False, key=f"gramopt-{i}-{it.name}")
                   for i, it in enumerate(todo)]
        names = {fut.key: it.name for fut, it in zip(futures, todo)}
        try:
            for fut in as_completed(futures):
                try:
                    yield fut.result()
                except Exception as e:  # a worker lost, or the item could not be passed: it alone fails
                    yield internal_error(names[fut.key], e)
        except BaseException:
            client.cancel(futures)  # stopped: the cluster drops what was not done
            raise
    finally:
        client.close()
