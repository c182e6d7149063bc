"""Building blocks of the decoder. Every parameter carries a `weight_loader(param, tensor, shard)` so
that fused (qkv, gate/up), quantized and tensor-parallel layers load checkpoint tensors themselves."""

from __future__ import annotations

import math
import os

import torch
import torch.nn.functional as F
from torch import nn

from tachyon import kernels
from tachyon.kernels.gemm_small import SMALL_M

# torch.mm(a, b, out_dtype=) (CUDA: bf16 / fp16 operands, fp32 result); absent from older torch builds
_MM_OUT_DTYPE = hasattr(torch.ops.aten.mm, "dtype")
_MM_OUT_DTYPE_INTO = hasattr(torch.ops.aten.mm, "dtype_out")


def default_weight_loader(param: nn.Parameter, loaded: torch.Tensor, shard: object = None) -> None:
    if param.shape != loaded.shape:
        raise ValueError(f"weight shape mismatch: expected {tuple(param.shape)}, got {tuple(loaded.shape)}")
    param.data.copy_(loaded)


def _set_loader(param: nn.Parameter, loader) -> nn.Parameter:
    param.weight_loader = loader
    return param


def _fp32_by_cublas(x: torch.Tensor) -> bool:
    """Whether cuBLAS can write x @ W^T in fp32 itself: a 16-bit CUDA matrix on a torch with mm's out_dtype."""
    return x.dtype != torch.float32 and x.dim() == 2 and _MM_OUT_DTYPE and x.is_cuda


