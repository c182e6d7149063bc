"""Incremental detokenizer: equality with a full decode, UTF-8 safety, stop strings, streaming."""

from __future__ import annotations

import random

import pytest

from tachyon.engine.detokenizer import IncrementalDetokenizer, decode_token
from tests.tiny_models import tiny_model_dir

REPLACEMENT = "\ufffd"
MULTIBYTE_TEXTS = [
    "你好，世界！机器学习很有趣。",
    "Rocket 🚀 fire 🔥 family 👨‍👩‍👧‍👦 flag 🇫🇷 done",
    "Mixed: naïve café, 日本語のテキスト, Ελληνικά, русский, עברית 🙂.",
    "emoji at the end 🤖",
]


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir("llama"))


class CountingTokenizer:
    """Wraps a tokenizer and records the length of every decode call."""

    def __init__(self, tok):
        self.tok, self.lengths = tok, []

    def __len__(self) -> int:
        return len(self.tok)

    def decode(self, ids, **kw):
        self.lengths.append(len(ids))
        return self.tok.decode(ids, **kw)


def feed(det: IncrementalDetokenizer, ids: list[int], rng: random.Random | None = None):
    """Feed ids in chunks (1 at a time, or random 1..3); return (stop, texts, streams) per call."""
    texts, streams, stop, i = [], [], None, 0
    while i < len(ids) and stop is None:
        n = rng.randint(1, 3) if rng else 1
        stop = det.add_tokens(ids[i : i + n])
        i += n
        texts.append(det.text)
        streams.append(det.stream_text(finished=False))
    return stop, texts, streams


# ----------------------------------------------------------------------- equality with decode


@pytest.mark.parametrize("skip_special", [True, False])
def test_random_sequences_match_full_decode(tok, skip_special):
    rng = random.Random(1234 + skip_special)
    vocab = len(tok)
    for _ in range(150):
        ids = [rng.randrange(vocab) if rng.random() > 0.1 else rng.randrange(17) for _ in range(rng.randint(1, 40))]
        det = IncrementalDetokenizer(tok, [1, 2, 3], skip_special_tokens=skip_special)
        _, texts, streams = feed(det, ids, rng)
        final = det.stream_text(finished=True)
        want = tok.decode(ids, skip_special_tokens=skip_special)
        assert final == det.text == want, ids
        for t in texts + streams:  # whatever was shown along the way is final
            assert want.startswith(t), ids


def test_random_broken_utf8_matches_full_decode(tok):
    """Sequences dense in tokens that are partial UTF-8 sequences on their own."""
    rng = random.Random(7)
    partial = [i for i in range(17, len(tok)) if tok.decode([i]).endswith(REPLACEMENT)]
    ascii_ids = tok.encode(" a b. c")
    assert len(partial) > 100
    for _ in range(100):
        ids = [rng.choice(partial) if rng.random() < 0.8 else rng.choice(ascii_ids) for _ in range(40)]
        det = IncrementalDetokenizer(tok, [])
        _, texts, _ = feed(det, ids, rng)
        want = tok.decode(ids)
        assert det.stream_text(finished=True) == want, ids
        assert all(want.startswith(t) for t in texts), ids


def test_multibyte_text_one_token_at_a_time(tok):
    for text in MULTIBYTE_TEXTS:
        ids = tok.encode(text)
        assert len(ids) > len(text.split())  # characters really span several tokens
        det = IncrementalDetokenizer(tok, [])
        _, texts, streams = feed(det, ids)
        assert REPLACEMENT not in "".join(texts + streams)
        for t in texts:
            assert text.startswith(t)
        assert det.stream_text(finished=True) == text == tok.decode(ids)


def test_incomplete_character_withheld_then_flushed(tok):
    ids = tok.encode("ok 你")  # "你" is two byte-level tokens
    det = IncrementalDetokenizer(tok, [])
    det.add_tokens(ids[:-1])
    assert det.text == "ok " and det.stream_text(finished=False) == "ok "
    det.add_tokens(ids[-1:])
    assert det.text == "ok 你"
    # generation that ends inside a character: the final text renders it as decode does
    det = IncrementalDetokenizer(tok, [])
    det.add_tokens(ids[:-1])
    assert det.text == "ok "
    assert det.stream_text(finished=True) == tok.decode(ids[:-1]) == "ok " + REPLACEMENT


def test_special_tokens(tok):
    ids = tok.encode("<|im_start|>assistant\nHello there<|im_end|>")
    assert ids[0] == 1 and ids[-1] == 2
    for skip in (True, False):
        det = IncrementalDetokenizer(tok, [], skip_special_tokens=skip)
        feed(det, ids)
        want = "assistant\nHello there" if skip else "<|im_start|>assistant\nHello there<|im_end|>"
        assert det.text == want == tok.decode(ids, skip_special_tokens=skip)


def test_work_per_call_is_bounded(tok):
    """O(new tokens): every decode call covers a small window, however long the output grows."""
    ids = tok.encode(" ".join(MULTIBYTE_TEXTS) * 20)
    counting = CountingTokenizer(tok)
    det = IncrementalDetokenizer(counting, [])
    feed(det, ids)
    assert len(ids) > 1000
    assert det.text == tok.decode(ids)
    assert max(counting.lengths) <= 8


