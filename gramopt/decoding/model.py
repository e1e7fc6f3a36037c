"""Language models for the decoding loop: the protocol, a small seeded transformer, an HF adapter.

The protocol (what ``gramopt.decoding.loop.generate`` calls) is one method::

    past = model.new_cache(batch)            # an opaque per-generation state
    logits = model(input_ids, past)          # input_ids: int64 (batch, t) on model.device
                                             # logits: float (batch, V) for the next token

``model(input_ids, past)`` consumes ``t`` new tokens per row (all rows the same length),
extends ``past`` in place (a KV cache) and returns the next-token logits of each row. ``V``
may exceed the grammar's vocabulary (padded embedding tables): the mask blocks the extra
columns. Any object with ``device``, ``vocab_size``, ``new_cache`` and ``__call__`` works.

``TinyCausalLM`` is a pre-norm transformer (causal attention with a KV cache, GELU MLP,
tied embeddings) with weights drawn from a seeded generator: the masks the decoding check
compares do not depend on the text's quality, only on it reaching many grammar states.
``token_prior`` adds a fixed log-frequency bias (``unigram_prior`` from sample texts of the
grammar) so that random weights still produce grammar-like token mixtures — closing strings,
brackets — instead of wandering inside the first open string of a 150k-token vocabulary.

``HFCausalLM`` wraps a Hugging Face ``AutoModelForCausalLM`` the user has locally
(nothing is downloaded here): ``past`` holds its ``past_key_values``.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class KVCache:
    """Per-layer keys and values, (batch, heads, length, head_dim) each; grows by concat."""

    def __init__(self, n_layers: int):
        self.k: list[torch.Tensor | None] = [None] * n_layers
        self.v: list[torch.Tensor | None] = [None] * n_layers

    @property
    def length(self) -> int:
        return 0 if self.k[0] is None else int(self.k[0].shape[2])

    def extend(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append this step's keys/values to ``layer``; returns the whole sequence's."""
        if self.k[layer] is not None:
            k = torch.cat([self.k[layer], k], dim=2)
            v = torch.cat([self.v[layer], v], dim=2)
        self.k[layer], self.v[layer] = k, v
        return k, v


