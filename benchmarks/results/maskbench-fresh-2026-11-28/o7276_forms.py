"""xgrammar's per-mask time on Github_medium---o7276 along its two valid instances (minimum of 3
runs), for the input, the default target's output, the output with its stars of a rule written
right-recursive again, and the output with those stars written flat (``flatten_repetition_bodies``
with ``WIDE`` = 64). Paths are the fresh run's work folder (session 22)."""
import json
import re
import time

import numpy as np

import gramopt.costmodels.engine_shapes as ES
from gramopt.formats import parse, read
from gramopt.transforms.reshape import flat_stars as FS
from gramopt.verify import check_equivalence

SRC = "/tmp/s22/mbout/work/Github_medium---o7276.xgrammar.ebnf"
OUT = "/tmp/s22/mbout/work/out/portable@xgrammar/Github_medium---o7276.xgrammar.ebnf"
SCHEMA = "/tmp/s22/mb/Github_medium---o7276.json"


def right_recursive(text: str) -> str:
    return re.sub(r'^(\S+) ::= (\S+)\*$', lambda m: f'{m.group(1)} ::= "" | {m.group(2)} {m.group(1)}', text, flags=re.M)


def p95_along(ad, env, grammar, toks) -> np.ndarray:
    h, best = ad.compile(grammar), None
    for _ in range(3):
        ts = []
        for tk in toks:
            m, row = ad.matcher(h), np.zeros(env.vocab.n_words, np.int32)
            for t in tk:
                a = time.perf_counter()
                m.fill(row)
                ts.append(time.perf_counter() - a)
                if not m.accept(t):
                    break
        ts = np.array(ts)
        best = ts if best is None else np.minimum(best[:len(ts)], ts[:len(best)])
    return best


def main() -> None:
    tests = json.load(open(SCHEMA))["tests"][:2]
    out = read(OUT)
    ES.WIDE = 64
    flat, _ = FS.flatten_repetition_bodies(out)
    forms = {"input": read(SRC), "output": out,
             "output, rule stars right-recursive": parse(right_recursive(open(OUT).read()), "ebnf"),
             "output, stars flat (WIDE 64)": flat}
    assert all(check_equivalence(out, g).ok for g in list(forms.values())[2:])
    from gramopt.engines import ENGINES
    from gramopt.engines.base import Env
    from gramopt.runtime.vocab import Vocab
    env = Env.create(Vocab.qwen())  # Qwen's whole vocabulary (the judge asks about a part of it)
    ad = ENGINES["xgrammar"](env)
    ad.prepare()
    toks = [env.tokenizer.encode(json.dumps(t["data"])) for t in tests]
    for name, g in forms.items():
        b = p95_along(ad, env, g, toks)
        print(f"{name:36s} p50 {np.percentile(b, 50) * 1e6:8.1f} us  p95 {np.percentile(b, 95) * 1e6:8.1f} us  "
              f"max {b.max() * 1e6:8.1f}")


if __name__ == "__main__":
    main()
