"""Check that an optimized grammar is equivalent to its original.

Without --decode: the optimizer's language checks (bounded enumeration, production
coverage, random derivations, and an exact automaton comparison where the grammars are
regular). With --decode: a decoding loop (a small seeded transformer, or a local Hugging
Face model with --model) samples under the original grammar's mask, and at every step the
optimized grammar's mask — in gramopt's runtime, and in xgrammar's when it is installed —
must equal the original's word for word, and both must agree on termination. Prints a
table (steps, mismatches, mask time per engine, forward time, tokens/s, speedup). A difference
of xgrammar's (which has bugs of its own, e.g. a self-recursive root rule in 0.2.8) is
reported and counted but does not stop the check of gramopt's; --no-xgrammar leaves it out.
With --llama-cpp, llama.cpp is a third oracle: its masks are its own reading of the
vocabulary (e.g. a lone byte 0xF5-0xFF starts a code point; Qwen's "</s>" ends generation),
so the optimized grammar's llama.cpp masks are compared with the original grammar's
llama.cpp masks, and any difference fails the check.

Exit 0 when no difference was found, 3 on a difference, 2 on bad input.
"""

from __future__ import annotations

import glob
import os
import sys
import time

from ..stage import stage
from . import guard
from .exits import EXIT_OK, EXIT_UNSOUND

HELP = "check an optimized grammar against its original (language, or lockstep decoding with --decode)"


def add_arguments(p) -> None:
    p.add_argument("original", help="the original grammar")
    p.add_argument("optimized", help="the optimized grammar")
    p.add_argument("--dialect", help="input dialect of both files (default: from the extensions)")
    p.add_argument("--start", help="start rule (default: the dialect's)")
    p.add_argument("--decode", action="store_true",
                   help="lockstep decoding check as well as the language check")
    p.add_argument("--steps", type=int, default=128, help="tokens per row and seed (default 128)")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..K-1 (default 3)")
    p.add_argument("--batch", type=int, default=1, help="rows decoded together (default 1)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                   help="where the model runs and masks are applied (default: cuda when available)")
    p.add_argument("--vocab", default="qwen",
                   help="'qwen' (default), 'bytes' (256 one-byte tokens + EOS), or a tiktoken / tokenizer.json file")
    p.add_argument("--model", help="a local Hugging Face model folder (default: gramopt's tiny seeded transformer)")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default 1.0)")
    p.add_argument("--top-k", type=int, default=50, help="sample among the k best allowed tokens (0: all; default 50)")
    p.add_argument("--greedy", action="store_true", help="argmax decoding (one trajectory per prompt)")
    p.add_argument("--min-tokens", type=int, default=32,
                   help="block the stop token before this many tokens when anything else is allowed (default 32)")
    p.add_argument("--samples", nargs="*",
                   help="texts whose token frequencies bias the tiny model, each also spelled token by "
                        "token as a trajectory (default: ORIGINAL's STEM.sample*.txt beside it)")
    p.add_argument("--sentences", type=int, default=8,
                   help="sentences derived at random from ORIGINAL, spelled token by token as trajectories "
                        "of their own (beside the samples', which are spelled too; default 8)")
    p.add_argument("--no-xgrammar", action="store_true", help="do not compare with xgrammar's masks")
    p.add_argument("--llama-cpp", action="store_true",
                   help="also compare in llama.cpp: the optimized grammar's llama.cpp masks with the "
                        "original's at every step (~20-50 ms a mask on a 151k vocabulary)")
    p.add_argument("--no-measure", action="store_true", help="skip the serving runs (tokens/s, overlap)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads on --device cpu (default 1: the other core computes masks)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    p.add_argument("--max-work", type=int, metavar="N",
                   help="work limit of the language check, in Earley steps (default: Bounds().max_work); "
                        "when spent the check says so and what it covered")
    guard.add_arguments(p)


