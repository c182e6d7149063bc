"""Engine configuration: one validated dataclass, vLLM's engine-argument names where they exist."""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
}


@dataclass
class EngineConfig:
    """Everything the engine needs to start. `model=None` means the default model (SmolLM2-135M-Instruct).

    device/dtype "auto": CUDA + bfloat16 when a GPU is present, else CPU + float32 (the reference path).
    KV-cache size: `num_kv_blocks` if given, else from `kv_cache_memory_gb` on CPU, else from
    `gpu_memory_utilization` after a warm-up on GPU.
    """

    model: str | None = None
    tokenizer: str | None = None
    load_format: str = "auto"  # auto | safetensors | gguf | dummy
    dtype: str = "auto"
    device: str = "auto"
    seed: int = 0
    max_model_len: int | None = None
    block_size: int = 16
    num_kv_blocks: int | None = None
    kv_cache_memory_gb: float = 1.0
    gpu_memory_utilization: float = 0.9
    max_num_seqs: int = 512
    max_num_batched_tokens: int = 2048
    enable_chunked_prefill: bool = True
    watermark: float = 0.01
    enforce_eager: bool = False
    # prefill / mixed steps of at most this many tokens (and 8 requests) replay CUDA graphs; 0: eager
    prefill_graph_max_tokens: int = 512
    # mixed steps (running decodes, at most 256, plus one prompt chunk of at most this many tokens) replay CUDA
    # graphs (engine/mixed_graph.py); 0: eager
    mixed_graph_max_tokens: int = 1024
    # step N+1 launched before step N's tokens reach the host (engine.step). None: on for CUDA devices, off on the
    # CPU, where a launched step runs to completion at launch, so overlap only hands each token back one step late
    # (SmolLM2 seed8 on 2 cores: TTFT 534 against transformers' 357 ms with it on)
    overlap_scheduling: bool | None = None
    # admission order (engine/scheduler.py): "fcfs" (first come, first served; the server's), "lpt" (longest remaining
    # output first, the running set capped so the batch stays flat; opt-in: H200, Qwen2.5-7B nano256 +1.2-2.2%,
    # Qwen3-0.6B -2 to -6%, benchmarks/results/session20/) or "flat" (lpt's order, each step filled to ~288+ rows
    # with prompt chunks beside the decodes; the offline LLM's default on CUDA devices, engine/llm.py)
    scheduling_policy: str = "fcfs"
    served_model_name: str | None = None
    hf_config_overrides: dict | None = None  # merged into the checkpoint's config.json before building
    # "fp8": decoder projections as FP8 e4m3 weights (per-output-channel scales) with per-row dynamic
    # activation scales (W8A8; GPU of compute capability >= 8.9, or the CPU reference); embeddings, the
    # lm_head, norms and the KV cache stay in `dtype`. None: every weight in `dtype`.
    quantization: str | None = None
    # "fp8": the KV cache holds e4m3 values (scale 1: each K/V element saturated to +-448 and rounded to nearest
    # even on store; half the bytes, twice the tokens per GiB; GPU of compute capability >= 8.9, or the CPU
    # reference). "auto": the cache in `dtype`.
    kv_cache_dtype: str = "auto"
    # prefix caching (engine/kv_cache.py): a request's leading full blocks that another request already computed
    # (the same tokens from the first on) are shared instead of recomputed. Off by default: a hit's KV was computed
    # in another batch shape, so greedy output can then depend on what ran before (docs/performance.md, "Prefix
    # caching, measured at stop 52": the H200 showed it).
    enable_prefix_caching: bool = False
    # > 0: while a shorter prompt waits to be admitted, a prompt computes at most this many tokens a step
    # (engine/scheduler.py), so one long prompt does not hold up the first token of the short ones behind it. 0: off.
    # None (the default): resolved_long_prefill_threshold's quarter of the step budget (512 at the server's 2,048); the
    # offline LLM takes 0 when it is left out (engine/llm.py), as its requests arrive together. H100, Qwen2.5-7B:
    # nano256 arriving at 4 a second with every 8th prompt 8,192 tokens (benchmarks/results/session49/), 512 against 0
    # cut the short prompts' p90 TTFT from 168 / 166 to 100 / 65 ms, cost the long ones 13% (mean 339 -> 385 ms), kept
    # TPOT and throughput level; all 256 nano256 requests at once: throughput level (13,143 against 13,106 tok/s).
    # Through HTTP, prompts of 205-3,891 tokens at 4 a second (session50/), two runs: TTFT mean / p90 / p99 78.2 /
    # 121.5 / 181.4 and 81.6 / 123.7 / 238.1 ms, against 81.1 / 120.0 / 189.4 and 74.9 / 111.1 / 177.7 with 0 (stop
    # 60's any-waiter rule: 82.1 / 136.4 / 210.3 and 81.9 / 137.5 / 231.6): on such a mix the cap is no gain.
    long_prefill_token_threshold: int | None = None

    def __post_init__(self) -> None:
        if self.load_format not in ("auto", "safetensors", "gguf", "dummy"):
            raise ValueError(f"load_format must be auto|safetensors|gguf|dummy, got {self.load_format!r}")
        if self.dtype != "auto" and self.dtype not in _DTYPES:
            raise ValueError(f"dtype must be auto or one of {sorted(_DTYPES)}, got {self.dtype!r}")
        if self.device not in ("auto", "cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ValueError(f"device must be auto, cpu or cuda[:N], got {self.device!r}")
        if self.block_size not in (1, 2, 4, 8, 16, 32, 64, 128, 256):
            raise ValueError(f"block_size must be a power of two in [1, 256], got {self.block_size}")
        if self.max_model_len is not None and self.max_model_len < 1:
            raise ValueError(f"max_model_len must be >= 1, got {self.max_model_len}")
        if self.num_kv_blocks is not None and self.num_kv_blocks < 1:
            raise ValueError(f"num_kv_blocks must be >= 1, got {self.num_kv_blocks}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        if self.kv_cache_memory_gb <= 0:
            raise ValueError(f"kv_cache_memory_gb must be > 0, got {self.kv_cache_memory_gb}")
        if self.max_num_seqs < 1:
            raise ValueError(f"max_num_seqs must be >= 1, got {self.max_num_seqs}")
        if not isinstance(self.max_num_batched_tokens, int) or self.max_num_batched_tokens < 1:
            raise ValueError(f"max_num_batched_tokens must be an integer >= 1, got {self.max_num_batched_tokens!r}")
        if not 0 <= self.prefill_graph_max_tokens <= 8192:
            raise ValueError(f"prefill_graph_max_tokens must be in [0, 8192], got {self.prefill_graph_max_tokens}")
        if not 0 <= self.mixed_graph_max_tokens <= 8192:
            raise ValueError(f"mixed_graph_max_tokens must be in [0, 8192], got {self.mixed_graph_max_tokens}")
        if self.quantization not in (None, "fp8"):
            raise ValueError(f"quantization must be None or 'fp8', got {self.quantization!r}")
        if self.kv_cache_dtype not in ("auto", "fp8"):
            raise ValueError(f"kv_cache_dtype must be 'auto' or 'fp8', got {self.kv_cache_dtype!r}")
        if self.scheduling_policy not in ("fcfs", "lpt", "flat"):
            raise ValueError(f"scheduling_policy must be 'fcfs', 'lpt' or 'flat', got {self.scheduling_policy!r}")
        if self.overlap_scheduling not in (None, True, False):
            raise ValueError(f"overlap_scheduling must be true, false or null (auto), got {self.overlap_scheduling!r}")
        lpt = self.long_prefill_token_threshold
        if lpt is not None and (not isinstance(lpt, int) or isinstance(lpt, bool) or lpt < 0):
            raise ValueError("long_prefill_token_threshold must be an integer >= 0 (0: off) or null (auto), "
                             f"got {lpt!r}")
        if not 0 <= self.watermark < 1:
            raise ValueError(f"watermark must be in [0, 1), got {self.watermark}")

    @classmethod
    def from_kwargs(cls, **kwargs) -> EngineConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ValueError(f"unknown engine argument(s): {', '.join(unknown)}")
        return cls(**kwargs)

    def resolved_device(self) -> torch.device:
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return torch.device(self.device)

    def resolved_long_prefill_threshold(self) -> int:
        """The scheduler's long-prefill cap: the field when set, else a quarter of max_num_batched_tokens (at least
        64, so a small budget does not cut prompts into slivers)."""
        if self.long_prefill_token_threshold is not None:
            return self.long_prefill_token_threshold
        return max(64, self.max_num_batched_tokens // 4)

    def resolved_dtype(self) -> torch.dtype:
        if self.dtype == "auto":
            return torch.bfloat16 if self.resolved_device().type == "cuda" else torch.float32
        return _DTYPES[self.dtype]


OVERLAP_CHOICES = {"auto": None, "on": True, "off": False}  # --overlap-scheduling -> EngineConfig.overlap_scheduling
OVERLAP_HELP = ("prepare step N+1 on the host while step N runs on the device: auto (on for CUDA, off on the CPU), "
                "on, or off (every step synchronous, for comparison)")
