"""The one generation loop: model forward, grammar masks, a pick of the next tokens.

    guide = EngineGuide([GramoptEngine(Matcher(g, vocab)) for _ in range(batch)])
    gen = generate(model, guide, steps=128, sampling=Sampling(temperature=0.8, top_k=50),
                   seed=0, overlap=True)
    gen.tokens[row], gen.texts(vocab)

Every decoding in gramopt runs here: the lockstep check (``decoding.lockstep``), serving
runs and their benchmarks, and grammar-faithful sampling (``gramopt.sampling.decode``,
which brings its own ``pick``).

One step, for the rows still running: the guide fills the packed masks of the next token
into a host buffer (in a worker thread while the model's forward pass runs, when
``overlap``), the rows whose mask allows nothing end ("dead"), and ``pick`` chooses each
live row's next token. The default pick (``MaskedSampler``) copies the buffer to the
logits' device (pinned memory, non-blocking on CUDA), applies it there
(``runtime.torch_ops.apply_token_bitmask``: on-device unpack, no Python loop) and samples
on the device with a seeded generator. Each row's engine then accepts its token. A row
stops when the grammar terminates it (a stop token is allowed exactly when the text so far
is in the language, and accepting it terminates the matcher), when its mask allows
nothing, or when the guide asks to stop (the lockstep check does on a mismatch).

Determinism: the same model, guide masks, sampling and seed give the same tokens, so two
runs that differ only in the grammar serving the masks decode the same text exactly when
the masks agree at every step — what ``decoding.lockstep`` relies on.

Overlap accounting: per step, ``mask_s`` is the worker's fill time and ``phase_s`` the
wall time from submitting it until both it and the forward pass are done; the exposed
mask time is ``max(0, phase_s - forward_s)``, and the hidden fraction is
``1 - Σ exposed / Σ mask_s`` (an estimate: contention on shared CPU cores slows the
forward pass too, which ``gramopt verify`` cross-checks with a serial run). The numba
kernels of a step release the GIL (``kernel_nogil``), the Python glue between them does
not: a CPU forward pass made of many tiny torch ops keeps re-taking the GIL and can starve
the worker (measured: a 2-layer d=64 model hides ~0% on CPU, a 6-layer d=512 one ~78%);
on CUDA the main thread waits in ``synchronize`` with the GIL released.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import torch

from ..runtime.torch_ops import apply_token_bitmask


# ---------------------------------------------------------------- engines


class GramoptEngine:
    """gramopt's ``Matcher`` behind the engine interface; records per-step fill and accept
    seconds (``fill_s``, ``accept_s``)."""

    kind = "gramopt"

    def __init__(self, matcher):
        self.matcher = matcher
        self.fill_s: list[float] = []
        self.accept_s: list[float] = []

    def fill(self, out_row: np.ndarray) -> None:
        t = time.perf_counter()
        self.matcher.fill_next_token_bitmask(out_row)
        self.fill_s.append(time.perf_counter() - t)

    def accept(self, token: int) -> bool:
        t = time.perf_counter()
        ok = self.matcher.accept_token(token)
        self.accept_s.append(time.perf_counter() - t)
        return ok

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()


# ---------------------------------------------------------------- guides


class EngineGuide:
    """One engine per batch row; fills masks and advances rows. ``stop_reason`` set means
    the whole generation stops after this step (subclasses use it)."""

    def __init__(self, engines):
        self.engines = list(engines)
        self.stop_reason: str | None = None

    @property
    def n_rows(self) -> int:
        return len(self.engines)

    def fill(self, buf: np.ndarray, rows, step: int) -> None:
        for r in rows:
            self.engines[r].fill(buf[r])

    def advance(self, row: int, token: int, step: int) -> bool:
        return self.engines[row].accept(token)

    def is_terminated(self, row: int) -> bool:
        return self.engines[row].is_terminated()

    def note_prefix(self, row: int, token: int) -> None:
        """Called with each accepted token (the lockstep guide keeps the decoded prefix)."""


# ---------------------------------------------------------------- sampling


@dataclass(frozen=True)
class Sampling:
    """``greedy`` takes the argmax; otherwise softmax(logits / temperature) over the
    ``top_k`` best allowed logits (0: all)."""

    temperature: float = 1.0
    top_k: int = 0
    greedy: bool = False

    def __post_init__(self):
        if not self.greedy and not self.temperature > 0:
            raise ValueError("temperature must be > 0 (or use greedy)")
        if self.top_k < 0:
            raise ValueError("top_k must be >= 0")


def sample(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator) -> torch.Tensor:
    """Next token per row, int64 (batch,), on the logits' device. Rows must have at least
    one finite logit (the caller unmasks dead rows first)."""
    if sampling.greedy:
        return logits.argmax(dim=-1)
    x = logits.float() / sampling.temperature
    if 0 < sampling.top_k < x.shape[-1]:
        kth = torch.topk(x, sampling.top_k, dim=-1).values[:, -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    probs = torch.softmax(x, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


# ---------------------------------------------------------------- generation


@dataclass
class Generation:
    """What a run produced and what its steps cost (seconds, one entry per step)."""

    tokens: list[list[int]]
    finished: list[str]  # per row: "eos", "dead" (mask allowed nothing), "steps", "stopped"
    steps: int = 0
    forward_s: list[float] = field(default_factory=list)
    mask_s: list[float] = field(default_factory=list)
    phase_s: list[float] = field(default_factory=list)
    sample_s: list[float] = field(default_factory=list)
    accept_s: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    overlap: bool = False
    stop_reason: str | None = None

    @property
    def n_tokens(self) -> int:
        return sum(len(t) for t in self.tokens)

    @property
    def tokens_per_s(self) -> float:
        return self.n_tokens / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def exposed_mask_s(self) -> float:
        """Mask time not hidden behind the forward pass (all of it when not overlapped)."""
        if not self.overlap:
            return float(sum(self.mask_s))
        return float(sum(max(0.0, p - f) for p, f in zip(self.phase_s, self.forward_s)))

    @property
    def hidden_fraction(self) -> float:
        total = float(sum(self.mask_s))
        return 0.0 if total <= 0 else max(0.0, min(1.0, 1.0 - self.exposed_mask_s / total))

    def texts(self, vocab) -> list[bytes]:
        return [b"".join(vocab.token_bytes[t] for t in row) for row in self.tokens]


class MaskedSampler:
    """The default pick of ``generate``: the masked logits sampled on their device
    (``reweight`` first changes the live rows' raw logits, when given); rows not picked this
    step get an all-ones mask so that every row has a finite logit."""

    def __init__(self, host: torch.Tensor, device: torch.device, sampling: Sampling, seed: int, reweight=None):
        self.host, self.device, self.sampling, self.reweight = host, device, sampling, reweight
        self.pin = device.type == "cuda"
        self.rng = torch.Generator(device=device if self.pin else torch.device("cpu")).manual_seed(int(seed))

    def __call__(self, rows, logits: torch.Tensor, buf: np.ndarray, tokens) -> torch.Tensor:
        if self.reweight is not None:
            self.reweight(rows, logits, buf, tokens)
        picked = np.zeros(buf.shape[0], bool)
        picked[rows] = True
        buf[~picked] = -1  # rows not sampled this step: anything finite
        apply_token_bitmask(logits, self.host.to(self.device, non_blocking=self.pin))
        return sample(logits, self.sampling, self.rng)


def resolve_device(device: str = "auto") -> torch.device:
    """'auto' → CUDA when available, else CPU; 'cuda' without a GPU is an error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    d = torch.device(device)
    if d.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda: no CUDA device is available")
    return d


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _block_stop(buf: np.ndarray, eos_ids, rows) -> None:
    """Clear the stop tokens' bits in ``rows`` that allow some other token (after the
    lockstep comparison: it changes what is sampled, never what is compared)."""
    for r in rows:
        saved = buf[r].copy()
        for e in eos_ids:
            buf[r, e >> 5] &= ~np.int32(np.uint32(1 << (e & 31)).view(np.int32))
        if not buf[r].any():
            buf[r] = saved


def generate(model, guide: EngineGuide, *, steps: int, n_words: int, sampling: Sampling = Sampling(),
             seed: int = 0, bos: int = 0, overlap: bool = True, eos_ids=(), min_tokens: int = 0,
             on_step=None, reweight=None, pick=None) -> Generation:
    """Decode up to ``steps`` tokens per row under ``guide``'s masks (module docstring).

    ``n_words`` is the packed mask width, ceil(grammar vocabulary / 32); ``bos`` the token
    fed first to every row (and to finished rows afterwards, whose outputs are ignored).
    ``on_step(step, generation)`` is called after every step (progress reporting).
    ``min_tokens``: before that many tokens, the stop tokens ``eos_ids`` are blocked in rows
    whose mask allows anything else (transformers' min_new_tokens; the grammar still decides
    when stopping is allowed at all).
    ``reweight(rows, logits, bitmask, tokens)``, when given, is called each step with the raw
    logits, before the mask is applied, and may change the rows' logits in place; grammar-faithful
    sampling adds T·log Φ̂ there (``gramopt.sampling.FaithfulLogits``). Its time counts in
    ``sample_s``.
    ``pick(rows, logits, bitmask, tokens) -> next ids``, when given, replaces the masked
    sampler (``sampling``, ``seed`` and ``reweight`` are then unused): it returns an int64
    tensor (batch,) on the logits' device whose entries at ``rows`` (the live rows, each
    with a non-empty mask) are the tokens those rows take; the others are ignored.
    Grammar-faithful sampling draws there (``gramopt.sampling.loop``)."""
    device = model.device
    batch = guide.n_rows
    pin = device.type == "cuda"
    host = torch.zeros((batch, n_words), dtype=torch.int32, pin_memory=pin)
    buf = host.numpy()
    if pick is None:
        pick = MaskedSampler(host, device, sampling, seed, reweight)
    ids = torch.full((batch, 1), int(bos), dtype=torch.long, device=device)
    past = model.new_cache(batch)
    out = Generation([[] for _ in range(batch)], ["steps"] * batch, overlap=overlap)
    active = [not guide.is_terminated(r) for r in range(batch)]
    for r in range(batch):
        if not active[r]:
            out.finished[r] = "eos"
    pool = ThreadPoolExecutor(1, thread_name_prefix="gramopt-mask") if overlap else None

    def fill(rows, step):
        t = time.perf_counter()
        guide.fill(buf, rows, step)
        return time.perf_counter() - t

    t_start = time.perf_counter()
    try:
        for step in range(steps):
            rows = [r for r in range(batch) if active[r]]
            if not rows:
                break
            t0 = time.perf_counter()
            fut = pool.submit(fill, rows, step) if pool is not None else None
            tf = time.perf_counter()
            logits = model(ids, past)
            _sync(device)
            fwd = time.perf_counter() - tf
            mask_s = fut.result() if fut is not None else fill(rows, step)
            out.phase_s.append(time.perf_counter() - t0)
            out.forward_s.append(fwd)
            out.mask_s.append(mask_s)
            out.steps = step + 1
            if guide.stop_reason is not None:  # e.g. the lockstep masks differ at this step
                out.stop_reason = guide.stop_reason
                for r in rows:
                    out.finished[r] = "stopped"
                break
            ts = time.perf_counter()
            live = np.zeros(batch, bool)
            live[rows] = True
            dead = live & ~buf.any(axis=1)
            for r in np.nonzero(dead)[0]:
                active[int(r)] = False
                out.finished[int(r)] = "dead"
            if step < min_tokens and len(eos_ids):
                _block_stop(buf, eos_ids, rows)
            nxt = pick([r for r in rows if not dead[r]], logits, buf, out.tokens)
            nxt_host = nxt.tolist()
            out.sample_s.append(time.perf_counter() - ts)
            ta = time.perf_counter()
            for r in rows:
                if not active[r]:
                    continue
                tok = int(nxt_host[r])
                if not guide.advance(r, tok, step):
                    raise RuntimeError(f"row {r}: the guide refused sampled token {tok} at step {step}, "
                                       "which its own mask allowed")
                out.tokens[r].append(tok)
                guide.note_prefix(r, tok)
                if guide.is_terminated(r):
                    active[r] = False
                    out.finished[r] = "eos"
            out.accept_s.append(time.perf_counter() - ta)
            if guide.stop_reason is not None:  # e.g. the lockstep engines disagree on termination
                out.stop_reason = guide.stop_reason
                break
            nxt = torch.where(torch.as_tensor(active, device=device), nxt, torch.full_like(nxt, bos))
            ids = nxt.view(batch, 1)
            if on_step is not None:
                on_step(step, out)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    out.wall_s = time.perf_counter() - t_start
    return out


# the numba kernels a decoding step runs (accept: push_bytes; mask: roots, walk_*; first
# use of a state: classify_state, entry_skips; reset: init_chart; memo_*: the set automaton)
STEP_KERNELS = ("init_chart", "push_bytes", "roots", "fill_mask", "walk_range", "memo_begin", "memo_walk_range",
                "memo_walk_frames", "classify_state", "entry_skips")


def kernel_nogil() -> dict[str, bool]:
    """Kernel name → compiled with ``nogil=True`` (it releases the GIL while it runs, so the
    mask worker thread and the forward pass proceed in parallel). The Python glue between
    kernels (a few µs per step) still takes the GIL."""
    from ..runtime import earley as K
    return {name: bool(getattr(K, name).targetoptions.get("nogil", False)) for name in STEP_KERNELS}
