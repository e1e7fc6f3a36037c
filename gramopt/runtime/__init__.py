"""The mask engine: Grammar → flat arrays → numba Earley over bytes → packed token masks.

    from gramopt.runtime import Matcher, Vocab
    m = Matcher(grammar, Vocab.qwen())
    bitmask = allocate_token_bitmask(1, len(m.vocab))
    m.fill_next_token_bitmask(bitmask, 0); m.accept_token(tid)

Modules: compile (Grammar → CompiledGrammar), earley (numba kernels), chart (their
arrays), trie (depth-first token trie), vocab (tokenizer files), tokens (per-state token
classes), subtrees (a state's classes below a big trie node), matcher (the decoding state),
matrix (the second backend, ``Matcher(backend="valiant")``: a Valiant/CYK recognizer with the
same API and exact masks, for grammars that stay ambiguous), tokenize (text → token ids),
torch_ops (masks on tensors; torch is optional and imported only when used). Serving:
batch (BatchMatcher: many rows' masks on a thread pool), jump_forward (forced text), limits (chart caps, RuntimeLimitError), kernels
(apply_token_bitmask_inplace, one backend per file). jit (the kernels' decorator: one
specialization each, cached under ``$GRAMOPT_CACHE/numba``, gramopt.runtime.cachedir; in a
new environment the kernels' Python twins serve while a background process compiles),
twins (those twins: each kernel's own source run by CPython), warm (``python -m
gramopt.runtime.warm``: compile them ahead of first use), background (that compile as the
background process a new environment's first kernel call starts). Stands on
gramopt.grammar alone (its cache folder is runtime.cachedir, standard library only); never imports egglog.
The language model and the generation loop that drive it live in gramopt.decoding.

Speed, all exact (masks equal the plain algorithm's, ``Matcher(mode="walk")``):
  * JIT: ``Matcher()`` builds the automata only; a state's token classes are built when
    a mask first meets it, shared across grammars by the signature of the sub-network
    reachable from it (tokens.py); ``precompute=True`` is the ahead-of-time warm-up;
  * the set automaton (earley.memo_*): a mask walk hash-conses Earley sets by kernel, so
    inside a regular stretch (identifier, number, free text) a trie node is one lookup;
  * subtree classes (subtrees.py): a U walk that reaches a big trie node (an identifier
    after ``int ``) splits it by the classes of its walk set's roots below that node,
    built once per (state, node) on first need, so it walks only the tokens that end
    the identifier;
  * the mask cache (earley.fill_mask): committed sets named by content, so a set met
    again (the next byte of a string) gets its mask copied. An item is named by what it
    reads of its origin (the waiter group of its rule, earley._canonize), so ambiguous
    repetitions such as (x+)* across rules, whose items pile up one per position, still
    meet equal sets; a long mask walk hash-conses its sets by these names too;
  * counted repetitions (compile.py): x{m,n} with large bounds is a rule whose items hold
    the count in their state, so it compiles in O(|x|) and steps in the cost of one x.
"""

from .batch import BatchMatcher
from .compile import CompiledGrammar, RuntimeGrammarError, compile_grammar
from .limits import RuntimeLimitError, RuntimeLimits
from .matcher import Counters, Matcher, allocate_token_bitmask, token_table
from .vocab import Vocab

__all__ = ["BatchMatcher", "CompiledGrammar", "Counters", "Matcher", "RuntimeGrammarError",
           "RuntimeLimitError", "RuntimeLimits", "Vocab", "allocate_token_bitmask",
           "apply_token_bitmask", "apply_token_bitmask_inplace", "compile_grammar",
           "GrammarLogitsProcessor", "token_table"]


def __getattr__(name: str):
    if name in ("apply_token_bitmask", "GrammarLogitsProcessor"):
        from . import torch_ops
        return getattr(torch_ops, name)
    if name == "apply_token_bitmask_inplace":
        from .kernels import apply_token_bitmask_inplace
        return apply_token_bitmask_inplace
    raise AttributeError(f"module 'gramopt.runtime' has no attribute {name!r}")
