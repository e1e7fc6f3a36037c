"""Per-request optimization for serving stacks: cache, wall-clock budget, fall back, counters.

    opt = RequestOptimizer(RequestOptions(target="xgrammar", budget_s=0.2))
    served = opt.optimize(Request("grammar", text, dialect="ebnf", start="root"))
    served.text        the optimized grammar text, or None: serve the input unoptimized
    served.how         "optimized" | "cached" | "unchanged" | "fell back" | "passed through"
    await opt.optimize_async(request)      the same, off the event loop's thread
    opt.stats()        counters (optimized, cached, unchanged, fell_back, passed_through,
                       late, seconds_optimizing, seconds_waiting, ...); also logged

What a request costs. A repeated request costs a lookup: an in-memory LRU keyed by the
request's content and options, then (``cache_dir``) the on-disk cache of ``gramopt.optimizer.cache``
(``cache_key``: input text, options that shape the output, gramopt's version, the cost
model's hash; entries checked by SHA-256 on read). A new request is optimized in the fast
per-request mode (``optimize(..., fast=True)``: no e-graph, a check proportional to what
changed) unless ``verify="full"``. Its output bytes depend only on the input and options
(the optimizer's budgets are work units), so a cached entry is what a rerun would compute.

The budget is wall clock and decides only *which* grammar is served, never its bytes: the
optimization runs in a worker and the caller stops waiting at ``budget_s``; then it is
served the input unoptimized (``how == "fell back"``). Two workers, chosen by ``worker``:

    "thread"   (default) one background thread. No start-up cost; an optimization that
               overran keeps running after the deadline (a thread cannot be stopped), fills
               the cache when it ends (counted as ``late``), and holds the GIL meanwhile —
               bounded by the optimizer's own work limits. No memory budget.
    "process"  one spawned worker process with ``RLIMIT_AS = max_memory`` (the memory
               budget: an optimization that needs more fails with MemoryError and the
               request falls back); the serving process's GIL stays free. An overrun
               finishes and is cached as with a thread, unless ``kill_on_timeout``: then
               the process is killed at the deadline and the next request starts a new
               one (~1 s to import gramopt).

A grammar whose optimization already overran a request's budget is not waited for again:
its repeats are served unoptimized at once until the optimization ends (then from the
cache). At most ``max_pending`` optimizations are queued or running; a request beyond that
is served unoptimized at once (``fell_back``, ``why`` says so).

Nothing the optimizer does raises into the request: an input gramopt cannot read is passed
through (the engine then says what it says of it), an optimization error or timeout falls
back, and every such event is counted and logged (logger ``gramopt.integrations``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing
import os
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor, TimeoutError as FutureTimeout
from dataclasses import asdict, dataclass, replace

from .. import targets

LOG = logging.getLogger("gramopt.integrations")
HOWS = ("optimized", "cached", "unchanged", "fell back", "passed through")
WORKERS = ("thread", "process")
VERIFY = ("fast", "full", "none")
LOG_EVERY = 100  # requests between two INFO lines of the counters


@dataclass(frozen=True)
class RequestOptions:
    """How a stack's requests are optimized. ``target``: a gramopt target name; ``verify``:
    "fast" (the per-request mode, default), "full" (every pass and the full check), "none"
    (the per-request passes, no check); ``budget_s``: wall-clock seconds a request waits for
    its optimization (None: no limit); ``max_memory``: bytes (``worker="process"`` only);
    ``kill_on_timeout``: kill the worker process at a request's deadline (``worker="process"``
    only; default: let it finish and cache its result); ``max_pending``: optimizations queued
    or running at most (a request beyond is served unoptimized at once); ``cache_size``:
    entries of the in-memory LRU; ``cache_dir``: the on-disk cache folder."""

    target: str = "xgrammar"
    verify: str = "fast"
    budget_s: float | None = 0.5
    worker: str = "thread"
    max_memory: int | None = None
    kill_on_timeout: bool = False
    max_pending: int = 64
    cache_size: int = 1024
    cache_dir: str | None = None

    def __post_init__(self):
        targets.get(self.target)  # ValueError naming the known targets
        if self.verify not in VERIFY:
            raise ValueError(f"verify must be one of {', '.join(VERIFY)} (got {self.verify!r})")
        if self.worker not in WORKERS:
            raise ValueError(f"worker must be one of {', '.join(WORKERS)} (got {self.worker!r})")
        if self.max_memory is not None and self.worker != "process":
            raise ValueError("max_memory needs worker='process' (a thread cannot be limited)")
        if self.kill_on_timeout and self.worker != "process":
            raise ValueError("kill_on_timeout needs worker='process' (a thread cannot be stopped)")
        if self.budget_s is not None and self.budget_s < 0:
            raise ValueError(f"budget_s must not be negative (got {self.budget_s})")

    @classmethod
    def from_env(cls, target: str = "xgrammar", environ=None) -> "RequestOptions":
        """Options from ``GRAMOPT_VERIFY``, ``GRAMOPT_BUDGET_MS`` (negative: no limit), ``GRAMOPT_WORKER``,
        ``GRAMOPT_MAX_MEMORY_MB``, ``GRAMOPT_CACHE_SIZE``, ``GRAMOPT_CACHE_DIR`` (for a stack
        that loads gramopt as a plugin, where there is no code to pass options)."""
        env = os.environ if environ is None else environ
        budget = env.get("GRAMOPT_BUDGET_MS")
        memory = env.get("GRAMOPT_MAX_MEMORY_MB")
        return cls(target=target, verify=env.get("GRAMOPT_VERIFY", "fast"),
                   budget_s=cls.budget_s if budget in (None, "") else
                   (None if float(budget) < 0 else float(budget) / 1000),
                   worker=env.get("GRAMOPT_WORKER", "process" if memory else "thread"),
                   max_memory=int(float(memory) * 2**20) if memory else None,
                   cache_size=int(env.get("GRAMOPT_CACHE_SIZE", 1024)),
                   cache_dir=env.get("GRAMOPT_CACHE_DIR") or None)


@dataclass(frozen=True)
class Request:
    """One grammar to optimize: ``kind`` "grammar" (``text`` in ``dialect``, starting at
    ``start``) or "xgrammar-json-schema" (``text`` the schema, ``convert`` the keyword
    arguments of ``xgrammar.Grammar.from_json_schema``, as sorted pairs); ``out`` the dialect
    to write the optimized grammar in."""

    kind: str
    text: str
    dialect: str = "ebnf"
    start: str | None = None
    out: str = "ebnf"
    convert: tuple = ()


@dataclass
class Served:
    """What to serve: ``text`` (the optimized grammar in the request's ``out`` dialect) or
    None (serve the input unoptimized), ``how`` (one of ``HOWS``), ``why`` (for a fall back
    or a pass through), ``seconds`` the caller spent here."""

    text: str | None
    how: str
    why: str = ""
    seconds: float = 0.0


@dataclass
class _Counters:
    requests: int = 0
    optimized: int = 0
    cached: int = 0
    unchanged: int = 0
    fell_back: int = 0
    timed_out: int = 0
    passed_through: int = 0
    late: int = 0
    engine_refused: int = 0
    seconds_optimizing: float = 0.0
    seconds_waiting: float = 0.0


# ---------------------------------------------------------------- the work (in a worker)


def optimize_request(req: Request, target: str, verify: str) -> tuple[str, str | None]:
    """Run in a worker: ("changed", text) with the optimized grammar written in ``req.out``,
    ("unchanged", None) when the optimizer kept the input, or ("unreadable", message) when
    gramopt cannot read the input (or xgrammar's converter refuses the schema). Raises
    OptimizationError (unsound output, refused) and anything unexpected; never writes."""
    from ..formats import parse, write
    from ..grammar import GrammarError
    from ..passes import optimize
    try:
        text, dialect = _grammar_text(req)
        grammar = parse(text, dialect, None, req.start)
    except GrammarError as e:
        return "unreadable", e.format().splitlines()[0]
    except Exception as e:  # noqa: BLE001 - a converter's own error types
        return "unreadable", f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
    result = optimize(grammar, target=target, fast=verify != "full", verify=verify != "none")
    if result.grammar == grammar:
        return "unchanged", None
    t = targets.get(target)
    dialect, out, _ = t.output_form(result.grammar, req.out)
    return "changed", write(out, dialect)


def _grammar_text(req: Request) -> tuple[str, str]:
    """(grammar text, dialect) of a request: its text, or xgrammar's conversion of its schema."""
    if req.kind == "grammar":
        return req.text, req.dialect
    if req.kind == "xgrammar-json-schema":
        import xgrammar as xgr
        return str(xgr.Grammar.from_json_schema(req.text, **dict(req.convert))), "ebnf"
    raise ValueError(f"unknown request kind {req.kind!r}")


# ---------------------------------------------------------------- workers


class _ThreadWorker:
    """One background thread; an overrun keeps running and its result is still cached."""

    def __init__(self):
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gramopt-request")

    def submit(self, req: Request, target: str, verify: str, then=None) -> Future:
        return self._pool.submit(_then, then, _timed, req, target, verify)

    def abandon(self, fut: Future) -> bool:
        return False  # it runs on; the caller does not wait for it

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _then(then, fn, *args):
    """``fn(*args)``, handed to ``then`` before the future completes (so a caller that got
    the result finds it cached already)."""
    value = fn(*args)
    if then is not None:
        then(value)
    return value


def _timed(req: Request, target: str, verify: str):
    t0 = time.perf_counter()
    how, text = optimize_request(req, target, verify)
    return how, text, time.perf_counter() - t0


def _child(conn, max_memory: int | None) -> None:
    """The worker process: RLIMIT_AS, then answer requests until the pipe closes."""
    if max_memory:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (max_memory, max_memory))
    while True:
        try:
            args = conn.recv()
        except EOFError:
            return
        try:
            conn.send(("ok", _timed(*args)))
        except MemoryError:
            conn.send(("error", "MemoryError: the optimization needed more than the memory budget"))
        except BaseException as e:  # noqa: BLE001 - reported to the parent, which falls back
            conn.send(("error", f"{type(e).__name__}: {e}"))


class _ProcessWorker:
    """One spawned process, one request at a time (killed at a deadline: ``kill_on_timeout``)."""

    def __init__(self, max_memory: int | None, kill_on_timeout: bool = False):
        self.max_memory = max_memory
        self.kill_on_timeout = kill_on_timeout
        self._lock = threading.Lock()
        self._proc = None
        self._conn = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gramopt-request-proc")

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_child, args=(child, self.max_memory), daemon=True,
                                 name="gramopt-request-worker")
        self._proc.start()
        child.close()
        self._conn = parent

    def _run(self, req: Request, target: str, verify: str, doomed: threading.Event):
        with self._lock:
            if doomed.is_set():
                raise RuntimeError("abandoned at its deadline before it started")
            if self._proc is None or not self._proc.is_alive():
                self._start()
            try:
                self._conn.send((req, target, verify))
                while not self._conn.poll(0.02):
                    if doomed.is_set() or not self._proc.is_alive():
                        self._proc.kill()
                        self._proc.join()
                        self._proc = None
                        raise RuntimeError("the gramopt worker process was killed at its request's deadline"
                                           if doomed.is_set() else "the gramopt worker process died")
                status, value = self._conn.recv()
            except (EOFError, OSError):
                self._proc = None
                raise RuntimeError("the gramopt worker process ended (out of memory?)") from None
        if status != "ok":
            raise RuntimeError(value)
        return value

    def submit(self, req: Request, target: str, verify: str, then=None) -> Future:
        doomed = threading.Event()
        fut = self._pool.submit(_then, then, self._run, req, target, verify, doomed)
        fut.gramopt_doomed = doomed
        return fut

    def abandon(self, fut: Future) -> bool:
        """With ``kill_on_timeout``: stop an abandoned request's optimization (killing the
        process if it runs; the next request starts another); else let it finish."""
        if not self.kill_on_timeout:
            return False
        fut.gramopt_doomed.set()
        return True

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
        self._pool.shutdown(wait=False, cancel_futures=True)


