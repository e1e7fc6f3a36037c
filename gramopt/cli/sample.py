"""Sample strings of GRAMMAR from a model. Masking alone samples the locally projected distribution (too long, deep);
--faithful weights each allowed token by the chance a valid ending follows: samples follow the model given the grammar.

  --faithful exact     exactly (dynamic programming over every viable token prefix within --max-tokens; small languages,
                       exit 2 beyond --max-nodes)
  --faithful onestep   approximately: one-token lookahead with the current logits, no extra forward pass (cheap; can
                       mislead where the next token's distribution differs a lot from the current one)
  --faithful mc        approximately: --mc-k importance-weighted rollouts of --mc-horizon tokens per candidate

--precompute N expands up to N parse states for onestep before sampling (a work budget: same N, same table), so
decoding meets warm states only (bounded Dyck D(3,12): all 6,628 states in about a second; Φ̂ then costs 2-4% of a
masked step). --backend valiant samples on the matrix recognizer (grammars that stay ambiguous; any rollback depth).

The model is gramopt's tiny seeded transformer (token frequencies biased by --samples texts, default GRAMMAR's
STEM.sample*.txt), or a local Hugging Face model with --model. Prints one sample per line (JSON strings with --json)
and a summary on stderr. Exit 0, or 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from .exits import EXIT_OK

FORMATTER = argparse.RawDescriptionHelpFormatter  # the description is laid out by hand
HELP = ("sample a grammar's strings from a model; --faithful makes them follow the model conditioned on the "
        "grammar instead of masking's locally projected distribution")


def add_arguments(p) -> None:
    p.add_argument("grammar")
    p.add_argument("--dialect", help="input dialect (default: from the extension)")
    p.add_argument("--start", help="start rule (default: the dialect's)")
    p.add_argument("--faithful", default="none", choices=("none", "onestep", "mc", "exact"),
                   help="how allowed tokens are weighted: none = masking only (default); see above")
    p.add_argument("--precompute", type=int, default=0, metavar="N",
                   help="onestep: expand up to N parse states before sampling (default 0: as they are met)")
    p.add_argument("--backend", default="earley", choices=("earley", "valiant"),
                   help="the matcher: Earley (default) or the matrix recognizer (valiant)")
    p.add_argument("-n", "--num", type=int, default=5, help="strings to sample (default 5)")
    p.add_argument("--max-tokens", type=int, default=32, help="token budget per string (default 32)")
    p.add_argument("--mc-k", type=int, default=8, help="rollouts per candidate token for mc (default 8)")
    p.add_argument("--mc-horizon", type=int, help="rollout length for mc (default: the token budget)")
    p.add_argument("--max-nodes", type=int, default=200_000,
                   help="prefixes exact may enumerate before giving up (default 200000)")
    p.add_argument("--vocab", default="bytes",
                   help="'bytes' (256 one-byte tokens + EOS, default), 'qwen', or a tiktoken / tokenizer.json file")
    p.add_argument("--model", help="a local Hugging Face model folder (default: gramopt's tiny seeded transformer)")
    p.add_argument("--samples", nargs="*",
                   help="texts whose token frequencies bias the tiny model (default: GRAMMAR's STEM.sample*.txt)")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default 1.0)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print each sample as a JSON string")


def run(args) -> int:
    from ..formats import read
    from ..grammar import GrammarError
    for name in ("num", "max_tokens", "mc_k", "max_nodes"):
        if getattr(args, name) < 1:
            raise GrammarError(f"--{name.replace('_', '-')} must be at least 1")
    if args.precompute < 0:
        raise GrammarError("--precompute must be at least 0")
    if args.precompute and args.faithful != "onestep":
        raise GrammarError("--precompute applies to --faithful onestep only")
    if args.mc_horizon is not None and args.mc_horizon < 0:
        raise GrammarError("--mc-horizon must be at least 0")
    if not args.temperature > 0:
        raise GrammarError("--temperature must be > 0")
    try:
        import torch  # noqa: F401
    except ImportError:
        raise GrammarError("sample needs torch (pip install gramopt[torch])") from None
    from ..decoding.loop import resolve_device
    from ..runtime import Matcher, RuntimeGrammarError
    from ..sampling import ExactTooLarge, decode, make_estimator
    from .verify import _model, _sample_texts, _vocab

    grammar = read(args.grammar, args.dialect, args.start)
    vocab = _vocab(args.vocab)
    if not vocab.eos_ids:
        raise GrammarError(f"the vocabulary '{args.vocab}' has no stop token")
    args.original = args.grammar  # _model's default sample texts: GRAMMAR's STEM.sample*.txt
    model, model_name = _model(args, vocab, resolve_device("cpu"), _sample_texts(args))
    try:
        Matcher(grammar, vocab, backend=args.backend)
    except RuntimeGrammarError as e:
        raise GrammarError(str(e).splitlines()[0], path=args.grammar) from None

    def new_matcher():
        return Matcher(grammar, vocab, backend=args.backend)

    bos = vocab.eos_ids[0]  # no BOS token in these vocabularies: the stop token starts the text, as in GPT-2
    t0 = time.perf_counter()
    try:
        estimator = make_estimator(args.faithful, model=model, new_matcher=new_matcher, bos=bos,
                                   eos_ids=vocab.eos_ids, max_tokens=args.max_tokens, temperature=args.temperature,
                                   seed=args.seed, k=args.mc_k, horizon=args.mc_horizon, max_nodes=args.max_nodes)
    except ExactTooLarge as e:
        raise GrammarError(f"--faithful exact: {e}", path=args.grammar) from None
    states = estimator.precompute(new_matcher(), max_states=args.precompute) if args.precompute else 0
    t_prepare = time.perf_counter() - t0
    out = decode(model, new_matcher, n=args.num, faithful=estimator, bos=bos, eos_ids=vocab.eos_ids,
                 max_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed, batch=min(64, args.num))
    for text, how in zip(out.texts(vocab), out.finished):
        s = text.decode("utf-8", errors="replace")
        print(json.dumps(s) if args.json else s + ("" if how == "eos" else f"   [{how}: not in the language]"))
    per = out.per_token_us()
    done = sum(f == "eos" for f in out.finished)
    print(f"gramopt sample: {done}/{args.num} complete, --faithful {args.faithful}, {model_name}, "
          f"{per['seconds']:.0f} µs/token (Φ̂ {per['phi_s']:.0f}), prepared in {t_prepare:.2f} s"
          + (f" ({states} states precomputed)" if args.precompute else "") + f", {args.backend} matcher", file=sys.stderr)
    return EXIT_OK
