"""Batch-1 GEMV: Triton (interpreter on CPU) against its torch reference; the Linear hook."""

import importlib

import pytest
import torch

from tachyon import kernels
from tachyon.kernels._triton import HAS_TRITON
from tachyon.kernels.gemm_small import SMALL_CONFIGS, gemm_small_triton
from tachyon.kernels.gemv import (
    CONFIGS,
    FUSED_CONFIGS,
    gemv_ref,
    gemv_triton,
)
from tachyon.kernels.gemv_select import pick_gemv_config, pick_small_config
from tachyon.models.layers import Linear, tune_gemv

needs_triton = pytest.mark.skipif(not HAS_TRITON, reason="triton not installed")
# Triton's CPU interpreter truncates fp32 -> bf16 casts (about half the values differ from torch's
# round-to-nearest), so a fused kernel's bf16 intermediates carry up to twice the rounding error here;
# on the GPU (round-to-nearest) pick_*_config admits a config only within 1e-2 of the unfused pair.
BF16_INTERP_TOL = 2e-2
DEV = "cuda" if torch.cuda.is_available() else "cpu"  # on a GPU the kernels run compiled


def on_dev(*ts: torch.Tensor | None) -> list[torch.Tensor | None]:
    return [t.to(DEV) if t is not None else None for t in ts]


@needs_triton
@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("N,K,bias", [(24, 300, False), (7, 2048, True), (33, 96, True), (5, 4096, False)])
def test_gemv_triton_matches_reference(config, N, K, bias):
    g = torch.Generator().manual_seed(N * K)
    x = torch.randn(1, K, generator=g)
    w = torch.randn(N, K, generator=g)
    b = torch.randn(N, generator=g) if bias else None
    out = gemv_triton(*on_dev(x, w, b), config).cpu()
    ref = gemv_ref(x, w, b)
    assert out.shape == (1, N) and not torch.isnan(out).any()
    assert torch.allclose(out, ref, rtol=1e-4, atol=1e-4)


@needs_triton
def test_gemv_triton_bf16():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 1024, generator=g).bfloat16()
    w = torch.randn(48, 1024, generator=g).bfloat16()
    out = gemv_triton(*on_dev(x, w), None, CONFIGS[2]).float().cpu()
    ref = gemv_ref(x.float(), w.float())
    assert ((out - ref).norm() / ref.norm()).item() <= 1e-2


def test_linear_uses_reference_off_gpu_and_tuning_is_cuda_only():
    lin = Linear(16, 8, bias=True)
    torch.nn.init.normal_(lin.weight)
    torch.nn.init.normal_(lin.bias)
    x = torch.randn(1, 16)
    base = lin(x)
    lin.gemv_config = CONFIGS[0]  # on CPU the dispatcher still takes the reference
    assert torch.equal(lin(x), base)
    assert torch.equal(kernels.gemv(x, lin.weight, lin.bias, CONFIGS[0]), base)
    assert pick_gemv_config(lin.weight, lin.bias) is None  # not CUDA: keep cuBLAS/torch
    lin.gemv_config = None
    assert tune_gemv(torch.nn.Sequential(lin)) == {} and lin.gemv_config is None


