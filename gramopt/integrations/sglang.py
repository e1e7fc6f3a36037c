"""SGLang: a grammar backend named ``gramopt`` (``--grammar-backend gramopt``).

    from gramopt.integrations.sglang import register
    register()          # in the process that builds SGLang's grammar backend

``register`` calls ``register_grammar_backend(name, create_backend)`` of
``sglang.srt.constrained.base_grammar_backend``; SGLang's ``create_grammar_backend`` then
calls ``create_backend(server_args, tokenizer, vocab_size, eos_token_ids)``, which installs
the drop-in ``xgrammar.GrammarCompiler`` (``gramopt.integrations.xgrammar.install``: also the
name ``xgrammar_backend`` imported at module import) and returns SGLang's own
``XGrammarGrammarBackend`` built with it — every request path (JSON schema, EBNF, regex,
structural tag) is SGLang's, with gramopt in front of the compiles. Arguments the installed
SGLang's backend does not take are not passed (its constructor changed across releases).
The registry is per process: where SGLang spawns its scheduler, ``register`` must run there
too (e.g. from a ``sitecustomize`` module).
"""

from __future__ import annotations

import inspect

NAME = "gramopt"


def register(name: str = NAME) -> None:
    """Register the backend under ``name`` with SGLang."""
    from sglang.srt.constrained.base_grammar_backend import register_grammar_backend
    register_grammar_backend(name, create_backend)


def create_backend(server_args, tokenizer, vocab_size: int, eos_token_ids=None):
    """SGLang's xgrammar backend, compiling through gramopt's drop-in."""
    from .xgrammar import install
    install()
    from sglang.srt.constrained import xgrammar_backend
    install()  # the module is loaded now: swap its imported name too
    backend = xgrammar_backend.XGrammarGrammarBackend
    return backend(tokenizer, vocab_size=vocab_size, **_backend_options(backend, server_args, eos_token_ids))


def _backend_options(backend, server_args, eos_token_ids) -> dict:
    """The keyword arguments SGLang itself passes, as far as ``backend`` takes them."""
    takes = inspect.signature(backend.__init__).parameters
    wanted = {"model_eos_token_ids": list(eos_token_ids) if eos_token_ids else None,
              "any_whitespace": not getattr(server_args, "constrained_json_disable_any_whitespace", False)}
    return {k: v for k, v in wanted.items() if k in takes}
