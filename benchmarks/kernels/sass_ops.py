"""Instruction counts of the e4m3 decode kernels' SASS for sm_90, without a GPU (Triton's full pipeline to the cubin,
then the nvdisasm bundled with Triton): what each TACHYON_KV8_WIDEN mode costs in instructions, and which MMA the
FP8 probe's dots become at 16 and at 64 query rows (benchmarks/gpu/attn_fp8_mma_probe.py). Static counts over the
whole kernel (prologue and epilogue included), not executed instructions. Then the registers and stack (cuobjdump
-res-usage) of the dedicated decode kernel and the mixed launch per mode.

Usage (any machine with triton): TRITON_INTERPRET=0 python benchmarks/kernels/sass_ops.py
"""

from __future__ import annotations

import collections
import importlib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "0"  # before tachyon's kernels import triton
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import compile_check  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

SHOWN = ("HMMA", "HGMMA", "QGMMA", "F2FP", "PRMT", "LOP3", "SHF", "IMAD", "LDS", "LDGSTS", "LDG", "STS")
_OP = re.compile(r"/\*[0-9a-f]{4,6}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)")


def ops(kernel) -> collections.Counter:
    """SASS opcode counts of a compiled kernel."""
    nvdisasm = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
    with tempfile.TemporaryDirectory() as d:
        cubin = Path(d) / "k.cubin"
        cubin.write_bytes(kernel.asm["cubin"])
        sass = subprocess.run([str(nvdisasm), "-c", str(cubin)], capture_output=True, text=True, check=True).stdout
    return collections.Counter(m[1] for line in sass.splitlines() if (m := _OP.search(line)))


def line(name: str, counts: collections.Counter) -> str:
    return f"{name:34s} total {sum(counts.values()):5d}  " + "  ".join(f"{o} {counts[o]}" for o in SHOWN)


def usage(kernel) -> str:
    """cuobjdump -res-usage's registers and stack bytes of a compiled kernel."""
    cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.TemporaryDirectory() as d:
        cubin = Path(d) / "k.cubin"
        cubin.write_bytes(kernel.asm["cubin"])
        out = subprocess.run([str(cuobjdump), "-res-usage", str(cubin)], capture_output=True, text=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+)", out)
    return f"{m[1]} registers, {m[2]} B stack" if m else "usage not found"


def engine_decode(arch: int) -> None:
    """kernels.attention's decode launch over an e4m3 cache, 256 sequences unsplit, Qwen2.5-7B heads, per mode: SASS
    counts, then its and the mixed launch's (160 decodes + 2 chunks) registers and stack."""
    compiled = []
    real_compile = triton.compile
    triton.compile = lambda src, target=None, options=None: compiled.append(real_compile(src, target, options)) \
        or compiled[-1]
    A = importlib.import_module("tachyon.kernels.attention")
    A._decode_kernel = compile_check._Compile(A._decode_kernel, arch)
    A.pdl_args = lambda device, allowed=True: {"PDL": False}
    M = importlib.import_module("tachyon.kernels.attention_mixed")
    M._mixed_kernel = compile_check._Compile(M._mixed_kernel, arch)
    M.pdl_args = lambda device, allowed=True: {"PDL": False}
    K = importlib.import_module("tachyon.kernels")

    def t(dtype, *shape):
        return torch.empty(*shape, device="meta", dtype=dtype)

    def i32(*shape):
        return t(torch.int32, *shape)

    q, cache = t(torch.bfloat16, 288, 28, 128), t(torch.float8_e4m3fn, 2, 1000, 16, 4, 128)
    regs = []
    for mode in ("cvt", "bits", "asm", "cvt:asm", "asm:cvt"):
        os.environ["TACHYON_KV8_WIDEN"] = mode
        K.attention_triton(q[:256], cache, i32(257), i32(256), i32(256, 300), 1, 4096, 0.1, num_kv_splits=1)
        print(line(f"engine decode, {mode}", ops(compiled[-1])), flush=True)
        regs.append(f"engine decode, {mode}: {usage(compiled[-1])}")
        K.mixed_attention_triton(q, cache, i32(161), i32(160), i32(160, 300), i32(3), i32(2), i32(2, 300), 288, 4096,
                                 0.1)
        regs.append(f"mixed launch, {mode}: {usage(compiled[-1])}")
    print("\n".join(regs), flush=True)
    os.environ.pop("TACHYON_KV8_WIDEN")
    triton.compile = real_compile


def probe(arch: int) -> None:
    """The FP8-dot probe kernel's default variant at 16 and at 64 query rows."""
    P = importlib.import_module("benchmarks.gpu.attn_fp8_mma_probe")
    fn = P._fp8_mma_decode_kernel
    types = dict(q_ptr="*bf16", cache_ptr="*fp8e4nv", out_ptr="*bf16", seq_lens_ptr="*i32", bt_ptr="*i32",
                 scale="fp32")
    for rows in (16, 64):
        const = dict(G=7, D=128, PAGE=16, BLOCK_M=rows, BLOCK_N=64, SPLIT_Q=True, SPLIT_P=True, PV=0, EXACT=False)
        sig = {p.name: "constexpr" if p.name in const else types.get(p.name, "i32") for p in fn.params}
        k = triton.compile(ASTSource(fn, sig, const), target=GPUTarget("cuda", arch, 32), options={"num_warps": 4})
        print(line(f"fp8 probe, {rows} query rows", ops(k)), flush=True)


if __name__ == "__main__":
    print(f"triton {triton.__version__}, sm_90")
    engine_decode(90)
    probe(90)
