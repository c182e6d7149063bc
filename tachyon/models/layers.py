"""Building blocks of the decoder. Every parameter carries a `weight_loader(param, tensor, shard)` so
that fused (qkv, gate/up), quantized and tensor-parallel layers load checkpoint tensors themselves."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from tachyon import kernels
from tachyon.kernels.gemv import MAX_M


def default_weight_loader(param: nn.Parameter, loaded: torch.Tensor, shard: object = None) -> None:
    if param.shape != loaded.shape:
        raise ValueError(f"weight shape mismatch: expected {tuple(param.shape)}, got {tuple(loaded.shape)}")
    param.data.copy_(loaded)


def _set_loader(param: nn.Parameter, loader) -> nn.Parameter:
    param.weight_loader = loader
    return param


class Linear(nn.Module):
    """y = x W^T (+ b). Plain linear; the base class quantized variants replace."""

    def __init__(self, in_features: int, out_features: int, bias: bool = False):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = _set_loader(nn.Parameter(torch.empty(out_features, in_features), requires_grad=False),
                                  default_weight_loader)
        self.bias = (_set_loader(nn.Parameter(torch.empty(out_features), requires_grad=False),
                                 default_weight_loader) if bias else None)
        # set by tune_gemv: the Triton skinny-GEMM config for M == 1 and for 2 <= M <= MAX_M, where it wins
        self.gemv_configs: dict[int, tuple[int, int, int, int]] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gemv_configs and x.shape[0] <= MAX_M and x.stride(-1) == 1:
            cfg = self.gemv_configs.get(1 if x.shape[0] == 1 else MAX_M)
            if cfg is not None:
                return kernels.gemv(x, self.weight, self.bias, cfg)
        return F.linear(x, self.weight, self.bias)


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


def tune_gemv(model: nn.Module, batch_sizes: tuple[int, ...] = (1, MAX_M)) -> dict[str, tuple | None]:
    """CUDA: for each distinct Linear weight shape and each M in `batch_sizes` (1: batch 1; MAX_M: the
    config used for 2..MAX_M rows), time cuBLAS against the Triton skinny GEMM inside CUDA graphs and
    keep the kernel only where it is correct and faster. Returns {"NxK@M": config or None}."""
    chosen: dict[tuple, tuple | None] = {}
    for mod in model.modules():
        if not isinstance(mod, Linear) or not mod.weight.is_cuda:
            continue
        mod.gemv_configs = {}
        for m in batch_sizes:
            key = (*mod.weight.shape, mod.weight.dtype, mod.bias is not None, m)
            if key not in chosen:
                chosen[key] = kernels.pick_gemv_config(mod.weight, mod.bias, m)
            if chosen[key] is not None:
                mod.gemv_configs[m] = chosen[key]
    return {f"{k[0]}x{k[1]}{'+bias' if k[3] else ''}@{k[4]}": v for k, v in chosen.items()}