class Linear(nn.Module):
    """y = x W^T (+ b). Plain linear; the base class quantized variants replace."""

    def __init__(self, in_features: int, out_features: int, bias: bool = False):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = _set_loader(nn.Parameter(torch.empty(out_features, in_features), requires_grad=False),
                                  default_weight_loader)
        self.bias = (_set_loader(nn.Parameter(torch.empty(out_features), requires_grad=False),
                                 default_weight_loader) if bias else None)
        self.gemv_config: tuple[int, int, int, int] | None = None  # set by tune_gemv where a Triton GEMV wins
        self.small_config: tuple[int, int, int, int, int, int] | None = None  # same, for 2..SMALL_M rows
        # the op the model always applies to this layer's input ("rmsnorm" / "silu"), set by the model;
        # tune_gemv sets fused_config where that op fused into the GEMV prologue beats the pair
        self.prologue: str | None = None
        self.fused_config: tuple[int, int, int, int] | None = None
        # "silu" on a stacked gate|up projection (set by the model): tune_gemv sets epilogue_config where the
        # batch-1 GEMV with SiLU-and-mul in its epilogue (kernels.gemv_glu) beats the GEMV + activation pair
        self.epilogue: str | None = None
        self.epilogue_config: tuple[int, int, int, int] | None = None
        # per-output-channel fp32 scales once quantize_fp8 has made the weight float8_e4m3fn (W8A8); else None
        self.weight_scale: torch.Tensor | None = None

    def quantize_fp8(self) -> None:
        """Replace the weight by its FP8 (e4m3) per-output-channel quantization, in place of the bf16 copy
        (freed once nothing else holds it); forward then quantizes its input per row and runs an FP8 GEMM.
        The bf16 kernel choices no longer apply and are cleared (tune_gemv then times the FP8 batch-1 GEMV and
        skinny GEMM against cuBLASLt; larger row counts always take cuBLASLt). Call after the weights are
        loaded (the FP8 parameter loads no shards); a layer whose weight is shared (a tied lm_head) must not be
        quantized."""
        if self.weight_scale is not None:
            return
        if self.weight.is_cuda and (self.in_features % 16 or self.out_features % 16):
            raise ValueError(f"FP8 GEMMs need both dims of a weight divisible by 16, got {self.out_features}x"
                             f"{self.in_features}")
        q, scale = kernels.quantize_weight(self.weight.data)
        self.weight = _set_loader(nn.Parameter(q, requires_grad=False), default_weight_loader)
        self.weight_scale = scale
        self.gemv_config = self.small_config = self.fused_config = self.epilogue_config = None

    def forward(self, x: torch.Tensor | kernels.QuantizedRows, out_dtype: torch.dtype | None = None,
                out: torch.Tensor | None = None) -> torch.Tensor:
        """x [M, in] -> [M, out] in out_dtype (default x's). The Triton GEMV / skinny GEMM round their fp32
        accumulator once, to out_dtype (fp32 logits without a conversion kernel); so does cuBLAS on CUDA for
        an fp32 out_dtype without bias; other cuBLAS results are converted. An FP8 layer (quantize_fp8) takes
        the same row-count routes to its W8A8 kernels; it also takes x already quantized, as a
        kernels.quantize_rows pair (a fused producer's), with out_dtype given. `out` (contiguous, [M, out] in
        out_dtype): the result is written there and returned; cuBLAS's fp32 route writes it directly, the others
        through a copy."""
        if out is not None:
            if out_dtype is not None and out.dtype != out_dtype:
                raise ValueError(f"Linear.forward: out is {out.dtype}, out_dtype {out_dtype}")
            out_dtype = out.dtype
        y = self._project(x, out_dtype, out)
        return y if out is None or y is out else out.copy_(y)

    def _project(self, x: torch.Tensor | kernels.QuantizedRows, out_dtype: torch.dtype | None,
                 out: torch.Tensor | None) -> torch.Tensor:
        """forward's routes; only cuBLAS's fp32 route writes into `out` (returning it), the others return a fresh
        result."""
        global _MM_OUT_DTYPE_INTO
        w, b, s = self.weight, self.bias, self.weight_scale
        if isinstance(x, tuple) and s is None:
            raise TypeError("Linear.forward: a quantized input needs an FP8 layer (quantize_fp8)")
        if s is not None and not isinstance(x, tuple):
            out_dtype = out_dtype or x.dtype
            x = kernels.quantize_rows(x)
        x0 = x[0] if isinstance(x, tuple) else x
        m = x0.shape[0]
        if m == 1 and self.gemv_config is not None and x0.stride(-1) == 1:
            if s is not None:
                return kernels.fp8_gemv(x, w, s, b, self.gemv_config, out_dtype)
            return kernels.gemv(x, w, b, self.gemv_config, out_dtype=out_dtype)
        if 1 < m <= SMALL_M and self.small_config is not None and x0.stride(-1) == 1:
            if s is not None:
                return kernels.fp8_gemm_small(x, w, s, b, self.small_config, out_dtype)
            return kernels.gemm_small(x, w, b, self.small_config, out_dtype=out_dtype)
        if s is not None:
            return kernels.fp8_linear(x, w, s, b, out_dtype)
        if out_dtype == torch.float32 and b is None and _fp32_by_cublas(x):
            # fp32 written by cuBLAS itself (fp32 accumulator, no bf16 rounding and no conversion kernel):
            # the decode graphs' logits (H200, Qwen2.5-7B lm_head at 256 rows 553.5 -> 425.6 us;
            # benchmarks/results/session13/cub13_eda5ca3/)
            if out is not None and _MM_OUT_DTYPE_INTO:
                try:
                    torch.mm(x, w.t(), out_dtype=torch.float32, out=out)
                    return out
                except (RuntimeError, NotImplementedError):  # a build without the kernel: a fresh result from now on
                    _MM_OUT_DTYPE_INTO = False
            return torch.mm(x, w.t(), out_dtype=torch.float32)
        y = F.linear(x, w, b)
        return y if out_dtype is None else y.to(out_dtype)


