"""Batches: a folder of grammars and schemas, or a JSONL file, on the local process pool or a
Dask cluster, with a content-addressed cache that reruns (and other workers) reuse."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from gramopt.cli.batch import Item, Progress, batch_items, item_key
from gramopt.cli import main

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "tests" / "data" / "jsonschema"
EXAMPLES = ROOT / "examples"
HAVE_XGRAMMAR = importlib.util.find_spec("xgrammar") is not None
# The batch driver and its cache are the point here, not the target: the generic target runs no
# judge, so a spawned worker does not load three engines over Qwen's vocabulary (~5 s of CPU
# each). The default target in a batch: test_front_door's default-target case.
GENERIC = ["--target", "generic"]
# Every batch here runs on one spawned worker shared by the module (conftest's one_batch_worker),
# not on new ones per batch: each pays ~4 CPU s of imports (gramopt, xgrammar for the schemas).
# Batches of two workers: test_cli's folder tests and test_bounded_batch.
J1 = ["-j", "1"]


@pytest.fixture
def mixed(tmp_path) -> Path:
    """Two grammars (one in a subfolder), a schema file and a JSONL file of three schemas."""
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    shutil.copy(EXAMPLES / "anbn_g2.ebnf", src / "g2.ebnf")
    shutil.copy(EXAMPLES / "anbn_g1.ebnf", src / "sub" / "g1.ebnf")
    if HAVE_XGRAMMAR:
        shutil.copy(SCHEMAS / "tool_call.json", src / "tool_call.json")
        shutil.copy(SCHEMAS / "schemas.jsonl", src / "sub" / "more.jsonl")
    (src / "notes.txt").write_text("not an input", encoding="utf-8")
    return src


def outputs(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and ".gramopt-cache" not in p.parts}


def test_items_of_a_folder(mixed, tmp_path):
    items = batch_items(str(mixed), str(tmp_path / "out"))
    names = [i.name for i in items]
    expected = ["g2.ebnf", "sub/g1.ebnf"]
    if HAVE_XGRAMMAR:
        expected = ["g2.ebnf", "sub/g1.ebnf", "sub/more.jsonl:1", "sub/more.jsonl:3", "sub/more.jsonl:4",
                    "tool_call.json"]
    assert sorted(names) == expected
    dst = {i.name: Path(i.dst).relative_to(tmp_path / "out").as_posix() for i in items}
    if HAVE_XGRAMMAR:
        assert dst["sub/more.jsonl:3"] == "sub/more.3.ebnf" and dst["tool_call.json"] == "tool_call.ebnf"
    assert len({item_key(i, {"target": "generic"}) for i in items}) == len(items)


def test_key_follows_content_and_shaping_options():
    a = Item("a.ebnf", "ebnf", 'root ::= "a"\n', "a.ebnf", 0, "out/a.ebnf")
    b = Item("b.ebnf", "ebnf", 'root ::= "a"\n', "b.ebnf", 0, "out/b.ebnf")
    assert item_key(a, {"target": "generic"}) == item_key(b, {"target": "generic"})  # content-addressed
    assert item_key(a, {"target": "generic"}) != item_key(a, {"target": "xgrammar"})
    assert item_key(a, {"target": "generic"}) == item_key(a, {"target": "generic", "report": True})
    assert item_key(a, {"target": "generic"}) != item_key(a, {"target": "generic", "fast": True})


def test_folder_batch_then_a_rerun_from_the_cache(mixed, tmp_path, capsys, one_batch_worker):
    out = tmp_path / "out"
    assert main(["optimize", str(mixed), "-o", str(out), *J1, *GENERIC]) == 0
    assert one_batch_worker.built >= 1  # the items went to a spawned worker
    first = outputs(out)
    n = 6 if HAVE_XGRAMMAR else 2
    assert len(first) == n
    err = capsys.readouterr().err
    assert f"done {n}  failed 0  cached 0" in err
    assert main(["optimize", str(mixed), "-o", str(out), *J1, *GENERIC]) == 0
    err = capsys.readouterr().err
    assert f"{n} items, {n} served from the cache, 0 to optimize" in err and f"cached {n}" in err
    assert outputs(out) == first
    shutil.rmtree(out)  # the cache elsewhere serves a fresh output folder too
    cache = tmp_path / "shared-cache"
    assert main(["optimize", str(mixed), "-o", str(out), "--cache", str(cache), *J1, *GENERIC]) == 0
    assert outputs(out) == first
    capsys.readouterr()
    out2 = tmp_path / "out2"
    assert main(["optimize", str(mixed), "-o", str(out2), "--cache", str(cache), *J1, *GENERIC]) == 0
    assert f"{n} served from the cache" in capsys.readouterr().err and outputs(out2) == first


def test_failures_are_counted_and_the_rest_written(tmp_path, capsys, one_batch_worker):
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(EXAMPLES / "anbn_g1.ebnf", src / "good.ebnf")
    (src / "bad.gbnf").write_text("root ::= (\n", encoding="utf-8")
    out = tmp_path / "out"
    assert main(["optimize", str(src), "-o", str(out), *J1, *GENERIC]) == 2
    err = capsys.readouterr().err
    assert "done 1  failed 1  cached 0" in err and "bad.gbnf:2:1: error:" in err
    assert (out / "good.ebnf").exists() and not (out / "bad.gbnf").exists()


@pytest.mark.skipif(not HAVE_XGRAMMAR, reason="xgrammar (the default target's schema converter) not installed")
def test_a_jsonl_file_is_a_batch(tmp_path, capsys, one_batch_worker):
    out = tmp_path / "out"
    assert main(["optimize", str(SCHEMAS / "schemas.jsonl"), "-o", str(out), *J1, *GENERIC]) == 0
    assert sorted(p.name for p in out.glob("*.ebnf")) == ["schemas.1.ebnf", "schemas.3.ebnf", "schemas.4.ebnf"]
    assert "# JSON Schema schemas.3 converted by xgrammar" in (out / "schemas.3.ebnf").read_text(encoding="utf-8")


def test_progress_counts(capsys):
    import io
    s = io.StringIO()
    p = Progress(3, stream=s)
    p.update("a", 0, False, "ok")
    p.update("b", 2, False, "bad")
    p.update("c", 0, True, "")
    lines = s.getvalue().splitlines()
    assert "3/3  done 2  failed 1  cached 1" in lines[-1] and "b: FAILED bad" in lines[1]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="distributed not installed")
def test_dask_cluster_writes_the_same_bytes_as_the_process_pool(mixed, tmp_path, capsys):
    """A LocalCluster of 2 worker processes, a shared cache folder: the same bytes as the
    process pool; a rerun is served from the cache."""
    from distributed import LocalCluster
    pool_out = tmp_path / "pool"
    assert main(["optimize", str(mixed), "-o", str(pool_out), "-j", "2"]) == 0
    cache = tmp_path / "shared"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        dask_out = tmp_path / "dask"
        assert main(["optimize", str(mixed), "-o", str(dask_out), "--scheduler", cluster.scheduler_address,
                     "--cache", str(cache)]) == 0
        assert outputs(dask_out) == outputs(pool_out)
        capsys.readouterr()
        again = tmp_path / "again"
        assert main(["optimize", str(mixed), "-o", str(again), "--scheduler", cluster.scheduler_address,
                     "--cache", str(cache)]) == 0
        n = len(outputs(pool_out))
        assert f"{n} served from the cache, 0 to optimize" in capsys.readouterr().err
        assert outputs(again) == outputs(pool_out)
