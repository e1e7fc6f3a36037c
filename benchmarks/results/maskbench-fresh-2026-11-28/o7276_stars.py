import json, re, time, sys
import numpy as np
from gramopt.formats import read, parse
from gramopt.judge import masks as M
src = "/tmp/s22/mbout/work/Github_medium---o7276.xgrammar.ebnf"
out = "/tmp/s22/mbout/work/out/portable@xgrammar/Github_medium---o7276.xgrammar.ebnf"
d = json.load(open('/tmp/s22/mb/Github_medium---o7276.json'))
texts = [json.dumps(t['data']).encode() for t in d['tests'][:2]]
otext = open(out).read()
# variant: stars of a rule reference written right-recursive again
def rr(m):
    name, ref = m.group(1), m.group(2)
    return f'{name} ::= "" | {ref} {name}'
var = re.sub(r'^(\S+) ::= (\S+)\*$', rr, otext, flags=re.M)
print("rewritten:", sum(1 for a, b in zip(otext.splitlines(), var.splitlines()) if a != b))
M.warm(["xgrammar"]); ad = M._adapter("xgrammar"); env = M._env()
forms = {"input": read(src), "output": read(out), "output, rule stars right-recursive": parse(var, "ebnf")}
hs = {k: ad.compile(g) for k, g in forms.items()}
toks = [M.encode(t) for t in texts]
res = {}
for k, h in hs.items():
    best = None
    for rep in range(3):
        ts = []
        for tk in toks:
            m = ad.matcher(h); row = np.zeros(env.vocab.n_words, np.int32)
            for t in tk:
                a = time.perf_counter(); m.fill(row); ts.append(time.perf_counter() - a)
                if not m.accept(t): break
        ts = np.array(ts); best = ts if best is None else np.minimum(best[:len(ts)], ts[:len(best)])
    res[k] = best
    print(f"{k:40s} p50 {np.percentile(best,50)*1e6:8.1f} us  p95 {np.percentile(best,95)*1e6:8.1f} us  max {best.max()*1e6:8.1f}", flush=True)
