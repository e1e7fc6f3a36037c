"""The optimizer over the corpus: obfuscated grammars come back no worse than the clean
original, outputs are idempotent, verified, load in their engine and accept the corpus
samples. Default run: grammars under 12 KB (every grammar with samples for the engine check);
``-m slow`` for the rest. Timings: benchmarks/optimizer_bench.py."""

import pytest
from pathlib import Path

from corpus_location import CORPUS as _CORPUS_DIR, own_engine, validate_module

from gramopt.bench.obfuscate import obfuscate
from gramopt.costmodels import kappa, sac_proxy
from gramopt.passes import optimize

CORPUS = _CORPUS_DIR
FILES = sorted(list(CORPUS.glob("gbnf/*.gbnf")) + list(CORPUS.glob("ebnf/*.ebnf"))) if CORPUS.is_dir() else []
# obfuscated forms that still come back larger than the clean grammar (reported, not hidden)
KNOWN_WORSE = {"transformers-cfg__geo_query.ebnf",
               "xgrammar__builtin_json.ebnf"}


def load(path):
    from gramopt.formats import read
    from gramopt.grammar import GrammarError
    try:
        return read(str(path))
    except GrammarError as e:
        pytest.skip(f"reader: {e.message}")


def small(path) -> bool:
    return path.stat().st_size < 12_000


def cases(big: bool):
    return [pytest.param(p, id=p.name, marks=[pytest.mark.slow] if (not small(p)) != (not big) and big else [])
            for p in FILES if small(p) != big]


@pytest.mark.skipif(not FILES, reason="corpus not found")
@pytest.mark.parametrize("path", [p for p in FILES if small(p)], ids=lambda p: p.name)
def test_obfuscated_comes_back(path):
    g = load(path)
    if path.name in KNOWN_WORSE:
        pytest.xfail("known: obfuscated form comes back larger")
    out = optimize(obfuscate(g, seed=1), target="generic", verify=False).grammar
    assert len(out.rules) <= len(g.rules)
    assert kappa(out) <= kappa(g)


def _generic(path, optimized):
    """``optimize(read(path), target="generic", verify=False)``: once per run for the two tests
    that ask for it (conftest's ``optimized``)."""
    return optimized(path, target="generic", verify=False)


@pytest.mark.skipif(not FILES, reason="corpus not found")
@pytest.mark.parametrize("path", [p for p in FILES if small(p)], ids=lambda p: p.name)
def test_corpus_generic_idempotent_no_worse(path, optimized):
    g = load(path)
    out = _generic(path, optimized).grammar
    assert kappa(out) + sac_proxy(out) <= kappa(g) + sac_proxy(g)
    assert optimize(out, target="generic", verify=False).grammar == out  # timings: benchmarks/optimizer_bench.py


@pytest.mark.slow
@pytest.mark.skipif(not FILES, reason="corpus not found")
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_corpus_verified(path):
    g = load(path)
    r = optimize(g, verify=True)  # raises OptimizationError on a language difference
    assert r.report.verified in ("ok",) or r.report.verified.startswith("error")


# ---------------------------------------------------------------- the output still does its job

def _with_samples() -> list[Path]:
    return [p for p in FILES + LARK_FILES if list(p.parent.glob(p.name[: -len(p.suffix)] + ".sample*.txt"))]


LARK_FILES = sorted(CORPUS.glob("lark/*.lark")) if CORPUS.is_dir() else []


@pytest.mark.skipif(not FILES, reason="corpus not found")
@pytest.mark.parametrize("path", _with_samples(), ids=lambda p: p.name)
def test_corpus_output_loads_and_accepts_samples(path, optimized):
    """The optimized grammar, written in the input's dialect, loads in the grammar's own
    engine (xgrammar / lark / llguidance) and accepts every sample the original accepts;
    κ never grows under --target generic."""
    pytest.importorskip("xgrammar")
    validate = validate_module()
    stem = path.name[: -len(path.suffix)]
    from gramopt.formats import read, write
    from gramopt.grammar import GrammarError
    try:
        g = read(str(path), start=validate.LARK_START.get(stem) if path.suffix == ".lark" else None)
    except GrammarError as e:
        pytest.skip(f"reader: {e.message}")
    if path.suffix == ".lark":  # read with its start rule: not gramopt.read's grammar
        out = optimize(g, target="generic", verify=False).grammar
    else:
        out = _generic(path, optimized).grammar
    assert kappa(out) <= kappa(g)
    texts = [s.read_text(encoding="utf-8") for s in sorted(path.parent.glob(stem + ".sample*.txt"))]
    _, before = own_engine(validate, path, path.read_text(encoding="utf-8"))
    _, after = own_engine(validate, path, write(out, g.dialect))
    for i, t in enumerate(texts):
        if before(t):
            if not after(t) and stem in KNOWN_LARK_REJECTS:
                pytest.xfail(KNOWN_LARK_REJECTS[stem])
            assert after(t), f"sample {i + 1} rejected by the optimized grammar"


# Known defects, open in issue 24's note (each fails this test when it is not fixed, and passes
# it as soon as it is): the sample is in both grammars' language as gramopt reads them, but
# Lark's own Earley parser rejects it with the generic target's output
KNOWN_LARK_REJECTS: dict[str, str] = {
    # (syncode__sql's, "name merged with table_name", was the extractor writing one name of a
    # class two directive-named roots share: fixed in 7f10298, and its sample 2 now passes)
}
