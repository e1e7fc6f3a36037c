"""Draw the vendored JSONSchemaBench/MaskBench sample (benchmarks/data/jsonschemabench/).

    python tools/sample_jsonschemabench.py REPO_GIT_DIR [--n 400] [--seed 2026] [--max-bytes 100000]

REPO_GIT_DIR is a clone (or bare mirror) of guidance-ai/jsonschemabench; the files are read
from its ``maskbench/data/`` at HEAD with ``git show``. The draw is deterministic: schemas are
grouped by set (the name before ``---``, or before ``_<n>`` for BFCL/JME), each set gets a share
of ``n`` proportional to its size (at least ``MIN_PER_SET``), and within a set the files with the
smallest SHA-256 of ``seed:name`` are taken. Files already in ``corpus/`` (``maskbench__*``) and
files over ``max-bytes`` are left out, so the sample is data the optimizer was not tuned on.
Each file is copied byte for byte; ``MANIFEST.tsv`` lists name, set, bytes, tests (valid/invalid)
and the source blob id.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys

MIN_PER_SET = 8


def set_of(name: str) -> str:
    if "---" in name:
        return name.split("---")[0]
    return re.sub(r"_\d+$", "", name.removesuffix(".json"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("repo")
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--seed", default="2026")
    ap.add_argument("--max-bytes", type=int, default=100_000)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "benchmarks", "data",
                                                  "jsonschemabench"))
    a = ap.parse_args(argv)
    git = ["git", "--git-dir", a.repo if a.repo.endswith(".git") or os.path.basename(a.repo) == "repo"
           else os.path.join(a.repo, ".git")]
    rows = subprocess.check_output(git + ["ls-tree", "-r", "-l", "HEAD", "maskbench/data/"], text=True).splitlines()
    corpus = os.path.join(os.path.dirname(__file__), "..", "corpus", "jsonschema")
    tuned = {f.removeprefix("maskbench__").removesuffix(".json") for f in os.listdir(corpus)}
    files = []
    for row in rows:
        meta, path = row.split("\t")
        _, _, blob, size = meta.split()  # size "BAD": the blob is absent from a mirror
        name = os.path.basename(path).removesuffix(".json")
        if not size.isdigit() or int(size) > a.max_bytes or name.replace("---", "-") in tuned or name in tuned:
            continue
        files.append((name, blob, int(size)))
    by_set: dict[str, list] = {}
    for f in files:
        by_set.setdefault(set_of(f[0]), []).append(f)
    total = len(files)
    os.makedirs(a.out, exist_ok=True)
    manifest = ["name\tset\tbytes\tvalid\tinvalid\tblob"]
    taken = 0
    for s in sorted(by_set):
        group = sorted(by_set[s], key=lambda f: hashlib.sha256(f"{a.seed}:{f[0]}".encode()).hexdigest())
        k = min(len(group), max(MIN_PER_SET, round(a.n * len(group) / total)))
        for name, blob, size in sorted(group[:k]):
            data = subprocess.check_output(git + ["cat-file", "blob", blob])
            obj = json.loads(data)
            tests = obj.get("tests", [])
            valid = sum(1 for t in tests if t.get("valid"))
            with open(os.path.join(a.out, name + ".json"), "wb") as fh:
                fh.write(data)
            manifest.append(f"{name}\t{s}\t{size}\t{valid}\t{len(tests) - valid}\t{blob}")
            taken += 1
    with open(os.path.join(a.out, "MANIFEST.tsv"), "w") as fh:
        fh.write("\n".join(manifest) + "\n")
    print(f"{taken} schemas from {len(by_set)} sets ({total} eligible) -> {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
