"""One JSON string in the forms a grammar may give it, per-mask time in each engine (Qwen vocabulary).

    python benchmarks/star_forms.py                      # xgrammar, llguidance (and llama.cpp if installed)
    python benchmarks/star_forms.py --out benchmarks/results/flat-stars-2026-11-28/star_forms.json
    python benchmarks/star_forms.py --check FILE         # rerun and check FILE's verdicts still hold

Why: xgrammar 0.2.8 lowers a repetition whose body holds a rule reference or a nested group into
helper rules whose end lies inside nearly every token, while a flat body stays in its automaton
(``gramopt.transforms.reshape.flat_stars``, ``gramopt.costmodels.engine_shapes.lowered_stars``).
Each form below is the same language; the text is stepped token by token, every form's mask is
filled (each timed, interleaved, the minimum over ``--repeats``) and compared with its family's
first form's (``SAME_AS``: llama.cpp's converter's class also excludes \x7F): the masks must be
equal, only the time may differ.

Forms (``root ::= "{\\"a\\": " S ", \\"b\\": " S "}"`` around each string rule S):

    rec         xgrammar's converter: S ::= "\\"" R, R ::= "\\"" | c R | "\\\\" e R (no lookahead)
    star-ref    the e-graph's star: R ::= (c | "\\\\" e)* "\\""                (a reference in the body)
    star-group  the escape read through, its group kept: (c | "\\\\" (a | "u" h h h h))* "\\""
    star-flat   flat: (c | "\\\\" a | "\\\\u" h h h h)* "\\""                (gramopt's portable fix-up)
    star-flat-last  the same, the wide class last (the fix-up's order: llama.cpp tries alternatives in order)
    char-star   llama.cpp's converter: S ::= "\\"" char* "\\"", char ::= c | [\\\\] (a | "u" h{4})
    char-flat   the same flattened
    char-flat-last  flattened, the wide class last (the fix-up's output)

Verdicts checked (``--check``): in xgrammar, star-ref, star-group and char-star are at least 50x
star-flat's median, star-flat within 5x of rec's; in llguidance, star-flat at least 20x faster than
rec; in llama.cpp, char-flat-last within 1.1x of char-star's median; every engine's masks equal
across forms.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

HEAD = 'root ::= "{\\"a\\": " s ", \\"b\\": " s "}"'
ESC = 'e ::= ["/\\\\bfnrt] | "u" [0-9A-Fa-f] [0-9A-Fa-f] [0-9A-Fa-f] [0-9A-Fa-f]'
FORMS = {
    "rec": [HEAD, 's ::= "\\"" r', 'r ::= "\\"" | [^\\x00-\\x1F"\\\\] r | "\\\\" e r', ESC],
    "star-ref": [HEAD, 's ::= "\\"" r', 'r ::= ([^\\x00-\\x1F"\\\\] | "\\\\" e)* "\\""', ESC],
    "star-group": [HEAD, 's ::= "\\"" r',
                   'r ::= ([^\\x00-\\x1F"\\\\] | "\\\\" (["/\\\\bfnrt] | "u" [0-9A-Fa-f] [0-9A-Fa-f] [0-9A-Fa-f] '
                   '[0-9A-Fa-f]))* "\\""'],
    "star-flat": [HEAD, 's ::= "\\"" r',
                  'r ::= ([^\\x00-\\x1F"\\\\] | "\\\\" ["/\\\\bfnrt] | "\\\\u" [0-9A-Fa-f] [0-9A-Fa-f] [0-9A-Fa-f] '
                  '[0-9A-Fa-f])* "\\""'],
    "star-flat-last": [HEAD, 's ::= "\\"" r',
                       'r ::= ("\\\\" ["/\\\\bfnrt] | "\\\\u" [0-9A-Fa-f] [0-9A-Fa-f] [0-9A-Fa-f] [0-9A-Fa-f] | '
                       '[^\\x00-\\x1F"\\\\])* "\\""'],
    "char-star": [HEAD, 's ::= "\\"" char* "\\""', 'char ::= [^"\\\\\\x7F\\x00-\\x1F] | [\\\\] (["\\\\bfnrt] | "u" [0-9a-fA-F]{4})'],
    "char-flat": [HEAD, 's ::= "\\"" ([^"\\\\\\x7F\\x00-\\x1F] | [\\\\] ["\\\\bfnrt] | [\\\\] "u" [0-9a-fA-F]{4})* "\\""'],
    "char-flat-last": [HEAD, 's ::= "\\"" ([\\\\] ["\\\\bfnrt] | [\\\\] "u" [0-9a-fA-F]{4} | [^"\\\\\\x7F\\x00-\\x1F])* "\\""'],
}
# the language each form is checked against: llama.cpp's converter's class also excludes \x7F
SAME_AS = {f: "char-star" if f.startswith("char") else "rec" for f in FORMS}
TEXT = '{"a": "jenkins build output for the nightly pipeline \\n and more words here", "b": "x\\u00e9y"}'


def measure(engines: list[str], repeats: int) -> dict:
    """{engine: {form: {"median_ms", "max_ms"}, "masks_equal": bool}} along ``TEXT``."""
    from gramopt.engines import ENGINES
    from gramopt.engines.base import Env
    from gramopt.formats import parse
    from gramopt.judge.masks import installed
    from gramopt.runtime.vocab import Vocab
    env = Env.create(Vocab.qwen())  # Qwen's whole vocabulary, not the judge's part of it
    toks = env.tokenizer.encode(TEXT)
    out = {}
    for eng in engines:
        if not installed(eng):
            continue
        ad = ENGINES[eng](env)
        ad.prepare()
        matchers = {f: ad.matcher(ad.compile(parse("\n".join(lines) + "\n", "gbnf"))) for f, lines in FORMS.items()}
        best = {f: [float("inf")] * len(toks) for f in FORMS}
        equal = True
        for _ in range(repeats):
            rows = {f: np.zeros(ad.env.vocab.n_words, np.int32) for f in FORMS}
            for m in matchers.values():
                m.reset()
            for j, t in enumerate(toks):
                for f, m in matchers.items():
                    s = time.perf_counter()
                    m.fill(rows[f])
                    best[f][j] = min(best[f][j], time.perf_counter() - s)
                equal &= all(np.array_equal(rows[SAME_AS[f]], r) for f, r in rows.items())
                for m in matchers.values():
                    m.accept_allowed(t)
        out[eng] = {f: {"median_ms": round(1e3 * float(np.median(xs)), 4), "max_ms": round(1e3 * max(xs), 4)}
                    for f, xs in best.items()}
        out[eng]["masks_equal"] = bool(equal)
        print(f"{eng}: " + ", ".join(f"{f} {v['median_ms']:.3f}" for f, v in out[eng].items() if f != "masks_equal")
              + f" ms (median); masks equal: {equal}", file=sys.stderr, flush=True)
    return out


def verdicts(res: dict) -> list[str]:
    """The module docstring's verdicts that fail on ``res`` (empty: all hold)."""
    bad = []
    x = res.get("xgrammar")
    if x:
        flat = x["star-flat"]["median_ms"]
        for f in ("star-ref", "star-group", "char-star"):
            if x[f]["median_ms"] < 50 * flat:
                bad.append(f"xgrammar {f} {x[f]['median_ms']} ms is not 50x star-flat's {flat} ms")
        if flat > 5 * x["rec"]["median_ms"]:
            bad.append(f"xgrammar star-flat {flat} ms is over 5x rec's {x['rec']['median_ms']} ms")
    g = res.get("llguidance")
    if g and g["rec"]["median_ms"] < 20 * g["star-flat"]["median_ms"]:
        bad.append(f"llguidance rec {g['rec']['median_ms']} ms is not 20x star-flat's {g['star-flat']['median_ms']} ms")
    c = res.get("llama.cpp")
    if c and c["char-flat-last"]["median_ms"] > 1.1 * c["char-star"]["median_ms"]:
        bad.append(f"llama.cpp char-flat-last {c['char-flat-last']['median_ms']} ms is over 1.1x char-star's "
                   f"{c['char-star']['median_ms']} ms")
    bad += [f"{e}: masks differ between forms" for e, v in res.items() if not v.get("masks_equal", True)]
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", default="xgrammar,llguidance,llama.cpp")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="")
    ap.add_argument("--check", default="", help="a results file: rerun and check its verdicts")
    a = ap.parse_args(argv)
    res = measure(a.engines.split(","), a.repeats)
    print(json.dumps(res, indent=1))
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump({"text": TEXT, "repeats": a.repeats, "results": res}, f, indent=1)
    bad = verdicts(res)
    for b in bad:
        print(f"verdict fails: {b}", file=sys.stderr)
    return 1 if bad and a.check else 0


if __name__ == "__main__":
    sys.exit(main())
