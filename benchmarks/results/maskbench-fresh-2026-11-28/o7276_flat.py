import json, time
import numpy as np
import gramopt.costmodels.engine_shapes as ES
from gramopt.formats import read, write
from gramopt.judge import masks as M
src = "/tmp/s22/mbout/work/Github_medium---o7276.xgrammar.ebnf"
out = "/tmp/s22/mbout/work/out/portable@xgrammar/Github_medium---o7276.xgrammar.ebnf"
d = json.load(open('/tmp/s22/mb/Github_medium---o7276.json'))
texts = [json.dumps(t['data']).encode() for t in d['tests'][:2]]
ES.WIDE = 64
from gramopt.transforms.reshape import flat_stars as FS
g_out = read(out)
flat, changed = FS.flatten_repetition_bodies(g_out)
print("flattened rules:", changed)
from gramopt.verify import check_equivalence
print("language:", check_equivalence(g_out, flat).ok)
M.warm(["xgrammar"]); ad = M._adapter("xgrammar"); env = M._env()
forms = {"input": read(src), "output": g_out, "output, stars flat (WIDE 64)": flat}
toks = [M.encode(t) for t in texts]
for k, g in forms.items():
    h = ad.compile(g); best = None
    for rep in range(3):
        ts = []
        for tk in toks:
            m = ad.matcher(h); row = np.zeros(env.vocab.n_words, np.int32)
            for t in tk:
                a = time.perf_counter(); m.fill(row); ts.append(time.perf_counter() - a)
                if not m.accept(t): break
        ts = np.array(ts); best = ts if best is None else np.minimum(best[:len(ts)], ts[:len(best)])
    print(f"{k:34s} p50 {np.percentile(best,50)*1e6:8.1f} us  p95 {np.percentile(best,95)*1e6:8.1f} us  max {best.max()*1e6:8.1f}", flush=True)
