"""decoder_layer_bs1 (a whole decoder layer at batch 1 in one kernel) against its reference (the layer's unfused
kernels' references in order), and that reference against the model's own DecoderLayer. On CPU the Triton kernel
runs under the interpreter in its five-launch form (a grid barrier cannot be passed there); on a GPU both forms
run and must agree."""

import pytest
import torch

from tachyon.kernels.layer_bs1 import (
    LayerBs1Weights,
    decoder_layer_bs1_ref,
    decoder_layer_bs1_triton,
    layer_bs1_fits,
    layer_bs1_splits,
)
from tachyon.kernels.layer_bs1_knobs import layer_bs1_mode
from tests.kernel_env import CUDA, DEV, DTYPES, K, assert_counters_zero, close, needs_triton, tol
from tests.layer_bs1_cases import PAGE, SHAPES, close_layer, fp32_case, make_case, run, tiny_model

pytestmark = pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # log(0) of empty splits


def test_reference_is_the_model_layer():
    """The reference equals the model's DecoderLayer.forward (CPU: the reference path) on the same weights."""
    from tachyon.models.layers import RotaryEmbedding
    from tachyon.models.llama import DecoderLayer
    from tachyon.models.spec import ModelSpec

    H, Hq, Hkv, D, inter, _, _ = SHAPES["qwen3"]
    spec = ModelSpec(architecture="Qwen3ForCausalLM", family="qwen3", vocab_size=64, hidden_size=H,
                     intermediate_size=inter, num_layers=1, num_heads=Hq, num_kv_heads=Hkv, head_dim=D,
                     rms_norm_eps=1e-6, rope_theta=10000.0, rope_scaling=None, max_position_embeddings=64,
                     tie_word_embeddings=True, attention_bias=False, qk_norm=True)
    torch.manual_seed(0)
    layer = DecoderLayer(spec, RotaryEmbedding(D, 64, 10000.0, None)).float()
    for p in layer.parameters():
        p.data.normal_(1.0 if p.dim() == 1 else 0.0, 0.2 if p.dim() == 1 else H ** -0.5)
    case = make_case("qwen3", torch.float32, seq_len=11, max_seq_len=64, residual=True, dev="cpu")
    at = layer.self_attn
    case["lw"] = LayerBs1Weights(
        layer.input_layernorm.weight, at.qkv_proj.weight, None, at.q_norm.weight, at.k_norm.weight, at.o_proj.weight,
        layer.post_attention_layernorm.weight, layer.mlp.gate_up_proj.weight, layer.mlp.down_proj.weight,
        layer.input_layernorm.eps, at.q_norm.eps, Hq, Hkv, D, at.scale)
    case["cos_sin_cache"] = at.rotary.cos_sin_cache
    y, h2, cache = run(decoder_layer_bs1_ref, case)
    from tachyon.engine.batch import AttentionMetadata

    at.kv_cache = case["kv_cache"].clone()
    meta = AttentionMetadata(query_start_loc=torch.arange(2, dtype=torch.int32), seq_lens=case["seq_lens"],
                             block_tables=case["block_tables"], slot_mapping=case["slot_mapping"], max_query_len=1,
                             max_seq_len=case["max_seq_len"], is_decode_only=True)
    with torch.no_grad():
        y_m, h2_m = layer(case["seq_lens"].long() - 1, case["x"], case["residual"], meta)
    torch.testing.assert_close(y_m, y, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(h2_m, h2)
    torch.testing.assert_close(at.kv_cache, cache, equal_nan=True)


@needs_triton
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("seq_len,max_seq_len,residual", [(1, 16, False), (7, 16, True), (200, 512, True)])
def test_layer_kernel_matches_reference(shape, dtype, seq_len, max_seq_len, residual):
    """Phases launched one by one (the interpreter's form): y, h2 and the whole cache (the new slot written, no
    other touched) against the reference (y and h2 in bf16: against the fp32 layer, close_layer). 200 keys of 512
    split into several splits merged inline."""
    case = make_case(shape, dtype, seq_len, max_seq_len, residual)
    y_r, h2_r, cache_r = run(decoder_layer_bs1_ref, case)
    y_t, h2_t, cache_t = run(decoder_layer_bs1_triton, case, num_programs=8, phases=True)
    if dtype != torch.float32:
        y_r, h2_r, _ = run(decoder_layer_bs1_ref, fp32_case(case))
    close_layer(y_t, y_r, dtype)
    close_layer(h2_t, h2_r, dtype)
    assert not torch.isnan(cache_t[:, case["slot_mapping"][0] // PAGE, case["slot_mapping"][0] % PAGE]).any()
    torch.testing.assert_close(cache_t.float(), cache_r.float(), equal_nan=True, **tol(dtype))
    assert_counters_zero()


@needs_triton
@pytest.mark.parametrize("phase_warps,gemv_programs", [("4:8:16:4:8", "2"), ("", "4"), ("", "1")])
def test_five_launch_knobs(phase_warps, gemv_programs, monkeypatch):
    """The five-launch form's A/B knobs (TACHYON_LAYER_BS1_PHASE_WARPS, TACHYON_LAYER_BS1_GEMV_PROGRAMS: the
    projection launches on more programs, fewer rows each; attention keeps its grid) compute what the reference
    does; a malformed value is an error naming the variable."""
    monkeypatch.setenv("TACHYON_LAYER_BS1_PHASE_WARPS", phase_warps)
    monkeypatch.setenv("TACHYON_LAYER_BS1_GEMV_PROGRAMS", gemv_programs)
    case = make_case("qwen2", torch.float32, 200, 512, True)
    y_r, h2_r, cache_r = run(decoder_layer_bs1_ref, case)
    y_t, h2_t, cache_t = run(decoder_layer_bs1_triton, case, num_programs=8, phases=True)
    close(y_t, y_r, torch.float32)
    close(h2_t, h2_r, torch.float32)
    torch.testing.assert_close(cache_t, cache_r, equal_nan=True, **tol(torch.float32))
    for var, bad in (("TACHYON_LAYER_BS1_PHASE_WARPS", "16:4"), ("TACHYON_LAYER_BS1_GEMV_PROGRAMS", "3")):
        monkeypatch.setenv(var, bad)
        with pytest.raises(ValueError, match=var):
            run(decoder_layer_bs1_triton, case, num_programs=8, phases=True)
        monkeypatch.setenv(var, "")


@needs_triton
def test_layer_kernel_more_items_than_programs():
    """Fewer programs than (KV head, split) items and row blocks of many rows: each program loops over items."""
    case = make_case("qwen3", torch.float32, 300, 1024, True)
    assert layer_bs1_splits(1024, 2, 3) == 1 and layer_bs1_splits(1024, 2, 32) == 8
    y_r, h2_r, cache_r = run(decoder_layer_bs1_ref, case)
    y_t, h2_t, cache_t = run(decoder_layer_bs1_triton, case, num_programs=3, phases=True)
    close(y_t, y_r, torch.float32)
    close(h2_t, h2_r, torch.float32)
    torch.testing.assert_close(cache_t, cache_r, equal_nan=True, **tol(torch.float32))


@needs_triton
@pytest.mark.timeout(120, method="thread")  # a barrier that never opens hangs rather than fails
@pytest.mark.parametrize("prefetch", ["next", "early"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_layer_kernel_one_launch_single_program(shape, prefetch, monkeypatch):
    """The one-launch form (all five phases, grid barriers, each prefetch placement) with one program, which the
    interpreter can run: its barriers pass at once. Against the reference; each barrier leaves the arrival count at
    zero and bumps the generation (four per launch)."""
    from tachyon.kernels.layer_bs1 import grid_barrier

    monkeypatch.setenv("TACHYON_LAYER_BS1_PREFETCH", prefetch)
    case = make_case(shape, torch.float32, 200, 512, True)
    bar = grid_barrier(torch.device(DEV))
    gen0 = int(bar[1])
    y_r, h2_r, cache_r = run(decoder_layer_bs1_ref, case)
    y_t, h2_t, cache_t = run(decoder_layer_bs1_triton, case, num_programs=1)
    close(y_t, y_r, torch.float32)
    close(h2_t, h2_r, torch.float32)
    torch.testing.assert_close(cache_t, cache_r, equal_nan=True, **tol(torch.float32))
    assert int(bar[0]) == 0 and int(bar[1]) == gen0 + 4
    assert_counters_zero()


@pytest.mark.skipif(not CUDA, reason="the grid barrier needs every program resident at once: a GPU")
@pytest.mark.timeout(180, method="thread")  # a barrier that never opens hangs rather than fails
@pytest.mark.parametrize("warps,prefetch", [("16", "next"), ("8", "next"), ("16", "early"), ("8", "early")])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_layer_kernel_one_launch_matches_phases(shape, warps, prefetch, monkeypatch):
    """On a GPU: the one-launch form (grid barriers) gives what the five launches give, at the multiprocessor
    count's programs, under each warp count and prefetch placement, and leaves the barrier's counter at zero."""
    from tachyon.kernels.layer_bs1 import grid_barrier

    monkeypatch.setenv("TACHYON_LAYER_BS1_WARPS", warps)
    monkeypatch.setenv("TACHYON_LAYER_BS1_PREFETCH", prefetch)
    case = make_case(shape, torch.bfloat16, 300, 1024, True)
    y_p, h2_p, cache_p = run(decoder_layer_bs1_triton, case, phases=True)
    for _ in range(3):
        y_f, h2_f, cache_f = run(decoder_layer_bs1_triton, case)
        torch.testing.assert_close(y_f, y_p)
        torch.testing.assert_close(h2_f, h2_p)
        torch.testing.assert_close(cache_f, cache_p, equal_nan=True)
    assert int(grid_barrier(y_f.device)[0]) == 0
    assert_counters_zero()


def test_fits_and_mode(monkeypatch):
    """Qwen3-0.6B's row blocks fit on 132 programs, Qwen2.5-7B's do not; the knob names its values."""
    def weights(H, Hq, Hkv, D, inter):
        e = torch.empty
        return LayerBs1Weights(e(H), e((Hq + 2 * Hkv) * D, H), None, None, None, e(H, Hq * D), e(H),
                               e(2 * inter, H), e(H, inter), 1e-6, 1e-6, Hq, Hkv, D, 1.0)

    with torch.device("meta"):
        assert layer_bs1_fits(weights(1024, 16, 8, 128, 3072), 132)
        assert not layer_bs1_fits(weights(3584, 28, 4, 128, 18944), 132)
    cpu = torch.device("cpu")
    monkeypatch.delenv("TACHYON_LAYER_BS1", raising=False)
    assert layer_bs1_mode(cpu) == "phases"
    monkeypatch.setenv("TACHYON_LAYER_BS1", "fused")
    assert layer_bs1_mode(cpu) == "fused"
    monkeypatch.setenv("TACHYON_LAYER_BS1", "yes")
    with pytest.raises(ValueError, match="TACHYON_LAYER_BS1"):
        layer_bs1_mode(cpu)


def test_default_form_follows_the_gpu_measured(monkeypatch):
    """Unset, TACHYON_LAYER_BS1 gives the five launches on an H100 SXM (measured 8.4-9.0% faster) and the ten-kernel
    path on an H200 (measured 1.1-1.5% slower) and on any GPU never measured; the variable still wins."""
    names = {0: "NVIDIA H100 80GB HBM3", 1: "NVIDIA H200", 2: "NVIDIA A100-SXM4-80GB", 3: "NVIDIA H100 PCIe"}
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: names[device.index])
    monkeypatch.delenv("TACHYON_LAYER_BS1", raising=False)
    modes = [layer_bs1_mode(torch.device("cuda", i)) for i in range(4)]
    assert modes == ["phases", "off", "off", "off"]
    monkeypatch.setenv("TACHYON_LAYER_BS1", "phases")
    assert layer_bs1_mode(torch.device("cuda", 1)) == "phases"


def test_shape_errors_name_the_field():
    case = make_case("qwen3", torch.float32, 3, 16, True)
    case["x"] = case["x"][:, :-1]
    with pytest.raises(ValueError, match="x and residual"):
        decoder_layer_bs1_ref(**case)


def test_layer_mode_default_and_what_keeps_the_usual_kernels(monkeypatch):
    """With Triton usable, a batch-1 decode step takes "phases" by default; "off" asked, a prompt chunk (query
    length > 1), two rows or an FP8 KV cache keep the layer's usual kernels."""
    from tachyon.engine.batch import AttentionMetadata
    from tachyon.models import llama

    model, spec = tiny_model("qwen3")
    monkeypatch.setattr(K, "use_triton", lambda t: True)
    monkeypatch.setattr(llama, "sm_count", lambda dev: 132)
    monkeypatch.delenv("TACHYON_LAYER_BS1", raising=False)
    layer = model.layers[0]
    layer.self_attn.kv_cache = torch.zeros(2, 4, PAGE, spec.num_kv_heads, spec.head_dim)

    def meta(q: int) -> AttentionMetadata:
        return AttentionMetadata(query_start_loc=torch.tensor([0, q], dtype=torch.int32),
                                 seq_lens=torch.tensor([q], dtype=torch.int32), block_tables=torch.zeros(1, 4),
                                 slot_mapping=torch.zeros(q, dtype=torch.int64), max_query_len=q, max_seq_len=16,
                                 is_decode_only=q == 1)

    x1, x2 = torch.zeros(1, spec.hidden_size), torch.zeros(2, spec.hidden_size)
    assert layer.bs1_layer_mode(x1, meta(1)) == "phases"
    assert layer.bs1_layer_mode(x2, meta(2)) == "off"
    monkeypatch.setenv("TACHYON_LAYER_BS1", "off")
    assert layer.bs1_layer_mode(x1, meta(1)) == "off"
    monkeypatch.delenv("TACHYON_LAYER_BS1")
    layer.self_attn.kv_cache = layer.self_attn.kv_cache.to(torch.float8_e4m3fn)
    assert layer.bs1_layer_mode(x1, meta(1)) == "off"


@needs_triton
@pytest.mark.timeout(180, method="thread")  # fused on a GPU: a barrier that never opens hangs rather than fails
@pytest.mark.parametrize("mode", ["phases", "fused", "model"] if CUDA else ["phases", "model"])
@pytest.mark.parametrize("arch", list(SHAPES))
def test_model_decode_step_through_layer_kernel(arch, mode, monkeypatch):
    """The model's decode step through the batch-1 kernels (TACHYON_LAYER_BS1: every layer through the layer
    kernel, or all in the model kernel; Triton under the interpreter on CPU, the model kernel there on one program)
    against the same step without them (the reference path on CPU, the unfused kernels on a GPU): hidden states and
    every layer's cache."""
    from tachyon.engine.batch import AttentionMetadata
    from tachyon.kernels import layer_bs1

    model, spec = tiny_model(arch)
    model.to(DEV)
    seq_len, max_seq_len = 37, 128
    gen = torch.Generator().manual_seed(2)
    nblk = max_seq_len // PAGE
    caches = [torch.randn(2, nblk + 1, PAGE, spec.num_kv_heads, spec.head_dim, generator=gen).to(DEV)
              for _ in range(spec.num_layers)]
    table = torch.randperm(nblk + 1, generator=gen)[:nblk].to(torch.int32)[None, :]
    slot = int(table[0, (seq_len - 1) // PAGE]) * PAGE + (seq_len - 1) % PAGE
    meta = AttentionMetadata(query_start_loc=torch.arange(2, dtype=torch.int32, device=DEV),
                             seq_lens=torch.tensor([seq_len], dtype=torch.int32, device=DEV),
                             block_tables=table.to(DEV), slot_mapping=torch.tensor([slot], device=DEV),
                             max_query_len=1, max_seq_len=max_seq_len, is_decode_only=True)
    ids, pos = torch.tensor([5], device=DEV), torch.tensor([seq_len - 1], device=DEV)

    def step(layer_kernel: bool):
        kv = [c.clone() for c in caches]
        model.bind_kv_cache(kv)
        calls = []
        monkeypatch.setenv("TACHYON_LAYER_BS1", mode if layer_kernel else "off")
        if layer_kernel:
            if not CUDA:  # CPU tensors take the reference path unless told otherwise; one program passes barriers
                monkeypatch.setattr(K, "use_triton", lambda t: True)
                monkeypatch.setattr(layer_bs1, "sm_count", lambda dev: 1 if mode == "model" else 132)
            for name in ("decoder_layer_bs1", "decoder_model_bs1"):
                real = getattr(K, name)
                monkeypatch.setattr(K, name, lambda *a, name=name, real=real, **kw: calls.append((name, kw))
                                    or real(*a, **kw))
        with torch.no_grad():
            out = model(ids, pos, meta)
        monkeypatch.undo()
        if not layer_kernel:
            assert calls == []
        elif mode == "model":
            assert calls == [("decoder_model_bs1", {})]
        else:
            assert calls == [("decoder_layer_bs1", {"phases": mode == "phases"})] * spec.num_layers
        return out, kv

    ref, kv_ref = step(False)
    out, kv = step(True)
    close(out, ref, torch.float32)
    for a, b in zip(kv, kv_ref):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


@needs_triton
def test_layer_kernel_fp8_cache():
    """An e4m3 KV cache (kv_cache_dtype="fp8"): the new key and value stored as the reference stores them, nothing
    else touched, y and h2 as the reference's over the same cache (fp32 activations)."""
    fp8 = torch.float8_e4m3fn
    case = make_case("qwen3", torch.float32, 200, 512, True)
    case["kv_cache"] = K.quant_fp8.cast_to_cache_ref(case["kv_cache"], fp8)
    y_r, h2_r, cache_r = run(decoder_layer_bs1_ref, case)
    y_t, h2_t, cache_t = run(decoder_layer_bs1_triton, case, num_programs=8, phases=True)
    close(y_t, y_r, torch.float32)
    close(h2_t, h2_r, torch.float32)
    slot = int(case["slot_mapping"][0])
    new_t, new_r = (c[:, slot // PAGE, slot % PAGE].float() for c in (cache_t, cache_r))
    assert not torch.isnan(new_t).any(), "the new key and value are stored"
    # the new entries: the reference's e4m3 values, or (on a GPU, whose qkv sums differ in the last fp32 bits) the
    # neighbouring one; every other byte untouched
    torch.testing.assert_close(new_t, new_r, rtol=0.13, atol=2 ** -9)
    if not CUDA:  # the interpreter's sums give the reference's bytes exactly
        assert torch.equal(cache_t.view(torch.uint8), cache_r.view(torch.uint8))
    cache_t[:, slot // PAGE, slot % PAGE] = cache_r[:, slot // PAGE, slot % PAGE]
    assert torch.equal(cache_t.view(torch.uint8), cache_r.view(torch.uint8))
