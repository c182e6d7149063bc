"""Request state machine: WAITING -> RUNNING -> (PREEMPTED -> WAITING ->) FINISHED_*.

A Request is one sequence (a child of an n>1 request is its own Request). It owns its token list
and its block-id list; the block *memory* belongs to the BlockPool, which alone frees it.
"""

from __future__ import annotations

import enum
import time

import torch

from tachyon.sampling import Logprob, SamplingParams

PLACEHOLDER = -1  # an output token sampled on the device whose value the host has not read yet


class RequestStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"
    FINISHED_STOPPED = "stop"
    FINISHED_LENGTH = "length"
    FINISHED_ABORTED = "abort"

    @property
    def finished(self) -> bool:
        return self in (RequestStatus.FINISHED_STOPPED, RequestStatus.FINISHED_LENGTH,
                        RequestStatus.FINISHED_ABORTED)


class Request:
    def __init__(self, request_id: str, prompt_token_ids: list[int], params: SamplingParams,
                 *, eos_token_ids: list[int], max_model_len: int, sample_seed: int,
                 arrival_time: float | None = None, parent_id: str | None = None, index: int = 0):
        self.request_id = request_id
        self.parent_id = parent_id or request_id
        self.index = index
        self.prompt_token_ids = prompt_token_ids
        self.params = params
        self.eos_token_ids = eos_token_ids
        self.sample_seed = sample_seed  # per-step sampling seeds derive from this (batch-independent)
        self.max_tokens = min(params.max_tokens or max_model_len, max_model_len - len(prompt_token_ids))
        self.token_ids: list[int] = list(prompt_token_ids)  # may end in `num_pending` PLACEHOLDERs
        self.num_pending = 0
        self.num_computed_tokens = 0
        self.block_ids: list[int] = []
        self.status = RequestStatus.WAITING
        self.stop_reason: int | str | None = None
        self.logprobs: list[dict[int, Logprob]] | None = [] if params.logprobs is not None else None
        self.prompt_logprobs: list[dict[int, Logprob] | None] | None = (
            [None] if params.prompt_logprobs is not None else None)
        self.cumulative_logprob = 0.0
        self.num_preemptions = 0
        self.arrival_time = arrival_time if arrival_time is not None else time.time()
        self.first_scheduled_time: float | None = None
        self.first_token_time: float | None = None
        self.finished_time: float | None = None
        self.detokenizer = None  # set by the engine when a tokenizer exists
        self.matcher = None  # llguidance matcher of params.structured_outputs (engine/structured.py), set by the engine
        self._logit_bias: tuple[torch.Tensor, torch.Tensor] | None = None
        self.block_hashes: list[int] = []  # chained hashes of its leading full known blocks (kv_cache.py)
        self.num_registered_blocks = 0  # of its current blocks, those registered in the prefix cache
        # with prefix caching off: the salt an n > 1 request's children start their block hashes from, so they share
        # their prompt's blocks with one another only (kv_cache.py); None: no sharing beyond the prefix cache's
        self.prefix_salt: int | None = None
        self.num_cached_tokens = 0  # leading tokens its last admission found in the prefix cache

    def logit_bias_tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """params.logit_bias as host tensors (token ids int64, biases float32), made on the first call and kept."""
        if self._logit_bias is None:
            bias = self.params.logit_bias or {}
            self._logit_bias = (torch.tensor(list(bias), dtype=torch.long),
                                torch.tensor(list(bias.values()), dtype=torch.float32))
        return self._logit_bias

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens: len(self.token_ids) - self.num_pending]

    @property
    def num_output_tokens(self) -> int:
        """Real (host-known) output tokens; excludes pending placeholders."""
        return len(self.token_ids) - len(self.prompt_token_ids) - self.num_pending

    @property
    def num_sampled(self) -> int:
        """Output tokens sampled so far, pending ones included: the step index of the next draw."""
        return len(self.token_ids) - len(self.prompt_token_ids)

    @property
    def awaits_last_token(self) -> bool:
        """Its final token by length (max_tokens, or the context limit) is sampled but still in flight: it ends
        when that token arrives, whatever its value, so it needs no further step."""
        return self.num_pending > 0 and self.num_sampled >= self.max_tokens

    @property
    def last_token(self) -> int:
        return self.token_ids[len(self.token_ids) - self.num_pending - 1]

    @property
    def finished(self) -> bool:
        return self.status.finished

    @property
    def finish_reason(self) -> str | None:
        return self.status.value if self.finished else None

    def wants_prompt_logprobs(self) -> bool:
        return self.prompt_logprobs is not None and len(self.prompt_logprobs) < self.num_prompt_tokens

    def append_token(self, token_id: int) -> None:
        self.token_ids.append(token_id)

    def add_placeholder(self) -> None:
        self.token_ids.append(PLACEHOLDER)
        self.num_pending += 1

    def fill_placeholder(self, token_id: int) -> None:
        """The oldest pending token's value has arrived from the device."""
        self.token_ids[len(self.token_ids) - self.num_pending] = token_id
        self.num_pending -= 1

    def drop_placeholders(self) -> None:
        """A finished request forgets tokens sampled after its end (overlap ran one step ahead)."""
        if self.num_pending:
            del self.token_ids[-self.num_pending:]
            self.num_pending = 0

    def stop_token_hit(self) -> bool:
        """True if the token just appended is EOS (unless ignore_eos) or a stop token, past min_tokens."""
        if self.num_output_tokens < self.params.min_tokens:
            return False
        last = self.last_token
        return (not self.params.ignore_eos and last in self.eos_token_ids) or last in self.params.stop_token_ids

    def check_stop(self, stop_string: str | None) -> None:
        """Decide whether the token just appended ends the request (vLLM's order of checks)."""
        last = self.last_token
        if self.stop_token_hit():
            self.status = RequestStatus.FINISHED_STOPPED
            is_eos = not self.params.ignore_eos and last in self.eos_token_ids
            self.stop_reason = None if is_eos else last
            return
        if stop_string is not None and self.num_output_tokens >= self.params.min_tokens:
            self.status, self.stop_reason = RequestStatus.FINISHED_STOPPED, stop_string
            return
        if self.num_output_tokens >= self.max_tokens:
            self.status = RequestStatus.FINISHED_LENGTH

    def reset_for_recompute(self) -> None:
        """Preemption by recompute: forget the KV state; tokens generated so far are kept and re-prefilled."""
        self.num_computed_tokens = 0
        self.block_ids = []
        self.status = RequestStatus.PREEMPTED
        self.num_preemptions += 1
