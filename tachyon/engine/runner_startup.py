"""The ModelRunner's one-time CUDA start-up, in the order the engine calls it: `warm_up` (batch-1 kernel choices,
Triton compiles), `profile_kv_budget` (what memory the cache may take), `allocate_kv` (the cache, then the step
graphs). A mixin: it reads and sets ModelRunner's attributes (model, spec, sizes, device, graph runners)."""

from __future__ import annotations

import logging
import time

import torch

from tachyon.models.spec import ModelSpec

log = logging.getLogger("tachyon.engine")

PREFILL_GRAPH_SEQS = 8  # most requests in one graphed prefill / mixed step
MIXED_GRAPH_DECODES = 256  # most decode rows beside the prompt chunk of one graphed mixed step


def kv_cache_bytes_per_block(spec: ModelSpec, block_size: int, dtype: torch.dtype) -> int:
    elem = torch.tensor([], dtype=dtype).element_size()
    return 2 * spec.num_layers * block_size * spec.num_kv_heads * spec.head_dim * elem


class RunnerStartup:
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
        """Compile, in parallel, the Triton kernels of the profile step, of the eager sampler (penalties, draws), of
        every decode-graph bucket (and its unfiltered-sampling twin) and of every prefill-graph token bucket (each may
        take its own attention config): their launches only compile here (kernels/precompile.py), so the profile
        and the graph captures that follow find them compiled (allocate_kv loads their modules before it captures).
        Then, in a second pass whose modules load only when first launched, every eager step class
        (_compile_eager_steps: enforce_eager's steps, and with graphs the steps no graph takes, such as a long
        prompt's prefill). Results are discarded; the shared last-token buffer is reset. What the passes did:
        self.compile_pass, self.eager_compile_pass (kernels/precompile.CompilePass)."""
        from tachyon.kernels.precompile import compile_only

        with compile_only(self.device) as compiling:
            self.compile_pass = compiling
            if not compiling:
                return
            hidden = self.model(ids, positions, meta)
            self.model.compute_logits(hidden[-min(t, self.max_num_seqs):]).float()
            self._compile_sampler_kernels()
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
                    for tokens in prefill.token_buckets:  # the sequence bucket changes no kernel variant
                        prefill._step(tokens, min(tokens, prefill.max_seqs))
                    self.last_tokens.zero_()
                if self.mixed_graph_tokens:
                    mixed = self._mixed_graph_runner()
                    mixed.pad_inputs()
                    for key in mixed.compile_keys():
                        mixed._step(*key)
                        self.last_tokens.zero_()
        torch.cuda.synchronize()
        if compiling:
            # a pass of its own: allocate_kv loads only the first pass's modules before it captures, so the
            # graphs' start-up layout is the same with or without these
            with compile_only(self.device) as eager_pass:
                try:
                    self._compile_eager_steps(t)
                except Exception:  # best effort: a live step of that shape would compile, not fail, for want of it
                    log.warning("the eager step classes' compile pass failed; eager steps may compile Triton late",
                                exc_info=True)
            self.eager_compile_pass = eager_pass
            torch.cuda.synchronize()
        self.last_tokens.zero_()

    def _compile_sampler_kernels(self) -> None:
        """The eager sampler's own Triton kernels, which a live request's first penalised row or first sampled
        eager draw (an eager prefill, enforce_eager) would compile otherwise: kernels.apply_penalties on a one-row
        batch of this vocabulary, and kernels.sample on a filtered one-row batch in sampler.sampling_rows' layout
        (aligned rows: one compile serves every batch size)."""
        from tachyon import kernels
        from tachyon.engine.sampler import sampling_rows

        dev, vocab = self.device, self.spec.vocab_size
        one = torch.zeros(1, dtype=torch.long, device=dev)
        kernels.apply_penalties(torch.zeros(1, vocab, device=dev), one, one,
                                torch.zeros(1, vocab, dtype=torch.int32, device=dev),
                                torch.zeros(1, vocab, dtype=torch.bool, device=dev), torch.ones(1, 3, device=dev))
        kernels.sample(torch.zeros(1, vocab, device=dev), *sampling_rows([1.0], [50], [0.9], [0.05], [1], [0], dev),
                       out=self.last_tokens[:1])

    def _compile_eager_steps(self, max_tokens: int) -> None:
        """Inside a compile pass: one eager decode step per decode class, one eager prefill step per class of its
        kept rows' attention and one per prefill-attention tile (engine/eager_probes.py; the smallest batch of each
        class), through the runner's own eager step functions, on stand-in sequences whose every block is the
        warm-up cache's one block. Results are discarded."""
        from tachyon.engine import eager_probes as probes

        spec, dev, kv = self.spec, self.device, self.kv_dtype
        for batch, context in probes.decode_probe_shapes(self.max_num_seqs, self.max_model_len, spec.num_kv_heads,
                                                         dev, kv):
            seqs = [probes.ProbeSequence(context, 1, self.block_size) for _ in range(batch)]
            self.model.compute_logits(self._eager_decode_hidden(probes.probe_step(seqs), [-1] * batch))
        shapes = [(batch, context, probes.KEPT_QUERY) for batch, context in probes.kept_probe_shapes(
            self.max_num_seqs, self.max_model_len, max_tokens, spec.num_kv_heads, dev, kv)]
        shapes += [(1, q, q) for q in probes.prefill_probe_lengths(max_tokens, spec.num_heads, spec.num_kv_heads,
                                                                     self.dtype)]
        for batch, context, query in shapes:
            seqs = [probes.ProbeSequence(context, query, self.block_size) for _ in range(batch)]
            self.model.compute_logits(self._eager_prefill_hidden(probes.probe_step(seqs)))
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
        the graphs will capture (their modules load in allocate_kv). Returns the GEMV choices (also kept in
        self.profile["gemv"]); the seconds of both parts go to self.warmup_parts_s."""
        from tachyon.models.layers import tune_gemv

        t0 = time.perf_counter()
        gemv_choices = tune_gemv(self.model)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        t1 = time.perf_counter()
        self.model.bind_kv_cache(self._new_caches(1))
        self._compile_kernels(*self._profile_step(max_num_batched_tokens))
        self.model.bind_kv_cache([])
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        self.warmup_parts_s = dict(tune_gemv_s=t1 - t0, compile_pass_s=time.perf_counter() - t1)
        self.profile = dict(gemv=gemv_choices)
        return gemv_choices

    @torch.inference_mode()
    def profile_kv_budget(self, max_num_batched_tokens: int, gpu_memory_utilization: float) -> int:
        """CUDA only, after warm_up: bytes left for the KV cache after weights, the peak activations of the
        largest step, and the decode-graph memory pool, under gpu_memory_utilization of the whole card (its seconds:
        self.warmup_parts_s["kv_profile_s"])."""
        t_start = time.perf_counter()
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
            # each probe runs eagerly before its capture: the device allocations before the cache's stay as they
            # were before captures could skip that run (0.6B bs1 ran ~2% slower without it; see allocate_kv)
            probe = self._graph_runner()
            probe.capture([probe.max_bs], eager_first=True)
            probe_prefill = probe_mixed = None
            if self.prefill_graph_tokens:  # its largest bucket, in the same pool, as allocate_kv does
                probe_prefill = self._prefill_graph_runner()
                probe_prefill.capture(pool=probe.pool, keys=[(probe_prefill.max_tokens, probe_prefill.max_seqs)],
                                      eager_first=True)
            if self.mixed_graph_tokens:  # likewise
                probe_mixed = self._mixed_graph_runner()
                probe_mixed.capture(pool=probe.pool, keys=[(probe_mixed.max_decodes, probe_mixed.max_chunk)],
                                    eager_first=True)
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
        self.warmup_parts_s["kv_profile_s"] = time.perf_counter() - t_start
        return int(budget)

    def allocate_kv(self, num_blocks: int) -> None:
        """Allocate the cache once, bind it to the model, then capture the decode graphs (CUDA). Records the
        seconds of each part in self.capture_s (kv_alloc_s, module_load_s after a compile pass, then decode /
        prefill / mixed _graphs_s where captured), each family's graph count in self.num_graphs and its eager
        pre-runs in self.eager_runs."""
        t0 = time.perf_counter()
        self.num_blocks = num_blocks
        self.kv_caches = self._new_caches(num_blocks)
        self.model.bind_kv_cache(self.kv_caches)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.capture_s = dict(kv_alloc_s=time.perf_counter() - t0)
        self.num_graphs, self.eager_runs = {}, {}
        if self.use_cuda_graphs and self.compile_pass:
            # the compile pass's modules load after the cache is placed (their device allocations then come after
            # it, as when each capture's eager run loaded them); captures then need no eager run
            t1 = time.perf_counter()
            self.compile_pass.load_modules()
            self.capture_s["module_load_s"] = time.perf_counter() - t1
        if self.use_cuda_graphs:
            self.graphs = self._timed_capture("decode", self._graph_runner(), None)
            if self.prefill_graph_tokens:
                self.prefill_graphs = self._timed_capture("prefill", self._prefill_graph_runner(), self.graphs.pool)
            if self.mixed_graph_tokens:
                self.mixed_graphs = self._timed_capture("mixed", self._mixed_graph_runner(), self.graphs.pool)

    def _timed_capture(self, family: str, runner, pool):
        """Capture `runner`'s graphs (into `pool`; None: its own), recording their seconds, their count and how
        many of them needed an eager run before their capture (`eager_runs`, by family)."""
        from tachyon.engine.cuda_graph import CAPTURE_COUNTS

        t0, eager0 = time.perf_counter(), CAPTURE_COUNTS["eager_runs"]
        if pool is None:
            runner.capture()
        else:
            runner.capture(pool=pool)
        self.capture_s[f"{family}_graphs_s"] = time.perf_counter() - t0
        self.num_graphs[family] = len(runner.graphs) + len(getattr(runner, "unfiltered_graphs", {}))
        self.eager_runs[family] = CAPTURE_COUNTS["eager_runs"] - eager0
        return runner
