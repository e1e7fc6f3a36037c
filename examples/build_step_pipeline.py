"""gramopt as a build step of a decoding pipeline: optimize a folder once, then serve.

    python examples/build_step_pipeline.py [GRAMMAR_DIR] [--out OUTDIR] [--engine gramopt|xgrammar]
                                           [--requests 4] [--max-tokens 64] [--vocab qwen|bytes]

1. Build: ``gramopt optimize GRAMMAR_DIR -o OUTDIR`` (a subprocess, as a Makefile or CI
   step would run it: parallel, verified, cached by content hash — run it twice and the
   second run skips every file).
2. Serve: load each optimized grammar from OUTDIR into xgrammar's or gramopt's matcher
   (compiled once per grammar), then answer a batch of requests with a generation loop
   (a tiny seeded transformer; the mask is computed while the forward pass runs).
   Every finished output is checked against the ORIGINAL grammar's recognizer.

Without GRAMMAR_DIR a folder is made from three corpus grammars (json, arithmetic, c).
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

from gramopt.bench.suites import corpus_dir  # noqa: E402
CORPUS = corpus_dir()


def default_folder() -> str:
    if CORPUS is None:
        sys.exit("no GRAMMAR_DIR given and no corpus found (set GRAMOPT_CORPUS)")
    d = tempfile.mkdtemp(prefix="gramopt-grammars-")
    for name in ("llamacpp__json", "llamacpp__arithmetic", "llamacpp__c"):
        for p in glob.glob(os.path.join(CORPUS, "gbnf", name + ".*")):
            shutil.copy(p, d)
    return d


def build(src: str, out: str) -> None:
    cmd = [sys.executable, "-m", "gramopt.cli", "optimize", src, "-o", out]
    print("$ gramopt optimize", src, "-o", out)
    t = time.perf_counter()
    r = subprocess.run(cmd)
    if r.returncode != 0:
        sys.exit(f"the build step failed (exit {r.returncode})")
    print(f"  built in {time.perf_counter() - t:.1f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("grammars", nargs="?")
    ap.add_argument("--out")
    ap.add_argument("--engine", default="gramopt", choices=("gramopt", "xgrammar"))
    ap.add_argument("--requests", type=int, default=4, help="rows decoded together per grammar")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--vocab", default="qwen", choices=("qwen", "bytes"))
    args = ap.parse_args()
    src = args.grammars or default_folder()
    out = args.out or tempfile.mkdtemp(prefix="gramopt-optimized-")
    build(src, out)

    import torch
    from gramopt.formats import read
    from gramopt.runtime import Matcher, Vocab
    from gramopt.engines import xgrammar as xgrammar_engine
    from gramopt.decoding.loop import EngineGuide, GramoptEngine, Sampling, generate, resolve_device
    from gramopt.decoding.model import TinyCausalLM, prior_from_texts
    from gramopt.verify import Recognizer

    device = resolve_device("auto")
    if device.type == "cpu":
        torch.set_num_threads(1)
    vocab = Vocab.qwen() if args.vocab == "qwen" else Vocab.from_bytes([bytes([b]) for b in range(256)], eos=256)
    exts = (".gbnf", ".ebnf", ".goebnf")
    for path in sorted(p for p in glob.glob(os.path.join(out, "*")) if p.endswith(exts)):
        name = os.path.basename(path)
        original_path = os.path.join(src, name)
        optimized = read(path)
        t = time.perf_counter()
        if args.engine == "xgrammar":
            compiled = xgrammar_engine.compile_grammar(optimized, vocab)
            engines = [xgrammar_engine.matcher(compiled) for _ in range(args.requests)]
        else:
            engines = [GramoptEngine(Matcher(optimized, vocab)) for _ in range(args.requests)]
        compile_s = time.perf_counter() - t
        stem = os.path.splitext(original_path)[0]
        texts = [open(p, encoding="utf-8").read() for p in sorted(glob.glob(glob.escape(stem) + ".sample*.txt"))]
        model = TinyCausalLM(len(vocab), seed=0, device=device,
                             token_prior=prior_from_texts(vocab, texts) if texts else None)
        gen = generate(model, EngineGuide(engines), steps=args.max_tokens, n_words=vocab.n_words,
                       sampling=Sampling(temperature=1.0, top_k=50), seed=0, bos=vocab.eos_ids[0],
                       overlap=True, eos_ids=vocab.eos_ids, min_tokens=16)
        ref = Recognizer(read(original_path)) if os.path.exists(original_path) else None
        ok = all(ref is None or (ref.accepts(txt) if fin == "eos" else ref.is_viable_prefix(txt))
                 for txt, fin in zip(gen.texts(vocab), gen.finished))
        print(f"\n{name} via {args.engine} (compile {compile_s:.2f} s): {gen.n_tokens} tokens in {gen.wall_s:.2f} s "
              f"= {gen.tokens_per_s:.0f} tokens/s, rows finished: {', '.join(gen.finished)}; "
              f"outputs in the original grammar's language: {'yes' if ok else 'NO'}")
        print(f"  row 0: {gen.texts(vocab)[0][:120]!r}")
        if not ok:
            return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
