"""Grammar-faithful sampling, measured: TV to μ*, structure, per-token cost, speculative decoding.

    python benchmarks/faithful_bench.py [--kinds 3] [--max-len 12] [--n 8000] [--mc-n 600]
                                        [--spec-n 2000] [--seed 0] [--quick] [--overhead-only | --json-only]
                                        [--json OUT.json]

1. Trains a tiny transformer (2 layers, d=32; seconds on CPU, nothing downloaded) on *sloppy*
   bracket strings (they stop or close wrongly now and then), so its preferences are real and
   not grammatical; a smaller draft model the same way.
2. Bounded Dyck D(kinds, max-len): μ* exactly (every viable prefix, ValueTree); per method N
   strings sampled → TV to μ* with a bootstrap interval, mean length and depth; for the
   deterministic estimators also the TV of the sampler's exact law (no sampling noise); the
   noise floor is the TV of N exact draws from μ*.
3. Per-token cost, decoding one string at a time (batch 1), the estimators interleaved in rounds:
   with the trained model and with larger random-weight models (4×256, 6×512), since
   OneStep's cost does not depend on the model and its overhead is relative to the forward pass.
   OneStep is measured with its per-parse-state cache precomputed (``OneStep.precompute``:
   every state of D(3,12)), with the cache filled while decoding (one instance across the
   rounds: a state's first meeting pays the walk), and without a cache (every candidate walked).
4. A finite JSON language (36 records, several tokenizations per string): TV per method, with
   MC(k=1, h=1) — OneStep's lookahead with the true next distribution (one forward pass per
   candidate; deterministic, so its exact law is computed too) — to tell OneStep's proxy
   error (p(·|x) standing in for p(·|x·y)) from a fault in the lookahead itself; and, at a
   few prefixes, OneStep's Φ̂ next to Φ1, exact Φ and the one-step drift that bounds |Φ̂ − Φ1|.
5. Speculative decoding (draft + target, Leviathan acceptance against the reweighted target):
   accepted tokens per target call, acceptance rate and TV, Uniform vs Exact.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import torch

from gramopt.runtime import Matcher
from gramopt.decoding.model import TinyCausalLM
from gramopt.sampling import Exact, MonteCarlo, OneStep, Uniform, ValueTree, decode, speculative_decode
from gramopt.sampling.law import sampler_law
from gramopt.sampling.measure import bootstrap_tv, expectation, mean_of, noise_floor, sample_target, tv
from gramopt.sampling.train import fit
from gramopt.sampling.workloads import (bos_id, bounded_dyck, bracket_vocab, dyck_depth, json_records, json_vocab,
                                        sloppy_brackets, sloppy_json)


def train(vocab, corpus, *, d, layers, steps, seed):
    m = TinyCausalLM(len(vocab), d_model=d, n_layers=layers, n_heads=4, seed=seed, max_len=128)
    t = time.perf_counter()
    losses = fit(m, corpus, bos=bos_id(vocab), eos=vocab.eos_ids[0], steps=steps, batch=64, seed=seed)
    return m, time.perf_counter() - t, float(np.mean(losses[-20:]))


def fmt_tv(t):
    return f"{t[0]:.3f} [{t[1]:.3f}, {t[2]:.3f}]"


def table(head, rows):
    w = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    line = lambda r: "| " + " | ".join(str(c).ljust(w[i]) for i, c in enumerate(r)) + " |"  # noqa: E731
    print(line(head))
    print("|" + "|".join("-" * (x + 2) for x in w) + "|")
    for r in rows:
        print(line(r))
    print()


def tv_section(title, setting, methods, n_of, seed, depth=True):
    """Sample every method, print the TV table; returns rows as dicts."""
    vocab, tree, target = setting["vocab"], setting["tree"], setting["target"]
    floor = noise_floor(target, n_of("uniform"), seed=seed)
    out = []
    rows = [["μ* (exact)", "—", "0", "0", "—", f"{expectation(target, len):.2f}",
             f"{expectation(target, dyck_depth):.2f}" if depth else "—", "—"]]
    direct = sample_target(target, n_of("uniform"), seed=seed)
    rows.append([f"μ* direct draws (noise floor, mean TV {floor[0]:.3f})", len(direct),
                 fmt_tv(bootstrap_tv(direct, target, seed=seed)), "0", "—", f"{mean_of(direct, len):.2f}",
                 f"{mean_of(direct, dyck_depth):.2f}" if depth else "—", "—"])
    base = None
    for name, est, law_ok in methods:
        n = n_of(name)
        t0 = time.perf_counter()
        s = decode(setting["model"], setting["new_matcher"], n=n, faithful=est, bos=setting["bos"],
                   eos_ids=vocab.eos_ids, max_tokens=setting["max_tokens"], seed=seed + 1)
        wall = time.perf_counter() - t0
        texts = s.texts(vocab)
        bt = bootstrap_tv(texts, target, seed=seed)
        law_tv = None
        if law_ok:
            law, pruned = sampler_law(tree, est, setting["new_matcher"](), vocab, eps=1e-9)
            law_tv = (tv(law, target), pruned)
        if base is None:
            base = (bt[0], law_tv[0] if law_tv else None)
        red = f"{100 * (1 - bt[0] / base[0]):.0f}%"
        if law_tv and base[1]:
            red += f" (law {100 * (1 - law_tv[0] / base[1]):.1f}%)"
        per = s.per_token_us()
        rows.append([name, n, fmt_tv(bt), f"{law_tv[0]:.4f}" if law_tv else "—", red,
                     f"{mean_of(texts, len):.2f}", f"{mean_of(texts, dyck_depth):.2f}" if depth else "—",
                     f"{per['phi_s']:.0f}"])
        out.append(dict(method=name, n=n, tv=bt, law_tv=law_tv, mean_len=mean_of(texts, len),
                        mean_depth=mean_of(texts, dyck_depth) if depth else None, per_token_us=per,
                        wall_s=wall, unfinished=sum(f != "eos" for f in s.finished)))
        print(f"  {name}: {wall:.1f} s", file=sys.stderr)
    print(f"### {title}\n")
    table(["method", "N", "TV(·, μ*) [95% CI]", "TV of exact law", "TV reduction vs Uniform", "mean length",
           "mean depth", "Φ̂ µs/token (batched)"], rows)
    return out


FILLING = "onestep, cache filled while decoding"


def _round_figure(rounds: list[tuple[float, float]], filling: bool) -> tuple[float, float]:
    """The lowest round (as timeit does: a round that a load spike hit is dropped), except for
    the estimator whose cache fills across the rounds, where rounds differ by design: its mean."""
    if filling:
        return tuple(sum(col) / len(rounds) for col in zip(*rounds))
    return min(a for a, _ in rounds), min(b for _, b in rounds)


def overhead_section(setting, bigs, rounds, per_round_n, seed):
    """Per-token time of decoding with each estimator, batch 1, interleaved rounds; each
    figure is the lowest round's mean (``_round_figure``: wall-clock means on a shared machine
    take every preemption; a no-op estimator read 6–31 µs per token across rounds of one run)."""
    vocab = setting["vocab"]
    res = {}
    models = [("trained 2×32", setting["model"], setting["tree"]), *((lb, m, None) for lb, m in bigs)]
    pre = {}
    for label, model, tree in models:
        warm = OneStep()
        t0 = time.perf_counter()
        n_states = warm.precompute(setting["new_matcher"]())
        pre[label] = (n_states, time.perf_counter() - t0)
        ests = [("uniform", Uniform()), ("onestep, states precomputed", warm), (FILLING, OneStep()),
                ("onestep, no cache", OneStep(cache_ids=0))]
        if tree is not None:
            ests.append(("exact (lookup)", Exact(tree)))
        per_round = {n: [] for n, _ in ests}  # (µs per token, Φ̂ µs per token) of each round
        for r in range(rounds):
            for name, est in ests:
                s = decode(model, setting["new_matcher"], n=per_round_n, faithful=est, bos=setting["bos"],
                           eos_ids=vocab.eos_ids, max_tokens=setting["max_tokens"], seed=seed + r, batch=1)
                per_round[name].append((1e6 * s.seconds / s.n_steps, 1e6 * s.phi_s / s.n_steps))
        res[label] = {n: _round_figure(v, n == FILLING) for n, v in per_round.items()}
    rows = []
    for label, d in res.items():
        u = d["uniform"][0]
        for name, (step, phi) in d.items():
            rows.append([label, name, f"{step:.0f}", f"{phi:.1f}", f"{100 * phi / u:.1f}%",
                         f"{100 * (step - u) / u:+.1f}%"])
    print("### Per-token cost, decoding one string at a time (same grammar, estimators interleaved)\n")
    table(["model", "estimator", "µs per token (forward+mask+Φ̂+draw)", "Φ̂ µs per token",
           "Φ̂ / Uniform's step", "step vs Uniform's (noisy)"], rows)
    n_states, secs = next(iter(pre.values()))
    print(f"OneStep.precompute: {n_states} parse states expanded in {secs:.2f} s "
          f"(per model: {', '.join(f'{s:.2f} s' for _, s in pre.values())}); {rounds} rounds of {per_round_n} strings "
          "per estimator, each figure the lowest round's per-token mean; the cache filled while decoding is one "
          "OneStep across the rounds, its figure their mean.\n")
    return res


def spec_section(setting, draft, n, gamma, seed):
    vocab, target = setting["vocab"], setting["target"]
    rows, out = [], []
    for name, tphi, dphi in (("Uniform target, Uniform draft", Uniform(), Uniform()),
                             ("Exact target, Uniform draft", Exact(setting["tree"]), Uniform()),
                             ("Exact target, OneStep draft", Exact(setting["tree"]), OneStep())):
        t0 = time.perf_counter()
        s, st = speculative_decode(setting["model"], draft, setting["new_matcher"], n=n, target_phi=tphi,
                                   draft_phi=dphi, gamma=gamma, bos=setting["bos"], eos_ids=vocab.eos_ids,
                                   max_tokens=setting["max_tokens"], seed=seed)
        texts = s.texts(vocab)
        bt = bootstrap_tv(texts, target, seed=seed)
        rows.append([name, n, fmt_tv(bt), st.rounds, st.tokens, f"{st.tokens_per_call:.2f}",
                     f"{st.drafted}", f"{st.accepted}", f"{st.acceptance:.3f}", f"{mean_of(texts, len):.2f}"])
        out.append(dict(setting=name, n=n, tv=bt, rounds=st.rounds, tokens=st.tokens, drafted=st.drafted,
                        accepted=st.accepted, wall_s=time.perf_counter() - t0))
        print(f"  spec {name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    print(f"### Speculative decoding (γ = {gamma}), verifier against p·Φ̂ of the target\n")
    table(["setting", "N", "TV(·, μ*) [95% CI]", "target calls", "tokens", "tokens per call", "drafted",
           "accepted", "acceptance", "mean length"], rows)
    return out


def proxy_section(setting, texts):
    """OneStep's Φ̂ next to Φ1 (the same lookahead with the model's next distribution, from the
    tree) and exact Φ, per candidate, at a few prefixes: where they part, and why."""
    from gramopt.sampling import Step
    from gramopt.sampling.workloads import greedy_tokenize
    vocab, tree = setting["vocab"], setting["tree"]
    rows = []
    for text in texts:
        prefix = tuple(greedy_tokenize(vocab, text.encode())) if text else ()
        node = tree.node(prefix)
        a, b = tree.child_start[node], tree.child_start[node + 1]
        kids = dict(zip(tree.token[tree.child_node[a:b]].tolist(), tree.child_node[a:b].tolist()))
        m = setting["new_matcher"]()
        for t in prefix:
            m.accept_token(t)
        cand = np.array(sorted(kids), np.int64)
        step = Step(m, prefix, tree.probs[node], cand, vocab.eos_ids)
        one, ex = OneStep(cache_ids=0).phi(step), Exact(tree).phi(step)
        for i, y in enumerate(cand.tolist()):
            c = kids[y]
            ca, cb = tree.child_start[c], tree.child_start[c + 1]
            phi1 = (tree.eos_p[c] if tree.accepting[c] else 0.0) + tree.child_p[ca:cb].sum()
            drift = 0.5 * np.abs(tree.probs[node] - tree.probs[c]).sum()
            rows.append([repr(text) if i == 0 else "", repr(vocab.token_bytes[y].decode()), f"{step.probs[y]:.3f}",
                         f"{one[i]:.4f}", f"{phi1:.4f}", f"{ex[i]:.4f}", f"{drift:.3f}"])
    print("### OneStep's proxy at a few prefixes (Φ1: the same lookahead with p(·|x·y); |Φ̂ − Φ1| ≤ drift)\n")
    table(["prefix x", "candidate y", "p(y|x)", "OneStep Φ̂(x·y)", "Φ1(x·y)", "exact Φ(x·y)",
           "drift TV(p(·|x), p(·|x·y))"], rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", type=int, default=3)
    ap.add_argument("--max-len", type=int, default=12)
    ap.add_argument("--n", type=int, default=8000, help="samples per method (Uniform, OneStep, Exact)")
    ap.add_argument("--mc-n", type=int, default=600, help="samples per Monte-Carlo budget")
    ap.add_argument("--spec-n", type=int, default=2000)
    ap.add_argument("--train-steps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="D(3,8), small N (a smoke run)")
    ap.add_argument("--overhead-only", action="store_true", help="only the per-token cost table")
    ap.add_argument("--json-only", action="store_true", help="only the finite JSON language's sections")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    if args.quick:
        args.max_len, args.n, args.mc_n, args.spec_n, args.train_steps = 8, 1000, 200, 400, 150
    torch.set_num_threads(1)
    report = dict(settings=vars(args))

    if not args.json_only:
        dyck_sections(args, report)
    if not args.overhead_only:
        json_sections(args, report)
    return write_json(args.json, report)


def dyck_sections(args, report) -> None:
    """Bounded Dyck: models, μ*, TV table, per-token cost, speculative decoding."""
    K, L, seed = args.kinds, args.max_len, args.seed
    v = bracket_vocab(K)
    model, t_train, loss = train(v, sloppy_brackets(20000, K, L, seed=seed), d=32, layers=2,
                                 steps=args.train_steps, seed=seed)
    draft, t_draft, dloss = train(v, sloppy_brackets(20000, K, L, seed=seed + 1), d=16, layers=1,
                                  steps=args.train_steps // 3, seed=seed + 1)
    g = bounded_dyck(K, L)

    def new_matcher():
        return Matcher(g, v)

    t0 = time.perf_counter()
    tree = ValueTree(model, new_matcher(), bos=bos_id(v), eos_ids=v.eos_ids, max_tokens=L)
    t_tree = time.perf_counter() - t0
    target = tree.target(v)
    setting = dict(vocab=v, model=model, tree=tree, target=target, bos=bos_id(v), max_tokens=L,
                   new_matcher=new_matcher)
    print(f"## Bounded Dyck D({K},{L}): {len(target)} strings, {tree.n_nodes} viable prefixes\n")
    print(f"target model: 2 layers, d=32, {args.train_steps} steps on 20,000 sloppy bracket strings in "
          f"{t_train:.1f} s (loss {loss:.3f}); draft: 1 layer, d=16, {args.train_steps // 3} steps "
          f"({t_draft:.1f} s, loss {dloss:.3f}). Exact Φ table (ValueTree) built in {t_tree:.1f} s. "
          f"Z = Pr_p[L] = {tree.phi[0]:.4f}.\n")
    bos = bos_id(v)
    methods = [("Uniform (masking, μ_proj)", Uniform(), True), ("OneStep", OneStep(), True),
               ("MC(k=4, h=2)", MonteCarlo(model, new_matcher, k=4, horizon=2, bos=bos, seed=seed), False),
               (f"MC(k=16, h={L})", MonteCarlo(model, new_matcher, k=16, horizon=L, bos=bos, seed=seed), False),
               ("Exact", Exact(tree), True)]
    bigs = [(f"random {layers}×{d}", TinyCausalLM(len(v), d_model=d, n_layers=layers, n_heads=8, seed=seed,
                                                  max_len=128)) for layers, d in ((4, 256), (6, 512))]
    if not args.overhead_only:
        report["dyck"] = tv_section(f"D({K},{L}): TV to μ*, structure", setting, methods,
                                    lambda name: args.mc_n if name.startswith("MC") else args.n, seed)
    report["overhead"] = overhead_section(setting, bigs, rounds=5, per_round_n=max(20, args.n // 200), seed=seed)
    if not args.overhead_only:
        report["speculative"] = spec_section(setting, draft, args.spec_n, 4, seed)



def json_sections(args, report) -> None:
    """The finite JSON language: model, μ*, TV table, OneStep's proxy at a few prefixes."""
    seed = args.seed
    jv = json_vocab()
    jmodel, jt, jloss = train(jv, sloppy_json(20000, seed=seed), d=32, layers=2, steps=args.train_steps, seed=seed)
    jg = json_records()

    def json_matcher():
        return Matcher(jg, jv)

    t0 = time.perf_counter()
    jtree = ValueTree(jmodel, json_matcher(), bos=bos_id(jv), eos_ids=jv.eos_ids, max_tokens=48)
    jtarget = jtree.target(jv)
    print(f"## Finite JSON language: {len(jtarget)} strings, {int(jtree.accepting.sum())} tokenizations, "
          f"{jtree.n_nodes} viable prefixes (tree {time.perf_counter() - t0:.1f} s; model {jt:.1f} s, "
          f"loss {jloss:.3f}; Z = {jtree.phi[0]:.4f})\n")
    jset = dict(vocab=jv, model=jmodel, tree=jtree, target=jtarget, bos=bos_id(jv), max_tokens=48,
                new_matcher=json_matcher)
    report["json"] = tv_section("JSON records: TV to μ*", jset,
                                [("Uniform (masking, μ_proj)", Uniform(), True), ("OneStep", OneStep(), True),
                                 ("MC(k=1, h=1): one step with p(·|x·y)",
                                  MonteCarlo(jmodel, json_matcher, k=1, horizon=1, bos=bos_id(jv), max_tokens=48,
                                             seed=seed), True),
                                 ("Exact", Exact(jtree), True)],
                                lambda name: args.mc_n if name.startswith("MC") else args.n, seed, depth=False)
    proxy_section(jset, ['{"kind":"', '{"kind":"user","id":', '{"kind":"user","id":42'])


def write_json(path, report) -> int:
    if path:
        with open(path, "w") as f:
            json.dump(report, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
