"""Decoding: a language model, the one generation loop, and the lockstep check on it.

    from gramopt.decoding import EngineGuide, GramoptEngine, Sampling, TinyCausalLM, generate
    gen = generate(model, EngineGuide([GramoptEngine(Matcher(g, vocab))]), steps=64,
                   n_words=vocab.n_words, sampling=Sampling(temperature=0.8), seed=0)

Modules:

    model      the model protocol (new_cache, __call__), TinyCausalLM (seeded weights, a
               unigram prior), ForcedLM (spells given token rows), HFCausalLM (a local
               Hugging Face model)
    loop       generate: forward, masks from a guide's engines, a pick (the masked sampler
               by default; faithful sampling brings its own), accept; Sampling, Generation,
               the overlap of mask filling with the forward pass
    lockstep   lockstep / decode_check: the optimized grammar's masks against the original's
               at every decoding step (``gramopt verify --decode``)

Stands on gramopt.grammar, gramopt.runtime (the masks) and gramopt.verify (the reference
recognizer that arbitrates engine differences); gramopt.sampling builds faithful sampling on
this loop. Imports torch.
"""

from .lockstep import DecodeReport, LockstepGuide, LockstepResult, Mismatch, Oracles, decode_check, lockstep
from .loop import (EngineGuide, Generation, GramoptEngine, MaskedSampler, Sampling, generate, kernel_nogil,
                   resolve_device, sample)
from .model import ForcedLM, HFCausalLM, TinyCausalLM, load_hf_model, prior_from_texts, unigram_prior

__all__ = ["DecodeReport", "EngineGuide", "ForcedLM", "Generation", "GramoptEngine", "HFCausalLM", "LockstepGuide",
           "LockstepResult", "MaskedSampler", "Mismatch", "Oracles", "Sampling", "TinyCausalLM", "decode_check",
           "generate", "kernel_nogil", "lockstep", "load_hf_model", "prior_from_texts", "resolve_device", "sample",
           "unigram_prior"]