class MergedLinear(Linear):
    """Several projections of the same input stacked along the output dim (q/k/v, gate/up).

    `shard` names which slice a checkpoint tensor fills; `shards` maps name -> output size.
    """

    def __init__(self, in_features: int, shards: dict[str, int], bias: bool = False):
        super().__init__(in_features, sum(shards.values()), bias)
        self.offsets: dict[str, tuple[int, int]] = {}
        start = 0
        for name, size in shards.items():
            self.offsets[name] = (start, size)
            start += size
        self.weight.weight_loader = self._load_shard
        if self.bias is not None:
            self.bias.weight_loader = self._load_shard

    def _load_shard(self, param: nn.Parameter, loaded: torch.Tensor, shard: str | None = None) -> None:
        if shard is None:
            default_weight_loader(param, loaded)
            return
        start, size = self.offsets[shard]
        target = param.data.narrow(0, start, size)
        if target.shape != loaded.shape:
            raise ValueError(f"shard {shard}: expected {tuple(target.shape)}, got {tuple(loaded.shape)}")
        target.copy_(loaded)

    def split(self, y: torch.Tensor) -> list[torch.Tensor]:
        return list(y.split([s for _, s in self.offsets.values()], dim=-1))


class RMSNorm(nn.Module):
    """HF LlamaRMSNorm semantics; `forward(x, residual)` fuses the residual add (returns out, x+residual)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = _set_loader(nn.Parameter(torch.ones(dim), requires_grad=False), default_weight_loader)

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        out, res = kernels.rmsnorm(x, self.weight, self.eps, residual)
        return out if residual is None else (out, res)


def _rope_inv_freq(dim: int, theta: float, scaling: dict | None) -> torch.Tensor:
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    if not scaling:
        return inv_freq
    rope_type = scaling.get("rope_type", scaling.get("type"))
    factor = float(scaling.get("factor", 1.0))
    if rope_type == "linear":
        return inv_freq / factor
    if rope_type == "llama3":
        low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
        old_len = float(scaling["original_max_position_embeddings"])
        low_wavelen, high_wavelen = old_len / low, old_len / high
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        is_medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        return torch.where(is_medium, smoothed, scaled)
    raise ValueError(f"unsupported rope_scaling type {rope_type!r}")


class RotaryEmbedding(nn.Module):
    """Neox-style (rotate_half) rotary embedding over a precomputed [max_pos, head_dim] cos|sin cache.

    The cache holds cos in the first half of the last dim and sin in the second (each head_dim/2 wide).
    """

    def __init__(self, head_dim: int, max_position: int, theta: float, scaling: dict | None):
        super().__init__()
        self.head_dim = head_dim
        inv_freq = _rope_inv_freq(head_dim, theta, scaling)
        t = torch.arange(max_position, dtype=torch.float32)
        freqs = torch.outer(t, inv_freq)
        self.register_buffer("cos_sin_cache", torch.cat([freqs.cos(), freqs.sin()], dim=-1), persistent=False)

    def forward(self, positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor):
        return kernels.rotary(q, k, positions, self.cos_sin_cache)


def tune_gemv(model: nn.Module) -> dict[str, tuple | None]:
    """CUDA: for each distinct Linear weight shape, time cuBLAS against the Triton GEMV at batch 1
    inside CUDA graphs and keep the kernel only where it is correct and faster; the same for the skinny
    GEMM at SMALL_M rows; then, for layers with a prologue op, the fused kernel against that op + the
    chosen GEMV, and for a gate|up layer (epilogue "silu") the GEMV with the activation in its epilogue
    against the GEMV + activation kernel. Decisions already known for this GPU model (kernels.tuning) are
    reused untimed.
    Returns {"NxK[+bias]@kind": config or None}."""
    from tachyon.kernels import tuning

    chosen: dict[str, tuple | None] = {}

    def decide(mod: Linear, kind: str, pick) -> tuple | None:
        name = f"{mod.weight.shape[0]}x{mod.weight.shape[1]}{'+bias' if mod.bias is not None else ''}@{kind}"
        if name not in chosen:
            tag = tuning.device_tag(mod.weight.device)
            key = tuning.make_key(mod.weight, mod.bias is not None, kind)
            known, choice = tuning.lookup(tag, key)
            if not known:
                choice = pick()
                tuning.remember(tag, key, choice)
            chosen[name] = choice
        return chosen[name]

    for mod in model.modules():
        if not isinstance(mod, Linear) or not mod.weight.is_cuda:
            continue
        if mod.weight_scale is not None:  # FP8: the batch-1 GEMV and the skinny GEMM (no fused variants)
            mod.gemv_config = decide(mod, "m1fp8", lambda m=mod: kernels.pick_fp8_gemv_config(
                m.weight, m.weight_scale, m.bias))
            fast = "fast" if kernels.quant_fp8.fast_accum() else ""  # its candidates differ: its own decision
            mod.small_config = decide(mod, f"m{SMALL_M}fp8{fast}", lambda m=mod: kernels.pick_fp8_small_config(
                m.weight, m.weight_scale, m.bias, SMALL_M))
            continue
        mod.gemv_config = decide(mod, "m1", lambda m=mod: kernels.pick_gemv_config(m.weight, m.bias))
        mod.small_config = decide(mod, f"m{SMALL_M}",
                                  lambda m=mod: kernels.pick_small_config(m.weight, m.bias, SMALL_M))
        mod.fused_config = None
        if mod.prologue is not None:
            def pick_fused(m=mod):
                norm_w = torch.ones(m.in_features, dtype=m.weight.dtype, device=m.weight.device)
                return kernels.pick_fused_config(m.weight, m.bias, m.prologue, m.gemv_config, norm_w=norm_w)

            mod.fused_config = decide(mod, f"m1+{mod.prologue}", pick_fused)
        mod.epilogue_config = None
        if mod.epilogue == "silu":
            mod.epilogue_config = decide(mod, "m1+glu", lambda m=mod: kernels.pick_glu_config(m.weight, m.bias,
                                                                                               m.gemv_config))
    return chosen


def fused_fp8_quant() -> bool:
    """FP8 layers take their input quantized by the RMSNorm / SiLU-and-mul kernel (one kernel, not two);
    TACHYON_FP8_FUSED_QUANT=0 runs the unfused pair (an A/B knob; same result bit for bit). Read per call: a
    CUDA graph keeps what was in force at capture."""
    return os.environ.get("TACHYON_FP8_FUSED_QUANT", "1") != "0"


def norm_linear(norm: RMSNorm, linear: Linear, x: torch.Tensor,
                residual: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(linear(norm(x + residual)), x + residual); x is the residual stream when `residual` is None.
    One fused kernel at batch 1 where tune_gemv chose it."""
    if linear.fused_config is not None and x.shape[0] == 1 and x.is_contiguous() and (
            residual is None or residual.is_contiguous()):
        return kernels.rmsnorm_gemv(x, residual, norm.weight, norm.eps, linear.weight, linear.bias,
                                    linear.fused_config)
    if linear.weight_scale is not None and fused_fp8_quant():  # FP8: the norm writes the quantized input
        xq, residual = kernels.rmsnorm_quant(x, norm.weight, norm.eps, residual)
        return linear(xq, out_dtype=x.dtype), residual
    if residual is None:
        return linear(norm(x)), x
    h, residual = norm(x, residual)
    return linear(h), residual


def silu_linear(linear: Linear, gate_up: torch.Tensor) -> torch.Tensor:
    """linear(silu(gate) * up) of gate|up rows; one fused kernel at batch 1 where tune_gemv chose it (for an FP8
    layer the activation writes its quantized input)."""
    if linear.weight_scale is not None and fused_fp8_quant():
        return linear(kernels.silu_and_mul_quant(gate_up), out_dtype=gate_up.dtype)
    if linear.fused_config is not None and gate_up.shape[0] == 1 and gate_up.is_contiguous():
        return kernels.silu_gemv(gate_up, linear.weight, linear.bias, linear.fused_config)
    return linear(kernels.silu_and_mul(gate_up))
