"""Token-level matcher: Earley chart + vocabulary trie → packed int32 token masks.

    m = Matcher(grammar, Vocab.qwen())
    m.fill_next_token_bitmask(bitmask)   # int32[ceil(n/32)] or int32[batch, words] + row
    m.accept_token(tid)                  # False (state unchanged) when not allowed
    m.is_terminated(); m.rollback(k); m.reset()
    m.fork()                             # an independent copy of the decoding state
    m.find_jump_forward_string()         # text every continuation starts with (jump_forward.py)

Semantics (xgrammar's): a token is allowed when the text so far followed by its bytes is
a viable prefix of the grammar's language (a byte string, so a token may end inside a
multi-byte character); a stop token is allowed exactly when the text so far is in the
language, and accepting it terminates the matcher. Bit i of word i // 32 is token i.

Every step reports ``Counters`` (items, predictions, completions, scans, trie nodes, Leo
chain hits, sets) — the inputs of the SAC proxy — as the value of ``accept_token``'s
sibling ``last_counters`` and the return value of ``fill_next_token_bitmask``.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import NamedTuple

import numpy as np

from ..grammar import Grammar
from . import earley as K
from .bitmask import allowed_ids, write_row
from .chart import Chart
from .compile import CompiledGrammar, compile_grammar
from .jit import serving_twins
from .jump_forward import forced_bytes
from .limits import RuntimeLimits
from .packed import pack, pack_width
from .tokens import TokenTable
from .vocab import Vocab


class Counters(NamedTuple):
    """Work done by one step (deltas): Earley items added (``items`` = predictions +
    completions + scans + initial items), trie nodes pushed by the mask walk, Leo chain
    entries used, Earley sets built. (A named tuple: built in a microsecond per step.)"""

    items: int = 0
    predictions: int = 0
    completions: int = 0
    scans: int = 0
    trie_nodes: int = 0
    leo: int = 0
    sets: int = 0

    @staticmethod
    def delta(after: np.ndarray, before: np.ndarray) -> "Counters":
        # fields in the order of earley's C_ITEMS .. C_SETS (0..6)
        return Counters._make((after[:7] - before[:7]).tolist())

    def as_dict(self) -> dict:
        return self._asdict()


class MaskCounters:
    """The ``Counters`` of one mask, built when first read (``fill_next_token_bitmask``
    returns one per call; most callers never look): attributes, ``as_dict``, ``value()``."""

    __slots__ = ("_delta", "_value")

    def __init__(self, delta: np.ndarray):
        self._delta = delta
        self._value = None

    def value(self) -> Counters:
        if self._value is None:
            self._value = Counters._make(self._delta[:7].tolist())
        return self._value

    def __getattr__(self, name):
        return getattr(self.value(), name)

    def __iter__(self):
        return iter(self.value())

    def __eq__(self, other):
        return self.value() == (other.value() if isinstance(other, MaskCounters) else other)

    def __repr__(self) -> str:
        return repr(self.value())


_ENTRIES: dict = {}
_FILL_PACKED = None  # the compiled entry point of earley.fill_mask_packed, once known


def _fill_entry(A: np.ndarray, buf: np.ndarray):
    """The compiled ``fill_mask_packed`` (kept in _FILL_PACKED); while the kernels' Python
    twins serve (jit.py: a new environment's compile runs in the background), the
    dispatcher itself, which runs the twin until the compiled kernel is ready."""
    global _FILL_PACKED
    if serving_twins():
        return K.fill_mask_packed
    _FILL_PACKED = _entry(K.fill_mask_packed, (A, buf))
    return _FILL_PACKED


def _entry(kernel, args):
    """The compiled entry point of a numba kernel for ``args``' types, skipping the
    dispatcher's per-call type matching (~3 µs for a chart tuple of 30 arrays). The types
    of a mask call do not change within a process (fixed dtypes and layouts), so it is
    looked up once (the mask buffer is always a C-contiguous uint32 vector here)."""
    ep = _ENTRIES.get(kernel)
    if ep is None:
        kernel(*args)  # compile or load for these types
        sig = tuple(kernel.typeof_pyval(a) for a in args)
        ep = _ENTRIES[kernel] = kernel.overloads[sig].entry_point
    return ep


_TABLES: "OrderedDict[tuple, TokenTable]" = OrderedDict()


def token_table(grammar: Grammar | CompiledGrammar, vocab: Vocab) -> TokenTable:
    """The compiled grammar and its token classes for ``vocab`` (cached per pair)."""
    key = (grammar if isinstance(grammar, Grammar) else id(grammar), id(vocab))
    t = _TABLES.get(key)
    if t is not None and t.vocab is vocab:
        _TABLES.move_to_end(key)
        return t
    cg = grammar if isinstance(grammar, CompiledGrammar) else compile_grammar(grammar)
    t = TokenTable(cg, vocab)
    _TABLES[key] = t
    while len(_TABLES) > 16:
        _TABLES.popitem(last=False)
    return t


def as_vocab(vocab) -> Vocab:
    """``vocab`` itself, or the Vocab of a Hugging Face tokenizer object (a fast tokenizer or
    a ``tokenizers.Tokenizer``: ``Vocab.from_huggingface``), built once per tokenizer and
    kept on it, as xgrammar's ``TokenizerInfo.from_huggingface`` is built once."""
    if isinstance(vocab, Vocab):
        return vocab
    cached = getattr(vocab, "_gramopt_vocab", None)
    if isinstance(cached, Vocab):
        return cached
    v = Vocab.from_huggingface(vocab)
    try:
        vocab._gramopt_vocab = v
    except (AttributeError, TypeError):
        pass  # an object that takes no attributes: rebuilt next time
    return v


class Matcher:
    """Grammar-constrained decoding state over one vocabulary: ``vocab`` is a ``Vocab`` or a
    Hugging Face tokenizer object (``as_vocab``); default the Qwen vocabulary.

    ``mode="cached"`` (default) builds masks from per-state token classes (tokens.py) and
    walks only the undecided tokens, through the set automaton (earley.memo_*: Earley sets
    hash-consed by kernel, transitions cached for the mask); ``mode="walk"`` walks the whole
    trie with one Earley set per node every time (the plain algorithm, kept as a
    cross-check).

    ``max_rollback_tokens`` (-1: unbounded) caps how many accepted tokens ``rollback`` can
    undo (older history is dropped); ``limits`` caps the chart's memory (limits.py: a step
    that would pass a cap raises ``RuntimeLimitError`` and changes nothing).
    """

    ROOT_LIMIT = 64
    FRAME_LIMIT = 1024  # walk frames of one mask (earley.memo_walk_frames; more: no split)
    REQUEST_LIMIT = 64  # subtree pairs one mask may ask classes for

    def __new__(cls, *args, backend: str = "earley", **kwargs):
        """``backend="valiant"`` gives the matrix recognizer's matcher (same API, see
        gramopt.runtime.matrix), for grammars that stay ambiguous; ``"earley"`` this one.
        The matrix matcher keeps every column, so any rollback depth is allowed; it takes
        the Earley matcher's ``max_rollback_tokens`` and ``limits`` but does not use them."""
        if backend == "valiant":
            from .matrix import ValiantMatcher
            for unused in ("mode", "precompute", "max_rollback_tokens", "limits"):
                kwargs.pop(unused, None)
            return ValiantMatcher(*args, **kwargs)
        if backend != "earley":
            raise ValueError(f"backend is 'earley' or 'valiant', not {backend!r}")
        return super().__new__(cls)

    def __init__(self, grammar: Grammar | CompiledGrammar | TokenTable, vocab=None,
                 *, mode: str = "cached", precompute: bool = False, max_rollback_tokens: int = -1,
                 limits: RuntimeLimits | None = None, backend: str = "earley"):
        if isinstance(grammar, TokenTable):
            self.table = grammar
        else:
            self.table = token_table(grammar, as_vocab(vocab) if vocab is not None else Vocab.qwen())
        if mode not in ("cached", "walk"):
            raise ValueError("mode is 'cached' or 'walk'")
        self.mode = mode
        self.cg = self.table.cg
        self.vocab = self.table.vocab
        self.G = self.table.G
        self.T = self.table.T
        self._eos = np.array(self.vocab.eos_ids, np.int64)
        self._buf = np.zeros(self.vocab.n_words, np.uint32)
        self._stack = np.zeros(4097, np.int32)  # the walk's set at each trie depth
        self._roots = np.zeros(self.ROOT_LIMIT, np.int32)  # roots of a mask (fill_mask)
        self._frames = np.zeros(K.FRAME_W * self.FRAME_LIMIT, np.int32)  # the U walks' frames
        self._req = np.zeros(2 * self.REQUEST_LIMIT + 1, np.int32)  # subtree pairs a mask asks for
        self._pending = None
        self._delta = np.zeros(K.N_COUNTERS, np.int64)  # counter deltas of the last mask
        self._out_seen = self._out_row = self._out_view = None  # last numpy bitmask row written
        self._packed_for: tuple = ()  # (chart.S, table.P) that self._A describes
        self._A = np.zeros(pack_width(K.PACKED_SLOTS), np.int64)
        self._A_addr = self._A.ctypes.data  # for batch kernels (batch.py); _A is never replaced
        self.max_rollback_tokens = int(max_rollback_tokens)
        self.chart = Chart(self.cg.n_rules, mask_words=self.vocab.n_words, limits=limits)
        self.last_counters = Counters()
        if precompute:
            self.table.precompute()
        self.reset()
        if mode == "cached":
            self._packed()  # here, not in the first mask

    # ------------------------------------------------------------ state
    def reset(self) -> None:
        keep = None if self.max_rollback_tokens < 0 else self.max_rollback_tokens
        self._history: deque[tuple[int, bool]] = deque(maxlen=keep)
        self._accepted = 0
        self._terminated = False
        if not self.cg.empty_language:
            self.chart.run(K.init_chart, self.G, self.cg.start_state, 0, self.cg.accept_state)

    def is_terminated(self) -> bool:
        return self._terminated

    def can_terminate(self) -> bool:
        """True when the text so far is in the language (a stop token is allowed)."""
        return (not self.cg.empty_language) and not self._terminated and self.chart.accepting()

    def rollback(self, k: int = 1) -> None:
        if k > len(self._history):
            why = (f"only {len(self._history)} accepted" if len(self._history) == self._accepted
                   else f"max_rollback_tokens={self.max_rollback_tokens}")
            raise ValueError(f"cannot roll back {k} tokens: {why}")
        for _ in range(k):
            n_sets, eos = self._history.pop()
            self._accepted -= 1
            if eos:
                self._terminated = False
            else:
                self.chart.n_sets = n_sets

    @property
    def num_tokens(self) -> int:
        """Tokens (and byte strings) accepted since the last reset, net of rollbacks."""
        return self._accepted

    def state_key(self) -> int:
        """An id of the parse state: two texts with equal keys in *this* matcher have the same
        future (equal last sets up to origins that behave alike, earley.mask_key), hence equal
        masks after every continuation. Ids are this matcher's own; -1 when not named."""
        if self._terminated or self.cg.empty_language:
            return -1
        while (k := int(K.mask_key(self.chart.S))) == -2:
            self.chart.grow()
        return k

    def fork(self) -> "Matcher":
        """An independent matcher in the same state (shares the grammar's token table;
        copies the chart, its mask cache included, and the rollback history)."""
        m = Matcher.__new__(Matcher)
        m.__dict__.update(self.__dict__)
        m._buf = np.zeros_like(self._buf)
        m._stack = np.zeros_like(self._stack)
        m._roots = np.zeros_like(self._roots)
        m._frames = np.zeros_like(self._frames)
        m._req = np.zeros_like(self._req)
        m._delta = np.zeros_like(self._delta)
        m._A = np.zeros_like(self._A)
        m._A_addr = m._A.ctypes.data
        m._packed_for = ()
        m._out_seen = m._out_row = m._out_view = None
        m.chart = self.chart.copy()
        m._history = deque(self._history, maxlen=self._history.maxlen)
        return m

    def find_jump_forward_bytes(self, max_bytes: int = 4096) -> bytes:
        """The bytes every continuation of the text so far starts with (jump_forward.py);
        empty when terminated or when the text so far is in the language."""
        if self._terminated or self.cg.empty_language:
            return b""
        out = np.zeros(max_bytes, np.int32)
        k = self.chart.run(forced_bytes, self.G, self.cg.accept_state, out)
        return bytes(out[:k].astype(np.uint8))

    def find_jump_forward_string(self) -> str:
        """``find_jump_forward_bytes`` cut to its longest valid UTF-8 prefix, as text."""
        data = self.find_jump_forward_bytes()
        for cut in range(len(data), max(-1, len(data) - 4), -1):
            try:
                return data[:cut].decode("utf-8")
            except UnicodeDecodeError:
                continue
        return ""

    # ------------------------------------------------------------ steps
    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) when the token is not allowed."""
        before = self.chart.counters.copy()
        ok = self._accept(int(token_id))
        self.last_counters = Counters.delta(self.chart.counters, before)
        return ok

    def _accept(self, tid: int) -> bool:
        if self._terminated or self.cg.empty_language or not 0 <= tid < len(self.vocab):
            return False
        if tid in self.vocab.eos_ids:
            if self.chart.accepting():
                self._history.append((self.chart.n_sets, True))
                self._accepted += 1
                self._terminated = True
                return True
            return False
        data = self.vocab.token_bytes[tid]
        if not data:
            return False
        return self._push(data)

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (one history step); for tests and text prefixes."""
        if self._terminated or self.cg.empty_language:
            return False
        return self._push(bytes(data))

    def accept_string(self, text: str | bytes) -> bool:
        """Advance by the UTF-8 bytes of ``text`` (one history step), e.g. jump-forward text."""
        return self.accept_bytes(text.encode("utf-8") if isinstance(text, str) else text)

    def _push(self, data: bytes) -> bool:
        n = self.chart.n_sets
        r = self.chart.run(K.push_bytes, self.G, np.frombuffer(data, np.uint8).astype(np.int32),
                           self.cg.accept_state)
        if r <= 0:
            self.chart.n_sets = n
            return False
        self._history.append((n, False))
        self._accepted += 1
        return True

    # ------------------------------------------------------------ masks
    def compute_mask(self) -> np.ndarray:
        """The packed mask as uint32 words (a view of an internal buffer)."""
        return self._fill(self._buf)

    def _packed(self) -> np.ndarray:
        """The address vector of ``fill_mask_packed`` (packed.py) for the current chart and
        token pools, rewritten when either was replaced (growth, a new state's classes);
        ``_packed_for`` holds the tuples it names, so their arrays outlive every call."""
        S, P = self.chart.S, self.table.P
        f = self._packed_for
        if not f or f[0] is not S or f[1] is not P:
            A = self._A
            if not f:
                pack(self.G, K.LAYOUT_G, A, K.AT_G)
                pack(self.T, K.LAYOUT_T, A, K.AT_T)
                pack((self._eos, self._stack, self._roots, self._delta, self._frames, self._req),
                     K.LAYOUT_MATCHER, A, K.AT_MATCHER)
                A[pack_width(K.AT_SCALARS)] = self.cg.accept_state
                A[pack_width(K.AT_SCALARS) + 1] = self.cg.start_state
            pack(S, K.LAYOUT_S, A, K.AT_S)
            pack(P, K.LAYOUT_P, A, K.AT_P)
            self._packed_for = (S, P)
        return self._A

    def _fill(self, buf: np.ndarray) -> np.ndarray:
        """Write the mask into ``buf`` (a C-contiguous uint32 vector of at least ``vocab.n_words``)."""
        if self._terminated or self.cg.empty_language or self.mode == "walk":
            before = self.chart.counters.copy()
            buf[:] = 0
            if self.mode == "walk" and not (self._terminated or self.cg.empty_language):
                self.chart.run(K.walk_range, self.G, self.T, 1, self.table.trie.n_nodes, buf,
                               self.cg.accept_state)
                if self.chart.accepting():
                    for e in self.vocab.eos_ids:
                        buf[e >> 5] |= np.uint32(1 << (e & 31))
            self._delta[:] = self.chart.counters - before
        else:
            f = self._packed_for
            A = self._A if f and f[0] is self.chart.S and f[1] is self.table.P else self._packed()
            fill = _FILL_PACKED or _fill_entry(A, buf)
            r = fill(A, buf)
            if r != 0:
                self._fill_slow(fill, buf, r)
            if self._req[0]:
                self._add_subtrees()
        self._pending = self._delta
        return buf

    # ------------------------------------------------------------ batch kernel hooks (batch.py)
    def _kernel_vector(self) -> np.ndarray | None:
        """The address vector ``fill_mask_packed`` takes for this state's mask, or None when
        the mask is not one kernel call (terminated, empty language, ``mode="walk"``).
        Valid until this matcher's chart or its table's pools are replaced."""
        if self._terminated or self.cg.empty_language or self.mode == "walk":
            return None
        f = self._packed_for
        return self._A if f and f[0] is self.chart.S and f[1] is self.table.P else self._packed()

    def _kernel_finish(self, buf: np.ndarray, r: int) -> "MaskCounters":
        """After a batch kernel ran ``fill_mask_packed`` for this matcher into ``buf`` with
        status ``r``: finish the mask as ``_fill`` would (the slow path when r != 0)."""
        if r != 0:
            self._fill_slow(_FILL_PACKED or _fill_entry(self._A, buf), buf, r)
        if self._req[0]:
            self._add_subtrees()
        self._pending = self._delta
        return MaskCounters(self._delta.copy())

    def _add_subtrees(self) -> None:
        """Build the subtree classes the last mask asked for (its walk went node by node
        there; the next mask at such a node splits it, earley.memo_walk_frames)."""
        k = int(self._req[0])
        pairs = self._req[1:1 + 2 * k].reshape(k, 2).tolist()
        self._req[0] = 0
        self.table.add_subtrees(dict.fromkeys(map(tuple, pairs)))

    def _fill_slow(self, fill, buf: np.ndarray, r: int) -> None:
        """The rest of a mask whose first call stopped early: grow the chart (overflow) or
        classify the roots met for the first time (JIT), and call again."""
        spent = self._delta.copy()  # the deltas of the calls that stopped early
        for _ in range(200):
            if r == K.OVERFLOW:
                self.chart.grow()
            else:
                for q in self._roots[:r]:
                    self.table.get(int(q))
            r = fill(self._packed(), buf)
            if r == 0:
                self._delta += spent
                return
            spent += self._delta
        raise MemoryError("Earley chart keeps overflowing")

    @property
    def last_counters(self) -> Counters:
        """Work of the last step (``accept_token`` or a mask), as deltas."""
        if self._pending is not None:  # the last mask's deltas, read on demand
            self._last = Counters._make(self._pending[:7].tolist())
            self._pending = None
        return self._last

    @last_counters.setter
    def last_counters(self, c: Counters) -> None:
        self._last = c
        self._pending = None

    def fill_next_token_bitmask(self, out, row: int = 0) -> "MaskCounters":
        """Write the mask into ``out``: a numpy int32 array of ceil(n/32) words, or
        (batch, words) with ``row``; or a torch int32 tensor of the same shapes (any
        device). Returns the step's counters (built when first read)."""
        if out is self._out_seen and row == self._out_row:  # the caller's buffer again
            self._fill(self._out_view)
            return MaskCounters(self._delta.copy())
        if type(out) is np.ndarray:
            target = out if out.ndim == 1 else out[row]
            if target.shape[0] < self.vocab.n_words:
                raise ValueError(f"bitmask has {target.shape[0]} words, need {self.vocab.n_words}")
            if (target.dtype == np.int32 or target.dtype == np.uint32) and target.flags.c_contiguous:
                view = target.view(np.uint32)
                self._out_seen, self._out_row, self._out_view = out, row, view
                self._fill(view)  # straight into the caller's row
            else:
                write_row(self.compute_mask(), target)
        else:  # torch, or an ndarray subclass
            write_row(self.compute_mask(), out, row)
        return MaskCounters(self._delta.copy())

    def allowed_tokens(self) -> np.ndarray:
        """Ids of the allowed tokens (unpacked mask), for tests and debugging."""
        return allowed_ids(self.compute_mask(), len(self.vocab))


def allocate_token_bitmask(batch: int, vocab_size: int) -> np.ndarray:
    """A numpy int32 (batch, ceil(vocab_size/32)) buffer, all bits set."""
    return np.full((batch, (vocab_size + 31) // 32), -1, dtype=np.int32)