@needs_triton
@pytest.mark.parametrize("config", [CONFIGS[0], CONFIGS[2], CONFIGS[3], FUSED_CONFIGS[0]], ids=str)
@pytest.mark.parametrize("N,K", [(24, 300), (9, 2048)])
@pytest.mark.parametrize("with_res", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rmsnorm_gemv_matches_reference(config, N, K, with_res, dtype):
    from tachyon.kernels.gemv import rmsnorm_gemv_ref, rmsnorm_gemv_triton

    g = torch.Generator().manual_seed(N + K)
    x = torch.randn(1, K, generator=g).to(dtype)
    r = torch.randn(1, K, generator=g).to(dtype) if with_res else None
    nw = (1 + 0.1 * torch.randn(K, generator=g)).to(dtype)
    w = torch.randn(N, K, generator=g).to(dtype)
    b = torch.randn(N, generator=g).to(dtype)
    xd, rd, nwd, wd, bd = on_dev(x, r, nw, w, b)
    y, h = (t.cpu() for t in rmsnorm_gemv_triton(xd, rd, nwd, 1e-6, wd, bd, config))
    y_ref, h_ref = rmsnorm_gemv_ref(x, r, nw, 1e-6, w, b)
    if dtype == torch.float32:
        assert torch.equal(h, h_ref)  # the residual stream is exact (same rounding as a torch add)
    else:  # within one bf16 ulp (the interpreter truncates where torch rounds)
        assert torch.allclose(h.float(), h_ref.float(), rtol=2**-7, atol=0)
    tol = BF16_INTERP_TOL if dtype == torch.bfloat16 else 1e-4
    assert not torch.isnan(y).any()
    assert ((y.float() - y_ref.float()).norm() / y_ref.float().norm()).item() <= tol


@needs_triton
@pytest.mark.parametrize("config", [CONFIGS[0], FUSED_CONFIGS[0]], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_silu_gemv_matches_reference(config, dtype):
    from tachyon.kernels.gemv import silu_gemv_ref, silu_gemv_triton

    g = torch.Generator().manual_seed(1)
    x = torch.randn(1, 2 * 700, generator=g).to(dtype)
    w = torch.randn(17, 700, generator=g).to(dtype)
    y = silu_gemv_triton(*on_dev(x, w), None, config).cpu()
    y_ref = silu_gemv_ref(x, w, None)
    tol = BF16_INTERP_TOL if dtype == torch.bfloat16 else 1e-4
    assert not torch.isnan(y).any()
    assert ((y.float() - y_ref.float()).norm() / y_ref.float().norm()).item() <= tol


def test_fused_wiring_keeps_model_output(tiny_qwen3):
    """With every prologue layer marked fused (reference kernels on CPU), the model's batch-1 output
    is unchanged: the fused calls get the right inputs and carry the residual stream correctly."""
    from tachyon.models.loader import load_model, resolve_model

    model, spec = load_model(resolve_model(tiny_qwen3), dtype=torch.float32, device=torch.device("cpu"))
    lins = [m for m in model.modules() if isinstance(m, Linear) and m.prologue is not None]
    assert len(lins) == 3 * spec.num_layers
    from tachyon.engine.batch import AttentionMetadata

    t = 1
    cache = [torch.zeros(2, 4, 16, spec.num_kv_heads, spec.head_dim) for _ in range(spec.num_layers)]
    model.bind_kv_cache(cache)
    meta = AttentionMetadata(torch.tensor([0, t], dtype=torch.int32), torch.tensor([t], dtype=torch.int32),
                             torch.tensor([0]), torch.zeros(1, 4, dtype=torch.int32), t, t, False)
    ids, pos = torch.tensor([5]), torch.tensor([0])
    with torch.inference_mode():
        base = model(ids, pos, meta)
    for m in lins:
        m.fused_config = CONFIGS[0]
    with torch.inference_mode():
        fused = model(ids, pos, meta)
    assert torch.equal(base, fused)


@needs_triton
@pytest.mark.parametrize("config", SMALL_CONFIGS, ids=str)
@pytest.mark.parametrize("M,N,K,bias", [(2, 24, 300, True), (8, 70, 512, False), (5, 16, 1024, True)])
def test_gemm_small_matches_reference(config, M, N, K, bias):
    g = torch.Generator().manual_seed(M * N + K)
    x = torch.randn(M, K + 3, generator=g)[:, :K]  # row stride != K
    w = torch.randn(N, K, generator=g)
    b = torch.randn(N, generator=g) if bias else None
    y = gemm_small_triton(*on_dev(x, w, b), config).cpu()
    assert y.shape == (M, N) and not torch.isnan(y).any()
    assert torch.allclose(y, gemv_ref(x, w, b), rtol=1e-4, atol=1e-3)


@needs_triton
@pytest.mark.parametrize("M", [1, 3, 8])
def test_fp32_output_rounds_the_accumulator_once(M):
    """out_dtype=float32 (the decode graphs' logits): the GEMV (M=1) and the skinny GEMM write their fp32
    accumulator directly: close to a float64 oracle far inside bf16's rounding, and on the GPU the bf16
    output is exactly that fp32 output rounded (the interpreter truncates fp32 -> bf16 instead, and its
    bf16 tl.dot is unusable: the skinny GEMM gets fp32 inputs there)."""
    g = torch.Generator().manual_seed(M)
    N, K = 96, 512
    dt = torch.bfloat16 if DEV == "cuda" or M == 1 else torch.float32
    x = torch.randn(M, K, generator=g).to(dt)
    w = torch.randn(N, K, generator=g).to(dt)
    oracle = x.double() @ w.double().T
    if M == 1:
        y32 = gemv_triton(*on_dev(x, w), None, CONFIGS[0], out_dtype=torch.float32)
        y16 = gemv_triton(*on_dev(x, w), None, CONFIGS[0])
    else:
        y32 = gemm_small_triton(*on_dev(x, w), None, SMALL_CONFIGS[2], out_dtype=torch.float32)
        y16 = gemm_small_triton(*on_dev(x, w), None, SMALL_CONFIGS[2])
    assert y32.dtype == torch.float32 and y16.dtype == dt and y32.shape == (M, N)
    err = ((y32.cpu().double() - oracle).abs().max() / oracle.abs().max()).item()
    assert err < 1e-5, err
    if DEV == "cuda":
        assert torch.equal(y32.to(torch.bfloat16), y16)


def test_linear_and_logits_out_dtype_off_gpu():
    """On CPU (cuBLAS / torch path) out_dtype converts the result: the same values as .float()."""
    lin = Linear(64, 40)
    torch.nn.init.normal_(lin.weight)
    lin = lin.to(torch.bfloat16)
    x = torch.randn(3, 64).to(torch.bfloat16)
    y = lin(x, out_dtype=torch.float32)
    assert y.dtype == torch.float32 and torch.equal(y, lin(x).float())


@pytest.mark.skipif(DEV != "cuda", reason="cuBLAS writes fp32 from bf16 operands on CUDA only")
@pytest.mark.parametrize("M", [16, 256])
def test_linear_fp32_out_is_the_cublas_accumulator(M):
    """Past the Triton kernels' row counts, an fp32 out_dtype (the decode graphs' logits) is cuBLAS's fp32
    result itself: within fp32 rounding of a float64 oracle, where converting a bf16 result would be off by
    bf16's rounding (~1e-3)."""
    g = torch.Generator().manual_seed(M)
    lin = Linear(512, 320)
    lin.weight.data = torch.randn(320, 512, generator=g)
    lin = lin.to(device=DEV, dtype=torch.bfloat16)
    x = torch.randn(M, 512, generator=g).to(device=DEV, dtype=torch.bfloat16)
    oracle = x.double() @ lin.weight.double().T
    y = lin(x, out_dtype=torch.float32)
    assert y.dtype == torch.float32 and y.shape == (M, 320)
    assert ((y.double() - oracle).abs().max() / oracle.abs().max()).item() < 1e-5
    bf16_err = ((lin(x).double() - oracle).abs().max() / oracle.abs().max()).item()
    assert bf16_err > 1e-4, "the oracle must tell the two apart"


def test_linear_small_batch_dispatch():
    lin = Linear(32, 8)
    torch.nn.init.normal_(lin.weight)
    x = torch.randn(4, 32)
    base = lin(x)
    lin.small_config = SMALL_CONFIGS[0]  # CPU: the dispatcher keeps the reference
    assert torch.equal(lin(x), base)
    assert pick_small_config(lin.weight, None) is None


def test_gemv_pdl_policy(monkeypatch):
    """Every batch-1 GEMV launches early (PDL); only those up to 160 MiB (a 7B qkv / o_proj / down, not its
    multi-wave gate_up or lm_head) trigger their successor's early launch; knobs override each limit."""
    G = importlib.import_module("tachyon.kernels.gemv")
    monkeypatch.setattr(G, "pdl_args", lambda d: {"PDL": True, "launch_pdl": True})
    for k in ("TACHYON_PDL_GEMV", "TACHYON_PDL_GEMV_MAX_MB", "TACHYON_PDL_GEMV_TRIGGER_MAX_MB",
              "TACHYON_PDL_GEMV_LAST_WAVE"):
        monkeypatch.delenv(k, raising=False)
    dev = torch.device("cpu")
    on = {"PDL": True, "launch_pdl": True, "TRIG": True}
    quiet = {"PDL": True, "launch_pdl": True, "TRIG": False}
    assert G._gemv_pdl(dev, 4608 * 3584 * 2) == on  # Qwen2.5-7B qkv
    assert G._gemv_pdl(dev, 18944 * 3584 * 2) == on  # Qwen2.5-7B down
    assert G._gemv_pdl(dev, 2 * 18944 * 3584 * 2) == quiet  # Qwen2.5-7B gate_up
    assert G._gemv_pdl(dev, 152064 * 3584 * 2) == quiet  # Qwen2.5-7B lm_head
    # the last-wave trigger (off by default): gate_up's 9,472 programs trigger from 9,472 - 8 * 132 on; a grid
    # of one wave or less is left quiet; GEMVs that trigger at their start are unchanged
    monkeypatch.setenv("TACHYON_PDL_GEMV_LAST_WAVE", "8")
    assert G._gemv_pdl(dev, 2 * 18944 * 3584 * 2, 9472) == on | {"TRIG_FROM": 9472 - 8 * 132}
    assert G._gemv_pdl(dev, 2 * 18944 * 3584 * 2, 8 * 132) == quiet
    assert G._gemv_pdl(dev, 4608 * 3584 * 2, 2304) == on
    monkeypatch.delenv("TACHYON_PDL_GEMV_LAST_WAVE")
    monkeypatch.setenv("TACHYON_PDL_GEMV_TRIGGER_MAX_MB", "300")
    assert G._gemv_pdl(dev, 2 * 18944 * 3584 * 2) == on
    monkeypatch.setenv("TACHYON_PDL_GEMV_MAX_MB", "100")
    assert G._gemv_pdl(dev, 18944 * 3584 * 2) == {"PDL": False, "TRIG": True}
    monkeypatch.delenv("TACHYON_PDL_GEMV_TRIGGER_MAX_MB")
    assert G._gemv_pdl(dev, 2 * 18944 * 3584 * 2) == {"PDL": False, "TRIG": False}
    monkeypatch.setenv("TACHYON_PDL_GEMV", "off")
    assert G._gemv_pdl(dev, 1024) == {"PDL": False, "TRIG": False}
    monkeypatch.setenv("TACHYON_PDL_GEMV", "start")
    assert G._gemv_pdl(dev, 1 << 34) == on


def test_small_gemm_pdl_policy(monkeypatch):
    """Skinny GEMMs launch early where PDL is on; only those up to 160 MiB trigger (not a 7B gate_up)."""
    G = importlib.import_module("tachyon.kernels.gemm_small")
    monkeypatch.setattr(G, "pdl_args", lambda d: {"PDL": True, "launch_pdl": True})
    monkeypatch.delenv("TACHYON_PDL_SMALL_TRIGGER_MAX_MB", raising=False)
    dev = torch.device("cpu")
    assert G._small_pdl(dev, 18944 * 3584 * 2) == {"PDL": True, "launch_pdl": True, "TRIG": True}
    assert G._small_pdl(dev, 2 * 18944 * 3584 * 2) == {"PDL": True, "launch_pdl": True, "TRIG": False}
    monkeypatch.setenv("TACHYON_PDL_SMALL_TRIGGER_MAX_MB", "300")
    assert G._small_pdl(dev, 2 * 18944 * 3584 * 2)["TRIG"]
    monkeypatch.setattr(G, "pdl_args", lambda d: {"PDL": False})
    assert G._small_pdl(dev, 1024) == {"PDL": False, "TRIG": False}


def test_tied_lm_head_shares_the_embedding(tiny_qwen3):
    """A tied model's lm_head is a Linear over the embedding's own parameter (no copy, listed once, not a
    checkpoint key), so warm-up tunes it like any projection; its logits are x @ E^T."""
    from tachyon.models.loader import load_model, resolve_model

    model, spec = load_model(resolve_model(tiny_qwen3), dtype=torch.float32, device=torch.device("cpu"))
    assert spec.tie_word_embeddings
    assert model.lm_head.weight is model.embed_tokens.weight
    names = [n for n, _ in model.named_parameters()]
    assert "embed_tokens.weight" in names and "lm_head.weight" not in names
    assert "lm_head.weight" not in model.expected_keys()
    h = torch.randn(3, spec.hidden_size)
    ref = h @ model.embed_tokens.weight.T
    assert torch.equal(model.compute_logits(h), ref)
    one = torch.nn.functional.linear(h[:1], model.embed_tokens.weight)
    assert torch.equal(model.compute_logits(h[:1], out_dtype=torch.float64), one.double())
    with torch.no_grad():
        model.embed_tokens.weight[0].add_(1.0)  # one storage: the head sees the change
    assert torch.equal(model.compute_logits(h), h @ model.embed_tokens.weight.T)
    assert any(m is model.lm_head for m in model.modules() if isinstance(m, Linear))


@needs_triton
@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("inter,K,bias", [(24, 300, False), (33, 96, True), (5, 1024, False)])
def test_gemv_glu_matches_reference(config, inter, K, bias):
    """The gate|up GEMV with SiLU-and-mul in its epilogue against silu_and_mul(linear(x, w)) (fp32): every
    activation written (rows past a program's end clamped, dropped at the store), bias on both halves."""
    from tachyon.kernels.gemv_glu import gemv_glu_ref, gemv_glu_triton

    g = torch.Generator().manual_seed(inter * K)
    x = torch.randn(1, K, generator=g)
    w = torch.randn(2 * inter, K, generator=g)
    b = torch.randn(2 * inter, generator=g) if bias else None
    out = gemv_glu_triton(*on_dev(x, w, b), config).cpu()
    ref = gemv_glu_ref(x, w, b)
    assert out.shape == (1, inter) and not torch.isnan(out).any()
    assert torch.allclose(out, ref, rtol=1e-4, atol=1e-4)


@needs_triton
def test_gemv_glu_bf16_rounds_like_the_pair():
    """bf16: within the interpreter's cast tolerance of the reference, and of the unfused Triton pair."""
    from tachyon.kernels.activation import silu_and_mul_triton
    from tachyon.kernels.gemv_glu import gemv_glu_ref, gemv_glu_triton

    g = torch.Generator().manual_seed(3)
    x = torch.randn(1, 512, generator=g).bfloat16()
    w = (torch.randn(2 * 40, 512, generator=g) / 8).bfloat16()
    out = gemv_glu_triton(*on_dev(x, w), None, CONFIGS[1]).float().cpu()
    ref = gemv_glu_ref(x.float(), w.float())
    pair = silu_and_mul_triton(gemv_triton(*on_dev(x, w), None, CONFIGS[1])).float().cpu()
    assert ((out - ref).norm() / ref.norm()).item() <= BF16_INTERP_TOL
    assert ((out - pair).norm() / pair.norm()).item() <= BF16_INTERP_TOL


def test_glu_wiring_keeps_model_output(tiny_qwen3):
    """With every gate|up layer given an epilogue config (reference kernels on CPU), the batch-1 model output
    is bit-identical: the norm runs standalone, the activation comes from gemv_glu, down runs plain."""
    from tachyon.engine.batch import AttentionMetadata
    from tachyon.models.loader import load_model, resolve_model

    model, spec = load_model(resolve_model(tiny_qwen3), dtype=torch.float32, device=torch.device("cpu"))
    ups = [m for m in model.modules() if isinstance(m, Linear) and m.epilogue == "silu"]
    assert len(ups) == spec.num_layers
    cache = [torch.zeros(2, 4, 16, spec.num_kv_heads, spec.head_dim) for _ in range(spec.num_layers)]
    model.bind_kv_cache(cache)
    meta = AttentionMetadata(torch.tensor([0, 1], dtype=torch.int32), torch.tensor([1], dtype=torch.int32),
                             torch.tensor([0]), torch.zeros(1, 4, dtype=torch.int32), 1, 1, False)
    ids, pos = torch.tensor([5]), torch.tensor([0])
    calls = []
    real = kernels.gemv_glu
    with torch.inference_mode():
        base = model(ids, pos, meta)
        for m in ups:
            m.epilogue_config = CONFIGS[0]
        kernels.gemv_glu = lambda *a: calls.append(1) or real(*a)
        try:
            glu = model(ids, pos, meta)
        finally:
            kernels.gemv_glu = real
    assert len(calls) == spec.num_layers and torch.equal(base, glu)
