"""The content-addressed cache of optimized outputs (batches, and serving's request cache).

An entry's key (``cache_key``) is the SHA-256 of the input text, its kind, the output's
extension, the ``Options`` (every field shapes the bytes: ``Options.key``), the cost
model's own hash, the judge's engine versions, gramopt's version and the digest of its sources
(``code_digest``); ``CACHE/<key[:2]>/<key>``
holds the output text with its SHA-256, checked on every read (a bad entry is ignored with a
warning: ``cache_get``). Entries are written atomically (temp file + rename), so concurrent
writers of one key both leave one valid entry.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from typing import Mapping

from .. import targets
from ..formats import write_file
from ..grammar import GrammarError
from .options import Options

CACHE_FORMAT = 1


def cache_key(kind: str, text: str, out_ext: str, options: "Options | Mapping") -> str:
    """The key of ``text`` (a ``kind`` of input) optimized with ``options`` into a file
    ending ``out_ext``."""
    from .._version import __version__
    from ..judge import engine_versions  # the judge's verdicts are the installed engines'
    from ..passes import cost_model_used
    o = Options.of(options)
    shaping = o.key()
    target = targets.get(o.target)
    shaping["cost_model"] = cost_model_used(target, o.cost_model)[1]  # the model's bytes, by hash
    from ..costmodels.predict import models_digest  # the guard's decision models, by the hash of their bytes
    shaping["decision_models"] = models_digest()
    shaping["engines"] = engine_versions(target)
    shaping["code"] = code_digest()
    h = hashlib.sha256(json.dumps({"kind": kind, "options": shaping, "version": __version__, "out": out_ext},
                                  sort_keys=True).encode())
    h.update(text.encode("utf-8"))
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """``sources_digest`` of the installed gramopt package, once per process: a commit that
    changes output bytes keeps the version string, and a cache keyed by the version alone
    served the older bytes."""
    return sources_digest(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sources_digest(root: str) -> str:
    """SHA-256 of the Python sources under ``root`` (relative paths and bytes, in path
    order): the same on two machines with the same sources (18 ms for gramopt's 194 files)."""
    files = sorted(os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")
                   for d, _, fs in os.walk(root) for f in fs if f.endswith(".py"))
    h = hashlib.sha256()
    for rel in files:
        with open(os.path.join(root, rel), "rb") as f:
            h.update(rel.encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()


def cache_path(cache_dir: str, key: str) -> str:
    return os.path.join(cache_dir, key[:2], key)


def cache_get(cache_dir: str | None, key: str) -> str | None:
    """The output text cached under ``key``, or None. An entry is JSON
    ``{"format", "key", "sha256", "text"}``; one of another shape, for another key, or whose
    text does not hash to its ``sha256`` (edited, truncated, another version's) is ignored
    with a warning on stderr, and the item is optimized again (and the entry replaced)."""
    if not cache_dir:
        return None
    path = cache_path(cache_dir, key)
    try:
        with open(path, encoding="utf-8", newline="") as f:
            raw = f.read()
    except OSError:
        return None
    except UnicodeDecodeError:
        raw = None
    why = _bad_entry(raw, key)
    if why is None:
        return json.loads(raw)["text"]
    print(f"{path}: warning: ignoring a bad cache entry ({why}); optimizing again", file=sys.stderr)
    return None


def _bad_entry(raw: str | None, key: str) -> str | None:
    """Why ``raw`` is not a valid cache entry for ``key``, or None when it is."""
    if raw is None:
        return "not UTF-8"
    try:
        entry = json.loads(raw)
    except ValueError:
        return "not JSON"
    if not isinstance(entry, dict) or entry.get("format") != CACHE_FORMAT or \
            not all(isinstance(entry.get(k), str) for k in ("key", "sha256", "text")):
        return "not a gramopt cache entry"
    if entry["key"] != key:
        return "stored under another key"
    if hashlib.sha256(entry["text"].encode("utf-8")).hexdigest() != entry["sha256"]:
        return "its text does not match its SHA-256"
    return None


def cache_put(cache_dir: str | None, key: str, text: str) -> None:
    if cache_dir:
        entry = {"format": CACHE_FORMAT, "key": key,
                 "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(), "text": text}
        try:
            os.makedirs(os.path.dirname(cache_path(cache_dir, key)), exist_ok=True)
            write_file(cache_path(cache_dir, key), json.dumps(entry, ensure_ascii=False))
        except (OSError, GrammarError):
            pass  # a read-only or vanished cache only costs the reuse


__all__ = ["CACHE_FORMAT", "cache_get", "cache_key", "cache_path", "cache_put", "code_digest", "sources_digest"]
