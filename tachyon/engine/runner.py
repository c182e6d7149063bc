"""ModelRunner: owns the KV-cache tensors, runs the model once per step, samples.

Contract: `execute` gets a non-empty SchedulerOutput whose requests already hold blocks for every
scheduled token; it returns one token (and logprobs if asked) per request whose chunk reached its
last token, and fills prompt logprobs for requests that asked. It never touches the block pool.
`launch` (overlap scheduling) runs a step that `can_launch` accepted without waiting for it: a pure decode
batch, a prefill step in which every request samples, or a graphed mixed step (whose chunks may stop short of
their prompts' ends); every request whose scheduled tokens reach its last token draws one token. Such a step may
hold structured-output rows (sampler.redrawn_when_launched): `finish_launch` redraws them from their masked logits
once the previous step's tokens are processed, still without waiting for the device; and rows that asked for
logprobs, which `finish_launch` computes on the device and copies to the host with the tokens. The one-time
CUDA start-up (warm-up, memory profile, cache and graph capture) is runner_startup.RunnerStartup's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tachyon import kernels
from tachyon.engine.batch import build_batch, prune_last_layer
from tachyon.engine.request import Request
from tachyon.engine.runner_startup import RunnerStartup
from tachyon.engine.sampler import (
    Sampler,
    SampleResult,
    compute_logprobs,
    draw_tokens,
    logprob_dict,
    logprob_rows,
    logprobs_on_device,
    needs_host_logits,
    redrawn_when_launched,
    reshapes_logits,
)
from tachyon.engine.scheduler import SchedulerOutput
from tachyon.engine.staging import to_device_async
from tachyon.models.spec import ModelSpec

# Prompt logprobs take the full-vocabulary logits of every prompt row, ~11 bytes per (row, vocab entry) at their peak
# (logits, fp32 log-softmax, the rank mask): 512 rows of a 152k vocabulary ~0.9 GB, whatever the step's token budget.
PROMPT_LOGPROB_ROWS = 512


@dataclass
class PendingStep:
    """A launched step whose sampled tokens (one per request) are still in flight to the host."""

    requests: list[Request]  # those that draw a token, in the step's order
    host_tokens: torch.Tensor  # one row per scheduled request
    event: torch.cuda.Event | None
    rows: list[int] | None = None  # each drawing request's row of host_tokens; None: row i is requests[i]'s
    # a decode step with rows whose logits change before their draw (sampler.needs_host_logits): the step's logits
    # (valid until the next launch) for ModelRunner.finish_launch, which redraws those rows and then copies the
    # tokens to the host; None: copied at launch
    logits: torch.Tensor | None = None
    redrawn: bool = False  # finish_launch redrew rows: their matchers are fed when the tokens reach the host
    # a decode step's rows that asked for logprobs (finish_launch computes them on the device and copies them to the
    # host with the tokens): their indices, each one's top-k size, and logprobs_on_device's tensors on the host
    logprob_rows: list[int] | None = None
    logprob_ks: list[int] | None = None
    host_logprobs: tuple[torch.Tensor, ...] | None = None

    def tokens(self) -> list[int]:
        if self.event is not None:
            self.event.synchronize()
        values = self.host_tokens.tolist()
        return values if self.rows is None else [values[i] for i in self.rows]

    def logprobs(self) -> list:
        """Per request (as `requests`): (token logprob, rank, top ids, top logprobs), or None where not asked."""
        out: list = [None] * len(self.requests)
        if self.logprob_rows:
            if self.event is not None:
                self.event.synchronize()
            for i, row in zip(self.logprob_rows, logprob_rows(*self.host_logprobs, self.logprob_ks)):
                out[i] = row
        return out


@dataclass
class StepResult:
    sampled: list[Request]
    result: SampleResult


class ModelRunner(RunnerStartup):
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
        self.warmup_parts_s: dict[str, object] = {}  # warm_up's parts (s)
        self.compile_pass = None  # the warm-up's compile pass (kernels/precompile.CompilePass), once run
        self.eager_compile_pass = None  # its second pass, the eager step classes' (modules loaded on first launch)
        self.num_graphs: dict[str, int] = {}  # graphs captured per family
        self.eager_runs: dict[str, int] = {}  # of those, captures that needed an eager run first
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
        # overlap feed: the last decode step's sampled tokens stay on the device; rows by request (one more than
        # max_num_seqs: a mixed step of max_num_seqs - 1 decodes has a second chunk's sample row)
        rows = max(max_num_seqs, 1) + 1
        self.last_tokens = torch.zeros(rows, dtype=torch.int64, device=device)
        self._prev_rows: dict[int, int] = {}
        pin = device.type == "cuda"
        self._host_tokens = [torch.zeros(rows, dtype=torch.int64, pin_memory=pin) for _ in range(2)]
        # one completion event per host-token buffer, recorded again at each launch that takes the buffer (no
        # per-step event objects). A launch reuses the set of the launch two before, whose PendingStep the
        # engine has drained by then (it drains each step's tokens in the call that launches the next).
        self._token_events = [torch.cuda.Event() for _ in range(2)] if pin else [None, None]
        self._flip = 0
        self.num_launched = 0  # overlapped decode steps (for tests and stats)
        self.num_prefills_launched = 0  # overlapped prefill steps
        self.num_mixed_launched = 0  # overlapped mixed-graph steps
        self.num_rows_redrawn = 0  # launched decode rows redrawn by finish_launch (for tests and stats)
        self.num_logprob_rows_launched = 0  # launched decode rows whose logprobs finish_launch computed
        self._launch_redraws = False  # set by can_launch for the launch that follows
        self._launch_logprobs = False  # the same: the decode batch holds rows that asked for logprobs

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
        `_prefill_launchable`), or a graphed mixed step (`_mixed_launchable`), whose rows need no host-side logits
        work but what `finish_launch` does on the device: redraws (sampler.redrawn_when_launched) and logprobs
        (whether the step holds either is kept for the `launch` that follows)."""
        if not (self._graph_eligible(sched) or self._prefill_launchable(sched) or self._mixed_launchable(sched)):
            return False
        redraws = logprobs = False
        for r in sched.requests:
            p = r.params
            logprobs = logprobs or p.logprobs is not None
            if reshapes_logits(p) or r.num_sampled < p.min_tokens:  # (a draw under min_tokens bans EOS and stops)
                if not redrawn_when_launched(r):
                    return False
                redraws = True
            if r.num_pending and id(r) not in self._prev_rows:
                return False
        self._launch_redraws = redraws
        self._launch_logprobs = logprobs
        return True

    def _mixed_launchable(self, sched: SchedulerOutput) -> bool:
        """A mixed graph fits: the decode rows' pending tokens are read on the device (`can_launch` checks they are
        the last step's); a chunk's tokens are all on the host; only chunks that reach their prompt's end draw."""
        return self.mixed_graphs is not None and self.mixed_graphs.fits(sched)

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
        rows = None  # every request draws, but in a mixed step whose chunk stops short of its prompt's end
        if max(sched.num_new_tokens) == 1:
            logits = self._launch_decode(sched)
        elif self._mixed_launchable(sched) and not (self._prefill_launchable(sched) and self.prefill_graphs is not None
                                                    and self.prefill_graphs.fits(sched)):
            logits = self._launch_mixed(sched)  # as in `execute`, a prefill graph that fits goes first (less padding)
            rows = [i for i, (r, n) in enumerate(zip(reqs, sched.num_new_tokens))
                    if r.num_computed_tokens + n == r.num_tokens]
            if len(rows) == bs:
                rows = None
        else:
            logits = self._launch_prefill(sched)
        self._prev_rows = {id(r): i for i, r in enumerate(reqs)}
        host, event = self._host_tokens[self._flip], self._token_events[self._flip]
        self._flip ^= 1
        drawing = list(reqs) if rows is None else [reqs[i] for i in rows]
        if self._launch_redraws or self._launch_logprobs:  # finish_launch redraws rows, computes logprobs, copies
            return PendingStep(drawing, host[:bs], event, rows, logits=logits)
        self._copy_tokens(host[:bs], event)
        return PendingStep(drawing, host[:bs], event, rows)

    def _copy_tokens(self, host: torch.Tensor, event: torch.cuda.Event | None) -> None:
        host.copy_(self.last_tokens[: host.numel()], non_blocking=True)
        if event is not None:
            event.record()

    @torch.inference_mode()
    def finish_launch(self, pending: PendingStep) -> None:
        """Complete a launched step whose PendingStep holds logits: the rows that need host-side logits work
        (structured rows, and biased, penalised or min_tokens ones under sampler.LAUNCHED_REDRAWS "all") draw again
        from their changed logits, into last_tokens (where the next launch reads them), and the rows asking for
        logprobs get them, without waiting for the device; then the tokens go to the host. Called after the engine
        has processed the previous step's tokens (so each row's history, and its matcher, hold every token before
        this draw) and before the next launch. Requests finished meanwhile keep the raw draw (the engine discards
        it)."""
        if pending.logits is None:
            return
        reqs = pending.requests
        at = pending.rows or range(len(reqs))  # each drawing request's row of the logits and of last_tokens
        redraw = [k for k, r in enumerate(reqs) if not r.finished and needs_host_logits(r)]
        if redraw:
            self.sampler.redraw(pending.logits, [at[k] for k in redraw], [reqs[k] for k in redraw], self.last_tokens)
            self.num_rows_redrawn += len(redraw)
            pending.redrawn = True
        want = [k for k, r in enumerate(reqs) if not r.finished and r.params.logprobs is not None]
        if want:
            self._launched_logprobs(pending, want, [at[k] for k in want])
        pending.logits = None
        self._copy_tokens(pending.host_tokens, pending.event)

    def _launched_logprobs(self, pending: PendingStep, want: list[int], rows: list[int]) -> None:
        """Logprobs of pending.requests[want[k]], whose row is rows[k] (of the raw logits, for the tokens finally
        drawn), computed on the device and copied to pinned host tensors behind the step, for
        `PendingStep.logprobs` once its event has passed."""
        dev = self.device
        idx = to_device_async(torch.tensor(rows, dtype=torch.long), dev)
        ks = [pending.requests[i].params.logprobs for i in want]
        on_device = logprobs_on_device(pending.logits.index_select(0, idx), self.last_tokens.index_select(0, idx),
                                       max(ks))
        pin = dev.type == "cuda"
        host = tuple(torch.empty(t.shape, dtype=t.dtype, pin_memory=pin) for t in on_device)
        for h, t in zip(host, on_device):
            h.copy_(t, non_blocking=pin)
        pending.logprob_rows, pending.logprob_ks, pending.host_logprobs = want, ks, host
        self.num_logprob_rows_launched += len(want)

    def _launch_decode(self, sched: SchedulerOutput) -> torch.Tensor:
        """A request whose last token is still pending takes it from the previous step's row of last_tokens.
        Returns the step's logits (one row per request; a graph's are valid until its next run)."""
        reqs = sched.requests
        self.num_launched += 1
        src = [self._prev_rows[id(r)] if r.num_pending else -1 for r in reqs]
        if self.graphs is not None:
            return self.graphs.run(reqs, src)[0]  # the graph itself writes last_tokens[:bs]
        return self._draw(self._eager_decode_hidden(sched, src), reqs)

    def _eager_decode_hidden(self, sched: SchedulerOutput, src: list[int]) -> torch.Tensor:
        """An eager decode step's final hidden states (one row per request); request i's input token is
        last_tokens[src[i]] where src[i] >= 0, else its last known token. Start-up's eager probes run it too."""
        batch = build_batch(sched, self.block_size, self.device)
        src_t = torch.tensor(src, dtype=torch.int64, device=self.device)
        x = kernels.embed_step(self.model.embed_tokens.weight, batch.input_ids, src_t, self.last_tokens)
        return self.model(None, batch.positions, batch.meta, inputs_embeds=x)

    def _launch_mixed(self, sched: SchedulerOutput) -> torch.Tensor:
        """A `_mixed_launchable` step: decode rows whose token is pending read it from the previous step's row.
        Returns the logits (one row per request, valid until the graph's next run)."""
        self.num_mixed_launched += 1
        src = [self._prev_rows[id(r)] if r.num_pending else -1
               for r in sched.requests[: self.mixed_graphs.num_decodes(sched)]]
        return self.mixed_graphs.run(sched, src)[0]  # its sampler writes last_tokens[:len(requests)]

    def _launch_prefill(self, sched: SchedulerOutput) -> torch.Tensor:
        """Same draws as `execute` (same seeds and steps, GPU-side sampling), into last_tokens[:n]; returns the
        logits (one row per request; a graph's are valid until its next run)."""
        self.num_prefills_launched += 1
        if self.prefill_graphs is not None and self.prefill_graphs.fits(sched):
            return self.prefill_graphs.run(sched)[0]  # built on last_tokens: its sampler writes them there
        return self._draw(self._eager_prefill_hidden(sched), sched.requests)

    def _eager_prefill_hidden(self, sched: SchedulerOutput) -> torch.Tensor:
        """An eager prefill step's final hidden states of its logits rows (one per request: every request of a
        launched prefill samples). Start-up's eager probes run it too."""
        batch = build_batch(sched, self.block_size, self.device, keep_logits_rows=prune_last_layer())
        hidden = self.model(batch.input_ids, batch.positions, batch.meta, keep=batch.keep)
        return batch.logits_hidden(hidden)

    def _draw(self, hidden: torch.Tensor, reqs: list[Request]) -> torch.Tensor:
        """Sample one token per row of `hidden` (one row per request) into last_tokens[:len(reqs)]; returns the
        logits."""
        logits = self.model.compute_logits(hidden).float()
        draw_tokens(logits, reqs, out=self.last_tokens[: len(reqs)])
        return logits

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
