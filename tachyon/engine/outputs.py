"""A user request's n sequences gathered into one RequestOutput.

Contract: a RequestGroup holds its children (Requests, owned by the engine) and reads them only; `output` may be
called after any step and reflects the children's state at that moment. Logprob entries get their decoded text
filled in place (`decode_logprobs`), once each.
"""

from __future__ import annotations

import time

from tachyon.engine.detokenizer import decode_token
from tachyon.engine.request import Request
from tachyon.sampling import CompletionOutput, RequestMetrics, RequestOutput


def decode_logprobs(entries, tokenizer):
    """Fill each Logprob's decoded_token (in place) where a tokenizer exists; returns `entries`."""
    if entries is None or tokenizer is None:
        return entries
    for d in entries:
        if d is None:
            continue
        for tid, lp in d.items():
            if lp.decoded_token is None:
                lp.decoded_token = decode_token(tokenizer, tid)
    return entries


class RequestGroup:
    """The n children of one user request, gathered into one RequestOutput."""

    def __init__(self, request_id: str, prompt: str | None, prompt_token_ids: list[int], children: list[Request]):
        self.request_id, self.prompt, self.prompt_token_ids = request_id, prompt, prompt_token_ids
        self.children = children
        self.prompt_logprobs_decoded = False

    @property
    def finished(self) -> bool:
        return all(c.finished for c in self.children)

    def output(self, tokenizer) -> RequestOutput:
        comps = []
        for c in self.children:
            # unfinished: withhold a tail that might still become a stop string (safe to stream)
            text = c.detokenizer.stream_text(c.finished) if c.detokenizer is not None else ""
            comps.append(CompletionOutput(
                index=c.index, text=text, token_ids=list(c.output_token_ids),
                cumulative_logprob=c.cumulative_logprob if c.logprobs is not None else None,
                logprobs=c.logprobs, finish_reason=c.finish_reason, stop_reason=c.stop_reason))
        first = self.children[0]
        first_tok = [c.first_token_time for c in self.children if c.first_token_time is not None]
        fin = [c.finished_time for c in self.children if c.finished_time is not None]
        metrics = RequestMetrics(
            arrival_time=first.arrival_time,
            first_scheduled_time=first.first_scheduled_time,
            first_token_time=min(first_tok) if first_tok else None,
            last_token_time=time.time(),
            time_in_queue=(first.first_scheduled_time - first.arrival_time) if first.first_scheduled_time else None,
            finished_time=max(fin) if self.finished and fin else None,
            num_preemptions=sum(c.num_preemptions for c in self.children),
        )
        return RequestOutput(request_id=self.request_id, prompt=self.prompt, prompt_token_ids=self.prompt_token_ids,
                             prompt_logprobs=self._prompt_logprobs(first, tokenizer), outputs=comps,
                             finished=self.finished, metrics=metrics, num_cached_tokens=first.num_cached_tokens)

    def _prompt_logprobs(self, req: Request, tokenizer):
        """Prompt logprobs are complete before the first token is sampled: decode their text once."""
        if req.prompt_logprobs is not None and not self.prompt_logprobs_decoded:
            decode_logprobs(req.prompt_logprobs, tokenizer)
            self.prompt_logprobs_decoded = True
        return req.prompt_logprobs