# ---------------------------------------------------------------- the front


class RequestOptimizer:
    """Optimizes requests under ``RequestOptions`` (module docstring); thread-safe."""

    def __init__(self, options: RequestOptions | None = None, **overrides):
        self.options = replace(options or RequestOptions(), **overrides) if overrides else \
            (options or RequestOptions())
        self._lock = threading.Lock()
        self._lru: OrderedDict = OrderedDict()
        self._inflight: dict = {}
        self._warmed = False
        self._abandoned: set = set()  # keys whose caller stopped waiting (their result is "late")
        self._counts = _Counters()
        self._worker = _ProcessWorker(self.options.max_memory, self.options.kill_on_timeout) \
            if self.options.worker == "process" \
            else _ThreadWorker()

    # -- public

    def optimize(self, req: Request, budget_s: float | None = ...) -> Served:
        """What to serve for ``req``, within ``budget_s`` (default: the options')."""
        t0 = time.perf_counter()
        budget = self.options.budget_s if budget_s is ... else budget_s
        hit, fut, key = self._lookup_or_submit(req)
        if hit is not None:
            return self._finish(hit, t0)
        if fut is None:
            return self._fallback(t0, f"{self.options.max_pending} optimizations are already pending")
        with self._lock:
            overran = key in self._abandoned
        if overran:
            return self._fallback(t0, "its optimization overran an earlier request's budget and is still running",
                                  timed_out=True)
        try:
            how, text, _ = fut.result(timeout=None if budget is None else max(0.0, budget - (time.perf_counter() - t0)))
        except FutureTimeout:
            with self._lock:
                self._abandoned.add(key)
            killed = self._worker.abandon(fut)
            return self._fallback(t0, f"its optimization exceeded the {budget * 1000:.0f} ms budget"
                                  + (" (worker killed)" if killed else ""), timed_out=True)
        except Exception as e:  # noqa: BLE001 - the optimizer must never fail a request
            return self._fallback(t0, f"{type(e).__name__}: {e}")
        return self._finish(self._served(how, text), t0)

    def submit(self, req: Request, budget_s: float | None = ...) -> Future:
        """``optimize`` on a helper thread: a future of its ``Served``."""
        fut: Future = Future()

        def run():
            fut.set_result(self.optimize(req, budget_s))
        threading.Thread(target=run, name="gramopt-request-wait", daemon=True).start()
        return fut

    async def optimize_async(self, req: Request, budget_s: float | None = ...) -> Served:
        """``optimize`` for an asyncio caller: the event loop's thread never waits on it."""
        return await asyncio.wrap_future(self.submit(req, budget_s))

    def stats(self) -> dict:
        """The counters since construction (or ``reset_stats``), plus the LRU's size."""
        with self._lock:
            out = asdict(self._counts)
            out["lru_entries"] = len(self._lru)
        served = out["requests"]
        out["hit_rate"] = out["cached"] / served if served else 0.0
        return out

    def reset_stats(self) -> None:
        with self._lock:
            self._counts = _Counters()

    def warm(self) -> None:
        """Import the optimizer in the worker now (once), so the first request does not pay
        for it (~0.5 s); uncounted."""
        with self._lock:
            if self._warmed:
                return
            self._warmed = True
        self._worker.submit(Request("grammar", 'root ::= "a" | "b"'), self.options.target, self.options.verify)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no optimization is pending (e.g. overruns still running); False on timeout."""
        deadline = None if timeout is None else time.perf_counter() + timeout
        while True:
            with self._lock:
                pending = list(self._inflight.values())
            if not pending:
                return True
            left = None if deadline is None else deadline - time.perf_counter()
            if left is not None and left <= 0:
                return False
            try:
                pending[0].exception(timeout=left)
            except (FutureTimeout, Exception):  # noqa: BLE001 - only waiting here
                pass
            time.sleep(0.001)  # let the done-callback (``_forget``) run

    def count_cached(self, seconds: float) -> None:
        """A request answered from a caller's own cache of compiled grammars (a repeat)."""
        with self._lock:
            self._counts.requests += 1
            self._counts.cached += 1
            self._counts.seconds_waiting += seconds

    def count_refused(self) -> None:
        """The engine refused an optimized grammar (and the input was compiled instead)."""
        with self._lock:
            self._counts.engine_refused += 1

    def clear(self) -> None:
        """Empty the in-memory cache (the disk cache stays)."""
        with self._lock:
            self._lru.clear()

    def close(self) -> None:
        self._worker.close()

    # -- inside

    def _mem_key(self, req: Request) -> tuple:
        o = self.options
        return (req.kind, req.text, req.dialect, req.start, req.out, req.convert, o.target, o.verify)

    def _disk_key(self, req: Request) -> str:
        from ..optimizer.cache import cache_key
        payload = req.text if req.kind == "grammar" else json.dumps(
            {"schema": req.text, "convert": [list(p) for p in req.convert], "converter": _converter(req.kind)},
            sort_keys=True)
        o = self.options
        return cache_key(f"{req.kind}:{req.dialect}", payload, ".serving",
                         {"target": o.target, "verify": o.verify != "none", "fast": o.verify != "full",
                          "start": req.start, "to": req.out})

    def _lookup_or_submit(self, req: Request):
        """(a cached Served, None, key), (None, the future of the optimization, key), or
        (None, None, key) when ``max_pending`` optimizations are pending already."""
        key = self._mem_key(req)
        with self._lock:
            self._counts.requests += 1
            if key in self._lru:
                self._lru.move_to_end(key)
                how, text = self._lru[key]
                return self._served(how, text, cached=True), None, key
            fut = self._inflight.get(key)
        if fut is None and self.options.cache_dir:
            from ..optimizer.cache import cache_get
            entry = cache_get(self.options.cache_dir, self._disk_key(req))
            if entry is not None:
                how, text = json.loads(entry)
                self._remember(key, how, text)
                return self._served(how, text, cached=True), None, key
        with self._lock:
            fut = self._inflight.get(key)
            new = fut is None
            if new and len(self._inflight) >= self.options.max_pending:
                return None, None, key
            if new:
                fut = self._worker.submit(req, self.options.target, self.options.verify,
                                          lambda value, req=req, key=key: self._store(value, req, key))
                self._inflight[key] = fut
        if new:  # outside the lock: a future already done runs the callback here, at once
            fut.add_done_callback(lambda f, key=key: self._forget(key))
        return None, fut, key

    def _forget(self, key) -> None:
        """When an optimization's future completes (done, failed or cancelled)."""
        with self._lock:
            self._inflight.pop(key, None)
            self._abandoned.discard(key)

    def _store(self, value, req: Request, key) -> None:
        """In the worker, when an optimization ends (in time or late): cache what it decided."""
        how, text, seconds = value
        with self._lock:
            self._counts.seconds_optimizing += seconds
            self._counts.late += key in self._abandoned
        if how == "unreadable":
            return  # nothing to reuse: the input is served as is, and its error is the engine's
        self._remember(key, how, text)
        if self.options.cache_dir:
            from ..optimizer.cache import cache_put
            cache_put(self.options.cache_dir, self._disk_key(req), json.dumps([how, text], ensure_ascii=False))

    def _remember(self, key, how: str, text: str | None) -> None:
        with self._lock:
            self._lru[key] = (how, text)
            self._lru.move_to_end(key)
            while len(self._lru) > self.options.cache_size:
                self._lru.popitem(last=False)

    def _served(self, how: str, text: str | None, cached: bool = False) -> Served:
        if how == "unreadable":
            return Served(None, "passed through", text or "")
        if cached:
            return Served(text, "cached")
        return Served(text, "optimized" if how == "changed" else "unchanged")

    def _finish(self, served: Served, t0: float) -> Served:
        served.seconds = time.perf_counter() - t0
        with self._lock:
            self._counts.seconds_waiting += served.seconds
            if served.how == "cached":
                self._counts.cached += 1
            elif served.how == "optimized":
                self._counts.optimized += 1
            elif served.how == "unchanged":
                self._counts.unchanged += 1
            else:
                self._counts.passed_through += 1
        if served.how == "passed through":
            LOG.info("gramopt: serving the input as is: gramopt cannot read it (%s)", served.why)
        else:
            LOG.debug("gramopt: %s in %.1f ms", served.how, served.seconds * 1000)
        self._log_counters()
        return served

    def _log_counters(self) -> None:
        if self._counts.requests % LOG_EVERY == 0:
            s = self.stats()
            LOG.info("gramopt: %d requests: %d optimized, %d cached (hit rate %.2f), %d unchanged, %d fell back "
                     "(%d over budget), %d passed through; %.1f s optimizing, %.1f s waited",
                     s["requests"], s["optimized"], s["cached"], s["hit_rate"], s["unchanged"], s["fell_back"],
                     s["timed_out"], s["passed_through"], s["seconds_optimizing"], s["seconds_waiting"])

    def _fallback(self, t0: float, why: str, timed_out: bool = False) -> Served:
        seconds = time.perf_counter() - t0
        with self._lock:
            self._counts.fell_back += 1
            self._counts.timed_out += timed_out
            self._counts.seconds_waiting += seconds
        LOG.warning("gramopt: serving the unoptimized grammar: %s", why)
        self._log_counters()
        return Served(None, "fell back", why, seconds)


