"""llama.cpp's own parse stacks, read between steps (for the llama.cpp benchmarks).

    probe = GrammarProbe(vocab)          raises AttributeError where libllama lacks the symbols
    g = probe.compile(gbnf_text); probe.mask(g) -> (seconds, allowed); probe.stacks(g) -> (count, depth)
    probe.accept(g, token); probe.free(g)

``llama_grammar_apply_impl`` tries the grammar's stacks one after another over the candidates
(``llamacpp_profile.py``), so the stack count at a step is the part of a mask's cost a
grammar's form decides — a count, not a time: it does not depend on the machine's load.
libllama exports its internal C++ grammar functions; they are called here through ctypes
by their Itanium-ABI names, and the stacks (``std::vector<std::vector<const
llama_grammar_element *>>``) read in libstdc++'s layout (three pointers per vector). This is
benchmark code: it leans on llama.cpp internals (llama-cpp-python 0.3.36), not on its API.
"""

from __future__ import annotations

import ctypes
import time

import numpy as np

from gramopt.engines.llamacpp import _lib, load_vocab
from gramopt.runtime.vocab import Vocab

_SYMBOLS = {  # the Itanium C++ ABI names of the internal functions libllama exports
    "init": "_Z23llama_grammar_init_implPK11llama_vocabPKcS3_bPS3_mPKim",
    "stacks": "_Z24llama_grammar_get_stacksP13llama_grammar",
    "accept": "_Z25llama_grammar_accept_implR13llama_grammari",
    "apply": "_Z24llama_grammar_apply_implRK13llama_grammarP22llama_token_data_array",
    "free": "_Z23llama_grammar_free_implP13llama_grammar",
}


class GrammarProbe:
    """llama.cpp's ``llama_grammar`` driven directly (no sampler around it), so that its
    stacks can be read between steps."""

    def __init__(self, vocab: Vocab):
        ll = _lib()
        lib = ll._lib
        self.fn = {}
        for key, sym in _SYMBOLS.items():
            self.fn[key] = getattr(lib, sym)  # AttributeError: this libllama does not export it
        f = self.fn
        f["init"].restype = ctypes.c_void_p
        f["init"].argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_bool, ctypes.c_void_p,
                              ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
        f["stacks"].restype = ctypes.c_void_p
        f["stacks"].argtypes = [ctypes.c_void_p]
        f["accept"].argtypes = [ctypes.c_void_p, ctypes.c_int32]
        f["apply"].argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        f["free"].argtypes = [ctypes.c_void_p]
        self.vocab_ptr = load_vocab(vocab)
        self.n = n = len(vocab)
        self.cands = (ll.llama_token_data * n)()
        view = np.ctypeslib.as_array(self.cands)
        view["id"] = np.arange(n, dtype=np.int32)
        self.logits = view["logit"]
        self.array = ll.llama_token_data_array(data=self.cands, size=n, selected=-1, sorted=False)

    def compile(self, text: str):
        g = self.fn["init"](self.vocab_ptr, text.encode(), b"root", False, None, 0, None, 0)
        if not g:
            raise RuntimeError("llama.cpp refused the grammar")
        return g

    def free(self, g) -> None:
        self.fn["free"](g)

    def mask(self, g) -> tuple[float, int]:
        """(seconds of one ``llama_grammar_apply_impl``, allowed tokens)."""
        self.logits[:] = 0.0
        self.array.size = self.n
        t = time.perf_counter()
        self.fn["apply"](g, ctypes.byref(self.array))
        dt = time.perf_counter() - t
        return dt, int(np.isfinite(self.logits).sum())

    def stacks(self, g) -> tuple[int, int]:
        """(number of stacks, their total depth): ``std::vector<std::vector<const
        llama_grammar_element *>>``, each vector three pointers (begin, end, capacity)."""
        p = self.fn["stacks"](g)
        begin, end = ctypes.cast(p, ctypes.POINTER(ctypes.c_void_p * 2)).contents
        count = ((end or 0) - (begin or 0)) // 24
        depth = 0
        for i in range(count):
            b, e = ctypes.cast(begin + 24 * i, ctypes.POINTER(ctypes.c_void_p * 2)).contents
            depth += ((e or 0) - (b or 0)) // 8
        return count, depth

    def accept(self, g, token: int) -> None:
        self.fn["accept"](g, int(token))
