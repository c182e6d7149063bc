"""LLMEngine's one-time start-up (`_start_up`): the model, the runner and its warm-up, the KV cache and graphs, the
scheduler. A mixin, as runner_startup.RunnerStartup is the ModelRunner's: it sets the attributes LLMEngine's request
and step methods read (config, device, dtype, model, spec, tokenizer, grammars, max_model_len, kv_dtype, runner,
pool, scheduler, startup timings)."""

from __future__ import annotations

import logging
import time

import torch

from tachyon.config import EngineConfig
from tachyon.engine.kv_cache import BlockPool, KVCacheManager
from tachyon.engine.runner import ModelRunner
from tachyon.engine.runner_startup import kv_cache_bytes_per_block
from tachyon.engine.scheduler import Scheduler
from tachyon.engine.structured import GrammarCompiler
from tachyon.models.loader import load_model, load_tokenizer, resolve_model

log = logging.getLogger("tachyon.engine")


class EngineStartup:
    def _start_up(self, config: EngineConfig) -> None:
        """Build everything a step needs, in order: model (and tokenizer, grammar compiler), runner, warm-up, KV
        cache and graphs, block pool and scheduler; times the phases into self.startup / self.startup_detail."""
        self.config = config
        t0 = time.perf_counter()
        self.device = config.resolved_device()
        self.dtype = config.resolved_dtype()
        resolved = resolve_model(config.model, config.load_format)
        if config.hf_config_overrides:
            resolved.hf_config.update(config.hf_config_overrides)
        self.model_name = config.served_model_name or resolved.name
        self.model, self.spec = load_model(resolved, device=self.device, dtype=self.dtype, seed=config.seed)
        if config.quantization == "fp8":
            self._quantize_fp8()
        self.tokenizer = load_tokenizer(resolved, config.tokenizer)
        self.grammars = GrammarCompiler(self.tokenizer, self.spec.vocab_size, self.spec.eos_token_ids)
        t_load = time.perf_counter()
        self.max_model_len = self._max_model_len()
        self.kv_dtype = self._kv_dtype()
        self.runner = ModelRunner(self.model, self.spec, block_size=config.block_size, device=self.device,
                                  dtype=self.dtype, kv_dtype=self.kv_dtype,
                                  max_num_seqs=min(config.max_num_seqs, config.max_num_batched_tokens),
                                  max_model_len=self.max_model_len, use_cuda_graphs=not config.enforce_eager,
                                  prefill_graph_tokens=min(config.prefill_graph_max_tokens,
                                                           config.max_num_batched_tokens, self.max_model_len),
                                  mixed_graph_tokens=min(config.mixed_graph_max_tokens,
                                                         config.max_num_batched_tokens - 1, self.max_model_len - 1))
        num_blocks = self._warm_up_and_size_cache()
        t_warm = time.perf_counter()
        if num_blocks * config.block_size < self.max_model_len:
            raise ValueError(
                f"the KV cache holds {num_blocks * config.block_size} tokens, fewer than max_model_len "
                f"{self.max_model_len}: lower max_model_len or give the cache more memory")
        self.runner.allocate_kv(num_blocks)
        t_end = time.perf_counter()
        # start-up phases (s): weights + tokenizer; warm-up (kernel tuning / compiles, memory profile);
        # KV-cache allocation + decode- and prefill-graph capture
        self.startup = dict(load_s=t_load - t0, warmup_s=t_warm - t_load, kv_and_graphs_s=t_end - t_warm,
                            total_s=t_end - t0)
        # the last phase's parts (s; kv_alloc_s, then each graph family captured), each family's graph count and its
        # captures that needed an eager run first; the warm-up's parts (s; CUDA)
        self.startup_detail = dict(self.runner.capture_s, num_graphs=dict(self.runner.num_graphs),
                                   eager_runs=dict(self.runner.eager_runs), warmup=dict(self.runner.warmup_parts_s))
        if self.runner.compile_pass:  # its kernels, the seconds of its steps and of the compiles left, its loads
            self.startup_detail["warmup"]["compile_pass"] = self.runner.compile_pass.summary()
        if self.runner.eager_compile_pass:
            self.startup_detail["warmup"]["eager_compile_pass"] = self.runner.eager_compile_pass.summary()
        log.info("engine ready in %.1f s (load %.1f, warm-up %.1f, KV cache + graphs %.1f)", self.startup["total_s"],
                 self.startup["load_s"], self.startup["warmup_s"], self.startup["kv_and_graphs_s"])
        self.pool = BlockPool(num_blocks, config.block_size)
        self.scheduler = Scheduler(KVCacheManager(self.pool, enable_caching=config.enable_prefix_caching),
                                   max_num_seqs=config.max_num_seqs,
                                   max_num_batched_tokens=config.max_num_batched_tokens,
                                   enable_chunked_prefill=config.enable_chunked_prefill,
                                   watermark=config.watermark, policy=config.scheduling_policy,
                                   long_prefill_token_threshold=config.resolved_long_prefill_threshold())
        if self.runner.mixed_graphs is not None:  # flat: fill steps to sizes the mixed graphs hold unpadded
            self.scheduler.chunk_fit = self.runner.mixed_graphs.tight_chunk

    def _require_fp8_device(self, what: str) -> None:
        """FP8 kernels (e4m3 conversions, FP8 tensor cores) need compute capability 8.9; the CPU runs the
        references."""
        cap = torch.cuda.get_device_capability(self.device) if self.device.type == "cuda" else None
        if cap is not None and cap < (8, 9):
            raise ValueError(f"{what}='fp8' needs a GPU of compute capability >= 8.9, this one is {cap[0]}.{cap[1]}")

    def _quantize_fp8(self) -> None:
        self._require_fp8_device("quantization")
        if self.device.type == "cuda" and self.dtype != torch.bfloat16:
            raise ValueError(f"quantization='fp8' on a GPU needs dtype bfloat16 (its FP8 GEMM writes bf16), "
                             f"got {self.dtype}")
        self.model.quantize_fp8()

    def _kv_dtype(self) -> torch.dtype:
        if self.config.kv_cache_dtype != "fp8":
            return self.dtype
        self._require_fp8_device("kv_cache_dtype")
        return torch.float8_e4m3fn

    def _max_model_len(self) -> int:
        limit = self.spec.max_position_embeddings
        if self.spec.sliding_window:
            limit = min(limit, self.spec.sliding_window)
        want = self.config.max_model_len or limit
        if want > limit:
            raise ValueError(f"max_model_len {want} exceeds the model's limit of {limit} positions")
        return want

    def _warm_up_and_size_cache(self) -> int:
        """Warm up (CUDA: kernel choices and compiles, whatever sizes the cache), then the cache's size: the
        num_kv_blocks asked for, else what the memory profile leaves."""
        if self.device.type == "cuda":
            self.runner.warm_up(self.config.max_num_batched_tokens)
        if self.config.num_kv_blocks:
            return self.config.num_kv_blocks
        per_block = kv_cache_bytes_per_block(self.spec, self.config.block_size, self.kv_dtype)
        if self.device.type == "cuda":
            budget = self.runner.profile_kv_budget(self.config.max_num_batched_tokens,
                                                   self.config.gpu_memory_utilization)
        else:
            budget = self.config.kv_cache_memory_gb * (1 << 30)
        return max(1, int(budget // per_block))
