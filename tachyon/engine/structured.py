"""Structured outputs: a request's `StructuredOutputsParams` compiled to an llguidance matcher, and the matcher's
allowed-token mask for the sampler.

Contract: `GrammarCompiler` belongs to one engine and its tokenizer; `matcher` runs where requests are made (any
thread) and raises ValueError naming the field for a grammar it cannot compile. A matcher belongs to one Request
(one sequence): the sampler masks that row's logits (`fill_bitmask` / `apply_bitmask`, the next step's prefetched
by `MaskPrefetch`) and feeds it each token drawn, so its state
always matches the request's output tokens (preemption recomputes KV only, never tokens). A matcher that has
stopped, or that fails, allows only the EOS tokens, so its request ends instead of sampling from an empty mask.
"""

from __future__ import annotations

import json
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch

from tachyon.engine.staging import to_device_async
from tachyon.sampling import StructuredOutputsParams

log = logging.getLogger(__name__)

# JSON is generated with fixed separators, as json.dumps writes it: llguidance's default lets whitespace run between
# tokens, where a weak model can spend its whole output (a schema's "x-guidance" options override this).
_JSON_DEFAULTS = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
_ANY_OBJECT = {"type": "object"}  # response_format {"type": "json_object"}


def _llguidance():
    try:
        import llguidance
        import llguidance.hf
    except ImportError:  # pragma: no cover - a dependency of the package
        raise ValueError("structured_outputs needs the llguidance package (pip install llguidance)") from None
    return llguidance


class GrammarCompiler:
    """Compiles StructuredOutputsParams for one tokenizer. The llguidance tokenizer (~0.4 s to build) is made on
    the first structured request and kept."""

    def __init__(self, tokenizer: Any, vocab_size: int, eos_token_ids: list[int]):
        self._tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.eos_token_ids = list(eos_token_ids)
        self._lltok = None
        self._lock = threading.Lock()

    def prepare(self) -> None:
        """Build the llguidance tokenizer now (a server calls it on a background thread at start, so its first
        structured request does not wait for it). Failures are left for that request to raise."""
        try:
            self._ll_tokenizer()
        except Exception:  # noqa: BLE001 - no llguidance or no tokenizer: the request that needs it says so
            log.debug("llguidance tokenizer not prepared", exc_info=True)

    def _ll_tokenizer(self):
        with self._lock:
            if self._lltok is None:
                llg = _llguidance()
                if self._tokenizer is None:
                    raise ValueError("structured_outputs needs a tokenizer; this model has none")
                self._lltok = llg.hf.from_tokenizer(self._tokenizer, n_vocab=self.vocab_size,
                                                    eos_token=self.eos_token_ids)
            return self._lltok

    def grammar(self, spec: StructuredOutputsParams) -> str:
        """The llguidance grammar text for `spec`."""
        llg = _llguidance()
        if spec.json is not None or spec.json_object:
            schema = _ANY_OBJECT if spec.json_object else spec.json
            if isinstance(schema, str):
                try:
                    schema = json.loads(schema)
                except json.JSONDecodeError as e:
                    raise ValueError(f"structured_outputs.json is not valid JSON: {e}") from None
            if not isinstance(schema, dict):
                raise ValueError("structured_outputs.json must be a JSON object (a JSON schema)")
            return llg.LLMatcher.grammar_from_json_schema(schema, defaults=_JSON_DEFAULTS)
        if spec.regex is not None:
            return llg.LLMatcher.grammar_from_regex(spec.regex)
        if spec.choice is not None:
            return llg.LLMatcher.grammar_from_regex("|".join(_regex_literal(c) for c in spec.choice))
        return llg.LLMatcher.grammar_from_lark(spec.grammar)

    def matcher(self, spec: StructuredOutputsParams):
        """A fresh matcher at the start of the output; ValueError naming the field if the grammar does not compile."""
        llg = _llguidance()
        field = next(n for n in ("json", "regex", "choice", "grammar", "json_object")
                     if getattr(spec, n) not in (None, False))
        grammar = self.grammar(spec)
        validate = getattr(llg.LLMatcher, "validate_grammar", None)
        error = validate(grammar) if validate is not None else ""  # no tokenizer needed: bad input fails fast
        if error:
            raise ValueError(f"structured_outputs.{field}: {error[:300]}")
        m = llg.LLMatcher(self._ll_tokenizer(), grammar)  # a grammar that fails leaves it erred
        if m.is_error():
            raise ValueError(f"structured_outputs.{field}: {m.get_error()[:300]}")
        return m


def _regex_literal(text: str) -> str:
    """`text` as a regex matching exactly itself (llguidance's regex syntax is Rust's)."""
    return "".join(f"\\{c}" if c in r"\.+*?()|[]{}^$" else c for c in text)


_EXECUTOR = None  # llguidance's mask thread pool, made on first use (one per process)


def _executor():
    global _EXECUTOR
    if _EXECUTOR is None:
        _EXECUTOR = _llguidance().LLExecutor()
    return _EXECUTOR


