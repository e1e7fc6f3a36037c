"""llama.cpp's engine check over the byte vocabulary against its check over Qwen's: same verdicts, cost.

    python benchmarks/llamacpp_bytes.py --every 16                 # JSONSchemaBench sample
    python benchmarks/llamacpp_bytes.py --data corpus --limit 40   # the corpus's grammars

For each item, the pair the judge is given by the default optimize (input, the passes'
output: the judge is run with a budget of 0 to capture it), and two pairs whose llama.cpp
masks are known to differ, made from the input where it has a negated class:
  * ``positive→negated``: input = the input with its negated classes written as positive
    ranges (same language), candidate = the input: llama.cpp allows the lone bytes F5-FF (a
    4-byte lead past U+10FFFF) in the negated form only, a byte the language refuses;
  * ``narrowed``: candidate = the input with ``e`` also excluded from its first negated class
    (a smaller language: llama.cpp refuses ``e`` where a string's characters go).
Each pair is judged by llama.cpp's check as it was (``--old``: full Qwen masks, the engine's
``STEP_SHARE`` of the budget) and as it is (the byte trace, then ``BYTES_DECIDE_SHARE`` of
full masks), with the default budget (600): verdict (differs / same), CPU seconds, masks asked.
Prints one line per pair and a summary: agreements, and the pairs where the verdicts differ.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.setrecursionlimit(100000)
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from optimize_cost import DATA, items  # noqa: E402


def captured_pairs(path: Path) -> list[tuple]:
    """(input, candidate, samples) of the judge of the default optimize of ``path``."""
    import gramopt.judge
    import gramopt.passes  # noqa: F401 - the judge is imported there lazily
    from gramopt.cli.batch import batch_items
    from gramopt.optimizer import Job, Options, run_job
    got = []
    real = gramopt.judge.judge

    def capture(original, candidate, target, optimizer):
        got.append((original, candidate, optimizer.samples))
        return real(original, candidate, target, dataclasses.replace(optimizer, steps=0))
    gramopt.judge.judge = capture
    try:
        it = batch_items(str(path), "/tmp", target="portable")[0]
        run_job(Job(it.source, Options.of({"target": "portable"}), it.dst, it.text, it.kind, it.line))
    except Exception as e:  # noqa: BLE001 - an input gramopt refuses: no pair
        print(f"{path.name}: {type(e).__name__}: {str(e)[:100]}", file=sys.stderr)
    finally:
        gramopt.judge.judge = real
    return got


def with_classes(grammar, fn):
    """``grammar`` with every character class replaced by ``fn(class)``."""
    from gramopt.grammar.expr import CharClass, transform
    return grammar.replace_rules(dataclasses.replace(r, body=transform(
        r.body, lambda e: fn(e) if isinstance(e, CharClass) else e)) for r in grammar.rules)


def mutants(grammar) -> list[tuple[str, object, object]]:
    """(kind, input, candidate) pairs known to differ in llama.cpp (module docstring)."""
    from gramopt.grammar.expr import CharClass, complement_ranges, walk, normalize_ranges
    negated = [n for r in grammar.rules for n in walk(r.body) if isinstance(n, CharClass) and n.negated and n.ranges]
    if not negated:
        return []
    positive = with_classes(grammar, lambda c: CharClass(complement_ranges(c.ranges)) if c.negated and c.ranges else c)
    first = negated[0]
    narrowed = with_classes(grammar, lambda c: CharClass(normalize_ranges(c.ranges + ((0x65, 0x65),)), True)
                            if c == first else c)
    return [("positive→negated", positive, grammar), ("narrowed", grammar, narrowed)]


def judged(original, candidate, samples, old: bool) -> tuple[bool, float, int, int]:
    """(differs, CPU seconds, full masks asked, byte masks asked) of llama.cpp's check."""
    from gramopt.engines.llamacpp import LlamaCppMatcher, _ByteMasks
    from gramopt.judge.masks import EngineCheck
    fills = {"full": 0, "bytes": 0}
    real_full, real_bytes = LlamaCppMatcher.allowed_tokens, _ByteMasks.mask

    def full(self):
        if self.n > 257:
            fills["full"] += 1
        return real_full(self)
    LlamaCppMatcher.allowed_tokens = full
    t = time.process_time()
    try:
        c = EngineCheck("llama.cpp", original, 600, samples=samples)
        if old:
            c._bytes_why = "the old check"
        d = c.difference(candidate)
        nbytes = c._llama_bytes.fills * 2 if c._llama_bytes is not None else 0
    finally:
        LlamaCppMatcher.allowed_tokens, _ByteMasks.mask = real_full, real_bytes
    return d is not None, time.process_time() - t, fills["full"], nbytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--every", type=int, default=16)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--skip", type=int, default=0)
    ap.add_argument("--byte-share", type=float, help="masks.LLAMA_BYTE_SHARE for the new check")
    ap.add_argument("--full-share", type=float, help="masks.BYTES_DECIDE_SHARE for the new check")
    args = ap.parse_args()
    import gramopt.judge.masks as masks
    from gramopt.judge.masks import NotChecked, warm
    if args.byte_share is not None:
        masks.LLAMA_BYTE_SHARE = args.byte_share
    if args.full_share is not None:
        masks.BYTES_DECIDE_SHARE = args.full_share
    warm(("llama.cpp",))
    rows = []
    for path in items(Path(args.data), args.every, args.limit, args.skip):
        pairs = [("optimized", o, c, s) for o, c, s in captured_pairs(path)[:1]]
        if pairs:
            pairs += [(k, a, b, pairs[0][3]) for k, a, b in mutants(pairs[0][1])]
        for kind, a, b, samples in pairs:
            try:
                old = judged(a, b, samples, True)
                new = judged(a, b, samples, False)
            except NotChecked as e:
                print(f"{path.name[:44]:44} {kind:17} not checked: {e}", file=sys.stderr)
                continue
            rows.append((path.name, kind, old, new))
            print(f"{path.name[:44]:44} {kind:17} old {'DIFFERS' if old[0] else 'same':7} {old[1]:6.2f}s "
                  f"{old[2]:4} full | new {'DIFFERS' if new[0] else 'same':7} {new[1]:6.2f}s {new[2]:3} full "
                  f"{new[3]:6} bytes", flush=True)
    print(f"\n{len(rows)} pairs from {args.data} (every {args.every}); new check: {masks.LLAMA_BYTE_SHARE} byte "
          f"steps and {masks.BYTES_DECIDE_SHARE:g} full masks per budget step")
    print("| pairs | n | same verdict | old differs | new differs | old CPU s (sum) | new CPU s (sum) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for kind in sorted({r[1] for r in rows}):
        rs = [r for r in rows if r[1] == kind]
        print(f"| {kind} | {len(rs)} | {sum(r[2][0] == r[3][0] for r in rs)} | {sum(r[2][0] for r in rs)} | "
              f"{sum(r[3][0] for r in rs)} | {sum(r[2][1] for r in rs):.1f} | {sum(r[3][1] for r in rs):.1f} |")
    for name, kind, old, new in rows:
        if old[0] != new[0]:
            print(f"verdicts differ: {name} {kind}: old {'differs' if old[0] else 'same'}, "
                  f"new {'differs' if new[0] else 'same'}")


if __name__ == "__main__":
    main()
