"""vLLM: the ``vllm.general_plugins`` entry point (``pyproject.toml``).

    pip install gramopt            # vLLM then calls register() in every process it starts
    GRAMOPT_DISABLE=1 vllm serve … # without it

vLLM's V1 xgrammar backend (``vllm/v1/structured_output/backend_xgrammar.py``) reaches
xgrammar through a lazily loaded module (``xgr.GrammarCompiler(tokenizer_info, ...)``), so
swapping the module attribute before the backend is built is enough: ``register`` calls
``gramopt.integrations.xgrammar.install``. Options come from the environment
(``request.RequestOptions.from_env``: ``GRAMOPT_BUDGET_MS``, ``GRAMOPT_VERIFY``,
``GRAMOPT_CACHE_DIR``, ...). vLLM validates a request's grammar with
``xgrammar.Grammar.from_ebnf`` before compiling it, so a llama.cpp GBNF that xgrammar's
reader refuses is still refused there; schemas and xgrammar EBNF are optimized.
"""

from __future__ import annotations

import os

from .request import LOG


def register() -> None:
    """Install the drop-in (unless ``GRAMOPT_DISABLE`` is set to a non-empty value other than 0)."""
    if os.environ.get("GRAMOPT_DISABLE", "0") not in ("", "0"):
        LOG.info("gramopt: GRAMOPT_DISABLE is set; vLLM keeps plain xgrammar")
        return
    from .xgrammar import install
    install()
    LOG.info("gramopt: xgrammar.GrammarCompiler is gramopt's drop-in")
