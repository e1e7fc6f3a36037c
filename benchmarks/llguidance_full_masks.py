"""llguidance's full Qwen masks against its byte-vocabulary check: what each finds, at several full-mask shares.

    python benchmarks/llguidance_full_masks.py 1,0.25,0.1 16     # shares of the judge's budget; every 16th schema

For every K-th JSONSchemaBench schema, the judge's pair of the default optimize (input, candidate),
a pair whose strings are right-recursive (every ``X*`` of a class as ``rr ::= X rr | ""``: the same
language) and ``llamacpp_bytes``' two byte-level mutants, each checked by the judge's llguidance
``EngineCheck`` (byte trace, then full masks) with ``STEP_SHARE["llguidance"]`` at each share. A
difference is "bytes" when the byte vocabulary found it, "full" when only the Qwen masks did: the
right-recursive strings hit llguidance's ``Too many items (limit 50000; mask)`` inside long strings
with the Qwen vocabulary only (its error state then allows the end token alone).
"""
import dataclasses
import os
import sys
import time
sys.setrecursionlimit(100000)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pathlib import Path
from llamacpp_bytes import captured_pairs, mutants
from optimize_cost import DATA, items
import gramopt.judge.masks as masks
from gramopt.judge.masks import EngineCheck, NotChecked, warm
from gramopt.grammar.expr import CharClass, Repeat, Ref, Alt, Seq, Epsilon, transform
from gramopt.grammar import Rule

def right_recursive(g):
    """Every X* (X a class) as a fresh rule rr ::= X rr | "" (same language)."""
    new = []
    made = {}
    def fn(e):
        if isinstance(e, Repeat) and e.min == 0 and e.max is None and isinstance(e.item, CharClass):
            if e.item not in made:
                name = f"rr-{len(made)}"
                made[e.item] = name
                new.append(Rule(name, Alt((Seq((e.item, Ref(name))), Epsilon()))))
            return Ref(made[e.item])
        return e
    rules = [dataclasses.replace(r, body=transform(r.body, fn)) for r in g.rules]
    if not made:
        return None
    return g.replace_rules(rules + new)

if __name__ == "__main__":
    shares = [float(x) for x in sys.argv[1].split(',')]
    every = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    warm(("llguidance",))
    for path in items(Path(DATA), every, None, 0):
        caps = captured_pairs(path)[:1]
        if not caps:
            continue
        o, c, s = caps[0]
        pairs = [("optimized", o, c)]
        rr = right_recursive(o)
        if rr is not None:
            pairs.append(("right-rec", o, rr))
        pairs += [(k, a, b) for k, a, b in mutants(o)]
        for kind, a, b in pairs:
            out = []
            for share in shares:
                masks.STEP_SHARE["llguidance"] = share
                t = time.process_time()
                try:
                    ch = EngineCheck("llguidance", a, 1200, samples=s)
                    d = ch.difference(b)
                except NotChecked as e:
                    out.append("NC"); continue
                where = '-' if d is None else ('bytes' if 'byte vocabulary' in (d.kind or '') else ('refused' if d.refused else 'full'))
                out.append(f"{share:5.2f}:{'DIFF' if d else 'same'}/{where:5} {time.process_time()-t:5.2f}s fills={ch._masks.fills}")
            print(f"{path.name[:36]:36} {kind:17} " + " | ".join(out), flush=True)
