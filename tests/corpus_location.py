"""Where the shared corpus of real grammars lives, for every test that reads it:
$GRAMOPT_CORPUS, else ``../shared/corpus`` beside the repository, else /work/shared/corpus
(the team machines' copy, so that a clone elsewhere — CI's — still finds it)."""

import os
from pathlib import Path

_CANDIDATES = [os.environ.get("GRAMOPT_CORPUS"),
               Path(__file__).resolve().parents[1].parent / "shared" / "corpus",
               "/work/shared/corpus"]
CORPUS = next((Path(c) for c in _CANDIDATES if c and Path(c).is_dir()), Path("/work/shared/corpus"))
