"""Incremental, UTF-8 safe detokenisation with stop strings, for streaming.

Each `add_tokens` call decodes only a small window of token ids (the prefix_offset / read_offset
technique): the text of `ids[prefix:read]` is subtracted from the text of `ids[prefix:]`, so a
decoder that treats the first token of a sequence specially (SentencePiece's leading space) or a
character split across byte-level tokens is handled exactly as a full `tokenizer.decode` would.
Work per call is proportional to the new tokens (plus any still-incomplete character), not to the
length of the output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_REPLACEMENT = "\ufffd"  # what a decoder renders for an incomplete or invalid UTF-8 sequence
# Past this many undecided tokens the trailing U+FFFD cannot all be one incomplete character (at most
# 4 bytes): the window is then cut where the text splits cleanly, so a run of real U+FFFD characters
# in the output cannot make every call re-decode a growing window.
_MAX_PENDING_TOKENS = 8


class IncrementalDetokenizer:
    """Turns a request's output token ids into text as they arrive.

    Contract: after any sequence of `add_tokens` calls followed by `stream_text(finished=True)`
    (or `finish()`), `text == tokenizer.decode(all_output_ids, skip_special_tokens=...)` unless a
    stop string truncated it. Text is decoded from the output ids alone (the prompt ids are kept for
    reference only), so it matches decoding the completion on its own, as the transformers baseline
    does. Stop strings follow vLLM: they are searched for only in text that appears once at least
    `min_tokens` output tokens exist, and a match ends the detokenizer (later `add_tokens` calls
    raise ValueError). Callers finish a request with `stream_text(finished=True)`, which also
    releases a character left incomplete by the last token.
    """

    def __init__(
        self,
        tokenizer: Any,
        prompt_token_ids: Sequence[int],
        *,
        stop: Sequence[str] | str | None = (),
        include_stop_str_in_output: bool = False,
        skip_special_tokens: bool = True,
        min_tokens: int = 0,
    ) -> None:
        stop = [stop] if isinstance(stop, str) else list(stop or ())
        if any(not isinstance(s, str) or not s for s in stop):
            raise ValueError(f"stop: every stop string must be a non-empty str, got {list(stop)!r}")
        if min_tokens < 0:
            raise ValueError(f"min_tokens must be >= 0, got {min_tokens}")
        self.tokenizer = tokenizer
        self.prompt_token_ids = list(prompt_token_ids)
        self.stop = list(dict.fromkeys(stop))
        self.include_stop_str_in_output = include_stop_str_in_output
        self.skip_special_tokens = skip_special_tokens
        self.min_tokens = min_tokens
        self.output_token_ids: list[int] = []
        self.stop_reason: str | None = None  # the stop string that matched, once one has
        self._max_stop = max((len(s) for s in self.stop), default=0)
        self._committed = ""  # text of output_token_ids[:read_offset], final
        self._pending = ""  # text of the tokens after read_offset, without a trailing U+FFFD run
        self._prefix_offset = 0  # start of the decode window (a few tokens of context)
        self._read_offset = 0  # tokens before this are in _committed
        self._checked = 0  # text[:_checked] has been searched for stop strings
        self._finished = False

    # ------------------------------------------------------------------------------------ public

    @property
    def text(self) -> str:
        """Decoded output so far; never ends in a partial UTF-8 sequence (its U+FFFD is withheld)."""
        return self._committed + self._pending

    @property
    def finished(self) -> bool:
        """True once a stop string matched or `finish()` / `stream_text(finished=True)` ran."""
        return self._finished

    def add_tokens(self, token_ids: Sequence[int]) -> str | None:
        """Append newly generated tokens. Returns the stop string that matched (the text is then
        truncated per include_stop_str_in_output, as vLLM does), else None. Stop strings are not
        checked until min_tokens output tokens exist."""
        if self._finished:
            raise ValueError("add_tokens: the detokenizer is finished (stop string matched or finish() called)")
        token_ids = list(token_ids)
        if not token_ids:
            return None
        bad = [t for t in token_ids if t < 0]
        if bad:
            raise ValueError(f"token_ids: negative token ids {bad[:4]}")
        self.output_token_ids.extend(token_ids)
        self._decode_window()
        if not self.stop or len(self.output_token_ids) < self.min_tokens:
            self._checked = len(self.text)  # text seen before min_tokens is never searched
            return None
        return self._check_stop()

    def stream_text(self, finished: bool) -> str:
        """The prefix of `text` safe to send a streaming client: while not finished, withhold the
        last (longest stop string - 1) characters that could begin a stop string; when finished,
        all of text (after `finish()`, which releases a trailing incomplete character). Once a stop
        string has matched, all of the (truncated) text is safe whatever `finished` says."""
        if finished:
            self.finish()
        if self._finished:
            return self.text
        text = self.text
        return text[: len(text) - self._partial_stop_len(text)]

    def finish(self) -> None:
        """No more tokens will come: release the withheld tail exactly as `tokenizer.decode` renders
        it (U+FFFD for an incomplete character), unless a stop string already ended the text."""
        if self._finished:
            return
        self._finished = True
        if self._read_offset < len(self.output_token_ids):
            self._commit(self._window_delta(), len(self.output_token_ids))
            self._pending = ""

    # ---------------------------------------------------------------------------------- internals

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=self.skip_special_tokens)

    def _window_delta(self, end: int | None = None) -> str:
        """Text the tokens in [read_offset, end) add, decoded in the context of prefix_offset."""
        ids = self.output_token_ids
        end = len(ids) if end is None else end
        prefix = self._decode(ids[self._prefix_offset : self._read_offset])
        return self._decode(ids[self._prefix_offset : end])[len(prefix) :]

    def _commit(self, delta: str, end: int, *, context: bool = True) -> None:
        """Append `delta` (the text up to token `end`); keep one step of context unless told not to."""
        self._committed += delta
        self._prefix_offset = self._read_offset if context else end
        self._read_offset = end

    def _decode_window(self) -> None:
        n = len(self.output_token_ids)
        delta = self._window_delta()
        if delta and not delta.endswith(_REPLACEMENT):
            self._commit(delta, n)
            self._pending = ""
            return
        # maybe an incomplete character at the end: show what precedes it, keep the window open
        if n - self._read_offset > _MAX_PENDING_TOKENS:
            self._commit_clean_prefix(delta)
            delta = self._window_delta()
        self._pending = delta.rstrip(_REPLACEMENT)

    def _commit_clean_prefix(self, delta: str) -> None:
        """Commit up to the last cut where decoding before and after it separately gives `delta`:
        no character straddles that cut, so later tokens cannot change the text before it."""
        ids = self.output_token_ids
        for cut in range(len(ids) - 1, self._read_offset, -1):
            head = self._window_delta(cut)
            if head + self._decode(ids[cut:]) == delta:  # the tail decodes alike without context
                self._commit(head, cut, context=False)
                return

    def _check_stop(self) -> str | None:
        text = self.text
        start = max(0, self._checked - self._max_stop + 1)
        self._checked = len(text)
        best: tuple[int, str] | None = None
        for s in self.stop:
            i = text.find(s, start)
            if i != -1 and (best is None or i < best[0]):
                best = (i, s)
        if best is None:
            return None
        i, s = best
        end = i + len(s) if self.include_stop_str_in_output else i
        self._committed, self._pending = text[:end], ""
        self._finished = True
        self.stop_reason = s
        return s

    def _partial_stop_len(self, text: str) -> int:
        """Length of the longest suffix of `text` that is a proper prefix of some stop string."""
        best = 0
        for s in self.stop:
            for k in range(min(len(s) - 1, len(text)), best, -1):
                if text.endswith(s[:k]):
                    best = k
                    break
        return best


def decode_token(tokenizer: Any, token_id: int) -> str:
    """One token as text, for logprobs' decoded_token (special tokens kept; a partial UTF-8 byte
    sequence shows as U+FFFD, as in vLLM; an id past the tokenizer's vocabulary, such as a padding
    row of the model's embedding, is ""). Raises ValueError for a negative id."""
    if token_id < 0:
        raise ValueError(f"token_id must be >= 0, got {token_id}")
    return tokenizer.decode([token_id], skip_special_tokens=False)
