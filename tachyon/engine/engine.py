"""LLMEngine: the synchronous core. add_request / abort / step. Not thread-safe: one thread drives it
(LLM directly, AsyncEngine through its engine thread)."""

from __future__ import annotations

import itertools
import logging
import numbers
import random
import threading
import time
from dataclasses import dataclass

import torch

from tachyon.config import EngineConfig
from tachyon.engine.detokenizer import IncrementalDetokenizer
from tachyon.engine.engine_startup import EngineStartup
from tachyon.engine.outputs import RequestGroup, decode_logprobs
from tachyon.engine.request import Request, RequestStatus
from tachyon.engine.sampler import feed_matchers, logprob_dict
from tachyon.engine.scheduler import SchedulerOutput
from tachyon.kernels.late_compiles import LateCompileWatch, engine_starting, log_late_compile
from tachyon.sampling import RequestOutput, SamplingParams

log = logging.getLogger("tachyon.engine")
_SEED_MASK = (1 << 63) - 1  # sampling seeds travel as int64


@dataclass
class EngineStats:
    num_running: int
    num_waiting: int
    kv_usage: float
    num_free_blocks: int
    num_total_blocks: int
    num_preemptions: int
    prompt_tokens_total: int
    generation_tokens_total: int
    prefix_cache_queries: int = 0  # tokens of requests admitted with prefix caching on
    prefix_cache_hits: int = 0  # of those, tokens found in the cache (not recomputed)
    prefix_cache_waits: int = 0  # admissions held back a step for a shared prefix another request was computing
    late_kernel_compiles: int = 0  # Triton compiles after start-up (kernels/late_compiles.py; CUDA)


def token_id_list(prompt: object) -> list[int] | None:
    """`prompt` as a list of Python ints if it is a list or tuple of integers (numpy's too, not bools) or a 1-D
    integer numpy array or torch tensor; else None."""
    if isinstance(prompt, torch.Tensor) or type(prompt).__module__ == "numpy":
        if getattr(prompt, "ndim", None) != 1 or str(prompt.dtype).split(".")[-1] not in _INT_DTYPES:
            return None
        return [int(t) for t in prompt.tolist()]
    if not isinstance(prompt, (list, tuple)):
        return None
    kinds = set(map(type, prompt))  # one C-level pass: a per-token isinstance on the ABC cost ~0.5 us a token
    if kinds <= {int}:
        return list(prompt)
    if bool in kinds or not all(issubclass(k, numbers.Integral) for k in kinds):
        return None
    return [int(t) for t in prompt]


_INT_DTYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}


