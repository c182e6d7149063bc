"""Compile every Tachyon Triton kernel for a GPU target without a GPU (meta tensors, Triton's full
pipeline down to the cubin): catches constructs a given Triton version rejects before device time is
spent. Each `*_kernel` launch is intercepted and compiled with the signature and constexprs it would
have run with, at representative Qwen2.5-7B shapes. Paths the engine never takes on the target (FP8 below
sm_89, the L2 prefetch below sm_90) are left out and named. tests/test_compile_check.py runs it for sm_90 and sm_80.

Usage (any machine with triton, e.g. a venv holding the GPU machine's triton version):
    TRITON_INTERPRET=0 python benchmarks/kernels/compile_check.py [--arch 90] [--registers]
Exit status 1 if any kernel fails to compile.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import traceback
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "0"  # before tachyon's kernels import triton
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

MODULES = ("activation", "attention", "attention_mixed", "decode_fused", "embedding", "fused_qkv", "gemm_small", "gemv",
           "gemv_glu", "layer_bs1", "model_bs1", "penalties", "prefetch", "quant_fp8", "rmsnorm", "rotary", "sampling",
           "split_kv", "store_kv")
TYPES = {torch.bfloat16: "*bf16", torch.float32: "*fp32", torch.int32: "*i32", torch.int64: "*i64", torch.uint8: "*u8",
         torch.float8_e4m3fn: "*fp8e4nv"}
RESULTS: list[tuple[str, bool, str]] = []


def _ptxas_usage(ptx: str, arch: int) -> str:
    """ptxas -v's register / spill line for one kernel's PTX (the ptxas bundled with triton)."""
    import subprocess
    import tempfile

    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "k.ptx"
        src.write_text(ptx)
        out = subprocess.run([str(ptxas), "-v", f"-arch=sm_{arch}{'a' if arch >= 90 else ''}", str(src), "-o",
                              str(Path(d) / "k.cubin")], capture_output=True, text=True).stderr
    regs = re.search(r"Used (\d+) registers", out)
    spill = re.search(r"(\d+) bytes spill stores", out)
    return f"{regs[1] if regs else '?'} registers, {spill[1] if spill else '?'} bytes spilled"


class _Compile:
    """Stands in for a JITFunction: `kernel[grid](*args, **kw)` compiles instead of launching."""

    def __init__(self, fn, arch: int, registers: bool = False):
        self.fn, self.arch, self.registers = fn, arch, registers

    def __getitem__(self, grid):
        def call(*args, **kw):
            fn = self.fn
            opts = {k: kw.pop(k) for k in ("num_warps", "num_stages", "enable_fp_fusion", "launch_pdl") if k in kw}
            vals = dict(zip(fn.arg_names, args))
            vals.update(kw)
            sig, const, attrs = {}, {}, {}
            for i, p in enumerate(fn.params):
                v = vals[p.name] if p.name in vals else p.default
                if p.is_constexpr:
                    sig[p.name], const[p.name] = "constexpr", v
                elif isinstance(v, torch.Tensor):
                    sig[p.name] = TYPES[v.dtype]
                    attrs[(i,)] = [["tt.divisibility", 16]]  # as the JIT specialises 16-byte aligned pointers
                elif isinstance(v, bool):
                    sig[p.name] = "i1"
                elif isinstance(v, int):
                    sig[p.name] = "i32" if -2**31 <= v < 2**31 else "i64"
                    if v % 16 == 0 and not p.do_not_specialize:
                        attrs[(i,)] = [["tt.divisibility", 16]]
                elif isinstance(v, float):
                    sig[p.name] = "fp32"
                else:
                    raise TypeError(f"{fn.__name__}: argument {p.name} of type {type(v).__name__}")
            try:
                k = triton.compile(ASTSource(fn, sig, const, attrs), target=GPUTarget("cuda", self.arch, 32),
                                   options=opts)
                # the variant's tensor dtypes in the registers report: which variant spills (e.g. fp32 against bf16)
                kinds = "/".join(dict.fromkeys(t[1:] for t in sig.values() if t.startswith("*")))
                name = f"{fn.__name__} [{kinds}]" if self.registers else fn.__name__
                usage = f"{_ptxas_usage(k.asm['ptx'], self.arch)}, {k.metadata.shared} B shared"
                RESULTS.append((name, True, usage if self.registers else ""))
            except Exception as e:  # noqa: BLE001 - reported below
                traceback.print_exc()
                RESULTS.append((fn.__name__, False, repr(e)[:300]))
        return call


def launch_all(arch: int) -> list[str]:
    """Launch every kernel variant the engine can run on `arch`; returns what was left out, and why."""
    K = importlib.import_module("tachyon.kernels")
    G = importlib.import_module("tachyon.kernels.gemv")
    GLU = importlib.import_module("tachyon.kernels.gemv_glu")
    SMALL = importlib.import_module("tachyon.kernels.gemm_small")
    meta = "meta"

    def t(dtype, *shape):
        return torch.empty(*shape, device=meta, dtype=dtype)

    for dt in (torch.bfloat16, torch.float32):
        hq, hkv, d, page = 28, 4, 128, 16
        q = t(dt, 4096, hq, d)
        cache = t(dt, 2, 1000, page, hkv, d)
        i32, i64, f32 = (lambda *s, x=x: t(x, *s) for x in (torch.int32, torch.int64, torch.float32))
        for b, ctx in ((1, 4096), (256, 4096)):
            K.attention_triton(q[:b], cache, i32(b + 1), i32(b), i32(b, 300), 1, ctx, 0.1)
        K.attention_triton(q[:256], cache, i32(257), i32(256), i32(256, 300), 1, 4096, 0.1,
                           decode_order=i32(256))  # TACHYON_DECODE_ORDER=lpt's form
        K.attention_triton(q, cache, i32(2), i32(1), i32(1, 300), 4096, 4096, 0.1)
        K.mixed_attention_triton(q[:288], cache, i32(161), i32(160), i32(160, 300), i32(3), i32(2), i32(2, 300), 288,
                                 4096, 0.1)
        K.mixed_attention_triton(q[:288], cache, i32(161), i32(160), i32(160, 300), i32(3), i32(2), i32(2, 300), 288,
                                 4096, 0.1, decode_order=i32(160))  # TACHYON_MIXED_ORDER=lpt's form
        K.store_kv_triton(q[:, :hkv], q[:, :hkv], cache, i64(4096))
        x = t(dt, 4096, 3584)
        K.rmsnorm_triton(x, t(dt, 3584), 1e-6, x)
        K.rotary_triton(q, q[:, :hkv], i64(4096), f32(32768, 128))
        K.silu_and_mul_triton(t(dt, 4096, 2 * 18944))
        for cfg in G.CONFIGS + G.FUSED_CONFIGS:
            G.gemv_triton(t(dt, 1, 3584), t(dt, 4608, 3584), t(dt, 4608), cfg)
            G.rmsnorm_gemv_triton(t(dt, 1, 3584), t(dt, 1, 3584), t(dt, 3584), 1e-6, t(dt, 4608, 3584), None, cfg)
            G.silu_gemv_triton(t(dt, 1, 2 * 18944), t(dt, 3584, 18944), None, cfg)
            GLU.gemv_glu_triton(t(dt, 1, 1024), t(dt, 2 * 3072, 1024), None, cfg)
        for cfg in SMALL.SMALL_CONFIGS:
            SMALL.gemm_small_triton(t(dt, 8, 18944), t(dt, 3584, 18944), None, cfg)
    qkv = t(torch.bfloat16, 4096, (16 + 2 * 8) * 128)
    K.qkv_post_triton(qkv, i64(4096), f32(40960, 128), t(torch.bfloat16, 2, 100, 16, 8, 128), i64(4096),
                      t(torch.bfloat16, 128), t(torch.bfloat16, 128), 1e-6, 16, 8, 128)
    for hq_, hkv_, has_norm, b, ctx in ((28, 4, False, 1, 4096), (16, 8, True, 8, 4096), (28, 4, False, 256, 4096)):
        w = t(torch.bfloat16, 128) if has_norm else None
        K.decode_qkv_attention_triton(t(torch.bfloat16, b, (hq_ + 2 * hkv_) * 128), f32(40960, 128),
                                      t(torch.bfloat16, 2, 100, 16, hkv_, 128), i64(b), w, w, 1e-6, hq_, hkv_, 128,
                                      i32(b + 1), i32(b), i32(b, 300), ctx, 0.1)
    K.decode_qkv_attention_triton(t(torch.bfloat16, 8, 36 * 128), f32(40960, 128),
                                  t(torch.bfloat16, 2, 100, 16, 4, 128), i64(8), None, None, 1e-6, 28, 4, 128,
                                  i32(9), i32(8), i32(8, 300), 4096, 0.1,
                                  decode_order=i32(8))  # TACHYON_DECODE_ORDER=lpt's form
    launch_layer_bs1(K, t, i32, i64, f32)
    left_out = []
    # the engine's own guards: FP8 (e4m3) needs compute capability 8.9 (Engine refuses fp8 below it), the L2
    # prefetch's TMA instruction sm_90 (kernels.l2_prefetch issues it only there)
    if arch >= 89:
        launch_fp8(K, t, i32, i64, f32)
    else:
        left_out.append("FP8 weights and KV cache (e4m3 needs sm_89; the engine refuses fp8 below it)")
    if arch >= 90:
        K.l2_prefetch_triton(t(torch.bfloat16, 3584, 3584), 3584 * 3584 * 2)
    else:
        left_out.append("L2 prefetch (needs sm_90; the engine issues it only there)")
    K.embed_step_triton(t(torch.bfloat16, 152064, 3584), t(torch.int64, 8), t(torch.int64, 8), t(torch.int64, 512))
    for b in (8, 256):
        f32b, i32b, i64b = (lambda *s, x=x: t(x, *s) for x in (torch.float32, torch.int32, torch.int64))
        K.sample_triton(f32b(b, 152064), f32b(b), i32b(b), f32b(b), f32b(b), i64b(b), i64b(b))
        K.apply_penalties_triton(f32b(b, 152064), i64b(b), i64b(b), i32b(256, 152064), t(torch.bool, 256, 152064),
                                 f32b(b, 3))
    return left_out


def launch_layer_bs1(K, t, i32, i64, f32) -> None:
    """The batch-1 layer kernel at the Qwen3-0.6B shape (the 7B's row blocks do not fit it), one launch and five,
    and the model kernel (all 28 layers in one launch), on 132 programs."""
    L = importlib.import_module("tachyon.kernels.layer_bs1")
    M = importlib.import_module("tachyon.kernels.model_bs1")
    bf, (H, hq, hkv, d, inter) = torch.bfloat16, (1024, 16, 8, 128, 3072)
    lw = L.LayerBs1Weights(t(bf, H), t(bf, (hq + 2 * hkv) * d, H), None, t(bf, d), t(bf, d), t(bf, H, hq * d), t(bf, H),
                           t(bf, 2 * inter, H), t(bf, H, inter), 1e-6, 1e-6, hq, hkv, d, 0.1)
    barrier, counters = L.grid_barrier, L.sync_counters
    L.grid_barrier = lambda dev: i32(2)  # meta tensors: no allocation through the real helpers
    L.sync_counters = lambda dev, n: i32(max(n, 4096))
    table, M.pointer_table = M.pointer_table, lambda layers, caches: t(torch.int64, 10, len(layers))
    try:
        for phases in (False, True):
            L.decoder_layer_bs1_triton(t(bf, 1, H), t(bf, 1, H), lw, t(bf, 2, 1000, 16, hkv, d), f32(40960, d), i64(1),
                                       i32(1), i32(1, 2560), 40960, num_programs=132, phases=phases)
        M.decoder_model_bs1_triton(t(bf, 1, H), [lw] * 28, [t(bf, 2, 1000, 16, hkv, d)] * 28, f32(40960, d), i64(1),
                                   i32(1), i32(1, 2560), 40960, num_programs=132)
    finally:
        L.grid_barrier, L.sync_counters, M.pointer_table = barrier, counters, table


def launch_fp8(K, t, i32, i64, f32) -> None:
    """The FP8 paths: W8A8 projections (quantize=fp8) and an e4m3 KV cache (kv_cache_dtype=fp8)."""
    Q8 = importlib.import_module("tachyon.kernels.quant_fp8")
    bf, f8 = torch.bfloat16, torch.float8_e4m3fn
    x = t(bf, 4096, 3584)
    K.quantize_rows_triton(x)
    K.rmsnorm_quant_triton(x, t(bf, 3584), 1e-6, x)
    K.silu_and_mul_quant_triton(t(bf, 4096, 2 * 18944))
    xq = (t(f8, 1, 3584), f32(1, 1))
    for cfg in Q8.FP8_GEMV_CONFIGS:
        Q8.fp8_gemv_triton(xq, t(f8, 4608, 3584), f32(4608), t(bf, 4608), cfg, bf)
    for cfg in Q8.FP8_SMALL_CONFIGS + Q8.FP8_SMALL_FAST_CONFIGS:
        Q8.fp8_gemm_small_triton((t(f8, 8, 18944), f32(8, 1)), t(f8, 3584, 18944), f32(3584), None, cfg, bf)
    hq, hkv, d = 28, 4, 128
    q, cache = t(bf, 4096, hq, d), t(f8, 2, 1000, 16, hkv, d)
    for widen in ("cvt", "bits", "asm", "cvt:asm"):  # TACHYON_KV8_WIDEN's modes (attention_config.kv8_widen)
        os.environ["TACHYON_KV8_WIDEN"] = widen
        for b, ctx in ((1, 4096), (256, 4096)):
            K.attention_triton(q[:b], cache, i32(b + 1), i32(b), i32(b, 300), 1, ctx, 0.1)
        K.mixed_attention_triton(q[:288], cache, i32(161), i32(160), i32(160, 300), i32(3), i32(2), i32(2, 300), 288,
                                 4096, 0.1)
        K.decode_qkv_attention_triton(t(bf, 8, 36 * 128), f32(40960, 128), t(f8, 2, 100, 16, 4, 128), i64(8), None,
                                      None, 1e-6, 28, 4, 128, i32(9), i32(8), i32(8, 300), 4096, 0.1)
    os.environ.pop("TACHYON_KV8_WIDEN")
    K.attention_triton(q, cache, i32(2), i32(1), i32(1, 300), 4096, 4096, 0.1)
    K.store_kv_triton(q[:, :hkv], q[:, :hkv], cache, i64(4096))
    K.qkv_post_triton(t(bf, 4096, (16 + 2 * 8) * 128), i64(4096), f32(40960, 128), t(f8, 2, 100, 16, 8, 128),
                      i64(4096), t(bf, 128), t(bf, 128), 1e-6, 16, 8, 128)
    for hq_, hkv_, has_norm, b in ((28, 4, False, 1), (16, 8, True, 8), (28, 4, False, 256)):
        w = t(bf, 128) if has_norm else None
        K.decode_qkv_attention_triton(t(bf, b, (hq_ + 2 * hkv_) * 128), f32(40960, 128), t(f8, 2, 100, 16, hkv_, 128),
                                      i64(b), w, w, 1e-6, hq_, hkv_, 128, i32(b + 1), i32(b), i32(b, 300), 4096, 0.1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--no-pdl", action="store_true", help="compile without programmatic dependent launch")
    ap.add_argument("--registers", action="store_true",
                    help="also print each variant's registers, spills (ptxas -v) and shared memory (pointers and "
                         "ints divisible by 16 specialised as the JIT does)")
    args = ap.parse_args()
    pdl = {"PDL": False} if args.no_pdl or args.arch < 90 else {"PDL": True, "launch_pdl": True}
    for name in MODULES:
        mod = importlib.import_module(f"tachyon.kernels.{name}")
        if hasattr(mod, "pdl_args"):  # meta tensors: launch as on a GPU of this arch
            mod.pdl_args = lambda device, allowed=True, pdl=pdl: dict(pdl) if allowed else {"PDL": False}
        for attr in dir(mod):
            obj = getattr(mod, attr)
            if isinstance(obj, triton.runtime.jit.JITFunction) and attr.endswith("_kernel"):
                setattr(mod, attr, _Compile(obj, args.arch, args.registers))
    left_out = launch_all(args.arch)
    failed = [r for r in RESULTS if not r[1]]
    print(f"triton {triton.__version__}, sm_{args.arch}: {len(RESULTS)} kernel variants compiled, {len(failed)} failed")
    for what in left_out:
        print(f"  not compiled for sm_{args.arch}: {what}")
    for name, _, err in failed:
        print(f"  FAIL {name}: {err}")
    if args.registers:
        for line in sorted({f"  {name}: {info}" for name, ok, info in RESULTS if ok}):
            print(line)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
