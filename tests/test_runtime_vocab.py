"""Vocabulary loaders and the depth-first token trie."""

from __future__ import annotations

import base64
import json

import pytest

from gramopt.runtime import Vocab
from gramopt.runtime.trie import build_trie


def test_trie_layout_brute_force():
    toks = [b"ab", b"a", b"abc", b"b", b"", b"ab", b"ba", b"\xc3\xa9", b"\xc3"]
    tr = build_trie(toks)
    # reconstruct each node's prefix from the depth-first order
    path, prefix = [], {0: b""}
    for i in range(1, tr.n_nodes):
        d = tr.depth[i]
        del path[d - 1:]
        path.append(tr.byte[i])
        prefix[i] = bytes(path)
    assert sorted(prefix.values())[1:] == sorted({t[:k] for t in toks for k in range(1, len(t) + 1)})
    for i in range(tr.n_nodes):  # subtree = contiguous run of extensions
        sub = [prefix[j] for j in range(i, i + tr.size[i])]
        assert all(s.startswith(prefix[i]) for s in sub)
        assert tr.size[i] == sum(1 for p in prefix.values() if p.startswith(prefix[i]))
        ids = tr.tok_ids[tr.tok_start[i]:tr.tok_start[i + 1]]
        assert sorted(ids.tolist()) == sorted(k for k, t in enumerate(toks) if t and t == prefix[i] and i)


def test_qwen_vocab():
    v = Vocab.qwen()
    assert len(v) == 151644 and v.eos_ids == (151643,) and v.token_bytes[151643] == b""
    assert v.n_words == (151644 + 31) // 32
    assert v.token_bytes[0] == b"!"


def test_tiktoken_file(tmp_path):
    p = tmp_path / "x.tiktoken"
    p.write_text("".join(f"{base64.b64encode(t).decode()} {i}\n" for i, t in enumerate([b"a", b" b", b"\xe2"])))
    v = Vocab.from_file(str(p))
    assert v.token_bytes == [b"a", b" b", b"\xe2", b""] and v.eos_ids == (3,)



def test_tiktoken_file_with_ranks_out_of_order_or_missing(tmp_path):
    """The one-pass read is only for ranks 0, 1, … in order; any other file reads by rank,
    a missing rank as an empty token."""
    p = tmp_path / "x.tiktoken"
    p.write_text("".join(f"{base64.b64encode(t).decode()} {i}\n" for i, t in [(2, b"c"), (0, b"a"), (4, b"e")]))
    v = Vocab.from_file(str(p))
    assert v.token_bytes == [b"a", b"", b"c", b"", b"e", b""] and v.eos_ids == (5,)

def test_hf_tokenizer_json_byte_level_and_fallback(tmp_path):
    obj = {"model": {"type": "BPE", "vocab": {"a": 0, "Ġb": 1, "<0xE2>": 2, "Ã©": 3}},
           "pre_tokenizer": {"type": "ByteLevel"},
           "added_tokens": [{"id": 4, "content": "</s>", "special": True}]}
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(obj))
    v = Vocab.from_file(str(p))
    assert v.token_bytes == [b"a", b" b", b"\xe2", "é".encode(), b""] and v.eos_ids == (4,)


def test_hf_sentencepiece_metaspace(tmp_path):
    obj = {"model": {"type": "BPE", "vocab": {"▁the": 0, "<0x0A>": 1, "x": 2}},
           "decoder": {"type": "Sequence", "decoders": [{"type": "Replace"}]},
           "added_tokens": [{"id": 3, "content": "<|endoftext|>", "special": True}]}
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(obj))
    v = Vocab.from_file(str(p))
    assert v.token_bytes == [b" the", b"\n", b"x", b""] and v.eos_ids == (3,)


def _tiny_hf_tokenizer():
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers, decoders
    tk = tokenizers.Tokenizer(models.BPE(vocab={"a": 0, "b": 1, "ab": 2, "Ġ": 3}, merges=[("a", "b")]))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens(["<|endoftext|>", "<|im_end|>"])
    return tk


def test_hf_json_takes_eos_and_stop_ids_from_the_tokenizers_own_config(tmp_path):
    import json as _json
    tk = _tiny_hf_tokenizer()
    tk.save(str(tmp_path / "tokenizer.json"))
    guessed = Vocab.from_file(str(tmp_path / "tokenizer.json"))
    assert guessed.eos_ids == (4,)  # no config beside it: the first common name found
    (tmp_path / "tokenizer_config.json").write_text(_json.dumps({"eos_token": "<|im_end|>"}))
    v = Vocab.from_file(str(tmp_path / "tokenizer.json"))
    assert v.eos_ids == (5,) and v.token_bytes[2] == b"ab" and v.token_bytes[3] == b" "
    (tmp_path / "generation_config.json").write_text(_json.dumps({"eos_token_id": [5, 4]}))
    assert Vocab.from_file(str(tmp_path / "tokenizer.json")).eos_ids == (5, 4)
    (tmp_path / "tokenizer_config.json").write_text(_json.dumps({"eos_token": {"content": "<|endoftext|>"}}))
    (tmp_path / "generation_config.json").unlink()
    assert Vocab.from_file(str(tmp_path / "tokenizer.json")).eos_ids == (4,)


def test_from_huggingface_accepts_tokenizer_objects():
    tk = _tiny_hf_tokenizer()
    v = Vocab.from_huggingface(tk)
    assert v.token_bytes[:4] == [b"a", b"b", b"ab", b" "] and v.eos_ids == ()
    transformers = pytest.importorskip("transformers")
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|im_end|>")
    v = Vocab.from_huggingface(fast)
    assert v.eos_ids == (5,) and len(v) == len(fast) and v.token_bytes[5] == b""
    with pytest.raises(TypeError):
        Vocab.from_huggingface(object())