def _int32_bit(b: int) -> int:
    """The int32 whose only set bit is b (bit 31 is the sign bit)."""
    return -(1 << 31) if b == 31 else 1 << b


def fill_bitmask(matchers: list, eos_token_ids: list[list[int]], vocab: int) -> torch.Tensor:
    """Host int32 (len(matchers), ceil(vocab / 32)) bitmask: row k holds the tokens matchers[k] accepts next (filled
    in parallel by llguidance, which drops the GIL), or only eos_token_ids[k] once it has stopped or failed."""
    words = (vocab + 31) // 32
    bitmask = torch.zeros(len(matchers), words, dtype=torch.int32)
    ended = [k for k, m in enumerate(matchers) if m.is_stopped() or m.is_error()]
    ended_set = set(ended)
    live = [(m, k) for k, m in enumerate(matchers) if k not in ended_set]
    if live:
        _executor().unsafe_compute_mask_ptr(live, bitmask.data_ptr(), words * 4, len(matchers))
    for k in ended:  # EOS only: set on the host, so every row takes the one copy to the device
        for t in eos_token_ids[k]:
            if t < vocab:
                bitmask[k, t // 32] |= _int32_bit(t % 32)
    return bitmask


def apply_bitmask(logits: torch.Tensor, rows: list[int], bitmask: torch.Tensor) -> None:
    """In place: logits[rows[k]] keeps the tokens whose bit is set in bitmask[k] (-inf elsewhere); one copy of the
    bitmask to the device, unpacked there."""
    vocab = logits.shape[-1]
    bits = torch.arange(32, dtype=torch.int32, device=logits.device)
    device_mask = to_device_async(bitmask, logits.device)
    allowed = ((device_mask[:, :, None] >> bits) & 1).reshape(len(rows), -1)[:, :vocab].bool()
    idx = to_device_async(torch.tensor(rows, dtype=torch.long), logits.device)
    logits[idx] = logits[idx].masked_fill(~allowed, float("-inf"))


def mask_logits(logits: torch.Tensor, rows: list[int], matchers: list, eos_token_ids: list[list[int]]) -> None:
    """In place: each logits[rows[k]] keeps only the tokens matchers[k] accepts next (-inf elsewhere); a matcher
    that has stopped or failed keeps only eos_token_ids[k]."""
    apply_bitmask(logits, rows, fill_bitmask(matchers, eos_token_ids, logits.shape[-1]))


class MaskPrefetch:
    """The next step's bitmasks, filled on a background thread while the engine turns this step's tokens into
    outputs, schedules the next step and launches its forward pass (an H200 host fills 64 JSON masks in 2-5 ms,
    as long as a 7B decode step).

    Contract: matchers change only when the Sampler feeds them a token, which it does after `take` and before
    `start`, so a prefetched row always matches its matcher's state. `take` fills the matchers that were not
    prefetched (a request's first token) on the spot. Between `start` and `take` (or `wait`) the thread owns the
    matchers it was given: llguidance refuses a second thread's call on one of them (RuntimeError "Already
    mutably borrowed"). The thread runs llguidance alone (no torch device work)."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="tachyon-masks")
        self._pending: tuple[Future, list, int] | None = None  # (the fill, its matchers, its vocab)
        self.rows_prefetched = 0  # rows `take` found ready (for tests and stats)

    def start(self, matchers: list, eos_token_ids: list[list[int]], vocab: int) -> None:
        """Begin filling these matchers' next masks (any earlier unfinished prefetch is dropped once done)."""
        self._pending = (self._pool.submit(fill_bitmask, matchers, eos_token_ids, vocab), matchers, vocab)

    def wait(self) -> None:
        """Block until a running prefetch is done: its matchers may then be used from this thread (it is kept for
        `take`)."""
        if self._pending is not None:
            self._pending[0].result()

    def take(self, matchers: list, eos_token_ids: list[list[int]], vocab: int) -> torch.Tensor:
        """fill_bitmask(matchers, eos_token_ids, vocab), from the prefetch where it holds a row's matcher."""
        pending, self._pending = self._pending, None
        if pending is None or pending[2] != vocab:
            return fill_bitmask(matchers, eos_token_ids, vocab)
        future, done, _ = pending
        ready = future.result()
        if len(done) == len(matchers) and all(a is b for a, b in zip(done, matchers)):
            self.rows_prefetched += len(matchers)
            return ready
        pos = {id(m): k for k, m in enumerate(done)}  # `done` holds its matchers alive: ids are unique
        hit = [k for k, m in enumerate(matchers) if id(m) in pos]
        miss = [k for k, m in enumerate(matchers) if id(m) not in pos]
        out = torch.empty(len(matchers), ready.shape[1], dtype=torch.int32)
        if hit:
            out[hit] = ready[[pos[id(matchers[k])] for k in hit]]
            self.rows_prefetched += len(hit)
        if miss:
            out[miss] = fill_bitmask([matchers[k] for k in miss], [eos_token_ids[k] for k in miss], vocab)
        return out