def _oracle_names(args) -> tuple[str, ...]:
    names = () if args.no_xgrammar else ("xgrammar",)
    if args.llama_cpp:
        import importlib.util
        if importlib.util.find_spec("llama_cpp") is None:
            from ..grammar import GrammarError
            raise GrammarError("--llama-cpp needs llama-cpp-python (pip install gramopt[llamacpp])")
        names += ("llama.cpp",)
    return names


def run(args) -> int:
    from ..formats import read
    from ..grammar import GrammarError
    original = read(args.original, args.dialect, args.start)
    optimized = read(args.optimized, args.dialect, args.start)
    if not args.decode:
        return _language_check(args, original, optimized)
    for name in ("steps", "seeds", "batch"):
        if getattr(args, name) < 1:
            raise GrammarError(f"--{name} must be at least 1")
    if args.sentences < 0:
        raise GrammarError("--sentences must not be negative")
    if _language_check(args, original, optimized, sys.stderr if args.json else sys.stdout) != EXIT_OK:
        print("result: the languages differ (language check); decoding not run")
        return EXIT_UNSOUND
    try:
        import torch
    except ImportError:
        raise GrammarError("--decode needs torch (pip install gramopt[torch])") from None
    from ..decoding.lockstep import decode_check
    from ..decoding.loop import Sampling, resolve_device
    from ..engines import oracle_engines
    from ..runtime import RuntimeGrammarError
    try:
        device = resolve_device(args.device)
    except RuntimeError as e:
        raise GrammarError(str(e)) from None
    if device.type == "cpu" and args.threads > 0:
        torch.set_num_threads(args.threads)
    vocab = _vocab(args.vocab)
    try:
        sampling = Sampling(args.temperature, args.top_k, args.greedy)
    except ValueError as e:
        raise GrammarError(str(e)) from None
    samples = _sample_texts(args)
    model, model_name = _model(args, vocab, device, samples)
    from ..verify.derivations import derived_texts
    sentences = samples + derived_texts(original, args.sentences)
    settings = dict(seeds=args.seeds, steps=args.steps, batch=args.batch, vocab=f"{vocab.name} ({len(vocab)})",
                    device=str(device), model=model_name,
                    sampling="greedy" if args.greedy else f"T={args.temperature} top-k={args.top_k}")
    progress = None if args.quiet else _Progress(args.seeds, args.steps)
    try:
        report = decode_check(original, optimized, vocab, model, steps=args.steps, seeds=args.seeds,
                              batch=args.batch, sampling=sampling, engines=oracle_engines(_oracle_names(args)),
                              min_tokens=args.min_tokens, measure=not args.no_measure,
                              progress=progress, settings=settings, sentences=sentences)
    except RuntimeGrammarError as e:
        raise GrammarError(str(e).splitlines()[0], path=args.original) from None
    finally:
        if progress is not None:
            progress.done()
    if args.json:
        import json
        print(json.dumps(report.summary(), indent=2))
        for m in report.mismatches:
            print(m.format(vocab), file=sys.stderr)
    else:
        print(f"{args.original} vs {args.optimized}")
        print(report.format(vocab))
    tripped = optimized_engine_errors(report)
    for engine in tripped:
        print(f"{args.optimized}: error: the optimized grammar trips an error of {engine} that the "
              f"original does not: not safe to serve with {engine}", file=sys.stderr)
    return EXIT_OK if report.ok and not tripped else EXIT_UNSOUND


def optimized_engine_errors(report) -> list[str]:
    """Engines whose own error (by the reference recognizer) the optimized grammar trips
    while the original grammar does not, in order."""
    on = {"optimized": set(), "original": set()}
    for m in report.mismatches:
        if m.engine_error and ":" in m.engine:
            name, which = m.engine.split(":", 1)
            on.setdefault(which, set()).add(name)
    return sorted(on["optimized"] - on["original"])