def _converter(kind: str) -> str:
    if kind == "xgrammar-json-schema":
        from importlib.metadata import version
        return f"xgrammar {version('xgrammar')}"
    return ""


_DEFAULT: dict[str, RequestOptimizer] = {}
_DEFAULT_LOCK = threading.Lock()


def shared(target: str) -> RequestOptimizer:
    """The process-wide optimizer for ``target`` (options from the environment:
    ``RequestOptions.from_env``), made on first use."""
    with _DEFAULT_LOCK:
        if target not in _DEFAULT:
            _DEFAULT[target] = RequestOptimizer(RequestOptions.from_env(target))
        return _DEFAULT[target]


def configure(target: str, options: RequestOptions | None = None, **fields) -> RequestOptimizer:
    """Replace the process-wide optimizer for ``target`` with one of these options."""
    opts = replace(options or RequestOptions(target=target), target=target, **fields)
    with _DEFAULT_LOCK:
        old = _DEFAULT.get(target)
        _DEFAULT[target] = RequestOptimizer(opts)
    if old is not None:
        old.close()
    return _DEFAULT[target]


def reset_shared() -> None:
    """Forget the process-wide optimizers (the next ``shared`` call reads the environment)."""
    with _DEFAULT_LOCK:
        old = list(_DEFAULT.values())
        _DEFAULT.clear()
    for opt in old:
        opt.close()


__all__ = ["HOWS", "Request", "RequestOptimizer", "RequestOptions", "Served", "configure", "optimize_request",
           "reset_shared", "shared"]