def test_run_of_real_replacement_characters_keeps_window_bounded(tok):
    ids = tok.encode("bad bytes: " + REPLACEMENT * 60 + " end")
    counting = CountingTokenizer(tok)
    det = IncrementalDetokenizer(counting, [])
    feed(det, ids)
    assert det.stream_text(finished=True) == tok.decode(ids)
    assert max(counting.lengths) <= 12


# ------------------------------------------------------------------------------- stop strings


def test_stop_string_spanning_tokens_both_ways(tok):
    text = "The answer is 42. Done here."
    ids = tok.encode(text)
    for include, want in ((False, "The "), (True, "The answer is")):
        det = IncrementalDetokenizer(tok, [], stop=["answer is"], include_stop_str_in_output=include)
        stop, texts, _ = feed(det, ids)
        assert stop == "answer is" and det.stop_reason == "answer is" and det.finished
        assert all("answer is" not in t for t in texts[:-1])  # found on the token that completed it
        assert det.text == want == det.stream_text(finished=False) == det.stream_text(finished=True)
        with pytest.raises(ValueError, match="finished"):
            det.add_tokens(ids[:1])


def test_stop_inside_a_multi_token_chunk_truncates(tok):
    ids = tok.encode("alpha beta STOP gamma delta")
    det = IncrementalDetokenizer(tok, [], stop=["STOP", "gamma"])
    assert det.add_tokens(ids) == "STOP"  # the earliest match wins
    assert det.text == "alpha beta "


def test_min_tokens_delays_stop_checks(tok):
    ids = tok.encode("x. y. z. w.")
    assert [tok.decode([i]) for i in ids][:2] == ["x", "."]

    def first_stop(min_tokens: int) -> tuple[int, str]:
        det = IncrementalDetokenizer(tok, [], stop=["."], min_tokens=min_tokens)
        for n, i in enumerate(ids, 1):
            if det.add_tokens([i]) is not None:
                return n, det.text
        raise AssertionError("no stop")

    assert first_stop(0) == (2, "x")
    n, text = first_stop(5)  # the dots among the first 4 tokens are never matched
    assert n >= 5 and tok.decode(ids[:n]).endswith(".") and text == tok.decode(ids[:n])[:-1]
    assert text.count(".") >= 1


def test_stream_text_never_reveals_a_partial_stop_string(tok):
    stop = "</answer>"
    text = "<ans> The result: </ans </answ </answer> trailing"
    ids = tok.encode(text)
    for include in (False, True):
        det = IncrementalDetokenizer(tok, [], stop=[stop, "NEVER"], include_stop_str_in_output=include)
        assert feed(det, ids)[0] == stop
        final = det.stream_text(finished=True)
        assert final == ("<ans> The result: </ans </answ " + (stop if include else ""))
        # every partial stream is a prefix of the final text and does not end in a stop's beginning
        det = IncrementalDetokenizer(tok, [], stop=[stop, "NEVER"], include_stop_str_in_output=include)
        _, _, streams = feed(det, ids)
        for prev, cur in zip(streams, streams[1:]):
            assert cur.startswith(prev)
        for s in streams:
            assert final.startswith(s)
            assert not any(s.endswith(stop[:k]) for k in range(1, len(stop)))


def test_stream_text_withholds_only_what_could_start_a_stop(tok):
    det = IncrementalDetokenizer(tok, [], stop=["###"])
    det.add_tokens(tok.encode("Hello world"))
    assert det.stream_text(finished=False) == "Hello world"
    det.add_tokens(tok.encode(" #"))
    assert det.stream_text(finished=False) == "Hello world "
    det = IncrementalDetokenizer(tok, [])
    det.add_tokens(tok.encode("no stops at all #"))
    assert det.stream_text(finished=False) == "no stops at all #"


def test_bad_arguments(tok):
    with pytest.raises(ValueError, match="stop"):
        IncrementalDetokenizer(tok, [], stop=[""])
    with pytest.raises(ValueError, match="min_tokens"):
        IncrementalDetokenizer(tok, [], min_tokens=-1)
    with pytest.raises(ValueError, match="token_ids"):
        IncrementalDetokenizer(tok, []).add_tokens([5, -1])
    det = IncrementalDetokenizer(tok, [], stop=None)  # SamplingParams' "no stop strings"
    assert det.add_tokens(tok.encode("fine")) is None and det.text == "fine"


# ------------------------------------------------------------------------------- decode_token


def test_decode_token(tok):
    hi = tok.encode("Hi")
    assert len(hi) == 1 and decode_token(tok, hi[0]) == "Hi"
    assert decode_token(tok, 2) == "<|im_end|>"
    first, _ = tok.encode("你")
    assert decode_token(tok, first) == REPLACEMENT
    assert decode_token(tok, len(tok) + 5) == ""  # a padding row of a larger embedding
    with pytest.raises(ValueError, match="token_id"):
        decode_token(tok, -1)