class LLMEngine(EngineStartup):
    def __init__(self, config: EngineConfig):
        with engine_starting():  # no armed watch counts this start-up's compiles (another engine's, one process)
            self._start_up(config)
        # Triton compiles from here on: each stalls the step that launches it (logged; stats().late_kernel_compiles)
        self.late_compiles = LateCompileWatch(log_late_compile)
        if self.device.type == "cuda":
            self.late_compiles.arm()
        self.overlap = (config.overlap_scheduling if config.overlap_scheduling is not None
                        else self.device.type == "cuda")
        self._pending = None  # the launched step whose tokens are still in flight (overlap)
        self._deferred: SchedulerOutput | None = None  # a synchronous step scheduled but held for the next call
        self._rng = random.Random(config.seed)
        self._rng_lock = threading.Lock()
        self._group_salts = itertools.count(1)  # n > 1 groups' block-hash salts (make_group; next() is atomic)
        self._groups: dict[str, RequestGroup] = {}
        self._children: dict[str, Request] = {}
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0

    # ---- requests -----------------------------------------------------------------------------
    def add_request(self, request_id: str, prompt: str | list[int], params: SamplingParams | None = None,
                    *, arrival_time: float | None = None) -> None:
        """Validate and queue. Raises ValueError (naming the field and the limit) on bad input."""
        self.add_group(self.make_group(request_id, prompt, params, arrival_time=arrival_time))

    def make_group(self, request_id: str, prompt: str | list[int], params: SamplingParams | None = None,
                   *, arrival_time: float | None = None) -> RequestGroup:
        """Tokenise and validate into a RequestGroup without touching engine state (safe from any thread)."""
        params = params or SamplingParams()
        text, ids = self._tokenize(prompt)
        if not ids:
            raise ValueError("prompt must not be empty")
        if len(ids) >= self.max_model_len:
            raise ValueError(f"prompt is {len(ids)} tokens; it must be shorter than max_model_len "
                             f"({self.max_model_len}) to leave room for output")
        if min(ids) < 0 or max(ids) >= self.spec.vocab_size:
            raise ValueError(f"prompt token ids must be in [0, {self.spec.vocab_size}), "
                             f"got {min(ids)}..{max(ids)}")
        if params.logit_bias and max(params.logit_bias) >= self.spec.vocab_size:
            raise ValueError(f"logit_bias: token id {max(params.logit_bias)} is out of range "
                             f"[0, {self.spec.vocab_size})")
        if params.stop and self.tokenizer is None:
            raise ValueError("stop strings need a tokenizer; this model has none (use stop_token_ids)")
        with self._rng_lock:
            base_seed = params.seed if params.seed is not None else self._rng.getrandbits(62)
        matcher = self.grammars.matcher(params.structured_outputs) if params.structured_outputs else None
        # prefix caching off: the children still compute their shared prompt once (kv_cache.py)
        salt = (hash(("n>1 group", next(self._group_salts)))
                if params.n > 1 and not self.scheduler.kv.enable_caching else None)
        children = []
        for i in range(params.n):
            rid = request_id if params.n == 1 else f"{i}_{request_id}"
            child = Request(rid, ids, params, eos_token_ids=self.spec.eos_token_ids,
                            max_model_len=self.max_model_len, sample_seed=(base_seed * 1_000_003 + i) & _SEED_MASK,
                            arrival_time=arrival_time, parent_id=request_id, index=i)
            child.prefix_salt = salt
            if matcher is not None:
                child.matcher = matcher if i == params.n - 1 else matcher.deep_copy()
            if self.tokenizer is not None and params.detokenize:
                child.detokenizer = IncrementalDetokenizer(
                    self.tokenizer, ids, stop=params.stop, include_stop_str_in_output=params.include_stop_str_in_output,
                    skip_special_tokens=params.skip_special_tokens, min_tokens=params.min_tokens)
            children.append(child)
        return RequestGroup(request_id, text, ids, children)

    def add_group(self, group: RequestGroup) -> None:
        """Queue a group made by `make_group` (engine thread only)."""
        if group.request_id in self._groups:
            raise ValueError(f"request_id {group.request_id!r} is already in use")
        self._groups[group.request_id] = group
        for c in group.children:
            self._children[c.request_id] = c
            self.scheduler.add(c)
        self.prompt_tokens_total += len(group.prompt_token_ids) * len(group.children)

    def _tokenize(self, prompt: str | list[int]) -> tuple[str | None, list[int]]:
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise ValueError("this model has no tokenizer: pass prompt_token_ids")
            return prompt, self.tokenizer.encode(prompt, add_special_tokens=True) if prompt else []
        ids = token_id_list(prompt)
        if ids is None:
            raise ValueError("prompt must be a string or a list of token ids (ints; a 1-D integer array or tensor "
                             "also does)")
        return None, ids

    def abort(self, request_id: str) -> bool:
        """Finish a request now and free its blocks. Idempotent; True if it was live."""
        group = self._groups.pop(request_id, None)
        if group is None:
            return False
        for c in group.children:
            if not c.finished:
                self.scheduler.finish(c, RequestStatus.FINISHED_ABORTED)
            self._children.pop(c.request_id, None)
        return True

    def has_unfinished(self) -> bool:
        return bool(self._groups)

    # ---- the step -----------------------------------------------------------------------------
    def step(self, finished_only: bool = False) -> list[RequestOutput]:
        """Run one scheduled batch; outputs for every request that produced a token or finished
        (`finished_only`: only for finished ones — offline use, saves per-step host work).

        Overlap scheduling: a pure decode batch, a prefill step in which every request draws its
        next token, or a graphed mixed step is launched asynchronously and the previous launched
        step's tokens are processed on the host while it runs; its outputs appear one call later.
        A request finished by one of those tokens (a stop token; not max_tokens, whose last step the
        scheduler does not repeat) computed one wasted token, which is discarded.

        A synchronous step (a prompt chunk that draws nothing, an eager step too large for the graphs) after a
        launched one: the launched step's outputs are returned first, and the synchronous step, already scheduled,
        runs at the next call (unless `finished_only`). So a stream's token, or a new prompt's first, is not held
        back for a long prefill chunk's whole step; the caller may add and abort requests between the two calls."""
        sched = self._take_deferred()
        deferred = sched is not None
        if not deferred:
            sched = self.scheduler.schedule()
        now = time.time()
        for req in sched.requests:
            if req.first_scheduled_time is None:
                req.first_scheduled_time = now
        if sched and not deferred and self.overlap and self.runner.can_launch(sched):
            pending = self.runner.launch(sched)
            for req, n in zip(sched.requests, sched.num_new_tokens):
                req.num_computed_tokens += n
                if req.num_computed_tokens == req.num_tokens:  # reached its last token: it draws (a chunk short
                    req.add_placeholder()  # of its prompt's end, in a mixed step, does not)
            self.scheduler.kv.cache_blocks(sched.requests)
            outs = self._drain(finished_only)
            self.runner.finish_launch(pending)  # redraws rows that change their logits, now that their history
            self._pending = pending  # (and matchers) hold the tokens just drained
            return outs
        outs = self._drain(finished_only)
        if outs and not finished_only and sched:
            self._deferred = sched
            return outs
        live = [(r, n) for r, n in zip(sched.requests, sched.num_new_tokens) if not r.finished]
        if not live:
            return outs
        if len(live) < len(sched.requests):
            sched = SchedulerOutput([r for r, _ in live], [n for _, n in live])
        result = self.runner.execute(sched)
        for req, n in zip(sched.requests, sched.num_new_tokens):
            req.num_computed_tokens += n
        self.scheduler.kv.cache_blocks(sched.requests)
        return outs + self._process(sched.requests, result.sampled, result.result.token_ids,
                                    result.result.logprobs, finished_only, fill=False)

    def _take_deferred(self) -> SchedulerOutput | None:
        """The synchronous step held by the last call, if any of its requests is still live (the caller may have
        aborted them all, or a drained stop token finished them; then the scheduler is asked afresh)."""
        sched, self._deferred = self._deferred, None
        if sched is None or all(r.finished for r in sched.requests):
            return None
        return sched

    def _drain(self, finished_only: bool) -> list[RequestOutput]:
        """Process the tokens of the launched step still in flight, if any."""
        pending, self._pending = self._pending, None
        if pending is None:
            return []
        tokens = pending.tokens()
        if pending.redrawn:  # a launched step's structured rows were redrawn on the device: their matchers take the
            fed = [(r, t) for r, t in zip(pending.requests, tokens) if r.matcher is not None and not r.finished]
            if fed:  # tokens here
                feed_matchers([r for r, _ in fed], [t for _, t in fed], self.runner.sampler.masks,
                              self.spec.vocab_size)
        return self._process(pending.requests, pending.requests, tokens, pending.logprobs(), finished_only,
                             fill=True)

    def _process(self, scheduled: list[Request], sampled: list[Request], tokens: list[int], logprobs: list,
                 finished_only: bool, fill: bool) -> list[RequestOutput]:
        now = time.time()
        touched: dict[str, RequestGroup] = {}
        for req, tok, lp in zip(sampled, tokens, logprobs):
            if req.finished:  # aborted, or ended by a token processed earlier: discard
                continue
            self._append(req, tok, lp, now, fill)
            g = self._groups.get(req.parent_id)
            if g is not None:
                touched[g.request_id] = g
        for req in scheduled:  # prompt-logprob-only progress (echo) is reported at the end
            if req.finished:
                req.drop_placeholders()
                self.scheduler.finish(req)
        outs = [g.output(self.tokenizer) for g in touched.values() if not finished_only or g.finished]
        for o in outs:
            if o.finished:
                g = self._groups.pop(o.request_id)
                for c in g.children:
                    self._children.pop(c.request_id, None)
        return outs

    def _append(self, req: Request, token: int, lp, now: float, fill: bool = False) -> None:
        if fill:
            req.fill_placeholder(token)
        else:
            req.append_token(token)
        self.generation_tokens_total += 1
        if req.first_token_time is None:
            req.first_token_time = now
        if lp is not None:
            req.logprobs.append(decode_logprobs([logprob_dict(token, lp)], self.tokenizer)[0])
            req.cumulative_logprob += lp[0]
        stop_str = None
        if req.detokenizer is not None:
            # a stop token (EOS or stop_token_ids) ends the request but is not part of the text
            if not (req.stop_token_hit() and not req.params.include_stop_str_in_output):
                stop_str = req.detokenizer.add_tokens([token])
        req.check_stop(stop_str)
        if req.finished:
            req.finished_time = now

    # ---- introspection ------------------------------------------------------------------------
    def stats(self) -> EngineStats:
        return EngineStats(
            num_running=len(self.scheduler.running), num_waiting=len(self.scheduler.waiting),
            kv_usage=self.pool.usage(), num_free_blocks=self.pool.num_free,
            num_total_blocks=self.pool.num_blocks, num_preemptions=self.scheduler.num_preemptions,
            prompt_tokens_total=self.prompt_tokens_total, generation_tokens_total=self.generation_tokens_total,
            prefix_cache_queries=self.scheduler.kv.num_prefix_queried_tokens,
            prefix_cache_hits=self.scheduler.kv.num_prefix_hit_tokens,
            prefix_cache_waits=self.scheduler.num_prefix_waits, late_kernel_compiles=self.late_compiles.count)

    def reset_prefix_cache(self) -> int:
        """Drop the prefix cache's unreferenced blocks (BlockPool.evict_cached; running requests' blocks stay
        shared): a benchmark's repeat, or a run after a warm-up, then computes every prompt again. Call between
        steps. Returns the blocks dropped."""
        return self.pool.evict_cached()

    def check_integrity(self) -> None:
        """Block-pool invariant, plus: with nothing in flight every block is free; the penalty slots' map."""
        self.pool.check_integrity()
        self.runner.sampler.penalties.check_integrity()
        if not self.has_unfinished():
            assert self.pool.num_free == self.pool.num_blocks, (
                f"{self.pool.num_blocks - self.pool.num_free} KV blocks leaked with no request in flight")
