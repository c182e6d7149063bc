"""The batch-1 layer and model kernels' test cases (tests/test_kernels_layer_bs1.py, test_kernels_model_bs1.py):
tiny layer shapes, random layers over a NaN-poisoned paged cache, and how their outputs are compared."""

import dataclasses
import math

import torch

from tachyon.kernels.layer_bs1 import LayerBs1Weights
from tests.kernel_env import DEV, NAN, K, close, tol

PAGE = 4
# name -> (H, Hq, Hkv, D, intermediate, qkv bias, q/k norm): non-power-of-two H and I (masked tiles), Qwen2 (bias)
# and Qwen3 (per-head norms) layouts
SHAPES = {
    "qwen3": (64, 4, 2, 16, 96, False, True),
    "qwen2": (48, 6, 2, 16, 80, True, False),
}


def make_case(shape: str, dtype: torch.dtype, seq_len: int, max_seq_len: int, residual: bool, seed: int = 0,
              dev: str = DEV):
    """Random layer weights, a paged cache with shuffled blocks whose new-key slot holds NaN (a kernel reading it
    back would produce NaN), and the step inputs of one decode token at position seq_len - 1, on `dev`."""
    H, Hq, Hkv, D, inter, bias, qk_norm = SHAPES[shape]
    gen = torch.Generator().manual_seed(seed)

    def rnd(*shape, scale=1.0, shift=0.0):
        return (shift + scale * torch.randn(*shape, generator=gen)).to(dev, dtype)

    lw = LayerBs1Weights(
        in_norm=rnd(H, scale=0.2, shift=1.0), qkv=rnd((Hq + 2 * Hkv) * D, H, scale=H ** -0.5),
        qkv_bias=rnd((Hq + 2 * Hkv) * D, scale=0.1) if bias else None,
        q_norm=rnd(D, scale=0.2, shift=1.0) if qk_norm else None,
        k_norm=rnd(D, scale=0.2, shift=1.0) if qk_norm else None,
        o=rnd(H, Hq * D, scale=(Hq * D) ** -0.5), post_norm=rnd(H, scale=0.2, shift=1.0),
        gate_up=rnd(2 * inter, H, scale=H ** -0.5), down=rnd(H, inter, scale=inter ** -0.5),
        eps=1e-6, qk_eps=1e-6, num_heads=Hq, num_kv_heads=Hkv, head_dim=D, scale=1.0 / math.sqrt(D),
    )
    nblk = -(-max_seq_len // PAGE)
    num_blocks = nblk + 3
    table = torch.randperm(num_blocks, generator=gen)[:nblk].to(torch.int32)
    slot = int(table[(seq_len - 1) // PAGE]) * PAGE + (seq_len - 1) % PAGE
    cache = torch.randn(2, num_blocks, PAGE, Hkv, D, generator=gen)
    cache[:, slot // PAGE, slot % PAGE] = NAN
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
    return dict(
        x=rnd(1, H), residual=rnd(1, H) if residual else None, lw=lw, kv_cache=cache.to(dev, dtype),
        cos_sin_cache=K.rope_cos_sin_cache(inv_freq, max_seq_len).to(dev),
        slot_mapping=torch.tensor([slot], dtype=torch.int64, device=dev),
        seq_lens=torch.tensor([seq_len], dtype=torch.int32, device=dev),
        block_tables=table[None, :].to(dev), max_seq_len=max_seq_len,
    )


def close_layer(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> None:
    """`a` against `b`: in fp32 as `close`; in bf16 `b` is the layer computed in fp32 from the same bf16 values
    (`fp32_case`): a whole layer chains five bf16-rounded stages, the kernel rounds fewer (never the normalised
    row) than the unfused reference, whose own outputs sit up to ~1% norm-wise from that truth at the tests' tiny
    sizes, so the kernel is held to the truth: norm-wise relative error within 1e-2 and every element within three
    times the per-kernel tolerance."""
    if dtype == torch.float32:
        close(a, b, dtype)
        return
    assert not torch.isnan(a).any(), "NaN (unwritten or bad) elements"
    a, b = a.float(), b.float()
    err = float((a - b).norm() / b.norm())
    assert err <= 1e-2, f"norm-wise relative error {err:.4f} above 1e-2"
    t = tol(dtype)
    torch.testing.assert_close(a, b, rtol=3 * t["rtol"], atol=3 * t["atol"])


def fp32_case(case: dict) -> dict:
    """The case with every tensor of the model's dtype (weights, x, residual, cache) in fp32, same values."""
    lw = case["lw"]
    up = {f.name: getattr(lw, f.name).float() for f in dataclasses.fields(lw)
          if isinstance(getattr(lw, f.name), torch.Tensor)}
    out = dict(case, lw=dataclasses.replace(lw, **up))
    for k in ("x", "residual", "kv_cache"):
        if out[k] is not None:
            out[k] = out[k].float()
    return out


def run(fn, case: dict, **kw):
    """(y, h2, cache after) of one call on a fresh copy of the cache."""
    args = dict(case, kv_cache=case["kv_cache"].clone(), **kw)
    y, h2 = fn(**args)
    return y, h2, args["kv_cache"]


def tiny_model(arch: str):
    """A three-layer model of SHAPES[arch] with random weights (norm weights near 1), fp32, on the CPU."""
    from tachyon.models.llama import DecoderForCausalLM
    from tachyon.models.spec import ModelSpec

    H, Hq, Hkv, D, inter, bias, qk_norm = SHAPES[arch]
    spec = ModelSpec(architecture="tiny", family=arch, vocab_size=96, hidden_size=H, intermediate_size=inter,
                     num_layers=3, num_heads=Hq, num_kv_heads=Hkv, head_dim=D, rms_norm_eps=1e-6, rope_theta=10000.0,
                     rope_scaling=None, max_position_embeddings=256, tie_word_embeddings=True,
                     attention_bias=bias, qk_norm=qk_norm)
    torch.manual_seed(1)
    model = DecoderForCausalLM(spec).float()
    for p in model.parameters():
        p.data.normal_(1.0 if p.dim() == 1 else 0.0, 0.2 if p.dim() == 1 else H ** -0.5)
    return model, spec
