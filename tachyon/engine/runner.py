"""ModelRunner: owns the KV-cache tensors, runs the model once per step, samples.

Contract: `execute` gets a non-empty SchedulerOutput whose requests already hold blocks for every
scheduled token; it returns one token (and logprobs if asked) per request whose chunk reached its
last token, and fills prompt logprobs for requests that asked. It never touches the block pool.
`launch` (overlap scheduling) runs a step that `can_launch` accepted without waiting for it: a pure decode
batch, a prefill step in which every request samples, or a graphed mixed step whose chunk completes its prompt;
in each case every request draws one token.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import torch

from tachyon import kernels
from tachyon.engine.batch import build_batch
from tachyon.engine.request import Request
from tachyon.engine.sampler import Sampler, SampleResult, compute_logprobs, logprob_dict, sampling_tensors
from tachyon.engine.scheduler import SchedulerOutput
from tachyon.models.spec import ModelSpec

PREFILL_GRAPH_SEQS = 8  # most requests in one graphed prefill / mixed step
MIXED_GRAPH_DECODES = 256  # most decode rows beside the prompt chunk of one graphed mixed step
# Prompt logprobs take the full-vocabulary logits of every prompt row, ~11 bytes per (row, vocab entry) at their peak
# (logits, fp32 log-softmax, the rank mask): 512 rows of a 152k vocabulary ~0.9 GB, whatever the step's token budget.
PROMPT_LOGPROB_ROWS = 512


def prune_last_layer() -> bool:
    """Eager steps run the last layer's attention output path and MLP only on the rows that sample (a prefill
    chunk's other rows feed nothing after it; models' `keep`). TACHYON_PRUNE_LAST_LAYER=0: every row (an A/B
    knob, read per step)."""
    return os.environ.get("TACHYON_PRUNE_LAST_LAYER", "1") != "0"


@dataclass
class PendingStep:
    """A launched step whose sampled tokens (one per request) are still in flight to the host."""

    requests: list[Request]
    host_tokens: torch.Tensor
    event: torch.cuda.Event | None

    def tokens(self) -> list[int]:
        if self.event is not None:
            self.event.synchronize()
        return self.host_tokens.tolist()


@dataclass
class StepResult:
    sampled: list[Request]
    result: SampleResult


def kv_cache_bytes_per_block(spec: ModelSpec, block_size: int, dtype: torch.dtype) -> int:
    elem = torch.tensor([], dtype=dtype).element_size()
    return 2 * spec.num_layers * block_size * spec.num_kv_heads * spec.head_dim * elem


class ModelRunner:
    """Owns the KV-cache tensors (allocated once by `allocate_kv`) and, on CUDA, the decode graphs."""

    def __init__(self, model: torch.nn.Module, spec: ModelSpec, *, block_size: int, device: torch.device,
                 dtype: torch.dtype, max_num_seqs: int, max_model_len: int, use_cuda_graphs: bool,
                 prefill_graph_tokens: int = 0, kv_dtype: torch.dtype | None = None, mixed_graph_tokens: int = 0):
        self.model = model
        self.spec = spec
        self.block_size = block_size
        self.device = device
        self.dtype = dtype
        self.kv_dtype = kv_dtype or dtype  # the KV cache's element type (float8_e4m3fn: kv_cache_dtype="fp8")
        self.max_num_seqs = max_num_seqs
        self.max_model_len = max_model_len
        self.use_cuda_graphs = use_cuda_graphs and device.type == "cuda"
        self.kv_caches: list[torch.Tensor] = []
        self.num_blocks = 0
        self.capture_s: dict[str, float] = {}  # allocate_kv's parts (s)
        self.num_graphs: dict[str, int] = {}  # graphs captured per family
        self.profile: dict = {}  # warm_up's kernel choices and profile_kv_budget's memory figures (CUDA)
        self.sampler = Sampler()
        self.graphs = None
        # graphed prefill needs at least one 16-token bucket to be worth capturing
        self.prefill_graph_tokens = prefill_graph_tokens if self.use_cuda_graphs and prefill_graph_tokens >= 16 else 0
        self.prefill_graphs = None
        # graphed mixed steps (decodes + one prompt chunk of at most this many tokens); 0: off
        # (a mixed step holds at least one decode beside its chunk: two sequences)
        self.mixed_graph_tokens = (mixed_graph_tokens if self.use_cuda_graphs and mixed_graph_tokens >= 2
                                   and max_num_seqs >= 2 else 0)
        self.mixed_graphs = None
        # overlap feed: the last decode step's sampled tokens stay on the device; rows by request
        self.last_tokens = torch.zeros(max(max_num_seqs, 1), dtype=torch.int64, device=device)
        self._prev_rows: dict[int, int] = {}
        pin = device.type == "cuda"
        self._host_tokens = [torch.zeros(max(max_num_seqs, 1), dtype=torch.int64, pin_memory=pin) for _ in range(2)]
        # one completion event per host-token buffer, recorded again at each launch that takes the buffer (no
        # per-step event objects). A launch reuses the set of the launch two before, whose PendingStep the
        # engine has drained by then (it drains each step's tokens in the call that launches the next).
        self._token_events = [torch.cuda.Event() for _ in range(2)] if pin else [None, None]
        self._flip = 0
        self.num_launched = 0  # overlapped decode steps (for tests and stats)
        self.num_prefills_launched = 0  # overlapped prefill steps
        self.num_mixed_launched = 0  # overlapped mixed-graph steps

    def _new_caches(self, num_blocks: int) -> list[torch.Tensor]:
        shape = (2, num_blocks, self.block_size, self.spec.num_kv_heads, self.spec.head_dim)
        return [torch.zeros(shape, dtype=self.kv_dtype, device=self.device) for _ in range(self.spec.num_layers)]

    def _graph_runner(self):
        from tachyon.engine.cuda_graph import DecodeGraphRunner

        return DecodeGraphRunner(self.model, max_batch=self.max_num_seqs, max_model_len=self.max_model_len,
                                 block_size=self.block_size, vocab_size=self.spec.vocab_size, device=self.device,
                                 last_tokens=self.last_tokens)

    def _prefill_graph_runner(self):
        from tachyon.engine.prefill_graph import PrefillGraphRunner

        return PrefillGraphRunner(self.model, max_tokens=self.prefill_graph_tokens,
                                  max_seqs=min(PREFILL_GRAPH_SEQS, self.max_num_seqs), max_model_len=self.max_model_len,
                                  block_size=self.block_size, vocab_size=self.spec.vocab_size, device=self.device,
                                  last_tokens=self.last_tokens)

    def _mixed_graph_runner(self):
        from tachyon.engine.mixed_graph import MixedGraphRunner

        return MixedGraphRunner(self.model, max_decodes=min(MIXED_GRAPH_DECODES, self.max_num_seqs - 1),
                                max_chunk=self.mixed_graph_tokens, max_model_len=self.max_model_len,
                                block_size=self.block_size, vocab_size=self.spec.vocab_size, device=self.device,
                                last_tokens=self.last_tokens)

    def _compile_kernels(self, ids: torch.Tensor, positions: torch.Tensor, meta, t: int) -> None:
        """Compile, in parallel, the Triton kernels of the profile step, of every decode-graph bucket (and its
        unfiltered-sampling twin) and of every prefill-graph token bucket (each may take its own attention
        config): their launches only compile here (kernels/precompile.py), so the profile and the graph
        captures that follow find them compiled. Results are discarded; the shared last-token buffer is reset."""
        from tachyon.kernels.precompile import compile_only

        with compile_only(self.device) as compiling:
            if not compiling:
                return
            hidden = self.model(ids, positions, meta)
            self.model.compute_logits(hidden[-min(t, self.max_num_seqs):]).float()
            if self.use_cuda_graphs:
                probe = self._graph_runner()
                probe.pad_inputs()  # as at capture: padding rows read their (valid) input ids
                for bs in probe.buckets:
                    probe._step(bs)
                    if probe.has_twin(bs):
                        probe._step(bs, unfiltered=True)
                    self.last_tokens.zero_()  # the step "sampled" garbage: keep every gathered id valid
                if self.prefill_graph_tokens:
                    prefill = self._prefill_graph_runner()
                    prefill.pad_inputs()
                    for t in prefill.token_buckets:  # the sequence bucket changes no kernel variant
                        prefill._step(t, min(t, prefill.max_seqs))
                    self.last_tokens.zero_()
                if self.mixed_graph_tokens:
                    mixed = self._mixed_graph_runner()
                    mixed.pad_inputs()
                    for key in mixed.compile_keys():
                        mixed._step(*key)
                        self.last_tokens.zero_()
        torch.cuda.synchronize()
        self.last_tokens.zero_()

    def _profile_step(self, max_num_batched_tokens: int):
        """Inputs of the largest step (one sequence of min(budget, max_model_len) tokens, slots -1)."""
        from tachyon.engine.batch import AttentionMetadata

        t = min(max_num_batched_tokens, self.max_model_len)
        dev = self.device
        meta = AttentionMetadata(torch.tensor([0, t], dtype=torch.int32, device=dev),
                                 torch.tensor([t], dtype=torch.int32, device=dev),
                                 torch.full((t,), -1, dtype=torch.int64, device=dev),
                                 torch.zeros(1, -(-t // self.block_size), dtype=torch.int32, device=dev),
                                 t, t, False)
        ids = torch.randint(0, self.spec.vocab_size, (t,), device=dev)
        positions = torch.arange(t, device=dev)
        return ids, positions, meta, t

    @torch.inference_mode()
    def warm_up(self, max_num_batched_tokens: int) -> dict:
        """CUDA only, before allocate_kv, whatever sizes the KV cache: choose the batch-1 projection kernels
        (tune_gemv: Triton GEMV only where it beats cuBLAS) and compile the Triton kernels of every step shape
        the graphs will capture. Returns the GEMV choices (also kept in self.profile["gemv"])."""
        from tachyon.models.layers import tune_gemv

        gemv_choices = tune_gemv(self.model)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        self.model.bind_kv_cache(self._new_caches(1))
        self._compile_kernels(*self._profile_step(max_num_batched_tokens))
        self.model.bind_kv_cache([])
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        self.profile = dict(gemv=gemv_choices)
        return gemv_choices

    @torch.inference_mode()
    def profile_kv_budget(self, max_num_batched_tokens: int, gpu_memory_utilization: float) -> int:
        """CUDA only, after warm_up: bytes left for the KV cache after weights, the peak activations of the
        largest step, and the decode-graph memory pool, under gpu_memory_utilization of the whole card."""
        self.model.bind_kv_cache(self._new_caches(1))
        ids, positions, meta, t = self._profile_step(max_num_batched_tokens)
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        hidden = self.model(ids, positions, meta)
        self.model.compute_logits(hidden[-min(t, self.max_num_seqs):]).float()
        torch.cuda.synchronize()
        activation_peak = torch.cuda.max_memory_allocated() - base
        del hidden
        torch.cuda.empty_cache()
        graph_bytes = 0
        if self.use_cuda_graphs:
            before = torch.cuda.memory_reserved()
            probe = self._graph_runner()
            probe.capture([probe.max_bs])
            probe_prefill = probe_mixed = None
            if self.prefill_graph_tokens:  # its largest bucket, in the same pool, as allocate_kv does
                probe_prefill = self._prefill_graph_runner()
                probe_prefill.capture(pool=probe.pool, keys=[(probe_prefill.max_tokens, probe_prefill.max_seqs)])
            if self.mixed_graph_tokens:  # likewise
                probe_mixed = self._mixed_graph_runner()
                probe_mixed.capture(pool=probe.pool, keys=[(probe_mixed.max_decodes, probe_mixed.max_chunk)])
            # the buckets not captured here keep their logits outputs in the pool too
            graph_bytes = max(0, torch.cuda.memory_reserved() - before) + probe.output_bytes(probe.buckets[:-1])
            for p in (probe, probe_prefill, probe_mixed):
                if p is not None:
                    p.release()
            del probe, probe_prefill, probe_mixed
        self.model.bind_kv_cache([])
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        free, total = torch.cuda.mem_get_info(self.device)
        budget = free - (1.0 - gpu_memory_utilization) * total - activation_peak - graph_bytes
        self.profile.update(activation_peak_bytes=activation_peak, graph_pool_bytes=graph_bytes, free_bytes=free,
                            total_bytes=total, kv_budget_bytes=int(budget))
        return int(budget)

    def allocate_kv(self, num_blocks: int) -> None:
        """Allocate the cache once, bind it to the model, then capture the decode graphs (CUDA). Records the
        seconds of each part in self.capture_s (kv_alloc_s, then decode / prefill / mixed _graphs_s where
        captured) and each family's graph count in self.num_graphs."""
        t0 = time.perf_counter()
        self.num_blocks = num_blocks
        self.kv_caches = self._new_caches(num_blocks)
        self.model.bind_kv_cache(self.kv_caches)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.capture_s = dict(kv_alloc_s=time.perf_counter() - t0)
        self.num_graphs = {}
        if self.use_cuda_graphs:
            self.graphs = self._timed_capture("decode", self._graph_runner(), None)
            if self.prefill_graph_tokens:
                self.prefill_graphs = self._timed_capture("prefill", self._prefill_graph_runner(), self.graphs.pool)
            if self.mixed_graph_tokens:
                self.mixed_graphs = self._timed_capture("mixed", self._mixed_graph_runner(), self.graphs.pool)

    def _timed_capture(self, family: str, runner, pool):
        """Capture `runner`'s graphs (into `pool`; None: its own), recording their seconds and count."""
        t0 = time.perf_counter()
        if pool is None:
            runner.capture()
        else:
            runner.capture(pool=pool)
        self.capture_s[f"{family}_graphs_s"] = time.perf_counter() - t0
        self.num_graphs[family] = len(runner.graphs) + len(getattr(runner, "unfiltered_graphs", {}))
        return runner

    @torch.inference_mode()
    def execute(self, sched: SchedulerOutput) -> StepResult:
        """Synchronous step: inputs and outputs all on the host (no pending placeholders allowed)."""
        self._prev_rows = {}
        if self.graphs is not None and self._graph_eligible(sched):  # sync path: inputs all on the host
            logits, tokens = self.graphs.run(sched.requests, [-1] * len(sched.requests))
            return StepResult(sched.requests, self.sampler(logits, sched.requests, drawn=tokens))
        if self.prefill_graphs is not None and self.prefill_graphs.fits(sched):
            return self._execute_prefill_graph(sched)
        if self.mixed_graphs is not None and self.mixed_graphs.fits(sched):
            return self._execute_mixed_graph(sched)
        keep = prune_last_layer() and not any(r.wants_prompt_logprobs() for r in sched.requests)
        batch = build_batch(sched, self.block_size, self.device, keep_logits_rows=keep)
        hidden = self.model(batch.input_ids, batch.positions, batch.meta, keep=batch.keep)
        if batch.keep is None:
            self._prompt_logprobs(sched, hidden, batch.meta.query_start_loc.tolist())
        sampled = [sched.requests[i] for i in batch.sample_indices]
        if not sampled:
            return StepResult([], SampleResult([], []))
        logits = self.model.compute_logits(batch.logits_hidden(hidden))
        return StepResult(sampled, self.sampler(logits, sampled))

    def _execute_prefill_graph(self, sched: SchedulerOutput) -> StepResult:
        return self._graph_result(sched, *self.prefill_graphs.run(sched))

    def _execute_mixed_graph(self, sched: SchedulerOutput) -> StepResult:
        return self._graph_result(sched, *self.mixed_graphs.run(sched))

    def _graph_result(self, sched: SchedulerOutput, logits: torch.Tensor, tokens: torch.Tensor) -> StepResult:
        """The sampling requests' share of a graphed step's per-request logits and drawn tokens."""
        idx = [i for i, (r, n) in enumerate(zip(sched.requests, sched.num_new_tokens))
               if r.num_computed_tokens + n == r.num_tokens]  # chunks that reach their last token sample
        if not idx:
            return StepResult([], SampleResult([], []))
        sampled = [sched.requests[i] for i in idx]
        if len(idx) < len(sched.requests):
            sel = torch.tensor(idx, device=self.device)
            logits, tokens = logits[sel], tokens[sel]
        return StepResult(sampled, self.sampler(logits, sampled, drawn=tokens))

    def can_launch(self, sched: SchedulerOutput) -> bool:
        """Overlap-eligible: a pure decode batch, a prefill step in which every request samples (see
        `_prefill_launchable`), or a graphed mixed step whose chunk reaches its prompt's end (`_mixed_launchable`),
        whose sampling needs no host-side logits work."""
        if not (self._graph_eligible(sched) or self._prefill_launchable(sched) or self._mixed_launchable(sched)):
            return False
        for r in sched.requests:
            p = r.params
            if (p.logprobs is not None or p.repetition_penalty != 1.0 or p.presence_penalty or p.frequency_penalty
                    or r.num_sampled < p.min_tokens):
                return False
            if r.num_pending and id(r) not in self._prev_rows:
                return False
        return True

    def _mixed_launchable(self, sched: SchedulerOutput) -> bool:
        """A mixed graph fits and its chunk reaches its request's last token: each request draws one token. The
        decode rows' pending tokens are read on the device (`can_launch` checks they are the last step's)."""
        if self.mixed_graphs is None or not self.mixed_graphs.fits(sched):
            return False
        r, n = sched.requests[-1], sched.num_new_tokens[-1]
        return r.num_pending == 0 and r.num_computed_tokens + n == r.num_tokens

    def _prefill_launchable(self, sched: SchedulerOutput) -> bool:
        """Every chunk reaches its request's last token (so each request draws one token), no token is pending
        and none wants prompt logprobs: the step's inputs are all on the host and its output is one token each."""
        if len(sched.requests) > self.last_tokens.numel():
            return False
        return all(r.num_pending == 0 and r.num_computed_tokens + n == r.num_tokens and not r.wants_prompt_logprobs()
                   for r, n in zip(sched.requests, sched.num_new_tokens))

    @torch.inference_mode()
    def launch(self, sched: SchedulerOutput) -> PendingStep:
        """Asynchronous step (overlap scheduling) for a batch `can_launch` accepted: each request's drawn token
        goes to `last_tokens[row]`, where the next launched decode step reads it if it is still pending there.
        Returns at once; `PendingStep.tokens()` waits."""
        reqs = sched.requests
        bs = len(reqs)
        # can_launch accepted it: one new token each is exactly a decode batch (_graph_eligible); more is a mixed
        # graph's step, or a prefill step whose inputs are all on the host
        if max(sched.num_new_tokens) == 1:
            self._launch_decode(sched)
        elif self._mixed_launchable(sched) and not (self._prefill_launchable(sched) and self.prefill_graphs is not None
                                                    and self.prefill_graphs.fits(sched)):
            self._launch_mixed(sched)  # as in `execute`, a prefill graph that fits goes first (less padding)
        else:
            self._launch_prefill(sched)
        self._prev_rows = {id(r): i for i, r in enumerate(reqs)}
        host, event = self._host_tokens[self._flip], self._token_events[self._flip]
        self._flip ^= 1
        host[:bs].copy_(self.last_tokens[:bs], non_blocking=True)
        if event is not None:
            event.record()
        return PendingStep(list(reqs), host[:bs], event)

    def _launch_decode(self, sched: SchedulerOutput) -> None:
        """A request whose last token is still pending takes it from the previous step's row of last_tokens."""
        reqs = sched.requests
        self.num_launched += 1
        src = [self._prev_rows[id(r)] if r.num_pending else -1 for r in reqs]
        if self.graphs is not None:
            self.graphs.run(reqs, src)  # the graph itself writes last_tokens[:bs]
            return
        batch = build_batch(sched, self.block_size, self.device)
        src_t = torch.tensor(src, dtype=torch.int64, device=self.device)
        x = kernels.embed_step(self.model.embed_tokens.weight, batch.input_ids, src_t, self.last_tokens)
        hidden = self.model(None, batch.positions, batch.meta, inputs_embeds=x)
        self._draw(hidden, reqs)

    def _launch_mixed(self, sched: SchedulerOutput) -> None:
        """A `_mixed_launchable` step: decode rows whose token is pending read it from the previous step's row."""
        self.num_mixed_launched += 1
        src = [self._prev_rows[id(r)] if r.num_pending else -1 for r in sched.requests[:-1]]
        self.mixed_graphs.run(sched, src)  # its sampler writes last_tokens[:len(requests)]

    def _launch_prefill(self, sched: SchedulerOutput) -> None:
        """Same draws as `execute` (same seeds and steps, GPU-side sampling), into last_tokens[:n]."""
        self.num_prefills_launched += 1
        if self.prefill_graphs is not None and self.prefill_graphs.fits(sched):
            self.prefill_graphs.run(sched)  # built on last_tokens: its sampler writes them there
            return
        batch = build_batch(sched, self.block_size, self.device, keep_logits_rows=prune_last_layer())
        hidden = self.model(batch.input_ids, batch.positions, batch.meta, keep=batch.keep)
        self._draw(batch.logits_hidden(hidden), sched.requests)

    def _draw(self, hidden: torch.Tensor, reqs: list[Request]) -> None:
        """Sample one token per row of `hidden` (one row per request) into last_tokens[:len(reqs)]."""
        logits = self.model.compute_logits(hidden).float()
        if all(r.params.temperature == 0.0 for r in reqs):
            self.last_tokens[: len(reqs)].copy_(torch.argmax(logits, dim=-1))
        else:
            kernels.sample(logits, *sampling_tensors(reqs, self.device), out=self.last_tokens[: len(reqs)])

    def _graph_eligible(self, sched: SchedulerOutput) -> bool:
        """Pure decode batch (one new token per request, no prompt logprobs) that a graph can run."""
        if len(sched.requests) > (self.graphs.max_bs if self.graphs is not None else self.max_num_seqs):
            return False
        for r, n in zip(sched.requests, sched.num_new_tokens):
            if n != 1 or r.num_computed_tokens != r.num_tokens - 1 or r.wants_prompt_logprobs():
                return False
        return True

    def _prompt_logprobs(self, sched: SchedulerOutput, hidden: torch.Tensor, qsl: list[int]) -> None:
        for i, (req, n) in enumerate(zip(sched.requests, sched.num_new_tokens)):
            if not req.wants_prompt_logprobs():
                continue
            start = req.num_computed_tokens
            # logits at position p predict prompt token p + 1; fill only the next missing entries
            first = len(req.prompt_logprobs) - 1
            last = min(start + n, req.num_prompt_tokens - 1)
            if first < start or first >= last:
                continue
            for a in range(first, last, PROMPT_LOGPROB_ROWS):
                b = min(a + PROMPT_LOGPROB_ROWS, last)
                rows = hidden[qsl[i] + a - start: qsl[i] + b - start]
                targets = req.prompt_token_ids[a + 1: b + 1]
                entries = compute_logprobs(self.model.compute_logits(rows), targets, req.params.prompt_logprobs)
                req.prompt_logprobs.extend(logprob_dict(t, e) for t, e in zip(targets, entries))