def _language_check(args, original, optimized, out=None) -> int:
    out = out or sys.stdout
    from ..verify import Bounds, check_equivalence
    if args.max_work is not None and args.max_work < 0:
        from ..grammar import GrammarError
        raise GrammarError(f"--max-work must not be negative (got {args.max_work})")
    try:
        with stage("verification"):
            res = check_equivalence(original, optimized,
                                    Bounds() if args.max_work is None else Bounds(max_work=args.max_work))
    except ValueError as e:  # e.g. a Lark grammar against a byte grammar
        from ..grammar import GrammarError
        raise GrammarError(str(e)) from None
    print(f"{args.original} vs {args.optimized}: {res}", file=out)
    for method, st in res.stats.items():
        if isinstance(st, dict):
            shown = ", ".join(f"{k} {v}" for k, v in st.items())
            print(f"  {method}: {shown}", file=out)
    return EXIT_OK if res.ok else EXIT_UNSOUND


def _vocab(spec: str):
    from ..grammar import GrammarError
    from ..runtime import Vocab
    if spec == "qwen":
        try:
            return Vocab.qwen()
        except FileNotFoundError as e:
            raise GrammarError(str(e)) from None
    if spec == "bytes":
        return Vocab.from_bytes([bytes([b]) for b in range(256)], eos=256)
    if not os.path.exists(spec):
        raise GrammarError(f"no vocabulary file '{spec}'")
    try:
        return Vocab.from_file(spec)
    except (ValueError, KeyError, OSError) as e:
        raise GrammarError(f"cannot read vocabulary '{spec}': {e}") from None


def _sample_texts(args) -> list[str]:
    """The sample texts: ``--samples``, else ORIGINAL's STEM.sample*.txt beside it."""
    from ..grammar import GrammarError
    samples = args.samples
    if samples is None:
        stem = os.path.splitext(args.original)[0]
        samples = sorted(glob.glob(glob.escape(stem) + ".sample*.txt"))
    texts = []
    for path in samples:
        try:
            with open(path, encoding="utf-8") as f:
                texts.append(f.read())
        except (OSError, UnicodeDecodeError) as e:
            raise GrammarError(f"cannot read sample text: {e}", path=path) from None
    return texts


def _model(args, vocab, device, texts):
    from ..grammar import GrammarError
    if args.model:
        from ..decoding.model import load_hf_model
        try:
            m = load_hf_model(args.model, str(device))
        except Exception as e:  # noqa: BLE001 - transformers raises many kinds
            raise GrammarError(f"cannot load model '{args.model}': {str(e).splitlines()[0]}") from None
        if m.vocab_size < len(vocab):
            raise GrammarError(f"the model has {m.vocab_size} logits, the vocabulary {len(vocab)} tokens")
        return m, os.path.basename(os.path.normpath(args.model))
    from ..decoding.model import TinyCausalLM, prior_from_texts
    prior = prior_from_texts(vocab, texts) if texts else None
    name = f"tiny seeded transformer{f' + prior of {len(texts)} sample(s)' if texts else ''}"
    return TinyCausalLM(len(vocab), seed=0, device=device, token_prior=prior), name


class _Progress:
    """One self-overwriting line on stderr (only when it is a terminal, at most 5 per s)."""

    def __init__(self, seeds: int, steps: int):
        self.seeds, self.steps = seeds, steps
        self.tty = sys.stderr.isatty()
        self.last = 0.0
        self.t0 = time.perf_counter()

    def __call__(self, seed: int, step: int) -> None:
        now = time.perf_counter()
        if not self.tty or now - self.last < 0.2:
            return
        self.last = now
        done = seed * self.steps + step + 1
        total = self.seeds * self.steps
        bar = "#" * (20 * done // total)
        sys.stderr.write(f"\rverify --decode [{bar:<20}] seed {seed + 1}/{self.seeds} step {step + 1}/{self.steps} "
                         f"{now - self.t0:5.1f} s")
        sys.stderr.flush()

    def done(self) -> None:
        if self.tty and self.last:
            sys.stderr.write("\r" + " " * 78 + "\r")
            sys.stderr.flush()