class _Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor, cache: KVCache, layer: int, past: int) -> torch.Tensor:
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))
        k, v = cache.extend(layer, k, v)
        # query i (absolute position past + i) sees keys 0 .. past + i: causal over the whole cache
        mask = torch.ones(t, past + t, dtype=torch.bool, device=x.device).tril(diagonal=past)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class TinyCausalLM(nn.Module):
    """A small causal transformer with seeded random weights (same seed → same weights on
    every device: they are drawn on CPU, then moved)."""

    def __init__(self, vocab_size: int, d_model: int = 64, n_layers: int = 2, n_heads: int = 4,
                 max_len: int = 4096, seed: int = 0, device: str | torch.device = "cpu",
                 token_prior: torch.Tensor | None = None, scale: float = 1.0):
        super().__init__()
        if d_model % n_heads:
            raise ValueError("d_model must be a multiple of n_heads")
        self.vocab_size = vocab_size
        self.max_len = max_len
        self.scale = scale
        gen = torch.Generator().manual_seed(seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
            self.embed = nn.Embedding(vocab_size, d_model)
            self.pos = nn.Embedding(max_len, d_model)
            self.blocks = nn.ModuleList(_Block(d_model, n_heads) for _ in range(n_layers))
            self.ln_f = nn.LayerNorm(d_model)
        prior = torch.zeros(vocab_size) if token_prior is None else token_prior.float().reshape(-1)
        if prior.shape[0] != vocab_size:
            raise ValueError(f"token_prior has {prior.shape[0]} entries, the vocabulary {vocab_size}")
        self.register_buffer("prior", prior)
        self.eval()
        self.to(device)

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    def new_cache(self, batch: int) -> KVCache:
        return KVCache(len(self.blocks))

    @torch.no_grad()
    def forward(self, input_ids: torch.Tensor, past: KVCache) -> torch.Tensor:
        return self._head(self._hidden(input_ids, past)[:, -1])

    def sequence_logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Next-token logits after every position, (batch, t, V), from an empty cache; keeps the
        autograd graph (training, and speculative verification of several drafted tokens)."""
        return self._head(self._hidden(input_ids, self.new_cache(input_ids.shape[0])))

    def _hidden(self, input_ids: torch.Tensor, past: KVCache) -> torch.Tensor:
        start = past.length
        t = input_ids.shape[1]
        if start + t > self.max_len:
            raise ValueError(f"sequence longer than the model's {self.max_len} positions")
        pos = torch.arange(start, start + t, device=input_ids.device)
        x = self.embed(input_ids) + self.pos(pos)
        for i, blk in enumerate(self.blocks):
            x = blk(x, past, i, start)
        return self.ln_f(x)

    def _head(self, h: torch.Tensor) -> torch.Tensor:
        # tied output layer, scaled so random weights give peaked (not uniform) distributions
        logits = (h @ self.embed.weight.T) * (self.scale / math.sqrt(h.shape[-1]))
        return logits + self.prior


class ForcedLM:
    """A "model" that spells given token sequences, one per row (teacher forcing): at step i
    row r's logits put all the mass on ``rows[r][i]``, then on ``stop`` once the sequence is
    spelled. Behind the grammar mask the decoder then follows the sequence while the grammar
    allows it (a sentence of the grammar: to its end), so a decoding check walks the
    trajectories of known sentences — long, varied, and through the productions they use.
    Where the mask refuses the forced token, every allowed token is equally likely (seeded)."""

    class Past:
        __slots__ = ("step",)

        def __init__(self):
            self.step = 0

    def __init__(self, rows: list[list[int]], vocab_size: int, stop: int, device: str | torch.device = "cpu"):
        self.rows, self.vocab_size, self.stop = rows, vocab_size, stop
        self._device = torch.device(device)

    @property
    def device(self) -> torch.device:
        return self._device

    def new_cache(self, batch: int) -> "ForcedLM.Past":
        if batch != len(self.rows):
            raise ValueError(f"ForcedLM spells {len(self.rows)} rows, not {batch}")
        return ForcedLM.Past()

    def __call__(self, input_ids: torch.Tensor, past: "ForcedLM.Past") -> torch.Tensor:
        i = past.step
        past.step += 1
        logits = torch.full((len(self.rows), self.vocab_size), -1e4)
        for r, toks in enumerate(self.rows):
            logits[r, toks[i] if i < len(toks) else self.stop] = 0.0
        return logits.to(self._device)


def unigram_prior(token_lists, vocab_size: int, weight: float = 1.0, floor: float = -8.0) -> torch.Tensor:
    """``weight · log p(token)`` from token counts of sample texts (add-one smoothing, then
    clipped below at ``floor`` relative to the most frequent token), for ``token_prior``."""
    counts = torch.ones(vocab_size, dtype=torch.float64)
    for ids in token_lists:
        if len(ids):
            counts += torch.bincount(torch.as_tensor(list(ids), dtype=torch.long),
                                     minlength=vocab_size)[:vocab_size].double()
    logp = counts.log()
    logp = (logp - logp.max()).clamp(min=floor)
    return (weight * logp).float()


class HFCausalLM:
    """A Hugging Face causal LM behind the protocol: ``past`` holds ``past_key_values``.

    ``model`` is e.g. ``AutoModelForCausalLM.from_pretrained(local_path)``; its
    ``config.vocab_size`` may be padded beyond the tokenizer's vocabulary (the decoder
    masks the extra columns)."""

    class Past:
        __slots__ = ("value",)

        def __init__(self):
            self.value = None

    def __init__(self, model):
        self.model = model
        self.model.eval()

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def vocab_size(self) -> int:
        return int(self.model.config.vocab_size)

    def new_cache(self, batch: int) -> "HFCausalLM.Past":
        return HFCausalLM.Past()

    @torch.no_grad()
    def __call__(self, input_ids: torch.Tensor, past: "HFCausalLM.Past") -> torch.Tensor:
        out = self.model(input_ids=input_ids, past_key_values=past.value, use_cache=True)
        past.value = out.past_key_values
        return out.logits[:, -1, :]


def load_hf_model(path: str, device: str = "cpu") -> HFCausalLM:
    """``HFCausalLM`` of a local checkpoint folder (needs ``transformers``; never downloads)."""
    try:
        from transformers import AutoModelForCausalLM
    except ImportError:
        raise ImportError("a Hugging Face model needs the 'transformers' package") from None
    m = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    return HFCausalLM(m.to(device))


def prior_from_texts(vocab, texts, weight: float = 2.0) -> torch.Tensor:
    """``unigram_prior`` of ``texts`` tokenized for ``vocab`` (Qwen's BPE for the Qwen
    vocabulary, greedy longest match otherwise); texts the vocabulary cannot spell are
    skipped."""
    from ..runtime.tokenize import TokenizeError, Tokenizer
    tok = Tokenizer.for_vocab(vocab)
    lists = []
    for text in texts:
        try:
            lists.append(tok.encode(text))
        except TokenizeError:
            continue
    return unigram_prior(lists, len(vocab), weight)
