"""gramopt in the request path of serving stacks, one module per stack, each thin over the
pass API (``gramopt.passes.optimize``, ``gramopt.formats``):

    request       per-request machinery: LRU + disk cache, wall-clock budget, fall back, stats()
    xgrammar      GrammarCompiler (a drop-in subclass), install() / uninstall()
    vllm          register(): the ``vllm.general_plugins`` entry point (calls install())
    sglang        register(): a grammar backend named "gramopt"
    llguidance    grammar_from(...), grammar_from_lark/_json_schema/_regex, matcher(...)
    llamacpp      LlamaGrammar.from_string / from_json_schema for llama-cpp-python
    transformers  logits_processor(...): an HF ``LogitsProcessor`` over the drop-in

Nothing is imported here: each module imports its stack only when used.
"""
